//! QUERY_INFO: MS-SMB2 3.3.5.20.

use braid_smb_proto::codec::Message;
use braid_smb_proto::fscc::file_info::{self, FileQueryInput};
use braid_smb_proto::fscc::{
    fs_info, security, FsStats, QueryOutput, VolumeInfo, SMB2_0_INFO_FILE, SMB2_0_INFO_FILESYSTEM,
    SMB2_0_INFO_QUOTA, SMB2_0_INFO_SECURITY,
};
use braid_smb_proto::messages::aapl::caps;
use braid_smb_proto::messages::create::access_mask;
use braid_smb_proto::messages::{QueryInfoRequest, QueryInfoResponse};
use braid_smb_proto::NtStatus;

use super::convert::view_of;
use crate::smb::{blocking, OpResult, Reply, Request};

/// MS-FSA 2.1.5.12: classes that need FILE_READ_ATTRIBUTES.
fn file_class_access(class: u8) -> u32 {
    use file_info::*;
    match class {
        FILE_BASIC_INFORMATION
        | FILE_ALL_INFORMATION
        | FILE_NETWORK_OPEN_INFORMATION
        | FILE_ATTRIBUTE_TAG_INFORMATION => access_mask::FILE_READ_ATTRIBUTES,
        FILE_FULL_EA_INFORMATION => access_mask::FILE_READ_EA,
        _ => 0,
    }
}

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = QueryInfoRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if let Some(q) = super::quota::find(req, r.file_id) {
        return super::quota::query_info(req, &r, &q).await;
    }
    let open = req.open(r.file_id)?;
    let max = req.conn.config.max_transact_size;
    if r.output_buffer_length > max {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let out = match r.info_type {
        SMB2_0_INFO_FILE => {
            check_file_class(req, open.granted_access, r.file_info_class)?;
            if r.file_info_class == file_info::FILE_FULL_EA_INFORMATION {
                return query_eas(&open, r.output_buffer_length).await;
            }
            let handle = open.handle.clone();
            let want_streams = r.file_info_class == file_info::FILE_STREAM_INFORMATION;
            let hide_empty = super::create_aapl::hides_empty_streams(req.session()?, req.share()?);
            let (info, streams) = blocking(move || {
                let streams = if want_streams {
                    handle.streams_with(hide_empty)?
                } else {
                    Vec::new()
                };
                Ok::<_, braid_fs::FsError>((handle.info()?, streams))
            })
            .await?;
            let streams: Vec<file_info::StreamInfo> = streams
                .into_iter()
                .map(|s| file_info::StreamInfo {
                    name: s.name,
                    size: s.size,
                    allocation_size: s.allocation_size,
                })
                .collect();
            let mut view = view_of(&info);
            view.file_id =
                super::create_aapl::file_id_for(req.session()?, req.share()?, view.file_id);
            let base_path = open.handle.path();
            // MS-FSCC 2.4.5 FileAlternateNameInformation: the 8.3 name of the
            // last component ("." for the share root, as Samba answers).
            let last = base_path
                .rsplit('\\')
                .next()
                .filter(|n| !n.is_empty())
                .unwrap_or(".");
            let short = braid_fs::shortname::short_name(last);
            // A stream open's name is the file's with `:stream` (MS-FSCC
            // 2.1.5 pathname), as FileNameInformation shows it on NTFS.
            let path = match open.handle.stream_name() {
                Some(s) => format!("{base_path}:{s}"),
                None => base_path,
            };
            let q = FileQueryInput {
                view: &view,
                path: &path,
                short_name: &short,
                access_mask: open.granted_access,
                position: open.handle.position(),
                mode: open.mode.load(std::sync::atomic::Ordering::Relaxed),
                volume_serial: 0,
                streams: &streams,
            };
            file_info::query_file_info(r.file_info_class, &q, r.output_buffer_length)
                .map_err(|e| e.status())?
        }
        SMB2_0_INFO_FILESYSTEM => query_fs(req, &r).await?,
        SMB2_0_INFO_SECURITY => {
            // MS-SMB2 3.3.5.20.3: READ_CONTROL for owner/group/DACL,
            // ACCESS_SYSTEM_SECURITY for the SACL.
            const SACL: u32 = 0x8;
            if r.additional_information & SACL != 0
                && open.granted_access & access_mask::ACCESS_SYSTEM_SECURITY == 0
            {
                return Err(NtStatus::ACCESS_DENIED);
            }
            // Asking for no part at all needs no right: the answer is an
            // empty descriptor (smbtorture smb2.sdread, as Windows does).
            if r.additional_information & !SACL != 0
                && open.granted_access & access_mask::READ_CONTROL == 0
            {
                return Err(NtStatus::ACCESS_DENIED);
            }
            // The stored descriptor, or the one a file without any has
            // (smb/acl.rs), with the parts asked for.
            let token = crate::smb::acl::token_of(req.session()?.identity.lock().unwrap().as_ref());
            let handle = open.handle.clone();
            let nfs_aces = super::create_aapl::negotiated(req.session()?, caps::SUPPORTS_NFS_ACE);
            let (stored, who) = blocking(move || {
                let who = if nfs_aces {
                    Some(handle.unix_identity()?)
                } else {
                    None
                };
                Ok::<_, braid_fs::FsError>((handle.security_descriptor()?, who))
            })
            .await?;
            let object = braid_fs::ObjectSecurity {
                descriptor: stored,
                is_directory: open.is_directory,
            };
            let mut sd = crate::smb::acl::effective_descriptor(&object, &token)
                .filtered(r.additional_information);
            if let Some(who) = who {
                crate::smb::nfs_ace::add_to(&mut sd, who);
            }
            let sd = sd.encode();
            let out = security::query_security_output(sd, r.output_buffer_length);
            if out.status == NtStatus::BUFFER_TOO_SMALL {
                // 3.3.5.20.3: an ERROR response carrying the size needed.
                let mut reply = crate::smb::send::error_reply(NtStatus::BUFFER_TOO_SMALL);
                reply.msg.truncate(braid_smb_proto::HEADER_LEN);
                braid_smb_proto::codec::Message::encode(
                    &braid_smb_proto::messages::ErrorResponse {
                        error_context_count: 0,
                        error_data: out.data,
                    },
                    &mut reply.msg,
                );
                return Ok(reply);
            }
            out
        }
        // MS-SMB2 3.3.5.20.4: the object store keeps no user quotas (only
        // the quota index answers a quota query: ops/quota.rs).
        SMB2_0_INFO_QUOTA => return Err(NtStatus::NOT_SUPPORTED),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    };
    Ok(Reply::with_status(
        out.status,
        &QueryInfoResponse { output: out.data },
    ))
}

/// MS-SMB2 3.3.5.20.1: the rights a FILE class needs, and the classes a
/// dialect has.
pub(super) fn check_file_class(
    req: &Request<'_>,
    granted_access: u32,
    class: u8,
) -> Result<(), NtStatus> {
    let need = file_class_access(class);
    if granted_access & need != need {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // MS-SMB2 3.3.5.20.1: FileNormalizedNameInformation is for
    // 3.1.1 connections only (smbtorture smb2.getinfo.normalized).
    if class == file_info::FILE_NORMALIZED_NAME_INFORMATION
        && req.conn.dialect() != braid_smb_proto::messages::negotiate::dialect::SMB311
    {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    Ok(())
}

/// MS-SMB2 3.3.5.20.2: information about the share's file system.
pub(super) async fn query_fs(
    req: &Request<'_>,
    r: &QueryInfoRequest,
) -> Result<QueryOutput, NtStatus> {
    let share = req.share()?.clone();
    let files = req.conn.server.files.clone();
    let fs = share.fs.clone();
    let time_machine_cap = share.mac.time_machine_max_size;
    let (st, bundles) = blocking(move || {
        let bundles = match time_machine_cap {
            Some(_) => files.sparse_bundle_usage(&fs)?,
            None => 0,
        };
        Ok::<_, braid_fs::FsError>((files.fs_stats(&fs)?, bundles))
    })
    .await?;
    let mut stats = FsStats {
        total_blocks: st.total_blocks,
        free_blocks: st.free_blocks,
        avail_blocks: st.available_blocks,
        block_size: st.block_size.min(u32::MAX as u64) as u32,
        bytes_per_sector: 512,
    };
    if let Some(cap) = time_machine_cap {
        stats = time_machine_stats(&stats, cap, bundles);
    }
    let mut vol = VolumeInfo {
        label: share.name.clone(),
        serial_number: volume_serial(&share.name),
        trim_enabled: share.fs.can_trim(),
        ..Default::default()
    };
    if !share.fs.named_streams() {
        vol.fs_attributes &= !fs_info::FILE_NAMED_STREAMS;
    }
    fs_info::query_fs_info(r.file_info_class, &stats, &vol, r.output_buffer_length)
        .map_err(|e| e.status())
}

fn volume_serial(name: &str) -> u32 {
    // Stable per share name (FNV-1a): clients cache by serial.
    name.to_lowercase().bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

/// MS-FSA 2.1.5.12.x FileFullEaInformation (MS-FSCC 2.4.15): all the
/// file's extended attributes as one chain; STATUS_NO_EAS_ON_FILE when it
/// has none, STATUS_BUFFER_TOO_SMALL when the chain does not fit (Samba
/// returns no partial chain either).
async fn query_eas(open: &std::sync::Arc<crate::smb::session::Open>, out_len: u32) -> OpResult {
    let handle = open.handle.clone();
    let eas = blocking(move || handle.get_eas()).await?;
    if eas.is_empty() {
        return Err(NtStatus::NO_EAS_ON_FILE);
    }
    let list: Vec<file_info::FullEa> = eas
        .into_iter()
        .map(|e| file_info::FullEa {
            flags: e.flags,
            name: e.name.into_bytes(),
            value: e.value,
        })
        .collect();
    let data = file_info::encode_full_ea_list(&list);
    if data.len() > out_len as usize {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    Ok(Reply::of(&QueryInfoResponse { output: data }))
}

/// A Time Machine share with a size cap (`[[share]] time_machine_max_size`)
/// is that big, less what its backups use, in 1 KiB units as Samba
/// reports; never more free than the disk has.
fn time_machine_stats(disk: &FsStats, cap: u64, used: u64) -> FsStats {
    const UNIT: u64 = 1024;
    let disk_avail = disk.avail_blocks.saturating_mul(disk.block_size as u64);
    let avail = cap.saturating_sub(used).min(disk_avail) / UNIT;
    FsStats {
        total_blocks: cap / UNIT,
        free_blocks: avail,
        avail_blocks: avail,
        block_size: UNIT as u32,
        bytes_per_sector: 512,
    }
}
