//! Stateids (RFC 8881 8.2): open, lock and delegation state of a client.

/// The state one client holds.
#[derive(Default)]
pub struct ClientState {
    opens: usize,
}

impl ClientState {
    pub fn is_empty(&self) -> bool {
        self.opens == 0
    }
}
