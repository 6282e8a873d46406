//! The connection's reader task: frames from the socket (large ones read
//! straight into a pooled buffer), decrypted in place, split into a
//! compound's responses, verified and handed to their waiting requests.

use super::{Response, Transport, MAX_FRAME};
use crate::error::{Error, Result};
use crate::pool::BufPool;
use braid_smb_proto::crypto::{decrypt_in_place, verify_in_place, TRANSFORM_HEADER_LEN};
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

    /// The next frame (without its 4-byte prefix), in a buffer from `pool`.
    async fn next(&mut self, pool: &BufPool) -> Result<Vec<u8>> {
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
        let mut buf = pool.take(len);
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
            while buf.len() < len {
                let want = len - buf.len();
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
        Ok(buf)
    }
}

async fn read_frame(t: &Transport, fr: &mut FrameReader) -> Result<()> {
    let mut buf = fr.next(&t.pool).await?;
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
