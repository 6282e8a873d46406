//! Policy handles and what they tell about the server: LsarOpenPolicy,
//! LsarOpenPolicy2, LsarClose, LsarQueryInformationPolicy/2 (MS-LSAD
//! 3.1.4.4, 3.1.4.9.4) and LsarGetUserName (MS-LSAT 3.1.4.4).

use super::super::ndr::{NdrReader, NdrResult, NdrWriter, Stub};
use super::names::Resolver;
use super::wire::{
    read_handle, read_string_body, read_string_header, write_handle, write_sid, write_string_body,
    write_string_header, Domain, WireString, NULL_HANDLE,
};
use super::{status, CallResult, LsaBackend, LsaState};

/// MS-LSAD LSAPR_OBJECT_ATTRIBUTES, as far as it matters:
/// whether RootDirectory is set and whether DesiredAccess (which follows)
/// could be read.
struct OpenRequest {
    root_directory: bool,
    /// None when a SecurityDescriptor or ObjectName was sent: the server
    /// ignores them (MS-LSAD 3.1.4.4.1) and their layout is not modelled,
    /// so what follows them is not read.
    desired_access: Option<u32>,
}

fn read_open_request(r: &mut NdrReader<'_>, string_name: bool) -> NdrResult<OpenRequest> {
    // SystemName: `[in, unique, string] wchar_t*` for LsarOpenPolicy2, a
    // single `[in, unique] wchar_t*` for LsarOpenPolicy (MS-LSAD 3.1.4.4.2).
    if r.unique_pointer()? {
        if string_name {
            r.wstring()?;
        } else {
            r.u16()?;
        }
    }
    // ObjectAttributes is a top-level [ref] pointer: the structure is inline.
    r.u32()?; // Length
    let root_directory = r.unique_pointer()?;
    let object_name = r.unique_pointer()?;
    r.u32()?; // Attributes
    let security_descriptor = r.unique_pointer()?;
    let quality_of_service = r.unique_pointer()?;
    if root_directory || object_name || security_descriptor {
        return Ok(OpenRequest {
            root_directory,
            desired_access: None,
        });
    }
    if quality_of_service {
        // SECURITY_QUALITY_OF_SERVICE: Length, ImpersonationLevel (u16),
        // ContextTrackingMode and EffectiveOnly (octets).
        r.u32()?;
        r.u16()?;
        r.u8()?;
        r.u8()?;
    }
    Ok(OpenRequest {
        root_directory,
        desired_access: Some(r.u32()?),
    })
}

// MS-LSAD 3.1.4.4.1 LsarOpenPolicy2 (opnum 44) and 3.1.4.4.2
// LsarOpenPolicy (opnum 6): SystemName is ignored; ObjectAttributes is
// ignored except that RootDirectory MUST be NULL; a zero DesiredAccess is
// refused. Any caller may look names up, so no access check follows.
pub fn open_policy(stub: Stub<'_>, state: &mut LsaState, string_name: bool) -> CallResult {
    let request = read_open_request(&mut stub.reader(), string_name)?;
    let (handle, result) = if request.root_directory || request.desired_access == Some(0) {
        (NULL_HANDLE, status::INVALID_PARAMETER)
    } else {
        match state.open() {
            Some(handle) => (handle, status::SUCCESS),
            None => (NULL_HANDLE, status::INSUFFICIENT_RESOURCES),
        }
    };
    let mut w = NdrWriter::new();
    write_handle(&mut w, &handle);
    w.u32(result);
    Ok(w.into_bytes())
}

// MS-LSAD 3.1.4.9.4 LsarClose (opnum 0): the handle is freed and handed
// back zeroed.
pub fn close(stub: Stub<'_>, state: &mut LsaState) -> CallResult {
    let handle = read_handle(&mut stub.reader())?;
    state.close(&handle)?;
    let mut w = NdrWriter::new();
    write_handle(&mut w, &NULL_HANDLE);
    w.u32(status::SUCCESS);
    Ok(w.into_bytes())
}

/// MS-LSAD POLICY_INFORMATION_CLASS values answered or refused.
mod info_class {
    pub const AUDIT_LOG: u16 = 1;
    pub const AUDIT_EVENTS: u16 = 2;
    pub const PRIMARY_DOMAIN: u16 = 3;
    pub const PD_ACCOUNT: u16 = 4;
    pub const ACCOUNT_DOMAIN: u16 = 5;
    pub const LSA_SERVER_ROLE: u16 = 6;
    pub const DNS_DOMAIN: u16 = 12;
    pub const DNS_DOMAIN_INT: u16 = 13;
    pub const LOCAL_ACCOUNT_DOMAIN: u16 = 14;
}

/// MS-LSAD POLICY_LSA_SERVER_ROLE_INFO: PolicyServerRolePrimary, what
/// a server that is no backup domain controller reports.
const SERVER_ROLE_PRIMARY: u32 = 3;

// MS-LSAD 3.1.4.4.3 LsarQueryInformationPolicy2 (opnum 46) and 3.1.4.4.4
// LsarQueryInformationPolicy (opnum 7), processed identically. A server
// joined to no domain reports its account domain as the primary domain
// with a null SID, and no DNS names.
pub fn query_information(stub: Stub<'_>, backend: &dyn LsaBackend, state: &LsaState) -> CallResult {
    let mut r = stub.reader();
    let handle = read_handle(&mut r)?;
    // POLICY_INFORMATION_CLASS: an enum without [v1_enum], 16 bits.
    let class = r.u16()?;
    state.check(&handle)?;
    let resolver = Resolver::new(backend);
    let account = resolver.account_domain();
    let name = account.map_or("", |d| d.name.as_str());
    let mut w = NdrWriter::new();
    let result = match class {
        info_class::PRIMARY_DOMAIN
        | info_class::ACCOUNT_DOMAIN
        | info_class::LOCAL_ACCOUNT_DOMAIN => {
            // The primary domain of a server in no domain has no SID.
            let sid = account.filter(|_| class != info_class::PRIMARY_DOMAIN);
            w.referent();
            w.u16(class);
            write_domain_info(&mut w, name, sid);
            status::SUCCESS
        }
        info_class::DNS_DOMAIN | info_class::DNS_DOMAIN_INT => {
            w.referent();
            w.u16(class);
            write_dns_domain_info(&mut w, name);
            status::SUCCESS
        }
        info_class::LSA_SERVER_ROLE => {
            w.referent();
            w.u16(class);
            w.u32(SERVER_ROLE_PRIMARY);
            status::SUCCESS
        }
        // Audit settings and the private account data need rights this
        // server grants no caller (MS-LSAD 3.1.4.4.3 RequiredAccess table).
        info_class::AUDIT_LOG | info_class::AUDIT_EVENTS | info_class::PD_ACCOUNT => {
            w.null_pointer();
            status::ACCESS_DENIED
        }
        // The classes with no processing (PolicyModificationInformation,
        // PolicyAuditFull*), those not kept here, and values out of range.
        _ => {
            w.null_pointer();
            status::INVALID_PARAMETER
        }
    };
    w.u32(result);
    Ok(w.into_bytes())
}

/// MS-LSAD LSAPR_POLICY_PRIMARY_DOM_INFO and LSAPR_POLICY_ACCOUNT_DOM_INFO
/// (one layout): the name, then a SID pointer.
fn write_domain_info(w: &mut NdrWriter, name: &str, domain: Option<&Domain>) {
    let name = WireString::large(name);
    write_string_header(w, Some(&name));
    if domain.is_some() {
        w.referent();
    } else {
        w.null_pointer();
    }
    write_string_body(w, Some(&name));
    if let Some(domain) = domain {
        write_sid(w, &domain.sid);
    }
}

/// MS-LSAD LSAPR_POLICY_DNS_DOMAIN_INFO for a server in no domain: the
/// NetBIOS name, no DNS domain or forest, a zero GUID, no SID.
fn write_dns_domain_info(w: &mut NdrWriter, name: &str) {
    let name = WireString::large(name);
    write_string_header(w, Some(&name));
    write_string_header(w, None);
    write_string_header(w, None);
    w.bytes(&[0; 16]); // DomainGuid
    w.null_pointer(); // Sid
    write_string_body(w, Some(&name));
}

/// A `[in] PRPC_UNICODE_STRING*` the client may send filled in (MS-LSAT
/// 3.1.4.4: the server ignores it): a unique pointer to the structure,
/// then its Buffer.
fn skip_string_pointer(r: &mut NdrReader<'_>) -> NdrResult<()> {
    if r.unique_pointer()? {
        let header = read_string_header(r)?;
        read_string_body(r, header)?;
    }
    Ok(())
}

// MS-LSAT 3.1.4.4 LsarGetUserName (opnum 45): the caller's name, and its
// domain's name if DomainName was given (a null DomainName stays null).
pub fn get_user_name(stub: Stub<'_>, backend: &dyn LsaBackend) -> CallResult {
    let mut r = stub.reader();
    if r.unique_pointer()? {
        r.wstring()?; // SystemName, ignored
    }
    // UserName: `[in, out] PRPC_UNICODE_STRING*`, the outer pointer [ref].
    skip_string_pointer(&mut r)?;
    // DomainName: `[in, out, unique] PRPC_UNICODE_STRING*`.
    let wants_domain = r.unique_pointer()?;
    if wants_domain {
        skip_string_pointer(&mut r)?;
    }
    let (user, domain) = backend.caller();
    let mut w = NdrWriter::new();
    write_string_pointer(&mut w, &WireString::exact(&user));
    if wants_domain {
        w.referent();
        write_string_pointer(&mut w, &WireString::exact(&domain));
    } else {
        w.null_pointer();
    }
    w.u32(status::SUCCESS);
    Ok(w.into_bytes())
}

/// A unique pointer to an RPC_UNICODE_STRING, the structure, its Buffer.
fn write_string_pointer(w: &mut NdrWriter, s: &WireString) {
    w.referent();
    write_string_header(w, Some(s));
    write_string_body(w, Some(s));
}
