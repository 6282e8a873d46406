//! Stored security descriptors through the file service, with a toy
//! policy (a descriptor is a 4-byte mask of the rights it grants, padded
//! to a size that does not fit an ext4 inode): what is stored when, what
//! an open is granted, and the xattr block (of a descriptor, of EAs) left
//! out of AllocationSize.

mod common;

use std::sync::Arc;

use braid_fs::*;
use common::*;

const SD_XATTR: &std::ffi::CStr = c"user.braid.sd";

/// Grants what the stored mask says, everything without a descriptor;
/// a new object inherits its parent's descriptor, or the creator's.
struct MaskPolicy {
    creator: Option<Vec<u8>>,
}

fn descriptor(mask: u32) -> Vec<u8> {
    let mut v = mask.to_le_bytes().to_vec();
    v.resize(200, 0xAA);
    v
}

impl AccessPolicy for MaskPolicy {
    fn maximal_access(&self, o: &ObjectSecurity) -> u32 {
        match &o.descriptor {
            Some(d) => u32::from_le_bytes(d[..4].try_into().unwrap()),
            None => access::FILE_ALL_ACCESS,
        }
    }

    fn new_descriptor(&self, parent: &ObjectSecurity, _dir: bool) -> FsResult<Option<Vec<u8>>> {
        Ok(self.creator.clone().or_else(|| parent.descriptor.clone()))
    }
}

fn with_policy(e: &mut Env, creator: Option<Vec<u8>>) {
    e.ctx.access = Some(Arc::new(MaskPolicy { creator }));
}

/// The host's `user.braid.sd` of `rel`: `Ok(None)` when absent, `Err`
/// when the file system takes no user xattrs.
fn stored(e: &Env, rel: &str) -> Result<Option<Vec<u8>>, ()> {
    let c = std::ffi::CString::new(e.host(rel).as_os_str().as_encoded_bytes()).unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: valid C strings and buffer.
    let r = unsafe {
        libc::getxattr(
            c.as_ptr(),
            SD_XATTR.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if r >= 0 {
        buf.truncate(r as usize);
        return Ok(Some(buf));
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENODATA) => Ok(None),
        _ => Err(()),
    }
}

fn mkdir_open(e: &Env, path: &str) -> OpenHandle {
    let mut p = OpenParams::new(path, access::FILE_ALL_ACCESS, Disposition::Create);
    p.directory = DirectoryRequirement::MustBeDirectory;
    e.open_p(p).unwrap().handle
}

#[test]
fn nothing_is_stored_below_a_directory_without_a_descriptor() {
    let mut e = env();
    with_policy(&mut e, None);
    e.mkdir("d");
    let o = e
        .open("d\\f", access::FILE_ALL_ACCESS, ALL, Disposition::Create)
        .unwrap();
    assert_eq!(o.maximal_access, access::FILE_ALL_ACCESS);
    assert_eq!(o.handle.security_descriptor().unwrap(), None);
    o.handle.close().unwrap();
    if stored(&e, "d").is_err() {
        skip_without("user xattrs on the test file system");
        return;
    }
    assert_eq!(stored(&e, "d"), Ok(None));
    assert_eq!(stored(&e, "d\\f".replace('\\', "/").as_str()), Ok(None));
}

#[test]
fn a_directory_with_a_descriptor_passes_it_on_and_it_is_enforced() {
    let mut e = env();
    with_policy(&mut e, None);
    // Everything but FILE_DELETE_CHILD (0x40), which would grant DELETE
    // on what is inside; WRITE_DAC to change it below.
    const MASK: u32 = 0x1BF | access::WRITE_DAC;
    let d = mkdir_open(&e, "d");
    if d.set_security_descriptor(&descriptor(MASK)).is_err() {
        skip_without("user xattrs on the test file system");
        return;
    }
    d.close().unwrap();
    assert_eq!(stored(&e, "d"), Ok(Some(descriptor(MASK))));
    // Created below it: inherits, and the mask governs its opens.
    let o = e
        .open("d\\f", access::FILE_READ_DATA, ALL, Disposition::Create)
        .unwrap();
    assert_eq!(o.maximal_access, MASK);
    o.handle.close().unwrap();
    assert_eq!(stored(&e, "d/f"), Ok(Some(descriptor(MASK))));
    let denied = e.open("d\\f", access::DELETE, ALL, Disposition::Open);
    assert!(matches!(denied, Err(FsError::AccessDenied)), "{denied:?}");
    // Creating needs FILE_ADD_FILE on the parent.
    let d = e
        .open("d", access::WRITE_DAC, ALL, Disposition::Open)
        .unwrap()
        .handle;
    d.set_security_descriptor(&descriptor(access::FILE_READ_DATA))
        .unwrap();
    d.close().unwrap();
    let r = e.open("d\\g", access::FILE_READ_DATA, ALL, Disposition::Create);
    assert!(matches!(r, Err(FsError::AccessDenied)), "{r:?}");
    assert!(!e.exists("d/g"));
}

#[test]
fn a_creator_descriptor_is_stored_below_the_default() {
    let mut e = env();
    with_policy(&mut e, Some(descriptor(access::FILE_ALL_ACCESS)));
    let o = e
        .open("f", access::FILE_READ_DATA, ALL, Disposition::Create)
        .unwrap();
    o.handle.close().unwrap();
    if stored(&e, "f").is_err() {
        skip_without("user xattrs on the test file system");
        return;
    }
    assert_eq!(
        stored(&e, "f"),
        Ok(Some(descriptor(access::FILE_ALL_ACCESS)))
    );
}

#[test]
fn allocation_leaves_out_the_xattr_block_of_a_descriptor() {
    let mut e = env();
    with_policy(&mut e, Some(descriptor(access::FILE_ALL_ACCESS)));
    let mut p = OpenParams::new("f", access::FILE_ALL_ACCESS, Disposition::Create);
    p.allocation_size = Some(1 << 20);
    let o = e.open_p(p).unwrap();
    if stored(&e, "f").is_err() {
        skip_without("user xattrs on the test file system");
        return;
    }
    let blocks = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(e.host("f")).unwrap().blocks() * 512
    };
    // Whatever the host counts (ext4: 1 MiB and the xattr block; tmpfs
    // and file systems without fallocate: less), never the xattr block.
    assert!(blocks >= o.info.allocation_size);
    assert!(
        o.info.allocation_size <= 1 << 20,
        "{}",
        o.info.allocation_size
    );
    assert_eq!(
        o.handle.info().unwrap().allocation_size,
        o.info.allocation_size
    );
    // A later set keeps it out; so do listings.
    o.handle
        .set_security_descriptor(&descriptor(access::FILE_ALL_ACCESS | 1 << 30))
        .unwrap();
    assert_eq!(
        o.handle.info().unwrap().allocation_size,
        o.info.allocation_size
    );
    let root = e
        .open("", access::FILE_LIST_DIRECTORY, ALL, Disposition::Open)
        .unwrap()
        .handle;
    let listed = root.read_dir().unwrap();
    let f = listed.iter().find(|d| d.name == "f").unwrap();
    assert_eq!(f.info.allocation_size, o.info.allocation_size);
    root.close().unwrap();
    o.handle.close().unwrap();
}

#[test]
fn allocation_leaves_out_the_xattr_block_of_eas() {
    // smbtorture smb2.setinfo: a file made with EAs, truncated to nothing
    // by FileAllocationInformation 0, reports AllocationSize 0.
    let e = env();
    let o = e
        .open("f", access::FILE_ALL_ACCESS, ALL, Disposition::Create)
        .unwrap();
    let h = &o.handle;
    let ea = ExtendedAttribute {
        name: "BIG".into(),
        value: vec![b'x'; 300],
        flags: 0,
    };
    if h.init_eas(std::slice::from_ref(&ea)).is_err() {
        skip_without("user xattrs on the test file system");
        return;
    }
    h.write(0, b"1234567").unwrap();
    let data = h.info().unwrap().allocation_size;
    assert!(data <= 4096, "{data}");
    h.set_allocation(0).unwrap();
    assert_eq!(h.info().unwrap().allocation_size, 0);
    // Removing the EA frees the block: nothing to leave out any more.
    h.init_eas(&[ExtendedAttribute {
        value: Vec::new(),
        ..ea
    }])
    .unwrap();
    h.write(0, b"1234567").unwrap();
    assert_eq!(h.info().unwrap().allocation_size, data);
    h.close().unwrap();
}
