"""Previous versions: a share's snapshots (`snapshot_dir`), as Windows'
"Previous Versions" tab and Samba's vfs_shadow_copy2 serve them, seen from
real clients:

- smbclient's `allinfo` lists the snapshot (FSCTL_SRV_ENUMERATE_SNAPSHOTS)
  and `get @GMT-...\\file` reads the file as it was (a timewarp token);
- nothing can be written in a snapshot (MEDIA_WRITE_PROTECTED), and the
  snapshot directory is neither listed nor opened through the live share;
- smbprotocol's timewarp token: a time with no snapshot is not found;
- a bad `snapshot_format` is one config line.

Braid only: the config format is Braid's (smbtorture's smb2.twrp and
smb2.ioctl.shadow_copy run against both servers).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import types

import pytest
from smbprotocol.create_contexts import (CreateContextName, SMB2CreateContextRequest,
                                         SMB2CreateTimewarpToken)
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import (CreateDisposition, CreateOptions, FilePipePrinterAccessMask,
                              ImpersonationLevel, Open, ShareAccess)

import servers
from smbremote import user_tree

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's config format (snapshot_dir)")

SNAPSHOT = "@GMT-2026.11.24-08.00.00"
# The same time as a FILETIME: 100 ns units since 1601.
SNAPSHOT_FILETIME = (1795507200 + 11644473600) * 10_000_000
OLD, NEW = b"report, version 1\n", b"report, version 2 (today)\n"
STATUS_MEDIA_WRITE_PROTECTED = 0xC00000A2
STATUS_OBJECT_NAME_NOT_FOUND = 0xC0000034


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("snapshots-")
    share = base / "data"
    share.mkdir()
    (share / "report.txt").write_bytes(NEW)
    # A snapshot as a backup tool makes one: the tree as it was.
    snap = share / ".snapshots" / SNAPSHOT
    (snap / "old-dir").mkdir(parents=True)
    (snap / "report.txt").write_bytes(OLD)
    (snap / "old-dir" / "gone.txt").write_bytes(b"deleted since\n")
    passwords = {"alice": "Pw-" + secrets.token_hex(8)}
    proc, port = servers.start_braid_with_config(
        base, f'[[share]]\nname = "data"\npath = "{share}"\nsnapshot_dir = ".snapshots"\n',
        passwords)
    yield types.SimpleNamespace(port=port, passwords=passwords, share=share, snap=snap)
    servers.stop_pid(proc.pid)


def smbclient(srv, command: str, cwd) -> str:
    r = subprocess.run(
        ["smbclient", "//127.0.0.1/data", "-p", str(srv.port),
         "-U", f"alice%{srv.passwords['alice']}", "-m", "SMB3", "-c", command],
        capture_output=True, text=True, timeout=60, cwd=cwd)
    return r.stdout + r.stderr


def test_smbclient_lists_and_reads_the_previous_version(server, tmp_path):
    out = smbclient(server, "allinfo report.txt", tmp_path)
    assert SNAPSHOT in out, out
    out = smbclient(server, f"get {SNAPSHOT}\\report.txt then.txt; get report.txt now.txt; "
                            f"get {SNAPSHOT}\\old-dir\\gone.txt gone.txt", tmp_path)
    assert (tmp_path / "then.txt").read_bytes() == OLD, out
    assert (tmp_path / "now.txt").read_bytes() == NEW, out
    assert (tmp_path / "gone.txt").read_bytes() == b"deleted since\n", out


def test_nothing_is_written_in_a_snapshot(server, tmp_path):
    (tmp_path / "new.txt").write_bytes(b"attempt")
    out = smbclient(server, f"put new.txt {SNAPSHOT}\\report.txt; "
                            f"put new.txt {SNAPSHOT}\\fresh.txt; "
                            f"del {SNAPSHOT}\\old-dir\\gone.txt; "
                            f"mkdir {SNAPSHOT}\\newdir", tmp_path)
    assert out.count("NT_STATUS_MEDIA_WRITE_PROTECTED") >= 3, out
    assert (server.snap / "report.txt").read_bytes() == OLD
    assert (server.snap / "old-dir" / "gone.txt").exists()
    assert sorted(p.name for p in server.snap.iterdir()) == ["old-dir", "report.txt"]


def test_the_snapshot_directory_is_not_in_the_live_share(server, tmp_path):
    out = smbclient(server, "ls", tmp_path)
    assert "report.txt" in out and ".snapshots" not in out, out
    out = smbclient(server, f"ls .snapshots\\{SNAPSHOT}\\*; "
                            f"put report.txt .snapshots\\{SNAPSHOT}\\report.txt", tmp_path)
    assert "NT_STATUS_OBJECT_NAME_NOT_FOUND" in out or "NT_STATUS_OBJECT_PATH_NOT_FOUND" in out, out
    assert (server.snap / "report.txt").read_bytes() == OLD


def timewarp(filetime: int) -> SMB2CreateContextRequest:
    token = SMB2CreateTimewarpToken()
    token["timestamp"] = filetime
    ctx = SMB2CreateContextRequest()
    ctx["buffer_name"] = CreateContextName.SMB2_CREATE_TIMEWARP_TOKEN
    ctx["buffer_data"] = token
    return ctx


def test_a_timewarp_open_reads_then_and_writes_nothing(server):
    with user_tree(server.port, "alice", server.passwords["alice"], "data") as tree:

        def open_at(filetime: int, access: int) -> Open:
            f = Open(tree, "report.txt")
            f.create(ImpersonationLevel.Impersonation, access, 0, ShareAccess.FILE_SHARE_READ,
                     CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE,
                     create_contexts=[timewarp(filetime)])
            return f

        rw = FilePipePrinterAccessMask.FILE_READ_DATA | FilePipePrinterAccessMask.FILE_WRITE_DATA
        # A fraction of a second later is the same snapshot.
        f = open_at(SNAPSHOT_FILETIME + 1234, rw)
        assert f.read(0, 100) == OLD
        with pytest.raises(SMBResponseException) as e:
            f.write(b"changed", 0)
        assert e.value.status == STATUS_MEDIA_WRITE_PROTECTED
        f.close()
        assert (server.snap / "report.txt").read_bytes() == OLD

        with pytest.raises(SMBResponseException) as e:
            open_at(SNAPSHOT_FILETIME + 3600 * 10_000_000, FilePipePrinterAccessMask.FILE_READ_DATA)
        assert e.value.status == STATUS_OBJECT_NAME_NOT_FOUND


def test_a_bad_snapshot_format_is_one_clear_line(server, tmp_path):
    line = servers.config_error(tmp_path, f'[[share]]\nname = "x"\npath = "{server.share}"\n'
                                          'snapshot_dir = ".snapshots"\n'
                                          'snapshot_format = "daily-%F"\n')
    assert "snapshot_format" in line and "%F" in line, line
