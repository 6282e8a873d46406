"""Hostile and malformed input on raw sockets.

Each case opens its own connection and sends something broken. The server must
answer with an SMB2 error (or a NetBIOS negative response) or close the
connection -- never hang and never die. After every case the server process
must still be alive and a normal signed smbprotocol session must still list,
write and read.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import uuid

import pytest
import smbclient

TIMEOUT = 10.0  # seconds a server may take to answer or close

NEGOTIATE, SESSION_SETUP, TREE_CONNECT, READ, ECHO = 0x0, 0x1, 0x3, 0x8, 0xD
STATUS_PENDING = 0x00000103


# ---- frame builders ---------------------------------------------------------

def frame(message: bytes) -> bytes:
    """Direct TCP transport: a zero byte and a 24-bit big-endian length."""
    return struct.pack(">I", len(message)) + message


def smb2_header(command: int, message_id: int = 0, session_id: int = 0, tree_id: int = 0,
                structure_size: int = 64, next_command: int = 0, credits: int = 1) -> bytes:
    return b"\xfeSMB" + struct.pack("<HHIHHIIQIIQ16s", structure_size, 0, 0, command, credits,
                                    0, next_command, message_id, 0, tree_id, session_id,
                                    bytes(16))


def negotiate(dialects=(0x202, 0x210, 0x300, 0x302), dialect_count: int | None = None,
              structure_size: int = 36, context_offset: int = 0, context_count: int = 0,
              message_id: int = 0) -> bytes:
    body = struct.pack("<HHHHI16sIHH", structure_size,
                       len(dialects) if dialect_count is None else dialect_count,
                       1, 0, 0, uuid.uuid4().bytes, context_offset, context_count, 0)
    body += b"".join(struct.pack("<H", d) for d in dialects)
    return smb2_header(NEGOTIATE, message_id=message_id) + body


def tree_connect(session_id: int, message_id: int = 1) -> bytes:
    path = "\\\\127.0.0.1\\share".encode("utf-16-le")
    body = struct.pack("<HHHH", 9, 0, 64 + 8, len(path)) + path
    return smb2_header(TREE_CONNECT, message_id=message_id, session_id=session_id) + body


def echo(message_id: int, next_command: int = 0) -> bytes:
    return smb2_header(ECHO, message_id=message_id, next_command=next_command) + \
        struct.pack("<HH", 4, 0)


# ---- connection helpers -----------------------------------------------------

def connect(smb_server) -> socket.socket:
    sock = socket.create_connection((smb_server.host, smb_server.port), timeout=TIMEOUT)
    sock.settimeout(TIMEOUT)
    return sock


def recv_exact(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def read_frame(sock: socket.socket) -> bytes | None:
    """The next transport frame (with its 4-byte header), or None on close."""
    head = recv_exact(sock, 4)
    if head is None:
        return None
    length = struct.unpack(">I", b"\x00" + head[1:])[0]
    body = recv_exact(sock, length)
    return None if body is None else head + body


def status_of(message_frame: bytes) -> int:
    return struct.unpack("<I", message_frame[12:16])[0]


def negotiated(smb_server) -> socket.socket:
    """A connection that has completed a valid NEGOTIATE."""
    sock = connect(smb_server)
    sock.sendall(frame(negotiate()))
    response = read_frame(sock)
    assert response is not None and response[4:8] == b"\xfeSMB", response
    assert status_of(response) == 0, hex(status_of(response))
    return sock


def send_ignoring_reset(sock: socket.socket, data: bytes) -> None:
    """Send, tolerating the server closing the connection part way."""
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # assert_rejected() then sees the connection closed


def assert_rejected(sock: socket.socket) -> str:
    """Wait for the server to close or to answer with an error; return which."""
    try:
        while True:
            response = read_frame(sock)
            if response is None:
                return "closed"
            if response[0] == 0x83:  # NetBIOS negative session response
                return "negative session response"
            assert response[4:8] == b"\xfeSMB", f"unexpected reply {response[:16].hex()}"
            status = status_of(response)
            if status == STATUS_PENDING:
                continue
            assert status != 0, f"malformed request got a success response: {response[:80].hex()}"
            return f"error {status:#010x}"
    except ConnectionResetError:
        return "reset"
    except socket.timeout:
        pytest.fail(f"server neither answered nor closed within {TIMEOUT}s")
    finally:
        sock.close()


# ---- the cases --------------------------------------------------------------

def half_closed(data: bytes):
    """Send data and then end our side of the stream: the server sees EOF."""
    def send(sock, smb_server):
        send_ignoring_reset(sock, data)
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server has already reset the connection
            pass
        return sock
    return send


def plain(data: bytes):
    def send(sock, smb_server):
        send_ignoring_reset(sock, data)
        return sock
    return send


def after_negotiate(data: bytes):
    def send(sock, smb_server):
        sock.close()
        sock = negotiated(smb_server)
        send_ignoring_reset(sock, data)
        return sock
    return send


def oversized_garbage(sock, smb_server):
    """A maximal 24-bit length (16 MiB) followed by that much garbage."""
    send_ignoring_reset(sock, b"\x00\xff\xff\xff")
    rng = random.Random(1)
    for _ in range(16):
        send_ignoring_reset(sock, rng.randbytes(2**20))
    return sock


CASES = {
    "truncated-netbios-header": half_closed(b"\x00\x00"),
    "zero-length-frame-then-eof": half_closed(b"\x00\x00\x00\x00"),
    "truncated-smb2-header": half_closed(b"\x00\x00\x00\x40" + b"\xfeSMB" + bytes(16)),
    "oversized-length-then-eof": half_closed(b"\x00\xff\xff\xff" + b"A" * 100),
    "oversized-frame-of-garbage": oversized_garbage,
    "netbios-session-request": plain(b"\x81\x00\x00\x44" + bytes(0x44)),
    "garbage-protocol-id": plain(frame(b"\xffXYZ" + bytes(60))),
    "message-shorter-than-header": plain(frame(b"\xfeSMB" + bytes(10))),
    "transform-header-before-session": plain(frame(b"\xfdSMB" + os.urandom(48) + bytes(64))),
    "compression-header": plain(frame(b"\xfcSMB" + struct.pack("<IHHI", 1000, 1, 0, 0))),
    "header-structure-size-wrong": plain(frame(
        negotiate()[:4] + struct.pack("<H", 0xFFFF) + negotiate()[6:])),
    "negotiate-structure-size-wrong": plain(frame(negotiate(structure_size=0xFFFF))),
    "negotiate-zero-dialects": plain(frame(negotiate(dialects=(), dialect_count=0))),
    "negotiate-dialect-count-beyond-message": plain(frame(
        negotiate(dialects=(0x202,), dialect_count=0xFFFF))),
    "negotiate-context-offset-out-of-bounds": plain(frame(negotiate(
        dialects=(0x311,), context_offset=0xFFFFFF00, context_count=1))),
    "negotiate-unknown-dialects-only": plain(frame(negotiate(dialects=(0x0999, 0x1234)))),
    "tree-connect-before-negotiate": plain(frame(tree_connect(session_id=0, message_id=0))),
    "read-before-negotiate": plain(frame(
        smb2_header(READ) + struct.pack("<HBBIQ16sIIIHH", 49, 0, 0, 0xFFFFFFFF, 0,
                                        bytes(16), 0, 0, 0, 0, 0) + b"\0")),
    "tree-connect-without-session": after_negotiate(frame(tree_connect(session_id=0))),
    "tree-connect-with-unknown-session": after_negotiate(frame(
        tree_connect(session_id=0x1234567890ABCDEF))),
    "session-setup-buffer-out-of-bounds": after_negotiate(frame(
        smb2_header(SESSION_SETUP, message_id=1)
        + struct.pack("<HBBIIHHQ", 25, 0, 1, 0, 0, 0xFFF0, 0xFFFF, 0) + b"\x60")),
    "compound-next-command-beyond-message": after_negotiate(frame(
        echo(message_id=1, next_command=0x10000))),
    "compound-next-command-misaligned": after_negotiate(frame(
        echo(message_id=1, next_command=65) + echo(message_id=2))),
    "repeated-negotiate": after_negotiate(frame(negotiate(message_id=1))),
}


def random_case(seed: int):
    rng = random.Random(seed)
    size = rng.choice([1, 7, 63, 64, 65, 200, 4096, 70000])
    payload = rng.randbytes(size)
    if seed % 2:  # look like SMB2 so that the header parser is reached
        payload = b"\xfeSMB" + payload
    return plain(frame(payload))


for _seed in range(8):
    CASES[f"random-frame-{_seed}"] = random_case(_seed)


def assert_healthy(server_process, smb_server):
    assert server_process.alive(), f"server died; log:\n{server_process.log_tail()}"
    cache: dict = {}
    kw = {"port": smb_server.port, "connection_cache": cache}
    try:
        smbclient.register_session(smb_server.host, username=smb_server.user,
                                   password=smb_server.password, port=smb_server.port,
                                   require_signing=True, connection_cache=cache)
        root = f"\\\\{smb_server.host}\\{smb_server.share}"
        name = f"health-{uuid.uuid4().hex[:8]}"
        data = os.urandom(300_000)
        with smbclient.open_file(f"{root}\\{name}", mode="wb", **kw) as f:
            f.write(data)
        assert name in smbclient.listdir(root, **kw)
        with smbclient.open_file(f"{root}\\{name}", mode="rb", **kw) as f:
            assert f.read() == data
        smbclient.remove(f"{root}\\{name}", **kw)
    finally:
        smbclient.reset_connection_cache(connection_cache=cache)


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_input_is_rejected(case, server_process, smb_server):
    sock = CASES[case](connect(smb_server), smb_server)
    assert_rejected(sock)
    assert_healthy(server_process, smb_server)


def test_stalled_partial_frame_does_not_block_others(server_process, smb_server):
    stalled = [connect(smb_server) for _ in range(4)]
    try:
        stalled[0].sendall(b"\x00")
        stalled[1].sendall(b"\x00\x00\x01\x00\xfeSMB")
        stalled[2].sendall(frame(negotiate())[:30])
        # stalled[3] sends nothing at all.
        assert_healthy(server_process, smb_server)
    finally:
        for sock in stalled:
            sock.close()


def test_many_connections_opened_and_dropped(server_process, smb_server):
    for i in range(200):
        sock = connect(smb_server)
        if i % 2:
            sock.sendall(frame(negotiate())[: i % 80])
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # with linger 0: an abortive close (RST)
    assert_healthy(server_process, smb_server)


def test_oversized_frame_is_refused_without_waiting(smb_server):
    """A length beyond any valid SMB2 message (max transact size plus headers)
    should be refused at once rather than waited for."""
    if os.environ.get("BRAID_E2E_TARGET") == "samba":
        pytest.skip("smbd waits for the full 16 MiB frame (checked by the cases above)")
    sock = connect(smb_server)
    sock.sendall(b"\x00\xff\xff\xff" + frame(negotiate()))
    assert_rejected(sock)


@pytest.mark.parametrize("size", [1000, 300_000])
def test_write_with_a_bad_signature_is_refused(server_process, smb_server, size):
    """A signed WRITE whose signature does not match is refused with
    STATUS_ACCESS_DENIED and nothing is written -- whether the server checks it
    in one pass (small) or while the frame arrives (large, AES-GMAC)."""
    from smbprotocol.connection import Connection
    from smbprotocol.exceptions import AccessDenied
    from smbprotocol.header import Commands
    from smbprotocol.open import (CreateDisposition, CreateOptions, FileAttributes,
                                  FilePipePrinterAccessMask, ImpersonationLevel, Open,
                                  ShareAccess)
    from smbprotocol.session import Session
    from smbprotocol.tree import TreeConnect

    name = f"badsig-{uuid.uuid4().hex[:8]}"
    conn = Connection(uuid.uuid4(), smb_server.host, smb_server.port, require_signing=True)
    conn.connect()
    try:
        session = Session(conn, smb_server.user, smb_server.password, require_encryption=False)
        session.connect()
        tree = TreeConnect(session, f"\\\\{smb_server.host}\\{smb_server.share}")
        tree.connect()
        handle = Open(tree, name)
        handle.create(ImpersonationLevel.Impersonation,
                      FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
                      FileAttributes.FILE_ATTRIBUTE_NORMAL, ShareAccess.FILE_SHARE_READ,
                      CreateDisposition.FILE_OVERWRITE_IF, CreateOptions.FILE_NON_DIRECTORY_FILE)
        good = conn._generate_signature

        def corrupt_writes(b_header, signing_key, message_id, response, command):
            sig = good(b_header, signing_key, message_id, response, command)
            if command == Commands.SMB2_WRITE and not response:
                sig = bytes([sig[0] ^ 1]) + sig[1:]
            return sig

        conn._generate_signature = corrupt_writes
        # The refusal cannot carry a valid signature (the server did not
        # accept the request's), as with Samba: look at its status only.
        verify = conn.verify_signature
        conn.verify_signature = lambda header, session_id, force=False: None
        with pytest.raises(AccessDenied):
            handle.write(os.urandom(size), 0)
        conn._generate_signature = good
        conn.verify_signature = verify
        assert (smb_server.share_dir / name).stat().st_size == 0
        data = os.urandom(size)
        handle.write(data, 0)
        assert handle.read(0, size) == data
        handle.close()
    finally:
        conn.disconnect()
    assert (smb_server.share_dir / name).read_bytes() == data
    assert_healthy(server_process, smb_server)


def session_setup_first_leg(message_id: int) -> bytes:
    """SESSION_SETUP (MS-SMB2 2.2.5) carrying a bare NTLMSSP NEGOTIATE, the
    first leg of a logon, for a new session."""
    token = b"NTLMSSP\x00" + struct.pack("<II", 1, 0x62088215) + bytes(16)
    body = struct.pack("<HBBIIHHQ", 25, 0, 1, 0, 0, 64 + 24, len(token), 0) + token
    return smb2_header(SESSION_SETUP, message_id=message_id) + body


@pytest.mark.skipif(os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
                    reason="Braid's cap on unfinished logons (Samba has none)")
def test_unfinished_logons_per_connection_are_capped(server_process, smb_server):
    """Logons begun and never finished each hold an NTLM exchange: one
    connection may have 16 at once; the next is refused with
    INSUFFICIENT_RESOURCES, and the server goes on serving."""
    more_processing, insufficient_resources = 0xC0000016, 0xC000009A
    sock = negotiated(smb_server)
    try:
        statuses = []
        for message_id in range(1, 18):
            sock.sendall(frame(session_setup_first_leg(message_id)))
            response = read_frame(sock)
            assert response is not None, f"closed after {statuses}"
            statuses.append(status_of(response))
        assert statuses == [more_processing] * 16 + [insufficient_resources], \
            [hex(s) for s in statuses]
    finally:
        sock.close()
    assert_healthy(server_process, smb_server)
