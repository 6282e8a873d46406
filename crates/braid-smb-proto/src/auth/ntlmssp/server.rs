//! The server side of NTLMSSP: CHALLENGE out, AUTHENTICATE verified (MS-NLMP 3.2.5).

use super::*;

// ---- server ---------------------------------------------------------------

/// Result of a successful AUTHENTICATE.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthOutcome {
    pub user: String,
    pub domain: String,
    pub workstation: String,
    /// ExportedSessionKey (MS-NLMP 3.1.1.1): the SMB2 session key.
    pub session_key: [u8; 16],
    /// Empty user name and empty NT response (MS-NLMP 3.2.5.1.2).
    pub anonymous: bool,
}

impl std::fmt::Debug for AuthOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthOutcome")
            .field("user", &self.user)
            .field("domain", &self.domain)
            .field("workstation", &self.workstation)
            .field("anonymous", &self.anonymous)
            .finish_non_exhaustive()
    }
}

/// What the server learnt besides the outcome, for session security.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifiedAuth {
    pub neg_flags: u32,
    pub mic_present: bool,
    pub anonymous: bool,
}

/// Verifies an AUTHENTICATE message against the NEGOTIATE and CHALLENGE
/// messages of the same exchange (MS-NLMP 3.2.5.1.2, 3.3.2).
///
/// `lookup(user, domain)` returns the user's NT hash (NTOWFv1). The domain is
/// tried as sent, then empty (MS-NLMP 3.2.5.1.2: "NTLM servers SHOULD
/// support NTLM clients which incorrectly use NIL for the UserDom").
pub fn verify_authenticate(
    negotiate_msg: &[u8],
    challenge_msg: &[u8],
    auth_msg: &[u8],
    lookup: &dyn Fn(&str, &str) -> Option<[u8; 16]>,
) -> Result<(AuthOutcome, VerifiedAuth), AuthError> {
    let chal = ChallengeMessage::decode(challenge_msg)?;
    let auth = AuthenticateMessage::decode(auth_msg)?;
    // MS-NLMP 3.2.5.1.2: NegFlg is what both sides agreed on.
    let neg_flags = if auth.flags != 0 {
        chal.flags & auth.flags
    } else {
        chal.flags
    };

    let anonymous = auth.user.is_empty()
        && auth.nt_response.is_empty()
        && (auth.lm_response.is_empty() || auth.lm_response == [0]);

    let (session_base_key, mic_present) = if anonymous {
        // MS-NLMP 3.3.2: anonymous -> SessionBaseKey = Z(16), no MIC.
        ([0u8; 16], false)
    } else {
        if auth.nt_response.len() <= 24 {
            // 24 bytes is an NTLMv1 response; empty is LM-only.
            return Err(AuthError::LogonFailure);
        }
        if auth.nt_response.len() < 16 + 28 {
            return Err(AuthError::Malformed("NTLMv2 response too short"));
        }
        let (proof, temp) = auth.nt_response.split_at(16);
        // NTLMv2_CLIENT_CHALLENGE (2.2.2.7): AV pairs start at offset 28. A
        // response that does not parse is malformed whatever its proof
        // (INVALID_PARAMETER, as Windows and Samba answer: smbtorture
        // smb2.session.ntlmssp_bug14932), and says nothing about the password.
        let pairs = parse_av_pairs(&temp[28..])?;
        let nt_hash = lookup(&auth.user, &auth.domain).ok_or(AuthError::LogonFailure)?;
        let mut domains = vec![auth.domain.as_str()];
        if !auth.domain.is_empty() {
            domains.push("");
        }
        let key = domains
            .iter()
            .map(|d| ntowfv2_from_hash(&nt_hash, &auth.user, d))
            .find(|k| ct_eq(&nt_proof_str(k, &chal.server_challenge, temp), proof))
            .ok_or(AuthError::LogonFailure)?;
        let proof: [u8; 16] = proof.try_into().expect("16 bytes");
        (
            session_base_key(&key, &proof),
            av_flags(&pairs) & av::FLAG_MIC_PRESENT != 0,
        )
    };

    // MS-NLMP 3.4.5.1 KXKEY: for NTLMv2, KeyExchangeKey = SessionBaseKey.
    let kxkey = session_base_key;
    // MS-NLMP 3.2.5.1.2: with KEY_EXCH the client sent
    // RC4K(KeyExchangeKey, ExportedSessionKey).
    let exported =
        if neg_flags & NEGOTIATE_KEY_EXCH != 0 && auth.encrypted_random_session_key.len() == 16 {
            let k = rc4k(&kxkey, &auth.encrypted_random_session_key);
            <[u8; 16]>::try_from(&k[..]).expect("16 bytes")
        } else if neg_flags & NEGOTIATE_KEY_EXCH != 0
            && neg_flags & (NEGOTIATE_SIGN | NEGOTIATE_SEAL) != 0
            && !anonymous
        {
            return Err(AuthError::Malformed(
                "KEY_EXCH negotiated without an encrypted session key",
            ));
        } else {
            kxkey
        };

    // MS-NLMP 3.2.5.1.2: MIC = HMAC_MD5(ExportedSessionKey,
    //   ConcatenationOf(NEGOTIATE_MESSAGE, CHALLENGE_MESSAGE, AUTHENTICATE_MESSAGE))
    // with the MIC field zeroed.
    if mic_present {
        let mic = auth.mic.ok_or(AuthError::Malformed(
            "MsvAvFlags says MIC but there is no room",
        ))?;
        let mut zeroed = auth_msg.to_vec();
        zeroed[MIC_OFFSET..MIC_OFFSET + 16].fill(0);
        let expected = hmac_md5(&exported, &[negotiate_msg, challenge_msg, &zeroed]);
        if !ct_eq(&expected, &mic) {
            return Err(AuthError::MicMismatch);
        }
    }

    Ok((
        AuthOutcome {
            user: auth.user,
            domain: auth.domain,
            workstation: auth.workstation,
            session_key: exported,
            anonymous,
        },
        VerifiedAuth {
            neg_flags,
            mic_present,
            anonymous,
        },
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerState {
    AwaitNegotiate,
    AwaitAuthenticate,
    Done,
    Failed,
}

/// Server side of NTLMSSP: NEGOTIATE in, CHALLENGE out, AUTHENTICATE in.
pub struct NtlmServer {
    server_challenge: [u8; 8],
    timestamp: u64,
    netbios_name: String,
    dns_name: String,
    domain: String,
    state: ServerState,
    negotiate_msg: Vec<u8>,
    challenge_msg: Vec<u8>,
    verified: Option<(VerifiedAuth, [u8; 16])>,
}

impl std::fmt::Debug for NtlmServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NtlmServer")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl NtlmServer {
    /// `timestamp` is the current time as a FILETIME (100 ns since 1601);
    /// `server_challenge` must be fresh random bytes for every exchange.
    pub fn new(
        server_challenge: [u8; 8],
        timestamp: u64,
        netbios_name: &str,
        dns_name: &str,
        domain: &str,
    ) -> Self {
        NtlmServer {
            server_challenge,
            timestamp,
            netbios_name: netbios_name.to_string(),
            dns_name: dns_name.to_string(),
            domain: domain.to_string(),
            state: ServerState::AwaitNegotiate,
            negotiate_msg: Vec::new(),
            challenge_msg: Vec::new(),
            verified: None,
        }
    }

    // MS-NLMP 3.2.5.1.1: the server answers a NEGOTIATE_MESSAGE with a
    // CHALLENGE_MESSAGE.
    pub fn challenge(&mut self, negotiate: &[u8]) -> Result<Vec<u8>, AuthError> {
        if self.state != ServerState::AwaitNegotiate {
            return Err(AuthError::State("NTLM NEGOTIATE after the first message"));
        }
        self.state = ServerState::Failed;
        let neg = NegotiateMessage::decode(negotiate)?;
        let c = neg.flags;
        let mut f = NEGOTIATE_NTLM
            | REQUEST_TARGET
            | TARGET_TYPE_SERVER
            | NEGOTIATE_TARGET_INFO
            | NEGOTIATE_VERSION
            | NEGOTIATE_ALWAYS_SIGN;
        f |= if c & NEGOTIATE_UNICODE != 0 {
            NEGOTIATE_UNICODE
        } else {
            NEGOTIATE_OEM
        };
        f |= c
            & (NEGOTIATE_SIGN
                | NEGOTIATE_SEAL
                | NEGOTIATE_EXTENDED_SESSIONSECURITY
                | NEGOTIATE_128
                | NEGOTIATE_56
                | NEGOTIATE_KEY_EXCH
                | NEGOTIATE_IDENTIFY);
        let unicode = f & NEGOTIATE_UNICODE != 0;
        let dns_domain = match self.dns_name.split_once('.') {
            Some((_, d)) if !d.is_empty() => d.to_string(),
            _ => self.dns_name.clone(),
        };
        // MS-NLMP 3.2.5.1.1: TargetInfo carries the names and MsvAvTimestamp.
        let target_info = encode_av_pairs(&[
            AvPair::string(av::NB_DOMAIN_NAME, &self.domain),
            AvPair::string(av::NB_COMPUTER_NAME, &self.netbios_name),
            AvPair::string(av::DNS_DOMAIN_NAME, &dns_domain),
            AvPair::string(av::DNS_COMPUTER_NAME, &self.dns_name),
            AvPair::timestamp(self.timestamp),
        ]);
        let msg = ChallengeMessage {
            flags: f,
            target_name: encode_string(&self.netbios_name, unicode),
            server_challenge: self.server_challenge,
            target_info,
            version: Some(VERSION),
        }
        .encode();
        self.negotiate_msg = negotiate.to_vec();
        self.challenge_msg = msg.clone();
        self.state = ServerState::AwaitAuthenticate;
        Ok(msg)
    }

    pub fn authenticate(
        &mut self,
        auth: &[u8],
        lookup_nt_hash: &dyn Fn(&str, &str) -> Option<[u8; 16]>,
    ) -> Result<AuthOutcome, AuthError> {
        if self.state != ServerState::AwaitAuthenticate {
            return Err(AuthError::State("NTLM AUTHENTICATE out of order"));
        }
        self.state = ServerState::Failed;
        let (outcome, v) = verify_authenticate(
            &self.negotiate_msg,
            &self.challenge_msg,
            auth,
            lookup_nt_hash,
        )?;
        self.verified = Some((v, outcome.session_key));
        self.state = ServerState::Done;
        Ok(outcome)
    }

    /// Negotiated flags, once AUTHENTICATE was verified.
    pub fn negotiated_flags(&self) -> Option<u32> {
        self.verified.map(|(v, _)| v.neg_flags)
    }

    /// Whether the client put a MIC in AUTHENTICATE (Samba's "new SPNEGO":
    /// the client will send, and expect, a mechListMIC).
    pub fn mic_present(&self) -> bool {
        self.verified.is_some_and(|(v, _)| v.mic_present)
    }

    /// Signing is available: NEGOTIATE_SIGN and extended session security
    /// were negotiated for a non-anonymous session (MS-NLMP 3.4).
    pub fn can_sign(&self) -> bool {
        self.verified.is_some_and(|(v, key)| {
            v.neg_flags & NEGOTIATE_SIGN != 0
                && v.neg_flags & NEGOTIATE_EXTENDED_SESSIONSECURITY != 0
                && !v.anonymous
                && key != [0; 16]
        })
    }

    /// Session security (server role) after a successful AUTHENTICATE.
    pub fn session_security(&self) -> Result<NtlmSecurity, AuthError> {
        let (v, key) = self
            .verified
            .ok_or(AuthError::State("NTLM not authenticated"))?;
        NtlmSecurity::new(v.neg_flags, &key, false)
    }
}
