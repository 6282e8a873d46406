//! The client side of authenticated associations, for the tests: the
//! crate's NTLMSSP and SPNEGO initiators and NTLM session security, PDUs
//! built in either byte order, and a backend with one account.

use super::*;
use crate::auth::{nt_hash, ClientEntropy, ClientStep, NtlmClient, SpnegoClient};
use crate::dcerpc::pdu::{
    self, pfc, split_fragment, BindAck, BindNak, Fault, SyntaxId, DREP_BIG_ENDIAN,
    DREP_LITTLE_ENDIAN,
};
use crate::dcerpc::test_support::{
    bound_endpoint, call, read_pdus, server_get_info_stub, three_shares, FixedBackend,
};
use crate::dcerpc::{lsa::LsaBackend, PipeBackend, PipeEndpoint, SrvsvcBackend};

pub(super) const USER: &str = "alice";
pub(super) const PASSWORD: &str = "Secret.1";
pub(super) const NET_SERVER_GET_INFO: u16 = 21;
pub(super) const NET_SHARE_ENUM_ALL: u16 = 15;

/// The fixed srvsvc backend, with one account whose SMB session the pipe
/// belongs to.
pub(super) struct AuthBackend {
    pub(super) inner: FixedBackend,
    pub(super) session_user: &'static str,
    pub(super) failed: std::cell::RefCell<Vec<String>>,
}

impl PipeBackend for AuthBackend {
    fn srvsvc(&self) -> &dyn SrvsvcBackend {
        &self.inner
    }
    fn lsa(&self) -> &dyn LsaBackend {
        &self.inner
    }
    fn rpc_auth(&self) -> Option<&dyn RpcAuthBackend> {
        Some(self)
    }
}

impl RpcAuthBackend for AuthBackend {
    fn ntlm_server(&self) -> NtlmServer {
        NtlmServer::new([7; 8], TIME, "BRAID", "braid", "WORKGROUP")
    }
    fn nt_hash(&self, user: &str, _domain: &str) -> Option<[u8; 16]> {
        user.eq_ignore_ascii_case(USER).then(|| nt_hash(PASSWORD))
    }
    fn accepts(&self, outcome: &AuthOutcome) -> bool {
        outcome.user.eq_ignore_ascii_case(self.session_user)
    }
    fn logon_failed(&self, user: &str) {
        self.failed.borrow_mut().push(user.to_string());
    }
}

pub(super) const TIME: u64 = 0x01d9_0000_0000_0000;

pub(super) fn backend_with(inner: FixedBackend) -> AuthBackend {
    AuthBackend {
        inner,
        session_user: USER,
        failed: Default::default(),
    }
}

pub(super) fn alice_backend() -> AuthBackend {
    backend_with(three_shares())
}

pub(super) fn trailer(auth_type: u8, auth_level: u8, auth_context_id: u32) -> SecTrailer {
    SecTrailer {
        auth_type,
        auth_level,
        auth_pad_length: 0,
        auth_reserved: 0,
        auth_context_id,
    }
}

pub(super) enum Mech {
    Ntlm(NtlmClient),
    Spnego(Box<SpnegoClient>),
}

/// The client side of one association, in the byte order it speaks.
pub(super) struct Client {
    pub(super) auth_type: u8,
    pub(super) level: u8,
    pub(super) context_id: u32,
    pub(super) endian: Endian,
    pub(super) max_frag: u16,
    pub(super) mech: Mech,
    pub(super) sec: Option<NtlmSecurity>,
    pub(super) next_call_id: u32,
}

pub(super) fn entropy() -> ClientEntropy {
    ClientEntropy {
        client_challenge: [3; 8],
        random_session_key: [9; 16],
        timestamp: TIME,
    }
}

pub(super) fn put16(out: &mut Vec<u8>, v: u16, e: Endian) {
    out.extend_from_slice(&match e {
        Endian::Little => v.to_le_bytes(),
        Endian::Big => v.to_be_bytes(),
    });
}

pub(super) fn put32(out: &mut Vec<u8>, v: u32, e: Endian) {
    out.extend_from_slice(&match e {
        Endian::Little => v.to_le_bytes(),
        Endian::Big => v.to_be_bytes(),
    });
}

pub(super) fn syntax(out: &mut Vec<u8>, s: &SyntaxId, e: Endian) {
    let u = s.uuid;
    put32(out, u32::from_le_bytes([u[0], u[1], u[2], u[3]]), e);
    put16(out, u16::from_le_bytes([u[4], u[5]]), e);
    put16(out, u16::from_le_bytes([u[6], u[7]]), e);
    out.extend_from_slice(&u[8..]);
    put32(out, s.version, e);
}

impl Client {
    pub(super) fn new(auth_type: u8, level: u8, password: &str) -> Client {
        let ntlm = NtlmClient::new(USER, "WORKGROUP", password);
        let mech = match auth_type {
            auth_type::SPNEGO => Mech::Spnego(Box::new(SpnegoClient::new(ntlm, entropy()))),
            _ => Mech::Ntlm(ntlm),
        };
        Client {
            auth_type,
            level,
            context_id: 0x0000_1234,
            endian: Endian::Little,
            max_frag: 4280,
            mech,
            sec: None,
            next_call_id: 10,
        }
    }

    pub(super) fn big_endian(mut self) -> Client {
        self.endian = Endian::Big;
        self
    }

    pub(super) fn header(&self, ptype: u8, flags: u8, call_id: u32) -> Vec<u8> {
        let mut out = vec![5, 0, ptype, flags];
        out.extend_from_slice(&match self.endian {
            Endian::Little => DREP_LITTLE_ENDIAN,
            Endian::Big => DREP_BIG_ENDIAN,
        });
        put16(&mut out, 0, self.endian);
        put16(&mut out, 0, self.endian);
        put32(&mut out, call_id, self.endian);
        out
    }

    pub(super) fn finish(&self, pdu: &mut [u8], auth_length: usize) {
        let mut lengths = Vec::new();
        put16(&mut lengths, pdu.len() as u16, self.endian);
        put16(&mut lengths, auth_length as u16, self.endian);
        pdu[8..12].copy_from_slice(&lengths);
    }

    pub(super) fn push_trailer(&self, pdu: &mut Vec<u8>, pad: usize) {
        pdu.extend_from_slice(&[self.auth_type, self.level, pad as u8, 0]);
        put32(pdu, self.context_id, self.endian);
    }

    /// A BIND, ALTER_CONTEXT or AUTH3 carrying `token`.
    pub(super) fn leg(&self, ptype: u8, call_id: u32, token: &[u8]) -> Vec<u8> {
        let e = self.endian;
        let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG | PFC_SUPPORT_HEADER_SIGN;
        let mut pdu = self.header(ptype, flags, call_id);
        if ptype == ptype::AUTH3 {
            pdu.extend_from_slice(&[0; 4]);
        } else {
            put16(&mut pdu, self.max_frag, e);
            put16(&mut pdu, self.max_frag, e);
            put32(&mut pdu, 0, e);
            pdu.extend_from_slice(&[1, 0, 0, 0]);
            put16(&mut pdu, 0, e);
            pdu.extend_from_slice(&[1, 0]);
            syntax(&mut pdu, &SyntaxId::SRVSVC, e);
            syntax(&mut pdu, &SyntaxId::NDR20, e);
        }
        self.push_trailer(&mut pdu, 0);
        pdu.extend_from_slice(token);
        self.finish(&mut pdu, token.len());
        pdu
    }

    /// One REQUEST fragment on context 0, signed or sealed at the level.
    pub(super) fn fragment(
        &mut self,
        call_id: u32,
        flags: u8,
        alloc_hint: u32,
        opnum: u16,
        stub: &[u8],
    ) -> Vec<u8> {
        let e = self.endian;
        let mut pdu = self.header(ptype::REQUEST, flags, call_id);
        put32(&mut pdu, alloc_hint, e);
        put16(&mut pdu, 0, e);
        put16(&mut pdu, opnum, e);
        pdu.extend_from_slice(stub);
        if self.level < auth_level::PKT {
            self.finish(&mut pdu, 0);
            return pdu;
        }
        let pad = (16 - stub.len() % 16) % 16;
        pdu.resize(pdu.len() + pad, 0);
        let trailer_at = pdu.len();
        self.push_trailer(&mut pdu, pad);
        let signed_end = pdu.len();
        pdu.resize(signed_end + SIGNATURE_LEN, 0);
        self.finish(&mut pdu, SIGNATURE_LEN);
        let sec = self.sec.as_mut().expect("established");
        let sig = if self.level == auth_level::PKT_PRIVACY {
            sec.seal(&mut pdu[..signed_end], 24..trailer_at)
        } else {
            sec.sign(&pdu[..signed_end])
        };
        pdu[signed_end..].copy_from_slice(&sig);
        pdu
    }

    pub(super) fn request(&mut self, opnum: u16, stub: &[u8]) -> Vec<u8> {
        self.next_call_id += 1;
        let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
        self.fragment(self.next_call_id, flags, stub.len() as u32, opnum, stub)
    }

    /// The stub of an answer's fragments, each verified (and decrypted);
    /// also each fragment's signature sequence number.
    pub(super) fn answer(&mut self, pdus: &[Vec<u8>]) -> (Vec<u8>, Vec<u32>) {
        let mut stub = Vec::new();
        let mut seqs = Vec::new();
        for pdu in pdus {
            let frag = split_fragment(pdu).unwrap();
            assert_eq!(frag.header.ptype, ptype::RESPONSE, "{pdu:02x?}");
            assert!(pdu.len() <= usize::from(self.max_frag));
            if self.level < auth_level::PKT {
                assert_eq!(frag.header.auth_length, 0);
                stub.extend_from_slice(&frag.body[8..]);
                continue;
            }
            let parts = AuthParts::of(&frag).unwrap().unwrap();
            assert_eq!(parts.trailer.auth_type, self.auth_type);
            assert_eq!(parts.trailer.auth_level, self.level);
            assert_eq!(parts.trailer.auth_context_id, self.context_id);
            // MS-RPCE 2.2.2.11: the trailer 16-aligned from the stub start.
            let trailer_at = pdu.len() - SIGNATURE_LEN - SEC_TRAILER_LEN;
            assert_eq!((trailer_at - 24) % 16, 0);
            let stub_end = trailer_at - usize::from(parts.trailer.auth_pad_length);
            let mut signed = pdu[..pdu.len() - SIGNATURE_LEN].to_vec();
            let sec = self.sec.as_mut().unwrap();
            if self.level == auth_level::PKT_PRIVACY {
                sec.unseal(&mut signed, 24..trailer_at, parts.token)
                    .expect("answer unseals");
            } else {
                sec.verify(&signed, parts.token).expect("answer verifies");
            }
            seqs.push(u32::from_le_bytes(parts.token[12..16].try_into().unwrap()));
            stub.extend_from_slice(&signed[24..stub_end]);
        }
        (stub, seqs)
    }

    pub(super) fn call(
        &mut self,
        ep: &mut PipeEndpoint,
        backend: &AuthBackend,
        opnum: u16,
        stub: &[u8],
    ) -> (Vec<u8>, Vec<u32>) {
        let pdu = self.request(opnum, stub);
        ep.write(&pdu, backend).unwrap();
        self.answer(&read_pdus(ep))
    }
}

pub(super) fn one_pdu(ep: &mut PipeEndpoint) -> Vec<u8> {
    let mut pdus = read_pdus(ep);
    assert_eq!(pdus.len(), 1);
    pdus.remove(0)
}

pub(super) fn token_of(pdu: &[u8]) -> (SecTrailer, Vec<u8>) {
    let frag = split_fragment(pdu).unwrap();
    let parts = AuthParts::of(&frag).unwrap().expect("a verifier");
    (parts.trailer, parts.token.to_vec())
}

pub(super) fn fault_status_of(pdu: &[u8]) -> u32 {
    let frag = split_fragment(pdu).unwrap();
    assert_eq!(frag.header.ptype, ptype::FAULT, "{pdu:02x?}");
    Fault::decode(frag.body).unwrap().status
}

/// Every leg up to an established context.
pub(super) fn establish(client: &mut Client, backend: &AuthBackend) -> PipeEndpoint {
    let (ep, refusal) = try_establish(client, backend);
    assert_eq!(refusal, None);
    ep
}

/// Every leg up to an established context, or up to the fault that
/// refused an alter_context leg.
pub(super) fn try_establish(
    client: &mut Client,
    backend: &AuthBackend,
) -> (PipeEndpoint, Option<Vec<u8>>) {
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    let first = match &mut client.mech {
        Mech::Ntlm(c) => c.negotiate(),
        Mech::Spnego(c) => c.initial_token(),
    };
    ep.write(&client.leg(ptype::BIND, 1, &first), backend)
        .unwrap();
    let ack = one_pdu(&mut ep);
    assert_eq!(ack[2], ptype::BIND_ACK, "{ack:02x?}");
    // Header signing is offered back to a client that asked.
    assert_eq!(ack[3] & PFC_SUPPORT_HEADER_SIGN, PFC_SUPPORT_HEADER_SIGN);
    let (t, token) = token_of(&ack);
    assert_eq!(
        (t.auth_type, t.auth_level, t.auth_context_id),
        (client.auth_type, client.level, client.context_id)
    );
    let results = BindAck::decode(split_fragment(&ack).unwrap().body)
        .unwrap()
        .results;
    assert_eq!(results[0].result, pdu::context_result::ACCEPTANCE);
    match &mut client.mech {
        Mech::Ntlm(c) => {
            let auth = c.authenticate(&token, &entropy()).unwrap();
            client.sec = c.session_security().ok();
            let pdu = client.leg(ptype::AUTH3, 2, &auth);
            ep.write(&pdu, backend).unwrap();
            // MS-RPCE 2.2.2.10: no answer to an AUTH3.
            assert!(!ep.has_output());
        }
        Mech::Spnego(c) => {
            let ClientStep::Send(next) = c.step(&token).unwrap() else {
                panic!("SPNEGO done after one leg");
            };
            let pdu = client.leg(ptype::ALTER_CONTEXT, 2, &next);
            ep.write(&pdu, backend).unwrap();
            let resp = one_pdu(&mut ep);
            if resp[2] == ptype::FAULT {
                return (ep, Some(resp));
            }
            assert_eq!(resp[2], ptype::ALTER_CONTEXT_RESP);
            let (_, token) = token_of(&resp);
            let Mech::Spnego(c) = &mut client.mech else {
                unreachable!()
            };
            assert_eq!(c.step(&token).unwrap(), ClientStep::Done);
            client.sec = c.take_session_security().ok();
        }
    }
    (ep, None)
}

/// NetSrvGetInfo level 100 as an unauthenticated client gets it.
pub(super) fn plain_server_info() -> Vec<u8> {
    let backend = three_shares();
    let mut ep = bound_endpoint(4280);
    call(
        &mut ep,
        &backend,
        NET_SERVER_GET_INFO,
        &server_get_info_stub(100),
    )
}

pub(super) fn nak_reason(pdu: &[u8]) -> u16 {
    let frag = split_fragment(pdu).unwrap();
    assert_eq!(frag.header.ptype, ptype::BIND_NAK);
    BindNak::decode(frag.body).unwrap().reject_reason
}

pub(super) fn recorded_exchange() -> Vec<Vec<u8>> {
    let backend = alice_backend();
    let mut client = Client::new(auth_type::NTLMSSP, auth_level::PKT_PRIVACY, PASSWORD);
    let Mech::Ntlm(c) = &mut client.mech else {
        unreachable!()
    };
    let negotiate = c.negotiate();
    let bind = client.leg(ptype::BIND, 1, &negotiate);
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    ep.write(&bind, &backend).unwrap();
    let (_, challenge) = token_of(&one_pdu(&mut ep));
    let Mech::Ntlm(c) = &mut client.mech else {
        unreachable!()
    };
    let auth = c.authenticate(&challenge, &entropy()).unwrap();
    client.sec = c.session_security().ok();
    let auth3 = client.leg(ptype::AUTH3, 2, &auth);
    let request = client.request(NET_SERVER_GET_INFO, &server_get_info_stub(100));
    vec![bind, auth3, request]
}
