//! Frames and compounds: MS-SMB2 3.3.5.2 (receiving any message),
//! 3.3.5.2.7 (compounded requests), 3.3.4.1 (sending any message).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use tracing::{debug, trace};

use braid_smb_proto::codec::{FileId, WriteLe};
use braid_smb_proto::crypto::{
    decrypt_in_place, encrypt_frame_in_place, sign_in_place, verify as verify_signature,
    DecryptStream, GmacVerifier, SigningAlgorithm, TransformHeader, TRANSFORM_HEADER_LEN,
};
use braid_smb_proto::header::{
    flags, offsets, Command, Header, HEADER_LEN, PROTOCOL_ID, SMB1_PROTOCOL_ID,
    TRANSFORM_PROTOCOL_ID,
};
use braid_smb_proto::NtStatus;

use super::send::{error_reply, send_frame, send_frame_holding};
use super::{dispatch, OpResult, Reply, Request, Sealed};
use crate::op_metrics::{OpRecord, Outcome, Protocol};
use crate::smb::conn::Connection;
use crate::smb::session::{Session, SessionPhase};
use crate::workload::{FileRef, InFlight};

/// A frame whose message ids were accepted, ready to be processed.
pub enum Work {
    Smb1Negotiate(Vec<u8>),
    Smb2 {
        buf: Bytes,
        /// Each message, with its [`crate::smb::order::FileRequestOrder`] ticket.
        msgs: Vec<(Range<usize>, Header, Option<u64>)>,
        /// The session whose key decrypted the frame (MS-SMB2 3.3.5.2.1.1).
        encrypted_by: Option<Arc<Session>>,
        /// The lone message's signature, checked while it arrived.
        pre_verified: Option<PreVerified>,
    },
}

/// A signature checked while its message arrived (conn.rs): the key it was
/// checked with, and whether it matched.
pub struct PreVerified {
    pub key: Vec<u8>,
    pub valid: bool,
}

/// Runs on the reader, in order: decrypt, split the compound, check each
/// message id against the credit window (3.3.5.2.3), handle CANCEL at once.
/// The session whose key decrypts a transform frame (MS-SMB2 3.3.5.2.1.1),
/// from the frame's first 52 bytes.
fn transform_session(
    conn: &Connection,
    head: &[u8],
) -> Result<(Arc<Session>, Arc<crate::smb::session::EncryptionState>), String> {
    let th = TransformHeader::decode(head).map_err(|e| format!("bad transform header: {e}"))?;
    let session = conn
        .server
        .smb
        .sessions
        .get(&th.session_id)
        .ok_or("transform for an unknown session")?;
    let enc = session
        .encryption()
        .ok_or("transform for a session without encryption")?;
    Ok((session, enc))
}

/// Start decrypting a large AES-GCM transform frame of `frame_len` bytes
/// while the rest of it arrives (conn.rs), given its first 52 bytes. None
/// when this frame is not one for streaming; errors are left for
/// [`accept_frame`] to report, as for any frame.
pub fn start_decrypt(
    conn: &Connection,
    head: &[u8],
    frame_len: usize,
) -> Option<(DecryptStream, Arc<Session>)> {
    if head.len() < TRANSFORM_HEADER_LEN || head[..4] != TRANSFORM_PROTOCOL_ID {
        return None;
    }
    let (session, enc) = transform_session(conn, head).ok()?;
    let (_, stream) = DecryptStream::start(enc.cipher, &enc.decrypt_key, head, frame_len).ok()?;
    Some((stream, session))
}

/// Start checking the AES-GMAC signature of a large signed WRITE (the
/// frame's first 64 bytes are `head`) while the rest of it arrives. None
/// when this frame is not one for that; [`handle_one`] then verifies it
/// whole as any other.
pub fn start_verify(conn: &Connection, head: &[u8]) -> Option<(GmacVerifier, Vec<u8>)> {
    let hdr = Header::decode(head).ok()?;
    if hdr.command != Command::Write as u16 || !hdr.is_signed() || hdr.next_command != 0 {
        return None;
    }
    let signing = conn
        .server
        .smb
        .sessions
        .get(&hdr.session_id)?
        .signing_for(conn.id)?;
    if signing.algorithm != SigningAlgorithm::AesGmac {
        return None;
    }
    let verifier = GmacVerifier::start(&signing.key, head).ok()?;
    Some((verifier, signing.key))
}

/// MS-SMB2 2.2.21: a WRITE request's payload follows its 48-byte fixed
/// part (DataOffset 0x70, as every client we know sends it).
const WRITE_PAYLOAD_OFFSET: usize = HEADER_LEN + 48;
/// Large frames are placed so that a WRITE payload starts on a page.
pub const PAYLOAD_ALIGN: usize = 4096;

/// How far into a buffer at address `base` a large frame beginning with
/// `head` should start so that, if it is a WRITE, its payload is
/// page-aligned: braid-fs can then send it to the disk without copying it
/// into the page cache (braid-fs `direct.rs`). Frames that are not WRITEs
/// lose nothing but the padding.
pub fn payload_pad(base: usize, head: &[u8]) -> usize {
    let at = if head.starts_with(&TRANSFORM_PROTOCOL_ID) {
        TRANSFORM_HEADER_LEN + WRITE_PAYLOAD_OFFSET
    } else {
        WRITE_PAYLOAD_OFFSET
    };
    (PAYLOAD_ALIGN - (base + at) % PAYLOAD_ALIGN) % PAYLOAD_ALIGN
}

/// The frame is `buf[start..]` (see [`payload_pad`]). `decrypted_by`: the
/// frame's transform was already decrypted and verified while it arrived,
/// with this session's key. `pre_verified`: the signature of its lone
/// message was checked while it arrived.
pub fn accept_frame(
    conn: &Arc<Connection>,
    mut buf: Vec<u8>,
    start: usize,
    decrypted_by: Option<Arc<Session>>,
    pre_verified: Option<PreVerified>,
) -> Result<Option<Work>, String> {
    let frame = &buf[start..];
    if frame.len() >= 4 && frame[..4] == SMB1_PROTOCOL_ID {
        // MS-SMB2 3.3.5.3: only a first negotiate may be SMB1.
        let mut started = conn.negotiate_started.lock().unwrap();
        if *started {
            return Err("SMB1 message after negotiation".into());
        }
        *started = true;
        drop(started);
        buf.drain(..start);
        return Ok(Some(Work::Smb1Negotiate(buf)));
    }
    let mut encrypted_by = None;
    let mut plain = start..buf.len();
    if let Some(session) = decrypted_by {
        plain = start + TRANSFORM_HEADER_LEN..buf.len();
        encrypted_by = Some(session);
    } else if frame.len() >= 4 && frame[..4] == TRANSFORM_PROTOCOL_ID {
        // 3.3.5.2.1.1: decrypt with the session's key; any failure drops
        // the connection.
        let (session, enc) = transform_session(conn, frame)?;
        let (_, range) = decrypt_in_place(enc.cipher, &enc.decrypt_key, &mut buf[start..])
            .map_err(|e| format!("decrypt failed: {e}"))?;
        plain = start + range.start..start + range.end;
        encrypted_by = Some(session);
    }
    let body = &buf[plain.clone()];
    if body.len() < 4 || body[..4] != PROTOCOL_ID {
        return Err("unknown protocol id".into());
    }
    let mut msgs = Vec::new();
    let mut off = 0usize;
    loop {
        let rest = &body[off..];
        let hdr = Header::decode(rest).map_err(|e| format!("bad header: {e}"))?;
        let len = if hdr.next_command == 0 {
            rest.len()
        } else {
            let n = hdr.next_command as usize;
            // 3.3.5.2.7: each compounded message starts 8-byte aligned.
            if n < HEADER_LEN || n > rest.len() || !n.is_multiple_of(8) {
                return Err("bad NextCommand".into());
            }
            n
        };
        if hdr.is_response() {
            return Err("response flag on a request".into());
        }
        if let Some(s) = &encrypted_by {
            // 3.3.5.2.1.1: the inner SessionId must be the decrypting one
            // (related requests may carry 0xFFFF.. and inherit it).
            if hdr.session_id != s.id
                && !(hdr.is_related() && hdr.session_id == u64::MAX)
                && hdr.session_id != 0
            {
                return Err("encrypted message for another session".into());
            }
        }
        if hdr.command == Command::Cancel as u16 {
            // 3.3.5.16: no sequence check, no response.
            let async_id = hdr.is_async().then_some(hdr.async_id);
            conn.cancel(hdr.message_id, async_id);
        } else {
            let charge = hdr.credit_charge.max(1);
            if conn
                .credits
                .lock()
                .unwrap()
                .consume(hdr.message_id, charge)
                .is_err()
            {
                return Err(format!(
                    "message id {} outside the credit window",
                    hdr.message_id
                ));
            }
            if hdr.command == Command::ChangeNotify as u16 {
                conn.notify_order.arrived(hdr.message_id);
            }
            let start = plain.start + off;
            let ticket = conn.file_order.arrived(hdr.command, &rest[..len]);
            msgs.push((start..start + len, hdr.clone(), ticket));
        }
        if hdr.next_command == 0 {
            break;
        }
        off += len;
        if off >= body.len() {
            return Err("NextCommand points past the frame".into());
        }
    }
    if msgs.is_empty() {
        return Ok(None);
    }
    let pre_verified = pre_verified.filter(|_| msgs.len() == 1);
    Ok(Some(Work::Smb2 {
        buf: Bytes::from(buf),
        msgs,
        encrypted_by,
        pre_verified,
    }))
}

/// Releases a frame's [`crate::smb::order::FileRequestOrder`] tickets when its
/// processing ends, early or not.
struct ReleaseTickets<'a> {
    conn: &'a Connection,
    tickets: Vec<u64>,
}

impl Drop for ReleaseTickets<'_> {
    fn drop(&mut self) {
        for t in &self.tickets {
            self.conn.file_order.release(*t);
        }
    }
}

/// Where a message stands: inside a compound that answers as one, and its
/// [`crate::smb::order::FileRequestOrder`] ticket.
struct Place {
    in_compound: bool,
    ticket: Option<u64>,
}

/// State carried from one compounded request to the next related one.
#[derive(Default)]
struct Related {
    /// Whether a message precedes this one in the compound.
    started: bool,
    session_id: u64,
    /// Whether the message before found its session valid.
    session_found: bool,
    tree_id: u32,
    file_id: Option<FileId>,
    /// A failed CREATE fails the related requests after it with its status.
    create_error: Option<NtStatus>,
}

pub async fn process(conn: &Arc<Connection>, work: Work) -> Result<(), String> {
    let (buf, msgs, encrypted_by, pre_verified) = match work {
        Work::Smb1Negotiate(buf) => {
            let reply = super::ops::negotiate::handle_smb1(conn, &buf)?;
            conn.send(vec![Bytes::from(reply)]);
            return Ok(());
        }
        Work::Smb2 {
            buf,
            msgs,
            encrypted_by,
            pre_verified,
        } => (buf, msgs, encrypted_by, pre_verified),
    };
    let count = msgs.len();
    // Whatever becomes of these requests, none holds a CLOSE back after.
    let _release = ReleaseTickets {
        conn,
        tickets: msgs.iter().filter_map(|(_, _, t)| *t).collect(),
    };
    let mut related = Related::default();
    let mut out: Vec<Bytes> = Vec::with_capacity(count + 1);
    let mut prev: Option<Finished> = None;
    for (i, (range, hdr, ticket)) in msgs.into_iter().enumerate() {
        let last = i + 1 == count;
        // MS-SMB2 3.3.4.2 (Windows behaviour, <159>): the last request of a
        // compound may go async; what came before it is sent first.
        let may_go_async = last && i > 0 && may_block(hdr.command);
        if let Some(mut p) = prev.take() {
            // What a compound answered before its last request is no
            // longer in flight once queued.
            drop(p.flight.take());
            finalize(p, !may_go_async, true, &mut out)?;
            if may_go_async {
                send_frame(conn, encrypted_by.as_deref(), std::mem::take(&mut out))?;
            }
        }
        let in_compound = count > 1 && !may_go_async;
        let msg = buf.slice(range);
        let finished = handle_one(
            conn,
            &hdr,
            msg,
            &mut related,
            Place {
                in_compound,
                ticket,
            },
            encrypted_by.as_ref(),
            pre_verified.as_ref(),
        )
        .await;
        if let Some(t) = ticket {
            conn.file_order.release(t);
        }
        if hdr.command == Command::ChangeNotify as u16 {
            // Whatever became of it (even refused before its handler ran),
            // the next CHANGE_NOTIFY may go.
            conn.notify_order.done(hdr.message_id);
        }
        prev = Some(finished?);
    }
    let mut held = None;
    if let Some(mut p) = prev.take() {
        held = p.flight.take();
        if count == 1 && p.headroom >= TRANSFORM_HEADER_LEN && p.payload.is_none() {
            if let Some(sess) = &encrypted_by {
                if let Some(enc) = sess.encryption() {
                    // MS-SMB2 3.3.4.1.4: encrypt in place, in the room the
                    // handler left in front of the message (READ does).
                    let mut resp = p.resp;
                    let start = p.headroom - TRANSFORM_HEADER_LEN;
                    match p.sealed {
                        // READ encrypted its data as it read it.
                        Some(Sealed::Gcm(partial)) => {
                            partial.seal_frame(sess.id, &mut resp[start..])
                        }
                        _ => encrypt_frame_in_place(
                            enc.cipher,
                            &enc.encrypt_key,
                            &enc.nonces.next_nonce(),
                            sess.id,
                            &mut resp[start..],
                        ),
                    }
                    .map_err(|e| format!("encrypt failed: {e}"))?;
                    conn.send_holding(vec![Bytes::from(resp).slice(start..)], held);
                    return Ok(());
                }
            }
        }
        finalize(p, false, count > 1, &mut out)?;
    }
    if !out.is_empty() {
        send_frame_holding(conn, encrypted_by.as_deref(), out, held)?;
    }
    Ok(())
}

/// Commands whose handlers may wait (and so answer asynchronously).
fn may_block(command: u16) -> bool {
    command == Command::Lock as u16 || command == Command::ChangeNotify as u16
}

/// Chain (when more follow), pad, sign, and queue one response. `more_follow`: another
/// response is chained behind it (NextCommand). `compounded`: it answers a
/// request of a compound, and is padded to 8 bytes even when it ends the
/// frame (the last one of a compound, or the one before a last request
/// that went async), as Windows and Samba pad them (smbtorture
/// smb2.compound.compound-padding).
fn finalize(
    f: Finished,
    more_follow: bool,
    compounded: bool,
    out: &mut Vec<Bytes>,
) -> Result<(), String> {
    let Finished {
        mut resp,
        headroom: h,
        mut payload,
        signing,
        sealed,
        flight: _,
    } = f;
    if matches!(sealed, Some(Sealed::Gcm(_))) {
        // Only a lone, encrypted response may carry pre-encrypted data
        // (read.rs checks the same conditions before encrypting).
        return Err("pre-encrypted response outside an encrypted frame".into());
    }
    if signing.is_some() || more_follow || compounded {
        if let Some(p) = payload.take() {
            resp.extend_from_slice(&p);
        }
    }
    if more_follow || compounded {
        // 3.3.4.1.3: compounded responses are 8-byte aligned and chained;
        // the padding and NextCommand are covered by the signature.
        let pad = (8 - (resp.len() - h) % 8) % 8;
        resp.put_zeros(pad);
    }
    if more_follow {
        let n = (resp.len() - h) as u32;
        resp.patch_u32(h + offsets::NEXT_COMMAND, n);
    }
    if let Some(s) = signing {
        // READ MACed its data as it read it: finish that GMAC when it was
        // computed for this key and this exact message.
        let done = match &sealed {
            Some(Sealed::Gmac { partial, key })
                if !more_follow && s.algorithm == SigningAlgorithm::AesGmac && *key == s.key =>
            {
                partial.sign(&mut resp[h..]).is_ok()
            }
            _ => false,
        };
        if !done {
            sign_in_place(s.algorithm, &s.key, &mut resp[h..])
                .map_err(|e| format!("signing failed: {e}"))?;
        }
    }
    out.push(Bytes::from(resp).slice(h..));
    if let Some(p) = payload {
        out.push(p);
    }
    Ok(())
}

/// The protocol-neutral metrics of one finished request (`op_metrics.rs`,
/// `workload.rs`), classified by `op_class.rs`.
fn record_operation(
    req: &Request<'_>,
    flight: Option<&InFlight>,
    command: Command,
    reply: &Reply,
    share: Option<&str>,
    timing: crate::op_metrics::OpTiming,
    response_len: u64,
) {
    let server = &req.conn.server;
    let failed = reply.status.is_error() && reply.status != NtStatus::MORE_PROCESSING_REQUIRED;
    let response = reply.msg.get(reply.headroom..).unwrap_or_default();
    let op = super::op_class::classify(command, req.msg, !failed, response, response_len);
    let record = OpRecord {
        protocol: Protocol::Smb,
        share,
        class: op.class,
        result: if failed {
            Outcome::Error
        } else {
            Outcome::Success
        },
        latency: timing.latency,
        throttled: timing.throttled,
        data_bytes: op.data_bytes,
    };
    server.metrics.ops.record(&record);
    let Some(flight) = flight else {
        return;
    };
    let file_id = reply.created_file_id.or(*req.used_file_id.lock().unwrap());
    if let (Some(id), Some(sess)) = (reply.created_file_id, req.session.as_ref()) {
        if let Some(open) = sess.opens.get(&id.volatile) {
            flight.name_file(id.persistent, || {
                format!("{}\\{}", share.unwrap_or_default(), open.handle.path())
            });
        }
    }
    flight.finish(
        &record,
        file_id.map(|id| FileRef {
            key: id.persistent,
            read: op.read,
        }),
    );
    if command == Command::Close {
        if let Some(id) = file_id {
            flight.forget_file(id.persistent);
        }
    }
}

/// A response ready to go, and the key to sign it with, if any.
struct Finished {
    /// `headroom` bytes, then the message (header first).
    resp: Vec<u8>,
    headroom: usize,
    payload: Option<Bytes>,
    signing: Option<crate::smb::session::SigningState>,
    sealed: Option<Sealed>,
    /// The request, in flight for its session's workload until its
    /// response is written (`workload.rs`).
    flight: Option<InFlight>,
}

/// Handle one message of a frame; returns the finished (signed) response.
async fn handle_one(
    conn: &Arc<Connection>,
    hdr: &Header,
    msg_bytes: Bytes,
    related: &mut Related,
    place: Place,
    encrypted_by: Option<&Arc<Session>>,
    pre_verified: Option<&PreVerified>,
) -> Result<Finished, String> {
    let started = std::time::Instant::now(); // metrics: request latency
    let server = &conn.server;
    let msg: &[u8] = &msg_bytes;
    let mut hdr = hdr.clone();
    // 3.3.5.2.7.2: the first message of a compound cannot be related.
    let related_first = hdr.is_related() && !related.started;
    if hdr.is_related() && !related_first {
        // 3.3.5.2.7.2: related requests inherit session, tree and file.
        hdr.session_id = related.session_id;
        hdr.tree_id = related.tree_id;
    }
    if !hdr.is_related() && hdr.command != Command::Create as u16 {
        // An unrelated request ends the chain of the last CREATE's handle.
        related.file_id = None;
    }
    related.started = true;
    // ---- workload layer (workload.rs): this request is in flight until
    // `flight` drops; requests of no session (NEGOTIATE, the first
    // SESSION_SETUP) or of an unknown one are not a session's workload.
    let operation_metrics = server.metrics.ops.enabled();
    let flight = (operation_metrics
        && hdr.session_id != 0
        && server.smb.sessions.get(&hdr.session_id).is_some())
    .then(|| {
        server
            .metrics
            .workloads
            .begin(Protocol::Smb, hdr.session_id, || conn.peer.ip().to_string())
    });
    let command = Command::from_u16(hdr.command);
    let mut req = Request {
        conn,
        header: &hdr,
        msg,
        msg_bytes: msg_bytes.clone(),
        session: None,
        tree: None,
        related_file_id: if hdr.is_related() {
            related.file_id
        } else {
            None
        },
        in_compound: place.in_compound,
        ticket: place.ticket,
        async_id: None,
        interim_credits: None,
        async_slot: None,
        registered_cancellable: false,
        encrypted_by: encrypted_by.cloned(),
        used_file_id: std::sync::Mutex::new(None),
    };
    // What passed the share's QoS gate, if it has one (`smb/qos.rs`).
    let mut qos_passed = None;

    let result: OpResult = 'res: {
        let Some(command) = command else {
            break 'res Err(NtStatus::INVALID_PARAMETER);
        };
        if conn.negotiated().is_none() && command != Command::Negotiate {
            break 'res Err(NtStatus::INVALID_PARAMETER);
        }
        let info = dispatch::info(command);
        // 3.3.5.2.9: verify the session.
        if info.needs_session || (command == Command::SessionSetup && hdr.session_id != 0) {
            let Some(sess) = server.smb.sessions.get(&hdr.session_id) else {
                // A related request that inherits no valid session is
                // malformed; one whose session ended after the message
                // before it used it (a LOGOFF in the chain, NetrSessionDel
                // on another connection) finds the session deleted.
                let related_chain = hdr.is_related() && !related_first;
                break 'res Err(if related_chain && !related.session_found {
                    NtStatus::INVALID_PARAMETER
                } else {
                    NtStatus::USER_SESSION_DELETED
                });
            };
            let phase = sess.phase();
            if phase == SessionPhase::Expired
                && command != Command::SessionSetup
                && command != Command::Logoff
            {
                break 'res Err(NtStatus::NETWORK_SESSION_EXPIRED);
            }
            if phase == SessionPhase::InProgress && command != Command::SessionSetup {
                break 'res Err(NtStatus::USER_SESSION_DELETED);
            }
            // 3.3.5.2.9: outside SESSION_SETUP (which may bind this
            // connection), the connection must be one of the session's
            // channels.
            if command != Command::SessionSetup && !conn.sessions.lock().unwrap().contains(&sess.id)
            {
                break 'res Err(NtStatus::USER_SESSION_DELETED);
            }
            if encrypted_by.is_none()
                && sess.encrypt_data.load(std::sync::atomic::Ordering::Relaxed)
                && command != Command::SessionSetup
            {
                // 3.3.5.2.9: an encrypting session takes only encrypted requests.
                break 'res Err(NtStatus::ACCESS_DENIED);
            }
            // 3.3.5.2.4: verify the signature (decryption already
            // authenticated) with the key of this connection's channel, or
            // Session.SigningKey for a binding SESSION_SETUP.
            if encrypted_by.is_some() {
            } else if let Some(signing) = sess.signing_for(conn.id) {
                if hdr.is_signed() {
                    let checked = pre_verified.is_some_and(|p| p.valid && p.key == signing.key);
                    if !checked && !verify_request(conn, &sess, command, &signing, msg) {
                        debug!(conn = conn.id, mid = hdr.message_id, "bad signature");
                        break 'res Err(NtStatus::ACCESS_DENIED);
                    }
                } else if sess
                    .signing_required
                    .load(std::sync::atomic::Ordering::Relaxed)
                    // Only a SESSION_SETUP binding a new connection may come
                    // unsigned here (it is refused as INVALID_PARAMETER in
                    // session_setup.rs); a re-authentication on a channel
                    // must be signed, as Samba requires.
                    && (command != Command::SessionSetup || sess.has_channel(conn.id))
                {
                    break 'res Err(NtStatus::ACCESS_DENIED);
                }
            }
            req.session = Some(sess);
        }
        if req.session.is_none() && command == Command::Echo && hdr.session_id != 0 {
            // ECHO needs no session, but one named is used to sign the reply.
            req.session = server
                .smb
                .sessions
                .get(&hdr.session_id)
                .filter(|s| s.phase() == SessionPhase::Valid)
                .filter(|s| {
                    !hdr.is_signed()
                        || s.signing_for(conn.id)
                            .is_none_or(|k| verify_signature(k.algorithm, &k.key, msg))
                });
        }
        if related_first {
            break 'res Err(NtStatus::INVALID_PARAMETER);
        }
        if hdr.is_related() {
            if let Some(st) = related.create_error {
                break 'res Err(st);
            }
        }
        if info.needs_tree {
            let sess = req
                .session
                .as_ref()
                .expect("needs_tree implies needs_session");
            let Some(tree) = sess.tree(hdr.tree_id) else {
                break 'res Err(NtStatus::NETWORK_NAME_DELETED);
            };
            if tree.encrypt_data && encrypted_by.is_none() {
                // 3.3.5.2.11: the share requires encryption.
                break 'res Err(NtStatus::ACCESS_DENIED);
            }
            req.tree = Some(tree);
        }
        trace!(
            conn = conn.id,
            mid = hdr.message_id,
            cmd = info.name,
            "request"
        );
        // Over the share's provisioned limits the request waits here,
        // then runs: QoS never fails a request.
        qos_passed = super::qos::pass(&mut req, command).await;
        super::replay::dispatch_guarded(command, &mut req).await
    };

    let command = hdr.command;
    let mut reply = match result {
        Ok(r) => r,
        Err(status) => error_reply(status),
    };
    let throttled = qos_passed
        .as_ref()
        .map_or(std::time::Duration::ZERO, |(_, p)| p.waited);
    if let Some((gate, passed)) = qos_passed {
        gate.done(passed, !reply.status.is_error());
    }

    // ---- metrics layer (admin API): one record per request ----
    if let Some(cmd) = Command::from_u16(command) {
        let share = req
            .tree
            .as_ref()
            .map(|t| t.share.as_ref().map_or("IPC$", |s| s.name.as_str()));
        let out = reply.msg.len() - reply.headroom + reply.payload.as_ref().map_or(0, |p| p.len());
        let elapsed = started.elapsed();
        server.metrics.record(
            share,
            cmd,
            reply.status,
            elapsed,
            msg.len() as u64,
            out as u64,
        );
        if operation_metrics {
            record_operation(
                &req,
                flight.as_ref(),
                cmd,
                &reply,
                share,
                crate::op_metrics::OpTiming {
                    latency: elapsed,
                    throttled,
                },
                out as u64,
            );
        }
    }
    if let Some(s) = encrypted_by {
        // The admin view's "encryption": this session's traffic is encrypted.
        use std::sync::atomic::Ordering::Relaxed;
        if !s.encrypted_seen.load(Relaxed) {
            s.encrypted_seen.store(true, Relaxed);
        }
    }
    // ---- end metrics ----

    trace!(
        conn = conn.id,
        mid = hdr.message_id,
        cmd = hdr.command,
        status = reply.status.name(),
        "response"
    );
    if related_first {
        related.create_error = Some(reply.status);
    } else if command == Command::Create as u16 {
        if reply.status.is_error() {
            related.create_error = Some(reply.status);
        } else if let Some(id) = reply.created_file_id {
            related.file_id = Some(id);
            related.create_error = None;
        }
    } else if let Some(id) = *req.used_file_id.lock().unwrap() {
        // 3.3.5.2.7.2: a related request uses the FileId of the request
        // before it, whichever command named it (FLUSH then CLOSE).
        related.file_id = Some(id);
    }
    related.session_id = reply.session_id.unwrap_or(hdr.session_id);
    related.session_found = req.session.is_some();
    related.tree_id = reply.tree_id.unwrap_or(hdr.tree_id);
    // A request registered as cancellable that finished without going
    // async (a blocking lock granted at once) is unregistered too.
    if req.registered_cancellable || req.async_id.is_some() {
        conn.finish_pending(hdr.message_id);
    }
    let async_id = req.async_id;
    let interim_credits = req.interim_credits;
    let session = req.session.clone();
    drop(req);

    // 3.3.4.1: build the response header.
    let charge = hdr.credit_charge.max(1);
    let credits = match interim_credits {
        Some(_) => 0,
        // A session QoS holds back is granted fewer credits (`qos.rs`).
        None if session
            .as_ref()
            .is_some_and(|s| server.qos.client_throttled(crate::qos::smb_client(s.id))) =>
        {
            conn.credits.lock().unwrap().grant_throttled(
                hdr.credits,
                charge,
                crate::qos::THROTTLED_CREDITS,
            )
        }
        None => conn.credits.lock().unwrap().grant(hdr.credits, charge),
    };
    let mut rh = Header {
        credit_charge: hdr.credit_charge,
        status: reply.status.0,
        command,
        credits,
        flags: flags::SERVER_TO_REDIR
            | (hdr.flags & flags::RELATED_OPERATIONS)
            | (hdr.flags & flags::PRIORITY_MASK),
        next_command: 0,
        message_id: hdr.message_id,
        process_id: hdr.process_id,
        tree_id: reply.tree_id.unwrap_or(hdr.tree_id),
        async_id: 0,
        session_id: reply.session_id.unwrap_or(hdr.session_id),
        signature: [0; 16],
    };
    if let Some(a) = async_id {
        rh.flags |= flags::ASYNC_COMMAND;
        rh.async_id = a;
    }
    let mut resp = reply.msg;
    // Bytes reserved in front of the header (a transform header's room).
    let h = reply.headroom;
    let mut hbuf = Vec::with_capacity(HEADER_LEN);
    rh.encode(&mut hbuf);
    resp[h..h + HEADER_LEN].copy_from_slice(&hbuf);
    let after_send = reply.after_send.take();

    // 3.3.4.1.1: sign responses of signed sessions.
    let sign_session = if reply.sign_with_new_session {
        server.smb.sessions.get(&rh.session_id)
    } else {
        session
    };
    let mut signing = None;
    // Encrypted responses are not signed (MS-SMB2 3.3.4.1.1).
    let sign_session = if encrypted_by.is_some() {
        None
    } else {
        sign_session
    };
    if let Some(sess) = sign_session {
        // 3.3.4.1.1: the channel's key (the new one after a bind).
        if let Some(s) = sess.signing_for(conn.id) {
            let required = sess
                .signing_required
                .load(std::sync::atomic::Ordering::Relaxed);
            if (hdr.is_signed() || required || reply.sign_with_new_session)
                && reply.status != NtStatus::PENDING
            {
                // sign_in_place sets SMB2_FLAGS_SIGNED itself.
                signing = Some(s);
            }
        }
    }
    if signing.is_none() && encrypted_by.is_none() && hdr.is_signed() && reply.status.is_error() {
        // No key to sign this error with (unknown session, malformed
        // compound): echo the request's flag and signature, as Samba does;
        // clients accept that for these errors.
        let fl = u32::from_le_bytes(
            resp[h + offsets::FLAGS..h + offsets::FLAGS + 4]
                .try_into()
                .unwrap(),
        );
        resp.patch_u32(h + offsets::FLAGS, fl | flags::SIGNED);
        resp[h + offsets::SIGNATURE..h + offsets::SIGNATURE + 16].copy_from_slice(&hdr.signature);
    }
    if let Some(hook) = after_send {
        // Preauth integrity hashes the message as sent: a binding
        // exchange's interim responses are signed (MS-SMB2 3.3.5.5.2), so
        // sign first. finalize signs again after any compound chaining.
        if let Some(s) = &signing {
            sign_in_place(s.algorithm, &s.key, &mut resp[h..])
                .map_err(|e| format!("signing failed: {e}"))?;
        }
        hook(&resp[h..]);
    }
    Ok(Finished {
        resp,
        headroom: h,
        payload: reply.payload,
        signing,
        sealed: reply.sealed,
        flight,
    })
}

/// MS-SMB2 3.3.5.2.4 with the binding case of 3.3.5.5.2: a binding
/// SESSION_SETUP is signed with Session.SigningKey; a client whose new
/// connection negotiated another signing algorithm may have used that one.
/// Either proves the key; the bind is then refused for the mismatch
/// (session_setup.rs) rather than as a bad signature.
fn verify_request(
    conn: &Connection,
    sess: &Session,
    command: Command,
    signing: &crate::smb::session::SigningState,
    msg: &[u8],
) -> bool {
    if verify_signature(signing.algorithm, &signing.key, msg) {
        return true;
    }
    if command != Command::SessionSetup || sess.has_channel(conn.id) {
        return false;
    }
    match conn.negotiated() {
        Some(n) if n.signing_algorithm != signing.algorithm => {
            verify_signature(n.signing_algorithm, &signing.key, msg)
        }
        _ => false,
    }
}
