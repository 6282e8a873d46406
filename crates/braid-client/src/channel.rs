//! The channels of a session (MS-SMB2 3.2.1.8, Session.ChannelList) and how
//! requests are spread over them.

use crate::conn::Connection;
use crate::error::{Error, Result};
use crate::transport::Security;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// How [`ChannelSet::pick`] chooses among live channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    #[default]
    RoundRobin,
    /// The channel with the fewest requests awaiting a response.
    LeastOutstanding,
}

/// One channel: a connection bound to the session, with its
/// Channel.SigningKey.
pub struct Channel {
    pub conn: Arc<Connection>,
    pub(crate) sec: Security,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel").field("conn", &self.conn).finish()
    }
}

impl Channel {
    /// The requests in flight on this channel (MessageId, and AsyncId once
    /// an interim response came), for [`Channel::cancel`].
    pub fn in_flight(&self) -> Vec<(u64, Option<u64>)> {
        self.conn.t.in_flight()
    }

    /// SMB2 CANCEL (MS-SMB2 3.2.4.24) of a request in flight on this
    /// channel, by AsyncId when given, else by MessageId; signed or sealed
    /// as the session's requests are. The cancelled request's own final
    /// response tells how it ended.
    pub fn cancel(&self, message_id: u64, async_id: Option<u64>) -> Result<()> {
        self.conn.t.cancel(message_id, async_id, &self.sec)
    }
}

/// Live channels of a session. Dead channels are dropped when seen; the
/// set keeps working as long as one channel lives.
#[derive(Default)]
pub struct ChannelSet {
    chans: RwLock<Vec<Arc<Channel>>>,
    next: AtomicUsize,
    policy: RwLock<Policy>,
}

impl ChannelSet {
    pub fn new(first: Channel) -> Self {
        ChannelSet {
            chans: RwLock::new(vec![Arc::new(first)]),
            next: AtomicUsize::new(0),
            policy: RwLock::new(Policy::default()),
        }
    }

    pub fn set_policy(&self, p: Policy) {
        *self.policy.write().unwrap_or_else(|e| e.into_inner()) = p;
    }

    pub fn add(&self, ch: Channel) {
        self.chans
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::new(ch));
    }

    /// Every channel still believed alive.
    pub fn list(&self) -> Vec<Arc<Channel>> {
        self.chans
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|c| c.conn.is_alive())
            .cloned()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.list().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The channel for the next request.
    pub fn pick(&self) -> Result<Arc<Channel>> {
        let policy = *self.policy.read().unwrap_or_else(|e| e.into_inner());
        let chans = self.chans.read().unwrap_or_else(|e| e.into_inner());
        let live = chans.iter().filter(|c| c.conn.is_alive()).count();
        if live == 0 {
            return Err(Error::NoChannel);
        }
        let any_dead = live != chans.len();
        let pick = match policy {
            Policy::RoundRobin => {
                let n = self.next.fetch_add(1, Ordering::Relaxed) % live;
                chans.iter().filter(|c| c.conn.is_alive()).nth(n).cloned()
            }
            Policy::LeastOutstanding => {
                // Start the scan at a rotating index so ties spread out.
                let start = self.next.fetch_add(1, Ordering::Relaxed);
                let n = chans.len();
                (0..n)
                    .map(|i| &chans[(start + i) % n])
                    .filter(|c| c.conn.is_alive())
                    .min_by_key(|c| c.conn.outstanding())
                    .cloned()
            }
        };
        drop(chans);
        if any_dead {
            self.prune();
        }
        pick.ok_or(Error::NoChannel)
    }

    fn prune(&self) {
        self.chans
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|c| c.conn.is_alive());
    }
}
