"""The users file, changed while Braid runs: `braid user add` lets a new
user log on at once, `braid user remove` stops a user's new logons (a
session already set up goes on), with no restart, as `smbpasswd -a` and
`-x` do for Samba. A users file that no longer loads leaves the last good
users in force.

Braid only: the users file and `braid user` are Braid's.
"""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest
from smbprotocol.connection import Connection
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.header import NtStatus
from smbprotocol.open import (CreateDisposition, CreateOptions, FilePipePrinterAccessMask,
                              ImpersonationLevel, Open, ShareAccess)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

import servers

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's users file and `braid user`")


def braid_user(*args: str, password: str | None = None) -> None:
    subprocess.run([str(servers.BRAID_BIN), "user", *args], input=password, text=True,
                   capture_output=True, timeout=30, check=True)


@pytest.fixture
def server(tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    users = tmp_path / "users"
    braid_user("add", "alice", "--users-file", str(users), password="alice-Pw-1\n")
    port = servers.free_port()
    config = tmp_path / "braid.toml"
    config.write_text(f'listen = ["127.0.0.1:{port}"]\nadmin_listen = "off"\n'
                      f'users_file = "{users}"\n'
                      f'[[share]]\nname = "share"\npath = "{share}"\n')
    log = tmp_path / "braid.log"
    proc = servers._spawn([str(servers.BRAID_BIN), "serve", "--config", str(config)],
                          log, tmp_path)
    servers.wait_until_accepting("127.0.0.1", port, proc, log)
    yield port, users, log
    servers.stop_pid(proc.pid)


class Client:
    def __init__(self, port: int, user: str, password: str):
        self.conn = Connection(uuid.uuid4(), "127.0.0.1", port)
        self.conn.connect(timeout=5)
        try:
            self.session = Session(self.conn, user, password, require_encryption=False)
            self.session.connect()
            self.tree = TreeConnect(self.session, r"\\127.0.0.1\share")
            self.tree.connect()
        except Exception:
            self.conn.disconnect()
            raise

    def write_read(self, name: str, data: bytes) -> bytes:
        f = Open(self.tree, name)
        f.create(ImpersonationLevel.Impersonation,
                 FilePipePrinterAccessMask.FILE_READ_DATA
                 | FilePipePrinterAccessMask.FILE_WRITE_DATA, 0, ShareAccess.FILE_SHARE_READ,
                 CreateDisposition.FILE_OVERWRITE_IF, CreateOptions.FILE_NON_DIRECTORY_FILE)
        f.write(data, 0)
        back = f.read(0, len(data))
        f.close()
        return back

    def close(self):
        self.conn.disconnect()


def logon_status(port: int, user: str, password: str) -> int:
    try:
        Client(port, user, password).close()
        return 0
    except SMBResponseException as e:
        return e.status


def test_users_added_and_removed_while_running(server):
    port, users, _ = server
    assert logon_status(port, "bob", "bob-Pw-2") == NtStatus.STATUS_LOGON_FAILURE
    alice = Client(port, "alice", "alice-Pw-1")
    try:
        braid_user("add", "bob", "--users-file", str(users), password="bob-Pw-2\n")
        bob = Client(port, "bob", "bob-Pw-2")
        assert bob.write_read("bob.txt", b"added while running") == b"added while running"
        bob.close()

        braid_user("remove", "alice", "--users-file", str(users))
        assert logon_status(port, "alice", "alice-Pw-1") == NtStatus.STATUS_LOGON_FAILURE
        # The session set up before goes on.
        assert alice.write_read("alice.txt", b"still here") == b"still here"
    finally:
        alice.close()

    # A changed password counts at the next logon too.
    braid_user("add", "bob", "--users-file", str(users), password="bob-Pw-3\n")
    assert logon_status(port, "bob", "bob-Pw-2") == NtStatus.STATUS_LOGON_FAILURE
    assert logon_status(port, "bob", "bob-Pw-3") == 0


def test_a_users_file_that_no_longer_loads_keeps_the_last_users(server):
    port, users, log = server
    os.chmod(users, 0o644)  # readable by all: refused
    assert logon_status(port, "alice", "alice-Pw-1") == 0
    text = log.read_text()
    assert "users read before stay in force" in text, text[-2000:]
    os.chmod(users, 0o600)
    braid_user("add", "carol", "--users-file", str(users), password="carol-Pw-4\n")
    assert logon_status(port, "carol", "carol-Pw-4") == 0
    assert "alice-Pw-1" not in log.read_text()


def test_a_users_uid_and_gid_own_what_it_creates_over_smb_as_nfs_sees(tmp_path):
    """`braid user add --uid --gid` maps an SMB user to a Unix owner: the
    files and directories it creates over SMB belong to that uid and gid on
    disk and in an NFS client's GETATTR, so both protocols agree on who owns
    them; a user without a mapping leaves the server's owner."""
    import nfs_rs

    share = tmp_path / "share"
    share.mkdir()
    users = tmp_path / "users"
    braid_user("add", "alice", "--users-file", str(users), "--uid", "4242", "--gid", "4343",
               password="alice-Pw-1\n")
    braid_user("add", "bob", "--users-file", str(users), password="bob-Pw-2\n")
    assert ":4242:4343" in users.read_text()
    port, nfs_port = servers.free_port(), servers.free_port()
    config = tmp_path / "braid.toml"
    config.write_text(f'listen = ["127.0.0.1:{port}"]\nnfs_listen = ["127.0.0.1:{nfs_port}"]\n'
                      f'admin_listen = "off"\nusers_file = "{users}"\n'
                      f'[[share]]\nname = "share"\npath = "{share}"\n'
                      'protocols = ["smb", "nfs"]\nroot_squash = false\n')
    log = tmp_path / "braid.log"
    proc = servers._spawn([str(servers.BRAID_BIN), "serve", "--config", str(config)],
                          log, tmp_path)
    try:
        servers.wait_until_accepting("127.0.0.1", port, proc, log)
        alice = Client(port, "alice", "alice-Pw-1")
        try:
            assert alice.write_read("by-alice", b"alice's bytes") == b"alice's bytes"
            d = Open(alice.tree, "alice-dir")
            d.create(ImpersonationLevel.Impersonation, FilePipePrinterAccessMask.FILE_READ_DATA,
                     0, ShareAccess.FILE_SHARE_READ, CreateDisposition.FILE_CREATE,
                     CreateOptions.FILE_DIRECTORY_FILE)
            d.close()
        finally:
            alice.close()
        bob = Client(port, "bob", "bob-Pw-2")
        try:
            assert bob.write_read("by-bob", b"bob's") == b"bob's"
        finally:
            bob.close()
        for name in ("by-alice", "alice-dir"):
            st = (share / name).stat()
            assert (st.st_uid, st.st_gid) == (4242, 4343), (name, st.st_uid, st.st_gid)
        st = (share / "by-bob").stat()
        assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid())

        nfs = nfs_rs.Client.connect(f"nfs://127.0.0.1:{nfs_port}/share?version=4.1",
                                    uid=0, gid=0, noresvport=True, connect_timeout=10,
                                    operation_timeout=30)
        try:
            for name in ("by-alice", "alice-dir"):
                info = nfs.stat(name)
                assert (info.uid, info.gid) == (4242, 4343), (name, info.uid, info.gid)
            assert nfs.stat("by-bob").uid == os.geteuid()
        finally:
            nfs.close()
    finally:
        servers.stop_pid(proc.pid)
