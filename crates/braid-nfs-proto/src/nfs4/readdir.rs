//! `entry4` and `dirlist4` (RFC 8881 18.23), written by hand: in the .x they
//! are a linked list through an optional pointer (`entry4 *nextentry`). Here
//! the list is a `Vec`, coded iteratively so that a hostile long list cannot
//! overflow the stack.

use super::generated::{component4, fattr4, nfs_cookie4};
use crate::xdr::{Xdr, XdrError, XdrReader, XdrWriter};

/// One directory entry. On the wire each entry is preceded by a TRUE
/// "value follows" word (RFC 4506 4.19).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct entry4 {
    pub cookie: nfs_cookie4,
    #[cfg_attr(
        test,
        proptest(strategy = "proptest::collection::vec(proptest::prelude::any::<u8>(), 0..=8)")
    )]
    pub name: component4,
    pub attrs: fattr4,
}

/// The entries of a READDIR reply and its eof flag.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct dirlist4 {
    #[cfg_attr(
        test,
        proptest(
            strategy = "proptest::collection::vec(proptest::prelude::any::<entry4>(), 0..=4)"
        )
    )]
    pub entries: Vec<entry4>,
    pub eof: bool,
}

/// Smallest encoding of an entry after its TRUE word: cookie (8), empty
/// name (4), empty bitmap (4), empty attrlist (4).
const ENTRY_MIN: usize = 20;

impl entry4 {
    fn encode_body(&self, w: &mut XdrWriter) {
        w.put_u64(self.cookie);
        w.put_opaque(&self.name);
        self.attrs.encode(w);
    }

    fn decode_body(r: &mut XdrReader) -> Result<Self, XdrError> {
        Ok(entry4 {
            cookie: r.get_u64()?,
            name: r.get_opaque(u32::MAX, "entry4.name")?,
            attrs: fattr4::decode(r)?,
        })
    }
}

impl Xdr for entry4 {
    /// The entry alone (without the TRUE word that precedes it in a list).
    fn encode(&self, w: &mut XdrWriter) {
        self.encode_body(w)
    }
    fn decode(r: &mut XdrReader) -> Result<Self, XdrError> {
        Self::decode_body(r)
    }
}

// RFC 8881 18.23.2: dirlist4 { entry4 *entries; bool eof; } — the optional
// chain is TRUE entry TRUE entry ... FALSE, then eof.
impl Xdr for dirlist4 {
    fn encode(&self, w: &mut XdrWriter) {
        for e in &self.entries {
            w.put_bool(true);
            e.encode_body(w);
        }
        w.put_bool(false);
        w.put_bool(self.eof);
    }

    fn decode(r: &mut XdrReader) -> Result<Self, XdrError> {
        let mut entries = Vec::new();
        while r.get_bool()? {
            // Each entry needs at least ENTRY_MIN bytes plus the final FALSE
            // and eof: a bound that keeps growth proportional to the input.
            if r.remaining() < ENTRY_MIN + 8 {
                return Err(XdrError::Short);
            }
            entries.push(entry4::decode_body(r)?);
        }
        Ok(dirlist4 {
            entries,
            eof: r.get_bool()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdr::{from_bytes, to_bytes};
    use proptest::prelude::*;

    #[test]
    fn golden() {
        let d = dirlist4 {
            entries: vec![entry4 {
                cookie: 3,
                name: b"a".to_vec(),
                attrs: fattr4 {
                    attrmask: vec![],
                    attr_vals: vec![],
                },
            }],
            eof: true,
        };
        let b = to_bytes(&d);
        #[rustfmt::skip]
        let want = [
            0, 0, 0, 1, // value follows
            0, 0, 0, 0, 0, 0, 0, 3, // cookie
            0, 0, 0, 1, b'a', 0, 0, 0, // name
            0, 0, 0, 0, 0, 0, 0, 0, // fattr4: empty bitmap, empty attrlist
            0, 0, 0, 0, // no more entries
            0, 0, 0, 1, // eof
        ];
        assert_eq!(b, want);
        assert_eq!(from_bytes::<dirlist4>(&b).unwrap(), d);
        assert_eq!(to_bytes(&dirlist4::default()), [0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn long_list_no_recursion() {
        let e = entry4 {
            cookie: 1,
            name: b"x".to_vec(),
            attrs: fattr4 {
                attrmask: vec![],
                attr_vals: vec![],
            },
        };
        let d = dirlist4 {
            entries: vec![e; 200_000],
            eof: false,
        };
        let b = to_bytes(&d);
        assert_eq!(from_bytes::<dirlist4>(&b).unwrap(), d);
        // Truncated lists fail cleanly.
        assert!(from_bytes::<dirlist4>(&b[..b.len() - 4]).is_err());
        assert_eq!(from_bytes::<dirlist4>(&[0, 0, 0, 1]), Err(XdrError::Short));
    }

    proptest! {
        #[test]
        fn round_trip(d in any::<dirlist4>()) {
            let b = to_bytes(&d);
            prop_assert_eq!(b.len() % 4, 0);
            prop_assert_eq!(from_bytes::<dirlist4>(&b).unwrap(), d);
        }
    }
}
