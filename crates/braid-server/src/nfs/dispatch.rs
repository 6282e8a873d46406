//! The table of NFSv4.1 and 4.2 operations (RFC 8881 18, RFC 7862 15) and the one `match`
//! that routes each to its file under `ops/`, as nfs-ganesha's `optabv4[]`.
//! The per-operation facts (needs a current filehandle, is a metadata
//! operation, metric name) are read by the compound loop and the metrics.

use braid_nfs_proto::nfs4::*;

use super::compound::Compound;
use super::ops;

/// Facts about one operation.
#[derive(Clone, Copy, Debug)]
pub struct OpInfo {
    pub name: &'static str,
    /// RFC 8881 18: the operation works on the current filehandle and
    /// fails with NFS4ERR_NOFILEHANDLE without one.
    pub needs_fh: bool,
    /// Counted as a metadata operation (metrics, QoS class).
    pub metadata: bool,
    /// Served (4.2's operations only in a 4.2 compound: OP_ILLEGAL in
    /// 4.1); false: NFS4ERR_NOTSUPP (4.0-only and unimplemented optional
    /// operations).
    pub supported: bool,
}

pub fn info(op: nfs_opnum4) -> OpInfo {
    let n = op.name();
    let (needs_fh, metadata, supported) = match op {
        OP_ACCESS => (true, true, true),
        OP_CLOSE => (true, true, true),
        OP_COMMIT => (true, false, true),
        OP_CREATE => (true, true, true),
        OP_DELEGPURGE => (false, false, false),
        OP_DELEGRETURN => (true, false, true),
        OP_GETATTR => (true, true, true),
        OP_GETFH => (true, false, true),
        OP_LINK => (true, true, true),
        OP_LOCK => (true, true, true),
        OP_LOCKT => (true, true, true),
        OP_LOCKU => (true, true, true),
        OP_LOOKUP => (true, true, true),
        OP_LOOKUPP => (true, true, true),
        OP_NVERIFY => (true, true, true),
        OP_OPEN => (true, true, true),
        OP_OPENATTR => (true, false, false),
        OP_OPEN_CONFIRM => (false, false, false),
        OP_OPEN_DOWNGRADE => (true, true, true),
        OP_PUTFH => (false, false, true),
        OP_PUTPUBFH => (false, false, true),
        OP_PUTROOTFH => (false, false, true),
        OP_READ => (true, false, true),
        OP_READDIR => (true, true, true),
        OP_READLINK => (true, true, true),
        OP_REMOVE => (true, true, true),
        OP_RENAME => (true, true, true),
        OP_RENEW => (false, false, false),
        OP_RESTOREFH => (false, false, true),
        OP_SAVEFH => (true, false, true),
        OP_SECINFO => (true, true, true),
        OP_SETATTR => (true, true, true),
        OP_SETCLIENTID => (false, false, false),
        OP_SETCLIENTID_CONFIRM => (false, false, false),
        OP_VERIFY => (true, true, true),
        OP_WRITE => (true, false, true),
        OP_RELEASE_LOCKOWNER => (false, false, false),
        OP_BACKCHANNEL_CTL => (false, false, true),
        OP_BIND_CONN_TO_SESSION => (false, false, true),
        OP_EXCHANGE_ID => (false, false, true),
        OP_CREATE_SESSION => (false, false, true),
        OP_DESTROY_SESSION => (false, false, true),
        OP_FREE_STATEID => (false, false, true),
        OP_GET_DIR_DELEGATION => (true, false, false),
        OP_GETDEVICEINFO => (false, false, false),
        OP_GETDEVICELIST => (false, false, false),
        OP_LAYOUTCOMMIT => (true, false, false),
        OP_LAYOUTGET => (true, false, false),
        OP_LAYOUTRETURN => (true, false, false),
        OP_SECINFO_NO_NAME => (true, true, true),
        OP_SEQUENCE => (false, false, true),
        OP_SET_SSV => (false, false, false),
        OP_TEST_STATEID => (false, false, true),
        OP_WANT_DELEGATION => (false, false, false),
        OP_DESTROY_CLIENTID => (false, false, true),
        OP_RECLAIM_COMPLETE => (false, false, true),
        OP_ALLOCATE => (true, false, true),
        OP_COPY => (true, false, true),
        OP_COPY_NOTIFY => (false, false, false),
        OP_DEALLOCATE => (true, false, true),
        OP_IO_ADVISE => (false, false, false),
        OP_LAYOUTERROR => (false, false, false),
        OP_LAYOUTSTATS => (false, false, false),
        OP_OFFLOAD_CANCEL => (false, false, false),
        OP_OFFLOAD_STATUS => (false, false, false),
        OP_READ_PLUS => (true, false, true),
        OP_SEEK => (true, false, true),
        OP_WRITE_SAME => (false, false, false),
        OP_CLONE => (true, true, true),
        OP_GETXATTR => (true, true, true),
        OP_SETXATTR => (true, true, true),
        OP_LISTXATTRS => (true, true, true),
        OP_REMOVEXATTR => (true, true, true),
        _ => (false, false, false),
    };
    OpInfo {
        name: n,
        needs_fh,
        metadata,
        supported,
    }
}

/// Operations of NFSv4.2 (RFC 7862), not of minor version 1: in a 4.1
/// COMPOUND they are NFS4ERR_OP_ILLEGAL (RFC 8881 15.2).
pub fn is_v42(op: nfs_opnum4) -> bool {
    op.0 >= OP_ALLOCATE.0 && op != OP_ILLEGAL
}

/// Run one operation.
pub fn dispatch(c: &mut Compound, op: &nfs_argop4) -> nfs_resop4 {
    let opnum = op.discriminant();
    let facts = info(opnum);
    if is_v42(opnum) && c.minorversion < 2 {
        return error_result(OP_ILLEGAL, NFS4ERR_OP_ILLEGAL);
    }
    if !facts.supported {
        return error_result(opnum, NFS4ERR_NOTSUPP);
    }
    if facts.needs_fh && c.current.is_none() {
        return error_result(opnum, NFS4ERR_NOFILEHANDLE);
    }
    match op {
        nfs_argop4::OP_ACCESS(a) => nfs_resop4::OP_ACCESS(ops::access::run(c, a)),
        nfs_argop4::OP_CLOSE(a) => nfs_resop4::OP_CLOSE(ops::close::run(c, a)),
        nfs_argop4::OP_COMMIT(a) => nfs_resop4::OP_COMMIT(ops::commit::run(c, a)),
        nfs_argop4::OP_CREATE(a) => nfs_resop4::OP_CREATE(ops::create::run(c, a)),
        nfs_argop4::OP_DELEGRETURN(a) => nfs_resop4::OP_DELEGRETURN(ops::delegreturn::run(c, a)),
        nfs_argop4::OP_GETATTR(a) => nfs_resop4::OP_GETATTR(ops::getattr::run(c, a)),
        nfs_argop4::OP_GETFH => nfs_resop4::OP_GETFH(ops::getfh::run(c)),
        nfs_argop4::OP_LINK(a) => nfs_resop4::OP_LINK(ops::link::run(c, a)),
        nfs_argop4::OP_LOCK(a) => nfs_resop4::OP_LOCK(ops::lock::run(c, a)),
        nfs_argop4::OP_LOCKT(a) => nfs_resop4::OP_LOCKT(ops::lockt::run(c, a)),
        nfs_argop4::OP_LOCKU(a) => nfs_resop4::OP_LOCKU(ops::locku::run(c, a)),
        nfs_argop4::OP_LOOKUP(a) => nfs_resop4::OP_LOOKUP(ops::lookup::run(c, a)),
        nfs_argop4::OP_LOOKUPP => nfs_resop4::OP_LOOKUPP(ops::lookupp::run(c)),
        nfs_argop4::OP_NVERIFY(a) => nfs_resop4::OP_NVERIFY(ops::nverify::run(c, a)),
        nfs_argop4::OP_OPEN(a) => nfs_resop4::OP_OPEN(ops::open::run(c, a)),
        nfs_argop4::OP_OPEN_DOWNGRADE(a) => {
            nfs_resop4::OP_OPEN_DOWNGRADE(ops::open_downgrade::run(c, a))
        }
        nfs_argop4::OP_PUTFH(a) => nfs_resop4::OP_PUTFH(ops::putfh::run(c, a)),
        nfs_argop4::OP_PUTPUBFH => nfs_resop4::OP_PUTPUBFH(ops::putpubfh::run(c)),
        nfs_argop4::OP_PUTROOTFH => nfs_resop4::OP_PUTROOTFH(ops::putrootfh::run(c)),
        nfs_argop4::OP_READ(a) => nfs_resop4::OP_READ(ops::read::run(c, a)),
        nfs_argop4::OP_READ_PLUS(a) => nfs_resop4::OP_READ_PLUS(ops::read_plus::run(c, a)),
        nfs_argop4::OP_CLONE(a) => nfs_resop4::OP_CLONE(ops::clone::run(c, a)),
        nfs_argop4::OP_READDIR(a) => nfs_resop4::OP_READDIR(ops::readdir::run(c, a)),
        nfs_argop4::OP_READLINK => nfs_resop4::OP_READLINK(ops::readlink::run(c)),
        nfs_argop4::OP_REMOVE(a) => nfs_resop4::OP_REMOVE(ops::remove::run(c, a)),
        nfs_argop4::OP_RENAME(a) => nfs_resop4::OP_RENAME(ops::rename::run(c, a)),
        nfs_argop4::OP_RESTOREFH => nfs_resop4::OP_RESTOREFH(ops::restorefh::run(c)),
        nfs_argop4::OP_SAVEFH => nfs_resop4::OP_SAVEFH(ops::savefh::run(c)),
        nfs_argop4::OP_SECINFO(a) => nfs_resop4::OP_SECINFO(ops::secinfo::run(c, a)),
        nfs_argop4::OP_SETATTR(a) => nfs_resop4::OP_SETATTR(ops::setattr::run(c, a)),
        nfs_argop4::OP_VERIFY(a) => nfs_resop4::OP_VERIFY(ops::verify::run(c, a)),
        nfs_argop4::OP_WRITE(a) => nfs_resop4::OP_WRITE(ops::write::run(c, a)),
        nfs_argop4::OP_BACKCHANNEL_CTL(a) => {
            nfs_resop4::OP_BACKCHANNEL_CTL(ops::backchannel_ctl::run(c, a))
        }
        nfs_argop4::OP_BIND_CONN_TO_SESSION(a) => {
            nfs_resop4::OP_BIND_CONN_TO_SESSION(ops::bind_conn_to_session::run(c, a))
        }
        nfs_argop4::OP_EXCHANGE_ID(a) => nfs_resop4::OP_EXCHANGE_ID(ops::exchange_id::run(c, a)),
        nfs_argop4::OP_CREATE_SESSION(a) => {
            nfs_resop4::OP_CREATE_SESSION(ops::create_session::run(c, a))
        }
        nfs_argop4::OP_DESTROY_SESSION(a) => {
            nfs_resop4::OP_DESTROY_SESSION(ops::destroy_session::run(c, a))
        }
        nfs_argop4::OP_FREE_STATEID(a) => nfs_resop4::OP_FREE_STATEID(ops::free_stateid::run(c, a)),
        nfs_argop4::OP_SECINFO_NO_NAME(a) => {
            nfs_resop4::OP_SECINFO_NO_NAME(ops::secinfo_no_name::run(c, a))
        }
        nfs_argop4::OP_SEQUENCE(a) => nfs_resop4::OP_SEQUENCE(ops::sequence::run(c, a)),
        nfs_argop4::OP_TEST_STATEID(a) => nfs_resop4::OP_TEST_STATEID(ops::test_stateid::run(c, a)),
        nfs_argop4::OP_DESTROY_CLIENTID(a) => {
            nfs_resop4::OP_DESTROY_CLIENTID(ops::destroy_clientid::run(c, a))
        }
        nfs_argop4::OP_RECLAIM_COMPLETE(a) => {
            nfs_resop4::OP_RECLAIM_COMPLETE(ops::reclaim_complete::run(c, a))
        }
        nfs_argop4::OP_ALLOCATE(a) => nfs_resop4::OP_ALLOCATE(ops::allocate::run(c, a)),
        nfs_argop4::OP_DEALLOCATE(a) => nfs_resop4::OP_DEALLOCATE(ops::deallocate::run(c, a)),
        nfs_argop4::OP_SEEK(a) => nfs_resop4::OP_SEEK(ops::seek::run(c, a)),
        nfs_argop4::OP_COPY(a) => nfs_resop4::OP_COPY(ops::copy::run(c, a)),
        nfs_argop4::OP_GETXATTR(a) => nfs_resop4::OP_GETXATTR(ops::getxattr::run(c, a)),
        nfs_argop4::OP_SETXATTR(a) => nfs_resop4::OP_SETXATTR(ops::setxattr::run(c, a)),
        nfs_argop4::OP_LISTXATTRS(a) => nfs_resop4::OP_LISTXATTRS(ops::listxattrs::run(c, a)),
        nfs_argop4::OP_REMOVEXATTR(a) => nfs_resop4::OP_REMOVEXATTR(ops::removexattr::run(c, a)),
        _ => error_result(opnum, NFS4ERR_NOTSUPP),
    }
}

/// The status of an operation's result.
pub fn status_of(res: &nfs_resop4) -> nfsstat4 {
    match res {
        nfs_resop4::OP_ACCESS(r) => r.discriminant(),
        nfs_resop4::OP_CLOSE(r) => r.discriminant(),
        nfs_resop4::OP_COMMIT(r) => r.discriminant(),
        nfs_resop4::OP_CREATE(r) => r.discriminant(),
        nfs_resop4::OP_DELEGPURGE(r) => r.status,
        nfs_resop4::OP_DELEGRETURN(r) => r.status,
        nfs_resop4::OP_GETATTR(r) => r.discriminant(),
        nfs_resop4::OP_GETFH(r) => r.discriminant(),
        nfs_resop4::OP_LINK(r) => r.discriminant(),
        nfs_resop4::OP_LOCK(r) => r.discriminant(),
        nfs_resop4::OP_LOCKT(r) => r.discriminant(),
        nfs_resop4::OP_LOCKU(r) => r.discriminant(),
        nfs_resop4::OP_LOOKUP(r) => r.status,
        nfs_resop4::OP_LOOKUPP(r) => r.status,
        nfs_resop4::OP_NVERIFY(r) => r.status,
        nfs_resop4::OP_OPEN(r) => r.discriminant(),
        nfs_resop4::OP_OPENATTR(r) => r.status,
        nfs_resop4::OP_OPEN_CONFIRM(r) => r.discriminant(),
        nfs_resop4::OP_OPEN_DOWNGRADE(r) => r.discriminant(),
        nfs_resop4::OP_PUTFH(r) => r.status,
        nfs_resop4::OP_PUTPUBFH(r) => r.status,
        nfs_resop4::OP_PUTROOTFH(r) => r.status,
        nfs_resop4::OP_READ(r) => r.discriminant(),
        nfs_resop4::OP_READDIR(r) => r.discriminant(),
        nfs_resop4::OP_READLINK(r) => r.discriminant(),
        nfs_resop4::OP_REMOVE(r) => r.discriminant(),
        nfs_resop4::OP_RENAME(r) => r.discriminant(),
        nfs_resop4::OP_RENEW(r) => r.status,
        nfs_resop4::OP_RESTOREFH(r) => r.status,
        nfs_resop4::OP_SAVEFH(r) => r.status,
        nfs_resop4::OP_SECINFO(r) => r.discriminant(),
        nfs_resop4::OP_SETATTR(r) => r.status,
        nfs_resop4::OP_SETCLIENTID(r) => r.discriminant(),
        nfs_resop4::OP_SETCLIENTID_CONFIRM(r) => r.status,
        nfs_resop4::OP_VERIFY(r) => r.status,
        nfs_resop4::OP_WRITE(r) => r.discriminant(),
        nfs_resop4::OP_RELEASE_LOCKOWNER(r) => r.status,
        nfs_resop4::OP_BACKCHANNEL_CTL(r) => r.bcr_status,
        nfs_resop4::OP_BIND_CONN_TO_SESSION(r) => r.discriminant(),
        nfs_resop4::OP_EXCHANGE_ID(r) => r.discriminant(),
        nfs_resop4::OP_CREATE_SESSION(r) => r.discriminant(),
        nfs_resop4::OP_DESTROY_SESSION(r) => r.dsr_status,
        nfs_resop4::OP_FREE_STATEID(r) => r.fsr_status,
        nfs_resop4::OP_GET_DIR_DELEGATION(r) => r.discriminant(),
        nfs_resop4::OP_GETDEVICEINFO(r) => r.discriminant(),
        nfs_resop4::OP_GETDEVICELIST(r) => r.discriminant(),
        nfs_resop4::OP_LAYOUTCOMMIT(r) => r.discriminant(),
        nfs_resop4::OP_LAYOUTGET(r) => r.discriminant(),
        nfs_resop4::OP_LAYOUTRETURN(r) => r.discriminant(),
        nfs_resop4::OP_SECINFO_NO_NAME(r) => r.discriminant(),
        nfs_resop4::OP_SEQUENCE(r) => r.discriminant(),
        nfs_resop4::OP_SET_SSV(r) => r.discriminant(),
        nfs_resop4::OP_TEST_STATEID(r) => r.discriminant(),
        nfs_resop4::OP_WANT_DELEGATION(r) => r.discriminant(),
        nfs_resop4::OP_DESTROY_CLIENTID(r) => r.dcr_status,
        nfs_resop4::OP_RECLAIM_COMPLETE(r) => r.rcr_status,
        nfs_resop4::OP_ALLOCATE(r) => r.ar_status,
        nfs_resop4::OP_COPY(r) => r.discriminant(),
        nfs_resop4::OP_COPY_NOTIFY(r) => r.discriminant(),
        nfs_resop4::OP_DEALLOCATE(r) => r.dr_status,
        nfs_resop4::OP_IO_ADVISE(r) => r.discriminant(),
        nfs_resop4::OP_LAYOUTERROR(r) => r.ler_status,
        nfs_resop4::OP_LAYOUTSTATS(r) => r.lsr_status,
        nfs_resop4::OP_OFFLOAD_CANCEL(r) => r.ocr_status,
        nfs_resop4::OP_OFFLOAD_STATUS(r) => r.discriminant(),
        nfs_resop4::OP_READ_PLUS(r) => r.discriminant(),
        nfs_resop4::OP_SEEK(r) => r.discriminant(),
        nfs_resop4::OP_WRITE_SAME(r) => r.discriminant(),
        nfs_resop4::OP_CLONE(r) => r.cl_status,
        nfs_resop4::OP_GETXATTR(r) => r.discriminant(),
        nfs_resop4::OP_SETXATTR(r) => r.discriminant(),
        nfs_resop4::OP_LISTXATTRS(r) => r.discriminant(),
        nfs_resop4::OP_REMOVEXATTR(r) => r.discriminant(),
        nfs_resop4::OP_ILLEGAL(r) => r.status,
    }
}

/// The result of operation `op` failing with `status`.
pub fn error_result(op: nfs_opnum4, status: nfsstat4) -> nfs_resop4 {
    match op {
        OP_ACCESS => nfs_resop4::OP_ACCESS(ACCESS4res::Default(status)),
        OP_CLOSE => nfs_resop4::OP_CLOSE(CLOSE4res::Default(status)),
        OP_COMMIT => nfs_resop4::OP_COMMIT(COMMIT4res::Default(status)),
        OP_CREATE => nfs_resop4::OP_CREATE(CREATE4res::Default(status)),
        OP_DELEGPURGE => nfs_resop4::OP_DELEGPURGE(DELEGPURGE4res { status }),
        OP_DELEGRETURN => nfs_resop4::OP_DELEGRETURN(DELEGRETURN4res { status }),
        OP_GETATTR => nfs_resop4::OP_GETATTR(GETATTR4res::Default(status)),
        OP_GETFH => nfs_resop4::OP_GETFH(GETFH4res::Default(status)),
        OP_LINK => nfs_resop4::OP_LINK(LINK4res::Default(status)),
        OP_LOCK => nfs_resop4::OP_LOCK(LOCK4res::Default(status)),
        OP_LOCKT => nfs_resop4::OP_LOCKT(LOCKT4res::Default(status)),
        OP_LOCKU => nfs_resop4::OP_LOCKU(LOCKU4res::Default(status)),
        OP_LOOKUP => nfs_resop4::OP_LOOKUP(LOOKUP4res { status }),
        OP_LOOKUPP => nfs_resop4::OP_LOOKUPP(LOOKUPP4res { status }),
        OP_NVERIFY => nfs_resop4::OP_NVERIFY(NVERIFY4res { status }),
        OP_OPEN => nfs_resop4::OP_OPEN(OPEN4res::Default(status)),
        OP_OPENATTR => nfs_resop4::OP_OPENATTR(OPENATTR4res { status }),
        OP_OPEN_CONFIRM => nfs_resop4::OP_OPEN_CONFIRM(OPEN_CONFIRM4res::Default(status)),
        OP_OPEN_DOWNGRADE => nfs_resop4::OP_OPEN_DOWNGRADE(OPEN_DOWNGRADE4res::Default(status)),
        OP_PUTFH => nfs_resop4::OP_PUTFH(PUTFH4res { status }),
        OP_PUTPUBFH => nfs_resop4::OP_PUTPUBFH(PUTPUBFH4res { status }),
        OP_PUTROOTFH => nfs_resop4::OP_PUTROOTFH(PUTROOTFH4res { status }),
        OP_READ => nfs_resop4::OP_READ(READ4res::Default(status)),
        OP_READDIR => nfs_resop4::OP_READDIR(READDIR4res::Default(status)),
        OP_READLINK => nfs_resop4::OP_READLINK(READLINK4res::Default(status)),
        OP_REMOVE => nfs_resop4::OP_REMOVE(REMOVE4res::Default(status)),
        OP_RENAME => nfs_resop4::OP_RENAME(RENAME4res::Default(status)),
        OP_RENEW => nfs_resop4::OP_RENEW(RENEW4res { status }),
        OP_RESTOREFH => nfs_resop4::OP_RESTOREFH(RESTOREFH4res { status }),
        OP_SAVEFH => nfs_resop4::OP_SAVEFH(SAVEFH4res { status }),
        OP_SECINFO => nfs_resop4::OP_SECINFO(SECINFO4res::Default(status)),
        OP_SETATTR => nfs_resop4::OP_SETATTR(SETATTR4res {
            status,
            attrsset: Default::default(),
        }),
        OP_SETCLIENTID => nfs_resop4::OP_SETCLIENTID(SETCLIENTID4res::Default(status)),
        OP_SETCLIENTID_CONFIRM => {
            nfs_resop4::OP_SETCLIENTID_CONFIRM(SETCLIENTID_CONFIRM4res { status })
        }
        OP_VERIFY => nfs_resop4::OP_VERIFY(VERIFY4res { status }),
        OP_WRITE => nfs_resop4::OP_WRITE(WRITE4res::Default(status)),
        OP_RELEASE_LOCKOWNER => nfs_resop4::OP_RELEASE_LOCKOWNER(RELEASE_LOCKOWNER4res { status }),
        OP_BACKCHANNEL_CTL => {
            nfs_resop4::OP_BACKCHANNEL_CTL(BACKCHANNEL_CTL4res { bcr_status: status })
        }
        OP_BIND_CONN_TO_SESSION => {
            nfs_resop4::OP_BIND_CONN_TO_SESSION(BIND_CONN_TO_SESSION4res::Default(status))
        }
        OP_EXCHANGE_ID => nfs_resop4::OP_EXCHANGE_ID(EXCHANGE_ID4res::Default(status)),
        OP_CREATE_SESSION => nfs_resop4::OP_CREATE_SESSION(CREATE_SESSION4res::Default(status)),
        OP_DESTROY_SESSION => {
            nfs_resop4::OP_DESTROY_SESSION(DESTROY_SESSION4res { dsr_status: status })
        }
        OP_FREE_STATEID => nfs_resop4::OP_FREE_STATEID(FREE_STATEID4res { fsr_status: status }),
        OP_GET_DIR_DELEGATION => {
            nfs_resop4::OP_GET_DIR_DELEGATION(GET_DIR_DELEGATION4res::Default(status))
        }
        OP_GETDEVICEINFO => nfs_resop4::OP_GETDEVICEINFO(GETDEVICEINFO4res::Default(status)),
        OP_GETDEVICELIST => nfs_resop4::OP_GETDEVICELIST(GETDEVICELIST4res::Default(status)),
        OP_LAYOUTCOMMIT => nfs_resop4::OP_LAYOUTCOMMIT(LAYOUTCOMMIT4res::Default(status)),
        OP_LAYOUTGET => nfs_resop4::OP_LAYOUTGET(LAYOUTGET4res::Default(status)),
        OP_LAYOUTRETURN => nfs_resop4::OP_LAYOUTRETURN(LAYOUTRETURN4res::Default(status)),
        OP_SECINFO_NO_NAME => nfs_resop4::OP_SECINFO_NO_NAME(SECINFO4res::Default(status)),
        OP_SEQUENCE => nfs_resop4::OP_SEQUENCE(SEQUENCE4res::Default(status)),
        OP_SET_SSV => nfs_resop4::OP_SET_SSV(SET_SSV4res::Default(status)),
        OP_TEST_STATEID => nfs_resop4::OP_TEST_STATEID(TEST_STATEID4res::Default(status)),
        OP_WANT_DELEGATION => nfs_resop4::OP_WANT_DELEGATION(WANT_DELEGATION4res::Default(status)),
        OP_DESTROY_CLIENTID => {
            nfs_resop4::OP_DESTROY_CLIENTID(DESTROY_CLIENTID4res { dcr_status: status })
        }
        OP_RECLAIM_COMPLETE => {
            nfs_resop4::OP_RECLAIM_COMPLETE(RECLAIM_COMPLETE4res { rcr_status: status })
        }
        OP_ALLOCATE => nfs_resop4::OP_ALLOCATE(ALLOCATE4res { ar_status: status }),
        OP_COPY => nfs_resop4::OP_COPY(COPY4res::Default(status)),
        OP_COPY_NOTIFY => nfs_resop4::OP_COPY_NOTIFY(COPY_NOTIFY4res::Default(status)),
        OP_DEALLOCATE => nfs_resop4::OP_DEALLOCATE(DEALLOCATE4res { dr_status: status }),
        OP_IO_ADVISE => nfs_resop4::OP_IO_ADVISE(IO_ADVISE4res::Default(status)),
        OP_LAYOUTERROR => nfs_resop4::OP_LAYOUTERROR(LAYOUTERROR4res { ler_status: status }),
        OP_LAYOUTSTATS => nfs_resop4::OP_LAYOUTSTATS(LAYOUTSTATS4res { lsr_status: status }),
        OP_OFFLOAD_CANCEL => {
            nfs_resop4::OP_OFFLOAD_CANCEL(OFFLOAD_CANCEL4res { ocr_status: status })
        }
        OP_OFFLOAD_STATUS => nfs_resop4::OP_OFFLOAD_STATUS(OFFLOAD_STATUS4res::Default(status)),
        OP_READ_PLUS => nfs_resop4::OP_READ_PLUS(READ_PLUS4res::Default(status)),
        OP_SEEK => nfs_resop4::OP_SEEK(SEEK4res::Default(status)),
        OP_WRITE_SAME => nfs_resop4::OP_WRITE_SAME(WRITE_SAME4res::Default(status)),
        OP_CLONE => nfs_resop4::OP_CLONE(CLONE4res { cl_status: status }),
        OP_GETXATTR => nfs_resop4::OP_GETXATTR(GETXATTR4res::Default(status)),
        OP_SETXATTR => nfs_resop4::OP_SETXATTR(SETXATTR4res::Default(status)),
        OP_LISTXATTRS => nfs_resop4::OP_LISTXATTRS(LISTXATTRS4res::Default(status)),
        OP_REMOVEXATTR => nfs_resop4::OP_REMOVEXATTR(REMOVEXATTR4res::Default(status)),
        OP_ILLEGAL => nfs_resop4::OP_ILLEGAL(ILLEGAL4res { status }),
        _ => nfs_resop4::OP_ILLEGAL(ILLEGAL4res {
            status: NFS4ERR_OP_ILLEGAL,
        }),
    }
}
