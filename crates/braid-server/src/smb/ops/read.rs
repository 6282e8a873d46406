//! READ: MS-SMB2 3.3.5.12. The payload goes to the socket as its own
//! buffer, after a header built separately (no copy when unsigned).

use braid_fs::LockOwner;
use braid_smb_proto::codec::Message;
use braid_smb_proto::crypto::TRANSFORM_HEADER_LEN;
use braid_smb_proto::header::HEADER_LEN;
use braid_smb_proto::messages::create::access_mask;
use braid_smb_proto::messages::read::encode_read_response_header;
use braid_smb_proto::messages::ReadRequest;
use braid_smb_proto::NtStatus;

use std::sync::atomic::Ordering;

use braid_smb_proto::crypto::deferred::{
    gmac_response_nonce, GcmStream, GmacStream, DEFERRED_PREFIX_LEN,
};
use braid_smb_proto::crypto::{Cipher, SigningAlgorithm};

use crate::smb::{blocking, OpResult, Reply, Request, Sealed};

/// MS-SMB2 3.3.5.2.5: a multi-credit request must carry enough CreditCharge.
pub fn check_credit_charge(req: &Request<'_>, payload: u32) -> Result<(), NtStatus> {
    if req.conn.dialect() == braid_smb_proto::messages::negotiate::dialect::SMB202 {
        return Ok(());
    }
    let needed = (payload.max(1) as u64 - 1) / 65536 + 1;
    if (req.header.credit_charge.max(1) as u64) < needed {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(())
}

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = ReadRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if super::pipe::on_ipc(req) {
        return super::pipe::read(req, r.file_id, r.length).await;
    }
    let open = req.open(r.file_id)?;
    if open.is_directory {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let max = req.conn.config.max_io_size;
    if r.length > max {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    check_credit_charge(req, r.length)?;
    if open.granted_access & (access_mask::FILE_READ_DATA | access_mask::FILE_EXECUTE) == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if r.offset > i64::MAX as u64 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    crate::smb::host_watch::watch_read_cache(&req.conn.server, req.share()?, &open);
    let handle = open.handle.clone();
    let (offset, length) = (r.offset, r.length);
    // The response is built in one buffer: room for a transform header,
    // then header and READ body, then the file data read straight behind
    // them. Signing and encryption then run in place on the buffer that goes
    // to the socket, and the plain case is one write: the data is never
    // copied again. A signed or encrypted response is MACed or encrypted
    // piece by piece as it is read, while the piece is still in the CPU
    // cache, and finished by the frame layer once the header is known.
    //
    // Data in the page cache is read right here (RWF_NOWAIT never waits
    // for the disk): handing a cached 1 MiB read to the blocking pool and
    // back cost more in thread switches than the read itself. Anything not
    // cached, and reads above INLINE_MAX, go to the blocking pool.
    let inline = if length as usize <= INLINE_MAX {
        read_and_seal(&handle, offset, length, seal_plan(req), true)
            .map_err(|e| crate::smb::status_map::fs_status(&e))?
    } else {
        None
    };
    let (mut msg, n, sealed) = match inline {
        Some(done) => done,
        None => {
            let plan = seal_plan(req);
            blocking(move || {
                read_and_seal(&handle, offset, length, plan, false)
                    .map(|r| r.expect("a blocking read does not give up"))
            })
            .await?
        }
    };
    if (n as u64) < r.minimum_count as u64 || (n == 0 && r.length > 0) {
        return Err(NtStatus::END_OF_FILE);
    }
    let sealed = sealed?;
    let mut prefix = Vec::with_capacity(HEADER_LEN + 16);
    prefix.resize(HEADER_LEN, 0);
    encode_read_response_header(&mut prefix, n as u32);
    msg[ROOM + HEADER_LEN..PREFIX].copy_from_slice(&prefix[HEADER_LEN..]);
    let mut reply = Reply::raw(NtStatus::SUCCESS, msg);
    reply.headroom = ROOM;
    reply.sealed = sealed;
    Ok(reply)
}

/// Reads up to this size may run on the reactor when cached.
const INLINE_MAX: usize = 1024 * 1024;
const ROOM: usize = TRANSFORM_HEADER_LEN;
const PREFIX: usize = ROOM + DEFERRED_PREFIX_LEN;

type ReadDone = (Vec<u8>, usize, Result<Option<Sealed>, NtStatus>);

/// Read `length` bytes at `offset` behind the reserved prefix, sealing them
/// as they come. `cached_only`: give up (None) rather than wait for the disk.
fn read_and_seal(
    handle: &braid_fs::OpenHandle,
    offset: u64,
    length: u32,
    plan: SealPlan,
    cached_only: bool,
) -> braid_fs::FsResult<Option<ReadDone>> {
    if length > 0 {
        handle.check_io_lock(offset, length as u64, false, LockOwner(0))?;
    }
    let mut msg = Vec::with_capacity(PREFIX + length.max(1) as usize);
    msg.resize(PREFIX, 0);
    let mut stream = plan.start();
    // Unprotected data is read in one call: the pieces only serve the MAC
    // or cipher pass.
    let piece = match stream {
        SealStream::Plain => usize::MAX,
        _ => SEAL_CHUNK,
    };
    let mut n = 0usize;
    while n < length as usize {
        let want = (length as usize - n).min(piece);
        let before = msg.len();
        let at = offset + n as u64;
        let got = if cached_only {
            match handle.read_append_cached(at, want, &mut msg)? {
                Some(got) => got,
                None => return Ok(None),
            }
        } else {
            handle.read_append(at, want, &mut msg)?
        };
        stream.update(&mut msg[before..]);
        n += got;
        if got < want {
            break;
        }
    }
    if n == 0 {
        // MS-SMB2 2.2.20: the variable part is at least one byte.
        msg.push(0);
        stream.update(&mut msg[PREFIX..]);
    }
    // Open.CurrentByteOffset follows the last read, as Samba keeps it
    // for FilePositionInformation (smbtorture smb2.read.position).
    handle.set_position(offset + n as u64);
    Ok(Some((msg, n, stream.finish())))
}

/// Bytes read (and sealed) at a time: small enough to stay in L2 between
/// the read and the MAC or cipher pass.
const SEAL_CHUNK: usize = 256 * 1024;

/// How the response will be protected, decided as the frame layer will
/// decide it (frame.rs handle_one / process): encrypted when the request
/// came encrypted and is not part of a compound; otherwise GMAC-signed when
/// the session signs and the request was signed or signing is required.
/// Anything else (CMAC, HMAC, CCM, compounds) is protected after the fact.
enum SealPlan {
    Plain,
    Gmac {
        key: Vec<u8>,
        message_id: u64,
    },
    Gcm {
        cipher: Cipher,
        key: Vec<u8>,
        nonce: [u8; 16],
    },
}

fn seal_plan(req: &Request<'_>) -> SealPlan {
    if req.in_compound {
        return SealPlan::Plain;
    }
    if let Some(sess) = &req.encrypted_by {
        return match sess.encryption() {
            Some(enc) if matches!(enc.cipher, Cipher::Aes128Gcm | Cipher::Aes256Gcm) => {
                SealPlan::Gcm {
                    cipher: enc.cipher,
                    key: enc.encrypt_key.clone(),
                    nonce: enc.nonces.next_nonce(),
                }
            }
            _ => SealPlan::Plain,
        };
    }
    let Some(sess) = &req.session else {
        return SealPlan::Plain;
    };
    let required = sess.signing_required.load(Ordering::Relaxed);
    match sess.signing_for(req.conn.id) {
        Some(s)
            if s.algorithm == SigningAlgorithm::AesGmac && (req.header.is_signed() || required) =>
        {
            SealPlan::Gmac {
                key: s.key,
                message_id: req.header.message_id,
            }
        }
        _ => SealPlan::Plain,
    }
}

enum SealStream {
    Plain,
    Gmac(GmacStream, Vec<u8>),
    Gcm(GcmStream),
    /// Encryption failed part-way: some data is ciphertext, some not.
    Broken,
}

impl SealPlan {
    fn start(self) -> SealStream {
        // A stream that fails to start leaves the response to be protected
        // the ordinary way.
        match self {
            SealPlan::Plain => SealStream::Plain,
            SealPlan::Gmac { key, message_id } => {
                match GmacStream::new(&key, gmac_response_nonce(message_id)) {
                    Ok(s) => SealStream::Gmac(s, key),
                    Err(_) => SealStream::Plain,
                }
            }
            SealPlan::Gcm { cipher, key, nonce } => match GcmStream::new(cipher, &key, nonce) {
                Ok(s) => SealStream::Gcm(s),
                Err(_) => SealStream::Plain,
            },
        }
    }
}

impl SealStream {
    fn update(&mut self, data: &mut [u8]) {
        match self {
            SealStream::Plain | SealStream::Broken => {}
            // The data is still plaintext: sign it afterwards instead.
            SealStream::Gmac(s, _) => {
                if s.update(data).is_err() {
                    *self = SealStream::Plain;
                }
            }
            SealStream::Gcm(s) => {
                if s.update(data).is_err() {
                    *self = SealStream::Broken;
                }
            }
        }
    }

    /// The seal for the frame layer; Err when the data cannot be sent.
    fn finish(self) -> Result<Option<Sealed>, NtStatus> {
        match self {
            SealStream::Plain => Ok(None),
            SealStream::Gmac(s, key) => {
                Ok(s.finish().ok().map(|partial| Sealed::Gmac { partial, key }))
            }
            SealStream::Gcm(s) => s
                .finish()
                .map(|p| Some(Sealed::Gcm(p)))
                .map_err(|_| NtStatus::INTERNAL_ERROR),
            SealStream::Broken => Err(NtStatus::INTERNAL_ERROR),
        }
    }
}
