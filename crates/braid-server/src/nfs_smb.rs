//! The SMB side of `nfs::state::caching`: NFS opens and writes break SMB
//! oplocks and leases on the same file (issue 42), through the oplock
//! table as an SMB open (`break_for_new_open`) or a host write
//! (`break_for_host_change`) does. SMB's table keys a file by share name
//! and inode number; an NFS export has the name of its share.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use crate::nfs::state::caching::OtherProtocolCaching;
use crate::smb::lease::{R, W};
use crate::smb::oplock::NewOpen;
use crate::state::ServerState;

pub struct SmbCaching(pub Weak<ServerState>);

impl OtherProtocolCaching for SmbCaching {
    fn open(&self, share: &str, fileid: u64) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let file = self
            .0
            .upgrade()
            .and_then(|s| s.oplocks.existing(share, fileid));
        Box::pin(async move {
            if let Some(file) = file {
                file.break_for_new_open(&NewOpen::default(), || {}).await;
            }
        })
    }

    fn write(&self, share: &str, fileid: u64) {
        if let Some(file) = self
            .0
            .upgrade()
            .and_then(|s| s.oplocks.existing(share, fileid))
        {
            file.break_for_host_change(R | W);
        }
    }
}

/// For `server.rs`: the SMB side's breaker, held weakly (the NFS state
/// must not keep the SMB state alive).
pub fn caching(state: &Arc<ServerState>) -> Arc<dyn OtherProtocolCaching> {
    Arc::new(SmbCaching(Arc::downgrade(state)))
}
