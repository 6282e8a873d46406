//! braid-client against Samba's smbd (skipped, with a message, when smbd
//! is not installed).

mod common;

use braid_client::{dialect, Cipher, ClientConfig, Policy, SigningAlgorithm};
use common::ops::*;
use std::sync::Arc;
use std::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samba_basic_ops_signed() {
    let Some(srv) = common::start_samba("") else {
        return;
    };
    let (s, t) = session_with(&srv, ClientConfig::default()).await;
    assert_eq!(s.dialect(), dialect::SMB311);
    assert!(s.is_signing());
    basic_ops(&t).await;
    round_trip(&t, "big.bin", 4 * 1024 * 1024 + 12345, 1024 * 1024, 8).await;
    s.logoff().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samba_each_signing_algorithm() {
    let Some(srv) = common::start_samba("") else {
        return;
    };
    for algo in [
        SigningAlgorithm::AesGmac,
        SigningAlgorithm::AesCmac,
        SigningAlgorithm::HmacSha256,
    ] {
        let cfg = ClientConfig {
            signing_algorithms: vec![algo],
            ..Default::default()
        };
        let (s, t) = session_with(&srv, cfg).await;
        assert_eq!(s.signing_algorithm(), algo);
        assert!(s.is_signing());
        round_trip(&t, &format!("sig-{algo:?}"), 3 * 1024 * 1024, 512 * 1024, 4).await;
    }
    // Older dialects: 3.0.2 signs with AES-CMAC, 2.1 with HMAC-SHA256.
    for (d, algo) in [
        (dialect::SMB302, SigningAlgorithm::AesCmac),
        (dialect::SMB210, SigningAlgorithm::HmacSha256),
    ] {
        let cfg = ClientConfig {
            dialects: vec![d],
            ..Default::default()
        };
        let (s, t) = session_with(&srv, cfg).await;
        assert_eq!((s.dialect(), s.signing_algorithm()), (d, algo));
        round_trip(&t, &format!("dialect-{d:x}"), 1024 * 1024, 64 * 1024, 4).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samba_each_cipher() {
    let Some(srv) = common::start_samba("") else {
        return;
    };
    for c in [
        Cipher::Aes128Gcm,
        Cipher::Aes128Ccm,
        Cipher::Aes256Gcm,
        Cipher::Aes256Ccm,
    ] {
        let cfg = ClientConfig {
            ciphers: vec![c],
            encrypt: true,
            ..Default::default()
        };
        let (s, t) = session_with(&srv, cfg).await;
        assert_eq!(s.cipher(), Some(c));
        assert!(s.is_encrypting());
        round_trip(&t, &format!("enc-{c:?}"), 3 * 1024 * 1024, 1024 * 1024, 4).await;
        basic_ops(&t).await;
    }
    // 3.0.2 encrypts with AES-128-CCM.
    let cfg = ClientConfig {
        dialects: vec![dialect::SMB302],
        encrypt: true,
        ..Default::default()
    };
    let (s, t) = session_with(&srv, cfg).await;
    assert_eq!(s.cipher(), Some(Cipher::Aes128Ccm));
    round_trip(&t, "enc-302", 1024 * 1024, 256 * 1024, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samba_server_requires_encryption() {
    let Some(srv) = common::start_samba("  server smb encrypt = required\n") else {
        return;
    };
    let (s, t) = session_with(&srv, ClientConfig::default()).await;
    assert!(s.is_encrypting(), "server-required encryption not honoured");
    round_trip(&t, "srv-enc", 2 * 1024 * 1024, 1024 * 1024, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samba_many_requests_in_flight() {
    let Some(srv) = common::start_samba("") else {
        return;
    };
    let (s, t) = session_with(&srv, ClientConfig::default()).await;
    let f = t.create_file("small").await.unwrap();
    f.write(0, random_bytes(4096)).await.unwrap();
    let conn = s.primary().unwrap();
    let mut set = tokio::task::JoinSet::new();
    let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..64 {
        let f = f.clone();
        let conn = conn.clone();
        let peak = peak.clone();
        set.spawn(async move {
            for _ in 0..50 {
                let b = f.read(0, 4096).await.unwrap();
                assert_eq!(b.len(), 4096);
                peak.fetch_max(conn.outstanding(), std::sync::atomic::Ordering::Relaxed);
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    let window = conn.credits_available() + conn.outstanding();
    eprintln!("peak outstanding {peak}, credit window {window}");
    assert!(window >= 256, "credit window only {window}");
    assert!(peak >= 16, "only {peak} requests were ever in flight");
    f.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samba_multichannel_bind_and_survive_channel_loss() {
    let Some(srv) = common::start_samba("") else {
        return;
    };
    let (s, t) = session_with(&srv, ClientConfig::default()).await;
    let ifs = t.query_network_interfaces().await.expect("interface list");
    eprintln!("server interfaces: {ifs:?}");
    // Samba binds only the loopback addresses that exist (127.0.0.1 here);
    // extra channels go to each other listed interface that accepts, and
    // to 127.0.0.1 again for the rest (as smbtorture does).
    let mut targets = Vec::new();
    for i in &ifs {
        let a = std::net::SocketAddr::new(i.address, srv.port);
        if i.address.to_string() != "127.0.0.1" && std::net::TcpStream::connect(a).is_ok() {
            targets.push(a);
        }
    }
    while targets.len() < 3 {
        targets.push(srv.addr());
    }
    for a in targets.into_iter().take(3) {
        let c = s.bind_channel(a).await.expect("bind");
        eprintln!("bound channel on {}", c.addr());
    }
    assert_eq!(s.channels().len(), 4);
    s.set_policy(Policy::LeastOutstanding);

    // Data over all channels.
    round_trip(&t, "mc1", 16 * 1024 * 1024, 1024 * 1024, 16).await;
    for ch in s.channels().list() {
        let (tx, rx, n) = ch.conn.traffic();
        eprintln!("{} sent {tx} received {rx} requests {n}", ch.conn.addr());
        assert!(
            tx > 1024 * 1024 && rx > 1024 * 1024,
            "channel {} idle",
            ch.conn.addr()
        );
    }

    // Kill a channel in the middle of a transfer; the rest finish it.
    let victim = s.channels().list()[1].conn.clone();
    let t2 = t.clone();
    let job =
        tokio::spawn(
            async move { round_trip(&t2, "mc2", 48 * 1024 * 1024, 1024 * 1024, 16).await },
        );
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let (_, before, _) = victim.traffic();
    victim.kill();
    eprintln!("killed {} after {before} bytes", victim.addr());
    job.await.expect("transfer with a dead channel");
    assert_eq!(s.channels().len(), 3);
    assert!(!victim.is_alive());
    s.echo().await.unwrap();
}

/// Compare with `smbclient -c 'get big /dev/null'`; run with --ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn samba_read_1gib_throughput() {
    let Some(srv) = common::start_samba("") else {
        return;
    };
    let big = srv.share_dir.join("big");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(1 << 30).unwrap();
    let _ = std::process::Command::new("chown")
        .arg(format!("{}:", common::USER))
        .arg(&big)
        .status();
    // Warm the page cache.
    let _ = std::io::copy(
        &mut std::fs::File::open(&big).unwrap(),
        &mut std::io::sink(),
    );
    for (label, cfg) in [
        ("3.1.1 signed AES-GMAC", ClientConfig::default()),
        (
            "3.1.1 signed AES-CMAC",
            ClientConfig {
                signing_algorithms: vec![SigningAlgorithm::AesCmac],
                ..Default::default()
            },
        ),
        (
            "3.1.1 encrypted AES-128-GCM",
            ClientConfig {
                encrypt: true,
                ..Default::default()
            },
        ),
        (
            "3.0.2 unsigned",
            ClientConfig {
                dialects: vec![dialect::SMB302],
                signing: false,
                ..Default::default()
            },
        ),
    ] {
        let (_s, t) = session_with(&srv, cfg).await;
        let f = t.open("big").await.unwrap();
        let chunk = t.max_read().min(1 << 20) as usize;
        let t0 = Instant::now();
        let v = read_all(&f, 1 << 30, chunk, 16).await;
        let dt = t0.elapsed();
        assert_eq!(v.len(), 1 << 30);
        eprintln!(
            "braid-client {label}: 1 GiB in {dt:?} = {:.0} MB/s",
            1073.741824 / dt.as_secs_f64()
        );
    }
    let t0 = Instant::now();
    let out = std::process::Command::new("smbclient")
        .arg(format!("//127.0.0.1/{}", common::SHARE))
        .args(["-p", &srv.port.to_string(), "-m", "SMB3", "-U"])
        .arg(format!("{}%{}", common::USER, srv.password))
        .args(["-c", "get big /dev/null"])
        .output();
    if let Ok(o) = out {
        let dt = t0.elapsed();
        eprintln!(
            "smbclient: {} in {dt:?} = {:.0} MB/s (incl. startup)",
            String::from_utf8_lossy(&o.stdout).trim(),
            1073.741824 / dt.as_secs_f64()
        );
    }
}
