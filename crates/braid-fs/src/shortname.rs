//! 8.3 short names (MS-FSCC 2.1.5.2.1), generated the way Samba's default
//! `mangling method = hash2` does, so that clients comparing Braid with
//! Samba see the same FileAlternateNameInformation and directory
//! `ShortName` values.
//!
//! A name that already is a valid 8.3 name (ignoring case) is its own short
//! name. Any other name becomes `P#####~H.EXT`: the first character of the
//! long name (upper-cased, `_` if not a plain ASCII character), five base-36
//! digits and one more after the `~` from a 31-bit FNV-1 hash of the
//! upper-cased prefix, and up to three ASCII characters of the extension.
//! Short names are derived, not stored: a lookup that finds no long name
//! compares the name with the short names of the directory's entries
//! (`path::find_case_insensitive`), so a client can open a file by either.

/// Characters an 8.3 name may hold besides `.` (Samba's FLAG_ASCII).
fn is_83_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$' | '~')
}

/// DOS device names that must always be mangled.
const RESERVED: [&str; 11] = [
    "AUX", "CON", "COM1", "COM2", "COM3", "COM4", "LPT1", "LPT2", "LPT3", "NUL", "PRN",
];

fn is_reserved(name: &str) -> bool {
    let prefix = name.split('.').next().unwrap_or(name);
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(prefix))
}

/// Is `name` a valid 8.3 name (MS-FSCC 2.1.5.2.1), ignoring case? `.` and
/// `..` are.
pub fn is_8_3(name: &str) -> bool {
    if name == "." || name == ".." {
        return true;
    }
    if name.len() > 12 {
        return false;
    }
    match name.find('.') {
        None if name.len() > 8 => return false,
        None => {}
        Some(dot) => {
            let suffix = &name[dot + 1..];
            if dot > 8 || suffix.is_empty() || suffix.len() > 3 || suffix.contains('.') {
                return false;
            }
        }
    }
    !name.is_empty() && name.chars().all(|c| c == '.' || is_83_char(c))
}

/// 31-bit FNV-1 hash of the upper-cased prefix (Samba `mangle_hash`).
fn hash(prefix: &str) -> u32 {
    let mut v: u32 = 0xa6b9_3095;
    for b in prefix.to_uppercase().bytes() {
        v = v.wrapping_mul(0x0100_0193);
        v ^= b as u32;
    }
    v & 0x7FFF_FFFF
}

const BASE36: &[u8; 36] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// The 8.3 short name of a long name component.
pub fn short_name(name: &str) -> String {
    if !is_reserved(name) && is_8_3(name) {
        return name.to_string();
    }
    // The extension counts only if it is 1-3 plain ASCII characters.
    let dot = name.rfind('.').filter(|&d| {
        let ext = &name[d + 1..];
        (1..=3).contains(&ext.len()) && ext.chars().all(is_83_char)
    });
    let lead = match name.chars().next() {
        Some(c) if is_83_char(c) => c.to_ascii_uppercase(),
        _ => '_',
    };
    let prefix = &name[..dot.unwrap_or(name.len())];
    let mut v = hash(prefix);
    let mut out = [0u8; 8];
    out[0] = lead as u8;
    out[6] = b'~';
    out[7] = BASE36[(v % 36) as usize];
    for slot in out[1..6].iter_mut().rev() {
        v /= 36;
        *slot = BASE36[(v % 36) as usize];
    }
    let mut s: String = out.iter().map(|&b| b as char).collect();
    if let Some(d) = dot {
        s.push('.');
        s.extend(name[d + 1..].chars().map(|c| c.to_ascii_uppercase()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_8_3_names_are_kept() {
        assert_eq!(short_name("file.txt"), "file.txt");
        assert_eq!(short_name("LOCK1.TXT"), "LOCK1.TXT");
        assert_eq!(short_name("."), ".");
        assert!(!is_8_3("a.b.c"));
        assert!(!is_8_3("abcdefghi"));
        assert!(!is_8_3("a b.txt"));
        assert!(!is_8_3("a."));
    }

    #[test]
    fn mangled_like_samba_hash2() {
        // Values observed from Samba 4.17 smbd (allinfo "altname").
        assert_eq!(short_name("Long File Name.txt"), "LO7JQ0~4.TXT");
        assert_eq!(short_name("abcdefghij.txt"), "AGUHIA~0.TXT");
        assert_eq!(short_name("a.b.c"), "A1KYDY~M.C");
        assert_eq!(short_name("con").len(), 8);
    }
}
