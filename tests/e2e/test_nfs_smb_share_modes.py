"""SMB share modes and NFSv4.1 share reservations on one file (issue 42):
one Braid serves a share over both protocols, smbprotocol and the `nfs-rs`
Python package are the clients.

An SMB open that does not share reading keeps NFS readers out
(NFS4ERR_SHARE_DENIED) until it closes; an NFS open for writing keeps out
an SMB opener for writing that does not share writing
(STATUS_SHARING_VIOLATION), and one that shares writing gets in. nfs-rs
opens with OPEN4_SHARE_DENY_NONE, so an NFS deny against SMB is not
checked here (pynfs's COUR3-6 check NFS denies between NFS clients).

Braid only: Samba and nfs-ganesha each serve one of the two protocols.
"""

from __future__ import annotations

import os
import uuid

import nfs_rs
import pytest
from smbprotocol.exceptions import SharingViolation
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    Open,
    ShareAccess,
)

import servers
from smbremote import NORMAL, SHARE_ALL, RawClient

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid",
                                reason="one share over SMB and NFS: Braid only")

READ = FilePipePrinterAccessMask.FILE_READ_DATA | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES
WRITE = FilePipePrinterAccessMask.FILE_WRITE_DATA | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    base = tmp_path_factory.mktemp("smb-nfs-modes-")
    share_dir, workdir = base / "share", base / "server"
    share_dir.mkdir()
    workdir.mkdir()
    smb, nfs = servers.start_braid_smb_nfs(share_dir, workdir)
    yield smb, nfs
    alive = smb.alive()
    smb.stop()
    if not alive:
        pytest.fail(f"braid (pid {smb.pid}) died during the tests; log {smb.log_path}:\n"
                    f"{smb.log_tail()}")


@pytest.fixture(scope="module")
def nfs(both):
    _, server = both
    client = nfs_rs.Client.connect(
        f"nfs://{server.host}:{server.port}{server.export}?version=4.1",
        uid=0, gid=0, noresvport=True, connect_timeout=10, operation_timeout=30)
    yield client
    client.close()


@pytest.fixture
def d(both):
    """A fresh directory in the share with one file `f` of 6 bytes."""
    smb, _ = both
    name = f"t-{uuid.uuid4().hex[:12]}"
    (smb.share_dir / name).mkdir()
    (smb.share_dir / name / "f").write_bytes(b"shared")
    servers.give_to_share_owner(smb.share_dir, smb.share_dir / name)
    servers.give_to_share_owner(smb.share_dir, smb.share_dir / name / "f")
    return name


@pytest.fixture
def raw(both):
    c = RawClient(both[0])
    yield c
    c.close()


def smb_open(raw: RawClient, name: str, access: int, share: int) -> Open:
    op = Open(raw.tree, name)
    op.create(ImpersonationLevel.Impersonation, access, NORMAL, share,
              CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
    return op


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
