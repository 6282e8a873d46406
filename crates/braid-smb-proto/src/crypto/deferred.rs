//! Signing or encrypting a message while its payload is produced, before its
//! first bytes are known.
//!
//! A READ response is a 64-byte SMB2 header and a 16-byte READ body, then the
//! file data. The header's credit grant and the body's DataLength are settled
//! only after the data has been read, but the data is what costs: signing or
//! encrypting 8 MiB after it was read means reading it back from memory. Here
//! the data is MACed (AES-GMAC, MS-SMB2 3.1.4.1) or encrypted (AES-GCM,
//! MS-SMB2 3.1.4.3) chunk by chunk while it is still in the CPU cache, with
//! an all-zero stand-in for the first [`DEFERRED_PREFIX_LEN`] bytes (and, for
//! encryption, for the transform header's associated data). When the real
//! prefix is known, GHASH's linearity corrects the tag:
//!
//! * GHASH over blocks X_1..X_n and the length block L is
//!   sum X_j * H^(n+2-j) + L * H, so replacing a zero block X_j with P_j adds
//!   P_j * H^(n+2-j) to the tag; the lengths do not change.
//! * In CTR mode the prefix's ciphertext is its plaintext XOR the keystream,
//!   and the keystream is what encrypting zeros produced. So the real prefix
//!   ciphertext is prefix XOR (saved zero-ciphertext), and its GHASH blocks
//!   change by exactly the plaintext prefix.
//!
//! The correction costs a few dozen software field multiplications per
//! message; the bulk passes run in aws-lc's AES-GCM (streaming EVP
//! interface, which none of the Rust AEAD crates offers).

use super::encryption::{Cipher, TransformHeader, TRANSFORM_FLAG_ENCRYPTED, TRANSFORM_HEADER_LEN};
use super::evp::EvpGcm;
use super::ghash::{block, gf_mul, gf_pow, hash_subkey};
use super::signing::{gmac_nonce, SIGNATURE_LEN, SIGNATURE_OFFSET};
use super::CryptoError;
use crate::header::{flags, HEADER_LEN};

/// Bytes at the front of the message whose value comes later: the SMB2
/// header and a 16-byte fixed body (READ's). A multiple of 16, so the data
/// starts on a GHASH block boundary.
pub const DEFERRED_PREFIX_LEN: usize = HEADER_LEN + 16;
const PREFIX_BLOCKS: usize = DEFERRED_PREFIX_LEN / 16;
/// The transform header's associated data (Nonce .. SessionId).
const AAD_LEN: usize = 32;
const FLAGS_OFFSET: usize = 16;

/// sum_i P_i * H^(k-i) over the prefix blocks, times H^e: how much the
/// prefix blocks, at the given distance from the end, add to GHASH.
fn prefix_term(h: u128, start: u128, prefix: &[u8], tail_exponent: u64) -> u128 {
    let mut acc = start;
    for i in 0..PREFIX_BLOCKS {
        acc = gf_mul(acc, h) ^ block(&prefix[16 * i..]);
    }
    gf_mul(acc, gf_pow(h, tail_exponent))
}

fn blocks(len: u64) -> u64 {
    len.div_ceil(16)
}

/// AES-128-GMAC signing (MS-SMB2 3.1.4.1) of
/// `prefix (DEFERRED_PREFIX_LEN bytes, later) || data (now)`.
pub struct GmacStream {
    ctx: EvpGcm,
    nonce: [u8; 12],
    h: u128,
    data_len: u64,
}

impl GmacStream {
    /// `nonce` must be the one [`gmac_response_nonce`] gives for the
    /// message this will sign.
    pub fn new(key: &[u8], nonce: [u8; 12]) -> Result<Self, CryptoError> {
        let mut ctx = EvpGcm::encrypter(Cipher::Aes128Gcm, key, &nonce)?;
        ctx.aad(&[0u8; DEFERRED_PREFIX_LEN])?;
        Ok(GmacStream {
            ctx,
            nonce,
            h: hash_subkey(key),
            data_len: 0,
        })
    }

    pub fn update(&mut self, data: &[u8]) -> Result<(), CryptoError> {
        self.ctx.aad(data)?;
        self.data_len += data.len() as u64;
        Ok(())
    }

    pub fn finish(self) -> Result<GmacPartial, CryptoError> {
        Ok(GmacPartial {
            tag: self.ctx.tag()?,
            nonce: self.nonce,
            h: self.h,
            data_len: self.data_len,
        })
    }
}

/// A GMAC over a zero prefix and the data, waiting for the real prefix.
#[derive(Debug, Clone)]
pub struct GmacPartial {
    tag: u128,
    nonce: [u8; 12],
    h: u128,
    data_len: u64,
}

impl GmacPartial {
    /// Sign `msg` (prefix, then exactly the data streamed) in place, as
    /// [`super::sign_in_place`] would: sets SMB2_FLAGS_SIGNED, writes the
    /// Signature. Fails, leaving the Signature unset, if `msg` is not the
    /// message the stream was started for (length or nonce differ); the
    /// caller then signs it the ordinary way.
    pub fn sign(&self, msg: &mut [u8]) -> Result<(), CryptoError> {
        if msg.len() as u64 != DEFERRED_PREFIX_LEN as u64 + self.data_len {
            return Err(CryptoError::Backend("message is not the streamed one"));
        }
        let f = u32::from_le_bytes(msg[FLAGS_OFFSET..FLAGS_OFFSET + 4].try_into().expect("4"));
        msg[FLAGS_OFFSET..FLAGS_OFFSET + 4].copy_from_slice(&(f | flags::SIGNED).to_le_bytes());
        if gmac_nonce(msg) != self.nonce {
            return Err(CryptoError::Backend(
                "GMAC nonce differs from the streamed one",
            ));
        }
        msg[SIGNATURE_OFFSET..SIGNATURE_OFFSET + SIGNATURE_LEN].fill(0);
        // The prefix's blocks are X_1..X_5 of m associated-data blocks
        // (then the length block): P_i * H^(m+1-i) = (Horner over P) * H^(m-3).
        let m = blocks(msg.len() as u64);
        let tag = self.tag ^ prefix_term(self.h, 0, msg, m + 2 - PREFIX_BLOCKS as u64);
        msg[SIGNATURE_OFFSET..SIGNATURE_OFFSET + SIGNATURE_LEN].copy_from_slice(&tag.to_be_bytes());
        Ok(())
    }
}

/// The GMAC nonce of a response to request `message_id` (MS-SMB2 3.1.4.1:
/// MessageId, then the server-to-client bit; never a CANCEL).
pub fn gmac_response_nonce(message_id: u64) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[..8].copy_from_slice(&message_id.to_le_bytes());
    n[8] = 1;
    n
}

/// AES-GCM encryption (MS-SMB2 3.1.4.3) of
/// `prefix (DEFERRED_PREFIX_LEN bytes, later) || data (now)` under a
/// transform header whose associated data also comes later.
pub struct GcmStream {
    ctx: EvpGcm,
    nonce: [u8; 16],
    h: u128,
    keystream: [u8; DEFERRED_PREFIX_LEN],
    data_len: u64,
}

impl GcmStream {
    /// `nonce` is the transform header's whole Nonce field (unique per key,
    /// bytes 12.. zero), as for [`super::encrypt_frame_in_place`].
    pub fn new(cipher: Cipher, key: &[u8], nonce: [u8; 16]) -> Result<Self, CryptoError> {
        let iv: [u8; 12] = nonce[..12].try_into().expect("12");
        let mut ctx = EvpGcm::encrypter(cipher, key, &iv)?;
        ctx.aad(&[0u8; AAD_LEN])?;
        let mut keystream = [0u8; DEFERRED_PREFIX_LEN];
        ctx.apply(&mut keystream)?;
        Ok(GcmStream {
            ctx,
            nonce,
            h: hash_subkey(key),
            keystream,
            data_len: 0,
        })
    }

    /// Encrypt the next piece of data in place.
    pub fn update(&mut self, data: &mut [u8]) -> Result<(), CryptoError> {
        self.ctx.apply(data)?;
        self.data_len += data.len() as u64;
        Ok(())
    }

    pub fn finish(self) -> Result<GcmPartial, CryptoError> {
        Ok(GcmPartial {
            tag: self.ctx.tag()?,
            nonce: self.nonce,
            h: self.h,
            keystream: self.keystream,
            data_len: self.data_len,
        })
    }
}

/// Encrypted data under a zero prefix and zero associated data, waiting for
/// the real ones.
#[derive(Clone)]
pub struct GcmPartial {
    tag: u128,
    nonce: [u8; 16],
    h: u128,
    keystream: [u8; DEFERRED_PREFIX_LEN],
    data_len: u64,
}

impl std::fmt::Debug for GcmPartial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The keystream is key material: not printed.
        f.debug_struct("GcmPartial")
            .field("data_len", &self.data_len)
            .finish_non_exhaustive()
    }
}

impl GcmPartial {
    /// Finish the transform frame `frame`: TRANSFORM_HEADER room, then the
    /// plaintext prefix, then the data already encrypted by the stream.
    /// Writes the transform header (as [`super::encrypt_frame_in_place`]
    /// does), encrypts the prefix and sets the tag.
    pub fn seal_frame(&self, session_id: u64, frame: &mut [u8]) -> Result<(), CryptoError> {
        let msg_len = frame.len().saturating_sub(TRANSFORM_HEADER_LEN);
        if frame.len() < TRANSFORM_HEADER_LEN + DEFERRED_PREFIX_LEN
            || msg_len as u64 != DEFERRED_PREFIX_LEN as u64 + self.data_len
        {
            return Err(CryptoError::Backend("frame is not the streamed one"));
        }
        let original_message_size =
            u32::try_from(msg_len).map_err(|_| CryptoError::MessageTooLarge(msg_len))?;
        let (hdr, msg) = frame.split_at_mut(TRANSFORM_HEADER_LEN);
        TransformHeader {
            signature: [0; 16],
            nonce: self.nonce,
            original_message_size,
            flags: TRANSFORM_FLAG_ENCRYPTED,
            session_id,
        }
        .write_to(hdr);
        let aad = &hdr[20..20 + AAD_LEN];
        // Blocks: A_1, A_2, then c ciphertext blocks, the prefix's first.
        // A_1 * H^(c+3) + A_2 * H^(c+2) + P_i * H^(c+1-i)
        //   = (Horner over A_1, A_2, P_0..P_4) * H^(c-3).
        let c = blocks(msg_len as u64);
        let start = gf_mul(block(aad), self.h) ^ block(&aad[16..]);
        let delta = prefix_term(self.h, start, msg, c + 2 - PREFIX_BLOCKS as u64);
        let tag = self.tag ^ delta;
        for (p, k) in msg[..DEFERRED_PREFIX_LEN].iter_mut().zip(&self.keystream) {
            *p ^= k;
        }
        hdr[4..20].copy_from_slice(&tag.to_be_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::{
        decrypt_in_place, encrypt_frame_in_place, sign_in_place, SigningAlgorithm,
    };
    use proptest::prelude::*;

    fn response_prefix(message_id: u64, credits: u16, seed: u8) -> [u8; DEFERRED_PREFIX_LEN] {
        let mut p = [0u8; DEFERRED_PREFIX_LEN];
        for (i, b) in p.iter_mut().enumerate() {
            *b = seed.wrapping_mul(31).wrapping_add(i as u8);
        }
        p[..4].copy_from_slice(&[0xFE, b'S', b'M', b'B']);
        p[12..14].copy_from_slice(&8u16.to_le_bytes()); // READ
        p[14..16].copy_from_slice(&credits.to_le_bytes());
        p[16..20].copy_from_slice(&flags::SERVER_TO_REDIR.to_le_bytes());
        p[24..32].copy_from_slice(&message_id.to_le_bytes());
        p
    }

    proptest! {
        #[test]
        fn gmac_stream_matches_one_shot(
            data in proptest::collection::vec(any::<u8>(), 0..5000),
            cut in 0usize..5000,
            message_id in any::<u64>(),
            credits in any::<u16>(),
            seed in any::<u8>(),
            key in any::<[u8; 16]>(),
        ) {
            let mut s = GmacStream::new(&key, gmac_response_nonce(message_id)).unwrap();
            let cut = cut.min(data.len());
            s.update(&data[..cut]).unwrap();
            s.update(&data[cut..]).unwrap();
            let partial = s.finish().unwrap();
            let mut msg = response_prefix(message_id, credits, seed).to_vec();
            msg.extend_from_slice(&data);
            let mut expected = msg.clone();
            sign_in_place(SigningAlgorithm::AesGmac, &key, &mut expected).unwrap();
            partial.sign(&mut msg).unwrap();
            prop_assert_eq!(msg, expected);
        }

        #[test]
        fn gcm_stream_matches_one_shot(
            data in proptest::collection::vec(any::<u8>(), 0..5000),
            cut in 0usize..5000,
            session_id in any::<u64>(),
            nonce12 in any::<[u8; 12]>(),
            seed in any::<u8>(),
            wide in any::<bool>(),
            key in any::<[u8; 32]>(),
        ) {
            let (cipher, key) = if wide {
                (Cipher::Aes256Gcm, &key[..])
            } else {
                (Cipher::Aes128Gcm, &key[..16])
            };
            let mut nonce = [0u8; 16];
            nonce[..12].copy_from_slice(&nonce12);
            let cut = cut.min(data.len());
            let mut frame = vec![0u8; TRANSFORM_HEADER_LEN];
            frame.extend_from_slice(&response_prefix(7, 1, seed));
            frame.extend_from_slice(&data);
            let mut expected = frame.clone();
            encrypt_frame_in_place(cipher, key, &nonce, session_id, &mut expected).unwrap();

            let mut s = GcmStream::new(cipher, key, nonce).unwrap();
            let body = TRANSFORM_HEADER_LEN + DEFERRED_PREFIX_LEN;
            s.update(&mut frame[body..body + cut]).unwrap();
            s.update(&mut frame[body + cut..]).unwrap();
            s.finish().unwrap().seal_frame(session_id, &mut frame).unwrap();
            prop_assert_eq!(&frame, &expected);
            let (_, plain) = decrypt_in_place(cipher, key, &mut frame).unwrap();
            prop_assert_eq!(&frame[plain][DEFERRED_PREFIX_LEN..], &data[..]);
        }
    }

    #[test]
    fn refuses_another_message() {
        let key = [9u8; 16];
        let mut s = GmacStream::new(&key, gmac_response_nonce(5)).unwrap();
        s.update(&[1, 2, 3]).unwrap();
        let p = s.finish().unwrap();
        let mut longer = response_prefix(5, 1, 0).to_vec();
        longer.extend_from_slice(&[1, 2, 3, 4]);
        assert!(p.sign(&mut longer).is_err());
        let mut other_id = response_prefix(6, 1, 0).to_vec();
        other_id.extend_from_slice(&[1, 2, 3]);
        assert!(p.sign(&mut other_id).is_err());

        let mut g = GcmStream::new(Cipher::Aes128Gcm, &key, [0; 16]).unwrap();
        g.update(&mut [0u8; 10]).unwrap();
        let g = g.finish().unwrap();
        let mut short = vec![0u8; TRANSFORM_HEADER_LEN + DEFERRED_PREFIX_LEN + 9];
        assert!(g.seal_frame(1, &mut short).is_err());
        assert!(GcmStream::new(Cipher::Aes128Ccm, &key, [0; 16]).is_err());
        assert!(GcmStream::new(Cipher::Aes256Gcm, &key, [0; 16]).is_err());
    }
}
