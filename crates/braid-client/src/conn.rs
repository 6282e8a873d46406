//! A negotiated SMB2/3 connection (MS-SMB2 3.2.4.2.1, 3.2.5.2).

use crate::error::{Error, Result};
use crate::transport::{Request, Response, Security, Transport};
use braid_smb_proto::crypto::{Cipher, PreauthHash, SigningAlgorithm};
use braid_smb_proto::messages::negotiate::{capabilities, dialect, hash_algorithm, security_mode};
use braid_smb_proto::messages::{
    EchoRequest, NegotiateContext, NegotiateRequest, NegotiateResponse,
};
use braid_smb_proto::Command;
use rand::RngCore;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Client settings shared by every connection of a client.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Dialects offered, e.g. `[0x0311, 0x0302, 0x0300]` (2.x may be added).
    pub dialects: Vec<u16>,
    /// SMB2_ENCRYPTION_CAPABILITIES order (3.1.1), most preferred first.
    pub ciphers: Vec<Cipher>,
    /// SMB2_SIGNING_CAPABILITIES order (3.1.1), most preferred first.
    pub signing_algorithms: Vec<SigningAlgorithm>,
    /// Sign every request even when the server does not require it.
    pub signing: bool,
    /// Encrypt all traffic of the session even when the server does not
    /// ask for it (SMB 3.x only).
    pub encrypt: bool,
    /// Credits the client tries to hold per connection.
    pub credit_target: u16,
    /// ClientGuid; every channel of a session must use the same one.
    pub client_guid: [u8; 16],
    /// Cap on READ/WRITE sizes (the negotiated maxima also apply).
    pub max_io: u32,
    /// How long to wait for any one response.
    pub timeout: Duration,
    /// Retry WRITE on another channel (with SMB2_FLAGS_REPLAY_OPERATION)
    /// when its channel dies; READ and other idempotent requests always are.
    pub retry_writes: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        let mut guid = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut guid);
        ClientConfig {
            dialects: vec![dialect::SMB311, dialect::SMB302, dialect::SMB300],
            ciphers: vec![
                Cipher::Aes128Gcm,
                Cipher::Aes128Ccm,
                Cipher::Aes256Gcm,
                Cipher::Aes256Ccm,
            ],
            signing_algorithms: vec![
                SigningAlgorithm::AesGmac,
                SigningAlgorithm::AesCmac,
                SigningAlgorithm::HmacSha256,
            ],
            signing: true,
            encrypt: false,
            credit_target: 512,
            client_guid: guid,
            max_io: 1024 * 1024,
            timeout: Duration::from_secs(60),
            retry_writes: true,
        }
    }
}

/// What NEGOTIATE settled (MS-SMB2 3.2.5.2).
#[derive(Debug, Clone)]
pub struct Negotiated {
    pub dialect: u16,
    pub server_guid: [u8; 16],
    pub security_mode: u16,
    pub capabilities: u32,
    pub max_read: u32,
    pub max_write: u32,
    pub max_transact: u32,
    /// Connection.CipherId (3.1.1), or AES-128-CCM for 3.0/3.0.2 when the
    /// server offers encryption.
    pub cipher: Option<Cipher>,
    pub signing_algorithm: SigningAlgorithm,
    /// Connection.PreauthIntegrityHashValue after NEGOTIATE (3.1.1).
    pub preauth: PreauthHash,
    /// The server's GSS token from the NEGOTIATE response.
    pub security_buffer: Vec<u8>,
}

impl Negotiated {
    pub fn signing_required(&self) -> bool {
        self.security_mode & security_mode::SIGNING_REQUIRED != 0
    }
    pub fn is_smb3(&self) -> bool {
        self.dialect >= dialect::SMB300
    }
    pub fn multichannel(&self) -> bool {
        self.capabilities & capabilities::MULTI_CHANNEL != 0
    }
}

static NEXT_CONN_ID: AtomicU64 = AtomicU64::new(1);

/// One negotiated TCP connection. `Arc<Connection>` is shared freely: any
/// number of tasks may have requests in flight on it at once, bounded by
/// the credits the server grants.
pub struct Connection {
    pub(crate) t: Arc<Transport>,
    pub(crate) neg: Negotiated,
    pub(crate) cfg: Arc<ClientConfig>,
    addr: SocketAddr,
    id: u64,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("id", &self.id)
            .field("addr", &self.addr)
            .field("dialect", &format_args!("{:#06x}", self.neg.dialect))
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connect with the default configuration.
    pub async fn connect(addr: SocketAddr) -> Result<Arc<Connection>> {
        Self::connect_with(addr, Arc::new(ClientConfig::default())).await
    }

    /// Connect and NEGOTIATE (MS-SMB2 3.2.4.2.1).
    pub async fn connect_with(addr: SocketAddr, cfg: Arc<ClientConfig>) -> Result<Arc<Connection>> {
        if cfg.dialects.is_empty() {
            return Err(Error::Invalid("no dialect to offer".into()));
        }
        let t = Transport::connect(addr, cfg.credit_target, cfg.timeout).await?;
        let neg = match negotiate(&t, &cfg).await {
            Ok(n) => n,
            Err(e) => {
                t.fail("negotiate failed");
                return Err(e);
            }
        };
        t.large_mtu.store(
            neg.dialect > dialect::SMB202 && neg.capabilities & capabilities::LARGE_MTU != 0,
            Ordering::Relaxed,
        );
        Ok(Arc::new(Connection {
            t,
            neg,
            cfg,
            addr,
            id: NEXT_CONN_ID.fetch_add(1, Ordering::Relaxed),
        }))
    }

    pub fn negotiated(&self) -> &Negotiated {
        &self.neg
    }
    pub fn config(&self) -> &Arc<ClientConfig> {
        &self.cfg
    }
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    pub fn id(&self) -> u64 {
        self.id
    }
    /// The oplock and lease breaks the server sends on this connection,
    /// from now on (see [`Transport::listen_unsolicited`]).
    pub fn breaks(&self) -> tokio::sync::mpsc::UnboundedReceiver<Response> {
        self.t.listen_unsolicited()
    }
    /// Our end of the TCP connection.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.t.local_addr
    }
    pub fn is_alive(&self) -> bool {
        !self.t.is_dead()
    }
    /// Requests sent and not yet answered.
    pub fn outstanding(&self) -> usize {
        self.t.outstanding()
    }
    /// Credits granted and not yet used.
    pub fn credits_available(&self) -> usize {
        self.t.credits.available()
    }
    /// (bytes sent, bytes received, requests sent) on this connection.
    pub fn traffic(&self) -> (u64, u64, u64) {
        (
            self.t.bytes_sent.load(Ordering::Relaxed),
            self.t.bytes_received.load(Ordering::Relaxed),
            self.t.requests.load(Ordering::Relaxed),
        )
    }
    /// Drop the TCP connection now, as a network failure would: requests in
    /// flight fail with [`Error::ConnectionLost`].
    pub fn kill(&self) {
        self.t.fail("connection killed by client");
    }

    /// ECHO (MS-SMB2 2.2.28), outside any session.
    pub async fn echo(&self) -> Result<()> {
        self.send(Request::new(Command::Echo, &EchoRequest))
            .await?
            .check(&[])
            .map(|_| ())
    }

    pub(crate) async fn send(&self, req: Request<'_>) -> Result<Response> {
        self.t.send(req).await
    }

    pub(crate) async fn send_secured<'b>(
        &self,
        mut req: Request<'b>,
        sec: &'b Security,
    ) -> Result<Response> {
        req.session_id = sec.session_id;
        req.security = Some(sec);
        self.t.send(req).await
    }

    pub(crate) async fn send_compound_secured<'b>(
        &self,
        mut reqs: Vec<Request<'b>>,
        sec: &'b Security,
        related: bool,
    ) -> Result<Vec<Result<Response>>> {
        for req in reqs.iter_mut() {
            req.session_id = sec.session_id;
            req.security = Some(sec);
        }
        self.t.send_compound(reqs, related).await
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.t.fail("connection dropped");
    }
}

async fn negotiate(t: &Transport, cfg: &ClientConfig) -> Result<Negotiated> {
    let offers_311 = cfg.dialects.contains(&dialect::SMB311);
    let mut contexts = Vec::new();
    if offers_311 {
        // MS-SMB2 2.2.3.1.1: SHA-512 with a 32-byte random salt.
        let mut salt = vec![0u8; 32];
        rand::thread_rng().fill_bytes(&mut salt);
        contexts.push(NegotiateContext::PreauthIntegrity {
            hash_algorithms: vec![hash_algorithm::SHA512],
            salt,
        });
        if !cfg.ciphers.is_empty() {
            contexts.push(NegotiateContext::Encryption {
                ciphers: cfg.ciphers.iter().map(|c| c.wire_id()).collect(),
            });
        }
        if !cfg.signing_algorithms.is_empty() {
            contexts.push(NegotiateContext::SigningCapabilities {
                algorithms: cfg.signing_algorithms.iter().map(|a| a.wire_id()).collect(),
            });
        }
    }
    let mut caps = capabilities::LARGE_MTU | capabilities::MULTI_CHANNEL;
    if !cfg.ciphers.is_empty() {
        caps |= capabilities::ENCRYPTION;
    }
    let req = NegotiateRequest {
        security_mode: if cfg.signing {
            security_mode::SIGNING_REQUIRED | security_mode::SIGNING_ENABLED
        } else {
            security_mode::SIGNING_ENABLED
        },
        capabilities: caps,
        client_guid: cfg.client_guid,
        dialects: cfg.dialects.clone(),
        contexts,
    };
    let mut preauth = PreauthHash::new();
    let mut r = Request::new(Command::Negotiate, &req);
    r.preauth = Some(&mut preauth);
    let resp = t.send(r).await?.check(&[])?;
    let nr: NegotiateResponse = resp.decode()?;
    if !cfg.dialects.contains(&nr.dialect_revision) {
        return Err(Error::Protocol(format!(
            "server chose dialect {:#06x} we did not offer",
            nr.dialect_revision
        )));
    }
    let mut cipher = None;
    let mut signing = None;
    if nr.dialect_revision == dialect::SMB311 {
        // MS-SMB2 3.2.5.2: exactly one preauth hash algorithm, our cipher
        // and signing algorithm choices only.
        preauth.update(&resp.msg);
        let mut saw_preauth = false;
        for c in &nr.contexts {
            match c {
                NegotiateContext::PreauthIntegrity {
                    hash_algorithms, ..
                } => {
                    if hash_algorithms.as_slice() != [hash_algorithm::SHA512] {
                        return Err(Error::Protocol("preauth hash algorithm".into()));
                    }
                    saw_preauth = true;
                }
                NegotiateContext::Encryption { ciphers } => match ciphers.as_slice() {
                    [0] => {}
                    [id] => {
                        let c = Cipher::from_wire(*id)
                            .filter(|c| cfg.ciphers.contains(c))
                            .ok_or_else(|| Error::Protocol(format!("cipher {id:#x}")))?;
                        cipher = Some(c);
                    }
                    _ => return Err(Error::Protocol("cipher count".into())),
                },
                NegotiateContext::SigningCapabilities { algorithms } => match algorithms.as_slice()
                {
                    [id] => {
                        let a = SigningAlgorithm::from_wire(*id)
                            .filter(|a| cfg.signing_algorithms.contains(a))
                            .ok_or_else(|| Error::Protocol(format!("signing algorithm {id:#x}")))?;
                        signing = Some(a);
                    }
                    _ => return Err(Error::Protocol("signing algorithm count".into())),
                },
                _ => {}
            }
        }
        if !saw_preauth {
            return Err(Error::Protocol("no preauth integrity context".into()));
        }
    } else if nr.dialect_revision >= dialect::SMB300
        && nr.capabilities & capabilities::ENCRYPTION != 0
    {
        cipher = Some(Cipher::Aes128Ccm);
    }
    let signing_algorithm = SigningAlgorithm::for_dialect(nr.dialect_revision, signing)
        .ok_or_else(|| Error::Protocol("dialect without signing".into()))?;
    let small =
        nr.dialect_revision == dialect::SMB202 || nr.capabilities & capabilities::LARGE_MTU == 0;
    let cap = |v: u32| {
        let v = v.min(cfg.max_io).max(4096);
        if small {
            v.min(65536)
        } else {
            v
        }
    };
    Ok(Negotiated {
        dialect: nr.dialect_revision,
        server_guid: nr.server_guid,
        security_mode: nr.security_mode,
        capabilities: nr.capabilities,
        max_read: cap(nr.max_read_size),
        max_write: cap(nr.max_write_size),
        max_transact: cap(nr.max_transact_size),
        cipher,
        signing_algorithm,
        preauth,
        security_buffer: nr.security_buffer,
    })
}
