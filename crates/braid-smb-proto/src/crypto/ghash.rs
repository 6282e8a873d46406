//! GF(2^128) arithmetic of GHASH (NIST SP 800-38D 6.3), for the few field
//! operations that correct a GCM/GMAC tag after the fact: GHASH is linear in
//! its input blocks, so changing block X_j of an n-block input changes the
//! hash by (delta X_j) * H^(n+2-j) (counting the length block). The bulk
//! passes run in aws-lc; these run a handful of times per message.

use aes::cipher::BlockEncrypt;
use aes::{Aes128, Aes256};
use ghash::universal_hash::{KeyInit, UniversalHash};
use ghash::GHash;

// GF(2^128) multiplication in GCM's bit order (NIST SP 800-38D 6.3), on
// blocks read big-endian into u128 (bit 0 of the spec = the MSB here): the
// GHASH of the one block x under the key y is x * y. RustCrypto's `ghash`
// multiplies with CLMUL where the CPU has it (constant time either way);
// a bit-by-bit multiply cost ~2% of a signed 1 MiB READ stream's CPU in the
// ~25 multiplications each message's tag correction takes.
pub(crate) fn gf_mul(x: u128, y: u128) -> u128 {
    let mut g = GHash::new(&y.to_be_bytes().into());
    g.update(&[x.to_be_bytes().into()]);
    u128::from_be_bytes(g.finalize().into())
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // NIST SP 800-38D Algorithm 1, bit by bit: the oracle for gf_mul.
    fn gf_mul_by_the_book(x: u128, y: u128) -> u128 {
        const R: u128 = 0xE1 << 120;
        let mut z = 0u128;
        let mut v = y;
        for i in 0..128 {
            if (x >> (127 - i)) & 1 == 1 {
                z ^= v;
            }
            v = if v & 1 == 1 { (v >> 1) ^ R } else { v >> 1 };
        }
        z
    }

    #[test]
    fn one_is_the_identity_and_zero_absorbs() {
        let one = 1u128 << 127;
        let x = 0x0388_DACE_60B6_A392_F328_C2B9_71B2_FE78;
        assert_eq!(gf_mul(x, one), x);
        assert_eq!(gf_mul(one, x), x);
        assert_eq!(gf_mul(x, 0), 0);
    }

    proptest! {
        #[test]
        fn gf_mul_is_the_spec_multiplication(x in any::<u128>(), y in any::<u128>()) {
            prop_assert_eq!(gf_mul(x, y), gf_mul_by_the_book(x, y));
            prop_assert_eq!(gf_mul(x, y), gf_mul(y, x));
        }
    }
}
