//! SESSION_SETUP: MS-SMB2 3.3.5.5 (new sessions and re-authentication).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use braid_smb_proto::auth::{AuthOutcome, SpnegoServer, SpnegoStep};
use braid_smb_proto::codec::Message;
use braid_smb_proto::crypto::{
    derive_channel_signing_key, derive_session_keys, NonceGenerator, PreauthHash, SigningAlgorithm,
};
use braid_smb_proto::messages::negotiate::{dialect, security_mode};
use braid_smb_proto::messages::session_setup::{flags as setup_flags, session_flags};
use braid_smb_proto::messages::{SessionSetupRequest, SessionSetupResponse};
use braid_smb_proto::NtStatus;
use tracing::info;

use crate::smb::session::{
    AuthExchange, Channel, EncryptionState, Identity, Session, SessionPhase, SigningState,
};
use crate::smb::{OpResult, Reply, Request};
use crate::state::ServerState;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let conn = req.conn;
    let server = &conn.server;
    let neg = conn
        .negotiated()
        .ok_or(NtStatus::INVALID_PARAMETER)?
        .clone();
    let r = SessionSetupRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;

    // An address that failed too often this minute is refused before any
    // password is looked at (`logon_throttle.rs`).
    if server
        .smb
        .logon_throttle
        .blocked(conn.peer.ip(), None, std::time::Instant::now())
    {
        // Whatever exchange the request continued ends, as a failed
        // logon ends it.
        if let Some(s) = &req.session {
            if r.flags & setup_flags::BINDING != 0 {
                s.binds.lock().unwrap().remove(&conn.id);
                conn.binding.lock().unwrap().remove(&s.id);
            } else if s.phase() == SessionPhase::InProgress
                && conn.sessions.lock().unwrap().contains(&s.id)
            {
                s.auth.lock().unwrap().take();
                forget_unauthenticated(conn, s);
            }
        }
        server
            .metrics
            .logons_throttled
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(conn.config.logon_failure_delay).await;
        return Err(NtStatus::LOGON_FAILURE);
    }

    if r.flags & setup_flags::BINDING != 0 {
        return bind(req, &neg, &r).await;
    }

    // A session is "new" until its first authentication completes; after
    // that a SESSION_SETUP on it is a re-authentication.
    let (session, is_new) = match req.session.clone() {
        // MS-SMB2 3.3.5.5.3: re-authentication happens on a channel of the
        // session; other connections must bind first.
        Some(s) if !conn.sessions.lock().unwrap().contains(&s.id) => {
            return Err(NtStatus::USER_SESSION_DELETED)
        }
        Some(s) => {
            let new = s.phase() == SessionPhase::InProgress;
            (s, new)
        }
        None if req.header.session_id == 0 => {
            if sessions_in_progress(conn) >= MAX_SESSIONS_IN_PROGRESS
                || conn.sessions.lock().unwrap().len() >= MAX_SESSIONS_PER_CONNECTION
            {
                return Err(NtStatus::INSUFFICIENT_RESOURCES);
            }
            let s = Arc::new(Session::new(
                server.smb.new_session_id(),
                neg.dialect,
                conn.id,
            ));
            let _ = s.origin.set(neg.clone());
            server.smb.sessions.insert(s.id, s.clone());
            conn.sessions.lock().unwrap().insert(s.id);
            (s, true)
        }
        None => return Err(NtStatus::USER_SESSION_DELETED),
    };
    if session.dialect != neg.dialect {
        return Err(NtStatus::USER_SESSION_DELETED);
    }

    let lookup = Lookup::new(server, conn);
    let step = {
        let mut auth = session.auth.lock().unwrap();
        let ex = auth.get_or_insert_with(|| AuthExchange {
            spnego: SpnegoServer::new(server.ntlm_server()),
            preauth: conn.preauth.lock().unwrap().clone().unwrap_or_default(),
        });
        if neg.dialect == dialect::SMB311 {
            ex.preauth.update(req.msg);
        }
        ex.spnego
            .step(&r.security_buffer, &|user: &str, _domain: &str| {
                lookup.hash(user)
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
            let result = complete(
                req,
                &session,
                is_new,
                outcome,
                token,
                &preauth,
                r.security_mode,
            );
            if result.is_err() && !is_new {
                // A refused re-authentication (another account) ends the
                // session on every channel, its opens and oplocks included.
                super::logoff::end_session(server, &session).await;
            }
            if result.is_ok() && is_new && r.previous_session_id != 0 {
                replace_previous_session(server, &session, r.previous_session_id).await;
            }
            result
        }
        Err(e) => {
            info!(conn = conn.id, peer = %conn.peer, "logon failure: {e}");
            count_failure(server, conn, e.nt_status(), &lookup);
            session.auth.lock().unwrap().take();
            // A failed logon ends the session, re-authentication included
            // (as Windows and Samba do): its opens are closed.
            if is_new {
                forget_unauthenticated(conn, &session);
            } else {
                super::logoff::end_session(server, &session).await;
            }
            tokio::time::sleep(conn.config.logon_failure_delay).await;
            // A malformed token is INVALID_PARAMETER, a wrong password
            // LOGON_FAILURE (AuthError::nt_status).
            Err(e.nt_status())
        }
    }
}

/// MS-SMB2 3.3.5.5.3: a new session naming its PreviousSessionId replaces
/// that session (a client reconnecting after losing its connection) when
/// both belong to the same user: the old one ends on every channel, and
/// its durable opens wait to be reconnected.
async fn replace_previous_session(
    server: &Arc<ServerState>,
    session: &Arc<Session>,
    previous: u64,
) {
    if previous == session.id {
        return;
    }
    let Some(old) = server.smb.sessions.get(&previous) else {
        return;
    };
    let user = |s: &Session| s.identity.lock().unwrap().as_ref().map(|i| i.user.clone());
    let same_user = match (user(&old), user(session)) {
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(&b),
        _ => false,
    };
    if same_user && old.phase() == SessionPhase::Valid {
        info!(session = session.id, previous, "previous session replaced");
        super::logoff::end_session(server, &old).await;
    }
}

/// Logons a connection may have begun and not finished: each holds an
/// NTLM exchange, and before any logon succeeds nothing else bounds how
/// many a peer starts within the handshake deadline.
const MAX_SESSIONS_IN_PROGRESS: usize = 16;

/// Sessions one connection may carry (authenticated ones included).
const MAX_SESSIONS_PER_CONNECTION: usize = 1024;

fn sessions_in_progress(conn: &crate::smb::conn::Connection) -> usize {
    let ids: Vec<u64> = conn.sessions.lock().unwrap().iter().copied().collect();
    ids.iter()
        .filter(|id| {
            conn.server
                .smb
                .sessions
                .get(id)
                .is_some_and(|s| s.phase() == SessionPhase::InProgress)
        })
        .count()
}

/// The user lookup of one logon step, through the throttle
/// (`logon_throttle.rs`): it remembers the name asked for, and answers a
/// name its address may not try now as an unknown one, so its password is
/// not looked at.
struct Lookup<'a> {
    server: &'a ServerState,
    users: Arc<crate::userdb::UserDb>,
    peer: std::net::IpAddr,
    tried: std::cell::RefCell<Option<String>>,
    refused: std::cell::Cell<bool>,
}

impl<'a> Lookup<'a> {
    fn new(server: &'a ServerState, conn: &crate::smb::conn::Connection) -> Lookup<'a> {
        Lookup {
            server,
            users: server.users.current(),
            peer: conn.peer.ip(),
            tried: Default::default(),
            refused: Default::default(),
        }
    }

    fn hash(&self, user: &str) -> Option<[u8; 16]> {
        *self.tried.borrow_mut() = Some(user.to_string());
        let now = std::time::Instant::now();
        if self
            .server
            .smb
            .logon_throttle
            .blocked(self.peer, Some(user), now)
        {
            self.refused.set(true);
            return None;
        }
        self.users.nt_hash(user)
    }
}

/// A wrong password or unknown user counts against the name and the
/// client's address; a malformed token does not, nor a logon the throttle
/// refused (so that a client stuck on a blocked name cannot use up its
/// address's allowance).
fn count_failure(
    server: &ServerState,
    conn: &crate::smb::conn::Connection,
    status: NtStatus,
    lookup: &Lookup<'_>,
) {
    if lookup.refused.get() {
        server
            .metrics
            .logons_throttled
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return;
    }
    let Some(user) = lookup.tried.borrow_mut().take() else {
        return;
    };
    if status != NtStatus::LOGON_FAILURE {
        return;
    }
    let now = std::time::Instant::now();
    if server.smb.logon_throttle.failed(conn.peer.ip(), &user, now)
        == crate::smb::logon_throttle::Failure::NowBlocked
    {
        tracing::warn!(
            peer = %conn.peer.ip(),
            limit = server.config().logon_failures_per_minute,
            "too many failed logons from this address (of one user name, or of all): \
             refused for the rest of the minute"
        );
    }
}

/// Drop a session that never authenticated (it has no opens or trees).
fn forget_unauthenticated(conn: &crate::smb::conn::Connection, session: &Session) {
    conn.server.smb.sessions.remove(&session.id);
    conn.sessions.lock().unwrap().remove(&session.id);
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
    let neg = conn.negotiated().ok_or(NtStatus::INVALID_PARAMETER)?;
    let guest = false;
    // Anonymous logons need allow_guest; an authenticated session may still
    // re-authenticate as anonymous (it only loses rights), as Samba allows.
    if outcome.anonymous && !conn.config.allow_guest && is_new {
        if is_new {
            forget_unauthenticated(conn, session);
        }
        return Err(NtStatus::LOGON_FAILURE);
    }
    if !is_new {
        // Re-authentication keeps the user, or drops to anonymous; it never
        // switches to another account.
        let first_user = session.first_user.lock().unwrap().clone();
        let same = outcome.anonymous || first_user.eq_ignore_ascii_case(&outcome.user);
        if !same {
            return Err(NtStatus::ACCESS_DENIED);
        }
    }
    if conn.config.encrypt && neg.cipher.is_none() && !outcome.anonymous {
        // MS-SMB2 3.3.5.5.3: encryption is required but this client cannot.
        if is_new {
            forget_unauthenticated(conn, session);
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
                .push(crate::smb::session::Channel {
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
                if conn.config.encrypt {
                    session.encrypt_data.store(true, Ordering::Relaxed);
                }
            }
            let client_requires =
                client_security_mode as u16 & security_mode::SIGNING_REQUIRED != 0;
            let required = conn.config.signing_required || client_requires;
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
        owner: if outcome.anonymous || guest {
            None
        } else {
            conn.server.users.current().owner(&outcome.user)
        },
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

/// STATUS_REQUEST_OUT_OF_SEQUENCE (MS-ERREF 2.3.1).
const REQUEST_OUT_OF_SEQUENCE: NtStatus = NtStatus(0xC000_042A);

fn new_exchange(req: &Request<'_>) -> AuthExchange {
    let conn = req.conn;
    AuthExchange {
        spnego: SpnegoServer::new(conn.server.ntlm_server()),
        // MS-SMB2 3.3.5.5.2: the binding exchange hashes from this
        // connection's NEGOTIATE (Connection.PreauthIntegrityHashValue).
        preauth: conn.preauth.lock().unwrap().clone().unwrap_or_default(),
    }
}

/// MS-SMB2 3.3.5.5.2: the checks before a connection may bind to an
/// existing session. Where the spec leaves the status open, Samba's is
/// used (smbd_smb2_session_setup_send and the torture tests'
/// expectations).
fn check_bind(
    req: &Request<'_>,
    neg: &crate::smb::conn::Negotiated,
    session: &Session,
) -> Result<(), NtStatus> {
    let conn = req.conn;
    let config = &conn.config;
    let origin = session.origin.get().ok_or(NtStatus::USER_SESSION_DELETED)?;
    let session_signing = session.signing().ok_or(NtStatus::NOT_SUPPORTED)?;
    // Signing algorithms (3.1.1 SIGNING_CAPABILITIES): a session signed
    // with AES-GMAC cannot take a channel signing otherwise, and a
    // GMAC-signing connection cannot join a session signed otherwise.
    if session_signing.algorithm == SigningAlgorithm::AesGmac
        && neg.signing_algorithm != SigningAlgorithm::AesGmac
    {
        return Err(REQUEST_OUT_OF_SEQUENCE);
    }
    if neg.signing_algorithm == SigningAlgorithm::AesGmac
        && session_signing.algorithm != SigningAlgorithm::AesGmac
    {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    // 3.3.5.5: binding needs a 3.x connection.
    if neg.dialect < dialect::SMB300 {
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    }
    // "If Connection.Dialect is not the same as Session.Connection.Dialect,
    // the server MUST fail the request with STATUS_INVALID_PARAMETER"
    // (a 2.x session included).
    if session.dialect != neg.dialect {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // 3.1.1: the new connection must have negotiated the session's cipher
    // (Connection.CipherId). HMAC-SHA256 and AES-CMAC channels may mix:
    // each channel signs with its own connection's algorithm.
    if origin.cipher != neg.cipher {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if session.phase() != SessionPhase::Valid {
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    }
    // An anonymous or guest session has no key to bind with.
    if session.is_anonymous_or_guest() {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if session.channel_count() >= config.max_channels {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    Ok(())
}

/// MS-SMB2 3.3.5.5.2: SESSION_SETUP with SMB2_SESSION_FLAG_BINDING adds
/// this connection as a channel of an existing session, after a full
/// authentication of the same user on this connection.
async fn bind(
    req: &mut Request<'_>,
    neg: &crate::smb::conn::Negotiated,
    r: &SessionSetupRequest,
) -> OpResult {
    let conn = req.conn;
    let server = &conn.server;
    if !conn.config.multichannel {
        // 3.3.5.5: "If the server does not support multichannel ...
        // STATUS_REQUEST_NOT_ACCEPTED" (a 2.x connection too: check_bind,
        // after the signing-algorithm checks, as Samba orders them).
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    }
    if req.header.session_id == 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let session = req.session.clone().ok_or(NtStatus::USER_SESSION_DELETED)?;
    // The bind must be signed with Session.SigningKey (frame.rs verified
    // the signature when present).
    if !req.header.is_signed() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let in_progress = session.binds.lock().unwrap().contains_key(&conn.id);
    if !in_progress {
        if session.has_channel(conn.id) || conn.sessions.lock().unwrap().contains(&session.id) {
            // Already a channel of this session.
            return Err(NtStatus::REQUEST_NOT_ACCEPTED);
        }
        check_bind(req, neg, &session)?;
    }

    let lookup = Lookup::new(server, conn);
    let step = {
        let mut binds = session.binds.lock().unwrap();
        let ex = binds.entry(conn.id).or_insert_with(|| new_exchange(req));
        if neg.dialect == dialect::SMB311 {
            ex.preauth.update(req.msg);
        }
        ex.spnego
            .step(&r.security_buffer, &|user: &str, _domain: &str| {
                lookup.hash(user)
            })
    };
    conn.binding.lock().unwrap().insert(session.id);

    let outcome = match step {
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
                let cid = conn.id;
                reply.after_send = Some(Box::new(move |resp: &[u8]| {
                    if let Some(ex) = s.binds.lock().unwrap().get_mut(&cid) {
                        ex.preauth.update(resp);
                    }
                }));
            }
            return Ok(reply);
        }
        Ok(SpnegoStep::Done { token, outcome }) => (token, outcome),
        Err(e) => {
            // A failed bind leaves the session and its other channels alone.
            info!(conn = conn.id, peer = %conn.peer, session = session.id, "bind logon failure: {e}");
            count_failure(server, conn, e.nt_status(), &lookup);
            session.binds.lock().unwrap().remove(&conn.id);
            conn.binding.lock().unwrap().remove(&session.id);
            tokio::time::sleep(conn.config.logon_failure_delay).await;
            return Err(e.nt_status());
        }
    };
    let (token, outcome) = outcome;
    let ex = session.binds.lock().unwrap().remove(&conn.id);
    conn.binding.lock().unwrap().remove(&session.id);
    let preauth = ex.map(|e| e.preauth).unwrap_or_default();

    // MS-SMB2 3.3.5.5.3 (binding): the authenticated user must be the
    // session's user. Another account's valid credentials are refused with
    // ACCESS_DENIED, as Windows and Samba answer (smbtorture
    // smb2.session.bind_different_user); a logon without a session key
    // (anonymous) with NOT_SUPPORTED, as Samba does.
    if outcome.anonymous {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let first_user = session.first_user.lock().unwrap().clone();
    if !first_user.eq_ignore_ascii_case(&outcome.user) {
        info!(conn = conn.id, session = session.id, user = %outcome.user, "bind by another user refused");
        return Err(NtStatus::ACCESS_DENIED);
    }
    if outcome.session_key.is_empty() {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    // Channel.SigningKey: 3.0/3.0.2 derive it like Session.SigningKey;
    // 3.1.1 with this connection's binding preauth hash.
    let preauth_value = (neg.dialect == dialect::SMB311).then(|| *preauth.value());
    let key = derive_channel_signing_key(neg.dialect, &outcome.session_key, preauth_value.as_ref())
        .map_err(|_| NtStatus::INTERNAL_ERROR)?;
    {
        let mut channels = session.channels.lock().unwrap();
        channels.retain(|c| c.conn.strong_count() > 0);
        if channels.len() >= conn.config.max_channels {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        channels.push(Channel {
            connection_id: conn.id,
            conn: Arc::downgrade(conn),
            signing: Some(SigningState {
                algorithm: neg.signing_algorithm,
                key: key.to_vec(),
            }),
            bound_at: std::time::SystemTime::now(),
        });
    }
    conn.sessions.lock().unwrap().insert(session.id);
    if session.phase() != SessionPhase::Valid {
        // The session went away while this bind authenticated.
        session.remove_channel(conn.id);
        conn.sessions.lock().unwrap().remove(&session.id);
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    info!(
        conn = conn.id,
        peer = %conn.peer,
        session = session.id,
        channels = session.channel_count(),
        "channel bound"
    );
    let mut reply = Reply::of(&SessionSetupResponse {
        session_flags: 0,
        security_buffer: token,
    });
    reply.session_id = Some(session.id);
    // 3.3.5.5.2: the response is signed with the new Channel.SigningKey.
    reply.sign_with_new_session = true;
    Ok(reply)
}
