//! The fuzzing client's answers to the server's oplock and lease breaks:
//! mostly the acknowledgment MS-SMB2 asks for, sometimes a close instead
//! (as smbtorture's oplock handlers do), sometimes a wrong level, state or
//! lease key, sometimes nothing at all.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use braid_client::{Connection, Error, Tree};
use braid_smb_proto::Command;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;

use crate::requests::HDR;

/// MS-SMB2 2.2.23.2: SMB2_NOTIFY_BREAK_LEASE_FLAG_ACK_REQUIRED.
const ACK_REQUIRED: u32 = 0x01;

/// Statuses of the answers sent, by NTSTATUS, across every session.
pub type Tally = Arc<Mutex<BTreeMap<u32, usize>>>;

/// The tree the answers go on: the session's current one (the fuzzer
/// disconnects trees and connects new ones). Weak: the answering tasks
/// must not keep the connections they listen on alive.
pub type TreeSlot = Arc<Mutex<Weak<Tree>>>;

/// Answer the breaks that reach one channel of a session until that
/// connection goes away.
pub fn answer(channel: &Connection, tree: TreeSlot, seed: u64, tally: Tally) -> JoinHandle<()> {
    let mut rx = channel.breaks();
    tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(seed);
        while let Some(note) = rx.recv().await {
            let Some(answer) = reply_to(&note.msg[..], &mut rng) else {
                continue;
            };
            let current = tree.lock().unwrap().clone();
            let Some(t) = current.upgrade() else { break };
            let sent = t.raw(answer.0, &answer.1, 0).await;
            drop(t);
            match sent {
                Ok(r) => *tally.lock().unwrap().entry(r.header.status).or_default() += 1,
                Err(Error::Timeout) => {}
                // The main loop dropped the session under the answer; a
                // connection the server dropped shows on its own next
                // request.
                Err(_) => break,
            }
        }
    })
}

/// What to send for one break notification (the whole message, header
/// included), if anything.
fn reply_to(msg: &[u8], rng: &mut StdRng) -> Option<(Command, Vec<u8>)> {
    let body = msg.get(HDR..)?;
    let size = u16::from_le_bytes(body.get(0..2)?.try_into().ok()?);
    let roll = rng.gen_range(0..100);
    match size {
        // MS-SMB2 2.2.23.1 / 2.2.24.1: acknowledge with the level offered,
        // or close the open instead.
        24 => {
            let level = body[2];
            let file_id: [u8; 16] = body.get(8..24)?.try_into().ok()?;
            if roll < 15 {
                let mut close = 24u16.to_le_bytes().to_vec();
                close.extend([0u8; 6]);
                close.extend(file_id);
                return Some((Command::Close, close));
            }
            if roll >= 90 {
                return None;
            }
            let level = if roll >= 80 {
                [0u8, 1, 8, 9, 0xFF][rng.gen_range(0..5)]
            } else {
                level
            };
            let mut ack = 24u16.to_le_bytes().to_vec();
            ack.push(level);
            ack.extend([0u8; 5]);
            ack.extend(file_id);
            Some((Command::OplockBreak, ack))
        }
        // MS-SMB2 2.2.23.2 / 2.2.24.2: acknowledge the new lease state
        // when asked to.
        44 => {
            let flags = u32::from_le_bytes(body.get(4..8)?.try_into().ok()?);
            let mut key: [u8; 16] = body.get(8..24)?.try_into().ok()?;
            let mut state = u32::from_le_bytes(body.get(28..32)?.try_into().ok()?);
            if flags & ACK_REQUIRED == 0 || roll >= 90 {
                return None;
            }
            if roll >= 80 {
                match rng.gen_range(0..3) {
                    0 => state = rng.gen_range(0..8),
                    1 => key = rng.gen(),
                    _ => state |= 0x100,
                }
            }
            let mut ack = 36u16.to_le_bytes().to_vec();
            ack.extend([0u8; 2]);
            ack.extend(0u32.to_le_bytes());
            ack.extend(key);
            ack.extend(state.to_le_bytes());
            ack.extend(0u64.to_le_bytes());
            Some((Command::OplockBreak, ack))
        }
        _ => None,
    }
}
