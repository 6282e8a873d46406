//! NT security descriptors on files: the session's token, the descriptor a
//! file without a stored one has, and the [`braid_fs::AccessPolicy`] that
//! lets the file service check opens and creates against DACLs (MS-DTYP
//! 2.5.3.2, MS-FSA 2.1.5.1). Descriptors are stored by the file service
//! as self-relative bytes in the xattr `user.braid.sd`.

use std::sync::OnceLock;

use braid_fs::{AccessPolicy, FsError, FsResult, ObjectSecurity};
use braid_smb_proto::fscc::access::{self, Token};
use braid_smb_proto::fscc::security::{
    Acl, SecurityDescriptor, Sid, FILE_ALL_ACCESS, SE_DACL_PRESENT,
};

use crate::smb::session::Identity;

/// FNV-1a, 32 bits.
fn fnv(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ *b as u32).wrapping_mul(0x0100_0193)
    })
}

/// The server's domain: S-1-5-21-a-b-c, stable for the machine (derived
/// from /etc/machine-id, else the host name), as a Windows machine's
/// local account domain is.
fn domain() -> &'static [u32; 3] {
    static DOMAIN: OnceLock<[u32; 3]> = OnceLock::new();
    DOMAIN.get_or_init(|| {
        let seed = std::fs::read("/etc/machine-id")
            .ok()
            .filter(|s| !s.is_empty())
            .or_else(|| std::fs::read("/etc/hostname").ok())
            .unwrap_or_else(|| b"braid".to_vec());
        let mut out = [0u32; 3];
        for (i, o) in out.iter_mut().enumerate() {
            let mut s = seed.clone();
            s.push(i as u8);
            // Sub-authorities of real domains are large: keep the top bit.
            *o = fnv(&s) | 0x8000_0000;
        }
        out
    })
}

/// The server's account domain itself, S-1-5-21-a-b-c.
pub fn account_domain_sid() -> Sid {
    let d = domain();
    Sid::new(5, &[21, d[0], d[1], d[2]])
}

/// An account of the server's domain: its SID with `rid`.
pub fn domain_sid(rid: u32) -> Sid {
    let d = domain();
    Sid::new(5, &[21, d[0], d[1], d[2], rid])
}

/// RID of the domain's Users group, every user's primary group (a
/// standalone Windows or Samba server names it "None").
pub const DOMAIN_USERS_RID: u32 = 513;
/// RID of the Guest account, what guest sessions act as.
pub const GUEST_RID: u32 = 501;

/// A user's SID: the domain and a RID from the lower-cased user name
/// (1000 and above, as local accounts have).
pub fn user_sid(user: &str) -> Sid {
    let rid = 1000 + fnv(user.to_lowercase().as_bytes()) % 0x3FFF_0000;
    domain_sid(rid)
}

/// The token a session acts with: the user, its primary group (the
/// domain's Users, RID 513), Everyone, BUILTIN\\Users, NETWORK and
/// Authenticated Users. Guests get the Guest account (RID 501) and
/// BUILTIN\\Guests; anonymous sessions ANONYMOUS LOGON and NETWORK only.
/// No privileges.
pub fn token_of(identity: Option<&Identity>) -> Token {
    match identity {
        Some(i) if !i.anonymous && !i.guest => user_token(&i.user),
        Some(i) if i.guest => guest_token(),
        _ => anonymous_token(),
    }
}

fn user_token(user: &str) -> Token {
    Token {
        user: user_sid(user),
        primary_group: domain_sid(DOMAIN_USERS_RID),
        groups: vec![
            Sid::everyone(),
            Sid::builtin_users(),
            Sid::network(),
            Sid::authenticated_users(),
        ],
    }
}

fn guest_token() -> Token {
    Token {
        user: domain_sid(GUEST_RID),
        primary_group: domain_sid(514),
        groups: vec![Sid::everyone(), Sid::new(5, &[32, 546]), Sid::network()],
    }
}

fn anonymous_token() -> Token {
    Token {
        user: Sid::anonymous(),
        primary_group: Sid::anonymous(),
        groups: vec![Sid::network()],
    }
}

/// The descriptor of a file or directory with none stored, for the
/// requester `token`: owned by the requester and its primary group; the
/// requester and LOCAL SYSTEM have full control (the token's default DACL,
/// what Windows gives a new file with nothing to inherit); nothing is
/// inheritable. MS-DTYP 2.5.3.4 inheritance under a directory with this
/// descriptor gives exactly this descriptor again (the parent has no
/// inheritable ACE, so the new object gets the token's default DACL), so a
/// file created there need not store what it inherits: it reads back the
/// same to its creator. Without a stored owner, whoever asks is shown as
/// the owner and has full control, as before descriptors were kept.
pub fn default_descriptor(token: &Token) -> SecurityDescriptor {
    SecurityDescriptor {
        control: SE_DACL_PRESENT,
        owner: Some(token.user.clone()),
        group: Some(token.primary_group.clone()),
        sacl: None,
        dacl: Some(token.default_dacl()),
    }
}

/// What a stored descriptor that does not decode (damaged or written by
/// something else on the host) stands for: an empty DACL and no owner,
/// which grants nobody anything. Failing closed; the host administrator
/// removes the xattr to restore the default.
fn undecodable_descriptor() -> SecurityDescriptor {
    SecurityDescriptor {
        control: SE_DACL_PRESENT,
        owner: None,
        group: None,
        sacl: None,
        dacl: Some(Acl::new(Vec::new())),
    }
}

/// The descriptor that governs `o` for `token`: its stored one, or the
/// default when none is stored.
pub fn effective_descriptor(o: &ObjectSecurity, token: &Token) -> SecurityDescriptor {
    match o.descriptor.as_deref().map(SecurityDescriptor::decode) {
        Some(Ok(sd)) => sd,
        Some(Err(_)) => undecodable_descriptor(),
        None => default_descriptor(token),
    }
}

/// Who a session is, as far as its token goes.
enum Who {
    User(String),
    Guest,
    Anonymous,
}

/// A session's access rules for one CREATE. The token is built only when
/// a stored descriptor is looked at: files without one need none.
pub struct SmbAccess {
    who: Who,
    token: OnceLock<Token>,
    /// The SD_BUFFER create context (MS-SMB2 2.2.13.2.1), if any.
    creator: Option<SecurityDescriptor>,
    /// What the share grants (the tree connect's MaximalAccess,
    /// `share_access.rs`): no file grants more.
    share_grant: u32,
}

impl SmbAccess {
    pub fn new(identity: Option<&Identity>, creator: Option<SecurityDescriptor>) -> SmbAccess {
        let who = match identity {
            Some(i) if !i.anonymous && !i.guest => Who::User(i.user.clone()),
            Some(i) if i.guest => Who::Guest,
            _ => Who::Anonymous,
        };
        SmbAccess {
            who,
            token: OnceLock::new(),
            creator,
            share_grant: FILE_ALL_ACCESS,
        }
    }

    /// At most `share_grant` on any file, as a Windows share's permissions
    /// bound what a file's DACL grants.
    pub fn within(self, share_grant: u32) -> SmbAccess {
        SmbAccess {
            share_grant,
            ..self
        }
    }

    fn token(&self) -> &Token {
        self.token.get_or_init(|| match &self.who {
            Who::User(u) => user_token(u),
            Who::Guest => guest_token(),
            Who::Anonymous => anonymous_token(),
        })
    }
}

impl AccessPolicy for SmbAccess {
    fn maximal_access(&self, object: &ObjectSecurity) -> u32 {
        if object.descriptor.is_none() {
            // The default grants its asker full control (default_descriptor).
            return self.share_grant;
        }
        let token = self.token();
        access::maximal_access(&effective_descriptor(object, token), token) & self.share_grant
    }

    fn new_descriptor(
        &self,
        parent: &ObjectSecurity,
        is_directory: bool,
    ) -> FsResult<Option<Vec<u8>>> {
        if parent.descriptor.is_none() && self.creator.is_none() {
            // Inheritance from the default gives the default: store none.
            return Ok(None);
        }
        let token = self.token();
        let p = effective_descriptor(parent, token);
        let sd = access::inherit(&p, self.creator.as_ref(), is_directory, token);
        access::encode_checked(&sd)
            .map(Some)
            .map_err(|_| FsError::InvalidParameter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_user_sids_are_stable_and_distinct() {
        assert_eq!(user_sid("Alice"), user_sid("alice"));
        assert_ne!(user_sid("alice"), user_sid("bob"));
        let s = user_sid("alice").to_string();
        assert!(s.starts_with("S-1-5-21-"), "{s}");
    }

    #[test]
    fn acl_default_is_what_inheriting_the_default_gives() {
        for t in [
            token_of(None),
            user_token("alice"),
            guest_token(),
            anonymous_token(),
        ] {
            let d = default_descriptor(&t);
            assert_eq!(access::maximal_access(&d, &t), FILE_ALL_ACCESS);
            for is_dir in [false, true] {
                assert_eq!(access::inherit(&d, None, is_dir, &t), d, "{is_dir}");
            }
        }
    }

    #[test]
    fn acl_nothing_stored_below_the_default() {
        let alice = Identity {
            user: "alice".into(),
            domain: String::new(),
            anonymous: false,
            guest: false,
            workstation: String::new(),
            owner: None,
        };
        let p = SmbAccess::new(Some(&alice), None);
        let none = ObjectSecurity {
            descriptor: None,
            is_directory: true,
        };
        assert_eq!(p.new_descriptor(&none, false).unwrap(), None);
        assert_eq!(p.maximal_access(&none), FILE_ALL_ACCESS);
        assert!(p.token.get().is_none(), "no token built for the default");
        // Below a stored descriptor, the new object stores what it inherits.
        let stored = ObjectSecurity {
            descriptor: Some(default_descriptor(&user_token("bob")).encode()),
            is_directory: true,
        };
        let sd = p.new_descriptor(&stored, false).unwrap().unwrap();
        assert_eq!(sd, default_descriptor(&user_token("alice")).encode());
        // Bob's file is not Alice's.
        assert_eq!(p.maximal_access(&stored), 0);
        // A creator descriptor is stored even below the default.
        let p = SmbAccess::new(Some(&alice), Some(default_descriptor(&guest_token())));
        assert!(p.new_descriptor(&none, true).unwrap().is_some());
    }

    #[test]
    fn acl_undecodable_grants_nothing() {
        let p = SmbAccess::new(None, None);
        let bad = ObjectSecurity {
            descriptor: Some(vec![1, 0, 4]),
            is_directory: false,
        };
        assert_eq!(p.maximal_access(&bad), 0);
    }
}
