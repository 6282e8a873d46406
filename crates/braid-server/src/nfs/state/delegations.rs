//! Delegations (RFC 8881 10.4): read delegations granted on OPEN when no
//! one else writes the file, write delegations when no one else has it
//! open, and only to a client that can be called back; recalled
//! (CB_RECALL) when another client's OPEN or I/O conflicts, which waits
//! with NFS4ERR_DELAY until DELEGRETURN, or until a lease period after the
//! recall, when the delegation is revoked.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use braid_nfs_proto::nfs4::*;

use super::super::compound::Compound;
use super::super::exports::Export;
use super::super::NfsState;
use super::clients::Client;
use super::stateids::*;
use braid_fs::posix::Object;

/// A CB_RECALL to send.
pub struct Recall {
    pub clientid: clientid4,
    pub stateid: stateid4,
    pub fh: Vec<u8>,
}

/// RFC 8881 10.4.1 / 10.2: the delegations of other clients on `key` that
/// an access (writing, or only reading) conflicts with. None: no conflict.
/// Some(list): a conflict; `list` holds the recalls not sent yet (the
/// caller sends them, outside the lock). A delegation recalled more than
/// `lease` ago is revoked here and conflicts no more.
pub fn conflicting(
    inner: &mut Inner,
    key: FileKey,
    clientid: clientid4,
    write: bool,
    lease: Duration,
) -> Option<Vec<Recall>> {
    let delegs = inner.files.get(&key)?.delegs.clone();
    let mut conflict = false;
    let mut send = Vec::new();
    for other in delegs {
        let Some(st) = inner.states.get_mut(&other) else {
            continue;
        };
        let Kind::Deleg(d) = &mut st.kind else {
            continue;
        };
        if st.clientid == clientid || !(write || d.write) {
            continue;
        }
        match d.recalled {
            Some(t) if t.elapsed() > lease => {
                // RFC 8881 10.4.6? no: 8.3 / 10.2 — not returned within a
                // lease period of the recall: revoked.
                d.revoked = true;
                // A revoked delegation is nothing to reclaim.
                inner.held.released(&other);
                if let Some(cl) = d.client.upgrade() {
                    cl.status_flags
                        .fetch_or(SEQ4_STATUS_RECALLABLE_STATE_REVOKED, Ordering::AcqRel);
                }
                if let Some(f) = inner.files.get_mut(&key) {
                    f.delegs.retain(|x| *x != other);
                    f.delegation_gone();
                }
                continue;
            }
            Some(_) => {}
            None => {
                d.recalled = Some(Instant::now());
                send.push(Recall {
                    clientid: st.clientid,
                    stateid: stateid4 {
                        seqid: st.seqid,
                        other,
                    },
                    fh: st.obj.handle().to_vec(),
                });
            }
        }
        conflict = true;
    }
    conflict.then_some(send)
}

/// Courtesy clients (reaper.rs) holding delegations that an access
/// conflicts with lose their state first.
pub fn evict_expired(
    inner: &mut Inner,
    key: FileKey,
    clientid: clientid4,
    write: bool,
    expire: Expire<'_>,
) {
    let holders: Vec<clientid4> = match inner.files.get(&key) {
        Some(f) => f
            .delegs
            .iter()
            .filter_map(|o| match inner.states.get(o) {
                Some(
                    st @ State {
                        kind: Kind::Deleg(d),
                        ..
                    },
                ) if st.clientid != clientid && (write || d.write) => Some(st.clientid),
                _ => None,
            })
            .collect(),
        None => return,
    };
    for h in holders {
        inner.evict(h, expire);
    }
}

/// RFC 8881 10.4.1 / 10.2: before an operation that changes the file
/// `key` (SETATTR of its size, REMOVE or RENAME of a name of it), or its
/// data by a client without a delegation, the delegations other clients
/// hold on it are recalled: Err(NFS4ERR_DELAY) until they are returned
/// (or revoked a lease period after the recall). For other engineers'
/// operations: `delegations::break_for_change(c, obj.key())?`.
pub fn break_for_change(c: &Compound, key: FileKey) -> Result<(), nfsstat4> {
    break_for_access(c, key, true)
}

/// How long another client's GETATTR waits for the holder's CB_GETATTR
/// answer before the delegation is recalled instead.
pub const CB_GETATTR_WAIT: Duration = Duration::from_secs(2);

/// What another client's GETATTR reports of a file whose write delegation
/// holder modified it in its cache (RFC 8881 10.4.3): the holder's size,
/// and the file's change attribute plus `change_bump`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldBack {
    pub size: u64,
    pub change_bump: u64,
}

/// Whether any client holds a delegation of the file (a read lock on the
/// state table, nothing more).
pub fn delegated(c: &Compound, key: FileKey) -> bool {
    c.state
        .stateids
        .read()
        .files
        .get(&key)
        .is_some_and(|f| !f.delegs.is_empty())
}

/// RFC 8881 10.4.3: another client asking for the size or change
/// attribute of a file a client holds a write delegation of. The holder
/// is asked with CB_GETATTR (at most [`CB_GETATTR_WAIT`]): Ok(None) if it
/// has not modified the file (the file's own attributes are right),
/// Ok(Some) with what to report if it has. A holder that does not answer
/// (or a delegation being recalled) falls back to the recall:
/// Err(NFS4ERR_DELAY) until it is returned or revoked.
pub fn ask_holder(c: &Compound, key: FileKey) -> Result<Option<HeldBack>, nfsstat4> {
    // GETATTR is the commonest operation: the table's write lock only
    // for a file someone holds a delegation of.
    if !delegated(c, key) {
        return Ok(None);
    }
    let client = session_client(c)?;
    let holder = {
        let inner = c.state.stateids.lock();
        let f = inner.files.get(&key);
        let mut write_delegs = f.into_iter().flat_map(|f| &f.delegs).filter_map(|o| {
            let st = inner.states.get(o)?;
            match &st.kind {
                Kind::Deleg(d) if d.write && st.clientid != client.clientid => Some((*o, st, d)),
                _ => None,
            }
        });
        match write_delegs.next() {
            Some((other, st, d)) if d.recalled.is_none() && !d.revoked => {
                Some((other, st.clientid, st.obj.handle().to_vec()))
            }
            // Being recalled already, or revoked: as before.
            Some(_) => None,
            // Read delegations only: nothing held back.
            None => return Ok(None),
        }
    };
    let answer = match holder {
        Some((other, holder, fh)) => {
            let state = c.state.clone();
            // On a task of its own: a callback given up on mid-way would
            // leave the backchannel slot's sequence out of step.
            let call = c
                .runtime
                .spawn(async move { super::super::callback::getattr(&state, holder, fh).await });
            let asked = c.runtime.block_on(async move {
                tokio::time::timeout(CB_GETATTR_WAIT, call)
                    .await
                    .ok()
                    .and_then(|joined| joined.ok())
                    .flatten()
            });
            asked.map(|a| (other, a))
        }
        None => None,
    };
    if let Some((other, a)) = answer {
        let mut inner = c.state.stateids.lock();
        if let Some(State {
            kind: Kind::Deleg(d),
            ..
        }) = inner.states.get_mut(&other)
        {
            if !d.revoked && d.recalled.is_none() {
                return Ok(d.cb.answered(a.change).map(|change_bump| HeldBack {
                    size: a.size,
                    change_bump,
                }));
            }
        }
    }
    break_for_access(c, key, false).map(|()| None)
}

/// Recall the delegations of other clients that an access (`write`: a
/// change; else a read) conflicts with; NFS4ERR_DELAY while any stands.
fn break_for_access(c: &Compound, key: FileKey, write: bool) -> Result<(), nfsstat4> {
    let client = session_client(c)?;
    let expire = courtesy(c);
    let recalls = {
        let mut inner = c.state.stateids.lock();
        evict_expired(&mut inner, key, client.clientid, write, &expire);
        conflicting(&mut inner, key, client.clientid, write, c.state.lease_time)
    };
    match recalls {
        None => Ok(()),
        Some(r) => {
            recall(c, r);
            Err(NFS4ERR_DELAY)
        }
    }
}

/// How long an open of the other protocol waits for NFS clients to return
/// the delegations it recalled (then it goes on; the delegations are
/// revoked a lease period after the recall if still not returned).
pub const OTHER_OPEN_WAIT: Duration = Duration::from_secs(5);

/// Issue 42, RFC 8881 10.4.1: an SMB open of file `fileid` of share
/// `share` that writes (or any open, against a write delegation) recalls
/// the NFS delegations of the file and waits, up to [`OTHER_OPEN_WAIT`],
/// until they are returned, so that NFS clients do not go on reading what
/// they cached.
pub async fn recall_for_other_open(state: &Arc<NfsState>, share: &str, fileid: u64, write: bool) {
    let Some(export) = state.exports.by_name(share) else {
        return;
    };
    // One share is one file system (braid-fs's POSIX face): its dev.
    let key = (export.share.root().key().0, fileid);
    let deadline = Instant::now() + OTHER_OPEN_WAIT;
    loop {
        let recalls = {
            let mut inner = state.stateids.lock();
            // Client id 0 is nobody's: every holder is "another client".
            conflicting(&mut inner, key, 0, write, state.lease_time)
        };
        let Some(recalls) = recalls else {
            return;
        };
        for r in recalls {
            tokio::spawn(super::super::callback::recall(
                state.clone(),
                r.clientid,
                r.stateid,
                r.fh,
            ));
        }
        if Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Send the recalls, each on its own task (the operation answers
/// NFS4ERR_DELAY at once and the client retries).
pub fn recall(c: &Compound, recalls: Vec<Recall>) {
    for r in recalls {
        let state = c.state.clone();
        c.runtime.spawn(super::super::callback::recall(
            state, r.clientid, r.stateid, r.fh,
        ));
    }
}

/// RFC 8881 10.4: after an OPEN by `open_other`, a delegation of the file
/// to its client, if nothing stands in the way. A read delegation: nobody
/// writes the file (no open for writing by anyone, no write delegation),
/// no delegation of it is being recalled, and this client holds none on it
/// yet. A write delegation (`write`, for an open that writes): besides,
/// no other client has the file open or locked and nobody holds any
/// delegation of it (10.4: a write delegation excludes every other
/// client's access).
///
/// Issue 42: SMB opens (`files`, braid-fs's open table) are checked and
/// the delegation recorded in one step under the file's lock there
/// (`FileService::grant_unless_smb_open`): no read delegation while an SMB
/// open may write, no write delegation while one exists; an SMB open
/// registered after it finds it through the caching registry, whose
/// `held` waits for this table's lock, held here until it is recorded.
///
/// `host_mark`: the file's mark for changes made on the host, kept while
/// the file is delegated (the caller made it, outside the lock).
pub fn grant(
    table: &StateTable,
    files: Option<&braid_fs::FileService>,
    client: &Arc<Client>,
    open_other: &Other,
    write: bool,
    host_mark: Option<crate::host_watch::FileInterest>,
) -> Option<stateid4> {
    let mut inner = table.lock();
    let open = inner.states.get(open_other)?;
    let Kind::Open(o) = &open.kind else {
        return None;
    };
    // The holder may serve reads from its cache too: only where its fd
    // may read (a write-only open by a caller who may read has one).
    if write && !(o.access & OPEN4_SHARE_ACCESS_WRITE != 0 && o.io.write && o.io.read) {
        return None;
    }
    let key = open.key;
    let io = o.io.clone();
    let (export, obj) = (open.export.clone(), open.obj.clone());
    let f = inner.files.get(&key)?;
    let in_the_way = if write {
        let others_open = f.opens.iter().any(|x| {
            inner
                .states
                .get(x)
                .is_none_or(|st| st.clientid != client.clientid)
        });
        let others_lock = f.locks.iter().any(|l| l.clientid != client.clientid);
        others_open || others_lock || !f.delegs.is_empty()
    } else {
        let writers = f.opens.iter().any(|x| {
            matches!(inner.states.get(x), Some(State { kind: Kind::Open(o), .. })
                if o.access & OPEN4_SHARE_ACCESS_WRITE != 0)
        });
        let delegated = f.delegs.iter().any(|x| {
            matches!(inner.states.get(x), Some(st @ State { kind: Kind::Deleg(d), .. })
                if d.write || d.recalled.is_some() || st.clientid == client.clientid)
        });
        writers || delegated || !f.locks.is_empty()
    };
    if in_the_way {
        return None;
    }
    let record = || {
        record_grant(
            table,
            &mut inner,
            client,
            (key, export, obj, io),
            write,
            host_mark,
        )
    };
    match files {
        Some(files) => files.grant_unless_smb_open(key.0, key.1, write, record),
        None => record(),
    }
}

/// Enter a delegation of file `key` to `client` in the table.
fn record_grant(
    table: &StateTable,
    inner: &mut Inner,
    client: &Arc<Client>,
    (key, export, obj, io): (FileKey, Arc<Export>, Object, IoFile),
    write: bool,
    host_mark: Option<crate::host_watch::FileInterest>,
) -> Option<stateid4> {
    // RFC 8881 10.4.3: what later CB_GETATTR answers are compared with.
    let change_at_grant = if write {
        export.share.getattr(&obj).map(|a| a.change).ok()?
    } else {
        0
    };
    let other = table.new_other();
    inner.states.insert(
        other,
        State {
            seqid: 1,
            clientid: client.clientid,
            key,
            owner: Vec::new(),
            export,
            obj,
            kind: Kind::Deleg(DelegState {
                write,
                recalled: None,
                revoked: false,
                io,
                client: Arc::downgrade(client),
                cb: CbGetattr {
                    change_at_grant,
                    ..CbGetattr::default()
                },
            }),
        },
    );
    let f = inner.file(key);
    f.delegs.push(other);
    if f.host_mark.is_none() {
        f.host_mark = host_mark;
    }
    client
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .delegs
        .insert(other);
    inner.note_held(client, &other);
    Some(stateid4 { seqid: 1, other })
}

/// RFC 8881 18.6.3: DELEGRETURN of a delegation of the current file.
/// A revoked one is NFS4ERR_DELEG_REVOKED (and stays until FREE_STATEID).
pub fn delegreturn(
    table: &StateTable,
    client: &Client,
    key: FileKey,
    sid: &stateid4,
) -> Result<Vec<State>, nfsstat4> {
    let mut inner = table.lock();
    let st = inner.check(client.clientid, Some(key), sid)?;
    if !matches!(st.kind, Kind::Deleg(_)) {
        return Err(NFS4ERR_BAD_STATEID);
    }
    Ok(inner.remove(client, &sid.other))
}

/// After FREE_STATEID of a revoked delegation: with none left, the client
/// stops seeing SEQ4_STATUS_RECALLABLE_STATE_REVOKED (RFC 8881 18.46.3).
pub fn clear_revoked_flag(inner: &Inner, client: &Client) {
    let cs = client.state.lock().unwrap_or_else(|e| e.into_inner());
    let any = cs.delegs.iter().any(
        |o| matches!(inner.states.get(o), Some(State { kind: Kind::Deleg(d), .. }) if d.revoked),
    );
    if !any {
        client
            .status_flags
            .fetch_and(!SEQ4_STATUS_RECALLABLE_STATE_REVOKED, Ordering::AcqRel);
    }
}
