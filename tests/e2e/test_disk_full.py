"""A full disk answers STATUS_DISK_FULL and leaves existing data intact.

The share is a 4 MiB tmpfs mounted for the test (needs root; skipped
otherwise). Braid only: it is the server's own behaviour under test, and the
share must live on the small file system.
"""

from __future__ import annotations

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


@pytest.fixture(scope="module")
def small_share(tmp_path_factory):
    base = tmp_path_factory.mktemp("full-")
    mnt = base / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], check=True)
    password = "Pw-" + secrets.token_hex(8)
    port = servers.free_port()
    argv = [str(servers.BRAID_BIN), "serve", "--listen", f"127.0.0.1:{port}",
            "--share", f"small={mnt}", "--user", f"alice:{password}"]
    log = base / "braid.log"
    proc = servers._spawn(argv, log, base)
    try:
        servers.wait_until_accepting("127.0.0.1", port, proc, log)
        yield port, password, mnt
    finally:
        servers.stop_pid(proc.pid)
        subprocess.run(["umount", str(mnt)], check=False)


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
