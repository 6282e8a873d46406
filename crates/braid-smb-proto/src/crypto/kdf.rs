//! Key derivation: SP800-108 counter-mode KDF with HMAC-SHA256
//! (MS-SMB2 3.1.4.2) and the per-session keys of MS-SMB2 3.3.5.5.3 /
//! 3.2.5.3.

use core::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::encryption::Cipher;
use super::CryptoError;

type HmacSha256 = Hmac<Sha256>;

pub const DIALECT_SMB2_0_2: u16 = 0x0202;
pub const DIALECT_SMB2_1: u16 = 0x0210;
pub const DIALECT_SMB3_0: u16 = 0x0300;
pub const DIALECT_SMB3_0_2: u16 = 0x0302;
pub const DIALECT_SMB3_1_1: u16 = 0x0311;

// MS-SMB2 3.3.5.5.3 / 3.2.5.3.1: labels and contexts. The spec gives the
// string lengths including the terminating NUL ("SMB2AESCMAC", 12 bytes), so
// the NUL is part of the label; `kdf` then adds SP800-108's own 0x00
// separator after it.
const LABEL_30_SIGN: &[u8] = b"SMB2AESCMAC\0";
const CONTEXT_30_SIGN: &[u8] = b"SmbSign\0";
const LABEL_30_CIPHER: &[u8] = b"SMB2AESCCM\0";
const CONTEXT_30_SERVER_IN: &[u8] = b"ServerIn \0";
const CONTEXT_30_SERVER_OUT: &[u8] = b"ServerOut\0";
const LABEL_30_APP: &[u8] = b"SMB2APP\0";
const CONTEXT_30_APP: &[u8] = b"SmbRpc\0";
const LABEL_311_SIGN: &[u8] = b"SMBSigningKey\0";
const LABEL_311_C2S: &[u8] = b"SMBC2SCipherKey\0";
const LABEL_311_S2C: &[u8] = b"SMBS2CCipherKey\0";
const LABEL_311_APP: &[u8] = b"SMBAppKey\0";

// SP800-108 section 5.1 (KDF in counter mode), as MS-SMB2 3.1.4.2 profiles it:
// PRF = HMAC-SHA256, r = 32 (a 32-bit big-endian counter i starting at 1,
// placed before the fixed input data), h = 256.
/// SP800-108 counter-mode KDF with HMAC-SHA256 and a 32-bit counter placed
/// before `fixed_input` (the form of the NIST CAVP "BEFORE_FIXED, RLEN=32"
/// vectors). `fixed_input` is used verbatim; the caller encodes L in it.
pub fn sp800_108_counter_hmac_sha256(
    key: &[u8],
    fixed_input: &[u8],
    out_len_bytes: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(out_len_bytes.next_multiple_of(32));
    // HMAC accepts keys of any length; new_from_slice cannot fail for it.
    let prf = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    let mut i: u32 = 1;
    while out.len() < out_len_bytes {
        let mut mac = prf.clone();
        mac.update(&i.to_be_bytes());
        mac.update(fixed_input);
        out.extend_from_slice(&mac.finalize().into_bytes());
        i = i.wrapping_add(1);
    }
    out.truncate(out_len_bytes);
    out
}

// MS-SMB2 3.1.4.2: KDF(Ki, Label, Context) with
// fixed input = Label || 0x00 || Context || [L]_32 (big-endian bits).
/// The SMB 3.x KDF. `label` and `context` are used exactly as given (the
/// SMB labels carry their own trailing NUL); L is `out_len_bytes * 8`.
pub fn kdf(key: &[u8], label: &[u8], context: &[u8], out_len_bytes: usize) -> Vec<u8> {
    let l_bits = u32::try_from(out_len_bytes * 8).expect("KDF output length fits 32 bits");
    let mut fixed = Vec::with_capacity(label.len() + 1 + context.len() + 4);
    fixed.extend_from_slice(label);
    fixed.push(0);
    fixed.extend_from_slice(context);
    fixed.extend_from_slice(&l_bits.to_be_bytes());
    sp800_108_counter_hmac_sha256(key, &fixed, out_len_bytes)
}

fn kdf16(key: &[u8], label: &[u8], context: &[u8]) -> [u8; 16] {
    let v = kdf(key, label, context, 16);
    let mut a = [0u8; 16];
    a.copy_from_slice(&v);
    a
}

// MS-SMB2 3.3.1.8 / 3.2.1.3: Session.SessionKey is the first 16 bytes of the
// GSS cryptographic key, right-padded with zeros when shorter.
fn session_key_16(full: &[u8]) -> [u8; 16] {
    let mut k = [0u8; 16];
    let n = full.len().min(16);
    k[..n].copy_from_slice(&full[..n]);
    k
}

/// The keys of one authenticated session, from the server's point of view.
///
/// `server_in_key`/`server_out_key` are empty when the dialect has no
/// encryption (2.0.2, 2.1) or 3.1.1 negotiated no cipher.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKeys {
    /// Session.SigningKey (for 2.x this is Session.SessionKey itself).
    pub signing_key: [u8; 16],
    /// Session.DecryptionKey: the server decrypts client requests with it
    /// (= the client's EncryptionKey; "ServerIn " / "SMBC2SCipherKey").
    pub server_in_key: Vec<u8>,
    /// Session.EncryptionKey: the server encrypts responses with it
    /// ("ServerOut" / "SMBS2CCipherKey").
    pub server_out_key: Vec<u8>,
    /// Session.ApplicationKey, exported to named-pipe/RPC consumers.
    pub application_key: [u8; 16],
}

impl fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material.
        f.debug_struct("SessionKeys")
            .field("signing_key", &"<redacted>")
            .field("server_in_key_len", &self.server_in_key.len())
            .field("server_out_key_len", &self.server_out_key.len())
            .field("application_key", &"<redacted>")
            .finish()
    }
}

impl Drop for SessionKeys {
    fn drop(&mut self) {
        // Best-effort wipe (no zeroize dependency): volatile writes so the
        // stores are not elided.
        fn wipe(b: &mut [u8]) {
            for x in b.iter_mut() {
                // SAFETY: `x` is a valid, aligned, exclusive reference.
                unsafe { core::ptr::write_volatile(x, 0) };
            }
        }
        wipe(&mut self.signing_key);
        wipe(&mut self.server_in_key);
        wipe(&mut self.server_out_key);
        wipe(&mut self.application_key);
    }
}

// MS-SMB2 3.3.5.5.3 (server) / 3.2.5.3.1 (client): deriving Session.SigningKey,
// Session.EncryptionKey, Session.DecryptionKey and Session.ApplicationKey once
// authentication completes.
/// Derive the session's keys.
///
/// * `session_key`: the full cryptographic key from GSS (NTLM: 16 bytes,
///   Kerberos: up to 32). Signing and application keys always use its first
///   16 bytes (zero-padded); AES-256 ciphers use the full key as the KDF key
///   and L = 256 (as Windows and Samba do).
/// * `preauth_hash`: Session.PreauthIntegrityHashValue, required for 3.1.1.
/// * `cipher`: Connection.CipherId for 3.1.1; ignored before 3.1.1 (3.0 and
///   3.0.2 always use AES-128-CCM).
pub fn derive_session_keys(
    dialect: u16,
    session_key: &[u8],
    preauth_hash: Option<&[u8; 64]>,
    cipher: Option<Cipher>,
) -> Result<SessionKeys, CryptoError> {
    let key16 = session_key_16(session_key);
    match dialect {
        DIALECT_SMB2_0_2 | DIALECT_SMB2_1 => Ok(SessionKeys {
            signing_key: key16,
            server_in_key: Vec::new(),
            server_out_key: Vec::new(),
            application_key: key16,
        }),
        DIALECT_SMB3_0 | DIALECT_SMB3_0_2 => Ok(SessionKeys {
            signing_key: kdf16(&key16, LABEL_30_SIGN, CONTEXT_30_SIGN),
            server_in_key: kdf(&key16, LABEL_30_CIPHER, CONTEXT_30_SERVER_IN, 16),
            server_out_key: kdf(&key16, LABEL_30_CIPHER, CONTEXT_30_SERVER_OUT, 16),
            application_key: kdf16(&key16, LABEL_30_APP, CONTEXT_30_APP),
        }),
        DIALECT_SMB3_1_1 => {
            let h = preauth_hash.ok_or(CryptoError::MissingPreauthHash)?;
            let (server_in_key, server_out_key) = match cipher {
                None => (Vec::new(), Vec::new()),
                Some(c) => {
                    let len = c.key_len();
                    // MS-SMB2 3.3.5.5.3: AES-128 ciphers derive from
                    // Session.SessionKey, AES-256 ones from
                    // Session.FullSessionKey, with L = 128 or 256 (3.1.4.2).
                    let kdk: &[u8] = if len == 16 { &key16 } else { session_key };
                    (
                        kdf(kdk, LABEL_311_C2S, h, len),
                        kdf(kdk, LABEL_311_S2C, h, len),
                    )
                }
            };
            Ok(SessionKeys {
                signing_key: kdf16(&key16, LABEL_311_SIGN, h),
                server_in_key,
                server_out_key,
                application_key: kdf16(&key16, LABEL_311_APP, h),
            })
        }
        other => Err(CryptoError::UnsupportedDialect(other)),
    }
}

// MS-SMB2 3.3.5.5.3 (binding branch) / 3.2.5.3.3: Channel.SigningKey for a
// channel bound to an existing session. 3.0/3.0.2 use the same derivation as
// Session.SigningKey; 3.1.1 uses the PreauthSession hash of the binding
// exchange on the new connection as the context.
/// Signing key of a channel added by session binding.
///
/// `session_key` is the GSS key of the binding authentication and
/// `channel_preauth_hash` the pre-authentication hash of the binding
/// SESSION_SETUP exchange on that connection (3.1.1 only). Binding does not
/// exist before SMB 3.0.
pub fn derive_channel_signing_key(
    dialect: u16,
    session_key: &[u8],
    channel_preauth_hash: Option<&[u8; 64]>,
) -> Result<[u8; 16], CryptoError> {
    let key16 = session_key_16(session_key);
    match dialect {
        DIALECT_SMB3_0 | DIALECT_SMB3_0_2 => Ok(kdf16(&key16, LABEL_30_SIGN, CONTEXT_30_SIGN)),
        DIALECT_SMB3_1_1 => {
            let h = channel_preauth_hash.ok_or(CryptoError::MissingPreauthHash)?;
            Ok(kdf16(&key16, LABEL_311_SIGN, h))
        }
        other => Err(CryptoError::UnsupportedDialect(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    fn h64(s: &str) -> [u8; 64] {
        h(s).try_into().unwrap()
    }

    // NIST CAVP SP800-108 KBKDF, [PRF=HMAC_SHA256] [CTRLOCATION=BEFORE_FIXED]
    // [RLEN=32_BITS], as published in pyca/cryptography's
    // vectors/cryptography_vectors/KDF/nist-800-108-counterkdf-SHA256.txt.
    #[test]
    fn nist_sp800_108_counter_hmac_sha256() {
        let cases = [
            // COUNT=0, L=128
            (
                "dd1d91b7d90b2bd3138533ce92b272fbf8a369316aefe242e659cc0ae238afe0",
                "01322b96b30acd197979444e468e1c5c6859bf1b1cf951b7e725303e237e46b864a145fab25e517b08f8683d0315bb2911d80a0e8aba17f3b413faac",
                "10621342bfb0fd40046c0e29f2cfdbf0",
            ),
            // COUNT=10, L=256
            (
                "e204d6d466aad507ffaf6d6dab0a5b26152c9e21e764370464e360c8fbc765c6",
                "7b03b98d9f94b899e591f3ef264b71b193fba7043c7e953cde23bc5384bc1a6293580115fae3495fd845dadbd02bd6455cf48d0f62b33e62364a3a80",
                "770dfab6a6a4a4bee0257ff335213f78d8287b4fd537d5c1fffa956910e7c779",
            ),
            // COUNT=20, L=160
            (
                "dc60338d884eecb72975c603c27b360605011756c697c4fc388f5176ef81efb1",
                "44d7aa08feba26093c14979c122c2437c3117b63b78841cd10a4bc5ed55c56586ad8986d55307dca1d198edcffbc516a8fbe6152aa428cdd800c062d",
                "29ac07dccf1f28d506cd623e6e3fc2fa255bd60b",
            ),
            // COUNT=30, L=320 (two PRF blocks)
            (
                "c4bedbddb66493e7c7259a3bbbc25f8c7e0ca7fe284d92d431d9cd99a0d214ac",
                "1c69c54766791e315c2cc5c47ecd3ffab87d0d273dd920e70955814c220eacace6a5946542da3dfe24ff626b4897898cafb7db83bdff3c14fa46fd4b",
                "1da47638d6c9c4d04d74d4640bbd42ab814d9e8cc22f4326695239f96b0693f12d0dd1152cf44430",
            ),
            // COUNT=31, L=320
            (
                "22256ca571d5c896db80a8758ff81cf8631d2bc38c7e76f3bafb0c2af540a356",
                "9dd2dcd97b926251b50c6111d988e2951b02accc143702c88920cf36848f7c731756ab0537cb26e22725f11de069e5335802b0cb56c158dd75014791",
                "a11aa3b1a93d2ce117550866c28d6974cf626719385b8868101a71a5d2aa793bc23c3cfdebe52ec9",
            ),
        ];
        for (ki, fixed, ko) in cases {
            let ko = h(ko);
            assert_eq!(
                sp800_108_counter_hmac_sha256(&h(ki), &h(fixed), ko.len()),
                ko
            );
        }
    }

    // Microsoft Open Specifications blog, "Encryption in SMB 3.0: A protocol
    // perspective" (2012-10-05); transcribed in emc-isilon/pike
    // pike/test/test_smb3_encryption_vector.py. The client's EncryptionKey
    // ("ServerIn ") is the server's in-key.
    #[test]
    fn smb30_keys_from_ms_blog() {
        let k = derive_session_keys(
            DIALECT_SMB3_0,
            &h("B4546771B515F766A86735532DD6C4F0"),
            None,
            None,
        )
        .unwrap();
        assert_eq!(k.server_in_key, h("261B72350558F2E9DCF613070383EDBF"));
        assert_eq!(k.server_out_key, h("8FE2B57EC34D2DB5B1A9727F526BBDB5"));
        // 3.0.2 uses the same derivation.
        let k2 = derive_session_keys(
            DIALECT_SMB3_0_2,
            &h("B4546771B515F766A86735532DD6C4F0"),
            None,
            Some(Cipher::Aes128Gcm),
        )
        .unwrap();
        assert_eq!(k, k2);
    }

    // Microsoft Open Specifications blog, "SMB 3.1.1 Encryption in Windows 10"
    // (2015-09-09), AES-128-GCM; transcribed in emc-isilon/pike.
    #[test]
    fn smb311_cipher_keys_from_ms_blog() {
        let preauth = h64(
            "B23F3CBFD69487D9832B79B1594A367CDD950909B774C3A4C412B4FCEA9EDDDB\
             A7DB256BA2EA30E977F11F9B113247578E0E915C6D2A513B8F2FCA5707DC8770",
        );
        let k = derive_session_keys(
            DIALECT_SMB3_1_1,
            &h("419FDDF34C1E001909D362AE7FB6AF79"),
            Some(&preauth),
            Some(Cipher::Aes128Gcm),
        )
        .unwrap();
        assert_eq!(k.server_in_key, h("A2F5E80E5D59103034F32E52F698E5EC"));
        assert_eq!(k.server_out_key, h("748C50868C90F302962A5C35F5F9A8BF"));
    }

    // Microsoft Open Specifications blog, "SMB 3.1.1 Pre-authentication
    // integrity in Windows 10" (2015-08-11): final preauth hash and the
    // resulting signing key.
    #[test]
    fn smb311_signing_key_from_ms_blog() {
        let preauth = h64(
            "0DD13628CC3ED218EF9DF9772D436D0887AB9814BFAE63A80AA845F36909DB79\
             28622DDDAD522D9751640A459762C5A9D6BB084CBB3CE6BDADEF5D5BCE3C6C01",
        );
        let session_key = h("270E1BA896585EEB7AF3472D3B4C75A7");
        let k = derive_session_keys(DIALECT_SMB3_1_1, &session_key, Some(&preauth), None).unwrap();
        assert_eq!(
            k.signing_key.to_vec(),
            h("73FE7A9A77BEF0BDE49C650D8CCB5F76")
        );
        assert!(k.server_in_key.is_empty() && k.server_out_key.is_empty());
        // A bound channel whose binding exchange produced the same hash gets
        // the same key.
        let ch =
            derive_channel_signing_key(DIALECT_SMB3_1_1, &session_key, Some(&preauth)).unwrap();
        assert_eq!(ch, k.signing_key);
    }

    // Cross-checked against smbprotocol 1.17 (Session._smb3kdf, i.e.
    // cryptography's KBKDFHMAC) for the values the MS blogs do not give:
    // 3.0 signing/application keys, 3.1.1 application key, AES-256 keys from
    // a 32-byte (Kerberos) session key.
    #[test]
    fn cross_checked_with_smbprotocol() {
        let sk30 = h("B4546771B515F766A86735532DD6C4F0");
        let k = derive_session_keys(DIALECT_SMB3_0, &sk30, None, None).unwrap();
        assert_eq!(k.signing_key.to_vec(), h(SMB30_SIGNING));
        assert_eq!(k.application_key.to_vec(), h(SMB30_APP));

        let full = h("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
        let preauth = [0x5au8; 64];
        let k = derive_session_keys(
            DIALECT_SMB3_1_1,
            &full,
            Some(&preauth),
            Some(Cipher::Aes256Gcm),
        )
        .unwrap();
        assert_eq!(k.signing_key.to_vec(), h(SMB311_SIGNING_32));
        assert_eq!(k.application_key.to_vec(), h(SMB311_APP_32));
        assert_eq!(k.server_in_key, h(SMB311_C2S_256));
        assert_eq!(k.server_out_key, h(SMB311_S2C_256));
        let k128 = derive_session_keys(
            DIALECT_SMB3_1_1,
            &full,
            Some(&preauth),
            Some(Cipher::Aes128Ccm),
        )
        .unwrap();
        assert_eq!(k128.server_in_key, h(SMB311_C2S_128));
        assert_eq!(k128.signing_key, k.signing_key);
    }

    const SMB30_SIGNING: &str = "f773cd23c18fd1e08ee510cada7cf852";
    const SMB30_APP: &str = "77432f808ce99156b5bc6a3676d730d1";
    const SMB311_SIGNING_32: &str = "81fdbdc767e767d9714ad95af772b214";
    const SMB311_APP_32: &str = "2b730ebb763c8416977efca3b61ea346";
    const SMB311_C2S_256: &str = "9cec6c1301f00a939614cd2ea2d82365c802368ff70e108e564ed22b0f5a7163";
    const SMB311_S2C_256: &str = "4751066ec0043303ac5e29dfa28f8550254bfdc4b12ba2b796dc0012b449606b";
    const SMB311_C2S_128: &str = "c0a7c98c7eb14fa10f56e36db8c395ab";

    #[test]
    fn smb2_uses_session_key_directly() {
        let k = derive_session_keys(DIALECT_SMB2_1, &[7u8; 16], None, None).unwrap();
        assert_eq!(k.signing_key, [7u8; 16]);
        assert_eq!(k.application_key, [7u8; 16]);
        assert!(k.server_in_key.is_empty());
        // Short keys are right-padded with zeros, long ones truncated.
        let k = derive_session_keys(DIALECT_SMB2_0_2, &[1, 2], None, None).unwrap();
        assert_eq!(&k.signing_key[..3], &[1, 2, 0]);
        let k = derive_session_keys(DIALECT_SMB2_0_2, &[9u8; 32], None, None).unwrap();
        assert_eq!(k.signing_key, [9u8; 16]);
    }

    #[test]
    fn errors() {
        assert_eq!(
            derive_session_keys(DIALECT_SMB3_1_1, &[0; 16], None, None),
            Err(CryptoError::MissingPreauthHash)
        );
        assert_eq!(
            derive_session_keys(0x02FF, &[0; 16], None, None),
            Err(CryptoError::UnsupportedDialect(0x02FF))
        );
        assert_eq!(
            derive_channel_signing_key(DIALECT_SMB2_1, &[0; 16], None),
            Err(CryptoError::UnsupportedDialect(DIALECT_SMB2_1))
        );
        let k30 = derive_session_keys(DIALECT_SMB3_0, &[3; 16], None, None).unwrap();
        assert_eq!(
            derive_channel_signing_key(DIALECT_SMB3_0, &[3; 16], None).unwrap(),
            k30.signing_key
        );
    }

    #[test]
    fn debug_redacts_keys() {
        let k = derive_session_keys(DIALECT_SMB2_1, &[0xAB; 16], None, None).unwrap();
        let s = format!("{k:?}");
        assert!(!s.to_lowercase().contains("ab, ") && !s.contains("171"));
    }
}
