//! Connection shards: one single-threaded runtime per core, each
//! connection served wholly by one of them.
//!
//! On tokio's work-stealing runtime a connection's reader, its requests
//! and its writer ran on whichever worker was free, so a READ read and
//! signed on one core was often sent from another, and the data crossed
//! cores twice (docs/BENCHMARKS.md, run 17: the server's send copy cost
//! 1.7x and the client's receive copy 2.7x what they cost against Samba,
//! whose process per client keeps a client on one core). A shard keeps a
//! connection's work, its timers and its socket's readiness on one thread;
//! a client gets more cores with more connections (multichannel), as with
//! Samba, Windows and NFS `nconnect`. Blocking file work goes to each
//! shard's own blocking pool.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::{Builder, Runtime};

pub struct ConnShards {
    runtimes: Vec<Runtime>,
    next: AtomicUsize,
}

impl ConnShards {
    /// `count` shards (at least one), each a runtime with one worker
    /// thread. Not tokio's current-thread runtime: its run queue is first
    /// in, first out, so a READ's response waited behind every other
    /// request in flight before its writer ran, and was sent from a cold
    /// cache (1 MiB random reads cost 0.48 CPU-s/GiB against 0.38). The
    /// one-worker runtime runs a task just woken by the running one next.
    pub fn start(count: usize) -> std::io::Result<ConnShards> {
        let mut runtimes = Vec::new();
        for i in 0..count.max(1) {
            runtimes.push(
                Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .thread_name(format!("braid-conn-{i}"))
                    .build()?,
            );
        }
        Ok(ConnShards {
            runtimes,
            next: AtomicUsize::new(0),
        })
    }

    /// One shard per core the process may run on.
    pub fn per_core() -> std::io::Result<ConnShards> {
        ConnShards::start(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    pub fn len(&self) -> usize {
        self.runtimes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.runtimes.is_empty()
    }

    /// Run `task` on the next shard, in turn.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.runtimes.len();
        self.runtimes[i].spawn(task);
    }
}

impl Drop for ConnShards {
    /// Ends every connection the shards serve. Dropping a runtime waits
    /// for its blocking threads, which an async context may not do.
    fn drop(&mut self) {
        for runtime in self.runtimes.drain(..) {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn tasks_go_to_the_shards_in_turn_and_each_runs_on_one_thread() {
        let shards = ConnShards::start(2).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for _ in 0..4 {
            let seen = seen.clone();
            let tx = tx.clone();
            shards.spawn(async move {
                let before = std::thread::current().id();
                tokio::task::yield_now().await;
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                let after = std::thread::current().id();
                seen.lock().unwrap().push((before, after));
                let _ = tx.send(());
            });
        }
        for _ in 0..4 {
            rx.recv().await.unwrap();
        }
        let seen = seen.lock().unwrap();
        assert!(seen.iter().all(|(b, a)| b == a), "a task moved threads");
        let threads: HashSet<_> = seen.iter().map(|(b, _)| *b).collect();
        assert_eq!(threads.len(), 2);
        assert!(!threads.contains(&std::thread::current().id()));
    }
}
