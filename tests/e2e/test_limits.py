"""Limits that keep one client from taking what every client needs, seen
from smbprotocol:

- `max_open_files`: a session at its cap gets TOO_MANY_OPENED_FILES, and
  may open again once it closes something; another session is unaffected.
- `max_connections`: a connection beyond the cap is closed at once; once
  a connection ends, a new one is served again.
- `logon_failures_per_minute`: an address that keeps failing to log on is
  refused, right password or not, for the rest of the minute.
- `max_async_requests`: a connection with that many change notifications
  waiting gets INSUFFICIENT_RESOURCES for one more, until one ends.
- Tree connects: 4096 per session, then INSUFFICIENT_RESOURCES.

Braid only: the config keys are Braid's.
"""

from __future__ import annotations

import json
import os
import secrets
import struct
import time
import urllib.request
import uuid

import pytest
from smbprotocol.connection import Connection
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.header import NtStatus
from smbprotocol.change_notify import CompletionFilter, SMB2ChangeNotifyRequest
from smbprotocol.open import (CreateDisposition, CreateOptions, DirectoryAccessMask,
                              FileAttributes, FilePipePrinterAccessMask, ImpersonationLevel,
                              Open, ShareAccess)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

import servers

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's config keys (limits)")

STATUS_TOO_MANY_OPENED_FILES = 0xC000011F
MAX_OPEN_FILES = 20
MAX_CONNECTIONS = 4
MAX_ASYNC_REQUESTS = 8
ADMIN_PORT = servers.free_port()
STATUS_PENDING = 0x00000103
STATUS_CANCELLED = 0xC0000120
STATUS_INSUFFICIENT_RESOURCES = 0xC000009A
MAX_TREES_PER_SESSION = 4096


def start(tmp_path_factory, tag: str, options: str):
    """Braid with `options` (top-level TOML) and one share, for alice (and
    bob, whose password is alice's with "-bob" after it). Yields the port,
    alice's password and the server's log."""
    base = tmp_path_factory.mktemp(tag)
    share = base / "share"
    share.mkdir()
    password = "Pw-" + secrets.token_hex(8)
    proc, port = servers.start_braid_with_config(
        base, options + f'[[share]]\nname = "share"\npath = "{share}"\n',
        {"alice": password, "bob": password + "-bob"})
    yield port, password, base / "braid.log"
    servers.stop_pid(proc.pid)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from start(tmp_path_factory, "limits-", f"max_open_files = {MAX_OPEN_FILES}\n"
                     f"max_connections = {MAX_CONNECTIONS}\n"
                     f"max_async_requests = {MAX_ASYNC_REQUESTS}\n"
                     f'admin_listen = "127.0.0.1:{ADMIN_PORT}"\n')


class Client:
    def __init__(self, port: int, password: str, user: str = "alice"):
        self.conn = Connection(uuid.uuid4(), "127.0.0.1", port)
        self.conn.connect(timeout=5)
        self.session = Session(self.conn, user, password, require_encryption=False)
        self.session.connect()
        self.tree = TreeConnect(self.session, r"\\127.0.0.1\share")
        self.tree.connect()

    def open(self, name: str, tree: TreeConnect | None = None,
             disposition: int = CreateDisposition.FILE_OPEN_IF) -> Open:
        """A file (or, on an IPC$ `tree`, a pipe) open for reading and writing."""
        f = Open(tree or self.tree, name)
        f.create(ImpersonationLevel.Impersonation,
                 FilePipePrinterAccessMask.FILE_READ_DATA
                 | FilePipePrinterAccessMask.FILE_WRITE_DATA, 0,
                 ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
                 disposition, CreateOptions.FILE_NON_DIRECTORY_FILE)
        return f

    def open_dir(self, name: str) -> Open:
        d = Open(self.tree, name)
        d.create(ImpersonationLevel.Impersonation, DirectoryAccessMask.FILE_LIST_DIRECTORY,
                 FileAttributes.FILE_ATTRIBUTE_DIRECTORY,
                 ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE
                 | ShareAccess.FILE_SHARE_DELETE,
                 CreateDisposition.FILE_OPEN, CreateOptions.FILE_DIRECTORY_FILE)
        return d

    def close(self):
        self.conn.disconnect()


def test_a_session_at_its_open_file_cap(server):
    port, password, _ = server
    greedy, other = Client(port, password), Client(port, password)
    try:
        held = [greedy.open(f"f{i}.txt") for i in range(MAX_OPEN_FILES)]
        with pytest.raises(SMBResponseException) as e:
            greedy.open("one-too-many.txt")
        assert e.value.status == STATUS_TOO_MANY_OPENED_FILES

        # Another session opens, writes and reads as before.
        f = other.open("f0.txt")
        f.write(b"still served", 0)
        assert f.read(0, 12) == b"still served"
        f.close()

        held.pop().close()
        again = greedy.open("one-too-many.txt")
        again.write(b"after a close", 0)
        assert again.read(0, 13) == b"after a close"
    finally:
        greedy.close()
        other.close()


PER_CLIENT = 30


@pytest.fixture(scope="module")
def per_client(tmp_path_factory):
    yield from start(tmp_path_factory, "clientopens-",
                     f"max_open_files = {MAX_OPEN_FILES}\n"
                     f"max_open_files_per_client = {PER_CLIENT}\n")


def test_one_clients_sessions_together_are_held_to_a_cap(per_client):
    """`max_open_files_per_client`: a client's sessions, each under its own
    cap, together hold at most this many opens, durable opens left behind
    by a dropped connection included; a close makes room again."""
    from smbprotocol.create_contexts import (CreateContextName,
                                             SMB2CreateContextRequest,
                                             SMB2CreateDurableHandleRequest)
    from smbprotocol.open import RequestedOplockLevel

    port, password, log = per_client
    first, second, third = (Client(port, password) for _ in range(3))
    try:
        held = [first.open(f"a{i}.txt") for i in range(MAX_OPEN_FILES)]
        for i in range(PER_CLIENT - MAX_OPEN_FILES):
            ctx = SMB2CreateContextRequest()
            ctx["buffer_name"] = CreateContextName.SMB2_CREATE_DURABLE_HANDLE_REQUEST
            ctx["buffer_data"] = SMB2CreateDurableHandleRequest()
            f = Open(second.tree, f"b{i}.txt")
            f.create(ImpersonationLevel.Impersonation,
                     FilePipePrinterAccessMask.FILE_READ_DATA
                     | FilePipePrinterAccessMask.FILE_WRITE_DATA, 0,
                     ShareAccess.FILE_SHARE_READ, CreateDisposition.FILE_OPEN_IF,
                     CreateOptions.FILE_NON_DIRECTORY_FILE, create_contexts=[ctx],
                     oplock_level=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH)
            assert f.oplock_level == RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH
        with pytest.raises(SMBResponseException) as e:
            third.open("c.txt")
        assert e.value.status == STATUS_TOO_MANY_OPENED_FILES

        # The second session's connection is lost: its durable opens wait
        # for a reconnect, and still count.
        second.conn.transport.close()
        time.sleep(0.5)
        with pytest.raises(SMBResponseException) as e:
            third.open("c.txt")
        assert e.value.status == STATUS_TOO_MANY_OPENED_FILES

        held.pop().close()
        f = third.open("c.txt")
        f.write(b"room again", 0)
        assert f.read(0, 10) == b"room again"
    finally:
        first.close()
        third.close()
    # Two refusals, one warning (they are logged at most every 10 s).
    assert log.read_text().count("client at its max_open_files_per_client limit") == 1


def notify_request(client: Client, directory: Open):
    """Send a CHANGE_NOTIFY on `directory`; return the request and the
    status of its first answer (STATUS_PENDING from the interim response,
    or the final status)."""
    m = SMB2ChangeNotifyRequest()
    m["file_id"] = directory.file_id
    m["output_buffer_length"] = 4096
    m["completion_filter"] = CompletionFilter.FILE_NOTIFY_CHANGE_FILE_NAME
    req = client.conn.send(m, client.session.session_id, client.tree.tree_connect_id)
    # Not receive(wait=False): it forgets a request it saw pending, and the
    # final answer would then find none.
    assert req.response_event.wait(10), "no answer"
    with req.response_event_lock:
        status = req.response["status"].get_value()
        if status == STATUS_PENDING:
            req.response_event.clear()
            return req, status
    with pytest.raises(SMBResponseException):
        client.conn.receive(req, timeout=10)
    return req, status


def channel_async_requests(port: int) -> list[int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{ADMIN_PORT}/api/v1/sessions",
                                timeout=5) as r:
        sessions = json.load(r)["sessions"]
    return [c["async_requests"] for s in sessions for c in s["channels"]]


def test_waiting_requests_are_capped_per_connection(server):
    """An interim response gives the request's credit back, so credits do
    not bound the requests a connection keeps waiting: `max_async_requests`
    does. One change notification beyond it is INSUFFICIENT_RESOURCES
    (MS-SMB2 3.3.4.2); once one ends, another may wait again, and another
    connection was never affected."""
    port, password, _ = server
    greedy, other = Client(port, password), Client(port, password)
    try:
        directory = greedy.open_dir("")
        sent = [notify_request(greedy, directory) for _ in range(MAX_ASYNC_REQUESTS)]
        assert [status for _, status in sent] == [STATUS_PENDING] * MAX_ASYNC_REQUESTS
        waiting = [req for req, _ in sent]
        assert MAX_ASYNC_REQUESTS in channel_async_requests(port)

        assert notify_request(greedy, directory)[1] == STATUS_INSUFFICIENT_RESOURCES

        # Another connection waits as before.
        theirs, status = notify_request(other, other.open_dir(""))
        assert status == STATUS_PENDING

        first = waiting.pop(0)
        first.cancel()
        with pytest.raises(SMBResponseException) as e:
            greedy.conn.receive(first, timeout=10)
        assert e.value.status == STATUS_CANCELLED
        again, status = notify_request(greedy, directory)
        assert status == STATUS_PENDING

        # Changes complete them all (each request takes what is buffered
        # or waits for the next change): the count goes back to 0.
        for i, req in enumerate(waiting + [again]):
            greedy.open(f"wake{i}.txt").close()
            greedy.conn.receive(req, timeout=10)
        other.open("wake-other.txt").close()
        other.conn.receive(theirs, timeout=10)
        deadline = time.monotonic() + 10
        while any(channel_async_requests(port)):
            assert time.monotonic() < deadline, channel_async_requests(port)
            time.sleep(0.1)
    finally:
        greedy.close()
        other.close()


def test_tree_connects_are_capped_per_session(server):
    """A session may hold 4096 tree connects; one more is
    INSUFFICIENT_RESOURCES (MS-SMB2 3.3.5.7), and after a disconnect it
    may connect again."""
    port, password, _ = server
    c = Client(port, password)
    try:
        trees = [c.tree]
        while len(trees) < MAX_TREES_PER_SESSION:
            t = TreeConnect(c.session, r"\\127.0.0.1\share")
            t.connect()
            trees.append(t)
        with pytest.raises(SMBResponseException) as e:
            TreeConnect(c.session, r"\\127.0.0.1\share").connect()
        assert e.value.status == STATUS_INSUFFICIENT_RESOURCES
        trees.pop().disconnect()
        TreeConnect(c.session, r"\\127.0.0.1\share").connect()
    finally:
        c.close()


def served_again(port: int, password: str) -> Client:
    """A client once the server serves one again (within 10 s of a
    connection ending: the server must first see it end); asserts that it
    writes and reads back."""
    deadline = time.monotonic() + 10
    while True:
        try:
            # A connection closed at accept fails the NEGOTIATE.
            late = Client(port, password)
            break
        except Exception:
            assert time.monotonic() < deadline, "no connection served after one ended"
            time.sleep(0.2)
    f = late.open("late.txt")
    f.write(b"served", 0)
    assert f.read(0, 6) == b"served"
    f.close()
    return late


def test_a_connection_beyond_the_cap_is_closed(server):
    port, password, log = server
    clients = []
    try:
        # The previous test's connections may take a moment to be gone.
        deadline = time.monotonic() + 10
        while len(clients) < MAX_CONNECTIONS:
            try:
                clients.append(Client(port, password))
            except Exception:
                assert time.monotonic() < deadline, "the server kept refusing"
                time.sleep(0.2)
        # docs/CONFIG.md: one beyond the cap "is closed as soon as it is
        # accepted" (EOF or reset before any NEGOTIATE), and a warning says why.
        assert not accepted(port, "127.0.0.1")
        assert "max_connections reached" in log.read_text()

        clients.pop().close()
        clients.append(served_again(port, password))
    finally:
        for c in clients:
            c.close()


PER_CLIENT_CONNECTIONS = 2


@pytest.fixture(scope="module")
def per_client_connections(tmp_path_factory):
    yield from start(tmp_path_factory, "clientconns-",
                     "max_connections = 8\n"
                     f"max_connections_per_client = {PER_CLIENT_CONNECTIONS}\n")


def accepted(port: int, source: str) -> bool:
    """Whether a TCP connection from `source` stays open: one refused at
    accept is closed at once (EOF or reset), one accepted waits, silent,
    for its NEGOTIATE."""
    import socket
    s = socket.socket()
    try:
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.settimeout(1.0)
        try:
            return s.recv(1) != b""
        except socket.timeout:
            return True
        except ConnectionResetError:
            return False
    finally:
        s.close()


def test_one_client_address_is_held_to_its_connections(per_client_connections):
    """`max_connections_per_client`: a third connection from 127.0.0.1 is
    closed at accept while another address (127.0.0.2) is still served,
    and once one of the two ends, 127.0.0.1 is served again."""
    port, password, log = per_client_connections
    first, second = Client(port, password), Client(port, password)
    try:
        assert not accepted(port, "127.0.0.1")
        assert accepted(port, "127.0.0.2")
        second.close()
        served_again(port, password).close()
    finally:
        first.close()
    assert "client at its max_connections_per_client limit" in log.read_text()


FAILURES_PER_MINUTE = 3


@pytest.fixture(scope="module")
def throttled(tmp_path_factory):
    yield from start(tmp_path_factory, "throttle-",
                     f"logon_failures_per_minute = {FAILURES_PER_MINUTE}\n")


def logon(port: int, password: str, user: str = "alice") -> int:
    """The status of one logon on a new connection (0: success)."""
    conn = Connection(uuid.uuid4(), "127.0.0.1", port)
    conn.connect(timeout=5)
    try:
        Session(conn, user, password, require_encryption=False).connect()
        return 0
    except SMBResponseException as e:
        return e.status
    finally:
        conn.disconnect()


def test_failed_logons_are_limited_per_name_and_address(throttled):
    """After `logon_failures_per_minute` wrong passwords for alice from
    127.0.0.1, even her right one is refused from there this minute: a
    guesser learns nothing more, however many connections it opens. Bob,
    behind the same address, goes on. Ten times as many failures over
    many names (password spraying) close the address to everyone."""
    port, password, log = throttled
    failure = NtStatus.STATUS_LOGON_FAILURE
    assert logon(port, password) == 0
    for _ in range(FAILURES_PER_MINUTE):
        assert logon(port, "wrong-" + secrets.token_hex(4)) == failure
    assert logon(port, password) == failure
    assert logon(port, password + "-bob", "bob") == 0

    # The address has 3 failures; 27 more over other names make 30.
    for i in range(FAILURES_PER_MINUTE * 10 - FAILURES_PER_MINUTE):
        assert logon(port, "guess", f"nobody{i}") == failure
    assert logon(port, password + "-bob", "bob") == failure
    text = log.read_text()
    assert text.count("too many failed logons from this address") == 2, text[-3000:]
    assert "127.0.0.1" in text and password not in text and "nobody" not in text


# DCE/RPC (C706 12.6): an NTLMSSP-authenticated bind of srvsvc on a pipe.
SRVSVC_SYNTAX = uuid.UUID("4b324fc8-1670-01d3-1278-5a47bf6ee188").bytes_le + b"\x03\0\0\0"
NDR20_SYNTAX = uuid.UUID("8a885d04-1ceb-11c9-9fe8-08002b104860").bytes_le + b"\x02\0\0\0"
RPC_NTLMSSP, RPC_LEVEL_CONNECT = 10, 2
PTYPE_REQUEST, PTYPE_RESPONSE, PTYPE_FAULT, PTYPE_BIND, PTYPE_BIND_ACK, PTYPE_AUTH3 = \
    0, 2, 3, 11, 12, 16


def rpc_pdu(ptype: int, call_id: int, body: bytes, token: bytes = b"") -> bytes:
    """C706 12.6.3.1 common header; with a token, MS-RPCE 2.2.2.11
    sec_trailer (NTLMSSP, CONNECT level, context 0) and the token after
    `body` (4-byte aligned here)."""
    assert len(body) % 4 == 0
    if token:
        body += struct.pack("<BBBBI", RPC_NTLMSSP, RPC_LEVEL_CONNECT, 0, 0, 0) + token
    return struct.pack("<BBBB4sHHI", 5, 0, ptype, 3, b"\x10\0\0\0", 16 + len(body),
                       len(token), call_id) + body


def srvsvc_call_as(pipe: Open, user: str, password: str) -> int:
    """Bind srvsvc authenticating as `user` (BIND, BIND_ACK, AUTH3), then
    call NetrServerGetInfo level 101 (MS-SRVS 3.1.4.17, opnum 21). Returns
    the call's answer: PTYPE_RESPONSE, or PTYPE_FAULT once the bind
    failed."""
    import spnego
    ntlm = spnego.client(user, password, hostname="127.0.0.1", service="host",
                         protocol="ntlm")
    bind = struct.pack("<HHIB3x", 4280, 4280, 0, 1) + struct.pack("<HBx", 0, 1) \
        + SRVSVC_SYNTAX + NDR20_SYNTAX
    pipe.write(rpc_pdu(PTYPE_BIND, 1, bind, ntlm.step()), 0)
    ack = pipe.read(0, 4280)
    assert ack[2] == PTYPE_BIND_ACK, ack.hex()
    auth_length = struct.unpack_from("<H", ack, 10)[0]
    authenticate = ntlm.step(ack[len(ack) - auth_length:])
    pipe.write(rpc_pdu(PTYPE_AUTH3, 2, b"\0" * 4, authenticate), 0)
    stub = struct.pack("<II", 0, 101)  # server name NULL, level 101
    request = struct.pack("<IHH", len(stub), 0, 21) + stub
    pipe.write(rpc_pdu(PTYPE_REQUEST, 3, request), 0)
    return pipe.read(0, 4280)[2]


@pytest.fixture(scope="module")
def rpc_throttled(tmp_path_factory):
    yield from start(tmp_path_factory, "rpcbind-",
                     f"logon_failures_per_minute = {FAILURES_PER_MINUTE}\n")


def test_a_pipe_bind_cannot_try_another_users_password(rpc_throttled):
    """A bind on a pipe is held to the SMB session's own account: from
    bob's session, binds that name alice fail whatever password they
    carry, and none of them is checked, so none counts as a failed logon
    for alice (no more than `logon_failures_per_minute` guesses would
    otherwise lock her out from this address). Bob's own bind works."""
    port, password, _ = rpc_throttled
    bob = Client(port, password + "-bob", user="bob")
    try:
        tree = TreeConnect(bob.session, r"\\127.0.0.1\IPC$")
        tree.connect()

        def pipe() -> Open:
            return bob.open("srvsvc", tree, CreateDisposition.FILE_OPEN)

        for guess in [password] + ["wrong-" + secrets.token_hex(4)] * (FAILURES_PER_MINUTE + 1):
            p = pipe()
            assert srvsvc_call_as(p, "alice", guess) == PTYPE_FAULT
            p.close()
        p = pipe()
        assert srvsvc_call_as(p, "bob", password + "-bob") == PTYPE_RESPONSE
        p.close()
    finally:
        bob.close()
    assert logon(port, password) == 0


@pytest.fixture(scope="module")
def smb3_only(tmp_path_factory):
    yield from start(tmp_path_factory, "minproto-", 'min_protocol = "3.0"\n')


def test_min_protocol_refuses_older_dialects(smb3_only):
    """`min_protocol = "3.0"` (Samba's `server min protocol = SMB3`): a
    client that offers only SMB 2.x gets NOT_SUPPORTED (MS-SMB2 3.3.5.4),
    smbclient limited to SMB2 cannot connect, and SMB 3 clients work."""
    import subprocess

    from smbprotocol.connection import Dialects
    port, password, _ = smb3_only
    conn = Connection(uuid.uuid4(), "127.0.0.1", port)
    with pytest.raises(SMBResponseException) as e:
        conn.connect(dialect=Dialects.SMB_2_1_0, timeout=5)
    assert e.value.status == NtStatus.STATUS_NOT_SUPPORTED
    conn.disconnect()

    def smbclient(max_protocol: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["smbclient", "//127.0.0.1/share", "-p", str(port), "-U", f"alice%{password}",
             "-m", max_protocol, "-c", "ls"], capture_output=True, text=True, timeout=60)

    old = smbclient("SMB2")
    assert old.returncode != 0, old.stdout
    new = smbclient("SMB3")
    assert new.returncode == 0, new.stdout + new.stderr
    c = Client(port, password)
    assert c.conn.dialect >= Dialects.SMB_3_0_0
    c.close()
