"""SMB share modes and caching against NFSv4.1 opens and writes on one
file (issue 42): one Braid serves a share over both protocols, smbprotocol
and the `nfs-rs` Python package are the clients.

An SMB open that does not share reading keeps NFS readers out
(NFS4ERR_SHARE_DENIED) until it closes; an NFS open for writing keeps out
an SMB opener for writing that does not share writing
(STATUS_SHARING_VIOLATION), and one that shares writing gets in. nfs-rs
opens with OPEN4_SHARE_DENY_NONE, so an NFS deny against SMB is not
checked here (pynfs's COUR3-6 check NFS denies between NFS clients).

An NFS OPEN breaks an SMB client's write caching (its lease loses W; the
OPEN waits for it, as an SMB open would, MS-FSA 2.1.4.12), and an NFS WRITE
its read caching, as a write through another open does.

Braid only: Samba and nfs-ganesha each serve one of the two protocols.
"""

from __future__ import annotations

import os
import threading

import pytest
from smbprotocol.exceptions import SharingViolation
from smbprotocol.open import (
    FilePipePrinterAccessMask,
    ShareAccess,
)

from smb_nfs import both, fresh_dir, nfs, raw, smb_open  # noqa: F401
from smbremote import SHARE_ALL, Breaks

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid",
                                reason="one share over SMB and NFS: Braid only")

READ = FilePipePrinterAccessMask.FILE_READ_DATA | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES
WRITE = FilePipePrinterAccessMask.FILE_WRITE_DATA | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES
R, H, W = 1, 2, 4


@pytest.fixture
def d(both):
    """A fresh directory in the share with one file `f` of 6 bytes."""
    return fresh_dir(both[0], b"shared")


def test_smb_open_sharing_nothing_keeps_nfs_readers_out(nfs, raw, d):
    held = smb_open(raw, f"{d}\\f", READ, 0)
    try:
        with pytest.raises(Exception) as e:
            with nfs.open(f"{d}/f", "rb") as f:
                f.read_at(0, 6)
        assert "share denied" in str(e.value), e.value
    finally:
        held.close()
    with nfs.open(f"{d}/f", "rb") as f:
        assert f.read_at(0, 6) == b"shared"


def test_nfs_writer_keeps_smb_writers_that_do_not_share_writing_out(nfs, raw, d):
    with nfs.open(f"{d}/f", "r+b") as f:
        f.write_at(b"S", 0)
        with pytest.raises(SharingViolation):
            smb_open(raw, f"{d}\\f", WRITE, ShareAccess.FILE_SHARE_READ)
        # Sharing writing (and reading: NFS's open reads too) lets it in.
        op = smb_open(raw, f"{d}\\f", WRITE, SHARE_ALL)
        op.close()
    # The NFS open gone, nothing stands in the way.
    op = smb_open(raw, f"{d}\\f", WRITE, ShareAccess.FILE_SHARE_READ)
    op.close()


def test_nfs_write_breaks_an_smb_read_lease(nfs, raw, d):
    breaks = Breaks(raw.conn)
    op = raw.open_cached(f"{d}\\f", READ, lease=R | H)
    try:
        assert op.granted_lease == R | H
        assert op.read(0, 6) == b"shared"
        with nfs.open(f"{d}/f", "r+b") as f:
            # Opening breaks nothing: the lease caches no writes.
            assert breaks.next(0.5) is None
            f.write_at(b"N", 0)
            got = breaks.next(5)
        assert got is not None, "no lease break for an NFS write"
        assert got["current"] == R | H and got["new"] & R == 0, got
        assert op.read(0, 6) == b"Nhared"
    finally:
        op.close()


def test_nfs_open_breaks_an_smb_write_lease_and_waits(nfs, raw, d):
    breaks = Breaks(raw.conn)
    op = raw.open_cached(f"{d}\\f", READ | WRITE, lease=R | W | H)
    assert op.granted_lease == R | W | H
    read = {}

    def nfs_reader():
        try:
            with nfs.open(f"{d}/f", "rb") as f:
                read["data"] = f.read_at(0, 6)
        except Exception as e:  # noqa: BLE001 - reported below
            read["error"] = e

    t = threading.Thread(target=nfs_reader)
    t.start()
    got = breaks.next(5)
    assert got is not None, "no lease break for an NFS open"
    assert got["current"] == R | W | H and got["new"] & W == 0, got
    # The SMB client "flushes" and closes instead of acknowledging: the
    # NFS open goes on.
    op.write(b"S", 0)
    op.close()
    t.join(30)
    assert not t.is_alive()
    assert read.get("data") == b"Shared", read
