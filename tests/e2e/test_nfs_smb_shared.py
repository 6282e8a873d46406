"""One share served over SMB and NFSv4.1 at once by one Braid, seen
through clients Braid did not write: smbprotocol (SMB 3) and the `nfs-rs`
Python package (NFSv4.1, AUTH_SYS uid 0, export /share).

What one protocol does, the other sees at its next call: bytes and sizes
written over either read back identical over the other, also after part of
the file is overwritten and the file extended or cut while the reader holds
it open (no stale attributes or data); a rename or a delete shows in the
other's next lookup and listing.

Not checked here: an NFS byte-range lock against an SMB one (nfs-rs's
Python API has no lock call); share modes across the protocols and an NFS
WRITE breaking an SMB lease, which Braid does not do yet (NFS OPEN, REMOVE,
RENAME and WRITE do not go through braid-fs's open table or the SMB
oplock/lease table; issue 42). nfs-rs cannot list the export's root (its
LOOKUP of the root path fails "bad name", against nfs-ganesha too), so each
test works in a directory of its own.

Braid only: Samba and nfs-ganesha each serve one of the two protocols.
"""

from __future__ import annotations

import os
import uuid

import nfs_rs
import pytest
import smbclient
from smbprotocol.exceptions import SMBOSError
from smbprotocol.header import NtStatus
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    Open,
)

import servers
from smbremote import NORMAL, SHARE_ALL, RawClient, Remote

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid",
                                reason="one share over SMB and NFS: Braid only")

READ = FilePipePrinterAccessMask.FILE_READ_DATA | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES


@pytest.fixture(scope="module")
def both(tmp_path_factory):
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
    _, server = both
    client = nfs_rs.Client.connect(
        f"nfs://{server.host}:{server.port}{server.export}?version=4.1",
        uid=0, gid=0, noresvport=True, connect_timeout=10, operation_timeout=30)
    yield client
    client.close()


@pytest.fixture
def d(both):
    """A fresh directory in the share: its name, the same over both protocols."""
    smb, _ = both
    name = f"t-{uuid.uuid4().hex[:12]}"
    (smb.share_dir / name).mkdir()
    servers.give_to_share_owner(smb.share_dir, smb.share_dir / name)
    return name


@pytest.fixture
def smb(both, d):
    r = Remote(both[0], d)
    yield r
    r.close()


@pytest.fixture
def raw(both):
    c = RawClient(both[0])
    yield c
    c.close()


def nfs_read(nfs, path: str) -> bytes:
    """The whole file, read by its size over NFS. Not f.read(): to read to
    the end nfs-rs 0.8.7 sends several READs at once, and now and then later
    sends a new request on one of their slots with the same sequence id
    (seen on the wire against Braid), which the server must refuse as a
    retry (NFS4ERR_SEQ_FALSE_RETRY or RETRY_UNCACHED_REP, RFC 8881
    2.10.6.1); the client's session is then stuck."""
    size = nfs.stat(path).size
    with nfs.open(path, "rb") as f:
        return f.read_at(0, size) if size else b""


def smb_open(raw: RawClient, name: str, access: int, share: int) -> Open:
    op = Open(raw.tree, name)
    op.create(ImpersonationLevel.Impersonation, access, NORMAL, share,
              CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
    return op


# ---- data and attributes --------------------------------------------------


def test_smb_write_reads_back_over_nfs_at_once(smb, nfs, d):
    data = bytearray(os.urandom(3 * 2**20 + 777))
    smb.write("f.bin", bytes(data))
    assert nfs.stat(f"{d}/f.bin").size == len(data)
    assert nfs_read(nfs, f"{d}/f.bin") == data

    with nfs.open(f"{d}/f.bin", "rb") as reader:
        assert reader.read_at(2**20, 100) == data[2**20:2**20 + 100]
        # Part of the file overwritten, and the file extended, over SMB
        # while NFS holds it open (sharing read: NFS's open for reading is
        # in the same share-mode table as SMB's opens).
        with smbclient.open_file(smb.path("f.bin"), mode="r+b", share_access="r",
                                 **smb.kw) as f:
            f.seek(2**20 + 10)
            f.write(b"SMB was here")
            f.seek(len(data) + 5)
            f.write(b"tail")
        data[2**20 + 10:2**20 + 22] = b"SMB was here"
        data += b"\0" * 5 + b"tail"
        assert nfs.stat(f"{d}/f.bin").size == len(data)
        assert reader.read_at(2**20, 100) == data[2**20:2**20 + 100]
        assert reader.read_at(len(data) - 9, 9) == data[-9:]
    assert nfs_read(nfs, f"{d}/f.bin") == data

    # Shrunk over SMB: NFS sees the new size and no bytes past it.
    with smbclient.open_file(smb.path("f.bin"), mode="r+b", **smb.kw) as f:
        f.truncate(1000)
    assert nfs.stat(f"{d}/f.bin").size == 1000
    assert nfs_read(nfs, f"{d}/f.bin") == data[:1000]


def test_nfs_write_reads_back_over_smb_at_once(smb, nfs, raw, d):
    data = bytearray(os.urandom(2 * 2**20 + 4321))
    with nfs.open(f"{d}/g.bin", "wb") as f:
        f.write(bytes(data))
    assert smbclient.stat(smb.path("g.bin"), **smb.kw).st_size == len(data)
    assert smb.read("g.bin") == data

    # A raw open: its reads go to the server as they are (smbclient's file
    # objects serve some from their buffer or stop at the size seen at open).
    reader = smb_open(raw, f"{d}\\g.bin", READ, SHARE_ALL)
    try:
        assert reader.read(2**20, 100) == data[2**20:2**20 + 100]
        with nfs.open(f"{d}/g.bin", "r+b") as f:
            f.write_at(b"NFS was here", 2**20 + 10)
            f.write_at(b"tail", len(data) + 5)
        data[2**20 + 10:2**20 + 22] = b"NFS was here"
        data += b"\0" * 5 + b"tail"
        assert smbclient.stat(smb.path("g.bin"), **smb.kw).st_size == len(data)
        assert reader.read(2**20, 100) == data[2**20:2**20 + 100]
        assert reader.read(len(data) - 9, 9) == data[-9:]
    finally:
        reader.close()
    assert smb.read("g.bin") == data

    nfs.truncate(f"{d}/g.bin", 1000)
    assert smbclient.stat(smb.path("g.bin"), **smb.kw).st_size == 1000
    assert smb.read("g.bin") == data[:1000]


# ---- names -------------------------------------------------------------------


def test_smb_rename_and_delete_are_seen_by_nfs(smb, nfs, d):
    smb.write("old.txt", b"renamed over SMB")
    assert nfs.stat(f"{d}/old.txt").size == 16
    assert nfs.listdir(d) == ["old.txt"]

    smbclient.rename(smb.path("old.txt"), smb.path("new.txt"), **smb.kw)
    with pytest.raises(FileNotFoundError):
        nfs.stat(f"{d}/old.txt")
    assert nfs.listdir(d) == ["new.txt"]
    assert nfs_read(nfs, f"{d}/new.txt") == b"renamed over SMB"

    smbclient.remove(smb.path("new.txt"), **smb.kw)
    with pytest.raises(FileNotFoundError):
        nfs.stat(f"{d}/new.txt")
    assert nfs.listdir(d) == []


def test_nfs_rename_and_delete_are_seen_by_smb(smb, nfs, d):
    with nfs.open(f"{d}/old.txt", "wb") as f:
        f.write(b"renamed over NFS")
    assert smbclient.listdir(smb.path(), **smb.kw) == ["old.txt"]
    assert smbclient.stat(smb.path("old.txt"), **smb.kw).st_size == 16

    nfs.rename(f"{d}/old.txt", f"{d}/new.txt")
    with pytest.raises(SMBOSError) as e:
        smbclient.stat(smb.path("old.txt"), **smb.kw)
    assert e.value.ntstatus == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
    assert smbclient.listdir(smb.path(), **smb.kw) == ["new.txt"]
    assert smb.read("new.txt") == b"renamed over NFS"

    nfs.remove(f"{d}/new.txt")
    with pytest.raises(SMBOSError) as e:
        smbclient.stat(smb.path("new.txt"), **smb.kw)
    assert e.value.ntstatus == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
    assert smbclient.listdir(smb.path(), **smb.kw) == []
