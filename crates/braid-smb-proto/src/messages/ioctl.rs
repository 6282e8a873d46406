//! MS-SMB2 2.2.31 / 2.2.32: SMB2 IOCTL request and response, plus the
//! FSCTL payloads the SMB2 layer itself handles: VALIDATE_NEGOTIATE_INFO
//! (2.2.31.4, 2.2.32.6) and QUERY_NETWORK_INTERFACE_INFO (2.2.32.5).

use super::wire::{len32, min_buffer, u16_list, var_region};
use crate::codec::{
    body_reader, DecodeError, DecodeResult, FileId, Guid, Message, Reader, WriteLe,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// FSCTL/IOCTL codes (MS-SMB2 2.2.31, MS-FSCC 2.3).
pub mod fsctl {
    pub const DFS_GET_REFERRALS: u32 = 0x0006_0194;
    pub const DFS_GET_REFERRALS_EX: u32 = 0x0006_01B0;
    pub const PIPE_PEEK: u32 = 0x0011_400C;
    pub const PIPE_WAIT: u32 = 0x0011_0018;
    pub const PIPE_TRANSCEIVE: u32 = 0x0011_C017;
    pub const SRV_COPYCHUNK: u32 = 0x0014_40F2;
    pub const SRV_COPYCHUNK_WRITE: u32 = 0x0014_80F2;
    pub const SRV_ENUMERATE_SNAPSHOTS: u32 = 0x0014_4064;
    pub const SRV_REQUEST_RESUME_KEY: u32 = 0x0014_0078;
    pub const SRV_READ_HASH: u32 = 0x0014_41BB;
    pub const LMR_REQUEST_RESILIENCY: u32 = 0x0014_01D4;
    pub const QUERY_NETWORK_INTERFACE_INFO: u32 = 0x0014_01FC;
    pub const VALIDATE_NEGOTIATE_INFO: u32 = 0x0014_0204;
    pub const SET_REPARSE_POINT: u32 = 0x0009_00A4;
    pub const GET_REPARSE_POINT: u32 = 0x0009_00A8;
    pub const DELETE_REPARSE_POINT: u32 = 0x0009_00AC;
    pub const FILE_LEVEL_TRIM: u32 = 0x0009_8208;
    pub const SET_SPARSE: u32 = 0x0009_00C4;
    pub const SET_ZERO_DATA: u32 = 0x0009_80C8;
    pub const QUERY_ALLOCATED_RANGES: u32 = 0x0009_40CF;
    pub const GET_COMPRESSION: u32 = 0x0009_003C;
    pub const SET_COMPRESSION: u32 = 0x0009_C040;
    pub const GET_OBJECT_ID: u32 = 0x0009_009C;
    pub const CREATE_OR_GET_OBJECT_ID: u32 = 0x0009_00C0;
    pub const GET_INTEGRITY_INFORMATION: u32 = 0x0009_027C;
    pub const SET_INTEGRITY_INFORMATION: u32 = 0x0009_C280;
    pub const DUPLICATE_EXTENTS_TO_FILE: u32 = 0x0009_8344;
    pub const OFFLOAD_READ: u32 = 0x0009_4264;
    pub const OFFLOAD_WRITE: u32 = 0x0009_8268;
    pub const IS_PATHNAME_VALID: u32 = 0x0009_002C;
}

/// MS-SMB2 2.2.31: Flags.
pub mod flags {
    pub const IS_IOCTL: u32 = 0x0000_0000;
    pub const IS_FSCTL: u32 = 0x0000_0001;
}

/// MS-SMB2 2.2.31. `output` is the request's output buffer, which clients
/// normally leave empty.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IoctlRequest {
    pub ctl_code: u32,
    pub file_id: FileId,
    pub input: Vec<u8>,
    pub output: Vec<u8>,
    pub max_input_response: u32,
    pub max_output_response: u32,
    pub flags: u32,
}

impl IoctlRequest {
    pub const STRUCTURE_SIZE: u16 = 57;
}

impl Message for IoctlRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        r.skip(2)?; // Reserved
        let ctl_code = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let in_off = r.u32()? as usize;
        let in_len = r.u32()? as usize;
        let max_input_response = r.u32()?;
        let out_off = r.u32()? as usize;
        let out_len = r.u32()? as usize;
        let max_output_response = r.u32()?;
        let flags = r.u32()?;
        r.skip(4)?; // Reserved2
        let input = var_region(msg, in_off, in_len, Self::STRUCTURE_SIZE, "Input")?.to_vec();
        let output = var_region(msg, out_off, out_len, Self::STRUCTURE_SIZE, "Output")?.to_vec();
        Ok(IoctlRequest {
            ctl_code,
            file_id,
            input,
            output,
            max_input_response,
            max_output_response,
            flags,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(0);
        out.put_u32(self.ctl_code);
        self.file_id.write(out);
        let in_at = out.len();
        out.put_u32(0);
        out.put_u32(len32(self.input.len(), "Input"));
        out.put_u32(self.max_input_response);
        let out_at = out.len();
        out.put_u32(0);
        out.put_u32(len32(self.output.len(), "Output"));
        out.put_u32(self.max_output_response);
        out.put_u32(self.flags);
        out.put_u32(0);
        // Offsets are zero for empty buffers, as Windows and Linux clients send.
        if !self.input.is_empty() {
            let off = len32(out.len(), "InputOffset");
            out.patch_u32(in_at, off);
            out.extend_from_slice(&self.input);
        }
        if !self.output.is_empty() {
            out.align_to(8);
            let off = len32(out.len(), "OutputOffset");
            out.patch_u32(out_at, off);
            out.extend_from_slice(&self.output);
        }
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

/// MS-SMB2 2.2.32
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IoctlResponse {
    pub ctl_code: u32,
    pub file_id: FileId,
    pub input: Vec<u8>,
    pub output: Vec<u8>,
    pub flags: u32,
}

impl IoctlResponse {
    pub const STRUCTURE_SIZE: u16 = 49;
}

impl Message for IoctlResponse {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        r.skip(2)?; // Reserved
        let ctl_code = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let in_off = r.u32()? as usize;
        let in_len = r.u32()? as usize;
        let out_off = r.u32()? as usize;
        let out_len = r.u32()? as usize;
        let flags = r.u32()?;
        r.skip(4)?; // Reserved2
        let input = var_region(msg, in_off, in_len, Self::STRUCTURE_SIZE, "Input")?.to_vec();
        let output = var_region(msg, out_off, out_len, Self::STRUCTURE_SIZE, "Output")?.to_vec();
        Ok(IoctlResponse {
            ctl_code,
            file_id,
            input,
            output,
            flags,
        })
    }

    /// MS-SMB2 3.3.5.15: InputOffset is the Buffer (0x70), OutputOffset
    /// is InputOffset + InputCount rounded up to 8, even for empty buffers.
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(0);
        out.put_u32(self.ctl_code);
        self.file_id.write(out);
        let in_at = out.len();
        out.put_u32(0);
        out.put_u32(len32(self.input.len(), "Input"));
        let out_at = out.len();
        out.put_u32(0);
        out.put_u32(len32(self.output.len(), "Output"));
        out.put_u32(self.flags);
        out.put_u32(0);
        let in_off = len32(out.len(), "InputOffset");
        out.patch_u32(in_at, in_off);
        out.extend_from_slice(&self.input);
        out.align_to(8);
        let out_off = len32(out.len(), "OutputOffset");
        out.patch_u32(out_at, out_off);
        out.extend_from_slice(&self.output);
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

/// MS-SMB2 2.2.31.4: VALIDATE_NEGOTIATE_INFO request (the IOCTL input).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ValidateNegotiateInfoRequest {
    pub capabilities: u32,
    pub guid: Guid,
    pub security_mode: u16,
    pub dialects: Vec<u16>,
}

impl ValidateNegotiateInfoRequest {
    /// Decode from the IOCTL input buffer. Trailing bytes are rejected.
    pub fn decode(b: &[u8]) -> DecodeResult<Self> {
        let mut r = Reader::new(b);
        let capabilities = r.u32()?;
        let guid = r.array::<16>()?;
        let security_mode = r.u16()?;
        let count = r.u16()? as usize;
        let dialects = u16_list(r.bytes(count * 2)?);
        if r.remaining() != 0 {
            return Err(DecodeError::Invalid("VALIDATE_NEGOTIATE_INFO length"));
        }
        Ok(ValidateNegotiateInfoRequest {
            capabilities,
            guid,
            security_mode,
            dialects,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.capabilities);
        out.extend_from_slice(&self.guid);
        out.put_u16(self.security_mode);
        out.put_u16(super::wire::len16(self.dialects.len(), "Dialects"));
        for d in &self.dialects {
            out.put_u16(*d);
        }
    }
}

/// MS-SMB2 2.2.32.6: VALIDATE_NEGOTIATE_INFO response (the IOCTL output).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ValidateNegotiateInfoResponse {
    pub capabilities: u32,
    pub guid: Guid,
    pub security_mode: u16,
    pub dialect: u16,
}

impl ValidateNegotiateInfoResponse {
    pub const SIZE: usize = 24;

    pub fn decode(b: &[u8]) -> DecodeResult<Self> {
        if b.len() != Self::SIZE {
            return Err(DecodeError::Invalid(
                "VALIDATE_NEGOTIATE_INFO response length",
            ));
        }
        let mut r = Reader::new(b);
        Ok(ValidateNegotiateInfoResponse {
            capabilities: r.u32()?,
            guid: r.array::<16>()?,
            security_mode: r.u16()?,
            dialect: r.u16()?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.capabilities);
        out.extend_from_slice(&self.guid);
        out.put_u16(self.security_mode);
        out.put_u16(self.dialect);
    }
}

/// MS-SMB2 2.2.32.5: Capability bits of a network interface.
pub mod interface_capability {
    pub const RSS_CAPABLE: u32 = 0x0000_0001;
    pub const RDMA_CAPABLE: u32 = 0x0000_0002;
}

/// SOCKADDR_STORAGE families used by 2.2.32.5.1/2.
pub const AF_INET: u16 = 0x0002;
pub const AF_INET6: u16 = 0x0017;

/// MS-SMB2 2.2.32.5: one NETWORK_INTERFACE_INFO entry (one per address).
/// `link_speed` is in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkInterfaceInfo {
    pub if_index: u32,
    pub capability: u32,
    pub link_speed: u64,
    pub address: IpAddr,
}

impl NetworkInterfaceInfo {
    /// Size of one entry: 24 fixed bytes + 128-byte SOCKADDR_STORAGE.
    pub const SIZE: usize = 152;

    fn encode_one(&self, out: &mut Vec<u8>, last: bool) {
        let start = out.len();
        out.put_u32(if last { 0 } else { Self::SIZE as u32 });
        out.put_u32(self.if_index);
        out.put_u32(self.capability);
        out.put_u32(0);
        out.put_u64(self.link_speed);
        // SOCKADDR_STORAGE: Family, then 2.2.32.5.1 / 2.2.32.5.2 (network
        // byte order; Port, FlowInfo and ScopeId are zero).
        match self.address {
            IpAddr::V4(a) => {
                out.put_u16(AF_INET);
                out.put_u16(0);
                out.extend_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                out.put_u16(AF_INET6);
                out.put_u16(0);
                out.put_u32(0);
                out.extend_from_slice(&a.octets());
                out.put_u32(0);
            }
        }
        out.put_zeros(start + Self::SIZE - out.len());
    }
}

/// Encode the FSCTL_QUERY_NETWORK_INTERFACE_INFO output: entries chained
/// by Next (each 152 bytes, so 8-byte aligned), the last with Next = 0.
pub fn encode_network_interface_info(list: &[NetworkInterfaceInfo], out: &mut Vec<u8>) {
    for (i, e) in list.iter().enumerate() {
        e.encode_one(out, i + 1 == list.len());
    }
}

/// Decode a NETWORK_INTERFACE_INFO chain (client side). Entries with an
/// unknown address family are skipped.
pub fn decode_network_interface_info(b: &[u8]) -> DecodeResult<Vec<NetworkInterfaceInfo>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while !b.is_empty() {
        let entry =
            Reader::new(b).region(pos, NetworkInterfaceInfo::SIZE, "NETWORK_INTERFACE_INFO")?;
        let mut r = Reader::new(entry);
        let next = r.u32()? as usize;
        let if_index = r.u32()?;
        let capability = r.u32()?;
        r.skip(4)?;
        let link_speed = r.u64()?;
        let family = r.u16()?;
        r.skip(2)?; // Port
        let address = match family {
            AF_INET => Some(IpAddr::V4(Ipv4Addr::from(r.array::<4>()?))),
            AF_INET6 => {
                r.skip(4)?; // FlowInfo
                Some(IpAddr::V6(Ipv6Addr::from(r.array::<16>()?)))
            }
            _ => None,
        };
        if let Some(address) = address {
            out.push(NetworkInterfaceInfo {
                if_index,
                capability,
                link_speed,
                address,
            });
        }
        if next == 0 {
            break;
        }
        if next < NetworkInterfaceInfo::SIZE || !next.is_multiple_of(8) {
            return Err(DecodeError::Invalid("NETWORK_INTERFACE_INFO Next"));
        }
        pos = pos
            .checked_add(next)
            .ok_or(DecodeError::OutOfBounds("NETWORK_INTERFACE_INFO Next"))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn request_round_trips(c in any::<u32>(), p in any::<u64>(), v in any::<u64>(),
                               input in proptest::collection::vec(any::<u8>(), 0..100),
                               output in proptest::collection::vec(any::<u8>(), 0..50),
                               mi in any::<u32>(), mo in any::<u32>(), f in any::<u32>()) {
            round_trip(&IoctlRequest { ctl_code: c, file_id: FileId { persistent: p, volatile: v }, input, output,
                max_input_response: mi, max_output_response: mo, flags: f });
        }

        #[test]
        fn response_round_trips(c in any::<u32>(), p in any::<u64>(), v in any::<u64>(),
                                input in proptest::collection::vec(any::<u8>(), 0..50),
                                output in proptest::collection::vec(any::<u8>(), 0..100), f in any::<u32>()) {
            let b = round_trip(&IoctlResponse { ctl_code: c, file_id: FileId { persistent: p, volatile: v },
                input: input.clone(), output, flags: f });
            prop_assert_eq!(&b[64 + 24..64 + 28], &0x70u32.to_le_bytes());
            let out_off = u32::from_le_bytes(b[64 + 32..64 + 36].try_into().unwrap());
            prop_assert_eq!(out_off as usize, (0x70 + input.len()).div_ceil(8) * 8);
        }

        #[test]
        fn validate_negotiate_round_trips(c in any::<u32>(), g in any::<[u8; 16]>(), s in any::<u16>(),
                                          d in proptest::collection::vec(any::<u16>(), 0..6)) {
            let m = ValidateNegotiateInfoRequest { capabilities: c, guid: g, security_mode: s, dialects: d };
            let mut b = Vec::new();
            m.encode(&mut b);
            prop_assert_eq!(ValidateNegotiateInfoRequest::decode(&b).unwrap(), m);
            let m = ValidateNegotiateInfoResponse { capabilities: c, guid: g, security_mode: s, dialect: 0x311 };
            let mut b = Vec::new();
            m.encode(&mut b);
            prop_assert_eq!(b.len(), 24);
            prop_assert_eq!(ValidateNegotiateInfoResponse::decode(&b).unwrap(), m);
        }

        #[test]
        fn interface_list_never_panics(b in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = decode_network_interface_info(&b);
            let _ = ValidateNegotiateInfoRequest::decode(&b);
            let _ = ValidateNegotiateInfoResponse::decode(&b);
        }
    }

    #[test]
    fn empty_response_offsets() {
        let b = round_trip(&IoctlResponse::default());
        assert_eq!(&b[64 + 24..64 + 28], &0x70u32.to_le_bytes());
        assert_eq!(&b[64 + 32..64 + 36], &0x70u32.to_le_bytes());
        assert_eq!(b.len(), 64 + 49);
    }

    #[test]
    fn network_interfaces() {
        let list = vec![
            NetworkInterfaceInfo {
                if_index: 2,
                capability: interface_capability::RSS_CAPABLE,
                link_speed: 10_000_000_000,
                address: "192.168.1.10".parse().unwrap(),
            },
            NetworkInterfaceInfo {
                if_index: 2,
                capability: 0,
                link_speed: 1,
                address: "fe80::1".parse().unwrap(),
            },
        ];
        let mut b = Vec::new();
        encode_network_interface_info(&list, &mut b);
        assert_eq!(b.len(), 304);
        assert_eq!(&b[0..4], &152u32.to_le_bytes());
        assert_eq!(&b[152..156], &0u32.to_le_bytes());
        assert_eq!(&b[24..26], &2u16.to_le_bytes());
        assert_eq!(&b[28..32], &[192, 168, 1, 10]);
        assert_eq!(&b[152 + 24..152 + 26], &0x17u16.to_le_bytes());
        assert_eq!(b[152 + 32], 0xfe);
        assert_eq!(decode_network_interface_info(&b).unwrap(), list);
    }
}
