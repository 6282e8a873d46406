//! The UNIX owner, group and mode of an open file, for clients that work
//! with them through SMB (macOS shows and sets permissions as NFS-style
//! ACEs once it negotiated Apple's extensions).

use crate::error::FsResult;
use crate::types::access as acc;
use crate::{sys, OpenHandle};

/// `st_mode` (file type bits included), `st_uid`, `st_gid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnixIdentity {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl OpenHandle {
    /// The file's owner, group and mode (of the file, for a stream open).
    pub fn unix_identity(&self) -> FsResult<UnixIdentity> {
        self.live()?;
        let st = sys::fstat(self.fd())?;
        Ok(UnixIdentity {
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
        })
    }

    /// Set the file's permission bits (`mode & 0o777`). Needs WRITE_DAC,
    /// as changing the file's ACL does.
    pub fn set_unix_mode(&self, mode: u32) -> FsResult<()> {
        self.0.share.0.check_writable()?;
        self.live()?;
        self.need(acc::WRITE_DAC)?;
        sys::fchmod_any(self.fd(), mode & 0o777)
    }
}
