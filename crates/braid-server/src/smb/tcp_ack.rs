//! Whether the peer's TCP has acknowledged what was written to a socket.
//!
//! A break sent on one channel of a multichannel session must reach the
//! client; when that channel has silently stopped working (no RST, just no
//! acknowledgments), the break is sent again on another channel of the
//! session (MS-SMB2 3.3.4.6 as Samba reads it, and as smbtorture's
//! smb2.multichannel.oplocks.test3_specification checks: every channel in
//! turn). Samba detects the silent case the same way: the
//! bytes still in the kernel's send queue (SIOCOUTQ), checked every
//! retransmission timeout, with a deadline of six of them. Unlike Samba,
//! a peer with data still unsent (SIOCOUTQNSD) is only given up when it
//! has sent no acknowledgment at all for as long: a live client that is
//! slow to read closes its receive window, and still answers the kernel's
//! window probes. A dead peer may also leave the frame unsent: when an
//! earlier response was never acknowledged, the congestion window keeps
//! everything behind it in the queue.

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// The retransmission timeouts a tracked frame may wait for its
/// acknowledgment (Samba waits as long: five retransmissions).
const RTO_MULTIPLE: u32 = 6;
const MIN_RTO: Duration = Duration::from_millis(200);
const MAX_RTO: Duration = Duration::from_secs(1);

/// linux/sockios.h: bytes in the send queue not sent yet.
const SIOCOUTQNSD: libc::Ioctl = 0x894B;

/// A send-queue size (Linux): SIOCOUTQ (= TIOCOUTQ) gives the bytes
/// written but not yet acknowledged, sent or not; SIOCOUTQNSD those not
/// sent yet.
fn send_queue(sock: &impl AsRawFd, request: libc::Ioctl) -> std::io::Result<u64> {
    let mut value: libc::c_int = 0;
    // SAFETY: both requests write one int through the pointer.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), request, &mut value) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(value.max(0) as u64)
}

fn tcp_info(sock: &impl AsRawFd) -> Option<libc::tcp_info> {
    // SAFETY: tcp_info is plain integers; all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: TCP_INFO fills at most `len` bytes of `info`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(info)
}

/// The socket's current retransmission timeout, kept within Samba's bounds
/// (at least 0.2 s, at most 1 s).
fn retransmission_timeout(sock: &impl AsRawFd) -> Duration {
    tcp_info(sock)
        .map_or(MAX_RTO, |info| Duration::from_micros(info.tcpi_rto as u64))
        .clamp(MIN_RTO, MAX_RTO)
}

/// How long ago the peer's last acknowledgment arrived (any ACK the
/// kernel accepted, window-probe answers included).
fn since_last_ack(sock: &impl AsRawFd) -> Duration {
    tcp_info(sock).map_or(Duration::MAX, |info| {
        Duration::from_millis(info.tcpi_last_ack_recv as u64)
    })
}

struct Tracked {
    /// Bytes written to the socket up to the end of the frame.
    end: u64,
    deadline: Instant,
    /// How long it may wait: the peer is silent if no ACK came for as long.
    patience: Duration,
    done: oneshot::Sender<bool>,
}

/// The frames of one connection waiting for the peer's acknowledgment.
#[derive(Default)]
pub struct AckTracker {
    written: u64,
    waiting: VecDeque<Tracked>,
    check_every: Option<Duration>,
}

/// What a check found.
#[derive(Debug, PartialEq, Eq)]
pub enum AckCheck {
    /// Nothing waits, or what waits still has time.
    Fine,
    /// A frame was not acknowledged in time: the channel is gone.
    TimedOut,
}

impl AckTracker {
    /// `n` more bytes went to the socket; `done` (if any) learns whether
    /// the peer acknowledged all of them in time.
    pub fn wrote(&mut self, sock: &impl AsRawFd, n: usize, done: Option<oneshot::Sender<bool>>) {
        self.written += n as u64;
        let Some(done) = done else { return };
        let rto = retransmission_timeout(sock);
        self.check_every = Some(rto);
        let patience = rto * RTO_MULTIPLE;
        self.waiting.push_back(Tracked {
            end: self.written,
            deadline: Instant::now() + patience,
            patience,
            done,
        });
    }

    /// When the next check is due; None when nothing waits.
    pub fn next_check(&self) -> Option<Duration> {
        if self.waiting.is_empty() {
            None
        } else {
            self.check_every
        }
    }

    /// Settle what the peer has acknowledged, and see whether anything
    /// waited too long.
    pub fn check(&mut self, sock: &impl AsRawFd) -> AckCheck {
        let Ok(outstanding) = send_queue(sock, libc::TIOCOUTQ) else {
            return AckCheck::TimedOut;
        };
        let acked = self.written.saturating_sub(outstanding);
        while self.waiting.front().is_some_and(|t| t.end <= acked) {
            let t = self.waiting.pop_front().expect("front exists");
            let _ = t.done.send(true);
        }
        let now = Instant::now();
        let Some(overdue) = self.waiting.iter().find(|t| t.deadline <= now) else {
            return AckCheck::Fine;
        };
        let all_sent = send_queue(sock, SIOCOUTQNSD).map_or(true, |unsent| unsent == 0);
        if all_sent || since_last_ack(sock) >= overdue.patience {
            return AckCheck::TimedOut;
        }
        AckCheck::Fine
    }

    /// The connection is going away: nothing more will be acknowledged.
    pub fn fail_all(&mut self) {
        for t in self.waiting.drain(..) {
            let _ = t.done.send(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_frame_read_by_the_peer_is_acknowledged() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let mut tracker = AckTracker::default();
        let (tx, mut rx) = oneshot::channel();
        server.write_all(b"break").unwrap();
        tracker.wrote(&server, 5, Some(tx));
        assert!(tracker.next_check().unwrap() >= MIN_RTO);
        let mut buf = [0u8; 5];
        client.read_exact(&mut buf).unwrap();
        // Loopback acknowledges at once; allow the stack a moment.
        for _ in 0..100 {
            assert_eq!(tracker.check(&server), AckCheck::Fine);
            if tracker.next_check().is_none() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(rx.try_recv(), Ok(true));
    }

    #[test]
    fn a_slow_reader_is_not_taken_for_a_dead_peer() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        // The client does not read yet: its receive window closes and the
        // rest of what the server writes waits unsent in the send queue.
        server.set_nonblocking(true).unwrap();
        let chunk = vec![7u8; 64 * 1024];
        let mut total = 0;
        loop {
            match server.write(&chunk) {
                Ok(n) => total += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        let mut tracker = AckTracker::default();
        let (tx, mut rx) = oneshot::channel();
        tracker.wrote(&server, total, Some(tx));
        tracker.waiting[0].deadline = Instant::now() - Duration::from_millis(1);
        assert_eq!(
            tracker.check(&server),
            AckCheck::Fine,
            "past its deadline, but the peer lives"
        );
        assert!(rx.try_recv().is_err(), "not acknowledged yet");
        // Once the client reads it all, it is acknowledged.
        let mut sink = vec![0u8; total];
        client.read_exact(&mut sink).unwrap();
        for _ in 0..200 {
            tracker.check(&server);
            if tracker.next_check().is_none() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(rx.try_recv(), Ok(true));
        tracker.fail_all();
    }

    /// Drops what one local TCP port sends, for as long as it lives.
    struct SilencedPort(u16);

    impl SilencedPort {
        fn rule(port: u16, op: &str) -> bool {
            std::process::Command::new("iptables")
                .args([op, "OUTPUT", "-o", "lo", "-p", "tcp", "--sport"])
                .arg(port.to_string())
                .args(["-j", "DROP"])
                .status()
                .is_ok_and(|s| s.success())
        }

        fn new(port: u16) -> Option<Self> {
            Self::rule(port, "-I").then_some(Self(port))
        }
    }

    impl Drop for SilencedPort {
        fn drop(&mut self) {
            Self::rule(self.0, "-D");
        }
    }

    #[test]
    fn a_peer_that_stopped_acknowledging_is_dead_even_with_data_unsent() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        server.set_nodelay(true).unwrap();
        // scripts/test.sh installs iptables and runs as root; elsewhere the
        // silent peer cannot be made.
        let Some(_silenced) = SilencedPort::new(client.local_addr().unwrap().port()) else {
            eprintln!("skipped: needs root and iptables");
            return;
        };
        let mut tracker = AckTracker::default();
        // A response the client never acknowledges: the kernel retransmits
        // it, and the congestion window then holds back what follows.
        server.write_all(&[1u8; 1000]).unwrap();
        tracker.wrote(&server, 1000, None);
        std::thread::sleep(Duration::from_millis(1500));
        let (tx, mut rx) = oneshot::channel();
        server.write_all(b"break").unwrap();
        tracker.wrote(&server, 5, Some(tx));
        let started = Instant::now();
        let verdict = loop {
            let verdict = tracker.check(&server);
            if verdict == AckCheck::TimedOut || started.elapsed() > Duration::from_secs(15) {
                break verdict;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(
            verdict,
            AckCheck::TimedOut,
            "the silent peer is still taken for alive"
        );
        assert!(rx.try_recv().is_err(), "nothing was acknowledged");
        tracker.fail_all();
        assert_eq!(rx.try_recv(), Ok(false));
    }
}
