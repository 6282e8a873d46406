//! Access checks and inheritance on security descriptors (MS-DTYP 2.5.3),
//! sans-IO: a token and descriptors in, an access mask or a descriptor out.
//!
//! * [`Token`] — the SIDs a session acts with.
//! * [`maximal_access`] — MS-DTYP 2.5.3.2 AccessCheck with
//!   MAXIMUM_ALLOWED: the rights a DACL grants a token.
//! * [`inherit`] — MS-DTYP 2.5.3.4 CreateSecurityDescriptor: the
//!   descriptor of a new file or directory from its parent's and the
//!   creator's.
//! * [`apply_set`] — MS-SMB2 3.3.5.21.3: merge the parts a SET_INFO
//!   supplies into a stored descriptor.

use super::security::*;

/// The generic rights (MS-DTYP 2.4.3).
pub const GENERIC_ALL: u32 = 0x1000_0000;
pub const GENERIC_EXECUTE: u32 = 0x2000_0000;
pub const GENERIC_WRITE: u32 = 0x4000_0000;
pub const GENERIC_READ: u32 = 0x8000_0000;
const GENERIC_BITS: u32 = GENERIC_ALL | GENERIC_EXECUTE | GENERIC_WRITE | GENERIC_READ;

/// Rights an ACE can grant on a file: the specific and standard rights.
const GRANTABLE: u32 = FILE_ALL_ACCESS;

/// Map GENERIC_* bits to the file rights (MS-SMB2 2.2.13.1.1 / MS-DTYP
/// 2.4.3 GENERIC_MAPPING for files). Other bits are kept.
pub fn map_generic(mut a: u32) -> u32 {
    if a & GENERIC_READ != 0 {
        a |= FILE_GENERIC_READ;
    }
    if a & GENERIC_WRITE != 0 {
        a |= FILE_GENERIC_WRITE;
    }
    if a & GENERIC_EXECUTE != 0 {
        a |= FILE_GENERIC_EXECUTE;
    }
    if a & GENERIC_ALL != 0 {
        a |= FILE_ALL_ACCESS;
    }
    a & !GENERIC_BITS
}

impl Sid {
    /// S-1-3-1, CREATOR GROUP.
    pub fn creator_group() -> Self {
        Sid::new(3, &[1])
    }
    /// S-1-3-4, OWNER RIGHTS.
    pub fn owner_rights() -> Self {
        Sid::new(3, &[4])
    }
    /// S-1-5-11, Authenticated Users.
    pub fn authenticated_users() -> Self {
        Sid::new(5, &[11])
    }
    /// S-1-5-7, ANONYMOUS LOGON.
    pub fn anonymous() -> Self {
        Sid::new(5, &[7])
    }
    /// S-1-5-2, NETWORK.
    pub fn network() -> Self {
        Sid::new(5, &[2])
    }
    /// S-1-5-32-545, BUILTIN\Users.
    pub fn builtin_users() -> Self {
        Sid::new(5, &[32, 545])
    }
}

/// The identity an access check runs with (MS-DTYP 2.5.2 Token): the
/// user, its primary group (the default group of what it creates) and the
/// groups it belongs to. No privileges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub user: Sid,
    pub primary_group: Sid,
    pub groups: Vec<Sid>,
}

impl Token {
    /// MS-DTYP 2.5.3.1.1 SidInToken.
    pub fn has(&self, sid: &Sid) -> bool {
        self.user == *sid || self.primary_group == *sid || self.groups.contains(sid)
    }

    /// The token's default DACL (what a new object without inheritable
    /// ACEs from its parent gets): the user and LOCAL SYSTEM, full control.
    pub fn default_dacl(&self) -> Acl {
        Acl::new(vec![
            Ace::allowed(self.user.clone(), FILE_ALL_ACCESS, 0),
            Ace::allowed(Sid::local_system(), FILE_ALL_ACCESS, 0),
        ])
    }
}

/// MS-DTYP 2.5.3.2 AccessCheck with MAXIMUM_ALLOWED: the rights `sd`
/// grants `token`. A NULL (absent) DACL grants everything, an empty one
/// nothing. The owner is implicitly granted READ_CONTROL and WRITE_DAC
/// unless an OWNER RIGHTS (S-1-3-4) ACE is present, which then says what
/// the owner gets. INHERIT_ONLY ACEs take no part; ACE masks are
/// generic-mapped. ACCESS_SYSTEM_SECURITY is never granted (it needs a
/// privilege).
pub fn maximal_access(sd: &SecurityDescriptor, token: &Token) -> u32 {
    let Some(dacl) = &sd.dacl else {
        return GRANTABLE;
    };
    let owner_rights = Sid::owner_rights();
    let is_owner = sd.owner.as_ref().is_some_and(|o| token.has(o));
    let has_owner_rights_ace = dacl.aces.iter().any(|a| {
        matches!(a, Ace::Standard { sid, flags, .. }
            if *sid == owner_rights && flags & INHERIT_ONLY_ACE == 0)
    });
    let mut allowed = 0u32;
    let mut denied = 0u32;
    if is_owner && !has_owner_rights_ace {
        allowed |= READ_CONTROL | WRITE_DAC;
    }
    for ace in &dacl.aces {
        let Ace::Standard {
            ace_type,
            flags,
            mask,
            sid,
        } = ace
        else {
            continue;
        };
        if flags & INHERIT_ONLY_ACE != 0 {
            continue;
        }
        if !(token.has(sid) || (is_owner && *sid == owner_rights)) {
            continue;
        }
        let m = map_generic(*mask) & GRANTABLE;
        match *ace_type {
            ACCESS_ALLOWED_ACE_TYPE => allowed |= m & !denied,
            ACCESS_DENIED_ACE_TYPE => denied |= m & !allowed,
            _ => {}
        }
    }
    allowed
}

/// The ACEs a child inherits from one parent ACE (MS-DTYP 2.5.3.4.2
/// ComputeInheritedACLFromParent / 2.5.3.4.3 ContainsInheritableACEs),
/// with CREATOR OWNER / CREATOR GROUP replaced by the new object's owner
/// and group in the ACE that takes effect.
fn inherit_ace(
    ace: &Ace,
    is_dir: bool,
    (owner, group): (&Sid, &Sid),
    inherited: u8,
    out: &mut Vec<Ace>,
) {
    let Ace::Standard {
        ace_type,
        flags,
        mask,
        sid,
    } = ace
    else {
        return;
    };
    if !matches!(*ace_type, ACCESS_ALLOWED_ACE_TYPE | ACCESS_DENIED_ACE_TYPE) {
        return;
    }
    let oi = flags & OBJECT_INHERIT_ACE != 0;
    let ci = flags & CONTAINER_INHERIT_ACE != 0;
    let np = flags & NO_PROPAGATE_INHERIT_ACE != 0;
    const INHERIT_FLAGS: u8 =
        OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE | NO_PROPAGATE_INHERIT_ACE | INHERIT_ONLY_ACE;
    let other_flags = flags & !(INHERIT_FLAGS | INHERITED_ACE);
    let effective_sid = if *sid == Sid::creator_owner() {
        owner.clone()
    } else if *sid == Sid::creator_group() {
        group.clone()
    } else {
        sid.clone()
    };
    let effective = |mask: u32| Ace::Standard {
        ace_type: *ace_type,
        flags: other_flags | inherited,
        mask,
        sid: effective_sid.clone(),
    };
    if !is_dir {
        if oi {
            out.push(effective(map_generic(*mask)));
        }
        return;
    }
    if ci {
        if np {
            out.push(effective(map_generic(*mask)));
            return;
        }
        let needs_split = effective_sid != *sid || *mask & GENERIC_BITS != 0;
        if needs_split {
            // One ACE that applies here, one that passes on unchanged.
            out.push(effective(map_generic(*mask)));
            out.push(Ace::Standard {
                ace_type: *ace_type,
                flags: (flags & !INHERITED_ACE) | INHERIT_ONLY_ACE | inherited,
                mask: *mask,
                sid: sid.clone(),
            });
        } else {
            out.push(Ace::Standard {
                ace_type: *ace_type,
                flags: (flags & !(INHERIT_ONLY_ACE | INHERITED_ACE)) | inherited,
                mask: *mask,
                sid: sid.clone(),
            });
        }
    } else if oi && !np {
        // Only for files below: inherit-only on the directory.
        out.push(Ace::Standard {
            ace_type: *ace_type,
            flags: (flags & !INHERITED_ACE) | INHERIT_ONLY_ACE | inherited,
            mask: *mask,
            sid: sid.clone(),
        });
    }
}

/// MS-DTYP 2.5.3.4 CreateSecurityDescriptor for a new file or directory:
///
/// * owner and group: the creator descriptor's, else the token's user and
///   primary group;
/// * DACL: the creator's when it has one (SE_DACL_PRESENT; a NULL DACL
///   stays NULL), else the parent's inheritable ACEs (marked INHERITED_ACE,
///   with SE_DACL_AUTO_INHERITED), else the token's default DACL;
/// * SACL: the creator's, if any.
pub fn inherit(
    parent: &SecurityDescriptor,
    creator: Option<&SecurityDescriptor>,
    is_dir: bool,
    token: &Token,
) -> SecurityDescriptor {
    let owner = creator
        .and_then(|c| c.owner.clone())
        .unwrap_or_else(|| token.user.clone());
    let group = creator
        .and_then(|c| c.group.clone())
        .unwrap_or_else(|| token.primary_group.clone());
    let mut control = 0u16;
    let creator_dacl = creator.filter(|c| c.control & SE_DACL_PRESENT != 0 || c.dacl.is_some());
    let dacl = if let Some(c) = creator_dacl {
        control |= c.control & (SE_DACL_PROTECTED | SE_DACL_AUTO_INHERITED);
        control |= SE_DACL_PRESENT;
        c.dacl.clone()
    } else {
        // Inherited ACEs are marked as such (and the DACL as
        // auto-inherited) when the parent's DACL is auto-inherited, as
        // Windows does.
        let auto = parent.control & SE_DACL_AUTO_INHERITED != 0;
        let inherited = if auto { INHERITED_ACE } else { 0 };
        let mut aces = Vec::new();
        if let Some(pd) = &parent.dacl {
            for a in &pd.aces {
                inherit_ace(a, is_dir, (&owner, &group), inherited, &mut aces);
            }
        }
        control |= SE_DACL_PRESENT;
        if aces.is_empty() {
            Some(token.default_dacl())
        } else {
            if auto {
                control |= SE_DACL_AUTO_INHERITED;
            }
            Some(Acl::new(aces))
        }
    };
    let sacl = creator.and_then(|c| c.sacl.clone());
    if sacl.is_some() {
        control |= SE_SACL_PRESENT;
    }
    SecurityDescriptor {
        control,
        owner: Some(owner),
        group: Some(group),
        sacl,
        dacl,
    }
}

/// The DACL inheritance bits of a descriptor a client supplies (a set, or
/// a create's SD_BUFFER), before it is applied. `canonical` (the default,
/// as Windows does, and Samba's `acl flag inherited canonicalization =
/// yes`): SE_DACL_AUTO_INHERITED is kept only when sent together with
/// SE_DACL_AUTO_INHERIT_REQ (smbtorture smb2.acls.INHERITFLAGS). Not
/// canonical: kept as sent (smb2.acls_non_canonical). The request bit is
/// never kept.
pub fn canonicalize_dacl_flags(sd: &mut SecurityDescriptor, canonical: bool) {
    let both = SE_DACL_AUTO_INHERITED | SE_DACL_AUTO_INHERIT_REQ;
    if canonical && sd.control & both != both {
        sd.control &= !SE_DACL_AUTO_INHERITED;
    }
    sd.control &= !SE_DACL_AUTO_INHERIT_REQ;
}

/// MS-SMB2 2.2.39 AdditionalInformation bits that change the DACL's
/// protection with a DACL.
pub const PROTECTED_DACL_SECURITY_INFORMATION: u32 = 0x8000_0000;
pub const UNPROTECTED_DACL_SECURITY_INFORMATION: u32 = 0x2000_0000;

/// MS-SMB2 3.3.5.21.3 / MS-FSA 2.1.5.16: the descriptor after a SET_INFO
/// that supplies `new` for the parts `info` names (OWNER, GROUP, DACL,
/// SACL). A part `new` lacks leaves the stored one; a DACL part without
/// SE_DACL_PRESENT sets a NULL DACL. `new` has been through
/// [`canonicalize_dacl_flags`].
pub fn apply_set(
    stored: &SecurityDescriptor,
    new: &SecurityDescriptor,
    info: u32,
) -> SecurityDescriptor {
    let mut sd = stored.clone();
    if info & OWNER_SECURITY_INFORMATION != 0 {
        if let Some(o) = &new.owner {
            sd.owner = Some(o.clone());
        }
    }
    if info & GROUP_SECURITY_INFORMATION != 0 {
        if let Some(g) = &new.group {
            sd.group = Some(g.clone());
        }
    }
    if info & DACL_SECURITY_INFORMATION != 0 {
        const DACL_BITS: u16 =
            SE_DACL_PRESENT | SE_DACL_DEFAULTED | SE_DACL_PROTECTED | SE_DACL_AUTO_INHERITED;
        sd.control &= !(DACL_BITS | SE_DACL_AUTO_INHERIT_REQ);
        sd.control |= new.control & DACL_BITS;
        sd.control |= SE_DACL_PRESENT;
        sd.dacl = if new.control & SE_DACL_PRESENT != 0 {
            new.dacl.clone().map(map_acl_generic)
        } else {
            None
        };
        if info & PROTECTED_DACL_SECURITY_INFORMATION != 0 {
            sd.control |= SE_DACL_PROTECTED;
        } else if info & UNPROTECTED_DACL_SECURITY_INFORMATION != 0 {
            sd.control &= !SE_DACL_PROTECTED;
        }
    }
    if info & SACL_SECURITY_INFORMATION != 0 {
        sd.control &= !(SE_SACL_PRESENT | SE_SACL_PROTECTED | SE_SACL_AUTO_INHERITED);
        sd.control |= new.control & (SE_SACL_PROTECTED | SE_SACL_AUTO_INHERITED);
        sd.sacl = new.sacl.clone();
    }
    sd.control &= !SE_SELF_RELATIVE;
    sd
}

/// Generic rights in the ACEs that apply to the object itself become
/// specific ones (MS-DTYP 2.5.3.4 / Windows SetSecurityInfo: a DACL is
/// stored mapped); INHERIT_ONLY ACEs keep theirs for the children.
pub fn map_acl_generic(mut acl: Acl) -> Acl {
    for a in &mut acl.aces {
        if let Ace::Standard { flags, mask, .. } = a {
            if *flags & INHERIT_ONLY_ACE == 0 {
                *mask = map_generic(*mask);
            }
        }
    }
    acl
}

/// Encode `sd`, or an error when an ACL or ACE would not fit its 16-bit
/// size field (possible after inheritance splits ACEs).
pub fn encode_checked(sd: &SecurityDescriptor) -> Result<Vec<u8>, super::FsccError> {
    for acl in [&sd.dacl, &sd.sacl].into_iter().flatten() {
        if acl.wire_len() > u16::MAX as usize || acl.aces.len() > u16::MAX as usize {
            return Err(super::FsccError::InvalidSecurityDescriptor("ACL too large"));
        }
    }
    Ok(sd.encode())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn user() -> Sid {
        "S-1-5-21-1-2-3-1000".parse().unwrap()
    }
    fn token() -> Token {
        Token {
            user: user(),
            primary_group: "S-1-5-21-1-2-3-513".parse().unwrap(),
            groups: vec![Sid::everyone(), Sid::authenticated_users()],
        }
    }
    fn sd(owner: Sid, aces: Option<Vec<Ace>>) -> SecurityDescriptor {
        SecurityDescriptor {
            control: SE_DACL_PRESENT,
            owner: Some(owner),
            group: None,
            sacl: None,
            dacl: aces.map(Acl::new),
        }
    }

    #[test]
    fn access_null_and_empty_dacl() {
        let other: Sid = "S-1-5-21-9-9-9-9".parse().unwrap();
        assert_eq!(
            maximal_access(&sd(other.clone(), None), &token()),
            FILE_ALL_ACCESS
        );
        assert_eq!(maximal_access(&sd(other, Some(vec![])), &token()), 0);
        // The owner keeps READ_CONTROL | WRITE_DAC with an empty DACL.
        assert_eq!(
            maximal_access(&sd(user(), Some(vec![])), &token()),
            READ_CONTROL | WRITE_DAC
        );
    }

    #[test]
    fn access_deny_order_and_generic() {
        let t = token();
        let aces = vec![
            Ace::denied(user(), FILE_WRITE_DATA, 0),
            Ace::allowed(Sid::everyone(), GENERIC_ALL, 0),
            Ace::allowed(user(), FILE_ALL_ACCESS, INHERIT_ONLY_ACE),
        ];
        let other: Sid = "S-1-5-21-9-9-9-9".parse().unwrap();
        let m = maximal_access(&sd(other.clone(), Some(aces)), &t);
        assert_eq!(m, FILE_ALL_ACCESS & !FILE_WRITE_DATA);
        // An allow before the deny wins.
        let aces = vec![
            Ace::allowed(user(), FILE_WRITE_DATA, 0),
            Ace::denied(Sid::everyone(), FILE_WRITE_DATA | FILE_READ_DATA, 0),
        ];
        assert_eq!(maximal_access(&sd(other, Some(aces)), &t), FILE_WRITE_DATA);
    }

    #[test]
    fn access_owner_rights() {
        let aces = vec![Ace::allowed(Sid::owner_rights(), FILE_READ_DATA, 0)];
        assert_eq!(
            maximal_access(&sd(user(), Some(aces)), &token()),
            FILE_READ_DATA
        );
        let aces = vec![Ace::denied(Sid::owner_rights(), WRITE_DAC, 0)];
        assert_eq!(maximal_access(&sd(user(), Some(aces)), &token()), 0);
    }

    #[test]
    fn inherit_flags_and_creator_owner() {
        let t = token();
        let parent = sd(
            user(),
            Some(vec![
                Ace::allowed(
                    Sid::creator_owner(),
                    GENERIC_ALL,
                    OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
                ),
                Ace::allowed(Sid::everyone(), FILE_READ_DATA, OBJECT_INHERIT_ACE),
                Ace::allowed(
                    Sid::builtin_users(),
                    FILE_READ_DATA,
                    CONTAINER_INHERIT_ACE | NO_PROPAGATE_INHERIT_ACE,
                ),
                Ace::allowed(Sid::network(), FILE_READ_DATA, 0),
            ]),
        );
        let mut parent = parent;
        parent.control |= SE_DACL_AUTO_INHERITED;
        let f = inherit(&parent, None, false, &t);
        assert_eq!(f.owner, Some(user()));
        assert_eq!(
            f.dacl.unwrap().aces,
            vec![
                Ace::allowed(user(), FILE_ALL_ACCESS, INHERITED_ACE),
                Ace::allowed(Sid::everyone(), FILE_READ_DATA, INHERITED_ACE),
            ]
        );
        assert_ne!(f.control & SE_DACL_AUTO_INHERITED, 0);
        let d = inherit(&parent, None, true, &t);
        assert_eq!(
            d.dacl.unwrap().aces,
            vec![
                Ace::allowed(user(), FILE_ALL_ACCESS, INHERITED_ACE),
                Ace::allowed(
                    Sid::creator_owner(),
                    GENERIC_ALL,
                    OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE | INHERIT_ONLY_ACE | INHERITED_ACE
                ),
                Ace::allowed(
                    Sid::everyone(),
                    FILE_READ_DATA,
                    OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE | INHERITED_ACE
                ),
                Ace::allowed(Sid::builtin_users(), FILE_READ_DATA, INHERITED_ACE),
            ]
        );
        // Without auto-inheritance the ACEs are not marked inherited.
        parent.control = SE_DACL_PRESENT;
        let f = inherit(&parent, None, false, &t);
        assert_eq!(f.control & SE_DACL_AUTO_INHERITED, 0);
        assert_eq!(
            f.dacl.unwrap().aces[1],
            Ace::allowed(Sid::everyone(), FILE_READ_DATA, 0)
        );
        // Nothing inheritable: the token's default DACL.
        let empty = sd(user(), Some(vec![]));
        assert_eq!(
            inherit(&empty, None, false, &t).dacl,
            Some(t.default_dacl())
        );
        // A creator DACL wins, NULL included.
        let mut c = sd(Sid::everyone(), None);
        c.group = Some(Sid::builtin_users());
        let n = inherit(&parent, Some(&c), false, &t);
        assert_eq!(n.owner, Some(Sid::everyone()));
        assert!(n.dacl.is_none() && n.control & SE_DACL_PRESENT != 0);
    }

    #[test]
    fn set_merges_parts() {
        let stored = sd(user(), Some(vec![Ace::allowed(user(), FILE_ALL_ACCESS, 0)]));
        let mut new = sd(Sid::everyone(), None);
        new.control = 0;
        let s = apply_set(&stored, &new, DACL_SECURITY_INFORMATION);
        assert_eq!(s.owner, Some(user()));
        assert!(s.dacl.is_none() && s.control & SE_DACL_PRESENT != 0);
        let s = apply_set(&stored, &new, OWNER_SECURITY_INFORMATION);
        assert_eq!(s.owner, Some(Sid::everyone()));
        assert_eq!(s.dacl, stored.dacl);
    }

    #[test]
    fn dacl_flags_are_canonicalised_as_windows_does_unless_asked_not_to() {
        let stored = sd(user(), Some(vec![Ace::allowed(user(), FILE_ALL_ACCESS, 0)]));
        let bits = SE_DACL_AUTO_INHERITED | SE_DACL_AUTO_INHERIT_REQ | SE_DACL_PROTECTED;
        for (sent, canonical, non_canonical) in [
            (SE_DACL_AUTO_INHERITED, 0, SE_DACL_AUTO_INHERITED),
            (SE_DACL_AUTO_INHERIT_REQ, 0, 0),
            (
                SE_DACL_AUTO_INHERITED | SE_DACL_AUTO_INHERIT_REQ,
                SE_DACL_AUTO_INHERITED,
                SE_DACL_AUTO_INHERITED,
            ),
            (
                SE_DACL_PROTECTED | SE_DACL_AUTO_INHERITED,
                SE_DACL_PROTECTED,
                SE_DACL_PROTECTED | SE_DACL_AUTO_INHERITED,
            ),
        ] {
            for (canon, kept) in [(true, canonical), (false, non_canonical)] {
                let mut new = stored.clone();
                new.control = SE_DACL_PRESENT | sent;
                canonicalize_dacl_flags(&mut new, canon);
                let s = apply_set(&stored, &new, DACL_SECURITY_INFORMATION);
                assert_eq!(s.control & bits, kept, "sent {sent:#x}, canonical {canon}");
                let created = inherit(&stored, Some(&new), false, &token());
                assert_eq!(created.control & bits, kept, "create, sent {sent:#x}");
            }
        }
    }

    proptest! {
        #[test]
        fn access_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(sd) = SecurityDescriptor::decode(&buf) {
                let t = token();
                let _ = maximal_access(&sd, &t);
                let _ = encode_checked(&inherit(&sd, Some(&sd), true, &t));
                let _ = encode_checked(&inherit(&sd, None, true, &t));
                let _ = apply_set(&sd, &sd, 0xF).encode();
            }
        }
    }
}
