//! Renaming an open file or directory (MS-FSA 2.1.5.14.11).

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use crate::error::{last_errno, FsError, FsResult};
use crate::handle::OpenHandle;
use crate::info;
use crate::open_table::{check_rename_target_dir, FileKey};
use crate::path;
use crate::sys;
use crate::types::{access as acc, attr};

impl OpenHandle {
    /// FileRenameInformation (MS-FSA 2.1.5.14.11). Needs DELETE access.
    /// * target exists and `!replace_if_exists` → NameCollision;
    /// * target is a directory, is open, or is read-only → AccessDenied;
    /// * this is a directory with opens beneath it → AccessDenied;
    /// * a case-only change of the same name is allowed.
    ///
    /// Updates the path of every open of this file in the share.
    pub fn rename(&self, new_path: &str, replace_if_exists: bool) -> FsResult<()> {
        self.rename_checking(new_path, replace_if_exists, true)
    }

    /// [`Self::rename`] as POSIX renames a directory: opens beneath it do
    /// not hold it back, and follow it to its new name (what macOS clients
    /// expect of a server that negotiated Apple's extensions, as Samba's
    /// `fruit:posix_rename`).
    pub fn rename_posix(&self, new_path: &str, replace_if_exists: bool) -> FsResult<()> {
        self.rename_checking(new_path, replace_if_exists, false)
    }

    fn rename_checking(
        &self,
        new_path: &str,
        replace_if_exists: bool,
        refuse_opens_beneath: bool,
    ) -> FsResult<()> {
        self.need(acc::DELETE)?;
        self.0.share.0.check_stream_syntax(new_path)?;
        if self.0.stream.is_some() {
            return self.rename_stream(new_path, replace_if_exists);
        }
        // A file whose streams are open keeps its name (Windows answers
        // ACCESS_DENIED; smbtorture smb2.streams.basefile-rename-with-open-stream).
        if !self.0.node.lock().stream_opens.is_empty() {
            return Err(FsError::AccessDenied);
        }
        let comps = path::parse(new_path)?;
        self.0.share.0.check_veto(&comps)?;
        let old_rel = self.0.rel();
        if comps.is_empty() || old_rel.is_empty() {
            return Err(FsError::AccessDenied);
        }
        let share = &self.0.share.0;
        let prefix = format!("{old_rel}/");
        if self.0.is_dir
            && refuse_opens_beneath
            && share
                .all_opens()
                .iter()
                .any(|h| h.id != self.0.id && h.rel().starts_with(&prefix))
        {
            return Err(FsError::AccessDenied);
        }
        let root = share.root_fd();
        let t = path::resolve(share.names(), root, &comps)?;
        // MS-FSA 2.1.5.14.11: the rename opens the target's parent directory
        // for FILE_ADD_FILE (FILE_ADD_SUBDIRECTORY for a directory), sharing
        // read and write; an open of that directory with DELETE access, or
        // one adding entries itself without sharing write, refuses it with
        // a sharing violation (smbtorture smb2.rename.*_delete_access).
        // Opens that only list it do not (check_rename_target_dir).
        let tpst = sys::fstat(t.parent_fd.as_raw_fd())?;
        if let Some(pn) = self.0.nodes.get(&FileKey::of(&tpst)) {
            check_rename_target_dir(&pn.lock().opens)?;
        }
        let client_name = comps.last().map(String::as_str).unwrap_or_default();
        let (sp, sname) = path::split_last(&old_rel);
        let spfd = path::open_beneath(root, sp, libc::O_PATH | libc::O_DIRECTORY, 0)
            .map_err(FsError::from_errno)?;
        let csrc = sys::cstr(sname)?;
        let tp = t.parent_fd.as_raw_fd();
        let cclient = sys::cstr(client_name)?;
        let final_name;
        if t.exists {
            let ctgt = sys::cstr(&t.name)?;
            let tst = sys::lstat_at(tp, &ctgt).map_err(FsError::from_errno)?;
            if FileKey::of(&tst) == self.0.node.key {
                // Same file: possibly a case-only rename.
                if t.rel() == old_rel && t.name == client_name {
                    return Ok(());
                }
                rename_at(
                    spfd.as_raw_fd(),
                    &csrc,
                    tp,
                    &cclient,
                    libc::RENAME_NOREPLACE,
                )?;
                final_name = client_name.to_string();
            } else {
                if !replace_if_exists {
                    return Err(FsError::NameCollision);
                }
                if tst.st_mode & libc::S_IFMT == libc::S_IFDIR {
                    return Err(FsError::AccessDenied);
                }
                let tnode = self.0.nodes.get(&FileKey::of(&tst));
                let guard = tnode.as_ref().map(|n| n.lock());
                if guard.as_ref().is_some_and(|g| !g.opens.is_empty()) {
                    return Err(FsError::AccessDenied);
                }
                let tmeta = info::read_dos_at(tp, OsStr::from_bytes(t.name.as_bytes()));
                if info::attributes(&tst, tmeta.as_ref()) & attr::READONLY != 0 {
                    return Err(FsError::AccessDenied);
                }
                rename_at(spfd.as_raw_fd(), &csrc, tp, &ctgt, 0)?;
                drop(guard);
                // Keep the client's spelling of the new name.
                if t.name != client_name
                    && rename_at(tp, &ctgt, tp, &cclient, libc::RENAME_NOREPLACE).is_ok()
                {
                    final_name = client_name.to_string();
                } else {
                    final_name = t.name.clone();
                }
            }
        } else {
            rename_at(
                spfd.as_raw_fd(),
                &csrc,
                tp,
                &cclient,
                libc::RENAME_NOREPLACE,
            )?;
            final_name = client_name.to_string();
        }
        let new_rel = path::join(&t.parent_rel, &final_name);
        if !self.0.is_dir {
            crate::resource_fork_file::file_renamed(&self.0.share, &old_rel, &new_rel);
        }
        for h in share.all_opens() {
            let p = h.rel();
            if p == old_rel {
                h.set_rel(new_rel.clone());
            } else if let Some(rest) = p.strip_prefix(&prefix) {
                h.set_rel(format!("{new_rel}/{rest}"));
            }
        }
        self.0.set_rel(new_rel);
        Ok(())
    }
}

fn rename_at(
    sfd: RawFd,
    sname: &std::ffi::CStr,
    tfd: RawFd,
    tname: &std::ffi::CStr,
    flags: u32,
) -> FsResult<()> {
    // SAFETY: plain syscall with single validated components.
    let r = unsafe { libc::renameat2(sfd, sname.as_ptr(), tfd, tname.as_ptr(), flags) };
    if r < 0 {
        return Err(match last_errno() {
            libc::EEXIST | libc::ENOTEMPTY => FsError::NameCollision,
            libc::EBUSY => FsError::AccessDenied,
            e => FsError::from_errno(e),
        });
    }
    Ok(())
}
