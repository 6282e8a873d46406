"""An NFS read delegation and an SMB open for writing the same file (issue
42, RFC 8881 10.4.1): the SMB open recalls the delegation (CB_RECALL on
the NFS client's backchannel) and waits until the client returned it
(DELEGRETURN), so the NFS client stops reading from its cache before SMB
writes. An NFS write delegation is recalled by any SMB open, even one
that only reads, which sees what the NFS client wrote back before
returning it; and none is granted while an SMB open of the file exists.
An SMB rename or removal recalls a read delegation as an NFS one would.
Another NFS client's GETATTR of the size recalls a write delegation too
when its holder does not answer CB_GETATTR with its size and change
(test_nfs_cb_getattr.py has holders that do).

The NFS client is pynfs's client library (nfs_deleg_client.py, run in the
copy of pynfs tests/conformance/run_pynfs.py builds); SMB is smbprotocol.
Braid only: Samba and nfs-ganesha each serve one of the two protocols.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from smbprotocol.open import FilePipePrinterAccessMask

import servers
from smb_nfs import both, pynfs_tree  # noqa: F401
import smbclient
from smbremote import RawClient, Remote

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid",
                                reason="one share over SMB and NFS: Braid only")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance"))
import run_pynfs  # noqa: E402

WRITE = FilePipePrinterAccessMask.FILE_WRITE_DATA | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES
READ = FilePipePrinterAccessMask.FILE_READ_DATA | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES


def expect_line(proc, want: str, timeout: float = 30) -> float:
    """Wait for the helper to print `want`; the time it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.strip() == want:
            return time.monotonic()
        if line.strip() in ("NOT RECALLED", "NO DELEGATION", "DELEGATED"):
            pytest.fail(f"{line.strip()} (waiting for {want})")
    pytest.fail(f"the NFS client never printed {want}: {proc.stderr.read()[-3000:]}")


def deleg_client(nfs, pynfs_tree, name: str, delay: float, *mode: str,
                 stdin=subprocess.PIPE) -> subprocess.Popen:
    components = [p for p in nfs.export.split("/") if p]
    return subprocess.Popen(
        [run_pynfs.PYTHON, str(HERE / "nfs_deleg_client.py"), nfs.host, str(nfs.port),
         *components, "--", name, str(delay), *mode],
        cwd=pynfs_tree / "nfs4.1", stdin=stdin, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def test_smb_reader_recalls_an_nfs_write_delegation_and_reads_what_it_flushed(
        both, pynfs_tree):
    smb, nfs = both
    name = f"wd-{uuid.uuid4().hex[:12]}"
    delay = 1.5
    proc = deleg_client(nfs, pynfs_tree, name, delay, "write")
    try:
        expect_line(proc, "DELEGATED")
        servers.give_to_share_owner(smb.share_dir, smb.share_dir / name)
        raw = RawClient(smb)
        try:
            t0 = time.monotonic()
            # Only reading: a write delegation conflicts with any open.
            op = raw.open(name, READ)
            opened = time.monotonic()
            expect_line(proc, "RECALLED")
            expect_line(proc, "RETURNED")
            data = op.read(0, 64)
            op.close()
        finally:
            raw.close()
        assert opened - t0 >= delay * 0.8, (
            f"the SMB open went on after {opened - t0:.2f}s, before the write "
            f"delegation was returned ({delay}s after the recall)")
        assert data == b"nfs-cached"
    finally:
        proc.stdin.close()
        proc.wait(10)


def test_another_nfs_clients_getattr_of_size_recalls_a_write_delegation(both, pynfs_tree):
    """RFC 8881 10.4.3: the holder may have grown the file in its cache;
    pynfs's client gives no usable CB_GETATTR answer unless told to (its
    default result holds no attributes), so another client asking for the
    size waits (NFS4ERR_DELAY) until the delegation is recalled and
    returned, and sees the size written back."""
    smb, nfs = both
    name = f"ga-{uuid.uuid4().hex[:12]}"
    holder = deleg_client(nfs, pynfs_tree, name, 1.0, "write")
    try:
        expect_line(holder, "DELEGATED")
        components = [p for p in nfs.export.split("/") if p]
        out = subprocess.run(
            [run_pynfs.PYTHON, str(HERE / "nfs_open_read.py"), nfs.host, str(nfs.port),
             *components, "--", name, "30", "getattr"],
            cwd=pynfs_tree / "nfs4.1", capture_output=True, text=True, timeout=60)
        expect_line(holder, "RECALLED")
        expect_line(holder, "RETURNED")
        waited = [ln.split() for ln in out.stdout.splitlines() if ln.startswith("WAITED ")]
        assert waited and int(waited[0][2]) > 0, f"GETATTR was not held off: {out.stdout}"
        assert f"SIZE {len(b'nfs-cached')}" in out.stdout.splitlines(), out.stdout
    finally:
        holder.stdin.close()
        holder.wait(10)


def test_smb_writer_recalls_an_nfs_read_delegation_and_waits(both, pynfs_tree):
    smb, nfs = both
    name = f"d-{uuid.uuid4().hex[:12]}"
    delay = 1.5
    proc = deleg_client(nfs, pynfs_tree, name, delay)
    try:
        expect_line(proc, "DELEGATED")
        servers.give_to_share_owner(smb.share_dir, smb.share_dir / name)
        raw = RawClient(smb)
        try:
            t0 = time.monotonic()
            op = raw.open(name, WRITE)
            opened = time.monotonic()
            # (Read after the open returned: the helper printed them while
            # the open waited.)
            expect_line(proc, "RECALLED")
            expect_line(proc, "RETURNED")
            op.write(b"smb", 0)
            op.close()
        finally:
            raw.close()
        assert opened - t0 >= delay * 0.8, (
            f"the SMB open went on after {opened - t0:.2f}s, before the delegation "
            f"was returned ({delay}s after the recall)")
    finally:
        proc.stdin.close()
        proc.wait(10)


@pytest.mark.parametrize("smb_access,nfs_mode", [("write", "read"), ("read", "write")])
def test_no_nfs_delegation_while_an_smb_open_conflicts(both, pynfs_tree, smb_access, nfs_mode):
    """No read delegation while SMB may write the file, and no write
    delegation while SMB has it open at all."""
    smb, nfs = both
    name = f"{smb_access[0]}-{uuid.uuid4().hex[:12]}"
    (smb.share_dir / name).write_bytes(b"x")
    servers.give_to_share_owner(smb.share_dir, smb.share_dir / name)
    raw = RawClient(smb)
    try:
        op = raw.open(name, WRITE if smb_access == "write" else READ)
        mode = ["write"] if nfs_mode == "write" else []
        proc = deleg_client(nfs, pynfs_tree, name, 0, *mode, stdin=subprocess.DEVNULL)
        expect_line(proc, "NO DELEGATION")
        proc.wait(10)
        op.close()
    finally:
        raw.close()


@pytest.mark.parametrize("how", ["rename", "remove"])
def test_smb_rename_or_remove_recalls_an_nfs_read_delegation(both, pynfs_tree, how):
    """RFC 8881 10.4.1: a REMOVE or RENAME of a delegated file recalls the
    delegation. Over SMB both begin with an open for DELETE access, which
    waits for the NFS client to return it before the name goes."""
    smb, nfs = both
    name = f"{how[:3]}-{uuid.uuid4().hex[:12]}"
    delay = 1.5
    proc = deleg_client(nfs, pynfs_tree, name, delay)
    try:
        expect_line(proc, "DELEGATED")
        servers.give_to_share_owner(smb.share_dir, smb.share_dir / name)
        remote = Remote(smb, "")
        unc = f"\\\\{smb.host}\\{smb.share}\\{name}"
        try:
            t0 = time.monotonic()
            if how == "rename":
                smbclient.rename(unc, unc + ".moved", **remote.kw)
            else:
                smbclient.remove(unc, **remote.kw)
            done = time.monotonic()
        finally:
            remote.close()
        expect_line(proc, "RECALLED")
        expect_line(proc, "RETURNED")
        assert done - t0 >= delay * 0.8, (
            f"the SMB {how} finished after {done - t0:.2f}s, before the delegation "
            f"was returned ({delay}s after the recall)")
        assert not (smb.share_dir / name).exists()
        assert (smb.share_dir / (name + ".moved")).exists() == (how == "rename")
    finally:
        proc.stdin.close()
        proc.wait(10)
