//! The positive checks after the fuzzing: a fresh session's pipes bind
//! and answer real calls, in the clear and on authenticated associations.

use braid_client::{NtStatus, Tree};
use braid_smb_proto::dcerpc::auth::{auth_level, auth_type};
use braid_smb_proto::Command;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::{config, create_pipe, ipc_unc, payload, transceive_req, write_req};
use crate::common;
use crate::common::ops::session_with;
use crate::requests::HDR;
use crate::rpc;

/// After the fuzzing, a fresh session's pipes still work: srvsvc binds
/// (bind_ack) and NetrShareEnum lists the share; lsarpc binds and
/// LsarOpenPolicy2 gives a handle. Then the same calls on authenticated
/// associations: NTLMSSP sealed (PKT_PRIVACY) on srvsvc, SPNEGO signed
/// (PKT_INTEGRITY) on lsarpc, the answers checked with the client's own
/// session security.
pub async fn still_served(srv: &common::Server) {
    let (s, _) = session_with(srv, config(false)).await;
    let t = s.tree_connect(&ipc_unc()).await.expect("IPC$");
    let mut rng = StdRng::seed_from_u64(0);
    for (name, lsa) in [("srvsvc", false), ("lsarpc", true)] {
        let id = open_pipe(&t, name).await;
        let ack = transceive(&t, id, &rpc::plain_bind(lsa)).await;
        assert_eq!(ack.get(2), Some(&12), "{name}: a bind_ack");
        let (opnum, stub) = positive_call(lsa);
        let mut pdus = rpc::request(&mut rng, 0, opnum, &stub, 2);
        while pdus.len() != 1 {
            pdus = rpc::request(&mut rng, 0, opnum, &stub, 2);
        }
        let answer = transceive(&t, id, &pdus.remove(0)).await;
        assert_eq!(answer.get(2), Some(&2), "{name}: a response");
        check_positive_answer(name, lsa, &answer[24..]);
    }
    let secured = [
        ("srvsvc", false, auth_type::NTLMSSP, auth_level::PKT_PRIVACY),
        ("lsarpc", true, auth_type::SPNEGO, auth_level::PKT_INTEGRITY),
    ];
    for (name, lsa, kind, level) in secured {
        let id = open_pipe(&t, name).await;
        let (bind, pending) = rpc::plain_auth_bind(lsa, kind, level, common::USER, &srv.password);
        let ack = transceive(&t, id, &bind).await;
        assert_eq!(ack.get(2), Some(&12), "{name}: an authenticated bind_ack");
        let token = rpc::answer_token(&ack).expect("the server's leg");
        let (leg, after) = rpc::faithful_leg(pending, token, lsa, 2);
        let mut sec = match after {
            rpc::AfterLeg::Secured(sec) => {
                // MS-RPCE 2.2.2.10: AUTH3 gets no answer.
                write(&t, id, &leg).await;
                *sec
            }
            rpc::AfterLeg::Final(pending) => {
                let resp = transceive(&t, id, &leg).await;
                assert_eq!(resp.get(2), Some(&15), "{name}: an alter_context_resp");
                let token = rpc::answer_token(&resp).expect("SPNEGO's last token");
                rpc::finish(pending, token).unwrap_or_else(|| panic!("{name}: SPNEGO completes"))
            }
            rpc::AfterLeg::Nothing => panic!("{name}: no security from the legs"),
        };
        let (opnum, stub) = positive_call(lsa);
        let mut pdus = rpc::secured_request(&mut rng, &mut sec, 0, opnum, &stub, 3);
        let last = pdus.pop().expect("a fragment");
        for pdu in &pdus {
            write(&t, id, pdu).await;
        }
        let answer = transceive(&t, id, &last).await;
        assert_eq!(
            answer.get(2),
            Some(&2),
            "{name} at level {level}: a response"
        );
        let stub = rpc::open_response(&mut sec, &answer)
            .unwrap_or_else(|| panic!("{name} at level {level}: the answer verifies"));
        check_positive_answer(name, lsa, &stub);
    }
    let _ = s.logoff().await;
}

async fn open_pipe(t: &Tree, name: &str) -> [u8; 16] {
    let r = t
        .raw(Command::Create, &create_pipe(name), 4096)
        .await
        .expect("open a pipe");
    assert_eq!(r.status(), NtStatus::SUCCESS, "open {name}");
    r.msg[HDR + 64..HDR + 80].try_into().unwrap()
}

async fn transceive(t: &Tree, id: [u8; 16], pdu: &[u8]) -> Vec<u8> {
    let r = t
        .raw(Command::Ioctl, &transceive_req(id, pdu, 65536), 65536)
        .await
        .expect("transceive");
    assert_eq!(r.status(), NtStatus::SUCCESS, "transceive");
    payload(Command::Ioctl, &r).to_vec()
}

async fn write(t: &Tree, id: [u8; 16], pdu: &[u8]) {
    let r = t
        .raw(Command::Write, &write_req(id, pdu), 0)
        .await
        .expect("write");
    assert_eq!(r.status(), NtStatus::SUCCESS, "write to a pipe");
}

/// LsarOpenPolicy2 (MAXIMUM_ALLOWED) or NetrShareEnum at level 1.
fn positive_call(lsa: bool) -> (u16, Vec<u8>) {
    let (opnum, words) = if lsa {
        (44, [0u32, 24, 0, 0, 0, 0, 0, 0x0200_0000])
    } else {
        (15, [0u32, 1, 1, 0x2_0000, 0, 0, u32::MAX, 0])
    };
    (opnum, words.iter().flat_map(|v| v.to_le_bytes()).collect())
}

/// LsarOpenPolicy2 gave a handle with STATUS_SUCCESS; NetrShareEnum
/// listed the share.
fn check_positive_answer(name: &str, lsa: bool, stub: &[u8]) {
    if lsa {
        assert_eq!(stub.len(), 24, "{name}: LsarOpenPolicy2 gives a handle");
        assert_eq!(
            stub[20..24],
            [0; 4],
            "{name}: LsarOpenPolicy2: STATUS_SUCCESS"
        );
    } else {
        let share: Vec<u8> = common::SHARE
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        assert!(
            stub.windows(share.len()).any(|w| w == share),
            "{name}: NetrShareEnum lists the share"
        );
    }
}
