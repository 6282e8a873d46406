//! Fair shares of one share's budget among its clients: deficit round
//! robin (Shreedhar and Varghese, 1995) over per-client queues. Each
//! client in turn may spend up to a quantum of operations more than it
//! has; a client whose next request is held by a per-file limit is passed
//! over (the others go on), and when the share itself is out of budget the
//! turn stays with the client whose request could not go, so that no
//! client is passed over because of where its requests fell in time.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::limits::Cost;
use crate::throttle::{Reason, Throttle, Verdict};

/// Who a request comes from (a session, a client address: the caller's
/// choice; requests of one client are served in order).
pub type ClientId = u64;
/// What the caller gets back when its request goes.
pub type TicketId = u64;

/// Operations a client may spend per turn: one 1 MiB request's worth at
/// the default 64 KiB unit, or 16 small ones.
pub const QUANTUM: u64 = 16;

#[derive(Debug)]
struct Queued<T> {
    cost: Cost,
    item: T,
}

#[derive(Debug)]
struct ClientQueue<T> {
    queue: VecDeque<Queued<T>>,
    deficit: u64,
}

/// The result of one [`FairQueue::poll`].
#[derive(Debug)]
pub struct Poll<T> {
    /// Requests that may go now, paid for.
    pub admitted: Vec<T>,
    /// When to poll again (None: nothing queued).
    pub wake_at: Option<Duration>,
    /// What holds back the requests still queued: the share's limit that
    /// stopped this poll, and whether some client waits on a file.
    pub share_blocked: Option<Reason>,
    pub file_blocked: bool,
}

#[derive(Debug)]
pub struct FairQueue<T> {
    clients: HashMap<ClientId, ClientQueue<T>>,
    /// Clients with queued requests, in turn order (front: whose turn).
    turn: VecDeque<ClientId>,
    len: usize,
}

impl<T> Default for FairQueue<T> {
    fn default() -> Self {
        FairQueue {
            clients: HashMap::new(),
            turn: VecDeque::new(),
            len: 0,
        }
    }
}

impl<T> FairQueue<T> {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Queue a request behind the client's earlier ones.
    pub fn push(&mut self, client: ClientId, cost: Cost, item: T) {
        let q = self.clients.entry(client).or_insert_with(|| ClientQueue {
            queue: VecDeque::new(),
            deficit: 0,
        });
        if q.queue.is_empty() {
            self.turn.push_back(client);
        }
        q.queue.push_back(Queued { cost, item });
        self.len += 1;
    }

    /// Drop queued requests `gone` says are abandoned (their caller went
    /// away); returns how many.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) -> usize {
        let before = self.len;
        for q in self.clients.values_mut() {
            q.queue.retain(|r| keep(&r.item));
        }
        self.len = self.clients.values().map(|q| q.queue.len()).sum();
        let clients = &self.clients;
        self.turn
            .retain(|c| clients.get(c).is_some_and(|q| !q.queue.is_empty()));
        self.clients.retain(|_, q| !q.queue.is_empty());
        before - self.len
    }

    /// Admit what the throttle allows at `now`, in fair order.
    pub fn poll(&mut self, throttle: &mut Throttle, now: Duration) -> Poll<T> {
        let mut out = Poll {
            admitted: Vec::new(),
            wake_at: None,
            share_blocked: None,
            file_blocked: false,
        };
        let earliest = |t: Option<Duration>, out: &mut Poll<T>| {
            // A limit that never refills cannot be waited for: poll again
            // in a second (limits may change meanwhile).
            let t = t.unwrap_or(now + Duration::from_secs(1));
            out.wake_at = Some(out.wake_at.map_or(t, |w: Duration| w.min(t)));
        };
        // Clients passed over in a row (file-blocked): a full round of
        // them ends the poll.
        let mut passed = 0;
        while let Some(&client) = self.turn.front() {
            if passed >= self.turn.len() {
                break;
            }
            let q = self
                .clients
                .get_mut(&client)
                .expect("turn lists queued clients");
            let head = q.queue.front().expect("turn lists non-empty queues");
            if q.deficit < head.cost.ops {
                q.deficit += QUANTUM;
                if q.deficit < head.cost.ops {
                    // Larger than a quantum: it gathers quanta over turns.
                    self.turn.rotate_left(1);
                    passed = 0;
                    continue;
                }
            }
            match throttle.admit(&head.cost, now) {
                Verdict::Go => {
                    let r = q.queue.pop_front().expect("head exists");
                    q.deficit -= r.cost.ops.min(q.deficit);
                    self.len -= 1;
                    out.admitted.push(r.item);
                    passed = 0;
                    if q.queue.is_empty() {
                        self.clients.remove(&client);
                        self.turn.pop_front();
                    } else if q.deficit == 0 {
                        self.turn.rotate_left(1);
                    }
                }
                Verdict::Wait {
                    until,
                    reason: Reason::File,
                } => {
                    out.file_blocked = true;
                    earliest(until, &mut out);
                    self.turn.rotate_left(1);
                    passed += 1;
                }
                Verdict::Wait { until, reason } => {
                    // The share is out of budget: the turn stays here.
                    out.share_blocked = Some(reason);
                    earliest(until, &mut out);
                    break;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Limits;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn io(ops: u64) -> Cost {
        Cost {
            ops,
            ..Cost::default()
        }
    }

    /// Clients that each keep `depth` requests queued, polled whenever the
    /// queue asks, for `until`: operations served per client.
    fn run(
        limits: Limits,
        clients: &[(ClientId, u64, usize)],
        until: Duration,
    ) -> HashMap<ClientId, u64> {
        let mut t = Throttle::new(limits, ms(0));
        let mut q = FairQueue::default();
        let mut queued: HashMap<ClientId, usize> = HashMap::new();
        let mut served: HashMap<ClientId, u64> = HashMap::new();
        let mut now = ms(0);
        while now < until {
            for &(c, ops, depth) in clients {
                let n = queued.entry(c).or_default();
                while *n < depth {
                    q.push(c, io(ops), (c, ops));
                    *n += 1;
                }
            }
            let p = q.poll(&mut t, now);
            for (c, ops) in p.admitted {
                *queued.get_mut(&c).unwrap() -= 1;
                *served.entry(c).or_default() += ops;
            }
            now = p.wake_at.unwrap_or(now + ms(1)).max(now);
        }
        served
    }

    #[test]
    fn a_greedy_client_does_not_starve_a_modest_one() {
        let limits = Limits {
            iops: Some(1000),
            ..Limits::default()
        };
        // Client 1 keeps 64 requests queued, client 2 keeps 8: both
        // always have work, so they get the same share.
        let s = run(limits, &[(1, 1, 64), (2, 1, 8)], ms(10_000));
        let (a, b) = (s[&1] as f64, s[&2] as f64);
        assert!((a - b).abs() / (a + b) < 0.05, "{a} {b}");
        assert!((a + b - 10_100.0).abs() < 50.0, "{}", a + b);
        // A client with one request at a time is served once per round:
        // never starved, whatever the greedy one queues.
        let s = run(limits, &[(1, 1, 64), (2, 1, 1)], ms(10_000));
        let (a, b) = (s[&1] as f64, s[&2] as f64);
        assert!(b >= 0.9 * (a + b) / (QUANTUM as f64 + 1.0), "{a} {b}");
    }

    #[test]
    fn clients_with_the_same_load_get_the_same_share() {
        let limits = Limits {
            iops: Some(500),
            ..Limits::default()
        };
        let s = run(limits, &[(1, 1, 64), (2, 1, 64), (3, 1, 64)], ms(10_000));
        let v: Vec<f64> = [1, 2, 3].iter().map(|c| s[c] as f64).collect();
        let mean = v.iter().sum::<f64>() / 3.0;
        for x in &v {
            assert!((x - mean).abs() / mean < 0.02, "{v:?}");
        }
    }

    #[test]
    fn large_requests_are_weighed_by_their_cost() {
        let limits = Limits {
            iops: Some(1600),
            ..Limits::default()
        };
        // 16-unit requests against 1-unit ones: equal operations each.
        let s = run(limits, &[(1, 16, 8), (2, 1, 64)], ms(10_000));
        let (a, b) = (s[&1] as f64, s[&2] as f64);
        assert!((a - b).abs() / (a + b) < 0.05, "{a} {b}");
    }

    #[test]
    fn a_file_limit_holds_one_client_and_not_the_other() {
        let limits = Limits {
            iops: Some(1000),
            file_iops: Some(50),
            ..Limits::default()
        };
        let mut t = Throttle::new(limits, ms(0));
        let mut q = FairQueue::default();
        let on = |f| Cost {
            file: Some(f),
            ..io(1)
        };
        for i in 0..20 {
            q.push(1, on(1), (1, i));
            q.push(2, on(2), (2, i));
        }
        // Both files have 5 operations at the start.
        let p = q.poll(&mut t, ms(0));
        assert_eq!(p.admitted.len(), 10);
        assert!(p.file_blocked && p.share_blocked.is_none());
        assert_eq!(p.wake_at, Some(ms(20)));
        // Requests of one client stay in order.
        let firsts: Vec<_> = p
            .admitted
            .iter()
            .filter(|x| x.0 == 1)
            .map(|x| x.1)
            .collect();
        assert_eq!(firsts, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn abandoned_requests_are_dropped() {
        let mut q = FairQueue::default();
        q.push(1, io(1), 1);
        q.push(1, io(1), 2);
        q.push(2, io(1), 3);
        assert_eq!(q.retain(|x| *x != 3), 1);
        assert_eq!(q.len(), 2);
        let mut t = Throttle::new(Limits::default(), ms(0));
        assert_eq!(q.poll(&mut t, ms(0)).admitted, vec![1, 2]);
        assert!(q.is_empty());
    }
}
