"""Each user's own share, as Samba's `[homes]` serves it: a share named
`homes` whose path holds `%U`. Seen from smbclient:

- alice connects to \\\\server\\alice (or \\\\server\\homes) and gets her own
  directory, made on first use; bob gets his, and not alice's;
- `smbclient -L` shows a user their own home share and no one else's;
- guests get none; a user name that is not a plain directory name gets
  none.

Braid only: the config format is Braid's.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import types

import pytest

import servers

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's config format (homes)")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("homes-")
    (base / "homes").mkdir()
    (base / "common").mkdir()
    passwords = {u: "Pw-" + secrets.token_hex(8) for u in ("alice", "Bob", "..")}
    proc, port = servers.start_braid_with_config(
        base,
        'allow_guest = true\n'
        f'[[share]]\nname = "common"\npath = "{base / "common"}"\nguest_ok = true\n'
        f'[[share]]\nname = "homes"\npath = "{base / "homes" / "%U"}"\n',
        passwords)
    yield types.SimpleNamespace(port=port, passwords=passwords, homes=base / "homes")
    servers.stop_pid(proc.pid)


def smbclient(srv, share: str, user: str | None, commands: str, cwd=None) -> str:
    who = ["-U", f"{user}%{srv.passwords[user]}"] if user else ["-N"]
    r = subprocess.run(["smbclient", f"//127.0.0.1/{share}", "-p", str(srv.port), *who,
                        "-m", "SMB3", "-c", commands],
                       capture_output=True, text=True, timeout=60, cwd=cwd)
    return r.stdout + r.stderr


def test_each_user_gets_their_own_directory(server, tmp_path):
    (tmp_path / "a.txt").write_bytes(b"alice's")
    (tmp_path / "b.txt").write_bytes(b"bob's")
    out = smbclient(server, "alice", "alice", "put a.txt", cwd=tmp_path)
    assert (server.homes / "alice" / "a.txt").read_bytes() == b"alice's", out
    assert (server.homes / "alice").stat().st_mode & 0o777 == 0o700
    # By the share name "homes" too; the directory is the lower-cased name.
    out = smbclient(server, "homes", "Bob", "put b.txt", cwd=tmp_path)
    assert (server.homes / "bob" / "b.txt").read_bytes() == b"bob's", out
    out = smbclient(server, "bob", "Bob", "ls")
    assert "b.txt" in out and "a.txt" not in out, out
    # Not someone else's.
    out = smbclient(server, "alice", "Bob", "ls")
    assert "NT_STATUS_BAD_NETWORK_NAME" in out, out


def test_the_share_list_shows_a_user_their_own_home(server):
    r = subprocess.run(["smbclient", "-L", "//127.0.0.1", "-p", str(server.port),
                        "-U", f"alice%{server.passwords['alice']}", "-m", "SMB3"],
                       capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()
    assert any(line.split()[:2] == ["alice", "Disk"] for line in lines), r.stdout
    assert any(line.split()[:2] == ["common", "Disk"] for line in lines), r.stdout
    assert not any(line.split()[:1] in (["Bob"], ["bob"], ["homes"]) for line in lines), r.stdout


def test_guests_and_odd_names_get_no_home(server):
    assert "NT_STATUS_BAD_NETWORK_NAME" in smbclient(server, "homes", None, "ls")
    assert "NT_STATUS_BAD_NETWORK_NAME" in smbclient(server, "homes", "..", "ls")
    # Nothing was made for them, in the homes directory or above it.
    assert {p.name for p in server.homes.iterdir()} <= {"alice", "bob"}
    assert sorted(p.name for p in server.homes.parent.iterdir()) == [
        "braid.log", "braid.toml", "common", "homes"]
