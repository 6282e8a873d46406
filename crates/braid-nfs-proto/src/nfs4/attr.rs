//! File attributes (RFC 8881 5.6, 5.7): `fattr4` is a bitmap plus an opaque
//! `attrlist4` holding the values of the set bits in ascending order. This
//! module maps between `fattr4` and the typed [`FileAttrs`].
//!
//! The attributes handled (bit: field):
//! 0 supported_attrs, 1 type, 2 fh_expire_type, 3 change, 4 size,
//! 5 link_support, 6 symlink_support, 7 named_attr, 8 fsid,
//! 9 unique_handles, 10 lease_time, 11 rdattr_error, 13 aclsupport,
//! 14 archive, 15 cansettime, 16 case_insensitive, 17 case_preserving,
//! 18 chown_restricted, 19 filehandle, 20 fileid, 21 files_avail,
//! 22 files_free, 23 files_total, 25 hidden, 26 homogeneous,
//! 27 maxfilesize, 28 maxlink, 29 maxname, 30 maxread, 31 maxwrite,
//! 33 mode, 34 no_trunc, 35 numlinks, 36 owner, 37 owner_group, 41 rawdev,
//! 42 space_avail, 43 space_free, 44 space_total, 45 space_used, 46 system,
//! 47 time_access, 48 time_access_set, 50 time_create, 51 time_delta,
//! 52 time_metadata, 53 time_modify, 54 time_modify_set,
//! 55 mounted_on_fileid, 75 suppattr_exclcreat, 76 fs_charset_cap,
//! 82 xattr_support (NFSv4.2, RFC 8276), 86 open_arguments (NFSv4.2,
//! RFC 9754).
//! Not handled (→ [`AttrError::Unsupported`]): acl (12), fs_locations (24),
//! mimetype (32), quotas (38-40), time_backup (49), and the pNFS,
//! retention, ACL-4.1 attributes and the other 4.2 ones.

use bytes::Bytes;

use super::generated::*;
use crate::xdr::{Xdr, XdrError, XdrReader, XdrWriter};

/// Most bitmap words accepted from a peer (bits 0..=255).
pub const MAX_BITMAP_WORDS: usize = 8;

/// A set of attribute numbers (RFC 8881 3.3.7 bitmap4), kept without
/// trailing zero words.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Bitmap(pub Vec<u32>);

impl Bitmap {
    pub fn new() -> Self {
        Self::default()
    }

    /// A bitmap of the given bits.
    pub fn from_bits(bits: &[u32]) -> Self {
        let mut b = Self::new();
        for &x in bits {
            b.set(x);
        }
        b
    }

    pub fn set(&mut self, bit: u32) {
        let w = (bit / 32) as usize;
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << (bit % 32);
    }

    pub fn clear(&mut self, bit: u32) {
        if let Some(w) = self.0.get_mut((bit / 32) as usize) {
            *w &= !(1 << (bit % 32));
        }
        self.trim();
    }

    pub fn contains(&self, bit: u32) -> bool {
        self.0
            .get((bit / 32) as usize)
            .is_some_and(|w| w & (1 << (bit % 32)) != 0)
    }

    /// The set bits, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            (0..32)
                .filter(move |b| w & (1 << b) != 0)
                .map(move |b| i as u32 * 32 + b)
        })
    }

    pub fn intersect(&self, other: &Bitmap) -> Bitmap {
        let mut b = Bitmap(self.0.iter().zip(&other.0).map(|(a, b)| a & b).collect());
        b.trim();
        b
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    /// From a peer's bitmap4: at most [`MAX_BITMAP_WORDS`] words.
    pub fn from_wire(b: &bitmap4) -> Result<Bitmap, XdrError> {
        if b.len() > MAX_BITMAP_WORDS {
            return Err(XdrError::TooLong {
                what: "bitmap4",
                len: b.len() as u64,
                max: MAX_BITMAP_WORDS as u64,
            });
        }
        Ok(Bitmap::from(b.clone()))
    }
}

impl From<bitmap4> for Bitmap {
    fn from(v: bitmap4) -> Self {
        let mut b = Bitmap(v);
        b.trim();
        b
    }
}

impl From<Bitmap> for bitmap4 {
    fn from(mut b: Bitmap) -> Self {
        b.trim();
        b.0
    }
}

impl From<&Bitmap> for bitmap4 {
    fn from(b: &Bitmap) -> Self {
        b.clone().into()
    }
}

/// Why an attribute list could not be taken.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum AttrError {
    /// An attribute this module does not handle (→ NFS4ERR_ATTRNOTSUPP).
    #[error("attribute {0} not supported")]
    Unsupported(u32),
    /// Garbage, a short list or trailing bytes (→ NFS4ERR_BADXDR).
    #[error("attribute list: {0}")]
    Xdr(#[from] XdrError),
    /// A well-formed but invalid value (→ NFS4ERR_INVAL).
    #[error("attribute {0}: invalid value")]
    Inval(u32),
}

/// The coding of one attribute's value.
trait AttrValue: Sized {
    fn put(&self, w: &mut XdrWriter);
    fn get(r: &mut XdrReader, bit: u32) -> Result<Self, AttrError>;
}

macro_rules! plain_value {
    ($($t:ty),*) => {$(
        impl AttrValue for $t {
            fn put(&self, w: &mut XdrWriter) {
                self.encode(w)
            }
            fn get(r: &mut XdrReader, _bit: u32) -> Result<Self, AttrError> {
                Ok(<$t>::decode(r)?)
            }
        }
    )*};
}
plain_value!(u32, u64, bool, fsid4, specdata4, nfsstat4, open_arguments4);

impl AttrValue for Bitmap {
    fn put(&self, w: &mut XdrWriter) {
        bitmap4::from(self).encode_bitmap(w)
    }
    fn get(r: &mut XdrReader, _bit: u32) -> Result<Self, AttrError> {
        let n = r.get_count(MAX_BITMAP_WORDS as u32, 4, "bitmap4")?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(r.get_u32()?);
        }
        Ok(Bitmap::from(v))
    }
}

trait EncodeBitmap {
    fn encode_bitmap(&self, w: &mut XdrWriter);
}
impl EncodeBitmap for bitmap4 {
    fn encode_bitmap(&self, w: &mut XdrWriter) {
        w.put_u32(self.len() as u32);
        for x in self {
            w.put_u32(*x);
        }
    }
}

impl AttrValue for Vec<u8> {
    fn put(&self, w: &mut XdrWriter) {
        w.put_opaque(self)
    }
    fn get(r: &mut XdrReader, bit: u32) -> Result<Self, AttrError> {
        // RFC 8881 5.8.1.21 (filehandle: nfs_fh4<NFS4_FHSIZE>); owners are
        // bounded by NFS4_OPAQUE_LIMIT here.
        let max = if bit == FATTR4_FILEHANDLE {
            NFS4_FHSIZE
        } else {
            NFS4_OPAQUE_LIMIT
        };
        Ok(r.get_opaque(max, "fattr4 value")?)
    }
}

impl AttrValue for nfs_ftype4 {
    fn put(&self, w: &mut XdrWriter) {
        self.encode(w)
    }
    fn get(r: &mut XdrReader, bit: u32) -> Result<Self, AttrError> {
        let t = nfs_ftype4::decode(r)?;
        if !(NF4REG.0..=NF4NAMEDATTR.0).contains(&t.0) {
            return Err(AttrError::Inval(bit));
        }
        Ok(t)
    }
}

// RFC 8881 3.3.1: nseconds is below one second.
impl AttrValue for nfstime4 {
    fn put(&self, w: &mut XdrWriter) {
        self.encode(w)
    }
    fn get(r: &mut XdrReader, bit: u32) -> Result<Self, AttrError> {
        let t = nfstime4::decode(r)?;
        if t.nseconds >= 1_000_000_000 {
            return Err(AttrError::Inval(bit));
        }
        Ok(t)
    }
}

// RFC 8881 3.3.2: settime4 is SET_TO_SERVER_TIME4 or SET_TO_CLIENT_TIME4 with a time.
impl AttrValue for settime4 {
    fn put(&self, w: &mut XdrWriter) {
        self.encode(w)
    }
    fn get(r: &mut XdrReader, bit: u32) -> Result<Self, AttrError> {
        match settime4::decode(r)? {
            settime4::SET_TO_CLIENT_TIME4(t) if t.nseconds < 1_000_000_000 => {
                Ok(settime4::SET_TO_CLIENT_TIME4(t))
            }
            settime4::Default(SET_TO_SERVER_TIME4) => Ok(settime4::Default(SET_TO_SERVER_TIME4)),
            _ => Err(AttrError::Inval(bit)),
        }
    }
}

macro_rules! file_attrs {
    ($( $(#[$m:meta])* $bit:ident => $field:ident : $ty:ty ),* $(,)?) => {
        /// The attributes of a file, one `Option` per attribute handled
        /// (see the module documentation for the set).
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct FileAttrs {
            $( $(#[$m])* pub $field: Option<$ty>, )*
        }

        /// Every attribute bit this module handles.
        pub const HANDLED_ATTRS: &[u32] = &[$($bit),*];

        impl FileAttrs {
            /// The bits whose value is present.
            pub fn present(&self) -> Bitmap {
                let mut b = Bitmap::new();
                $( if self.$field.is_some() { b.set($bit); } )*
                b
            }

            /// Encodes one attribute if present; false when absent or unknown.
            fn put(&self, bit: u32, w: &mut XdrWriter) -> bool {
                match bit {
                    $( $bit => match &self.$field {
                        Some(v) => { v.put(w); true }
                        None => false,
                    }, )*
                    _ => false,
                }
            }

            fn get(&mut self, bit: u32, r: &mut XdrReader) -> Result<(), AttrError> {
                match bit {
                    $( $bit => self.$field = Some(AttrValue::get(r, bit)?), )*
                    _ => return Err(AttrError::Unsupported(bit)),
                }
                Ok(())
            }
        }
    };
}

file_attrs! {
    FATTR4_SUPPORTED_ATTRS => supported_attrs: Bitmap,
    FATTR4_TYPE => r#type: nfs_ftype4,
    FATTR4_FH_EXPIRE_TYPE => fh_expire_type: u32,
    FATTR4_CHANGE => change: u64,
    FATTR4_SIZE => size: u64,
    FATTR4_LINK_SUPPORT => link_support: bool,
    FATTR4_SYMLINK_SUPPORT => symlink_support: bool,
    FATTR4_NAMED_ATTR => named_attr: bool,
    FATTR4_FSID => fsid: fsid4,
    FATTR4_UNIQUE_HANDLES => unique_handles: bool,
    FATTR4_LEASE_TIME => lease_time: u32,
    FATTR4_RDATTR_ERROR => rdattr_error: nfsstat4,
    FATTR4_ACLSUPPORT => aclsupport: u32,
    FATTR4_ARCHIVE => archive: bool,
    FATTR4_CANSETTIME => cansettime: bool,
    FATTR4_CASE_INSENSITIVE => case_insensitive: bool,
    FATTR4_CASE_PRESERVING => case_preserving: bool,
    FATTR4_CHOWN_RESTRICTED => chown_restricted: bool,
    FATTR4_FILEHANDLE => filehandle: Vec<u8>,
    FATTR4_FILEID => fileid: u64,
    FATTR4_FILES_AVAIL => files_avail: u64,
    FATTR4_FILES_FREE => files_free: u64,
    FATTR4_FILES_TOTAL => files_total: u64,
    FATTR4_HIDDEN => hidden: bool,
    FATTR4_HOMOGENEOUS => homogeneous: bool,
    FATTR4_MAXFILESIZE => maxfilesize: u64,
    FATTR4_MAXLINK => maxlink: u32,
    FATTR4_MAXNAME => maxname: u32,
    FATTR4_MAXREAD => maxread: u64,
    FATTR4_MAXWRITE => maxwrite: u64,
    FATTR4_MODE => mode: u32,
    FATTR4_NO_TRUNC => no_trunc: bool,
    FATTR4_NUMLINKS => numlinks: u32,
    FATTR4_OWNER => owner: Vec<u8>,
    FATTR4_OWNER_GROUP => owner_group: Vec<u8>,
    FATTR4_RAWDEV => rawdev: specdata4,
    FATTR4_SPACE_AVAIL => space_avail: u64,
    FATTR4_SPACE_FREE => space_free: u64,
    FATTR4_SPACE_TOTAL => space_total: u64,
    FATTR4_SPACE_USED => space_used: u64,
    FATTR4_SYSTEM => system: bool,
    FATTR4_TIME_ACCESS => time_access: nfstime4,
    FATTR4_TIME_ACCESS_SET => time_access_set: settime4,
    FATTR4_TIME_CREATE => time_create: nfstime4,
    FATTR4_TIME_DELTA => time_delta: nfstime4,
    FATTR4_TIME_METADATA => time_metadata: nfstime4,
    FATTR4_TIME_MODIFY => time_modify: nfstime4,
    FATTR4_TIME_MODIFY_SET => time_modify_set: settime4,
    FATTR4_MOUNTED_ON_FILEID => mounted_on_fileid: u64,
    FATTR4_SUPPATTR_EXCLCREAT => suppattr_exclcreat: Bitmap,
    /// fs_charset_cap4 flags, as a u32.
    FATTR4_FS_CHARSET_CAP => fs_charset_cap: u32,
    /// NFSv4.2 (RFC 8276 8.1): the object may have extended attributes.
    FATTR4_XATTR_SUPPORT => xattr_support: bool,
    /// NFSv4.2 (RFC 9754 3): which OPEN arguments the server supports.
    FATTR4_OPEN_ARGUMENTS => open_arguments: open_arguments4,
}

/// Every handled attribute bit as a bitmap.
pub fn handled_bitmap() -> Bitmap {
    Bitmap::from_bits(HANDLED_ATTRS)
}

// RFC 8881 5.6 / 3.3.7: the values of the bits in attrmask, ascending.
/// Encodes the requested attributes that `attrs` has; the returned
/// attrmask lists exactly those bits.
pub fn encode_attrs(attrs: &FileAttrs, requested: &Bitmap) -> fattr4 {
    let mut mask = Bitmap::new();
    let mut w = XdrWriter::new();
    for bit in requested.iter() {
        if attrs.put(bit, &mut w) {
            mask.set(bit);
        }
    }
    fattr4 {
        attrmask: mask.into(),
        attr_vals: w.into_vec(),
    }
}

/// Decodes an attribute list: Some exactly for the bits present.
pub fn decode_attrs(f: &fattr4) -> Result<FileAttrs, AttrError> {
    let mask = Bitmap::from_wire(&f.attrmask)?;
    let mut r = XdrReader::new(Bytes::copy_from_slice(&f.attr_vals));
    let mut a = FileAttrs::default();
    for bit in mask.iter() {
        a.get(bit, &mut r)?;
    }
    r.finish()?;
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bitmap_ops() {
        let mut b = Bitmap::new();
        b.set(33);
        b.set(1);
        b.set(75);
        assert_eq!(b.0, vec![2, 2, 1 << 11]);
        assert!(b.contains(75) && !b.contains(74) && !b.contains(500));
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![1, 33, 75]);
        let i = b.intersect(&Bitmap::from_bits(&[1, 2, 3]));
        assert_eq!(i.0, vec![2]);
        b.clear(75);
        assert_eq!(bitmap4::from(b), vec![2, 2]);
        assert_eq!(Bitmap::from(vec![1, 0, 0]).0, vec![1]);
        assert!(Bitmap::from(vec![0, 0]).is_empty());
        assert!(Bitmap::from_wire(&vec![0; 9]).is_err());
    }

    #[test]
    fn golden_size_and_mode() {
        let a = FileAttrs {
            size: Some(5),
            mode: Some(0o644),
            owner: Some(b"u".to_vec()),
            ..Default::default()
        };
        let f = encode_attrs(
            &a,
            &Bitmap::from_bits(&[FATTR4_SIZE, FATTR4_MODE, FATTR4_TYPE]),
        );
        assert_eq!(f.attrmask, vec![1 << 4, 1 << 1]);
        assert_eq!(f.attr_vals, [0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 1, 0xa4]);
        assert_eq!(
            decode_attrs(&f).unwrap(),
            FileAttrs {
                size: Some(5),
                mode: Some(0o644),
                ..Default::default()
            }
        );
    }

    #[test]
    fn decode_errors() {
        let f = fattr4 {
            attrmask: vec![1 << FATTR4_ACL],
            attr_vals: vec![0, 0, 0, 0],
        };
        assert_eq!(decode_attrs(&f), Err(AttrError::Unsupported(FATTR4_ACL)));
        let f = fattr4 {
            attrmask: vec![1 << FATTR4_SIZE],
            attr_vals: vec![0; 12],
        };
        assert_eq!(decode_attrs(&f), Err(AttrError::Xdr(XdrError::Trailing(4))));
        let f = fattr4 {
            attrmask: vec![1 << FATTR4_SIZE],
            attr_vals: vec![0; 4],
        };
        assert_eq!(decode_attrs(&f), Err(AttrError::Xdr(XdrError::Short)));
        // settime4 with a bad how.
        let f = fattr4 {
            attrmask: vec![0, 1 << (FATTR4_TIME_MODIFY_SET - 32)],
            attr_vals: vec![0, 0, 0, 7],
        };
        assert_eq!(
            decode_attrs(&f),
            Err(AttrError::Inval(FATTR4_TIME_MODIFY_SET))
        );
        let f = fattr4 {
            attrmask: vec![0, 1 << (FATTR4_TIME_MODIFY_SET - 32)],
            attr_vals: vec![0, 0, 0, 0],
        };
        assert_eq!(
            decode_attrs(&f).unwrap().time_modify_set,
            Some(settime4::Default(SET_TO_SERVER_TIME4))
        );
    }

    fn arb_bitmap() -> impl Strategy<Value = Bitmap> {
        proptest::collection::vec(any::<u32>(), 0..=3).prop_map(Bitmap::from)
    }
    fn arb_time() -> impl Strategy<Value = nfstime4> {
        (any::<i64>(), 0u32..1_000_000_000)
            .prop_map(|(seconds, nseconds)| nfstime4 { seconds, nseconds })
    }
    fn arb_settime() -> impl Strategy<Value = settime4> {
        prop_oneof![
            Just(settime4::Default(SET_TO_SERVER_TIME4)),
            arb_time().prop_map(settime4::SET_TO_CLIENT_TIME4)
        ]
    }
    fn arb_open_arguments() -> impl Strategy<Value = open_arguments4> {
        [
            arb_bitmap(),
            arb_bitmap(),
            arb_bitmap(),
            arb_bitmap(),
            arb_bitmap(),
        ]
        .prop_map(|[a, d, w, c, m]| open_arguments4 {
            oa_share_access: a.0,
            oa_share_deny: d.0,
            oa_share_access_want: w.0,
            oa_open_claim: c.0,
            oa_create_mode: m.0,
        })
    }
    fn arb_bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..=20)
    }

    prop_compose! {
        fn arb_attrs()(
            a in (proptest::option::of(arb_bitmap()), proptest::option::of((1i32..=9).prop_map(nfs_ftype4)),
                  any::<[Option<u32>; 8]>(), any::<[Option<u64>; 16]>(), any::<[Option<bool>; 14]>()),
            b in (proptest::option::of(any::<(u64, u64)>()), proptest::option::of(any::<i32>()),
                  [proptest::option::of(arb_bytes()), proptest::option::of(arb_bytes()), proptest::option::of(arb_bytes())],
                  proptest::option::of(any::<(u32, u32)>()), proptest::option::of(arb_bitmap()),
                  proptest::option::of(arb_open_arguments())),
            t in ([proptest::option::of(arb_time()), proptest::option::of(arb_time()), proptest::option::of(arb_time()),
                   proptest::option::of(arb_time()), proptest::option::of(arb_time())],
                  [proptest::option::of(arb_settime()), proptest::option::of(arb_settime())]),
        ) -> FileAttrs {
            let (supported_attrs, r#type, u32s, u64s, bools) = a;
            let (fsid, rdattr, bytes, rawdev, exclcreat, open_arguments) = b;
            let (times, settimes) = t;
            let [filehandle, owner, owner_group] = bytes;
            let [t0, t1, t2, t3, t4] = times;
            let [s0, s1] = settimes;
            FileAttrs {
                supported_attrs, r#type,
                fh_expire_type: u32s[0], lease_time: u32s[1], aclsupport: u32s[2], maxlink: u32s[3],
                maxname: u32s[4], mode: u32s[5], numlinks: u32s[6], fs_charset_cap: u32s[7],
                change: u64s[0], size: u64s[1], fileid: u64s[2], files_avail: u64s[3], files_free: u64s[4],
                files_total: u64s[5], maxfilesize: u64s[6], maxread: u64s[7], maxwrite: u64s[8],
                space_avail: u64s[9], space_free: u64s[10], space_total: u64s[11], space_used: u64s[12],
                mounted_on_fileid: u64s[13],
                link_support: bools[0], symlink_support: bools[1], named_attr: bools[2], unique_handles: bools[3],
                archive: bools[4], cansettime: bools[5], case_insensitive: bools[6], case_preserving: bools[7],
                chown_restricted: bools[8], hidden: bools[9], homogeneous: bools[10], no_trunc: bools[11],
                system: bools[12], xattr_support: bools[13],
                fsid: fsid.map(|(major, minor)| fsid4 { major, minor }),
                rdattr_error: rdattr.map(nfsstat4),
                filehandle, owner, owner_group,
                rawdev: rawdev.map(|(specdata1, specdata2)| specdata4 { specdata1, specdata2 }),
                suppattr_exclcreat: exclcreat, open_arguments,
                time_access: t0, time_create: t1, time_delta: t2, time_metadata: t3, time_modify: t4,
                time_access_set: s0, time_modify_set: s1,
            }
        }
    }

    proptest! {
        #[test]
        fn round_trip(a in arb_attrs()) {
            let all = Bitmap::from_bits(&(0..128).collect::<Vec<_>>());
            let f = encode_attrs(&a, &all);
            prop_assert_eq!(Bitmap::from(f.attrmask.clone()), a.present());
            prop_assert_eq!(f.attr_vals.len() % 4, 0);
            prop_assert_eq!(decode_attrs(&f).unwrap(), a.clone());
            // A subset request gives exactly the subset.
            let some = Bitmap::from_bits(&[FATTR4_SIZE, FATTR4_OWNER, FATTR4_TIME_MODIFY]);
            let g = decode_attrs(&encode_attrs(&a, &some)).unwrap();
            prop_assert_eq!(g.present(), a.present().intersect(&some));
        }
    }
}
