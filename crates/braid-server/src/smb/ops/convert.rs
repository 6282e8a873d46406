//! File-service values in their FSCC forms.

use braid_fs::{ExtendedAttribute, FileInfo};
use braid_smb_proto::fscc::file_info::FullEa;
use braid_smb_proto::fscc::FileAttributesView;
use braid_smb_proto::NtStatus;

use crate::state::filetime;

pub fn view_of(info: &FileInfo) -> FileAttributesView {
    FileAttributesView {
        creation_time: filetime(info.creation_time),
        last_access_time: filetime(info.last_access_time),
        last_write_time: filetime(info.last_write_time),
        change_time: filetime(info.change_time),
        allocation_size: info.allocation_size,
        end_of_file: info.end_of_file,
        file_attributes: info.attributes,
        // MS-FSA 2.1.5.12.27: NumberOfLinks counts the links not marked
        // for deletion; a delete-pending file has lost its one link.
        number_of_links: if info.delete_pending {
            info.number_of_links.saturating_sub(1)
        } else {
            info.number_of_links
        },
        delete_pending: info.delete_pending,
        directory: info.is_directory,
        file_id: info.file_id,
        ea_size: info.ea_size,
    }
}

/// FILE_FULL_EA_INFORMATION entries as the file service's attributes.
/// MS-FSCC 2.4.15: names are 8-bit ASCII; anything else is
/// STATUS_INVALID_PARAMETER here.
pub fn eas_of(list: Vec<FullEa>) -> Result<Vec<ExtendedAttribute>, NtStatus> {
    list.into_iter()
        .map(|e| {
            let name = String::from_utf8(e.name).map_err(|_| NtStatus::INVALID_PARAMETER)?;
            Ok(ExtendedAttribute {
                name,
                value: e.value,
                flags: e.flags,
            })
        })
        .collect()
}

/// Windows wildcard match, case-insensitive (MS-FSA 2.1.4.4): `*`, `?`,
/// and the DOS forms `<` (DOS_STAR), `>` (DOS_QM), `"` (DOS_DOT).
pub fn wildcard_match(pattern: &str, name: &str) -> bool {
    if pattern == "*" || pattern.is_empty() || pattern == "*.*" {
        return true;
    }
    let p: Vec<char> = pattern.chars().flat_map(char::to_lowercase).collect();
    let n: Vec<char> = name.chars().flat_map(char::to_lowercase).collect();
    matches(&p, &n)
}

fn matches(p: &[char], n: &[char]) -> bool {
    // Iterative matcher with backtracking on the last star.
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '<' => {
                    // DOS_STAR: any run not crossing the last dot.
                    let last_dot = n.iter().rposition(|&c| c == '.');
                    if p[pi + 1..].is_empty() {
                        return last_dot.is_none_or(|d| d < ni);
                    }
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '?' | '>' => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                '"' if n[ni] == '.' => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                c if c == n[ni] => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| matches!(c, '*' | '<' | '>' | '"'))
}

#[cfg(test)]
mod tests {
    use super::wildcard_match as m;
    #[test]
    fn wildcards() {
        assert!(m("*", "abc"));
        assert!(m("a*", "ABC"));
        assert!(m("*.txt", "x.TXT"));
        assert!(!m("*.txt", "x.txt2"));
        assert!(m("a?c", "abc"));
        assert!(!m("a?c", "ac"));
        assert!(m("lock*", "lock1.dat"));
        assert!(m("exact", "Exact"));
        assert!(!m("exact", "exact2"));
        assert!(m("a*b*c", "axxbyyc"));
    }
}
