//! The NDR shapes lsarpc adds to those of `ndr.rs`: context handles, RPC_SID,
//! RPC_UNICODE_STRING and the arrays built from them, read from requests
//! and written into answers. Layouts follow MS-LSAT/MS-LSAD section 2 and
//! Samba's `lsa.idl`, which marshals the same octets.

use super::super::ndr::{NdrError, NdrReader, NdrResult, NdrWriter};
use crate::fscc::security::{Sid, SID_MAX_SUB_AUTHORITIES};

/// MS-LSAD LSAPR_HANDLE: an RPC context handle, 20 octets on the
/// wire (C706 appendix N: a u32 attributes word and a UUID).
pub type PolicyHandle = [u8; 20];

/// The handle a server answers when it opened nothing, and what LsarClose
/// hands back (C706: a closed context handle is all zeros).
pub const NULL_HANDLE: PolicyHandle = [0; 20];

/// The handle as this server wrote it (little-endian): a client that
/// speaks big-endian NDR sends back the same values in its own byte order,
/// so the attributes word and the UUID's first three fields are read as
/// integers (C706 appendix N: a UUID is u32, u16, u16 and eight octets).
pub fn read_handle(r: &mut NdrReader<'_>) -> NdrResult<PolicyHandle> {
    r.align(4)?;
    let mut handle = [0u8; 20];
    handle[..4].copy_from_slice(&r.u32()?.to_le_bytes());
    handle[4..8].copy_from_slice(&r.u32()?.to_le_bytes());
    handle[8..10].copy_from_slice(&r.u16()?.to_le_bytes());
    handle[10..12].copy_from_slice(&r.u16()?.to_le_bytes());
    handle[12..].copy_from_slice(&r.fixed::<8>()?);
    Ok(handle)
}

pub fn write_handle(w: &mut NdrWriter, handle: &PolicyHandle) {
    w.align(4);
    w.bytes(handle);
}

/// MS-DTYP 2.4.2.3 RPC_SID, a conformant structure: the conformance
/// (SubAuthorityCount again) comes first, then Revision, SubAuthorityCount,
/// the 6-octet IdentifierAuthority (big-endian) and the sub-authorities.
pub fn read_sid(r: &mut NdrReader<'_>) -> NdrResult<Sid> {
    let max_count = r.u32()?;
    let revision = r.u8()?;
    let count = r.u8()?;
    // MS-DTYP 2.4.2.3: at most 15 sub-authorities (Samba's IDL has the
    // same `range(0,15)`), refused before anything is read from the count.
    if usize::from(count) > SID_MAX_SUB_AUTHORITIES {
        return Err(NdrError::Invalid("SID has more than 15 sub-authorities"));
    }
    if max_count != u32::from(count) {
        return Err(NdrError::Invalid("SID conformance differs from its count"));
    }
    let authority = r.fixed::<6>()?;
    let mut be = [0u8; 8];
    be[2..].copy_from_slice(&authority);
    let mut sub_authorities = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        sub_authorities.push(r.u32()?);
    }
    Ok(Sid {
        revision,
        authority: u64::from_be_bytes(be),
        sub_authorities,
    })
}

/// Writes an RPC_SID. Only SIDs that passed [`is_valid_sid`] get here, so
/// the count fits its octet.
pub fn write_sid(w: &mut NdrWriter, sid: &Sid) {
    let count = sid.sub_authorities.len().min(SID_MAX_SUB_AUTHORITIES);
    w.u32(count as u32);
    w.u8(sid.revision);
    w.u8(count as u8);
    w.bytes(&sid.authority.to_be_bytes()[2..]);
    for rid in &sid.sub_authorities[..count] {
        w.u32(*rid);
    }
}

/// MS-DTYP 2.4.2: revision 1 and at most 15 sub-authorities; what a
/// backend hands over is checked before it goes on the wire.
pub fn is_valid_sid(sid: &Sid) -> bool {
    sid.revision == 1 && sid.sub_authorities.len() <= SID_MAX_SUB_AUTHORITIES
}

/// The inline part of an RPC_UNICODE_STRING (MS-DTYP 2.3.10): Length and
/// MaximumLength in bytes, and whether its Buffer pointer is set.
#[derive(Clone, Copy, Debug)]
pub struct StringHeader {
    length: u16,
    maximum_length: u16,
    present: bool,
}

pub fn read_string_header(r: &mut NdrReader<'_>) -> NdrResult<StringHeader> {
    // The structure holds a pointer, so it is 4-aligned as a whole.
    r.align(4)?;
    Ok(StringHeader {
        length: r.u16()?,
        maximum_length: r.u16()?,
        present: r.unique_pointer()?,
    })
}

/// The deferred Buffer of a string whose header was read: a conformant
/// varying array `[size_is(MaximumLength/2), length_is(Length/2)]`, whose
/// counts must agree with the header (as Windows' and Samba's stubs check).
/// None for a null Buffer. Unpaired surrogates become U+FFFD: such a name
/// matches nothing and is reported unmapped, not refused.
pub fn read_string_body(r: &mut NdrReader<'_>, header: StringHeader) -> NdrResult<Option<String>> {
    if !header.present {
        return Ok(None);
    }
    let max_count = r.u32()?;
    let offset = r.u32()?;
    let actual_count = r.u32()?;
    if offset != 0 {
        return Err(NdrError::Invalid("string offset is not zero"));
    }
    if max_count != u32::from(header.maximum_length / 2)
        || actual_count != u32::from(header.length / 2)
        || actual_count > max_count
    {
        return Err(NdrError::Invalid("string counts differ from its lengths"));
    }
    let units = r.u16_units(actual_count as usize)?;
    Ok(Some(String::from_utf16_lossy(&units)))
}

/// An RPC_UNICODE_STRING to be written: its UTF-16 units and the
/// MaximumLength, in units, to announce.
#[derive(Clone, Debug)]
pub struct WireString {
    units: Vec<u16>,
    maximum: usize,
}

/// Length is a u16 count of bytes; a longer string is cut (only a broken
/// backend could hand one over) and one unit is kept for the terminator
/// room MaximumLength may announce.
const MAX_STRING_UNITS: usize = (u16::MAX as usize) / 2 - 1;

impl WireString {
    /// Samba's `lsa_String`: MaximumLength equal to Length, as Windows
    /// sends translated names.
    pub fn exact(s: &str) -> Self {
        let units = Self::units(s);
        let maximum = units.len();
        WireString { units, maximum }
    }

    /// Samba's `lsa_StringLarge`: MaximumLength one unit past Length,
    /// as Windows sends domain names.
    pub fn large(s: &str) -> Self {
        let units = Self::units(s);
        let maximum = units.len() + 1;
        WireString { units, maximum }
    }

    fn units(s: &str) -> Vec<u16> {
        s.encode_utf16().take(MAX_STRING_UNITS).collect()
    }
}

/// Length, MaximumLength and the Buffer pointer (null for None); the
/// Buffer itself follows with the structure's other deferred pointees.
pub fn write_string_header(w: &mut NdrWriter, s: Option<&WireString>) {
    w.align(4);
    match s {
        Some(s) => {
            w.u16((s.units.len() * 2) as u16);
            w.u16((s.maximum * 2) as u16);
            w.referent();
        }
        None => {
            w.u16(0);
            w.u16(0);
            w.null_pointer();
        }
    }
}

/// The deferred Buffer: max_count, offset 0, actual_count, the units.
pub fn write_string_body(w: &mut NdrWriter, s: Option<&WireString>) {
    if let Some(s) = s {
        w.u32(s.maximum as u32);
        w.u32(0);
        w.u32(s.units.len() as u32);
        w.u16_units(&s.units);
    }
}

/// MS-LSAT 3.1.4.8 (and 3.1.4.5 - 3.1.4.7): `[in, range(0,1000)] Count`.
pub const MAX_NAMES: u32 = 1000;
/// MS-LSAT LSAPR_SID_ENUM_BUFFER: `[range(0,20480)] Entries`.
pub const MAX_SIDS: u32 = 20480;

/// A count from the wire, refused past `max` (the IDL's `range`) or past
/// what `remaining` bytes can hold at `min_size` bytes an element, so
/// nothing is allocated from a count the stub cannot back.
pub fn checked_count(r: &NdrReader<'_>, count: u32, max: u32, min_size: usize) -> NdrResult<usize> {
    if count > max {
        return Err(NdrError::Invalid("count out of the IDL's range"));
    }
    let count = count as usize;
    if count.saturating_mul(min_size) > r.remaining() {
        return Err(NdrError::Truncated(r.pos()));
    }
    Ok(count)
}

/// MS-LSAT 3.1.4.8 `[in, size_is(Count)] PRPC_UNICODE_STRING Names`: a
/// conformant array of RPC_UNICODE_STRING, its Buffers deferred after it.
/// None stands for a null Buffer.
pub fn read_names(r: &mut NdrReader<'_>, count: u32) -> NdrResult<Vec<Option<String>>> {
    let max_count = r.u32()?;
    if max_count != count {
        return Err(NdrError::Invalid("array conformance differs from Count"));
    }
    let count = checked_count(r, count, MAX_NAMES, 8)?;
    let headers = (0..count)
        .map(|_| read_string_header(r))
        .collect::<NdrResult<Vec<_>>>()?;
    headers
        .into_iter()
        .map(|h| read_string_body(r, h))
        .collect()
}

/// MS-LSAT LSAPR_SID_ENUM_BUFFER: Entries, then a unique pointer
/// to a conformant array of LSAPR_SID_INFORMATION (each a unique pointer
/// to an RPC_SID), the SIDs deferred after the array. None stands for a
/// null pointer; a null array with entries yields None for each.
pub fn read_sid_enum_buffer(r: &mut NdrReader<'_>) -> NdrResult<Vec<Option<Sid>>> {
    let entries = r.u32()?;
    if !r.unique_pointer()? {
        let entries = checked_count(r, entries, MAX_SIDS, 0)?;
        return Ok(vec![None; entries]);
    }
    let max_count = r.u32()?;
    if max_count != entries {
        return Err(NdrError::Invalid("array conformance differs from Entries"));
    }
    let entries = checked_count(r, entries, MAX_SIDS, 4)?;
    let present = (0..entries)
        .map(|_| r.unique_pointer())
        .collect::<NdrResult<Vec<_>>>()?;
    present
        .into_iter()
        .map(|p| if p { read_sid(r).map(Some) } else { Ok(None) })
        .collect()
}

/// The [in] side of the translated-names and translated-SIDs arrays,
/// which the server MUST ignore (MS-LSAT 3.1.4.8, 3.1.4.11) but has to
/// read past: their element shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IgnoredArray {
    /// LSAPR_TRANSLATED_NAMES (2.2.20); `extended`: the _EX form (2.2.22),
    /// one more u32 per element.
    Names { extended: bool },
    /// LSAPR_TRANSLATED_SIDS (2.2.15) and _EX (2.2.24): u16 use, RID,
    /// DomainIndex, and for _EX a u32 Flags.
    Rids { extended: bool },
    /// LSAPR_TRANSLATED_SIDS_EX2 (2.2.26): u16 use, a SID pointer,
    /// DomainIndex, Flags; the SIDs deferred.
    Sids,
}

/// Reads past one such array: Entries, a unique pointer, and behind it the
/// conformant array with its deferred strings or SIDs.
pub fn skip_translated_array(r: &mut NdrReader<'_>, shape: IgnoredArray) -> NdrResult<()> {
    let entries = r.u32()?;
    if !r.unique_pointer()? {
        return Ok(());
    }
    let max_count = r.u32()?;
    if max_count != entries {
        return Err(NdrError::Invalid("array conformance differs from Entries"));
    }
    let limit = match shape {
        IgnoredArray::Names { .. } => MAX_SIDS,
        _ => MAX_NAMES,
    };
    let entries = checked_count(r, entries, limit, 12)?;
    match shape {
        IgnoredArray::Names { extended } => {
            let mut headers = Vec::with_capacity(entries);
            for _ in 0..entries {
                r.u16()?; // Use
                headers.push(read_string_header(r)?);
                r.u32()?; // DomainIndex
                if extended {
                    r.u32()?; // Flags
                }
            }
            for h in headers {
                read_string_body(r, h)?;
            }
        }
        IgnoredArray::Rids { extended } => {
            for _ in 0..entries {
                r.u16()?;
                r.u32()?;
                r.u32()?;
                if extended {
                    r.u32()?;
                }
            }
        }
        IgnoredArray::Sids => {
            let mut present = Vec::with_capacity(entries);
            for _ in 0..entries {
                r.u16()?;
                present.push(r.unique_pointer()?);
                r.u32()?;
                r.u32()?;
            }
            for p in present {
                if p {
                    read_sid(r)?;
                }
            }
        }
    }
    Ok(())
}

/// One entry of LSAPR_REFERENCED_DOMAIN_LIST (MS-LSAT 2.2.12): a
/// LSAPR_TRUST_INFORMATION, the domain's NetBIOS name and SID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    pub name: String,
    pub sid: Sid,
}

/// LSAPR_REFERENCED_DOMAIN_LIST.MaxEntries as Windows sends it (Samba's
/// LSA_REF_DOMAIN_LIST_MULTIPLIER); clients do not use it.
const REFERENCED_DOMAINS_MAX_ENTRIES: u32 = 32;

/// `[out] PLSAPR_REFERENCED_DOMAIN_LIST* ReferencedDomains` (MS-LSAT
/// 2.2.12): a unique pointer (null when the call failed before looking
/// anything up), Entries, a pointer to the array, MaxEntries; then the
/// array of {Name, Sid pointer} and, deferred, each name and SID in turn.
pub fn write_referenced_domains(w: &mut NdrWriter, domains: Option<&[Domain]>) {
    let Some(domains) = domains else {
        w.null_pointer();
        return;
    };
    w.referent();
    w.u32(domains.len() as u32);
    if domains.is_empty() {
        w.null_pointer();
    } else {
        w.referent();
    }
    w.u32(REFERENCED_DOMAINS_MAX_ENTRIES);
    if domains.is_empty() {
        return;
    }
    let names: Vec<WireString> = domains.iter().map(|d| WireString::large(&d.name)).collect();
    w.u32(domains.len() as u32);
    for name in &names {
        write_string_header(w, Some(name));
        w.referent();
    }
    for (name, domain) in names.iter().zip(domains) {
        write_string_body(w, Some(name));
        write_sid(w, &domain.sid);
    }
}
