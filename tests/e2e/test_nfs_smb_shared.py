"""One share served over SMB and NFSv4.1 at once by one Braid, seen
through clients Braid did not write: smbprotocol (SMB 3) and the `nfs-rs`
Python package (NFSv4.1, AUTH_SYS uid 0, export /share).

What one protocol does, the other sees at its next call: bytes and sizes
written over either read back identical over the other, also after part of
the file is overwritten and the file extended or cut while the reader holds
it open (no stale attributes or data); a rename or a delete shows in the
other's next lookup and listing.

Share modes, lease breaks and delegation recalls across the protocols are
checked in test_nfs_smb_share_modes.py, test_nfs_smb_namespace.py and
test_nfs_smb_delegations.py, byte-range locks in test_nfs_smb_locks.py.
nfs-rs cannot list the export's root (its LOOKUP of the root path fails
"bad name", against nfs-ganesha too), so each test works in a directory of
its own.

Braid only: Samba and nfs-ganesha each serve one of the two protocols.
"""

from __future__ import annotations

import os
import subprocess

import pytest
import smbclient
from smbprotocol.exceptions import SMBOSError
from smbprotocol.header import NtStatus
from smbprotocol.open import FilePipePrinterAccessMask

from smb_nfs import both, fresh_dir, nfs, raw, smb_open  # noqa: F401
from smbremote import SHARE_ALL, Remote

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid",
                                reason="one share over SMB and NFS: Braid only")

READ = FilePipePrinterAccessMask.FILE_READ_DATA | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES


@pytest.fixture
def d(both):
    """A fresh directory in the share: its name, the same over both protocols."""
    return fresh_dir(both[0])


@pytest.fixture
def smb(both, d):
    r = Remote(both[0], d)
    yield r
    r.close()


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


# ---- large aligned NFS WRITEs (O_DIRECT) ---------------------------------------


def cached_bytes(path) -> int:
    """Bytes of the file in the host's page cache (util-linux fincore)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                         check=True, capture_output=True, text=True).stdout
    return int(out.split()[0])


def test_large_aligned_nfs_writes_skip_the_page_cache_and_read_back(both, smb, nfs, raw, d):
    """1 MiB WRITEs at 1 MiB offsets go to the disk with O_DIRECT (the
    reader places their data on a page; ops/write.rs): none of the file is
    in the page cache after them (but what the client sends unaligned). Both protocols read back what was
    written, also after small (buffered) overwrites and a direct rewrite
    of a range the reads had cached."""
    mib = 2**20
    data = bytearray(os.urandom(4 * mib))
    host = both[0].share_dir / d / "direct.bin"
    with nfs.open(f"{d}/direct.bin", "wb") as f:
        for i in range(4):
            f.write_at(bytes(data[i * mib:(i + 1) * mib]), i * mib)
    # nfs-rs leaves a page or so of each write to the buffered path
    # (16 KiB of the 4 MiB here); buffered writes would leave all of it.
    assert cached_bytes(host) < mib // 4
    assert smb.read("direct.bin") == data
    assert nfs_read(nfs, f"{d}/direct.bin") == data
    assert cached_bytes(host) == len(data)

    # A small overwrite goes through the page cache; a 1 MiB rewrite of the
    # cached range after it must replace it there too.
    # (A raw SMB open sharing all: its reads go to the server as they are.)
    reader = smb_open(raw, f"{d}\\direct.bin", READ, SHARE_ALL)
    try:
        with nfs.open(f"{d}/direct.bin", "r+b") as f:
            f.write_at(b"small", mib + 3)
            data[mib + 3:mib + 8] = b"small"
            assert reader.read(mib, 20) == data[mib:mib + 20]
            fresh = os.urandom(mib)
            f.write_at(fresh, 2 * mib)
            data[2 * mib:3 * mib] = fresh
            assert reader.read(2 * mib - 10, 20) == data[2 * mib - 10:2 * mib + 10]
    finally:
        reader.close()
    assert smb.read("direct.bin") == data
    assert nfs_read(nfs, f"{d}/direct.bin") == data
