//! The server's accounts as lsarpc reports them (`braid_smb_proto::dcerpc::lsa`):
//! the account domain (the server's NetBIOS name and machine SID), its
//! users, the Guest account and the "None" group every user belongs to, so
//! that `smbcacls`, `rpcclient` and Windows' Security tab show and take
//! names rather than bare SIDs. Well-known SIDs (NT AUTHORITY, BUILTIN,
//! Everyone, ...) are the protocol crate's.
//!
//! Only authenticated users open the pipe (`smb/ops/pipe.rs`): an
//! anonymous caller could otherwise learn which user names exist.

use std::sync::Arc;

use braid_smb_proto::dcerpc::lsa::{LsaBackend, SidNameUse};
use braid_smb_proto::fscc::security::Sid;

use crate::smb::acl::{account_domain_sid, domain_sid, user_sid, DOMAIN_USERS_RID, GUEST_RID};
use crate::smb::session::Session;
use crate::state::ServerState;

/// The account domain's names for the RIDs every server has.
const DOMAIN_USERS_NAME: &str = "None";
const GUEST_NAME: &str = "Guest";

/// lsarpc as seen by one caller: the session the pipe was opened on.
pub struct LsaView<'a> {
    pub state: &'a Arc<ServerState>,
    pub caller: &'a Session,
}

impl LsaBackend for LsaView<'_> {
    fn account_domain(&self) -> (String, Sid) {
        (
            self.state.config().netbios_name.to_uppercase(),
            account_domain_sid(),
        )
    }

    fn account_by_sid(&self, sid: &Sid) -> Option<(String, SidNameUse)> {
        if *sid == domain_sid(DOMAIN_USERS_RID) {
            return Some((DOMAIN_USERS_NAME.into(), SidNameUse::Group));
        }
        if *sid == domain_sid(GUEST_RID) {
            return Some((GUEST_NAME.into(), SidNameUse::User));
        }
        // A user's RID is a hash of its name: look for the user it is.
        let users = self.state.users.current();
        let name = users.list().into_iter().find(|u| user_sid(u) == *sid)?;
        Some((name.to_string(), SidNameUse::User))
    }

    fn account_by_name(&self, name: &str) -> Option<(Sid, SidNameUse)> {
        // A user of that name is who a session of that name acts as.
        if self.state.users.current().contains(name) {
            return Some((user_sid(name), SidNameUse::User));
        }
        if name.eq_ignore_ascii_case(DOMAIN_USERS_NAME) {
            return Some((domain_sid(DOMAIN_USERS_RID), SidNameUse::Group));
        }
        if name.eq_ignore_ascii_case(GUEST_NAME) {
            return Some((domain_sid(GUEST_RID), SidNameUse::User));
        }
        None
    }

    fn caller(&self) -> (String, String) {
        let identity = self.caller.identity.lock().unwrap().clone();
        let user = identity.map(|i| i.user).unwrap_or_default();
        (user, self.state.config().netbios_name.to_uppercase())
    }
}
