//! Quota information (`InfoType = SMB2_0_INFO_QUOTA`): the query a client
//! sends in QUERY_INFO (MS-SMB2 2.2.37.1 SMB2_QUERY_QUOTA_INFO, with its
//! MS-FSCC 2.4.36.1 FILE_GET_QUOTA_INFORMATION list of SIDs) and the
//! MS-FSCC 2.4.36 FILE_QUOTA_INFORMATION entries that a SET_INFO carries
//! and a QUERY_INFO answers with.
//!
//! Every malformed buffer is [`FsccError::InvalidParameter`]: MS-SMB2
//! 3.3.5.20.4 answers a query whose buffer is not an SMB2_QUERY_QUOTA_INFO,
//! or whose SID list is not a linked list of FILE_GET_QUOTA_INFORMATION,
//! with STATUS_INVALID_PARAMETER, and MS-FSA 2.1.5.22 an empty set buffer.
//! Bytes after what the lengths and offsets describe are ignored, as
//! Samba's smbd ignores them.

use super::security::Sid;
use super::FsccError;
use crate::codec::{Reader, WriteLe};

/// Which quota entries a query asks for (MS-SMB2 2.2.37.1 SidBuffer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaSids {
    /// An empty SidBuffer: every entry of the volume.
    All,
    /// Format 1: the entries of these SIDs (a FILE_GET_QUOTA_INFORMATION
    /// list, SidListLength bytes).
    List(Vec<Sid>),
    /// Format 2: the entries from this SID on.
    Start(Sid),
}

/// MS-SMB2 2.2.37.1 SMB2_QUERY_QUOTA_INFO: the input buffer of a
/// QUERY_INFO for quota information.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryQuotaInfo {
    /// ReturnSingle: at most one entry.
    pub return_single: bool,
    /// RestartScan: from the first entry, not from where this open's last
    /// enumeration stopped.
    pub restart_scan: bool,
    pub sids: QuotaSids,
}

/// ReturnSingle (1), RestartScan (1), Reserved (2), SidListLength (4),
/// StartSidLength (4), StartSidOffset (4).
const QUERY_QUOTA_FIXED: usize = 16;
/// FILE_GET_QUOTA_INFORMATION: NextEntryOffset (4), SidLength (4).
const GET_QUOTA_FIXED: usize = 8;
/// FILE_QUOTA_INFORMATION: NextEntryOffset (4), SidLength (4), ChangeTime
/// (8), QuotaUsed (8), QuotaThreshold (8), QuotaLimit (8).
const QUOTA_FIXED: usize = 40;

fn invalid(what: &'static str) -> FsccError {
    FsccError::InvalidParameter(what)
}

/// A SID that fills `b` exactly (its SidLength must be its size).
fn sid_exactly(b: &[u8], what: &'static str) -> Result<Sid, FsccError> {
    let sid = Sid::from_bytes(b).map_err(|_| invalid(what))?;
    if sid.wire_len() != b.len() {
        return Err(invalid(what));
    }
    Ok(sid)
}

impl QueryQuotaInfo {
    pub fn decode(buf: &[u8]) -> Result<QueryQuotaInfo, FsccError> {
        let mut r = Reader::new(buf);
        let short = |_| invalid("SMB2_QUERY_QUOTA_INFO truncated");
        let return_single = r.u8().map_err(short)? != 0;
        let restart_scan = r.u8().map_err(short)? != 0;
        r.u16().map_err(short)?; // Reserved: ignored on receipt
        let sid_list_length = r.u32().map_err(short)? as usize;
        let start_sid_length = r.u32().map_err(short)? as usize;
        let start_sid_offset = r.u32().map_err(short)? as usize;
        let sid_buffer = r.bytes(r.remaining()).map_err(short)?;
        let sids = if sid_list_length != 0 {
            // MS-SMB2 3.3.5.20.4: with a SID list the start SID fields are
            // ignored.
            let list = sid_buffer
                .get(..sid_list_length)
                .ok_or(invalid("SidListLength"))?;
            QuotaSids::List(decode_get_quota_list(list)?)
        } else if start_sid_length != 0 {
            let end = start_sid_offset
                .checked_add(start_sid_length)
                .ok_or(invalid("StartSidOffset"))?;
            let b = sid_buffer
                .get(start_sid_offset..end)
                .ok_or(invalid("StartSidOffset"))?;
            QuotaSids::Start(sid_exactly(b, "StartSid")?)
        } else if start_sid_offset != 0 {
            // An empty SidBuffer has all three fields zero.
            return Err(invalid("StartSidOffset"));
        } else {
            QuotaSids::All
        };
        Ok(QueryQuotaInfo {
            return_single,
            restart_scan,
            sids,
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(QUERY_QUOTA_FIXED + 32);
        out.put_u8(self.return_single as u8);
        out.put_u8(self.restart_scan as u8);
        out.put_u16(0);
        let sid_buffer = match &self.sids {
            QuotaSids::All => Vec::new(),
            QuotaSids::List(sids) => encode_get_quota_list(sids),
            QuotaSids::Start(sid) => sid.to_bytes(),
        };
        let (list_len, start_len) = match &self.sids {
            QuotaSids::All => (0, 0),
            QuotaSids::List(_) => (sid_buffer.len() as u32, 0),
            QuotaSids::Start(_) => (0, sid_buffer.len() as u32),
        };
        out.put_u32(list_len);
        out.put_u32(start_len);
        out.put_u32(0); // StartSidOffset: the SID begins the SidBuffer
        out.extend_from_slice(&sid_buffer);
        out
    }
}

/// Walk a chain of entries linked by a leading NextEntryOffset: `entry`
/// decodes the entry at the start of its slice and says how many bytes
/// it took; offsets must be multiples of `align`, past the entry and
/// inside `buf`.
fn decode_chain<T>(
    buf: &[u8],
    align: usize,
    what: &'static str,
    mut entry: impl FnMut(&[u8]) -> Result<(T, usize), FsccError>,
) -> Result<Vec<T>, FsccError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        let rest = buf.get(pos..).ok_or(invalid(what))?;
        let next = Reader::new(rest).u32().map_err(|_| invalid(what))? as usize;
        let (item, used) = entry(rest)?;
        out.push(item);
        if next == 0 {
            return Ok(out);
        }
        if next < used || !next.is_multiple_of(align) {
            return Err(invalid(what));
        }
        pos = pos.checked_add(next).ok_or(invalid(what))?;
        if pos >= buf.len() {
            return Err(invalid(what));
        }
    }
}

/// MS-FSCC 2.4.36.1: a FILE_GET_QUOTA_INFORMATION list (entries 4-byte
/// aligned), the SIDs it names in order.
pub fn decode_get_quota_list(buf: &[u8]) -> Result<Vec<Sid>, FsccError> {
    const WHAT: &str = "FILE_GET_QUOTA_INFORMATION";
    decode_chain(buf, 4, WHAT, |b| {
        let mut r = Reader::new(b);
        let short = |_| invalid(WHAT);
        r.u32().map_err(short)?; // NextEntryOffset
        let sid_len = r.u32().map_err(short)? as usize;
        let sid = sid_exactly(r.bytes(sid_len).map_err(short)?, WHAT)?;
        Ok((sid, GET_QUOTA_FIXED + sid_len))
    })
}

/// The inverse of [`decode_get_quota_list`].
pub fn encode_get_quota_list(sids: &[Sid]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev: Option<usize> = None;
    for sid in sids {
        if let Some(p) = prev {
            out.align_to(4);
            let off = (out.len() - p) as u32;
            out.patch_u32(p, off);
        }
        prev = Some(out.len());
        out.put_u32(0);
        out.put_u32(sid.wire_len() as u32);
        sid.encode(&mut out);
    }
    out
}

/// MS-FSCC 2.4.36 FILE_QUOTA_INFORMATION: one user's quota on a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaEntry {
    /// FILETIME of the last change (ignored in a set).
    pub change_time: u64,
    /// Bytes the user's files take.
    pub quota_used: i64,
    /// Warning level in bytes; -1: none.
    pub quota_threshold: i64,
    /// Limit in bytes; -1: none; -2 in a set: remove the entry (MS-FSA
    /// 2.1.5.22).
    pub quota_limit: i64,
    pub sid: Sid,
}

/// A FILE_QUOTA_INFORMATION list (entries 8-byte aligned), as a SET_INFO
/// carries it; an empty buffer is invalid (MS-FSA 2.1.5.22).
pub fn decode_quota_list(buf: &[u8]) -> Result<Vec<QuotaEntry>, FsccError> {
    const WHAT: &str = "FILE_QUOTA_INFORMATION";
    decode_chain(buf, 8, WHAT, |b| {
        let mut r = Reader::new(b);
        let short = |_| invalid(WHAT);
        r.u32().map_err(short)?; // NextEntryOffset
        let sid_len = r.u32().map_err(short)? as usize;
        let change_time = r.u64().map_err(short)?;
        let quota_used = r.u64().map_err(short)? as i64;
        let quota_threshold = r.u64().map_err(short)? as i64;
        let quota_limit = r.u64().map_err(short)? as i64;
        let sid = sid_exactly(r.bytes(sid_len).map_err(short)?, WHAT)?;
        let entry = QuotaEntry {
            change_time,
            quota_used,
            quota_threshold,
            quota_limit,
            sid,
        };
        Ok((entry, QUOTA_FIXED + sid_len))
    })
}

/// The inverse of [`decode_quota_list`]; an empty list encodes as no bytes.
pub fn encode_quota_list(entries: &[QuotaEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev: Option<usize> = None;
    for e in entries {
        if let Some(p) = prev {
            out.align_to(8);
            let off = (out.len() - p) as u32;
            out.patch_u32(p, off);
        }
        prev = Some(out.len());
        out.put_u32(0);
        out.put_u32(e.sid.wire_len() as u32);
        out.put_u64(e.change_time);
        out.put_u64(e.quota_used as u64);
        out.put_u64(e.quota_threshold as u64);
        out.put_u64(e.quota_limit as u64);
        e.sid.encode(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn user(rid: u32) -> Sid {
        Sid::new(5, &[21, 1, 2, 3, rid])
    }

    #[test]
    fn query_with_no_sids_is_sixteen_bytes() {
        let q = QueryQuotaInfo {
            return_single: false,
            restart_scan: true,
            sids: QuotaSids::All,
        };
        let b = q.encode();
        assert_eq!(b, [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(QueryQuotaInfo::decode(&b).unwrap(), q);
    }

    #[test]
    fn query_with_a_sid_list_reads_every_sid() {
        let q = QueryQuotaInfo {
            return_single: true,
            restart_scan: false,
            sids: QuotaSids::List(vec![user(1000), Sid::local_system(), user(1001)]),
        };
        let b = q.encode();
        // SidListLength: three entries of 8 + SID bytes.
        assert_eq!(
            u32::from_le_bytes(b[4..8].try_into().unwrap()),
            8 * 3 + 28 + 12 + 28
        );
        assert_eq!(QueryQuotaInfo::decode(&b).unwrap(), q);
    }

    #[test]
    fn query_with_a_start_sid_at_an_offset() {
        let sid = user(7);
        let mut b = vec![0, 1, 0, 0];
        b.put_u32(0);
        b.put_u32(sid.wire_len() as u32);
        b.put_u32(4); // StartSidOffset: 4 bytes into the SidBuffer
        b.put_u32(0xFFFF_FFFF);
        sid.encode(&mut b);
        let q = QueryQuotaInfo::decode(&b).unwrap();
        assert_eq!(q.sids, QuotaSids::Start(sid));
        assert!(q.restart_scan && !q.return_single);
    }

    #[test]
    fn malformed_queries_are_invalid_parameter() {
        let good = QueryQuotaInfo {
            return_single: false,
            restart_scan: true,
            sids: QuotaSids::List(vec![user(1000)]),
        }
        .encode();
        let mut cases: Vec<Vec<u8>> = vec![
            Vec::new(),
            vec![0, 1, 0],
            good[..15].to_vec(),
            // The list cut short of SidListLength.
            good[..good.len() - 1].to_vec(),
        ];
        // SidLength not the SID's size.
        let mut c = good.clone();
        c[20] += 4;
        cases.push(c);
        // A SID of revision 2.
        let mut c = good.clone();
        c[24] = 2;
        cases.push(c);
        // NextEntryOffset pointing into its own entry, then past the list.
        for next in [4u32, 36, 40, 1 << 31] {
            let mut c = good.clone();
            c[16..20].copy_from_slice(&next.to_le_bytes());
            cases.push(c);
        }
        // A start SID past the buffer, one whose offset overflows, and an
        // offset without a length.
        for (len, off) in [(12u32, 0u32), (12, u32::MAX), (0, 8)] {
            let mut c = vec![0, 1, 0, 0, 0, 0, 0, 0];
            c.put_u32(len);
            c.put_u32(off);
            c.extend_from_slice(&[1, 1, 0, 0, 0, 0, 0, 5]);
            cases.push(c);
        }
        for c in cases {
            assert_eq!(
                QueryQuotaInfo::decode(&c).map_err(|e| e.status()),
                Err(crate::NtStatus::INVALID_PARAMETER),
                "{c:02x?}"
            );
        }
    }

    #[test]
    fn quota_entries_are_8_byte_aligned() {
        let entries = vec![
            QuotaEntry {
                change_time: 0x01D9_0000_0000_0000,
                quota_used: 4096,
                quota_threshold: 1 << 20,
                quota_limit: 2 << 20,
                // 12 bytes: the next entry starts after 4 bytes of padding.
                sid: Sid::local_system(),
            },
            QuotaEntry {
                change_time: 0,
                quota_used: 0,
                quota_threshold: -1,
                quota_limit: -2,
                sid: user(1000),
            },
        ];
        let b = encode_quota_list(&entries);
        assert_eq!(u32::from_le_bytes(b[..4].try_into().unwrap()), 56);
        assert_eq!(b.len(), 56 + 40 + 28);
        assert_eq!(decode_quota_list(&b).unwrap(), entries);
        assert!(decode_quota_list(&[]).is_err());
        assert!(decode_quota_list(&b[..50]).is_err());
    }

    fn sid() -> impl Strategy<Value = Sid> {
        (
            0u64..1 << 48,
            proptest::collection::vec(any::<u32>(), 0..=15),
        )
            .prop_map(|(a, subs)| Sid::new(a, &subs))
    }

    fn sids() -> impl Strategy<Value = QuotaSids> {
        prop_oneof![
            Just(QuotaSids::All),
            proptest::collection::vec(sid(), 1..5).prop_map(QuotaSids::List),
            sid().prop_map(QuotaSids::Start),
        ]
    }

    proptest! {
        #[test]
        fn query_quota_roundtrip(return_single: bool, restart_scan: bool, sids in sids()) {
            let q = QueryQuotaInfo { return_single, restart_scan, sids };
            prop_assert_eq!(QueryQuotaInfo::decode(&q.encode()).unwrap(), q);
        }

        #[test]
        fn quota_list_roundtrip(entries in proptest::collection::vec(
            (any::<u64>(), any::<i64>(), any::<i64>(), any::<i64>(), sid()), 1..5)) {
            let entries: Vec<QuotaEntry> = entries
                .into_iter()
                .map(|(change_time, quota_used, quota_threshold, quota_limit, sid)| QuotaEntry {
                    change_time, quota_used, quota_threshold, quota_limit, sid,
                })
                .collect();
            prop_assert_eq!(decode_quota_list(&encode_quota_list(&entries)).unwrap(), entries);
        }

        #[test]
        fn quota_decoders_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..160)) {
            for r in [
                QueryQuotaInfo::decode(&buf).map(|_| ()),
                decode_get_quota_list(&buf).map(|_| ()),
                decode_quota_list(&buf).map(|_| ()),
            ] {
                if let Err(e) = r {
                    prop_assert_eq!(e.status(), crate::NtStatus::INVALID_PARAMETER);
                }
            }
        }
    }
}
