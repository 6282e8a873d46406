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
    last_renewed: Mutex<Instant>,
    pub sessions: Mutex<Vec<sessionid4>>,
    pub state: Mutex<ClientState>,
    /// RECLAIM_COMPLETE was sent (RFC 8881 18.51).
    pub reclaim_complete: AtomicBool,
    /// The client held state in the server's previous run and may reclaim.
    pub may_reclaim: AtomicBool,
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

    pub fn renew(&self) {
        *self.last_renewed.lock().unwrap() = Instant::now();
    }

    pub fn lease_expired(&self, lease: Duration) -> bool {
        self.last_renewed.lock().unwrap().elapsed() > lease
    }

    pub fn since_renewed(&self) -> Duration {
        self.last_renewed.lock().unwrap().elapsed()
    }

    /// Opens, locks or delegations (sessions alone are not state here:
    /// RFC 8881 18.35.5 case 3 asks whether the client "has state").
    pub fn has_state(&self) -> bool {
        !self.state.lock().unwrap().is_empty()
    }
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
        self.inner.lock().unwrap().by_id.get(&id).cloned()
    }

    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn all(&self) -> Vec<Arc<Client>> {
        self.inner.lock().unwrap().by_id.values().cloned().collect()
    }

    fn insert_unconfirmed(
        &self,
        inner: &mut Inner,
        owner: &[u8],
        verifier: verifier4,
        principal: &[u8],
    ) -> Arc<Client> {
        let entry = inner.by_owner.entry(owner.to_vec()).or_default();
        if let Some(old) = entry.unconfirmed.take() {
            inner.by_id.remove(&old);
        }
        let client = Arc::new(Client {
            clientid: self.new_clientid(),
            owner: owner.to_vec(),
            verifier,
            principal: principal.to_vec(),
            confirmed: AtomicBool::new(false),
            create_session: Mutex::new(CreateSessionSlot {
                seqid: 0,
                reply: None,
            }),
            last_renewed: Mutex::new(Instant::now()),
            sessions: Mutex::new(Vec::new()),
            state: Mutex::new(ClientState::default()),
            reclaim_complete: AtomicBool::new(false),
            may_reclaim: AtomicBool::new(false),
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
        principal: &[u8],
        update: bool,
        lease: Duration,
    ) -> Result<(Exchanged, Vec<Arc<Client>>), nfsstat4> {
        let mut inner = self.inner.lock().unwrap();
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
                // Case 3: another principal claims the owner. A client that
                // holds state within its lease keeps it.
                if c.has_state() && !c.lease_expired(lease) {
                    return Err(NFS4ERR_CLID_INUSE);
                }
                Self::forget(&mut inner, &c);
                self.store.remove(&c.owner);
                dropped.push(c);
            }
            // Case 5 (same principal, new verifier: the client restarted):
            // the confirmed record stays until the new one is confirmed.
        }
        // Cases 1 and 4: a new unconfirmed record, replacing any other.
        let client = self.insert_unconfirmed(&mut inner, owner, verifier, principal);
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
        let mut inner = self.inner.lock().unwrap();
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
        let old = old.and_then(|id| inner.by_id.remove(&id));
        drop(inner);
        self.store.add(&ClientRecord {
            owner: client.owner.clone(),
        });
        old
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
        let mut inner = self.inner.lock().unwrap();
        let was_confirmed = inner
            .by_owner
            .get(&client.owner)
            .is_some_and(|e| e.confirmed == Some(client.clientid));
        Self::forget(&mut inner, client);
        drop(inner);
        if was_confirmed {
            self.store.remove(&client.owner);
        }
    }
}
