//! RFC 8881 18.23 READDIR: cookies resume where the last page ended, also
//! while the directory changes.

mod posix_util;

use std::collections::{BTreeMap, BTreeSet};

use braid_fs::posix::*;
use posix_util::*;

fn names(out: &ReadDirOut) -> Vec<String> {
    out.entries
        .iter()
        .map(|e| String::from_utf8(e.name.clone()).unwrap())
        .collect()
}

#[test]
fn posix_readdir_empty_and_small() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let out = s.readdir(&root(), &r, 0, 10).unwrap();
    assert!(out.entries.is_empty() && out.eof);
    mkfile(&e, &r, "one");
    let out = s.readdir(&root(), &r, 0, 1).unwrap();
    assert_eq!(names(&out), ["one"]);
    assert!(out.eof, "nothing after the only entry");
    let last = out.entries[0].cookie;
    let out = s.readdir(&root(), &r, last, 10).unwrap();
    assert!(out.entries.is_empty() && out.eof);
    mkfile(&e, &r, "two");
    let out = s.readdir(&root(), &r, 0, 1).unwrap();
    assert_eq!(out.entries.len(), 1);
    assert!(!out.eof);
    for c in [1, 2] {
        assert_eq!(errno(s.readdir(&root(), &r, c, 10)), libc::EINVAL);
    }
    assert_eq!(
        errno(s.readdir(&root(), &mkfile(&e, &r, "f"), 0, 10)),
        libc::ENOTDIR
    );
}

#[test]
fn posix_readdir_pages_of_3000_entries() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let (d, _) = s
        .create(
            &root(),
            &r,
            b"big",
            CreateKind::Directory,
            0o755,
            &SetAttrs::default(),
        )
        .unwrap();
    for i in 0..3000 {
        std::fs::write(e.dir.join("big").join(format!("n{i:05}")), b"").unwrap();
    }
    let mut seen = BTreeMap::<String, usize>::new();
    let mut cookie = 0;
    let mut pages = 0;
    loop {
        let out = s.readdir(&root(), &d, cookie, 100).unwrap();
        assert!(out.entries.len() <= 100);
        for en in &out.entries {
            assert!(en.cookie > 2);
            let o = en.object.as_ref().unwrap();
            assert_eq!(o.kind(), ObjectKind::File);
            *seen
                .entry(String::from_utf8(en.name.clone()).unwrap())
                .or_default() += 1;
        }
        pages += 1;
        if out.eof {
            break;
        }
        cookie = out.entries.last().unwrap().cookie;
    }
    assert_eq!(pages, 30, "3000 entries in pages of 100, eof on the last");
    assert_eq!(seen.len(), 3000);
    assert!(seen.values().all(|&n| n == 1));
}

#[test]
fn posix_readdir_cookies_survive_changes_between_pages() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let (d, _) = s
        .create(
            &root(),
            &r,
            b"big",
            CreateKind::Directory,
            0o755,
            &SetAttrs::default(),
        )
        .unwrap();
    let base = e.dir.join("big");
    // "k*" stay throughout; "x*" are removed and "y*" added while paging.
    for i in 0..3000 {
        let prefix = if i % 3 == 0 { "x" } else { "k" };
        std::fs::write(base.join(format!("{prefix}{i:05}")), b"").unwrap();
    }
    let kept: BTreeSet<String> = (0..3000)
        .filter(|i| i % 3 != 0)
        .map(|i| format!("k{i:05}"))
        .collect();
    let mut seen = BTreeMap::<String, usize>::new();
    let mut cookie = 0;
    let mut page = 0;
    loop {
        let out = s.readdir(&root(), &d, cookie, 100).unwrap();
        for en in &out.entries {
            *seen
                .entry(String::from_utf8(en.name.clone()).unwrap())
                .or_default() += 1;
        }
        if out.eof {
            break;
        }
        cookie = out.entries.last().unwrap().cookie;
        // Churn: drop 30 of the removable names, add 30 new ones.
        for j in 0..30 {
            let i = (page * 30 + j) * 3;
            if i < 3000 {
                let _ = std::fs::remove_file(base.join(format!("x{i:05}")));
            }
            std::fs::write(base.join(format!("y{page:03}-{j:02}")), b"").unwrap();
        }
        page += 1;
        assert!(page < 200, "paging does not end");
    }
    for k in &kept {
        assert_eq!(seen.get(k), Some(&1), "{k} lost or doubled");
    }
    for (name, n) in &seen {
        assert_eq!(*n, 1, "{name} doubled");
    }
}

#[test]
fn posix_readdir_reports_a_failed_entry_lookup() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let (d, _) = s
        .create(
            &root(),
            &r,
            b"d",
            CreateKind::Directory,
            0o744,
            &SetAttrs::default(),
        )
        .unwrap();
    mkfile(&e, &d, "inside");
    // Readable but not searchable for others: names yes, objects no.
    let out = s.readdir(&user(1234), &d, 0, 10).unwrap();
    assert_eq!(names(&out), ["inside"]);
    assert_eq!(
        out.entries[0].object.as_ref().unwrap_err(),
        &PosixError::Errno(libc::EACCES)
    );
    s.setattr(
        &root(),
        &d,
        &SetAttrs {
            mode: Some(0o700),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(errno(s.readdir(&user(1234), &d, 0, 10)), libc::EACCES);
}
