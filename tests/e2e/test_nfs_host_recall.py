"""Changes made on the host (by a process other than Braid) recall NFS
delegations, as they break SMB leases (issue 42; RFC 8881 10.4.1, 10.2):
a client holding a read delegation of a file that a local job writes,
truncates or removes gets CB_RECALL, returns the delegation, and reads
what the host left; a write delegation is recalled by a host write too.
A share with `notify_host_changes = false` does not watch its files: its
delegations are not recalled by host changes (the admin said nobody
makes any).

The NFS client is pynfs's client library (nfs_deleg_client.py, run in the
copy of pynfs tests/conformance/run_pynfs.py builds). Braid only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import servers
from smb_nfs import both, pynfs_tree  # noqa: F401

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid",
                                reason="host changes recalling delegations: Braid only")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance"))
import run_pynfs  # noqa: E402


def deleg_client(nfs, pynfs_tree, name: str, *mode: str) -> subprocess.Popen:
    components = [p for p in nfs.export.split("/") if p]
    return subprocess.Popen(
        [run_pynfs.PYTHON, str(HERE / "nfs_deleg_client.py"), nfs.host, str(nfs.port),
         *components, "--", name, "0", *mode],
        cwd=pynfs_tree / "nfs4.1", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


SAID = ("DELEGATED", "NO DELEGATION", "RECALLED", "NOT RECALLED", "RETURNED", "CB_GETATTR")


def next_line(proc, timeout: float = 30) -> str:
    """The helper's next report ("" when it exited); pynfs's own chatter
    (such as a note that gssapi is missing) is passed over."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            return ""
        line = line.strip()
        if line in SAID or line.startswith(("READ ", "BASE ")):
            return line
    return ""


def expect(proc, want: str) -> str:
    got = next_line(proc)
    if got.split(" ")[0] != want:
        proc.kill()
        pytest.fail(f"the NFS client printed {got!r}, not {want}: {proc.stderr.read()[-3000:]}")
    return got


def finish(proc) -> None:
    proc.stdin.close()
    proc.wait(10)


def delegated_file(smb, nfs, pynfs_tree, content: bytes, *mode: str):
    name = f"h-{uuid.uuid4().hex[:12]}"
    path = smb.share_dir / name
    path.write_bytes(content)
    proc = deleg_client(nfs, pynfs_tree, name, *mode)
    expect(proc, "DELEGATED")
    return path, proc


def test_a_host_write_recalls_a_read_delegation_and_the_client_reads_the_new_bytes(
        both, pynfs_tree):
    smb, nfs = both
    path, proc = delegated_file(smb, nfs, pynfs_tree, b"before", "read-after")
    try:
        with open(path, "r+b") as writer:
            writer.write(b"AFTER!")
            writer.flush()
            # Recalled while the host writer still has the file open.
            expect(proc, "RECALLED")
        expect(proc, "RETURNED")
        read = expect(proc, "READ")
        assert bytes.fromhex(read.split(" ", 1)[1]) == b"AFTER!"
    finally:
        finish(proc)


def test_a_host_truncate_recalls_a_read_delegation(both, pynfs_tree):
    smb, nfs = both
    path, proc = delegated_file(smb, nfs, pynfs_tree, b"some bytes", "read-after")
    try:
        os.truncate(path, 3)
        expect(proc, "RECALLED")
        expect(proc, "RETURNED")
        read = expect(proc, "READ")
        assert bytes.fromhex(read.split(" ", 1)[1]) == b"som"
    finally:
        finish(proc)


def fanotify_marked_inodes(pid: int) -> set[int]:
    """The inodes the process's fanotify groups mark (/proc/PID/fdinfo)."""
    marked = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue
        for line in info.splitlines():
            if line.startswith("fanotify ino:"):
                marked.add(int(line.split()[1].split(":")[1], 16))
    return marked


def until(check, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def test_a_host_unlink_recalls_a_read_delegation_and_its_mark_goes_with_it(both, pynfs_tree):
    smb, nfs = both
    path, proc = delegated_file(smb, nfs, pynfs_tree, b"doomed")
    try:
        ino = path.stat().st_ino
        # Marked at the grant, not at a read (the client has read nothing).
        assert ino in fanotify_marked_inodes(smb.pid), "the delegated file is not marked"
        path.unlink()
        expect(proc, "RECALLED")
        expect(proc, "RETURNED")
        # Its last delegation returned, the removed file's mark is let go
        # at once (kept idle, it would keep the file's blocks in use),
        # though the client still has the file open.
        assert until(lambda: ino not in fanotify_marked_inodes(smb.pid)), \
            "the mark outlived the file's last delegation"
    finally:
        finish(proc)


def test_a_host_rename_over_the_file_recalls_its_read_delegation(both, pynfs_tree):
    smb, nfs = both
    path, proc = delegated_file(smb, nfs, pynfs_tree, b"old version")
    try:
        # An editor's save: a new file renamed over the delegated one.
        new = path.with_name(path.name + ".tmp")
        new.write_bytes(b"new version")
        os.rename(new, path)
        expect(proc, "RECALLED")
        expect(proc, "RETURNED")
    finally:
        finish(proc)


def test_a_host_write_recalls_a_write_delegation(both, pynfs_tree):
    smb, nfs = both
    path, proc = delegated_file(smb, nfs, pynfs_tree, b"", "write")
    try:
        with open(path, "ab") as writer:
            writer.write(b"host")
        expect(proc, "RECALLED")
        # The holder flushed what it cached ("nfs-cached" at 0) before
        # returning the delegation.
        expect(proc, "RETURNED")
    finally:
        finish(proc)


def test_without_notify_host_changes_host_writes_do_not_recall(tmp_path, pynfs_tree):
    """The documented other side: a share whose admin turned host changes
    off is not watched, so its delegations stay."""
    share_dir, workdir = tmp_path / "share", tmp_path / "server"
    share_dir.mkdir()
    workdir.mkdir()
    smb, nfs = servers.start_braid_smb_nfs(share_dir, workdir,
                                           share_options="notify_host_changes = false\n")
    try:
        path, proc = delegated_file(smb, nfs, pynfs_tree, b"before", "recall-wait=3")
        try:
            path.write_bytes(b"after")
            assert next_line(proc, 10) == "NOT RECALLED"
        finally:
            finish(proc)
        assert smb.alive()
    finally:
        smb.stop()
