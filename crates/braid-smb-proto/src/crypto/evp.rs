//! aws-lc's streaming AES-GCM (the EVP interface), which none of the Rust
//! AEAD crates offers: associated data and text may be given in pieces, so
//! a message can be sealed or opened while it is read from a file or a
//! socket, piece by piece, each piece still in the CPU cache.

use core::ptr;

use aws_lc_sys as sys;

use super::encryption::Cipher;
use super::CryptoError;

/// One AES-GCM operation in progress (encrypting or decrypting).
pub(crate) struct EvpGcm {
    ctx: *mut sys::EVP_CIPHER_CTX,
    decrypting: bool,
}

impl EvpGcm {
    pub(crate) fn encrypter(
        cipher: Cipher,
        key: &[u8],
        iv: &[u8; 12],
    ) -> Result<Self, CryptoError> {
        Self::new(cipher, key, iv, false)
    }

    pub(crate) fn decrypter(
        cipher: Cipher,
        key: &[u8],
        iv: &[u8; 12],
    ) -> Result<Self, CryptoError> {
        Self::new(cipher, key, iv, true)
    }

    fn new(
        cipher: Cipher,
        key: &[u8],
        iv: &[u8; 12],
        decrypting: bool,
    ) -> Result<Self, CryptoError> {
        // SAFETY: these return pointers to static cipher tables.
        let evp = unsafe {
            match cipher {
                Cipher::Aes128Gcm => sys::EVP_aes_128_gcm(),
                Cipher::Aes256Gcm => sys::EVP_aes_256_gcm(),
                _ => return Err(CryptoError::Backend("streaming AEAD is GCM only")),
            }
        };
        if key.len() != cipher.key_len() {
            return Err(CryptoError::InvalidKeyLength {
                expected: cipher.key_len(),
                got: key.len(),
            });
        }
        // SAFETY: plain constructor; null is checked.
        let ctx = unsafe { sys::EVP_CIPHER_CTX_new() };
        if ctx.is_null() {
            return Err(CryptoError::Backend("EVP_CIPHER_CTX_new"));
        }
        let me = EvpGcm { ctx, decrypting };
        // SAFETY: ctx is live; the key has the cipher's length (checked
        // above) and GCM's default IV length is 12 bytes.
        let ok = unsafe {
            let (k, n) = (key.as_ptr(), iv.as_ptr());
            if decrypting {
                sys::EVP_DecryptInit_ex(me.ctx, evp, ptr::null_mut(), k, n)
            } else {
                sys::EVP_EncryptInit_ex(me.ctx, evp, ptr::null_mut(), k, n)
            }
        };
        if ok != 1 {
            return Err(CryptoError::Backend("EVP init"));
        }
        Ok(me)
    }

    fn update_raw(
        &mut self,
        out: *mut u8,
        input: *const u8,
        len: usize,
    ) -> Result<(), CryptoError> {
        let mut outl = 0;
        let len_i32 = i32::try_from(len).map_err(|_| CryptoError::MessageTooLarge(len))?;
        // SAFETY: the callers pass `input` valid for `len` reads and `out`
        // either null (associated data) or valid for `len` writes (in-place
        // operation, in == out, is allowed for GCM).
        let ok = unsafe {
            if self.decrypting {
                sys::EVP_DecryptUpdate(self.ctx, out, &mut outl, input, len_i32)
            } else {
                sys::EVP_EncryptUpdate(self.ctx, out, &mut outl, input, len_i32)
            }
        };
        if ok != 1 || (!out.is_null() && outl != len_i32) {
            return Err(CryptoError::Backend("EVP update"));
        }
        Ok(())
    }

    /// Associated data; all of it must come before any text.
    pub(crate) fn aad(&mut self, data: &[u8]) -> Result<(), CryptoError> {
        for piece in data.chunks(1 << 30) {
            self.update_raw(ptr::null_mut(), piece.as_ptr(), piece.len())?;
        }
        Ok(())
    }

    /// Encrypt or decrypt in place (a stream mode: output length = input).
    pub(crate) fn apply(&mut self, data: &mut [u8]) -> Result<(), CryptoError> {
        for piece in data.chunks_mut(1 << 30) {
            let p = piece.as_mut_ptr();
            self.update_raw(p, p, piece.len())?;
        }
        Ok(())
    }

    /// Encrypting: the tag.
    pub(crate) fn tag(self) -> Result<u128, CryptoError> {
        debug_assert!(!self.decrypting);
        let mut outl = 0;
        let mut tag = [0u8; 16];
        // SAFETY: GCM's final writes nothing (no buffered block); GET_TAG
        // writes 16 bytes into `tag`.
        let ok = unsafe {
            sys::EVP_EncryptFinal_ex(self.ctx, ptr::null_mut(), &mut outl) == 1
                && sys::EVP_CIPHER_CTX_ctrl(
                    self.ctx,
                    sys::EVP_CTRL_GCM_GET_TAG,
                    16,
                    tag.as_mut_ptr().cast(),
                ) == 1
        };
        if !ok {
            return Err(CryptoError::Backend("EVP_EncryptFinal_ex"));
        }
        Ok(u128::from_be_bytes(tag))
    }

    /// Decrypting: check the received tag (aws-lc compares in constant time).
    pub(crate) fn verify(self, tag: &[u8; 16]) -> Result<(), CryptoError> {
        debug_assert!(self.decrypting);
        let mut expected = *tag;
        let mut outl = 0;
        // SAFETY: SET_TAG reads 16 bytes from `expected`; final writes
        // nothing for GCM.
        let ok = unsafe {
            sys::EVP_CIPHER_CTX_ctrl(
                self.ctx,
                sys::EVP_CTRL_GCM_SET_TAG,
                16,
                expected.as_mut_ptr().cast(),
            ) == 1
                && sys::EVP_DecryptFinal_ex(self.ctx, ptr::null_mut(), &mut outl) == 1
        };
        if ok {
            Ok(())
        } else {
            Err(CryptoError::AuthenticationFailed)
        }
    }
}

// SAFETY: an EVP_CIPHER_CTX is plain heap state owned by this value, with
// no thread affinity; it is only used through &mut self (never shared), so
// moving it to another thread (a receive loop resumed on another tokio
// worker) is sound.
unsafe impl Send for EvpGcm {}

impl Drop for EvpGcm {
    fn drop(&mut self) {
        // SAFETY: allocated by EVP_CIPHER_CTX_new, freed once.
        unsafe { sys::EVP_CIPHER_CTX_free(self.ctx) }
    }
}
