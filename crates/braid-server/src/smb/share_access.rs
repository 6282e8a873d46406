//! Share-level access: who may connect to a share, and whether they may
//! change anything in it (Samba's `valid users`, `read only`, `read list`
//! and `write list`).
//!
//! The answer is the tree connect's MaximalAccess (MS-SMB2 3.3.1.9
//! TreeConnect.MaximalAccess, returned in 2.2.10). Every open on the tree
//! is granted at most that: the file's own DACL applies within it, as a
//! Windows share's permissions and the file's ACL both must allow an
//! access (`smb/acl.rs`, `SmbAccess::within`).

use crate::smb::session::Identity;

/// FILE_ALL_ACCESS (MS-SMB2 2.2.13.1.1): a writable share grants all.
pub const FULL_ACCESS: u32 = 0x001F_01FF;

/// FILE_GENERIC_READ | FILE_GENERIC_EXECUTE (MS-DTYP 2.4.3): what a
/// read-only share grants, as Windows' "Read" share permission and
/// Samba's `read only = yes` do (0x001200A9). Without FILE_WRITE_DATA,
/// FILE_APPEND_DATA, FILE_WRITE_EA, FILE_WRITE_ATTRIBUTES,
/// FILE_DELETE_CHILD, DELETE, WRITE_DAC and WRITE_OWNER nothing in the
/// share can be created, changed, renamed or deleted.
pub const READ_ONLY_ACCESS: u32 = 0x0012_00A9;

/// One share's rules. User names compare case-insensitively, as logons do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareAccess {
    /// Nobody may change the share, but for `write_list`.
    pub read_only: bool,
    /// Only these users may connect; empty: every authenticated user
    /// (and guests, when the server allows them).
    pub valid_users: Vec<String>,
    /// These users may only read, even on a writable share.
    pub read_list: Vec<String>,
    /// These users may write, even on a read-only share; this wins over
    /// `read_list`, as in Samba.
    pub write_list: Vec<String>,
    /// Client addresses that may connect to the share (`hosts_allow`,
    /// `hosts_deny`), checked at TREE_CONNECT.
    pub hosts: crate::host_access::HostRules,
    /// Guest and anonymous sessions may connect (Samba's `guest ok`);
    /// otherwise only authenticated users may.
    pub guest_ok: bool,
}

impl ShareAccess {
    /// The rights a tree connect of `identity` gets: `None` when it may
    /// not connect at all (STATUS_ACCESS_DENIED).
    pub fn maximal_access(&self, identity: Option<&Identity>) -> Option<u32> {
        // Guests and anonymous sessions have no name to be listed by,
        // and reach only the shares open to guests.
        let user = identity
            .filter(|i| !i.anonymous && !i.guest)
            .map(|i| i.user.as_str());
        if user.is_none() && !self.guest_ok {
            return None;
        }
        let listed =
            |list: &[String]| user.is_some_and(|u| list.iter().any(|n| n.eq_ignore_ascii_case(u)));
        if !self.valid_users.is_empty() && !listed(&self.valid_users) {
            return None;
        }
        let writable = listed(&self.write_list) || (!self.read_only && !listed(&self.read_list));
        Some(if writable {
            FULL_ACCESS
        } else {
            READ_ONLY_ACCESS
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> Identity {
        Identity {
            user: name.into(),
            ..Identity::default()
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_open_share_lets_every_user_write_and_no_guest_in() {
        let rules = ShareAccess::default();
        assert_eq!(
            rules.maximal_access(Some(&user("alice"))),
            Some(FULL_ACCESS)
        );
        let anonymous = Identity {
            anonymous: true,
            ..user("")
        };
        assert_eq!(rules.maximal_access(Some(&anonymous)), None);
        assert_eq!(rules.maximal_access(None), None);
    }

    #[test]
    fn a_guest_share_takes_guests_within_its_other_rules() {
        let anonymous = Identity {
            anonymous: true,
            ..user("")
        };
        let public = ShareAccess {
            guest_ok: true,
            ..ShareAccess::default()
        };
        assert_eq!(public.maximal_access(Some(&anonymous)), Some(FULL_ACCESS));
        let read_only = ShareAccess {
            read_only: true,
            ..public.clone()
        };
        assert_eq!(
            read_only.maximal_access(Some(&anonymous)),
            Some(READ_ONLY_ACCESS)
        );
        let listed = ShareAccess {
            valid_users: names(&["alice"]),
            ..public
        };
        assert_eq!(listed.maximal_access(Some(&anonymous)), None);
    }

    #[test]
    fn valid_users_keep_others_out() {
        let rules = ShareAccess {
            valid_users: names(&["Alice"]),
            ..ShareAccess::default()
        };
        assert_eq!(
            rules.maximal_access(Some(&user("alice"))),
            Some(FULL_ACCESS)
        );
        assert_eq!(rules.maximal_access(Some(&user("bob"))), None);
        let guest = Identity {
            guest: true,
            ..user("alice")
        };
        assert_eq!(
            rules.maximal_access(Some(&guest)),
            None,
            "a guest is nobody's name"
        );
        assert_eq!(rules.maximal_access(None), None);
    }

    #[test]
    fn read_only_with_a_write_list() {
        let rules = ShareAccess {
            read_only: true,
            write_list: names(&["editor"]),
            read_list: names(&["editor"]),
            ..ShareAccess::default()
        };
        assert_eq!(
            rules.maximal_access(Some(&user("reader"))),
            Some(READ_ONLY_ACCESS)
        );
        assert_eq!(
            rules.maximal_access(Some(&user("EDITOR"))),
            Some(FULL_ACCESS),
            "write list wins"
        );
    }

    #[test]
    fn read_list_on_a_writable_share() {
        let rules = ShareAccess {
            read_list: names(&["intern"]),
            ..ShareAccess::default()
        };
        assert_eq!(
            rules.maximal_access(Some(&user("intern"))),
            Some(READ_ONLY_ACCESS)
        );
        assert_eq!(
            rules.maximal_access(Some(&user("alice"))),
            Some(FULL_ACCESS)
        );
    }
}
