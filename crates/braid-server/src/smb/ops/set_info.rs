//! SET_INFO: MS-SMB2 3.3.5.21.

use braid_smb_proto::codec::Message;
use braid_smb_proto::fscc::access;
use braid_smb_proto::fscc::file_info::{
    decode_set_file_info, SetFileInfo, FILE_DISPOSITION_DELETE, FILE_SEQUENTIAL_ONLY,
    FILE_WRITE_THROUGH,
};
use braid_smb_proto::fscc::security::SecurityDescriptor;
use braid_smb_proto::fscc::{
    SMB2_0_INFO_FILE, SMB2_0_INFO_FILESYSTEM, SMB2_0_INFO_QUOTA, SMB2_0_INFO_SECURITY,
};
use braid_smb_proto::messages::aapl::caps;
use braid_smb_proto::messages::create::access_mask;
use braid_smb_proto::messages::{SetInfoRequest, SetInfoResponse};
use braid_smb_proto::NtStatus;

use crate::smb::notify;
use crate::smb::session::Open;
use crate::smb::{blocking, OpResult, Reply, Request};
use crate::state::from_filetime;

/// Tell CHANGE_NOTIFY watchers of the parent directory (MS-FSA 2.1.4.17),
/// and break the leases on it (`dir_lease.rs`) but the one `open` spares.
fn report(req: &Request<'_>, open: &Open, path: &str, action: u32, filter: u32) {
    if let Ok(share) = req.share() {
        req.conn
            .server
            .smb
            .notify
            .report(&share.name, path, action, filter);
        if open.handle.stream_key() == 0 {
            req.conn.server.smb.dir_leases.break_parent(
                share,
                path,
                crate::smb::dir_lease::spared_by(open),
            );
        }
    }
}

fn need(granted: u32, bits: u32) -> Result<(), NtStatus> {
    if granted & bits == 0 {
        Err(NtStatus::ACCESS_DENIED)
    } else {
        Ok(())
    }
}

/// A FILE_BASIC_INFORMATION time: 0, -1 and -2 leave the time unchanged.
fn basic_time(t: i64) -> Option<std::time::SystemTime> {
    (t > 0).then(|| from_filetime(t as u64))
}

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = SetInfoRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if super::quota::find(req, r.file_id).is_some() {
        return super::quota::set_info(&r);
    }
    let open = req.open(r.file_id)?;
    let granted = open.granted_access;
    let handle = open.handle.clone();
    match r.info_type {
        SMB2_0_INFO_FILE => {
            let info =
                decode_set_file_info(r.file_info_class, &r.buffer).map_err(|e| e.status())?;
            match info {
                SetFileInfo::Basic(b) => {
                    need(granted, access_mask::FILE_WRITE_ATTRIBUTES)?;
                    if b.file_attributes & 0x10 != 0 && !open.is_directory {
                        return Err(NtStatus::INVALID_PARAMETER);
                    }
                    let times = [
                        basic_time(b.creation_time),
                        basic_time(b.last_access_time),
                        basic_time(b.last_write_time),
                        basic_time(b.change_time),
                    ];
                    let attrs = (b.file_attributes != 0).then_some(b.file_attributes);
                    blocking(move || handle.set_basic(times, attrs)).await?;
                    let f = notify::filter::ATTRIBUTES | notify::filter::LAST_WRITE;
                    report(req, &open, &open.handle.path(), notify::action::MODIFIED, f);
                }
                SetFileInfo::Rename(l) => {
                    need(granted, access_mask::DELETE)?;
                    if l.root_directory != 0 {
                        return Err(NtStatus::INVALID_PARAMETER);
                    }
                    let target = l.file_name.trim_start_matches('\\').to_string();
                    if target.is_empty() {
                        return Err(NtStatus::INVALID_PARAMETER);
                    }
                    // MS-FSA 2.1.5.14.11 / MS-SMB2 3.3.4.7: the other opens'
                    // handle caching goes first (a client caching a handle
                    // holds the old name), and the rename waits for the
                    // acknowledgments (smbtorture smb2.lease.rename_wait).
                    if let Some(o) = &open.oplock {
                        let breaking = crate::smb::oplock::NewOpen {
                            sharing_violation: true,
                            lease: o.file.lease_of(o.key).map(|l| l.id),
                            own_key: Some(o.key),
                            ..Default::default()
                        };
                        o.file
                            .break_for_new_open(&breaking, || super::create::wait_on_break(req))
                            .await;
                    }
                    let old_path = open.handle.path();
                    let is_stream = open.handle.stream_key() != 0;
                    // macOS renames folders whose files are open (AAPL).
                    let posix = super::create_aapl::negotiated(req.session()?, caps::UNIX_BASED);
                    blocking(move || {
                        if posix {
                            handle.rename_posix(&target, l.replace_if_exists)
                        } else {
                            handle.rename(&target, l.replace_if_exists)
                        }
                    })
                    .await?;
                    if is_stream {
                        // A stream rename leaves the file's name as it is.
                        return Ok(Reply::of(&SetInfoResponse));
                    }
                    let f = notify::name_filter(open.is_directory);
                    let new_path = open.handle.path();
                    // A move to another directory is a removal from one
                    // and an addition to the other, as Windows reports it
                    // (smbtorture smb2.notify.rec).
                    let parent = |p: &str| p.rfind(['/', '\\']).map_or(0, |i| i);
                    let (old_action, new_action) =
                        if old_path[..parent(&old_path)] == new_path[..parent(&new_path)] {
                            (
                                notify::action::RENAMED_OLD_NAME,
                                notify::action::RENAMED_NEW_NAME,
                            )
                        } else {
                            (notify::action::REMOVED, notify::action::ADDED)
                        };
                    report(req, &open, &old_path, old_action, f);
                    report(req, &open, &new_path, new_action, f);
                    open.renamed
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                SetFileInfo::Link(_) => return Err(NtStatus::NOT_SUPPORTED),
                SetFileInfo::Disposition { delete_pending } => {
                    need(granted, access_mask::DELETE)?;
                    blocking(move || handle.set_delete_on_close(delete_pending)).await?;
                }
                SetFileInfo::DispositionEx { flags } => {
                    need(granted, access_mask::DELETE)?;
                    let delete = flags & FILE_DISPOSITION_DELETE != 0;
                    blocking(move || handle.set_delete_on_close(delete)).await?;
                }
                SetFileInfo::EndOfFile { end_of_file } => {
                    need(granted, access_mask::FILE_WRITE_DATA)?;
                    if open.is_directory {
                        return Err(NtStatus::INVALID_PARAMETER);
                    }
                    if let Some(o) = &open.oplock {
                        o.file.break_level2_except(o.key);
                    }
                    blocking(move || handle.set_end_of_file(end_of_file)).await?;
                    report(
                        req,
                        &open,
                        &open.handle.path(),
                        notify::action::MODIFIED,
                        notify::filter::SIZE,
                    );
                }
                SetFileInfo::Allocation { allocation_size } => {
                    need(granted, access_mask::FILE_WRITE_DATA)?;
                    if open.is_directory {
                        return Err(NtStatus::INVALID_PARAMETER);
                    }
                    if let Some(o) = &open.oplock {
                        o.file.break_level2_except(o.key);
                    }
                    blocking(move || handle.set_allocation(allocation_size)).await?;
                }
                // MS-FSA 2.1.5.14.9: Open.CurrentByteOffset is kept for
                // queries; SMB2 I/O always carries its own offset.
                SetFileInfo::Position {
                    current_byte_offset,
                } => {
                    handle.set_position(current_byte_offset);
                }
                // MS-FSA 2.1.5.15.x FileModeInformation: the decoder
                // refused invalid bits; write-through and sequential-only
                // change, the others stay as the create made them.
                SetFileInfo::Mode { mode } => {
                    use std::sync::atomic::Ordering::Relaxed;
                    const SETTABLE: u32 = FILE_WRITE_THROUGH | FILE_SEQUENTIAL_ONLY;
                    let _ = open
                        .mode
                        .fetch_update(Relaxed, Relaxed, |m| Some(m & !SETTABLE | mode & SETTABLE));
                }
                SetFileInfo::FullEa(list) => {
                    need(granted, access_mask::FILE_WRITE_EA)?;
                    let eas = super::convert::eas_of(list)?;
                    blocking(move || handle.set_eas(&eas)).await?;
                }
            }
        }
        SMB2_0_INFO_SECURITY => {
            // MS-SMB2 3.3.5.21.3: the rights each part needs, then the
            // parts given replace the stored ones (smb/acl.rs).
            const OWNER: u32 = 0x1;
            const GROUP: u32 = 0x2;
            const DACL: u32 = 0x4;
            const SACL: u32 = 0x8;
            let ai = r.additional_information;
            if ai & (OWNER | GROUP) != 0 {
                need(granted, access_mask::WRITE_OWNER)?;
            }
            if ai & DACL != 0 {
                need(granted, access_mask::WRITE_DAC)?;
            }
            if ai & SACL != 0 {
                need(granted, access_mask::ACCESS_SYSTEM_SECURITY)?;
            }
            // MS-DTYP 2.4.6: a self-relative descriptor, every offset checked.
            let mut new = SecurityDescriptor::decode(&r.buffer).map_err(|e| e.status())?;
            let canonical = req.share().is_ok_and(|s| s.canonicalize_acl_flags);
            access::canonicalize_dacl_flags(&mut new, canonical);
            let mut ai = ai;
            let nfs_mode = if ai & DACL != 0
                && super::create_aapl::negotiated(req.session()?, caps::SUPPORTS_NFS_ACE)
            {
                let mode = crate::smb::nfs_ace::take_from(&mut new);
                if new.dacl.is_none() {
                    // Only the mode was set: the stored DACL stays.
                    ai &= !DACL;
                }
                mode
            } else {
                None
            };
            if let Some(mode) = nfs_mode {
                let h = handle.clone();
                blocking(move || h.set_unix_mode(mode)).await?;
            }
            if ai & (OWNER | GROUP | DACL | SACL) == 0 {
                return Ok(Reply::of(&SetInfoResponse));
            }
            let token = crate::smb::acl::token_of(req.session()?.identity.lock().unwrap().as_ref());
            let h = handle.clone();
            let stored = blocking(move || h.security_descriptor()).await?;
            let object = braid_fs::ObjectSecurity {
                descriptor: stored,
                is_directory: open.is_directory,
            };
            let current = crate::smb::acl::effective_descriptor(&object, &token);
            let merged = access::apply_set(&current, &new, ai);
            let bytes = access::encode_checked(&merged).map_err(|e| e.status())?;
            blocking(move || handle.set_security_descriptor(&bytes)).await?;
        }
        SMB2_0_INFO_FILESYSTEM => return Err(NtStatus::ACCESS_DENIED),
        // MS-SMB2 3.3.5.21.4: the object store keeps no user quotas (only
        // the quota index takes a quota set: ops/quota.rs).
        SMB2_0_INFO_QUOTA => return Err(NtStatus::NOT_SUPPORTED),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    }
    Ok(Reply::of(&SetInfoResponse))
}
