//! Operation classes: what an operator splits transactions by to see
//! whether a workload is metadata-heavy (mission section 3). SMB commands
//! and NFS operations map to these in their own front-ends
//! (`smb/op_class.rs`, `nfs/op_class.rs` in braid-server).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpClass {
    Create,
    Open,
    Close,
    Delete,
    Rename,
    Stat,
    List,
    Read,
    Write,
    Lock,
    Other,
}

/// Every class, in index order (`OpClass as usize`).
pub const OP_CLASSES: [OpClass; 11] = [
    OpClass::Create,
    OpClass::Open,
    OpClass::Close,
    OpClass::Delete,
    OpClass::Rename,
    OpClass::Stat,
    OpClass::List,
    OpClass::Read,
    OpClass::Write,
    OpClass::Lock,
    OpClass::Other,
];

impl OpClass {
    pub const COUNT: usize = OP_CLASSES.len();

    /// The label used in metrics, JSON and advice.
    pub fn name(self) -> &'static str {
        match self {
            OpClass::Create => "create",
            OpClass::Open => "open",
            OpClass::Close => "close",
            OpClass::Delete => "delete",
            OpClass::Rename => "rename",
            OpClass::Stat => "stat",
            OpClass::List => "list",
            OpClass::Read => "read",
            OpClass::Write => "write",
            OpClass::Lock => "lock",
            OpClass::Other => "other",
        }
    }

    pub fn from_name(name: &str) -> Option<OpClass> {
        OP_CLASSES.iter().copied().find(|c| c.name() == name)
    }

    /// Namespace and attribute work, what a metadata cache serves.
    pub fn is_metadata(self) -> bool {
        matches!(
            self,
            OpClass::Create
                | OpClass::Open
                | OpClass::Close
                | OpClass::Delete
                | OpClass::Rename
                | OpClass::Stat
                | OpClass::List
        )
    }

    /// Moves file data.
    pub fn is_data(self) -> bool {
        matches!(self, OpClass::Read | OpClass::Write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_and_names_round_trip() {
        for (i, c) in OP_CLASSES.iter().enumerate() {
            assert_eq!(*c as usize, i);
            assert_eq!(OpClass::from_name(c.name()), Some(*c));
        }
        assert_eq!(OpClass::from_name("query_info"), None);
        assert!(OpClass::Stat.is_metadata() && !OpClass::Stat.is_data());
        assert!(OpClass::Write.is_data() && !OpClass::Write.is_metadata());
        assert!(!OpClass::Lock.is_metadata() && !OpClass::Other.is_data());
    }
}
