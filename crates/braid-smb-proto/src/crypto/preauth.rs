//! SMB 3.1.1 pre-authentication integrity hash (SHA-512 chain).

use sha2::{Digest, Sha512};

pub const PREAUTH_HASH_LEN: usize = 64;

// MS-SMB2 3.3.5.4 (NEGOTIATE: Connection.PreauthIntegrityHashValue starts as
// 64 zero bytes and is updated with the request, then the response) and
// 3.3.5.5 / 3.3.5.5.3 (SESSION_SETUP: Session.PreauthIntegrityHashValue
// starts as the connection's value and is updated with every request and
// every response except the final successful one). Each update is
// H(previous || whole SMB2 message), H = SHA-512 (HashAlgorithmId 0x0001).
/// Running pre-authentication integrity hash value.
///
/// Clone the connection's value to start a session's (or a binding
/// channel's) hash.
#[derive(Clone, PartialEq, Eq)]
pub struct PreauthHash {
    value: [u8; PREAUTH_HASH_LEN],
}

impl Default for PreauthHash {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for PreauthHash {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PreauthHash(")?;
        for b in &self.value[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "…)")
    }
}

impl PreauthHash {
    /// The initial value: 64 zero bytes.
    pub fn new() -> Self {
        PreauthHash {
            value: [0u8; PREAUTH_HASH_LEN],
        }
    }

    /// Resume from a stored value.
    pub fn from_value(value: [u8; PREAUTH_HASH_LEN]) -> Self {
        PreauthHash { value }
    }

    /// value = SHA-512(value || message), `message` being one whole SMB2
    /// message (header and body, as sent or received, without the
    /// transport's 4-byte length prefix).
    pub fn update(&mut self, message: &[u8]) {
        self.update_parts(&[message]);
    }

    /// As [`update`](Self::update) for a message held in several buffers
    /// (e.g. header and body of a vectored write), hashed in order.
    pub fn update_parts(&mut self, parts: &[&[u8]]) {
        let mut h = Sha512::new();
        h.update(self.value);
        for p in parts {
            h.update(p);
        }
        self.value.copy_from_slice(&h.finalize());
    }

    pub fn value(&self) -> &[u8; PREAUTH_HASH_LEN] {
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    // Microsoft Open Specifications blog, "SMB 3.1.1 Pre-authentication
    // integrity in Windows 10" (2015-08-11): the NEGOTIATE and SESSION_SETUP
    // exchange and the hash after each message (transcribed in emc-isilon/pike
    // pike/test/test_smb3_encryption_vector.py). The final session key and
    // signing key are checked in kdf.rs.
    #[test]
    fn ms_blog_preauth_chain() {
        let steps: [(&str, &str); 5] = [
            (
                // NEGOTIATE request
                "FE534D4240000100000000000000800000000000000000000100000000000000FFFE000000000000\
                 00000000000000000000000000000000000000000000000024000500000000003F000000ECD86F32\
                 6276024F9F7752B89BB33F3A70000000020000000202100200030203110300000100260000000000\
                 010020000100FA49E6578F1F3A9F4CD3E9CC14A67AA884B3D05844E0E5A118225C15887F32FF0000\
                 0200060000000000020002000100",
                "DD94EFC5321BB618A2E208BA8920D2F422992526947A409B5037DE1E0FE8C7362B8C47122594CDE0\
                 CE26AA9DFC8BCDBDE0621957672623351A7540F1E54A0426",
            ),
            (
                // NEGOTIATE response
                "FE534D4240000100000000000000010001000000000000000100000000000000FFFE000000000000\
                 000000000000000000000000000000000000000000000000410001001103020039CBCAF329714942\
                 BDCE5D60F09AB3FB2F000000000080000000800000008000D8DAE5ADCBAED00109094AB095AED001\
                 80004001C00100006082013C06062B0601050502A08201303082012CA01A3018060A2B0601040182\
                 3702021E060A2B06010401823702020AA282010C048201084E45474F455854530100000000000000\
                 60000000700000007C7CC0FD06D6362D02DDE1CF343BFE292900F49750B4AA97934D9C4296B26E51\
                 FD370471B235E15A50DAE15BD5489C87000000000000000060000000010000000000000000000000\
                 5C33530DEAF90D4DB2EC4AE3786EC3084E45474F4558545303000000010000004000000098000000\
                 7C7CC0FD06D6362D02DDE1CF343BFE295C33530DEAF90D4DB2EC4AE3786EC3084000000058000000\
                 3056A05430523027802530233121301F06035504031318546F6B656E205369676E696E6720507562\
                 6C6963204B65793027802530233121301F06035504031318546F6B656E205369676E696E67205075\
                 626C6963204B6579010026000000000001002000010060A3C3B95C3C7CCD51EC536648D9B3AC74C4\
                 83CA5B65385A251117BEB30712E50000020004000000000001000200",
                "324BFA92A4F3A190E466EBEA08D9C110DC88BFED758D9846ECC6F541CC1D02AE3C94A79F36011E99\
                 7E13F841B91B50957AD07B19C8E2539C0B23FDAE09D2C513",
            ),
            (
                // SESSION_SETUP request 1
                "FE534D4240000100000000000100800000000000000000000200000000000000FFFE000000000000\
                 00000000000000000000000000000000000000000000000019000001010000000000000058004A00\
                 0000000000000000604806062B0601050502A03E303CA00E300C060A2B06010401823702020AA22A\
                 04284E544C4D5353500001000000978208E200000000000000000000000000000000060380250000\
                 000F",
                "AC0B0F2B9986257700365E416D142A6EDC96DF03594A19E52A15F6BD0D041CD5D432F8ED42C55E33\
                 197A50C9EC00F1462B50C592211B1471A04B56088FDFD5F9",
            ),
            (
                // SESSION_SETUP response 1 (STATUS_MORE_PROCESSING_REQUIRED)
                "FE534D4240000100160000C00100010001000000000000000200000000000000FFFE000000000000\
                 190000000010000000000000000000000000000000000000090000004800B300A181B03081ADA003\
                 0A0101A10C060A2B06010401823702020AA281970481944E544C4D53535000020000000C000C0038\
                 00000015828AE20D1D8BA31179D008000000000000000050005000440000000A0092270000000F53\
                 005500540033003100310002000C0053005500540033003100310001000C00530055005400330031\
                 00310004000C0053005500540033003100310003000C0053005500540033003100310007000800A1\
                 A1F5ADCBAED00100000000",
                "2729E3440DFDDD839E37193F6E8F20C20CEFB3469E453A70CD980EEC06B8835740A7376008563336\
                 4C8989895ECE81BF102DEEB14D4B7D48AFA76901A7A38387",
            ),
            (
                // SESSION_SETUP request 2 (the final response is not hashed)
                "FE534D4240000100000000000100800000000000000000000300000000000000FFFE000000000000\
                 1900000000100000000000000000000000000000000000001900000101000000000000005800CF01\
                 0000000000000000A18201CB308201C7A0030A0101A28201AA048201A64E544C4D53535000030000\
                 001800180090000000EE00EE00A80000000C000C00580000001A001A0064000000120012007E0000\
                 001000100096010000158288E2060380250000000FECAC77A5F385A8BF9C38C706EEEDDCD3530055\
                 005400330031003100610064006D0069006E006900730074007200610074006F0072004400520049\
                 0056004500520033003100310000000000000000000000000000000000000000000000000063078E\
                 B639FE03E20A231C3AE3BF23080101000000000000A1A1F5ADCBAED001BC4AD05F223CC90F000000\
                 0002000C0053005500540033003100310001000C0053005500540033003100310004000C00530055\
                 00540033003100310003000C0053005500540033003100310007000800A1A1F5ADCBAED001060004\
                 00020000000800300030000000000000000000000000300000B61FEFCAA857EA57BF1EDCEBF8974B\
                 8E0EBA5A6DFD9D07A31D11B548F8C9D0CC0A00100000000000000000000000000000000000090016\
                 0063006900660073002F005300550054003300310031000000000000000000000000003B9BDFF38F\
                 5EE8F9663F11A0F4C03A78A31204100100000063775A9A5FD97F0600000000",
                "0DD13628CC3ED218EF9DF9772D436D0887AB9814BFAE63A80AA845F36909DB7928622DDDAD522D97\
                 51640A459762C5A9D6BB084CBB3CE6BDADEF5D5BCE3C6C01",
            ),
        ];
        let mut connection = PreauthHash::new();
        assert_eq!(connection.value(), &[0u8; 64]);
        let mut session = None;
        for (i, (msg, expected)) in steps.iter().enumerate() {
            let hash = match session.as_mut() {
                Some(s) => s,
                None => &mut connection,
            };
            hash.update(&h(msg));
            assert_eq!(hash.value().to_vec(), h(expected), "step {i}");
            if i == 1 {
                // MS-SMB2 3.3.5.5.1: the session's hash starts from the
                // connection's value after NEGOTIATE.
                session = Some(connection.clone());
            }
        }
    }

    #[test]
    fn parts_equal_whole() {
        let msg: Vec<u8> = (0..200u8).collect();
        let mut a = PreauthHash::new();
        a.update(&msg);
        let mut b = PreauthHash::new();
        b.update_parts(&[&msg[..64], &msg[64..100], &[], &msg[100..]]);
        assert_eq!(a, b);
        assert_eq!(PreauthHash::from_value(*a.value()), a);
        assert_eq!(PreauthHash::default(), PreauthHash::new());
    }
}
