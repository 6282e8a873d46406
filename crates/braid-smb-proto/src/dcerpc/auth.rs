//! Authenticated associations (MS-RPCE 3.3.1.5.2, 3.2.1.5.x / 3.3.1.5.x
//! for the legs): the security context a BIND starts and an AUTH3 or
//! ALTER_CONTEXT completes, with NTLMSSP (auth_type 10, MS-NLMP) or SPNEGO
//! over NTLMSSP (auth_type 9, MS-SPNG), and what it then does to each
//! REQUEST (verify, unseal) and RESPONSE (sign, seal) at the level the
//! bind asked for. Samba's server (librpc/rpc/dcesrv_auth.c,
//! dcerpc_pkt_auth.c) is followed where the spec leaves a choice.
//!
//! The legs: NTLMSSP goes BIND (NEGOTIATE) -> BIND_ACK (CHALLENGE) ->
//! AUTH3 (AUTHENTICATE), which gets no answer. SPNEGO goes BIND ->
//! BIND_ACK -> ALTER_CONTEXT -> ALTER_CONTEXT_RESP, the last carrying the
//! server's mechListMIC, since the client waits for it.

use std::cell::RefCell;

use super::ndr::Endian;
use super::pdu::{
    fault_status, ptype, CommonHeader, Fragment, PduError, COMMON_HEADER_LEN, REQUEST_HEADER_LEN,
    RESPONSE_HEADER_LEN, SEC_TRAILER_LEN,
};
use crate::auth::ntlmssp::flags::NEGOTIATE_SEAL;
use crate::auth::{AuthError, AuthOutcome, NtlmSecurity, NtlmServer, SpnegoServer, SpnegoStep};
use crate::codec::WriteLe;

/// MS-RPCE 2.2.1.1.7: security providers served.
pub mod auth_type {
    pub const NONE: u8 = 0;
    /// RPC_C_AUTHN_GSS_NEGOTIATE.
    pub const SPNEGO: u8 = 9;
    /// RPC_C_AUTHN_WINNT.
    pub const NTLMSSP: u8 = 10;
}

/// MS-RPCE 2.2.1.1.8: authentication levels.
pub mod auth_level {
    pub const NONE: u8 = 1;
    pub const CONNECT: u8 = 2;
    pub const CALL: u8 = 3;
    pub const PKT: u8 = 4;
    pub const PKT_INTEGRITY: u8 = 5;
    pub const PKT_PRIVACY: u8 = 6;
}

/// MS-RPCE 2.2.2.3: in bind, bind_ack, alter_context and
/// alter_context_resp, pfc_flags 0x04 is PFC_SUPPORT_HEADER_SIGN.
pub const PFC_SUPPORT_HEADER_SIGN: u8 = 0x04;
/// MS-NLMP 2.2.2.9: an NTLMSSP_MESSAGE_SIGNATURE.
pub const SIGNATURE_LEN: usize = 16;
/// MS-RPCE 2.2.2.11: "The sec_trailer structure MUST be 16-byte aligned
/// with respect to the beginning of the PDU Body."
pub const AUTH_PAD_ALIGN: usize = 16;

/// MS-RPCE 2.2.2.11 sec_trailer (C706 13.2.6.1 auth_verifier_co_t).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecTrailer {
    pub auth_type: u8,
    pub auth_level: u8,
    pub auth_pad_length: u8,
    pub auth_reserved: u8,
    pub auth_context_id: u32,
}

impl SecTrailer {
    /// The 8 octets at the start of `buf`; auth_context_id in `endian`.
    pub fn decode(buf: &[u8], endian: Endian) -> Result<Self, PduError> {
        let b = buf
            .get(..SEC_TRAILER_LEN)
            .ok_or(PduError::Truncated("sec_trailer"))?;
        let id = [b[4], b[5], b[6], b[7]];
        Ok(SecTrailer {
            auth_type: b[0],
            auth_level: b[1],
            auth_pad_length: b[2],
            auth_reserved: b[3],
            auth_context_id: match endian {
                Endian::Little => u32::from_le_bytes(id),
                Endian::Big => u32::from_be_bytes(id),
            },
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[
            self.auth_type,
            self.auth_level,
            self.auth_pad_length,
            self.auth_reserved,
        ]);
        out.put_u32(self.auth_context_id);
    }
}

/// MS-RPCE 2.2.2.10 rpc_auth_3: four octets of pad (ignored on receipt)
/// before the sec_trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Auth3 {
    pub pad: [u8; 4],
}

impl Auth3 {
    pub const BODY_LEN: usize = 4;

    pub fn decode(body: &[u8]) -> Result<Self, PduError> {
        let pad = body
            .get(..Self::BODY_LEN)
            .ok_or(PduError::Truncated("auth3"))?;
        Ok(Auth3 {
            pad: pad.try_into().expect("4 octets"),
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.pad);
    }
}

/// A PDU's sec_trailer and auth_value (the token, or the signature).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthParts<'a> {
    pub trailer: SecTrailer,
    pub token: &'a [u8],
}

impl<'a> AuthParts<'a> {
    /// Those of a fragment `split_fragment` cut (which found them at
    /// frag_length - auth_length - 8, inside the PDU); None without auth.
    pub fn of(frag: &Fragment<'a>) -> Result<Option<Self>, PduError> {
        if frag.header.auth_length == 0 {
            return Ok(None);
        }
        Ok(Some(AuthParts {
            trailer: SecTrailer::decode(frag.auth, frag.header.endian)?,
            token: &frag.auth[SEC_TRAILER_LEN..],
        }))
    }
}

/// What goes back in a BIND_ACK or ALTER_CONTEXT_RESP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutAuth {
    pub trailer: SecTrailer,
    pub token: Vec<u8>,
}

/// A whole PDU: header, `body`, padding to 4 (C706 13.2.6.1: the
/// verifier is 4-aligned) and, if any, the sec_trailer and token.
pub fn encode_pdu_with_auth(
    ptype: u8,
    pfc_flags: u8,
    call_id: u32,
    body: &[u8],
    auth: Option<&OutAuth>,
) -> Vec<u8> {
    // C706 12.6.3.1: auth_length 0 says there is no verifier at all.
    let auth = auth.filter(|a| !a.token.is_empty());
    let mut out = Vec::new();
    header(ptype, pfc_flags, 0, 0, call_id).encode(&mut out);
    out.extend_from_slice(body);
    if let Some(auth) = auth {
        let pad = (4 - body.len() % 4) % 4;
        out.resize(out.len() + pad, 0);
        SecTrailer {
            auth_pad_length: pad as u8,
            ..auth.trailer
        }
        .encode(&mut out);
        out.extend_from_slice(&auth.token);
    }
    set_lengths(&mut out, auth.map_or(0, |a| a.token.len()));
    out
}

fn header(
    ptype: u8,
    pfc_flags: u8,
    frag_length: u16,
    auth_length: u16,
    call_id: u32,
) -> CommonHeader {
    CommonHeader {
        rpc_vers_minor: 0,
        ptype,
        pfc_flags,
        endian: Endian::Little,
        frag_length,
        auth_length,
        call_id,
    }
}

/// frag_length and auth_length of a little-endian PDU built whole.
fn set_lengths(pdu: &mut [u8], auth_length: usize) {
    let frag = pdu.len().min(usize::from(u16::MAX)) as u16;
    pdu[8..10].copy_from_slice(&frag.to_le_bytes());
    pdu[10..12].copy_from_slice(&(auth_length as u16).to_le_bytes());
}

/// What the server side needs from outside to authenticate a bind.
pub trait RpcAuthBackend {
    /// A fresh NTLM acceptor: a random challenge, the current time, the
    /// server's names.
    fn ntlm_server(&self) -> NtlmServer;
    /// The NT hash of `user`, from the same user database SESSION_SETUP
    /// uses; None for an unknown user (or one the logon throttle holds).
    fn nt_hash(&self, user: &str, domain: &str) -> Option<[u8; 16]>;
    /// Whether the account a bind authenticated may use this pipe. The
    /// calls run as the SMB session's user, so only that user may.
    fn accepts(&self, outcome: &AuthOutcome) -> bool;
    /// A wrong password (or unknown user) for `user`, for the throttle.
    fn logon_failed(&self, _user: &str) {}
}

/// What the bind asked for (MS-RPCE 3.3.1.5.2: every later PDU of the
/// association must carry the same three).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Params {
    auth_type: u8,
    auth_level: u8,
    context_id: u32,
}

impl Params {
    fn matches(&self, t: &SecTrailer) -> bool {
        t.auth_type == self.auth_type
            && t.auth_level == self.auth_level
            && t.auth_context_id == self.context_id
    }

    fn out(&self, token: Vec<u8>) -> OutAuth {
        OutAuth {
            trailer: SecTrailer {
                auth_type: self.auth_type,
                auth_level: self.auth_level,
                auth_pad_length: 0,
                auth_reserved: 0,
                auth_context_id: self.context_id,
            },
            token,
        }
    }

    /// Whether requests and responses carry a signature.
    fn signs(&self) -> bool {
        self.auth_level >= auth_level::PKT
    }
}

#[derive(Debug)]
enum Mechanism {
    Ntlm {
        server: NtlmServer,
        challenged: bool,
    },
    Spnego(Box<SpnegoServer>),
}

enum Leg {
    Continue(Vec<u8>),
    Done(Vec<u8>, AuthOutcome),
}

impl Mechanism {
    fn step(&mut self, token: &[u8], backend: &dyn RpcAuthBackend) -> Result<Leg, AuthError> {
        let tried = RefCell::new(None);
        let lookup = |user: &str, domain: &str| {
            *tried.borrow_mut() = Some(user.to_string());
            backend.nt_hash(user, domain)
        };
        let result = match self {
            Mechanism::Ntlm { server, challenged } if !*challenged => {
                *challenged = true;
                server.challenge(token).map(Leg::Continue)
            }
            Mechanism::Ntlm { server, .. } => server
                .authenticate(token, &lookup)
                .map(|outcome| Leg::Done(Vec::new(), outcome)),
            Mechanism::Spnego(server) => server.step(token, &lookup).map(|step| match step {
                SpnegoStep::Continue(out) => Leg::Continue(out),
                SpnegoStep::Done { token, outcome } => Leg::Done(token, outcome),
            }),
        };
        if let (Err(AuthError::LogonFailure), Some(user)) = (&result, tried.into_inner()) {
            backend.logon_failed(&user);
        }
        result
    }

    fn ntlm(&self) -> &NtlmServer {
        match self {
            Mechanism::Ntlm { server, .. } => server,
            Mechanism::Spnego(server) => server.ntlm(),
        }
    }

    /// The session security of a completed exchange: after SPNEGO's
    /// mechListMIC exchange, the one that exchange used (its sequence
    /// numbers have moved on).
    fn session_security(&mut self) -> Result<NtlmSecurity, AuthError> {
        match self {
            Mechanism::Ntlm { server, .. } => server.session_security(),
            Mechanism::Spnego(server) => server.take_session_security(),
        }
    }
}

#[derive(Debug, Default)]
enum Phase {
    /// No bind yet, or one without auth: requests carry none.
    #[default]
    Unauthenticated,
    /// Between the bind and the last leg.
    Pending { params: Params, mech: Mechanism },
    Ready {
        params: Params,
        session: Box<NtlmSecurity>,
    },
    /// An AUTH3 that failed: Samba sends nothing back then, and refuses
    /// the requests that follow.
    Invalid,
}

/// The security state of one association.
#[derive(Debug, Default)]
pub struct RpcSecurity {
    phase: Phase,
    /// The bind set PFC_SUPPORT_HEADER_SIGN: what a verification
    /// trailer's bitmask_1 may claim (MS-RPCE 2.2.2.13.2).
    client_header_signing: bool,
    /// A failure after which Samba and Windows drop the connection (their
    /// dcesrv_fault_disconnect): the pipe takes no further PDU.
    terminated: bool,
}

/// The fault a failed step answers with; the association ends with it.
pub type FaultStatus = u32;

impl RpcSecurity {
    pub fn terminated(&self) -> bool {
        self.terminated
    }

    pub fn client_header_signing(&self) -> bool {
        self.client_header_signing
    }

    fn fail(&mut self, status: FaultStatus) -> FaultStatus {
        self.terminated = true;
        self.phase = Phase::Invalid;
        status
    }

    /// C706 12.6.4.3 / MS-RPCE 3.3.1.5.2.1 (Samba's dcesrv_auth_bind):
    /// the first leg. Err is a bind_nak reject reason.
    pub fn bind(
        &mut self,
        frag: &Fragment<'_>,
        backend: Option<&dyn RpcAuthBackend>,
    ) -> Result<Option<OutAuth>, u16> {
        use super::pdu::bind_nak_reason as nak;
        self.client_header_signing = frag.header.pfc_flags & PFC_SUPPORT_HEADER_SIGN != 0;
        let Some(parts) = AuthParts::of(frag).map_err(|_| nak::PROTOCOL_VERSION_NOT_SUPPORTED)?
        else {
            self.phase = Phase::Unauthenticated;
            return Ok(None);
        };
        let t = parts.trailer;
        let params = Params {
            auth_type: t.auth_type,
            auth_level: t.auth_level,
            context_id: t.auth_context_id,
        };
        // CALL means nothing for connection-oriented RPC, and Samba
        // refuses its calls (unsupported authentication level): the bind
        // is refused at once. NONE with a verifier is a contradiction.
        if ![
            auth_level::CONNECT,
            auth_level::PKT,
            auth_level::PKT_INTEGRITY,
            auth_level::PKT_PRIVACY,
        ]
        .contains(&t.auth_level)
        {
            return Err(nak::NOT_SPECIFIED);
        }
        let backend = backend.ok_or(nak::AUTHENTICATION_TYPE_NOT_RECOGNIZED)?;
        let mut mech = match t.auth_type {
            auth_type::NTLMSSP => Mechanism::Ntlm {
                server: backend.ntlm_server(),
                challenged: false,
            },
            auth_type::SPNEGO => {
                Mechanism::Spnego(Box::new(SpnegoServer::new(backend.ntlm_server())))
            }
            _ => return Err(nak::AUTHENTICATION_TYPE_NOT_RECOGNIZED),
        };
        match mech.step(parts.token, backend) {
            Ok(Leg::Continue(token)) => {
                self.phase = Phase::Pending { params, mech };
                Ok(Some(params.out(token)))
            }
            // No mechanism served here completes in one leg.
            Ok(Leg::Done(..)) | Err(_) => Err(nak::NOT_SPECIFIED),
        }
    }

    /// C706 12.6.4.1 alter_context (Samba's dcesrv_auth_alter): a further
    /// leg, or a pure change of presentation contexts. Err is the fault to
    /// answer with, after which the association ends.
    pub fn alter(
        &mut self,
        frag: &Fragment<'_>,
        backend: Option<&dyn RpcAuthBackend>,
    ) -> Result<Option<OutAuth>, FaultStatus> {
        let Ok(parts) = AuthParts::of(frag) else {
            return Err(self.fail(fault_status::NCA_PROTO_ERROR));
        };
        let pending = match &self.phase {
            Phase::Pending { params, .. } => Some(*params),
            _ => None,
        };
        match (pending, parts) {
            (None, None) if !matches!(self.phase, Phase::Invalid) => Ok(None),
            // A context is established (or was never started): another
            // one on the same association is not served.
            (None, _) => Err(self.fail(fault_status::ACCESS_DENIED)),
            // The exchange is not over: nothing else may happen meanwhile.
            (Some(_), None) => Err(self.fail(fault_status::SEC_PKG_ERROR)),
            (Some(params), Some(p)) if !params.matches(&p.trailer) => {
                let status = if p.trailer.auth_type != params.auth_type {
                    fault_status::SEC_PKG_ERROR
                } else {
                    fault_status::ACCESS_DENIED
                };
                Err(self.fail(status))
            }
            (Some(_), Some(p)) => match self.leg(p.token, backend) {
                // A last leg with nothing to say (raw NTLMSSP completed
                // by an alter_context) is answered without a verifier.
                Ok(out) => Ok((!out.token.is_empty()).then_some(out)),
                Err(()) => Err(self.fail(fault_status::SEC_PKG_ERROR)),
            },
        }
    }

    /// MS-RPCE 2.2.2.10 rpc_auth_3 (Samba's dcesrv_auth3): the last leg,
    /// which gets no answer. A failure leaves the association unusable
    /// (Invalid); a protocol error is answered with a fault.
    pub fn auth3(
        &mut self,
        frag: &Fragment<'_>,
        backend: Option<&dyn RpcAuthBackend>,
    ) -> Result<(), FaultStatus> {
        let Phase::Pending { params, .. } = &self.phase else {
            return Err(self.fail(fault_status::NCA_PROTO_ERROR));
        };
        let params = *params;
        let parts = match (Auth3::decode(frag.body), AuthParts::of(frag)) {
            (Ok(_), Ok(Some(parts))) => parts,
            // Windows answers a malformed one with nca_s_fault_remote_no_memory;
            // a protocol error says the same and ends the association too.
            _ => return Err(self.fail(fault_status::NCA_PROTO_ERROR)),
        };
        if !params.matches(&parts.trailer) {
            self.phase = Phase::Invalid;
            return Ok(());
        }
        match self.leg(parts.token, backend) {
            Ok(out) if out.token.is_empty() && matches!(self.phase, Phase::Ready { .. }) => Ok(()),
            _ => {
                self.phase = Phase::Invalid;
                Ok(())
            }
        }
    }

    /// One more token for a pending context; on completion the context is
    /// checked and becomes Ready.
    fn leg(&mut self, token: &[u8], backend: Option<&dyn RpcAuthBackend>) -> Result<OutAuth, ()> {
        let Phase::Pending { params, mech } = &mut self.phase else {
            return Err(());
        };
        let params = *params;
        let backend = backend.ok_or(())?;
        match mech.step(token, backend).map_err(|_| ())? {
            Leg::Continue(out) => Ok(params.out(out)),
            Leg::Done(out, outcome) => {
                established(&params, mech.ntlm(), &outcome, backend)?;
                let session = mech.session_security().map_err(|_| ())?;
                self.phase = Phase::Ready {
                    params,
                    session: Box::new(session),
                };
                Ok(params.out(out))
            }
        }
    }

    /// MS-RPCE 3.3.1.5.2.2 (Samba's dcerpc_ncacn_pull_pkt_auth): one
    /// REQUEST fragment, checked against the association's context and,
    /// at PKT_INTEGRITY and up, its signature verified over the PDU up to
    /// the verifier (and at PKT_PRIVACY its stub decrypted). Returns the
    /// stub without auth padding. Err is the fault to answer with; the
    /// association ends with it.
    pub fn open_request(
        &mut self,
        pdu: &[u8],
        frag: &Fragment<'_>,
    ) -> Result<Vec<u8>, FaultStatus> {
        let header = &frag.header;
        let payload_offset = REQUEST_HEADER_LEN
            + if header.pfc_flags & super::pdu::pfc::OBJECT_UUID != 0 {
                16
            } else {
                0
            };
        let plain = || {
            frag.body
                .get(payload_offset - COMMON_HEADER_LEN..)
                .map(<[u8]>::to_vec)
                .ok_or(fault_status::NCA_PROTO_ERROR)
        };
        let (params, session) = match &mut self.phase {
            Phase::Unauthenticated if header.auth_length == 0 => return plain(),
            Phase::Unauthenticated | Phase::Invalid => {
                return Err(self.fail(fault_status::ACCESS_DENIED))
            }
            Phase::Pending { .. } => return Err(self.fail(fault_status::NCA_PROTO_ERROR)),
            Phase::Ready { params, session } => (*params, session),
        };
        if header.auth_length == 0 {
            if params.auth_level == auth_level::CONNECT {
                return plain();
            }
            return Err(self.fail(fault_status::NCA_PROTO_ERROR));
        }
        let Ok(Some(parts)) = AuthParts::of(frag) else {
            return Err(self.fail(fault_status::NCA_PROTO_ERROR));
        };
        // Only the first fragment's trailer is held to the bind's values
        // (MS-RPCE 3.3.1.5.2.2; Samba ignores them on the rest).
        let first = header.pfc_flags & super::pdu::pfc::FIRST_FRAG != 0;
        if first && !params.matches(&parts.trailer) {
            return Err(self.fail(fault_status::ACCESS_DENIED));
        }
        let frag_len = usize::from(header.frag_length);
        let signed_end = frag_len - parts.token.len();
        let trailer_at = signed_end - SEC_TRAILER_LEN;
        let stub_end = trailer_at - usize::from(parts.trailer.auth_pad_length);
        // split_fragment kept the padding inside the body; it must not
        // reach into the request header either.
        if stub_end < payload_offset {
            return Err(self.fail(fault_status::NCA_PROTO_ERROR));
        }
        let ok = match params.auth_level {
            auth_level::PKT_PRIVACY => {
                let mut clear = pdu[..signed_end].to_vec();
                let ok = session
                    .unseal(&mut clear, payload_offset..trailer_at, parts.token)
                    .is_ok();
                if ok {
                    return Ok(clear[payload_offset..stub_end].to_vec());
                }
                false
            }
            auth_level::PKT | auth_level::PKT_INTEGRITY => {
                session.verify(&pdu[..signed_end], parts.token).is_ok()
            }
            // CONNECT: a verifier, if sent, is not looked at (as Samba).
            _ => true,
        };
        if !ok {
            return Err(self.fail(fault_status::SEC_PKG_ERROR));
        }
        Ok(pdu[payload_offset..stub_end].to_vec())
    }

    /// Stub octets one RESPONSE fragment of at most `max_frag` carries:
    /// with a verifier, room for the sec_trailer and signature, and a
    /// multiple of 16 so that only the last fragment needs auth padding
    /// (Samba's dcesrv_reply).
    pub fn stub_per_fragment(&self, max_frag: u16) -> usize {
        let room = usize::from(max_frag) - RESPONSE_HEADER_LEN;
        match &self.phase {
            Phase::Ready { params, .. } if params.signs() => {
                (room - SEC_TRAILER_LEN - SIGNATURE_LEN) & !(AUTH_PAD_ALIGN - 1)
            }
            _ => room,
        }
    }

    /// C706 12.6.4.10 / MS-RPCE 2.2.2.11: one RESPONSE fragment, `body`
    /// being its alloc_hint, context id, cancel count and stub. At
    /// PKT_INTEGRITY and up the stub is padded to 16, the sec_trailer
    /// added, and the signature computed over the whole PDU up to it, in
    /// clear; at PKT_PRIVACY the stub and padding are then encrypted.
    pub fn response_pdu(&mut self, pfc_flags: u8, call_id: u32, body: &[u8]) -> Vec<u8> {
        let (params, session) = match &mut self.phase {
            Phase::Ready { params, session } if params.signs() => (*params, session),
            _ => return encode_pdu_with_auth(ptype::RESPONSE, pfc_flags, call_id, body, None),
        };
        let stub_len = body.len() - (RESPONSE_HEADER_LEN - COMMON_HEADER_LEN);
        let pad = (AUTH_PAD_ALIGN - stub_len % AUTH_PAD_ALIGN) % AUTH_PAD_ALIGN;
        let mut pdu = Vec::with_capacity(COMMON_HEADER_LEN + body.len() + pad + 24);
        header(ptype::RESPONSE, pfc_flags, 0, 0, call_id).encode(&mut pdu);
        pdu.extend_from_slice(body);
        pdu.resize(pdu.len() + pad, 0);
        let trailer_at = pdu.len();
        SecTrailer {
            auth_pad_length: pad as u8,
            ..params.out(Vec::new()).trailer
        }
        .encode(&mut pdu);
        // The lengths are final before signing: the header is signed too.
        let signed_end = pdu.len();
        pdu.resize(signed_end + SIGNATURE_LEN, 0);
        set_lengths(&mut pdu, SIGNATURE_LEN);
        let signature = if params.auth_level == auth_level::PKT_PRIVACY {
            session.seal(&mut pdu[..signed_end], RESPONSE_HEADER_LEN..trailer_at)
        } else {
            session.sign(&pdu[..signed_end])
        };
        pdu[signed_end..].copy_from_slice(&signature);
        pdu
    }
}

/// The checks once the mechanism accepted the client (Samba's
/// dcesrv_auth_complete, with gensec's feature checks): an account, the
/// SMB session's own, and NTLM session security for the level asked.
fn established(
    params: &Params,
    ntlm: &NtlmServer,
    outcome: &AuthOutcome,
    backend: &dyn RpcAuthBackend,
) -> Result<(), ()> {
    if outcome.anonymous || !backend.accepts(outcome) {
        return Err(());
    }
    if params.signs() && !ntlm.can_sign() {
        return Err(());
    }
    let flags = ntlm.negotiated_flags().unwrap_or(0);
    if params.auth_level == auth_level::PKT_PRIVACY && flags & NEGOTIATE_SEAL == 0 {
        return Err(());
    }
    Ok(())
}

#[cfg(test)]
#[path = "auth_test_client.rs"]
mod test_client;

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
