//! OP_READDIR (RFC 8881 18.23): a page of a directory's entries with the
//! attributes asked for. Cookies come from braid-fs (the file system's own
//! directory offsets, so a listing resumes where it left off however the
//! directory changes meanwhile); the pseudo-root's entries are the exports
//! this client may use.

use std::sync::Arc;

use braid_fs::posix::Object;
use braid_nfs_proto::nfs4::attr::{encode_attrs, Bitmap, FileAttrs};
use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs;
use crate::nfs::compound::Compound;
use crate::nfs::errors::nfs_status;
use crate::nfs::export::ExportAccess;
use crate::nfs::exports::Export;
use crate::nfs::fh::{require_dir, Fh};

/// The cookie verifier Braid hands out: zeros, as knfsd does. Cookies are
/// directory offsets that stay valid while the directory changes, so there
/// is nothing a verifier would need to invalidate.
const COOKIEVERF: verifier4 = [0; 8];

/// READDIR4resok around the entries: the verifier (8), the list's final
/// "no more entries" (4) and eof (4), and the status before it (4).
const REPLY_OVERHEAD: usize = 20;

/// Entries read from the file system per call, at most: a 1 MiB reply of
/// names alone holds about this many.
const MAX_BATCH: usize = 4096;

/// The pseudo-root's entries carry cookies from here (0, 1, 2 are
/// reserved, RFC 8881 18.23.3).
const PSEUDO_COOKIE_BASE: u64 = 3;

pub fn run(c: &mut Compound, a: &READDIR4args) -> READDIR4res {
    match readdir(c, a) {
        Ok(ok) => READDIR4res::NFS4_OK(ok),
        Err(e) => READDIR4res::Default(e),
    }
}

fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// Fills a reply within the client's byte limits (RFC 8881 18.23.3:
/// `maxcount` for the whole READDIR4resok, `dircount` for cookies and
/// names alone).
struct Page {
    entries: Vec<entry4>,
    maxcount: usize,
    dircount: usize,
    used: usize,
    dir_used: usize,
    full: bool,
    /// The session's reply size, not maxcount, is the tighter limit.
    room_bound: bool,
}

impl Page {
    fn new(a: &READDIR4args, room: usize) -> Page {
        Page {
            entries: Vec::new(),
            // RFC 8881 2.10.6.4: never more than the session lets the
            // reply grow by (the operation number comes on top).
            maxcount: (a.maxcount as usize).min(room.saturating_sub(4)),
            room_bound: room.saturating_sub(4) < a.maxcount as usize,
            // 0: no limit of its own (only maxcount).
            dircount: if a.dircount == 0 {
                usize::MAX
            } else {
                a.dircount as usize
            },
            used: REPLY_OVERHEAD,
            dir_used: 0,
            full: false,
        }
    }

    /// Adds an entry if it fits; false (and the page is full) if not.
    fn push(&mut self, e: entry4) -> bool {
        let dir_size = 8 + 4 + pad4(e.name.len());
        let size = 4 + dir_size + 4 + 4 * e.attrs.attrmask.len() + 4 + e.attrs.attr_vals.len();
        let first = self.entries.is_empty();
        if self.used + size > self.maxcount || (!first && self.dir_used + dir_size > self.dircount)
        {
            self.full = true;
            return false;
        }
        self.used += size;
        self.dir_used += dir_size;
        self.entries.push(e);
        true
    }

    fn finish(self, eof: bool) -> Result<READDIR4resok, nfsstat4> {
        // RFC 8881 18.23.3: not even one entry fits in maxcount (or, RFC
        // 8881 2.10.6.4, in what the session lets the reply hold).
        if self.entries.is_empty() && self.full {
            return Err(if self.room_bound {
                NFS4ERR_REP_TOO_BIG
            } else {
                NFS4ERR_TOOSMALL
            });
        }
        Ok(READDIR4resok {
            cookieverf: COOKIEVERF,
            reply: dirlist4 {
                entries: self.entries,
                eof: eof && !self.full,
            },
        })
    }
}

fn readdir(c: &mut Compound, a: &READDIR4args) -> Result<READDIR4resok, nfsstat4> {
    let requested = attrs::request_bitmap(&a.attr_request)?;
    // The write-only attributes have no value to return.
    if requested.contains(FATTR4_TIME_ACCESS_SET) || requested.contains(FATTR4_TIME_MODIFY_SET) {
        return Err(NFS4ERR_INVAL);
    }
    let requested = requested.intersect(&attrs::supported_in(c.minorversion));
    // RFC 8881 18.23.3: cookies 1 and 2 are never handed out.
    if a.cookie == 1 || a.cookie == 2 {
        return Err(NFS4ERR_BAD_COOKIE);
    }
    // A verifier that is not ours (only checked when resuming: a listing
    // from the start may send anything).
    if a.cookie != 0 && a.cookieverf != COOKIEVERF {
        return Err(NFS4ERR_NOT_SAME);
    }
    if (a.maxcount as usize) < REPLY_OVERHEAD {
        return Err(NFS4ERR_TOOSMALL);
    }
    match c.current_fh()?.clone() {
        Fh::Pseudo => pseudo_root(c, a, &requested),
        Fh::Object { export, obj } => {
            require_dir(&obj)?;
            list_dir(c, a, &requested, &export, &obj)
        }
    }
}

fn list_dir(
    c: &Compound,
    a: &READDIR4args,
    requested: &Bitmap,
    export: &Arc<Export>,
    dir: &Object,
) -> Result<READDIR4resok, nfsstat4> {
    let mut page = Page::new(a, c.reply_room);
    // A guess at how many entries fit, so that few are looked up in vain:
    // a name and cookie alone take 24 bytes or so, with the attributes
    // Linux asks for (a filehandle among them) about 200. More batches
    // follow while the page has room.
    let per_entry = if requested.is_empty() { 24 } else { 200 };
    let batch = (page.maxcount / per_entry)
        .min(page.dircount / 16)
        .clamp(1, MAX_BATCH);
    let cred = c.credentials(export);
    let mut cookie = a.cookie;
    loop {
        let out =
            export
                .share
                .readdir(&cred, dir, cookie, batch)
                .map_err(|e| match nfs_status(&e) {
                    // braid-fs's EINVAL here is a cookie it cannot seek to.
                    NFS4ERR_INVAL => NFS4ERR_BAD_COOKIE,
                    s => s,
                })?;
        for e in out.entries {
            cookie = e.cookie;
            let attrs = match e.object {
                Ok(obj) => {
                    let fh = Fh::Object {
                        export: export.clone(),
                        obj,
                    };
                    entry_attrs(c, &fh, requested)?
                }
                Err(err) => {
                    let status = nfs_status(&err);
                    // Removed since the directory was read: not there.
                    if status == NFS4ERR_NOENT || status == NFS4ERR_STALE {
                        continue;
                    }
                    rdattr_error(status, requested)?
                }
            };
            let entry = entry4 {
                cookie: e.cookie,
                name: e.name,
                attrs,
            };
            if !page.push(entry) {
                return page.finish(false);
            }
        }
        if out.eof {
            return page.finish(true);
        }
    }
}

/// An entry's attributes; when they cannot be had, RFC 8881 5.8.1.12's
/// rdattr_error if it was asked for, else the READDIR fails.
fn entry_attrs(c: &Compound, fh: &Fh, requested: &Bitmap) -> Result<fattr4, nfsstat4> {
    match attrs::file_attrs(&c.state, fh, requested, c.minorversion) {
        Ok(a) => Ok(encode_attrs(&a, requested)),
        Err(NFS4ERR_NOENT | NFS4ERR_STALE) => rdattr_error(NFS4ERR_NOENT, requested),
        Err(status) => rdattr_error(status, requested),
    }
}

fn rdattr_error(status: nfsstat4, requested: &Bitmap) -> Result<fattr4, nfsstat4> {
    if !requested.contains(FATTR4_RDATTR_ERROR) {
        return Err(status);
    }
    let a = FileAttrs {
        rdattr_error: Some(status),
        ..Default::default()
    };
    Ok(encode_attrs(&a, requested))
}

/// RFC 8881 7.3: the pseudo-root lists the exports by name; each entry's
/// attributes are its export root's (a client sees the fsid change there
/// and mounts it, with mounted_on_fileid naming its place here).
fn pseudo_root(
    c: &mut Compound,
    a: &READDIR4args,
    requested: &Bitmap,
) -> Result<READDIR4resok, nfsstat4> {
    let visible: Vec<Arc<Export>> = c
        .state
        .exports
        .all()
        .into_iter()
        .filter(|e| c.export_access(e) != ExportAccess::Denied)
        .collect();
    let start = match a.cookie {
        0 => 0,
        k => (k - PSEUDO_COOKIE_BASE + 1).min(usize::MAX as u64) as usize,
    };
    let mut page = Page::new(a, c.reply_room);
    for (i, export) in visible.iter().enumerate().skip(start) {
        let fh = Fh::Object {
            export: export.clone(),
            obj: export.share.root(),
        };
        let entry = entry4 {
            cookie: PSEUDO_COOKIE_BASE + i as u64,
            name: export.name.as_bytes().to_vec(),
            attrs: entry_attrs(c, &fh, requested)?,
        };
        if !page.push(entry) {
            break;
        }
    }
    page.finish(true)
}
