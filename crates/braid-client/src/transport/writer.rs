//! The connection's writer task: one vectored write for whatever requests
//! are queued, so a burst of small requests costs one syscall.

use super::Transport;
use bytes::{Buf, Bytes};
use std::io::IoSlice;
use std::sync::atomic::Ordering;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;

pub(super) async fn writer(
    t: std::sync::Weak<Transport>,
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Vec<Bytes>>,
) {
    let mut batch: Vec<Bytes> = Vec::with_capacity(64);
    while let Some(first) = rx.recv().await {
        batch.extend(first);
        let mut total: usize = batch.iter().map(|b| b.len()).sum();
        // Coalesce whatever else is queued into the same writev.
        while total < 4 * 1024 * 1024 && batch.len() < 256 {
            match rx.try_recv() {
                Ok(more) => {
                    total += more.iter().map(|b| b.len()).sum::<usize>();
                    batch.extend(more);
                }
                Err(_) => break,
            }
        }
        if let Err(e) = write_all_vectored(&mut wr, &mut batch).await {
            if let Some(t) = t.upgrade() {
                t.fail(&format!("write failed: {e}"));
            }
            return;
        }
        if let Some(t) = t.upgrade() {
            t.bytes_sent.fetch_add(total as u64, Ordering::Relaxed);
        }
    }
    let _ = wr.shutdown().await;
}

async fn write_all_vectored(wr: &mut OwnedWriteHalf, bufs: &mut Vec<Bytes>) -> std::io::Result<()> {
    bufs.retain(|b| !b.is_empty());
    while !bufs.is_empty() {
        let slices: Vec<IoSlice<'_>> = bufs.iter().take(512).map(|b| IoSlice::new(b)).collect();
        let mut n = wr.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let mut done = 0;
        for b in bufs.iter_mut() {
            if n >= b.len() {
                n -= b.len();
                done += 1;
            } else {
                b.advance(n);
                break;
            }
        }
        bufs.drain(..done);
    }
    Ok(())
}
