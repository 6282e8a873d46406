//! What the NFS side asks of the other protocol that caches the same files
//! (issue 42: an NFS open or write breaks SMB oplocks and leases, as an
//! open or a write through another SMB open would, MS-FSA 2.1.4.12). A
//! trait, so that nothing under `nfs/` imports the SMB modules; the server
//! sets the SMB implementation (`nfs_smb.rs`) when it serves both.

use std::future::Future;
use std::pin::Pin;

pub trait OtherProtocolCaching: Send + Sync {
    /// An NFS OPEN of file `fileid` of share `share`: break the caching a
    /// new open conflicts with (write caching). Resolves once the holders
    /// acknowledged, or their time to do so ran out.
    fn open(&self, share: &str, fileid: u64) -> Pin<Box<dyn Future<Output = ()> + Send>>;
    /// An NFS WRITE (or a change of size): read and write caching of the
    /// file are stale; broken without waiting.
    fn write(&self, share: &str, fileid: u64);
}
