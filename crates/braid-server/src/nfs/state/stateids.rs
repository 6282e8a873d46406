//! Stateids (RFC 8881 8.2): the open, lock and delegation state of every
//! client, in one table, and the checks every operation that takes a
//! stateid makes.
//!
//! A stateid's `other` (12 bytes) is this server run's boot epoch (4 bytes)
//! and a counter (8 bytes): unique for the run, never reused, and a stateid
//! of an earlier run is recognisably not ours. `seqid` counts the changes to
//! the state (OPEN upgrades, OPEN_DOWNGRADE, LOCK, LOCKU), from 1.
//!
//! The table is one mutex over three maps: states by `other`, files by
//! (dev, ino) with the opens, byte-range locks and delegations on each, and
//! owners. Every change to a file's state (share reservations, locks,
//! delegations) is decided under it, so two conflicting OPENs cannot both
//! win. Nothing slow runs under it: files are opened and callbacks are sent
//! outside.
//!
//! Lock order: this table, then a client's `state` mutex.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use braid_fs::posix::Object;
use braid_nfs_proto::nfs4::*;

use super::super::compound::Compound;
use super::super::exports::Export;
use super::clients::Client;

/// The `other` field of a stateid.
pub type Other = [u8; NFS4_OTHER_SIZE as usize];
/// (dev, ino): the key braid-fs's open table uses too.
pub type FileKey = (u64, u64);

/// What one client holds, so `Client::has_state` (RFC 8881 18.35.5 case 3,
/// 18.50.3) and the reaper need not search the table.
#[derive(Default)]
pub struct ClientState {
    pub opens: HashSet<Other>,
    pub locks: HashSet<Other>,
    pub delegs: HashSet<Other>,
}

impl ClientState {
    pub fn is_empty(&self) -> bool {
        self.opens.is_empty() && self.locks.is_empty() && self.delegs.is_empty()
    }
}

/// One open, lock or delegation stateid.
pub struct State {
    pub seqid: u32,
    pub clientid: clientid4,
    pub key: FileKey,
    /// The open owner or lock owner (opaque, of `clientid`).
    pub owner: Vec<u8>,
    pub export: Arc<Export>,
    pub obj: Object,
    pub kind: Kind,
}

pub enum Kind {
    Open(OpenState),
    Lock(LockState),
    Deleg(DelegState),
}

pub struct OpenState {
    /// OPEN4_SHARE_ACCESS_* and OPEN4_SHARE_DENY_* bits now held.
    pub access: u32,
    pub deny: u32,
    /// Every access/deny combination the owner opened with (bit n: the
    /// value n), for OPEN_DOWNGRADE's check (RFC 8881 18.18.3).
    pub access_seen: u8,
    pub deny_seen: u8,
    /// The file, open for I/O since OPEN and kept until CLOSE (never
    /// reopened per request).
    pub io: IoFile,
    /// Lock stateids derived from this open (open_to_lock_owner4).
    pub locks: Vec<Other>,
    /// The same reservation in braid-fs's share-mode table, where SMB
    /// opens meet it (issue 42); None without a file service (tests).
    pub reservation: Option<braid_fs::share_reservation::ShareReservation>,
}

pub struct LockState {
    /// The open stateid it came from.
    pub open: Other,
    /// The lock owner's own file description, holding its locks as OFD
    /// locks (`kernel_locks.rs`); None where the file could not be opened
    /// again (the NFS table alone then).
    pub fd: Option<File>,
}

pub struct DelegState {
    pub write: bool,
    /// When CB_RECALL was sent (a delegation not returned a lease period
    /// later is revoked).
    pub recalled: Option<Instant>,
    /// A delegation revoked: its stateid answers NFS4ERR_DELEG_REVOKED
    /// until freed (RFC 8881 8.2.2, 18.38).
    pub revoked: bool,
    pub io: IoFile,
    /// Its client, to raise SEQ4_STATUS_RECALLABLE_STATE_REVOKED on when
    /// revoked (RFC 8881 18.46.3).
    pub client: std::sync::Weak<Client>,
    /// For a write delegation: what CB_GETATTR has learnt (RFC 8881
    /// 10.4.3).
    pub cb: CbGetattr,
}

/// RFC 8881 10.4.3: a write delegation's file as its holder reports it in
/// CB_GETATTR answers, compared with the change attribute the file had
/// when it was delegated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CbGetattr {
    /// The file's change attribute at the grant (the holder's, until it
    /// modifies the file in its cache).
    pub change_at_grant: u64,
    /// The holder's change attribute in its last answer.
    pub last_seen: Option<u64>,
    /// How many different modified states the holder has reported: added
    /// to the file's change attribute, so that other clients see a new
    /// value each time and the same value while nothing more changes.
    pub bumps: u64,
}

impl CbGetattr {
    /// Take in the holder's answer (`change`); whether it modified the
    /// file since the grant, and the bump to add to the file's change
    /// attribute.
    pub fn answered(&mut self, change: u64) -> Option<u64> {
        if change == self.change_at_grant {
            return None;
        }
        if self.last_seen != Some(change) {
            self.last_seen = Some(change);
            self.bumps += 1;
        }
        Some(self.bumps)
    }
}

/// An fd opened for I/O and what it allows.
#[derive(Clone)]
pub struct IoFile {
    pub file: Arc<braid_fs::posix::OpenFile>,
    pub read: bool,
    pub write: bool,
    /// The `O_DIRECT` descriptor large aligned WRITEs go through, opened
    /// on the first one (braid-fs `direct.rs`).
    pub direct: Arc<braid_fs::DirectWriter>,
}

impl IoFile {
    pub fn new(file: Arc<braid_fs::posix::OpenFile>, read: bool, write: bool) -> IoFile {
        IoFile {
            file,
            read,
            write,
            direct: Arc::default(),
        }
    }
}

/// One byte-range lock (RFC 8881 9.5): [start, end] inclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockRange {
    /// The lock stateid (one per lock owner and file).
    pub stateid: Other,
    pub clientid: clientid4,
    pub owner: Vec<u8>,
    pub start: u64,
    pub end: u64,
    pub write: bool,
}

/// Everything on one file.
#[derive(Default)]
pub struct FileState {
    pub opens: Vec<Other>,
    pub locks: Vec<LockRange>,
    pub delegs: Vec<Other>,
    /// While the file is delegated: its mark for changes made on the host,
    /// which recall the delegations (`crate::host_watch`). Dropped with
    /// the last delegation.
    pub host_mark: Option<crate::host_watch::FileInterest>,
}

impl FileState {
    /// After a delegation left `delegs`: with none left, the file is no
    /// longer watched for host changes on NFS's account.
    pub fn delegation_gone(&mut self) {
        if self.delegs.is_empty() {
            self.host_mark = None;
        }
    }
    fn is_empty(&self) -> bool {
        self.opens.is_empty() && self.locks.is_empty() && self.delegs.is_empty()
    }
}

#[derive(Default)]
pub struct Inner {
    pub states: HashMap<Other, State>,
    pub files: HashMap<FileKey, FileState>,
    /// (client, open owner, file) → its open stateid: one per open owner
    /// and file; a second OPEN upgrades it (RFC 8881 9.11).
    pub open_owners: HashMap<(clientid4, Vec<u8>, FileKey), Other>,
    /// (client, lock owner, file) → its lock stateid.
    pub lock_owners: HashMap<(clientid4, Vec<u8>, FileKey), Other>,
    /// Where each change is recorded for reclaims after a restart.
    pub held: Arc<super::held::HeldLog>,
}

impl Inner {
    /// Record what `other` now stands for (`held.rs`).
    pub fn note_held(&self, client: &Client, other: &Other) {
        self.held.note(self, client, other);
    }
}

pub struct StateTable {
    epoch: u32,
    next: AtomicU64,
    /// Read-locked by READ and WRITE with a real stateid (the hot path),
    /// write-locked by every change.
    inner: RwLock<Inner>,
    /// One callback at a time per session: the backchannel has one slot
    /// (callback.rs), whose sequence id each CB_SEQUENCE moves on.
    pub cb_slots: Mutex<HashMap<sessionid4, Arc<tokio::sync::Mutex<()>>>>,
}

/// RFC 8881 8.2.3: the special stateids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    /// All zeros: "anonymous", I/O without an open.
    Anonymous,
    /// All ones: READ that bypasses share deny (and, for us, the same as
    /// anonymous for WRITE and SETATTR).
    Bypass,
}

/// A stateid after the special values are resolved.
pub enum Stateid {
    Special(Special),
    Real(stateid4),
}

const ZERO: Other = [0; 12];
const ONES: Other = [0xff; 12];

/// RFC 8881 8.2.3 and 16.2.3.1.2: the special stateids; seqid 1 with an
/// all-zero other is the current stateid (the last one an operation of
/// this compound produced), and without one it is NFS4ERR_BAD_STATEID.
pub fn resolve(c: &Compound, sid: &stateid4) -> Result<Stateid, nfsstat4> {
    if sid.other == ZERO {
        return match sid.seqid {
            0 => Ok(Stateid::Special(Special::Anonymous)),
            1 => match &c.current_stateid {
                Some(cur) if cur.other != ZERO && cur.other != ONES => {
                    Ok(Stateid::Real(cur.clone()))
                }
                Some(cur) if cur.other == ZERO && cur.seqid == 0 => {
                    Ok(Stateid::Special(Special::Anonymous))
                }
                _ => Err(NFS4ERR_BAD_STATEID),
            },
            _ => Err(NFS4ERR_BAD_STATEID),
        };
    }
    if sid.other == ONES {
        return if sid.seqid == u32::MAX {
            Ok(Stateid::Special(Special::Bypass))
        } else {
            Err(NFS4ERR_BAD_STATEID)
        };
    }
    Ok(Stateid::Real(sid.clone()))
}

/// Resolve, and refuse the special stateids (CLOSE, LOCKU, OPEN_DOWNGRADE,
/// DELEGRETURN take only real ones).
pub fn resolve_real(c: &Compound, sid: &stateid4) -> Result<stateid4, nfsstat4> {
    match resolve(c, sid)? {
        Stateid::Real(s) => Ok(s),
        Stateid::Special(_) => Err(NFS4ERR_BAD_STATEID),
    }
}

/// RFC 8881 8.2.2: seqid 0 is "the current one"; an older one is
/// NFS4ERR_OLD_STATEID, a newer one (never issued) NFS4ERR_BAD_STATEID.
pub fn check_seqid(have: u32, sent: u32) -> Result<(), nfsstat4> {
    if sent == 0 || sent == have {
        Ok(())
    } else if sent < have {
        Err(NFS4ERR_OLD_STATEID)
    } else {
        Err(NFS4ERR_BAD_STATEID)
    }
}

/// RFC 8881 8.3 (courtesy clients, reaper.rs): given the client whose
/// state stands in a request's way, that client if its lease has run out,
/// now expired (its sessions and record gone), whose state the caller
/// releases before looking again. None: the client is alive.
pub type Expire<'a> = &'a dyn Fn(clientid4) -> Option<Arc<Client>>;

/// The courtesy check of a compound's server.
pub fn courtesy(c: &Compound) -> impl Fn(clientid4) -> Option<Arc<Client>> + '_ {
    move |holder| {
        let client = c.state.clients.get(holder)?;
        super::reaper::expire_courtesy(&c.state, &client).then_some(client)
    }
}

/// The client of the compound's session.
pub fn session_client(c: &Compound) -> Result<Arc<Client>, nfsstat4> {
    c.session
        .as_ref()
        .map(|s| s.client.clone())
        .ok_or(NFS4ERR_OP_NOT_IN_SESSION)
}

impl StateTable {
    pub fn new(epoch: u32) -> StateTable {
        Self::with_held(epoch, Arc::default())
    }

    /// A table whose changes are recorded in `held`.
    pub fn with_held(epoch: u32, held: Arc<super::held::HeldLog>) -> StateTable {
        StateTable {
            epoch,
            next: AtomicU64::new(1),
            inner: RwLock::new(Inner {
                held,
                ..Inner::default()
            }),
            cb_slots: Mutex::new(HashMap::new()),
        }
    }

    pub fn lock(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// An fd some open of the file holds (COMMIT syncs through it).
    pub fn any_fd(&self, key: FileKey) -> Option<Arc<braid_fs::posix::OpenFile>> {
        let inner = self.read();
        inner
            .files
            .get(&key)?
            .opens
            .iter()
            .find_map(|o| match &inner.states.get(o)?.kind {
                Kind::Open(o) => Some(o.io.file.clone()),
                _ => None,
            })
    }

    pub fn new_other(&self) -> Other {
        let mut o = [0u8; 12];
        o[..4].copy_from_slice(&self.epoch.to_be_bytes());
        o[4..].copy_from_slice(&self.next.fetch_add(1, Ordering::Relaxed).to_be_bytes());
        o
    }
}

impl Inner {
    /// RFC 8881 8.2.2's checks of a real stateid, in its order: known,
    /// of the current filehandle's file, of this client, not revoked,
    /// then the seqid.
    pub fn check(
        &self,
        client: clientid4,
        key: Option<FileKey>,
        sid: &stateid4,
    ) -> Result<&State, nfsstat4> {
        let st = self.states.get(&sid.other).ok_or(NFS4ERR_BAD_STATEID)?;
        if let Some(key) = key {
            if st.key != key {
                return Err(NFS4ERR_BAD_STATEID);
            }
        }
        if st.clientid != client {
            return Err(NFS4ERR_BAD_STATEID);
        }
        if let Kind::Deleg(d) = &st.kind {
            if d.revoked {
                return Err(NFS4ERR_DELEG_REVOKED);
            }
        }
        check_seqid(st.seqid, sid.seqid)?;
        Ok(st)
    }

    pub fn file(&mut self, key: FileKey) -> &mut FileState {
        self.files.entry(key).or_default()
    }

    /// Drop a file's entry once nothing is left on it.
    pub fn tidy(&mut self, key: FileKey) {
        if self.files.get(&key).is_some_and(|f| f.is_empty()) {
            self.files.remove(&key);
        }
    }

    /// Remove one stateid and what hangs off it (an open's lock stateids
    /// and their locks), updating the client's record. Returns the states
    /// removed (the caller drops them outside the lock: dropping the last
    /// fd of a file may be slow).
    pub fn remove(&mut self, client: &Client, other: &Other) -> Vec<State> {
        let mut gone = Vec::new();
        let Some(st) = self.states.remove(other) else {
            return gone;
        };
        self.held.released(other);
        let key = st.key;
        let mut cs = client.state.lock().unwrap_or_else(|e| e.into_inner());
        match &st.kind {
            Kind::Open(o) => {
                cs.opens.remove(other);
                self.open_owners
                    .remove(&(st.clientid, st.owner.clone(), key));
                if let Some(f) = self.files.get_mut(&key) {
                    f.opens.retain(|x| x != other);
                }
                for l in &o.locks {
                    self.held.released(l);
                    if let Some(ls) = self.states.remove(l) {
                        cs.locks.remove(l);
                        self.lock_owners
                            .remove(&(ls.clientid, ls.owner.clone(), key));
                        gone.push(ls);
                    }
                    if let Some(f) = self.files.get_mut(&key) {
                        f.locks.retain(|r| &r.stateid != l);
                    }
                }
            }
            Kind::Lock(l) => {
                cs.locks.remove(other);
                self.lock_owners
                    .remove(&(st.clientid, st.owner.clone(), key));
                if let Some(f) = self.files.get_mut(&key) {
                    f.locks.retain(|r| &r.stateid != other);
                }
                if let Some(State {
                    kind: Kind::Open(o),
                    ..
                }) = self.states.get_mut(&l.open)
                {
                    o.locks.retain(|x| x != other);
                }
            }
            Kind::Deleg(_) => {
                cs.delegs.remove(other);
                if let Some(f) = self.files.get_mut(&key) {
                    f.delegs.retain(|x| x != other);
                    f.delegation_gone();
                }
            }
        }
        drop(cs);
        self.tidy(key);
        gone.push(st);
        gone
    }

    /// Release the state of `holder` if it is an expired (courtesy) client;
    /// true if it was.
    pub fn evict(&mut self, holder: clientid4, expire: Expire<'_>) -> bool {
        match expire(holder) {
            Some(client) => {
                drop(self.remove_client(&client));
                true
            }
            None => false,
        }
    }

    /// Everything a client holds (its lease ended, or it was destroyed).
    pub fn remove_client(&mut self, client: &Client) -> Vec<State> {
        let all: Vec<Other> = {
            let cs = client.state.lock().unwrap_or_else(|e| e.into_inner());
            cs.locks
                .iter()
                .chain(cs.opens.iter())
                .chain(cs.delegs.iter())
                .copied()
                .collect()
        };
        let mut gone = Vec::new();
        for o in all {
            gone.extend(self.remove(client, &o));
        }
        gone
    }
}

/// What READ, WRITE and SETATTR(size) may use, after the stateid checks.
pub enum IoTarget {
    /// The fd of the open (or the open behind a lock or delegation
    /// stateid), which allows the access asked for.
    File(IoFile),
    /// A special stateid, or a state whose fd does not allow the access
    /// asked for though the state does (a write-only open read from): the
    /// caller opens the file as the client for this one request.
    OpenAsCaller,
}

/// RFC 8881 8.2.2, 9.1.2, 18.22.3, 18.32.3: the checks READ, WRITE and
/// SETATTR(size) make of their stateid on the current file `obj`.
/// A special stateid is allowed unless a share reservation of an open
/// denies the access (NFS4ERR_LOCKED; READ with the bypass stateid is not
/// held off by deny-read) or another client holds a delegation the access
/// conflicts with (recalled; NFS4ERR_DELAY). A real one must be of this
/// client and file, current, and of an open whose access includes writing
/// to write (NFS4ERR_OPENMODE). Reading on a write-only open is allowed,
/// as knfsd allows it: clients read to fill partial pages.
pub fn check_io_stateid(
    c: &Compound,
    obj: &Object,
    stateid: &stateid4,
    write: bool,
) -> Result<IoTarget, nfsstat4> {
    let client = session_client(c)?;
    let key = obj.key();
    let sid = resolve(c, stateid)?;
    let table = &c.state.stateids;
    if let Stateid::Real(sid) = &sid {
        let inner = table.read();
        let st = inner.check(client.clientid, Some(key), sid)?;
        let io = match &st.kind {
            Kind::Open(o) => {
                if write && o.access & OPEN4_SHARE_ACCESS_WRITE == 0 {
                    return Err(NFS4ERR_OPENMODE);
                }
                &o.io
            }
            Kind::Lock(l) => match inner.states.get(&l.open) {
                Some(State {
                    kind: Kind::Open(o),
                    ..
                }) => {
                    if write && o.access & OPEN4_SHARE_ACCESS_WRITE == 0 {
                        return Err(NFS4ERR_OPENMODE);
                    }
                    &o.io
                }
                _ => return Err(NFS4ERR_BAD_STATEID),
            },
            Kind::Deleg(d) => {
                if write && !d.write {
                    return Err(NFS4ERR_OPENMODE);
                }
                &d.io
            }
        };
        let fits = if write { io.write } else { io.read };
        return Ok(if fits {
            IoTarget::File(io.clone())
        } else {
            IoTarget::OpenAsCaller
        });
    }
    let recall;
    {
        let mut inner = table.lock();
        match sid {
            Stateid::Special(special) => {
                if let Some(f) = inner.files.get(&key) {
                    let want = if write {
                        OPEN4_SHARE_ACCESS_WRITE
                    } else {
                        OPEN4_SHARE_ACCESS_READ
                    };
                    let bypass = special == Special::Bypass && !write;
                    for o in &f.opens {
                        if let Some(State {
                            kind: Kind::Open(os),
                            ..
                        }) = inner.states.get(o)
                        {
                            if os.deny & want != 0 && !bypass {
                                return Err(NFS4ERR_LOCKED);
                            }
                        }
                    }
                }
                let lease = c.state.lease_time;
                match super::delegations::conflicting(
                    &mut inner,
                    key,
                    client.clientid,
                    write,
                    lease,
                ) {
                    None => return Ok(IoTarget::OpenAsCaller),
                    Some(r) => recall = r,
                }
            }
            Stateid::Real(_) => return Err(NFS4ERR_SERVERFAULT),
        }
    }
    super::delegations::recall(c, recall);
    Err(NFS4ERR_DELAY)
}

/// The fd READ, WRITE and the NFSv4.2 data operations (ALLOCATE, SEEK,
/// COPY...) work on: the open's, or the file opened as the client for
/// this one request when `check_io_stateid` says so.
pub fn io_file(
    c: &Compound,
    export: &Export,
    obj: &Object,
    stateid: &stateid4,
    write: bool,
) -> Result<Arc<braid_fs::posix::OpenFile>, nfsstat4> {
    match check_io_stateid(c, obj, stateid, write)? {
        IoTarget::File(f) => Ok(f.file),
        IoTarget::OpenAsCaller => {
            let cred = c.credentials(export);
            export
                .share
                .open_file(&cred, obj, !write, write, false)
                .map_err(|e| super::super::errors::nfs_status(&e))
        }
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod state_tests;
