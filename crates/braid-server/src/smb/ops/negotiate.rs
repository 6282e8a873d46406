//! NEGOTIATE: MS-SMB2 3.3.5.3 (SMB1 multi-protocol) and 3.3.5.4.

use std::sync::Arc;

use braid_smb_proto::auth::SpnegoServer;
use braid_smb_proto::codec::{Message, WriteLe};
use braid_smb_proto::crypto::{Cipher, PreauthHash, SigningAlgorithm};
use braid_smb_proto::header::{flags, Command, Header, HEADER_LEN};
use braid_smb_proto::messages::negotiate::{
    capabilities, context_type, dialect, hash_algorithm, security_mode, signing_algorithm,
};
use braid_smb_proto::messages::{
    parse_smb1_negotiate_dialects, NegotiateContext, NegotiateRequest, NegotiateResponse,
};
use braid_smb_proto::NtStatus;

use crate::smb::conn::{Connection, Negotiated};
use crate::smb::{OpResult, Reply, Request};
use crate::state::filetime;

/// Dialects in the server's order of preference.
const SUPPORTED: [u16; 5] = [
    dialect::SMB311,
    dialect::SMB302,
    dialect::SMB300,
    dialect::SMB210,
    dialect::SMB202,
];

fn server_security_mode(conn: &Connection) -> u16 {
    let mut m = security_mode::SIGNING_ENABLED;
    if conn.config.signing_required {
        m |= security_mode::SIGNING_REQUIRED;
    }
    m
}

fn server_capabilities(conn: &Connection, dialect: u16) -> u32 {
    let mut caps = 0;
    if dialect >= dialect::SMB210 {
        caps |= capabilities::LARGE_MTU;
        // MS-SMB2 3.3.5.4: CAP_LEASING on 2.1 and 3.x when leases are offered.
        if conn.config.leases {
            caps |= capabilities::LEASING;
        }
    }
    // MS-SMB2 3.3.5.4: CAP_MULTI_CHANNEL on 3.x when the server supports
    // multichannel (IsMultiChannelCapable).
    if dialect >= dialect::SMB300 && conn.config.multichannel {
        caps |= capabilities::MULTI_CHANNEL;
    }
    // MS-SMB2 3.3.5.4: CAP_PERSISTENT_HANDLES on 3.x when the server
    // supports them: when a share is continuously available
    // (`smb/persistent.rs`). Given only to clients that ask (`negotiate`).
    if dialect >= dialect::SMB300
        && conn
            .server
            .served()
            .shares
            .values()
            .any(|s| s.continuous_availability)
    {
        caps |= capabilities::PERSISTENT_HANDLES;
    }
    // MS-SMB2 3.3.5.4: CAP_DIRECTORY_LEASING on 3.x (dir_lease.rs).
    if dialect >= dialect::SMB300 && conn.config.leases {
        caps |= capabilities::DIRECTORY_LEASING;
    }
    caps
}

fn max_io(conn: &Connection, dialect: u16) -> u32 {
    if dialect == dialect::SMB202 {
        65536
    } else {
        conn.config.max_io_size
    }
}

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let conn = req.conn;
    let r = NegotiateRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if r.dialects.is_empty() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // 3.3.5.4: no common dialect at or above `min_protocol` is
    // NOT_SUPPORTED.
    let min = conn.config.min_dialect;
    let Some(&chosen) = SUPPORTED
        .iter()
        .find(|d| **d >= min && r.dialects.contains(d))
    else {
        return Err(NtStatus::NOT_SUPPORTED);
    };

    let mut signing = match chosen {
        dialect::SMB202 | dialect::SMB210 => SigningAlgorithm::HmacSha256,
        _ => SigningAlgorithm::AesCmac,
    };
    let mut out_contexts = Vec::new();
    let mut cipher = None;
    let mut server_caps = server_capabilities(conn, chosen);
    // 3.3.5.4: persistent handles only for a client that offers them.
    if r.capabilities & capabilities::PERSISTENT_HANDLES == 0 {
        server_caps &= !capabilities::PERSISTENT_HANDLES;
    }
    // 3.3.5.4: 3.0/3.0.2 encrypt with AES-128-CCM when both sides can.
    if (chosen == dialect::SMB300 || chosen == dialect::SMB302)
        && r.capabilities & capabilities::ENCRYPTION != 0
        && conn.config.ciphers.contains(&Cipher::Aes128Ccm)
    {
        cipher = Some(Cipher::Aes128Ccm);
        server_caps |= capabilities::ENCRYPTION;
    }
    if chosen == dialect::SMB311 {
        // MS-SMB2 3.3.5.4: exactly one preauth context, with SHA-512.
        let preauth: Vec<_> = r
            .contexts
            .iter()
            .filter_map(|c| match c {
                NegotiateContext::PreauthIntegrity {
                    hash_algorithms, ..
                } => Some(hash_algorithms),
                _ => None,
            })
            .collect();
        if preauth.len() != 1 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if !preauth[0].contains(&hash_algorithm::SHA512) {
            return Err(NtStatus(0xC05D_0000)); // STATUS_SMB_NO_PREAUTH_INTEGRITY_HASH_OVERLAP
        }
        let mut seen = Vec::new();
        for c in &r.contexts {
            let t = c.context_type();
            if t != context_type::NETNAME_NEGOTIATE_CONTEXT_ID && seen.contains(&t) {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            seen.push(t);
        }
        out_contexts.push(NegotiateContext::PreauthIntegrity {
            hash_algorithms: vec![hash_algorithm::SHA512],
            salt: rand::random::<[u8; 32]>().to_vec(),
        });
        for c in &r.contexts {
            match c {
                // 3.3.5.4: the server's most preferred cipher that the client offers.
                NegotiateContext::Encryption { ciphers } => {
                    cipher = conn
                        .config
                        .ciphers
                        .iter()
                        .copied()
                        .find(|c| ciphers.contains(&c.wire_id()));
                    let id = cipher.map(|c| c.wire_id()).unwrap_or(0);
                    out_contexts.push(NegotiateContext::Encryption { ciphers: vec![id] });
                }
                NegotiateContext::SigningCapabilities { algorithms } => {
                    // 3.3.5.4: the first of the client's algorithms that we support.
                    let pick = algorithms
                        .iter()
                        .find_map(|&a| match a {
                            signing_algorithm::AES_GMAC => Some(SigningAlgorithm::AesGmac),
                            signing_algorithm::AES_CMAC => Some(SigningAlgorithm::AesCmac),
                            signing_algorithm::HMAC_SHA256 => Some(SigningAlgorithm::HmacSha256),
                            _ => None,
                        })
                        .unwrap_or(SigningAlgorithm::AesCmac);
                    signing = pick;
                    out_contexts.push(NegotiateContext::SigningCapabilities {
                        algorithms: vec![pick.wire_id()],
                    });
                }
                _ => {}
            }
        }
    }

    let negotiated = Negotiated {
        dialect: chosen,
        client_guid: r.client_guid,
        client_security_mode: r.security_mode,
        client_capabilities: r.capabilities,
        client_dialects: r.dialects.clone(),
        server_capabilities: server_caps,
        server_security_mode: server_security_mode(conn),
        signing_algorithm: signing,
        cipher,
    };
    let resp = response(conn, chosen, &negotiated, out_contexts);
    if conn.negotiated.set(negotiated).is_err() {
        // 3.3.5.4: a second NEGOTIATE on a connection is a protocol error.
        conn.closing.cancel();
        return Err(NtStatus::INVALID_PARAMETER);
    }
    *conn.negotiate_started.lock().unwrap() = true;
    let mut reply = Reply::of(&resp);
    if chosen == dialect::SMB311 {
        let mut h = PreauthHash::new();
        h.update(req.msg);
        let conn = conn.clone();
        reply.after_send = Some(Box::new(move |resp: &[u8]| {
            h.update(resp);
            *conn.preauth.lock().unwrap() = Some(h);
        }));
    }
    Ok(reply)
}

fn response(
    conn: &Arc<Connection>,
    chosen: u16,
    n: &Negotiated,
    contexts: Vec<NegotiateContext>,
) -> NegotiateResponse {
    let io = max_io(conn, chosen);
    NegotiateResponse {
        security_mode: n.server_security_mode,
        dialect_revision: chosen,
        server_guid: conn.server.smb.server_guid,
        capabilities: n.server_capabilities,
        max_transact_size: io.min(conn.config.max_transact_size.max(65536)),
        max_read_size: io,
        max_write_size: io,
        system_time: filetime(std::time::SystemTime::now()),
        server_start_time: 0,
        security_buffer: SpnegoServer::initial_token(),
        contexts,
    }
}

/// MS-SMB2 3.3.5.3.1: an SMB1 NEGOTIATE naming SMB2 dialects is answered
/// with an SMB2 NEGOTIATE response (dialect 2.002, or 2.??? to ask the
/// client to negotiate again in SMB2).
pub fn handle_smb1(conn: &Arc<Connection>, msg: &[u8]) -> Result<Vec<u8>, String> {
    let dialects =
        parse_smb1_negotiate_dialects(msg).map_err(|e| format!("bad SMB1 negotiate: {e}"))?;
    let chosen = if dialects.iter().any(|d| d == "SMB 2.???") {
        dialect::WILDCARD
    } else if dialects.iter().any(|d| d == "SMB 2.002")
        && conn.config.min_dialect <= dialect::SMB202
    {
        dialect::SMB202
    } else {
        return Err("SMB1-only client".into());
    };
    // The SMB1 request used message id 0; the client continues at 1.
    let credits = {
        let mut w = conn.credits.lock().unwrap();
        w.consume(0, 1)
            .map_err(|_| "message id 0 already used".to_string())?;
        w.grant(1, 1)
    };
    let negotiated = Negotiated {
        dialect: chosen,
        client_guid: [0; 16],
        client_security_mode: 0,
        client_capabilities: 0,
        client_dialects: vec![chosen],
        server_capabilities: server_capabilities(conn, chosen),
        server_security_mode: server_security_mode(conn),
        signing_algorithm: SigningAlgorithm::HmacSha256,
        cipher: None,
    };
    let resp = response(conn, chosen, &negotiated, Vec::new());
    if chosen == dialect::SMB202 {
        let _ = conn.negotiated.set(negotiated);
    }
    let h = Header {
        command: Command::Negotiate as u16,
        credits,
        flags: flags::SERVER_TO_REDIR,
        ..Default::default()
    };
    let mut out = Vec::with_capacity(HEADER_LEN + 128);
    h.encode(&mut out);
    resp.encode(&mut out);
    out.align_to(1);
    Ok(out)
}
