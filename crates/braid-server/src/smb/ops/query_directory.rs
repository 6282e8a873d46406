//! QUERY_DIRECTORY: MS-SMB2 3.3.5.18.

use braid_smb_proto::codec::Message;
use braid_smb_proto::fscc::dir_info::AaplDirEntry;
use braid_smb_proto::fscc::{file_info, DirListingEncoder};
use braid_smb_proto::messages::aapl::caps;
use braid_smb_proto::messages::create::access_mask;
use braid_smb_proto::messages::{QueryDirectoryRequest, QueryDirectoryResponse};
use braid_smb_proto::NtStatus;

use braid_fs::shortname::{is_8_3, short_name};

use braid_fs::AccessPolicy;

use super::convert::{view_of, wildcard_match};
use crate::smb::acl::SmbAccess;
use crate::smb::session::Open;
use crate::smb::{blocking, OpResult, Reply, Request};

const RESTART_SCANS: u8 = 0x01;
const RETURN_SINGLE_ENTRY: u8 = 0x02;
const REOPEN: u8 = 0x10;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = QueryDirectoryRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let open = req.open(r.file_id)?;
    if !open.is_directory {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open.granted_access & access_mask::FILE_LIST_DIRECTORY == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let max = req.conn.config.max_transact_size;
    if r.output_buffer_length > max {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut enc = DirListingEncoder::new(r.file_information_class, r.output_buffer_length as usize)
        .map_err(|e| e.status())?;

    let restart = r.flags & (RESTART_SCANS | REOPEN) != 0;
    let needs_listing = {
        let mut cur = open.dir.lock().unwrap();
        if restart {
            cur.entries = None;
            cur.position = 0;
        }
        if cur.entries.is_none() && !r.file_name.is_empty() {
            cur.pattern = Some(r.file_name.clone());
        } else if cur.pattern.is_none() {
            cur.pattern = Some(if r.file_name.is_empty() {
                "*".into()
            } else {
                r.file_name.clone()
            });
        }
        cur.entries.is_none()
    };
    let first_query = needs_listing;
    if needs_listing {
        let handle = open.handle.clone();
        let pattern = open
            .dir
            .lock()
            .unwrap()
            .pattern
            .clone()
            .unwrap_or_else(|| "*".into());
        let access_based = req
            .tree()?
            .share
            .as_ref()
            .is_some_and(|s| s.access_based_enumeration);
        let readable = if access_based {
            let identity = req.session()?.identity.lock().unwrap().clone();
            Some(SmbAccess::new(identity.as_ref(), None))
        } else {
            None
        };
        let entries = blocking(move || {
            let mut entries = handle.read_dir()?;
            // A pattern matches a name or its 8.3 short name, as on NTFS
            // and Samba: clients find a file by the short name they hold.
            entries.retain(|e| {
                wildcard_match(&pattern, &e.name)
                    || (!is_8_3(&e.name) && wildcard_match(&pattern, &short_name(&e.name)))
            });
            if let Some(policy) = readable {
                leave_out_unreadable(&handle, &policy, &mut entries)?;
            }
            Ok(entries)
        })
        .await?;
        let mut cur = open.dir.lock().unwrap();
        cur.entries = Some(entries);
        cur.position = 0;
    }

    if !first_query {
        refresh_window(&open, r.output_buffer_length as usize).await?;
    }

    let aapl = if r.file_information_class == file_info::FILE_ID_BOTH_DIRECTORY_INFORMATION
        && super::create_aapl::negotiated(req.session()?, caps::SUPPORTS_READ_DIR_ATTR)
    {
        Some(aapl_window(req, &open, r.output_buffer_length as usize).await?)
    } else {
        None
    };

    let zero_ids = match req.tree()?.share.as_ref() {
        Some(share) => super::create_aapl::file_id_for(req.session()?, share, 1) == 0,
        None => false,
    };
    let view = |info: &braid_fs::FileInfo| {
        let mut v = view_of(info);
        if zero_ids {
            v.file_id = 0;
        }
        v
    };

    let mut cur = open.dir.lock().unwrap();
    let position = cur.position;
    let entries = cur.entries.as_ref().expect("listing loaded above");
    let mut taken = 0;
    for (i, e) in entries[position..].iter().enumerate() {
        if let Some(mac) = aapl.as_ref().and_then(|(at, w)| {
            // The window was read for these names; a query racing on the
            // same handle may have moved the cursor, then plain entries.
            (*at == position).then(|| w.get(i)).flatten()
        }) {
            if !enc.push_aapl(&e.name, &view(&e.info), (position + i) as u32, mac) {
                break;
            }
            taken += 1;
            if r.flags & RETURN_SINGLE_ENTRY != 0 {
                break;
            }
            continue;
        }
        // MS-FSCC 2.4.8 ShortName: Samba fills it only for names that are
        // not valid 8.3 names themselves.
        let short = if is_8_3(&e.name) {
            String::new()
        } else {
            short_name(&e.name)
        };
        if !enc.push(&e.name, &short, &view(&e.info), (position + i) as u32) {
            break;
        }
        taken += 1;
        if r.flags & RETURN_SINGLE_ENTRY != 0 {
            break;
        }
    }
    let remaining = entries.len() - position;
    cur.position += taken;
    drop(cur);
    if taken == 0 {
        if remaining > 0 {
            // Not even one entry fits the client's buffer.
            return Err(NtStatus::INFO_LENGTH_MISMATCH);
        }
        return Err(if first_query {
            NtStatus::NO_SUCH_FILE
        } else {
            NtStatus::NO_MORE_FILES
        });
    }
    Ok(Reply::of(&QueryDirectoryResponse {
        output: enc.finish(),
    }))
}

/// Apple's per-entry data (`create_aapl.rs`) for the entries that may fit
/// this response, from the cursor on: (cursor position, entries).
async fn aapl_window(
    req: &Request<'_>,
    open: &std::sync::Arc<Open>,
    buffer_len: usize,
) -> Result<(usize, Vec<AaplDirEntry>), NtStatus> {
    let window = buffer_len / FILE_ID_BOTH_MIN_LEN + 1;
    let (position, names, dirs): (usize, Vec<String>, Vec<bool>) = {
        let cur = open.dir.lock().unwrap();
        let entries = cur.entries.as_deref().unwrap_or_default();
        let end = entries.len().min(cur.position + window);
        let slice = entries.get(cur.position..end).unwrap_or_default();
        (
            cur.position,
            slice.iter().map(|e| e.name.clone()).collect(),
            slice.iter().map(|e| e.info.is_directory).collect(),
        )
    };
    let identity = req.session()?.identity.lock().unwrap().clone();
    let policy = SmbAccess::new(identity.as_ref(), None).within(req.tree()?.maximal_access);
    let handle = open.handle.clone();
    let entries = blocking(move || {
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mac = handle.child_mac_info(&refs)?;
        let sds = handle.child_descriptors(&refs)?;
        Ok::<_, braid_fs::FsError>(
            mac.into_iter()
                .zip(sds)
                .zip(dirs)
                .map(|((m, sd), is_directory)| AaplDirEntry {
                    max_access: policy.maximal_access(&braid_fs::ObjectSecurity {
                        descriptor: sd,
                        is_directory,
                    }),
                    resource_fork_size: m.resource_fork_size,
                    finder_info: m.packed_finder_info,
                    unix_mode: m.unix_mode as u16,
                })
                .collect(),
        )
    })
    .await?;
    Ok((position, entries))
}

/// Smallest FileIdBothDirectoryInformation entry: its fixed part and a
/// one-character name, 8-byte aligned.
const FILE_ID_BOTH_MIN_LEN: usize = 112;

/// What a user must be granted on an entry to see it in an access-based
/// listing: read its data (list it, for a directory), its attributes and
/// its EAs, as Windows' and Samba's access-based enumeration ask
/// (smbtorture smb2.acls.ACCESSBASED).
const READ_TO_SEE: u32 =
    access_mask::FILE_READ_DATA | access_mask::FILE_READ_ATTRIBUTES | access_mask::FILE_READ_EA;

/// MS-SMB2 3.3.5.18 with Share.DoAccessBasedDirectoryEnumeration: leave
/// out the entries the user may not read. Only entries with a stored
/// descriptor can refuse anything (the default grants its asker full
/// control); `.` and `..` always stay.
fn leave_out_unreadable(
    dir: &braid_fs::OpenHandle,
    policy: &SmbAccess,
    entries: &mut Vec<braid_fs::DirEntry>,
) -> braid_fs::FsResult<()> {
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    let descriptors = dir.child_descriptors(&names)?;
    let visible: Vec<bool> = descriptors
        .into_iter()
        .zip(entries.iter())
        .map(|(sd, e)| {
            let dot = e.name == "." || e.name == "..";
            dot || sd.is_none_or(|sd| {
                let object = braid_fs::ObjectSecurity {
                    descriptor: Some(sd),
                    is_directory: e.info.is_directory,
                };
                policy.maximal_access(&object) & READ_TO_SEE == READ_TO_SEE
            })
        })
        .collect();
    let mut visible = visible.into_iter();
    entries.retain(|_| visible.next().unwrap_or(true));
    Ok(())
}

/// Smallest directory entry any information class encodes (FileNamesInformation
/// with a one-character name, 8-byte aligned).
const MIN_ENTRY_LEN: usize = 16;

/// A resumed enumeration works on the snapshot taken by the first query.
/// MS-FSA 2.1.5.6.3: entries removed since must not be returned, and those
/// still there are reported as they are now (smbtorture smb2.dir.fixed).
/// Only the entries that can fit in this response are re-read.
async fn refresh_window(open: &std::sync::Arc<Open>, buffer_len: usize) -> Result<(), NtStatus> {
    let window = buffer_len / MIN_ENTRY_LEN + 1;
    let (position, names) = {
        let cur = open.dir.lock().unwrap();
        let Some(entries) = cur.entries.as_ref() else {
            return Ok(());
        };
        let end = entries.len().min(cur.position + window);
        let names: Vec<String> = entries[cur.position..end]
            .iter()
            .map(|e| e.name.clone())
            .collect();
        (cur.position, names)
    };
    if names.is_empty() {
        return Ok(());
    }
    let handle = open.handle.clone();
    let fresh = {
        let names = names.clone();
        blocking(move || handle.refresh_dir_entries(&names)).await?
    };
    let mut cur = open.dir.lock().unwrap();
    if cur.position != position {
        return Ok(()); // another query on this handle moved on meanwhile
    }
    let Some(entries) = cur.entries.as_mut() else {
        return Ok(());
    };
    let end = position + names.len();
    if end > entries.len()
        || entries[position..end]
            .iter()
            .zip(&names)
            .any(|(e, n)| &e.name != n)
    {
        return Ok(());
    }
    let old: Vec<_> = entries.drain(position..end).collect();
    let kept = old.into_iter().zip(fresh).filter_map(|(e, f)| {
        if e.name == "." || e.name == ".." {
            Some(e)
        } else {
            f
        }
    });
    entries.splice(position..position, kept);
    Ok(())
}
