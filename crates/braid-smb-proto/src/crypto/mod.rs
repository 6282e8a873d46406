//! SMB2/3 message security: key derivation, signing, pre-authentication
//! integrity and encryption (MS-SMB2 3.1.4).
//!
//! Everything here is sans-IO and deterministic: keys, nonces and messages
//! come in as arguments. The only use of OS randomness is the optional
//! [`NonceGenerator::new_random`] convenience.
//!
//! Hot-path notes:
//! * [`sign_in_place`] and [`verify`] work on one SMB2 message in the buffer
//!   it already lives in; [`verify`] takes `&[u8]` and never copies the
//!   payload, not even for AES-GMAC.
//! * [`encrypt_frame_in_place`] / [`decrypt_in_place`] work on a buffer that
//!   has [`TRANSFORM_HEADER_LEN`] bytes in front of the SMB2 message, so the
//!   server can build a response behind a 52-byte gap, encrypt it where it is
//!   and hand the same buffer to the socket.

use thiserror::Error;

pub mod deferred;
pub mod encryption;
mod evp;
mod ghash;
pub mod kdf;
pub mod preauth;
pub mod signing;

pub use encryption::{
    decrypt_in_place, encrypt_frame_in_place, encrypt_frame_split, encrypt_in_place,
    encrypt_message, Cipher, DecryptStream, NonceGenerator, TransformHeader, SPLIT_SCRATCH_LEN,
    TRANSFORM_FLAG_ENCRYPTED, TRANSFORM_HEADER_LEN,
};
pub use kdf::{
    derive_channel_signing_key, derive_session_keys, kdf, sp800_108_counter_hmac_sha256,
    SessionKeys, DIALECT_SMB2_0_2, DIALECT_SMB2_1, DIALECT_SMB3_0, DIALECT_SMB3_0_2,
    DIALECT_SMB3_1_1,
};
pub use preauth::{PreauthHash, PREAUTH_HASH_LEN};
pub use signing::{
    sign_in_place, sign_split, signature_of, verify, verify_in_place, BodyDigest, GmacVerifier,
    SigningAlgorithm, SIGNATURE_LEN, SIGNATURE_OFFSET,
};

/// Errors from the crypto layer. None of them carries key material.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CryptoError {
    #[error("key of {got} bytes where {expected} are required")]
    InvalidKeyLength { expected: usize, got: usize },
    #[error("message of {0} bytes is shorter than an SMB2 header")]
    MessageTooShort(usize),
    #[error("message of {0} bytes does not fit a 32-bit OriginalMessageSize")]
    MessageTooLarge(usize),
    #[error("dialect {0:#06x} has no such key derivation")]
    UnsupportedDialect(u16),
    #[error("dialect 3.1.1 needs the pre-authentication integrity hash")]
    MissingPreauthHash,
    #[error("malformed SMB2 TRANSFORM_HEADER: {0}")]
    BadTransformHeader(&'static str),
    #[error("OriginalMessageSize {declared} does not match the {actual} bytes received")]
    SizeMismatch { declared: u32, actual: usize },
    /// The AEAD tag did not verify: tampered, wrong key, or wrong nonce.
    #[error("decryption failed: authentication tag mismatch")]
    AuthenticationFailed,
    /// The crypto library refused an operation, or a deferred seal was
    /// applied to another message than the one it was computed for.
    #[error("crypto backend: {0}")]
    Backend(&'static str),
}

/// Constant-time equality of two byte strings of equal, public length.
/// (The crate does not depend on `subtle` directly, so this is the usual
/// OR-of-XORs with an optimisation barrier.)
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut acc = 0u8;
    for (x, y) in a.iter().zip(b) {
        acc |= x ^ y;
    }
    core::hint::black_box(acc) == 0
}

#[cfg(test)]
mod tests {
    use super::ct_eq;

    #[test]
    fn ct_eq_basics() {
        assert!(ct_eq(b"", b""));
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
    }
}
