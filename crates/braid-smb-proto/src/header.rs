//! MS-SMB2 2.2.1: the SMB2 packet header (sync and async forms).

use crate::codec::{DecodeError, DecodeResult, Reader, WriteLe};

pub const HEADER_LEN: usize = 64;
pub const PROTOCOL_ID: [u8; 4] = [0xFE, b'S', b'M', b'B'];
pub const SMB1_PROTOCOL_ID: [u8; 4] = [0xFF, b'S', b'M', b'B'];
pub const TRANSFORM_PROTOCOL_ID: [u8; 4] = [0xFD, b'S', b'M', b'B'];
pub const COMPRESSION_PROTOCOL_ID: [u8; 4] = [0xFC, b'S', b'M', b'B'];

pub mod flags {
    pub const SERVER_TO_REDIR: u32 = 0x0000_0001;
    pub const ASYNC_COMMAND: u32 = 0x0000_0002;
    pub const RELATED_OPERATIONS: u32 = 0x0000_0004;
    pub const SIGNED: u32 = 0x0000_0008;
    pub const PRIORITY_MASK: u32 = 0x0000_0070;
    pub const DFS_OPERATIONS: u32 = 0x1000_0000;
    pub const REPLAY_OPERATION: u32 = 0x2000_0000;
}

#[repr(u16)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    Negotiate = 0x00,
    SessionSetup = 0x01,
    Logoff = 0x02,
    TreeConnect = 0x03,
    TreeDisconnect = 0x04,
    Create = 0x05,
    Close = 0x06,
    Flush = 0x07,
    Read = 0x08,
    Write = 0x09,
    Lock = 0x0A,
    Ioctl = 0x0B,
    Cancel = 0x0C,
    Echo = 0x0D,
    QueryDirectory = 0x0E,
    ChangeNotify = 0x0F,
    QueryInfo = 0x10,
    SetInfo = 0x11,
    OplockBreak = 0x12,
}

impl Command {
    pub const COUNT: usize = 0x13;
    pub fn from_u16(v: u16) -> Option<Command> {
        use Command::*;
        Some(match v {
            0x00 => Negotiate,
            0x01 => SessionSetup,
            0x02 => Logoff,
            0x03 => TreeConnect,
            0x04 => TreeDisconnect,
            0x05 => Create,
            0x06 => Close,
            0x07 => Flush,
            0x08 => Read,
            0x09 => Write,
            0x0A => Lock,
            0x0B => Ioctl,
            0x0C => Cancel,
            0x0D => Echo,
            0x0E => QueryDirectory,
            0x0F => ChangeNotify,
            0x10 => QueryInfo,
            0x11 => SetInfo,
            0x12 => OplockBreak,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        use Command::*;
        match self {
            Negotiate => "negotiate",
            SessionSetup => "session_setup",
            Logoff => "logoff",
            TreeConnect => "tree_connect",
            TreeDisconnect => "tree_disconnect",
            Create => "create",
            Close => "close",
            Flush => "flush",
            Read => "read",
            Write => "write",
            Lock => "lock",
            Ioctl => "ioctl",
            Cancel => "cancel",
            Echo => "echo",
            QueryDirectory => "query_directory",
            ChangeNotify => "change_notify",
            QueryInfo => "query_info",
            SetInfo => "set_info",
            OplockBreak => "oplock_break",
        }
    }
}

/// The 64-byte header. `status` doubles as ChannelSequence/Reserved in
/// requests (MS-SMB2 2.2.1.2); `async_id` is meaningful only with
/// ASYNC_COMMAND, otherwise `process_id`/`tree_id` are.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    pub credit_charge: u16,
    pub status: u32,
    pub command: u16,
    pub credits: u16,
    pub flags: u32,
    pub next_command: u32,
    pub message_id: u64,
    pub process_id: u32,
    pub tree_id: u32,
    pub async_id: u64,
    pub session_id: u64,
    pub signature: [u8; 16],
}

impl Header {
    pub fn is_async(&self) -> bool {
        self.flags & flags::ASYNC_COMMAND != 0
    }
    pub fn is_response(&self) -> bool {
        self.flags & flags::SERVER_TO_REDIR != 0
    }
    pub fn is_related(&self) -> bool {
        self.flags & flags::RELATED_OPERATIONS != 0
    }
    pub fn is_signed(&self) -> bool {
        self.flags & flags::SIGNED != 0
    }
    /// ChannelSequence of a 3.x request (low 16 bits of the status field).
    pub fn channel_sequence(&self) -> u16 {
        self.status as u16
    }

    pub fn decode(msg: &[u8]) -> DecodeResult<Header> {
        let mut r = Reader::new(msg);
        if r.array::<4>()? != PROTOCOL_ID {
            return Err(DecodeError::Invalid("ProtocolId"));
        }
        if r.u16()? != HEADER_LEN as u16 {
            return Err(DecodeError::Invalid("header StructureSize"));
        }
        let credit_charge = r.u16()?;
        let status = r.u32()?;
        let command = r.u16()?;
        let credits = r.u16()?;
        let flags = r.u32()?;
        let next_command = r.u32()?;
        let message_id = r.u64()?;
        let (process_id, tree_id, async_id);
        if flags & flags::ASYNC_COMMAND != 0 {
            async_id = r.u64()?;
            process_id = 0;
            tree_id = 0;
        } else {
            process_id = r.u32()?;
            tree_id = r.u32()?;
            async_id = 0;
        }
        let session_id = r.u64()?;
        let signature = r.array::<16>()?;
        Ok(Header {
            credit_charge,
            status,
            command,
            credits,
            flags,
            next_command,
            message_id,
            process_id,
            tree_id,
            async_id,
            session_id,
            signature,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&PROTOCOL_ID);
        out.put_u16(HEADER_LEN as u16);
        out.put_u16(self.credit_charge);
        out.put_u32(self.status);
        out.put_u16(self.command);
        out.put_u16(self.credits);
        out.put_u32(self.flags);
        out.put_u32(self.next_command);
        out.put_u64(self.message_id);
        if self.is_async() {
            out.put_u64(self.async_id);
        } else {
            out.put_u32(self.process_id);
            out.put_u32(self.tree_id);
        }
        out.put_u64(self.session_id);
        out.extend_from_slice(&self.signature);
    }
}

/// Byte offsets inside the header, for in-place patching (signatures,
/// NextCommand, credits) without re-encoding.
pub mod offsets {
    pub const STATUS: usize = 8;
    pub const COMMAND: usize = 12;
    pub const CREDITS: usize = 14;
    pub const FLAGS: usize = 16;
    pub const NEXT_COMMAND: usize = 20;
    pub const MESSAGE_ID: usize = 24;
    pub const SESSION_ID: usize = 40;
    pub const SIGNATURE: usize = 48;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn header_round_trips(cc in any::<u16>(), st in any::<u32>(), cmd in 0u16..0x13, cr in any::<u16>(),
                              fl in any::<u32>(), nc in any::<u32>(), mid in any::<u64>(), pid in any::<u32>(),
                              tid in any::<u32>(), aid in any::<u64>(), sid in any::<u64>(), sig in any::<[u8;16]>()) {
            let async_ = fl & flags::ASYNC_COMMAND != 0;
            let h = Header { credit_charge: cc, status: st, command: cmd, credits: cr, flags: fl, next_command: nc,
                message_id: mid, process_id: if async_ {0} else {pid}, tree_id: if async_ {0} else {tid},
                async_id: if async_ {aid} else {0}, session_id: sid, signature: sig };
            let mut v = Vec::new();
            h.encode(&mut v);
            prop_assert_eq!(v.len(), HEADER_LEN);
            prop_assert_eq!(Header::decode(&v).unwrap(), h);
        }
    }
}
