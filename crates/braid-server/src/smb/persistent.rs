//! Opens that outlive the process (MS-SMB2 3.3.1.10 Open.IsPersistent,
//! 3.3.5.9.10 grants, 3.3.5.9.12 reconnects, 3.3.7.1): a persistent open
//! on a continuously available share is written to the state store before
//! its CREATE is answered, again when its byte-range locks or lease change,
//! and forgotten when it is closed or expires. A durable open is written
//! at a graceful stop. A restarted server reopens every recorded file with
//! the recorded access and share access, takes its locks again, registers
//! its oplock or lease parked (`oplock/parked.rs`) and waits for the client
//! as it waits for a disconnected durable open (`durable.rs`): share modes,
//! locks and caching hold against other clients until the owner reconnects
//! with DH2C or the open's timeout runs out.
//!
//! What a record keeps is only what a reconnect is checked against and what
//! must be held meanwhile; no connection, credit or session state.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_fs::state_store::StateStore;
use braid_fs::{DirectoryRequirement, Disposition, LockOwner, OpenParams, RequestCtx};
use braid_smb_proto::codec::FileId;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::smb::durable::Durability;
use crate::smb::oplock::{OplockRef, RestoredLease};
use crate::smb::session::{DirCursor, Open};
use crate::state::ServerState;

/// The store's space for SMB open records.
pub const SPACE: &str = "smb-opens";

/// Records restored at once at start.
const RESTORES_IN_FLIGHT: usize = 16;

/// SMB byte-range locks are held by the open, one owner per open
/// (`ops/lock.rs`).
const LOCK_OWNER: LockOwner = LockOwner(0);

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct LockRecord {
    pub offset: u64,
    pub length: u64,
    pub exclusive: bool,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    pub key: [u8; 16],
    pub version: u8,
    pub parent_key: Option<[u8; 16]>,
    pub state: u32,
    pub epoch: u16,
}

/// One durable or persistent open, as the store keeps it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct OpenRecord {
    /// Open.FileId.Persistent (also the volatile id Braid hands out).
    pub persistent_id: u64,
    /// 1 (DHnQ) or 2 (DH2Q).
    pub durable_version: u8,
    pub persistent: bool,
    pub create_guid: [u8; 16],
    pub client_guid: [u8; 16],
    pub app_instance: Option<[u8; 16]>,
    /// Open.ApplicationInstanceVersionHigh and Low (records written
    /// before there was one: none).
    #[serde(default)]
    pub app_instance_version: Option<(u64, u64)>,
    /// Open.DurableOwner.
    pub owner: String,
    /// The share (lower-cased) and the path within it.
    pub share: String,
    pub path: String,
    pub granted_access: u32,
    pub share_access: u32,
    pub oplock_level: u8,
    pub lease: Option<LeaseRecord>,
    pub locks: Vec<LockRecord>,
    /// Open.DurableOpenTimeout.
    pub timeout_ms: u64,
    /// When the record was written (Unix ms): for the admin view.
    pub written_unix_ms: u64,
    /// Open.IsReplayEligible when the record was written: a replay of the
    /// create (its CreateGuid) gets the open back after a restart too. A
    /// persistent open always is (MS-SMB2 3.3.5.13 and the other
    /// requests on an open end it only for an open that is not).
    #[serde(default)]
    pub replay_eligible: bool,
    /// The CreateAction such a replay answers (records written before
    /// there was one: OPENED).
    #[serde(default = "opened")]
    pub create_action: u32,
}

fn opened() -> u32 {
    braid_smb_proto::messages::create::create_action::OPENED
}

impl OpenRecord {
    pub fn key(&self) -> String {
        record_key(self.persistent_id)
    }
}

fn record_key(persistent_id: u64) -> String {
    format!("{persistent_id:016x}")
}

/// An open's place in the store: forgetting it deletes the record.
pub struct Persisted {
    store: Arc<dyn StateStore>,
    key: String,
}

impl Persisted {
    /// Delete the record (blocking). A failure leaves a record that the
    /// next start restores and lets expire: logged, not fatal.
    pub fn forget(&self) {
        if let Err(e) = self.store.delete(SPACE, &self.key) {
            warn!("state store: cannot forget open {}: {e}", self.key);
        }
    }
}

/// The record of `open` as it is now; None when it is not durable.
pub fn record_of(open: &Open) -> Option<OpenRecord> {
    let d = open.durable.lock().unwrap().clone()?;
    let mut oplock_level = 0;
    let mut lease = None;
    if let Some(o) = &open.oplock {
        match o.file.lease_of(o.key) {
            Some(l) => {
                let st = *l.st.lock().unwrap();
                lease = Some(LeaseRecord {
                    key: l.id.1,
                    version: l.version,
                    parent_key: l.parent_key,
                    // A break in progress completes as the acknowledgment
                    // timer would complete it: to what it asked for.
                    state: st.breaking_to.unwrap_or(st.state),
                    epoch: st.epoch,
                });
            }
            None => oplock_level = o.file.level_of(o.key),
        }
    }
    let locks = open
        .handle
        .held_locks(LOCK_OWNER)
        .into_iter()
        .map(|(offset, length, exclusive)| LockRecord {
            offset,
            length,
            exclusive,
        })
        .collect();
    Some(OpenRecord {
        persistent_id: open.persistent_id,
        durable_version: d.version,
        persistent: d.persistent,
        create_guid: d.create_guid,
        client_guid: d.client_guid,
        app_instance: d.app_instance,
        app_instance_version: d.app_version,
        owner: d.owner,
        share: d.share,
        path: open.handle.path(),
        granted_access: open.granted_access,
        share_access: open.handle.share_access(),
        oplock_level,
        lease,
        locks,
        timeout_ms: d.timeout.as_millis() as u64,
        written_unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.as_millis() as u64),
        replay_eligible: open.replay_eligible.load(Ordering::Relaxed),
        create_action: d.create_action,
    })
}

/// Write `open`'s record (blocking) and remember where it is, so that its
/// close forgets it.
pub fn save(store: &Arc<dyn StateStore>, open: &Open) -> Result<(), String> {
    let Some(record) = record_of(open) else {
        return Ok(());
    };
    let bytes = serde_json::to_vec(&record).map_err(|e| e.to_string())?;
    store
        .put(SPACE, &record.key(), &bytes)
        .map_err(|e| e.to_string())?;
    if open.closed.load(Ordering::Acquire) {
        // Closed while it was written: the close found nothing to forget.
        let _ = store.delete(SPACE, &record.key());
        return Ok(());
    }
    *open.persisted.lock().unwrap() = Some(Persisted {
        store: store.clone(),
        key: record.key(),
    });
    Ok(())
}

/// Write a persistent open's record again after its locks or lease
/// changed (from the reactor: the write runs on the blocking pool).
pub async fn resave_if_persistent(server: &Arc<ServerState>, open: &Arc<Open>) {
    if !open.is_persistent() || open.closed.load(Ordering::Acquire) {
        return;
    }
    let store = server.store.clone();
    let open = open.clone();
    let _ = tokio::task::spawn_blocking(move || {
        if let Err(e) = save(&store, &open) {
            warn!(
                "state store: cannot update persistent open {:016x}: {e}",
                open.persistent_id
            );
        }
    })
    .await;
}

/// A graceful stop: write every durable open (connected or waiting for its
/// client) so that a restart with the same state store resumes them.
/// Returns how many were written.
pub fn save_all_durable(server: &ServerState) -> usize {
    let mut opens: Vec<Arc<Open>> = server.smb.preserved.all();
    for s in server.smb.sessions.values() {
        opens.extend(s.opens.values());
    }
    let mut saved = 0;
    for open in opens {
        if open.closed.load(Ordering::Acquire) || !open.is_durable() {
            continue;
        }
        match save(&server.store, &open) {
            Ok(()) => saved += 1,
            Err(e) => warn!(
                "state store: cannot keep durable open {:016x}: {e}",
                open.persistent_id
            ),
        }
    }
    saved
}

/// What a start found in the store.
#[derive(Debug, Default, Clone, Copy)]
pub struct Restored {
    pub opens: usize,
    pub failed: usize,
    pub corrupt: usize,
}

/// At start: restore every recorded open, parked, waiting for its client.
/// A corrupt record, or one whose file or share is gone, is reported in
/// one line and dropped; nothing is granted from it.
pub async fn restore_all(server: &Arc<ServerState>) -> Restored {
    let store = server.store.clone();
    let loaded = match tokio::task::spawn_blocking(move || store.load(SPACE)).await {
        Ok(Ok(l)) => l,
        Ok(Err(e @ braid_fs::state_store::StoreError::Unavailable(_))) => {
            warn!(
                "{e}; Braid starts without the durable and persistent opens kept there, \
                 and refuses new persistent opens until it answers"
            );
            return Restored::default();
        }
        Ok(Err(e)) => {
            warn!("{e}; no durable or persistent open is restored");
            return Restored::default();
        }
        Err(_) => return Restored::default(),
    };
    let mut out = Restored {
        corrupt: loaded.corrupt.len(),
        ..Restored::default()
    };
    for c in &loaded.corrupt {
        warn!(
            "state store: corrupt record {} skipped ({}); the open it held is not restored",
            c.location, c.reason
        );
    }
    let mut highest = 0;
    let mut records = Vec::new();
    for (key, bytes) in loaded.records {
        match serde_json::from_slice::<OpenRecord>(&bytes) {
            Ok(r) if r.persistent_id != 0 && r.key() == key => {
                highest = highest.max(r.persistent_id);
                records.push(r);
            }
            Ok(_) | Err(_) => {
                warn!("state store: corrupt record {SPACE}/{key} skipped (not an open record); the open it held is not restored");
                out.corrupt += 1;
                let _ = server.store.delete(SPACE, &key);
            }
        }
    }
    // Several at once: a restore is mostly its reopen's system calls, and
    // 10,000 one after another take about a second before the first
    // client is served (docs/BENCHMARKS.md).
    let mut running = tokio::task::JoinSet::new();
    let mut records = records.into_iter();
    loop {
        while running.len() < RESTORES_IN_FLIGHT {
            let Some(record) = records.next() else { break };
            let server = server.clone();
            running.spawn(async move {
                let result = restore_one(&server, &record).await;
                (record, result)
            });
        }
        let Some(done) = running.join_next().await else {
            break;
        };
        let Ok((record, result)) = done else {
            out.failed += 1;
            continue;
        };
        match result {
            Ok(()) => out.opens += 1,
            Err(why) => {
                warn!(
                    "state store: open {} of {}\\{} not restored: {why}",
                    record.key(),
                    record.share,
                    record.path
                );
                out.failed += 1;
                let store = server.store.clone();
                let key = record.key();
                let _ = tokio::task::spawn_blocking(move || store.delete(SPACE, &key)).await;
            }
        }
    }
    server.smb.reserve_file_ids_through(highest);
    if out.opens + out.failed + out.corrupt > 0 {
        info!(
            restored = out.opens,
            failed = out.failed,
            corrupt = out.corrupt,
            "durable and persistent opens restored from the state store ({})",
            server.store.describe()
        );
    }
    out
}

/// Open the recorded file again, with the recorded access and share
/// access, and take its byte-range locks again (on the blocking pool).
async fn reopen(
    fs_share: braid_fs::ShareRef,
    server: &ServerState,
    r: &OpenRecord,
) -> Result<braid_fs::Opened, String> {
    let files = server.files.clone();
    let params = OpenParams {
        access: r.granted_access,
        share_access: r.share_access,
        directory: DirectoryRequirement::MustNotBeDirectory,
        ..OpenParams::new(r.path.clone(), r.granted_access, Disposition::Open)
    };
    let locks = r.locks.clone();
    // The open was authorized when it was made: reopened as the server,
    // not checked against the owner's access again.
    let ctx = RequestCtx::new(r.owner.clone());
    tokio::task::spawn_blocking(move || {
        let o = files
            .open(&ctx, &fs_share, params)
            .map_err(|e| e.to_string())?;
        for l in &locks {
            if let Err(e) = o.handle.lock(l.offset, l.length, l.exclusive, LOCK_OWNER) {
                let _ = o.handle.close();
                return Err(format!("its lock at {}+{}: {e}", l.offset, l.length));
            }
        }
        Ok(o)
    })
    .await
    .map_err(|e| e.to_string())?
}

async fn restore_one(server: &Arc<ServerState>, r: &OpenRecord) -> Result<(), String> {
    let share = server
        .share(&r.share)
        .ok_or_else(|| "the share is no longer served".to_string())?;
    let opened = reopen(share.fs.clone(), server, r).await?;
    let info = opened.info.clone();
    let file_id = FileId {
        persistent: r.persistent_id,
        volatile: r.persistent_id,
    };
    let oplocks = &server.smb.oplocks;
    let oplock_file = oplocks.file(&share.name, info.file_id, opened.handle.stream_key());
    let key = oplocks.new_key();
    let lease = r.lease.as_ref().map(|l| RestoredLease {
        id: (r.client_guid, l.key),
        version: l.version,
        parent_key: l.parent_key,
        state: l.state,
        epoch: l.epoch,
    });
    let restored_lease = oplock_file.restore(&oplocks.leases, key, file_id, r.oplock_level, lease);
    let durability = Durability {
        version: r.durable_version,
        persistent: r.persistent,
        create_guid: r.create_guid,
        timeout: Duration::from_millis(r.timeout_ms),
        owner: r.owner.clone(),
        client_guid: r.client_guid,
        app_instance: r.app_instance,
        app_version: r.app_instance_version,
        share: r.share.clone(),
        create_action: r.create_action,
    };
    // MS-SMB2 3.3.5.9.10: a client that never saw the answer to its create
    // (the server stopped first) replays it, and gets this open.
    let replay_eligible = r.durable_version == 2 && (r.persistent || r.replay_eligible);
    let create_reply = replay_eligible.then(|| {
        crate::smb::ops::create_durable::restored_create_reply(
            &info,
            &durability,
            file_id,
            restored_lease.as_deref(),
            r.oplock_level,
        )
    });
    let open = Arc::new(Open {
        oplock: Some(OplockRef {
            file: oplock_file,
            key,
        }),
        persistent_id: r.persistent_id,
        volatile_id: r.persistent_id,
        tree_id: 0.into(),
        is_directory: false,
        granted_access: opened.handle.granted_access(),
        handle: opened.handle,
        dir: Mutex::new(DirCursor::default()),
        closed: AtomicBool::new(false),
        close_signal: Default::default(),
        notify_watch: Mutex::new(None),
        host_interest: Mutex::new(None),
        host_watch_tried: AtomicBool::new(false),
        durable: Mutex::new(Some(durability)),
        create_guid: (r.durable_version == 2).then_some((r.create_guid, r.client_guid)),
        replay_eligible: AtomicBool::new(replay_eligible),
        create_reply: Mutex::new(create_reply),
        disconnects: AtomicU64::new(0),
        renamed: Default::default(),
        lock_sequences: Mutex::new(crate::smb::session::NO_LOCK_SEQUENCES),
        mode: 0.into(),
        client_slot: Mutex::new(None),
        persisted: Mutex::new(None),
    });
    let persisted = Persisted {
        store: server.store.clone(),
        key: r.key(),
    };
    if r.persistent {
        *open.persisted.lock().unwrap() = Some(persisted);
    } else {
        // A durable open kept by a graceful stop: from here on it lives as
        // it did before the stop, in memory only.
        let _ = tokio::task::spawn_blocking(move || persisted.forget()).await;
    }
    server.smb.preserved.preserve(open);
    server.smb.preserved.count_restored();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> OpenRecord {
        OpenRecord {
            persistent_id: 0x1234,
            durable_version: 2,
            persistent: true,
            create_guid: [1; 16],
            client_guid: [2; 16],
            app_instance: Some([3; 16]),
            app_instance_version: Some((7, 9)),
            owner: "alice".into(),
            share: "data".into(),
            path: "dir/file.txt".into(),
            granted_access: 0x0012_019f,
            share_access: 1,
            oplock_level: 0,
            lease: Some(LeaseRecord {
                key: [4; 16],
                version: 2,
                parent_key: None,
                state: 7,
                epoch: 3,
            }),
            locks: vec![LockRecord {
                offset: 0,
                length: 100,
                exclusive: true,
            }],
            timeout_ms: 60_000,
            written_unix_ms: 1,
            replay_eligible: true,
            create_action: 2,
        }
    }

    #[test]
    fn records_round_trip_through_json() {
        let r = sample();
        let bytes = serde_json::to_vec(&r).unwrap();
        let back: OpenRecord = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.key(), "0000000000001234");
    }

    #[test]
    fn a_record_written_before_replays_were_kept_reads_with_defaults() {
        let mut v = serde_json::to_value(sample()).unwrap();
        let fields = v.as_object_mut().unwrap();
        fields.remove("replay_eligible");
        fields.remove("create_action");
        let back: OpenRecord = serde_json::from_value(v).unwrap();
        assert!(!back.replay_eligible);
        assert_eq!(back.create_action, opened());
    }
}
