//! The DCE/RPC PDUs the pipe client writes (C706 chapter 12, MS-RPCE
//! 2.2.2): binds and alter_contexts of srvsvc, lsarpc, mgmt and dssetup,
//! authenticated ones (NTLMSSP, SPNEGO) carried through to AUTH3, and
//! requests of real operations (after `fuzz/src/dcerpc.rs`), each built
//! from its structure and then, often, damaged.

use braid_smb_proto::auth::{ClientEntropy, ClientStep, NtlmClient, SpnegoClient};
use braid_smb_proto::dcerpc::auth::{
    auth_level, auth_type, encode_pdu_with_auth, OutAuth, SecTrailer,
};
use braid_smb_proto::dcerpc::pdu::{encode_pdu, pfc, ptype, Bind, ContextElement, SyntaxId};
use rand::rngs::StdRng;
use rand::Rng;

/// The client half of an authenticated bind, between its legs.
pub enum Auth {
    Ntlm(NtlmClient),
    Spnego(Box<SpnegoClient>),
}

impl Auth {
    /// The next token for the server's `token`, if the mechanism has one.
    fn step(&mut self, token: &[u8]) -> Option<Vec<u8>> {
        let entropy = ClientEntropy::random(0x01d9_0000_0000_0000);
        match self {
            Auth::Ntlm(n) => n.authenticate(token, &entropy).ok(),
            Auth::Spnego(s) => match s.step(token) {
                Ok(ClientStep::Send(t)) => Some(t),
                _ => None,
            },
        }
    }
}

/// Little-endian u32s, the shape of most NDR stubs here.
fn words(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A conformant varying UTF-16 string with its terminator, padded to 4.
fn ndr_string(s: &str) -> Vec<u8> {
    let units: Vec<u16> = s.encode_utf16().chain([0]).collect();
    let n = units.len() as u32;
    let mut out = words(&[n, 0, n]);
    out.extend(units.iter().flat_map(|u| u.to_le_bytes()));
    out.resize(out.len().next_multiple_of(4), 0);
    out
}

/// The syntaxes a bind may offer: the pipes' own interfaces, mgmt, and
/// dssetup (lsarpc only), and one no pipe carries.
fn abstract_syntax(rng: &mut StdRng, lsa: bool) -> SyntaxId {
    let own = if lsa {
        SyntaxId::LSARPC
    } else {
        SyntaxId::SRVSVC
    };
    match rng.gen_range(0..10) {
        0..=4 => own,
        5 => SyntaxId::MGMT,
        6 => SyntaxId::DSSETUP,
        7 => SyntaxId::LSARPC,
        8 => SyntaxId::SRVSVC,
        _ => SyntaxId {
            uuid: rng.gen(),
            version: rng.gen_range(0..4),
        },
    }
}

fn transfer_syntaxes(rng: &mut StdRng) -> Vec<SyntaxId> {
    let mut features = SyntaxId {
        uuid: [0; 16],
        version: 1,
    };
    features.uuid[..8].copy_from_slice(&braid_smb_proto::dcerpc::pdu::BIND_TIME_FEATURE_PREFIX);
    features.uuid[8] = rng.gen_range(0..4);
    match rng.gen_range(0..8) {
        0 => vec![SyntaxId::NDR64],
        1 => vec![SyntaxId::NDR64, SyntaxId::NDR20],
        2 => vec![features],
        3 => Vec::new(),
        4 => vec![SyntaxId::NULL],
        _ => vec![SyntaxId::NDR20],
    }
}

/// The body of a BIND or ALTER_CONTEXT: the pipe's interface on context 0,
/// mgmt on 1 and dssetup on 2 (as the fuzz targets bind), or 1..6 random
/// contexts, with fragment sizes from tiny to the u16 limit.
fn bind_body(rng: &mut StdRng, lsa: bool) -> Vec<u8> {
    let contexts = if rng.gen_bool(0.7) {
        let own = if lsa {
            SyntaxId::LSARPC
        } else {
            SyntaxId::SRVSVC
        };
        [own, SyntaxId::MGMT, SyntaxId::DSSETUP]
            .into_iter()
            .enumerate()
            .map(|(id, abstract_syntax)| ContextElement {
                context_id: id as u16,
                abstract_syntax,
                transfer_syntaxes: vec![SyntaxId::NDR20],
            })
            .collect()
    } else {
        (0..rng.gen_range(0..6))
            .map(|i| ContextElement {
                context_id: if rng.gen_bool(0.8) { i } else { rng.gen() },
                abstract_syntax: abstract_syntax(rng, lsa),
                transfer_syntaxes: transfer_syntaxes(rng),
            })
            .collect()
    };
    let frag = [4280u16, 4280, 1024, 256, 16, 0, 5840, u16::MAX];
    let mut body = Vec::new();
    Bind {
        max_xmit_frag: frag[rng.gen_range(0..frag.len())],
        max_recv_frag: frag[rng.gen_range(0..frag.len())],
        assoc_group_id: if rng.gen_bool(0.8) { 0 } else { rng.gen() },
        contexts,
    }
    .encode(&mut body);
    body
}

/// A BIND, or an ALTER_CONTEXT when `alter`, without authentication.
pub fn bind(rng: &mut StdRng, lsa: bool, alter: bool, call_id: u32) -> Vec<u8> {
    let body = bind_body(rng, lsa);
    let kind = if alter {
        ptype::ALTER_CONTEXT
    } else {
        ptype::BIND
    };
    encode_pdu(kind, pfc::FIRST_FRAG | pfc::LAST_FRAG, call_id, &body)
}

/// The plain BIND the positive checks use: the pipe's interface, mgmt and
/// dssetup on contexts 0, 1 and 2, NDR 2.0, 4280-byte fragments.
pub fn plain_bind(lsa: bool) -> Vec<u8> {
    let own = if lsa {
        SyntaxId::LSARPC
    } else {
        SyntaxId::SRVSVC
    };
    let mut body = Vec::new();
    Bind {
        max_xmit_frag: 4280,
        max_recv_frag: 4280,
        assoc_group_id: 0,
        contexts: [own, SyntaxId::MGMT, SyntaxId::DSSETUP]
            .into_iter()
            .enumerate()
            .map(|(id, abstract_syntax)| ContextElement {
                context_id: id as u16,
                abstract_syntax,
                transfer_syntaxes: vec![SyntaxId::NDR20],
            })
            .collect(),
    }
    .encode(&mut body);
    encode_pdu(ptype::BIND, pfc::FIRST_FRAG | pfc::LAST_FRAG, 1, &body)
}

fn trailer(rng: &mut StdRng, auth: u8) -> SecTrailer {
    let levels = [
        auth_level::CONNECT,
        auth_level::PKT_INTEGRITY,
        auth_level::PKT_PRIVACY,
        auth_level::NONE,
        rng.gen(),
    ];
    SecTrailer {
        auth_type: auth,
        auth_level: levels[rng.gen_range(0..levels.len())],
        auth_pad_length: 0,
        auth_reserved: 0,
        auth_context_id: if rng.gen_bool(0.8) { 1 } else { rng.gen() },
    }
}

/// An authenticated BIND (or ALTER_CONTEXT): the first leg of NTLMSSP or
/// SPNEGO as `user` (the session's account, or another one), or a garbage
/// token under either type or one no server knows. The client half is
/// returned for the next leg.
pub fn auth_bind(
    rng: &mut StdRng,
    lsa: bool,
    alter: bool,
    call_id: u32,
    user: &str,
    password: &str,
) -> (Vec<u8>, Option<Auth>) {
    let body = bind_body(rng, lsa);
    let (user, password) = match rng.gen_range(0..6) {
        0 => ("nobody", password),
        1 => (user, "wrong"),
        _ => (user, password),
    };
    let ntlm = NtlmClient::new(user, "", password);
    let (kind, token, state) = match rng.gen_range(0..5) {
        0 | 1 => {
            let mut n = ntlm;
            let t = n.negotiate();
            (auth_type::NTLMSSP, t, Some(Auth::Ntlm(n)))
        }
        2 | 3 => {
            let mut s = SpnegoClient::new(ntlm, ClientEntropy::random(0x01d9_0000_0000_0000));
            let t = s.initial_token();
            (auth_type::SPNEGO, t, Some(Auth::Spnego(Box::new(s))))
        }
        _ => {
            let n = rng.gen_range(1..200);
            let t = (0..n).map(|_| rng.gen()).collect();
            let kinds = [auth_type::NTLMSSP, auth_type::SPNEGO, 0x44, auth_type::NONE];
            (kinds[rng.gen_range(0..kinds.len())], t, None)
        }
    };
    let out = OutAuth {
        trailer: trailer(rng, kind),
        token,
    };
    let kind_pdu = if alter {
        ptype::ALTER_CONTEXT
    } else {
        ptype::BIND
    };
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG | (rng.gen_bool(0.5) as u8 * 0x04);
    let pdu = encode_pdu_with_auth(kind_pdu, flags, call_id, &body, Some(&out));
    (pdu, state)
}

/// The token of an answer's verifier (bind_ack, alter_context_resp):
/// the last auth_length bytes of the PDU.
pub fn answer_token(pdu: &[u8]) -> Option<&[u8]> {
    let frag = u16::from_le_bytes(pdu.get(8..10)?.try_into().ok()?) as usize;
    let auth = u16::from_le_bytes(pdu.get(10..12)?.try_into().ok()?) as usize;
    if auth == 0 || frag > pdu.len() || auth > frag {
        return None;
    }
    Some(&pdu[frag - auth..frag])
}

/// The next leg after an authenticated bind was answered with `token`:
/// AUTH3 (NTLMSSP's third leg), or an ALTER_CONTEXT carrying it (how
/// SPNEGO goes on); sometimes the token garbled.
pub fn next_leg(
    rng: &mut StdRng,
    state: &mut Auth,
    token: &[u8],
    lsa: bool,
    call_id: u32,
) -> Vec<u8> {
    let mut next = state.step(token).unwrap_or_default();
    if next.is_empty() || rng.gen_bool(0.15) {
        let n = rng.gen_range(1..300);
        next = (0..n).map(|_| rng.gen()).collect();
    } else if rng.gen_bool(0.15) {
        let at = rng.gen_range(0..next.len());
        next[at] ^= 0x40;
    }
    let kind = match state {
        Auth::Ntlm(_) => auth_type::NTLMSSP,
        Auth::Spnego(_) => auth_type::SPNEGO,
    };
    let out = OutAuth {
        trailer: trailer(rng, kind),
        token: next,
    };
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    if rng.gen_bool(0.6) {
        encode_pdu_with_auth(ptype::AUTH3, flags, call_id, &[0; 4], Some(&out))
    } else {
        let body = bind_body(rng, lsa);
        encode_pdu_with_auth(ptype::ALTER_CONTEXT, flags, call_id, &body, Some(&out))
    }
}

/// A call's context, opnum and stub: real operations of the pipe's
/// interface (MS-SRVS, MS-LSAT / MS-LSAD), of mgmt (C706 appendix Q) and
/// dssetup (MS-DSSP), sometimes an opnum out of range. Not
/// NetrSessionDel or NetrFileClose, which could end the fuzzer's own
/// sessions and opens.
pub fn call(rng: &mut StdRng, lsa: bool, handle: Option<[u8; 20]>) -> (u16, u16, Vec<u8>) {
    let handle = handle.unwrap_or_else(|| {
        if rng.gen_bool(0.5) {
            [0; 20]
        } else {
            rng.gen()
        }
    });
    match rng.gen_range(0..12) {
        0 => return (1, rng.gen_range(0..5), words(&[10, 100])),
        1 => return (2, 0, vec![rng.gen_range(0..4), 0]),
        2 => return (rng.gen_range(0..4), rng.gen(), words(&[0, 1])),
        _ => {}
    }
    if !lsa {
        let level = [0u32, 1, 2, 501, 502, 503, 7][rng.gen_range(0..7)];
        return match rng.gen_range(0..7) {
            // NetrShareEnum: server_unc NULL, level, container, max, resume.
            0 | 1 => (
                0,
                15,
                words(&[0, level, level, 0x2_0000, 0, 0, u32::MAX, 0]),
            ),
            // NetrServerGetInfo: server_unc NULL, level 100/101/102.
            2 => (0, 21, words(&[0, [100, 101, 102, 7][rng.gen_range(0..4)]])),
            // NetrShareGetInfo: server_unc NULL, the share, level.
            3 => {
                let names = ["data", "IPC$", "nosuch", ""];
                let mut stub = words(&[0]);
                stub.extend(ndr_string(names[rng.gen_range(0..names.len())]));
                stub.extend(level.to_le_bytes());
                (0, 16, stub)
            }
            // NetrSessionEnum at 502, NetrServerTransportEnum, NetrRemoteTOD.
            4 => (
                0,
                12,
                words(&[0, 0, 0, 502, 502, 0x2_0000, 0, 0, u32::MAX, 0]),
            ),
            5 => (0, 26, words(&[0, 1, 1, 0x2_0000, 0, 0, u32::MAX, 0])),
            _ => (0, 28, words(&[0])),
        };
    }
    match rng.gen_range(0..7) {
        // LsarOpenPolicy2: SystemName NULL, empty object attributes,
        // MAXIMUM_ALLOWED.
        0 | 1 => (0, 44, words(&[0, 24, 0, 0, 0, 0, 0, 0x0200_0000])),
        // LsarLookupSids of S-1-5-32-544 and a random domain SID.
        2 | 3 => {
            let mut stub = handle.to_vec();
            stub.extend(words(&[2, 0x2_0000, 2, 0x2_0004, 0x2_0008, 2]));
            stub.extend([1, 2, 0, 0, 0, 0, 0, 5]);
            stub.extend(words(&[32, 544, 5]));
            stub.extend([1, 5, 0, 0, 0, 0, 0, 5]);
            stub.extend(words(&[21, rng.gen(), rng.gen(), rng.gen(), rng.gen()]));
            stub.extend(words(&[0, 0]));
            stub.extend(1u16.to_le_bytes());
            stub.extend([0, 0]);
            stub.extend(words(&[0]));
            (0, 15, stub)
        }
        // LsarClose.
        4 => (0, 0, handle.to_vec()),
        // LsarQueryInformationPolicy, levels 3 and 5 and others.
        5 => {
            let mut stub = handle.to_vec();
            stub.extend([3u16, 5, 12, 0][rng.gen_range(0..4)].to_le_bytes());
            (0, 7, stub)
        }
        // LsarGetUserName.
        _ => (0, 45, words(&[0, 0, 0x2_0000, 0])),
    }
}

/// A REQUEST's PDUs: the stub in one fragment or cut in several
/// (FIRST_FRAG, none, LAST_FRAG), and now and then the last fragment left
/// off, so that the call stays half received.
pub fn request(rng: &mut StdRng, ctx: u16, opnum: u16, stub: &[u8], call_id: u32) -> Vec<Vec<u8>> {
    let pieces = if rng.gen_bool(0.7) || stub.is_empty() {
        1
    } else {
        rng.gen_range(2..5)
    };
    let size = stub.len().div_ceil(pieces).max(1);
    let chunks: Vec<&[u8]> = if stub.is_empty() {
        vec![&[][..]]
    } else {
        stub.chunks(size).collect()
    };
    let n = chunks.len();
    let mut out: Vec<Vec<u8>> = chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| {
            let mut flags = 0;
            if i == 0 {
                flags |= pfc::FIRST_FRAG;
            }
            if i + 1 == n {
                flags |= pfc::LAST_FRAG;
            }
            let mut body = (stub.len() as u32).to_le_bytes().to_vec();
            body.extend(ctx.to_le_bytes());
            body.extend(opnum.to_le_bytes());
            body.extend_from_slice(chunk);
            encode_pdu(ptype::REQUEST, flags, call_id, &body)
        })
        .collect();
    if n > 1 && rng.gen_bool(0.2) {
        out.pop();
    }
    out
}

/// Damage a PDU where it hurts: frag_length, auth_length, the flags, the
/// call id, the PDU type, the context id of a request, the end cut off,
/// garbage added, or a sec_trailer with a garbage token appended.
pub fn damage(rng: &mut StdRng, pdu: &mut Vec<u8>) {
    for _ in 0..rng.gen_range(1..3) {
        let edges16 = [0u16, 1, 15, 16, 17, 24, 4280, 4281, 0x7FFF, u16::MAX];
        let e16 = edges16[rng.gen_range(0..edges16.len())];
        match rng.gen_range(0..11) {
            0 if pdu.len() >= 10 => pdu[8..10].copy_from_slice(&e16.to_le_bytes()),
            1 if pdu.len() >= 12 => pdu[10..12].copy_from_slice(&e16.to_le_bytes()),
            2 if pdu.len() >= 4 => pdu[3] = rng.gen(),
            3 if pdu.len() >= 16 => pdu[12..16].copy_from_slice(&rng.gen::<u32>().to_le_bytes()),
            4 if pdu.len() >= 3 => pdu[2] = rng.gen_range(0..20),
            5 if pdu.len() >= 24 => pdu[20..22].copy_from_slice(&rng.gen::<u16>().to_le_bytes()),
            6 => {
                let keep = rng.gen_range(0..=pdu.len());
                pdu.truncate(keep);
            }
            7 => {
                let n = rng.gen_range(1..64);
                pdu.extend((0..n).map(|_| rng.gen::<u8>()));
            }
            8 if pdu.len() >= 16 => {
                // A verifier of garbage, the lengths set to cover it.
                pdu.resize(pdu.len().next_multiple_of(4), 0);
                let kinds = [auth_type::NTLMSSP, auth_type::SPNEGO, 0x44];
                pdu.extend([kinds[rng.gen_range(0..3)], rng.gen_range(1..7), 0, 0]);
                pdu.extend(rng.gen::<u32>().to_le_bytes());
                let n = rng.gen_range(0..80u16);
                pdu.extend((0..n).map(|_| rng.gen::<u8>()));
                let frag = (pdu.len() as u16).to_le_bytes();
                pdu[8..10].copy_from_slice(&frag);
                pdu[10..12].copy_from_slice(&n.to_le_bytes());
            }
            9 if pdu.len() >= 5 => pdu[4] ^= 0x10, // big-endian data representation
            _ if !pdu.is_empty() => {
                let at = rng.gen_range(0..pdu.len());
                pdu[at] ^= 1 << rng.gen_range(0..8);
            }
            _ => {}
        }
    }
}

/// The PDUs of an answer read whole: (type, PDU).
pub fn split(mut data: &[u8]) -> Vec<(u8, &[u8])> {
    let mut out = Vec::new();
    while data.len() >= 16 {
        let frag = u16::from_le_bytes([data[8], data[9]]) as usize;
        if frag < 16 || frag > data.len() {
            break;
        }
        out.push((data[2], &data[..frag]));
        data = &data[frag..];
    }
    out
}

/// An ALTER_CONTEXT that offers context 0, bound to the pipe's interface
/// by [`plain_bind`], with mgmt instead: a protocol error that ends the
/// association (MS-RPCE 3.3.1.5.1; a fault, then the pipe is disconnected).
pub fn redefining_alter() -> Vec<u8> {
    let mut body = Vec::new();
    Bind {
        max_xmit_frag: 4280,
        max_recv_frag: 4280,
        assoc_group_id: 0,
        contexts: vec![ContextElement {
            context_id: 0,
            abstract_syntax: SyntaxId::MGMT,
            transfer_syntaxes: vec![SyntaxId::NDR20],
        }],
    }
    .encode(&mut body);
    encode_pdu(
        ptype::ALTER_CONTEXT,
        pfc::FIRST_FRAG | pfc::LAST_FRAG,
        2,
        &body,
    )
}
