//! The translations: LsarLookupNames, LsarLookupNames2, LsarLookupNames3
//! (MS-LSAT 3.1.4.8, 3.1.4.7, 3.1.4.6) and LsarLookupSids, LsarLookupSids2
//! (3.1.4.11, 3.1.4.10). Each decodes its request, translates every entry
//! with a [`Resolver`], and answers ReferencedDomains, the translations,
//! MappedCount and the status.

use super::super::ndr::{NdrReader, NdrResult, NdrWriter, Stub};
use super::names::{split_rid, Principal, ReferencedDomains, Resolver};
use super::wire::{
    is_valid_sid, read_handle, read_names, read_sid_enum_buffer, skip_translated_array,
    write_referenced_domains, write_sid, write_string_body, write_string_header, IgnoredArray,
    PolicyHandle, WireString,
};
use super::{status, CallResult, LsaBackend, LsaState, SidNameUse};
use crate::fscc::security::Sid;

/// Which LsarLookupNames answers: LSAPR_TRANSLATED_SIDS (MS-LSAT 2.2.15,
/// LsarLookupNames), _EX (2.2.24, LsarLookupNames2) or _EX2 (2.2.26,
/// LsarLookupNames3, whole SIDs instead of RIDs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SidsForm {
    Rids,
    RidsEx,
    Sids,
}

/// Which LsarLookupSids answers: LSAPR_TRANSLATED_NAMES (MS-LSAT 2.2.20,
/// LsarLookupSids) or _EX (2.2.22, LsarLookupSids2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamesForm {
    Plain,
    Ex,
}

/// MS-LSAT 2.2.16 LSAP_LOOKUP_LEVEL: LsapLookupWksta, the only scope in
/// which a server joined to no domain knows anything.
const LOOKUP_WKSTA: u16 = 1;
/// LsapLookupRODCReferralToFullDC, the last level LsarLookupNames knows.
const LAST_NAMES_LEVEL: u16 = 7;
/// LsapLookupXForestResolve: smbtorture's rpc.lsa.lookup expects
/// STATUS_INVALID_PARAMETER from LsarLookupSids for the levels past it.
const LAST_SIDS_LEVEL: u16 = 6;

/// DomainIndex of an entry in no referenced domain (MS-LSAT 2.2.21,
/// 2.2.25: -1).
const NO_DOMAIN: u32 = u32::MAX;
/// RelativeId of a name that is a domain: -1, as Windows answers and
/// smbtorture checks for "BUILTIN".
const DOMAIN_RID: u32 = u32::MAX;

/// One entry's translation and the DomainIndex of its domain, or None
/// for an entry not mapped.
type Translation = Option<(Principal, u32)>;

/// MS-LSAT 3.1.4.8: all mapped, some, or none (no entries count as all).
fn mapping_status(translations: &[Translation]) -> u32 {
    let mapped = translations.iter().filter(|t| t.is_some()).count();
    if mapped == translations.len() {
        status::SUCCESS
    } else if mapped == 0 {
        status::NONE_MAPPED
    } else {
        status::SOME_NOT_MAPPED
    }
}

/// The answer of a lookup refused as a whole: no ReferencedDomains, no
/// translations, MappedCount 0, the status.
fn refusal(result: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    write_referenced_domains(&mut w, None);
    w.u32(0);
    w.null_pointer();
    w.u32(0);
    w.u32(result);
    w.into_bytes()
}

/// Translates each entry with `translate` (nothing is mapped outside
/// LsapLookupWksta), collecting the domains referenced in order of use.
fn translate_all<T>(
    entries: &[T],
    level: u16,
    mut translate: impl FnMut(&T) -> Option<Principal>,
) -> (ReferencedDomains, Vec<Translation>) {
    let mut domains = ReferencedDomains::default();
    let translations = entries
        .iter()
        .map(|entry| {
            if level != LOOKUP_WKSTA {
                return None;
            }
            let principal = translate(entry)?;
            let index = domains.index_of(&principal.domain);
            Some((principal, index))
        })
        .collect();
    (domains, translations)
}

/// What every lookup request ends with: LookupLevel, MappedCount (ignored
/// on input) and, in the numbered versions (2 and 3), LookupOptions and
/// ClientRevision. The latter change nothing for a server in no domain
/// (MS-LSAT 3.1.4.5: they steer forwarding to domain controllers).
fn read_level_and_options(r: &mut NdrReader<'_>, numbered: bool) -> NdrResult<u16> {
    // LSAP_LOOKUP_LEVEL has no [v1_enum]: 16 bits on the wire.
    let level = r.u16()?;
    r.u32()?;
    if numbered {
        r.u32()?;
        r.u32()?;
    }
    Ok(level)
}

struct NamesRequest {
    handle: PolicyHandle,
    names: Vec<Option<String>>,
    level: u16,
}

fn read_names_request(stub: Stub<'_>, form: SidsForm) -> NdrResult<NamesRequest> {
    let mut r = stub.reader();
    let handle = read_handle(&mut r)?;
    let count = r.u32()?;
    let names = read_names(&mut r, count)?;
    let ignored = match form {
        SidsForm::Rids => IgnoredArray::Rids { extended: false },
        SidsForm::RidsEx => IgnoredArray::Rids { extended: true },
        SidsForm::Sids => IgnoredArray::Sids,
    };
    skip_translated_array(&mut r, ignored)?;
    let level = read_level_and_options(&mut r, form != SidsForm::Rids)?;
    Ok(NamesRequest {
        handle,
        names,
        level,
    })
}

// MS-LSAT 3.1.4.8 LsarLookupNames (opnum 14), 3.1.4.7 LsarLookupNames2
// (opnum 58), 3.1.4.6 LsarLookupNames3 (opnum 68); the name forms and
// rules of 3.1.4.5.
pub fn lookup_names(
    stub: Stub<'_>,
    backend: &dyn LsaBackend,
    state: &LsaState,
    form: SidsForm,
) -> CallResult {
    let request = read_names_request(stub, form)?;
    state.check(&request.handle)?;
    if !(1..=LAST_NAMES_LEVEL).contains(&request.level) {
        return Ok(refusal(status::INVALID_PARAMETER));
    }
    let resolver = Resolver::new(backend);
    let (domains, translations) = translate_all(&request.names, request.level, |name| {
        resolver.name_to_principal(name.as_deref())
    });
    let mut w = NdrWriter::new();
    write_referenced_domains(&mut w, Some(domains.as_slice()));
    write_translated_sids(&mut w, &translations, form);
    w.u32(translations.iter().filter(|t| t.is_some()).count() as u32);
    w.u32(mapping_status(&translations));
    Ok(w.into_bytes())
}

/// `[in, out] PLSAPR_TRANSLATED_SIDS*` in the answer: Entries, a pointer
/// to the array, each element {Use (u16), RelativeId or a SID pointer,
/// DomainIndex, Flags in the _EX forms}, the SIDs deferred after it.
fn write_translated_sids(w: &mut NdrWriter, translations: &[Translation], form: SidsForm) {
    w.u32(translations.len() as u32);
    if translations.is_empty() {
        w.null_pointer();
        return;
    }
    w.referent();
    w.u32(translations.len() as u32);
    for translation in translations {
        let (kind, index) = match translation {
            Some((p, index)) => (p.kind, *index),
            None => (SidNameUse::Unknown, NO_DOMAIN),
        };
        w.u16(kind as u16);
        match form {
            SidsForm::Rids | SidsForm::RidsEx => {
                let rid = match translation {
                    Some((p, _)) if p.kind == SidNameUse::Domain => DOMAIN_RID,
                    Some((p, _)) => split_rid(&p.sid).map_or(0, |(_, rid)| rid),
                    None => 0,
                };
                w.u32(rid);
                w.u32(index);
                if form == SidsForm::RidsEx {
                    w.u32(0); // Flags
                }
            }
            SidsForm::Sids => {
                if translation.is_some() {
                    w.referent();
                } else {
                    w.null_pointer();
                }
                w.u32(index);
                w.u32(0); // Flags
            }
        }
    }
    if form == SidsForm::Sids {
        for (principal, _) in translations.iter().flatten() {
            write_sid(w, &principal.sid);
        }
    }
}

struct SidsRequest {
    handle: PolicyHandle,
    sids: Vec<Option<Sid>>,
    level: u16,
}

fn read_sids_request(stub: Stub<'_>, form: NamesForm) -> NdrResult<SidsRequest> {
    let mut r = stub.reader();
    let handle = read_handle(&mut r)?;
    let sids = read_sid_enum_buffer(&mut r)?;
    skip_translated_array(
        &mut r,
        IgnoredArray::Names {
            extended: form == NamesForm::Ex,
        },
    )?;
    let level = read_level_and_options(&mut r, form == NamesForm::Ex)?;
    Ok(SidsRequest {
        handle,
        sids,
        level,
    })
}

// MS-LSAT 3.1.4.11 LsarLookupSids (opnum 15) and 3.1.4.10 LsarLookupSids2
// (opnum 57); the rules of 3.1.4.9. A SID not translated is named by its
// string form, of no domain, as Windows answers (smbtorture's
// LookupSidsReply).
pub fn lookup_sids(
    stub: Stub<'_>,
    backend: &dyn LsaBackend,
    state: &LsaState,
    form: NamesForm,
) -> CallResult {
    let request = read_sids_request(stub, form)?;
    state.check(&request.handle)?;
    if !(1..=LAST_SIDS_LEVEL).contains(&request.level) {
        return Ok(refusal(status::INVALID_PARAMETER));
    }
    // A null SID pointer, or a SID that is no SID (MS-DTYP 2.4.2.3:
    // Revision MUST be 1), makes the request invalid.
    let Some(sids) = request
        .sids
        .into_iter()
        .map(|sid| sid.filter(is_valid_sid))
        .collect::<Option<Vec<Sid>>>()
    else {
        return Ok(refusal(status::INVALID_PARAMETER));
    };
    let resolver = Resolver::new(backend);
    let (domains, translations) =
        translate_all(&sids, request.level, |sid| resolver.sid_to_principal(sid));
    let mut w = NdrWriter::new();
    write_referenced_domains(&mut w, Some(domains.as_slice()));
    write_translated_names(&mut w, &sids, &translations, form);
    w.u32(translations.iter().filter(|t| t.is_some()).count() as u32);
    w.u32(mapping_status(&translations));
    Ok(w.into_bytes())
}

/// `[in, out] PLSAPR_TRANSLATED_NAMES*` in the answer: Entries, a pointer
/// to the array, each element {Use (u16), Name, DomainIndex, Flags in the
/// _EX form}, the names' Buffers deferred after it.
fn write_translated_names(
    w: &mut NdrWriter,
    sids: &[Sid],
    translations: &[Translation],
    form: NamesForm,
) {
    w.u32(translations.len() as u32);
    if translations.is_empty() {
        w.null_pointer();
        return;
    }
    w.referent();
    w.u32(translations.len() as u32);
    let names: Vec<WireString> = sids
        .iter()
        .zip(translations)
        .map(|(sid, t)| match t {
            Some((p, _)) => WireString::exact(&p.name),
            None => WireString::exact(&sid.to_string()),
        })
        .collect();
    for (name, translation) in names.iter().zip(translations) {
        let (kind, index) = match translation {
            Some((p, index)) => (p.kind, *index),
            None => (SidNameUse::Unknown, NO_DOMAIN),
        };
        w.u16(kind as u16);
        write_string_header(w, Some(name));
        w.u32(index);
        if form == NamesForm::Ex {
            w.u32(0); // Flags
        }
    }
    for name in &names {
        write_string_body(w, Some(name));
    }
}
