//! GF(2^128) arithmetic of GHASH (NIST SP 800-38D 6.3), for the few field
//! operations that correct a GCM/GMAC tag after the fact: GHASH is linear in
//! its input blocks, so changing block X_j of an n-block input changes the
//! hash by (delta X_j) * H^(n+2-j) (counting the length block). The bulk
//! passes run in aws-lc; these run a handful of times per message.

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::{Aes128, Aes256};

// GF(2^128) multiplication in GCM's bit order (NIST SP 800-38D, Algorithm 1),
// on blocks read big-endian into u128 (bit 0 of the spec = the MSB here).
// Branch-free in the operands.
pub(crate) fn gf_mul(x: u128, y: u128) -> u128 {
    const R: u128 = 0xE1 << 120;
    let mut z = 0u128;
    let mut v = y;
    for i in 0..128 {
        let bit = (x >> (127 - i)) & 1;
        z ^= v & 0u128.wrapping_sub(bit);
        let lsb = v & 1;
        v = (v >> 1) ^ (R & 0u128.wrapping_sub(lsb));
    }
    z
}

/// x^e in GF(2^128); `e` is public (derived from the message length).
pub(crate) fn gf_pow(x: u128, mut e: u64) -> u128 {
    // The multiplicative identity is the block 0x80 00 .. 00.
    let mut result = 1u128 << 127;
    let mut base = x;
    while e > 0 {
        if e & 1 == 1 {
            result = gf_mul(result, base);
        }
        base = gf_mul(base, base);
        e >>= 1;
    }
    result
}

/// One 16-byte block as a field element.
pub(crate) fn block(b: &[u8]) -> u128 {
    u128::from_be_bytes(b[..16].try_into().expect("16-byte block"))
}

/// NIST SP 800-38D 6.4: the hash subkey H = CIPH_K(0^128), for a 16- or
/// 32-byte AES key.
pub(crate) fn hash_subkey(key: &[u8]) -> u128 {
    let mut h = [0u8; 16];
    match key.len() {
        16 => Aes128::new(key.into()).encrypt_block((&mut h).into()),
        32 => Aes256::new(key.into()).encrypt_block((&mut h).into()),
        n => unreachable!("AES key of {n} bytes; callers check the length"),
    }
    u128::from_be_bytes(h)
}
