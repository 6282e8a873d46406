//! Security descriptors for QUERY_INFO / SET_INFO with
//! `InfoType = SMB2_0_INFO_SECURITY`: self-relative SECURITY_DESCRIPTOR
//! (MS-DTYP 2.4.6), SID (2.4.2), ACL (2.4.5) and ACEs (2.4.4).
//!
//! * [`build_file_security_descriptor`] — a plausible descriptor for a
//!   POSIX file (owner/group/Everyone allow-ACEs from the mode bits),
//!   filtered by the request's AdditionalInformation.
//! * [`SecurityDescriptor::encode`] / [`SecurityDescriptor::decode`] —
//!   the self-relative wire form; the decoder checks every offset and size.
//! * [`query_security_output`] — the OutputBufferLength rule for security
//!   queries (STATUS_BUFFER_TOO_SMALL with the needed size).

use super::{FsccError, QueryOutput};
use crate::codec::{Reader, WriteLe};
use crate::status::NtStatus;
use std::fmt;
use std::str::FromStr;

// MS-SMB2 2.2.37 AdditionalInformation for SMB2_0_INFO_SECURITY.
pub const OWNER_SECURITY_INFORMATION: u32 = 0x0000_0001;
pub const GROUP_SECURITY_INFORMATION: u32 = 0x0000_0002;
pub const DACL_SECURITY_INFORMATION: u32 = 0x0000_0004;
pub const SACL_SECURITY_INFORMATION: u32 = 0x0000_0008;
pub const LABEL_SECURITY_INFORMATION: u32 = 0x0000_0010;
pub const ATTRIBUTE_SECURITY_INFORMATION: u32 = 0x0000_0020;
pub const SCOPE_SECURITY_INFORMATION: u32 = 0x0000_0040;
pub const BACKUP_SECURITY_INFORMATION: u32 = 0x0001_0000;

// MS-DTYP 2.4.6 SECURITY_DESCRIPTOR Control bits.
pub const SE_OWNER_DEFAULTED: u16 = 0x0001;
pub const SE_GROUP_DEFAULTED: u16 = 0x0002;
pub const SE_DACL_PRESENT: u16 = 0x0004;
pub const SE_DACL_DEFAULTED: u16 = 0x0008;
pub const SE_SACL_PRESENT: u16 = 0x0010;
pub const SE_SACL_DEFAULTED: u16 = 0x0020;
pub const SE_DACL_AUTO_INHERIT_REQ: u16 = 0x0100;
pub const SE_SACL_AUTO_INHERIT_REQ: u16 = 0x0200;
pub const SE_DACL_AUTO_INHERITED: u16 = 0x0400;
pub const SE_SACL_AUTO_INHERITED: u16 = 0x0800;
pub const SE_DACL_PROTECTED: u16 = 0x1000;
pub const SE_SACL_PROTECTED: u16 = 0x2000;
pub const SE_RM_CONTROL_VALID: u16 = 0x4000;
pub const SE_SELF_RELATIVE: u16 = 0x8000;

const DACL_CONTROL_BITS: u16 = SE_DACL_PRESENT
    | SE_DACL_DEFAULTED
    | SE_DACL_AUTO_INHERIT_REQ
    | SE_DACL_AUTO_INHERITED
    | SE_DACL_PROTECTED;
const SACL_CONTROL_BITS: u16 = SE_SACL_PRESENT
    | SE_SACL_DEFAULTED
    | SE_SACL_AUTO_INHERIT_REQ
    | SE_SACL_AUTO_INHERITED
    | SE_SACL_PROTECTED;

// MS-DTYP 2.4.4.1 ACE types with the Mask + Sid body.
pub const ACCESS_ALLOWED_ACE_TYPE: u8 = 0x00;
pub const ACCESS_DENIED_ACE_TYPE: u8 = 0x01;
pub const SYSTEM_AUDIT_ACE_TYPE: u8 = 0x02;
pub const SYSTEM_ALARM_ACE_TYPE: u8 = 0x03;
pub const SYSTEM_MANDATORY_LABEL_ACE_TYPE: u8 = 0x11;
pub const SYSTEM_SCOPED_POLICY_ID_ACE_TYPE: u8 = 0x13;

// MS-DTYP 2.4.4.1 ACE flags.
pub const OBJECT_INHERIT_ACE: u8 = 0x01;
pub const CONTAINER_INHERIT_ACE: u8 = 0x02;
pub const NO_PROPAGATE_INHERIT_ACE: u8 = 0x04;
pub const INHERIT_ONLY_ACE: u8 = 0x08;
pub const INHERITED_ACE: u8 = 0x10;

// MS-DTYP 2.4.3 / MS-SMB2 2.2.13.1.1 access mask bits.
pub const FILE_READ_DATA: u32 = 0x0000_0001;
pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
pub const FILE_APPEND_DATA: u32 = 0x0000_0004;
pub const FILE_READ_EA: u32 = 0x0000_0008;
pub const FILE_WRITE_EA: u32 = 0x0000_0010;
pub const FILE_EXECUTE: u32 = 0x0000_0020;
pub const FILE_DELETE_CHILD: u32 = 0x0000_0040;
pub const FILE_READ_ATTRIBUTES: u32 = 0x0000_0080;
pub const FILE_WRITE_ATTRIBUTES: u32 = 0x0000_0100;
pub const DELETE: u32 = 0x0001_0000;
pub const READ_CONTROL: u32 = 0x0002_0000;
pub const WRITE_DAC: u32 = 0x0004_0000;
pub const WRITE_OWNER: u32 = 0x0008_0000;
pub const SYNCHRONIZE: u32 = 0x0010_0000;
pub const FILE_GENERIC_READ: u32 = 0x0012_0089;
pub const FILE_GENERIC_WRITE: u32 = 0x0012_0116;
pub const FILE_GENERIC_EXECUTE: u32 = 0x0012_00A0;
pub const FILE_ALL_ACCESS: u32 = 0x001F_01FF;

/// Fixed header of a self-relative SECURITY_DESCRIPTOR.
pub const SD_HEADER_LEN: usize = 20;
/// MS-DTYP 2.4.2: at most 15 sub-authorities.
pub const SID_MAX_SUB_AUTHORITIES: usize = 15;

/// A security identifier (MS-DTYP 2.4.2). `authority` is the 48-bit
/// IdentifierAuthority value (sent big-endian in 6 bytes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sid {
    pub revision: u8,
    pub authority: u64,
    pub sub_authorities: Vec<u32>,
}

impl Sid {
    /// A revision-1 SID; `sub_authorities` beyond 15 are an invalid SID
    /// (encode writes them, decode rejects them).
    pub fn new(authority: u64, sub_authorities: &[u32]) -> Self {
        Sid {
            revision: 1,
            authority: authority & 0xFFFF_FFFF_FFFF,
            sub_authorities: sub_authorities.to_vec(),
        }
    }
    /// S-1-1-0, Everyone.
    pub fn everyone() -> Self {
        Sid::new(1, &[0])
    }
    /// S-1-3-0, CREATOR OWNER.
    pub fn creator_owner() -> Self {
        Sid::new(3, &[0])
    }
    /// S-1-5-18, LOCAL SYSTEM.
    pub fn local_system() -> Self {
        Sid::new(5, &[18])
    }
    /// S-1-5-32-544, BUILTIN\Administrators.
    pub fn builtin_administrators() -> Self {
        Sid::new(5, &[32, 544])
    }
    /// S-1-22-1-uid: a Unix user without a Windows mapping (Samba's convention).
    pub fn unix_user(uid: u32) -> Self {
        Sid::new(22, &[1, uid])
    }
    /// S-1-22-2-gid: a Unix group without a Windows mapping.
    pub fn unix_group(gid: u32) -> Self {
        Sid::new(22, &[2, gid])
    }

    /// Bytes on the wire: 8 + 4 per sub-authority.
    pub fn wire_len(&self) -> usize {
        8 + 4 * self.sub_authorities.len()
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.revision);
        out.put_u8(self.sub_authorities.len() as u8);
        out.extend_from_slice(&self.authority.to_be_bytes()[2..8]);
        for s in &self.sub_authorities {
            out.put_u32(*s);
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.wire_len());
        self.encode(&mut v);
        v
    }

    /// Read one SID (Revision must be 1, at most 15 sub-authorities).
    pub fn read(r: &mut Reader<'_>) -> Result<Self, FsccError> {
        let bad = |_| FsccError::InvalidSecurityDescriptor("SID truncated");
        let revision = r.u8().map_err(bad)?;
        if revision != 1 {
            return Err(FsccError::InvalidSecurityDescriptor("SID revision"));
        }
        let count = r.u8().map_err(bad)? as usize;
        if count > SID_MAX_SUB_AUTHORITIES {
            return Err(FsccError::InvalidSecurityDescriptor(
                "SID sub-authority count",
            ));
        }
        let a = r.array::<6>().map_err(bad)?;
        let mut auth = [0u8; 8];
        auth[2..].copy_from_slice(&a);
        let authority = u64::from_be_bytes(auth);
        let mut sub_authorities = Vec::with_capacity(count);
        for _ in 0..count {
            sub_authorities.push(r.u32().map_err(bad)?);
        }
        Ok(Sid {
            revision,
            authority,
            sub_authorities,
        })
    }

    pub fn from_bytes(b: &[u8]) -> Result<Self, FsccError> {
        Sid::read(&mut Reader::new(b))
    }
}

/// MS-DTYP 2.4.2.1 string form: `S-1-5-21-…`; an authority of 2^32 or
/// more is printed as 0x-prefixed hex (12 digits).
impl fmt::Display for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "S-{}-", self.revision)?;
        if self.authority >= 1 << 32 {
            write!(f, "0x{:012X}", self.authority)?;
        } else {
            write!(f, "{}", self.authority)?;
        }
        for s in &self.sub_authorities {
            write!(f, "-{s}")?;
        }
        Ok(())
    }
}

impl FromStr for Sid {
    type Err = FsccError;
    /// Parse `S-1-<authority>-<sub>…` (the `S` may be lower case; the
    /// authority decimal or 0x-hex, below 2^48; up to 15 sub-authorities).
    fn from_str(s: &str) -> Result<Self, FsccError> {
        let bad = FsccError::InvalidParameter("SID string");
        let mut parts = s.split('-');
        match parts.next() {
            Some("S") | Some("s") => {}
            _ => return Err(bad),
        }
        let revision: u8 = parts
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or(bad.clone())?;
        if revision != 1 {
            return Err(bad);
        }
        let auth_s = parts.next().ok_or(bad.clone())?;
        let authority = if let Some(h) = auth_s
            .strip_prefix("0x")
            .or_else(|| auth_s.strip_prefix("0X"))
        {
            u64::from_str_radix(h, 16).map_err(|_| bad.clone())?
        } else {
            if !auth_s.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad);
            }
            auth_s.parse::<u64>().map_err(|_| bad.clone())?
        };
        if authority >= 1 << 48 {
            return Err(bad);
        }
        let mut sub_authorities = Vec::new();
        for p in parts {
            if p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad);
            }
            sub_authorities.push(p.parse::<u32>().map_err(|_| bad.clone())?);
            if sub_authorities.len() > SID_MAX_SUB_AUTHORITIES {
                return Err(bad);
            }
        }
        Ok(Sid {
            revision,
            authority,
            sub_authorities,
        })
    }
}

/// One ACE (MS-DTYP 2.4.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ace {
    /// The types whose body is Mask (4) + Sid: ACCESS_ALLOWED (0),
    /// ACCESS_DENIED (1), SYSTEM_AUDIT (2), SYSTEM_ALARM (3),
    /// SYSTEM_MANDATORY_LABEL (0x11), SYSTEM_SCOPED_POLICY_ID (0x13).
    Standard {
        ace_type: u8,
        flags: u8,
        mask: u32,
        sid: Sid,
    },
    /// Any other type (object, callback, resource attribute ACEs), kept
    /// as the bytes after the 4-byte header.
    Opaque {
        ace_type: u8,
        flags: u8,
        body: Vec<u8>,
    },
}

fn is_standard_ace(t: u8) -> bool {
    matches!(
        t,
        ACCESS_ALLOWED_ACE_TYPE
            | ACCESS_DENIED_ACE_TYPE
            | SYSTEM_AUDIT_ACE_TYPE
            | SYSTEM_ALARM_ACE_TYPE
            | SYSTEM_MANDATORY_LABEL_ACE_TYPE
            | SYSTEM_SCOPED_POLICY_ID_ACE_TYPE
    )
}

impl Ace {
    /// An ACCESS_ALLOWED_ACE (MS-DTYP 2.4.4.2).
    pub fn allowed(sid: Sid, mask: u32, flags: u8) -> Self {
        Ace::Standard {
            ace_type: ACCESS_ALLOWED_ACE_TYPE,
            flags,
            mask,
            sid,
        }
    }
    /// An ACCESS_DENIED_ACE (MS-DTYP 2.4.4.4).
    pub fn denied(sid: Sid, mask: u32, flags: u8) -> Self {
        Ace::Standard {
            ace_type: ACCESS_DENIED_ACE_TYPE,
            flags,
            mask,
            sid,
        }
    }

    pub fn wire_len(&self) -> usize {
        match self {
            Ace::Standard { sid, .. } => 8 + sid.wire_len(),
            Ace::Opaque { body, .. } => 4 + body.len(),
        }
    }

    /// Append the ACE. Panics if an opaque body makes it larger than 64 KiB
    /// (AceSize is 16 bits; a decoded ACE never is).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let size = u16::try_from(self.wire_len()).expect("ACE larger than 64 KiB");
        match self {
            Ace::Standard {
                ace_type,
                flags,
                mask,
                sid,
            } => {
                out.put_u8(*ace_type);
                out.put_u8(*flags);
                out.put_u16(size);
                out.put_u32(*mask);
                sid.encode(out);
            }
            Ace::Opaque {
                ace_type,
                flags,
                body,
            } => {
                out.put_u8(*ace_type);
                out.put_u8(*flags);
                out.put_u16(size);
                out.extend_from_slice(body);
            }
        }
    }

    fn read(ace: &[u8]) -> Result<Self, FsccError> {
        // `ace` is exactly AceSize bytes, AceSize >= 4 checked by the caller.
        let ace_type = ace[0];
        let flags = ace[1];
        if !is_standard_ace(ace_type) {
            return Ok(Ace::Opaque {
                ace_type,
                flags,
                body: ace[4..].to_vec(),
            });
        }
        let mut r = Reader::at(ace, 4);
        let mask = r
            .u32()
            .map_err(|_| FsccError::InvalidSecurityDescriptor("ACE truncated"))?;
        // The SID must fit in AceSize; bytes after it are padding.
        let sid = Sid::read(&mut r)?;
        Ok(Ace::Standard {
            ace_type,
            flags,
            mask,
            sid,
        })
    }
}

/// An ACL (MS-DTYP 2.4.5): AclRevision 2 (or 4 when object ACEs are present).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    pub revision: u8,
    pub aces: Vec<Ace>,
}

/// MS-DTYP 2.4.5: ACL_REVISION and ACL_REVISION_DS.
pub const ACL_REVISION: u8 = 2;
pub const ACL_REVISION_DS: u8 = 4;

impl Acl {
    pub fn new(aces: Vec<Ace>) -> Self {
        Acl {
            revision: ACL_REVISION,
            aces,
        }
    }

    pub fn wire_len(&self) -> usize {
        8 + self.aces.iter().map(Ace::wire_len).sum::<usize>()
    }

    /// Append the ACL. Panics if it is larger than 64 KiB (AclSize is 16
    /// bits; a decoded ACL never is).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let size = u16::try_from(self.wire_len()).expect("ACL larger than 64 KiB");
        out.put_u8(self.revision);
        out.put_u8(0); // Sbz1
        out.put_u16(size);
        out.put_u16(self.aces.len() as u16);
        out.put_u16(0); // Sbz2
        for a in &self.aces {
            a.encode(out);
        }
    }

    /// Read an ACL starting at `offset` of `buf`; AclSize and every
    /// AceSize are checked against the buffer.
    pub fn read_at(buf: &[u8], offset: usize) -> Result<Self, FsccError> {
        let mut r = Reader::at(buf, offset);
        let bad = |_| FsccError::InvalidSecurityDescriptor("ACL truncated");
        let revision = r.u8().map_err(bad)?;
        if revision != ACL_REVISION && revision != ACL_REVISION_DS {
            return Err(FsccError::InvalidSecurityDescriptor("ACL revision"));
        }
        r.u8().map_err(bad)?;
        let size = r.u16().map_err(bad)? as usize;
        let count = r.u16().map_err(bad)? as usize;
        r.u16().map_err(bad)?;
        if size < 8 {
            return Err(FsccError::InvalidSecurityDescriptor("AclSize"));
        }
        let acl = Reader::at(buf, offset)
            .region(offset, size, "ACL")
            .map_err(|_| FsccError::InvalidSecurityDescriptor("AclSize past end"))?;
        let mut pos = 8;
        let mut aces = Vec::new();
        for _ in 0..count {
            let hdr = acl
                .get(pos..pos + 4)
                .ok_or(FsccError::InvalidSecurityDescriptor("AceCount"))?;
            let ace_size = u16::from_le_bytes([hdr[2], hdr[3]]) as usize;
            if ace_size < 4 {
                return Err(FsccError::InvalidSecurityDescriptor("AceSize"));
            }
            let ace = acl
                .get(pos..pos + ace_size)
                .ok_or(FsccError::InvalidSecurityDescriptor("AceSize past AclSize"))?;
            aces.push(Ace::read(ace)?);
            pos += ace_size;
        }
        Ok(Acl { revision, aces })
    }
}

/// A security descriptor. `control` holds the MS-DTYP 2.4.6 bits;
/// [`SecurityDescriptor::encode`] adds SE_SELF_RELATIVE and the PRESENT
/// bits for the ACLs that are `Some`. A `None` DACL with SE_DACL_PRESENT
/// set is a NULL DACL (everyone has full access).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecurityDescriptor {
    pub control: u16,
    pub owner: Option<Sid>,
    pub group: Option<Sid>,
    pub sacl: Option<Acl>,
    pub dacl: Option<Acl>,
}

impl SecurityDescriptor {
    /// Self-relative encoding (MS-DTYP 2.4.6): header, then owner, group,
    /// SACL, DACL (the order is free; offsets locate each part).
    pub fn encode(&self) -> Vec<u8> {
        let mut control = self.control | SE_SELF_RELATIVE;
        if self.dacl.is_some() {
            control |= SE_DACL_PRESENT;
        }
        if self.sacl.is_some() {
            control |= SE_SACL_PRESENT;
        }
        let mut out = Vec::with_capacity(128);
        out.put_u8(1); // Revision
        out.put_u8(0); // Sbz1
        out.put_u16(control);
        out.put_zeros(16); // offsets, patched below
        if let Some(s) = &self.owner {
            let at = out.len() as u32;
            out.patch_u32(4, at);
            s.encode(&mut out);
        }
        if let Some(s) = &self.group {
            let at = out.len() as u32;
            out.patch_u32(8, at);
            s.encode(&mut out);
        }
        if let Some(a) = &self.sacl {
            let at = out.len() as u32;
            out.patch_u32(12, at);
            a.encode(&mut out);
        }
        if let Some(a) = &self.dacl {
            let at = out.len() as u32;
            out.patch_u32(16, at);
            a.encode(&mut out);
        }
        out
    }

    /// Decode a self-relative descriptor (SET_INFO security input). Every
    /// offset is checked against `buf`; Revision must be 1 and
    /// SE_SELF_RELATIVE set. An ACL is read only when its PRESENT bit is
    /// set and its offset is non-zero. Errors map to STATUS_INVALID_SECURITY_DESCR.
    pub fn decode(buf: &[u8]) -> Result<Self, FsccError> {
        let mut r = Reader::new(buf);
        let short = |_| FsccError::InvalidSecurityDescriptor("header truncated");
        let revision = r.u8().map_err(short)?;
        r.u8().map_err(short)?;
        let control = r.u16().map_err(short)?;
        let off_owner = r.u32().map_err(short)? as usize;
        let off_group = r.u32().map_err(short)? as usize;
        let off_sacl = r.u32().map_err(short)? as usize;
        let off_dacl = r.u32().map_err(short)? as usize;
        if revision != 1 {
            return Err(FsccError::InvalidSecurityDescriptor("revision"));
        }
        if control & SE_SELF_RELATIVE == 0 {
            return Err(FsccError::InvalidSecurityDescriptor("not self-relative"));
        }
        let check = |off: usize, what: &'static str| -> Result<(), FsccError> {
            if off < SD_HEADER_LEN || off >= buf.len() {
                Err(FsccError::InvalidSecurityDescriptor(what))
            } else {
                Ok(())
            }
        };
        let sid_at = |off: usize, what: &'static str| -> Result<Option<Sid>, FsccError> {
            if off == 0 {
                return Ok(None);
            }
            check(off, what)?;
            Sid::read(&mut Reader::at(buf, off)).map(Some)
        };
        let owner = sid_at(off_owner, "OffsetOwner")?;
        let group = sid_at(off_group, "OffsetGroup")?;
        let acl_at =
            |off: usize, present: bool, what: &'static str| -> Result<Option<Acl>, FsccError> {
                if !present || off == 0 {
                    return Ok(None);
                }
                check(off, what)?;
                Acl::read_at(buf, off).map(Some)
            };
        let sacl = acl_at(off_sacl, control & SE_SACL_PRESENT != 0, "OffsetSacl")?;
        let dacl = acl_at(off_dacl, control & SE_DACL_PRESENT != 0, "OffsetDacl")?;
        Ok(SecurityDescriptor {
            control,
            owner,
            group,
            sacl,
            dacl,
        })
    }

    /// Keep only the parts AdditionalInformation asks for (MS-SMB2
    /// 3.3.5.20.3): OWNER (1), GROUP (2), DACL (4), SACL (8). The control
    /// bits of a dropped ACL are cleared too.
    pub fn filtered(&self, additional_information: u32) -> Self {
        let mut sd = self.clone();
        if additional_information & OWNER_SECURITY_INFORMATION == 0 {
            sd.owner = None;
            sd.control &= !SE_OWNER_DEFAULTED;
        }
        if additional_information & GROUP_SECURITY_INFORMATION == 0 {
            sd.group = None;
            sd.control &= !SE_GROUP_DEFAULTED;
        }
        if additional_information & DACL_SECURITY_INFORMATION == 0 {
            sd.dacl = None;
            sd.control &= !DACL_CONTROL_BITS;
        }
        if additional_information & SACL_SECURITY_INFORMATION == 0 {
            sd.sacl = None;
            sd.control &= !SACL_CONTROL_BITS;
        }
        sd
    }
}

/// The access mask a POSIX `rwx` triplet grants.
fn rwx_mask(bits: u32, is_directory: bool) -> u32 {
    let mut m = 0;
    if bits & 4 != 0 {
        m |= FILE_GENERIC_READ;
    }
    if bits & 2 != 0 {
        m |= FILE_GENERIC_WRITE;
        if is_directory {
            // POSIX: write on a directory lets one remove its entries.
            m |= FILE_DELETE_CHILD;
        }
    }
    if bits & 1 != 0 {
        m |= FILE_GENERIC_EXECUTE;
    }
    m
}

/// A plausible descriptor for a file or directory from its owner and
/// group SIDs and POSIX `mode` (permission bits; higher bits ignored):
///
/// * owner: FILE_ALL_ACCESS when `rwx`, otherwise the mapped rights plus
///   what a POSIX owner can always do (read/write attributes, READ_CONTROL,
///   WRITE_DAC = chmod, WRITE_OWNER, SYNCHRONIZE; DELETE with `w`);
/// * group and Everyone (S-1-1-0) for the group/other bits, each only when
///   it grants something: `r` → FILE_GENERIC_READ, `w` → FILE_GENERIC_WRITE
///   (+FILE_DELETE_CHILD on directories), `x` → FILE_GENERIC_EXECUTE, plus
///   FILE_READ_ATTRIBUTES | READ_CONTROL | SYNCHRONIZE.
///
/// All ACEs are ACCESS_ALLOWED. No SACL is produced (a SACL request gets
/// none, as Samba answers without the audit privilege). Only the parts
/// `additional_information` asks for are included; encode with
/// [`SecurityDescriptor::encode`].
pub fn build_file_security_descriptor(
    owner: &Sid,
    group: &Sid,
    mode: u32,
    is_directory: bool,
    additional_information: u32,
) -> SecurityDescriptor {
    const ALWAYS: u32 = FILE_READ_ATTRIBUTES | READ_CONTROL | SYNCHRONIZE;
    let u = (mode >> 6) & 7;
    let g = (mode >> 3) & 7;
    let o = mode & 7;
    let owner_mask = if u == 7 {
        FILE_ALL_ACCESS
    } else {
        let mut m = rwx_mask(u, is_directory)
            | ALWAYS
            | FILE_READ_EA
            | FILE_WRITE_ATTRIBUTES
            | WRITE_DAC
            | WRITE_OWNER;
        if u & 2 != 0 {
            m |= DELETE;
        }
        m
    };
    let mut aces = vec![Ace::allowed(owner.clone(), owner_mask, 0)];
    if g != 0 {
        aces.push(Ace::allowed(
            group.clone(),
            rwx_mask(g, is_directory) | ALWAYS,
            0,
        ));
    }
    if o != 0 {
        aces.push(Ace::allowed(
            Sid::everyone(),
            rwx_mask(o, is_directory) | ALWAYS,
            0,
        ));
    }
    let sd = SecurityDescriptor {
        control: SE_DACL_PRESENT,
        owner: Some(owner.clone()),
        group: Some(group.clone()),
        sacl: None,
        dacl: Some(Acl::new(aces)),
    };
    sd.filtered(additional_information)
}

/// The QUERY_INFO(SECURITY) answer for an encoded descriptor and the
/// client's OutputBufferLength (MS-SMB2 3.3.5.20.3; Samba
/// `smbd_smb2_getinfo_send`; smbtorture `smb2.getinfo.qsec_buffercheck`):
/// if the descriptor does not fit, STATUS_BUFFER_TOO_SMALL with the 4-byte
/// little-endian size needed as data — the server sends that as the
/// ErrorData of an SMB2 ERROR response; otherwise the descriptor with
/// STATUS_SUCCESS. There is no partial answer.
pub fn query_security_output(sd: Vec<u8>, output_buffer_length: u32) -> QueryOutput {
    if sd.len() > output_buffer_length as usize {
        return QueryOutput {
            status: NtStatus::BUFFER_TOO_SMALL,
            data: (sd.len() as u32).to_le_bytes().to_vec(),
        };
    }
    QueryOutput {
        status: NtStatus::SUCCESS,
        data: sd,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fscc_sid_string_roundtrip() {
        let s: Sid = "S-1-5-21-1004336348-1177238915-682003330-512"
            .parse()
            .unwrap();
        assert_eq!(s.authority, 5);
        assert_eq!(
            s.sub_authorities,
            vec![21, 1004336348, 1177238915, 682003330, 512]
        );
        assert_eq!(
            s.to_string(),
            "S-1-5-21-1004336348-1177238915-682003330-512"
        );
        assert_eq!("s-1-1-0".parse::<Sid>().unwrap(), Sid::everyone());
        let big: Sid = "S-1-0x123456789ABC-1".parse().unwrap();
        assert_eq!(big.authority, 0x1234_5678_9ABC);
        assert_eq!(big.to_string(), "S-1-0x123456789ABC-1");
        assert_eq!("S-1-5".parse::<Sid>().unwrap().sub_authorities.len(), 0);
        for bad in [
            "",
            "S",
            "S-1",
            "S-2-5-1",
            "X-1-5-1",
            "S-1--1",
            "S-1-5-",
            "S-1-5-x",
            "S-1-5-4294967296",
            "S-1-0x1000000000000-1",
            "S-1-5-1-2-3-4-5-6-7-8-9-10-11-12-13-14-15-16",
            "S-1-+5-1",
        ] {
            assert!(bad.parse::<Sid>().is_err(), "{bad}");
        }
    }

    #[test]
    fn fscc_sid_wire_golden() {
        let s: Sid = "S-1-5-32-544".parse().unwrap();
        assert_eq!(
            hex::encode(s.to_bytes()),
            "01020000000000052000000020020000"
        );
        assert_eq!(Sid::from_bytes(&s.to_bytes()).unwrap(), s);
    }

    #[test]
    fn fscc_sd_golden_everyone_full() {
        let sd = SecurityDescriptor {
            control: 0,
            owner: Some(Sid::local_system()),
            group: None,
            sacl: None,
            dacl: Some(Acl::new(vec![Ace::allowed(
                Sid::everyone(),
                FILE_ALL_ACCESS,
                0,
            )])),
        };
        let b = sd.encode();
        assert_eq!(
            hex::encode(&b),
            concat!(
                "01000480", // rev 1, control 0x8004
                "14000000",
                "00000000",
                "00000000",
                "20000000",                 // offsets
                "010100000000000512000000", // S-1-5-18
                "02001c000100",
                "0000", // ACL rev 2, size 28, 1 ace
                "00001400ff011f00",
                "010100000000000100000000" // allowed, size 20, mask, S-1-1-0
            )
        );
        let d = SecurityDescriptor::decode(&b).unwrap();
        assert_eq!(d.owner, sd.owner);
        assert_eq!(d.dacl, sd.dacl);
        assert_eq!(d.control, SE_SELF_RELATIVE | SE_DACL_PRESENT);
    }

    #[test]
    fn fscc_build_from_mode() {
        let owner = Sid::unix_user(1000);
        let group = Sid::unix_group(100);
        let sd = build_file_security_descriptor(&owner, &group, 0o750, true, 0x7);
        let dacl = sd.dacl.clone().unwrap();
        assert_eq!(dacl.aces.len(), 2);
        assert_eq!(
            dacl.aces[0],
            Ace::allowed(owner.clone(), FILE_ALL_ACCESS, 0)
        );
        match &dacl.aces[1] {
            Ace::Standard { mask, sid, .. } => {
                assert_eq!(sid, &group);
                assert_eq!(mask & FILE_GENERIC_READ, FILE_GENERIC_READ);
                assert_eq!(mask & FILE_GENERIC_EXECUTE, FILE_GENERIC_EXECUTE);
                assert_eq!(mask & FILE_WRITE_DATA, 0);
            }
            _ => panic!(),
        }
        let sd = build_file_security_descriptor(&owner, &group, 0o644, false, 0x7);
        let aces = sd.dacl.as_ref().unwrap().aces.clone();
        assert_eq!(aces.len(), 3);
        match &aces[0] {
            Ace::Standard { mask, .. } => {
                assert_eq!(
                    mask & (FILE_GENERIC_READ | FILE_GENERIC_WRITE | WRITE_DAC | DELETE),
                    FILE_GENERIC_READ | FILE_GENERIC_WRITE | WRITE_DAC | DELETE
                );
                assert_eq!(mask & FILE_EXECUTE, 0);
            }
            _ => panic!(),
        }
        match &aces[2] {
            Ace::Standard { sid, mask, .. } => {
                assert_eq!(sid, &Sid::everyone());
                assert_eq!(
                    *mask,
                    FILE_GENERIC_READ | FILE_READ_ATTRIBUTES | READ_CONTROL | SYNCHRONIZE
                );
            }
            _ => panic!(),
        }
        let b = sd.encode();
        assert_eq!(
            SecurityDescriptor::decode(&b).unwrap(),
            SecurityDescriptor {
                control: SE_SELF_RELATIVE | SE_DACL_PRESENT,
                ..sd
            }
        );
    }

    #[test]
    fn fscc_build_honours_additional_information() {
        let o = Sid::unix_user(1);
        let g = Sid::unix_group(2);
        let sd = build_file_security_descriptor(&o, &g, 0o600, false, OWNER_SECURITY_INFORMATION);
        assert!(sd.owner.is_some() && sd.group.is_none() && sd.dacl.is_none());
        let b = sd.encode();
        assert_eq!(u16::from_le_bytes([b[2], b[3]]), SE_SELF_RELATIVE);
        assert_eq!(&b[8..20], &[0; 12]);
        let sd = build_file_security_descriptor(&o, &g, 0o600, false, GROUP_SECURITY_INFORMATION);
        assert!(sd.owner.is_none() && sd.group == Some(g.clone()) && sd.dacl.is_none());
        let sd = build_file_security_descriptor(&o, &g, 0o600, false, DACL_SECURITY_INFORMATION);
        assert!(sd.owner.is_none() && sd.group.is_none() && sd.dacl.is_some());
        let sd = build_file_security_descriptor(&o, &g, 0o600, false, SACL_SECURITY_INFORMATION);
        assert_eq!(sd.encode().len(), SD_HEADER_LEN);
        let sd = build_file_security_descriptor(&o, &g, 0o600, false, 0);
        assert_eq!(
            sd.encode(),
            vec![1, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn fscc_sd_decode_rejects() {
        let good = build_file_security_descriptor(
            &Sid::unix_user(1),
            &Sid::unix_group(1),
            0o644,
            false,
            7,
        )
        .encode();
        assert!(SecurityDescriptor::decode(&good).is_ok());
        let err = |b: &[u8]| SecurityDescriptor::decode(b).unwrap_err().status();
        assert_eq!(err(&good[..19]), NtStatus(0xC000_0079));
        let mut b = good.clone();
        b[0] = 2;
        assert!(SecurityDescriptor::decode(&b).is_err());
        let mut b = good.clone();
        b[3] &= 0x7F; // clear SE_SELF_RELATIVE
        assert!(SecurityDescriptor::decode(&b).is_err());
        let mut b = good.clone();
        b[4..8].copy_from_slice(&(good.len() as u32).to_le_bytes());
        assert!(SecurityDescriptor::decode(&b).is_err());
        let mut b = good.clone();
        b[4..8].copy_from_slice(&4u32.to_le_bytes()); // inside the header
        assert!(SecurityDescriptor::decode(&b).is_err());
        // AclSize past the end
        let dacl_off = u32::from_le_bytes(good[16..20].try_into().unwrap()) as usize;
        let mut b = good.clone();
        b[dacl_off + 2..dacl_off + 4].copy_from_slice(&0xFFFFu16.to_le_bytes());
        assert!(SecurityDescriptor::decode(&b).is_err());
        // AceCount larger than what AclSize holds
        let mut b = good.clone();
        b[dacl_off + 4..dacl_off + 6].copy_from_slice(&50u16.to_le_bytes());
        assert!(SecurityDescriptor::decode(&b).is_err());
        // NULL DACL: present bit, offset 0
        let mut b = good[..20].to_vec();
        b[4..20].copy_from_slice(&[0; 16]);
        let d = SecurityDescriptor::decode(&b).unwrap();
        assert!(d.dacl.is_none() && d.control & SE_DACL_PRESENT != 0);
    }

    #[test]
    fn fscc_query_security_sizes() {
        let sd = build_file_security_descriptor(
            &Sid::unix_user(1),
            &Sid::unix_group(1),
            0o644,
            false,
            7,
        )
        .encode();
        let n = sd.len();
        let o = query_security_output(sd.clone(), 0);
        assert_eq!(o.status, NtStatus::BUFFER_TOO_SMALL);
        assert_eq!(o.data, (n as u32).to_le_bytes().to_vec());
        assert_eq!(
            query_security_output(sd.clone(), n as u32 - 1).status,
            NtStatus::BUFFER_TOO_SMALL
        );
        let o = query_security_output(sd.clone(), n as u32);
        assert_eq!(o.status, NtStatus::SUCCESS);
        assert_eq!(o.data, sd);
    }

    fn arb_sid() -> impl Strategy<Value = Sid> {
        (
            0u64..(1 << 48),
            proptest::collection::vec(any::<u32>(), 0..=15),
        )
            .prop_map(|(a, subs)| Sid::new(a, &subs))
    }

    fn arb_ace() -> impl Strategy<Value = Ace> {
        prop_oneof![
            (
                prop_oneof![Just(0u8), Just(1), Just(2), Just(3), Just(0x11)],
                any::<u8>(),
                any::<u32>(),
                arb_sid()
            )
                .prop_map(|(ace_type, flags, mask, sid)| Ace::Standard {
                    ace_type,
                    flags,
                    mask,
                    sid
                }),
            (
                5u8..=0x10,
                any::<u8>(),
                proptest::collection::vec(any::<u8>(), 0..16).prop_map(|mut v| {
                    v.truncate(v.len() / 4 * 4);
                    v
                })
            )
                .prop_map(|(ace_type, flags, body)| Ace::Opaque {
                    ace_type,
                    flags,
                    body
                }),
        ]
    }

    proptest! {
        #[test]
        fn fscc_sd_decode_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = SecurityDescriptor::decode(&buf);
            let _ = Sid::from_bytes(&buf);
            let _ = Acl::read_at(&buf, 0);
        }

        #[test]
        fn fscc_sd_decode_never_panics_on_mutations(
            idx in 0usize..200, val in any::<u8>(), mode in 0u32..0o1000, info in 0u32..16) {
            let mut b = build_file_security_descriptor(&Sid::unix_user(7), &Sid::unix_group(8), mode, false, info).encode();
            let i = idx % b.len();
            b[i] = val;
            let _ = SecurityDescriptor::decode(&b);
        }

        #[test]
        fn fscc_sd_roundtrip(owner in proptest::option::of(arb_sid()), group in proptest::option::of(arb_sid()),
                              sacl in proptest::option::of(proptest::collection::vec(arb_ace(), 0..4)),
                              dacl in proptest::option::of(proptest::collection::vec(arb_ace(), 0..6))) {
            let sd = SecurityDescriptor {
                control: SE_SELF_RELATIVE
                    | if sacl.is_some() { SE_SACL_PRESENT } else { 0 }
                    | if dacl.is_some() { SE_DACL_PRESENT } else { 0 },
                owner, group,
                sacl: sacl.map(Acl::new),
                dacl: dacl.map(Acl::new),
            };
            prop_assert_eq!(SecurityDescriptor::decode(&sd.encode()).unwrap(), sd);
        }

        #[test]
        fn fscc_sid_string_roundtrip_prop(sid in arb_sid()) {
            prop_assert_eq!(sid.to_string().parse::<Sid>().unwrap(), sid);
        }
    }
}
