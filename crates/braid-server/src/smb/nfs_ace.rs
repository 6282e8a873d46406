//! The UNIX mode, owner and group as "NFS" ACEs, for macOS clients that
//! negotiated AAPL SUPPORTS_NFS_ACE (`ops/create_aapl.rs`): Finder's
//! permission panel reads and sets them. They are virtual: S-1-5-88-1-uid,
//! S-1-5-88-2-gid and S-1-5-88-3-mode, access-denied ACEs granting nothing
//! (the SIDs Windows' NFS server uses, and Samba's vfs_fruit adds), appended
//! to the DACL a client reads and taken out of one it sets, where a mode
//! ACE becomes a chmod. None is ever stored.

use braid_fs::UnixIdentity;
use braid_smb_proto::fscc::security::{Ace, SecurityDescriptor, Sid, SE_DACL_PRESENT};

/// S-1-5-88: the NT authority's "NFS" subauthority.
const NT_AUTHORITY: u64 = 5;
const NFS: u32 = 88;
const NFS_USER: u32 = 1;
const NFS_GROUP: u32 = 2;
const NFS_MODE: u32 = 3;

fn nfs_sid(kind: u32, value: u32) -> Sid {
    Sid::new(NT_AUTHORITY, &[NFS, kind, value])
}

/// The NFS kind (user, group, mode) and value of `sid`, if it is one.
fn nfs_parts(sid: &Sid) -> Option<(u32, u32)> {
    match (sid.authority, sid.sub_authorities.as_slice()) {
        (NT_AUTHORITY, [NFS, kind, value]) => Some((*kind, *value)),
        _ => None,
    }
}

fn is_nfs_ace(ace: &Ace) -> bool {
    matches!(ace, Ace::Standard { sid, .. } if nfs_parts(sid).is_some())
}

/// Add the file's mode, owner and group to a DACL being returned (one of
/// each; any stored ones are dropped first). A descriptor without a DACL,
/// because the client did not ask for it, is left alone.
pub fn add_to(sd: &mut SecurityDescriptor, who: UnixIdentity) {
    let Some(dacl) = sd.dacl.as_mut() else {
        return;
    };
    dacl.aces.retain(|a| !is_nfs_ace(a));
    for (kind, value) in [
        (NFS_MODE, who.mode),
        (NFS_USER, who.uid),
        (NFS_GROUP, who.gid),
    ] {
        dacl.aces.push(Ace::denied(nfs_sid(kind, value), 0, 0));
    }
}

/// Take the NFS ACEs out of a DACL being set; returns the permission bits
/// of its mode ACE, if it has one. A DACL that held nothing else is
/// removed (the client set only the mode), so that the stored one stays.
pub fn take_from(sd: &mut SecurityDescriptor) -> Option<u32> {
    let dacl = sd.dacl.as_mut()?;
    let had_aces = !dacl.aces.is_empty();
    let mode = dacl.aces.iter().find_map(|a| match a {
        Ace::Standard { sid, .. } => match nfs_parts(sid) {
            Some((NFS_MODE, mode)) => Some(mode & 0o777),
            _ => None,
        },
        Ace::Opaque { .. } => None,
    });
    dacl.aces.retain(|a| !is_nfs_ace(a));
    if had_aces && dacl.aces.is_empty() {
        sd.dacl = None;
        sd.control &= !SE_DACL_PRESENT;
    }
    mode
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_smb_proto::fscc::security::Acl;

    fn everyone_allowed() -> Ace {
        Ace::allowed(Sid::new(1, &[0]), 0x001F_01FF, 0)
    }

    fn sd_with(aces: Vec<Ace>) -> SecurityDescriptor {
        SecurityDescriptor {
            control: SE_DACL_PRESENT,
            owner: None,
            group: None,
            sacl: None,
            dacl: Some(Acl::new(aces)),
        }
    }

    #[test]
    fn one_of_each_is_added_and_stale_ones_go() {
        let mut sd = sd_with(vec![
            everyone_allowed(),
            Ace::denied(nfs_sid(NFS_USER, 27), 0, 0),
            Ace::denied(nfs_sid(NFS_USER, 27), 0, 0),
        ]);
        add_to(
            &mut sd,
            UnixIdentity {
                mode: 0o100640,
                uid: 1000,
                gid: 100,
            },
        );
        let aces = &sd.dacl.as_ref().unwrap().aces;
        assert_eq!(aces.len(), 4);
        assert_eq!(aces[0], everyone_allowed());
        assert_eq!(aces[1], Ace::denied(nfs_sid(NFS_MODE, 0o100640), 0, 0));
        assert_eq!(aces[2], Ace::denied(nfs_sid(NFS_USER, 1000), 0, 0));
        assert_eq!(aces[3], Ace::denied(nfs_sid(NFS_GROUP, 100), 0, 0));
        // No DACL asked for: none added.
        let mut bare = SecurityDescriptor {
            dacl: None,
            ..sd_with(vec![])
        };
        add_to(
            &mut bare,
            UnixIdentity {
                mode: 0,
                uid: 0,
                gid: 0,
            },
        );
        assert!(bare.dacl.is_none());
    }

    #[test]
    fn the_mode_ace_is_taken_out_as_a_chmod() {
        let mut sd = sd_with(vec![
            everyone_allowed(),
            Ace::denied(nfs_sid(NFS_MODE, 0o100751), 0, 0),
            Ace::denied(nfs_sid(NFS_GROUP, 300), 0, 0),
        ]);
        assert_eq!(take_from(&mut sd), Some(0o751));
        assert_eq!(sd.dacl.as_ref().unwrap().aces, vec![everyone_allowed()]);
        // Only NFS ACEs: the DACL is not set at all.
        let mut only = sd_with(vec![Ace::denied(nfs_sid(NFS_MODE, 0o644), 0, 0)]);
        assert_eq!(take_from(&mut only), Some(0o644));
        assert!(only.dacl.is_none());
        assert_eq!(only.control & SE_DACL_PRESENT, 0);
        // An empty DACL stays an empty DACL (deny everyone).
        let mut empty = sd_with(vec![]);
        assert_eq!(take_from(&mut empty), None);
        assert!(empty.dacl.is_some());
        // Other S-1-5 SIDs are not NFS ACEs.
        let mut other = sd_with(vec![Ace::denied(Sid::new(5, &[88, 3]), 0, 0)]);
        assert_eq!(take_from(&mut other), None);
        assert_eq!(other.dacl.unwrap().aces.len(), 1);
    }
}
