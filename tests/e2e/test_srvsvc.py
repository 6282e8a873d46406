"""What the server has open, as Windows' "Shared Folders" view and `net
session` / `net file` ask for it: srvsvc's NetSessEnum, NetConnEnum and
NetFileEnum, called by Samba's own DCE/RPC client (python3-samba, through
srvsvc_probe.py on the system Python) while smbprotocol holds sessions
and files open. Also the anonymous half of smbtorture's rpc.srvsvc, which
needs a server that allows anonymous sessions.

Braid only: a caller sees its own account's sessions and opens, which is
Braid's rule (docs/SECURITY.md), not Samba's.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from smbprotocol.connection import Connection
from smbprotocol.exceptions import SMBException, SMBResponseException
from smbprotocol.open import (CreateDisposition, CreateOptions, FilePipePrinterAccessMask,
                              ImpersonationLevel, Open, ShareAccess)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

import servers

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
                                reason="Braid's visibility rule and config format")

PROBE = Path(__file__).with_name("srvsvc_probe.py")
SYSTEM_PYTHON = "/usr/bin/python3"
PERM_FILE_READ, PERM_FILE_WRITE = 0x1, 0x2


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Braid with one share, two users and anonymous sessions allowed."""
    base = tmp_path_factory.mktemp("srvsvc-")
    share = base / "share"
    share.mkdir()
    os.chmod(share, 0o777)
    users = {"alice": "Pw-" + secrets.token_hex(8), "bob": "Pw-" + secrets.token_hex(8)}
    config = f'allow_guest = true\n[[share]]\nname = "share"\npath = "{share}"\n'
    proc, port = servers.start_braid_with_config(base, config, users)
    yield port, users
    servers.stop_pid(proc.pid)


def probe(port: int, user: str, password: str, *shares: str) -> dict:
    r = subprocess.run([SYSTEM_PYTHON, str(PROBE), str(port), user, password, *shares],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


class Client:
    """One smbprotocol session on the share, holding files open."""

    def __init__(self, port: int, user: str, password: str):
        self.conn = Connection(uuid.uuid4(), "127.0.0.1", port)
        self.conn.connect()
        self.session = Session(self.conn, user, password, require_encryption=False)
        self.session.connect()
        self.tree = TreeConnect(self.session, r"\\127.0.0.1\share")
        self.tree.connect()

    def open(self, name: str, write: bool) -> Open:
        access = FilePipePrinterAccessMask.FILE_READ_DATA
        if write:
            access |= FilePipePrinterAccessMask.FILE_WRITE_DATA
        f = Open(self.tree, name)
        f.create(ImpersonationLevel.Impersonation, access, 0,
                 ShareAccess.FILE_SHARE_READ | (0 if write else ShareAccess.FILE_SHARE_WRITE),
                 CreateDisposition.FILE_OPEN_IF, CreateOptions.FILE_NON_DIRECTORY_FILE)
        return f

    def close(self):
        self.conn.disconnect()


STATUS_SHARING_VIOLATION, STATUS_FILE_CLOSED = 0xC0000043, 0xC0000128
STATUS_OBJECT_NAME_NOT_FOUND = 0xC0000034


def test_sessions_tree_connects_and_open_files(server):
    port, users = server
    alice = Client(port, "alice", users["alice"])
    try:
        report = alice.open("report.txt", write=True)
        readme = alice.open("readme.txt", write=False)
        time.sleep(1.2)
        seen = probe(port, "alice", users["alice"], "share")

        # Two sessions of alice: the smbprotocol one, and the probe's own.
        sessions = seen["sessions"]
        assert len(sessions) == 2, sessions
        assert {s["user"] for s in sessions} == {"alice"}
        assert {s["client"] for s in sessions} == {"\\\\127.0.0.1"}
        assert all(s["client_type"].startswith("SMB ") and s["transport"] == "TCP"
                   for s in sessions), sessions
        holder = max(sessions, key=lambda s: s["opens"])
        assert holder["opens"] == 2, sessions
        assert holder["time"] >= 1, "seconds since the session was set up"
        assert holder["idle"] >= 1, "no request since the opens"

        (tree,) = seen["connections"]["share"]
        assert (tree["opens"], tree["users"], tree["user"], tree["netname"]) == (
            2, 1, "alice", "\\\\127.0.0.1"), tree
        assert seen["share_info"]["share"]["current_users"] == 1

        files = {f["path"]: f for f in seen["files"]}
        assert set(files) == {"share\\report.txt", "share\\readme.txt"}, files
        assert files["share\\report.txt"]["permissions"] == PERM_FILE_READ | PERM_FILE_WRITE
        assert files["share\\readme.txt"]["permissions"] == PERM_FILE_READ
        assert {f["user"] for f in files.values()} == {"alice"}

        report.close()
        seen = probe(port, "alice", users["alice"], "share")
        assert [f["path"] for f in seen["files"]] == ["share\\readme.txt"]
        readme.close()
    finally:
        alice.close()
    seen = probe(port, "alice", users["alice"], "share")
    assert len(seen["sessions"]) == 1, "only the probe's own session is left"
    assert seen["connections"]["share"] == [] and seen["files"] == []


def test_a_user_sees_only_their_own(server):
    port, users = server
    bob = Client(port, "bob", users["bob"])
    try:
        bob.open("bobs-secret.txt", write=True)
        as_alice = probe(port, "alice", users["alice"], "share")
        assert {s["user"] for s in as_alice["sessions"]} == {"alice"}
        assert as_alice["files"] == [] and as_alice["connections"]["share"] == []
        as_bob = probe(port, "bob", users["bob"], "share")
        assert [f["path"] for f in as_bob["files"]] == ["share\\bobs-secret.txt"]
    finally:
        bob.close()


def wait_for_no_files(port: int, user: str, password: str) -> None:
    """Closing an open is asynchronous: wait until the user has none."""
    for _ in range(50):
        if not probe(port, user, password)["files"]:
            return
        time.sleep(0.1)


def hold_against(holder: Client, other: Client, name: str) -> Open:
    """`holder` opens `name` for writing, sharing reads only; `other`'s open
    for writing is then refused with SHARING_VIOLATION."""
    held = holder.open(name, write=True)
    with pytest.raises(SMBResponseException) as e:
        other.open(name, write=True)
    assert e.value.status == STATUS_SHARING_VIOLATION
    return held


def test_net_file_close_lets_go_of_a_left_handle(server):
    """`net file ID /close`: a handle left open (deny-write) is closed from
    another session of the same user; the file opens for writing again,
    and the old handle answers FILE_CLOSED."""
    port, users = server
    left = Client(port, "alice", users["alice"])
    other = Client(port, "alice", users["alice"])
    try:
        held = hold_against(left, other, "locked.txt")

        (entry,) = [f for f in probe(port, "alice", users["alice"])["files"]
                    if f["path"] == "share\\locked.txt"]
        assert probe(port, "bob", users["bob"], "--close", str(entry["id"])) == {
            "close": {"error": "WERR_NERR_FILEIDNOTFOUND"}}, "not bob's to close"
        assert probe(port, "alice", users["alice"], "--close", str(entry["id"])) == {
            "close": "ok"}
        wait_for_no_files(port, "alice", users["alice"])
        other.open("locked.txt", write=True).close()
        with pytest.raises(SMBResponseException) as e:
            held.write(b"late", 0)
        assert e.value.status == STATUS_FILE_CLOSED
    finally:
        left.close()
        other.close()


def test_net_file_close_ends_a_durable_open_waiting_for_its_client(server):
    """A durable open whose connection was lost waits, with its byte-range
    locks, until its client reconnects or its timeout passes (a minute
    here). It is listed, and its owner (only) can close it: the reconnect
    then finds nothing."""
    from types import SimpleNamespace

    from smbremote import RawClient
    from test_durable import durable_open, reconnect
    from smbremote import lock_element
    from test_posix_locks import EXCLUSIVE_NOW

    port, users = server
    target = SimpleNamespace(host="127.0.0.1", port=port, user="alice",
                             password=users["alice"], share="share")
    lost = RawClient(target)
    later = RawClient(target)
    try:
        op, _ = durable_open(lost, "waiting.bin")
        op.write(b"kept", 0)
        op.lock([lock_element(0, 4, EXCLUSIVE_NOW)])
        file_id = op.file_id
        lost.drop()
        waiting = []
        for _ in range(50):
            seen = probe(port, "alice", users["alice"])
            waiting = [f for f in seen["files"] if f["path"] == "share\\waiting.bin"]
            if waiting and len(seen["sessions"]) == 2:  # the probe's and `later`'s
                break
            time.sleep(0.1)
        (entry,) = waiting
        assert (entry["user"], entry["locks"]) == ("alice", 1), entry
        assert entry["permissions"] == PERM_FILE_READ | PERM_FILE_WRITE

        assert probe(port, "bob", users["bob"])["files"] == [], "not bob's to see"
        assert probe(port, "bob", users["bob"], "--close", str(entry["id"])) == {
            "close": {"error": "WERR_NERR_FILEIDNOTFOUND"}}, "not bob's to close"

        assert probe(port, "alice", users["alice"], "--close", str(entry["id"])) == {
            "close": "ok"}
        wait_for_no_files(port, "alice", users["alice"])
        with pytest.raises(SMBResponseException) as e:
            reconnect(later, "waiting.bin", file_id)
        assert e.value.status == STATUS_OBJECT_NAME_NOT_FOUND
    finally:
        lost.close()
        later.close()


def test_net_session_delete_ends_another_session(server):
    """Windows' "Close session" (NetSessionDel): alice ends her other
    sessions from this client; the file one of them held opens for writing
    again, and that session's next request fails. The calling session
    itself stays."""
    port, users = server
    left = Client(port, "alice", users["alice"])
    other = Client(port, "alice", users["alice"])
    try:
        held = hold_against(left, other, "session-held.txt")
        assert probe(port, "bob", users["bob"], "--end-sessions", "\\\\127.0.0.1") == {
            "end": {"error": "WERR_NERR_CLIENTNAMENOTFOUND"}}, "bob sees no session of alice"
        assert probe(port, "alice", users["alice"], "--end-sessions", "\\\\127.0.0.1") == {
            "end": "ok"}
        for _ in range(50):
            sessions = probe(port, "alice", users["alice"])["sessions"]
            if len(sessions) == 1:
                break
            time.sleep(0.1)
        assert len(sessions) == 1, f"only the asking session is left: {sessions}"
        reopened = None
        for _ in range(50):
            try:
                reopened = Client(port, "alice", users["alice"])
                reopened.open("session-held.txt", write=True).close()
                break
            except SMBResponseException:
                reopened.close()
                reopened = None
                time.sleep(0.1)
        assert reopened is not None, "the file stayed held"
        reopened.close()
        # USER_SESSION_DELETED comes unsigned, as the session is gone:
        # smbprotocol reports that as an unverifiable signature.
        with pytest.raises(SMBException):
            held.write(b"late", 0)
    finally:
        for c in (left, other):
            try:
                c.close()
            except Exception:
                pass


def test_anonymous_callers_are_refused(server):
    port, _ = server
    seen = probe(port, "", "", "share")
    for answer in (seen["sessions"], seen["files"], seen["connections"]["share"],
                   seen["share_info"]["share"]):
        assert answer == {"error": "WERR_ACCESS_DENIED"}, seen
    # The time of day is for everyone (`net time`).
    assert abs(seen["tod"]["elapsed"] - time.time()) < 60, seen["tod"]


def test_smbtorture_anonymous_access(server):
    port, users = server
    r = subprocess.run(
        ["smbtorture", "ncacn_np:127.0.0.1[smb2]", "-p", str(port),
         "-U", f"alice%{users['alice']}", "--fullname", "rpc.srvsvc.srvsvc anonymous access"],
        capture_output=True, text=True, timeout=300)
    results = [ln for ln in r.stdout.splitlines()
               if ln.split(":")[0] in ("success", "failure", "error", "skip")]
    assert len(results) == 3, r.stdout[-3000:]
    assert all(ln.startswith("success: ") for ln in results), "\n".join(results)
