//! The DCE/RPC PDUs the pipe client writes (C706 chapter 12, MS-RPCE
//! 2.2.2): binds and alter_contexts of srvsvc, lsarpc, mgmt and dssetup,
//! authenticated ones (NTLMSSP, SPNEGO) carried through to AUTH3, and
//! requests of real operations (after `fuzz/src/dcerpc.rs`), each built
//! from its structure and then, often, damaged.

use braid_smb_proto::auth::{ClientEntropy, ClientStep, NtlmClient, NtlmSecurity, SpnegoClient};
use braid_smb_proto::dcerpc::auth::{
    auth_level, auth_type, encode_pdu_with_auth, OutAuth, SecTrailer, SIGNATURE_LEN,
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

/// An authenticated bind's client half and the verifier trailer it sent:
/// the server holds every later leg, and every signed request, to the
/// bind's type, level and context id.
pub struct PendingAuth {
    auth: Auth,
    trailer: SecTrailer,
    /// SPNEGO sent its last leg; the server's answer completes it.
    awaits_final: bool,
}

impl PendingAuth {
    pub fn awaits_final(&self) -> bool {
        self.awaits_final
    }
}

/// An association the client believes established at PKT or above: its
/// requests are signed (sealed at PKT_PRIVACY) with NTLM session security
/// and their answers checked with it (MS-RPCE 2.2.2.11, MS-NLMP 3.4).
pub struct Secured {
    security: NtlmSecurity,
    trailer: SecTrailer,
}

/// What an authentication leg left to do.
pub enum AfterLeg {
    /// The leg was damaged, or gives no per-message security.
    Nothing,
    /// NTLMSSP is complete with this leg.
    Secured(Box<Secured>),
    /// SPNEGO waits for the server's last token (its mechListMIC).
    Final(PendingAuth),
}

fn signs(trailer: &SecTrailer) -> bool {
    [
        auth_level::PKT,
        auth_level::PKT_INTEGRITY,
        auth_level::PKT_PRIVACY,
    ]
    .contains(&trailer.auth_level)
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
        usual_contexts(lsa)
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
    let body = plain_bind_body(lsa);
    encode_pdu(ptype::BIND, pfc::FIRST_FRAG | pfc::LAST_FRAG, 1, &body)
}

/// [`plain_bind`] authenticated: NTLMSSP or SPNEGO as `user` at `level`,
/// asking for header signing as Windows does.
pub fn plain_auth_bind(
    lsa: bool,
    kind: u8,
    level: u8,
    user: &str,
    password: &str,
) -> (Vec<u8>, PendingAuth) {
    let ntlm = NtlmClient::new(user, "", password);
    let (token, auth) = if kind == auth_type::SPNEGO {
        let mut s = SpnegoClient::new(ntlm, ClientEntropy::random(0x01d9_0000_0000_0000));
        (s.initial_token(), Auth::Spnego(Box::new(s)))
    } else {
        let mut n = ntlm;
        (n.negotiate(), Auth::Ntlm(n))
    };
    let trailer = SecTrailer {
        auth_type: kind,
        auth_level: level,
        auth_pad_length: 0,
        auth_reserved: 0,
        auth_context_id: 1,
    };
    let out = OutAuth { trailer, token };
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG | 0x04;
    let pdu = encode_pdu_with_auth(ptype::BIND, flags, 1, &plain_bind_body(lsa), Some(&out));
    let pending = PendingAuth {
        auth,
        trailer,
        awaits_final: false,
    };
    (pdu, pending)
}

fn plain_bind_body(lsa: bool) -> Vec<u8> {
    let mut body = Vec::new();
    Bind {
        max_xmit_frag: 4280,
        max_recv_frag: 4280,
        assoc_group_id: 0,
        contexts: usual_contexts(lsa),
    }
    .encode(&mut body);
    body
}

/// The pipe's interface on context 0, mgmt on 1 and dssetup on 2, NDR 2.0
/// (as the fuzz targets bind).
fn usual_contexts(lsa: bool) -> Vec<ContextElement> {
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
}

fn trailer(rng: &mut StdRng, auth: u8) -> SecTrailer {
    let levels = [
        auth_level::CONNECT,
        auth_level::PKT,
        auth_level::PKT_INTEGRITY,
        auth_level::PKT_INTEGRITY,
        auth_level::PKT_PRIVACY,
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
) -> (Vec<u8>, Option<PendingAuth>) {
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
    let pending = state.map(|auth| PendingAuth {
        auth,
        trailer: out.trailer,
        awaits_final: false,
    });
    (pdu, pending)
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
/// SPNEGO goes on); sometimes the token garbled or the trailer not the
/// bind's. Also what the leg, sent as it was built, leaves to do.
pub fn next_leg(
    rng: &mut StdRng,
    mut state: PendingAuth,
    token: &[u8],
    lsa: bool,
    call_id: u32,
) -> (Vec<u8>, AfterLeg) {
    let mut next = state.auth.step(token).unwrap_or_default();
    let mut intact = !next.is_empty();
    if next.is_empty() || rng.gen_bool(0.1) {
        let n = rng.gen_range(1..300);
        next = (0..n).map(|_| rng.gen()).collect();
        intact = false;
    } else if rng.gen_bool(0.1) {
        let at = rng.gen_range(0..next.len());
        next[at] ^= 0x40;
        intact = false;
    }
    let kind = state.trailer.auth_type;
    let trailer = if rng.gen_bool(0.9) {
        state.trailer
    } else {
        trailer(rng, kind)
    };
    intact &= trailer == state.trailer;
    // SPNEGO completes only by ALTER_CONTEXT, NTLMSSP by either.
    let auth3 = rng.gen_bool(if kind == auth_type::SPNEGO { 0.2 } else { 0.6 });
    let body = bind_body(rng, lsa);
    leg(state, next, trailer, auth3, &body, call_id, intact)
}

/// The next leg as a client does it: AUTH3 for NTLMSSP, an ALTER_CONTEXT
/// offering `lsa`'s usual contexts for SPNEGO, under the bind's trailer.
pub fn faithful_leg(
    mut state: PendingAuth,
    token: &[u8],
    lsa: bool,
    call_id: u32,
) -> (Vec<u8>, AfterLeg) {
    let next = state.auth.step(token).unwrap_or_default();
    let auth3 = matches!(state.auth, Auth::Ntlm(_));
    let trailer = state.trailer;
    let intact = !next.is_empty();
    leg(
        state,
        next,
        trailer,
        auth3,
        &plain_bind_body(lsa),
        call_id,
        intact,
    )
}

/// A leg's PDU; with an `intact` token under the bind's trailer at a
/// signing level, the security it completes (NTLMSSP) or the state that
/// waits for the server's last token (SPNEGO by ALTER_CONTEXT; an AUTH3
/// is never answered).
fn leg(
    state: PendingAuth,
    token: Vec<u8>,
    trailer: SecTrailer,
    auth3: bool,
    alter_body: &[u8],
    call_id: u32,
    intact: bool,
) -> (Vec<u8>, AfterLeg) {
    let out = OutAuth { trailer, token };
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    let pdu = if auth3 {
        encode_pdu_with_auth(ptype::AUTH3, flags, call_id, &[0; 4], Some(&out))
    } else {
        encode_pdu_with_auth(ptype::ALTER_CONTEXT, flags, call_id, alter_body, Some(&out))
    };
    let after = match state.auth {
        _ if !intact || !signs(&trailer) => AfterLeg::Nothing,
        Auth::Ntlm(ref n) => n.session_security().map_or(AfterLeg::Nothing, |security| {
            AfterLeg::Secured(Box::new(Secured { security, trailer }))
        }),
        Auth::Spnego(_) if auth3 => AfterLeg::Nothing,
        Auth::Spnego(_) => AfterLeg::Final(PendingAuth {
            awaits_final: true,
            ..state
        }),
    };
    (pdu, after)
}

/// SPNEGO's last leg: the server's final token (its mechListMIC) checked,
/// the session security the context gives.
pub fn finish(mut state: PendingAuth, token: &[u8]) -> Option<Secured> {
    let Auth::Spnego(s) = &mut state.auth else {
        return None;
    };
    if s.step(token).ok()? != ClientStep::Done {
        return None;
    }
    let security = s.take_session_security().ok()?;
    Some(Secured {
        security,
        trailer: state.trailer,
    })
}

/// A REQUEST fragment signed (sealed at PKT_PRIVACY) as MS-RPCE 2.2.2.11
/// lays it out: the stub padded to 16 bytes from its start, the
/// sec_trailer, then the 16-byte NTLM signature over everything before it.
fn secured_fragment(
    sec: &mut Secured,
    flags: u8,
    call_id: u32,
    head: &[u8],
    stub: &[u8],
) -> Vec<u8> {
    let mut pdu = vec![5, 0, ptype::REQUEST, flags, 0x10, 0, 0, 0, 0, 0, 0, 0];
    pdu.extend(call_id.to_le_bytes());
    pdu.extend_from_slice(head);
    pdu.extend_from_slice(stub);
    let pad = (16 - stub.len() % 16) % 16;
    pdu.resize(pdu.len() + pad, 0);
    let trailer_at = pdu.len();
    SecTrailer {
        auth_pad_length: pad as u8,
        ..sec.trailer
    }
    .encode(&mut pdu);
    let signed_end = pdu.len();
    pdu.resize(signed_end + SIGNATURE_LEN, 0);
    let frag_len = pdu.len() as u16;
    pdu[8..10].copy_from_slice(&frag_len.to_le_bytes());
    pdu[10..12].copy_from_slice(&(SIGNATURE_LEN as u16).to_le_bytes());
    let sig = if sec.trailer.auth_level == auth_level::PKT_PRIVACY {
        sec.security.seal(&mut pdu[..signed_end], 24..trailer_at)
    } else {
        sec.security.sign(&pdu[..signed_end])
    };
    pdu[signed_end..].copy_from_slice(&sig);
    pdu
}

/// A REQUEST on an association with per-message security: one fragment,
/// or the stub cut in several, each signed (or sealed) on its own.
pub fn secured_request(
    rng: &mut StdRng,
    sec: &mut Secured,
    ctx: u16,
    opnum: u16,
    stub: &[u8],
    call_id: u32,
) -> Vec<Vec<u8>> {
    let pieces = if rng.gen_bool(0.8) || stub.len() < 2 {
        1
    } else {
        rng.gen_range(2..4)
    };
    let chunks: Vec<&[u8]> = if stub.is_empty() {
        vec![&[][..]]
    } else {
        stub.chunks(stub.len().div_ceil(pieces)).collect()
    };
    let mut head = (stub.len() as u32).to_le_bytes().to_vec();
    head.extend(ctx.to_le_bytes());
    head.extend(opnum.to_le_bytes());
    let n = chunks.len();
    chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| {
            let first = if i == 0 { pfc::FIRST_FRAG } else { 0 };
            let last = if i + 1 == n { pfc::LAST_FRAG } else { 0 };
            secured_fragment(sec, first | last, call_id, &head, chunk)
        })
        .collect()
}

/// A RESPONSE of a secured association checked (and at PKT_PRIVACY
/// decrypted) with its session security: the stub, or None when the
/// verifier is missing or wrong.
pub fn open_response(sec: &mut Secured, pdu: &[u8]) -> Option<Vec<u8>> {
    let auth_len = u16::from_le_bytes(pdu.get(10..12)?.try_into().ok()?) as usize;
    if auth_len != SIGNATURE_LEN || pdu.len() < 24 + 8 + SIGNATURE_LEN {
        return None;
    }
    let sig_at = pdu.len() - SIGNATURE_LEN;
    let trailer_at = sig_at - 8;
    let trailer = SecTrailer::decode(
        &pdu[trailer_at..sig_at],
        braid_smb_proto::dcerpc::ndr::Endian::Little,
    )
    .ok()?;
    let stub_end = trailer_at.checked_sub(usize::from(trailer.auth_pad_length))?;
    if stub_end < 24 || trailer.auth_level != sec.trailer.auth_level {
        return None;
    }
    let mut signed = pdu[..sig_at].to_vec();
    let checked = if sec.trailer.auth_level == auth_level::PKT_PRIVACY {
        sec.security
            .unseal(&mut signed, 24..trailer_at, &pdu[sig_at..])
    } else {
        sec.security.verify(&signed, &pdu[sig_at..])
    };
    checked.ok()?;
    Some(signed[24..stub_end].to_vec())
}

/// A call's context, opnum and stub: real operations of the pipe's
/// interface (MS-SRVS, MS-LSAT / MS-LSAD), of mgmt (C706 appendix Q) and
/// dssetup (MS-DSSP), sometimes an opnum out of range. Now and then the
/// two that end what other sessions hold (`operator`): `last_file_id`,
/// the newest file id this client was given, aims NetrFileClose at the
/// file clients' recent opens.
pub fn call(
    rng: &mut StdRng,
    lsa: bool,
    handle: Option<[u8; 20]>,
    last_file_id: u32,
) -> (u16, u16, Vec<u8>) {
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
    if !lsa && rng.gen_bool(0.3) {
        return operator(rng, last_file_id);
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

/// An operator's srvsvc call racing the file clients: NetrFileClose
/// (`net file ID /close`) of an id near the newest, or NetrSessionDel of
/// the fuzzing user's sessions or of a client computer's, some named as
/// MS-SRVS 3.1.4.6 forbids (no leading `\\`). The caller's own session
/// is spared; the others learn USER_SESSION_DELETED on their next request.
fn operator(rng: &mut StdRng, last_file_id: u32) -> (u16, u16, Vec<u8>) {
    if rng.gen_bool(0.6) {
        // The file clients keep opening files after this client's newest
        // pipe: aim around it, mostly past it.
        let id = if rng.gen_bool(0.85) {
            last_file_id
                .wrapping_add(rng.gen_range(0..64))
                .wrapping_sub(16)
        } else {
            rng.gen()
        };
        // NetrFileClose: ServerName NULL, FileId.
        return (0, 11, words(&[0, id]));
    }
    // NetrSessionDel: ServerName NULL, then ClientName and UserName, each
    // a unique pointer (a referent id, or NULL) to a string.
    let clients = ["\\\\127.0.0.1", "\\\\192.0.2.1", "127.0.0.1", ""];
    let users = [crate::common::USER, "nobody", ""];
    let mut stub = words(&[0]);
    for (referent, names) in [(0x2_0000u32, &clients[..]), (0x2_0004, &users[..])] {
        if rng.gen_bool(0.25) {
            stub.extend(words(&[0]));
        } else {
            stub.extend(words(&[referent]));
            stub.extend(ndr_string(names[rng.gen_range(0..names.len())]));
        }
    }
    (0, 13, stub)
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
