//! A small pool of large byte buffers, shared by a connection's reader
//! (received frames) and its request path (signed or encrypted frames).
//!
//! A 1 MiB READ response or WRITE request in a fresh `Vec` is served by
//! glibc with mmap and given back with munmap, so every message pays for
//! page faults, page zeroing and memcg charging of its buffer. Buffers
//! handed out as [`Bytes`] by [`BufPool::freeze`] come back here when the
//! last `Bytes` referring to them is dropped, and are reused warm.

use bytes::Bytes;
use std::ops::Range;
use std::sync::{Arc, Mutex, Weak};

/// Buffers smaller than this are ordinary allocations (malloc serves them
/// from its heap without faulting; pooling would only cost a lock).
pub(crate) const POOL_MIN: usize = 64 * 1024;
/// Pooled capacities are rounded up to this, so that a received READ
/// frame's buffer also fits a WRITE request of the same I/O size (whose
/// headers are a little larger) and the other way round.
const GRANULE: usize = 64 * 1024;
/// At most this many idle buffers are kept...
const MAX_IDLE: usize = 32;
/// ...holding at most this many bytes in all.
const MAX_IDLE_BYTES: usize = 128 * 1024 * 1024;

#[derive(Default)]
pub(crate) struct BufPool {
    idle: Mutex<Idle>,
}

#[derive(Default)]
struct Idle {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

impl BufPool {
    pub(crate) fn new() -> Arc<BufPool> {
        Arc::new(BufPool::default())
    }

    /// An empty buffer with room for at least `cap` bytes.
    pub(crate) fn take(&self, cap: usize) -> Vec<u8> {
        let mut b = self.take_idle(cap);
        b.clear();
        b
    }

    /// A buffer of exactly `len` bytes whose contents are left over from
    /// its last use (zeros where it never held any): for callers that
    /// overwrite every byte, without paying to clear them first.
    pub(crate) fn take_sized(&self, len: usize) -> Vec<u8> {
        let mut b = self.take_idle(len);
        b.resize(len, 0);
        b
    }

    /// An idle buffer with room for `cap` bytes, its old length kept (the
    /// bytes it has written are initialized), or a new empty one.
    fn take_idle(&self, cap: usize) -> Vec<u8> {
        if cap < POOL_MIN {
            return Vec::with_capacity(cap);
        }
        {
            let mut idle = self.lock();
            // Most recently returned first: its pages are the warmest.
            if let Some(i) = idle.bufs.iter().rposition(|b| b.capacity() >= cap) {
                let b = idle.bufs.swap_remove(i);
                idle.bytes -= b.capacity();
                return b;
            }
        }
        Vec::with_capacity(cap.next_multiple_of(GRANULE))
    }

    /// Give a buffer back for reuse (dropped if it is small or the pool is
    /// full; the oldest idle buffer makes room for a larger newcomer). Its
    /// length is kept so that [`BufPool::take_sized`] can reuse its bytes.
    fn put(&self, b: Vec<u8>) {
        let cap = b.capacity();
        if !(POOL_MIN..=MAX_IDLE_BYTES).contains(&cap) {
            return;
        }
        let mut idle = self.lock();
        while !idle.bufs.is_empty()
            && (idle.bufs.len() >= MAX_IDLE || idle.bytes + cap > MAX_IDLE_BYTES)
        {
            let old = idle.bufs.remove(0);
            idle.bytes -= old.capacity();
        }
        idle.bytes += cap;
        idle.bufs.push(b);
    }

    /// `buf[range]` as `Bytes` without copying; `buf` returns to the pool
    /// when the last `Bytes` sharing it is dropped.
    pub(crate) fn freeze(self: &Arc<Self>, buf: Vec<u8>, range: Range<usize>) -> Bytes {
        if buf.capacity() < POOL_MIN {
            return Bytes::from(buf).slice(range);
        }
        Bytes::from_owner(Pooled {
            buf,
            pool: Arc::downgrade(self),
        })
        .slice(range)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[cfg(test)]
    fn idle(&self) -> usize {
        self.lock().bufs.len()
    }
}

struct Pooled {
    buf: Vec<u8>,
    pool: Weak<BufPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.put(std::mem::take(&mut self.buf));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_when_the_last_bytes_drops() {
        let pool = BufPool::new();
        let mut b = pool.take(1 << 20);
        let cap = b.capacity();
        assert!(cap >= 1 << 20);
        b.extend_from_slice(&[7u8; 1000]);
        let ptr = b.as_ptr();
        let whole = pool.freeze(b, 0..1000);
        let part = whole.slice(10..20);
        drop(whole);
        assert_eq!(pool.idle(), 0);
        assert_eq!(&part[..], &[7u8; 10]);
        drop(part);
        assert_eq!(pool.idle(), 1);
        // Reused, emptied, for any size that fits.
        let again = pool.take(POOL_MIN);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.is_empty());
        assert_eq!(again.capacity(), cap);
    }

    #[test]
    fn a_sized_buffer_reuses_old_bytes_and_zeroes_only_new_ones() {
        let pool = BufPool::new();
        let mut b = pool.take_sized(2 * POOL_MIN);
        assert_eq!(b, vec![0u8; 2 * POOL_MIN]);
        b.fill(9);
        let ptr = b.as_ptr();
        drop(pool.freeze(b, 0..1));
        // Shorter: the same buffer, cut to length, its bytes as left.
        let b = pool.take_sized(POOL_MIN);
        assert_eq!(b.as_ptr(), ptr);
        assert_eq!(b.len(), POOL_MIN);
        assert!(b.iter().all(|&x| x == 9));
        drop(pool.freeze(b, 0..1));
        // Longer than its last use: those bytes, then zeros.
        let b = pool.take_sized(POOL_MIN + 10);
        assert_eq!(b.as_ptr(), ptr);
        assert!(b[..POOL_MIN].iter().all(|&x| x == 9));
        assert_eq!(&b[POOL_MIN..], &[0u8; 10]);
        drop(pool.freeze(b, 0..1));
        // take still hands out an empty buffer.
        assert!(pool.take(POOL_MIN).is_empty());
    }

    #[test]
    fn small_buffers_are_not_pooled_and_the_pool_is_bounded() {
        let pool = BufPool::new();
        let small = pool.freeze(pool.take(100), 0..0);
        drop(small);
        assert_eq!(pool.idle(), 0);
        let one = |pool: &Arc<BufPool>| {
            let mut b = pool.take(POOL_MIN);
            b.push(1);
            pool.freeze(b, 0..1)
        };
        let held: Vec<Bytes> = (0..MAX_IDLE + 5).map(|_| one(&pool)).collect();
        drop(held);
        assert_eq!(pool.idle(), MAX_IDLE);
        // Buffers outliving their pool are simply freed.
        let orphan = one(&pool);
        drop(pool);
        drop(orphan);
    }
}
