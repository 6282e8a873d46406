//! The authentication targets: NTLMSSP messages and exchanges, SPNEGO
//! tokens and exchanges, and the DER reader under them.

use super::*;

// ---- NTLMSSP ----------------------------------------------------------------

/// Input: selector byte, then an NTLMSSP message (or AV pair list).
pub fn ntlmssp(data: &[u8]) {
    let Some((&sel, msg)) = data.split_first() else { return };
    match sel % 6 {
        0 => {
            rt_norm("NegotiateMessage", msg, NegotiateMessage::decode, |m| m.encode(), |m| zero_to_none(&mut m.version));
        }
        1 => {
            rt_norm("ChallengeMessage", msg, ChallengeMessage::decode, |m| m.encode(), |m| zero_to_none(&mut m.version));
        }
        2 => {
            rt_norm("AuthenticateMessage", msg, AuthenticateMessage::decode, |m| m.encode(), |m| {
                zero_to_none(&mut m.version);
                zero_to_none(&mut m.mic);
            });
        }
        3 => {
            rt("AV pairs", msg, parse_av_pairs, |l| encode_av_pairs(l));
        }
        4 => {
            // Server: arbitrary NEGOTIATE in, CHALLENGE out (must be decodable).
            let mut s = NtlmServer::new(SERVER_CHALLENGE, TIMESTAMP, "BRAID", "braid.example", DOMAIN);
            if let Ok(chal) = s.challenge(msg) {
                ChallengeMessage::decode(&chal).expect("server CHALLENGE decodes");
                // And a real client can answer it.
                let mut c = NtlmClient::new(USER, DOMAIN, PASSWORD);
                let _ = c.negotiate();
                let _ = c.authenticate(&chal, &ENTROPY);
            }
        }
        _ => {
            // Server: a real NEGOTIATE, then an arbitrary AUTHENTICATE.
            let mut s = NtlmServer::new(SERVER_CHALLENGE, TIMESTAMP, "BRAID", "braid.example", DOMAIN);
            let mut c = NtlmClient::new(USER, DOMAIN, PASSWORD);
            let chal = s.challenge(&c.negotiate()).expect("challenge");
            let _ = chal;
            if s.authenticate(msg, &lookup).is_ok() {
                let _ = s.can_sign();
                let _ = s.session_security();
            }
        }
    }
}

// ---- SPNEGO ------------------------------------------------------------------

/// parse_token, and for NegTokenInit/NegTokenResp the re-encoding parses
/// back to the same token (mechTypes compared as OIDs: the raw
/// mechTypes DER is what the peer sent and is not re-encoded).
pub(super) fn spnego_token(tok: &[u8]) {
    let Ok(t) = parse_token(tok) else { return };
    match t {
        Token::Init(i) => {
            let enc = i.encode();
            match parse_token(&enc) {
                Ok(Token::Init(j)) => {
                    assert_eq!(i.mech_types, j.mech_types);
                    assert_eq!(i.mech_token, j.mech_token);
                    assert_eq!(i.hint_name, j.hint_name);
                    assert_eq!(i.mech_list_mic, j.mech_list_mic);
                }
                other => panic!("NegTokenInit re-encoding parsed as {other:?}: {}", hex(&enc)),
            }
        }
        Token::Resp(r) => {
            let enc = r.encode();
            match parse_token(&enc) {
                Ok(Token::Resp(s)) => assert_eq!(r, s),
                other => panic!("NegTokenResp re-encoding parsed as {other:?}: {}", hex(&enc)),
            }
        }
        Token::Ntlmssp(_) => {}
    }
}

fn new_server() -> SpnegoServer {
    SpnegoServer::new(NtlmServer::new(SERVER_CHALLENGE, TIMESTAMP, "BRAID", "braid.example", DOMAIN))
}

/// Input: mode byte, then
/// * mode 0: tokens, each prefixed by a u16 LE length, fed to one
///   `SpnegoServer::step` after another;
/// * mode 1/2: a real exchange (SPNEGO / raw NTLMSSP) between
///   `SpnegoClient`/`NtlmClient` and the server, with mutations
///   `(round, position u16 LE, xor)` applied to the client's tokens. With no
///   mutation the exchange must succeed.
pub fn spnego(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 3 {
        0 => {
            let mut server = new_server();
            let mut r = rest;
            for _ in 0..8 {
                if r.len() < 2 {
                    break;
                }
                let n = (u16::from_le_bytes([r[0], r[1]]) as usize).min(r.len() - 2);
                let tok = &r[2..2 + n];
                r = &r[2 + n..];
                spnego_token(tok);
                match server.step(tok, &lookup) {
                    Ok(SpnegoStep::Continue(t)) => spnego_token(&t),
                    Ok(SpnegoStep::Done { token, .. }) => spnego_token(&token),
                    Err(_) => {}
                }
            }
        }
        m => {
            let muts: Vec<(u8, usize, u8)> =
                rest.chunks_exact(4).map(|c| (c[0] % 3, u16::from_le_bytes([c[1], c[2]]) as usize, c[3])).collect();
            let mutate = |round: u8, mut t: Vec<u8>| {
                for &(r, pos, x) in &muts {
                    if r == round && !t.is_empty() {
                        let i = pos % t.len();
                        t[i] ^= x;
                    }
                }
                t
            };
            let clean = muts.iter().all(|&(_, _, x)| x == 0);
            let ok = if m == 1 { spnego_exchange(&mutate) } else { raw_exchange(&mutate) };
            if clean {
                assert!(ok, "unmutated {} exchange failed", if m == 1 { "SPNEGO" } else { "raw NTLMSSP" });
            }
        }
    }
}

fn spnego_exchange(mutate: &dyn Fn(u8, Vec<u8>) -> Vec<u8>) -> bool {
    let mut server = new_server();
    let mut client = SpnegoClient::new(NtlmClient::new(USER, DOMAIN, PASSWORD), ENTROPY);
    let mut tok = mutate(0, client.initial_token());
    for round in 1..=4u8 {
        let reply = match server.step(&tok, &lookup) {
            Ok(SpnegoStep::Continue(t)) => t,
            Ok(SpnegoStep::Done { token, outcome }) => {
                if outcome.user != USER {
                    return false;
                }
                return matches!(client.step(&token), Ok(ClientStep::Done));
            }
            Err(_) => return false,
        };
        match client.step(&reply) {
            Ok(ClientStep::Send(t)) => tok = mutate(round, t),
            Ok(ClientStep::Done) => return server.is_done(),
            Err(_) => return false,
        }
    }
    false
}

fn raw_exchange(mutate: &dyn Fn(u8, Vec<u8>) -> Vec<u8>) -> bool {
    let mut server = new_server();
    let mut client = NtlmClient::new(USER, DOMAIN, PASSWORD);
    let neg = mutate(0, client.negotiate());
    let chal = match server.step(&neg, &lookup) {
        Ok(SpnegoStep::Continue(t)) => t,
        _ => return false,
    };
    let Ok(auth) = client.authenticate(&chal, &ENTROPY) else { return false };
    match server.step(&mutate(1, auth), &lookup) {
        Ok(SpnegoStep::Done { outcome, .. }) => outcome.user == USER,
        _ => false,
    }
}

// ---- DER -----------------------------------------------------------------------

/// Walks every element (iteratively), re-encodes each TLV, checks OIDs
/// (arcs → from_arcs gives the same contents), and parses the whole input
/// as a SPNEGO token.
pub fn der(data: &[u8]) {
    let mut stack = vec![DerReader::new(data)];
    let mut nodes = 0;
    while let Some(mut r) = stack.pop() {
        while !r.is_empty() && nodes < 4096 {
            nodes += 1;
            let Ok(t) = r.read() else { break };
            let mut enc = Vec::new();
            der::write_tlv(&mut enc, t.tag, t.value);
            let mut rr = DerReader::new(&enc);
            let back = rr.read().expect("re-encoded TLV reads back");
            rr.finish().expect("re-encoded TLV has no trailing bytes");
            assert_eq!((back.tag, back.value), (t.tag, t.value));
            assert!(t.raw.len() >= t.value.len() + 2);
            if t.tag == der::TAG_OID {
                if let Ok(oid) = Oid::from_der_content(t.value) {
                    let _ = oid.to_string();
                    if let Ok(arcs) = oid.arcs() {
                        let again = Oid::from_arcs(&arcs)
                            .unwrap_or_else(|e| panic!("from_arcs({arcs:?}) failed: {e:?}"));
                        assert_eq!(again, oid, "OID arcs round trip");
                    }
                }
            }
            if t.tag == der::TAG_ENUMERATED {
                let _ = DerReader::new(t.raw).read_small_enumerated();
            }
            if t.is_constructed() {
                stack.push(t.reader());
            }
        }
    }
    spnego_token(data);
}
