//! AppleDouble version 2 (RFC 1740) as macOS, netatalk and Samba's
//! vfs_fruit write it in a file's `._NAME` sidecar: a header, then the
//! file's Finder info and its resource fork. macOS packs the file's
//! extended attributes after the Finder info ("ATTR" block, xnu
//! `bsd/vfs/vfs_xattr.c`); netatalk and Samba do not.
//!
//! ```text
//! 0   magic 0x00051607, version 0x00020000      (big-endian, as all of it)
//! 8   filler, 16 bytes: "Mac OS X        " or "Netatalk        "
//! 24  number of entries: 2
//! 26  entry: id 9 (Finder info), offset 50, length 32 (more with ATTR)
//! 38  entry: id 2 (resource fork), offset 82 (more with ATTR), length
//! 50  Finder info, 32 bytes
//!     [2 bytes padding, ATTR header (36 bytes), entries, values]
//! 82  resource fork
//! ```
//!
//! Parsing checks every offset and length against the bytes read and the
//! file's size (Samba `ad_unpack`, `ad_unpack_xattrs`): a sidecar that
//! does not check out is treated as absent, never trusted.

/// AppleDouble magic and version 2.
const MAGIC: u32 = 0x0005_1607;
const VERSION: u32 = 0x0002_0000;
/// What netatalk and Samba write as the filler; what macOS writes.
pub(crate) const FILLER_NETATALK: [u8; 16] = *b"Netatalk        ";
pub(crate) const FILLER_MACOS: [u8; 16] = *b"Mac OS X        ";
/// Magic, version, filler, number of entries.
const HEADER_LEN: usize = 26;
/// Entry id, offset, length.
const ENTRY_LEN: usize = 12;
/// Entry ids (RFC 1740 "Entry IDs").
const ENTRY_RESOURCE_FORK: u32 = 2;
const ENTRY_FINDER_INFO: u32 = 9;
pub(crate) const FINDER_INFO_LEN: usize = 32;
/// Where a sidecar of two entries keeps its Finder info, and its resource
/// fork when no attributes are packed (Samba ADEDOFF_FINDERI_DOT_UND,
/// ADEDOFF_RFORK_DOT_UND): the header is these 82 bytes.
const FINDER_INFO_OFFSET: usize = HEADER_LEN + 2 * ENTRY_LEN;
pub(crate) const RESOURCE_FORK_OFFSET: u64 = (FINDER_INFO_OFFSET + FINDER_INFO_LEN) as u64;
/// The most of a sidecar read to parse it: macOS keeps header, Finder
/// info and packed attributes within 64 KiB (Samba AD_XATTR_MAX_HDR_SIZE).
pub(crate) const MAX_HEADER: usize = 65_536;
/// The packed-attributes block ("ATTR").
const XATTR_MAGIC: u32 = 0x4154_5452;
const XATTR_HEADER_LEN: usize = 36;
const XATTR_MAX_ENTRIES: usize = 1024;
/// Offset, length, flags, name length: what precedes an entry's name.
const XATTR_ENTRY_FIXED: usize = 11;

/// The resource fork macOS writes for a file that has none: a resource
/// map saying "This resource fork intentionally left blank" (Samba
/// `empty_resourcefork`).
pub(crate) const BLANK_RESOURCE_FORK: [u8; 286] = blank_resource_fork();

const fn blank_resource_fork() -> [u8; 286] {
    let mut b = [0u8; 286];
    // Resource header: data at 0x100, map at 0x100, data length 0, map
    // length 0x1e.
    b[2] = 0x01;
    b[6] = 0x01;
    b[15] = 0x1e;
    let text = b"This resource fork intentionally left blank   ";
    let mut i = 0;
    while i < text.len() {
        b[16 + i] = text[i];
        i += 1;
    }
    // The resource map, at 0x100: a copy of the header, then the offsets
    // of the (empty) type list and name list, and no types.
    b[256 + 2] = 0x01;
    b[256 + 6] = 0x01;
    b[256 + 15] = 0x1e;
    b[256 + 25] = 0x1c;
    b[256 + 27] = 0x1e;
    b[256 + 28] = 0xff;
    b[256 + 29] = 0xff;
    b
}

/// One extended attribute macOS packed into a sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PackedXattr {
    /// UTF-8, as on macOS (`com.apple.metadata:_kMDItemUserTags`).
    pub name: String,
    pub value: Vec<u8>,
}

/// A parsed `._` sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sidecar {
    pub filler: [u8; 16],
    pub finder_info: [u8; FINDER_INFO_LEN],
    /// The attributes packed after the Finder info (macOS only).
    pub xattrs: Vec<PackedXattr>,
    pub resource_fork_offset: u64,
    pub resource_fork_len: u64,
}

impl Sidecar {
    /// A sidecar with no Finder info and an empty resource fork, as Samba
    /// creates one (`ad_init(ADOUBLE_RSRC)`).
    pub(crate) fn empty() -> Sidecar {
        Sidecar {
            filler: FILLER_NETATALK,
            finder_info: [0; FINDER_INFO_LEN],
            xattrs: Vec::new(),
            resource_fork_offset: RESOURCE_FORK_OFFSET,
            resource_fork_len: 0,
        }
    }

    /// Whether the resource fork is where [`Sidecar::header`] says it is:
    /// right after the Finder info, with no attributes packed.
    pub(crate) fn is_plain(&self) -> bool {
        self.xattrs.is_empty() && self.resource_fork_offset == RESOURCE_FORK_OFFSET
    }

    /// The 82-byte header of a plain sidecar (attributes, if any, are
    /// not written: they are converted to streams first).
    pub(crate) fn header(&self) -> [u8; RESOURCE_FORK_OFFSET as usize] {
        let mut h = [0u8; RESOURCE_FORK_OFFSET as usize];
        h[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        h[4..8].copy_from_slice(&VERSION.to_be_bytes());
        h[8..24].copy_from_slice(&self.filler);
        h[24..26].copy_from_slice(&2u16.to_be_bytes());
        let entries = [
            (
                ENTRY_FINDER_INFO,
                FINDER_INFO_OFFSET as u32,
                FINDER_INFO_LEN as u32,
            ),
            (
                ENTRY_RESOURCE_FORK,
                RESOURCE_FORK_OFFSET as u32,
                // A resource fork is at most 4 GiB here: writes past that
                // are refused before the header is written.
                self.resource_fork_len.min(u32::MAX as u64) as u32,
            ),
        ];
        for (i, (id, off, len)) in entries.into_iter().enumerate() {
            let at = HEADER_LEN + i * ENTRY_LEN;
            h[at..at + 4].copy_from_slice(&id.to_be_bytes());
            h[at + 4..at + 8].copy_from_slice(&off.to_be_bytes());
            h[at + 8..at + 12].copy_from_slice(&len.to_be_bytes());
        }
        h[FINDER_INFO_OFFSET..FINDER_INFO_OFFSET + FINDER_INFO_LEN]
            .copy_from_slice(&self.finder_info);
        h
    }

    /// Parse a sidecar from its first bytes (`buf`, up to
    /// [`MAX_HEADER`]) and the file's size. `None` for anything that is
    /// not a valid two-entry AppleDouble with the Finder info at 50 and
    /// the resource fork at or after 82 (Samba `ad_read_rsrc_adouble`).
    /// A resource fork said to end past the end of the file is cut to it.
    pub(crate) fn parse(buf: &[u8], file_size: u64) -> Option<Sidecar> {
        if buf.len() < RESOURCE_FORK_OFFSET as usize {
            return None;
        }
        if be32(buf, 0)? != MAGIC || be32(buf, 4)? != VERSION || be16(buf, 24)? != 2 {
            return None;
        }
        let mut finder = None;
        let mut fork = None;
        for i in 0..2 {
            let at = HEADER_LEN + i * ENTRY_LEN;
            let (id, off, len) = (be32(buf, at)?, be32(buf, at + 4)?, be32(buf, at + 8)?);
            let (off, mut len) = (off as u64, len as u64);
            if off > file_size {
                return None;
            }
            if off + len > file_size {
                if id != ENTRY_RESOURCE_FORK {
                    return None;
                }
                len = file_size - off;
            }
            match id {
                ENTRY_FINDER_INFO if finder.is_none() => finder = Some((off, len)),
                ENTRY_RESOURCE_FORK if fork.is_none() => fork = Some((off, len)),
                _ => return None,
            }
        }
        let ((fi_off, fi_len), (rf_off, rf_len)) = (finder?, fork?);
        if fi_off != FINDER_INFO_OFFSET as u64
            || fi_len < FINDER_INFO_LEN as u64
            || rf_off < RESOURCE_FORK_OFFSET
        {
            return None;
        }
        let mut finder_info = [0u8; FINDER_INFO_LEN];
        finder_info.copy_from_slice(&buf[FINDER_INFO_OFFSET..FINDER_INFO_OFFSET + FINDER_INFO_LEN]);
        let xattrs = if fi_len > FINDER_INFO_LEN as u64 {
            parse_xattrs(buf, rf_off)?
        } else {
            Vec::new()
        };
        Some(Sidecar {
            filler: buf[8..24].try_into().ok()?,
            finder_info,
            xattrs,
            resource_fork_offset: rf_off,
            resource_fork_len: rf_len,
        })
    }
}

/// The attributes macOS packs after the Finder info (Samba
/// `ad_unpack_xattrs`), which must all lie before the resource fork and
/// within the bytes read.
fn parse_xattrs(buf: &[u8], resource_fork_offset: u64) -> Option<Vec<PackedXattr>> {
    // Two bytes of padding align the header.
    let mut at = FINDER_INFO_OFFSET + FINDER_INFO_LEN + 2;
    if be32(buf, at)? != XATTR_MAGIC {
        return None;
    }
    let total = be32(buf, at + 8)? as usize;
    let data_start = be32(buf, at + 12)? as usize;
    let data_len = be32(buf, at + 16)? as usize;
    let count = be16(buf, at + 34)? as usize;
    if total as u64 > resource_fork_offset || total > MAX_HEADER || total > buf.len() {
        return None;
    }
    if data_start < at + XATTR_HEADER_LEN || data_start.checked_add(data_len)? > total {
        return None;
    }
    if count > XATTR_MAX_ENTRIES {
        return None;
    }
    at += XATTR_HEADER_LEN;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        at = at.checked_add(3)? & !3;
        let off = be32(buf, at)? as usize;
        let len = be32(buf, at + 4)? as usize;
        let name_len = *buf.get(at + 10)? as usize;
        if off >= total || off.checked_add(len)? > total {
            return None;
        }
        if name_len == 0 || at + XATTR_ENTRY_FIXED + name_len > data_start {
            return None;
        }
        let raw = &buf[at + XATTR_ENTRY_FIXED..at + XATTR_ENTRY_FIXED + name_len];
        // The length counts the terminating NUL; the name ends at the
        // first NUL in any case.
        let raw = raw.split(|b| *b == 0).next().unwrap_or(raw);
        let name = std::str::from_utf8(raw).ok()?.to_string();
        out.push(PackedXattr {
            name,
            value: buf[off..off + len].to_vec(),
        });
        at += XATTR_ENTRY_FIXED + name_len;
    }
    Some(out)
}

fn be32(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(
        buf.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn be16(buf: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(
        buf.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// The name a packed attribute gets as a stream: the characters Windows
/// refuses in a stream name mapped to the private-use code points macOS
/// clients use for them (Samba's `macos_string_replace_map`), so that
/// `com.apple.metadata:_kMDItemUserTags` becomes
/// `com.apple.metadata\u{f022}_kMDItemUserTags`.
pub(crate) fn stream_name_of_xattr(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '\u{1}'..='\u{1f}' => char::from_u32(0xf000 + c as u32).unwrap_or(c),
            '"' => '\u{f020}',
            '*' => '\u{f021}',
            ':' => '\u{f022}',
            '<' => '\u{f023}',
            '>' => '\u{f024}',
            '?' => '\u{f025}',
            '\\' => '\u{f026}',
            '|' => '\u{f027}',
            c => c,
        })
        .collect()
}

/// The two entries of a sidecar whose Finder info entry is
/// `finder_info_len` long (with any packed attributes) and whose resource
/// fork follows it: the resource fork first, in the order of Samba's
/// `ad_pack` (entry ids ascending).
fn write_entries(h: &mut [u8], finder_info_len: usize, resource_fork_len: u32) {
    let table = [
        (
            ENTRY_RESOURCE_FORK,
            (FINDER_INFO_OFFSET + finder_info_len) as u32,
            resource_fork_len,
        ),
        (
            ENTRY_FINDER_INFO,
            FINDER_INFO_OFFSET as u32,
            finder_info_len as u32,
        ),
    ];
    for (i, (id, off, len)) in table.into_iter().enumerate() {
        let e = HEADER_LEN + i * ENTRY_LEN;
        h[e..e + 4].copy_from_slice(&id.to_be_bytes());
        h[e + 4..e + 8].copy_from_slice(&off.to_be_bytes());
        h[e + 8..e + 12].copy_from_slice(&len.to_be_bytes());
    }
}

/// The attribute name a stream gets back in a sidecar: the inverse of
/// [`stream_name_of_xattr`] (Samba's catia `vfs_translate_to_unix`).
pub(crate) fn xattr_name_of_stream(name: &str) -> String {
    name.chars()
        .map(|c| match c as u32 {
            0xf001..=0xf01f => char::from_u32(c as u32 - 0xf000).unwrap_or(c),
            0xf020 => '"',
            0xf021 => '*',
            0xf022 => ':',
            0xf023 => '<',
            0xf024 => '>',
            0xf025 => '?',
            0xf026 => '\\',
            0xf027 => '|',
            _ => c,
        })
        .collect()
}

/// The bytes of a sidecar up to its resource fork, holding `finder_info`
/// and, when there are any, `xattrs` packed after it as macOS packs them;
/// the resource fork of `resource_fork_len` bytes is to follow. Laid out
/// byte for byte as Samba's `ad_pack` and `ad_pack_xattrs` write it for
/// `net vfs stream2adouble`: without attributes the plain 82-byte header
/// ("Netatalk" filler); with them the "Mac OS X" filler, two bytes of
/// padding after the Finder info, the 36-byte ATTR header, the entries
/// each on a 4-byte boundary, then the values back to back, the Finder
/// info entry covering all of it and the resource fork right after.
/// `None` when that header would pass [`MAX_HEADER`] or a name is longer
/// than its one-byte length allows.
pub(crate) fn pack_header(
    finder_info: &[u8; FINDER_INFO_LEN],
    xattrs: &[PackedXattr],
    resource_fork_len: u64,
) -> Option<Vec<u8>> {
    let resource_fork_len = resource_fork_len.min(u32::MAX as u64) as u32;
    if xattrs.is_empty() {
        let mut h = Sidecar {
            finder_info: *finder_info,
            ..Sidecar::empty()
        }
        .header()
        .to_vec();
        write_entries(&mut h, FINDER_INFO_LEN, resource_fork_len);
        return Some(h);
    }
    let xattr_header_at = FINDER_INFO_OFFSET + FINDER_INFO_LEN + 2;
    let mut entries = Vec::new();
    let mut at = xattr_header_at + XATTR_HEADER_LEN;
    for x in xattrs {
        let name_len = x.name.len() + 1;
        if name_len > u8::MAX as usize || x.name.contains('\0') {
            return None;
        }
        at = (at + 3) & !3;
        entries.push(at);
        at += XATTR_ENTRY_FIXED + name_len;
    }
    let data_start = at;
    let data_len: usize = xattrs.iter().map(|x| x.value.len()).sum();
    let total = data_start.checked_add(data_len)?;
    if total > MAX_HEADER {
        return None;
    }
    let mut h = vec![0u8; total];
    h[0..4].copy_from_slice(&MAGIC.to_be_bytes());
    h[4..8].copy_from_slice(&VERSION.to_be_bytes());
    h[8..24].copy_from_slice(&FILLER_MACOS);
    h[24..26].copy_from_slice(&2u16.to_be_bytes());
    write_entries(&mut h, total - FINDER_INFO_OFFSET, resource_fork_len);
    h[FINDER_INFO_OFFSET..FINDER_INFO_OFFSET + FINDER_INFO_LEN].copy_from_slice(finder_info);
    let x = xattr_header_at;
    h[x..x + 4].copy_from_slice(&XATTR_MAGIC.to_be_bytes());
    h[x + 8..x + 12].copy_from_slice(&(total as u32).to_be_bytes());
    h[x + 12..x + 16].copy_from_slice(&(data_start as u32).to_be_bytes());
    h[x + 16..x + 20].copy_from_slice(&(data_len as u32).to_be_bytes());
    h[x + 34..x + 36].copy_from_slice(&(xattrs.len() as u16).to_be_bytes());
    let mut value_at = data_start;
    for (xa, e) in xattrs.iter().zip(entries) {
        h[e..e + 4].copy_from_slice(&(value_at as u32).to_be_bytes());
        h[e + 4..e + 8].copy_from_slice(&(xa.value.len() as u32).to_be_bytes());
        h[e + 10] = (xa.name.len() + 1) as u8;
        h[e + XATTR_ENTRY_FIXED..e + XATTR_ENTRY_FIXED + xa.name.len()]
            .copy_from_slice(xa.name.as_bytes());
        h[value_at..value_at + xa.value.len()].copy_from_slice(&xa.value);
        value_at += xa.value.len();
    }
    Some(h)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A macOS sidecar with Finder info, packed attributes and a resource
    /// fork, laid out as xnu writes one.
    pub(crate) fn macos_sidecar(
        finder: &[u8; 32],
        xattrs: &[(&str, &[u8])],
        fork: &[u8],
    ) -> Vec<u8> {
        let hdr_at = FINDER_INFO_OFFSET + FINDER_INFO_LEN + 2;
        let mut entries_end = hdr_at + XATTR_HEADER_LEN;
        for (name, _) in xattrs {
            entries_end = (entries_end + 3) & !3;
            entries_end += XATTR_ENTRY_FIXED + name.len() + 1;
        }
        let data_start = entries_end;
        let data_len: usize = xattrs.iter().map(|(_, v)| v.len()).sum();
        let total = data_start + data_len;
        let fork_off = total.max(RESOURCE_FORK_OFFSET as usize) + 100; // free space
        let mut b = vec![0u8; fork_off + fork.len()];
        b[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&VERSION.to_be_bytes());
        b[8..24].copy_from_slice(&FILLER_MACOS);
        b[24..26].copy_from_slice(&2u16.to_be_bytes());
        let fi_len = if xattrs.is_empty() {
            FINDER_INFO_LEN
        } else {
            fork_off - FINDER_INFO_OFFSET
        };
        let put =
            |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_be_bytes());
        put(&mut b, 26, ENTRY_FINDER_INFO);
        put(&mut b, 30, FINDER_INFO_OFFSET as u32);
        put(&mut b, 34, fi_len as u32);
        put(&mut b, 38, ENTRY_RESOURCE_FORK);
        put(&mut b, 42, fork_off as u32);
        put(&mut b, 46, fork.len() as u32);
        b[FINDER_INFO_OFFSET..FINDER_INFO_OFFSET + 32].copy_from_slice(finder);
        if !xattrs.is_empty() {
            put(&mut b, hdr_at, XATTR_MAGIC);
            put(&mut b, hdr_at + 8, total as u32);
            put(&mut b, hdr_at + 12, data_start as u32);
            put(&mut b, hdr_at + 16, data_len as u32);
            b[hdr_at + 34..hdr_at + 36].copy_from_slice(&(xattrs.len() as u16).to_be_bytes());
            let (mut at, mut data) = (hdr_at + XATTR_HEADER_LEN, data_start);
            for (name, value) in xattrs {
                at = (at + 3) & !3;
                put(&mut b, at, data as u32);
                put(&mut b, at + 4, value.len() as u32);
                b[at + 10] = name.len() as u8 + 1;
                b[at + 11..at + 11 + name.len()].copy_from_slice(name.as_bytes());
                at += XATTR_ENTRY_FIXED + name.len() + 1;
                b[data..data + value.len()].copy_from_slice(value);
                data += value.len();
            }
        }
        b[fork_off..].copy_from_slice(fork);
        b
    }

    #[test]
    fn plain_header_round_trips() {
        let mut s = Sidecar::empty();
        s.finder_info[..8].copy_from_slice(b"TESTSLOW");
        s.resource_fork_len = 20;
        let mut file = s.header().to_vec();
        file.extend_from_slice(&[7u8; 20]);
        let back = Sidecar::parse(&file, file.len() as u64).unwrap();
        assert_eq!(back, s);
        assert!(back.is_plain());
    }

    #[test]
    fn macos_sidecar_with_packed_attributes() {
        let mut finder = [0u8; 32];
        finder[..8].copy_from_slice(b"TESTSLOW");
        let file = macos_sidecar(
            &finder,
            &[
                ("com.apple.metadata:_kMDItemUserTags", b"tags"),
                ("foo:bar", b"baz"),
            ],
            b"fork data",
        );
        let s = Sidecar::parse(&file, file.len() as u64).unwrap();
        assert_eq!(s.filler, FILLER_MACOS);
        assert_eq!(&s.finder_info[..8], b"TESTSLOW");
        assert_eq!(s.xattrs.len(), 2);
        assert_eq!(s.xattrs[0].name, "com.apple.metadata:_kMDItemUserTags");
        assert_eq!(s.xattrs[0].value, b"tags");
        assert_eq!(s.xattrs[1].name, "foo:bar");
        assert_eq!(s.xattrs[1].value, b"baz");
        assert_eq!(s.resource_fork_len, 9);
        assert!(!s.is_plain());
        let fork_at = s.resource_fork_offset as usize;
        assert_eq!(&file[fork_at..fork_at + 9], b"fork data");
    }

    #[test]
    fn resource_fork_past_the_end_is_cut() {
        let mut s = Sidecar::empty();
        s.resource_fork_len = 1000;
        let mut file = s.header().to_vec();
        file.extend_from_slice(&[1u8; 10]);
        let back = Sidecar::parse(&file, file.len() as u64).unwrap();
        assert_eq!(back.resource_fork_len, 10);
    }

    #[test]
    fn refuses_what_does_not_check_out() {
        let good = Sidecar::empty().header();
        assert!(Sidecar::parse(&good, 82).is_some());
        assert!(Sidecar::parse(&good[..81], 81).is_none());
        let mut bad = good;
        bad[0] = 9; // magic
        assert!(Sidecar::parse(&bad, 82).is_none());
        let mut bad = good;
        bad[25] = 3; // entries
        assert!(Sidecar::parse(&bad, 82).is_none());
        let mut bad = good;
        bad[33] = 51; // Finder info not at 50
        assert!(Sidecar::parse(&bad, 82).is_none());
        let mut bad = good;
        bad[45] = 81; // resource fork inside the header
        assert!(Sidecar::parse(&bad, 82).is_none());
        let mut bad = good;
        bad[41] = ENTRY_FINDER_INFO as u8; // the same entry twice
        assert!(Sidecar::parse(&bad, 82).is_none());
        // Finder info said to end past the end of the file.
        let mut bad = good;
        bad[37] = 200;
        assert!(Sidecar::parse(&bad, 82).is_none());
        // Packed attributes whose block runs past what was read.
        let file = macos_sidecar(&[1; 32], &[("a", b"1")], b"");
        let n = file.len();
        assert!(Sidecar::parse(&file[..100], n as u64).is_none());
    }

    #[test]
    fn blank_resource_fork_is_the_one_macos_writes() {
        let b = BLANK_RESOURCE_FORK;
        assert_eq!(&b[16..59], b"This resource fork intentionally left blank");
        assert_eq!(b[0x100 + 15], 0x1e);
        assert_eq!(&b[284..286], &[0xff, 0xff]);
    }

    #[test]
    fn attribute_names_map_to_stream_names() {
        assert_eq!(
            stream_name_of_xattr("com.apple.metadata:_kMDItemUserTags"),
            "com.apple.metadata\u{f022}_kMDItemUserTags"
        );
        assert_eq!(
            stream_name_of_xattr("a*b?c\u{1}"),
            "a\u{f021}b\u{f025}c\u{f001}"
        );
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(buf in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
                              size in 0u64..100_000) {
            let _ = Sidecar::parse(&buf, size);
        }

        #[test]
        fn parse_never_panics_on_mutated_sidecars(flips in proptest::collection::vec((0usize..200, proptest::num::u8::ANY), 1..6)) {
            let mut file = macos_sidecar(&[3; 32], &[("x:y", b"v"), ("z", b"")], b"rsrc");
            for (at, v) in flips {
                let at = at % file.len();
                file[at] = v;
            }
            let n = file.len() as u64;
            let _ = Sidecar::parse(&file, n);
        }
    }

    /// What Samba's `net vfs stream2adouble` writes for a file whose
    /// AfpInfo holds the Finder info "FOO BAR ", with a stream
    /// `org.samba\u{f022}woohoo` of "bar\0" and the resource fork
    /// "bar\0" (smbtorture vfs.unfruit.unconvert, `unconvert_adfile_data`
    /// in source4/torture/vfs/fruit.c).
    #[test]
    fn packs_attributes_as_samba_unconvert_does() {
        const SAMBA: [u8; 156] = [
            0x00, 0x05, 0x16, 0x07, 0x00, 0x02, 0x00, 0x00, 0x4d, 0x61, 0x63, 0x20, 0x4f, 0x53,
            0x20, 0x58, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x00, 0x02, 0x00, 0x00,
            0x00, 0x02, 0x00, 0x00, 0x00, 0x98, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x09,
            0x00, 0x00, 0x00, 0x32, 0x00, 0x00, 0x00, 0x66, 0x46, 0x4f, 0x4f, 0x20, 0x42, 0x41,
            0x52, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x41, 0x54, 0x54, 0x52, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x98, 0x00, 0x00,
            0x00, 0x94, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x94, 0x00, 0x00,
            0x00, 0x04, 0x00, 0x00, 0x11, 0x6f, 0x72, 0x67, 0x2e, 0x73, 0x61, 0x6d, 0x62, 0x61,
            0x3a, 0x77, 0x6f, 0x6f, 0x68, 0x6f, 0x6f, 0x00, 0x62, 0x61, 0x72, 0x00, 0x62, 0x61,
            0x72, 0x00,
        ];
        let mut finder = [0u8; FINDER_INFO_LEN];
        finder[..8].copy_from_slice(b"FOO BAR ");
        let xattrs = [PackedXattr {
            name: xattr_name_of_stream("org.samba\u{f022}woohoo"),
            value: b"bar\0".to_vec(),
        }];
        let mut out = pack_header(&finder, &xattrs, 4).expect("fits");
        out.extend_from_slice(b"bar\0");
        assert_eq!(out, SAMBA);
        // And it reads back as what was packed.
        let back = Sidecar::parse(&out, out.len() as u64).expect("parses");
        assert_eq!(back.xattrs, xattrs);
        assert_eq!(back.finder_info, finder);
        assert_eq!(
            (back.resource_fork_offset, back.resource_fork_len),
            (0x98, 4)
        );
    }

    #[test]
    fn without_attributes_the_header_is_plain() {
        let finder = [7u8; FINDER_INFO_LEN];
        let h = pack_header(&finder, &[], 10).unwrap();
        let back = Sidecar::parse(&h, h.len() as u64 + 10).unwrap();
        assert!(back.is_plain());
        assert_eq!(back.filler, FILLER_NETATALK);
        assert_eq!((back.finder_info, back.resource_fork_len), (finder, 10));
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let finder = [0u8; FINDER_INFO_LEN];
        let long = PackedXattr {
            name: "n".repeat(255),
            value: Vec::new(),
        };
        assert!(pack_header(&finder, &[long], 0).is_none());
        let big = PackedXattr {
            name: "big".into(),
            value: vec![0; MAX_HEADER],
        };
        assert!(pack_header(&finder, &[big], 0).is_none());
        assert_eq!(
            xattr_name_of_stream(&stream_name_of_xattr("a:b*c\\d")),
            "a:b*c\\d"
        );
    }
}
