//! Lease expiry (RFC 8881 8.3) and courtesy clients.
//!
//! A client that has not renewed its lease (any SEQUENCE renews it) for a
//! lease period:
//! - unconfirmed (no CREATE_SESSION yet): its record goes (RFC 8881
//!   18.35.4: "not confirmed within a lease period SHOULD be removed");
//! - holding no opens, locks or delegations: it goes, sessions and all;
//! - holding state: it becomes a *courtesy* client. RFC 8881 8.3 lets a
//!   server keep an expired client's state as long as nobody else asks for
//!   it: a client cut off for a while (a laptop asleep, a network
//!   partition) comes back, renews with SEQUENCE, and finds its opens and
//!   locks intact. When another client's request conflicts with that state,
//!   the state code calls [`expire_courtesy`] and the courtesy client loses
//!   everything at once; it also goes after [`COURTESY_LIMIT`], or sooner
//!   when the client table fills up.

use std::sync::Arc;
use std::time::Duration;

use tracing::info;

use super::super::NfsState;
use super::clients::Client;

/// How long a courtesy client keeps its state when nobody conflicts with
/// it (Linux nfsd's NFSD_COURTESY_CLIENT_TIMEOUT).
pub const COURTESY_LIMIT: Duration = Duration::from_secs(24 * 3600);

pub async fn run(state: Arc<NfsState>) {
    // Often enough that a record is gone a few seconds after its lease.
    let period = (state.lease_time / 10).clamp(Duration::from_secs(1), Duration::from_secs(5));
    loop {
        tokio::time::sleep(period).await;
        expire(&state);
        // What clients hold was appended without a sync: synced now, so
        // that a crash of the machine loses at most one period of it.
        let held = state.held.clone();
        let _ = tokio::task::spawn_blocking(move || held.flush()).await;
    }
}

/// One pass over every client (and the end of the grace period).
pub fn expire(state: &NfsState) {
    // RFC 8881 8.4.3: a client of the last run that did not reclaim within
    // the grace period may not reclaim any more; its record goes.
    for owner in state.grace.take_unreclaimed() {
        state.clients.forget_record(&owner);
    }
    if !state.grace.active() {
        state.held.forget_previous();
    }
    let lease = state.lease_time;
    let crowded = state.clients.len() * 4 > state.limits.max_clients * 3;
    for client in state.clients.all() {
        if !client.lease_expired(lease) {
            continue;
        }
        let courtesy = client.is_confirmed() && client.has_state();
        if courtesy && !crowded && !client.lease_expired(COURTESY_LIMIT) {
            continue;
        }
        if client.try_expire(lease) {
            super::held::ReclaimCounts::bump(&state.reclaims.clients_expired);
            info!(
                clientid = client.clientid,
                courtesy, "NFS client's lease expired; its state is released"
            );
            release(state, &client);
        }
    }
}

/// For the state code, on finding that another client's open, lock or
/// delegation conflicts with a request: true when that client's lease has
/// run out (a courtesy client, RFC 8881 8.3). It is then expired (it can
/// renew no more; its sessions answer NFS4ERR_BADSESSION) and its sessions
/// and record are gone; the caller, which may hold the state table's lock
/// (this function does not take it), must release the client's state
/// (`StateTable::remove_client`) and retry. False: the client is alive and
/// the conflict stands.
pub fn expire_courtesy(state: &NfsState, client: &Client) -> bool {
    if !client.try_expire(state.lease_time) {
        return false;
    }
    info!(
        clientid = client.clientid,
        "NFS courtesy client loses its state to a conflicting request"
    );
    forget(state, client);
    true
}

/// Release everything a client holds: its sessions, its opens, locks and
/// delegations, its record (DESTROY_CLIENTID, a record replaced by
/// EXCHANGE_ID or CREATE_SESSION). Must not be called with the state
/// table's lock held.
pub fn destroy_client(state: &NfsState, client: &Client) {
    client.expire_now();
    release(state, client);
}

fn release(state: &NfsState, client: &Client) {
    forget(state, client);
    // Dropped outside the table's lock: closing the last fd of a file may
    // be slow.
    let gone = state.stateids.lock().remove_client(client);
    drop(gone);
}

/// The sessions and the record of an expired client.
fn forget(state: &NfsState, client: &Client) {
    let sessions = std::mem::take(&mut *client.sessions.lock().unwrap_or_else(|e| e.into_inner()));
    for id in sessions {
        state.sessions.remove(&id);
    }
    state.clients.remove(client);
    state.grace.done(&client.owner);
}
