//! Integration tests against nfs-ganesha: started here with a private
//! configuration on a free loopback port (root and ganesha.nfsd needed:
//! skipped otherwise, unless CI is set, where a missing ganesha fails),
//! or the server in BRAID_NFS_TEST_SERVER=HOST:PORT/EXPORT.

use braid_nfs_client::{Access, Client, ClientOptions, Create, Error, Stable};
use braid_nfs_proto::nfs4::{NFS4ERR_EXIST, NFS4ERR_NOENT};
use bytes::Bytes;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Ganesha {
    child: Option<Child>,
    addr: SocketAddr,
    export: String,
    _dir: Option<PathBuf>,
}

impl Drop for Ganesha {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(d) = &self._dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn ganesha_bin() -> Option<PathBuf> {
    ["/usr/bin/ganesha.nfsd", "/usr/sbin/ganesha.nfsd"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

fn server() -> Option<Ganesha> {
    if let Ok(t) = std::env::var("BRAID_NFS_TEST_SERVER") {
        let (hp, export) = t.split_once('/').expect("HOST:PORT/EXPORT");
        return Some(Ganesha {
            child: None,
            addr: hp.parse().expect("HOST:PORT"),
            export: format!("/{export}"),
            _dir: None,
        });
    }
    let root = unsafe { libc_geteuid() } == 0;
    let Some(bin) = ganesha_bin().filter(|_| root) else {
        if std::env::var_os("CI").is_some() {
            panic!("CI is set but nfs-ganesha cannot run here (root: {root})");
        }
        eprintln!("skipped: nfs-ganesha needs root and ganesha.nfsd");
        return None;
    };
    let port = TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("braid-nfs-client-{}-{port}", std::process::id()));
    std::fs::create_dir_all(dir.join("export")).unwrap();
    std::fs::create_dir_all(dir.join("recov")).unwrap();
    let conf = dir.join("ganesha.conf");
    std::fs::write(
        &conf,
        format!(
            "NFS_CORE_PARAM {{ NFS_Port = {port}; Bind_addr = 127.0.0.1; Protocols = 4; \
             Enable_NLM = false; Enable_RQUOTA = false; Enable_UDP = false; }}\n\
             NFSv4 {{ Minor_Versions = 1; Graceless = true; RecoveryBackend = fs; \
             RecoveryRoot = {d}/recov; Only_Numeric_Owners = true; }}\n\
             EXPORT {{ Export_Id = 1; Path = {d}/export; Pseudo = /export; Protocols = 4; \
             Transports = TCP; Access_Type = RW; Squash = No_Root_Squash; SecType = sys; \
             FSAL {{ Name = VFS; }} }}\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let child = Command::new(bin)
        .args(["-F", "-f"])
        .arg(&conf)
        .arg("-L")
        .arg(dir.join("ganesha.log"))
        .arg("-p")
        .arg(dir.join("ganesha.pid"))
        .args(["-N", "NIV_EVENT"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ganesha.nfsd");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let g = Ganesha {
        child: Some(child),
        addr,
        export: "/export".into(),
        _dir: Some(dir),
    };
    let t0 = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "ganesha did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(g)
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

async fn connect(g: &Ganesha, nconnect: u32) -> Arc<Client> {
    // ganesha answers the port before it serves: retry for a while.
    let t0 = Instant::now();
    loop {
        let r = Client::connect(ClientOptions {
            addrs: vec![g.addr],
            nconnect,
            ..Default::default()
        })
        .await;
        match r {
            Ok(c) => return c,
            Err(e) if t0.elapsed() < Duration::from_secs(30) => {
                eprintln!("waiting for ganesha: {e}");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("connect: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ganesha_file_lifecycle_nconnect_and_trunking() {
    let Some(g) = server() else { return };
    let c = connect(&g, 4).await;
    assert_eq!(c.connections().len(), 4);
    assert!(
        c.fore_channel().ca_maxrequests >= 16,
        "{:?}",
        c.fore_channel()
    );
    let dir = format!("{}/nfs-client-test-{}", g.export, std::process::id());
    c.mkdir_all(&format!("{dir}/sub")).await.unwrap();
    let e = c.mkdir(&format!("{dir}/sub")).await.unwrap_err();
    assert_eq!(e.status(), Some(NFS4ERR_EXIST), "{e}");
    let path = format!("{dir}/f.dat");
    let f = c.open(&path, Access::Both, Create::Guarded).await.unwrap();
    assert_eq!(f.attrs.size, 0);
    let e = c
        .open(&path, Access::Both, Create::Guarded)
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(NFS4ERR_EXIST), "{e}");
    // 256 writes of 64 KiB in flight at once over 4 connections.
    let mut set = tokio::task::JoinSet::new();
    for i in 0..256u64 {
        let (c, f) = (c.clone(), f.clone());
        set.spawn(async move {
            let data = Bytes::from(vec![(i % 251) as u8; 65536]);
            let stable = if i % 2 == 0 {
                Stable::Unstable
            } else {
                Stable::FileSync
            };
            c.write(&f, i * 65536, data, stable).await.unwrap().0
        });
    }
    while let Some(n) = set.join_next().await {
        assert_eq!(n.unwrap(), 65536);
    }
    c.commit(&f.fh).await.unwrap();
    assert_eq!(c.getattr(&f.fh).await.unwrap().size, 256 * 65536);
    let mut set = tokio::task::JoinSet::new();
    for i in 0..256u64 {
        let (c, f) = (c.clone(), f.clone());
        set.spawn(async move {
            let (b, _) = c.read(&f, i * 65536, 65536).await.unwrap();
            assert_eq!(b.len(), 65536);
            assert!(b.iter().all(|&x| x == (i % 251) as u8), "block {i}");
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
    // Every connection carried requests.
    for (l, r, alive, t) in c.traffic() {
        assert!(alive && t.requests > 10, "{l} -> {r}: {t:?}");
    }
    let (_, eof) = c.read(&f, 256 * 65536 - 10, 100).await.unwrap();
    assert!(eof);
    c.set_size(&f, 1000).await.unwrap();
    c.close(&f).await.unwrap();
    let f2 = c.open(&path, Access::Read, Create::No).await.unwrap();
    assert_eq!(f2.attrs.size, 1000);
    assert!(!f2.attrs.is_dir && f2.attrs.fileid != 0);
    c.close(&f2).await.unwrap();
    let mut names = c.readdir(&dir).await.unwrap();
    names.sort();
    assert_eq!(names, ["f.dat", "sub"]);
    c.remove(&path).await.unwrap();
    let e = c.open(&path, Access::Read, Create::No).await.unwrap_err();
    assert_eq!(e.status(), Some(NFS4ERR_NOENT), "{e}");
    c.remove(&format!("{dir}/sub")).await.unwrap();
    c.remove(&dir).await.unwrap();
    c.shutdown().await;

    // Trunking: 127.0.0.1 and ::1 (or 127.0.0.1 twice) reach the same
    // ganesha: one session, the same server owner.
    let mut second = g.addr;
    second.set_ip("::1".parse().unwrap());
    if std::net::TcpStream::connect(second).is_err() {
        second = g.addr;
    }
    let c = Client::connect(ClientOptions {
        addrs: vec![g.addr, second],
        nconnect: 2,
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(c.connections().len(), 4);
    assert_eq!(c.servers().len(), 2);
    assert_eq!(c.servers()[0].major_id, c.servers()[1].major_id);
    c.lookup(&g.export).await.unwrap();
    c.shutdown().await;
}

#[tokio::test]
async fn trunking_refuses_another_server() {
    let Some(g1) = server() else { return };
    if std::env::var_os("BRAID_NFS_TEST_SERVER").is_some() {
        eprintln!("skipped: BRAID_NFS_TEST_SERVER names one server, this test needs two");
        return;
    }
    let Some(g2) = server() else { return };
    // Wait until both serve.
    connect(&g1, 1).await.shutdown().await;
    connect(&g2, 1).await.shutdown().await;
    let r = Client::connect(ClientOptions {
        addrs: vec![g1.addr, g2.addr],
        ..Default::default()
    })
    .await;
    match r {
        Err(Error::Trunking(m)) => assert!(
            m.contains("another server") || m.contains("client id"),
            "{m}"
        ),
        Err(e) => panic!("expected a trunking error, got {e}"),
        Ok(_) => panic!("two ganeshas accepted as one server"),
    }
}
