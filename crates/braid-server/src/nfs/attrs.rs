//! File attributes (RFC 8881 5): braid-fs's `PosixAttr` as NFSv4 attributes
//! for GETATTR, READDIR, VERIFY and NVERIFY, the pseudo-root's own, and the
//! attributes a client may set (SETATTR, CREATE, OPEN's createattrs).

use braid_fs::posix::{DirChange, PosixAttr, SetAttrs, SetTime, Timespec};
use braid_nfs_proto::nfs4::attr::{decode_attrs, encode_attrs, AttrError, Bitmap, FileAttrs};
use braid_nfs_proto::nfs4::*;

use super::errors::nfs_status;
use super::exports::Export;
use super::fh::Fh;
use super::NfsState;

/// RFC 8881 5.6, 5.7: the attributes Braid supports (supported_attrs).
/// Not here: acl and the other ACL attributes (aclsupport says 0), archive,
/// hidden and system (Windows flags a POSIX file system does not keep),
/// fs_locations, quotas, mimetype, time_backup, the pNFS attributes.
pub const SUPPORTED: &[u32] = &[
    FATTR4_SUPPORTED_ATTRS,
    FATTR4_TYPE,
    FATTR4_FH_EXPIRE_TYPE,
    FATTR4_CHANGE,
    FATTR4_SIZE,
    FATTR4_LINK_SUPPORT,
    FATTR4_SYMLINK_SUPPORT,
    FATTR4_NAMED_ATTR,
    FATTR4_FSID,
    FATTR4_UNIQUE_HANDLES,
    FATTR4_LEASE_TIME,
    FATTR4_RDATTR_ERROR,
    FATTR4_ACLSUPPORT,
    FATTR4_CANSETTIME,
    FATTR4_CASE_INSENSITIVE,
    FATTR4_CASE_PRESERVING,
    FATTR4_CHOWN_RESTRICTED,
    FATTR4_FILEHANDLE,
    FATTR4_FILEID,
    FATTR4_FILES_AVAIL,
    FATTR4_FILES_FREE,
    FATTR4_FILES_TOTAL,
    FATTR4_HOMOGENEOUS,
    FATTR4_MAXFILESIZE,
    FATTR4_MAXLINK,
    FATTR4_MAXNAME,
    FATTR4_MAXREAD,
    FATTR4_MAXWRITE,
    FATTR4_MODE,
    FATTR4_NO_TRUNC,
    FATTR4_NUMLINKS,
    FATTR4_OWNER,
    FATTR4_OWNER_GROUP,
    FATTR4_RAWDEV,
    FATTR4_SPACE_AVAIL,
    FATTR4_SPACE_FREE,
    FATTR4_SPACE_TOTAL,
    FATTR4_SPACE_USED,
    FATTR4_TIME_ACCESS,
    FATTR4_TIME_ACCESS_SET,
    FATTR4_TIME_CREATE,
    FATTR4_TIME_DELTA,
    FATTR4_TIME_METADATA,
    FATTR4_TIME_MODIFY,
    FATTR4_TIME_MODIFY_SET,
    FATTR4_MOUNTED_ON_FILEID,
    FATTR4_SUPPATTR_EXCLCREAT,
];

/// RFC 8881 5.5: the attributes a client may set; every other supported
/// one is read-only (setting it is NFS4ERR_INVAL).
pub const WRITABLE: &[u32] = &[
    FATTR4_SIZE,
    FATTR4_MODE,
    FATTR4_OWNER,
    FATTR4_OWNER_GROUP,
    FATTR4_TIME_ACCESS_SET,
    FATTR4_TIME_MODIFY_SET,
];

/// RFC 8881 5.8.1.14 (suppattr_exclcreat): what OPEN's
/// EXCLUSIVE4_1 may set with the file; the times are left out because
/// knfsd and the Linux client keep the verifier's file times as they are.
pub const EXCLCREAT: &[u32] = &[FATTR4_SIZE, FATTR4_MODE, FATTR4_OWNER, FATTR4_OWNER_GROUP];

/// The pseudo-root's fileid; the exports' places in it get their own.
pub const PSEUDO_ROOT_FILEID: u64 = 1;

/// Where an export's root sits in the pseudo file system: its
/// mounted_on_fileid (RFC 8881 5.8.2.23), distinct from fileid 1 and from
/// every other export's.
pub fn pseudo_fileid(export: &Export) -> u64 {
    0x1_0000_0000 | export.id as u64
}

pub fn supported() -> Bitmap {
    Bitmap::from_bits(SUPPORTED)
}

/// NFSv4.2's attributes Braid adds to the 4.1 set (RFC 7862 12.2, RFC 8276
/// 8.1, RFC 9754 3): shown and answered only in a 4.2 compound, as knfsd
/// keeps one supported set per minor version.
pub const SUPPORTED_42: &[u32] = &[FATTR4_XATTR_SUPPORT, FATTR4_OPEN_ARGUMENTS];

/// RFC 9754 3: the OPEN arguments `ops/open.rs` accepts, each bitmap
/// holding the enum values supported. Left out: the want values OPEN
/// refuses or ignores (CANCEL, the SIGNAL and PUSH hints, RFC 9754's
/// delegated timestamps and OPEN_XOR_DELEGATION), and the claims of a
/// delegation held before a restart (DELEGATE_PREV, DELEG_PREV_FH: no
/// delegation is reclaimed, they are NFS4ERR_RECLAIM_BAD).
pub fn open_arguments() -> open_arguments4 {
    let bits = |v: &[i32]| Bitmap::from_bits(&v.iter().map(|b| *b as u32).collect::<Vec<_>>()).0;
    open_arguments4 {
        oa_share_access: bits(&[
            OPEN_ARGS_SHARE_ACCESS_READ.0,
            OPEN_ARGS_SHARE_ACCESS_WRITE.0,
            OPEN_ARGS_SHARE_ACCESS_BOTH.0,
        ]),
        oa_share_deny: bits(&[
            OPEN_ARGS_SHARE_DENY_NONE.0,
            OPEN_ARGS_SHARE_DENY_READ.0,
            OPEN_ARGS_SHARE_DENY_WRITE.0,
            OPEN_ARGS_SHARE_DENY_BOTH.0,
        ]),
        oa_share_access_want: bits(&[
            OPEN_ARGS_SHARE_ACCESS_WANT_ANY_DELEG.0,
            OPEN_ARGS_SHARE_ACCESS_WANT_NO_DELEG.0,
        ]),
        oa_open_claim: bits(&[
            OPEN_ARGS_OPEN_CLAIM_NULL.0,
            OPEN_ARGS_OPEN_CLAIM_PREVIOUS.0,
            OPEN_ARGS_OPEN_CLAIM_DELEGATE_CUR.0,
            OPEN_ARGS_OPEN_CLAIM_FH.0,
            OPEN_ARGS_OPEN_CLAIM_DELEG_CUR_FH.0,
        ]),
        oa_create_mode: bits(&[
            OPEN_ARGS_CREATEMODE_UNCHECKED4.0,
            OPEN_ARGS_CREATE_MODE_GUARDED.0,
            OPEN_ARGS_CREATEMODE_EXCLUSIVE4.0,
            OPEN_ARGS_CREATE_MODE_EXCLUSIVE4_1.0,
        ]),
    }
}

/// The supported attributes in `minor` (1 or 2).
pub fn supported_in(minor: u32) -> Bitmap {
    let mut b = supported();
    if minor >= 2 {
        for bit in SUPPORTED_42 {
            b.set(*bit);
        }
    }
    b
}

/// Largest file: what Linux's 64-bit off_t allows.
const MAX_FILE_SIZE: u64 = i64::MAX as u64;
/// Hard links per file: ext4's limit, the tightest of the common file
/// systems Braid serves.
const MAX_LINK: u32 = 65000;

fn time(t: Timespec) -> nfstime4 {
    nfstime4 {
        seconds: t.sec,
        nseconds: t.nsec,
    }
}

fn ftype(kind: braid_fs::posix::ObjectKind) -> nfs_ftype4 {
    use braid_fs::posix::ObjectKind::*;
    match kind {
        File => NF4REG,
        Directory => NF4DIR,
        Symlink => NF4LNK,
        BlockDevice => NF4BLK,
        CharDevice => NF4CHR,
        Fifo => NF4FIFO,
        Socket => NF4SOCK,
    }
}

/// RFC 8881 5.9: owners as strings. With AUTH_SYS, Braid speaks numeric
/// ids, as Linux does without an idmapper ("1000").
pub fn owner_string(id: u32) -> Vec<u8> {
    id.to_string().into_bytes()
}

/// A client's owner string: a decimal id only (RFC 8881 5.9 lets a server
/// refuse what it cannot map: NFS4ERR_BADOWNER).
pub fn parse_owner(s: &[u8]) -> Result<u32, nfsstat4> {
    if s.is_empty() || s.len() > 10 || !s.iter().all(u8::is_ascii_digit) {
        return Err(NFS4ERR_BADOWNER);
    }
    std::str::from_utf8(s)
        .ok()
        .and_then(|t| t.parse::<u32>().ok())
        .ok_or(NFS4ERR_BADOWNER)
}

/// Values common to every object of every file system here.
fn constants(state: &NfsState, a: &mut FileAttrs, requested: &Bitmap, minor: u32) {
    let want = |bit| requested.contains(bit);
    if want(FATTR4_SUPPORTED_ATTRS) {
        a.supported_attrs = Some(supported_in(minor));
    }
    // RFC 8276 8.1: user xattrs on every object the file system keeps them
    // for (the operations answer NFS4ERR_NOTSUPP where it does not).
    a.xattr_support = Some(true);
    a.fh_expire_type = Some(FH4_PERSISTENT);
    a.link_support = Some(true);
    a.symlink_support = Some(true);
    a.named_attr = Some(false);
    a.unique_handles = Some(true);
    a.lease_time = Some(state.lease_time.as_secs().min(u32::MAX as u64) as u32);
    a.rdattr_error = Some(NFS4_OK);
    a.aclsupport = Some(0);
    a.cansettime = Some(true);
    a.case_insensitive = Some(false);
    a.case_preserving = Some(true);
    a.chown_restricted = Some(true);
    a.homogeneous = Some(true);
    a.maxfilesize = Some(MAX_FILE_SIZE);
    a.maxlink = Some(MAX_LINK);
    a.maxname = Some(braid_fs::posix::MAX_NAME as u32);
    a.maxread = Some(state.limits.max_io as u64);
    a.maxwrite = Some(state.limits.max_io as u64);
    a.no_trunc = Some(true);
    a.time_delta = Some(nfstime4 {
        seconds: 0,
        nseconds: 1,
    });
    if want(FATTR4_OPEN_ARGUMENTS) {
        a.open_arguments = Some(open_arguments());
    }
    if want(FATTR4_SUPPATTR_EXCLCREAT) {
        a.suppattr_exclcreat = Some(Bitmap::from_bits(EXCLCREAT));
    }
}

/// The attributes of `fh` (those of `requested` that are supported; a
/// GETATTR leaves out what it does not support, RFC 8881 18.7.3).
pub fn file_attrs(
    state: &NfsState,
    fh: &Fh,
    requested: &Bitmap,
    minor: u32,
) -> Result<FileAttrs, nfsstat4> {
    file_attrs_from(state, fh, requested, minor, Stat::MayWait)
}

/// How `file_attrs` reads an object's attributes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stat {
    MayWait,
    /// From memory only (`PosixShare::getattr_cached`).
    Cached,
}

/// The file-system counters (statfs): never read on the reactor.
const FS_COUNTERS: [u32; 6] = [
    FATTR4_FILES_AVAIL,
    FATTR4_FILES_FREE,
    FATTR4_FILES_TOTAL,
    FATTR4_SPACE_AVAIL,
    FATTR4_SPACE_FREE,
    FATTR4_SPACE_TOTAL,
];

/// `encode_for` on the reactor: the attributes of an object of an export
/// from what the kernel holds in memory. None (nothing done) for the
/// pseudo-root and when the file-system counters are asked for (statfs):
/// the caller then asks where it may wait.
pub fn encode_cached(
    state: &NfsState,
    fh: &Fh,
    requested: &Bitmap,
    minor: u32,
) -> Option<Result<fattr4, nfsstat4>> {
    let want = requested.intersect(&supported_in(minor));
    if matches!(fh, Fh::Pseudo) || FS_COUNTERS.iter().any(|b| want.contains(*b)) {
        return None;
    }
    Some(file_attrs_from(state, fh, &want, minor, Stat::Cached).map(|a| encode_attrs(&a, &want)))
}

fn file_attrs_from(
    state: &NfsState,
    fh: &Fh,
    requested: &Bitmap,
    minor: u32,
    stat: Stat,
) -> Result<FileAttrs, nfsstat4> {
    let mut a = FileAttrs::default();
    constants(state, &mut a, requested, minor);
    a.fsid = Some(fh.fsid());
    match fh {
        Fh::Pseudo => pseudo_root(state, &mut a),
        Fh::Object { export, obj } => {
            let p = match stat {
                Stat::MayWait => export.share.getattr(obj),
                Stat::Cached => export.share.getattr_cached(obj),
            }
            .map_err(|e| nfs_status(&e))?;
            posix(&mut a, &p);
            a.filehandle = Some(obj.handle().to_vec());
            a.mounted_on_fileid = Some(if obj.is_root() {
                pseudo_fileid(export)
            } else {
                p.fileid
            });
            if FS_COUNTERS.iter().any(|b| requested.contains(*b)) {
                let st = export.share.statfs(obj).map_err(|e| nfs_status(&e))?;
                a.files_avail = Some(st.files_avail);
                a.files_free = Some(st.files_free);
                a.files_total = Some(st.files_total);
                a.space_avail = Some(st.bytes_avail);
                a.space_free = Some(st.bytes_free);
                a.space_total = Some(st.bytes_total);
            }
        }
    }
    Ok(a)
}

fn posix(a: &mut FileAttrs, p: &PosixAttr) {
    a.r#type = Some(ftype(p.kind));
    a.change = Some(p.change);
    a.size = Some(p.size);
    a.fileid = Some(p.fileid);
    a.mode = Some(p.mode & 0o7777);
    a.numlinks = Some(p.nlink);
    a.owner = Some(owner_string(p.uid));
    a.owner_group = Some(owner_string(p.gid));
    a.rawdev = Some(specdata4 {
        specdata1: p.rdev_major,
        specdata2: p.rdev_minor,
    });
    a.space_used = Some(p.space_used);
    a.time_access = Some(time(p.atime));
    a.time_modify = Some(time(p.mtime));
    a.time_metadata = Some(time(p.ctime));
    a.time_create = p.btime.map(time);
}

/// RFC 8881 7.3: the pseudo-root is a read-only directory owned by root,
/// holding one entry per export. Its change attribute follows the export
/// list, so a client re-reads it after a reload changed the exports.
fn pseudo_root(state: &NfsState, a: &mut FileAttrs) {
    let exports = state.exports.all();
    let mut change: u64 = 0xcbf2_9ce4_8422_2325;
    for e in &exports {
        for b in e.name.as_bytes().iter().chain(&e.id.to_be_bytes()) {
            change ^= *b as u64;
            change = change.wrapping_mul(0x0100_0000_01b3);
        }
    }
    let boot = nfstime4 {
        seconds: state.boot_epoch as i64,
        nseconds: 0,
    };
    a.r#type = Some(NF4DIR);
    a.change = Some(change);
    a.size = Some(4096);
    a.fileid = Some(PSEUDO_ROOT_FILEID);
    a.mounted_on_fileid = Some(PSEUDO_ROOT_FILEID);
    a.mode = Some(0o555);
    a.numlinks = Some(2 + exports.len() as u32);
    a.owner = Some(owner_string(0));
    a.owner_group = Some(owner_string(0));
    a.rawdev = Some(specdata4 {
        specdata1: 0,
        specdata2: 0,
    });
    a.filehandle = Some(super::fh::PSEUDO_ROOT.to_vec());
    a.space_used = Some(0);
    a.space_avail = Some(0);
    a.space_free = Some(0);
    a.space_total = Some(0);
    a.files_avail = Some(0);
    a.files_free = Some(0);
    a.files_total = Some(exports.len() as u64 + 1);
    a.time_access = Some(boot.clone());
    a.time_modify = Some(boot.clone());
    a.time_metadata = Some(boot.clone());
    a.time_create = Some(boot);
}

/// RFC 8881 18.7.3: the requested attributes of `fh`, encoded; unsupported
/// ones are left out of the reply's mask.
pub fn encode_for(
    state: &NfsState,
    fh: &Fh,
    requested: &Bitmap,
    minor: u32,
) -> Result<fattr4, nfsstat4> {
    let want = requested.intersect(&supported_in(minor));
    let a = file_attrs(state, fh, &want, minor)?;
    Ok(encode_attrs(&a, &want))
}

/// As `encode_for`, with `patch` applied to the attributes first (what a
/// write delegation's holder reports in place of the file's own: RFC 8881
/// 10.4.3).
pub fn encode_for_with(
    state: &NfsState,
    fh: &Fh,
    requested: &Bitmap,
    minor: u32,
    patch: impl FnOnce(&mut FileAttrs),
) -> Result<fattr4, nfsstat4> {
    let want = requested.intersect(&supported_in(minor));
    let mut a = file_attrs(state, fh, &want, minor)?;
    patch(&mut a);
    Ok(encode_attrs(&a, &want))
}

/// braid-fs's before/after sample of a directory as change_info4.
pub fn cinfo(d: DirChange) -> change_info4 {
    change_info4 {
        atomic: d.atomic,
        before: d.before,
        after: d.after,
    }
}

/// `bitmap4` from a client, at most 8 words (else NFS4ERR_BADXDR).
pub fn request_bitmap(b: &bitmap4) -> Result<Bitmap, nfsstat4> {
    Bitmap::from_wire(b).map_err(|_| NFS4ERR_BADXDR)
}

/// What a client asked to set, in braid-fs's terms, and the mask of what
/// it asked for (the attrsset of SETATTR/CREATE on success).
#[derive(Debug, Default)]
pub struct Settable {
    pub set: SetAttrs,
    pub mask: Bitmap,
}

fn attr_error(e: AttrError) -> nfsstat4 {
    match e {
        AttrError::Unsupported(_) => NFS4ERR_ATTRNOTSUPP,
        AttrError::Xdr(_) => NFS4ERR_BADXDR,
        AttrError::Inval(_) => NFS4ERR_INVAL,
    }
}

/// RFC 8881 18.30.3 (and 18.4.3, 18.16.3's createattrs): decodes the
/// attributes to set. An attribute Braid does not support is
/// NFS4ERR_ATTRNOTSUPP, a read-only one NFS4ERR_INVAL, an owner that is
/// not a numeric id NFS4ERR_BADOWNER.
pub fn decode_settable(f: &fattr4) -> Result<Settable, nfsstat4> {
    let mask = request_bitmap(&f.attrmask)?;
    let a = decode_attrs(f).map_err(attr_error)?;
    let supported = supported();
    if mask.iter().any(|b| !supported.contains(b)) {
        return Err(NFS4ERR_ATTRNOTSUPP);
    }
    if mask.iter().any(|b| !WRITABLE.contains(&b)) {
        return Err(NFS4ERR_INVAL);
    }
    let settime = |t: &Option<settime4>| {
        t.as_ref().map(|t| match t {
            settime4::SET_TO_CLIENT_TIME4(t) => SetTime::Client(Timespec {
                sec: t.seconds,
                nsec: t.nseconds,
            }),
            settime4::Default(_) => SetTime::ServerNow,
        })
    };
    let set = SetAttrs {
        // Only the permission bits: the file type is not the client's to set.
        mode: a.mode.map(|m| m & 0o7777),
        uid: a.owner.as_deref().map(parse_owner).transpose()?,
        gid: a.owner_group.as_deref().map(parse_owner).transpose()?,
        size: a.size,
        atime: settime(&a.time_access_set),
        mtime: settime(&a.time_modify_set),
    };
    Ok(Settable { set, mask })
}

/// RFC 8881 18.31.3, 18.15.3: the attributes of a VERIFY/NVERIFY as the
/// client sent them and as the object has them, both encoded the same way
/// (so comparing bytes compares values).
pub fn verify_pair(
    state: &NfsState,
    fh: &Fh,
    f: &fattr4,
    minor: u32,
) -> Result<(fattr4, fattr4), nfsstat4> {
    let mask = request_bitmap(&f.attrmask)?;
    let theirs = decode_attrs(f).map_err(attr_error)?;
    let supported = supported_in(minor);
    if mask.iter().any(|b| !supported.contains(b)) {
        return Err(NFS4ERR_ATTRNOTSUPP);
    }
    // RFC 8881 18.31.3: rdattr_error is not a value to compare; the
    // write-only time settings have no value to compare at all.
    let invalid = [
        FATTR4_RDATTR_ERROR,
        FATTR4_TIME_ACCESS_SET,
        FATTR4_TIME_MODIFY_SET,
    ];
    if invalid.iter().any(|b| mask.contains(*b)) {
        return Err(NFS4ERR_INVAL);
    }
    let ours = file_attrs(state, fh, &mask, minor)?;
    Ok((encode_attrs(&theirs, &mask), encode_attrs(&ours, &mask)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_numeric() {
        assert_eq!(parse_owner(b"1000"), Ok(1000));
        assert_eq!(parse_owner(b"0"), Ok(0));
        assert_eq!(parse_owner(b"4294967295"), Ok(u32::MAX));
        for bad in [
            &b""[..],
            b"4294967296",
            b"root",
            b"1000@x",
            b"-1",
            b"+5",
            b" 1",
        ] {
            assert_eq!(parse_owner(bad), Err(NFS4ERR_BADOWNER), "{bad:?}");
        }
        assert_eq!(owner_string(1000), b"1000");
    }

    #[test]
    fn settable_rules() {
        let f = |a: &FileAttrs| encode_attrs(a, &a.present());
        let ok = FileAttrs {
            mode: Some(0o100644),
            owner: Some(b"12".to_vec()),
            ..Default::default()
        };
        let s = decode_settable(&f(&ok)).unwrap();
        assert_eq!(s.set.mode, Some(0o644));
        assert_eq!(s.set.uid, Some(12));
        let ro = FileAttrs {
            fileid: Some(3),
            ..Default::default()
        };
        assert_eq!(decode_settable(&f(&ro)).unwrap_err(), NFS4ERR_INVAL);
        let unsupported = FileAttrs {
            hidden: Some(true),
            ..Default::default()
        };
        assert_eq!(
            decode_settable(&f(&unsupported)).unwrap_err(),
            NFS4ERR_ATTRNOTSUPP
        );
        let badowner = FileAttrs {
            owner_group: Some(b"staff".to_vec()),
            ..Default::default()
        };
        assert_eq!(
            decode_settable(&f(&badowner)).unwrap_err(),
            NFS4ERR_BADOWNER
        );
    }
}
