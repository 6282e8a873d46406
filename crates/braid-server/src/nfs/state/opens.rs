//! Open state (RFC 8881 9.7, 9.11, 18.16, 18.18, 18.2): share
//! reservations between the opens of a file, one open stateid per open
//! owner and file, upgrades and downgrades, CLOSE.

use std::sync::Arc;

use braid_fs::posix::Object;
use braid_fs::share_reservation::Reservation;
use braid_nfs_proto::nfs4::*;

use super::super::exports::Export;
use super::clients::Client;
use super::delegations::{self, Recall};
use super::stateids::*;

/// Why an OPEN cannot be granted now.
pub enum Refused {
    Status(nfsstat4),
    /// Delegations of other clients stand in the way: recall them and
    /// answer NFS4ERR_DELAY.
    Recall(Vec<Recall>),
}

impl From<nfsstat4> for Refused {
    fn from(s: nfsstat4) -> Self {
        Refused::Status(s)
    }
}

/// What the open owner already holds on the file: its access and the fd.
pub fn existing(
    table: &StateTable,
    client: clientid4,
    owner: &[u8],
    key: FileKey,
) -> Option<(u32, IoFile)> {
    let inner = table.read();
    let other = inner.open_owners.get(&(client, owner.to_vec(), key))?;
    match &inner.states.get(other)?.kind {
        Kind::Open(o) => Some((o.access, o.io.clone())),
        _ => None,
    }
}

/// RFC 8881 9.7: two opens conflict when one's access meets the other's
/// deny. `skip` is the open being upgraded (it cannot conflict with
/// itself). Returns the client holding the first conflicting open.
pub fn share_conflict(
    inner: &Inner,
    key: FileKey,
    access: u32,
    deny: u32,
    skip: Option<&Other>,
) -> Option<clientid4> {
    let f = inner.files.get(&key)?;
    f.opens
        .iter()
        .filter(|o| Some(*o) != skip)
        .find_map(|o| match inner.states.get(o) {
            Some(
                st @ State {
                    kind: Kind::Open(x),
                    ..
                },
            ) if x.deny & access != 0 || x.access & deny != 0 => Some(st.clientid),
            _ => None,
        })
}

pub struct Granted {
    pub stateid: stateid4,
    /// A new open stateid (false: an upgrade of the owner's open).
    pub new: bool,
}

pub struct OpenArgs<'a> {
    pub client: &'a Client,
    pub owner: &'a [u8],
    pub export: Arc<Export>,
    pub obj: Object,
    pub access: u32,
    pub deny: u32,
    /// A fresh fd when the owner's one does not allow the access wanted.
    pub io: Option<IoFile>,
    pub max_opens: usize,
    pub lease: std::time::Duration,
    pub expire: Expire<'a>,
    /// braid-fs's file service, whose share-mode table SMB opens are in.
    pub files: Option<&'a braid_fs::FileService>,
}

/// An NFS share reservation as braid-fs's (RFC 8881 9.7 access and deny
/// bits).
pub fn reservation(access: u32, deny: u32) -> Reservation {
    Reservation {
        read: access & OPEN4_SHARE_ACCESS_READ != 0,
        write: access & OPEN4_SHARE_ACCESS_WRITE != 0,
        deny_read: deny & OPEN4_SHARE_DENY_READ != 0,
        deny_write: deny & OPEN4_SHARE_DENY_WRITE != 0,
    }
}

/// RFC 8881 18.16.3 / 9.11: grant the open, or upgrade the owner's open
/// of the file (same `other`, seqid + 1), after the share reservation and
/// delegation checks.
pub fn open(table: &StateTable, a: OpenArgs<'_>) -> Result<Granted, Refused> {
    let key = a.obj.key();
    let clientid = a.client.clientid;
    let mut inner = table.lock();
    let mine = inner
        .open_owners
        .get(&(clientid, a.owner.to_vec(), key))
        .copied();
    let (had_access, had_deny) = match mine.and_then(|o| inner.states.get(&o)) {
        Some(State {
            kind: Kind::Open(o),
            ..
        }) => (o.access, o.deny),
        _ => (0, 0),
    };
    let access = had_access | a.access;
    let deny = had_deny | a.deny;
    // A conflicting open of a courtesy client goes; a live one denies.
    while let Some(holder) = share_conflict(&inner, key, access, deny, mine.as_ref()) {
        if holder == clientid || !inner.evict(holder, a.expire) {
            return Err(Refused::Status(NFS4ERR_SHARE_DENIED));
        }
    }
    let write = access & OPEN4_SHARE_ACCESS_WRITE != 0;
    delegations::evict_expired(&mut inner, key, clientid, write, a.expire);
    if let Some(recalls) = delegations::conflicting(&mut inner, key, clientid, write, a.lease) {
        return Err(Refused::Recall(recalls));
    }
    if let Some(other) = mine {
        if let Some(State {
            seqid,
            kind: Kind::Open(o),
            ..
        }) = inner.states.get_mut(&other)
        {
            // SMB opens of the file (issue 42): a conflict is a share
            // denial as between NFS opens.
            if let Some(r) = &o.reservation {
                if r.update(reservation(access, deny)).is_err() {
                    return Err(Refused::Status(NFS4ERR_SHARE_DENIED));
                }
            }
            *seqid = next_seqid(*seqid);
            o.access = access;
            o.deny = deny;
            o.access_seen |= 1 << a.access;
            o.deny_seen |= 1 << a.deny;
            if let Some(io) = a.io {
                o.io = io;
            }
            let stateid = stateid4 {
                seqid: *seqid,
                other,
            };
            inner.note_held(a.client, &other);
            return Ok(Granted {
                stateid,
                new: false,
            });
        }
    }
    let Some(io) = a.io else {
        // The fd was the owner's, whose open went (a racing CLOSE).
        return Err(Refused::Status(NFS4ERR_DELAY));
    };
    {
        let cs = a.client.state.lock().unwrap_or_else(|e| e.into_inner());
        if cs.opens.len() >= a.max_opens {
            return Err(Refused::Status(NFS4ERR_RESOURCE));
        }
    }
    let reserved = match a.files {
        Some(files) => match files.reserve(key.0, key.1, reservation(access, deny)) {
            Ok(r) => Some(r),
            Err(_) => return Err(Refused::Status(NFS4ERR_SHARE_DENIED)),
        },
        None => None,
    };
    let other = table.new_other();
    inner.states.insert(
        other,
        State {
            seqid: 1,
            clientid,
            key,
            owner: a.owner.to_vec(),
            export: a.export,
            obj: a.obj,
            kind: Kind::Open(OpenState {
                access,
                deny,
                access_seen: 1 << a.access,
                deny_seen: 1 << a.deny,
                io,
                locks: Vec::new(),
                reservation: reserved,
            }),
        },
    );
    inner.file(key).opens.push(other);
    inner
        .open_owners
        .insert((clientid, a.owner.to_vec(), key), other);
    a.client
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .opens
        .insert(other);
    inner.note_held(a.client, &other);
    Ok(Granted {
        stateid: stateid4 { seqid: 1, other },
        new: true,
    })
}

/// Seqids wrap past u32::MAX to 1 (0 means "current", RFC 8881 8.2.2).
pub fn next_seqid(s: u32) -> u32 {
    if s == u32::MAX {
        1
    } else {
        s + 1
    }
}

/// RFC 8881 18.2.3: CLOSE. The open goes with its lock stateids; an open
/// owner whose locks are still held may not close (NFS4ERR_LOCKS_HELD).
/// Returns the states removed, to be dropped outside the table's lock.
pub fn close(
    table: &StateTable,
    client: &Client,
    key: FileKey,
    sid: &stateid4,
) -> Result<(stateid4, Vec<State>), nfsstat4> {
    let mut inner = table.lock();
    let st = inner.check(client.clientid, Some(key), sid)?;
    let Kind::Open(o) = &st.kind else {
        return Err(NFS4ERR_BAD_STATEID);
    };
    let held = inner
        .files
        .get(&key)
        .is_some_and(|f| f.locks.iter().any(|r| o.locks.contains(&r.stateid)));
    if held {
        return Err(NFS4ERR_LOCKS_HELD);
    }
    let seqid = next_seqid(st.seqid);
    let other = sid.other;
    let gone = inner.remove(client, &other);
    Ok((stateid4 { seqid, other }, gone))
}

/// RFC 8881 18.18.3: OPEN_DOWNGRADE to access/deny that the owner opened
/// with before (else NFS4ERR_INVAL), the same stateid with seqid + 1.
pub fn downgrade(
    table: &StateTable,
    client: &Client,
    key: FileKey,
    sid: &stateid4,
    access: u32,
    deny: u32,
) -> Result<stateid4, nfsstat4> {
    let mut inner = table.lock();
    inner.check(client.clientid, Some(key), sid)?;
    let Some(State {
        seqid,
        kind: Kind::Open(o),
        ..
    }) = inner.states.get_mut(&sid.other)
    else {
        return Err(NFS4ERR_BAD_STATEID);
    };
    if access & !o.access != 0 || deny & !o.deny != 0 {
        return Err(NFS4ERR_INVAL);
    }
    // The values asked for must each have been opened with (as knfsd
    // checks it); what stays recorded is what the new mode still covers.
    if o.access_seen & (1 << access) == 0 || o.deny_seen & (1 << deny) == 0 {
        return Err(NFS4ERR_INVAL);
    }
    let within = |seen: u8, mode: u32| {
        (0..4u32)
            .filter(|v| seen & (1 << v) != 0 && v & !mode == 0)
            .fold(0u8, |acc, v| acc | (1 << v))
    };
    if let Some(r) = &o.reservation {
        // Less than before: SMB opens cannot be in the way.
        let _ = r.update(reservation(access, deny));
    }
    o.access_seen = within(o.access_seen, access);
    o.deny_seen = within(o.deny_seen, deny);
    o.access = access;
    o.deny = deny;
    *seqid = next_seqid(*seqid);
    let stateid = stateid4 {
        seqid: *seqid,
        other: sid.other,
    };
    inner.note_held(client, &sid.other);
    Ok(stateid)
}
