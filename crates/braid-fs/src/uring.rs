//! Direct writes submitted through io_uring, completed on the async runtime.
//!
//! A direct write through `pwrite` needs a blocking thread that sleeps
//! while the device works: a hand-off to the pool, a sleep, a wake-up and a
//! hand-back per WRITE, which on a 1 MiB signed stream cost more CPU than
//! the page-cache copy the direct write saved. io_uring queues the write
//! from the task that handles the request and posts its completion to a
//! ring the runtime's reactor polls, so no thread waits for the device.
//! No crate offers this on top of tokio's own runtime (tokio-uring runs its
//! own single-threaded runtime), hence this small reaper.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use io_uring::{opcode, types, IoUring};
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

/// Submission queue entries; completions beyond the ring wait in the
/// kernel's overflow list (IORING_FEAT_NODROP), so this bounds nothing.
const RING_ENTRIES: u32 = 256;

/// Bytes a queued write reads from until it completes.
pub type WriteBuf = Box<dyn AsRef<[u8]> + Send + Sync>;

/// One write in flight: its buffer stays alive until the kernel is done
/// with it, even if the request that queued it is dropped.
struct InFlight {
    done: oneshot::Sender<i32>,
    _data: WriteBuf,
}

pub(crate) struct Ring {
    ring: Mutex<IoUring>,
    /// False once the runtime that polls completions has shut down.
    polled: AtomicBool,
}

/// The file service's ring, created on first use inside a tokio runtime;
/// `None` where io_uring is unavailable (old kernel, seccomp, disabled).
#[derive(Default)]
pub(crate) struct RingSlot(OnceLock<Option<Arc<Ring>>>);

impl RingSlot {
    pub(crate) fn get(&self) -> Option<&Arc<Ring>> {
        let ring = self.0.get_or_init(Ring::start).as_ref()?;
        ring.polled.load(Ordering::Acquire).then_some(ring)
    }
}

struct RingFd(RawFd);

impl AsRawFd for RingFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Marks the ring unusable when the reaper task is dropped with its runtime.
struct PolledGuard(Arc<Ring>);

impl Drop for PolledGuard {
    fn drop(&mut self) {
        self.0.polled.store(false, Ordering::Release);
    }
}

impl Ring {
    fn start() -> Option<Arc<Ring>> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let ring = match IoUring::new(RING_ENTRIES) {
            Ok(r) => r,
            Err(e) => {
                tracing::info!("io_uring unavailable ({e}); direct writes use blocking threads");
                return None;
            }
        };
        let fd = RingFd(ring.as_raw_fd());
        let ring = Arc::new(Ring {
            ring: Mutex::new(ring),
            polled: AtomicBool::new(true),
        });
        // AsyncFd registers with the reactor of the current runtime.
        let _enter = runtime.enter();
        // SAFETY: the ring's descriptor stays open as long as the Ring,
        // which the reaper task below (the AsyncFd's only owner) holds.
        let afd =
            unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.ok()?;
        let guard = PolledGuard(ring.clone());
        runtime.spawn(async move {
            let guard = guard;
            loop {
                let Ok(mut ready) = afd.readable().await else {
                    break;
                };
                guard.0.reap();
                ready.clear_ready();
                // A completion posted between the reap and clear_ready
                // raised no new edge: collect it now.
                guard.0.reap();
            }
        });
        Some(ring)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IoUring> {
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn reap(&self) {
        let done: Vec<(u64, i32)> = {
            let mut ring = self.lock();
            let done = ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            // Entries a failed submit left queued (EBUSY while completions
            // waited to be reaped) go now that there is room.
            if !ring.submission().is_empty() {
                let _ = ring.submit();
            }
            done
        };
        for (key, result) in done {
            // SAFETY: every user_data is a Box<InFlight> leaked by `write`
            // and completed exactly once.
            let op = unsafe { Box::from_raw(key as *mut InFlight) };
            let _ = op.done.send(result);
        }
    }

    /// Queue `data` for writing at `offset` of `fd`; resolves to the bytes
    /// written.
    pub(crate) async fn write(&self, fd: RawFd, offset: u64, data: WriteBuf) -> io::Result<usize> {
        let bytes = (*data).as_ref();
        let len =
            u32::try_from(bytes.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let ptr = bytes.as_ptr();
        let (done, result) = oneshot::channel();
        let key = Box::into_raw(Box::new(InFlight { done, _data: data })) as u64;
        let entry = opcode::Write::new(types::Fd(fd), ptr, len)
            .offset(offset)
            .build()
            .user_data(key);
        {
            let mut ring = self.lock();
            // SAFETY: the buffer lives in the InFlight box until the
            // completion is reaped.
            let mut pushed = unsafe { ring.submission().push(&entry).is_ok() };
            if !pushed {
                // Queue full: hand the queued entries to the kernel first.
                let _ = ring.submit();
                pushed = unsafe { ring.submission().push(&entry).is_ok() };
            }
            if !pushed {
                drop(ring);
                // SAFETY: never queued, so never completed: reclaim it.
                drop(unsafe { Box::from_raw(key as *mut InFlight) });
                return Err(io::Error::from_raw_os_error(libc::EBUSY));
            }
            // An error (EBUSY: completions waiting to be reaped) leaves the
            // entry queued; the reaper submits it after reaping.
            if let Err(e) = ring.submit() {
                tracing::debug!("io_uring submit: {e}");
            }
        }
        match result.await {
            Ok(n) if n >= 0 => Ok(n as usize),
            Ok(e) => Err(io::Error::from_raw_os_error(-e)),
            Err(_) => Err(io::Error::from_raw_os_error(libc::ECANCELED)),
        }
    }
}
