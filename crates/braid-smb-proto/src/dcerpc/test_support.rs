//! Test helpers: a fixed backend, request builders, and a small NDR
//! decoder written independently of `ndr.rs` to read answers by hand.

use super::lsa::{LsaBackend, SidNameUse};
use super::ndr::NdrWriter;
use super::pdu::{
    encode_pdu, pfc, ptype, split_fragment, Bind, ContextElement, Request, Response, SyntaxId,
};
use super::srvsvc::{
    share_type, OpenFileEntry, ServerInfo, SessionEntry, ShareEntry, SrvsvcBackend, TransportEntry,
    TreeConnectEntry,
};
use super::{PipeBackend, PipeEndpoint};
use crate::fscc::security::Sid;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Default)]
pub struct FixedBackend {
    pub shares: Vec<ShareEntry>,
    pub anonymous: bool,
    pub sessions: Vec<SessionEntry>,
    pub trees: Vec<TreeConnectEntry>,
    pub files: Vec<OpenFileEntry>,
    /// Ids close_file was asked for and found.
    pub closed: std::sync::Mutex<Vec<u32>>,
    /// Sessions end_sessions ended.
    pub ended: std::sync::Mutex<usize>,
    pub transports: Vec<TransportEntry>,
    /// Seconds since 1970 the clock shows.
    pub now_unix: u64,
    pub uptime: Duration,
}

impl PipeBackend for FixedBackend {
    fn srvsvc(&self) -> &dyn SrvsvcBackend {
        self
    }
    fn lsa(&self) -> &dyn LsaBackend {
        self
    }
}

/// A server named TESTHOST with one user, "alice" (RID 1000).
impl LsaBackend for FixedBackend {
    fn account_domain(&self) -> (String, Sid) {
        ("TESTHOST".into(), Sid::new(5, &[21, 1, 2, 3]))
    }
    fn account_by_sid(&self, sid: &Sid) -> Option<(String, SidNameUse)> {
        (*sid == Sid::new(5, &[21, 1, 2, 3, 1000])).then(|| ("alice".into(), SidNameUse::User))
    }
    fn account_by_name(&self, name: &str) -> Option<(Sid, SidNameUse)> {
        name.eq_ignore_ascii_case("alice")
            .then(|| (Sid::new(5, &[21, 1, 2, 3, 1000]), SidNameUse::User))
    }
    fn caller(&self) -> (String, String) {
        ("alice".into(), "TESTHOST".into())
    }
}

impl SrvsvcBackend for FixedBackend {
    fn shares(&self) -> Vec<ShareEntry> {
        self.shares.clone()
    }
    fn server_info(&self) -> ServerInfo {
        ServerInfo {
            name: "BRAID".into(),
            comment: "Braid test".into(),
            version_major: 10,
            version_minor: 0,
            server_type: 0x0000_8003,
        }
    }
    fn caller_is_anonymous(&self) -> bool {
        self.anonymous
    }
    fn sessions(&self) -> Vec<SessionEntry> {
        self.sessions.clone()
    }
    fn tree_connects(&self) -> Vec<TreeConnectEntry> {
        self.trees.clone()
    }
    fn open_files(&self) -> Vec<OpenFileEntry> {
        self.files.clone()
    }
    fn close_file(&self, id: u32) -> bool {
        let mut closed = self.closed.lock().unwrap();
        let open = self.files.iter().any(|f| f.id == id) && !closed.contains(&id);
        if open {
            closed.push(id);
        }
        open
    }
    fn end_sessions(&self, client: Option<&str>, user: Option<&str>) -> usize {
        let matching = self
            .sessions
            .iter()
            .filter(|s| client.is_none_or(|c| s.client.eq_ignore_ascii_case(c)))
            .filter(|s| user.is_none_or(|u| s.user.eq_ignore_ascii_case(u)))
            .count();
        *self.ended.lock().unwrap() += matching;
        matching
    }
    fn transports(&self) -> Vec<TransportEntry> {
        self.transports.clone()
    }
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.now_unix)
    }
    fn uptime(&self) -> Duration {
        self.uptime
    }
}

pub fn share(name: &str, share_type: u32, comment: &str) -> ShareEntry {
    ShareEntry {
        name: name.into(),
        share_type,
        comment: comment.into(),
        connections: 0,
        browseable: true,
    }
}

/// Two disk shares and IPC$.
pub fn three_shares() -> FixedBackend {
    FixedBackend {
        shares: vec![
            share("data", share_type::DISK, "Data share"),
            share("Home", share_type::DISK, ""),
            share(
                "IPC$",
                share_type::IPC | share_type::SPECIAL,
                "IPC Service (Braid)",
            ),
        ],
        ..FixedBackend::default()
    }
}

pub fn many_shares(n: usize) -> FixedBackend {
    FixedBackend {
        shares: (0..n)
            .map(|i| {
                share(
                    &format!("share_{i:03}"),
                    share_type::DISK,
                    &format!("comment number {i}"),
                )
            })
            .collect(),
        ..FixedBackend::default()
    }
}

pub fn bind_pdu(call_id: u32, max_frag: u16, contexts: Vec<ContextElement>) -> Vec<u8> {
    let mut body = Vec::new();
    Bind {
        max_xmit_frag: max_frag,
        max_recv_frag: max_frag,
        assoc_group_id: 0,
        contexts,
    }
    .encode(&mut body);
    encode_pdu(
        ptype::BIND,
        pfc::FIRST_FRAG | pfc::LAST_FRAG,
        call_id,
        &body,
    )
}

pub fn srvsvc_context(context_id: u16) -> ContextElement {
    ContextElement {
        context_id,
        abstract_syntax: SyntaxId::SRVSVC,
        transfer_syntaxes: vec![SyntaxId::NDR20],
    }
}

pub fn request_pdu(call_id: u32, flags: u8, context_id: u16, opnum: u16, stub: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    Request {
        alloc_hint: stub.len() as u32,
        context_id,
        opnum,
        object: None,
        stub: stub.to_vec(),
    }
    .encode(&mut body);
    encode_pdu(ptype::REQUEST, flags, call_id, &body)
}

/// NetrShareEnum's [in] part: server name, SHARE_ENUM_STRUCT with an empty
/// container (as smbclient sends it), MAX_PREFERRED_LENGTH, resume handle.
pub fn share_enum_stub(level: u32, resume: Option<u32>) -> Vec<u8> {
    enum_stub(&[Some("\\\\127.0.0.1")], level, resume)
}

/// A Netr*Enum call's [in] part: the `[in, string, unique]` parameters
/// (server name first), the level and an empty container, as Samba's
/// clients send it, MAX_PREFERRED_LENGTH and the resume handle.
pub fn enum_stub(strings: &[Option<&str>], level: u32, resume: Option<u32>) -> Vec<u8> {
    let mut w = NdrWriter::new();
    for s in strings {
        match s {
            Some(s) => {
                w.referent();
                w.wstring(s);
            }
            None => w.null_pointer(),
        }
    }
    w.u32(level);
    w.u32(level);
    w.referent();
    w.u32(0);
    w.null_pointer();
    w.u32(u32::MAX);
    match resume {
        Some(handle) => {
            w.referent();
            w.u32(handle);
        }
        None => w.null_pointer(),
    }
    w.into_bytes()
}

pub fn share_get_info_stub(name: &str, level: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.null_pointer();
    w.wstring(name);
    w.u32(level);
    w.into_bytes()
}

pub fn server_get_info_stub(level: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.referent();
    w.wstring("BRAID");
    w.u32(level);
    w.into_bytes()
}

/// A pipe with srvsvc bound on context 0, the bind_ack already read.
pub fn bound_endpoint(max_frag: u16) -> PipeEndpoint {
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    ep.write(
        &bind_pdu(1, max_frag, vec![srvsvc_context(0)]),
        &three_shares(),
    )
    .unwrap();
    let pdus = read_pdus(&mut ep);
    assert_eq!(pdus.len(), 1);
    assert_eq!(pdus[0][2], ptype::BIND_ACK);
    ep
}

/// Every pending PDU, each read in one go (one read = one message).
pub fn read_pdus(ep: &mut PipeEndpoint) -> Vec<Vec<u8>> {
    let mut pdus = Vec::new();
    while ep.has_output() {
        let (pdu, more) = ep.read(usize::MAX);
        assert!(!more);
        pdus.push(pdu);
    }
    pdus
}

/// One call on context 0; the response stub reassembled from its fragments.
pub fn call(ep: &mut PipeEndpoint, backend: &FixedBackend, opnum: u16, stub: &[u8]) -> Vec<u8> {
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    ep.write(&request_pdu(7, flags, 0, opnum, stub), backend)
        .unwrap();
    let mut out = Vec::new();
    for pdu in read_pdus(ep) {
        let frag = split_fragment(&pdu).unwrap();
        assert_eq!(frag.header.ptype, ptype::RESPONSE, "{pdu:02x?}");
        assert_eq!(frag.header.call_id, 7);
        out.extend_from_slice(&Response::decode(frag.body).unwrap().stub);
    }
    out
}

/// Reads NDR by hand: little-endian, natural alignment from the stub start.
pub struct StubCursor<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> StubCursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        StubCursor { buf, pos: 0 }
    }

    pub fn u32(&mut self) -> u32 {
        self.pos = self.pos.div_ceil(4) * 4;
        let b = &self.buf[self.pos..self.pos + 4];
        self.pos += 4;
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    pub fn u16(&mut self) -> u16 {
        self.pos = self.pos.div_ceil(2) * 2;
        let b = &self.buf[self.pos..self.pos + 2];
        self.pos += 2;
        u16::from_le_bytes([b[0], b[1]])
    }

    /// Octets as they are, unaligned.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        out
    }

    pub fn pointer(&mut self) -> bool {
        self.u32() != 0
    }

    /// max_count, offset 0, actual_count (NUL included), the characters.
    pub fn string(&mut self) -> String {
        let max = self.u32();
        assert_eq!(self.u32(), 0, "offset");
        let actual = self.u32() as usize;
        assert_eq!(max as usize, actual);
        let units: Vec<u16> = self.buf[self.pos..self.pos + actual * 2]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        self.pos += actual * 2;
        assert_eq!(units.last(), Some(&0), "terminating NUL");
        String::from_utf16(&units[..actual - 1]).unwrap()
    }

    /// A conformant byte array: count, then the bytes.
    pub fn byte_array(&mut self) -> Vec<u8> {
        let n = self.u32() as usize;
        let out = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        out
    }

    /// The words left, for answers compared whole.
    pub fn rest_u32(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        while !self.at_end() {
            out.push(self.u32());
        }
        out
    }

    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }
}
