"""A full disk answers STATUS_DISK_FULL and leaves existing data intact.

The share is a 4 MiB tmpfs mounted for the test (needs root; skipped
otherwise). Braid only: it is the server's own behaviour under test, and the
share must live on the small file system.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess

import pytest

import servers

STATUS_DISK_FULL = 0xC000007F

pytestmark = [
    pytest.mark.skipif(os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
                       reason="starts Braid on its own small file system"),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
]


@contextlib.contextmanager
def braid_on_mount(base, mnt, share: str):
    """Braid serving the mounted `mnt` as `share` to alice; yields (port,
    password) and unmounts `mnt` afterwards."""
    password = "Pw-" + secrets.token_hex(8)
    port = servers.free_port()
    argv = [str(servers.BRAID_BIN), "serve", "--listen", f"127.0.0.1:{port}",
            "--share", f"{share}={mnt}", "--user", f"alice:{password}"]
    log = base / "braid.log"
    proc = servers._spawn(argv, log, base)
    try:
        servers.wait_until_accepting("127.0.0.1", port, proc, log)
        yield port, password
    finally:
        servers.stop_pid(proc.pid)
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.fixture(scope="module")
def small_share(tmp_path_factory):
    base = tmp_path_factory.mktemp("full-")
    mnt = base / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], check=True)
    with braid_on_mount(base, mnt, "small") as (port, password):
        yield port, password, mnt


def test_disk_full_status_and_existing_data_intact(small_share):
    import smbclient as pysmb
    from smbprotocol.exceptions import SMBOSError, SMBResponseException

    port, password, mnt = small_share
    cache = {}
    keep = os.urandom(1024 * 1024)
    try:
        pysmb.register_session("127.0.0.1", username="alice", password=password,
                               port=port, connection_cache=cache)
        base = r"\\127.0.0.1\small"
        with pysmb.open_file(base + r"\keep.bin", mode="wb", port=port,
                             connection_cache=cache) as f:
            f.write(keep)
        with pytest.raises((SMBOSError, SMBResponseException)) as err:
            with pysmb.open_file(base + r"\big.bin", mode="wb", port=port,
                                 connection_cache=cache) as f:
                for _ in range(8):
                    f.write(os.urandom(1024 * 1024))
        status = getattr(err.value, "ntstatus", None) or getattr(err.value, "status", None)
        assert status == STATUS_DISK_FULL, err.value
        with pysmb.open_file(base + r"\keep.bin", mode="rb", port=port,
                             connection_cache=cache) as f:
            assert f.read() == keep
    finally:
        pysmb.reset_connection_cache(connection_cache=cache)
    assert (mnt / "keep.bin").read_bytes() == keep


# An allocation the file system cannot hold (MS-FSA 2.1.5.14.1) is refused
# before any block is taken. ext4 keeps what fallocate() allocated before it
# ran out of space, so without the check one AllocationSize of a gigabyte
# fills a 64 MiB file system and leaves it full (tmpfs gives its pages back,
# hence an ext4 image here).

FILE_ALLOCATION_INFORMATION = 19
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def ext4_share(tmp_path_factory):
    from conftest import SmbTarget

    base = tmp_path_factory.mktemp("ext4-")
    image, mnt = base / "fs.img", base / "mnt"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(64 * MIB)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)
    with braid_on_mount(base, mnt, "ext4") as (port, password):
        yield SmbTarget("127.0.0.1", port, "ext4", "alice", password, mnt)


def free_bytes(path) -> int:
    s = os.statvfs(path)
    return s.f_bavail * s.f_frsize


def test_allocation_beyond_free_space_takes_nothing(ext4_share):
    from smbprotocol.create_contexts import SMB2CreateAllocationSize, CreateContextName
    from smbprotocol.create_contexts import SMB2CreateContextRequest
    from smbprotocol.exceptions import SMBResponseException
    from smbprotocol.open import CreateDisposition, CreateOptions, FilePipePrinterAccessMask, Open
    from smbremote import NORMAL, SHARE_ALL, RawClient
    from test_quota import set_info

    c = RawClient(ext4_share)
    try:
        rw = FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE
        before = free_bytes(ext4_share.share_dir)

        # A CREATE whose AllocationSize (MS-SMB2 2.2.13.2.6) is 1 GiB.
        alloc = SMB2CreateAllocationSize()
        alloc["allocation_size"] = 1024 * MIB
        ctx = SMB2CreateContextRequest()
        ctx["buffer_name"] = CreateContextName.SMB2_CREATE_ALLOCATION_SIZE
        ctx["buffer_data"] = alloc
        op = Open(c.tree, "huge.bin")
        with pytest.raises(SMBResponseException) as err:
            op.create(0, rw, NORMAL, SHARE_ALL, CreateDisposition.FILE_CREATE,
                      CreateOptions.FILE_NON_DIRECTORY_FILE, create_contexts=[ctx])
        assert err.value.status == STATUS_DISK_FULL, err.value
        assert not (ext4_share.share_dir / "huge.bin").exists()
        assert free_bytes(ext4_share.share_dir) >= before - MIB

        # FileAllocationInformation of 1 GiB on an existing file.
        op = c.open("small.bin", rw, CreateDisposition.FILE_CREATE)
        with pytest.raises(SMBResponseException) as err:
            set_info(c, op, 1, FILE_ALLOCATION_INFORMATION, (1024 * MIB).to_bytes(8, "little"))
        assert err.value.status == STATUS_DISK_FULL, err.value
        assert free_bytes(ext4_share.share_dir) >= before - MIB

        # What fits is still reserved: 8 MiB of blocks, the size unchanged.
        set_info(c, op, 1, FILE_ALLOCATION_INFORMATION, (8 * MIB).to_bytes(8, "little"))
        st = os.stat(ext4_share.share_dir / "small.bin")
        assert st.st_size == 0
        assert st.st_blocks * 512 >= 8 * MIB
        op.close()
    finally:
        c.close()
