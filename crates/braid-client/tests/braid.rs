//! braid-client against Braid's own server (target/release/braid; skipped
//! with a message when it is not built).

mod common;

use braid_client::{Cipher, ClientConfig, SigningAlgorithm};
use common::ops::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn braid_basic_ops_and_round_trip() {
    let Some(srv) = common::start_braid() else {
        return;
    };
    let (s, t) = session_with(&srv, ClientConfig::default()).await;
    eprintln!(
        "{s:?} dialect {:#x} algo {:?}",
        s.dialect(),
        s.signing_algorithm()
    );
    basic_ops(&t).await;
    round_trip(&t, "big.bin", 8 * 1024 * 1024 + 777, 1024 * 1024, 8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn braid_signing_and_encryption() {
    let Some(srv) = common::start_braid() else {
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
        round_trip(&t, &format!("sig-{algo:?}"), 2 * 1024 * 1024, 512 * 1024, 4).await;
    }
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
        round_trip(&t, &format!("enc-{c:?}"), 2 * 1024 * 1024, 1024 * 1024, 4).await;
    }
}

/// MS-SMB2 3.3.4.1.1: the ECHO response of a signed session is signed
/// (the client checks the signature of every response).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn braid_echo_is_signed() {
    let Some(srv) = common::start_braid() else {
        return;
    };
    let (s, _t) = session_with(&srv, ClientConfig::default()).await;
    s.echo().await.expect("signed echo");
}

/// Issue 3's end-to-end check: a session with 3 more channels bound moves
/// data over all of them, loses one mid-transfer and finishes on the rest,
/// and the admin API shows the channel count going 4 -> 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn braid_multichannel() {
    let Some(srv) = common::start_braid() else {
        return;
    };
    let (s, t) = session_with(&srv, ClientConfig::default()).await;
    // Multichannel is on by default.
    assert!(s.primary().unwrap().negotiated().multichannel());
    let ifs = t
        .query_network_interfaces()
        .await
        .expect("FSCTL_QUERY_NETWORK_INTERFACE_INFO");
    assert!(!ifs.is_empty(), "no interfaces reported");
    for _ in 0..3 {
        s.bind_channel(srv.addr()).await.expect("bind");
    }
    assert_eq!(s.channels().len(), 4);
    // The server's own view (issue 3's live view): 4 channels.
    let view = common::admin_get(&srv, "/api/v1/sessions");
    assert!(view.contains("\"current_channels\":4"), "{view}");
    round_trip(&t, "mc", 16 * 1024 * 1024, 1024 * 1024, 16).await;
    let victim = s.channels().list()[2].conn.clone();
    let t2 = t.clone();
    let job =
        tokio::spawn(
            async move { round_trip(&t2, "mc2", 32 * 1024 * 1024, 1024 * 1024, 16).await },
        );
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    victim.kill();
    job.await.expect("transfer with a dead channel");
    assert_eq!(s.channels().len(), 3);
    // The server noticed the lost connection: the session lives on with 3.
    let mut view = String::new();
    for _ in 0..50 {
        view = common::admin_get(&srv, "/api/v1/sessions");
        if view.contains("\"current_channels\":3") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(view.contains("\"current_channels\":3"), "{view}");
}
