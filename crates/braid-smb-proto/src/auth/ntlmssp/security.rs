//! NTLM session security (MS-NLMP 3.4): signing and sealing keys, GSS_GetMIC.

use super::*;

// ---- session security (MS-NLMP 3.4) --------------------------------------

/// NTLM session security with extended session security: per-direction
/// signing keys, sealing RC4 handles and sequence numbers
/// (connection-oriented mode, MS-NLMP 3.4.1 / 3.4.4.2).
pub struct NtlmSecurity {
    flags: u32,
    send_sign: [u8; 16],
    recv_sign: [u8; 16],
    send_seal_key: [u8; 16],
    recv_seal_key: [u8; 16],
    pub(super) send_seal: Rc4<U16>,
    recv_seal: Rc4<U16>,
    send_seq: u32,
    recv_seq: u32,
}

impl std::fmt::Debug for NtlmSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NtlmSecurity")
            .field("flags", &format_args!("{:#010x}", self.flags))
            .field("send_seq", &self.send_seq)
            .field("recv_seq", &self.recv_seq)
            .finish_non_exhaustive()
    }
}

impl NtlmSecurity {
    /// Derives the keys of MS-NLMP 3.4.5.2/3.4.5.3 for one side. Requires
    /// extended session security (without it there are no signing keys).
    pub fn new(
        neg_flags: u32,
        exported_session_key: &[u8; 16],
        is_client: bool,
    ) -> Result<Self, AuthError> {
        if neg_flags & NEGOTIATE_EXTENDED_SESSIONSECURITY == 0 {
            return Err(AuthError::Unsupported(
                "NTLM signing without extended session security",
            ));
        }
        let cs = sign_key(exported_session_key, true);
        let ss = sign_key(exported_session_key, false);
        let cx = seal_key(neg_flags, exported_session_key, true);
        let sx = seal_key(neg_flags, exported_session_key, false);
        let (send_sign, recv_sign, send_seal_key, recv_seal_key) = if is_client {
            (cs, ss, cx, sx)
        } else {
            (ss, cs, sx, cx)
        };
        Ok(NtlmSecurity {
            flags: neg_flags,
            send_sign,
            recv_sign,
            send_seal_key,
            recv_seal_key,
            send_seal: Rc4::<U16>::new(&send_seal_key.into()),
            recv_seal: Rc4::<U16>::new(&recv_seal_key.into()),
            send_seq: 0,
            recv_seq: 0,
        })
    }

    // MS-NLMP 3.4.4.2: with extended session security,
    //   Checksum = HMAC_MD5(SigningKey, ConcatenationOf(SeqNum, Message))[0..7]
    //   if KEY_EXCH: Checksum = RC4(Handle, Checksum)
    //   Signature = Version(1) || Checksum || SeqNum
    fn mac(key: &[u8; 16], handle: &mut Rc4<U16>, flags: u32, seq: u32, msg: &[u8]) -> [u8; 16] {
        let full = hmac_md5(key, &[&seq.to_le_bytes(), msg]);
        let mut checksum = [0u8; 8];
        checksum.copy_from_slice(&full[..8]);
        if flags & NEGOTIATE_KEY_EXCH != 0 {
            handle.apply_keystream(&mut checksum);
        }
        let mut sig = [0u8; 16];
        sig[..4].copy_from_slice(&1u32.to_le_bytes());
        sig[4..12].copy_from_slice(&checksum);
        sig[12..].copy_from_slice(&seq.to_le_bytes());
        sig
    }

    /// GSS_GetMIC (MS-NLMP 3.4.4 / 3.4.6): signs an outgoing message.
    pub fn sign(&mut self, msg: &[u8]) -> [u8; 16] {
        let sig = Self::mac(
            &self.send_sign,
            &mut self.send_seal,
            self.flags,
            self.send_seq,
            msg,
        );
        self.send_seq = self.send_seq.wrapping_add(1);
        sig
    }

    /// GSS_VerifyMIC: checks an incoming message's signature.
    pub fn verify(&mut self, msg: &[u8], signature: &[u8]) -> Result<(), AuthError> {
        let expected = Self::mac(
            &self.recv_sign,
            &mut self.recv_seal,
            self.flags,
            self.recv_seq,
            msg,
        );
        self.recv_seq = self.recv_seq.wrapping_add(1);
        if ct_eq(&expected, signature) {
            Ok(())
        } else {
            Err(AuthError::MechListMic)
        }
    }

    /// MS-NLMP 3.4.3 SEAL as GSS_WrapEx (3.4.6) applies it for DCE/RPC:
    /// `pdu[data]` is encrypted in place, and the signature covers all of
    /// `pdu` as it was before (3.4.6.1: with NTLMv2, every buffer is
    /// signed, the ones sent in clear included). The RC4 handle encrypts
    /// the data first and then the checksum, as 3.4.3's SEAL() orders them.
    pub fn seal(&mut self, pdu: &mut [u8], data: std::ops::Range<usize>) -> [u8; 16] {
        let seq = self.send_seq;
        let full = hmac_md5(&self.send_sign, &[&seq.to_le_bytes(), pdu]);
        self.send_seal.apply_keystream(&mut pdu[data]);
        let mut checksum = [0u8; 8];
        checksum.copy_from_slice(&full[..8]);
        if self.flags & NEGOTIATE_KEY_EXCH != 0 {
            self.send_seal.apply_keystream(&mut checksum);
        }
        self.send_seq = seq.wrapping_add(1);
        let mut sig = [0u8; 16];
        sig[..4].copy_from_slice(&1u32.to_le_bytes());
        sig[4..12].copy_from_slice(&checksum);
        sig[12..].copy_from_slice(&seq.to_le_bytes());
        sig
    }

    /// MS-NLMP 3.4.3 UNSEAL: decrypts `pdu[data]` in place, then checks
    /// `signature` over the whole of `pdu`, now in clear.
    pub fn unseal(
        &mut self,
        pdu: &mut [u8],
        data: std::ops::Range<usize>,
        signature: &[u8],
    ) -> Result<(), AuthError> {
        self.recv_seal.apply_keystream(&mut pdu[data]);
        self.verify(pdu, signature)
    }

    /// Restarts the RC4 handles, as Windows and Samba do after the SPNEGO
    /// mechListMIC exchange. The sequence numbers go on: each side signed
    /// and checked one MIC, so what follows (DCE/RPC calls) starts at 1
    /// (Samba's gensec_may_reset_crypto with reset_full false once the MIC
    /// was checked; pyspnego's reset_rc4_state).
    pub fn reset(&mut self) {
        self.send_seal = Rc4::<U16>::new(&self.send_seal_key.into());
        self.recv_seal = Rc4::<U16>::new(&self.recv_seal_key.into());
    }
}
