//! Replay detection for multichannel sessions.
//!
//! MS-SMB2 3.3.5.2.10 (verifying the channel sequence number): each open
//! keeps Open.ChannelSequence; a modifying request (WRITE, SET_INFO, IOCTL)
//! carrying an older ChannelSequence than the open has seen is stale — it
//! was sent on a channel the client has since given up on — and fails with
//! STATUS_FILE_NOT_AVAILABLE instead of landing after newer data.
//!
//! Replayed requests (SMB2_FLAGS_REPLAY_OPERATION, MS-SMB2 3.2.4.1.7 /
//! 3.3.5.2.10): when a channel dies with requests outstanding, the client
//! sends them again on another channel with the replay flag. While a
//! session has more than one channel (or the request is itself a replay),
//! the server keeps a bounded per-session record of recently completed
//! modifying requests, keyed by a fingerprint of the whole request body
//! (which names the open, offset, length and every byte of data). A replay
//! whose fingerprint matches a completed request gets the original result
//! and is not applied again; one that matches a request still in progress
//! waits for it and then gets its result.
//!
//! The fingerprint must cover every byte: a replayed WRITE answered from a
//! different earlier WRITE (same open, offset and length, other data) would
//! be reported written and never applied. It is the proto crate's
//! `BodyDigest` (a GMAC under a key drawn at random once per process), on
//! the same hardware GHASH as signing: a keyless hash such as SipHash is
//! ~20x slower per byte, and xxh3's fast paths are chosen at compile time
//! only.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use braid_smb_proto::codec::{FileId, Message};
use braid_smb_proto::crypto::BodyDigest;
use braid_smb_proto::header::{flags, Command, HEADER_LEN};
use braid_smb_proto::messages::negotiate::dialect;
use braid_smb_proto::messages::write::decode_write_request_ref;
use braid_smb_proto::messages::{IoctlRequest, ReadRequest, SetInfoRequest};
use braid_smb_proto::NtStatus;
use tokio::sync::watch;

use super::{dispatch, OpResult, Reply, Request};
use crate::smb::session::Session;

/// Completed requests remembered per session.
const MAX_COMPLETED: usize = 512;

/// The outcome of a completed request: status and response message
/// (64-byte placeholder header + body).
type Outcome = (NtStatus, Vec<u8>);

/// Filled in when the request completes.
type Slot = Arc<watch::Sender<Option<Outcome>>>;

/// How long a replay waits for the first execution still in progress.
const REPLAY_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Default)]
pub struct ReplayTable {
    /// Open.ChannelSequence by volatile file id (absent = 0).
    sequences: HashMap<u64, u16>,
    /// Recently seen modifying requests, oldest first.
    recent: VecDeque<(u128, Slot)>,
}

impl ReplayTable {
    fn find(&self, key: u128) -> Option<Slot> {
        self.recent
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, c)| c.clone())
    }

    fn remember(&mut self, key: u128) -> Slot {
        let cell = Arc::new(watch::channel(None).0);
        if self.recent.len() >= MAX_COMPLETED {
            self.recent.pop_front();
        }
        self.recent.push_back((key, cell.clone()));
        cell
    }

    /// Forget the channel sequence of opens that are gone.
    fn prune(&mut self, session: &Session) {
        if self.sequences.len() > 64 && self.sequences.len() > 2 * session.opens.len() {
            self.sequences.retain(|v, _| session.opens.contains(v));
        }
    }
}

fn modifying(command: Command) -> bool {
    matches!(command, Command::Write | Command::SetInfo | Command::Ioctl)
}

/// The open a modifying request names (no related-compound ids: replay
/// handling is skipped inside compounds).
fn file_id_of(command: Command, msg: &[u8]) -> Option<FileId> {
    match command {
        Command::Write => decode_write_request_ref(msg).ok().map(|(w, _)| w.file_id),
        Command::Read => ReadRequest::decode(msg).ok().map(|r| r.file_id),
        Command::SetInfo => SetInfoRequest::decode(msg).ok().map(|r| r.file_id),
        Command::Ioctl => IoctlRequest::decode(msg).ok().map(|r| r.file_id),
        _ => None,
    }
}

/// A fingerprint of the request body: what a replay repeats exactly (the
/// header differs: message id, flags, channel sequence, signature).
fn fingerprint(command: Command, msg: &[u8]) -> u128 {
    static DIGEST: OnceLock<BodyDigest> = OnceLock::new();
    let body = &msg[HEADER_LEN.min(msg.len())..];
    DIGEST
        .get_or_init(BodyDigest::random)
        .digest(command as u16, body)
}

/// Dispatch `command`, applying channel-sequence verification and replay
/// detection to modifying requests of 3.x sessions.
pub async fn dispatch_guarded(command: Command, req: &mut Request<'_>) -> OpResult {
    // A READ moves the open's channel sequence on too, but is never stale.
    let sequenced = modifying(command) || command == Command::Read;
    let guarded = sequenced
        && !req.in_compound
        && !req.header.is_related()
        && req.conn.dialect() >= dialect::SMB300;
    let Some(session) = req.session.clone().filter(|_| guarded) else {
        return dispatch::dispatch(command, req).await;
    };
    let is_replay = req.header.flags & flags::REPLAY_OPERATION != 0;

    // MS-SMB2 3.3.5.2.10: verify the channel sequence number.
    if let Some(id) = file_id_of(command, req.msg) {
        if session.opens.contains(&id.volatile) {
            let seq = req.header.channel_sequence();
            let mut t = session.replay.lock().unwrap();
            let current = t.sequences.get(&id.volatile).copied().unwrap_or(0);
            // 16-bit serial arithmetic: a difference above 0x7FFF is older.
            let diff = seq.wrapping_sub(current) as i16;
            if diff < 0 && modifying(command) {
                return Err(NtStatus::FILE_NOT_AVAILABLE);
            }
            if diff > 0 {
                t.sequences.insert(id.volatile, seq);
                t.prune(&session);
            }
        }
    }

    let multichannel = session.channel_count() > 1;
    if !modifying(command) || (!is_replay && !multichannel) {
        return dispatch::dispatch(command, req).await;
    }
    let key = fingerprint(command, req.msg);
    let cell = {
        let mut t = session.replay.lock().unwrap();
        match t.find(key).filter(|_| is_replay) {
            Some(cell) => Err(cell),
            None => Ok(t.remember(key)),
        }
    };
    let cell = match cell {
        Err(earlier) => {
            // A replay of a request already seen: its result, once done.
            let mut rx = earlier.subscribe();
            let done = tokio::time::timeout(REPLAY_WAIT, rx.wait_for(|v| v.is_some())).await;
            let (status, msg) = match done {
                Ok(Ok(v)) => v
                    .clone()
                    .unwrap_or((NtStatus::FILE_NOT_AVAILABLE, Vec::new())),
                _ => (NtStatus::FILE_NOT_AVAILABLE, Vec::new()),
            };
            tracing::debug!(
                conn = req.conn.id,
                mid = req.header.message_id,
                "replayed request answered from its first execution"
            );
            return if status.is_error() && msg.is_empty() {
                Err(status)
            } else {
                Ok(Reply::raw(status, msg))
            };
        }
        Ok(cell) => cell,
    };
    let result = dispatch::dispatch(command, req).await;
    let outcome = match &result {
        Ok(r) if r.payload.is_none() => (r.status, r.msg.clone()),
        Ok(_) => (NtStatus::FILE_NOT_AVAILABLE, Vec::new()),
        Err(s) => (*s, Vec::new()),
    };
    cell.send_replace(Some(outcome));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_ignores_the_header() {
        let mut a = vec![0u8; HEADER_LEN + 100];
        let mut b = a.clone();
        a[24] = 1; // message id
        b[24] = 2;
        assert_eq!(
            fingerprint(Command::Write, &a),
            fingerprint(Command::Write, &b)
        );
        b[HEADER_LEN + 50] = 9;
        assert_ne!(
            fingerprint(Command::Write, &a),
            fingerprint(Command::Write, &b)
        );
    }

    #[test]
    fn fingerprint_covers_every_byte_of_a_large_write() {
        // Two 1 MiB WRITEs to one range whose first and last 64 KiB agree
        // (zeros around changed data, as a disk image's blocks often are):
        // a replay of the second must not be taken for the first.
        let mut a = vec![0u8; HEADER_LEN + 48 + (1 << 20)];
        a[HEADER_LEN + 8] = 7; // offset in the WRITE's fixed part
        let mut b = a.clone();
        a[HEADER_LEN + 48 + (512 << 10)] = 1;
        b[HEADER_LEN + 48 + (512 << 10)] = 2;
        assert_ne!(
            fingerprint(Command::Write, &a),
            fingerprint(Command::Write, &b)
        );
        assert_eq!(
            fingerprint(Command::Write, &a),
            fingerprint(Command::Write, &a.clone())
        );
        assert_ne!(
            fingerprint(Command::Write, &a),
            fingerprint(Command::SetInfo, &a)
        );
    }

    #[test]
    fn table_is_bounded() {
        let mut t = ReplayTable::default();
        for k in 0..(MAX_COMPLETED as u128 + 10) {
            t.remember(k);
        }
        assert_eq!(t.recent.len(), MAX_COMPLETED);
        assert!(t.find(0).is_none());
        assert!(t.find(MAX_COMPLETED as u128 + 9).is_some());
    }
}
