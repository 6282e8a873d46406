//! SESSION_SETUP with SPNEGO/NTLMv2, session keys, signing and encryption
//! policy, and session binding for multichannel (MS-SMB2 3.2.4.2.3,
//! 3.2.5.3).

use crate::channel::{Channel, ChannelSet, Policy};
use crate::conn::Connection;
use crate::error::{Error, Result};
use crate::transport::{check_signature, Decryptor, Encryptor, Request, Response, Security};
use braid_smb_proto::auth::{ClientEntropy, ClientStep, NtlmClient, SpnegoClient};
use braid_smb_proto::crypto::{
    derive_channel_signing_key, derive_session_keys, Cipher, NonceGenerator, PreauthHash,
    SigningAlgorithm,
};
use braid_smb_proto::messages::negotiate::{dialect, security_mode};
use braid_smb_proto::messages::session_setup::{flags as ss_flags, session_flags};
use braid_smb_proto::messages::{LogoffRequest, SessionSetupRequest, SessionSetupResponse};
use braid_smb_proto::{Command, NtStatus};
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Clone)]
struct Credentials {
    user: String,
    domain: String,
    password: String,
}

/// An authenticated session and its channels.
pub struct Session {
    id: u64,
    dialect: u16,
    algo: SigningAlgorithm,
    cipher: Option<Cipher>,
    /// Session.SigningKey (signs SESSION_SETUP requests of a binding).
    signing_key: [u8; 16],
    sign: bool,
    session_flags: u16,
    encryptor: Option<Arc<Encryptor>>,
    encrypt_all: bool,
    decryptor: Option<Arc<Decryptor>>,
    creds: Credentials,
    pub(crate) channels: ChannelSet,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &format_args!("{:#x}", self.id))
            .field("sign", &self.sign)
            .field("encrypt", &self.encrypt_all)
            .field("channels", &self.channels.len())
            .finish_non_exhaustive()
    }
}

/// FILETIME now (100 ns ticks since 1601), for the NTLMv2 blob.
fn filetime_now() -> u64 {
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    unix.as_secs() * 10_000_000 + u64::from(unix.subsec_nanos()) / 100 + 116_444_736_000_000_000
}

/// Outcome of one SPNEGO exchange over SESSION_SETUP.
struct Auth {
    session_id: u64,
    session_key: [u8; 16],
    preauth: PreauthHash,
    final_resp: Response,
    session_flags: u16,
}

/// Run the SESSION_SETUP exchange on `conn`. For binding, `bind` carries
/// the existing session's id and Security (signed with Session.SigningKey,
/// MS-SMB2 3.2.4.1.1).
async fn authenticate(
    conn: &Connection,
    creds: &Credentials,
    bind: Option<&Security>,
) -> Result<Auth> {
    let neg = conn.negotiated();
    if !SpnegoClient::server_offers_ntlm(&neg.security_buffer) {
        return Err(Error::Protocol("server does not offer NTLMSSP".into()));
    }
    let ntlm = NtlmClient::new(&creds.user, &creds.domain, &creds.password);
    let mut spnego = SpnegoClient::new(ntlm, ClientEntropy::random(filetime_now()));
    let is_311 = neg.dialect == dialect::SMB311;
    // MS-SMB2 3.2.5.3.1 / 3.2.4.2.3: the session's (or, when binding, the
    // channel's) preauth hash starts from the connection's.
    let mut preauth = neg.preauth.clone();
    let mut token = spnego.initial_token();
    let mut session_id = bind.map_or(0, |b| b.session_id);
    loop {
        let req = SessionSetupRequest {
            flags: if bind.is_some() { ss_flags::BINDING } else { 0 },
            security_mode: if conn.cfg.signing {
                security_mode::SIGNING_REQUIRED as u8
            } else {
                security_mode::SIGNING_ENABLED as u8
            },
            capabilities: 0,
            channel: 0,
            previous_session_id: 0,
            security_buffer: std::mem::take(&mut token),
        };
        let mut r = Request::new(Command::SessionSetup, &req);
        r.session_id = session_id;
        r.verify = false;
        r.security = bind;
        if is_311 {
            r.preauth = Some(&mut preauth);
        }
        let resp = conn.send(r).await?;
        let status = resp.status();
        if status == NtStatus::MORE_PROCESSING_REQUIRED {
            if is_311 {
                preauth.update(&resp.msg);
            }
            if bind.is_none() {
                session_id = resp.header.session_id;
            } else if resp.header.is_signed() {
                // MS-SMB2 3.2.5.1.3: non-final binding responses are signed
                // with Session.SigningKey.
                check_signature(bind.and_then(|b| b.sign), None, &resp)?;
            }
            let ssr: SessionSetupResponse = resp.decode()?;
            match spnego.step(&ssr.security_buffer)? {
                ClientStep::Send(t) => token = t,
                ClientStep::Done => {
                    return Err(Error::Protocol("SPNEGO done before the server".into()))
                }
            }
            continue;
        }
        let resp = resp.check(&[])?;
        let ssr: SessionSetupResponse = resp.decode()?;
        if !ssr.security_buffer.is_empty() {
            spnego.step(&ssr.security_buffer)?;
        }
        let session_key = spnego
            .session_key()
            .ok_or_else(|| Error::Protocol("no session key".into()))?;
        if bind.is_none() {
            session_id = resp.header.session_id;
        }
        return Ok(Auth {
            session_id,
            session_key,
            preauth,
            final_resp: resp,
            session_flags: ssr.session_flags,
        });
    }
}

impl Session {
    /// Authenticate `user` on `conn` (MS-SMB2 3.2.4.2.3), derive the keys
    /// (3.2.5.3.1) and decide signing and encryption.
    pub async fn setup(
        conn: Arc<Connection>,
        user: &str,
        domain: &str,
        password: &str,
    ) -> Result<Arc<Session>> {
        let creds = Credentials {
            user: user.into(),
            domain: domain.into(),
            password: password.into(),
        };
        let a = authenticate(&conn, &creds, None).await?;
        let neg = conn.negotiated().clone();
        let keys = derive_session_keys(
            neg.dialect,
            &a.session_key,
            Some(a.preauth.value()).filter(|_| neg.dialect == dialect::SMB311),
            neg.cipher,
        )?;
        let anonymous = a.session_flags & (session_flags::IS_GUEST | session_flags::IS_NULL) != 0;
        // MS-SMB2 3.2.5.3.1: a 3.1.1 session that is neither guest nor
        // anonymous always signs (Samba enforces this).
        let sign = !anonymous
            && (conn.cfg.signing || neg.signing_required() || neg.dialect == dialect::SMB311);
        let algo = neg.signing_algorithm;
        // MS-SMB2 3.3.4.1.1: a 3.1.1 server signs the final SESSION_SETUP
        // response; check it whenever it is signed.
        if !anonymous
            && (a.final_resp.header.is_signed() || (sign && neg.dialect == dialect::SMB311))
        {
            check_signature(Some((algo, keys.signing_key)), None, &a.final_resp)?;
        }
        let cipher = neg.cipher.filter(|_| neg.is_smb3() && !anonymous);
        let (encryptor, decryptor) = match cipher {
            Some(c) if !keys.server_in_key.is_empty() => (
                Some(Arc::new(Encryptor {
                    cipher: c,
                    key: keys.server_in_key.clone(),
                    nonces: NonceGenerator::new_random(c),
                })),
                Some(Arc::new(Decryptor {
                    cipher: c,
                    key: keys.server_out_key.clone(),
                })),
            ),
            _ => (None, None),
        };
        let wants_enc = a.session_flags & session_flags::ENCRYPT_DATA != 0 || conn.cfg.encrypt;
        if wants_enc && encryptor.is_none() {
            return Err(Error::Protocol(
                "encryption required but no cipher was negotiated".into(),
            ));
        }
        if let Some(d) = &decryptor {
            conn.t.add_decryptor(a.session_id, d.clone());
        }
        let encrypt_all = wants_enc;
        let sec = Security {
            session_id: a.session_id,
            sign: (sign && !encrypt_all).then_some((algo, keys.signing_key)),
            encrypt: if encrypt_all { encryptor.clone() } else { None },
        };
        Ok(Arc::new(Session {
            id: a.session_id,
            dialect: neg.dialect,
            algo,
            cipher,
            signing_key: keys.signing_key,
            sign,
            session_flags: a.session_flags,
            encryptor,
            encrypt_all,
            decryptor,
            creds,
            channels: ChannelSet::new(Channel { conn, sec }),
        }))
    }

    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn is_signing(&self) -> bool {
        self.sign
    }
    pub fn is_encrypting(&self) -> bool {
        self.encrypt_all
    }
    pub fn session_flags(&self) -> u16 {
        self.session_flags
    }
    pub fn cipher(&self) -> Option<Cipher> {
        self.cipher
    }
    pub fn signing_algorithm(&self) -> SigningAlgorithm {
        self.algo
    }
    pub fn dialect(&self) -> u16 {
        self.dialect
    }
    pub fn channels(&self) -> &ChannelSet {
        &self.channels
    }
    pub fn set_policy(&self, p: Policy) {
        self.channels.set_policy(p)
    }
    /// The connection the session was set up on (or the first live one).
    pub fn primary(&self) -> Result<Arc<Connection>> {
        self.channels
            .list()
            .first()
            .map(|c| c.conn.clone())
            .ok_or(Error::NoChannel)
    }

    /// Open a new connection to `addr` and bind it to this session as a
    /// new channel (MS-SMB2 3.2.4.2.3 with SMB2_SESSION_FLAG_BINDING,
    /// 3.2.5.3.3). The new connection uses the same ClientGuid, and must
    /// negotiate the same dialect, cipher and signing algorithm.
    pub async fn bind_channel(&self, addr: SocketAddr) -> Result<Arc<Connection>> {
        if self.dialect < dialect::SMB300 {
            return Err(Error::Invalid("binding needs SMB 3.x".into()));
        }
        let first = self.primary()?;
        let conn = Connection::connect_with(addr, first.cfg.clone()).await?;
        let n = conn.negotiated();
        if n.dialect != self.dialect || n.cipher != self.cipher || n.signing_algorithm != self.algo
        {
            return Err(Error::Protocol(
                "new channel negotiated different parameters".into(),
            ));
        }
        if !n.multichannel() {
            return Err(Error::Protocol("server does not offer multichannel".into()));
        }
        // MS-SMB2 3.2.4.1.1: SESSION_SETUP requests use Session.SigningKey.
        let bind = Security {
            session_id: self.id,
            sign: Some((self.algo, self.signing_key)),
            encrypt: None,
        };
        let a = authenticate(&conn, &self.creds, Some(&bind)).await?;
        if a.session_flags & session_flags::IS_GUEST != 0 {
            return Err(Error::Protocol("binding returned a guest session".into()));
        }
        // MS-SMB2 3.2.5.3.3: Channel.SigningKey from the binding's session
        // key and, for 3.1.1, the channel's preauth hash.
        let channel_key = derive_channel_signing_key(
            self.dialect,
            &a.session_key,
            Some(a.preauth.value()).filter(|_| self.dialect == dialect::SMB311),
        )?;
        // The final binding response is signed with Channel.SigningKey.
        check_signature(Some((self.algo, channel_key)), None, &a.final_resp)?;
        if let Some(d) = &self.decryptor {
            conn.t.add_decryptor(self.id, d.clone());
        }
        let sec = Security {
            session_id: self.id,
            sign: (self.sign && !self.encrypt_all).then_some((self.algo, channel_key)),
            encrypt: if self.encrypt_all {
                self.encryptor.clone()
            } else {
                None
            },
        };
        self.channels.add(Channel {
            conn: conn.clone(),
            sec,
        });
        Ok(conn)
    }

    /// Send a request on a channel picked by the policy. `mk(replay)` builds
    /// it (again, if it is retried); `retry` allows resending it on another
    /// channel when its channel dies; `encrypt` forces encryption (a tree
    /// with SMB2_SHAREFLAG_ENCRYPT_DATA).
    pub(crate) async fn call<'a, F>(&self, mk: F, retry: bool, encrypt: bool) -> Result<Response>
    where
        F: Fn(bool) -> Request<'a>,
    {
        let mut attempt = 0usize;
        loop {
            let ch = self.channels.pick()?;
            let forced;
            let sec = if encrypt && ch.sec.encrypt.is_none() {
                let e = self
                    .encryptor
                    .clone()
                    .ok_or_else(|| Error::Protocol("share requires encryption".into()))?;
                forced = Security {
                    session_id: self.id,
                    sign: None,
                    encrypt: Some(e),
                };
                &forced
            } else {
                &ch.sec
            };
            let req = mk(attempt > 0);
            match ch.conn.send_secured(req, sec).await {
                Err(e) if retry && e.is_channel_failure() && attempt < 8 => {
                    tracing::debug!("retrying on another channel after: {e}");
                    if !matches!(e, Error::Timeout) {
                        ch.conn.kill();
                    }
                    attempt += 1;
                }
                r => return r,
            }
        }
    }

    /// ECHO inside the session (signed/encrypted like any request).
    pub async fn echo(&self) -> Result<()> {
        self.call(
            |_| Request::new(Command::Echo, &braid_smb_proto::messages::EchoRequest),
            true,
            false,
        )
        .await?
        .check(&[])
        .map(|_| ())
    }

    /// LOGOFF (MS-SMB2 2.2.7).
    pub async fn logoff(&self) -> Result<()> {
        self.call(
            |_| Request::new(Command::Logoff, &LogoffRequest),
            false,
            false,
        )
        .await?
        .check(&[])
        .map(|_| ())
    }
}
