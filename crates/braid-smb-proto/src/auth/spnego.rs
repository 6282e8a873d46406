//! SPNEGO (RFC 4178 with the MS-SPNG extensions) carrying NTLMSSP, plus the
//! GSS-API InitialContextToken framing (RFC 2743 section 3.1).
//!
//! Also accepts raw NTLMSSP tokens not wrapped in SPNEGO, which some clients
//! send; the answers are then raw NTLMSSP too.

use super::der::{self, context, DerReader, Oid, Tlv, TAG_SEQUENCE};
use super::ntlmssp::{self, AuthOutcome, ClientEntropy, NtlmClient, NtlmSecurity, NtlmServer};
use super::AuthError;

/// 1.3.6.1.5.5.2 — SPNEGO (RFC 4178 section 3).
pub const OID_SPNEGO: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x02];
/// 1.3.6.1.4.1.311.2.2.10 — NTLMSSP (MS-NLMP 1.9).
pub const OID_NTLMSSP: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x02, 0x02, 0x0a];
/// 1.2.840.48018.1.2.2 — MS Kerberos (recognised, not supported).
pub const OID_MS_KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x82, 0xf7, 0x12, 0x01, 0x02, 0x02];
/// 1.2.840.113554.1.2.2 — Kerberos 5 (recognised, not supported).
pub const OID_KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];

/// MS-SPNG 3.2.5.2: the hint Windows and Samba put in negTokenInit2.
pub const NEG_HINT_NAME: &str = "not_defined_in_RFC4178@please_ignore";

fn ntlm_oid() -> Oid {
    Oid::from_der_content(OID_NTLMSSP).expect("valid constant OID")
}

// RFC 4178 4.2.2: negState ENUMERATED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NegState {
    AcceptCompleted = 0,
    AcceptIncomplete = 1,
    Reject = 2,
    RequestMic = 3,
}

impl NegState {
    fn from_u8(v: u8) -> Result<Self, AuthError> {
        Ok(match v {
            0 => NegState::AcceptCompleted,
            1 => NegState::AcceptIncomplete,
            2 => NegState::Reject,
            3 => NegState::RequestMic,
            _ => return Err(AuthError::Malformed("unknown SPNEGO negState")),
        })
    }
}

// RFC 4178 4.2.1 NegTokenInit, and MS-SPNG 2.2.1 NegTokenInit2 (negHints at
// [3], mechListMIC moved to [4]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NegTokenInit {
    pub mech_types: Vec<Oid>,
    /// The DER encoding of the MechTypeList exactly as received (or as we
    /// encode it): the input to the mechListMIC (RFC 4178 5, MS-SPNG 3.3.5.1).
    pub mech_types_der: Vec<u8>,
    pub mech_token: Option<Vec<u8>>,
    /// NegTokenInit2 negHints.hintName.
    pub hint_name: Option<String>,
    pub mech_list_mic: Option<Vec<u8>>,
}

// RFC 4178 4.2.2 NegTokenResp.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NegTokenResp {
    pub neg_state: Option<NegState>,
    pub supported_mech: Option<Oid>,
    pub response_token: Option<Vec<u8>>,
    pub mech_list_mic: Option<Vec<u8>>,
}

/// A parsed incoming security buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token<'a> {
    Init(NegTokenInit),
    Resp(NegTokenResp),
    /// A bare NTLMSSP message.
    Ntlmssp(&'a [u8]),
}

/// Reads the elements of a SEQUENCE of optional `[n]`-tagged fields,
/// requiring strictly increasing tag numbers (DER, X.690 10.3 / RFC 4178
/// ASN.1). Yields (n, inner element).
fn tagged_fields<'a>(seq: Tlv<'a>) -> Result<Vec<(u8, Tlv<'a>)>, AuthError> {
    let mut r = seq.reader();
    let mut out = Vec::new();
    let mut last: Option<u8> = None;
    while !r.is_empty() {
        let t = r.read()?;
        if t.tag & 0xe0 != 0xa0 {
            return Err(AuthError::Malformed("SPNEGO field is not a context tag"));
        }
        let n = t.tag & 0x1f;
        if last.is_some_and(|l| n <= l) {
            return Err(AuthError::Malformed("SPNEGO fields out of order"));
        }
        last = Some(n);
        let mut inner = t.reader();
        let v = inner.read()?;
        inner.finish()?;
        out.push((n, v));
    }
    Ok(out)
}

fn expect_tag(t: &Tlv<'_>, tag: u8) -> Result<(), AuthError> {
    if t.tag != tag {
        return Err(der::DerError::UnexpectedTag {
            expected: tag,
            found: t.tag,
        }
        .into());
    }
    Ok(())
}

impl NegTokenInit {
    /// Parses the NegTokenInit SEQUENCE element.
    pub fn decode_seq(seq: Tlv<'_>) -> Result<Self, AuthError> {
        expect_tag(&seq, TAG_SEQUENCE)?;
        let mut out = NegTokenInit::default();
        let mut have_mech_types = false;
        for (n, v) in tagged_fields(seq)? {
            match n {
                0 => {
                    expect_tag(&v, TAG_SEQUENCE)?;
                    let mut r = v.reader();
                    while !r.is_empty() {
                        out.mech_types.push(r.read_oid()?);
                    }
                    out.mech_types_der = v.raw.to_vec();
                    have_mech_types = true;
                }
                1 => {} // reqFlags: ignored (MS-SPNG 3.2.5.1 / 3.3.5.1).
                2 => {
                    expect_tag(&v, der::TAG_OCTET_STRING)?;
                    out.mech_token = Some(v.value.to_vec());
                }
                // [3] is mechListMIC in RFC 4178, negHints in NegTokenInit2.
                3 if v.tag == der::TAG_OCTET_STRING => out.mech_list_mic = Some(v.value.to_vec()),
                3 => {
                    expect_tag(&v, TAG_SEQUENCE)?;
                    for (hn, hv) in tagged_fields(v)? {
                        if hn == 0 {
                            expect_tag(&hv, der::TAG_GENERAL_STRING)?;
                            out.hint_name = Some(String::from_utf8_lossy(hv.value).into_owned());
                        }
                    }
                }
                4 => {
                    expect_tag(&v, der::TAG_OCTET_STRING)?;
                    out.mech_list_mic = Some(v.value.to_vec());
                }
                _ => {} // extension marker
            }
        }
        if !have_mech_types {
            return Err(AuthError::Malformed("NegTokenInit without mechTypes"));
        }
        Ok(out)
    }

    /// Encodes as a GSS-API InitialContextToken: `[APPLICATION 0] { SPNEGO
    /// OID, [0] NegTokenInit }` (RFC 2743 3.1, RFC 4178 4.2). With a hint
    /// name the NegTokenInit2 layout of MS-SPNG 2.2.1 is used.
    pub fn encode(&self) -> Vec<u8> {
        let mech_list: Vec<u8> = self.mech_types.iter().flat_map(|o| o.to_der()).collect();
        let mut fields = der::tlv(context(0), &der::sequence(&[&mech_list]));
        if let Some(tok) = &self.mech_token {
            der::write_tlv(&mut fields, context(2), &der::octet_string(tok));
        }
        if let Some(hint) = &self.hint_name {
            let hints = der::sequence(&[&der::tlv(context(0), &der::general_string(hint))]);
            der::write_tlv(&mut fields, context(3), &hints);
            if let Some(mic) = &self.mech_list_mic {
                der::write_tlv(&mut fields, context(4), &der::octet_string(mic));
            }
        } else if let Some(mic) = &self.mech_list_mic {
            der::write_tlv(&mut fields, context(3), &der::octet_string(mic));
        }
        let init = der::tlv(context(0), &der::sequence(&[&fields]));
        der::constructed(
            der::TAG_APPLICATION_0,
            &[&der::tlv(der::TAG_OID, OID_SPNEGO), &init],
        )
    }
}

/// The DER MechTypeList for a list of OIDs.
pub fn encode_mech_types(oids: &[Oid]) -> Vec<u8> {
    let list: Vec<u8> = oids.iter().flat_map(|o| o.to_der()).collect();
    der::sequence(&[&list])
}

impl NegTokenResp {
    pub fn decode_seq(seq: Tlv<'_>) -> Result<Self, AuthError> {
        expect_tag(&seq, TAG_SEQUENCE)?;
        let mut out = NegTokenResp::default();
        for (n, v) in tagged_fields(seq)? {
            match n {
                0 => {
                    out.neg_state = Some(NegState::from_u8(
                        DerReader::new(v.raw).read_small_enumerated()?,
                    )?);
                }
                1 => {
                    expect_tag(&v, der::TAG_OID)?;
                    out.supported_mech = Some(Oid::from_der_content(v.value)?);
                }
                2 => {
                    expect_tag(&v, der::TAG_OCTET_STRING)?;
                    out.response_token = Some(v.value.to_vec());
                }
                3 => {
                    expect_tag(&v, der::TAG_OCTET_STRING)?;
                    out.mech_list_mic = Some(v.value.to_vec());
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// Encodes as `[1] NegTokenResp` (RFC 4178 4.2: subsequent tokens carry
    /// no GSS-API framing).
    pub fn encode(&self) -> Vec<u8> {
        let mut fields = Vec::new();
        if let Some(s) = self.neg_state {
            der::write_tlv(&mut fields, context(0), &der::enumerated(s as u8));
        }
        if let Some(m) = &self.supported_mech {
            der::write_tlv(&mut fields, context(1), &m.to_der());
        }
        if let Some(t) = &self.response_token {
            der::write_tlv(&mut fields, context(2), &der::octet_string(t));
        }
        if let Some(m) = &self.mech_list_mic {
            der::write_tlv(&mut fields, context(3), &der::octet_string(m));
        }
        der::tlv(context(1), &der::sequence(&[&fields]))
    }
}

/// Parses a security buffer from the peer: a GSS-API-framed NegTokenInit
/// (`0x60`), a bare `[0]` NegTokenInit or `[1]` NegTokenResp, or a raw
/// NTLMSSP message.
pub fn parse_token(input: &[u8]) -> Result<Token<'_>, AuthError> {
    if input.starts_with(ntlmssp::SIGNATURE) {
        return Ok(Token::Ntlmssp(input));
    }
    let mut r = DerReader::new(input);
    let outer = r.read()?;
    r.finish()?;
    let choice = match outer.tag {
        // RFC 2743 3.1 InitialContextToken: thisMech, then innerContextToken.
        der::TAG_APPLICATION_0 => {
            let mut inner = outer.reader();
            if inner.read_oid()?.content() != OID_SPNEGO {
                return Err(AuthError::NoSupportedMech);
            }
            let t = inner.read()?;
            inner.finish()?;
            t
        }
        _ => outer,
    };
    let mut body = choice.reader();
    let seq = body.read()?;
    body.finish()?;
    match choice.tag {
        0xa0 => Ok(Token::Init(NegTokenInit::decode_seq(seq)?)),
        0xa1 => Ok(Token::Resp(NegTokenResp::decode_seq(seq)?)),
        _ => Err(AuthError::Malformed("not a SPNEGO NegotiationToken")),
    }
}

// MS-SPNG 3.2.5.2: the server's initial negTokenInit2 for the SMB2
// NEGOTIATE response: mechTypes {NTLMSSP}, negHints.hintName
// "not_defined_in_RFC4178@please_ignore".
pub fn server_initial_token() -> Vec<u8> {
    NegTokenInit {
        mech_types: vec![ntlm_oid()],
        hint_name: Some(NEG_HINT_NAME.to_string()),
        ..Default::default()
    }
    .encode()
}

// ---- server -----------------------------------------------------------------

/// What to send back for one SESSION_SETUP round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpnegoStep {
    /// Send with STATUS_MORE_PROCESSING_REQUIRED.
    Continue(Vec<u8>),
    /// Send with STATUS_SUCCESS (token may be empty for raw NTLMSSP).
    Done {
        token: Vec<u8>,
        outcome: AuthOutcome,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerState {
    Start,
    AwaitNtlmNegotiate,
    AwaitAuthenticate,
    AwaitMechListMic,
    Done,
    Failed,
}

/// SPNEGO acceptor wrapping an [`NtlmServer`].
pub struct SpnegoServer {
    ntlm: NtlmServer,
    state: ServerState,
    raw: bool,
    mech_types_der: Vec<u8>,
    /// NTLMSSP was not the initiator's first choice: RFC 4178 5 requires a
    /// mechListMIC exchange.
    mic_required: bool,
    sec: Option<NtlmSecurity>,
    pending: Option<AuthOutcome>,
}

impl std::fmt::Debug for SpnegoServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpnegoServer")
            .field("state", &self.state)
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

impl SpnegoServer {
    pub fn new(ntlm: NtlmServer) -> Self {
        SpnegoServer {
            ntlm,
            state: ServerState::Start,
            raw: false,
            mech_types_der: Vec::new(),
            mic_required: false,
            sec: None,
            pending: None,
        }
    }

    /// The security buffer for the SMB2 NEGOTIATE response.
    pub fn initial_token() -> Vec<u8> {
        server_initial_token()
    }

    pub fn is_done(&self) -> bool {
        self.state == ServerState::Done
    }

    /// The NTLM acceptor underneath.
    pub fn ntlm(&self) -> &NtlmServer {
        &self.ntlm
    }

    /// Once done, the session security that signs and seals what follows
    /// (DCE/RPC calls): the one the mechListMIC exchange used, its RC4
    /// handles restarted and its sequence numbers past the MICs, or a fresh
    /// one when no MIC was exchanged.
    pub fn take_session_security(&mut self) -> Result<NtlmSecurity, AuthError> {
        if self.state != ServerState::Done {
            return Err(AuthError::State("SPNEGO not finished"));
        }
        match self.sec.take() {
            Some(sec) => Ok(sec),
            None => self.ntlm.session_security(),
        }
    }

    /// Processes one SESSION_SETUP security buffer.
    pub fn step(
        &mut self,
        input: &[u8],
        lookup: &dyn Fn(&str, &str) -> Option<[u8; 16]>,
    ) -> Result<SpnegoStep, AuthError> {
        let state = std::mem::replace(&mut self.state, ServerState::Failed);
        let result = self.step_inner(state, input, lookup);
        if result.is_err() {
            self.state = ServerState::Failed;
        }
        result
    }

    fn step_inner(
        &mut self,
        state: ServerState,
        input: &[u8],
        lookup: &dyn Fn(&str, &str) -> Option<[u8; 16]>,
    ) -> Result<SpnegoStep, AuthError> {
        match state {
            // Samba's gensec: an empty first buffer gets the negTokenInit2
            // (as in the NEGOTIATE response) and the exchange starts over.
            ServerState::Start if input.is_empty() => {
                self.state = ServerState::Start;
                Ok(SpnegoStep::Continue(server_initial_token()))
            }
            ServerState::Start => match parse_token(input)? {
                Token::Ntlmssp(msg) => {
                    self.raw = true;
                    let chal = self.ntlm.challenge(msg)?;
                    self.state = ServerState::AwaitAuthenticate;
                    Ok(SpnegoStep::Continue(chal))
                }
                Token::Init(init) => self.on_init(init),
                Token::Resp(_) => Err(AuthError::State("NegTokenResp before NegTokenInit")),
            },
            ServerState::AwaitNtlmNegotiate => {
                let resp = expect_resp(input)?;
                let tok = resp
                    .response_token
                    .ok_or(AuthError::Malformed("no NTLM NEGOTIATE in NegTokenResp"))?;
                let chal = self.ntlm.challenge(&tok)?;
                self.state = ServerState::AwaitAuthenticate;
                Ok(SpnegoStep::Continue(
                    NegTokenResp {
                        neg_state: Some(NegState::AcceptIncomplete),
                        response_token: Some(chal),
                        ..Default::default()
                    }
                    .encode(),
                ))
            }
            ServerState::AwaitAuthenticate if self.raw => {
                let msg = match parse_token(input)? {
                    Token::Ntlmssp(m) => m,
                    _ => return Err(AuthError::Malformed("expected a raw NTLMSSP AUTHENTICATE")),
                };
                let outcome = self.ntlm.authenticate(msg, lookup)?;
                self.state = ServerState::Done;
                Ok(SpnegoStep::Done {
                    token: Vec::new(),
                    outcome,
                })
            }
            ServerState::AwaitAuthenticate => {
                let resp = expect_resp(input)?;
                let tok = resp
                    .response_token
                    .ok_or(AuthError::Malformed("no NTLM AUTHENTICATE in NegTokenResp"))?;
                let outcome = self.ntlm.authenticate(&tok, lookup)?;
                self.after_authenticate(outcome, resp.mech_list_mic)
            }
            ServerState::AwaitMechListMic => {
                let resp = expect_resp(input)?;
                if resp.response_token.as_ref().is_some_and(|t| !t.is_empty()) {
                    return Err(AuthError::State(
                        "mech token after authentication completed",
                    ));
                }
                let mic = resp.mech_list_mic.ok_or(AuthError::MechListMic)?;
                let sec = self
                    .sec
                    .as_mut()
                    .ok_or(AuthError::State("no NTLM session security"))?;
                sec.verify(&self.mech_types_der, &mic)?;
                sec.reset();
                let outcome = self
                    .pending
                    .take()
                    .ok_or(AuthError::State("no pending outcome"))?;
                self.state = ServerState::Done;
                Ok(SpnegoStep::Done {
                    token: NegTokenResp {
                        neg_state: Some(NegState::AcceptCompleted),
                        ..Default::default()
                    }
                    .encode(),
                    outcome,
                })
            }
            ServerState::Done | ServerState::Failed => {
                Err(AuthError::State("SPNEGO exchange already finished"))
            }
        }
    }

    // RFC 4178 4.2.1 / MS-SPNG 3.3.5.1: choose NTLMSSP from the initiator's
    // mechTypes; use the optimistic mechToken only if it is for NTLMSSP (the
    // initiator's first choice).
    fn on_init(&mut self, init: NegTokenInit) -> Result<SpnegoStep, AuthError> {
        let pos = init
            .mech_types
            .iter()
            .position(|m| m.content() == OID_NTLMSSP)
            .ok_or(AuthError::NoSupportedMech)?;
        self.mech_types_der = init.mech_types_der;
        self.mic_required = pos != 0;
        match init.mech_token {
            Some(tok) if pos == 0 => {
                let chal = self.ntlm.challenge(&tok)?;
                self.state = ServerState::AwaitAuthenticate;
                Ok(SpnegoStep::Continue(
                    NegTokenResp {
                        neg_state: Some(NegState::AcceptIncomplete),
                        supported_mech: Some(ntlm_oid()),
                        response_token: Some(chal),
                        mech_list_mic: None,
                    }
                    .encode(),
                ))
            }
            _ => {
                // RFC 4178 5: a non-preferred mechanism was selected; ask for
                // the mechListMIC and wait for the NTLM NEGOTIATE.
                self.state = ServerState::AwaitNtlmNegotiate;
                let neg_state = if self.mic_required {
                    NegState::RequestMic
                } else {
                    NegState::AcceptIncomplete
                };
                Ok(SpnegoStep::Continue(
                    NegTokenResp {
                        neg_state: Some(neg_state),
                        supported_mech: Some(ntlm_oid()),
                        ..Default::default()
                    }
                    .encode(),
                ))
            }
        }
    }

    // MS-SPNG 3.3.5.1 and Samba's gensec spnego: when NTLMSSP negotiated
    // signing and either the client put a MIC in AUTHENTICATE ("new SPNEGO")
    // or sent a mechListMIC (or one is required), verify the client's
    // mechListMIC and send ours, each over the DER MechTypeList with the
    // sender's NTLM signing key at sequence number 0.
    fn after_authenticate(
        &mut self,
        outcome: AuthOutcome,
        client_mic: Option<Vec<u8>>,
    ) -> Result<SpnegoStep, AuthError> {
        let have_sign = self.ntlm.can_sign();
        let client_mic = client_mic.filter(|m| !m.is_empty());
        let new_spnego = self.ntlm.mic_present() || client_mic.is_some() || self.mic_required;
        if !(have_sign && new_spnego) {
            self.state = ServerState::Done;
            return Ok(SpnegoStep::Done {
                token: NegTokenResp {
                    neg_state: Some(NegState::AcceptCompleted),
                    ..Default::default()
                }
                .encode(),
                outcome,
            });
        }
        let mut sec = self.ntlm.session_security()?;
        let checked = match &client_mic {
            Some(mic) => {
                sec.verify(&self.mech_types_der, mic)?;
                true
            }
            None => false,
        };
        let our_mic = sec.sign(&self.mech_types_der).to_vec();
        if checked {
            sec.reset();
            self.sec = Some(sec);
            self.state = ServerState::Done;
            Ok(SpnegoStep::Done {
                token: NegTokenResp {
                    neg_state: Some(NegState::AcceptCompleted),
                    mech_list_mic: Some(our_mic),
                    ..Default::default()
                }
                .encode(),
                outcome,
            })
        } else {
            // Samba's server answers accept-incomplete with its MIC and waits
            // for the client's.
            self.sec = Some(sec);
            self.pending = Some(outcome);
            self.state = ServerState::AwaitMechListMic;
            Ok(SpnegoStep::Continue(
                NegTokenResp {
                    neg_state: Some(NegState::AcceptIncomplete),
                    mech_list_mic: Some(our_mic),
                    ..Default::default()
                }
                .encode(),
            ))
        }
    }
}

fn expect_resp(input: &[u8]) -> Result<NegTokenResp, AuthError> {
    match parse_token(input)? {
        Token::Resp(r) => {
            if r.neg_state == Some(NegState::Reject) {
                return Err(AuthError::Rejected);
            }
            Ok(r)
        }
        _ => Err(AuthError::Malformed("expected a SPNEGO NegTokenResp")),
    }
}

// ---- client -----------------------------------------------------------------

/// What the client does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientStep {
    /// Send this token in the next SESSION_SETUP request.
    Send(Vec<u8>),
    /// Authentication is complete (the server's final token was accepted).
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientState {
    Start,
    AwaitChallenge,
    AwaitResult,
    Done,
    Failed,
}

/// SPNEGO initiator wrapping an [`NtlmClient`].
pub struct SpnegoClient {
    ntlm: NtlmClient,
    entropy: ClientEntropy,
    state: ClientState,
    mech_types_der: Vec<u8>,
    sec: Option<NtlmSecurity>,
    sent_mic: bool,
}

impl std::fmt::Debug for SpnegoClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpnegoClient")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl SpnegoClient {
    pub fn new(ntlm: NtlmClient, entropy: ClientEntropy) -> Self {
        SpnegoClient {
            ntlm,
            entropy,
            state: ClientState::Start,
            mech_types_der: Vec::new(),
            sec: None,
            sent_mic: false,
        }
    }

    /// Whether the server's NEGOTIATE-response token offers NTLMSSP (an empty
    /// buffer means "client's choice" and counts as yes).
    pub fn server_offers_ntlm(negotiate_token: &[u8]) -> bool {
        if negotiate_token.is_empty() {
            return true;
        }
        match parse_token(negotiate_token) {
            Ok(Token::Init(init)) => init.mech_types.iter().any(|m| m.content() == OID_NTLMSSP),
            _ => false,
        }
    }

    /// The first SESSION_SETUP token: NegTokenInit {NTLMSSP} with the NTLM
    /// NEGOTIATE as optimistic mechToken.
    pub fn initial_token(&mut self) -> Vec<u8> {
        let mech_types = vec![ntlm_oid()];
        self.mech_types_der = encode_mech_types(&mech_types);
        self.state = ClientState::AwaitChallenge;
        NegTokenInit {
            mech_types,
            mech_token: Some(self.ntlm.negotiate()),
            ..Default::default()
        }
        .encode()
    }

    pub fn step(&mut self, input: &[u8]) -> Result<ClientStep, AuthError> {
        let state = std::mem::replace(&mut self.state, ClientState::Failed);
        match state {
            ClientState::AwaitChallenge => {
                let resp = expect_resp(input)?;
                if resp
                    .supported_mech
                    .as_ref()
                    .is_some_and(|m| m.content() != OID_NTLMSSP)
                {
                    return Err(AuthError::NoSupportedMech);
                }
                let chal = resp
                    .response_token
                    .ok_or(AuthError::Malformed("no NTLM CHALLENGE"))?;
                let auth = self.ntlm.authenticate(&chal, &self.entropy)?;
                let mut out = NegTokenResp {
                    response_token: Some(auth),
                    ..Default::default()
                };
                // MS-SPNG 3.2.5.1 / 3.3.5.1: with NTLM signing, send a
                // mechListMIC over our MechTypeList.
                if self.ntlm.can_sign() {
                    let mut sec = self.ntlm.session_security()?;
                    out.mech_list_mic = Some(sec.sign(&self.mech_types_der).to_vec());
                    self.sec = Some(sec);
                    self.sent_mic = true;
                }
                self.state = ClientState::AwaitResult;
                Ok(ClientStep::Send(out.encode()))
            }
            ClientState::AwaitResult => {
                let resp = expect_resp(input)?;
                match (&resp.mech_list_mic, self.sec.as_mut()) {
                    (Some(mic), Some(sec)) => {
                        sec.verify(&self.mech_types_der, mic)?;
                        sec.reset();
                    }
                    (None, Some(_)) if self.sent_mic => return Err(AuthError::MechListMic),
                    _ => {}
                }
                if resp.neg_state != Some(NegState::AcceptCompleted) {
                    return Err(AuthError::State("server did not complete"));
                }
                self.state = ClientState::Done;
                Ok(ClientStep::Done)
            }
            ClientState::Start => Err(AuthError::State("initial_token() first")),
            ClientState::Done | ClientState::Failed => {
                Err(AuthError::State("SPNEGO exchange already finished"))
            }
        }
    }

    pub fn is_done(&self) -> bool {
        self.state == ClientState::Done
    }

    /// The SMB2 session key (ExportedSessionKey), once AUTHENTICATE was built.
    pub fn session_key(&self) -> Option<[u8; 16]> {
        self.ntlm.session_key()
    }

    /// Once done, the session security for what follows (DCE/RPC calls):
    /// the one the mechListMIC exchange used, or a fresh one without it
    /// (see [`SpnegoServer::take_session_security`]).
    pub fn take_session_security(&mut self) -> Result<NtlmSecurity, AuthError> {
        if self.state != ClientState::Done {
            return Err(AuthError::State("SPNEGO not finished"));
        }
        match self.sec.take() {
            Some(sec) => Ok(sec),
            None => self.ntlm.session_security(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::ntlmssp::nt_hash;
    use proptest::prelude::*;

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    #[test]
    fn initial_token_matches_windows_layout() {
        let t = server_initial_token();
        // 60 .. 06 06 2b0601050502 a0 .. 30 .. a0 0e 30 0c 06 0a <ntlm> a3 .. 30 .. a0 .. 1b 24 <hint>
        let mut expected =
            h("604806062b0601050502a03e303ca00e300c060a2b06010401823702020aa32a3028a0261b24");
        expected.extend_from_slice(NEG_HINT_NAME.as_bytes());
        assert_eq!(t, expected);
        match parse_token(&t).unwrap() {
            Token::Init(init) => {
                assert_eq!(init.mech_types, vec![ntlm_oid()]);
                assert_eq!(init.hint_name.as_deref(), Some(NEG_HINT_NAME));
            }
            other => panic!("{other:?}"),
        }
        assert!(SpnegoClient::server_offers_ntlm(&t));
    }

    #[test]
    fn resp_round_trip() {
        let r = NegTokenResp {
            neg_state: Some(NegState::AcceptIncomplete),
            supported_mech: Some(ntlm_oid()),
            response_token: Some(vec![1, 2, 3]),
            mech_list_mic: Some(vec![4; 16]),
        };
        assert_eq!(parse_token(&r.encode()).unwrap(), Token::Resp(r));
    }

    fn users(u: &str, _d: &str) -> Option<[u8; 16]> {
        u.eq_ignore_ascii_case("alice").then(|| nt_hash("pw"))
    }

    fn server() -> SpnegoServer {
        SpnegoServer::new(NtlmServer::new(
            [0x11; 8],
            133_500_000_000_000_000,
            "BRAID",
            "braid.local",
            "WORKGROUP",
        ))
    }

    const E: ClientEntropy = ClientEntropy {
        client_challenge: [5; 8],
        random_session_key: [6; 16],
        timestamp: 0,
    };

    #[test]
    fn spnego_round_trip() {
        let mut s = server();
        let mut c = SpnegoClient::new(NtlmClient::new("Alice", "WORKGROUP", "pw"), E);
        let t1 = c.initial_token();
        let SpnegoStep::Continue(t2) = s.step(&t1, &users).unwrap() else {
            panic!()
        };
        let ClientStep::Send(t3) = c.step(&t2).unwrap() else {
            panic!()
        };
        let SpnegoStep::Done { token, outcome } = s.step(&t3, &users).unwrap() else {
            panic!()
        };
        assert_eq!(outcome.user, "Alice");
        assert_eq!(outcome.session_key, [6; 16]);
        assert_eq!(c.step(&token).unwrap(), ClientStep::Done);
        assert_eq!(c.session_key(), Some([6; 16]));
        assert!(s.step(&t3, &users).is_err());
    }

    #[test]
    fn spnego_wrong_password() {
        let mut s = server();
        let mut c = SpnegoClient::new(NtlmClient::new("alice", "", "nope"), E);
        let SpnegoStep::Continue(t2) = s.step(&c.initial_token(), &users).unwrap() else {
            panic!()
        };
        let ClientStep::Send(t3) = c.step(&t2).unwrap() else {
            panic!()
        };
        let err = s.step(&t3, &users).unwrap_err();
        assert_eq!(err, AuthError::LogonFailure);
        assert_eq!(err.nt_status(), crate::NtStatus::LOGON_FAILURE);
    }

    #[test]
    fn spnego_bad_mech_list_mic() {
        let mut s = server();
        let mut c = SpnegoClient::new(NtlmClient::new("alice", "", "pw"), E);
        let SpnegoStep::Continue(t2) = s.step(&c.initial_token(), &users).unwrap() else {
            panic!()
        };
        let ClientStep::Send(t3) = c.step(&t2).unwrap() else {
            panic!()
        };
        let Token::Resp(mut r) = parse_token(&t3).unwrap() else {
            panic!()
        };
        r.mech_list_mic.as_mut().unwrap()[5] ^= 1;
        assert_eq!(
            s.step(&r.encode(), &users).unwrap_err(),
            AuthError::MechListMic
        );
    }

    #[test]
    fn spnego_mic_in_separate_round() {
        // Client sends AUTHENTICATE (with NTLM MIC) but no mechListMIC: the
        // server sends its MIC with accept-incomplete and waits for the
        // client's (Samba's behaviour).
        let mut s = server();
        let mut c = SpnegoClient::new(NtlmClient::new("alice", "", "pw"), E);
        let SpnegoStep::Continue(t2) = s.step(&c.initial_token(), &users).unwrap() else {
            panic!()
        };
        let ClientStep::Send(t3) = c.step(&t2).unwrap() else {
            panic!()
        };
        let Token::Resp(mut r) = parse_token(&t3).unwrap() else {
            panic!()
        };
        let mic = r.mech_list_mic.take().unwrap();
        let SpnegoStep::Continue(t4) = s.step(&r.encode(), &users).unwrap() else {
            panic!()
        };
        let Token::Resp(r4) = parse_token(&t4).unwrap() else {
            panic!()
        };
        assert_eq!(r4.neg_state, Some(NegState::AcceptIncomplete));
        assert!(r4.mech_list_mic.is_some());
        let last = NegTokenResp {
            mech_list_mic: Some(mic),
            ..Default::default()
        }
        .encode();
        let SpnegoStep::Done { outcome, .. } = s.step(&last, &users).unwrap() else {
            panic!()
        };
        assert_eq!(outcome.user, "alice");
    }

    #[test]
    fn empty_first_buffer_gets_init_token() {
        let mut s = server();
        assert_eq!(
            s.step(&[], &users).unwrap(),
            SpnegoStep::Continue(server_initial_token())
        );
        let mut c = SpnegoClient::new(NtlmClient::new("alice", "", "pw"), E);
        let SpnegoStep::Continue(t2) = s.step(&c.initial_token(), &users).unwrap() else {
            panic!()
        };
        let ClientStep::Send(t3) = c.step(&t2).unwrap() else {
            panic!()
        };
        assert!(matches!(
            s.step(&t3, &users).unwrap(),
            SpnegoStep::Done { .. }
        ));
    }

    #[test]
    fn raw_ntlmssp() {
        let mut s = server();
        let mut c = NtlmClient::new("alice", "", "pw");
        let SpnegoStep::Continue(chal) = s.step(&c.negotiate(), &users).unwrap() else {
            panic!()
        };
        assert!(chal.starts_with(ntlmssp::SIGNATURE));
        let auth = c.authenticate(&chal, &E).unwrap();
        let SpnegoStep::Done { token, outcome } = s.step(&auth, &users).unwrap() else {
            panic!()
        };
        assert!(token.is_empty());
        assert_eq!(outcome.session_key, [6; 16]);
    }

    #[test]
    fn kerberos_first_then_ntlm() {
        // mechTypes {MS-KRB5, KRB5, NTLMSSP} with a Kerberos optimistic token:
        // the server picks NTLMSSP, asks for a MIC, and waits for NEGOTIATE.
        let mut s = server();
        let mut c = NtlmClient::new("alice", "", "pw");
        let mech_types: Vec<Oid> = [OID_MS_KRB5, OID_KRB5, OID_NTLMSSP]
            .iter()
            .map(|o| Oid::from_der_content(o).unwrap())
            .collect();
        let mech_types_der = encode_mech_types(&mech_types);
        let init = NegTokenInit {
            mech_types,
            mech_token: Some(vec![0x60, 0]),
            ..Default::default()
        }
        .encode();
        let SpnegoStep::Continue(t2) = s.step(&init, &users).unwrap() else {
            panic!()
        };
        let Token::Resp(r2) = parse_token(&t2).unwrap() else {
            panic!()
        };
        assert_eq!(r2.neg_state, Some(NegState::RequestMic));
        assert_eq!(r2.supported_mech, Some(ntlm_oid()));
        assert_eq!(r2.response_token, None);
        let t3 = NegTokenResp {
            response_token: Some(c.negotiate()),
            ..Default::default()
        }
        .encode();
        let SpnegoStep::Continue(t4) = s.step(&t3, &users).unwrap() else {
            panic!()
        };
        let Token::Resp(r4) = parse_token(&t4).unwrap() else {
            panic!()
        };
        let auth = c.authenticate(&r4.response_token.unwrap(), &E).unwrap();
        let mut sec = c.session_security().unwrap();
        let mic = sec.sign(&mech_types_der).to_vec();
        let t5 = NegTokenResp {
            response_token: Some(auth),
            mech_list_mic: Some(mic),
            ..Default::default()
        }
        .encode();
        let SpnegoStep::Done { token, .. } = s.step(&t5, &users).unwrap() else {
            panic!()
        };
        let Token::Resp(r6) = parse_token(&token).unwrap() else {
            panic!()
        };
        sec.verify(&mech_types_der, &r6.mech_list_mic.unwrap())
            .unwrap();
    }

    #[test]
    fn no_ntlm_offered() {
        let mech_types = vec![Oid::from_der_content(OID_KRB5).unwrap()];
        let init = NegTokenInit {
            mech_types,
            ..Default::default()
        }
        .encode();
        assert_eq!(
            server().step(&init, &users).unwrap_err(),
            AuthError::NoSupportedMech
        );
    }

    /// Replays a token exchange captured from pyspnego's client against a
    /// server with the same parameters: every server token must come out
    /// byte-identical and the exchange must succeed.
    fn replay(fixture: &str) -> AuthOutcome {
        let lines: Vec<&str> = fixture.lines().filter(|l| !l.starts_with('#')).collect();
        let mut s = SpnegoServer::new(NtlmServer::new(
            [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef],
            133_500_000_000_000_000,
            "BRAID",
            "braid.example.com",
            "WORKGROUP",
        ));
        let lookup = |u: &str, _: &str| {
            u.eq_ignore_ascii_case("alice")
                .then(|| nt_hash("S3cret-pw"))
        };
        for pair in lines.chunks(2) {
            let want = if pair[1] == "-" { vec![] } else { h(pair[1]) };
            match s.step(&h(pair[0]), &lookup).unwrap() {
                SpnegoStep::Continue(t) => assert_eq!(t, want),
                SpnegoStep::Done { token, outcome } => {
                    assert_eq!(token, want);
                    return outcome;
                }
            }
        }
        panic!("exchange did not finish");
    }

    #[test]
    fn pyspnego_negotiate_fixture() {
        let out = replay(include_str!("testdata/pyspnego_negotiate.hex"));
        assert_eq!(out.user, "alice");
        assert_eq!(
            hex::encode(out.session_key),
            "ff2e29949c49d02694dbd3f224870a75"
        );
    }

    #[test]
    fn samba_gensec_fixture() {
        let out = replay(include_str!("testdata/samba_spnego.hex"));
        assert_eq!(
            (out.user.as_str(), out.domain.as_str()),
            ("alice", "WORKGROUP")
        );
        assert_eq!(
            hex::encode(out.session_key),
            "a7ad987f237b7615b54fff3f38ef6d34"
        );
    }

    #[test]
    fn pyspnego_raw_ntlm_fixture() {
        let out = replay(include_str!("testdata/pyspnego_ntlm.hex"));
        assert_eq!(out.user, "alice");
        assert_eq!(
            hex::encode(out.session_key),
            "1c38ec50cbcb39e35516e5fcf12bcada"
        );
    }

    proptest! {
        #[test]
        fn random_tokens_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_token(&bytes);
            let _ = server().step(&bytes, &users);
            let mut wrapped = vec![0x60];
            der::write_length(&mut wrapped, bytes.len() + 8);
            wrapped.extend_from_slice(&[6, 6]);
            wrapped.extend_from_slice(OID_SPNEGO);
            wrapped.extend_from_slice(&bytes);
            let _ = server().step(&wrapped, &users);
            let _ = server().step(&der::tlv(0xa1, &bytes), &users);
        }

        #[test]
        fn mutated_exchange_never_panics(i in any::<usize>(), v in any::<u8>(), which in 0u8..2) {
            let mut s = server();
            let mut c = SpnegoClient::new(NtlmClient::new("alice", "", "pw"), E);
            let mut t1 = c.initial_token();
            if which == 0 { let n = t1.len(); t1[i % n] = v; }
            let Ok(SpnegoStep::Continue(t2)) = s.step(&t1, &users) else { return Ok(()) };
            let Ok(ClientStep::Send(mut t3)) = c.step(&t2) else { return Ok(()) };
            if which == 1 { let n = t3.len(); t3[i % n] = v; }
            let _ = s.step(&t3, &users);
        }
    }
}
