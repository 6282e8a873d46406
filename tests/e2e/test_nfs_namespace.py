"""The NFSv4.1 namespace and attributes (issue 42), through pynfs's client
library: the pseudo-root and its exports, LOOKUP's name checks, CREATE of
every non-regular type, GETATTR/SETATTR/VERIFY/NVERIFY rules, READDIR's
cookies, verifier and limits, RENAME/LINK across exports, read-only
exports, SECINFO.

BRAID_E2E_TARGET=ganesha runs the checks whose answer is the RFC's against
nfs-ganesha; what is Braid's own choice (its pseudo-root's attributes, its
cookie verifier, more than one export) runs against Braid only.
"""

from __future__ import annotations

import os

import pytest

import pynfs_lib
import servers

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET not in ("braid", "ganesha"),
                                reason=f"no NFS server for BRAID_E2E_TARGET={TARGET}")
braid_only = pytest.mark.skipif(TARGET != "braid", reason="Braid's own choices")

EXPORT = servers.DEFAULT_SHARE
ZERO_STATEID = None  # set once pynfs is imported


nfs4client = op = K = T = None


@pytest.fixture(scope="module", autouse=True)
def pynfs():
    """pynfs is imported only where these tests run (not at collection)."""
    global nfs4client, op, K, T, ZERO_STATEID
    nfs4client, op, K, T = pynfs_lib.load("pynfs-namespace-build.log")
    ZERO_STATEID = T.stateid4(0, b"\0" * 12)


@pytest.fixture(scope="module")
def server(tmp_path_factory, pynfs):
    base = tmp_path_factory.mktemp(f"nfs-namespace-{TARGET}-")
    for d in ("export", "ro", "other", "anon", "work"):
        (base / d).mkdir()
    (base / "ro" / "file").write_bytes(b"read only")
    extra = ""
    if TARGET == "braid":
        # A read-only export and a second read-write one (RENAME/LINK
        # between exports are NFS4ERR_XDEV).
        extra = (f'[[share]]\nname = "ro"\npath = "{base / "ro"}"\n'
                 'root_squash = false\nnfs_read_only = true\n'
                 f'[[share]]\nname = "other"\npath = "{base / "other"}"\n'
                 'root_squash = false\n'
                 f'[[share]]\nname = "anon"\npath = "{base / "anon"}"\n'
                 'nfs_sec = ["none"]\n')
        srv = servers.start_braid_nfs(base / "export", base / "work", extra_config=extra)
    else:
        srv = servers.start_nfs(TARGET, base / "export", base / "work")
    srv.export_dir = base / "export"
    yield srv
    alive = srv.alive()
    tail = srv.log_tail()
    srv.stop()
    assert alive, f"{TARGET} died during the namespace tests:\n{tail}"


@pytest.fixture(scope="module")
def sess(server):
    c = nfs4client.NFS4Client(b"127.0.0.1", server.port, minorversion=1)
    # AUTH_SYS as root (both servers export no_root_squash), as pynfs runs.
    import rpc.security
    c.set_cred(rpc.security.AuthSys().init_cred(uid=0, gid=0, name=b"braid-namespace"))
    s = c.new_client_session(b"braid-namespace-%d" % os.getpid())
    yield s


def name_of(request) -> bytes:
    return request.node.name.encode()[:60]


def status(res) -> str:
    return K.nfsstat4[res.status]


def run(sess, ops, expect="NFS4_OK"):
    # pynfs retries NFS4ERR_DELAY ten times, a second apart, unless told not to.
    res = sess.compound(ops, handle_state_errors=expect != "NFS4ERR_DELAY")
    assert status(res) == expect, (expect, status(res), res.resarray[-1:])
    return res


def home(name: bytes | None = None):
    ops = [op.putrootfh(), op.lookup(EXPORT.encode())]
    return ops + ([op.lookup(name)] if name else [])


@pytest.fixture
def workdir(sess, server, request):
    """A fresh directory of the export for one test: (its name, host path)."""
    name = name_of(request)
    run(sess, home() + [op.create(T.createtype4(K.NF4DIR), name, {K.FATTR4_MODE: 0o755})])
    return name, server.export_dir / name.decode()


def attrs_of(sess, ops, bits):
    res = run(sess, ops + [op.getattr(sum(1 << b for b in set(bits)))])
    return res.resarray[-1].obj_attributes


def test_pseudo_root_lists_the_export_and_crosses_into_it(sess):
    """RFC 8881 7.3: the pseudo-root lists the exports; the export's root
    is another file system (fsid), mounted on an entry of the pseudo-root."""
    want = [K.FATTR4_TYPE, K.FATTR4_FSID, K.FATTR4_FILEID, K.FATTR4_MOUNTED_ON_FILEID]
    res = run(sess, [op.putrootfh(), op.readdir(0, b"\0" * 8, 4096, 8192,
                                                 sum(1 << b for b in want))])
    entries = {e.name: e.attrs for e in res.resarray[-1].reply.entries}
    path = [c for c in EXPORT.encode().split(b"/") if c]
    assert path[0] in entries, entries
    root = attrs_of(sess, [op.putrootfh()], want)
    assert root[K.FATTR4_TYPE] == K.NF4DIR
    export_root = attrs_of(sess, home(), want)
    assert export_root[K.FATTR4_FSID] != root[K.FATTR4_FSID]
    # LOOKUPP from the export's root is the pseudo-root; above it, nothing.
    top = run(sess, [op.putrootfh(), op.getfh()]).resarray[-1].object
    up = run(sess, home() + [op.lookupp(), op.getfh()]).resarray[-1].object
    assert up == top
    run(sess, [op.putrootfh(), op.lookupp()], "NFS4ERR_NOENT")
    run(sess, [op.putrootfh(), op.lookup(b"no-such-export")], "NFS4ERR_NOENT")
    run(sess, [op.putrootfh(), op.secinfo_no_name(K.SECINFO_STYLE4_PARENT)], "NFS4ERR_NOENT")


@braid_only
def test_pseudo_root_attributes(sess):
    """Braid's pseudo-root: a read-only directory, fileid 1, owner 0,
    fsid 0/0; each export's root shows its place there as
    mounted_on_fileid."""
    want = [K.FATTR4_MODE, K.FATTR4_FILEID, K.FATTR4_OWNER, K.FATTR4_FSID,
            K.FATTR4_MOUNTED_ON_FILEID]
    a = attrs_of(sess, [op.putrootfh()], want)
    assert (a[K.FATTR4_MODE], a[K.FATTR4_FILEID], a[K.FATTR4_OWNER]) == (0o555, 1, b"0")
    assert (a[K.FATTR4_FSID].major, a[K.FATTR4_FSID].minor) == (0, 0)
    e = attrs_of(sess, home(), want)
    assert e[K.FATTR4_MOUNTED_ON_FILEID] != e[K.FATTR4_FILEID]
    res = run(sess, [op.putrootfh(), op.access(0x3f)])
    ok = res.resarray[-1]
    assert ok.access == K.ACCESS4_READ | K.ACCESS4_LOOKUP | K.ACCESS4_EXECUTE
    run(sess, [op.putrootfh(), op.create(T.createtype4(K.NF4DIR), b"x", {})], "NFS4ERR_ROFS")


def test_lookup_name_checks(sess, workdir):
    """RFC 8881 18.13.3: empty or non-UTF-8 names are INVAL, "." and ".."
    BADNAME, a name over maxname NAMETOOLONG; a non-directory NOTDIR, a
    symbolic link SYMLINK."""
    name, path = workdir
    (path / "file").write_bytes(b"x")
    run(sess, home(name) + [op.create(T.createtype4(K.NF4LNK, linkdata=b"file"), b"link", {})])
    d = home(name)
    run(sess, d + [op.lookup(b"")], "NFS4ERR_INVAL")
    if TARGET == "braid":
        # RFC 8881 14.5 lets a server refuse non-UTF-8 names (INVAL);
        # ganesha does not look and says NOENT.
        run(sess, d + [op.lookup(b"\xff\xfe")], "NFS4ERR_INVAL")
    run(sess, d + [op.lookup(b".")], "NFS4ERR_BADNAME")
    run(sess, d + [op.lookup(b"..")], "NFS4ERR_BADNAME")
    run(sess, d + [op.lookup(b"a" * 256)], "NFS4ERR_NAMETOOLONG")
    run(sess, d + [op.lookup(b"missing")], "NFS4ERR_NOENT")
    run(sess, d + [op.lookup(b"file"), op.lookup(b"x")], "NFS4ERR_NOTDIR")
    run(sess, d + [op.lookup(b"link"), op.lookup(b"x")], "NFS4ERR_SYMLINK")
    res = run(sess, d + [op.lookup(b"link"), op.readlink()])
    assert res.resarray[-1].link == b"file"
    run(sess, d + [op.readlink()], "NFS4ERR_INVAL")
    run(sess, d + [op.lookup(b"file"), op.readlink()], "NFS4ERR_INVAL")


def test_create_every_type(sess, workdir):
    """RFC 8881 18.4: directories, symbolic links, fifos, sockets and
    devices; a regular file is OPEN's (BADTYPE); an existing name EXIST."""
    name, path = workdir
    kinds = {
        b"dir": (T.createtype4(K.NF4DIR), K.NF4DIR),
        b"link": (T.createtype4(K.NF4LNK, linkdata=b"target"), K.NF4LNK),
        b"fifo": (T.createtype4(K.NF4FIFO), K.NF4FIFO),
        b"sock": (T.createtype4(K.NF4SOCK), K.NF4SOCK),
        b"blk": (T.createtype4(K.NF4BLK, devdata=T.specdata4(1, 2)), K.NF4BLK),
        b"chr": (T.createtype4(K.NF4CHR, devdata=T.specdata4(3, 4)), K.NF4CHR),
    }
    for obj, (kind, ftype) in kinds.items():
        res = run(sess, home(name) + [op.create(kind, obj, {K.FATTR4_MODE: 0o640}),
                                      op.getattr(1 << K.FATTR4_TYPE | 1 << K.FATTR4_RAWDEV)])
        cinfo = res.resarray[-2].cinfo
        assert cinfo.after != cinfo.before
        a = res.resarray[-1].obj_attributes
        assert a[K.FATTR4_TYPE] == ftype
        if obj == b"chr":
            assert (a[K.FATTR4_RAWDEV].specdata1, a[K.FATTR4_RAWDEV].specdata2) == (3, 4)
    assert os.stat(path / "fifo").st_mode & 0o7777 == 0o640
    run(sess, home(name) + [op.create(T.createtype4(K.NF4DIR), b"dir", {})], "NFS4ERR_EXIST")
    run(sess, home(name) + [op.create(T.createtype4(K.NF4REG), b"reg", {})], "NFS4ERR_BADTYPE")
    run(sess, home(name) + [op.create(T.createtype4(K.NF4DIR), b"..", {})], "NFS4ERR_BADNAME")
    # REMOVE: a non-empty directory stays; the rest go.
    run(sess, home(name) + [op.lookup(b"dir"),
                            op.create(T.createtype4(K.NF4DIR), b"sub", {})])
    run(sess, home(name) + [op.remove(b"dir")], "NFS4ERR_NOTEMPTY")
    for obj in kinds:
        if obj != b"dir":
            run(sess, home(name) + [op.remove(obj)])
    run(sess, home(name) + [op.remove(b"fifo")], "NFS4ERR_NOENT")


def test_getattr_and_setattr_rules(sess, workdir):
    """RFC 8881 18.7.3, 18.30.3: an unsupported attribute is left out of
    GETATTR's reply; the write-only ones cannot be read; setting a
    read-only one is INVAL; owners are numeric strings (BADOWNER else)."""
    name, path = workdir
    (path / "f").write_bytes(b"12345")
    f = home(name) + [op.lookup(b"f")]
    a = attrs_of(sess, f, [K.FATTR4_SIZE, K.FATTR4_OWNER, K.FATTR4_OWNER_GROUP,
                           K.FATTR4_SUPPORTED_ATTRS])
    assert a[K.FATTR4_SIZE] == 5
    assert a[K.FATTR4_OWNER] == b"0" and a[K.FATTR4_OWNER_GROUP] == b"0"
    supported = a[K.FATTR4_SUPPORTED_ATTRS]
    for bit in (K.FATTR4_TYPE, K.FATTR4_CHANGE, K.FATTR4_FSID, K.FATTR4_FILEHANDLE,
                K.FATTR4_MODE, K.FATTR4_NUMLINKS, K.FATTR4_TIME_MODIFY,
                K.FATTR4_MOUNTED_ON_FILEID, K.FATTR4_SUPPATTR_EXCLCREAT):
        assert supported & (1 << bit), bit
    run(sess, f + [op.getattr(1 << K.FATTR4_TIME_MODIFY_SET)], "NFS4ERR_INVAL")
    run(sess, f + [op.setattr(ZERO_STATEID, {K.FATTR4_FILEID: 3})], "NFS4ERR_INVAL")
    if TARGET == "braid":
        # Braid maps numeric owners only (RFC 8881 5.9 allows BADOWNER for
        # what a server cannot map); ganesha maps unknown names to nobody.
        run(sess, f + [op.setattr(ZERO_STATEID, {K.FATTR4_OWNER: b"nobody@nowhere"})],
            "NFS4ERR_BADOWNER")
    res = run(sess, f + [op.setattr(ZERO_STATEID, {K.FATTR4_MODE: 0o600,
                                                   K.FATTR4_OWNER: b"1234",
                                                   K.FATTR4_OWNER_GROUP: b"5678"})])
    st = os.stat(path / "f")
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o600, 1234, 5678)
    run(sess, f + [op.setattr(ZERO_STATEID, {K.FATTR4_SIZE: 2})])
    assert (path / "f").read_bytes() == b"12"
    run(sess, home(name) + [op.setattr(ZERO_STATEID, {K.FATTR4_SIZE: 0})], "NFS4ERR_ISDIR")
    times = {K.FATTR4_TIME_MODIFY_SET: T.settime4(K.SET_TO_CLIENT_TIME4,
                                                  T.nfstime4(1_000_000, 5))}
    run(sess, f + [op.setattr(ZERO_STATEID, times)])
    assert os.stat(path / "f").st_mtime_ns == 1_000_000 * 10**9 + 5


@braid_only
def test_unsupported_attributes(sess, workdir):
    """Braid has no ACLs and no Windows flags: GETATTR leaves them out,
    SETATTR of them is ATTRNOTSUPP."""
    name, _ = workdir
    a = attrs_of(sess, home(name), [K.FATTR4_ACL, K.FATTR4_HIDDEN, K.FATTR4_TYPE])
    assert list(a) == [K.FATTR4_TYPE]
    run(sess, home(name) + [op.setattr(ZERO_STATEID, {K.FATTR4_HIDDEN: True})],
        "NFS4ERR_ATTRNOTSUPP")


def test_verify_and_nverify(sess, workdir):
    """RFC 8881 18.31, 18.15: the same values are SAME for NVERIFY, other
    values NOT_SAME for VERIFY; rdattr_error cannot be compared."""
    name, _ = workdir
    d = home(name)
    run(sess, d + [op.verify({K.FATTR4_TYPE: K.NF4DIR})])
    run(sess, d + [op.verify({K.FATTR4_TYPE: K.NF4REG})], "NFS4ERR_NOT_SAME")
    run(sess, d + [op.nverify({K.FATTR4_TYPE: K.NF4DIR})], "NFS4ERR_SAME")
    run(sess, d + [op.nverify({K.FATTR4_TYPE: K.NF4REG})])
    run(sess, d + [op.verify({K.FATTR4_RDATTR_ERROR: 0})], "NFS4ERR_INVAL")


def test_readdir_cookies_and_limits(sess, workdir):
    """RFC 8881 18.23.3: cookies 1 and 2 are BAD_COOKIE; a maxcount no
    entry fits in is TOOSMALL; a listing paged in small replies returns
    each name once."""
    name, path = workdir
    names = {f"entry-{i:04d}".encode() for i in range(2000)}
    for n in names:
        (path / n.decode()).write_bytes(b"")
    d = home(name)
    run(sess, d + [op.readdir(1, b"\0" * 8, 4096, 4096, 0)], "NFS4ERR_BAD_COOKIE")
    run(sess, d + [op.readdir(2, b"\0" * 8, 4096, 4096, 0)], "NFS4ERR_BAD_COOKIE")
    run(sess, d + [op.readdir(0, b"\0" * 8, 4096, 32, 0)], "NFS4ERR_TOOSMALL")
    seen, cookie, verf, pages = [], 0, b"\0" * 8, 0
    want = 1 << K.FATTR4_FILEID | 1 << K.FATTR4_TYPE | 1 << K.FATTR4_RDATTR_ERROR
    while True:
        res = run(sess, d + [op.readdir(cookie, verf, 2048, 4096, want)])
        r = res.resarray[-1]
        pages += 1
        for e in r.reply.entries:
            assert e.cookie not in (0, 1, 2)
            assert e.attrs[K.FATTR4_TYPE] == K.NF4REG
            seen.append(e.name)
        if r.reply.eof:
            break
        assert r.reply.entries, "no entries and no eof"
        cookie, verf = r.reply.entries[-1].cookie, r.cookieverf
    assert len(seen) == len(set(seen)) == len(names) and set(seen) == names
    assert pages > 10


@braid_only
def test_readdir_verifier(sess, workdir):
    """Braid's cookie verifier is zeros; resuming with another is NOT_SAME."""
    name, path = workdir
    (path / "a").write_bytes(b"")
    res = run(sess, home(name) + [op.readdir(0, b"\0" * 8, 4096, 4096, 0)])
    r = res.resarray[-1]
    assert r.cookieverf == b"\0" * 8
    cookie = r.reply.entries[-1].cookie
    run(sess, home(name) + [op.readdir(cookie, b"\1" * 8, 4096, 4096, 0)], "NFS4ERR_NOT_SAME")


def test_rename_and_link(sess, workdir):
    """RFC 8881 18.26, 18.9: both change_infos; a directory cannot be
    linked; POSIX rules on what may replace what."""
    name, path = workdir
    (path / "f").write_bytes(b"x")
    (path / "d").mkdir()
    d = home(name)
    res = run(sess, d + [op.savefh()] + d + [op.rename(b"f", b"g")])
    r = res.resarray[-1]
    assert r.source_cinfo.after != r.source_cinfo.before
    assert (path / "g").exists() and not (path / "f").exists()
    # A file over a directory: POSIX says ISDIR, RFC 8881 EXIST.
    assert status(sess.compound(d + [op.savefh()] + d + [op.rename(b"g", b"d")])) in (
        "NFS4ERR_EXIST", "NFS4ERR_ISDIR")
    run(sess, d + [op.savefh()] + d + [op.rename(b"", b"x")], "NFS4ERR_INVAL")
    run(sess, d + [op.savefh()] + d + [op.rename(b"g", b"..")], "NFS4ERR_BADNAME")
    res = run(sess, d + [op.lookup(b"g"), op.savefh()] + d + [op.link(b"h")])
    assert os.stat(path / "h").st_nlink == 2
    run(sess, d + [op.lookup(b"d"), op.savefh()] + d + [op.link(b"e")], "NFS4ERR_ISDIR")
    run(sess, d + [op.lookup(b"g"), op.savefh()] + d + [op.link(b"h")], "NFS4ERR_EXIST")


@braid_only
def test_between_exports_is_xdev(sess, workdir):
    """RFC 8881 18.26.3, 18.9.3: one file system only."""
    name, path = workdir
    (path / "f").write_bytes(b"x")
    other = [op.putrootfh(), op.lookup(b"other")]
    run(sess, home(name) + [op.savefh()] + other + [op.rename(b"f", b"f")], "NFS4ERR_XDEV")
    run(sess, home(name) + [op.lookup(b"f"), op.savefh()] + other + [op.link(b"f")],
        "NFS4ERR_XDEV")


@braid_only
def test_read_only_export(sess):
    """Every change on a read-only export is ROFS; ACCESS grants no
    writing there."""
    ro = [op.putrootfh(), op.lookup(b"ro")]
    run(sess, ro + [op.create(T.createtype4(K.NF4DIR), b"d", {})], "NFS4ERR_ROFS")
    run(sess, ro + [op.remove(b"file")], "NFS4ERR_ROFS")
    run(sess, ro + [op.lookup(b"file"), op.setattr(ZERO_STATEID, {K.FATTR4_MODE: 0o600})],
        "NFS4ERR_ROFS")
    run(sess, ro + [op.savefh()] + ro + [op.rename(b"file", b"g")], "NFS4ERR_ROFS")
    res = run(sess, ro + [op.lookup(b"file"), op.access(0x3f)])
    assert res.resarray[-1].access & (K.ACCESS4_MODIFY | K.ACCESS4_EXTEND) == 0
    res = run(sess, ro + [op.lookup(b"file"), op.read(ZERO_STATEID, 0, 100)])
    assert res.resarray[-1].data == b"read only"


def test_secinfo_consumes_the_filehandle(sess, workdir):
    """RFC 8881 18.29, 2.6.3.1.1.8: AUTH_SYS is offered; after SECINFO
    there is no current filehandle."""
    name, _ = workdir
    res = run(sess, home() + [op.secinfo(name)])
    assert K.AUTH_SYS in [s.flavor for s in res.resarray[-1].resok4]
    run(sess, home() + [op.secinfo(name), op.getfh()], "NFS4ERR_NOFILEHANDLE")
    run(sess, home() + [op.secinfo(b"missing")], "NFS4ERR_NOENT")


@braid_only
def test_wrong_flavour(sess, server):
    """RFC 8881 2.6.3.1.1: an export that takes AUTH_NONE only. An AUTH_SYS
    LOOKUP into it is WRONGSEC; SECINFO says what it takes; a put-
    filehandle operation answers WRONGSEC only when the next operation
    would use the filehandle as it is (not before SECINFO_NO_NAME, LOOKUPP
    or another put-filehandle, nor last)."""
    import rpc.security
    run(sess, [op.putrootfh(), op.lookup(b"anon")], "NFS4ERR_WRONGSEC")
    res = run(sess, [op.putrootfh(), op.secinfo(b"anon")])
    assert [s.flavor for s in res.resarray[-1].resok4] == [K.AUTH_NONE]
    none = nfs4client.NFS4Client(b"127.0.0.1", server.port, minorversion=1)
    none.set_cred(rpc.security.AuthNone().init_cred())
    anon = none.new_client_session(b"braid-namespace-none-%d" % os.getpid())
    fh = run(anon, [op.putrootfh(), op.lookup(b"anon"), op.getfh()]).resarray[-1].object
    run(sess, [op.putfh(fh)])
    run(sess, [op.putfh(fh), op.getattr(1 << K.FATTR4_TYPE)], "NFS4ERR_WRONGSEC")
    run(sess, [op.putfh(fh), op.savefh()], "NFS4ERR_WRONGSEC")
    res = run(sess, [op.putfh(fh), op.secinfo_no_name(K.SECINFO_STYLE4_CURRENT_FH)])
    assert [s.flavor for s in res.resarray[-1].resok4] == [K.AUTH_NONE]
    run(sess, [op.putfh(fh), op.lookupp(), op.getfh()])
    run(sess, [op.putfh(fh), op.putrootfh(), op.getfh()])
    # AUTH_NONE is not taken by the AUTH_SYS export.
    run(anon, home(), "NFS4ERR_WRONGSEC")


@braid_only
def test_namespace_changes_recall_delegations(sess, server, workdir):
    """RFC 8881 10.4.4: another client's REMOVE, RENAME, LINK or SETATTR of
    a file this client holds a read delegation on recalls it (CB_RECALL),
    answering NFS4ERR_DELAY until DELEGRETURN; then it goes through."""
    import threading
    name, path = workdir
    holder = nfs4client.NFS4Client(b"127.0.0.1", server.port, minorversion=1)
    import rpc.security
    holder.set_cred(rpc.security.AuthSys().init_cred(uid=0, gid=0, name=b"braid-holder"))
    hs = holder.new_client_session(b"braid-namespace-holder-%d" % os.getpid())
    recalled = threading.Event()

    def pre_hook(arg, env):
        recalled.stateid = arg.stateid
        env.notify = recalled.set

    hs.client.cb_pre_hook(K.OP_CB_RECALL, pre_hook)
    access = K.OPEN4_SHARE_ACCESS_READ | K.OPEN4_SHARE_ACCESS_WANT_READ_DELEG
    for change in ("setattr", "link", "rename", "remove"):
        fname = b"f-" + change.encode()
        (path / fname.decode()).write_bytes(b"x")
        res = run(hs, home(name) + [
            op.open(0, access, K.OPEN4_SHARE_DENY_NONE,
                    T.open_owner4(0, b"holder-" + fname), T.openflag4(K.OPEN4_NOCREATE),
                    T.open_claim4(K.CLAIM_NULL, fname)),
            op.getfh()])
        deleg = res.resarray[-2].delegation
        assert deleg.delegation_type == K.OPEN_DELEGATE_READ, (change, deleg)
        fh, open_sid = res.resarray[-1].object, res.resarray[-2].stateid
        recalled.clear()
        f = home(name) + [op.lookup(fname)]
        ops = {
            "setattr": f + [op.setattr(ZERO_STATEID, {K.FATTR4_MODE: 0o600})],
            "link": f + [op.savefh()] + home(name) + [op.link(fname + b"-2")],
            "rename": home(name) + [op.savefh()] + home(name) + [op.rename(fname, b"r")],
            "remove": home(name) + [op.remove(fname)],
        }[change]
        run(sess, ops, "NFS4ERR_DELAY")
        assert recalled.wait(5), f"no CB_RECALL for {change}"
        run(hs, [op.putfh(fh), op.delegreturn(recalled.stateid)])
        run(sess, ops)
        run(hs, [op.putfh(fh), op.close(0, open_sid)])
