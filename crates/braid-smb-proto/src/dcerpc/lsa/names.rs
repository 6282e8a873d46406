//! Translation between names and SIDs (MS-LSAT 3.1.1.1 views, 3.1.4.5 and
//! 3.1.4.9 rules) for a server that is joined to no domain: the predefined
//! well-known SIDs, the BUILTIN domain, and the server's account domain
//! from the [`LsaBackend`].

use super::wire::{is_valid_sid, Domain};
use super::{LsaBackend, SidNameUse};
use crate::fscc::security::Sid;

/// One predefined principal (MS-DTYP 2.4.2.4): its SID as authority and
/// sub-authorities, its name, and what it is.
struct WellKnown {
    authority: u64,
    rids: &'static [u32],
    name: &'static str,
    kind: SidNameUse,
}

const fn group(authority: u64, rids: &'static [u32], name: &'static str) -> WellKnown {
    WellKnown {
        authority,
        rids,
        name,
        kind: SidNameUse::WellKnownGroup,
    }
}

const fn alias(rids: &'static [u32], name: &'static str) -> WellKnown {
    WellKnown {
        authority: NT_AUTHORITY,
        rids,
        name,
        kind: SidNameUse::Alias,
    }
}

const WORLD: u64 = 1;
const LOCAL: u64 = 2;
const CREATOR: u64 = 3;
const NT_AUTHORITY: u64 = 5;
/// S-1-5-32, the BUILTIN domain's first sub-authority.
const BUILTIN_RID: u32 = 32;

// MS-DTYP 2.4.2.4 well-known SID structures; the English names Windows
// gives them (MS-LSAT 3.1.1.1.1 Predefined Translation View).
const WELL_KNOWN: &[WellKnown] = &[
    group(WORLD, &[0], "Everyone"),
    group(LOCAL, &[0], "LOCAL"),
    group(LOCAL, &[1], "CONSOLE LOGON"),
    group(CREATOR, &[0], "CREATOR OWNER"),
    group(CREATOR, &[1], "CREATOR GROUP"),
    group(CREATOR, &[2], "CREATOR OWNER SERVER"),
    group(CREATOR, &[3], "CREATOR GROUP SERVER"),
    group(CREATOR, &[4], "OWNER RIGHTS"),
    group(NT_AUTHORITY, &[1], "DIALUP"),
    group(NT_AUTHORITY, &[2], "NETWORK"),
    group(NT_AUTHORITY, &[3], "BATCH"),
    group(NT_AUTHORITY, &[4], "INTERACTIVE"),
    group(NT_AUTHORITY, &[6], "SERVICE"),
    group(NT_AUTHORITY, &[7], "ANONYMOUS LOGON"),
    group(NT_AUTHORITY, &[8], "PROXY"),
    group(NT_AUTHORITY, &[9], "ENTERPRISE DOMAIN CONTROLLERS"),
    group(NT_AUTHORITY, &[10], "SELF"),
    group(NT_AUTHORITY, &[11], "Authenticated Users"),
    group(NT_AUTHORITY, &[12], "RESTRICTED"),
    group(NT_AUTHORITY, &[13], "TERMINAL SERVER USER"),
    group(NT_AUTHORITY, &[14], "REMOTE INTERACTIVE LOGON"),
    group(NT_AUTHORITY, &[15], "This Organization"),
    group(NT_AUTHORITY, &[17], "IUSR"),
    group(NT_AUTHORITY, &[18], "SYSTEM"),
    group(NT_AUTHORITY, &[19], "LOCAL SERVICE"),
    group(NT_AUTHORITY, &[20], "NETWORK SERVICE"),
    alias(&[BUILTIN_RID, 544], "Administrators"),
    alias(&[BUILTIN_RID, 545], "Users"),
    alias(&[BUILTIN_RID, 546], "Guests"),
    alias(&[BUILTIN_RID, 547], "Power Users"),
    alias(&[BUILTIN_RID, 548], "Account Operators"),
    alias(&[BUILTIN_RID, 549], "Server Operators"),
    alias(&[BUILTIN_RID, 550], "Print Operators"),
    alias(&[BUILTIN_RID, 551], "Backup Operators"),
    alias(&[BUILTIN_RID, 552], "Replicator"),
    alias(&[BUILTIN_RID, 554], "Pre-Windows 2000 Compatible Access"),
    alias(&[BUILTIN_RID, 555], "Remote Desktop Users"),
    alias(&[BUILTIN_RID, 556], "Network Configuration Operators"),
    alias(&[BUILTIN_RID, 558], "Performance Monitor Users"),
    alias(&[BUILTIN_RID, 559], "Performance Log Users"),
    alias(&[BUILTIN_RID, 562], "Distributed COM Users"),
    alias(&[BUILTIN_RID, 568], "IIS_IUSRS"),
    alias(&[BUILTIN_RID, 569], "Cryptographic Operators"),
    alias(&[BUILTIN_RID, 573], "Event Log Readers"),
    alias(&[BUILTIN_RID, 579], "Access Control Assistance Operators"),
    alias(&[BUILTIN_RID, 580], "Remote Management Users"),
];

impl WellKnown {
    fn sid(&self) -> Sid {
        Sid::new(self.authority, self.rids)
    }

    fn is(&self, sid: &Sid) -> bool {
        sid.revision == 1 && sid.authority == self.authority && sid.sub_authorities == self.rids
    }

    fn in_builtin(&self) -> bool {
        self.authority == NT_AUTHORITY && self.rids.first() == Some(&BUILTIN_RID)
    }
}

/// S-1-5, NT AUTHORITY.
fn nt_authority() -> Domain {
    Domain {
        name: "NT AUTHORITY".into(),
        sid: Sid::new(NT_AUTHORITY, &[]),
    }
}

/// S-1-5-32, BUILTIN.
pub fn builtin() -> Domain {
    Domain {
        name: "BUILTIN".into(),
        sid: Sid::new(NT_AUTHORITY, &[BUILTIN_RID]),
    }
}

/// The domain a well-known principal is reported in: its SID without the
/// last sub-authority, named as Windows names it; S-1-1, S-1-2 and S-1-3
/// have the empty name (as Windows reports Everyone's domain).
fn domain_of_well_known(entry: &WellKnown) -> Domain {
    let parent = entry
        .rids
        .split_last()
        .map_or(&[][..], |(_, parent)| parent);
    if entry.in_builtin() {
        builtin()
    } else if entry.authority == NT_AUTHORITY && parent.is_empty() {
        nt_authority()
    } else {
        Domain {
            name: String::new(),
            sid: Sid::new(entry.authority, parent),
        }
    }
}

/// A SID without its last sub-authority, and that RID.
pub fn split_rid(sid: &Sid) -> Option<(Sid, u32)> {
    let (rid, parent) = sid.sub_authorities.split_last()?;
    Some((
        Sid {
            revision: sid.revision,
            authority: sid.authority,
            sub_authorities: parent.to_vec(),
        },
        *rid,
    ))
}

/// What a name or SID translated to: the principal's SID (the domain's
/// own for a domain), its name, its kind, and the domain it is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub sid: Sid,
    pub name: String,
    pub kind: SidNameUse,
    pub domain: Domain,
}

/// Case-insensitive comparison of names (MS-LSAT 3.1.4.5: "The comparisons
/// used by the RPC server MUST NOT be case-sensitive").
fn same_name(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b) || a.to_lowercase() == b.to_lowercase()
}

/// The lookups of one call, with the account domain fetched once.
pub struct Resolver<'a> {
    backend: &'a dyn LsaBackend,
    account: Option<Domain>,
}

impl<'a> Resolver<'a> {
    pub fn new(backend: &'a dyn LsaBackend) -> Self {
        let (name, sid) = backend.account_domain();
        // A domain SID the wire cannot carry, or whose accounts would not
        // fit 15 sub-authorities, is left out rather than sent broken.
        let account =
            (is_valid_sid(&sid) && sid.sub_authorities.len() < 15).then_some(Domain { name, sid });
        Resolver { backend, account }
    }

    /// The account domain, if the backend's is fit for the wire.
    pub fn account_domain(&self) -> Option<&Domain> {
        self.account.as_ref()
    }

    /// The domains a name may start with: NT AUTHORITY, BUILTIN and the
    /// account domain.
    fn named_domains(&self) -> impl Iterator<Item = Domain> + '_ {
        [nt_authority(), builtin()]
            .into_iter()
            .chain(self.account.iter().cloned())
    }

    fn domain_by_name(&self, name: &str) -> Option<Domain> {
        self.named_domains().find(|d| same_name(&d.name, name))
    }

    fn as_domain(domain: Domain) -> Principal {
        Principal {
            sid: domain.sid.clone(),
            name: domain.name.clone(),
            kind: SidNameUse::Domain,
            domain,
        }
    }

    fn well_known(entry: &WellKnown) -> Principal {
        Principal {
            sid: entry.sid(),
            name: entry.name.into(),
            kind: entry.kind,
            domain: domain_of_well_known(entry),
        }
    }

    // MS-LSAT 3.1.4.9 with the LsapLookupWksta scope of 2.2.16: the
    // predefined SIDs, the BUILTIN domain, then the account domain.
    pub fn sid_to_principal(&self, sid: &Sid) -> Option<Principal> {
        if let Some(entry) = WELL_KNOWN.iter().find(|e| e.is(sid)) {
            return Some(Self::well_known(entry));
        }
        if let Some(domain) = self.named_domains().find(|d| d.sid == *sid) {
            return Some(Self::as_domain(domain));
        }
        let account = self.account.as_ref()?;
        let (parent, _) = split_rid(sid)?;
        if parent != account.sid {
            return None;
        }
        let (name, kind) = self.backend.account_by_sid(sid)?;
        Some(Principal {
            sid: sid.clone(),
            name,
            kind,
            domain: account.clone(),
        })
    }

    // MS-LSAT 3.1.4.5: "domain\name", "name@domain", a domain's name alone
    // or with a trailing backslash, and isolated names. A null or empty
    // name is the BUILTIN domain, as Windows Server 2003 and later answer
    // (smbtorture's LookupNames_NULL).
    pub fn name_to_principal(&self, name: Option<&str>) -> Option<Principal> {
        let name = match name {
            None | Some("") => return Some(Self::as_domain(builtin())),
            Some(name) => name,
        };
        if let Some((domain, account)) = name.split_once('\\') {
            if domain.is_empty() {
                return self.isolated(account);
            }
            return self.in_domain(self.domain_by_name(domain)?, account);
        }
        if let Some((account, domain)) = name.rsplit_once('@') {
            if let Some(domain) = self.domain_by_name(domain) {
                return self.in_domain(domain, account);
            }
        }
        self.isolated(name)
    }

    /// `account` in a domain named by the caller; the domain itself if
    /// `account` is empty ("BUILTIN\").
    fn in_domain(&self, domain: Domain, account: &str) -> Option<Principal> {
        if account.is_empty() {
            return Some(Self::as_domain(domain));
        }
        if self.account.as_ref() == Some(&domain) {
            return self.account_by_name(account);
        }
        WELL_KNOWN
            .iter()
            .find(|e| domain_of_well_known(e) == domain && same_name(e.name, account))
            .map(Self::well_known)
    }

    /// An isolated name: the predefined names, then a domain's name, then
    /// BUILTIN's aliases, then the account domain's accounts.
    fn isolated(&self, name: &str) -> Option<Principal> {
        let predefined = |builtin: bool| {
            WELL_KNOWN
                .iter()
                .find(|e| e.in_builtin() == builtin && same_name(e.name, name))
                .map(Self::well_known)
        };
        predefined(false)
            .or_else(|| self.domain_by_name(name).map(Self::as_domain))
            .or_else(|| predefined(true))
            .or_else(|| self.account_by_name(name))
    }

    /// The backend's answer, kept only if the SID is an account of the
    /// account domain (so its domain index is right).
    fn account_by_name(&self, name: &str) -> Option<Principal> {
        let account = self.account.as_ref()?;
        let (sid, kind) = self.backend.account_by_name(name)?;
        if !is_valid_sid(&sid) || split_rid(&sid)?.0 != account.sid {
            return None;
        }
        Some(Principal {
            sid,
            name: name.to_string(),
            kind,
            domain: account.clone(),
        })
    }
}

/// LSAPR_REFERENCED_DOMAIN_LIST being built (MS-LSAT 2.2.12): each domain
/// once, in the order first referenced.
#[derive(Default)]
pub struct ReferencedDomains {
    domains: Vec<Domain>,
}

impl ReferencedDomains {
    /// The DomainIndex of `domain`, added if new.
    pub fn index_of(&mut self, domain: &Domain) -> u32 {
        match self.domains.iter().position(|d| d.sid == domain.sid) {
            Some(i) => i as u32,
            None => {
                self.domains.push(domain.clone());
                (self.domains.len() - 1) as u32
            }
        }
    }

    pub fn as_slice(&self) -> &[Domain] {
        &self.domains
    }
}
