"""Fixtures and helpers shared by the tests of one share served over SMB and
NFSv4.1 at once (tests/e2e/test_nfs_smb_*.py).

A test module imports the fixtures it uses (`from smb_nfs import both, nfs
# noqa: F401`); pytest then gives each module its own Braid, as a
module-scoped fixture defined there would.
"""

from __future__ import annotations

import io
import sys
import uuid
from pathlib import Path

import nfs_rs
import pytest
from smbprotocol.open import CreateDisposition, CreateOptions, ImpersonationLevel, Open

import servers
from smbremote import NORMAL, RawClient

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance"))
import run_pynfs  # noqa: E402


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """One Braid serving a fresh directory over SMB and NFS: (smb, nfs)
    server handles. Fails the module's last test if Braid died."""
    base = tmp_path_factory.mktemp("smb-nfs-")
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
    """An nfs-rs NFSv4.1 client of the export (AUTH_SYS uid 0)."""
    _, server = both
    client = nfs_rs.Client.connect(
        f"nfs://{server.host}:{server.port}{server.export}?version=4.1",
        uid=0, gid=0, noresvport=True, connect_timeout=10, operation_timeout=30)
    yield client
    client.close()


@pytest.fixture
def raw(both):
    """A raw smbprotocol connection to the share."""
    c = RawClient(both[0])
    yield c
    c.close()


@pytest.fixture(scope="module")
def pynfs_tree():
    """pynfs's built tree (its client library drives locks and delegations,
    which nfs-rs's API lacks)."""
    source = run_pynfs.find_pynfs()
    if source is None:
        pytest.fail("pynfs not found (../shared/pynfs or $BRAID_PYNFS)")
    return run_pynfs.build_pynfs(source, io.StringIO())


def fresh_dir(smb, file_bytes: bytes | None = None) -> str:
    """A new directory in the share, owned by the share's owner, optionally
    holding one file `f` with `file_bytes`; its name (the same over both
    protocols)."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    (smb.share_dir / name).mkdir()
    servers.give_to_share_owner(smb.share_dir, smb.share_dir / name)
    if file_bytes is not None:
        (smb.share_dir / name / "f").write_bytes(file_bytes)
        servers.give_to_share_owner(smb.share_dir, smb.share_dir / name / "f")
    return name


def smb_open(raw: RawClient, name: str, access: int, share: int) -> Open:
    """Open an existing file over SMB with `access` and `share` modes."""
    op = Open(raw.tree, name)
    op.create(ImpersonationLevel.Impersonation, access, NORMAL, share,
              CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
    return op
