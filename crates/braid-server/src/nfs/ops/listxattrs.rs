//! OP_LISTXATTRS (RFC 8276 8.4.3): the names of the current object's user
//! extended attributes, a page at a time. The cookie is the index of the
//! next name in the sorted list; a list that changed between pages may
//! skip or repeat a name, as READDIR's cookies allow.

use braid_nfs_proto::nfs4::*;

use super::xattr_common::xattr_status;
use crate::nfs::compound::{xdr_len, Compound};

pub fn run(c: &mut Compound, a: &LISTXATTRS4args) -> LISTXATTRS4res {
    match listxattrs(c, a) {
        Ok(r) => LISTXATTRS4res::NFS4_OK(r),
        Err(e) => LISTXATTRS4res::Default(e),
    }
}

fn listxattrs(c: &mut Compound, a: &LISTXATTRS4args) -> Result<LISTXATTRS4resok, nfsstat4> {
    let (export, obj) = c.current_object(NFS4ERR_NOXATTR)?;
    let cred = c.credentials(&export);
    let names = export
        .share
        .list_user_xattrs(&cred, &obj)
        .map_err(|e| xattr_status(&e))?;
    let start = usize::try_from(a.lxa_cookie).map_err(|_| NFS4ERR_BAD_COOKIE)?;
    if start > names.len() {
        return Err(NFS4ERR_BAD_COOKIE);
    }
    // RFC 8276 8.4.3.2: lxa_maxcount bounds the reply's names with their
    // XDR (cookie, array count and eof included), as does the session's
    // response size.
    let budget = (a.lxa_maxcount as usize).min(c.reply_room.saturating_sub(8));
    let mut used = 8 + 4 + 4;
    let mut page = Vec::new();
    for name in &names[start..] {
        let cost = 4 + xdr_len(name.len());
        if used + cost > budget {
            break;
        }
        used += cost;
        page.push(name.clone());
    }
    let next = start + page.len();
    if page.is_empty() && next < names.len() {
        return Err(NFS4ERR_TOOSMALL);
    }
    Ok(LISTXATTRS4resok {
        lxr_cookie: next as u64,
        lxr_names: page,
        lxr_eof: next == names.len(),
    })
}
