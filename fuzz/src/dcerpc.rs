//! DCE/RPC over the srvsvc and lsarpc named pipes (`braid_smb_proto::dcerpc`),
//! one target each over the same harness: the first
//! byte picks whether a valid BIND goes first (bit 0) and the size of the
//! pieces the rest is written and read in (bits 1..7); the rest is what the
//! client writes. The backend authenticates binds (one account, a fixed
//! server challenge), so NTLMSSP and SPNEGO legs and the verification of
//! signed and sealed requests are reached too. Properties: no panic; every
//! answer read back is one whole PDU (a read never spans two), that splits
//! cleanly and, for a RESPONSE, fits the negotiated fragment size.
use braid_smb_proto::auth::{
    nt_hash, AuthOutcome, ClientEntropy, NtlmClient, NtlmServer, SpnegoClient,
};

use braid_smb_proto::dcerpc::auth::{
    auth_level, auth_type, encode_pdu_with_auth, OutAuth, RpcAuthBackend, SecTrailer,
};
use braid_smb_proto::dcerpc::lsa::{LsaBackend, SidNameUse};
use braid_smb_proto::dcerpc::pdu::{
    encode_pdu, pfc, ptype, split_fragment, Bind, ContextElement, SyntaxId,
};
use braid_smb_proto::dcerpc::{
    share_type, OpenFileEntry, PipeBackend, PipeEndpoint, ServerInfo, SessionEntry, ShareEntry,
    SrvsvcBackend, TransportEntry, TreeConnectEntry,
};
use braid_smb_proto::fscc::security::Sid;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The fragment size the BIND below offers.
const MAX_FRAG: u16 = 1024;

struct Backend;

impl PipeBackend for Backend {
    fn srvsvc(&self) -> &dyn SrvsvcBackend {
        self
    }
    fn lsa(&self) -> &dyn LsaBackend {
        self
    }
    fn rpc_auth(&self) -> Option<&dyn RpcAuthBackend> {
        Some(self)
    }
}

impl RpcAuthBackend for Backend {
    fn ntlm_server(&self) -> NtlmServer {
        NtlmServer::new([0x11; 8], 0x01d9_0000_0000_0000, "FUZZ", "fuzz", "FUZZ")
    }
    fn nt_hash(&self, user: &str, _domain: &str) -> Option<[u8; 16]> {
        user.eq_ignore_ascii_case("alice").then(|| nt_hash("fuzz"))
    }
    fn accepts(&self, outcome: &AuthOutcome) -> bool {
        outcome.user.eq_ignore_ascii_case("alice")
    }
}

/// One user, "alice" (RID 1000), in the account domain FUZZ.
impl LsaBackend for Backend {
    fn account_domain(&self) -> (String, Sid) {
        ("FUZZ".into(), Sid::new(5, &[21, 7, 8, 9]))
    }
    fn account_by_sid(&self, sid: &Sid) -> Option<(String, SidNameUse)> {
        (*sid == Sid::new(5, &[21, 7, 8, 9, 1000])).then(|| ("alice".into(), SidNameUse::User))
    }
    fn account_by_name(&self, name: &str) -> Option<(Sid, SidNameUse)> {
        name.eq_ignore_ascii_case("alice")
            .then(|| (Sid::new(5, &[21, 7, 8, 9, 1000]), SidNameUse::User))
    }
    fn caller(&self) -> (String, String) {
        ("alice".into(), "FUZZ".into())
    }
}

impl SrvsvcBackend for Backend {
    fn shares(&self) -> Vec<ShareEntry> {
        (0..40)
            .map(|i| ShareEntry {
                name: format!("share{i}"),
                share_type: if i == 0 {
                    share_type::IPC | share_type::SPECIAL
                } else {
                    share_type::DISK
                },
                comment: "x".repeat(i),
                connections: i as u32,
                // Some shares left out of the enumerations.
                browseable: i % 7 != 3,
            })
            .collect()
    }
    fn server_info(&self) -> ServerInfo {
        ServerInfo {
            name: "BRAID".into(),
            comment: "fuzz".into(),
            version_major: 10,
            version_minor: 0,
            server_type: 0x8003,
        }
    }
    fn caller_is_anonymous(&self) -> bool {
        false
    }
    fn sessions(&self) -> Vec<SessionEntry> {
        (0..20)
            .map(|i| SessionEntry {
                client: format!("\\\\192.0.2.{i}"),
                user: "u".repeat(i),
                opens: i as u32,
                active: Duration::from_secs(i as u64),
                idle: Duration::ZERO,
                guest: i == 0,
                client_type: "SMB 3.1.1".into(),
                transport: "TCP".into(),
            })
            .collect()
    }
    fn tree_connects(&self) -> Vec<TreeConnectEntry> {
        (0..20)
            .map(|i| TreeConnectEntry {
                id: i,
                share: format!("share{i}"),
                share_type: share_type::DISK,
                opens: i,
                active: Duration::from_secs(1),
                user: "u".into(),
                client: format!("\\\\192.0.2.{i}"),
            })
            .collect()
    }
    fn open_files(&self) -> Vec<OpenFileEntry> {
        (0..20)
            .map(|i| OpenFileEntry {
                id: i,
                permissions: 3,
                locks: i,
                path: format!("share1\\dir\\file{i}"),
                user: "u".into(),
            })
            .collect()
    }
    fn close_file(&self, id: u32) -> bool {
        id < 20
    }
    fn end_sessions(&self, client: Option<&str>, _user: Option<&str>) -> usize {
        usize::from(client.is_some())
    }
    fn transports(&self) -> Vec<TransportEntry> {
        vec![TransportEntry {
            connections: 3,
            name: "\\Device\\Braid_TCP_127.0.0.1:445".into(),
            address: b"BRAID           ".to_vec(),
            network_address: "127.0.0.1:445".into(),
            domain: "WORKGROUP".into(),
        }]
    }
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_795_610_096)
    }
    fn uptime(&self) -> Duration {
        Duration::from_secs(3600)
    }
}

/// A BIND of the pipe's own interface on context 0, mgmt on context 1
/// and dssetup on context 2 (accepted on lsarpc only), so that requests
/// reach each interface a pipe may carry.
fn bind(abstract_syntax: SyntaxId) -> Vec<u8> {
    let mut body = Vec::new();
    let contexts = [abstract_syntax, SyntaxId::MGMT, SyntaxId::DSSETUP]
        .into_iter()
        .enumerate()
        .map(|(id, abstract_syntax)| ContextElement {
            context_id: id as u16,
            abstract_syntax,
            transfer_syntaxes: vec![SyntaxId::NDR20],
        })
        .collect();
    Bind {
        max_xmit_frag: MAX_FRAG,
        max_recv_frag: MAX_FRAG,
        assoc_group_id: 0,
        contexts,
    }
    .encode(&mut body);
    encode_pdu(ptype::BIND, pfc::FIRST_FRAG | pfc::LAST_FRAG, 1, &body)
}

/// A BIND of srvsvc with an authentication verifier: the first leg of
/// NTLMSSP or SPNEGO, at packet privacy.
fn authenticated_bind(auth: u8) -> Vec<u8> {
    let mut body = Vec::new();
    Bind {
        max_xmit_frag: MAX_FRAG,
        max_recv_frag: MAX_FRAG,
        assoc_group_id: 0,
        contexts: vec![ContextElement {
            context_id: 0,
            abstract_syntax: SyntaxId::SRVSVC,
            transfer_syntaxes: vec![SyntaxId::NDR20],
        }],
    }
    .encode(&mut body);
    let ntlm = NtlmClient::new("alice", "FUZZ", "fuzz");
    let token = if auth == auth_type::SPNEGO {
        let entropy = ClientEntropy {
            client_challenge: [3; 8],
            random_session_key: [9; 16],
            timestamp: 0x01d9_0000_0000_0000,
        };
        SpnegoClient::new(ntlm, entropy).initial_token()
    } else {
        let mut ntlm = ntlm;
        ntlm.negotiate()
    };
    let out = OutAuth {
        trailer: SecTrailer {
            auth_type: auth,
            auth_level: auth_level::PKT_PRIVACY,
            auth_pad_length: 0,
            auth_reserved: 0,
            auth_context_id: 1,
        },
        token,
    };
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    encode_pdu_with_auth(ptype::BIND, flags, 1, &body, Some(&out))
}

/// Reads every pending answer in `piece`-byte reads and checks each PDU.
fn drain(ep: &mut PipeEndpoint, piece: usize, bound: bool) {
    let mut pdu = Vec::new();
    while ep.has_output() {
        let (bytes, more) = ep.read(piece);
        assert!(!bytes.is_empty() && bytes.len() <= piece);
        pdu.extend_from_slice(&bytes);
        if more {
            continue;
        }
        let frag = split_fragment(&pdu).expect("an answer that does not split");
        assert_eq!(
            frag.header.frag_length as usize,
            pdu.len(),
            "a read spanned two PDUs"
        );
        if bound && frag.header.ptype == ptype::RESPONSE {
            assert!(pdu.len() <= MAX_FRAG as usize);
        }
        pdu.clear();
    }
    assert!(pdu.is_empty(), "a PDU left half read");
}

/// The srvsvc target: see the module comment.
pub fn dcerpc(data: &[u8]) {
    run("srvsvc", SyntaxId::SRVSVC, data);
}

/// The lsarpc target: the same, over the pipe that looks up SIDs and names.
pub fn lsarpc(data: &[u8]) {
    run("lsarpc", SyntaxId::LSARPC, data);
}

fn run(pipe: &str, abstract_syntax: SyntaxId, data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bound = mode & 1 != 0;
    let piece = 1 + usize::from(mode >> 1);
    let mut ep = PipeEndpoint::open(pipe).unwrap();
    if bound {
        ep.write(&bind(abstract_syntax), &Backend).unwrap();
        drain(&mut ep, piece, false);
    }
    for chunk in rest.chunks(piece) {
        let _ = ep.write(chunk, &Backend);
        drain(&mut ep, piece, bound);
    }
}

/// A REQUEST PDU for `opnum` with `stub`, on context 0.
fn request(opnum: u16, stub: &[u8]) -> Vec<u8> {
    request_on(0, opnum, stub)
}

fn request_on(context_id: u16, opnum: u16, stub: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&(stub.len() as u32).to_le_bytes()); // alloc_hint
    body.extend_from_slice(&context_id.to_le_bytes());
    body.extend_from_slice(&opnum.to_le_bytes());
    body.extend_from_slice(stub);
    encode_pdu(ptype::REQUEST, pfc::FIRST_FRAG | pfc::LAST_FRAG, 2, &body)
}

fn words(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Seeds: a BIND then NetShareEnumAll at level 1, written unbound in
/// 1-byte pieces; the same call alone, bound, in 64-byte pieces; and the
/// session, connection, file and transport enumerations, bound.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    // server_unc NULL, level 1, switch 1, ctr1 pointer, count 0, array NULL,
    // PreferedMaximumLength, resume handle NULL
    let share_enum = request(15, &words(&[0, 1, 1, 0x0002_0000, 0, 0, u32::MAX, 0]));
    let mut unbound = vec![0u8];
    unbound.extend_from_slice(&bind(SyntaxId::SRVSVC));
    unbound.extend_from_slice(&share_enum);
    let mut bound = vec![1u8 | (63 << 1)];
    bound.extend_from_slice(&share_enum);
    let mut seeds = vec![("bind-enum".into(), unbound), ("enum".into(), bound)];
    // Authenticated binds, unbound, in 16-byte pieces: the server answers
    // with a CHALLENGE; what follows is the mutator's to find.
    for (name, auth) in [
        ("bind-ntlmssp", auth_type::NTLMSSP),
        ("bind-spnego", auth_type::SPNEGO),
    ] {
        let mut input = vec![15u8 << 1];
        input.extend_from_slice(&authenticated_bind(auth));
        input.extend_from_slice(&share_enum);
        seeds.push((name.to_string(), input));
    }
    // server_unc, client and user NULL, level 502, container, max, resume.
    let sessions = words(&[0, 0, 0, 502, 502, 0x0002_0000, 0, 0, u32::MAX, 0]);
    // server_unc NULL, a qualifier "IPC$" (a conformant varying string), level 1.
    let mut connections = words(&[0, 0x0002_0000, 5, 0, 5]);
    for unit in "IPC$\0".encode_utf16() {
        connections.extend_from_slice(&unit.to_le_bytes());
    }
    connections.extend_from_slice(&[0, 0]);
    connections.extend_from_slice(&words(&[1, 1, 0x0002_0004, 0, 0, u32::MAX, 0]));
    let files = words(&[0, 0, 0, 3, 3, 0x0002_0000, 0, 0, 4096, 0]);
    let transports = words(&[0, 1, 1, 0x0002_0000, 0, 0, u32::MAX, 0]);
    for (name, opnum, stub) in [
        ("sessions", 12, sessions),
        ("connections", 8, connections),
        ("files", 9, files),
        ("transports", 26, transports),
    ] {
        let mut input = vec![1u8 | (31 << 1)];
        input.extend_from_slice(&request(opnum, &stub));
        seeds.push((name.to_string(), input));
    }
    seeds
}

/// The UTF-16 of `s` as an RPC_UNICODE_STRING's deferred buffer: a
/// conformant varying array (max count, offset, actual count), padded to 4.
fn utf16_buffer(s: &str) -> Vec<u8> {
    let units: Vec<u16> = s.encode_utf16().collect();
    let n = units.len() as u32;
    let mut out = words(&[n, 0, n]);
    for u in units {
        out.extend_from_slice(&u.to_le_bytes());
    }
    while out.len() % 4 != 0 {
        out.push(0);
    }
    out
}

/// lsarpc seeds, bound, in 32-byte pieces: OpenPolicy2, then a LookupNames
/// and a LookupSids on a handle the server never gave (answered
/// INVALID_HANDLE after the whole stub is decoded), and a GetUserName.
pub fn lsarpc_seeds() -> Vec<(String, Vec<u8>)> {
    // MS-LSAD 3.1.4.4.1: SystemName NULL; LSAPR_OBJECT_ATTRIBUTES (Length
    // 24, no RootDirectory, ObjectName, SecurityDescriptor or QoS,
    // Attributes 0); DesiredAccess MAXIMUM_ALLOWED.
    let open_policy2 = words(&[0, 24, 0, 0, 0, 0, 0, 0x0200_0000]);
    let handle = [7u8; 20].to_vec();
    // MS-LSAT 3.1.4.8 LsarLookupNames: handle, Count 2, the names array
    // (max count, two RPC_UNICODE_STRINGs with buffers deferred),
    // TranslatedSids {0, NULL}, LookupLevel 1, MappedCount 0.
    let mut lookup_names = handle.clone();
    let (a, b) = ("BUILTIN\\Administrators", "alice");
    lookup_names.extend_from_slice(&words(&[2, 2]));
    for (i, name) in [a, b].iter().enumerate() {
        let bytes = (name.encode_utf16().count() * 2) as u32;
        lookup_names.extend_from_slice(&(bytes as u16).to_le_bytes());
        lookup_names.extend_from_slice(&(bytes as u16).to_le_bytes());
        lookup_names.extend_from_slice(&words(&[0x0002_0000 + 4 * i as u32]));
    }
    for name in [a, b] {
        lookup_names.extend_from_slice(&utf16_buffer(name));
    }
    lookup_names.extend_from_slice(&words(&[0, 0]));
    lookup_names.extend_from_slice(&1u16.to_le_bytes());
    lookup_names.extend_from_slice(&[0, 0]);
    lookup_names.extend_from_slice(&words(&[0]));
    // MS-LSAT 3.1.4.11 LsarLookupSids: handle, SidEnumBuffer {1, ptr ->
    // [1] {ptr -> RPC_SID S-1-5-32-544}}, TranslatedNames {0, NULL},
    // LookupLevel 1, MappedCount 0.
    let mut lookup_sids = handle;
    lookup_sids.extend_from_slice(&words(&[1, 0x0002_0000, 1, 0x0002_0004, 2]));
    lookup_sids.extend_from_slice(&[1, 2, 0, 0, 0, 0, 0, 5]);
    lookup_sids.extend_from_slice(&words(&[32, 544, 0, 0]));
    lookup_sids.extend_from_slice(&1u16.to_le_bytes());
    lookup_sids.extend_from_slice(&[0, 0]);
    lookup_sids.extend_from_slice(&words(&[0]));
    // MS-LSAT 3.1.4.4 LsarGetUserName: SystemName NULL, UserName (a ref
    // pointer) -> NULL, DomainName (unique) -> NULL.
    let get_user_name = words(&[0, 0, 0x0002_0000, 0]);
    let mut seeds = Vec::new();
    for (name, context_id, opnum, stub) in [
        ("open-policy2", 0, 44, open_policy2),
        ("lookup-names", 0, 14, lookup_names),
        ("lookup-sids", 0, 15, lookup_sids),
        ("get-user-name", 0, 45, get_user_name),
        // C706 appendix Q: inq_if_ids, inq_stats (max_count 4),
        // inq_princ_name (NTLMSSP, 100 bytes); MS-DSSP
        // DsRolerGetPrimaryDomainInformation level 1.
        ("mgmt-inq-if-ids", 1, 0, Vec::new()),
        ("mgmt-inq-stats", 1, 1, words(&[4, 0])),
        ("mgmt-inq-princ-name", 1, 4, words(&[10, 100])),
        ("dssetup-basic", 2, 0, vec![1, 0]),
    ] {
        let mut input = vec![1u8 | (31 << 1)];
        input.extend_from_slice(&request_on(context_id, opnum, &stub));
        seeds.push((name.to_string(), input));
    }
    seeds
}
