//! Path safety and name matching.
mod common;
use braid_fs::*;
use common::*;

#[test]
fn add_share_errors() {
    let e = env();
    assert!(matches!(
        e.fs.add_share("x", e.dir.join("missing")),
        Err(FsError::NotFound)
    ));
    std::fs::write(e.dir.join("file"), b"x").unwrap();
    assert!(matches!(
        e.fs.add_share("x", e.dir.join("file")),
        Err(FsError::NotADirectory)
    ));
}

#[test]
fn escape_attempts_are_refused() {
    let e = env();
    std::fs::write(e.dir.join("secret"), b"outside").unwrap();
    let r = access::FILE_READ_DATA;
    // `..` above the root is a syntax error (OBJECT_PATH_SYNTAX_BAD).
    for p in [
        "..\\secret",
        "..\\..\\etc\\passwd",
        "a\\..\\..\\secret",
        "..",
    ] {
        assert!(
            matches!(
                e.open(p, r, ALL, Disposition::Open),
                Err(FsError::PathSyntaxBad)
            ),
            "{p}"
        );
    }
    assert!(matches!(
        e.open(".", r, ALL, Disposition::Open),
        Err(FsError::InvalidName)
    ));
    // Absolute paths are taken relative to the share root.
    assert!(matches!(
        e.open("/etc/passwd", r, ALL, Disposition::Open),
        Err(FsError::PathNotFound)
    ));
    // Symlinks leaving the share are refused by the kernel.
    std::os::unix::fs::symlink("/etc", e.host("etc")).unwrap();
    std::os::unix::fs::symlink("../secret", e.host("up")).unwrap();
    std::os::unix::fs::symlink(e.dir.join("secret"), e.host("abs")).unwrap();
    assert!(matches!(
        e.open("etc\\passwd", r, ALL, Disposition::Open),
        Err(FsError::AccessDenied)
    ));
    assert!(matches!(
        e.open("etc", r, ALL, Disposition::Open),
        Err(FsError::AccessDenied)
    ));
    assert!(matches!(
        e.open("up", r, ALL, Disposition::Open),
        Err(FsError::AccessDenied)
    ));
    assert!(matches!(
        e.open("abs", r, ALL, Disposition::Open),
        Err(FsError::AccessDenied)
    ));
    // Creating through an escaping symlink directory is refused too.
    assert!(matches!(
        e.open("etc\\evil", RW, ALL, Disposition::Create),
        Err(FsError::AccessDenied)
    ));
    assert!(!std::path::Path::new("/etc/evil").exists());
    // Escaping symlinks are hidden from listings.
    let d = e.open("", r, ALL, Disposition::Open).unwrap().handle;
    let names: Vec<_> = d.read_dir().unwrap().into_iter().map(|x| x.name).collect();
    assert!(
        !names.iter().any(|n| n == "etc" || n == "up" || n == "abs"),
        "{names:?}"
    );
}

#[test]
fn symlink_inside_share_is_followed() {
    let e = env();
    e.mkdir("real");
    e.create_file("real\\f.txt", b"hello");
    std::os::unix::fs::symlink("real", e.host("link")).unwrap();
    e.mkdir("sub");
    std::os::unix::fs::symlink("../real/f.txt", e.host("sub/lf")).unwrap();
    let o = e
        .open(
            "link\\f.txt",
            access::FILE_READ_DATA,
            ALL,
            Disposition::Open,
        )
        .unwrap();
    assert_eq!(o.handle.read(0, 100).unwrap(), b"hello");
    let o = e
        .open("sub\\lf", access::FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(o.handle.read(0, 100).unwrap(), b"hello");
    let d = e
        .open("sub", access::FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap();
    let l = d.handle.read_dir().unwrap();
    let lf = l.iter().find(|x| x.name == "lf").unwrap();
    assert_eq!(lf.info.end_of_file, 5);
}

#[test]
fn missing_components() {
    let e = env();
    let r = access::FILE_READ_DATA;
    assert!(matches!(
        e.open("nope", r, ALL, Disposition::Open),
        Err(FsError::NotFound)
    ));
    assert!(matches!(
        e.open("nodir\\nope", r, ALL, Disposition::Open),
        Err(FsError::PathNotFound)
    ));
    assert!(matches!(
        e.open("nodir\\nope", RW, ALL, Disposition::Create),
        Err(FsError::PathNotFound)
    ));
    e.create_file("file", b"");
    assert!(matches!(
        e.open("file\\x", r, ALL, Disposition::Open),
        Err(FsError::PathNotFound)
    ));
    // ("x:stream" names a stream now, tests/streams.rs; a bad stream type
    // is still an invalid name.)
    for bad in ["a*b", "a?", "x:stream:$FOO", "a:b\\c", "tab\tname"] {
        assert!(matches!(
            e.open(bad, RW, ALL, Disposition::Create),
            Err(FsError::InvalidName)
        ));
    }
    // A trailing dot or space is kept, as NTFS keeps it from SMB clients.
    for name in ["dot.", "space "] {
        e.create_file(name, b"kept");
        assert_eq!(std::fs::read(e.share_dir.join(name)).unwrap(), b"kept");
    }
}

#[test]
fn case_insensitive_lookup_keeps_case() {
    let e = env();
    e.mkdir("Dir");
    e.create_file("Dir\\MixedCase.TXT", b"data");
    assert!(e.exists("Dir/MixedCase.TXT"));
    let o = e
        .open(
            "dir\\mixedcase.txt",
            access::FILE_READ_DATA,
            ALL,
            Disposition::Open,
        )
        .unwrap();
    assert_eq!(o.handle.path(), "Dir\\MixedCase.TXT");
    assert_eq!(o.handle.read(0, 10).unwrap(), b"data");
    // Creating another case of an existing name collides.
    assert!(matches!(
        e.open("DIR\\MIXEDCASE.txt", RW, ALL, Disposition::Create),
        Err(FsError::NameCollision)
    ));
    // OpenIf opens the existing one.
    let o2 = e
        .open("DIR\\MIXEDCASE.txt", RW, ALL, Disposition::OpenIf)
        .unwrap();
    assert_eq!(o2.action, CreateAction::Opened);
    // Unicode case folding.
    e.create_file("Ärger", b"");
    e.open("ärger", access::FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap();
}

#[test]
fn a_file_opens_by_its_short_name() {
    let e = env();
    std::fs::create_dir(e.share_dir.join("Program Files")).unwrap();
    std::fs::write(
        e.share_dir.join("Program Files").join("Long File Name.txt"),
        b"by either name",
    )
    .unwrap();
    let dir_short = shortname::short_name("Program Files");
    let file_short = shortname::short_name("Long File Name.txt");
    assert_eq!(file_short, "LO7JQ0~4.TXT");
    let path = format!("{dir_short}\\{}", file_short.to_lowercase());
    let o = e
        .open(
            &path,
            access::FILE_READ_DATA,
            share_access::ALL,
            Disposition::Open,
        )
        .unwrap();
    assert_eq!(o.handle.read(0, 100).unwrap(), b"by either name");
    assert_eq!(o.handle.path(), "Program Files\\Long File Name.txt");
    // A name that only looks mangled, matching nothing, is not found.
    assert!(matches!(
        e.open(
            "LO7JQ0~5.TXT",
            access::FILE_READ_DATA,
            share_access::ALL,
            Disposition::Open
        ),
        Err(FsError::NotFound)
    ));
}

#[test]
fn vetoed_names_are_neither_listed_nor_opened() {
    let e = env();
    std::fs::create_dir(e.share_dir.join(".snapshot")).unwrap();
    std::fs::write(e.share_dir.join(".snapshot").join("old.txt"), b"x").unwrap();
    std::fs::write(e.share_dir.join("setup.EXE"), b"x").unwrap();
    std::fs::write(e.share_dir.join("readme.txt"), b"x").unwrap();
    e.share
        .set_veto_names(vec!["*.exe".into(), ".snapshot".into()]);

    let root = e
        .open("", access::FILE_LIST_DIRECTORY, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(listed_names(&root), [".", "..", "readme.txt"]);

    let err = |r: Result<Opened, FsError>| r.err().map(|e| format!("{e:?}"));
    assert_eq!(
        err(e.open("setup.exe", RW, ALL, Disposition::Open)),
        Some("NotFound".into())
    );
    assert_eq!(
        err(e.open("new.exe", RW, ALL, Disposition::Create)),
        Some("NotFound".into())
    );
    assert_eq!(
        err(e.open(".snapshot\\old.txt", RW, ALL, Disposition::Open)),
        Some("PathNotFound".into())
    );
    assert!(!e.share_dir.join("new.exe").exists());

    let f = e
        .open("readme.txt", RW | access::DELETE, ALL, Disposition::Open)
        .unwrap();
    assert!(matches!(
        f.handle.rename("run.exe", false),
        Err(FsError::NotFound)
    ));
    assert!(e.share_dir.join("readme.txt").exists());
}

#[test]
fn a_file_deleted_and_created_again_by_its_short_name_keeps_its_long_name() {
    let e = env();
    e.mkdir("docs");
    let long = "Quarterly report, final.txt";
    e.create_file(&format!("docs\\{long}"), b"v1");
    let short = braid_fs::shortname::short_name(long);
    let mut p = OpenParams::new(format!("docs\\{short}"), access::DELETE, Disposition::Open);
    p.share_access = ALL;
    p.delete_on_close = true;
    e.open_p(p).unwrap().handle.close().unwrap();
    assert!(!e.share_dir.join("docs").join(long).exists());

    e.create_file(&format!("docs\\{short}"), b"v2");
    let names: Vec<String> = std::fs::read_dir(e.share_dir.join("docs"))
        .unwrap()
        .map(|d| d.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, [long]);
    // Once only: another create by the short name is that name.
    std::fs::remove_file(e.share_dir.join("docs").join(long)).unwrap();
    e.create_file(&format!("docs\\{short}"), b"v3");
    assert!(e.share_dir.join("docs").join(&short).exists());
}

#[test]
fn a_directory_of_vetoed_names_is_deleted_with_them_when_the_share_says_so() {
    let e = env();
    e.share.set_veto_names(vec![
        ".DS_Store".into(),
        "._*".into(),
        ".AppleDouble".into(),
    ]);
    for dir in ["plain", "macos", "mixed"] {
        e.mkdir(dir);
        std::fs::write(e.share_dir.join(dir).join(".DS_Store"), b"x").unwrap();
        std::fs::create_dir(e.share_dir.join(dir).join(".AppleDouble")).unwrap();
        std::fs::write(e.share_dir.join(dir).join(".AppleDouble").join("f"), b"x").unwrap();
    }
    std::fs::write(e.share_dir.join("mixed").join("kept.txt"), b"x").unwrap();
    let delete = |dir: &str| {
        let mut p = OpenParams::new(dir, access::DELETE, Disposition::Open);
        p.share_access = ALL;
        p.directory = DirectoryRequirement::MustBeDirectory;
        let o = e.open_p(p).unwrap();
        let r = o.handle.set_delete_on_close(true);
        o.handle.close().unwrap();
        r
    };
    // Off (the default): the vetoed names keep the directory.
    assert!(matches!(delete("plain"), Err(FsError::DirectoryNotEmpty)));
    assert!(e.share_dir.join("plain").exists());

    e.share.set_delete_veto_files(true);
    delete("macos").unwrap();
    assert!(!e.share_dir.join("macos").exists());
    // A name that is not vetoed keeps it, and everything in it.
    assert!(matches!(delete("mixed"), Err(FsError::DirectoryNotEmpty)));
    assert!(e.share_dir.join("mixed").join(".DS_Store").exists());
}
