//! Wire file handles and the cache that resolves them.
//!
//! RFC 8881 4.2: a handle is opaque to the client, at most NFS4_FHSIZE
//! (128) bytes. Ours are persistent in the sense of 4.2.2 (the same object
//! keeps the same handle across server restarts, and a removed object's
//! handle is stale, never another object's), and 4.2.1 leaves what a
//! handle means to the server. Ours:
//!
//! ```text
//! version (1) | export_id (u32 BE) | kernel handle type (i32 BE)
//!   | kernel handle length (1) | kernel handle bytes | HMAC-SHA256[..12]
//! ```
//!
//! The kernel handle comes from `name_to_handle_at` and is persistent on
//! every file system that can be exported by knfsd. The MAC (under the
//! server's persistent key, over everything before it) makes handles
//! unforgeable: `open_by_handle_at` would otherwise open any inode on the
//! file system, inside the share or not. It also binds the handle to the
//! export: the export id is inside the MACed bytes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::object::ObjectInner;

pub(crate) const VERSION: u8 = 1;
pub(crate) const MAC_LEN: usize = 12;
const HEADER: usize = 1 + 4 + 4 + 1;
/// RFC 8881 4.2 NFS4_FHSIZE.
pub const MAX_HANDLE: usize = 128;
const MAX_KERNEL: usize = MAX_HANDLE - HEADER - MAC_LEN;

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8; 32]) -> HmacSha256 {
    HmacSha256::new_from_slice(key).expect("HMAC takes any key length")
}

/// Builds the wire handle; None if the kernel handle is too long to fit.
pub(crate) fn encode(key: &[u8; 32], export_id: u32, ty: i32, kernel: &[u8]) -> Option<Vec<u8>> {
    if kernel.len() > MAX_KERNEL {
        return None;
    }
    let mut h = Vec::with_capacity(HEADER + kernel.len() + MAC_LEN);
    h.push(VERSION);
    h.extend_from_slice(&export_id.to_be_bytes());
    h.extend_from_slice(&ty.to_be_bytes());
    h.push(kernel.len() as u8);
    h.extend_from_slice(kernel);
    let mut m = mac(key);
    m.update(&h);
    h.extend_from_slice(&m.finalize().into_bytes()[..MAC_LEN]);
    Some(h)
}

/// The parts of a structurally valid handle, MAC not yet checked.
pub(crate) struct Parsed<'a> {
    pub export_id: u32,
    pub ty: i32,
    pub kernel: &'a [u8],
    body: &'a [u8],
    tag: &'a [u8],
}

pub(crate) fn parse(h: &[u8]) -> Option<Parsed<'_>> {
    if h.len() < HEADER + MAC_LEN || h.len() > MAX_HANDLE || h[0] != VERSION {
        return None;
    }
    let klen = h[9] as usize;
    if h.len() != HEADER + klen + MAC_LEN {
        return None;
    }
    let (body, tag) = h.split_at(HEADER + klen);
    Some(Parsed {
        export_id: u32::from_be_bytes(h[1..5].try_into().ok()?),
        ty: i32::from_be_bytes(h[5..9].try_into().ok()?),
        kernel: &h[HEADER..HEADER + klen],
        body,
        tag,
    })
}

impl Parsed<'_> {
    /// Constant-time MAC check.
    pub(crate) fn mac_ok(&self, key: &[u8; 32]) -> bool {
        let mut m = mac(key);
        m.update(self.body);
        m.verify_truncated_left(self.tag).is_ok()
    }
}

/// Handles we have issued and the objects behind them. It saves the
/// `open_by_handle_at` + `statx` of a resolve, and it is the only way an
/// unprivileged server (no CAP_DAC_READ_SEARCH) can resolve a handle at all:
/// there, a handle survives only while its object is cached.
///
/// Entries hold the object (and so its `O_PATH` fd) strongly; the bound is
/// what keeps the fd count in check. Sharded so concurrent resolves do not
/// queue on one lock; each shard evicts in insertion order.
pub(crate) struct HandleCache {
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
    /// Objects whose last name went while something besides the cache
    /// held them (an NFS open keeps its `Object`): still resolvable, as an
    /// open POSIX file stays usable after unlink, but only weakly held
    /// here, so the inode is freed when the last holder lets go.
    orphans: Mutex<HashMap<Vec<u8>, Weak<ObjectInner>>>,
}

#[derive(Default)]
struct Shard {
    map: HashMap<Vec<u8>, Arc<ObjectInner>>,
    order: VecDeque<Vec<u8>>,
}

const SHARDS: usize = 16;

impl HandleCache {
    pub(crate) fn new(capacity: usize) -> HandleCache {
        let per_shard = capacity.div_ceil(SHARDS).max(1);
        HandleCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard,
            orphans: Mutex::new(HashMap::new()),
        }
    }

    fn shard(&self, handle: &[u8]) -> &Mutex<Shard> {
        // The MAC tail is uniformly distributed: a free hash.
        let tail = &handle[handle.len().saturating_sub(4)..];
        let mut x = 0usize;
        for b in tail {
            x = (x << 8) | *b as usize;
        }
        &self.shards[x % SHARDS]
    }

    pub(crate) fn get(&self, handle: &[u8]) -> Option<Arc<ObjectInner>> {
        let s = self.shard(handle).lock().unwrap_or_else(|e| e.into_inner());
        s.map.get(handle).cloned()
    }

    /// Inserts `obj` unless its handle is cached already; returns the cached
    /// one then, so one object keeps one fd however often it is looked up.
    pub(crate) fn insert(&self, obj: Arc<ObjectInner>) -> Arc<ObjectInner> {
        let mut s = self
            .shard(&obj.handle)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(old) = s.map.get(&obj.handle) {
            return old.clone();
        }
        while s.map.len() >= self.per_shard {
            let Some(k) = s.order.pop_front() else { break };
            s.map.remove(&k);
        }
        s.order.push_back(obj.handle.clone());
        s.map.insert(obj.handle.clone(), obj.clone());
        obj
    }

    pub(crate) fn remove(&self, handle: &[u8]) {
        let mut s = self.shard(handle).lock().unwrap_or_else(|e| e.into_inner());
        if s.map.remove(handle).is_some() {
            s.order.retain(|k| k != handle);
        }
    }

    /// The object of `handle` has no name left: drop the cache's hold on
    /// it, and keep it findable (weakly) if anything else still holds it.
    pub(crate) fn orphan(&self, handle: &[u8]) {
        let removed = {
            let mut s = self.shard(handle).lock().unwrap_or_else(|e| e.into_inner());
            let removed = s.map.remove(handle);
            if removed.is_some() {
                s.order.retain(|k| k != handle);
            }
            removed
        };
        let Some(inner) = removed else { return };
        if Arc::strong_count(&inner) > 1 {
            let mut o = self.orphans.lock().unwrap_or_else(|e| e.into_inner());
            // Bounded by the live holders: forget the ones let go.
            if o.len() >= 64 {
                o.retain(|_, w| w.strong_count() > 0);
            }
            o.insert(handle.to_vec(), Arc::downgrade(&inner));
        }
    }

    /// A nameless object some holder keeps alive (see `orphan`).
    pub(crate) fn get_orphan(&self, handle: &[u8]) -> Option<Arc<ObjectInner>> {
        let mut o = self.orphans.lock().unwrap_or_else(|e| e.into_inner());
        let found = o.get(handle)?.upgrade();
        if found.is_none() {
            o.remove(handle);
        }
        found
    }

    /// Drops the older half of every shard: called when we run out of fds.
    pub(crate) fn shrink(&self) {
        for sh in self.shards.iter() {
            let mut s = sh.lock().unwrap_or_else(|e| e.into_inner());
            let drop_n = s.order.len() / 2;
            for _ in 0..drop_n {
                if let Some(k) = s.order.pop_front() {
                    s.map.remove(&k);
                }
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).map.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tamper() {
        let key = [7u8; 32];
        let h = encode(&key, 42, 1, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert!(h.len() <= MAX_HANDLE);
        let p = parse(&h).unwrap();
        assert_eq!(
            (p.export_id, p.ty, p.kernel),
            (42, 1, &[1u8, 2, 3, 4, 5, 6, 7, 8][..])
        );
        assert!(p.mac_ok(&key));
        assert!(!p.mac_ok(&[8u8; 32]));
        for i in 0..h.len() {
            let mut bad = h.clone();
            bad[i] ^= 0x01;
            assert!(
                parse(&bad).map(|p| !p.mac_ok(&key)).unwrap_or(true),
                "byte {i}"
            );
        }
        assert!(parse(&h[..h.len() - 1]).is_none());
        assert!(encode(&key, 1, 1, &[0; MAX_KERNEL + 1]).is_none());
    }
}
