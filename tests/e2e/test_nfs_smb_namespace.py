"""NFS namespace and attribute changes against SMB opens of the same file
(issue 42, "One share, two protocols"). An SMB open that does not share
delete keeps NFS from removing or renaming the file: one Braid serves
a share over both protocols; smbprotocol holds the SMB open and the
`nfs-rs` Python package removes and renames over NFSv4.1, which answers
NFS4ERR_FILE_OPEN (RFC 8881 18.25.4, 18.26.4) as an SMB delete would get
a sharing violation. An SMB open that shares delete does not stand in the
way, and once the open closes the NFS change goes through. An NFS SETATTR
of the size breaks an SMB read lease, as a WRITE does.

Braid only: Samba and nfs-ganesha each serve one of the two protocols.
"""

from __future__ import annotations

import os

import pytest
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    Open,
    ShareAccess,
)

from smb_nfs import both, fresh_dir, nfs, raw  # noqa: F401
from smbremote import NORMAL, SHARE_ALL, Breaks, RawClient

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid",
                                reason="one share over SMB and NFS: Braid only")

READ = FilePipePrinterAccessMask.FILE_READ_DATA | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES
NO_DELETE = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE


@pytest.fixture
def d(both):
    """A fresh directory in the share with one file `f`."""
    return fresh_dir(both[0], b"shared")


def smb_open(raw: RawClient, name: str, share: int) -> Open:
    op = Open(raw.tree, name)
    op.create(ImpersonationLevel.Impersonation, READ, NORMAL, share,
              CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
    return op


def test_smb_open_without_share_delete_keeps_nfs_remove_out(both, nfs, raw, d):
    smb, _ = both
    held = smb_open(raw, f"{d}\\f", NO_DELETE)
    try:
        with pytest.raises(Exception) as e:
            nfs.remove(f"{d}/f")
        assert "open" in str(e.value).lower(), e.value
        assert (smb.share_dir / d / "f").exists()
    finally:
        held.close()
    nfs.remove(f"{d}/f")
    assert not (smb.share_dir / d / "f").exists()


def test_smb_open_without_share_delete_keeps_nfs_rename_out(both, nfs, raw, d):
    smb, _ = both
    (smb.share_dir / d / "g").write_bytes(b"other")
    held = smb_open(raw, f"{d}\\f", NO_DELETE)
    try:
        # Neither moving it nor replacing it.
        with pytest.raises(Exception):
            nfs.rename(f"{d}/f", f"{d}/moved")
        with pytest.raises(Exception):
            nfs.rename(f"{d}/g", f"{d}/f")
        assert (smb.share_dir / d / "f").read_bytes() == b"shared"
    finally:
        held.close()
    nfs.rename(f"{d}/f", f"{d}/moved")
    assert (smb.share_dir / d / "moved").read_bytes() == b"shared"


def test_smb_open_sharing_delete_lets_nfs_remove(both, nfs, raw, d):
    smb, _ = both
    held = smb_open(raw, f"{d}\\f", SHARE_ALL)
    try:
        nfs.remove(f"{d}/f")
        assert not (smb.share_dir / d / "f").exists()
    finally:
        held.close()


def test_nfs_truncate_breaks_an_smb_read_lease(both, nfs, raw, d):
    breaks = Breaks(raw.conn)
    op = raw.open_cached(f"{d}\\f", READ, lease=1 | 2)
    try:
        assert op.granted_lease == 1 | 2
        nfs.truncate(f"{d}/f", 2)
        got = breaks.next(5)
        assert got is not None, "no lease break for an NFS truncate"
        assert got["new"] & 1 == 0, got
        assert op.read(0, 6) == b"sh"
    finally:
        op.close()
