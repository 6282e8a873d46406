//! The connection's reader task: frames from the socket (large ones read
//! straight into a pooled buffer, a large AES-GMAC-signed one checked
//! piece by piece as it arrives), decrypted in place, split into a
//! compound's responses, verified and handed to their waiting requests.

use super::{Response, Transport, MAX_FRAME};
use crate::error::{Error, Result};
use braid_smb_proto::crypto::{
    decrypt_in_place, verify_in_place, GmacVerifier, SigningAlgorithm, TRANSFORM_HEADER_LEN,
};
use braid_smb_proto::header::{offsets, TRANSFORM_PROTOCOL_ID};
use braid_smb_proto::{Header, HEADER_LEN};
use bytes::BufMut;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;

pub(super) async fn reader(t: Arc<Transport>, rd: OwnedReadHalf) {
    let mut fr = FrameReader {
        rd,
        stage: Vec::with_capacity(STAGE),
        pos: 0,
    };
    let why = loop {
        match read_frame(&t, &mut fr).await {
            Ok(()) => {}
            Err(e) => break e.to_string(),
        }
    };
    tracing::debug!("connection reader stops: {why}");
    t.fail(&why);
}

/// Socket reads go to a small staging buffer, from which the length
/// prefixes and small frames are taken; a frame that does not fit in it is
/// read straight into a buffer of its own (from the pool) so that large
/// READ responses are copied out of the kernel once and never again.
const STAGE: usize = 8 * 1024;

/// A large signed frame is read from the socket at most this much at a
/// time, so that each piece is hashed while still in the CPU cache (the
/// server reads WRITE frames the same way; braid bench's client CPU on
/// 1 MiB signed reads fell 2-4%). Encrypted frames are read as they come
/// and decrypted whole: decrypting limited pieces as they arrived cost
/// 3% more, and unlimited ones saved nothing.
const RECV_PIECE: usize = 256 * 1024;

/// A large frame's AES-GMAC check, made as its bytes arrive.
enum Arriving {
    /// Its first 64 bytes are not in yet.
    Undecided,
    /// Checked once whole, if at all (encrypted, not signed, a compound,
    /// another algorithm, or no key for it).
    Whole,
    Verify(GmacVerifier),
}

impl Arriving {
    /// Decide from the frame's first 64 bytes (MS-SMB2 3.2.5.1.3: a signed
    /// response is verified with the key of the request it answers).
    fn decide(t: &Transport, head: &[u8]) -> Self {
        if head[..4] == TRANSFORM_PROTOCOL_ID {
            return Arriving::Whole;
        }
        let Ok(h) = Header::decode(head) else {
            return Arriving::Whole;
        };
        if !h.is_signed() || h.next_command != 0 {
            return Arriving::Whole;
        }
        match t.verify_key(h.message_id) {
            Some((SigningAlgorithm::AesGmac, key)) => {
                GmacVerifier::start(&key, head).map_or(Arriving::Whole, Arriving::Verify)
            }
            _ => Arriving::Whole,
        }
    }
}

struct FrameReader {
    rd: OwnedReadHalf,
    /// Received bytes not yet consumed are `stage[pos..]`.
    stage: Vec<u8>,
    pos: usize,
}

impl FrameReader {
    fn buffered(&self) -> usize {
        self.stage.len() - self.pos
    }

    /// Read more into the staging buffer until it holds `n` bytes
    /// (`n <= STAGE`).
    async fn fill(&mut self, n: usize) -> Result<()> {
        while self.buffered() < n {
            if self.stage.len() + (n - self.buffered()) > STAGE {
                self.stage.drain(..self.pos);
                self.pos = 0;
            }
            let room = STAGE - self.stage.len();
            // Into spare capacity: nothing is zeroed first.
            let got = self.rd.read_buf(&mut (&mut self.stage).limit(room)).await?;
            if got == 0 {
                return Err(Error::ConnectionLost("server closed the connection".into()));
            }
        }
        Ok(())
    }

    /// The next frame (without its 4-byte prefix), in a buffer from the
    /// pool, and, for a large signed one, whether its signature matched.
    async fn next(&mut self, t: &Transport) -> Result<(Vec<u8>, Option<bool>)> {
        self.fill(4).await?;
        let pre: [u8; 4] = self.stage[self.pos..self.pos + 4]
            .try_into()
            .unwrap_or_default();
        if pre[0] != 0 {
            return Err(Error::Protocol("bad Direct TCP transport header".into()));
        }
        let len = u32::from_be_bytes(pre) as usize;
        if !(HEADER_LEN..=MAX_FRAME).contains(&len) {
            return Err(Error::Protocol(format!("frame of {len} bytes")));
        }
        self.pos += 4;
        let mut buf = t.pool.take(len);
        let mut arriving = Arriving::Whole;
        if len <= STAGE {
            self.fill(len).await?;
            buf.extend_from_slice(&self.stage[self.pos..self.pos + len]);
            self.pos += len;
        } else {
            // What the last staging read already got (less than the frame,
            // which is larger than the staging buffer), then the rest
            // straight from the socket.
            let have = self.buffered().min(len);
            buf.extend_from_slice(&self.stage[self.pos..self.pos + have]);
            self.pos += have;
            arriving = Arriving::Undecided;
            let mut hashed = 0;
            loop {
                if matches!(arriving, Arriving::Undecided) && buf.len() >= HEADER_LEN {
                    arriving = Arriving::decide(t, &buf[..HEADER_LEN]);
                    hashed = HEADER_LEN;
                }
                if let Arriving::Verify(v) = &mut arriving {
                    v.update(&buf[hashed..])
                        .map_err(|e| Error::Protocol(format!("signature check: {e}")))?;
                    hashed = buf.len();
                }
                if buf.len() == len {
                    break;
                }
                let piece = match arriving {
                    Arriving::Verify(_) => RECV_PIECE,
                    _ => len,
                };
                let want = (len - buf.len()).min(piece);
                let got = self.rd.read_buf(&mut (&mut buf).limit(want)).await?;
                if got == 0 {
                    return Err(Error::ConnectionLost("server closed the connection".into()));
                }
            }
        }
        if self.pos == self.stage.len() {
            self.stage.clear();
            self.pos = 0;
        }
        let verified = match arriving {
            Arriving::Verify(v) => Some(v.finish()),
            _ => None,
        };
        Ok((buf, verified))
    }
}

async fn read_frame(t: &Transport, fr: &mut FrameReader) -> Result<()> {
    let (mut buf, verified) = fr.next(t).await?;
    let len = buf.len();
    t.bytes_received
        .fetch_add(len as u64 + 4, Ordering::Relaxed);
    let (range, encrypted) = if buf[..4] == TRANSFORM_PROTOCOL_ID {
        (decrypt_frame(t, &mut buf)?, true)
    } else {
        (0..len, false)
    };
    // Split a compounded response chain (MS-SMB2 3.2.5.1.9 via NextCommand).
    let mut msgs: Vec<(Header, std::ops::Range<usize>, Option<bool>)> = Vec::with_capacity(1);
    let mut at = range.start;
    loop {
        let h = Header::decode(&buf[at..range.end])?;
        if !h.is_response() {
            return Err(Error::Protocol("request received from server".into()));
        }
        let next = h.next_command as usize;
        let end = if next == 0 {
            range.end
        } else {
            if next < HEADER_LEN || next > range.end - at || !next.is_multiple_of(8) {
                return Err(Error::Protocol("bad NextCommand".into()));
            }
            at + next
        };
        msgs.push((h, at..end, None));
        if next == 0 {
            break;
        }
        at = end;
    }
    // MS-SMB2 3.2.5.1.3: verify signed responses here, in the still
    // mutable buffer (one contiguous MAC pass, nothing copied). Encrypted
    // ones are not signed.
    if !encrypted {
        for (h, r, ok) in msgs.iter_mut() {
            if !h.is_signed() {
                continue;
            }
            if verified.is_some() {
                // The lone message of a large frame, checked as it came.
                *ok = verified;
                continue;
            }
            if let Some((algo, key)) = t.verify_key(h.message_id) {
                *ok = Some(verify_in_place(algo, &key, &mut buf[r.clone()]));
            }
        }
    }
    let frame = t.pool.freeze(buf, 0..len);
    for (header, r, signature_ok) in msgs {
        t.deliver(Response {
            header,
            msg: frame.slice(r),
            encrypted,
            signature_ok,
        });
    }
    Ok(())
}

/// MS-SMB2 3.2.5.1.1.1: find the session by the transform header's
/// SessionId and decrypt with its Session.DecryptionKey, in place. Returns
/// where in `buf` the plaintext message(s) now are.
fn decrypt_frame(t: &Transport, buf: &mut [u8]) -> Result<std::ops::Range<usize>> {
    if buf.len() < TRANSFORM_HEADER_LEN + HEADER_LEN {
        return Err(Error::Protocol("short transform frame".into()));
    }
    let sid = u64::from_le_bytes(buf[44..52].try_into().unwrap_or_default());
    let d = t
        .decryptors
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&sid)
        .cloned()
        .ok_or_else(|| {
            Error::Protocol(format!("encrypted message for unknown session {sid:#x}"))
        })?;
    let (_, range) = decrypt_in_place(d.cipher, &d.key, buf)?;
    let frame = &buf[range.clone()];
    if frame.len() < HEADER_LEN {
        return Err(Error::Protocol("short encrypted message".into()));
    }
    let inner = u64::from_le_bytes(
        frame[offsets::SESSION_ID..offsets::SESSION_ID + 8]
            .try_into()
            .unwrap_or_default(),
    );
    if inner != sid {
        return Err(Error::Protocol(
            "SessionId mismatch in encrypted message".into(),
        ));
    }
    Ok(range)
}

#[cfg(test)]
mod tests {
    use super::super::{Decryptor, Request, Security, Transport};
    use crate::error::Error;
    use braid_smb_proto::crypto::{
        encrypt_frame_in_place, sign_in_place, Cipher, SigningAlgorithm, TRANSFORM_HEADER_LEN,
    };
    use braid_smb_proto::header::flags;
    use braid_smb_proto::messages::EchoRequest;
    use braid_smb_proto::{Command, Header, HEADER_LEN};
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    const SESSION: u64 = 0x1234;
    const KEY: [u8; 16] = [0x42; 16];

    fn cipher_key(cipher: Cipher) -> Vec<u8> {
        match cipher {
            Cipher::Aes256Gcm | Cipher::Aes256Ccm => vec![0x42; 32],
            _ => KEY.to_vec(),
        }
    }

    /// How the fake server protects its one large response.
    #[derive(Clone, Copy)]
    enum Protect {
        Sign,
        Encrypt(Cipher),
    }

    /// The message of a large response to `message_id`: a header, then
    /// `body` bytes that follow a pattern.
    fn response(message_id: u64, body: usize) -> Vec<u8> {
        let h = Header {
            command: Command::Echo as u16,
            credits: 8,
            flags: flags::SERVER_TO_REDIR,
            message_id,
            session_id: SESSION,
            ..Default::default()
        };
        let mut msg = Vec::with_capacity(HEADER_LEN + body);
        h.encode(&mut msg);
        msg.extend((0..body).map(|i| (i * 7 % 251) as u8));
        msg
    }

    /// One request to a server that answers with a large protected
    /// response, byte `flip` of the frame (counted from the end) flipped
    /// after protecting it; what the client made of it.
    async fn one_exchange(
        protect: Protect,
        body: usize,
        flip: Option<usize>,
    ) -> crate::Result<Vec<u8>> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut pre = [0u8; 4];
            sock.read_exact(&mut pre).await.unwrap();
            let mut req = vec![0u8; u32::from_be_bytes(pre) as usize];
            sock.read_exact(&mut req).await.unwrap();
            let mid = Header::decode(&req).unwrap().message_id;
            let mut msg = response(mid, body);
            let mut frame = match protect {
                Protect::Sign => {
                    msg[16..20]
                        .copy_from_slice(&(flags::SERVER_TO_REDIR | flags::SIGNED).to_le_bytes());
                    sign_in_place(SigningAlgorithm::AesGmac, &KEY, &mut msg).unwrap();
                    msg
                }
                Protect::Encrypt(cipher) => {
                    let mut frame = vec![0u8; TRANSFORM_HEADER_LEN];
                    frame.extend_from_slice(&msg);
                    encrypt_frame_in_place(
                        cipher,
                        &cipher_key(cipher),
                        &[9; 16],
                        SESSION,
                        &mut frame,
                    )
                    .unwrap();
                    frame
                }
            };
            if let Some(back) = flip {
                let at = frame.len() - 1 - back;
                frame[at] ^= 0x01;
            }
            sock.write_all(&(frame.len() as u32).to_be_bytes())
                .await
                .unwrap();
            sock.write_all(&frame).await.unwrap();
            // Hold the connection until the client is done with it.
            let _ = sock.read(&mut pre).await;
        });
        let t = Transport::connect(addr, 8, Duration::from_secs(10))
            .await
            .unwrap();
        let security = match protect {
            Protect::Sign => Security {
                session_id: SESSION,
                sign: Some((SigningAlgorithm::AesGmac, KEY)),
                encrypt: None,
            },
            Protect::Encrypt(cipher) => {
                let key = cipher_key(cipher);
                t.add_decryptor(SESSION, Arc::new(Decryptor { cipher, key }));
                Security {
                    session_id: SESSION,
                    sign: None,
                    encrypt: None,
                }
            }
        };
        let mut req = Request::new(Command::Echo, &EchoRequest);
        req.session_id = SESSION;
        req.security = Some(&security);
        req.response_size = body;
        let got = t.send(req).await.map(|r| r.msg.to_vec());
        t.fail("test over");
        server.abort();
        got
    }

    // MS-SMB2 3.2.5.1.3: a large signed response is checked as it arrives,
    // with the same verdict as a check of the whole.
    #[tokio::test]
    async fn a_large_signed_response_is_checked_as_it_arrives() {
        for body in [STAGE_PLUS, 3 * RECV_PIECE_PLUS] {
            let msg = one_exchange(Protect::Sign, body, None)
                .await
                .expect("genuine");
            assert_eq!(msg[HEADER_LEN..], response(0, body)[HEADER_LEN..]);
            for back in [0, body / 2, body - 1] {
                let r = one_exchange(Protect::Sign, body, Some(back)).await;
                assert!(
                    matches!(r, Err(Error::BadSignature(_, true))),
                    "flip {back}: {r:?}"
                );
            }
        }
    }

    // MS-SMB2 3.2.5.1.1.1: a large encrypted response read past the
    // staging buffer is decrypted whole; a frame whose tag does not verify
    // ends the connection.
    #[tokio::test]
    async fn a_large_encrypted_response_is_decrypted_and_checked() {
        for cipher in [Cipher::Aes128Gcm, Cipher::Aes256Gcm, Cipher::Aes128Ccm] {
            for body in [STAGE_PLUS, 3 * RECV_PIECE_PLUS] {
                let msg = one_exchange(Protect::Encrypt(cipher), body, None)
                    .await
                    .expect("genuine");
                assert_eq!(msg[HEADER_LEN..], response(0, body)[HEADER_LEN..]);
                let r = one_exchange(Protect::Encrypt(cipher), body, Some(body / 3)).await;
                assert!(
                    matches!(r, Err(Error::ConnectionLost(_))),
                    "{cipher:?}: {r:?}"
                );
            }
        }
    }

    /// Just over the staging buffer, and over a receive piece.
    const STAGE_PLUS: usize = super::STAGE + 1000;
    const RECV_PIECE_PLUS: usize = super::RECV_PIECE + 333;
}
