//! Scenarios run against any server.

use braid_client::{ClientConfig, Connection, Session, Tree};
use bytes::Bytes;
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::sync::Arc;

use super::{Server, USER};

pub async fn session_with(srv: &Server, cfg: ClientConfig) -> (Arc<Session>, Arc<Tree>) {
    let conn = Connection::connect_with(srv.addr(), Arc::new(cfg))
        .await
        .expect("connect");
    let s = Session::setup(conn, USER, "", &srv.password)
        .await
        .expect("session setup");
    let t = s.tree_connect(&srv.unc()).await.expect("tree connect");
    (s, t)
}

pub fn random_bytes(n: usize) -> Bytes {
    let mut v = vec![0u8; n];
    rand::thread_rng().fill_bytes(&mut v);
    Bytes::from(v)
}

pub fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// Metadata and small-I/O operations.
pub async fn basic_ops(t: &Arc<Tree>) {
    basic_ops_opts(t, true).await
}

pub async fn basic_ops_opts(t: &Arc<Tree>, echo: bool) {
    if echo {
        t.session().echo().await.expect("echo");
    }
    t.mkdir("dir1").await.expect("mkdir");
    let f = t.create_file("dir1/a.txt").await.expect("create");
    assert_eq!(
        f.write(0, Bytes::from_static(b"hello world"))
            .await
            .unwrap(),
        11
    );
    f.flush().await.expect("flush");
    assert_eq!(&f.read(0, 100).await.unwrap()[..], b"hello world");
    assert_eq!(&f.read(6, 5).await.unwrap()[..], b"world");
    assert!(f.read(1000, 10).await.unwrap().is_empty(), "read past EOF");
    let st = f.query_standard().await.unwrap();
    assert_eq!(st.end_of_file, 11);
    assert!(!st.directory);
    let b = f.query_basic().await.unwrap();
    assert!(b.last_write_time > 0);
    f.set_end_of_file(5).await.unwrap();
    assert_eq!(f.query_standard().await.unwrap().end_of_file, 5);
    f.close().await.unwrap();
    t.rename("dir1/a.txt", "dir1/b.txt", false)
        .await
        .expect("rename");
    let names: Vec<String> = t
        .list("dir1")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec!["b.txt".to_string()]);
    let (st, _) = t.stat("dir1/b.txt").await.unwrap();
    assert_eq!(st.end_of_file, 5);
    assert!(t.open("dir1/a.txt").await.is_err(), "old name still opens");
    t.unlink("dir1/b.txt").await.expect("unlink");
    assert!(t.list("dir1").await.unwrap().is_empty());
    // Delete via SET_INFO disposition.
    let f = t.create_file("dir1/c").await.unwrap();
    f.set_delete_on_close(true).await.unwrap();
    f.close().await.unwrap();
    t.rmdir("dir1").await.expect("rmdir");
    assert!(t.list("").await.unwrap().iter().all(|e| e.name != "dir1"));
}

/// Write `total` random bytes in `chunk`-sized writes with `depth` in
/// flight, read them back the same way, compare checksums.
pub async fn round_trip(t: &Arc<Tree>, name: &str, total: usize, chunk: usize, depth: usize) {
    let data = random_bytes(total);
    let f = t.create_file(name).await.expect("create");
    let sem = Arc::new(tokio::sync::Semaphore::new(depth));
    let mut set = tokio::task::JoinSet::new();
    for off in (0..total).step_by(chunk) {
        let p = sem.clone().acquire_owned().await.unwrap();
        let f = f.clone();
        let piece = data.slice(off..(off + chunk).min(total));
        set.spawn(async move {
            let n = f.write(off as u64, piece.clone()).await.expect("write");
            assert_eq!(n as usize, piece.len());
            drop(p);
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
    assert_eq!(
        f.query_standard().await.unwrap().end_of_file as usize,
        total
    );
    let back = read_all(&f, total, chunk, depth).await;
    assert_eq!(sha(&back), sha(&data), "data read back differs");
    f.close().await.unwrap();
}

pub async fn read_all(f: &braid_client::File, total: usize, chunk: usize, depth: usize) -> Vec<u8> {
    let sem = Arc::new(tokio::sync::Semaphore::new(depth));
    let mut set = tokio::task::JoinSet::new();
    for off in (0..total).step_by(chunk) {
        let p = sem.clone().acquire_owned().await.unwrap();
        let f = f.clone();
        let len = chunk.min(total - off) as u32;
        set.spawn(async move {
            let b = f.read(off as u64, len).await.expect("read");
            drop(p);
            (off, b)
        });
    }
    let mut back = vec![0u8; total];
    while let Some(r) = set.join_next().await {
        let (off, b) = r.unwrap();
        back[off..off + b.len()].copy_from_slice(&b);
    }
    back
}
