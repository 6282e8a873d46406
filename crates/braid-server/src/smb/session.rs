//! Sessions, tree connects and opens (MS-SMB2 3.3.1.8–3.3.1.10).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use braid_fs::{DirEntry, OpenHandle};
use braid_smb_proto::auth::SpnegoServer;
use braid_smb_proto::crypto::{Cipher, NonceGenerator, PreauthHash, SigningAlgorithm};
use braid_smb_proto::NtStatus;

use crate::sharded::ShardedMap;
use crate::state::Share;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionPhase {
    InProgress,
    Valid,
    Expired,
}

#[derive(Debug, Clone, Default)]
pub struct Identity {
    pub user: String,
    pub domain: String,
    pub anonymous: bool,
    pub guest: bool,
    /// The client's name as it gave it (NTLM workstation), for the admin view.
    pub workstation: String,
    /// The Unix owner of the user's new files (users file), if mapped.
    pub owner: Option<braid_fs::FileOwner>,
}

#[derive(Clone)]
pub struct SigningState {
    pub algorithm: SigningAlgorithm,
    pub key: Vec<u8>,
}

/// MS-SMB2 3.3.1.8 Session.EncryptionKey/DecryptionKey, with the nonce
/// source shared by every channel of the session.
pub struct EncryptionState {
    pub cipher: Cipher,
    /// Decrypts requests (the client's encryption key).
    pub decrypt_key: Vec<u8>,
    /// Encrypts responses.
    pub encrypt_key: Vec<u8>,
    pub nonces: NonceGenerator,
}

/// MS-SMB2 3.3.1.14 Channel: one connection bound to the session, with its
/// own signing key (3.x binding derives one per channel).
#[derive(Clone)]
pub struct Channel {
    pub connection_id: u64,
    pub conn: std::sync::Weak<crate::smb::conn::Connection>,
    pub signing: Option<SigningState>,
    pub bound_at: std::time::SystemTime,
}

/// An authentication exchange in progress (first setup or re-authentication).
pub struct AuthExchange {
    pub spnego: SpnegoServer,
    pub preauth: PreauthHash,
}

pub struct Session {
    pub id: u64,
    pub dialect: u16,
    pub phase: Mutex<SessionPhase>,
    pub auth: Mutex<Option<AuthExchange>>,
    pub identity: Mutex<Option<Identity>>,
    /// The account the session was established for (re-authentication
    /// may not switch to another).
    pub first_user: Mutex<String>,
    pub signing: Mutex<Option<SigningState>>,
    pub signing_required: AtomicBool,
    pub session_key: Mutex<Vec<u8>>,
    pub encryption: Mutex<Option<Arc<EncryptionState>>>,
    /// MS-SMB2 3.3.1.8 Session.EncryptData: every request must be encrypted.
    pub encrypt_data: AtomicBool,
    /// An encrypted request of this session was seen (admin view).
    pub encrypted_seen: AtomicBool,
    pub trees: Mutex<HashMap<u32, Arc<Tree>>>,
    /// MS-SMB2 3.3.1.8 Session.ChannelList.
    pub channels: Mutex<Vec<Channel>>,
    next_tree_id: AtomicU32,
    pub opens: ShardedMap<u64, Arc<Open>>,
    /// Named pipe opens on IPC$ (`smb/ops/pipe.rs`), by volatile id.
    pub pipes: Mutex<HashMap<u64, Arc<crate::smb::ops::pipe::PipeOpen>>>,
    /// Opens of the NTFS quota index (`smb/ops/quota.rs`), by volatile id.
    pub quota_opens: Mutex<HashMap<u64, Arc<crate::smb::ops::quota::QuotaOpen>>>,
    /// Connection that created the session (its first channel).
    pub connection_id: u64,
    /// What NEGOTIATE settled on the connection that created the session:
    /// a bind must match its dialect, cipher and signing algorithm
    /// (MS-SMB2 3.3.5.5.2).
    pub origin: std::sync::OnceLock<crate::smb::conn::Negotiated>,
    /// Binding exchanges in progress, by the connection being bound.
    pub binds: Mutex<HashMap<u64, AuthExchange>>,
    /// Recently completed modifying requests, for replay detection
    /// (MS-SMB2 3.3.5.2.10).
    pub replay: Mutex<crate::smb::replay::ReplayTable>,
    /// (CreateGuid, ClientGuid) of durable v2 CREATEs still being
    /// processed (waiting for breaks, say): a replay of one is refused
    /// with STATUS_FILE_NOT_AVAILABLE rather than run a second time.
    pub pending_creates: Mutex<std::collections::HashSet<([u8; 16], [u8; 16])>>,
    /// The AAPL server capabilities a macOS client negotiated on this
    /// session (`smb/ops/create_aapl.rs`); 0 until it does.
    pub aapl_caps: std::sync::atomic::AtomicU64,
}

impl Session {
    pub fn new(id: u64, dialect: u16, connection_id: u64) -> Session {
        Session {
            id,
            dialect,
            phase: Mutex::new(SessionPhase::InProgress),
            auth: Mutex::new(None),
            identity: Mutex::new(None),
            first_user: Mutex::new(String::new()),
            signing: Mutex::new(None),
            signing_required: AtomicBool::new(false),
            session_key: Mutex::new(Vec::new()),
            encryption: Mutex::new(None),
            encrypt_data: AtomicBool::new(false),
            encrypted_seen: AtomicBool::new(false),
            trees: Mutex::new(HashMap::new()),
            channels: Mutex::new(Vec::new()),
            next_tree_id: AtomicU32::new(1),
            opens: ShardedMap::new(),
            pipes: Mutex::new(HashMap::new()),
            quota_opens: Mutex::new(HashMap::new()),
            connection_id,
            origin: std::sync::OnceLock::new(),
            binds: Mutex::new(HashMap::new()),
            replay: Mutex::new(Default::default()),
            pending_creates: Mutex::new(Default::default()),
            aapl_caps: Default::default(),
        }
    }

    /// MS-SMB2 3.3.1.14 Channel.SigningKey of the channel on `conn_id`.
    pub fn channel_signing(&self, conn_id: u64) -> Option<SigningState> {
        self.channels
            .lock()
            .unwrap()
            .iter()
            .find(|c| c.connection_id == conn_id)
            .and_then(|c| c.signing.clone())
    }

    /// The key for messages of this session on `conn_id` (MS-SMB2 3.3.5.2.4,
    /// 3.3.4.1.1): the channel's signing key; on a connection that is not a
    /// channel yet (a binding SESSION_SETUP), Session.SigningKey.
    pub fn signing_for(&self, conn_id: u64) -> Option<SigningState> {
        let channels = self.channels.lock().unwrap();
        match channels.iter().find(|c| c.connection_id == conn_id) {
            Some(c) => c.signing.clone(),
            None => {
                drop(channels);
                self.signing()
            }
        }
    }

    pub fn has_channel(&self, conn_id: u64) -> bool {
        self.channels
            .lock()
            .unwrap()
            .iter()
            .any(|c| c.connection_id == conn_id)
    }

    pub fn channel_count(&self) -> usize {
        self.channels.lock().unwrap().len()
    }

    /// Drop the channel on `conn_id`; returns how many channels are left.
    pub fn remove_channel(&self, conn_id: u64) -> usize {
        self.binds.lock().unwrap().remove(&conn_id);
        let mut channels = self.channels.lock().unwrap();
        channels.retain(|c| c.connection_id != conn_id && c.conn.strong_count() > 0);
        channels.len()
    }

    /// A live connection of this session, `preferred` if it still lives
    /// (server-initiated messages, MS-SMB2 3.3.4.6: any channel will do).
    pub fn live_connection(&self, preferred: u64) -> Option<Arc<crate::smb::conn::Connection>> {
        let channels = self.channels.lock().unwrap();
        let live = |c: &Channel| c.conn.upgrade().filter(|c| !c.closing.is_cancelled());
        channels
            .iter()
            .filter(|c| c.connection_id == preferred)
            .find_map(live)
            .or_else(|| channels.iter().find_map(live))
    }

    /// The first live channel, in the order they were bound, whose
    /// connection is not in `tried`.
    pub fn next_live_connection(&self, tried: &[u64]) -> Option<Arc<crate::smb::conn::Connection>> {
        self.channels
            .lock()
            .unwrap()
            .iter()
            .filter(|c| !tried.contains(&c.connection_id))
            .find_map(|c| c.conn.upgrade().filter(|c| !c.closing.is_cancelled()))
    }

    /// Live connections of this session's channels.
    pub fn channel_connections(&self) -> Vec<Arc<crate::smb::conn::Connection>> {
        self.channels
            .lock()
            .unwrap()
            .iter()
            .filter_map(|c| c.conn.upgrade())
            .collect()
    }

    pub fn phase(&self) -> SessionPhase {
        *self.phase.lock().unwrap()
    }

    pub fn set_phase(&self, p: SessionPhase) {
        *self.phase.lock().unwrap() = p;
    }

    pub fn encryption(&self) -> Option<Arc<EncryptionState>> {
        self.encryption.lock().unwrap().clone()
    }

    pub fn signing(&self) -> Option<SigningState> {
        self.signing.lock().unwrap().clone()
    }

    /// The authenticated user's name ("" before authentication).
    pub fn user_name(&self) -> String {
        self.identity
            .lock()
            .unwrap()
            .as_ref()
            .map(|i| i.user.clone())
            .unwrap_or_default()
    }

    pub fn is_anonymous_or_guest(&self) -> bool {
        self.identity
            .lock()
            .unwrap()
            .as_ref()
            .map(|i| i.anonymous || i.guest)
            .unwrap_or(true)
    }

    /// A new tree connect of this session; None when it has
    /// [`MAX_TREES_PER_SESSION`] already.
    pub fn add_tree(
        &self,
        share: Option<Arc<Share>>,
        maximal_access: u32,
        encrypt_data: bool,
    ) -> Option<Arc<Tree>> {
        let mut trees = self.trees.lock().unwrap();
        if trees.len() >= MAX_TREES_PER_SESSION {
            return None;
        }
        // Once the ids wrap (4 billion connects), skip those still in use
        // and the two a request cannot name: 0 and 0xFFFFFFFF (a related
        // compound's, MS-SMB2 3.2.4.1.4).
        let id = loop {
            let id = self.next_tree_id.fetch_add(1, Ordering::Relaxed);
            if id != 0 && id != u32::MAX && !trees.contains_key(&id) {
                break id;
            }
        };
        let tree = Arc::new(Tree {
            id,
            share,
            maximal_access,
            encrypt_data,
            connected_at: std::time::SystemTime::now(),
        });
        trees.insert(id, tree.clone());
        Some(tree)
    }

    pub fn tree(&self, id: u32) -> Option<Arc<Tree>> {
        self.trees.lock().unwrap().get(&id).cloned()
    }

    pub fn remove_tree(&self, id: u32) -> Option<Arc<Tree>> {
        self.trees.lock().unwrap().remove(&id)
    }

    /// Put a new or reconnected open in the table, unless the session
    /// ended (logoff, its last channel lost) or the open's tree was
    /// disconnected while the CREATE ran. A CREATE can wait up to the 35 s
    /// break timeout; an open added after the table was emptied would
    /// never be closed, and its share mode and oplock would hold up every
    /// later open of the file. Whoever ends the session or the tree marks
    /// it before emptying the table, so either the emptying finds this
    /// open, or this check sees the mark. On `Err` the open is not in the
    /// table and the caller ends it; the status is for the CREATE.
    pub fn admit_open(&self, open: &Arc<Open>) -> Result<(), NtStatus> {
        self.opens.insert(open.volatile_id, open.clone());
        let gone = if self.phase() == SessionPhase::Expired {
            NtStatus::USER_SESSION_DELETED
        } else if self.tree(open.tree_id()).is_none() {
            NtStatus::NETWORK_NAME_DELETED
        } else {
            return Ok(());
        };
        match self.opens.remove(&open.volatile_id) {
            Some(_) => Err(gone),
            // Already taken by the logoff or disconnect, which ends it.
            None => Ok(()),
        }
    }

    /// Opens of one tree, removed from the table (tree disconnect, logoff).
    pub fn take_opens_of_tree(&self, tree_id: Option<u32>) -> Vec<Arc<Open>> {
        self.opens
            .drain_where(|o| tree_id.is_none_or(|t| o.tree_id() == t))
    }
}

pub struct Tree {
    pub id: u32,
    /// None for IPC$.
    pub share: Option<Arc<Share>>,
    pub maximal_access: u32,
    /// MS-SMB2 3.3.1.6 Share.EncryptData: unencrypted requests are refused.
    pub encrypt_data: bool,
    /// When the TREE_CONNECT succeeded (srvsvc NetrConnectionEnum).
    pub connected_at: std::time::SystemTime,
}

/// The cursor of a directory enumeration (MS-SMB2 3.3.1.10 Open.EnumerationLocation).
#[derive(Default)]
pub struct DirCursor {
    pub entries: Option<Vec<DirEntry>>,
    pub position: usize,
    pub pattern: Option<String>,
}

pub struct Open {
    pub persistent_id: u64,
    pub volatile_id: u64,
    /// MS-SMB2 3.3.1.10 Open.TreeConnect: changes when a durable open is
    /// reconnected on a new tree connect.
    pub tree_id: AtomicU32,
    pub handle: OpenHandle,
    pub is_directory: bool,
    pub granted_access: u32,
    pub dir: Mutex<DirCursor>,
    pub closed: AtomicBool,
    /// This open's entry in its file's oplock state.
    pub oplock: Option<crate::smb::oplock::OplockRef>,
    /// Cancelled when the open is closed: wakes requests waiting on it.
    pub close_signal: tokio_util::sync::CancellationToken,
    /// Set by the first CHANGE_NOTIFY on a directory open (changes are
    /// buffered from then on, between requests).
    pub notify_watch: Mutex<Option<Arc<crate::smb::notify::Watch>>>,
    /// A directory open that is watched or leased, or a file open that
    /// read through its read caching, is watched for changes made on the
    /// host until it is closed (`host_watch.rs`).
    pub host_interest: Mutex<Option<crate::host_watch::HostInterest>>,
    /// Set by the open's first READ, which starts watching the file for
    /// host writes if the open caches reads (`host_watch::watch_read_cache`).
    pub host_watch_tried: AtomicBool,
    /// Set when the open was granted durability (MS-SMB2 3.3.1.10
    /// Open.IsDurable and what a reconnect is checked against).
    pub durable: Mutex<Option<crate::smb::durable::Durability>>,
    /// MS-SMB2 3.3.1.10 Open.IsReplayEligible: a replay of the durable
    /// create that made this open gets `create_reply` again; any other
    /// request on the open ends that, unless the open is persistent.
    pub replay_eligible: AtomicBool,
    /// Open.CreateGuid of a create with a DH2Q context (durable or not),
    /// with the ClientGuid of the connection that made it.
    pub create_guid: Option<([u8; 16], [u8; 16])>,
    pub create_reply: Mutex<Option<braid_smb_proto::messages::CreateResponse>>,
    /// Counts the open's disconnections: a scavenger timer only closes the
    /// open if it was not reconnected (and lost again) in between.
    pub disconnects: AtomicU64,
    /// A file renamed through this open: its close reports an attribute
    /// change (NTFS marks a renamed file for archiving when its handle is
    /// cleaned up).
    pub renamed: AtomicBool,
    /// MS-SMB2 3.3.1.10 Open.LockSequenceArray: the LockSequenceNumber of
    /// the last successful LOCK in each of the 64 buckets (0xFF: none).
    pub lock_sequences: Mutex<[u8; 64]>,
    /// Open.Mode (MS-FSA 2.1.1.5): the FileModeInformation bits, from the
    /// create options and FileModeInformation sets. Reported only: the
    /// I/O path takes write-through from the create.
    pub mode: AtomicU32,
    /// This open's place in its client address's count of opens, given
    /// back when the open is closed.
    pub client_slot: Mutex<Option<crate::smb::per_client::PerClientSlot>>,
    /// Where the open's record is kept in the state store, while it has one
    /// (a persistent open; a durable one at a graceful stop). Closing the
    /// open forgets it (`close_handle`).
    pub persisted: Mutex<Option<crate::smb::persistent::Persisted>>,
}

/// Tree connects one session may hold at once; one more is
/// STATUS_INSUFFICIENT_RESOURCES. Each is small, but without a cap one
/// session could connect trees until the server's memory ran out.
pub const MAX_TREES_PER_SESSION: usize = 4096;

/// An empty Open.LockSequenceArray.
pub const NO_LOCK_SEQUENCES: [u8; 64] = [0xFF; 64];

impl Open {
    pub fn tree_id(&self) -> u32 {
        self.tree_id.load(Ordering::Relaxed)
    }

    pub fn is_durable(&self) -> bool {
        self.durable.lock().unwrap().is_some()
    }

    /// MS-SMB2 3.3.1.10 Open.IsPersistent.
    pub fn is_persistent(&self) -> bool {
        self.durable
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|d| d.persistent)
    }

    /// Mark closed; true if this call closed it. The caller closes the
    /// file service handle, then calls `release_caching`.
    pub fn mark_closed(&self) -> bool {
        let first = !self.closed.swap(true, Ordering::AcqRel);
        if first {
            self.client_slot.lock().unwrap().take();
            if let Some(w) = self.notify_watch.lock().unwrap().as_ref() {
                w.close();
            }
            self.host_interest.lock().unwrap().take();
        }
        self.close_signal.cancel();
        first
    }

    /// Close the file service handle and forget the open's record in the
    /// state store (blocking: call from the blocking pool).
    pub fn close_handle(&self) -> braid_fs::FsResult<braid_fs::FileInfo> {
        let closed = self.handle.close();
        if let Some(p) = self.persisted.lock().unwrap().take() {
            p.forget();
        }
        closed
    }

    /// Drop the open's oplock or lease entry, waking the opens that wait
    /// for it. Only once the file service closed the handle: a waiting
    /// open retries at once, and must find this open's share mode gone
    /// (smbtorture smb2.bench.oplock1 closes on every break).
    pub fn release_caching(&self) {
        if let Some(o) = &self.oplock {
            o.release();
        }
    }
}
