//! Shares: an exported directory, held as an `O_PATH` fd.

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) struct Share {
    pub(crate) name: String,
    pub(crate) root_path: PathBuf,
}

/// A reference to an exported share. Cheap to clone.
#[derive(Clone)]
pub struct ShareRef(pub(crate) Arc<Share>);

impl ShareRef {
    pub fn name(&self) -> &str {
        &self.0.name
    }
    /// The host directory (for display and logging only; never used to build paths).
    pub fn root_path(&self) -> &Path {
        &self.0.root_path
    }
}

impl std::fmt::Debug for ShareRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareRef")
            .field("name", &self.0.name)
            .field("root", &self.0.root_path)
            .finish()
    }
}
