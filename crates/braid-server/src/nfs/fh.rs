//! Filehandles (RFC 8881 4.2): the pseudo-root that lists the exports
//! (RFC 8881 7.3), and objects of an export, whose handles braid-fs seals
//! so they cannot be forged into another share (`braid_fs::posix`).

use std::sync::Arc;

use braid_fs::posix::{Credentials, Object, ObjectKind, PosixShare, MAX_HANDLE};
use braid_nfs_proto::nfs4::*;

use super::compound::Compound;
use super::errors::{nfs_status, Status};
use super::export::{ExportAccess, SecFlavor};
use super::exports::Export;
use super::rpc::Caller;
use super::state::delegations;
use super::NfsState;

/// The pseudo-root's handle. Export handles begin with braid-fs's
/// version byte (1), so the two never meet.
pub const PSEUDO_ROOT: &[u8] = b"\xfebraid:pseudo-root";

/// The pseudo file system's own fsid (exports use their export id).
pub const PSEUDO_FSID: fsid4 = fsid4 { major: 0, minor: 0 };

#[derive(Clone)]
pub enum Fh {
    /// The root of the pseudo file system: a directory of the exports.
    Pseudo,
    Object {
        export: Arc<Export>,
        obj: Object,
    },
}

impl Fh {
    pub fn handle(&self) -> Vec<u8> {
        match self {
            Fh::Pseudo => PSEUDO_ROOT.to_vec(),
            Fh::Object { obj, .. } => obj.handle().to_vec(),
        }
    }

    // RFC 8881 4.2.3, 18.19.3: a malformed handle is NFS4ERR_BADHANDLE; one
    // of ours whose object or export is gone is NFS4ERR_STALE.
    pub fn from_wire(state: &NfsState, handle: &[u8]) -> Result<Fh, nfsstat4> {
        if handle.is_empty() || handle.len() > MAX_HANDLE {
            return Err(NFS4ERR_BADHANDLE);
        }
        if handle == PSEUDO_ROOT {
            return Ok(Fh::Pseudo);
        }
        let id = PosixShare::export_id_of(handle).ok_or(NFS4ERR_BADHANDLE)?;
        let export = state.exports.by_id(id).ok_or(NFS4ERR_STALE)?;
        let obj = export.share.resolve(handle).map_err(|e| nfs_status(&e))?;
        Ok(Fh::Object { export, obj })
    }

    /// [`from_wire`](Self::from_wire) without waiting: `Ok(None)` when
    /// the handle's object is not among those braid-fs keeps open (it
    /// would need an `open_by_handle_at`), or needs a second look; the
    /// caller then resolves it where it may wait.
    pub fn from_wire_cached(state: &NfsState, handle: &[u8]) -> Result<Option<Fh>, nfsstat4> {
        if handle.is_empty() || handle.len() > MAX_HANDLE {
            return Err(NFS4ERR_BADHANDLE);
        }
        if handle == PSEUDO_ROOT {
            return Ok(Some(Fh::Pseudo));
        }
        let id = PosixShare::export_id_of(handle).ok_or(NFS4ERR_BADHANDLE)?;
        let export = state.exports.by_id(id).ok_or(NFS4ERR_STALE)?;
        let obj = export
            .share
            .resolve_cached(handle)
            .map_err(|e| nfs_status(&e))?;
        Ok(obj.map(|obj| Fh::Object { export, obj }))
    }

    pub fn fsid(&self) -> fsid4 {
        match self {
            Fh::Pseudo => PSEUDO_FSID,
            Fh::Object { export, .. } => fsid4 {
                major: export.id as u64,
                minor: 0,
            },
        }
    }
}

/// RFC 8881 14.1, 14.4: names and tags are UTF-8, and a server may refuse
/// what is not (NFS4ERR_INVAL). Braid serves the same directories over
/// SMB, whose names are UTF-16: a name that is not well-formed UTF-8
/// (overlong forms, surrogates, truncated sequences) could never be shown
/// to an SMB client, so it is refused rather than stored. Unicode's
/// noncharacters (U+FDD0..U+FDEF and the last two code points of every
/// plane, U+FFFE the byte-swapped BOM among them) are refused too: they
/// are reserved for a program's internal use, never for interchange
/// (Unicode 15, 23.7), and a U+FFFE at the start of a UTF-16 name reads as
/// a byte-order mark.
pub fn is_valid_utf8(s: &[u8]) -> bool {
    match std::str::from_utf8(s) {
        Ok(s) => !s.chars().any(is_noncharacter),
        Err(_) => false,
    }
}

/// Unicode 15, 23.7: the 66 noncharacters.
fn is_noncharacter(ch: char) -> bool {
    let c = ch as u32;
    (0xFDD0..=0xFDEF).contains(&c) || c & 0xFFFE == 0xFFFE
}

/// RFC 8881 18.13.3 (LOOKUP), 18.4.3, 18.25.3, 18.26.3 (CREATE, REMOVE,
/// RENAME) and 14.5: a component name from a client. Empty or not valid
/// UTF-8 ([`is_valid_utf8`]): NFS4ERR_INVAL; longer than a name may be:
/// NFS4ERR_NAMETOOLONG; "." or "..", or holding '/' or NUL:
/// NFS4ERR_BADNAME.
pub fn check_component(name: &[u8]) -> Result<(), nfsstat4> {
    if name.is_empty() || !is_valid_utf8(name) {
        return Err(NFS4ERR_INVAL);
    }
    if name.len() > braid_fs::posix::MAX_NAME {
        return Err(NFS4ERR_NAMETOOLONG);
    }
    if name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0) {
        return Err(NFS4ERR_BADNAME);
    }
    Ok(())
}

/// RFC 8881 18.13.3: a directory operation on something that is not a
/// directory: NFS4ERR_SYMLINK for a symbolic link, else NFS4ERR_NOTDIR.
pub fn require_dir(obj: &Object) -> Result<(), nfsstat4> {
    match obj.kind() {
        ObjectKind::Directory => Ok(()),
        ObjectKind::Symlink => Err(NFS4ERR_SYMLINK),
        _ => Err(NFS4ERR_NOTDIR),
    }
}

impl Compound {
    /// The saved filehandle (RENAME's source directory, LINK's source).
    pub fn saved_fh(&self) -> Result<&Fh, nfsstat4> {
        self.saved.as_ref().ok_or(NFS4ERR_NOFILEHANDLE)
    }

    /// The current filehandle (the dispatch table already checked there is
    /// one for operations that need it).
    pub fn current_fh(&self) -> Result<&Fh, nfsstat4> {
        self.current.as_ref().ok_or(NFS4ERR_NOFILEHANDLE)
    }

    /// The current filehandle as an object of an export (operations on
    /// files); the pseudo-root answers `pseudo`.
    pub fn current_object(&self, pseudo: nfsstat4) -> Result<(Arc<Export>, Object), nfsstat4> {
        match self.current_fh()? {
            Fh::Pseudo => Err(pseudo),
            Fh::Object { export, obj } => Ok((export.clone(), obj.clone())),
        }
    }

    /// What this client may do on `export` (exports(5): client rules,
    /// read-only, privileged source port).
    pub fn export_access(&self, export: &Export) -> ExportAccess {
        export.options.access_for(self.conn.peer)
    }

    /// RFC 8881 18.16.3, 18.32.3 etc.: changes on a read-only export are
    /// NFS4ERR_ROFS.
    pub fn require_write(&self, export: &Export) -> Result<(), nfsstat4> {
        match self.export_access(export) {
            ExportAccess::ReadWrite => Ok(()),
            ExportAccess::ReadOnly => Err(NFS4ERR_ROFS),
            ExportAccess::Denied => Err(NFS4ERR_ACCESS),
        }
    }

    /// The RPC flavour of this compound's caller.
    pub fn flavor(&self) -> SecFlavor {
        match self.caller {
            Caller::Anonymous => SecFlavor::None,
            Caller::Sys { .. } => SecFlavor::Sys,
        }
    }

    /// RFC 8881 2.6.3.1: whether the caller's flavour is one `fh`'s export
    /// takes (its `nfs_sec`). The pseudo-root takes what any export takes,
    /// so a client can always walk to the export it may use.
    pub fn flavor_ok(&self, fh: &Fh) -> bool {
        let f = self.flavor();
        match fh {
            Fh::Object { export, .. } => export.options.allows_flavor(f),
            Fh::Pseudo => {
                f == SecFlavor::Sys
                    || self
                        .state
                        .exports
                        .all()
                        .iter()
                        .any(|e| e.options.allows_flavor(f))
            }
        }
    }

    /// RFC 8881 2.6.3.1.1: a put-filehandle operation (PUTFH, PUTROOTFH,
    /// PUTPUBFH, RESTOREFH) whose filehandle the caller's flavour may not
    /// use answers NFS4ERR_WRONGSEC only when the next operation would use
    /// it as it is: not when it is the last one (2.6.3.1.1.6), nor before
    /// another put-filehandle (.2), LOOKUP or LOOKUPP (.3, .4: they judge
    /// what they reach), SECINFO or SECINFO_NO_NAME (.5), or SAVEFH (.1:
    /// it checks itself).
    pub fn put_fh_flavor_check(&self, fh: &Fh) -> Result<(), nfsstat4> {
        if self.flavor_ok(fh) {
            return Ok(());
        }
        match self.next_op {
            None
            | Some(
                OP_PUTFH | OP_PUTROOTFH | OP_PUTPUBFH | OP_RESTOREFH | OP_LOOKUP | OP_LOOKUPP
                | OP_SECINFO | OP_SECINFO_NO_NAME | OP_SAVEFH,
            ) => Ok(()),
            Some(_) => Err(NFS4ERR_WRONGSEC),
        }
    }

    /// RFC 8881 10.4.4: a change to `obj` another client's delegation
    /// would hide from it (its attributes, its names: SETATTR, REMOVE,
    /// RENAME, LINK) first recalls that delegation; the operation answers
    /// NFS4ERR_DELAY until it is returned (or revoked a lease later).
    pub fn recall_delegations(&self, key: (u64, u64)) -> Result<(), nfsstat4> {
        // It first evicts courtesy clients whose delegations are in the way.
        delegations::break_for_change(self, key)
    }

    /// Removing a name of `obj` (REMOVE, or RENAME moving or replacing
    /// it) meets SMB's share modes: while an SMB open of it does not share
    /// delete, NFS4ERR_FILE_OPEN (RFC 8881 18.25.4, 18.26.4: the server
    /// does not allow removing a file that is open), as an SMB delete
    /// would get a sharing violation.
    pub fn check_smb_share_delete(&self, (dev, ino): (u64, u64)) -> Result<(), nfsstat4> {
        let Some(files) = self.state.files.get() else {
            return Ok(());
        };
        files.check_delete(dev, ino).map_err(|_| NFS4ERR_FILE_OPEN)
    }

    /// What REMOVE and RENAME check of each object whose name they take
    /// away, before they do: SMB's share modes, then other clients'
    /// delegations.
    pub fn before_unlink(&self, key: (u64, u64)) -> Result<(), Status> {
        self.check_smb_share_delete(key).map_err(Status)?;
        self.recall_delegations(key).map_err(Status)
    }

    /// The caller's ids on `export`, after its squashing.
    pub fn credentials(&self, export: &Export) -> Credentials {
        match &self.caller {
            Caller::Anonymous => export.options.map_credentials(None, None, &[]),
            Caller::Sys { uid, gid, gids, .. } => {
                export.options.map_credentials(Some(*uid), Some(*gid), gids)
            }
        }
    }

    /// Make `fh` current, if this client may use its export. RFC 8881
    /// 16.2.3.1.2: an operation that changes the current filehandle and
    /// produces no stateid leaves no current stateid (as knfsd does for
    /// PUTFH, LOOKUP, LOOKUPP, CREATE); OPEN sets its stateid after this.
    pub fn set_current(&mut self, fh: Fh) -> Result<(), nfsstat4> {
        if let Fh::Object { export, .. } = &fh {
            if self.export_access(export) == ExportAccess::Denied {
                return Err(NFS4ERR_ACCESS);
            }
        }
        self.current = Some(fh);
        self.current_stateid = None;
        Ok(())
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn names_that_are_not_valid_utf8_are_inval() {
        // pynfs's list (server41tests/environment.py) and a few more.
        let bad: &[&[u8]] = &[
            b"\xc0\xc1",
            b"\xe0\x8a",
            b"\xc0\xaf",
            b"\xfc\x80\x80\x80\x80\xaf",
            b"\xed\xa0\x80",
            b"\xed\xbf\xbf",
            b"\xef\xbf\xbe",
            b"\xef\xbf\xbf",
            b"\xef\xb7\x90",
            b"\xf4\x8f\xbf\xbe",
            b"\x80",
            b"\xff",
            b"\xc0 ",
            b"a\xe3\xc0\xc0",
        ];
        for name in bad {
            assert_eq!(check_component(name), Err(NFS4ERR_INVAL), "{name:?}");
            assert!(!is_valid_utf8(name), "{name:?}");
        }
    }

    #[test]
    fn valid_utf8_names_pass() {
        for name in [
            "a",
            "caf\u{e9}",
            "\u{65e5}\u{672c}",
            "\u{1f600}",
            "\u{fffd}",
            "\u{fdcf}",
        ] {
            assert_eq!(check_component(name.as_bytes()), Ok(()), "{name}");
        }
        assert!(is_valid_utf8(b""));
    }
}
