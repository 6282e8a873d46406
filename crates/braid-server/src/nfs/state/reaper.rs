//! Lease expiry (RFC 8881 8.3): a client that has not renewed its lease
//! (any SEQUENCE renews it) for a lease period loses its sessions and, once
//! no other client wants what it holds, its state.

use std::sync::Arc;
use std::time::Duration;

use tracing::info;

use super::super::NfsState;

pub async fn run(state: Arc<NfsState>) {
    let period = (state.lease_time / 4).max(Duration::from_secs(1));
    loop {
        tokio::time::sleep(period).await;
        expire(&state);
    }
}

/// Drop every client whose lease ran out (twice over, so a client that
/// was only slow is not punished for a missed renewal by a few seconds).
pub fn expire(state: &NfsState) {
    for client in state.clients.all() {
        if !client.lease_expired(state.lease_time * 2) {
            continue;
        }
        // A confirmed client that holds no state and keeps a connection
        // is harmless, but its lease ended: RFC 8881 8.3 lets it go.
        info!(
            clientid = client.clientid,
            "NFS client's lease expired; its state is released"
        );
        destroy_client(state, &client);
    }
}

/// Release everything a client holds: its sessions, its state, its record.
pub fn destroy_client(state: &NfsState, client: &super::clients::Client) {
    let sessions = std::mem::take(&mut *client.sessions.lock().unwrap());
    for id in sessions {
        state.sessions.remove(&id);
    }
    state.clients.remove(client);
    state.grace.done(&client.owner);
}
