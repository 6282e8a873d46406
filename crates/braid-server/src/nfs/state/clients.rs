//! Client records (RFC 8881 2.4, 18.35): the client owner, its verifier and
//! principal, confirmed or not, the CREATE_SESSION sequence slot, the lease,
//! and the state the client holds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use braid_nfs_proto::nfs4::*;

use super::stateids::ClientState;
use super::store::{ClientRecord, LocalStore, StateStore};

pub struct Client {
    pub clientid: clientid4,
    pub owner: Vec<u8>,
    pub verifier: verifier4,
    pub principal: Vec<u8>,
    confirmed: AtomicBool,
    /// RFC 8881 18.36.4: CREATE_SESSION's own one-slot reply cache.
    pub create_session: Mutex<CreateSessionSlot>,
    lease: Mutex<Lease>,
    /// Where the client came from (its first EXCHANGE_ID), for the admin
    /// view.
    pub addr: std::net::SocketAddr,
    /// The caller of that EXCHANGE_ID (uid for AUTH_SYS), for the admin
    /// view.
    pub caller: crate::nfs::rpc::Caller,
    pub created: Instant,
    /// SEQ4_STATUS_* bits the state code raises for this client (e.g.
    /// SEQ4_STATUS_RECALLABLE_STATE_REVOKED when a delegation was revoked),
    /// reported on each SEQUENCE until cleared (RFC 8881 18.46.3).
    pub status_flags: AtomicU32,
    pub sessions: Mutex<Vec<sessionid4>>,
    pub state: Mutex<ClientState>,
    /// RECLAIM_COMPLETE was sent (RFC 8881 18.51).
    pub reclaim_complete: AtomicBool,
    /// The client held state in the server's previous run and may reclaim.
    pub may_reclaim: AtomicBool,
    /// The client is in the store (it held state in this run).
    recorded: AtomicBool,
}

/// The lease (RFC 8881 8.3): renewed by every SEQUENCE; once it ran out
/// and the client's state is being released, `expired` is set and the
/// client can renew no more (its sessions answer NFS4ERR_BADSESSION).
struct Lease {
    renewed: Instant,
    expired: bool,
}

pub struct CreateSessionSlot {
    /// The sequence id of the last CREATE_SESSION executed.
    pub seqid: sequenceid4,
    pub reply: Option<CREATE_SESSION4res>,
}

impl Client {
    pub fn is_confirmed(&self) -> bool {
        self.confirmed.load(Ordering::Acquire)
    }

    fn lease(&self) -> std::sync::MutexGuard<'_, Lease> {
        self.lease.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// RFC 8881 8.3: any SEQUENCE (and CREATE_SESSION, BIND_CONN_TO_SESSION)
    /// renews the lease. False when the client already expired: it must
    /// start again with EXCHANGE_ID.
    pub fn renew(&self) -> bool {
        let mut l = self.lease();
        if l.expired {
            return false;
        }
        l.renewed = Instant::now();
        true
    }

    pub fn lease_expired(&self, lease: Duration) -> bool {
        self.lease().renewed.elapsed() > lease
    }

    pub fn since_renewed(&self) -> Duration {
        self.lease().renewed.elapsed()
    }

    /// Whether the client's state is being released (its lease ran out).
    pub fn is_expired(&self) -> bool {
        self.lease().expired
    }

    /// Mark the client expired if its lease has run out, atomically with
    /// respect to `renew`: true once, for the caller that must then
    /// release its state (`reaper::destroy_client`).
    pub fn try_expire(&self, lease: Duration) -> bool {
        let mut l = self.lease();
        if l.expired || l.renewed.elapsed() <= lease {
            return false;
        }
        l.expired = true;
        true
    }

    /// Mark the client expired whatever its lease (DESTROY_CLIENTID, a
    /// replaced record): false when somebody else already did.
    pub fn expire_now(&self) -> bool {
        !std::mem::replace(&mut self.lease().expired, true)
    }

    /// Opens, locks or delegations (sessions alone are not state here:
    /// RFC 8881 18.50.3 asks for sessions separately).
    pub fn has_state(&self) -> bool {
        !self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    pub fn has_sessions(&self) -> bool {
        !self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// RFC 8881 8.4.3.x "courtesy": the lease ran out but the client keeps
    /// its state until another client wants it (or the reaper's limit).
    pub fn is_courtesy(&self, lease: Duration) -> bool {
        !self.is_expired() && self.lease_expired(lease)
    }
}

/// Who sent an EXCHANGE_ID.
pub struct Who {
    pub caller: crate::nfs::rpc::Caller,
    pub addr: std::net::SocketAddr,
}

/// Why EXCHANGE_ID answered as it did (RFC 8881 18.35.5's cases).
pub struct Exchanged {
    pub client: Arc<Client>,
    pub confirmed: bool,
}

#[derive(Default)]
struct ByOwner {
    confirmed: Option<clientid4>,
    unconfirmed: Option<clientid4>,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<clientid4, Arc<Client>>,
    by_owner: HashMap<Vec<u8>, ByOwner>,
}

pub struct ClientTable {
    inner: Mutex<Inner>,
    boot_epoch: u32,
    next: AtomicU32,
    store: LocalStore,
}

impl ClientTable {
    pub fn new(boot_epoch: u32, store: LocalStore) -> ClientTable {
        ClientTable {
            inner: Mutex::new(Inner::default()),
            boot_epoch,
            next: AtomicU32::new(1),
            store,
        }
    }

    /// Client ids carry the boot epoch: one from an earlier run is
    /// recognisably stale.
    fn new_clientid(&self) -> clientid4 {
        ((self.boot_epoch as u64) << 32) | self.next.fetch_add(1, Ordering::Relaxed) as u64
    }

    pub fn get(&self, id: clientid4) -> Option<Arc<Client>> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_id
            .get(&id)
            .cloned()
    }

    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_id
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn all(&self) -> Vec<Arc<Client>> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_id
            .values()
            .cloned()
            .collect()
    }

    fn insert_unconfirmed(
        &self,
        inner: &mut Inner,
        owner: &[u8],
        verifier: verifier4,
        who: &Who,
    ) -> Arc<Client> {
        let entry = inner.by_owner.entry(owner.to_vec()).or_default();
        if let Some(old) = entry.unconfirmed.take() {
            inner.by_id.remove(&old);
        }
        let client = Arc::new(Client {
            clientid: self.new_clientid(),
            owner: owner.to_vec(),
            verifier,
            principal: who.caller.principal(),
            confirmed: AtomicBool::new(false),
            create_session: Mutex::new(CreateSessionSlot {
                seqid: 0,
                reply: None,
            }),
            lease: Mutex::new(Lease {
                renewed: Instant::now(),
                expired: false,
            }),
            addr: who.addr,
            caller: who.caller.clone(),
            created: Instant::now(),
            status_flags: AtomicU32::new(0),
            sessions: Mutex::new(Vec::new()),
            state: Mutex::new(ClientState::default()),
            reclaim_complete: AtomicBool::new(false),
            may_reclaim: AtomicBool::new(false),
            recorded: AtomicBool::new(false),
        });
        let entry = inner.by_owner.entry(owner.to_vec()).or_default();
        entry.unconfirmed = Some(client.clientid);
        inner.by_id.insert(client.clientid, client.clone());
        client
    }

    // RFC 8881 18.35.5: the cases of EXCHANGE_ID, by whether a confirmed or
    // unconfirmed record of this owner exists, whether the verifier and the
    // principal match it, and whether the client asked to update.
    /// Returns the record to answer with, and the client records whose
    /// state must be thrown away (the caller destroys their sessions).
    pub fn exchange_id(
        &self,
        owner: &[u8],
        verifier: verifier4,
        who: &Who,
        update: bool,
        lease: Duration,
    ) -> Result<(Exchanged, Vec<Arc<Client>>), nfsstat4> {
        let principal = who.caller.principal();
        let principal = principal.as_slice();
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let confirmed = inner
            .by_owner
            .get(owner)
            .and_then(|e| e.confirmed)
            .and_then(|id| inner.by_id.get(&id).cloned());
        if update {
            // Case 6 (update) and case 7 (update of nothing).
            let Some(c) = confirmed else {
                return Err(NFS4ERR_NOENT);
            };
            if c.principal != principal {
                return Err(NFS4ERR_PERM);
            }
            if c.verifier != verifier {
                return Err(NFS4ERR_NOT_SAME);
            }
            return Ok((
                Exchanged {
                    client: c,
                    confirmed: true,
                },
                Vec::new(),
            ));
        }
        let mut dropped = Vec::new();
        if let Some(c) = confirmed {
            if c.verifier == verifier && c.principal == principal {
                // Case 2: the same client again.
                return Ok((
                    Exchanged {
                        client: c,
                        confirmed: true,
                    },
                    Vec::new(),
                ));
            }
            if c.principal != principal {
                // Case 3: another principal claims the owner. A client
                // within its lease that holds state (sessions count, as
                // Linux nfsd counts them) keeps it; one whose lease ran
                // out loses it to the newcomer.
                if !c.lease_expired(lease) && (c.has_state() || c.has_sessions()) {
                    return Err(NFS4ERR_CLID_INUSE);
                }
                Self::forget(&mut inner, &c);
                if c.recorded.load(Ordering::Acquire) {
                    self.store.remove(&c.owner);
                }
                dropped.push(c);
            }
            // Case 4 (same principal, new verifier: the client restarted):
            // the confirmed record stays until the new one is confirmed.
        }
        // Cases 1, 4 and 5: a new unconfirmed record, replacing any other
        // unconfirmed one of the owner.
        let client = self.insert_unconfirmed(&mut inner, owner, verifier, who);
        Ok((
            Exchanged {
                client,
                confirmed: false,
            },
            dropped,
        ))
    }

    /// RFC 8881 18.36.4: the first CREATE_SESSION confirms a record; a
    /// confirmed record of the same owner (a restarted client) goes, and is
    /// returned so the caller can destroy its sessions and state.
    pub fn confirm(&self, client: &Arc<Client>) -> Option<Arc<Client>> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if client.is_confirmed() {
            return None;
        }
        let entry = inner.by_owner.entry(client.owner.clone()).or_default();
        let old = entry.confirmed.take();
        if entry.unconfirmed == Some(client.clientid) {
            entry.unconfirmed = None;
        }
        entry.confirmed = Some(client.clientid);
        client.confirmed.store(true, Ordering::Release);
        old.and_then(|id| inner.by_id.remove(&id))
    }

    /// RFC 8881 8.4.2.1: a client that holds state is recorded in stable
    /// storage, so that after a restart it may reclaim it (and only then is
    /// there a grace period). Called after each compound of a session;
    /// costs one atomic load once the client is recorded.
    /// Whether `note_state` would store the client's record now (its
    /// first state): a write the reactor must not wait for.
    pub fn needs_record(&self, client: &Client) -> bool {
        !client.recorded.load(Ordering::Acquire) && client.has_state()
    }

    /// Record `client` in stable storage now (its RECLAIM_COMPLETE).
    pub fn record(&self, client: &Client) {
        if !client.recorded.swap(true, Ordering::AcqRel) {
            self.store.add(&ClientRecord {
                owner: client.owner.clone(),
            });
        }
    }

    pub fn note_state(&self, client: &Client) {
        if client.recorded.load(Ordering::Acquire) || !client.has_state() {
            return;
        }
        if !client.recorded.swap(true, Ordering::AcqRel) {
            self.store.add(&ClientRecord {
                owner: client.owner.clone(),
            });
        }
    }

    /// The stored record of `owner` is stale (it did not reclaim in the
    /// grace period, or finished reclaiming holding nothing): remove it
    /// unless a client of that owner holds state in this run.
    pub fn forget_record(&self, owner: &[u8]) {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let recorded = inner.by_owner.get(owner).is_some_and(|e| {
            [e.confirmed, e.unconfirmed]
                .into_iter()
                .flatten()
                .filter_map(|id| inner.by_id.get(&id))
                .any(|c| c.recorded.load(Ordering::Acquire))
        });
        drop(inner);
        if !recorded {
            self.store.remove(owner);
        }
    }

    fn forget(inner: &mut Inner, client: &Client) {
        inner.by_id.remove(&client.clientid);
        if let Some(e) = inner.by_owner.get_mut(&client.owner) {
            if e.confirmed == Some(client.clientid) {
                e.confirmed = None;
            }
            if e.unconfirmed == Some(client.clientid) {
                e.unconfirmed = None;
            }
            if e.confirmed.is_none() && e.unconfirmed.is_none() {
                inner.by_owner.remove(&client.owner);
            }
        }
    }

    /// DESTROY_CLIENTID, or a lease that ran out: the record goes.
    pub fn remove(&self, client: &Client) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let was_confirmed = inner
            .by_owner
            .get(&client.owner)
            .is_some_and(|e| e.confirmed == Some(client.clientid));
        Self::forget(&mut inner, client);
        drop(inner);
        if was_confirmed && client.recorded.load(Ordering::Acquire) {
            self.store.remove(&client.owner);
        }
    }
}
