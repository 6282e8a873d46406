//! The client side of NTLMSSP (MS-NLMP 3.1.5), for Braid's own client and tests.

use super::*;

// ---- client ---------------------------------------------------------------

/// Caller-supplied randomness and time for one client exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientEntropy {
    pub client_challenge: [u8; 8],
    /// ExportedSessionKey when key exchange is negotiated.
    pub random_session_key: [u8; 16],
    /// FILETIME used when the server sends no MsvAvTimestamp.
    pub timestamp: u64,
}

impl ClientEntropy {
    /// Fresh random values from the operating system's RNG, with `timestamp`
    /// as given.
    pub fn random(timestamp: u64) -> Self {
        use rand::RngCore;
        let mut e = ClientEntropy {
            client_challenge: [0; 8],
            random_session_key: [0; 16],
            timestamp,
        };
        rand::rngs::OsRng.fill_bytes(&mut e.client_challenge);
        rand::rngs::OsRng.fill_bytes(&mut e.random_session_key);
        e
    }
}

/// Flags Braid's client asks for (as Windows 10 does, minus OEM/LM).
pub const CLIENT_FLAGS: u32 = NEGOTIATE_UNICODE
    | REQUEST_TARGET
    | NEGOTIATE_SIGN
    | NEGOTIATE_SEAL
    | NEGOTIATE_NTLM
    | NEGOTIATE_ALWAYS_SIGN
    | NEGOTIATE_EXTENDED_SESSIONSECURITY
    | NEGOTIATE_TARGET_INFO
    | NEGOTIATE_VERSION
    | NEGOTIATE_128
    | NEGOTIATE_KEY_EXCH
    | NEGOTIATE_56;

/// Client side of NTLMSSP (NTLMv2 only).
pub struct NtlmClient {
    user: String,
    domain: String,
    workstation: String,
    nt_hash: Option<[u8; 16]>,
    pub(super) negotiate_msg: Vec<u8>,
    result: Option<(u32, [u8; 16])>,
}

impl std::fmt::Debug for NtlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NtlmClient")
            .field("user", &self.user)
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

impl NtlmClient {
    pub fn new(user: &str, domain: &str, password: &str) -> Self {
        Self::from_nt_hash(user, domain, nt_hash(password))
    }

    pub fn from_nt_hash(user: &str, domain: &str, nt_hash: [u8; 16]) -> Self {
        NtlmClient {
            user: user.to_string(),
            domain: domain.to_string(),
            workstation: String::new(),
            nt_hash: Some(nt_hash),
            negotiate_msg: Vec::new(),
            result: None,
        }
    }

    /// Anonymous logon: empty user, empty NT response (MS-NLMP 3.3.2).
    pub fn anonymous() -> Self {
        NtlmClient {
            user: String::new(),
            domain: String::new(),
            workstation: String::new(),
            nt_hash: None,
            negotiate_msg: Vec::new(),
            result: None,
        }
    }

    pub fn with_workstation(mut self, workstation: &str) -> Self {
        self.workstation = workstation.to_string();
        self
    }

    // MS-NLMP 3.1.5.1.1: the client sends a NEGOTIATE_MESSAGE.
    pub fn negotiate(&mut self) -> Vec<u8> {
        let msg = NegotiateMessage {
            flags: CLIENT_FLAGS,
            domain: vec![],
            workstation: vec![],
            version: Some(VERSION),
        }
        .encode();
        self.negotiate_msg = msg.clone();
        msg
    }

    // MS-NLMP 3.1.5.1.2: the client answers a CHALLENGE_MESSAGE with an
    // AUTHENTICATE_MESSAGE.
    pub fn authenticate(
        &mut self,
        challenge: &[u8],
        entropy: &ClientEntropy,
    ) -> Result<Vec<u8>, AuthError> {
        if self.negotiate_msg.is_empty() {
            return Err(AuthError::State("NTLM client: negotiate() first"));
        }
        let chal = ChallengeMessage::decode(challenge)?;
        let neg_flags = chal.flags & (CLIENT_FLAGS | TARGET_TYPE_SERVER | TARGET_TYPE_DOMAIN);
        if neg_flags & NEGOTIATE_UNICODE == 0 {
            return Err(AuthError::Unsupported("server did not agree to Unicode"));
        }
        let server_pairs = parse_av_pairs(&chal.target_info)?;
        let server_time = av_get(&server_pairs, av::TIMESTAMP)
            .and_then(|v| <[u8; 8]>::try_from(v).ok())
            .map(u64::from_le_bytes);

        let (lm, nt, base_key, with_mic) = match self.nt_hash {
            None => (vec![0u8], Vec::new(), [0u8; 16], false),
            Some(hash) => {
                let key = ntowfv2_from_hash(&hash, &self.user, &self.domain);
                // MS-NLMP 3.1.5.1.2: with MsvAvTimestamp the client uses the
                // server's time, sends Z(24) as LM response, sets MsvAvFlags
                // bit 0x2 and fills in the MIC.
                let mut pairs: Vec<AvPair> = server_pairs
                    .iter()
                    .filter(|p| p.id != av::FLAGS)
                    .cloned()
                    .collect();
                let with_mic = server_time.is_some();
                let mut avf = av_flags(&server_pairs);
                if with_mic {
                    avf |= av::FLAG_MIC_PRESENT;
                }
                if avf != 0 {
                    pairs.push(AvPair::flags(avf));
                }
                pairs.push(AvPair {
                    id: av::CHANNEL_BINDINGS,
                    value: vec![0; 16],
                });
                let time = server_time.unwrap_or(entropy.timestamp);
                let temp = ntlmv2_temp(time, &entropy.client_challenge, &encode_av_pairs(&pairs));
                let proof = nt_proof_str(&key, &chal.server_challenge, &temp);
                let mut nt = proof.to_vec();
                nt.extend_from_slice(&temp);
                let lm = if with_mic {
                    vec![0u8; 24]
                } else {
                    let mut lm =
                        hmac_md5(&key, &[&chal.server_challenge, &entropy.client_challenge])
                            .to_vec();
                    lm.extend_from_slice(&entropy.client_challenge);
                    lm
                };
                (lm, nt, session_base_key(&key, &proof), with_mic)
            }
        };
        let (exported, enc_key) = if neg_flags & NEGOTIATE_KEY_EXCH != 0 {
            (
                entropy.random_session_key,
                rc4k(&base_key, &entropy.random_session_key),
            )
        } else {
            (base_key, Vec::new())
        };
        let mut auth = AuthenticateMessage {
            lm_response: lm,
            nt_response: nt,
            domain: self.domain.clone(),
            user: self.user.clone(),
            workstation: self.workstation.clone(),
            encrypted_random_session_key: enc_key,
            flags: neg_flags,
            version: Some(VERSION),
            mic: None,
        };
        let mut msg = auth.encode();
        if with_mic {
            let mic = hmac_md5(&exported, &[&self.negotiate_msg, challenge, &msg]);
            auth.mic = Some(mic);
            msg[MIC_OFFSET..MIC_OFFSET + 16].copy_from_slice(&mic);
        }
        self.result = Some((neg_flags, exported));
        Ok(msg)
    }

    /// ExportedSessionKey, after `authenticate`.
    pub fn session_key(&self) -> Option<[u8; 16]> {
        self.result.map(|(_, k)| k)
    }

    pub fn negotiated_flags(&self) -> Option<u32> {
        self.result.map(|(f, _)| f)
    }

    pub fn can_sign(&self) -> bool {
        self.nt_hash.is_some()
            && self.result.is_some_and(|(f, _)| {
                f & NEGOTIATE_SIGN != 0 && f & NEGOTIATE_EXTENDED_SESSIONSECURITY != 0
            })
    }

    pub fn session_security(&self) -> Result<NtlmSecurity, AuthError> {
        let (f, key) = self
            .result
            .ok_or(AuthError::State("NTLM not authenticated"))?;
        NtlmSecurity::new(f, &key, true)
    }
}
