//! SMB2 commands as protocol-neutral operation classes (`op_metrics.rs`,
//! the advisor). The mapping, by command:
//!
//! | command | class |
//! |---|---|
//! | CREATE | `create` when it made the file (CreateAction FILE_CREATED, MS-SMB2 2.2.14), else `open` (failed opens too: they are lookups) |
//! | CLOSE | `close` |
//! | READ | `read` |
//! | WRITE | `write` |
//! | LOCK | `lock` |
//! | QUERY_DIRECTORY | `list` |
//! | QUERY_INFO | `stat` |
//! | SET_INFO | FileRenameInformation(Ex), FileLinkInformation: `rename`; FileDispositionInformation(Ex): `delete`; any other class: `stat` (attribute changes) |
//! | NEGOTIATE, SESSION_SETUP, LOGOFF, TREE_CONNECT, TREE_DISCONNECT, FLUSH, IOCTL, CANCEL, ECHO, CHANGE_NOTIFY, OPLOCK_BREAK | `other` |

use braid_advisor::OpClass;
use braid_smb_proto::codec::Message;
use braid_smb_proto::fscc::file_info as fi;
use braid_smb_proto::header::Command;
use braid_smb_proto::messages::create::{create_action, CreateResponse};
use braid_smb_proto::messages::query_info::info_type;
use braid_smb_proto::messages::read::ReadRequest;
use braid_smb_proto::messages::set_info::SetInfoRequest;
use braid_smb_proto::messages::write::decode_write_request_ref;

/// MS-SMB2 2.2.20: a READ response's header and fixed body before its data.
const READ_RESPONSE_FIXED: u64 = 64 + 16;

/// What the metrics need to know of one finished SMB2 request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmbOp {
    pub class: OpClass,
    /// File data moved (READ: the data returned; WRITE: the data written).
    pub data_bytes: u64,
    /// READ: offset and length asked for.
    pub read: Option<(u64, u64)>,
}

/// Classify a request (`request`: the whole message, header first) by its
/// response (`response`: the whole message; `response_len`: with any
/// payload).
pub fn classify(
    command: Command,
    request: &[u8],
    success: bool,
    response: &[u8],
    response_len: u64,
) -> SmbOp {
    let mut op = SmbOp {
        class: OpClass::Other,
        data_bytes: 0,
        read: None,
    };
    op.class = match command {
        Command::Create => {
            let created = success
                && CreateResponse::decode(response)
                    .is_ok_and(|r| r.create_action == create_action::CREATED);
            if created {
                OpClass::Create
            } else {
                OpClass::Open
            }
        }
        Command::Close => OpClass::Close,
        Command::Read => {
            if let Ok(r) = ReadRequest::decode(request) {
                op.read = Some((r.offset, u64::from(r.length)));
            }
            if success {
                op.data_bytes = response_len.saturating_sub(READ_RESPONSE_FIXED);
            }
            OpClass::Read
        }
        Command::Write => {
            if success {
                if let Ok((w, _)) = decode_write_request_ref(request) {
                    op.data_bytes = u64::from(w.length);
                }
            }
            OpClass::Write
        }
        Command::Lock => OpClass::Lock,
        Command::QueryDirectory => OpClass::List,
        Command::QueryInfo => OpClass::Stat,
        Command::SetInfo => match SetInfoRequest::decode(request) {
            Ok(s) if s.info_type == info_type::FILE => match s.file_info_class {
                fi::FILE_RENAME_INFORMATION
                | fi::FILE_RENAME_INFORMATION_EX
                | fi::FILE_LINK_INFORMATION => OpClass::Rename,
                fi::FILE_DISPOSITION_INFORMATION | fi::FILE_DISPOSITION_INFORMATION_EX => {
                    OpClass::Delete
                }
                _ => OpClass::Stat,
            },
            _ => OpClass::Stat,
        },
        Command::Negotiate
        | Command::SessionSetup
        | Command::Logoff
        | Command::TreeConnect
        | Command::TreeDisconnect
        | Command::Flush
        | Command::Ioctl
        | Command::Cancel
        | Command::Echo
        | Command::ChangeNotify
        | Command::OplockBreak => OpClass::Other,
    };
    op
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_smb_proto::codec::FileId;

    fn with_header(command: Command, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut v = vec![0u8; 64];
        v[0..4].copy_from_slice(b"\xfeSMB");
        v[4] = 64;
        v[12..14].copy_from_slice(&(command as u16).to_le_bytes());
        body(&mut v);
        v
    }

    fn set_info(class: u8) -> Vec<u8> {
        with_header(Command::SetInfo, |out| {
            SetInfoRequest {
                info_type: info_type::FILE,
                file_info_class: class,
                buffer: vec![0; 8],
                additional_information: 0,
                file_id: FileId::default(),
            }
            .encode(out)
        })
    }

    fn create_response(action: u32) -> Vec<u8> {
        with_header(Command::Create, |out| {
            CreateResponse {
                create_action: action,
                ..CreateResponse::default()
            }
            .encode(out)
        })
    }

    #[test]
    fn create_is_create_only_when_it_made_the_file() {
        let c = |resp: &[u8], ok| classify(Command::Create, &[], ok, resp, 0).class;
        assert_eq!(
            c(&create_response(create_action::CREATED), true),
            OpClass::Create
        );
        assert_eq!(
            c(&create_response(create_action::OPENED), true),
            OpClass::Open
        );
        assert_eq!(
            c(&create_response(create_action::OVERWRITTEN), true),
            OpClass::Open
        );
        assert_eq!(c(&[], false), OpClass::Open, "a failed open is a lookup");
    }

    #[test]
    fn set_info_by_information_class() {
        let c = |class| classify(Command::SetInfo, &set_info(class), true, &[], 0).class;
        assert_eq!(c(fi::FILE_RENAME_INFORMATION), OpClass::Rename);
        assert_eq!(c(fi::FILE_LINK_INFORMATION), OpClass::Rename);
        assert_eq!(c(fi::FILE_DISPOSITION_INFORMATION), OpClass::Delete);
        assert_eq!(c(fi::FILE_DISPOSITION_INFORMATION_EX), OpClass::Delete);
        assert_eq!(c(fi::FILE_BASIC_INFORMATION), OpClass::Stat);
        assert_eq!(c(fi::FILE_END_OF_FILE_INFORMATION), OpClass::Stat);
        // A malformed SET_INFO is still counted, as an attribute operation.
        assert_eq!(
            classify(Command::SetInfo, &[1, 2], false, &[], 0).class,
            OpClass::Stat
        );
    }

    #[test]
    fn reads_and_writes_carry_sizes() {
        let read = with_header(Command::Read, |out| {
            ReadRequest {
                padding: 0x50,
                flags: 0,
                length: 4096,
                offset: 8192,
                file_id: FileId::default(),
                minimum_count: 0,
                channel: 0,
                remaining_bytes: 0,
                read_channel_info: Vec::new(),
            }
            .encode(out)
        });
        let op = classify(Command::Read, &read, true, &[], 80 + 4096);
        assert_eq!(
            op,
            SmbOp {
                class: OpClass::Read,
                data_bytes: 4096,
                read: Some((8192, 4096))
            }
        );
        let failed = classify(Command::Read, &read, false, &[], 73);
        assert_eq!(failed.data_bytes, 0);
        // Garbage never panics.
        assert_eq!(
            classify(Command::Write, &[0; 3], true, &[], 0).data_bytes,
            0
        );
        for c in [
            Command::Negotiate,
            Command::Ioctl,
            Command::Flush,
            Command::Echo,
        ] {
            assert_eq!(classify(c, &[], true, &[], 0).class, OpClass::Other);
        }
        assert_eq!(
            classify(Command::QueryDirectory, &[], true, &[], 0).class,
            OpClass::List
        );
        assert_eq!(
            classify(Command::QueryInfo, &[], true, &[], 0).class,
            OpClass::Stat
        );
        assert_eq!(
            classify(Command::Lock, &[], true, &[], 0).class,
            OpClass::Lock
        );
        assert_eq!(
            classify(Command::Close, &[], true, &[], 0).class,
            OpClass::Close
        );
    }
}
