"""CLONE (RFC 7862 15.13): an NFSv4.2 client makes a range of one file
share another's blocks, with no data read or written. The share is a
btrfs file system made for the test (a loop image; needs root and
btrfs-progs, which scripts/test.sh installs); the client is pynfs's
client library (nfs_clone.py) in a minor version 2 session. The clone's
bytes must equal the source's and the file system must report the
extents shared (filefrag's FIEMAP "shared" flag), so a copy would not
pass. On a file system that shares no extents CLONE is NFS4ERR_NOTSUPP.
Braid only (nfs-ganesha's 4.2 is not run here).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import servers
from smb_nfs import both, pynfs_tree  # noqa: F401

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid", reason="NFSv4.2 CLONE: Braid only")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance"))
import run_pynfs  # noqa: E402

KIB = 1024
NFS4_OK, NFS4ERR_INVAL, NFS4ERR_NOTSUPP = 0, 22, 10004


@pytest.fixture(scope="module")
def btrfs_nfs(tmp_path_factory):
    """Braid serving a fresh btrfs file system over NFS (and SMB)."""
    assert os.geteuid() == 0, "mounting a btrfs image needs root"
    assert shutil.which("mkfs.btrfs"), "mkfs.btrfs (btrfs-progs) is needed"
    base = tmp_path_factory.mktemp("btrfs-")
    image, mnt, workdir = base / "fs.img", base / "mnt", base / "server"
    mnt.mkdir()
    workdir.mkdir()
    with open(image, "wb") as f:
        f.truncate(256 * 1024 * KIB)
    subprocess.run(["mkfs.btrfs", "-q", "-f", str(image)], check=True, capture_output=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)
    try:
        smb, nfs = servers.start_braid_smb_nfs(mnt, workdir)
        try:
            yield nfs
        finally:
            smb.stop()
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def clone(nfs, pynfs_tree, src: str, dst: str, src_off: int, dst_off: int, count: int) -> int:
    components = [p for p in nfs.export.split("/") if p]
    out = subprocess.run(
        [run_pynfs.PYTHON, str(HERE / "nfs_clone.py"), nfs.host, str(nfs.port), *components,
         "--", src, dst, str(src_off), str(dst_off), str(count)],
        cwd=pynfs_tree / "nfs4.1", capture_output=True, text=True, timeout=60)
    for line in out.stdout.splitlines():
        if line.startswith("STATUS "):
            return int(line.split()[1])
    pytest.fail(f"no CLONE status: {out.stdout} {out.stderr[-2000:]}")


def files(share_dir: Path, data: bytes) -> tuple[str, str]:
    src, dst = f"src-{uuid.uuid4().hex[:8]}", f"dst-{uuid.uuid4().hex[:8]}"
    (share_dir / src).write_bytes(data)
    (share_dir / dst).write_bytes(b"")
    os.sync()
    return src, dst


def shared_extents(path: Path) -> bool:
    out = subprocess.run(["filefrag", "-v", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return "shared" in out.stdout


def test_a_whole_file_clone_shares_its_blocks(btrfs_nfs, pynfs_tree):
    data = os.urandom(256 * KIB)
    src, dst = files(btrfs_nfs.export_dir, data)
    assert clone(btrfs_nfs, pynfs_tree, src, dst, 0, 0, 0) == NFS4_OK
    assert (btrfs_nfs.export_dir / dst).read_bytes() == data
    os.sync()
    assert shared_extents(btrfs_nfs.export_dir / dst)


def test_a_range_lands_at_its_offset(btrfs_nfs, pynfs_tree):
    data = os.urandom(256 * KIB)
    src, dst = files(btrfs_nfs.export_dir, data)
    assert clone(btrfs_nfs, pynfs_tree, src, dst, 64 * KIB, 128 * KIB, 64 * KIB) == NFS4_OK
    got = (btrfs_nfs.export_dir / dst).read_bytes()
    assert len(got) == 192 * KIB
    assert got[:128 * KIB] == bytes(128 * KIB) and got[128 * KIB:] == data[64 * KIB:128 * KIB]


def test_a_range_not_on_block_boundaries_is_inval(btrfs_nfs, pynfs_tree):
    src, dst = files(btrfs_nfs.export_dir, os.urandom(64 * KIB))
    assert clone(btrfs_nfs, pynfs_tree, src, dst, 1, 0, 4 * KIB) == NFS4ERR_INVAL
    assert clone(btrfs_nfs, pynfs_tree, src, dst, 0, 0, 128 * KIB) == NFS4ERR_INVAL
    assert (btrfs_nfs.export_dir / dst).read_bytes() == b""


def test_a_file_system_without_shared_extents_says_notsupp(both, pynfs_tree):
    _, nfs = both
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(nfs.export_dir)], capture_output=True,
                        text=True).stdout.strip()
    assert fs in ("ext2/ext3", "tmpfs"), f"{nfs.export_dir} is on {fs}, which may share extents"
    src, dst = files(nfs.export_dir, os.urandom(64 * KIB))
    assert clone(nfs, pynfs_tree, src, dst, 0, 0, 0) == NFS4ERR_NOTSUPP
    assert (nfs.export_dir / dst).read_bytes() == b""
