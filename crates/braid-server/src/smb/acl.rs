//! NT security descriptors on files: the session's token, the descriptor a
//! file without a stored one has, and the [`braid_fs::AccessPolicy`] that
//! lets the file service check opens and creates against DACLs (MS-DTYP
//! 2.5.3.2, MS-FSA 2.1.5.1). Descriptors are stored by the file service
//! as self-relative bytes in the xattr `user.braid.sd`.

use std::sync::OnceLock;

use braid_fs::{AccessPolicy, FsError, FsResult, ObjectSecurity};
use braid_smb_proto::fscc::access::{self, Token};
use braid_smb_proto::fscc::security::{
    build_file_security_descriptor, SecurityDescriptor, Sid, DACL_SECURITY_INFORMATION,
    GROUP_SECURITY_INFORMATION, OWNER_SECURITY_INFORMATION,
};

use crate::session::Identity;

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

fn domain_sid(rid: u32) -> Sid {
    let d = domain();
    Sid::new(5, &[21, d[0], d[1], d[2], rid])
}

/// A user's SID: the domain and a RID from the lower-cased user name
/// (1000 and above, as local accounts have).
pub fn user_sid(user: &str) -> Sid {
    let rid = 1000 + fnv(user.to_lowercase().as_bytes()) % 0x3FFF_0000;
    domain_sid(rid)
}

/// The token a session acts with: the user, its primary group (the
/// domain's Users, RID 513), Everyone, BUILTIN\Users, NETWORK and
/// Authenticated Users. Guests get the Guest account (RID 501) and
/// BUILTIN\Guests; anonymous sessions ANONYMOUS LOGON and NETWORK only.
/// No privileges.
pub fn token_of(identity: Option<&Identity>) -> Token {
    match identity {
        Some(i) if !i.anonymous && !i.guest => Token {
            user: user_sid(&i.user),
            primary_group: domain_sid(513),
            groups: vec![
                Sid::everyone(),
                Sid::builtin_users(),
                Sid::network(),
                Sid::authenticated_users(),
            ],
        },
        Some(i) if i.guest => Token {
            user: domain_sid(501),
            primary_group: domain_sid(514),
            groups: vec![Sid::everyone(), Sid::new(5, &[32, 546]), Sid::network()],
        },
        _ => Token {
            user: Sid::anonymous(),
            primary_group: Sid::anonymous(),
            groups: vec![Sid::network()],
        },
    }
}

/// The descriptor of a file or directory with none stored (the share
/// root, files from before descriptors were kept or made on the host):
/// owned by the asking user, who has full control; group and Everyone may
/// read and execute. Nothing is inheritable, so what is created in such a
/// directory gets the creator's default DACL.
pub fn legacy_descriptor(token: &Token, is_directory: bool) -> SecurityDescriptor {
    build_file_security_descriptor(
        &token.user,
        &token.primary_group,
        0o755,
        is_directory,
        OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
    )
}

/// The descriptor that governs `o`: its stored one, or the legacy one
/// when none is stored or the stored bytes do not decode.
pub fn effective_descriptor(o: &ObjectSecurity, token: &Token) -> SecurityDescriptor {
    match o.descriptor.as_deref().map(SecurityDescriptor::decode) {
        Some(Ok(sd)) => sd,
        _ => legacy_descriptor(token, o.is_directory),
    }
}

/// A session's access rules for one CREATE.
pub struct SmbAccess {
    pub token: Token,
    /// The SD_BUFFER create context (MS-SMB2 2.2.13.2.1), if any.
    pub creator: Option<SecurityDescriptor>,
}

impl AccessPolicy for SmbAccess {
    fn maximal_access(&self, object: &ObjectSecurity) -> u32 {
        access::maximal_access(&effective_descriptor(object, &self.token), &self.token)
    }

    fn new_descriptor(&self, parent: &ObjectSecurity, is_directory: bool) -> FsResult<Vec<u8>> {
        let p = effective_descriptor(parent, &self.token);
        let sd = access::inherit(&p, self.creator.as_ref(), is_directory, &self.token);
        access::encode_checked(&sd).map_err(|_| FsError::InvalidParameter)
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
    fn acl_legacy_grants_the_asker() {
        let t = token_of(None);
        let sd = legacy_descriptor(&t, true);
        assert_eq!(
            access::maximal_access(&sd, &t),
            braid_smb_proto::fscc::security::FILE_ALL_ACCESS
        );
    }
}
