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
//! a peer is only given up when everything was sent and none of it
//! acknowledged (SIOCOUTQNSD is 0): a live client that is slow to read
//! closes its receive window, and the data waiting behind that window is
//! not a sign of a dead link.

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

/// The socket's current retransmission timeout, kept within Samba's bounds
/// (at least 0.2 s, at most 1 s).
fn retransmission_timeout(sock: &impl AsRawFd) -> Duration {
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
    let rto = if rc == 0 {
        Duration::from_micros(info.tcpi_rto as u64)
    } else {
        MAX_RTO
    };
    rto.clamp(MIN_RTO, MAX_RTO)
}

struct Tracked {
    /// Bytes written to the socket up to the end of the frame.
    end: u64,
    deadline: Instant,
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
        self.waiting.push_back(Tracked {
            end: self.written,
            deadline: Instant::now() + rto * RTO_MULTIPLE,
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
        if self.waiting.iter().any(|t| t.deadline <= now)
            && send_queue(sock, SIOCOUTQNSD).map_or(true, |unsent| unsent == 0)
        {
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
}
