//! SMB2 request handling: frames and compounds (`frame`), the dispatch
//! table (`dispatch`), and one file per command under `ops/`.

pub mod acl;
pub mod break_delivery;
pub mod caching;
pub mod conn;
pub mod credits;
pub mod dir_lease;
pub mod dispatch;
pub mod durable;
pub mod frame;
pub mod homes;
pub mod host_watch;
pub mod interfaces;
pub mod lease;
pub mod logon_throttle;
pub mod lsa;
pub mod nfs_ace;
pub mod notify;
pub mod op_class;
pub mod oplock;
pub mod ops;
pub mod order;
pub mod per_client;
pub mod persistent;
pub mod qos;
pub mod replay;
pub mod send;
pub mod session;
pub mod share_access;
pub mod srvsvc;
pub mod state;
pub mod status_map;
pub mod tcp_ack;

use std::sync::Arc;

use braid_smb_proto::codec::{FileId, Message};
use braid_smb_proto::header::{Header, HEADER_LEN};
use braid_smb_proto::NtStatus;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::smb::conn::Connection;
use crate::smb::session::{Open, Session, Tree};

/// Everything a handler needs, passed explicitly (architecture principle 5).
pub struct Request<'a> {
    pub conn: &'a Arc<Connection>,
    pub header: &'a Header,
    /// The whole message (header + body); wire offsets are relative to it.
    pub msg: &'a [u8],
    /// The same message as shared bytes, for payloads handed to blocking I/O.
    pub msg_bytes: Bytes,
    pub session: Option<Arc<Session>>,
    pub tree: Option<Arc<Tree>>,
    /// File id of the previous CREATE in a related compound.
    pub related_file_id: Option<FileId>,
    pub in_compound: bool,
    /// This request's place among the connection's requests on opens
    /// ([`crate::smb::order::FileRequestOrder`]).
    pub ticket: Option<u64>,
    /// Set when the handler went async: the final response carries it.
    pub async_id: Option<u64>,
    /// Credits granted on the interim response (the final one grants none).
    pub interim_credits: Option<u16>,
    /// This request's place among the connection's async requests, held
    /// until it is dropped with the request.
    pub async_slot: Option<crate::smb::conn::AsyncSlot<'a>>,
    /// Registered as cancellable ([`Request::cancellable`]): the frame
    /// layer removes the registration when the request ends.
    pub registered_cancellable: bool,
    /// The session whose key decrypted this request, if it came encrypted.
    pub encrypted_by: Option<Arc<Session>>,
    /// The open this request named (set by [`Request::open`]): a related
    /// request after it in a compound uses it (MS-SMB2 3.3.5.2.7.2).
    pub used_file_id: std::sync::Mutex<Option<FileId>>,
}

/// A handler's answer: the response message (64-byte header placeholder
/// followed by the body) and, for READ, a payload sent as its own buffer.
pub struct Reply {
    pub status: NtStatus,
    pub msg: Vec<u8>,
    pub payload: Option<Bytes>,
    /// A CREATE's file id, for the following related requests.
    pub created_file_id: Option<FileId>,
    /// Overrides for the response header (SESSION_SETUP, TREE_CONNECT).
    pub session_id: Option<u64>,
    pub tree_id: Option<u32>,
    /// SESSION_SETUP success: the response is signed with the new key.
    pub sign_with_new_session: bool,
    /// Called with the final response message (header included, before
    /// signing): preauth integrity hashing of NEGOTIATE/SESSION_SETUP.
    pub after_send: Option<AfterSend>,
    /// Bytes `msg` keeps free in front of the header, so that an encrypted
    /// response can get its transform header without moving the message.
    pub headroom: usize,
    /// READ's data already signed or encrypted as it was read; the frame
    /// layer completes the seal once the header is final.
    pub sealed: Option<Sealed>,
}

/// Signing or encryption done on a response's payload before its header
/// was known (braid_smb_proto::crypto::deferred).
pub enum Sealed {
    /// AES-GMAC over the data, under this channel signing key. The data is
    /// still plaintext: if the response ends up signed another way, it is
    /// simply signed from scratch.
    Gmac {
        partial: braid_smb_proto::crypto::deferred::GmacPartial,
        key: Vec<u8>,
    },
    /// The data is already AES-GCM ciphertext under the session's key: the
    /// response must go out as the lone message of its transform frame.
    Gcm(braid_smb_proto::crypto::deferred::GcmPartial),
}

pub type AfterSend = Box<dyn FnOnce(&[u8]) + Send>;

pub type OpResult = Result<Reply, NtStatus>;

impl Reply {
    pub fn of<M: Message>(m: &M) -> Reply {
        Reply::with_status(NtStatus::SUCCESS, m)
    }
    pub fn with_status<M: Message>(status: NtStatus, m: &M) -> Reply {
        let mut msg = Vec::with_capacity(HEADER_LEN + 128);
        msg.resize(HEADER_LEN, 0);
        m.encode(&mut msg);
        Reply {
            status,
            msg,
            payload: None,
            created_file_id: None,
            session_id: None,
            tree_id: None,
            sign_with_new_session: false,
            after_send: None,
            headroom: 0,
            sealed: None,
        }
    }
    /// A body already encoded after a 64-byte placeholder header.
    pub fn raw(status: NtStatus, msg: Vec<u8>) -> Reply {
        Reply {
            status,
            msg,
            payload: None,
            created_file_id: None,
            session_id: None,
            tree_id: None,
            sign_with_new_session: false,
            after_send: None,
            headroom: 0,
            sealed: None,
        }
    }
}

impl Request<'_> {
    pub fn session(&self) -> Result<&Arc<Session>, NtStatus> {
        self.session.as_ref().ok_or(NtStatus::USER_SESSION_DELETED)
    }
    /// The share behind this tree (IPC$ has none).
    pub fn share(&self) -> Result<&Arc<crate::state::Share>, NtStatus> {
        self.tree()?
            .share
            .as_ref()
            .ok_or(NtStatus::INVALID_DEVICE_REQUEST)
    }
    pub fn tree(&self) -> Result<&Arc<Tree>, NtStatus> {
        self.tree.as_ref().ok_or(NtStatus::NETWORK_NAME_DELETED)
    }

    /// MS-SMB2 3.3.5.2.7.2 and 3.3.5.x "locate the open": resolve a wire
    /// file id (the related-compound id included) to an open of this tree.
    pub fn open(&self, id: FileId) -> Result<Arc<Open>, NtStatus> {
        let id = if id == FileId::RELATED {
            self.related_file_id.ok_or(NtStatus::FILE_CLOSED)?
        } else {
            id
        };
        let sess = self.session()?;
        let Some(open) = sess.opens.get(&id.volatile) else {
            // An open of the quota index is no file open: the commands
            // that serve it look for it first (ops/quota.rs); the others
            // get its answer for them.
            if ops::quota::find(self, id).is_some() {
                return Err(ops::quota::refusal(self.header.command));
            }
            return Err(NtStatus::FILE_CLOSED);
        };
        if open.persistent_id != id.persistent {
            return Err(NtStatus::FILE_CLOSED);
        }
        if let Some(tree) = &self.tree {
            if open.tree_id() != tree.id {
                return Err(NtStatus::FILE_CLOSED);
            }
        }
        *self.used_file_id.lock().unwrap() = Some(id);
        // MS-SMB2 3.3.5.13 (and each request on an open): a request on an
        // open that is not persistent ends its replay eligibility; a
        // persistent one stays eligible, so that a client replays its
        // create after a failover or restart whatever it did since.
        let eligible = &open.replay_eligible;
        if eligible.load(std::sync::atomic::Ordering::Relaxed) && !open.is_persistent() {
            eligible.store(false, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(open)
    }

    /// Register this request as cancellable (CANCEL, logoff, disconnect).
    pub fn cancellable(&mut self) -> CancellationToken {
        let sid = self.session.as_ref().map(|s| s.id).unwrap_or(0);
        self.registered_cancellable = true;
        self.conn.register_pending(self.header.message_id, sid)
    }

    /// The ClientGuid the connection negotiated (names its leases).
    pub fn conn_client_guid(&self) -> [u8; 16] {
        self.conn
            .negotiated
            .get()
            .map_or([0; 16], |n| n.client_guid)
    }

    /// MS-SMB2 3.3.4.2: send an interim STATUS_PENDING response; the final
    /// response then goes out asynchronously with the same AsyncId.
    ///
    /// The interim response gives the request's credit back, so the
    /// connection's credits no longer bound how many requests wait: when
    /// `max_async_requests` of them already do, the request stays
    /// synchronous and this is STATUS_INSUFFICIENT_RESOURCES, which
    /// 3.3.4.2 allows a server whose resources are constrained to fail
    /// it with. A caller that must wait anyway (an open waiting on a
    /// break, which ends within 35 s) may go on waiting without the
    /// interim response, holding its credit.
    pub fn go_async(&mut self) -> Result<(), NtStatus> {
        // It will wait now: a CLOSE behind it may go ahead and cancel it.
        if let Some(t) = self.ticket {
            self.conn.file_order.release(t);
        }
        if self.async_id.is_some() || self.in_compound {
            return Ok(());
        }
        let Some(slot) = self.conn.take_async_slot() else {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        };
        self.async_slot = Some(slot);
        let async_id = self.conn.new_async_id();
        self.conn
            .set_pending_async(self.header.message_id, async_id);
        let credits = send::send_interim(
            self.conn,
            self.header,
            async_id,
            self.encrypted_by.as_deref(),
        );
        self.async_id = Some(async_id);
        self.interim_credits = Some(credits);
        Ok(())
    }
}

/// Run blocking file-service work off the reactor (architecture: the
/// network reactor never waits on the file system).
pub async fn blocking<T, F>(f: F) -> Result<T, NtStatus>
where
    F: FnOnce() -> Result<T, braid_fs::FsError> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(|e| status_map::fs_status(&e)),
        Err(_) => Err(NtStatus::INTERNAL_ERROR),
    }
}
