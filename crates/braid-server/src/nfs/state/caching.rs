//! NFS's delegations as one protocol's grant table in braid-fs's
//! cross-protocol registry (`braid_fs::caching`, issue 42): another
//! protocol's open recalls the delegations it conflicts with (RFC 8881
//! 10.4.1), through the same recall and revoke as an NFS open's
//! (`delegations.rs`). Nothing here imports the SMB modules: the registry
//! is braid-fs's, and the server registers both protocols with it.

use std::sync::{Arc, Weak};

use braid_fs::caching::{BreakWait, CachedFile, Caching, Change, GrantHolder};

use super::super::NfsState;
use super::delegations::recall_for_other_open;
use super::stateids::Kind;

/// The NFS side, held weakly: the registry must not keep it alive.
pub struct NfsDelegations(Weak<NfsState>);

/// For `server.rs`: NFS's holder, to register as "nfs".
pub fn holder(state: &Arc<NfsState>) -> Arc<dyn GrantHolder> {
    Arc::new(NfsDelegations(Arc::downgrade(state)))
}

impl GrantHolder for NfsDelegations {
    /// Read delegations cache reads; write delegations reads and writes.
    /// A delegation being recalled still counts until it is returned or
    /// revoked.
    fn held(&self, file: CachedFile<'_>) -> Caching {
        let Some(state) = self.0.upgrade() else {
            return Caching::NONE;
        };
        let Some(export) = state.exports.by_name(file.share) else {
            return Caching::NONE;
        };
        // One share is one file system (braid-fs's POSIX face): its dev.
        let key = (export.share.root().key().0, file.file_id);
        let inner = state.stateids.lock();
        let Some(f) = inner.files.get(&key) else {
            return Caching::NONE;
        };
        f.delegs
            .iter()
            .filter_map(|other| match &inner.states.get(other)?.kind {
                Kind::Deleg(d) if !d.revoked && d.write => Some(Caching::READ | Caching::WRITE),
                Kind::Deleg(d) if !d.revoked => Some(Caching::READ),
                _ => None,
            })
            .fold(Caching::NONE, |a, b| a | b)
    }

    fn break_for(&self, file: CachedFile<'_>, change: Change) -> BreakWait {
        let Some(state) = self.0.upgrade() else {
            return Box::pin(async {});
        };
        let writes = match change {
            Change::Open { writes } => writes,
            Change::Write | Change::Removed => true,
        };
        let share = file.share.to_string();
        let file_id = file.file_id;
        let recalling = async move {
            recall_for_other_open(&state, &share, file_id, writes).await;
        };
        // Started now, as the registry's contract asks.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let task = rt.spawn(recalling);
                Box::pin(async move {
                    let _ = task.await;
                })
            }
            Err(_) => Box::pin(recalling),
        }
    }
}
