//! OP_OPEN (RFC 8881 18.16): find or create the file, check the caller may
//! read/write it, take a share reservation and an open stateid (one per
//! open owner and file: a second OPEN upgrades it, 9.11), open the fd the
//! I/O will use, and maybe hand out a read or write delegation (10.4).

use std::sync::Arc;

use braid_fs::posix::{CreateMode, Object, ObjectKind, SetAttrs};
use braid_nfs_proto::nfs4::attr::Bitmap;
use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs::{cinfo, decode_settable};
use crate::nfs::callback;
use crate::nfs::compound::Compound;
use crate::nfs::errors::nfs_status;
use crate::nfs::exports::Export;
use crate::nfs::fh::{check_component, Fh};
use crate::nfs::ops::open_reclaim::{self, Reclaim};
use crate::nfs::state::delegations;
use crate::nfs::state::opens::{self, OpenArgs, Refused};
use crate::nfs::state::stateids::{courtesy, resolve_real, session_client, IoFile, Kind};

pub fn run(c: &mut Compound, a: &OPEN4args) -> OPEN4res {
    match open(c, a) {
        Ok(r) => OPEN4res::NFS4_OK(r),
        Err(e) => OPEN4res::Default(e),
    }
}

const ACCESS_BITS: u32 = OPEN4_SHARE_ACCESS_BOTH;
/// RFC 8881 18.16.1: the "want" bits that may ride in share_access.
const WANT_BITS: u32 = OPEN4_SHARE_ACCESS_WANT_DELEG_MASK
    | OPEN4_SHARE_ACCESS_WANT_SIGNAL_DELEG_WHEN_RESRC_AVAIL
    | OPEN4_SHARE_ACCESS_WANT_PUSH_DELEG_WHEN_UNCONTENDED;

/// How long an OPEN waits for SMB clients to acknowledge a break.
const SMB_BREAK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Mode of a new file whose createattrs carry none.
const DEFAULT_MODE: u32 = 0o644;

fn open(c: &mut Compound, a: &OPEN4args) -> Result<OPEN4resok, nfsstat4> {
    let client = session_client(c)?;
    let access = a.share_access & ACCESS_BITS;
    let want = a.share_access & OPEN4_SHARE_ACCESS_WANT_DELEG_MASK;
    // RFC 9754 4: in NFSv4.2 a client may ask for delegated timestamps.
    // Braid does not delegate them: it grants (or refuses) a delegation as
    // if the flag were not there, and an ordinary OPEN_DELEGATE_READ or
    // _WRITE tells the client the timestamps stay the server's.
    let known = if c.minorversion >= 2 {
        ACCESS_BITS | WANT_BITS | OPEN4_SHARE_ACCESS_WANT_DELEG_TIMESTAMPS
    } else {
        ACCESS_BITS | WANT_BITS
    };
    // RFC 8881 18.16.3: access must name reading and/or writing; unknown
    // bits in either field are NFS4ERR_INVAL.
    if access == 0
        || a.share_access & !known != 0
        || a.share_deny & !OPEN4_SHARE_DENY_BOTH != 0
        || want > OPEN4_SHARE_ACCESS_WANT_CANCEL
    {
        return Err(NFS4ERR_INVAL);
    }
    if want == OPEN4_SHARE_ACCESS_WANT_CANCEL {
        return Err(NFS4ERR_INVAL);
    }

    // RFC 8881 8.4.2, 18.16.3: reclaims only during the grace period and
    // only by a client that held state before; nothing new during it.
    let reclaim = open_reclaim::of_claim(&a.claim)?;
    if reclaim != Reclaim::No {
        if client
            .reclaim_complete
            .load(std::sync::atomic::Ordering::Acquire)
            || !c.state.grace.may_reclaim(&client.owner)
        {
            return Err(NFS4ERR_NO_GRACE);
        }
    } else if c.state.grace.active()
        // RFC 8881 18.51.3: a new client ID takes no new state before its
        // RECLAIM_COMPLETE (RECC3).
        || !client.reclaim_complete.load(std::sync::atomic::Ordering::Acquire)
    {
        return Err(NFS4ERR_GRACE);
    }

    let creating = matches!(a.openhow, openflag4::OPEN4_CREATE(_));
    let (export, target) = c.current_object(if creating {
        NFS4ERR_ROFS
    } else {
        NFS4ERR_ISDIR
    })?;
    let cred = c.credentials(&export);
    let mut attrset = Bitmap::new();
    let mut created = false;
    let change;
    let obj = match &a.claim {
        open_claim4::CLAIM_NULL(name)
        | open_claim4::CLAIM_DELEGATE_CUR(open_claim_delegate_cur4 { file: name, .. }) => {
            if let open_claim4::CLAIM_DELEGATE_CUR(d) = &a.claim {
                check_delegation(c, &client, &d.delegate_stateid, None)?;
            }
            crate::nfs::fh::require_dir(&target)?;
            check_component(name)?;
            if let openflag4::OPEN4_CREATE(how) = &a.openhow {
                c.require_write(&export)?;
                let (mode, attrs, mask) = create_args(how)?;
                let (obj, made, dirchange) = export
                    .share
                    .create_file(&cred, &target, name, mode, mode_of(how), &attrs)
                    .map_err(|e| nfs_status(&e))?;
                created = made;
                if made {
                    attrset = mask;
                }
                change = cinfo(dirchange);
                obj
            } else {
                let obj = export
                    .share
                    .lookup(&cred, &target, name)
                    .map_err(|e| nfs_status(&e))?;
                let ch = export.share.getattr(&target).map(|a| a.change).unwrap_or(0);
                change = change_info4 {
                    atomic: true,
                    before: ch,
                    after: ch,
                };
                obj
            }
        }
        open_claim4::CLAIM_FH
        | open_claim4::CLAIM_PREVIOUS(_)
        | open_claim4::CLAIM_DELEG_CUR_FH(_) => {
            // RFC 8881 18.16.3: creating is only by name.
            if creating {
                return Err(NFS4ERR_INVAL);
            }
            if let open_claim4::CLAIM_DELEG_CUR_FH(sid) = &a.claim {
                check_delegation(c, &client, sid, Some(target.key()))?;
            }
            change = change_info4 {
                atomic: false,
                before: 0,
                after: 0,
            };
            target
        }
        // RFC 8881 10.2.1: delegations kept across the client's own
        // restart; Braid keeps none.
        open_claim4::CLAIM_DELEGATE_PREV(_) | open_claim4::CLAIM_DELEG_PREV_FH => {
            return Err(NFS4ERR_RECLAIM_BAD)
        }
    };
    // RFC 8881 18.16.3: only regular files are opened.
    match obj.kind() {
        ObjectKind::File => {}
        ObjectKind::Directory => return Err(NFS4ERR_ISDIR),
        _ => return Err(NFS4ERR_SYMLINK),
    }
    if access & OPEN4_SHARE_ACCESS_WRITE != 0 {
        c.require_write(&export)?;
    }
    open_reclaim::check(c, &client, reclaim, (&export, &obj), (access, a.share_deny))?;

    // Issue 42, MS-FSA 2.1.4.12: an open breaks SMB clients' write caching
    // of the file (they flush first); a client slow to answer gets
    // NFS4ERR_DELAY and retries while the break goes on.
    if let Some(grants) = c.state.grants.get() {
        let file = braid_fs::caching::CachedFile {
            share: &export.name,
            file_id: obj.fileid(),
        };
        let writes = access & OPEN4_SHARE_ACCESS_WRITE != 0;
        let breaking = grants.break_for("nfs", file, braid_fs::caching::Change::Open { writes });
        let done = c
            .runtime
            .block_on(async { tokio::time::timeout(SMB_BREAK_WAIT, breaking).await.is_ok() });
        if !done {
            return Err(NFS4ERR_DELAY);
        }
    }

    // The fd: the owner's, if it allows what is asked; else a new one with
    // everything the owner will hold, opened as the caller (so the mode
    // bits decide), except that the creator may use the file it made.
    let key = obj.key();
    let table = &c.state.stateids;
    let had = opens::existing(table, client.clientid, &a.owner.owner, key);
    let union = access | had.as_ref().map_or(0, |(acc, _)| *acc);
    let want_read = union & OPEN4_SHARE_ACCESS_READ != 0;
    let want_write = union & OPEN4_SHARE_ACCESS_WRITE != 0;
    let fits = had
        .as_ref()
        .is_some_and(|(_, io)| (io.read || !want_read) && (io.write || !want_write));
    let io = if fits {
        None
    } else {
        // A write-only open gets a read/write fd when the caller may read
        // too: clients read back to fill partial pages (RFC 8881 18.22.3
        // leaves that to the server; knfsd allows it).
        let rw = if !want_read {
            export
                .share
                .open_file(&cred, &obj, true, true, created)
                .ok()
        } else {
            None
        };
        let io = match rw {
            Some(file) => IoFile::new(file, true, true),
            None => IoFile::new(
                export
                    .share
                    .open_file(&cred, &obj, want_read, want_write, created)
                    .map_err(|e| nfs_status(&e))?,
                want_read,
                want_write,
            ),
        };
        Some(io)
    };

    let granted = opens::open(
        table,
        OpenArgs {
            client: &client,
            owner: &a.owner.owner,
            export: export.clone(),
            obj: obj.clone(),
            access,
            deny: a.share_deny,
            io,
            max_opens: c.state.limits.max_opens_per_client,
            lease: c.state.lease_time,
            expire: &courtesy(c),
            files: c.state.files.get().map(|f| &**f),
        },
    );
    let granted = match granted {
        Ok(g) => g,
        Err(Refused::Status(s)) => return Err(s),
        Err(Refused::Recall(r)) => {
            delegations::recall(c, r);
            return Err(NFS4ERR_DELAY);
        }
    };

    let delegation = delegation(
        c,
        &client,
        access,
        want,
        reclaim,
        (&export, &obj, &granted.stateid.other),
    );
    open_reclaim::granted(
        c,
        reclaim,
        !matches!(
            delegation,
            open_delegation4::OPEN_DELEGATE_NONE | open_delegation4::OPEN_DELEGATE_NONE_EXT(_)
        ),
    );
    c.set_current(Fh::Object {
        export: export.clone(),
        obj,
    })?;
    c.current_stateid = Some(granted.stateid.clone());
    Ok(OPEN4resok {
        stateid: granted.stateid,
        cinfo: change,
        rflags: OPEN4_RESULT_LOCKTYPE_POSIX,
        attrset: attrset.0,
        delegation,
    })
}

/// RFC 8881 18.16.3: the mode and attributes of a new file, and the mask
/// of what was asked (OPEN's attrset when the file is made).
fn create_args(how: &createhow4) -> Result<(u32, SetAttrs, Bitmap), nfsstat4> {
    let f = match how {
        createhow4::UNCHECKED4(f) | createhow4::GUARDED4(f) => f,
        createhow4::EXCLUSIVE4_1(v) => &v.cva_attrs,
        createhow4::EXCLUSIVE4(_) => return Ok((DEFAULT_MODE, SetAttrs::default(), Bitmap::new())),
    };
    let s = decode_settable(f)?;
    // RFC 8881 18.16.3: EXCLUSIVE4_1's attributes are those of
    // suppattr_exclcreat; times are not among them (the verifier may be
    // kept there by other servers).
    if matches!(how, createhow4::EXCLUSIVE4_1(_))
        && (s.set.atime.is_some() || s.set.mtime.is_some())
    {
        return Err(NFS4ERR_INVAL);
    }
    let mode = s.set.mode.unwrap_or(DEFAULT_MODE);
    Ok((mode, s.set, s.mask))
}

fn mode_of(how: &createhow4) -> CreateMode {
    match how {
        createhow4::UNCHECKED4(_) => CreateMode::Unchecked,
        createhow4::GUARDED4(_) => CreateMode::Guarded,
        createhow4::EXCLUSIVE4(v) => CreateMode::Exclusive { verifier: *v },
        createhow4::EXCLUSIVE4_1(v) => CreateMode::Exclusive {
            verifier: v.cva_verf,
        },
    }
}

/// CLAIM_DELEGATE_CUR / CLAIM_DELEG_CUR_FH: the delegation named must be
/// this client's (and of this file, when the file is known).
fn check_delegation(
    c: &Compound,
    client: &crate::nfs::state::clients::Client,
    sid: &stateid4,
    key: Option<(u64, u64)>,
) -> Result<(), nfsstat4> {
    let sid = resolve_real(c, sid)?;
    let inner = c.state.stateids.read();
    let st = inner.check(client.clientid, key, &sid)?;
    match st.kind {
        Kind::Deleg(_) => Ok(()),
        _ => Err(NFS4ERR_BAD_STATEID),
    }
}

/// RFC 8881 10.4 and 18.16.3: a read delegation for an open for reading
/// only, a write delegation for an open that writes, when the client did
/// not refuse one (or ask for the other kind) and can be called back; with
/// a "want" in the request, a refusal says why (OPEN_DELEGATE_NONE_EXT).
fn delegation(
    c: &Compound,
    client: &Arc<crate::nfs::state::clients::Client>,
    access: u32,
    want: u32,
    reclaim: Reclaim,
    (export, obj, open): (&Export, &Object, &crate::nfs::state::stateids::Other),
) -> open_delegation4 {
    let none = |why| {
        if want == OPEN4_SHARE_ACCESS_WANT_NO_PREFERENCE {
            open_delegation4::OPEN_DELEGATE_NONE
        } else {
            open_delegation4::OPEN_DELEGATE_NONE_EXT(why)
        }
    };
    // RFC 8881 18.16.3: a reclaimed delegation (checked against what the
    // client held) is granted again, to be returned at once when the
    // client cannot be called back (as knfsd sets `recall`).
    let reachable = callback::reachable(&c.state, client.clientid);
    let (write, recall) = match reclaim {
        Reclaim::Delegation { write } => (write, !reachable),
        Reclaim::Open => return none(open_none_delegation4::WND4_CONTENTION(false)),
        Reclaim::No => {
            if want == OPEN4_SHARE_ACCESS_WANT_NO_DELEG {
                return none(open_none_delegation4::Default(WND4_NOT_WANTED));
            }
            // The kind an open of this access may have: a write delegation
            // only with write access (as knfsd), a read one only without
            // (10.4: a read delegation holder does not write).
            let write = access & OPEN4_SHARE_ACCESS_WRITE != 0;
            let kind_refused = if write {
                want == OPEN4_SHARE_ACCESS_WANT_READ_DELEG
            } else {
                want == OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG
            };
            if kind_refused {
                return none(open_none_delegation4::WND4_CONTENTION(false));
            }
            if !reachable {
                return none(open_none_delegation4::WND4_RESOURCE(false));
            }
            (write, false)
        }
    };
    // Issue 42: a delegated file is watched for changes made on the
    // host, which recall its delegations (`crate::host_watch`); one that
    // cannot be watched is not delegated, so no client serves stale data
    // from its cache. A share whose admin turned host changes off is not
    // watched: nobody changes its files on the host, they say.
    let host_mark = match c.state.host_watch.get() {
        Some(watch) if export.notify_host_changes => {
            let file = crate::host_watch::FileToWatch::Object(obj);
            match watch.watch_file(&export.name, obj.fileid(), file) {
                Some(mark) => Some(mark),
                None => return none(open_none_delegation4::WND4_RESOURCE(false)),
            }
        }
        _ => None,
    };
    // Issue 42: no read delegation while an SMB client may write the
    // file, no write delegation while one has it open at all (checked in
    // one step with the grant: `delegations::grant`).
    let files = c.state.files.get().map(|f| &**f);
    let Some(stateid) =
        delegations::grant(&c.state.stateids, files, client, open, write, host_mark)
    else {
        return none(open_none_delegation4::WND4_CONTENTION(false));
    };
    // RFC 8881 10.4.1: an empty ACE: the client asks ACCESS.
    let permissions = nfsace4 {
        r#type: ACE4_ACCESS_ALLOWED_ACE_TYPE,
        flag: 0,
        access_mask: 0,
        who: Vec::new(),
    };
    if !write {
        return open_delegation4::OPEN_DELEGATE_READ(open_read_delegation4 {
            stateid,
            recall,
            permissions,
        });
    }
    open_delegation4::OPEN_DELEGATE_WRITE(open_write_delegation4 {
        stateid,
        recall,
        space_limit: space_limit(export, obj),
        permissions,
    })
}

/// RFC 8881 10.4.1 (nfs_space_limit4): how far the client may grow the
/// file from its cache before it must flush: the file's size now plus the
/// space free on its file system (the server cannot promise more; knfsd
/// sends no limit at all, u64::MAX).
fn space_limit(export: &Export, obj: &Object) -> nfs_space_limit4 {
    let size = export.share.getattr(obj).map(|a| a.size);
    let free = export.share.statfs(obj).map(|s| s.bytes_avail);
    let limit = match (size, free) {
        (Ok(size), Ok(free)) => size.saturating_add(free),
        _ => u64::MAX,
    };
    nfs_space_limit4::NFS_LIMIT_SIZE(limit)
}
