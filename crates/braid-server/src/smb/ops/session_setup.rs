//! SESSION_SETUP: MS-SMB2 3.3.5.5 (new sessions and re-authentication).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use braid_smb_proto::auth::{AuthOutcome, NtlmServer, SpnegoServer, SpnegoStep};
use braid_smb_proto::codec::Message;
use braid_smb_proto::crypto::{derive_session_keys, NonceGenerator, PreauthHash};
use braid_smb_proto::messages::negotiate::{dialect, security_mode};
use braid_smb_proto::messages::session_setup::{flags as setup_flags, session_flags};
use braid_smb_proto::messages::{SessionSetupRequest, SessionSetupResponse};
use braid_smb_proto::NtStatus;
use tracing::info;

use crate::session::{
    AuthExchange, EncryptionState, Identity, Session, SessionPhase, SigningState,
};
use crate::smb::{OpResult, Reply, Request};
use crate::state::filetime;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let conn = req.conn;
    let server = &conn.server;
    let neg = conn
        .negotiated()
        .ok_or(NtStatus::INVALID_PARAMETER)?
        .clone();
    let r = SessionSetupRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;

    if r.flags & setup_flags::BINDING != 0 {
        // Session binding (multichannel) is not offered yet: 3.3.5.5 says a
        // server without multichannel support refuses the bind.
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    }

    // A session is "new" until its first authentication completes; after
    // that a SESSION_SETUP on it is a re-authentication.
    let (session, is_new) = match req.session.clone() {
        Some(s) => {
            let new = s.phase() == SessionPhase::InProgress;
            (s, new)
        }
        None if req.header.session_id == 0 => {
            let s = Arc::new(Session::new(server.new_session_id(), neg.dialect, conn.id));
            server.sessions.insert(s.id, s.clone());
            conn.sessions.lock().unwrap().insert(s.id);
            (s, true)
        }
        None => return Err(NtStatus::USER_SESSION_DELETED),
    };
    if session.dialect != neg.dialect {
        return Err(NtStatus::USER_SESSION_DELETED);
    }

    let step = {
        let mut auth = session.auth.lock().unwrap();
        let ex = auth.get_or_insert_with(|| AuthExchange {
            spnego: SpnegoServer::new(NtlmServer::new(
                rand::random(),
                filetime(std::time::SystemTime::now()),
                &server.config.netbios_name,
                &server.config.netbios_name.to_lowercase(),
                &server.config.domain,
            )),
            preauth: conn.preauth.lock().unwrap().clone().unwrap_or_default(),
        });
        if neg.dialect == dialect::SMB311 {
            ex.preauth.update(req.msg);
        }
        let users = &server.users;
        ex.spnego
            .step(&r.security_buffer, &|user: &str, _domain: &str| {
                users.nt_hash(user)
            })
    };

    match step {
        Ok(SpnegoStep::Continue(token)) => {
            let mut reply = Reply::with_status(
                NtStatus::MORE_PROCESSING_REQUIRED,
                &SessionSetupResponse {
                    session_flags: 0,
                    security_buffer: token,
                },
            );
            reply.session_id = Some(session.id);
            if neg.dialect == dialect::SMB311 {
                let s = session.clone();
                reply.after_send = Some(Box::new(move |resp: &[u8]| {
                    if let Some(ex) = s.auth.lock().unwrap().as_mut() {
                        ex.preauth.update(resp);
                    }
                }));
            }
            Ok(reply)
        }
        Ok(SpnegoStep::Done { token, outcome }) => {
            let ex = session.auth.lock().unwrap().take();
            let preauth = ex.map(|e| e.preauth).unwrap_or_default();
            complete(
                req,
                &session,
                is_new,
                outcome,
                token,
                &preauth,
                r.security_mode,
            )
        }
        Err(e) => {
            info!(conn = conn.id, peer = %conn.peer, "logon failure: {e}");
            session.auth.lock().unwrap().take();
            // A failed logon ends the session, re-authentication included
            // (as Windows and Samba do): its opens are closed.
            server.sessions.remove(&session.id);
            conn.sessions.lock().unwrap().remove(&session.id);
            if !is_new {
                conn.cancel_session_requests(session.id);
                super::logoff::close_session(server, &session).await;
            }
            tokio::time::sleep(server.config.logon_failure_delay).await;
            Err(NtStatus::LOGON_FAILURE)
        }
    }
}

/// MS-SMB2 3.3.5.5.3: authentication succeeded.
fn complete(
    req: &Request<'_>,
    session: &Arc<Session>,
    is_new: bool,
    outcome: AuthOutcome,
    token: Vec<u8>,
    preauth: &PreauthHash,
    client_security_mode: u8,
) -> OpResult {
    let conn = req.conn;
    let server = &conn.server;
    let neg = conn.negotiated().ok_or(NtStatus::INVALID_PARAMETER)?;
    let guest = false;
    // Anonymous logons need allow_guest; an authenticated session may still
    // re-authenticate as anonymous (it only loses rights), as Samba allows.
    if outcome.anonymous && !server.config.allow_guest && is_new {
        if is_new {
            server.sessions.remove(&session.id);
            conn.sessions.lock().unwrap().remove(&session.id);
        }
        return Err(NtStatus::LOGON_FAILURE);
    }
    if !is_new {
        // Re-authentication keeps the user, or drops to anonymous; it never
        // switches to another account.
        let first_user = session.first_user.lock().unwrap().clone();
        let same = outcome.anonymous || first_user.eq_ignore_ascii_case(&outcome.user);
        if !same {
            server.sessions.remove(&session.id);
            conn.sessions.lock().unwrap().remove(&session.id);
            return Err(NtStatus::ACCESS_DENIED);
        }
    }
    if server.config.encrypt && neg.cipher.is_none() && !outcome.anonymous {
        // MS-SMB2 3.3.5.5.3: encryption is required but this client cannot.
        if is_new {
            server.sessions.remove(&session.id);
            conn.sessions.lock().unwrap().remove(&session.id);
        }
        return Err(NtStatus::ACCESS_DENIED);
    }
    let mut session_flags = 0;
    if outcome.anonymous {
        session_flags |= session_flags::IS_NULL;
    } else if guest {
        session_flags |= session_flags::IS_GUEST;
    }
    let mut sign_response = false;
    if !outcome.anonymous && !guest {
        let preauth_value = (neg.dialect == dialect::SMB311).then(|| *preauth.value());
        let keys = derive_session_keys(
            neg.dialect,
            &outcome.session_key,
            preauth_value.as_ref(),
            neg.cipher,
        )
        .map_err(|_| NtStatus::INTERNAL_ERROR)?;
        if is_new {
            let signing = SigningState {
                algorithm: neg.signing_algorithm,
                key: keys.signing_key.to_vec(),
            };
            session
                .channels
                .lock()
                .unwrap()
                .push(crate::session::Channel {
                    connection_id: conn.id,
                    conn: Arc::downgrade(conn),
                    signing: Some(signing.clone()),
                    bound_at: std::time::SystemTime::now(),
                });
            *session.signing.lock().unwrap() = Some(signing);
            *session.session_key.lock().unwrap() = outcome.session_key.to_vec();
            if let Some(cipher) = neg.cipher {
                *session.encryption.lock().unwrap() = Some(Arc::new(EncryptionState {
                    cipher,
                    decrypt_key: keys.server_in_key.clone(),
                    encrypt_key: keys.server_out_key.clone(),
                    nonces: NonceGenerator::new_random(cipher),
                }));
                if server.config.encrypt {
                    session.encrypt_data.store(true, Ordering::Relaxed);
                }
            }
            let client_requires =
                client_security_mode as u16 & security_mode::SIGNING_REQUIRED != 0;
            let required = server.config.signing_required || client_requires;
            session.signing_required.store(required, Ordering::Relaxed);
        }
        sign_response =
            neg.dialect >= dialect::SMB300 || session.signing_required.load(Ordering::Relaxed);
    }
    if session.encrypt_data.load(Ordering::Relaxed) {
        session_flags |= session_flags::ENCRYPT_DATA;
    }
    if is_new {
        *session.first_user.lock().unwrap() = outcome.user.clone();
    }
    *session.identity.lock().unwrap() = Some(Identity {
        user: outcome.user.clone(),
        domain: outcome.domain.clone(),
        anonymous: outcome.anonymous,
        guest,
        workstation: outcome.workstation.clone(),
    });
    session.set_phase(SessionPhase::Valid);
    info!(conn = conn.id, peer = %conn.peer, user = %outcome.user, session = session.id, "session established");
    let mut reply = Reply::of(&SessionSetupResponse {
        session_flags,
        security_buffer: token,
    });
    reply.session_id = Some(session.id);
    reply.sign_with_new_session = sign_response;
    Ok(reply)
}
