"""The metadata cache never serves a stale answer (issue 44).

One Braid serves a share over SMB (smbprotocol) and NFSv4.1 (the `nfs-rs`
Python package) with `metadata_cache = true`. SMB clients name files in any
case, so each SMB lookup of a name not on disk in exactly that case is
answered by the cache's per-directory index (NFS names are exact). Every
check first makes the cache index the directory, then changes it from
outside the SMB path: a local process (this test, through the file system),
the NFS client, or the SMB client itself; the change must be seen at once
by SMB (in another case) and by NFS.

The cache also keeps, per file, Braid's xattr metadata (the DOS record,
the security descriptor) and birth times while the file's change time
stands. Those checks let a file settle past the layer's 50 ms margin, read
it twice over SMB (the second read comes from the cache), then change it
beside SMB (a local setfattr, removexattr, chmod, touch or truncate, or an
NFS SETATTR) and read again at once: in a stat, a listing, an open's
access check.

`test_the_checks_fail_with_a_broken_cache` runs the same checks against a
Braid whose cache skips invalidation (BRAID_TEST_BROKEN_METADATA_CACHE, a
test-only switch) and requires them to fail: the suite catches a stale
cache.

Braid only: it is Braid's cache under test.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import nfs_rs
import pytest
import smbclient
from smbprotocol.exceptions import SMBOSError, SMBResponseException
from smbprotocol.open import CreateDisposition, CreateOptions, ImpersonationLevel, Open

import servers
from smbremote import (DACL, FILE_ALL_ACCESS, NORMAL, OWNER, SHARE_ALL, RawClient, ace,
                       descriptor_with_dacl, owner_sid)

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid", reason="Braid's metadata cache")

BROKEN_ENV = "BRAID_TEST_BROKEN_METADATA_CACHE"
FILE_READ_ATTRIBUTES, DELETE = 0x80, 0x10000
READ_WRITE = 0x1 | 0x2 | FILE_READ_ATTRIBUTES


def start(base: Path, broken: bool, cache: bool = True):
    """Braid serving base/share over SMB and NFS, with the cache on (off
    when not `cache`: the same checks then show the uncached path is
    coherent too, so that a failure with the cache on is the cache's)."""
    share_dir, workdir = base / "share", base / "server"
    share_dir.mkdir()
    workdir.mkdir()
    port, nfs_port = servers.free_port(), servers.free_port()
    password = "Pw-" + secrets.token_hex(8)
    config = workdir / "braid.toml"
    config.write_text(f'[[share]]\nname = "cached"\npath = {json.dumps(str(share_dir))}\n'
                      'protocols = ["smb", "nfs"]\nroot_squash = false\n'
                      f'metadata_cache = {"true" if cache else "false"}\n')
    admin = f"127.0.0.1:{servers.free_port()}"
    argv = [str(servers.BRAID_BIN), "serve", "--config", str(config),
            "--listen", f"127.0.0.1:{port}", "--nfs-listen", f"127.0.0.1:{nfs_port}",
            "--user", f"{servers.DEFAULT_USER}:{password}", "--admin-listen", admin]
    proc = servers._spawn(argv, workdir / "braid.log", workdir,
                          {BROKEN_ENV: "1"} if broken else None)
    servers.wait_until_accepting("127.0.0.1", port, proc, workdir / "braid.log")
    servers._wait_for_nfs("127.0.0.1", nfs_port, proc, workdir / "braid.log")
    smb = servers.Server("braid", "127.0.0.1", port, "cached", servers.DEFAULT_USER, password,
                         share_dir, workdir, proc.pid, workdir / "braid.log", proc, admin=admin)
    nfs = nfs_rs.Client.connect(f"nfs://127.0.0.1:{nfs_port}/cached?version=4.1",
                                uid=0, gid=0, noresvport=True, connect_timeout=10,
                                operation_timeout=30)
    return smb, nfs


def stop(smb, nfs):
    nfs.close()
    alive = smb.alive()
    smb.stop()
    if not alive:
        pytest.fail(f"braid (pid {smb.pid}) died; log {smb.log_path}:\n{smb.log_tail()}")


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    smb, nfs = start(tmp_path_factory.mktemp("mdcache-"), broken=False)
    yield smb, nfs
    stop(smb, nfs)


@pytest.fixture(scope="module")
def uncached(tmp_path_factory):
    """The same server with `metadata_cache = false` (the cache is on by
    default)."""
    smb, nfs = start(tmp_path_factory.mktemp("mdcache-off-"), broken=False, cache=False)
    yield smb, nfs
    stop(smb, nfs)


class Smb:
    """The high-level smbclient API on one server."""

    def __init__(self, server):
        self.s = server
        self.kw = dict(port=server.port, username=server.user, password=server.password)

    def unc(self, rel: str) -> str:
        return rf"\\{self.s.host}\{self.s.share}\{rel}"

    def exists(self, rel: str) -> bool:
        try:
            smbclient.stat(self.unc(rel), **self.kw)
            return True
        except (SMBOSError, OSError) as e:
            if getattr(e, "errno", None) == 2 or "No such file" in str(e) \
                    or "not found" in str(e).lower():
                return False
            raise

    def size(self, rel: str) -> int:
        return smbclient.stat(self.unc(rel), **self.kw).st_size

    def create_new(self, rel: str, data: bytes = b"") -> None:
        """FILE_CREATE: fails if the name exists in any case."""
        with smbclient.open_file(self.unc(rel), mode="xb", **self.kw) as f:
            f.write(data)

    def rename(self, old: str, new: str) -> None:
        smbclient.rename(self.unc(old), self.unc(new), **self.kw)

    def remove(self, rel: str) -> None:
        smbclient.remove(self.unc(rel), **self.kw)

    def listdir(self, rel: str) -> list[str]:
        return sorted(smbclient.listdir(self.unc(rel), **self.kw))


def fresh_dir(smb) -> str:
    name = f"d-{uuid.uuid4().hex[:10]}"
    (smb.share_dir / name).mkdir()
    servers.give_to_share_owner(smb.share_dir, smb.share_dir / name)
    return name


def index(c: Smb, d: str) -> None:
    """Make the cache index `d`: a case-insensitive lookup of a missing name."""
    assert not c.exists(rf"{d}\NO-SUCH-{uuid.uuid4().hex[:6]}")


# The checks, run against the real cache and against the broken one.

def check_local_create(smb, nfs) -> None:
    c, d = Smb(smb), fresh_dir(smb)
    index(c, d)
    (smb.share_dir / d / "Report.TXT").write_bytes(b"12345")
    assert c.exists(rf"{d}\report.txt"), "a file created locally is not seen over SMB"
    assert c.size(rf"{d}\REPORT.txt") == 5
    assert nfs.stat(f"{d}/Report.TXT").size == 5


def check_local_rename(smb, nfs) -> None:
    c, d = Smb(smb), fresh_dir(smb)
    (smb.share_dir / d / "Old.txt").write_bytes(b"x")
    assert c.exists(rf"{d}\old.TXT")
    os.rename(smb.share_dir / d / "Old.txt", smb.share_dir / d / "New.txt")
    assert not c.exists(rf"{d}\old.txt"), "a name renamed away locally is still seen"
    assert c.exists(rf"{d}\NEW.TXT")
    assert not nfs.exists(f"{d}/Old.txt") and nfs.exists(f"{d}/New.txt")


def check_local_delete(smb, nfs) -> None:
    c, d = Smb(smb), fresh_dir(smb)
    (smb.share_dir / d / "Gone.dat").write_bytes(b"x")
    assert c.exists(rf"{d}\gone.DAT")
    os.unlink(smb.share_dir / d / "Gone.dat")
    assert not c.exists(rf"{d}\gone.dat"), "a file deleted locally is still seen"
    # A new file under another case of the name is no collision.
    c.create_new(rf"{d}\GONE.dat", b"new")
    assert sorted(os.listdir(smb.share_dir / d)) == ["GONE.dat"]
    assert not nfs.exists(f"{d}/Gone.dat")


def check_case_only_rename(smb, nfs) -> None:
    c, d = Smb(smb), fresh_dir(smb)
    (smb.share_dir / d / "a.txt").write_bytes(b"x")
    assert c.exists(rf"{d}\A.TXT")
    os.rename(smb.share_dir / d / "a.txt", smb.share_dir / d / "A.Txt")
    # Open by a third spelling: it must find "A.Txt" (a stale "a.txt"
    # would vanish when opened).
    assert c.size(rf"{d}\a.TXT") == 1
    with pytest.raises(Exception):
        c.create_new(rf"{d}\a.txt")
    assert c.listdir(d) == ["A.Txt"]
    assert nfs.exists(f"{d}/A.Txt") and not nfs.exists(f"{d}/a.txt")


def check_directory_moved(smb, nfs) -> None:
    c, d = Smb(smb), fresh_dir(smb)
    for sub in ("From", "From/Inner", "To"):
        (smb.share_dir / d / sub).mkdir()
    (smb.share_dir / d / "From" / "Inner" / "File.bin").write_bytes(b"abc")
    assert c.size(rf"{d}\from\inner\FILE.BIN") == 3
    assert not c.exists(rf"{d}\to\moved")
    os.rename(smb.share_dir / d / "From" / "Inner", smb.share_dir / d / "To" / "Moved")
    assert not c.exists(rf"{d}\from\inner"), "a directory moved away is still seen"
    assert c.size(rf"{d}\TO\MOVED\file.bin") == 3, "a directory moved in is not seen"
    assert nfs.stat(f"{d}/To/Moved/File.bin").size == 3


def check_nfs_changes_seen_by_smb(smb, nfs) -> None:
    c, d = Smb(smb), fresh_dir(smb)
    index(c, d)
    nfs.touch(f"{d}/Mixed.Case")
    assert c.exists(rf"{d}\mixed.case"), "a file created over NFS is not seen over SMB"
    nfs.rename(f"{d}/Mixed.Case", f"{d}/Other.Name")
    assert not c.exists(rf"{d}\MIXED.CASE") and c.exists(rf"{d}\other.name")
    nfs.remove(f"{d}/Other.Name")
    assert not c.exists(rf"{d}\OTHER.NAME"), "a file removed over NFS is still seen"
    c.create_new(rf"{d}\other.NAME")


def check_smb_changes_seen_by_nfs(smb, nfs) -> None:
    c, d = Smb(smb), fresh_dir(smb)
    c.create_new(rf"{d}\Smb.Made", b"1234")
    assert nfs.stat(f"{d}/Smb.Made").size == 4
    c.rename(rf"{d}\smb.made", rf"{d}\SMB.MADE")
    assert nfs.exists(f"{d}/SMB.MADE") and not nfs.exists(f"{d}/Smb.Made")
    assert c.exists(rf"{d}\smb.made")
    c.remove(rf"{d}\Smb.Made")
    assert not nfs.exists(f"{d}/SMB.MADE")
    assert not c.exists(rf"{d}\smb.made")


def check_chmod_and_truncate(smb, nfs) -> None:
    c, d = Smb(smb), fresh_dir(smb)
    p = smb.share_dir / d / "Sized.bin"
    p.write_bytes(b"x" * 100)
    assert c.size(rf"{d}\sized.BIN") == 100
    os.truncate(p, 7)
    assert c.size(rf"{d}\SIZED.bin") == 7, "a local truncate is not seen over SMB"
    assert nfs.stat(f"{d}/Sized.bin").size == 7
    os.chmod(p, 0o600)
    assert nfs.stat(f"{d}/Sized.bin").mode & 0o777 == 0o600
    nfs.chmod(f"{d}/Sized.bin", 0o640)
    assert p.stat().st_mode & 0o777 == 0o640
    nfs.truncate(f"{d}/Sized.bin", 3)
    assert c.size(rf"{d}\sized.bin") == 3


# Attributes and Braid's xattr metadata (the attribute layer,
# meta/attr_cache.rs): kept per file while its change time stands, and only
# once that change time is older than 50 ms. Each check lets the file
# settle, reads it twice over SMB (the second read is from the layer), then
# changes it beside SMB and reads at once.

SETTLE = 0.2
READONLY, HIDDEN, ARCHIVE = 0x1, 0x2, 0x20
FILE_WRITE_DATA, FILE_APPEND_DATA = 0x2, 0x4


def dos_record(attributes: int) -> bytes:
    """Braid's `user.braid.dos` record (braid-fs info.rs): version 1, the
    attribute word, no creation time; what a restore (`rsync -X`) writes."""
    return bytes([1]) + attributes.to_bytes(4, "little") + b"\0"


def smb_attributes(c: Smb, rel: str) -> int:
    return smbclient.stat(c.unc(rel), **c.kw).st_file_attributes


def settled(smb, d: str, name: str) -> Path:
    p = smb.share_dir / d / name
    p.write_bytes(b"12345")
    time.sleep(SETTLE)
    return p


def check_host_setfattr_seen_by_smb(smb, nfs) -> None:
    c, d = Smb(smb), fresh_dir(smb)
    p = settled(smb, d, "Meta.txt")
    assert smb_attributes(c, rf"{d}\meta.TXT") & HIDDEN == 0
    assert smb_attributes(c, rf"{d}\META.txt") & HIDDEN == 0
    os.setxattr(p, "user.braid.dos", dos_record(HIDDEN | ARCHIVE))
    assert smb_attributes(c, rf"{d}\Meta.txt") & HIDDEN, \
        "a local setfattr of the DOS record is not seen over SMB"
    time.sleep(SETTLE)
    assert smb_attributes(c, rf"{d}\meta.txt") & HIDDEN
    os.removexattr(p, "user.braid.dos")
    assert smb_attributes(c, rf"{d}\Meta.txt") & HIDDEN == 0, \
        "a local removal of the DOS record is not seen over SMB"


def listed_attributes(c: Smb, d: str) -> dict[str, int]:
    return {e.name: e.smb_info.file_attributes
            for e in smbclient.scandir(c.unc(d), **c.kw)}


def check_host_setfattr_seen_in_a_listing(smb, nfs) -> None:
    c, d = Smb(smb), fresh_dir(smb)
    for i in range(3):
        (smb.share_dir / d / f"Entry{i}.txt").write_bytes(b"x")
    time.sleep(SETTLE)
    for _ in range(2):
        assert all(a & HIDDEN == 0 for a in listed_attributes(c, d).values())
    os.setxattr(smb.share_dir / d / "Entry1.txt", "user.braid.dos", dos_record(HIDDEN | ARCHIVE))
    assert listed_attributes(c, d)["Entry1.txt"] & HIDDEN, \
        "a local setfattr of the DOS record is not seen in an SMB listing"


def check_host_descriptor_change_seen_by_smb(smb, nfs) -> None:
    d = fresh_dir(smb)
    rc = RawClient(smb)
    try:
        name = rf"{d}\Acl.txt"
        op = rc.open(name, FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE)
        user = owner_sid(rc.query_sd(op, OWNER))
        rc.set_sd(op, DACL, descriptor_with_dacl([
            ace(1, FILE_WRITE_DATA | FILE_APPEND_DATA, user), ace(0, FILE_ALL_ACCESS, user)]))
        op.close()
        time.sleep(SETTLE)
        for _ in range(2):
            with pytest.raises(SMBResponseException):
                rc.open(name, FILE_WRITE_DATA)
        # The ACL is removed on the host: the default (owner may write) governs.
        os.removexattr(smb.share_dir / d / "Acl.txt", "user.braid.sd")
        rc.open(name, FILE_WRITE_DATA).close()
    finally:
        rc.close()


def check_host_chmod_touch_truncate_seen(smb, nfs) -> None:
    c, d = Smb(smb), fresh_dir(smb)
    p = settled(smb, d, "Mode.txt")
    for _ in range(2):
        assert smb_attributes(c, rf"{d}\mode.TXT") & READONLY == 0
    os.chmod(p, 0o444)
    assert smb_attributes(c, rf"{d}\MODE.txt") & READONLY, "a local chmod is not seen over SMB"
    assert nfs.stat(f"{d}/Mode.txt").mode & 0o777 == 0o444
    os.utime(p, (1_600_000_000, 1_600_000_000))
    assert int(smbclient.stat(c.unc(rf"{d}\mode.txt"), **c.kw).st_mtime) == 1_600_000_000
    assert nfs.stat(f"{d}/Mode.txt").mtime // 1_000_000_000 == 1_600_000_000
    os.truncate(p, 2)
    assert c.size(rf"{d}\MODE.TXT") == 2
    assert nfs.stat(f"{d}/Mode.txt").size == 2


def check_nfs_chmod_seen_by_smb(smb, nfs) -> None:
    c, d = Smb(smb), fresh_dir(smb)
    settled(smb, d, "Nfs.txt")
    for _ in range(2):
        assert smb_attributes(c, rf"{d}\nfs.txt") & READONLY == 0
    nfs.chmod(f"{d}/Nfs.txt", 0o444)
    assert smb_attributes(c, rf"{d}\NFS.TXT") & READONLY, "an NFS chmod is not seen over SMB"
    nfs.chmod(f"{d}/Nfs.txt", 0o644)
    assert smb_attributes(c, rf"{d}\nfs.TXT") & READONLY == 0
    nfs.truncate(f"{d}/Nfs.txt", 1)
    assert c.size(rf"{d}\Nfs.Txt") == 1


CHECKS = [check_local_create, check_local_rename, check_local_delete, check_case_only_rename,
          check_directory_moved, check_nfs_changes_seen_by_smb, check_smb_changes_seen_by_nfs,
          check_chmod_and_truncate, check_host_setfattr_seen_by_smb,
          check_host_setfattr_seen_in_a_listing,
          check_host_descriptor_change_seen_by_smb, check_host_chmod_touch_truncate_seen,
          check_nfs_chmod_seen_by_smb]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[len("check_"):])
def test_coherent(both, check):
    check(*both)


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[len("check_"):])
def test_coherent_with_the_cache_off(uncached, check):
    assert cache_view(uncached[0])["enabled"] is False
    check(*uncached)


def cache_view(smb) -> dict:
    with urllib.request.urlopen(f"http://{smb.admin}/api/v1/shares", timeout=10) as r:
        shares = json.load(r)["shares"]
    return next(s for s in shares if s["name"] == "cached")["metadata_cache"]


def test_counters_in_the_admin_api_and_metrics(both):
    smb, _ = both
    c, d = Smb(smb), fresh_dir(smb)
    before = cache_view(smb)
    assert before["enabled"] is True
    assert set(before) == {"enabled", "hits", "misses", "negative_hits", "entries", "bytes",
                           "invalidations", "attr_hits", "attr_misses", "attr_invalidations",
                           "attr_files", "attr_bytes", "fd_kept", "fd_reused", "fd_missed",
                           "fd_dropped_idle", "fd_dropped_capacity", "fd_dropped_unlinked",
                           "fd_dropped_invalidated", "fd_dropped_refused", "fd_open"}
    index(c, d)
    for i in range(5):
        c.create_new(rf"{d}\New{i}")
    assert c.exists(rf"{d}\new3")
    after = cache_view(smb)
    assert after["negative_hits"] >= before["negative_hits"] + 5, after
    assert after["hits"] >= before["hits"] + 1, after
    assert after["misses"] >= before["misses"] + 1, after
    assert after["invalidations"] >= before["invalidations"] + 5, after
    assert after["entries"] >= 5 and after["bytes"] > 0, after
    with urllib.request.urlopen(f"http://{smb.admin}/metrics", timeout=10) as r:
        text = r.read().decode()
    for family in ("hits_total", "negative_hits_total", "misses_total", "invalidations_total",
                   "entries", "bytes", "attr_hits_total", "attr_misses_total",
                   "attr_invalidations_total", "attr_files", "attr_bytes"):
        assert f'braid_metadata_cache_{family}{{share="cached"}}' in text, family


def test_attribute_counters(both):
    smb, _ = both
    c, d = Smb(smb), fresh_dir(smb)
    p = settled(smb, d, "Counted.txt")
    smb_attributes(c, rf"{d}\Counted.txt")
    before = cache_view(smb)
    assert before["attr_files"] >= 1 and before["attr_bytes"] > 0, before
    for _ in range(3):
        smb_attributes(c, rf"{d}\Counted.txt")
    after = cache_view(smb)
    # Each stat is a CREATE, a QUERY_INFO and a CLOSE: every read of the
    # DOS record and the birth time of the settled file is a hit.
    assert after["attr_hits"] >= before["attr_hits"] + 6, after
    assert after["attr_misses"] == before["attr_misses"], after
    os.setxattr(p, "user.braid.dos", dos_record(ARCHIVE))
    smb_attributes(c, rf"{d}\Counted.txt")
    assert cache_view(smb)["attr_invalidations"] >= after["attr_invalidations"] + 1


def test_concurrent_clients_leave_a_listing_equal_to_the_disk(both):
    """100 clients (80 over SMB, 20 over NFS), each creating 6 names and
    deleting 3 of them again (SMB by another case) in one directory."""
    smb, nfs_server_client = both
    c, d = Smb(smb), fresh_dir(smb)
    index(c, d)
    nfs_url = None
    errors: list[BaseException] = []
    kept: list[str] = []
    lock = threading.Lock()

    def smb_client(n: int):
        raw = RawClient(smb)
        try:
            for i in range(6):
                name = f"S{n:03d}-File{i}"
                op = Open(raw.tree, rf"{d}\{name}")
                op.create(ImpersonationLevel.Impersonation, READ_WRITE, NORMAL, SHARE_ALL,
                          CreateDisposition.FILE_CREATE, CreateOptions.FILE_NON_DIRECTORY_FILE)
                op.close()
                if i % 2:
                    op = Open(raw.tree, rf"{d}\{name.lower()}")
                    op.create(ImpersonationLevel.Impersonation, DELETE, NORMAL, SHARE_ALL,
                              CreateDisposition.FILE_OPEN,
                              CreateOptions.FILE_NON_DIRECTORY_FILE
                              | CreateOptions.FILE_DELETE_ON_CLOSE)
                    op.close()
                else:
                    with lock:
                        kept.append(name)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            raw.close()

    def nfs_client(n: int):
        try:
            client = nfs_rs.Client.connect(nfs_url, uid=0, gid=0, noresvport=True,
                                           connect_timeout=10, operation_timeout=30)
            try:
                for i in range(6):
                    name = f"N{n:03d}-File{i}"
                    client.touch(f"{d}/{name}")
                    if i % 2:
                        client.remove(f"{d}/{name}")
                    else:
                        with lock:
                            kept.append(name)
            finally:
                client.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    nfs_url = nfs_url_of(smb)
    threads = [threading.Thread(target=smb_client, args=(n,)) for n in range(80)]
    threads += [threading.Thread(target=nfs_client, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors[:3]
    disk = sorted(os.listdir(smb.share_dir / d))
    assert disk == sorted(kept)
    assert c.listdir(d) == disk
    assert sorted(nfs_server_client.listdir(d)) == disk
    # Every name is found in another case; every deleted one is not.
    for name in disk[::7]:
        assert c.exists(rf"{d}\{name.upper()}"), name
    for n in range(0, 80, 9):
        assert not c.exists(rf"{d}\s{n:03d}-file1"), n
    for n in range(0, 20, 3):
        assert not c.exists(rf"{d}\n{n:03d}-FILE3"), n


def nfs_url_of(smb) -> str:
    """The NFS URL of the server `start` made (its --nfs-listen)."""
    argv = servers._cmdline(smb.pid)
    listen = argv[argv.index("--nfs-listen") + 1]
    return f"nfs://{listen}/cached?version=4.1"


def test_the_checks_fail_with_a_broken_cache(tmp_path):
    """The suite catches a cache that skips invalidation: the checks of
    changes made beside SMB fail against it."""
    smb, nfs = start(tmp_path, broken=True)
    try:
        caught = []
        stale = (check_local_create, check_local_rename, check_local_delete,
                 check_nfs_changes_seen_by_smb, check_host_setfattr_seen_by_smb,
                 check_host_setfattr_seen_in_a_listing, check_host_descriptor_change_seen_by_smb)
        for check in stale:
            try:
                check(smb, nfs)
            except (AssertionError, SMBOSError, SMBResponseException, OSError):
                caught.append(check.__name__)
        assert caught == [c.__name__ for c in stale], caught
    finally:
        stop(smb, nfs)


def test_bad_bounds_are_refused_naming_the_key(tmp_path):
    share = f'[[share]]\nname = "x"\npath = {json.dumps(str(tmp_path))}\nmetadata_cache = true\n'
    line = servers.config_error(tmp_path, "metadata_cache_max_mib = 0\n" + share)
    assert "metadata_cache_max_mib = 0" in line and "1 to 65536" in line, line
    line = servers.config_error(tmp_path, "metadata_cache_max_entries = 5\n" + share)
    assert "metadata_cache_max_entries = 5" in line and "1000" in line, line
    # Type errors name the line (the config parser's general rule).
    line = servers.config_error(tmp_path, share.replace("true", '"yes"'))
    assert "line 4" in line and "expected a boolean" in line, line


def test_shares_given_by_flag_have_it_by_default(tmp_path):
    """`--share NAME=PATH` (no [[share]] table): the cache is on, with no
    flag (BRAID_EXTRA_ARGS cleared for this server)."""
    share_dir, workdir = tmp_path / "share", tmp_path / "server"
    share_dir.mkdir()
    workdir.mkdir()
    saved = os.environ.get("BRAID_EXTRA_ARGS")
    os.environ["BRAID_EXTRA_ARGS"] = ""
    try:
        server = servers.start_braid(share_dir, workdir)
    finally:
        if saved is None:
            os.environ.pop("BRAID_EXTRA_ARGS")
        else:
            os.environ["BRAID_EXTRA_ARGS"] = saved
    try:
        c = Smb(server)
        (share_dir / "Flagged.txt").write_bytes(b"x")
        # The first lookup reads the directory, the second is a hit.
        assert c.exists("flagged.TXT") and c.exists("FLAGGED.txt")
        with urllib.request.urlopen(f"http://{server.admin}/api/v1/shares", timeout=10) as r:
            view = json.load(r)["shares"][0]["metadata_cache"]
        assert view["enabled"] is True and view["misses"] == 1 and view["hits"] >= 1, view
    finally:
        server.stop()


def enabled_per_share(tmp_path: Path, shares: dict, flags: list[str]) -> dict:
    """`braid serve` with one [[share]] per entry of `shares` (name:
    `metadata_cache` as written, None for a share that does not say) and
    `flags`: whether the admin API reports each share's cache on."""
    text = ""
    for name, setting in shares.items():
        (tmp_path / name).mkdir(parents=True)
        text += f'[[share]]\nname = "{name}"\npath = {json.dumps(str(tmp_path / name))}\n'
        if setting is not None:
            text += f"metadata_cache = {json.dumps(setting)}\n"
    config = tmp_path / "braid.toml"
    config.write_text(text)
    port, admin = servers.free_port(), f"127.0.0.1:{servers.free_port()}"
    argv = [str(servers.BRAID_BIN), "serve", "--config", str(config),
            "--listen", f"127.0.0.1:{port}", "--admin-listen", admin,
            "--user", f"{servers.DEFAULT_USER}:Pw-{secrets.token_hex(8)}", *flags]
    proc = servers._spawn(argv, tmp_path / "braid.log", tmp_path)
    try:
        servers.wait_until_accepting("127.0.0.1", port, proc, tmp_path / "braid.log")
        with urllib.request.urlopen(f"http://{admin}/api/v1/shares", timeout=10) as r:
            return {s["name"]: s["metadata_cache"]["enabled"] for s in json.load(r)["shares"]}
    finally:
        servers.stop_pid(proc.pid)
        proc.wait(10)


def test_on_by_default_off_where_a_share_or_the_flag_says(tmp_path):
    shares = {"silent": None, "off": False, "on": True}
    assert enabled_per_share(tmp_path / "a", shares, []) == \
        {"silent": True, "off": False, "on": True}
    # The flags decide for every share, whatever it says.
    assert enabled_per_share(tmp_path / "b", shares, ["--no-metadata-cache"]) == \
        {"silent": False, "off": False, "on": False}
    assert enabled_per_share(tmp_path / "c", shares, ["--metadata-cache"]) == \
        {"silent": True, "off": True, "on": True}
