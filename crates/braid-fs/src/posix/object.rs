//! A resolved object: an `O_PATH` fd plus its wire handle.

use std::fmt;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use super::types::ObjectKind;

pub(crate) struct ObjectInner {
    pub(crate) fd: OwnedFd,
    pub(crate) handle: Vec<u8>,
    pub(crate) kind: ObjectKind,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) is_root: bool,
}

/// Cheap to clone. Holding one keeps the object's inode reachable (an
/// unlinked file's data stays allocated while any `Object` of it lives).
#[derive(Clone)]
pub struct Object(pub(crate) Arc<ObjectInner>);

impl Object {
    /// The wire handle (RFC 8881 4.2), at most 128 bytes.
    pub fn handle(&self) -> &[u8] {
        &self.0.handle
    }

    pub fn kind(&self) -> ObjectKind {
        self.0.kind
    }

    /// The inode number (the RFC 8881 fileid attribute).
    pub fn fileid(&self) -> u64 {
        self.0.ino
    }

    pub fn is_root(&self) -> bool {
        self.0.is_root
    }

    /// (dev, ino): the key braid-fs's open table uses (`st_dev` encoding).
    pub fn key(&self) -> (u64, u64) {
        (self.0.dev, self.0.ino)
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.0.fd.as_raw_fd()
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Object {}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Object")
            .field("kind", &self.0.kind)
            .field("dev", &self.0.dev)
            .field("ino", &self.0.ino)
            .field("is_root", &self.0.is_root)
            .finish()
    }
}
