//! SMB's oplocks and leases as one protocol's grant table in braid-fs's
//! cross-protocol registry (`braid_fs::caching`, issue 42): another
//! protocol's open or write reaches SMB holders here, and is broken by
//! SMB's own rules, as an SMB open (`break_for_new_open`) or a host write
//! (`break_for_host_change`) is. SMB's table keys a file by share name and
//! file id, as the registry does.

use std::sync::{Arc, Weak};

use braid_fs::caching::{BreakWait, CachedFile, Caching, Change, GrantHolder};

use crate::smb::lease::{H, R, W};
use crate::smb::oplock::NewOpen;
use crate::state::ServerState;

/// The SMB side, held weakly: the registry must not keep the server
/// state alive.
pub struct SmbGrants(Weak<ServerState>);

/// For `server.rs`: SMB's holder, to register as "smb".
pub fn holder(state: &Arc<ServerState>) -> Arc<dyn GrantHolder> {
    Arc::new(SmbGrants(Arc::downgrade(state)))
}

/// Lease states as the registry's caching bits.
fn caching_of(lease_state: u32) -> Caching {
    let mut c = Caching::NONE;
    for (bit, caching) in [
        (R, Caching::READ),
        (W, Caching::WRITE),
        (H, Caching::HANDLE),
    ] {
        if lease_state & bit != 0 {
            c = c | caching;
        }
    }
    c
}

impl GrantHolder for SmbGrants {
    fn held(&self, file: CachedFile<'_>) -> Caching {
        self.0
            .upgrade()
            .and_then(|s| s.smb.oplocks.existing(file.share, file.file_id))
            .map_or(Caching::NONE, |f| caching_of(f.caching_held()))
    }

    fn break_for(&self, file: CachedFile<'_>, change: Change) -> BreakWait {
        let Some(oplocks) = self
            .0
            .upgrade()
            .and_then(|s| s.smb.oplocks.existing(file.share, file.file_id))
        else {
            return Box::pin(async {});
        };
        match change {
            // MS-FSA 2.1.4.12: as a new SMB open that shares everything
            // would break them; the wait ends at the acknowledgements.
            Change::Open { .. } => {
                let breaking = async move {
                    oplocks.break_for_new_open(&NewOpen::default(), || {}).await;
                };
                // Started now, as the registry's contract asks.
                match tokio::runtime::Handle::try_current() {
                    Ok(rt) => {
                        let task = rt.spawn(breaking);
                        Box::pin(async move {
                            let _ = task.await;
                        })
                    }
                    Err(_) => Box::pin(breaking),
                }
            }
            // The data changed: read and write caching are stale; nothing
            // to wait for.
            Change::Write => {
                oplocks.break_for_host_change(R | W);
                Box::pin(async {})
            }
            // Gone (removed or replaced, on the host): handle caching
            // too, so no client reopens a cached handle of it.
            Change::Removed => {
                oplocks.break_for_host_change(R | W | H);
                Box::pin(async {})
            }
        }
    }
}
