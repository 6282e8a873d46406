//! MS-SMB2 2.2.13 / 2.2.14: SMB2 CREATE request and response, and the
//! create context chain (2.2.13.2, 2.2.14.2).

use super::wire::{fixed_end, len16, len32, min_buffer, sub, var_region};
use crate::codec::{
    body_reader, put_utf16le, utf16le_to_string, DecodeError, DecodeResult, FileId, Message,
    Reader, WriteLe,
};

/// MS-SMB2 2.2.13: RequestedOplockLevel / OplockLevel.
pub mod oplock_level {
    pub const NONE: u8 = 0x00;
    pub const LEVEL_II: u8 = 0x01;
    pub const EXCLUSIVE: u8 = 0x08;
    pub const BATCH: u8 = 0x09;
    pub const LEASE: u8 = 0xFF;
}

/// MS-SMB2 2.2.13: ImpersonationLevel.
pub mod impersonation_level {
    pub const ANONYMOUS: u32 = 0;
    pub const IDENTIFICATION: u32 = 1;
    pub const IMPERSONATION: u32 = 2;
    pub const DELEGATE: u32 = 3;
}

/// MS-SMB2 2.2.13: CreateDisposition.
pub mod create_disposition {
    pub const SUPERSEDE: u32 = 0;
    pub const OPEN: u32 = 1;
    pub const CREATE: u32 = 2;
    pub const OPEN_IF: u32 = 3;
    pub const OVERWRITE: u32 = 4;
    pub const OVERWRITE_IF: u32 = 5;
}

/// MS-SMB2 2.2.13: CreateOptions.
pub mod create_options {
    pub const DIRECTORY_FILE: u32 = 0x0000_0001;
    pub const WRITE_THROUGH: u32 = 0x0000_0002;
    pub const SEQUENTIAL_ONLY: u32 = 0x0000_0004;
    pub const NO_INTERMEDIATE_BUFFERING: u32 = 0x0000_0008;
    pub const SYNCHRONOUS_IO_ALERT: u32 = 0x0000_0010;
    pub const SYNCHRONOUS_IO_NONALERT: u32 = 0x0000_0020;
    pub const NON_DIRECTORY_FILE: u32 = 0x0000_0040;
    pub const CREATE_TREE_CONNECTION: u32 = 0x0000_0080;
    pub const COMPLETE_IF_OPLOCKED: u32 = 0x0000_0100;
    pub const NO_EA_KNOWLEDGE: u32 = 0x0000_0200;
    pub const RANDOM_ACCESS: u32 = 0x0000_0800;
    pub const DELETE_ON_CLOSE: u32 = 0x0000_1000;
    pub const OPEN_BY_FILE_ID: u32 = 0x0000_2000;
    pub const OPEN_FOR_BACKUP_INTENT: u32 = 0x0000_4000;
    pub const NO_COMPRESSION: u32 = 0x0000_8000;
    pub const OPEN_REMOTE_INSTANCE: u32 = 0x0000_0400;
    pub const OPEN_REQUIRING_OPLOCK: u32 = 0x0001_0000;
    pub const DISALLOW_EXCLUSIVE: u32 = 0x0002_0000;
    pub const RESERVE_OPFILTER: u32 = 0x0010_0000;
    pub const OPEN_REPARSE_POINT: u32 = 0x0020_0000;
    pub const OPEN_NO_RECALL: u32 = 0x0040_0000;
    pub const OPEN_FOR_FREE_SPACE_QUERY: u32 = 0x0080_0000;
}

/// MS-SMB2 2.2.13: ShareAccess.
pub mod share_access {
    pub const READ: u32 = 0x0000_0001;
    pub const WRITE: u32 = 0x0000_0002;
    pub const DELETE: u32 = 0x0000_0004;
}

/// MS-SMB2 2.2.14: CreateAction.
pub mod create_action {
    pub const SUPERSEDED: u32 = 0;
    pub const OPENED: u32 = 1;
    pub const CREATED: u32 = 2;
    pub const OVERWRITTEN: u32 = 3;
}

/// MS-SMB2 2.2.14: response Flags.
pub mod create_flags {
    pub const REPARSEPOINT: u8 = 0x01;
}

/// MS-SMB2 2.2.13.1: access mask bits (file, pipe, printer and directory
/// variants share values).
pub mod access_mask {
    pub const FILE_READ_DATA: u32 = 0x0000_0001;
    pub const FILE_LIST_DIRECTORY: u32 = 0x0000_0001;
    pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
    pub const FILE_ADD_FILE: u32 = 0x0000_0002;
    pub const FILE_APPEND_DATA: u32 = 0x0000_0004;
    pub const FILE_ADD_SUBDIRECTORY: u32 = 0x0000_0004;
    pub const FILE_READ_EA: u32 = 0x0000_0008;
    pub const FILE_WRITE_EA: u32 = 0x0000_0010;
    pub const FILE_EXECUTE: u32 = 0x0000_0020;
    pub const FILE_TRAVERSE: u32 = 0x0000_0020;
    pub const FILE_DELETE_CHILD: u32 = 0x0000_0040;
    pub const FILE_READ_ATTRIBUTES: u32 = 0x0000_0080;
    pub const FILE_WRITE_ATTRIBUTES: u32 = 0x0000_0100;
    pub const DELETE: u32 = 0x0001_0000;
    pub const READ_CONTROL: u32 = 0x0002_0000;
    pub const WRITE_DAC: u32 = 0x0004_0000;
    pub const WRITE_OWNER: u32 = 0x0008_0000;
    pub const SYNCHRONIZE: u32 = 0x0010_0000;
    pub const ACCESS_SYSTEM_SECURITY: u32 = 0x0100_0000;
    pub const MAXIMUM_ALLOWED: u32 = 0x0200_0000;
    pub const GENERIC_ALL: u32 = 0x1000_0000;
    pub const GENERIC_EXECUTE: u32 = 0x2000_0000;
    pub const GENERIC_WRITE: u32 = 0x4000_0000;
    pub const GENERIC_READ: u32 = 0x8000_0000;
    /// Every specific and standard right a file can be granted.
    pub const FILE_ALL_ACCESS: u32 = 0x001F_01FF;
}

/// MS-FSCC 2.6: file attributes.
pub mod file_attributes {
    pub const READONLY: u32 = 0x0000_0001;
    pub const HIDDEN: u32 = 0x0000_0002;
    pub const SYSTEM: u32 = 0x0000_0004;
    pub const DIRECTORY: u32 = 0x0000_0010;
    pub const ARCHIVE: u32 = 0x0000_0020;
    pub const NORMAL: u32 = 0x0000_0080;
    pub const TEMPORARY: u32 = 0x0000_0100;
    pub const SPARSE_FILE: u32 = 0x0000_0200;
    pub const REPARSE_POINT: u32 = 0x0000_0400;
    pub const COMPRESSED: u32 = 0x0000_0800;
    pub const OFFLINE: u32 = 0x0000_1000;
    pub const NOT_CONTENT_INDEXED: u32 = 0x0000_2000;
    pub const ENCRYPTED: u32 = 0x0000_4000;
    pub const INTEGRITY_STREAM: u32 = 0x0000_8000;
    pub const NO_SCRUB_DATA: u32 = 0x0002_0000;
    pub const RECALL_ON_OPEN: u32 = 0x0004_0000;
    pub const PINNED: u32 = 0x0008_0000;
    pub const UNPINNED: u32 = 0x0010_0000;
    pub const RECALL_ON_DATA_ACCESS: u32 = 0x0040_0000;
}

/// MS-SMB2 2.2.13.2: create context names (4-byte ASCII tags; the app
/// instance contexts use 16-byte GUID names).
pub mod context_name {
    pub const EA_BUFFER: &[u8; 4] = b"ExtA";
    pub const SD_BUFFER: &[u8; 4] = b"SecD";
    pub const DURABLE_HANDLE_REQUEST: &[u8; 4] = b"DHnQ";
    pub const DURABLE_HANDLE_RECONNECT: &[u8; 4] = b"DHnC";
    pub const ALLOCATION_SIZE: &[u8; 4] = b"AlSi";
    pub const QUERY_MAXIMAL_ACCESS_REQUEST: &[u8; 4] = b"MxAc";
    pub const TIMEWARP_TOKEN: &[u8; 4] = b"TWrp";
    pub const QUERY_ON_DISK_ID: &[u8; 4] = b"QFid";
    pub const REQUEST_LEASE: &[u8; 4] = b"RqLs";
    pub const DURABLE_HANDLE_REQUEST_V2: &[u8; 4] = b"DH2Q";
    pub const DURABLE_HANDLE_RECONNECT_V2: &[u8; 4] = b"DH2C";
    /// Apple's SMB2 extensions (`messages::aapl`).
    pub const AAPL: &[u8; 4] = b"AAPL";
    pub const POSIX: [u8; 16] = [
        0x93, 0xAD, 0x25, 0x50, 0x9C, 0xB4, 0x11, 0xE7, 0xB4, 0x23, 0x83, 0xDE, 0x96, 0x8B, 0xCD,
        0x7C,
    ];
    pub const APP_INSTANCE_ID: [u8; 16] = [
        0x45, 0xBC, 0xA6, 0x6A, 0xEF, 0xA7, 0xF7, 0x4A, 0x90, 0x08, 0xFA, 0x46, 0x2E, 0x14, 0x4D,
        0x74,
    ];
    pub const APP_INSTANCE_VERSION: [u8; 16] = [
        0xB9, 0x82, 0xD0, 0xB7, 0x3B, 0x56, 0x07, 0x4F, 0xA0, 0x7B, 0x52, 0x4A, 0x81, 0x16, 0xA0,
        0x10,
    ];
    pub const SVHDX_OPEN_DEVICE_CONTEXT: [u8; 16] = [
        0x9C, 0xCB, 0xCF, 0x9E, 0x04, 0xC1, 0xE6, 0x43, 0x98, 0x0E, 0x15, 0x8D, 0xA1, 0xF6, 0xEC,
        0x83,
    ];
}

/// MS-SMB2 2.2.13.2: one create context. `name` is the raw Name bytes
/// (see [`context_name`]); `data` its Data. Interpreting the data is left
/// to the caller.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreateContext {
    pub name: Vec<u8>,
    pub data: Vec<u8>,
}

impl CreateContext {
    pub fn new(name: &[u8], data: Vec<u8>) -> Self {
        CreateContext {
            name: name.to_vec(),
            data,
        }
    }

    /// First context whose name is `name`.
    pub fn find<'a>(list: &'a [CreateContext], name: &[u8]) -> Option<&'a CreateContext> {
        list.iter().find(|c| c.name == name)
    }
}

/// Decode a chain of create contexts occupying exactly `b` (MS-SMB2
/// 2.2.13.2: Next is the offset from this context to the next, 8-byte
/// aligned; NameOffset/DataOffset are relative to the context).
pub fn decode_create_contexts(b: &[u8]) -> DecodeResult<Vec<CreateContext>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < b.len() {
        let mut r = Reader::at(b, pos);
        let next = r.u32()? as usize;
        let name_off = r.u16()? as usize;
        let name_len = r.u16()? as usize;
        r.skip(2)?; // Reserved
        let data_off = r.u16()? as usize;
        let data_len = r.u32()? as usize;
        let ctx = if next == 0 {
            &b[pos..]
        } else {
            if !next.is_multiple_of(8) || next < 16 {
                return Err(DecodeError::Invalid("create context Next"));
            }
            sub(b, pos, next, "create context Next")?
        };
        if name_len == 0 {
            return Err(DecodeError::Invalid("create context NameLength"));
        }
        if name_off < 16 || (data_len > 0 && data_off < 16) {
            return Err(DecodeError::OutOfBounds(
                "create context NameOffset/DataOffset",
            ));
        }
        let name = sub(ctx, name_off, name_len, "create context Name")?;
        let data = sub(ctx, data_off, data_len, "create context Data")?;
        out.push(CreateContext {
            name: name.to_vec(),
            data: data.to_vec(),
        });
        if next == 0 {
            break;
        }
        pos += next;
    }
    Ok(out)
}

/// Append a create context chain at the current position, which the caller
/// has 8-byte aligned (relative to the message start). Returns the number
/// of bytes written.
pub fn encode_create_contexts(out: &mut Vec<u8>, contexts: &[CreateContext]) -> usize {
    let start = out.len();
    for (i, c) in contexts.iter().enumerate() {
        let ctx_start = out.len();
        out.put_u32(0); // Next, patched below
        out.put_u16(16);
        out.put_u16(len16(c.name.len(), "create context Name"));
        out.put_u16(0);
        let data_off_at = out.len();
        out.put_u16(0);
        out.put_u32(len32(c.data.len(), "create context Data"));
        out.extend_from_slice(&c.name);
        if !c.data.is_empty() {
            out.align_to(8);
            let off = len16(out.len() - ctx_start, "create context DataOffset");
            out.patch_u16(data_off_at, off);
            out.extend_from_slice(&c.data);
        }
        if i + 1 < contexts.len() {
            out.align_to(8);
            let next = len32(out.len() - ctx_start, "create context Next");
            out.patch_u32(ctx_start, next);
        }
    }
    out.len() - start
}

/// MS-SMB2 2.2.13
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreateRequest {
    pub security_flags: u8,
    pub requested_oplock_level: u8,
    pub impersonation_level: u32,
    pub smb_create_flags: u64,
    pub desired_access: u32,
    pub file_attributes: u32,
    pub share_access: u32,
    pub create_disposition: u32,
    pub create_options: u32,
    pub name: String,
    pub contexts: Vec<CreateContext>,
}

impl CreateRequest {
    pub const STRUCTURE_SIZE: u16 = 57;
}

impl Message for CreateRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let security_flags = r.u8()?;
        let requested_oplock_level = r.u8()?;
        let impersonation_level = r.u32()?;
        let smb_create_flags = r.u64()?;
        r.skip(8)?; // Reserved
        let desired_access = r.u32()?;
        let file_attributes = r.u32()?;
        let share_access = r.u32()?;
        let create_disposition = r.u32()?;
        let create_options = r.u32()?;
        let name_off = r.u16()? as usize;
        let name_len = r.u16()? as usize;
        let ctx_off = r.u32()? as usize;
        let ctx_len = r.u32()? as usize;
        let name = utf16le_to_string(var_region(
            msg,
            name_off,
            name_len,
            Self::STRUCTURE_SIZE,
            "Name",
        )?)?;
        let ctx = var_region(
            msg,
            ctx_off,
            ctx_len,
            Self::STRUCTURE_SIZE,
            "CreateContexts",
        )?;
        let contexts = decode_create_contexts(ctx)?;
        Ok(CreateRequest {
            security_flags,
            requested_oplock_level,
            impersonation_level,
            smb_create_flags,
            desired_access,
            file_attributes,
            share_access,
            create_disposition,
            create_options,
            name,
            contexts,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.security_flags);
        out.put_u8(self.requested_oplock_level);
        out.put_u32(self.impersonation_level);
        out.put_u64(self.smb_create_flags);
        out.put_u64(0);
        out.put_u32(self.desired_access);
        out.put_u32(self.file_attributes);
        out.put_u32(self.share_access);
        out.put_u32(self.create_disposition);
        out.put_u32(self.create_options);
        let name_at = out.len();
        out.put_u16(0);
        out.put_u16(0);
        let ctx_at = out.len();
        out.put_u32(0);
        out.put_u32(0);
        // NameOffset points at the Buffer even for an empty name, as
        // Windows clients send it.
        let name_start = out.len();
        put_utf16le(out, &self.name);
        let name_len = len16(out.len() - name_start, "Name");
        out.patch_u16(name_at, len16(name_start, "NameOffset"));
        out.patch_u16(name_at + 2, name_len);
        if !self.contexts.is_empty() {
            out.align_to(8);
            let off = len32(out.len(), "CreateContextsOffset");
            let len = encode_create_contexts(out, &self.contexts);
            out.patch_u32(ctx_at, off);
            out.patch_u32(ctx_at + 4, len32(len, "CreateContextsLength"));
        }
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

/// MS-SMB2 2.2.14
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreateResponse {
    pub oplock_level: u8,
    pub flags: u8,
    pub create_action: u32,
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub allocation_size: u64,
    pub end_of_file: u64,
    pub file_attributes: u32,
    pub file_id: FileId,
    pub contexts: Vec<CreateContext>,
}

impl CreateResponse {
    pub const STRUCTURE_SIZE: u16 = 89;
}

impl Message for CreateResponse {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let oplock_level = r.u8()?;
        let flags = r.u8()?;
        let create_action = r.u32()?;
        let creation_time = r.u64()?;
        let last_access_time = r.u64()?;
        let last_write_time = r.u64()?;
        let change_time = r.u64()?;
        let allocation_size = r.u64()?;
        let end_of_file = r.u64()?;
        let file_attributes = r.u32()?;
        r.skip(4)?; // Reserved2
        let file_id = FileId::read(&mut r)?;
        let ctx_off = r.u32()? as usize;
        let ctx_len = r.u32()? as usize;
        let ctx = var_region(
            msg,
            ctx_off,
            ctx_len,
            Self::STRUCTURE_SIZE,
            "CreateContexts",
        )?;
        Ok(CreateResponse {
            oplock_level,
            flags,
            create_action,
            creation_time,
            last_access_time,
            last_write_time,
            change_time,
            allocation_size,
            end_of_file,
            file_attributes,
            file_id,
            contexts: decode_create_contexts(ctx)?,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.oplock_level);
        out.put_u8(self.flags);
        out.put_u32(self.create_action);
        out.put_u64(self.creation_time);
        out.put_u64(self.last_access_time);
        out.put_u64(self.last_write_time);
        out.put_u64(self.change_time);
        out.put_u64(self.allocation_size);
        out.put_u64(self.end_of_file);
        out.put_u32(self.file_attributes);
        out.put_u32(0);
        self.file_id.write(out);
        let ctx_at = out.len();
        out.put_u32(0);
        out.put_u32(0);
        debug_assert_eq!(out.len(), fixed_end(Self::STRUCTURE_SIZE));
        if !self.contexts.is_empty() {
            out.align_to(8);
            let off = len32(out.len(), "CreateContextsOffset");
            let len = encode_create_contexts(out, &self.contexts);
            out.patch_u32(ctx_at, off);
            out.patch_u32(ctx_at + 4, len32(len, "CreateContextsLength"));
        }
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    fn ctx() -> impl Strategy<Value = CreateContext> {
        (
            prop_oneof![
                Just(b"MxAc".to_vec()),
                Just(b"RqLs".to_vec()),
                Just(b"DH2Q".to_vec()),
                Just(context_name::APP_INSTANCE_ID.to_vec()),
                proptest::collection::vec(any::<u8>(), 1..9),
            ],
            proptest::collection::vec(any::<u8>(), 0..60),
        )
            .prop_map(|(name, data)| CreateContext { name, data })
    }

    proptest! {
        #[test]
        fn request_round_trips(sf in any::<u8>(), ol in any::<u8>(), il in any::<u32>(), cf in any::<u64>(),
                               da in any::<u32>(), fa in any::<u32>(), sa in any::<u32>(), cd in any::<u32>(),
                               co in any::<u32>(), name in "\\PC{0,40}",
                               contexts in proptest::collection::vec(ctx(), 0..5)) {
            let m = CreateRequest { security_flags: sf, requested_oplock_level: ol, impersonation_level: il,
                smb_create_flags: cf, desired_access: da, file_attributes: fa, share_access: sa,
                create_disposition: cd, create_options: co, name, contexts };
            let v = round_trip(&m);
            prop_assert_eq!(&v[64 + 44..64 + 46], &0x78u16.to_le_bytes());
            let ctx_off = u32::from_le_bytes(v[64 + 48..64 + 52].try_into().unwrap());
            prop_assert_eq!(ctx_off % 8, 0);
        }

        #[test]
        fn response_round_trips(ol in any::<u8>(), fl in any::<u8>(), ca in any::<u32>(), t in any::<[u64; 6]>(),
                                fa in any::<u32>(), p in any::<u64>(), vo in any::<u64>(),
                                contexts in proptest::collection::vec(ctx(), 0..5)) {
            let m = CreateResponse { oplock_level: ol, flags: fl, create_action: ca, creation_time: t[0],
                last_access_time: t[1], last_write_time: t[2], change_time: t[3], allocation_size: t[4],
                end_of_file: t[5], file_attributes: fa, file_id: FileId { persistent: p, volatile: vo }, contexts };
            round_trip(&m);
        }

        #[test]
        fn context_chain_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_create_contexts(&b);
        }
    }

    #[test]
    fn context_layout_matches_windows() {
        // MxAc with no data then RqLs with 32 bytes of data.
        let mut out = Vec::new();
        let n = encode_create_contexts(
            &mut out,
            &[
                CreateContext::new(b"MxAc", vec![]),
                CreateContext::new(b"RqLs", vec![0xAA; 32]),
            ],
        );
        assert_eq!(n, out.len());
        assert_eq!(&out[0..4], &24u32.to_le_bytes()); // Next: 16 + 4 name, aligned to 24
        assert_eq!(&out[4..6], &16u16.to_le_bytes()); // NameOffset
        assert_eq!(&out[10..12], &0u16.to_le_bytes()); // DataOffset 0 when no data
        assert_eq!(&out[24..28], &0u32.to_le_bytes()); // last Next = 0
        assert_eq!(&out[24 + 10..24 + 12], &24u16.to_le_bytes()); // DataOffset 24
        assert_eq!(out.len(), 24 + 24 + 32);
    }

    #[test]
    fn empty_request_has_buffer_byte() {
        let v = round_trip(&CreateRequest::default());
        assert_eq!(v.len(), 64 + 57);
    }

    #[test]
    fn rejects_bad_context_next() {
        let m = CreateRequest {
            contexts: vec![
                CreateContext::new(b"MxAc", vec![]),
                CreateContext::new(b"QFid", vec![]),
            ],
            ..Default::default()
        };
        let mut v = encode(&m);
        let off = u32::from_le_bytes(v[64 + 48..64 + 52].try_into().unwrap()) as usize;
        v[off..off + 4].copy_from_slice(&12u32.to_le_bytes());
        assert!(CreateRequest::decode(&v).is_err());
        v[off..off + 4].copy_from_slice(&4096u32.to_le_bytes());
        assert!(CreateRequest::decode(&v).is_err());
    }
}
