"""Kept file descriptors (issue 44, braid-fs `meta/fd_cache.rs`).

With `metadata_cache = true` and `metadata_cache_max_fds` above 0 (it is 0
by default) a close of a plain file keeps its fd for a short while, and the next open of the same file with the same access takes
it. One Braid serves a share over SMB (smbprotocol) and NFSv4.1 (nfs-rs),
running as root so that NFS calls are made as the client's uid. The kept
fds' idle time is set long (30 s) so that only the drops under test can
close them. The checks:

- open/close/open over SMB and over NFS takes the kept fd (the admin
  API's `fd_reused` counter moves) and the bytes read are the file's;
- a host `rm` of a file whose fd is kept frees it: the server's
  /proc/PID/fd no longer shows the deleted file within a second (the
  sweep checks each kept fd's link count). The same check against a
  Braid that skips that drop (BRAID_TEST_BROKEN_FD_CACHE, a test-only
  switch) must fail;
- an SMB lease asked for on a file just closed (its fd kept) is granted
  in full (read, handle, write);
- a byte-range lock taken and released by closing does not survive into
  the open that reuses the fd: a local process and a second SMB client
  can lock the range;
- uid B cannot read, over NFS, a mode-0600 file of uid A whose fd A's
  open left kept: the reuse's permission check refuses it (the
  `fd_dropped_refused` counter moves) and the open fails;
- with the default (no fds kept), a local process takes a write lease
  (`F_SETLEASE`) on a file an SMB client has just closed, which a kept fd
  would make the kernel refuse (smbtorture's kernel_oplocks8); with fds
  kept it is refused, which is why keeping them is asked for.

Braid only: it is Braid's layer under test.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import time
import urllib.request
import uuid
from pathlib import Path

import nfs_rs
import pytest
from smbprotocol.open import (CreateDisposition, CreateOptions, ImpersonationLevel, LockFlags,
                              Open)

import servers
from smbremote import NORMAL, SHARE_ALL, RawClient, lock_element

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid", reason="Braid's kept fds")

BROKEN_ENV = "BRAID_TEST_BROKEN_FD_CACHE"
READ_DATA, WRITE_DATA, READ_ATTRS = 0x1, 0x2, 0x80
READ_WRITE = READ_DATA | WRITE_DATA | READ_ATTRS
SHARE = "kept"
UID_A, UID_B = 40001, 40002
EXCLUSIVE_NOW = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY


class Braid:
    def __init__(self, base: Path, broken: bool, keep_fds: bool = True):
        self.share_dir, workdir = base / "share", base / "server"
        self.share_dir.mkdir()
        workdir.mkdir()
        os.chmod(self.share_dir, 0o777)
        port, self.nfs_port = servers.free_port(), servers.free_port()
        password = "Pw-" + secrets.token_hex(8)
        config = workdir / "braid.toml"
        keep = 'metadata_cache_max_fds = 256\n' if keep_fds else ''
        config.write_text(f'metadata_cache_fd_idle_ms = 30000\n{keep}'
                          f'[[share]]\nname = "{SHARE}"\npath = {json.dumps(str(self.share_dir))}\n'
                          'protocols = ["smb", "nfs"]\nroot_squash = false\n'
                          'metadata_cache = true\n')
        self.admin = f"127.0.0.1:{servers.free_port()}"
        argv = [str(servers.BRAID_BIN), "serve", "--config", str(config),
                "--listen", f"127.0.0.1:{port}", "--nfs-listen", f"127.0.0.1:{self.nfs_port}",
                "--user", f"{servers.DEFAULT_USER}:{password}", "--admin-listen", self.admin]
        proc = servers._spawn(argv, workdir / "braid.log", workdir,
                              {BROKEN_ENV: "1"} if broken else None)
        servers.wait_until_accepting("127.0.0.1", port, proc, workdir / "braid.log")
        servers._wait_for_nfs("127.0.0.1", self.nfs_port, proc, workdir / "braid.log")
        self.smb = servers.Server("braid", "127.0.0.1", port, SHARE, servers.DEFAULT_USER,
                                  password, self.share_dir, workdir, proc.pid,
                                  workdir / "braid.log", proc, admin=self.admin)

    def nfs(self, uid: int = 0, gid: int = 0):
        return nfs_rs.Client.connect(f"nfs://127.0.0.1:{self.nfs_port}/{SHARE}?version=4.1",
                                     uid=uid, gid=gid, noresvport=True, connect_timeout=10,
                                     operation_timeout=30)

    def counters(self) -> dict:
        with urllib.request.urlopen(f"http://{self.admin}/api/v1/shares", timeout=10) as r:
            shares = json.load(r)["shares"]
        return next(s for s in shares if s["name"] == SHARE)["metadata_cache"]

    def open_fds_to(self, path: Path) -> list[str]:
        """The server's fds whose link names `path` (deleted or not)."""
        found = []
        fd_dir = Path(f"/proc/{self.smb.pid}/fd")
        for fd in fd_dir.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target == str(path) or target == f"{path} (deleted)":
                found.append(target)
        return found

    def stop(self):
        alive = self.smb.alive()
        self.smb.stop()
        if not alive:
            pytest.fail(f"braid died; log {self.smb.log_path}:\n{self.smb.log_tail()}")


@pytest.fixture(scope="module")
def braid(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("test_fd_cache needs root: NFS opens are made as the client's uid")
    b = Braid(tmp_path_factory.mktemp("fdcache-"), broken=False)
    yield b
    b.stop()


def seed(b: Braid, data: bytes) -> str:
    name = f"f-{uuid.uuid4().hex[:10]}"
    (b.share_dir / name).write_bytes(data)
    servers.give_to_share_owner(b.share_dir, b.share_dir / name)
    return name


def smb_read(raw: RawClient, name: str, access: int = READ_WRITE) -> bytes:
    op = raw.open(name, access)
    try:
        return op.read(0, 65536) if op.end_of_file else b""
    finally:
        op.close()


def test_smb_open_close_open_reuses_the_fd_and_reads_the_files_bytes(braid):
    data = os.urandom(5000)
    name = seed(braid, data)
    raw = RawClient(braid.smb)
    try:
        assert smb_read(raw, name) == data
        before = braid.counters()
        assert before["fd_open"] >= 1, before
        for _ in range(5):
            assert smb_read(raw, name) == data
        after = braid.counters()
    finally:
        raw.close()
    assert after["fd_reused"] >= before["fd_reused"] + 5, (before, after)
    assert after["fd_kept"] >= before["fd_kept"] + 5, (before, after)
    # A write through a reused fd lands in the file.
    raw = RawClient(braid.smb)
    try:
        op = raw.open(name, READ_WRITE)
        op.write(b"XYZ", 10)
        op.close()
        assert smb_read(raw, name) == data[:10] + b"XYZ" + data[13:]
    finally:
        raw.close()
    assert (braid.share_dir / name).read_bytes() == data[:10] + b"XYZ" + data[13:]


def test_nfs_open_close_open_reuses_the_fd(braid):
    data = os.urandom(3000)
    name = seed(braid, data)
    nfs = braid.nfs()
    try:
        with nfs.open(name, "rb") as f:
            assert f.read() == data
        before = braid.counters()
        for _ in range(3):
            with nfs.open(name, "rb") as f:
                assert f.read() == data
        after = braid.counters()
    finally:
        nfs.close()
    assert after["fd_reused"] >= before["fd_reused"] + 3, (before, after)


def check_host_rm_frees_the_kept_fd(b: Braid) -> None:
    name = seed(b, os.urandom(1 << 20))
    path = b.share_dir / name
    raw = RawClient(b.smb)
    try:
        smb_read(raw, name)
    finally:
        raw.close()
    assert b.open_fds_to(path), "the close kept no fd: nothing to check"
    os.unlink(path)
    deadline = time.monotonic() + 2.0
    while b.open_fds_to(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = b.open_fds_to(path)
    assert not left, f"the server still holds the deleted file open: {left}"


def test_a_host_rm_frees_the_kept_fd(braid):
    before = braid.counters()
    check_host_rm_frees_the_kept_fd(braid)
    after = braid.counters()
    assert after["fd_dropped_unlinked"] >= before["fd_dropped_unlinked"] + 1, (before, after)


def test_a_delete_on_close_leaves_no_fd_behind(braid):
    name = seed(braid, b"x" * 4096)
    path = braid.share_dir / name
    raw = RawClient(braid.smb)
    try:
        smb_read(raw, name)
        assert braid.open_fds_to(path)
        # smbclient-style delete: open with DELETE and delete-on-close.
        op = Open(raw.tree, name)
        op.create(ImpersonationLevel.Impersonation, 0x10000 | READ_ATTRS, NORMAL, SHARE_ALL,
                  CreateDisposition.FILE_OPEN,
                  CreateOptions.FILE_NON_DIRECTORY_FILE | CreateOptions.FILE_DELETE_ON_CLOSE)
        op.close()
    finally:
        raw.close()
    assert not path.exists()
    assert not braid.open_fds_to(path), "a file deleted by Braid is still held open"


def test_the_host_rm_check_fails_with_a_broken_layer(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("test_fd_cache needs root")
    b = Braid(tmp_path, broken=True)
    try:
        with pytest.raises(AssertionError, match="still holds the deleted file open"):
            check_host_rm_frees_the_kept_fd(b)
    finally:
        b.stop()


def test_a_lease_is_granted_on_a_file_just_closed(braid):
    name = seed(braid, b"lease me")
    raw = RawClient(braid.smb)
    try:
        assert smb_read(raw, name) == b"lease me"
        assert braid.open_fds_to(braid.share_dir / name), "no fd kept: nothing to check"
        op = raw.open_cached(name, READ_WRITE, lease=0x7)
        try:
            assert op.granted_lease == 0x7, op.granted_lease
        finally:
            op.close()
    finally:
        raw.close()


def local_lock_refused(path: Path, offset: int, length: int) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, length, offset)
    except OSError as e:
        assert e.errno in (errno.EAGAIN, errno.EACCES), e
        return True
    finally:
        os.close(fd)
    return False


def test_a_lock_released_by_a_close_does_not_survive_into_the_reused_fd(braid):
    name = seed(braid, b"0123456789" * 10)
    path = braid.share_dir / name
    a, b = RawClient(braid.smb), RawClient(braid.smb)
    try:
        op = a.open(name, READ_WRITE)
        op.lock([lock_element(10, 10, EXCLUSIVE_NOW)])
        assert local_lock_refused(path, 10, 10), "the lock is not a kernel lock: nothing to check"
        op.close()
        before = braid.counters()
        again = a.open(name, READ_WRITE)
        assert braid.counters()["fd_reused"] >= before["fd_reused"] + 1, "the fd was not reused"
        try:
            assert not local_lock_refused(path, 10, 10), "the closed open's lock survived"
            other = b.open(name, READ_WRITE)
            other.lock([lock_element(10, 10, EXCLUSIVE_NOW)])
            other.lock([lock_element(10, 10, LockFlags.SMB2_LOCKFLAG_UNLOCK)])
            other.close()
        finally:
            again.close()
    finally:
        a.close()
        b.close()


def test_uid_b_cannot_read_uid_as_private_file_through_a_kept_fd(braid):
    data = b"private to uid A"
    name = seed(braid, data)
    path = braid.share_dir / name
    os.chown(path, UID_A, UID_A)
    os.chmod(path, 0o600)
    alice = braid.nfs(UID_A, UID_A)
    try:
        with alice.open(name, "rb") as f:
            assert f.read() == data
        with alice.open(name, "rb") as f:  # and again: the fd is kept
            assert f.read() == data
    finally:
        alice.close()
    before = braid.counters()
    assert before["fd_open"] >= 1 and braid.open_fds_to(path), before
    bob = braid.nfs(UID_B, UID_B)
    try:
        with pytest.raises(OSError) as e:
            with bob.open(name, "rb") as f:
                f.read()
        assert e.value.errno in (errno.EACCES, errno.EPERM), e.value
    finally:
        bob.close()
    after = braid.counters()
    assert after["fd_dropped_refused"] >= before["fd_dropped_refused"] + 1, (before, after)
    # uid A still reads it (a fresh open).
    alice = braid.nfs(UID_A, UID_A)
    try:
        with alice.open(name, "rb") as f:
            assert f.read() == data
    finally:
        alice.close()


def test_counters_in_metrics(braid):
    with urllib.request.urlopen(f"http://{braid.admin}/metrics", timeout=10) as r:
        text = r.read().decode()
    for family in ("fd_kept_total", "fd_reused_total", "fd_missed_total",
                   "fd_dropped_idle_total", "fd_dropped_capacity_total",
                   "fd_dropped_unlinked_total", "fd_dropped_invalidated_total",
                   "fd_dropped_refused_total", "fd_open"):
        assert f'braid_metadata_cache_{family}{{share="{SHARE}"}}' in text, family


def local_write_lease_taken(path: Path) -> bool:
    """Can a local process take a write lease on `path` now?"""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EBUSY):
            return False
        raise
    else:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return True
    finally:
        os.close(fd)


@pytest.mark.parametrize("keep_fds", [False, True], ids=["default", "fds-kept"])
def test_a_local_write_lease_after_an_smb_close(tmp_path, keep_fds):
    if os.geteuid() != 0:
        pytest.fail("test_fd_cache needs root")
    b = Braid(tmp_path, broken=False, keep_fds=keep_fds)
    try:
        name = seed(b, b"leased locally")
        raw = RawClient(b.smb)
        try:
            assert smb_read(raw, name) == b"leased locally"
        finally:
            raw.close()
        assert bool(b.open_fds_to(b.share_dir / name)) == keep_fds
        assert local_write_lease_taken(b.share_dir / name) == (not keep_fds)
    finally:
        b.stop()
