//! NTLMSSP: known answers from MS-NLMP 4.2, captured exchanges, round trips.

use super::*;
use proptest::prelude::*;

fn h(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

// MS-NLMP 4.2.4: user "User", domain "Domain", password "Password",
// server challenge 0123456789abcdef, client challenge aa*8, time 0,
// random session key 55*16.
const CHALLENGE_4_2_4: &str = "4e544c4d53535000020000000c000c003800000033828ae20123456789abcdef00000000000000002400240044000000060070170000000f53006500720076006500720002000c0044006f006d00610069006e0001000c0053006500720076006500720000000000";
const AUTHENTICATE_4_2_4: &str = "4e544c4d5353500003000000180018006c00000054005400840000000c000c00480000000800080054000000100010005c00000010001000d8000000358288e20501280a0000000f44006f006d00610069006e00550073006500720043004f004d005000550054004500520086c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa68cd0ab851e51c96aabc927bebef6a1c01010000000000000000000000000000aaaaaaaaaaaaaaaa0000000002000c0044006f006d00610069006e0001000c005300650072007600650072000000000000000000c5dad2544fc9799094ce1ce90bc9d03e";

#[test]
fn ms_nlmp_4_2_2_ntowfv1() {
    // MS-NLMP 4.2.2.1.2
    assert_eq!(
        nt_hash("Password").to_vec(),
        h("a4f49c406510bdcab6824ee7c30fd852")
    );
}

#[test]
fn ms_nlmp_4_2_4_vectors() {
    // 4.2.4.1.1 NTOWFv2
    let key = ntowfv2("Password", "User", "Domain");
    assert_eq!(key.to_vec(), h("0c868a403bfd7a93a3001ef22ef02e3f"));
    assert_eq!(ntowfv2("Password", "user", "Domain"), key);
    assert_ne!(ntowfv2("Password", "User", "domain"), key);
    // 4.2.4.2.2 NTLMv2 response: temp over the CHALLENGE's target info.
    let chal = ChallengeMessage::decode(&h(CHALLENGE_4_2_4)).unwrap();
    assert_eq!(chal.server_challenge.to_vec(), h("0123456789abcdef"));
    assert_eq!(chal.flags, 0xe28a8233);
    let pairs = parse_av_pairs(&chal.target_info).unwrap();
    assert_eq!(pairs.len(), 2);
    let temp = ntlmv2_temp(0, &[0xaa; 8], &chal.target_info);
    let proof = nt_proof_str(&key, &chal.server_challenge, &temp);
    assert_eq!(proof.to_vec(), h("68cd0ab851e51c96aabc927bebef6a1c"));
    // 4.2.4.1.2 Session base key
    let sbk = session_base_key(&key, &proof);
    assert_eq!(sbk.to_vec(), h("8de40ccadbc14a82f15cb0ad0de95ca3"));
    // 4.2.4.2.3 Encrypted session key
    assert_eq!(
        rc4k(&sbk, &[0x55; 16]),
        h("c5dad2544fc9799094ce1ce90bc9d03e")
    );
    // 4.2.4.4 keys
    assert_eq!(
        sign_key(&[0x55; 16], true).to_vec(),
        h("4788dc861b4782f35d43fd98fe1a2d39")
    );
    assert_eq!(
        seal_key(chal.flags, &[0x55; 16], true).to_vec(),
        h("59f600973cc4960a25480a7c196e4c58")
    );
    // 4.2.4.2.1 LMv2 response
    let lm = hmac_md5(&key, &[&chal.server_challenge, &[0xaa; 8]]);
    assert_eq!(lm.to_vec(), h("86c35097ac9cec102554764a57cccc19"));
}

#[test]
fn ms_nlmp_4_2_4_signature() {
    // 4.2.4.4: signature of "Plaintext" (UTF-16) with seq 0. The spec's
    // example seals first, advancing the RC4 handle by 18 bytes; do the
    // same here.
    let flags = 0xe28a8233;
    let mut sec = NtlmSecurity::new(flags, &[0x55; 16], true).unwrap();
    let msg = utf16le("Plaintext");
    let mut sealed = msg.clone();
    sec.send_seal.apply_keystream(&mut sealed);
    assert_eq!(sealed, h("54e50165bf1936dc996020c1811b0f06fb5f"));
    let sig = sec.sign(&msg);
    assert_eq!(sig.to_vec(), h("010000007fb38ec5c55d497600000000"));
}

#[test]
fn ms_nlmp_4_2_4_seal_and_unseal() {
    // 4.2.4.4 again, through seal(): the data comes out encrypted, the
    // signature is the spec's, and the other side gets the plaintext back.
    let flags = 0xe28a8233;
    let mut client = NtlmSecurity::new(flags, &[0x55; 16], true).unwrap();
    let mut msg = utf16le("Plaintext");
    let len = msg.len();
    let sig = client.seal(&mut msg, 0..len);
    assert_eq!(msg, h("54e50165bf1936dc996020c1811b0f06fb5f"));
    assert_eq!(sig.to_vec(), h("010000007fb38ec5c55d497600000000"));
    let mut server = NtlmSecurity::new(flags, &[0x55; 16], false).unwrap();
    server.unseal(&mut msg, 0..len, &sig).unwrap();
    assert_eq!(msg, utf16le("Plaintext"));
    // The next message uses sequence number 1; a replayed one fails.
    let mut second = b"header|data".to_vec();
    let sig = client.seal(&mut second, 7..11);
    assert_eq!(&sig[12..], &1u32.to_le_bytes());
    let mut replay = second.clone();
    server.unseal(&mut second, 7..11, &sig).unwrap();
    assert_eq!(second, b"header|data");
    assert!(server.unseal(&mut replay, 7..11, &sig).is_err());
}

#[test]
fn ms_nlmp_4_2_4_authenticate_verifies() {
    let auth = h(AUTHENTICATE_4_2_4);
    let msg = AuthenticateMessage::decode(&auth).unwrap();
    assert_eq!(msg.user, "User");
    assert_eq!(msg.domain, "Domain");
    assert_eq!(msg.workstation, "COMPUTER");
    assert_eq!(msg.mic, None);
    let lookup = |u: &str, _d: &str| (u == "User").then(|| nt_hash("Password"));
    let (out, v) = verify_authenticate(b"", &h(CHALLENGE_4_2_4), &auth, &lookup).unwrap();
    assert_eq!(out.session_key, [0x55; 16]);
    assert!(!out.anonymous);
    assert!(!v.mic_present);
    let wrong = |_: &str, _: &str| Some(nt_hash("password"));
    assert_eq!(
        verify_authenticate(b"", &h(CHALLENGE_4_2_4), &auth, &wrong).unwrap_err(),
        AuthError::LogonFailure
    );
    let unknown = |_: &str, _: &str| None;
    assert_eq!(
        verify_authenticate(b"", &h(CHALLENGE_4_2_4), &auth, &unknown).unwrap_err(),
        AuthError::LogonFailure
    );
}

fn pair(user: &str, domain: &str, password: &str) -> (NtlmServer, NtlmClient) {
    let server = NtlmServer::new(
        [1, 2, 3, 4, 5, 6, 7, 8],
        133_000_000_000_000_000,
        "BRAID",
        "braid.example.com",
        "WORKGROUP",
    );
    (
        server,
        NtlmClient::new(user, domain, password).with_workstation("CLIENT"),
    )
}

const ENTROPY: ClientEntropy = ClientEntropy {
    client_challenge: [9; 8],
    random_session_key: [0x42; 16],
    timestamp: 0,
};

fn users(u: &str, _d: &str) -> Option<[u8; 16]> {
    (u.eq_ignore_ascii_case("alice")).then(|| nt_hash("s3cret!"))
}

#[test]
fn round_trip_same_session_key() {
    for domain in ["WORKGROUP", "", "other"] {
        let (mut s, mut c) = pair("alice", domain, "s3cret!");
        let chal = s.challenge(&c.negotiate()).unwrap();
        let auth = c.authenticate(&chal, &ENTROPY).unwrap();
        let out = s.authenticate(&auth, &users).unwrap();
        assert_eq!(out.user, "alice");
        assert_eq!(out.domain, domain);
        assert_eq!(out.workstation, "CLIENT");
        assert_eq!(out.session_key, [0x42; 16]);
        assert_eq!(c.session_key(), Some([0x42; 16]));
        assert!(s.mic_present());
        assert!(s.can_sign() && c.can_sign());
        // Signing keys agree in both directions.
        let mut cs = c.session_security().unwrap();
        let mut ss = s.session_security().unwrap();
        let sig = cs.sign(b"hello");
        ss.verify(b"hello", &sig).unwrap();
        let sig = ss.sign(b"back");
        cs.verify(b"back", &sig).unwrap();
        assert!(cs.verify(b"back", &sig).is_err());
    }
}

#[test]
fn client_nil_domain_accepted() {
    // A client that sends a domain but computed NTOWFv2 with NIL.
    let (mut s, mut c) = pair("alice", "", "s3cret!");
    let chal = s.challenge(&c.negotiate()).unwrap();
    let auth = c.authenticate(&chal, &ENTROPY).unwrap();
    let mut m = AuthenticateMessage::decode(&auth).unwrap();
    m.domain = "SOMEDOMAIN".into();
    m.mic = None;
    // Re-encoding invalidates the MIC, so recompute it.
    let mut enc = m.encode();
    let mic = hmac_md5(&[0x42; 16], &[&c.negotiate_msg, &chal, &enc]);
    enc[MIC_OFFSET..MIC_OFFSET + 16].copy_from_slice(&mic);
    let out = s.authenticate(&enc, &users).unwrap();
    assert_eq!(out.domain, "SOMEDOMAIN");
}

#[test]
fn wrong_password_and_tampering() {
    let (mut s, mut c) = pair("alice", "WORKGROUP", "wrong");
    let chal = s.challenge(&c.negotiate()).unwrap();
    let auth = c.authenticate(&chal, &ENTROPY).unwrap();
    assert_eq!(
        s.authenticate(&auth, &users).unwrap_err(),
        AuthError::LogonFailure
    );
    // Second attempt on the same state is refused.
    assert!(s.authenticate(&auth, &users).is_err());

    // Flip a bit of the MIC.
    let (mut s, mut c) = pair("alice", "WORKGROUP", "s3cret!");
    let chal = s.challenge(&c.negotiate()).unwrap();
    let mut auth = c.authenticate(&chal, &ENTROPY).unwrap();
    auth[MIC_OFFSET] ^= 1;
    assert_eq!(
        s.authenticate(&auth, &users).unwrap_err(),
        AuthError::MicMismatch
    );

    // Tamper with the encrypted session key: MIC no longer matches.
    let (mut s, mut c) = pair("alice", "WORKGROUP", "s3cret!");
    let chal = s.challenge(&c.negotiate()).unwrap();
    let mut auth = c.authenticate(&chal, &ENTROPY).unwrap();
    let n = auth.len();
    auth[n - 1] ^= 1;
    assert_eq!(
        s.authenticate(&auth, &users).unwrap_err(),
        AuthError::MicMismatch
    );
}

#[test]
fn anonymous() {
    let mut s = NtlmServer::new([7; 8], 1, "BRAID", "braid", "WORKGROUP");
    let mut c = NtlmClient::anonymous();
    let chal = s.challenge(&c.negotiate()).unwrap();
    let auth = c.authenticate(&chal, &ENTROPY).unwrap();
    let out = s.authenticate(&auth, &|_: &str, _: &str| None).unwrap();
    assert!(out.anonymous);
    assert!(!s.can_sign());
}

#[test]
fn ntlmv1_refused() {
    let (mut s, mut c) = pair("alice", "", "s3cret!");
    let chal = s.challenge(&c.negotiate()).unwrap();
    let auth = c.authenticate(&chal, &ENTROPY).unwrap();
    let mut m = AuthenticateMessage::decode(&auth).unwrap();
    m.nt_response.truncate(24);
    assert_eq!(
        s.authenticate(&m.encode(), &users).unwrap_err(),
        AuthError::LogonFailure
    );
}

#[test]
fn truncated_ntlmv2_blob_is_malformed_not_a_logon_failure() {
    // smbtorture smb2.session.ntlmssp_bug14932: a bogus NTProofStr over
    // a blob whose AV pairs run past its end (95 bytes in all).
    let (mut s, mut c) = pair("alice", "", "s3cret!");
    let chal = s.challenge(&c.negotiate()).unwrap();
    let auth = c.authenticate(&chal, &ENTROPY).unwrap();
    let mut m = AuthenticateMessage::decode(&auth).unwrap();
    m.nt_response.truncate(95);
    m.nt_response[..16].fill(0xab);
    let err = s.authenticate(&m.encode(), &users).unwrap_err();
    assert!(matches!(err, AuthError::Malformed(_)), "{err:?}");
    assert_eq!(err.nt_status(), crate::NtStatus::INVALID_PARAMETER);
}

#[test]
fn message_round_trips() {
    let n = NegotiateMessage {
        flags: CLIENT_FLAGS,
        domain: vec![],
        workstation: vec![],
        version: Some(VERSION),
    };
    assert_eq!(NegotiateMessage::decode(&n.encode()).unwrap(), n);
    let c = ChallengeMessage::decode(&h(CHALLENGE_4_2_4)).unwrap();
    assert_eq!(ChallengeMessage::decode(&c.encode()).unwrap(), c);
    let a = AuthenticateMessage::decode(&h(AUTHENTICATE_4_2_4)).unwrap();
    let mut a2 = AuthenticateMessage::decode(&a.encode()).unwrap();
    assert_eq!(a2.mic, Some([0; 16]));
    a2.mic = None;
    assert_eq!(a2, a);
}

proptest! {
    #[test]
    fn decoders_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..300), ty in 1u32..4) {
        if bytes.len() >= 12 {
            bytes[..8].copy_from_slice(SIGNATURE);
            bytes[8..12].copy_from_slice(&ty.to_le_bytes());
        }
        let _ = NegotiateMessage::decode(&bytes);
        let _ = ChallengeMessage::decode(&bytes);
        let _ = AuthenticateMessage::decode(&bytes);
        let _ = parse_av_pairs(&bytes);
        let lookup = |_: &str, _: &str| Some([0u8; 16]);
        let _ = verify_authenticate(b"", &h(CHALLENGE_4_2_4), &bytes, &lookup);
        let mut s = NtlmServer::new([0; 8], 0, "A", "a", "B");
        let _ = s.challenge(&bytes);
        let mut c = NtlmClient::new("u", "d", "p");
        c.negotiate();
        let _ = c.authenticate(&bytes, &ENTROPY);
    }

    #[test]
    fn mutated_authenticate_never_panics(idx in 0usize..400, val in any::<u8>()) {
        let mut auth = h(AUTHENTICATE_4_2_4);
        let i = idx % auth.len();
        auth[i] = val;
        let lookup = |_: &str, _: &str| Some(nt_hash("Password"));
        let _ = verify_authenticate(b"", &h(CHALLENGE_4_2_4), &auth, &lookup);
    }

    #[test]
    fn authenticate_round_trip(user in "[a-zA-Z0-9]{0,12}", domain in "[A-Z]{0,8}", ws in "[A-Z]{0,8}",
                               lm in proptest::collection::vec(any::<u8>(), 0..30),
                               nt in proptest::collection::vec(any::<u8>(), 0..80),
                               key in proptest::collection::vec(any::<u8>(), 0..17)) {
        let a = AuthenticateMessage { lm_response: lm, nt_response: nt, domain, user, workstation: ws,
            encrypted_random_session_key: key, flags: CLIENT_FLAGS, version: Some(VERSION), mic: Some([3; 16]) };
        prop_assert_eq!(AuthenticateMessage::decode(&a.encode()).unwrap(), a);
    }
}
