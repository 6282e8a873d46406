//! EtcdStore against a real etcd: Debian's `etcd-server` (`/usr/bin/etcd`,
//! installed by scripts/test.sh), started once for this test binary on
//! free loopback ports with a temporary data directory, and killed when
//! the binary exits. Each test keeps to its own key prefix.
//!
//! Without etcd a test fails as root on Linux or with CI set (where
//! scripts/test.sh has installed it) and elsewhere prints SKIP, as braid-fs's
//! `skip_without` does (tests/e2e/allowed-skips.txt).

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use braid_etcd::proto::etcdserverpb::kv_client::KvClient;
use braid_etcd::proto::etcdserverpb::PutRequest;
use braid_etcd::EtcdStore;
use braid_fs::state_store::{StateStore, StoreError};

struct Etcd {
    url: String,
    pid: i32,
    dir: PathBuf,
}

static ETCD: OnceLock<Option<Etcd>> = OnceLock::new();

/// Whether a missing etcd may be skipped (braid-fs tests/common
/// `may_skip`): not as root on Linux, where CI runs and scripts/test.sh
/// installs it, nor with CI set.
fn may_skip() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    !(cfg!(target_os = "linux") && root) && std::env::var_os("CI").is_none()
}

fn etcd_binary() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("etcd"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| Some(PathBuf::from("/usr/bin/etcd")).filter(|p| p.is_file()))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The test binary's etcd, started on first use; None (after a SKIP line)
/// where a missing etcd may be skipped, a panic where it may not.
fn etcd_or_skip() -> Option<&'static Etcd> {
    ETCD.get_or_init(|| {
        let Some(bin) = etcd_binary() else {
            assert!(
                may_skip(),
                "etcd is not installed (Debian etcd-server: apt-get install etcd-server); \
                 as root on Linux or with CI set it must be"
            );
            eprintln!("SKIP: etcd is not installed (Debian etcd-server)");
            return None;
        };
        Some(start_etcd(&bin))
    })
    .as_ref()
}

fn start_etcd(bin: &Path) -> Etcd {
    let dir = std::env::temp_dir().join(format!("braid-etcd-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (client, peer) = (free_port(), free_port());
    let url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let log = std::fs::File::create(dir.join("etcd.log")).unwrap();
    let mut cmd = Command::new(bin);
    cmd.args(["--name", "braid-test", "--data-dir"])
        .arg(dir.join("data"))
        .args([
            "--listen-client-urls",
            &url,
            "--advertise-client-urls",
            &url,
        ])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("braid-test={peer_url}")])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    // SAFETY: prctl is async-signal-safe. etcd dies with this process
    // even when it is killed before its exit handler runs. PDEATHSIG
    // watches the thread that spawns: one of its own that lives as long as
    // etcd, not a test's thread, which ends with its test.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    // The spawning thread waits for etcd (reaping it), so it lives as
    // long as etcd does.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || match cmd.spawn() {
        Ok(mut child) => {
            let _ = tx.send(Ok(child.id() as i32));
            let _ = child.wait();
        }
        Err(e) => {
            let _ = tx.send(Err(e));
        }
    });
    let pid = rx
        .recv()
        .unwrap()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let etcd = Etcd { url, pid, dir };
    // SAFETY: registers a plain extern "C" fn; it runs once at exit.
    unsafe { libc::atexit(stop_etcd) };
    wait_ready(&etcd);
    etcd
}

/// At exit: kill the test binary's etcd and remove its directory.
extern "C" fn stop_etcd() {
    if let Some(Some(e)) = ETCD.get() {
        // SAFETY: a child of this process, by pid; waited for here or
        // by its spawning thread (then waitpid fails with ECHILD: gone).
        unsafe {
            libc::kill(e.pid, libc::SIGKILL);
            libc::waitpid(e.pid, std::ptr::null_mut(), 0);
        }
        let _ = std::fs::remove_dir_all(&e.dir);
    }
}

/// Ready once a load through the store answers (etcd has a leader).
fn wait_ready(e: &Etcd) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let probe = EtcdStore::with_timeout(
        std::slice::from_ref(&e.url),
        "/probe",
        Duration::from_secs(1),
    )
    .unwrap();
    loop {
        match probe.load("ready") {
            Ok(_) => return,
            Err(err) if Instant::now() > deadline => {
                let mut log = String::new();
                let _ = std::fs::File::open(e.dir.join("etcd.log"))
                    .and_then(|mut f| f.read_to_string(&mut log));
                let tail: String = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
                panic!("etcd at {} not ready within 30 s: {err}\n{tail}", e.url);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn store(e: &Etcd, prefix: &str) -> EtcdStore {
    EtcdStore::new(std::slice::from_ref(&e.url), prefix).unwrap()
}

/// Write raw bytes under an etcd key, bypassing the store's sealing.
fn raw_put(e: &Etcd, key: &str, value: &[u8]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (url, key, value) = (e.url.clone(), key.to_string(), value.to_vec());
    rt.block_on(async move {
        let mut kv = KvClient::connect(url).await.unwrap();
        kv.put(PutRequest {
            key: key.into_bytes(),
            value,
            ..Default::default()
        })
        .await
        .unwrap();
    });
}

#[test]
fn records_round_trip_replace_and_delete() {
    let Some(e) = etcd_or_skip() else { return };
    let s = store(e, "/t-round-trip");
    s.put("smb-opens", "a1", b"first").unwrap();
    s.put("smb-opens", "a1", b"second").unwrap();
    s.put("smb-opens", "b2", b"other").unwrap();
    s.put("nfs-clients", "c", b"client").unwrap();
    assert_eq!(s.describe(), format!("etcd {} prefix /t-round-trip", e.url));

    // Another process (a restart, another node) reads what was written.
    let again = store(e, "/t-round-trip");
    let loaded = again.load("smb-opens").unwrap();
    assert!(loaded.corrupt.is_empty(), "{:?}", loaded.corrupt);
    assert_eq!(
        loaded.records,
        vec![
            ("a1".to_string(), b"second".to_vec()),
            ("b2".to_string(), b"other".to_vec())
        ]
    );
    // It may update and delete what it loaded.
    again.put("smb-opens", "b2", b"updated").unwrap();
    again.delete("smb-opens", "a1").unwrap();
    again.delete("smb-opens", "a1").unwrap();
    assert_eq!(
        again.load("smb-opens").unwrap().records,
        vec![("b2".to_string(), b"updated".to_vec())]
    );
    assert_eq!(again.load("nfs-clients").unwrap().records.len(), 1);
    // A prefix is a namespace: another one sees nothing.
    assert!(store(e, "/t-round-trip-2")
        .load("smb-opens")
        .unwrap()
        .records
        .is_empty());
    // Deleted and written again by its first writer.
    s.delete("nfs-clients", "c").unwrap();
    s.put("nfs-clients", "c", b"back").unwrap();
    assert_eq!(
        s.load("nfs-clients").unwrap().records,
        vec![("c".to_string(), b"back".to_vec())]
    );
}

#[test]
fn a_put_takes_about_one_fsync() {
    let Some(e) = etcd_or_skip() else { return };
    let s = store(e, "/t-latency");
    s.put("smb-opens", "warm", b"up").unwrap();
    let record = vec![b'r'; 600];
    let mut times = Vec::new();
    for i in 0..50 {
        let t = Instant::now();
        s.put("smb-opens", &format!("k{}", i % 5), &record).unwrap();
        times.push(t.elapsed());
    }
    times.sort();
    eprintln!(
        "etcd put ({} B record, one Txn): median {:?}, 90th percentile {:?}, max {:?}",
        record.len(),
        times[times.len() / 2],
        times[times.len() * 9 / 10],
        times[times.len() - 1]
    );
    // A loaded CI machine is slow, but not this slow.
    assert!(times[times.len() / 2] < Duration::from_secs(1));
}

#[test]
fn corrupt_values_and_names_are_reported_by_key() {
    let Some(e) = etcd_or_skip() else { return };
    let s = store(e, "/t-corrupt");
    s.put("smb-opens", "whole", b"whole record").unwrap();
    s.put("smb-opens", "flipped", b"a record altered").unwrap();
    raw_put(e, "/t-corrupt/smb-opens/flipped", b"BRS1 not a record");
    raw_put(e, "/t-corrupt/smb-opens/garbage", b"\xff\x00garbage");
    raw_put(e, "/t-corrupt/smb-opens/bad/name", b"x");
    let loaded = store(e, "/t-corrupt").load("smb-opens").unwrap();
    assert_eq!(
        loaded.records,
        vec![("whole".to_string(), b"whole record".to_vec())]
    );
    let mut bad: Vec<_> = loaded.corrupt.iter().map(|c| c.location.as_str()).collect();
    bad.sort();
    assert_eq!(
        bad,
        vec![
            "/t-corrupt/smb-opens/bad/name",
            "/t-corrupt/smb-opens/flipped",
            "/t-corrupt/smb-opens/garbage"
        ]
    );
}

#[test]
fn a_record_another_writer_changed_is_not_overwritten() {
    let Some(e) = etcd_or_skip() else { return };
    let a = store(e, "/t-conflict");
    a.put("smb-opens", "k", b"from a").unwrap();
    // Node b takes the record over (it loaded it, so it may).
    let b = store(e, "/t-conflict");
    assert_eq!(b.load("smb-opens").unwrap().records.len(), 1);
    b.put("smb-opens", "k", b"from b").unwrap();

    let err = a.put("smb-opens", "k", b"a again").unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err}");
    assert!(err.to_string().contains("/t-conflict/smb-opens/k"), "{err}");
    let err = a.delete("smb-opens", "k").unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err}");
    // A writer that never saw the record does not replace it either.
    let c = store(e, "/t-conflict");
    let err = c.put("smb-opens", "k", b"from c").unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err}");
    assert_eq!(
        b.load("smb-opens").unwrap().records,
        vec![("k".to_string(), b"from b".to_vec())]
    );
    // Once a has read the record again it may replace it.
    a.load("smb-opens").unwrap();
    a.put("smb-opens", "k", b"a after a load").unwrap();
    let err = b.put("smb-opens", "k", b"b again").unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err}");
    // A record deleted by another writer is gone: no error.
    b.load("smb-opens").unwrap();
    b.delete("smb-opens", "k").unwrap();
    a.delete("smb-opens", "k").unwrap();
}

/// A TCP proxy to etcd that can swallow etcd's answers (the request is
/// applied, its answer lost) and then cut every connection.
struct Proxy {
    addr: std::net::SocketAddr,
    swallow: Arc<std::sync::atomic::AtomicBool>,
    conns: Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Proxy {
    fn start(upstream: &str) -> Proxy {
        use std::sync::atomic::Ordering;
        let upstream = upstream.trim_start_matches("http://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy = Proxy {
            addr: listener.local_addr().unwrap(),
            swallow: Default::default(),
            conns: Default::default(),
        };
        let (swallow, conns) = (proxy.swallow.clone(), proxy.conns.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { break };
                let server = std::net::TcpStream::connect(&upstream).unwrap();
                conns.lock().unwrap().push(client.try_clone().unwrap());
                conns.lock().unwrap().push(server.try_clone().unwrap());
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || std::io::copy(&mut c_in, &mut s_out));
                let (mut s_in, mut c_out) = (server, client);
                let swallow = swallow.clone();
                std::thread::spawn(move || {
                    use std::io::Write;
                    let mut buf = [0u8; 16384];
                    loop {
                        let n = match s_in.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if !swallow.load(Ordering::SeqCst) && c_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        proxy
    }

    /// Close every connection made so far, and pass answers again.
    fn cut(&self) {
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        self.swallow
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_put_whose_answer_was_lost_is_recognised_as_ours() {
    let Some(e) = etcd_or_skip() else { return };
    let proxy = Proxy::start(&e.url);
    let url = format!("http://{}", proxy.addr);
    let s = EtcdStore::with_timeout(&[url], "/t-lost", Duration::from_secs(1)).unwrap();
    s.put("smb-opens", "k", b"v0").unwrap();
    // etcd applies the put; its answer never arrives.
    proxy
        .swallow
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let err = s.put("smb-opens", "k", b"v1").unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    proxy.cut();
    assert_eq!(
        store(e, "/t-lost").load("smb-opens").unwrap().records,
        vec![("k".to_string(), b"v1".to_vec())]
    );
    // The next write finds the key at a revision it did not expect, holding
    // exactly what it sent: its own, not another writer's. (The first try
    // after the cut may meet the broken connection.)
    let mut last = None;
    for _ in 0..3 {
        match s.put("smb-opens", "k", b"v2") {
            Ok(()) => {
                last = None;
                break;
            }
            Err(err) => {
                assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
                last = Some(err);
            }
        }
    }
    assert!(last.is_none(), "{last:?}");
    assert_eq!(
        store(e, "/t-lost").load("smb-opens").unwrap().records,
        vec![("k".to_string(), b"v2".to_vec())]
    );
}

#[test]
fn writes_of_one_record_from_many_threads_do_not_conflict() {
    let Some(e) = etcd_or_skip() else { return };
    let s = Arc::new(store(e, "/t-threads"));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    s.put("smb-opens", "shared", format!("{t}-{i}").as_bytes())
                        .unwrap();
                    s.put("smb-opens", &format!("own{t}"), b"x").unwrap();
                }
                s.delete("smb-opens", &format!("own{t}")).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(s.load("smb-opens").unwrap().records.len(), 1);
}

#[test]
fn the_store_works_from_tokios_blocking_pool_and_drops_in_a_task() {
    let Some(e) = etcd_or_skip() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let url = e.url.clone();
    rt.block_on(async move {
        let s: Arc<dyn StateStore> = Arc::new(EtcdStore::new(&[url], "/t-tokio").unwrap());
        let s2 = s.clone();
        tokio::task::spawn_blocking(move || s2.put("smb-opens", "k", b"v"))
            .await
            .unwrap()
            .unwrap();
        // Called on a worker thread itself (as a few start-up paths do),
        // it blocks that thread but does not deadlock.
        assert_eq!(s.load("smb-opens").unwrap().records.len(), 1);
        // Dropped in async context: no blocking runtime shutdown (panics).
        drop(s);
    });
}

#[test]
fn an_unreachable_etcd_fails_fast_with_unavailable() {
    // Nothing listens: connection refused.
    let refused = format!("http://127.0.0.1:{}", free_port());
    // Something accepts TCP and never answers: only the deadline ends it.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    for url in [refused, silent_url] {
        let s = EtcdStore::new(std::slice::from_ref(&url), "/t-down").unwrap();
        for (what, result) in [
            ("put", {
                let t = Instant::now();
                (s.put("smb-opens", "k", b"v").err(), t.elapsed())
            }),
            ("delete", {
                let t = Instant::now();
                (s.delete("smb-opens", "k").err(), t.elapsed())
            }),
            ("load", {
                let t = Instant::now();
                (s.load("smb-opens").err(), t.elapsed())
            }),
        ] {
            let (err, took) = result;
            let err = err.unwrap_or_else(|| panic!("{what} to {url} succeeded"));
            assert!(matches!(err, StoreError::Unavailable(_)), "{what}: {err}");
            assert!(err.to_string().contains(&url), "{what}: {err}");
            assert!(
                took < Duration::from_secs(5),
                "{what} to {url} took {took:?}"
            );
            eprintln!("{what} to {url}: {took:?}: {err}");
        }
    }
    // The silent listener really held the connections.
    silent.set_nonblocking(true).unwrap();
    assert!(silent.accept().is_ok());
}

#[test]
fn bad_keys_and_config_are_refused() {
    let none: [String; 0] = [];
    assert!(EtcdStore::new(&none, "/braid").is_err());
    let one = ["http://127.0.0.1:2379".to_string()];
    for prefix in ["", "braid", "/braid/", "/a b", "/"] {
        assert!(EtcdStore::new(&one, prefix).is_err(), "{prefix:?}");
    }
    for bad in [
        "https://127.0.0.1:2379",
        "http://",
        "ftp://x:1",
        "http://h:1/path",
    ] {
        assert!(braid_etcd::endpoint_url(bad).is_err(), "{bad}");
    }
    assert_eq!(
        braid_etcd::endpoint_url("127.0.0.1:2379").unwrap(),
        "http://127.0.0.1:2379"
    );
    // Keys are checked before anything is sent (nothing listens here).
    let s = EtcdStore::new(&one, "/braid").unwrap();
    for key in ["", "../x", "a/b", &"k".repeat(201)] {
        assert!(matches!(
            s.put("smb-opens", key, b"v"),
            Err(StoreError::BadKey(_))
        ));
    }
    assert!(matches!(s.load("a/b"), Err(StoreError::BadKey(_))));
}
