//! Seed inputs built by encoding typed messages; `cargo run --bin seeds`
//! writes them to `corpus/<target>/`.

use braid_smb_proto::auth::der;
use braid_smb_proto::auth::ntlmssp::{encode_av_pairs, AvPair, NtlmClient, NtlmServer};
use braid_smb_proto::auth::spnego::{SpnegoClient, SpnegoServer, SpnegoStep};
use braid_smb_proto::codec::{FileId, Message};
use braid_smb_proto::crypto::encrypt_message;
use braid_smb_proto::fscc::file_info::{FullEa, SetBasicInfo, SetFileInfo, SetLinkInfo};
use braid_smb_proto::fscc::quota::{encode_quota_list, QueryQuotaInfo, QuotaEntry, QuotaSids};
use braid_smb_proto::fscc::security::{build_file_security_descriptor, Ace, Acl, SecurityDescriptor, Sid};
use braid_smb_proto::header::{flags, Command, Header};
use braid_smb_proto::messages::create::{context_name, encode_create_contexts};
use braid_smb_proto::messages::ioctl::fsctl;
use braid_smb_proto::messages::*;

use crate::targets::{key_for, CIPHERS, DOMAIN, ENTROPY, PASSWORD, SERVER_CHALLENGE, TIMESTAMP, USER};

type Seed = (&'static str, String, Vec<u8>);

fn hdr(cmd: Command, mid: u64) -> Header {
    Header { command: cmd as u16, credits: 1, message_id: mid, session_id: 0x10, tree_id: 1, ..Default::default() }
}

fn msg<M: Message>(h: &Header, m: &M) -> Vec<u8> {
    let mut v = Vec::new();
    h.encode(&mut v);
    m.encode(&mut v);
    v
}

fn fid() -> FileId {
    FileId { persistent: 1, volatile: 2 }
}

fn vni() -> Vec<u8> {
    let mut v = Vec::new();
    ValidateNegotiateInfoRequest { capabilities: 0x7f, guid: [7; 16], security_mode: 1, dialects: vec![0x0202, 0x0210, 0x0300, 0x0302, 0x0311] }
        .encode(&mut v);
    v
}

fn sd_bytes() -> Vec<u8> {
    build_file_security_descriptor(&Sid::unix_user(1000), &Sid::unix_group(1000), 0o754, false, 0xF).encode()
}

fn sd_with_sacl() -> Vec<u8> {
    SecurityDescriptor {
        control: 0,
        owner: Some(Sid::builtin_administrators()),
        group: Some(Sid::local_system()),
        sacl: Some(Acl::new(vec![Ace::Opaque { ace_type: 0x07, flags: 0, body: vec![1, 2, 3, 4, 5, 6, 7, 8] }])),
        dacl: Some(Acl::new(vec![Ace::allowed(Sid::everyone(), 0x1F01FF, 3), Ace::denied(Sid::creator_owner(), 0x10000, 0)])),
    }
    .encode()
}

fn create_ctxs() -> Vec<CreateContext> {
    let mut lease = vec![0u8; 32];
    lease[..16].copy_from_slice(&[9; 16]);
    lease[16] = 7;
    vec![
        CreateContext::new(context_name::QUERY_MAXIMAL_ACCESS_REQUEST, vec![]),
        CreateContext::new(context_name::REQUEST_LEASE, lease),
        CreateContext::new(context_name::DURABLE_HANDLE_REQUEST_V2, vec![0; 32]),
        CreateContext::new(&context_name::APP_INSTANCE_ID, vec![0x14, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]),
    ]
}

fn quota_query() -> QueryQuotaInfo {
    QueryQuotaInfo { return_single: false, restart_scan: true, sids: QuotaSids::List(vec![Sid::unix_user(1000), Sid::local_system()]) }
}

fn quota_entries() -> Vec<u8> {
    encode_quota_list(&[
        QuotaEntry { change_time: 0, quota_used: 4096, quota_threshold: 1 << 20, quota_limit: 2 << 20, sid: Sid::unix_user(1000) },
        QuotaEntry { change_time: 0, quota_used: 0, quota_threshold: -1, quota_limit: -2, sid: Sid::local_system() },
    ])
}

fn set_infos() -> Vec<SetFileInfo> {
    vec![
        SetFileInfo::Basic(SetBasicInfo { creation_time: 1, last_access_time: -1, last_write_time: 0, change_time: 5, file_attributes: 0x20 }),
        SetFileInfo::Rename(SetLinkInfo { replace_if_exists: true, root_directory: 0, file_name: "dir\\new name.txt".into() }),
        SetFileInfo::Link(SetLinkInfo { replace_if_exists: false, root_directory: 0, file_name: "link".into() }),
        SetFileInfo::Disposition { delete_pending: true },
        SetFileInfo::Position { current_byte_offset: 4096 },
        SetFileInfo::Mode { mode: 0x10 },
        SetFileInfo::Allocation { allocation_size: 1 << 20 },
        SetFileInfo::EndOfFile { end_of_file: 12345 },
        SetFileInfo::DispositionEx { flags: 3 },
        SetFileInfo::FullEa(vec![
            FullEa { flags: 0, name: b"user.a".to_vec(), value: b"value".to_vec() },
            FullEa { flags: 0x80, name: b"B".to_vec(), value: vec![] },
        ]),
    ]
}

/// The typed requests used by the request, framing and header seeds.
fn requests() -> Vec<(Command, Vec<u8>)> {
    let mut out = Vec::new();
    let mut push = |c: Command, v: Vec<u8>| out.push((c, v));
    use braid_smb_proto::messages::negotiate::NegotiateContext as NC;
    push(
        Command::Negotiate,
        msg(
            &hdr(Command::Negotiate, 0),
            &NegotiateRequest {
                security_mode: 1,
                capabilities: 0x7f,
                client_guid: [3; 16],
                dialects: vec![0x0202, 0x0210, 0x0300, 0x0302, 0x0311],
                contexts: vec![
                    NC::PreauthIntegrity { hash_algorithms: vec![1], salt: vec![0xAA; 32] },
                    NC::Encryption { ciphers: vec![2, 1, 4, 3] },
                    NC::SigningCapabilities { algorithms: vec![2, 1, 0] },
                    NC::NetnameNegotiate { netname: "server".into() },
                    NC::Compression { flags: 0, compression_algorithms: vec![1, 2] },
                ],
            },
        ),
    );
    let token = SpnegoClient::new(NtlmClient::new(USER, DOMAIN, PASSWORD), ENTROPY).initial_token();
    push(
        Command::SessionSetup,
        msg(&hdr(Command::SessionSetup, 1), &SessionSetupRequest { security_mode: 1, security_buffer: token, ..Default::default() }),
    );
    push(Command::Logoff, msg(&hdr(Command::Logoff, 2), &LogoffRequest));
    push(Command::TreeConnect, msg(&hdr(Command::TreeConnect, 3), &TreeConnectRequest { flags: 0, path: "\\\\server\\share".into() }));
    push(Command::TreeDisconnect, msg(&hdr(Command::TreeDisconnect, 4), &TreeDisconnectRequest));
    push(
        Command::Create,
        msg(
            &hdr(Command::Create, 5),
            &CreateRequest {
                requested_oplock_level: 0xFF,
                impersonation_level: 2,
                desired_access: 0x0012_019F,
                file_attributes: 0x80,
                share_access: 7,
                create_disposition: 3,
                create_options: 0x40,
                name: "dir\\file.txt".into(),
                contexts: create_ctxs(),
                ..Default::default()
            },
        ),
    );
    push(Command::Close, msg(&hdr(Command::Close, 6), &CloseRequest { flags: 1, file_id: fid() }));
    push(Command::Flush, msg(&hdr(Command::Flush, 7), &FlushRequest { file_id: fid() }));
    push(
        Command::Read,
        msg(&hdr(Command::Read, 8), &ReadRequest { length: 65536, offset: 4096, file_id: fid(), minimum_count: 1, ..Default::default() }),
    );
    push(
        Command::Write,
        msg(&hdr(Command::Write, 9), &WriteRequest { offset: 10, file_id: fid(), data: b"hello, braid".to_vec(), ..Default::default() }),
    );
    push(
        Command::Lock,
        msg(
            &hdr(Command::Lock, 10),
            &LockRequest {
                lock_sequence_number: 1,
                lock_sequence_index: 2,
                file_id: fid(),
                locks: vec![LockElement { offset: 0, length: 10, flags: 2 }, LockElement { offset: 100, length: 1, flags: 4 }],
            },
        ),
    );
    push(
        Command::Ioctl,
        msg(
            &hdr(Command::Ioctl, 11),
            &IoctlRequest {
                ctl_code: fsctl::VALIDATE_NEGOTIATE_INFO,
                file_id: FileId::RELATED,
                input: vni(),
                max_output_response: 24,
                flags: 1,
                ..Default::default()
            },
        ),
    );
    let mut dup = Vec::new();
    braid_smb_proto::messages::fsctl_data::DuplicateExtentsData {
        source_file_id: fid(),
        source_offset: 4096,
        target_offset: 0,
        byte_count: 1 << 20,
    }
    .encode(&mut dup);
    push(
        Command::Ioctl,
        msg(
            &hdr(Command::Ioctl, 11),
            &IoctlRequest {
                ctl_code: fsctl::DUPLICATE_EXTENTS_TO_FILE,
                file_id: fid(),
                input: dup,
                flags: 1,
                ..Default::default()
            },
        ),
    );
    push(Command::Cancel, msg(&hdr(Command::Cancel, 12), &CancelRequest));
    push(Command::Echo, msg(&hdr(Command::Echo, 13), &EchoRequest));
    push(
        Command::QueryDirectory,
        msg(
            &hdr(Command::QueryDirectory, 14),
            &QueryDirectoryRequest { file_information_class: 37, flags: 1, file_id: fid(), file_name: "*".into(), output_buffer_length: 65536, ..Default::default() },
        ),
    );
    push(
        Command::ChangeNotify,
        msg(&hdr(Command::ChangeNotify, 15), &ChangeNotifyRequest { flags: 1, output_buffer_length: 4096, file_id: fid(), completion_filter: 0x17 }),
    );
    push(
        Command::QueryInfo,
        msg(
            &hdr(Command::QueryInfo, 16),
            &QueryInfoRequest { info_type: 1, file_info_class: 18, output_buffer_length: 4096, file_id: fid(), ..Default::default() },
        ),
    );
    for (i, s) in set_infos().into_iter().enumerate() {
        push(
            Command::SetInfo,
            msg(&hdr(Command::SetInfo, 17 + i as u64), &SetInfoRequest { info_type: 1, file_info_class: s.class(), buffer: s.encode(), additional_information: 0, file_id: fid() }),
        );
    }
    push(
        Command::SetInfo,
        msg(&hdr(Command::SetInfo, 40), &SetInfoRequest { info_type: 3, file_info_class: 0, buffer: sd_with_sacl(), additional_information: 0xF, file_id: fid() }),
    );
    push(
        Command::OplockBreak,
        msg(&hdr(Command::OplockBreak, 41), &OplockBreakRequest::Oplock(OplockBreak { oplock_level: 1, file_id: fid() })),
    );
    push(
        Command::OplockBreak,
        msg(
            &hdr(Command::OplockBreak, 42),
            &OplockBreakRequest::Lease(LeaseBreakAck { flags: 0, lease_key: [9; 16], lease_state: 1, lease_duration: 0 }),
        ),
    );
    // SMB2_0_INFO_QUOTA: a query for two SIDs, and a set of two entries.
    push(
        Command::QueryInfo,
        msg(
            &hdr(Command::QueryInfo, 43),
            &QueryInfoRequest { info_type: 4, output_buffer_length: 4096, input: quota_query().encode(), file_id: fid(), ..Default::default() },
        ),
    );
    push(
        Command::SetInfo,
        msg(&hdr(Command::SetInfo, 44), &SetInfoRequest { info_type: 4, file_info_class: 0, buffer: quota_entries(), additional_information: 0, file_id: fid() }),
    );
    out
}

fn smb1_negotiate() -> Vec<u8> {
    let mut m = vec![0xFF, b'S', b'M', b'B', 0x72];
    m.resize(32, 0);
    m.push(0);
    let mut bytes = Vec::new();
    for d in ["PC NETWORK PROGRAM 1.0", "NT LM 0.12", "SMB 2.002", "SMB 2.???"] {
        bytes.push(2);
        bytes.extend_from_slice(d.as_bytes());
        bytes.push(0);
    }
    m.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    m.extend_from_slice(&bytes);
    m
}

fn nbss(frame: &[u8]) -> Vec<u8> {
    let mut v = (frame.len() as u32).to_be_bytes().to_vec();
    v[0] = 0;
    v.extend_from_slice(frame);
    v
}

/// Chain messages into one compound: NextCommand set, each padded to 8.
fn compound(msgs: &[Vec<u8>], related: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let mut m = m.clone();
        if related && i > 0 {
            let f = u32::from_le_bytes(m[16..20].try_into().unwrap()) | flags::RELATED_OPERATIONS;
            m[16..20].copy_from_slice(&f.to_le_bytes());
        }
        if i + 1 < msgs.len() {
            while m.len() % 8 != 0 {
                m.push(0);
            }
            let n = m.len() as u32;
            m[20..24].copy_from_slice(&n.to_le_bytes());
        }
        out.extend_from_slice(&m);
    }
    out
}

fn responses() -> Vec<(u8, Vec<u8>)> {
    let h = |c: Command| Header { command: c as u16, flags: flags::SERVER_TO_REDIR, ..Default::default() };
    use braid_smb_proto::messages::negotiate::NegotiateContext as NC;
    let mut out: Vec<(u8, Vec<u8>)> = Vec::new();
    out.push((
        0,
        msg(
            &h(Command::Negotiate),
            &NegotiateResponse {
                security_mode: 1,
                dialect_revision: 0x0311,
                server_guid: [5; 16],
                capabilities: 0x47,
                max_transact_size: 1 << 23,
                max_read_size: 1 << 23,
                max_write_size: 1 << 23,
                system_time: TIMESTAMP,
                server_start_time: 0,
                security_buffer: SpnegoServer::initial_token(),
                contexts: vec![
                    NC::PreauthIntegrity { hash_algorithms: vec![1], salt: vec![0x55; 32] },
                    NC::Encryption { ciphers: vec![2] },
                    NC::SigningCapabilities { algorithms: vec![2] },
                ],
            },
        ),
    ));
    out.push((1, msg(&h(Command::SessionSetup), &SessionSetupResponse { session_flags: 0, security_buffer: vec![0xa1, 0x07, 0x30, 0x05, 0xa0, 0x03, 0x0a, 0x01, 0x00] })));
    out.push((2, msg(&h(Command::Logoff), &LogoffResponse)));
    out.push((3, msg(&h(Command::TreeConnect), &TreeConnectResponse { share_type: 1, share_flags: 0x30, capabilities: 0, maximal_access: 0x1F01FF })));
    out.push((4, msg(&h(Command::TreeDisconnect), &TreeDisconnectResponse)));
    out.push((
        5,
        msg(
            &h(Command::Create),
            &CreateResponse { oplock_level: 0xFF, create_action: 2, file_attributes: 0x20, file_id: fid(), end_of_file: 5, contexts: create_ctxs(), ..Default::default() },
        ),
    ));
    out.push((6, msg(&h(Command::Close), &CloseResponse { flags: 1, end_of_file: 5, file_attributes: 0x20, ..Default::default() })));
    out.push((7, msg(&h(Command::Flush), &FlushResponse)));
    out.push((8, msg(&h(Command::Read), &ReadResponse { data_offset: 0x50, data_remaining: 0, data: b"file contents".to_vec() })));
    out.push((9, msg(&h(Command::Write), &WriteResponse { count: 12, remaining: 0 })));
    out.push((10, msg(&h(Command::Lock), &LockResponse)));
    let mut vnr = Vec::new();
    ValidateNegotiateInfoResponse { capabilities: 0x47, guid: [5; 16], security_mode: 1, dialect: 0x0311 }.encode(&mut vnr);
    out.push((11, msg(&h(Command::Ioctl), &IoctlResponse { ctl_code: fsctl::VALIDATE_NEGOTIATE_INFO, file_id: FileId::RELATED, input: vec![], output: vnr, flags: 0 })));
    let mut nii = Vec::new();
    braid_smb_proto::messages::ioctl::encode_network_interface_info(
        &[
            NetworkInterfaceInfo { if_index: 1, capability: 1, link_speed: 10_000_000_000, address: "127.0.0.1".parse().unwrap() },
            NetworkInterfaceInfo { if_index: 2, capability: 0, link_speed: 1_000_000_000, address: "::1".parse().unwrap() },
        ],
        &mut nii,
    );
    out.push((11, msg(&h(Command::Ioctl), &IoctlResponse { ctl_code: fsctl::QUERY_NETWORK_INTERFACE_INFO, file_id: FileId::RELATED, input: vec![], output: nii, flags: 0 })));
    let mut snaps = Vec::new();
    braid_smb_proto::messages::snapshots::SnapshotArray::for_buffer(
        vec!["@GMT-2026.11.25-10.00.00".into(), "@GMT-2015.10.31-19.40.30".into()],
        65536,
    )
    .encode(&mut snaps);
    out.push((11, msg(&h(Command::Ioctl), &IoctlResponse { ctl_code: fsctl::SRV_ENUMERATE_SNAPSHOTS, file_id: fid(), input: vec![], output: snaps, flags: 0 })));
    out.push((12, msg(&h(Command::Create), &ErrorResponse { error_context_count: 0, error_data: vec![] })));
    out.push((13, msg(&h(Command::Echo), &EchoResponse)));
    out.push((14, msg(&h(Command::QueryDirectory), &QueryDirectoryResponse { output: vec![0; 104] })));
    out.push((15, msg(&h(Command::ChangeNotify), &ChangeNotifyResponse { output: vec![0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, b'a', 0] })));
    out.push((16, msg(&h(Command::QueryInfo), &QueryInfoResponse { output: sd_bytes() })));
    out.push((17, msg(&h(Command::SetInfo), &SetInfoResponse)));
    out.push((18, msg(&h(Command::OplockBreak), &OplockBreakServerMessage::Oplock(OplockBreak { oplock_level: 0, file_id: fid() }))));
    out.push((
        18,
        msg(
            &h(Command::OplockBreak),
            &OplockBreakServerMessage::LeaseNotification(LeaseBreakNotification { new_epoch: 2, flags: 1, lease_key: [9; 16], current_lease_state: 7, new_lease_state: 1, ..Default::default() }),
        ),
    ));
    out
}

/// A full clean SPNEGO exchange: the client's tokens and the server's.
fn spnego_tokens() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut server = SpnegoServer::new(NtlmServer::new(SERVER_CHALLENGE, TIMESTAMP, "BRAID", "braid.example", DOMAIN));
    let mut client = SpnegoClient::new(NtlmClient::new(USER, DOMAIN, PASSWORD), ENTROPY);
    let lookup = |u: &str, _d: &str| (u == USER).then(|| braid_smb_proto::auth::nt_hash(PASSWORD));
    let mut from_client = vec![client.initial_token()];
    let mut from_server = Vec::new();
    loop {
        match server.step(from_client.last().unwrap(), &lookup).expect("server step") {
            SpnegoStep::Continue(t) => {
                from_server.push(t.clone());
                match client.step(&t).expect("client step") {
                    braid_smb_proto::auth::ClientStep::Send(t) => from_client.push(t),
                    braid_smb_proto::auth::ClientStep::Done => break,
                }
            }
            SpnegoStep::Done { token, .. } => {
                from_server.push(token);
                break;
            }
        }
    }
    (from_client, from_server)
}

fn ntlm_messages() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let mut server = NtlmServer::new(SERVER_CHALLENGE, TIMESTAMP, "BRAID", "braid.example", DOMAIN);
    let mut client = NtlmClient::new(USER, DOMAIN, PASSWORD).with_workstation("WS1");
    let neg = client.negotiate();
    let chal = server.challenge(&neg).unwrap();
    let auth = client.authenticate(&chal, &ENTROPY).unwrap();
    (neg, chal, auth)
}

pub fn all() -> Vec<Seed> {
    let mut s: Vec<Seed> = Vec::new();
    let reqs = requests();

    // smb2_header
    for (i, (c, m)) in reqs.iter().enumerate().take(6) {
        s.push(("smb2_header", format!("{i:02}-{}", c.name()), m[..64].to_vec()));
    }
    let mut async_hdr = Vec::new();
    Header { command: Command::ChangeNotify as u16, flags: flags::ASYNC_COMMAND | flags::SERVER_TO_REDIR, async_id: 77, status: 0x103, ..Default::default() }
        .encode(&mut async_hdr);
    s.push(("smb2_header", "async".into(), async_hdr));

    // smb2_requests
    for (i, (c, m)) in reqs.iter().enumerate() {
        let mut v = vec![*c as u8];
        v.extend_from_slice(m);
        s.push(("smb2_requests", format!("{i:02}-{}", c.name()), v));
    }
    let mut v = vec![19u8];
    v.extend_from_slice(&smb1_negotiate());
    s.push(("smb2_requests", "smb1-negotiate".into(), v));

    // smb2_responses
    for (i, (sel, m)) in responses().into_iter().enumerate() {
        let mut v = vec![sel];
        v.extend_from_slice(&m);
        s.push(("smb2_responses", format!("{i:02}-{sel}"), v));
    }

    // framing
    let get = |c: Command| reqs.iter().find(|(x, _)| *x == c).unwrap().1.clone();
    s.push(("framing", "smb1-negotiate".into(), nbss(&smb1_negotiate())));
    s.push(("framing", "negotiate".into(), nbss(&get(Command::Negotiate))));
    let mut two = nbss(&get(Command::Negotiate));
    two.extend(nbss(&get(Command::SessionSetup)));
    s.push(("framing", "negotiate-then-session-setup".into(), two));
    let cwc = compound(&[get(Command::Create), get(Command::Write), get(Command::Close)], true);
    s.push(("framing", "compound-create-write-close".into(), nbss(&cwc)));
    let mixed = compound(&[get(Command::Echo), get(Command::Ioctl), get(Command::SetInfo), get(Command::Cancel), get(Command::Lock)], false);
    s.push(("framing", "compound-unrelated".into(), nbss(&mixed)));
    let mut signed = get(Command::TreeConnect);
    braid_smb_proto::crypto::sign_in_place(braid_smb_proto::crypto::SigningAlgorithm::AesCmac, &crate::targets::KEY16, &mut signed).unwrap();
    s.push(("framing", "signed-tree-connect".into(), nbss(&signed)));
    // Transform frame: the framing target picks the cipher from SessionId % 4.
    let sid = 1u64; // Aes128Gcm
    let enc = encrypt_message(CIPHERS[1], key_for(CIPHERS[1]), &[1; 16], sid, &cwc).unwrap();
    s.push(("framing", "encrypted-compound".into(), nbss(&enc)));

    // negotiate_contexts: [count, req/resp, list...]
    {
        let r = &get(Command::Negotiate);
        let off = u32::from_le_bytes(r[92..96].try_into().unwrap()) as usize;
        let count = u16::from_le_bytes(r[96..98].try_into().unwrap()) as u8;
        let mut v = vec![count, 0];
        v.extend_from_slice(&r[off..]);
        s.push(("negotiate_contexts", "request".into(), v.clone()));
        v[1] = 1;
        s.push(("negotiate_contexts", "as-response".into(), v));
    }

    // create_contexts
    let mut cc = Vec::new();
    encode_create_contexts(&mut cc, &create_ctxs());
    s.push(("create_contexts", "four".into(), cc));
    let mut one = Vec::new();
    encode_create_contexts(&mut one, &[CreateContext::new(context_name::ALLOCATION_SIZE, 4096u64.to_le_bytes().to_vec())]);
    s.push(("create_contexts", "alloc-size".into(), one));
    let aapl_query = braid_smb_proto::messages::aapl::AaplRequest { command: 1, request_bitmap: 7, client_caps: 13 };
    let mut q = Vec::new();
    aapl_query.encode(&mut q);
    let reply = braid_smb_proto::messages::aapl::AaplServerQueryReply {
        server_caps: Some(15),
        volume_caps: Some(4),
        model: Some("MacSamba".into()),
    };
    let mut r = Vec::new();
    reply.encode(&mut r);
    let mut aapl = Vec::new();
    encode_create_contexts(&mut aapl, &[CreateContext::new(context_name::AAPL, q), CreateContext::new(context_name::AAPL, r)]);
    s.push(("create_contexts", "aapl".into(), aapl));

    // fscc_set_info
    for (i, si) in set_infos().into_iter().enumerate() {
        let mut v = vec![si.class()];
        v.extend(si.encode());
        s.push(("fscc_set_info", format!("{i:02}-class{}", si.class()), v));
    }

    let mut v = vec![0];
    v.extend(quota_entries());
    s.push(("fscc_set_info", "quota-list".into(), v));

    // security_descriptor
    s.push(("security_descriptor", "posix-file".into(), sd_bytes()));
    s.push(("security_descriptor", "sacl-dacl".into(), sd_with_sacl()));
    s.push((
        "security_descriptor",
        "dir-owner-only".into(),
        build_file_security_descriptor(&Sid::unix_user(0), &Sid::unix_group(0), 0o777, true, 1).encode(),
    ));

    // ntlmssp
    let (neg, chal, auth) = ntlm_messages();
    for (sel, name, m) in [(0u8, "negotiate", &neg), (1, "challenge", &chal), (2, "authenticate", &auth), (4, "server-negotiate", &neg), (5, "server-authenticate", &auth)] {
        let mut v = vec![sel];
        v.extend_from_slice(m);
        s.push(("ntlmssp", name.into(), v));
    }
    let mut av = vec![3u8];
    av.extend(encode_av_pairs(&[AvPair::string(1, "BRAID"), AvPair::timestamp(TIMESTAMP), AvPair::flags(2)]));
    s.push(("ntlmssp", "av-pairs".into(), av));

    // spnego
    let (cl, sv) = spnego_tokens();
    let mut v = vec![0u8];
    for t in &cl {
        v.extend_from_slice(&(t.len() as u16).to_le_bytes());
        v.extend_from_slice(t);
    }
    s.push(("spnego", "client-tokens".into(), v));
    s.push(("spnego", "exchange-clean".into(), vec![1]));
    s.push(("spnego", "exchange-raw-clean".into(), vec![2]));
    s.push(("spnego", "exchange-mutated".into(), vec![1, 1, 40, 0, 0x01]));
    let mut v = vec![0u8, 0, 0];
    v.extend_from_slice(&(cl[0].len() as u16).to_le_bytes());
    v.extend_from_slice(&cl[0]);
    s.push(("spnego", "empty-then-init".into(), v));

    // der
    for (i, t) in cl.iter().chain(sv.iter()).enumerate() {
        s.push(("der", format!("token-{i}"), t.clone()));
    }
    s.push(("der", "initial".into(), SpnegoServer::initial_token()));
    s.push(("der", "oid".into(), der::tlv(der::TAG_OID, &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02])));

    // transform
    for (i, c) in CIPHERS.iter().enumerate() {
        let f = encrypt_message(*c, key_for(*c), &[i as u8 + 1; 16], 0x42, &get(Command::Echo)).unwrap();
        let mut v = vec![0u8];
        v.extend_from_slice(&f);
        s.push(("transform", format!("frame-{c:?}"), v));
        let mut v = vec![1u8, i as u8];
        v.extend_from_slice(&[i as u8 + 7; 16]);
        v.extend_from_slice(&(100u16 + i as u16 * 200).to_le_bytes());
        v.extend_from_slice(&get(Command::Echo));
        s.push(("transform", format!("roundtrip-{c:?}"), v));
    }
    for (name, bytes) in crate::dcerpc::seeds() {
        s.push(("dcerpc", name, bytes));
    }
    for (name, bytes) in crate::dcerpc::lsarpc_seeds() {
        s.push(("lsarpc", name, bytes));
    }
    s.extend(crate::nfs::seeds());
    s
}
