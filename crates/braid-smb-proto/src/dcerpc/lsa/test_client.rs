//! Test helpers: a fixed backend, and a client's side of the wire written
//! from `lsa.idl` independently of `ndr.rs` and `wire.rs`: requests
//! marshalled as Samba's client marshals them, answers read back strictly
//! (every count checked against its structure).

use super::*;
use crate::fscc::security::Sid;

pub fn sid(s: &str) -> Sid {
    s.parse().unwrap()
}

pub const DOMAIN_SID: &str = "S-1-5-21-1-2-3";

/// BRAIDHOST (S-1-5-21-1-2-3) with alice (1000), bob (1001), the group
/// "staff" (1002) and "None" (513).
pub struct TestBackend;

const ACCOUNTS: &[(&str, u32, SidNameUse)] = &[
    ("alice", 1000, SidNameUse::User),
    ("bob", 1001, SidNameUse::User),
    ("staff", 1002, SidNameUse::Group),
    ("None", 513, SidNameUse::Group),
];

impl LsaBackend for TestBackend {
    fn account_domain(&self) -> (String, Sid) {
        ("BRAIDHOST".into(), sid(DOMAIN_SID))
    }
    fn account_by_sid(&self, s: &Sid) -> Option<(String, SidNameUse)> {
        ACCOUNTS
            .iter()
            .find(|(_, rid, _)| sid(&format!("{DOMAIN_SID}-{rid}")) == *s)
            .map(|(name, _, kind)| (name.to_string(), *kind))
    }
    fn account_by_name(&self, name: &str) -> Option<(Sid, SidNameUse)> {
        ACCOUNTS
            .iter()
            .find(|(n, _, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, rid, kind)| (sid(&format!("{DOMAIN_SID}-{rid}")), *kind))
    }
    fn caller(&self) -> (String, String) {
        ("alice".into(), "BRAIDHOST".into())
    }
}

/// Marshals a request by hand: little-endian, natural alignment from the
/// stub start, referent ids from 0x00020000 as Samba's client numbers them.
pub struct Enc {
    pub buf: Vec<u8>,
    referent: u32,
}

impl Default for Enc {
    fn default() -> Self {
        Enc {
            buf: Vec::new(),
            referent: 0x0002_0000,
        }
    }
}

impl Enc {
    pub fn align(&mut self, n: usize) -> &mut Self {
        while !self.buf.len().is_multiple_of(n) {
            self.buf.push(0);
        }
        self
    }
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.align(2);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn ptr(&mut self, present: bool) -> &mut Self {
        let id = if present { self.referent } else { 0 };
        if present {
            self.referent += 4;
        }
        self.u32(id)
    }
    pub fn handle(&mut self, h: &[u8; 20]) -> &mut Self {
        self.align(4);
        self.buf.extend_from_slice(h);
        self
    }
    /// lsa_String's inline part: length, size (both 2 * units), pointer.
    pub fn string_header(&mut self, s: Option<&str>) -> &mut Self {
        let bytes = s.map_or(0, |s| s.encode_utf16().count() * 2) as u16;
        self.align(4).u16(bytes).u16(bytes).ptr(s.is_some())
    }
    /// The deferred buffer: size/2, offset 0, length/2, the units.
    pub fn string_body(&mut self, s: Option<&str>) -> &mut Self {
        if let Some(s) = s {
            let units: Vec<u16> = s.encode_utf16().collect();
            self.u32(units.len() as u32).u32(0).u32(units.len() as u32);
            for u in units {
                self.u16(u);
            }
        }
        self
    }
    /// `[string] wchar_t*` pointee: counts include the NUL.
    pub fn wstring(&mut self, s: &str) -> &mut Self {
        let units: Vec<u16> = s.encode_utf16().chain([0]).collect();
        self.u32(units.len() as u32).u32(0).u32(units.len() as u32);
        for u in units {
            self.u16(u);
        }
        self
    }
    /// dom_sid2: num_auths as conformance, then the SID.
    pub fn sid(&mut self, s: &Sid) -> &mut Self {
        self.u32(s.sub_authorities.len() as u32)
            .u8(s.revision)
            .u8(s.sub_authorities.len() as u8);
        self.buf.extend_from_slice(&s.authority.to_be_bytes()[2..]);
        for rid in &s.sub_authorities {
            self.u32(*rid);
        }
        self
    }
    pub fn done(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

/// lsa_OpenPolicy2 as smbtorture sends it: system_name "\\", attr with
/// only a QoS {len 0, impersonation 2, context mode 1, effective 0}.
pub fn open_policy2_stub(access: u32) -> Vec<u8> {
    let mut e = Enc::default();
    e.ptr(true).wstring("\\");
    object_attributes(&mut e);
    e.u32(access).done()
}

/// lsa_OpenPolicy: `[unique] uint16 *system_name`, one wchar.
pub fn open_policy_stub() -> Vec<u8> {
    let mut e = Enc::default();
    e.ptr(true).u16(u16::from(b'\\'));
    object_attributes(&mut e);
    e.u32(0x0200_0000).done()
}

fn object_attributes(e: &mut Enc) {
    e.u32(0) // len
        .ptr(false) // root_dir
        .ptr(false) // object_name
        .u32(0) // attributes
        .ptr(false) // sec_desc
        .ptr(true); // sec_qos
    e.u32(0).u16(2).u8(1).u8(0);
}

pub fn open(state: &mut LsaState) -> [u8; 20] {
    let out = call(
        opnum::LSAR_OPEN_POLICY2,
        &open_policy2_stub(0x0200_0000),
        state,
    )
    .unwrap();
    let mut d = Dec::new(&out);
    let h = d.handle();
    assert_eq!(d.u32(), status::SUCCESS);
    d.end();
    h
}

pub fn call(op: u16, stub: &[u8], state: &mut LsaState) -> Result<Vec<u8>, u32> {
    handle_call(op, stub, &TestBackend, state)
}

pub fn handle_only_stub(h: &[u8; 20]) -> Vec<u8> {
    Enc::default().handle(h).done()
}

/// The three LsarLookupNames forms (14, 58, 68).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamesCall {
    Names,
    Names2,
    Names3,
}

impl NamesCall {
    pub fn opnum(self) -> u16 {
        match self {
            NamesCall::Names => opnum::LSAR_LOOKUP_NAMES,
            NamesCall::Names2 => opnum::LSAR_LOOKUP_NAMES2,
            NamesCall::Names3 => opnum::LSAR_LOOKUP_NAMES3,
        }
    }
}

/// lsa_LookupNames/2/3: handle, num_names, names[] (headers, buffers),
/// sids {0, NULL}, level, count 0 (, lookup_options 0, client_revision 0).
pub fn lookup_names_stub(
    h: &[u8; 20],
    names: &[Option<&str>],
    level: u16,
    c: NamesCall,
) -> Vec<u8> {
    let mut e = Enc::default();
    e.handle(h).u32(names.len() as u32).u32(names.len() as u32);
    for n in names {
        e.string_header(*n);
    }
    for n in names {
        e.string_body(*n);
    }
    e.u32(0).ptr(false).u16(level).u32(0);
    if c != NamesCall::Names {
        e.u32(0).u32(0);
    }
    e.done()
}

/// lsa_LookupSids/2: handle, SidArray {n, ptr, [n ptrs], SIDs}, names
/// {0, NULL}, level, count (, unknown1, unknown2).
pub fn lookup_sids_stub(h: &[u8; 20], sids: &[Sid], level: u16, extended: bool) -> Vec<u8> {
    let mut e = Enc::default();
    e.handle(h)
        .u32(sids.len() as u32)
        .ptr(true)
        .u32(sids.len() as u32);
    for _ in sids {
        e.ptr(true);
    }
    for s in sids {
        e.sid(s);
    }
    e.u32(0).ptr(false).u16(level).u32(0);
    if extended {
        e.u32(0).u32(0);
    }
    e.done()
}

pub fn query_info_stub(h: &[u8; 20], level: u16) -> Vec<u8> {
    Enc::default().handle(h).u16(level).done()
}

/// Reads an answer strictly; panics (failing the test) on any mismatch.
pub struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Dec { buf, pos: 0 }
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        out
    }
    pub fn align(&mut self, n: usize) {
        self.pos = self.pos.div_ceil(n) * n;
    }
    pub fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    pub fn u16(&mut self) -> u16 {
        self.align(2);
        let b = self.take(2);
        u16::from_le_bytes([b[0], b[1]])
    }
    pub fn u32(&mut self) -> u32 {
        self.align(4);
        let b = self.take(4);
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
    pub fn ptr(&mut self) -> bool {
        self.u32() != 0
    }
    pub fn handle(&mut self) -> [u8; 20] {
        self.align(4);
        self.take(20).try_into().unwrap()
    }
    /// (length, size, pointer set)
    pub fn string_header(&mut self) -> (u16, u16, bool) {
        self.align(4);
        (self.u16(), self.u16(), self.ptr())
    }
    pub fn string_body(&mut self, (len, size, present): (u16, u16, bool)) -> Option<String> {
        if !present {
            return None;
        }
        assert_eq!(self.u32(), u32::from(size / 2), "max_count = size/2");
        assert_eq!(self.u32(), 0, "offset");
        let actual = self.u32() as usize;
        assert_eq!(actual, usize::from(len / 2), "actual_count = length/2");
        let units: Vec<u16> = (0..actual).map(|_| self.u16()).collect();
        Some(String::from_utf16(&units).unwrap())
    }
    pub fn sid(&mut self) -> Sid {
        let max = self.u32();
        let revision = self.u8();
        let count = self.u8();
        assert_eq!(max, u32::from(count));
        let mut auth = [0u8; 8];
        auth[2..].copy_from_slice(self.take(6));
        let subs: Vec<u32> = (0..count).map(|_| self.u32()).collect();
        Sid {
            revision,
            authority: u64::from_be_bytes(auth),
            sub_authorities: subs,
        }
    }
    pub fn end(&self) {
        assert_eq!(self.pos, self.buf.len(), "trailing bytes");
    }

    /// lsa_RefDomainList behind its unique pointer: (name, SID) in order.
    pub fn domains(&mut self) -> Option<Vec<(String, Sid)>> {
        if !self.ptr() {
            return None;
        }
        let count = self.u32();
        let present = self.ptr();
        assert_eq!(self.u32(), 32, "max_size");
        assert_eq!(present, count > 0);
        if !present {
            return Some(Vec::new());
        }
        assert_eq!(self.u32(), count);
        let headers: Vec<_> = (0..count)
            .map(|_| {
                let h = self.string_header();
                assert!(self.ptr(), "domain SID pointer");
                h
            })
            .collect();
        Some(
            headers
                .into_iter()
                .map(|h| {
                    assert_eq!(h.1, h.0 + 2, "lsa_StringLarge size");
                    (self.string_body(h).unwrap(), self.sid())
                })
                .collect(),
        )
    }
}

/// A decoded LsarLookupNames answer; `sids` holds (use, RID or None for
/// LookupNames3, full SID for LookupNames3 when mapped, domain index).
#[derive(Debug)]
pub struct NamesReply {
    pub domains: Option<Vec<(String, Sid)>>,
    pub sids: Vec<(u16, Option<u32>, Option<Sid>, u32)>,
    pub mapped: u32,
    pub status: u32,
}

pub fn decode_names_reply(out: &[u8], c: NamesCall) -> NamesReply {
    let mut d = Dec::new(out);
    let domains = d.domains();
    let count = d.u32();
    let present = d.ptr();
    assert_eq!(present, count > 0);
    let mut sids = Vec::new();
    if present {
        assert_eq!(d.u32(), count);
        for _ in 0..count {
            let kind = d.u16();
            match c {
                NamesCall::Names | NamesCall::Names2 => {
                    let rid = d.u32();
                    let index = d.u32();
                    if c == NamesCall::Names2 {
                        assert_eq!(d.u32(), 0, "flags");
                    }
                    sids.push((kind, Some(rid), None, index));
                }
                NamesCall::Names3 => {
                    let has_sid = d.ptr();
                    let index = d.u32();
                    assert_eq!(d.u32(), 0, "flags");
                    sids.push((kind, None, has_sid.then(|| sid("S-1-0-0")), index));
                }
            }
        }
        for entry in sids.iter_mut() {
            if entry.2.is_some() {
                entry.2 = Some(d.sid());
            }
        }
    }
    let mapped = d.u32();
    let status = d.u32();
    d.end();
    NamesReply {
        domains,
        sids,
        mapped,
        status,
    }
}

/// A decoded LsarLookupSids answer: (use, name, domain index) per SID.
#[derive(Debug)]
pub struct SidsReply {
    pub domains: Option<Vec<(String, Sid)>>,
    pub names: Vec<(u16, String, u32)>,
    pub mapped: u32,
    pub status: u32,
}

pub fn decode_sids_reply(out: &[u8], extended: bool) -> SidsReply {
    let mut d = Dec::new(out);
    let domains = d.domains();
    let count = d.u32();
    let present = d.ptr();
    assert_eq!(present, count > 0);
    let mut names = Vec::new();
    if present {
        assert_eq!(d.u32(), count);
        let mut headers = Vec::new();
        for _ in 0..count {
            let kind = d.u16();
            let h = d.string_header();
            assert_eq!(h.0, h.1, "lsa_String size");
            let index = d.u32();
            if extended {
                assert_eq!(d.u32(), 0, "flags");
            }
            headers.push((kind, h, index));
        }
        for (kind, h, index) in headers {
            names.push((kind, d.string_body(h).unwrap(), index));
        }
    }
    let mapped = d.u32();
    let status = d.u32();
    d.end();
    SidsReply {
        domains,
        names,
        mapped,
        status,
    }
}
