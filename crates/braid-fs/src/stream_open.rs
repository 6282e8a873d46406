//! Opening a named stream (MS-FSA 2.1.5.1 with a StreamNameToOpen).
//!
//! An open of `file:name` holds a descriptor of the file (read-only: the
//! stream lives in an xattr, which needs no write access to the
//! descriptor) and has its own entry in the share-mode table, keyed by the
//! file and the case-folded stream name: opens of one stream conflict
//! with each other only, never with opens of the file or of its other
//! streams. The file's own table entry lists the stream opens
//! ([`crate::open_table::NodeState::stream_opens`]) for the three ways
//! they reach the file: an open of the file for DELETE needs every stream
//! open to share delete, a delete-pending file refuses new stream opens
//! (DELETE_PENDING) and is removed only when its stream opens are closed
//! too, and a file with open streams cannot be renamed.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

use crate::error::{FsError, FsResult};
use crate::info;
use crate::mac_streams;
use crate::open_access::{check_create, check_existing};
use crate::open_table::{FileKey, OpenEntry};
use crate::path;
use crate::resource_fork_file::{self, ResourceFork};
use crate::security;
use crate::service::{FileService, RO_DENIED};
use crate::share::ShareRef;
use crate::stream;
use crate::stream_handle::StreamOpen;
use crate::sys;
use crate::types::{
    access as acc, attr, CreateAction, Disposition, OpenParams, Opened, RequestCtx,
};

/// The file a stream open belongs to, opened.
struct Base {
    fd: OwnedFd,
    st: libc::stat,
    rel: String,
    /// Created by this open (the stream of a missing file creates it).
    created: Option<crate::service_create::Cleanup>,
}

impl FileService {
    /// One attempt at opening stream `name` of the file `comps` names;
    /// `Ok(None)` when a race with another open or create calls for
    /// another attempt.
    pub(crate) fn try_open_stream(
        &self,
        share: &ShareRef,
        comps: &[String],
        name: &str,
        p: &OpenParams,
        (mut access, max): (u32, bool),
        ctx: &RequestCtx,
    ) -> FsResult<Option<Opened>> {
        let pol = ctx.access.as_deref();
        let x_new = mac_streams::xattr_for(share, name)?;
        let overwrite = matches!(
            p.disposition,
            Disposition::Supersede | Disposition::Overwrite | Disposition::OverwriteIf
        );
        let mut maximal_access = acc::FILE_ALL_ACCESS;
        let resolved;
        let base = if comps.is_empty() {
            let fd =
                path::open_beneath(share.0.root_fd(), "", libc::O_RDONLY | libc::O_DIRECTORY, 0)
                    .map_err(FsError::from_errno)?;
            let st = sys::fstat(fd.as_raw_fd())?;
            if let Some(pol) = pol {
                let object = security::object_cached(share.0.attrs(), fd.as_raw_fd(), &st, true)?;
                (access, maximal_access) = check_existing(pol, &object, None, p, overwrite)?;
            }
            Base {
                fd,
                st,
                rel: String::new(),
                created: None,
            }
        } else {
            resolved = path::resolve(share.0.names(), share.0.root_fd(), comps)?;
            let r = &resolved;
            if r.exists {
                let rel = r.rel();
                let fd = open_base(share.0.root_fd(), &rel)?;
                let st = sys::fstat(fd.as_raw_fd())?;
                if let Some(pol) = pol {
                    let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
                    let object =
                        security::object_cached(share.0.attrs(), fd.as_raw_fd(), &st, is_dir)?;
                    let parent = Some(r.parent_fd.as_raw_fd());
                    (access, maximal_access) = check_existing(pol, &object, parent, p, overwrite)?;
                }
                Base {
                    fd,
                    st,
                    rel,
                    created: None,
                }
            } else {
                if matches!(p.disposition, Disposition::Open | Disposition::Overwrite) {
                    return Err(FsError::NotFound);
                }
                // MS-FSA 2.1.5.1.1: creating a stream of a file that does
                // not exist creates the file (with the open's attributes).
                let fp = OpenParams {
                    allocation_size: None,
                    ..p.clone()
                };
                let descriptor = match pol {
                    Some(pol) => check_create(pol, r, false)?,
                    None => None,
                };
                let Some(c) = self.create_on_disk(share, r, &fp, false, descriptor.as_deref())?
                else {
                    return Ok(None);
                };
                Base {
                    fd: c.fd,
                    st: c.st,
                    rel: r.rel(),
                    created: Some(c.cleanup),
                }
            }
        };
        let cleanup = base.created.as_ref().map(|c| c.clone_handle());
        let r = self
            .open_stream_of(share, base, name, &x_new, p, (access, max), ctx)
            .map(|o| {
                o.map(|o| Opened {
                    maximal_access,
                    ..o
                })
            });
        if r.is_err() {
            if let Some(c) = cleanup {
                c.run();
            }
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn open_stream_of(
        &self,
        share: &ShareRef,
        base: Base,
        name: &str,
        x_new: &std::ffi::CStr,
        p: &OpenParams,
        (mut access, max): (u32, bool),
        ctx: &RequestCtx,
    ) -> FsResult<Option<Opened>> {
        let fd = base.fd.as_raw_fd();
        let fmt = base.st.st_mode & libc::S_IFMT;
        if fmt != libc::S_IFREG && fmt != libc::S_IFDIR {
            return Err(FsError::AccessDenied);
        }
        let base_is_dir = fmt == libc::S_IFDIR;
        // MS-FSA 2.1.5.1.2.1: a read-only file's streams are read-only too.
        let meta = info::read_dos_cached(share.0.attrs(), fd, &base.st);
        if info::attributes(&base.st, meta.as_ref()) & attr::READONLY != 0 && !base_is_dir {
            let overwrite = matches!(
                p.disposition,
                Disposition::Supersede | Disposition::Overwrite | Disposition::OverwriteIf
            );
            if p.delete_on_close {
                return Err(FsError::CannotDelete);
            }
            if overwrite || (!max && access & RO_DENIED != 0) {
                return Err(FsError::AccessDenied);
            }
            access &= !RO_DENIED;
        }
        let in_sidecar = share.resource_fork_in_sidecar()
            && mac_streams::MacStream::of(share, name) == Some(mac_streams::MacStream::Resource);
        let existing = if in_sidecar {
            // A resource fork kept in a sidecar exists when it has data.
            ResourceFork::open(share, fd, &base.rel)?
                .filter(|rf| rf.len() > 0)
                .map(|_| x_new.to_owned())
        } else {
            let existing = mac_streams::find(share, fd, name)?;
            // Streams that are stored but do not exist for the requester.
            let hide_empty = ctx.hide_empty_streams;
            mac_streams::open_finds(share, fd, name, existing, p.disposition, hide_empty)?
        };
        let (x, action) = match (existing, p.disposition) {
            (Some(_), Disposition::Create) => return Err(FsError::NameCollision),
            (Some(x), Disposition::Open | Disposition::OpenIf) => (x, CreateAction::Opened),
            (Some(x), Disposition::Supersede) => (x, CreateAction::Superseded),
            (Some(x), _) => (x, CreateAction::Overwritten),
            (None, Disposition::Open | Disposition::Overwrite) => return Err(FsError::NotFound),
            (None, _) if in_sidecar => {
                ResourceFork::open_or_create(share, fd, &base.rel)?;
                (x_new.to_owned(), CreateAction::Created)
            }
            (None, _) => {
                if !stream::create(fd, x_new)? {
                    return Ok(None); // created meanwhile: look again
                }
                (x_new.to_owned(), CreateAction::Created)
            }
        };
        let created_stream = action == CreateAction::Created;
        let undo = |x: &std::ffi::CStr| {
            if created_stream && in_sidecar {
                let _ = resource_fork_file::remove(share, &base.rel);
            } else if created_stream {
                let _ = stream::remove(fd, x);
            }
        };
        // The file's entry first: it must not be delete pending, and it
        // learns of the stream open.
        let base_key = FileKey::of(&base.st);
        let id = self.next_open_id();
        let base_node = loop {
            let n = self.nodes.get_or_insert(base_key);
            let mut s = n.lock();
            if s.dead {
                continue;
            }
            if s.delete_pending {
                undo(&x);
                return Err(FsError::DeletePending);
            }
            s.stream_opens.push(OpenEntry {
                id,
                access,
                share_access: p.share_access,
                delete_on_close: false,
                write_time: Default::default(),
                user_set_change_time: false,
            });
            drop(s);
            break n;
        };
        let so = StreamOpen {
            xattr: Mutex::new(Some(x.clone())),
            base: base_node,
            base_is_dir,
            base_id: id,
        };
        let key = base_key.with_stream(stream::stream_key(name));
        let (node, sid) = match self.register(key, access, p) {
            Ok(r) => r,
            Err(e) => {
                so.leave_file_node(&self.nodes, None);
                undo(&x);
                return Err(e);
            }
        };
        let base_created = base.created.is_some();
        let handle = self.make_handle(
            share,
            sid,
            node,
            base.fd,
            false,
            (access, p.share_access),
            base.rel,
            Some(so),
        );
        if matches!(action, CreateAction::Overwritten | CreateAction::Superseded) {
            // MS-FSA 2.1.5.1.2.1: an overwrite truncates the stream (but
            // not Netatalk's whole record: its AfpInfo keeps its size).
            let truncated = if in_sidecar || x.as_c_str() == crate::netatalk_meta::XATTR {
                handle.stream_set_size(&x, 0, true)
            } else {
                stream::write(fd, &x, &[])
            };
            if let Err(e) = truncated {
                let _ = handle.close();
                return Err(e);
            }
        }
        let action = if base_created {
            CreateAction::Created
        } else {
            action
        };
        let info = handle.info()?;
        Ok(Some(Opened {
            handle,
            action,
            info,
            maximal_access: acc::FILE_ALL_ACCESS,
        }))
    }
}

/// A read-only descriptor of an existing file or directory; `O_PATH` when
/// even reading is refused (xattrs are reached through `/proc/self/fd`).
fn open_base(root: i32, rel: &str) -> FsResult<OwnedFd> {
    let f = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
    match path::open_beneath(root, rel, f, 0) {
        Ok(fd) => Ok(fd),
        Err(libc::EACCES | libc::EPERM) => {
            path::open_beneath(root, rel, libc::O_PATH, 0).map_err(FsError::from_errno)
        }
        Err(libc::ENOTDIR) => Err(FsError::PathNotFound),
        Err(e) => Err(FsError::from_errno(e)),
    }
}
