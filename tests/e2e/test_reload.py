"""Reloading the config while clients are connected (SIGHUP, as `systemctl
reload` sends it; Samba's `smbcontrol smbd reload-config`).

- A share left as it was keeps its clients: an open file stays open and
  reads back what was written before and after.
- A new share can be connected to at once.
- A removed share, or one whose rules changed (here: `encrypt = true`), is
  ended for the clients on it, as Windows ends a deleted share: their next
  request on the old tree connect is NETWORK_NAME_DELETED. A removed share
  is then BAD_NETWORK_NAME; a share that now requires encryption asks
  an SMB3 client to encrypt and refuses an SMB 2.1 one.
- Server settings apply to connections made after the reload:
  `multichannel = false` is seen in a new NEGOTIATE, not in the old one.
- A config with a mistake changes nothing; the log names the key.

Braid only: Braid's config format and its SIGHUP handling.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from smbprotocol.connection import Capabilities, Connection
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import CreateDisposition, FilePipePrinterAccessMask
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

import servers
from smbremote import FILE_ALL_ACCESS, RawClient

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's config format and SIGHUP reload")

NETWORK_NAME_DELETED = 0xC00000C9
BAD_NETWORK_NAME = 0xC00000CC


class Reloadable:
    """A Braid started from a config file that the test rewrites."""

    def __init__(self, base: Path):
        self.base = base
        self.user = "alice"
        self.password = "Pw-" + secrets.token_hex(8)
        self.dirs = {}
        for name in ("kept", "gone", "tightened", "added"):
            self.dirs[name] = base / name
            self.dirs[name].mkdir()
        self.proc, self.port = servers.start_braid_with_config(
            base, self.shares("kept", "gone", "tightened"), {self.user: self.password})
        self.log = base / "braid.log"
        self.config = base / "braid.toml"
        self.head = self.config.read_text().split("[[share]]", 1)[0]
        self.host = "127.0.0.1"

    def shares(self, *names: str, encrypt: tuple[str, ...] = ()) -> str:
        return "".join(
            f'[[share]]\nname = "{n}"\npath = "{self.dirs[n]}"\n'
            + ("encrypt = true\n" if n in encrypt else "")
            for n in names)

    def reload(self, config: str, settings: str = "") -> str:
        """Rewrite the config, send SIGHUP, and return what the server
        logged about it (its "config reloaded" line or its error)."""
        before = self.log.read_text(errors="replace")
        self.config.write_text(self.head + settings + config)
        os.kill(self.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            new = self.log.read_text(errors="replace")[len(before):]
            if "config reloaded" in new or "reload:" in new:
                return new
            time.sleep(0.05)
        raise AssertionError("no reload in the log:\n" + self.log.read_text()[-2000:])

    def target(self, share: str):
        return type("Target", (), {"host": self.host, "port": self.port, "user": self.user,
                                   "password": self.password, "share": share})

    def smbclient(self, share: str, *args: str, protocol: str = "SMB3"):
        return subprocess.run(
            ["smbclient", f"//127.0.0.1/{share}", "-p", str(self.port), "-m", protocol,
             "-U", f"{self.user}%{self.password}", *args],
            capture_output=True, text=True, timeout=60)


@pytest.fixture
def server(tmp_path):
    s = Reloadable(tmp_path)
    yield s
    servers.stop_pid(s.proc.pid)


def status_of(call) -> int:
    with pytest.raises(SMBResponseException) as e:
        call()
    return e.value.status


def tree_connect(conn: Connection, server: Reloadable, share: str, encrypt: bool):
    session = Session(conn, server.user, server.password, require_encryption=encrypt)
    session.connect()
    tree = TreeConnect(session, rf"\\127.0.0.1\{share}")
    tree.connect()
    return tree


def test_reload_changes_shares_without_dropping_the_others(server):
    kept = RawClient(server.target("kept"))
    on_gone = RawClient(server.target("gone"))
    on_tightened = RawClient(server.target("tightened"))
    try:
        assert kept.conn.server_capabilities.has_flag(Capabilities.SMB2_GLOBAL_CAP_MULTI_CHANNEL)
        assert not on_tightened.tree.encrypt_data
        name = f"open-{uuid.uuid4().hex}.bin"
        f = kept.open(name, FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE)
        first = os.urandom(200_000)
        f.write(first, 0)

        said = server.reload(server.shares("kept", "tightened", "added",
                                           encrypt=("tightened",)),
                             settings="multichannel = false\n")
        assert "config reloaded" in said, said

        # The untouched share: the same open goes on.
        second = os.urandom(100_000)
        f.write(second, len(first))
        assert f.read(0, len(first) + len(second)) == first + second
        f.close()
        assert (server.dirs["kept"] / name).read_bytes() == first + second

        # The removed share and the changed one: their tree connects ended.
        for client in (on_gone, on_tightened):
            assert status_of(lambda c=client: c.open_dir(
                "", FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES)) == NETWORK_NAME_DELETED

        conn = Connection(uuid.uuid4(), "127.0.0.1", port=server.port, require_signing=True)
        conn.connect()
        try:
            # Settings apply to connections made after the reload.
            assert not conn.server_capabilities.has_flag(
                Capabilities.SMB2_GLOBAL_CAP_MULTI_CHANNEL)
            assert status_of(lambda: tree_connect(conn, server, "gone", False)) \
                == BAD_NETWORK_NAME
            # The share now asks an SMB3 client to encrypt (which it then
            # does, MS-SMB2 3.3.5.7)...
            assert tree_connect(conn, server, "tightened", False).encrypt_data
        finally:
            conn.disconnect(close=True)
        # ...and refuses a client that cannot (SMB 2.1).
        r = server.smbclient("tightened", "-c", "ls", protocol="SMB2")
        assert "NT_STATUS_ACCESS_DENIED" in r.stdout + r.stderr, r.stdout + r.stderr
    finally:
        for c in (kept, on_gone, on_tightened):
            c.close()

    # The new share, through another client.
    src = server.base / "upload.bin"
    src.write_bytes(os.urandom(300_000))
    r = server.smbclient("added", "-c", f"put {src} up.bin")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (server.dirs["added"] / "up.bin").read_bytes() == src.read_bytes()
    listing = subprocess.run(
        ["smbclient", "-L", "//127.0.0.1", "-p", str(server.port), "-m", "SMB3",
         "-U", f"{server.user}%{server.password}"],
        capture_output=True, text=True, timeout=60)
    assert "added" in listing.stdout and "gone" not in listing.stdout, listing.stdout


def test_a_config_with_a_mistake_changes_nothing(server):
    client = RawClient(server.target("kept"))
    try:
        missing = server.base / "no-such-dir"
        said = server.reload(server.shares("kept") +
                             f'[[share]]\nname = "broken"\npath = "{missing}"\n')
        assert "reload:" in said and "config reloaded" not in said, said
        assert "share 'broken'" in said and str(missing) in said, said
        assert "the running config stays in force" in said, said
        said = server.reload(server.shares("kept", "gone", "tightened"),
                             settings="max_channels = 0\n")
        assert "max_channels = 0" in said and "config reloaded" not in said, said

        # The shares as before, the old ones and their clients untouched.
        client.open_dir("", FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES).close()
        for share in ("gone", "tightened"):
            r = server.smbclient(share, "-c", "ls")
            assert r.returncode == 0, r.stdout + r.stderr
        assert server.proc.poll() is None
    finally:
        client.close()


def test_keys_bound_at_start_say_so(server):
    other = servers.free_port()
    server.head = server.head.replace(f"127.0.0.1:{server.port}", f"127.0.0.1:{other}")
    said = server.reload(server.shares("kept", "gone", "tightened"))
    assert "listen changed in the config: it takes effect when braid is restarted" in said, said
    r = server.smbclient("kept", "-c", "ls")
    assert r.returncode == 0, r.stdout + r.stderr
