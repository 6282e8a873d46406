"""smbprotocol helpers shared by the e2e tests: `Remote`, one session of
its high-level `smbclient` module in one test directory; `RawClient`, one
connection, session and tree connect of its low-level API, for requests
the high-level module cannot make (security descriptors, durable handles,
offsets of one's choosing); and builders of security descriptors."""

from __future__ import annotations

import contextlib
import queue
import secrets
import struct
import threading
import uuid
from pathlib import Path

import smbclient
from smbprotocol.connection import Connection
from smbprotocol.create_contexts import (
    CreateContextName,
    SMB2CreateContextRequest,
    SMB2CreateRequestLeaseV2,
)
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    ImpersonationLevel,
    Open,
    RequestedOplockLevel,
    ShareAccess,
    SMB2LockElement,
    SMB2QueryInfoRequest,
    SMB2QueryInfoResponse,
    SMB2SetInfoRequest,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

import servers

SMB2_0_INFO_SECURITY = 3
OWNER, GROUP, DACL = 1, 2, 4
FILE_ALL_ACCESS = 0x1F01FF
NORMAL, DIRECTORY = 0x80, 0x10
SHARE_ALL = (ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE
             | ShareAccess.FILE_SHARE_DELETE)



def lock_element(offset: int, length: int, flags: int) -> SMB2LockElement:
    """One range of an SMB2 LOCK request."""
    e = SMB2LockElement()
    e["offset"] = offset
    e["length"] = length
    e["flags"] = flags
    return e

class Remote:
    """Paths and call options for one smbprotocol session in one test directory."""

    def __init__(self, target, directory: str, encrypt: bool = False):
        self.target = target
        self.directory = directory
        self.encrypt = encrypt
        self.cache: dict = {}
        self.kw = {"port": target.port, "connection_cache": self.cache}
        self.session = smbclient.register_session(
            target.host, username=target.user, password=target.password, port=target.port,
            encrypt=encrypt, require_signing=True, connection_cache=self.cache)

    def path(self, *parts: str) -> str:
        return "\\".join([f"\\\\{self.target.host}\\{self.target.share}", self.directory, *parts])

    def local(self, *parts: str):
        return self.target.share_dir.joinpath(self.directory, *parts)

    def write(self, name: str, data: bytes) -> None:
        with smbclient.open_file(self.path(name), mode="wb", **self.kw) as f:
            f.write(data)

    def read(self, name: str) -> bytes:
        with smbclient.open_file(self.path(name), mode="rb", **self.kw) as f:
            return f.read()

    def close(self) -> None:
        smbclient.reset_connection_cache(connection_cache=self.cache)


@contextlib.contextmanager
def user_tree(port: int, user: str, password: str, share: str, host: str = "127.0.0.1"):
    """A tree connect to `share` as `user` on its own connection (signed as
    the server asks, unencrypted), disconnected afterwards."""
    conn = Connection(uuid.uuid4(), host, port)
    conn.connect()
    try:
        session = Session(conn, user, password, require_encryption=False)
        session.connect()
        tree = TreeConnect(session, rf"\\{host}\{share}")
        tree.connect()
        yield tree
    finally:
        conn.disconnect()


def signed_session(port: int, user: str, password: str) -> dict:
    """The keyword arguments that make `smbclient` calls go through a new
    signed session of `user` on 127.0.0.1:`port` (its own connection
    cache, for `smbclient.reset_connection_cache`)."""
    cache: dict = {}
    smbclient.register_session("127.0.0.1", username=user, password=password, port=port,
                               require_signing=True, connection_cache=cache)
    return {"port": port, "connection_cache": cache}


def unc(share: str, name: str) -> str:
    return f"\\\\127.0.0.1\\{share}\\{name}"


def write_file(kw: dict, share: str, name: str, data: bytes) -> None:
    """Write `data` as the whole of file or stream `name` (created or
    overwritten) through a session from `signed_session`."""
    with smbclient.open_file(unc(share, name), mode="wb", **kw) as f:
        f.write(data)


def read_file(kw: dict, share: str, name: str) -> bytes:
    with smbclient.open_file(unc(share, name), mode="rb", **kw) as f:
        return f.read()


@contextlib.contextmanager
def option_share_server(kind: str, shares: Path, work: Path):
    """Braid or Samba (`kind`) serving servers.OPTION_SHARES from `shares`,
    with a signed session: yields its `smbclient` keyword arguments. The
    two servers in turn over one `shares` read each other's files."""
    (work / "default").mkdir(parents=True)
    (work / "server").mkdir()
    start = servers.start_braid if kind == "braid" else servers.start_samba
    srv = start(work / "default", work / "server", option_shares=shares)
    try:
        kw = signed_session(srv.port, srv.user, srv.password)
        try:
            yield kw
        finally:
            smbclient.reset_connection_cache(connection_cache=kw["connection_cache"])
    finally:
        srv.stop()


@contextlib.contextmanager
def braid_share(base: Path, options: str):
    """Braid serving `base`/mac as share "mac" with the share keys
    `options` (TOML lines), and a signed session of a user of its own:
    yields (`smbclient` keyword arguments, the share's directory)."""
    share = base / "mac"
    share.mkdir()
    passwords = {"alice": "Pw-" + secrets.token_hex(8)}
    config = f'[[share]]\nname = "mac"\npath = "{share}"\n{options}'
    proc, port = servers.start_braid_with_config(base, config, passwords)
    try:
        kw = signed_session(port, "alice", passwords["alice"])
        try:
            yield kw, share
        finally:
            smbclient.reset_connection_cache(connection_cache=kw["connection_cache"])
    finally:
        servers.stop_pid(proc.pid)


class RawClient:
    """One signed connection, session and tree connect to the share."""

    def __init__(self, target):
        self.conn = Connection(uuid.uuid4(), target.host, port=target.port, require_signing=True)
        self.conn.connect()
        self.session = Session(self.conn, target.user, target.password, require_encryption=False)
        self.session.connect()
        self.tree = TreeConnect(self.session, rf"\\{target.host}\{target.share}")
        self.tree.connect()

    def open(self, name: str, access: int, disposition=CreateDisposition.FILE_OPEN) -> Open:
        op = Open(self.tree, name)
        op.create(ImpersonationLevel.Impersonation, access, NORMAL, SHARE_ALL,
                  disposition, CreateOptions.FILE_NON_DIRECTORY_FILE)
        return op

    def open_cached(self, name: str, access: int, *, oplock: int = 0,
                    lease: int | None = None) -> Open:
        """Open an existing file asking for `oplock` (RequestedOplockLevel)
        or, given `lease` (a lease state: R 1, H 2, W 4), a version 2 lease
        with a fresh key; `op.oplock_level` and `lease_state(op)` say what
        was granted."""
        op = Open(self.tree, name)
        contexts = None
        if lease is not None:
            oplock = RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE
            req = SMB2CreateRequestLeaseV2()
            req["lease_key"] = uuid.uuid4().bytes
            req["lease_state"] = lease
            req["parent_lease_key"] = b"\0" * 16
            req["epoch"] = b"\0\0"
            ctx = SMB2CreateContextRequest()
            ctx["buffer_name"] = CreateContextName.SMB2_CREATE_REQUEST_LEASE_V2
            ctx["buffer_data"] = req
            contexts = [ctx]
        replies = op.create(ImpersonationLevel.Impersonation, access, NORMAL, SHARE_ALL,
                            CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE,
                            create_contexts=contexts, oplock_level=oplock)
        op.granted_lease = None
        for reply in replies or []:
            if hasattr(reply, "fields") and "lease_state" in reply.fields:
                op.granted_lease = reply["lease_state"].get_value()
        return op

    def open_dir(self, name: str, access: int, disposition=CreateDisposition.FILE_OPEN) -> Open:
        op = Open(self.tree, name)
        op.create(ImpersonationLevel.Impersonation, access, DIRECTORY, SHARE_ALL,
                  disposition, CreateOptions.FILE_DIRECTORY_FILE)
        return op

    def _send(self, req):
        request = self.conn.send(req, sid=self.session.session_id, tid=self.tree.tree_connect_id)
        return self.conn.receive(request)

    def query_sd(self, op: Open, info: int) -> bytes:
        req = SMB2QueryInfoRequest()
        req["info_type"] = SMB2_0_INFO_SECURITY
        req["file_info_class"] = 0
        req["output_buffer_length"] = 65536
        req["additional_information"] = info
        req["file_id"] = op.file_id
        resp = SMB2QueryInfoResponse()
        resp.unpack(self._send(req)["data"].get_value())
        return resp["buffer"].get_value()

    def set_sd(self, op: Open, info: int, sd: bytes) -> None:
        req = SMB2SetInfoRequest()
        req["info_type"] = SMB2_0_INFO_SECURITY
        req["file_info_class"] = 0
        req["additional_information"] = info
        req["file_id"] = op.file_id
        req["buffer"] = sd
        self._send(req)

    def drop(self) -> None:
        """Lose the TCP connection without LOGOFF or TREE_DISCONNECT."""
        self.conn.transport.close()

    def close(self) -> None:
        try:
            self.conn.disconnect(close=True)
        except Exception:
            pass


class Breaks:
    """The oplock and lease break notifications (MS-SMB2 2.2.23) the server
    sends on one smbprotocol connection. smbprotocol has no use for them:
    its receive loop looks every message up among its own requests by
    MessageId, and a break's, all ones, is none of them. This puts a sink
    under that MessageId, so the loop hands each break to it as a reply."""

    MESSAGE_ID = 0xFFFFFFFFFFFFFFFF

    def __init__(self, conn: Connection):
        self.queue: queue.Queue = queue.Queue()
        conn.outstanding_requests[self.MESSAGE_ID] = _BreakSink(self.queue)

    def next(self, timeout: float) -> dict | None:
        """The next break, or None if none came within `timeout` seconds:
        {"oplock": level, "file_id": bytes} or {"lease_key": bytes,
        "current": state, "new": state, "ack_required": bool}."""
        try:
            body = self.queue.get(timeout=timeout)
        except queue.Empty:
            return None
        (size,) = struct.unpack_from("<H", body)
        if size == 24:
            return {"oplock": body[2], "file_id": body[8:24]}
        flags, key, current, new = struct.unpack_from("<I16sII", body, 4)
        return {"lease_key": key, "current": current, "new": new,
                "ack_required": bool(flags & 1)}


class _BreakSink:
    """What smbprotocol's receive loop touches of a request it answers."""

    def __init__(self, out: queue.Queue):
        self._out = out
        self.session_id = None
        self.async_id = None
        self.response_event = threading.Event()
        self.response_event_lock = threading.Lock()
        self.message = {"reserved": _Value(0), "command": _Value(0x12)}

    @property
    def response(self):
        return None

    @response.setter
    def response(self, header):
        self._out.put(header["data"].get_value())


class _Value:
    def __init__(self, value):
        self._value = value

    def get_value(self):
        return self._value


# Security descriptors (MS-DTYP 2.4.6, self-relative).

SYSTEM = bytes([1, 1, 0, 0, 0, 0, 0, 5]) + struct.pack("<I", 18)  # S-1-5-18
ACCESS_ALLOWED, ACCESS_DENIED = 0, 1
OI, CI = 0x1, 0x2


def owner_sid(sd: bytes) -> bytes:
    """The owner SID bytes of a self-relative descriptor."""
    off = struct.unpack_from("<I", sd, 4)[0]
    count = sd[off + 1]
    return sd[off:off + 8 + 4 * count]


def dacl_of(sd: bytes) -> bytes:
    """The DACL bytes of a self-relative descriptor."""
    off = struct.unpack_from("<I", sd, 16)[0]
    return sd[off:off + struct.unpack_from("<H", sd, off + 2)[0]]


def ace(ace_type: int, mask: int, sid: bytes, flags: int = 0) -> bytes:
    return struct.pack("<BBHI", ace_type, flags, 8 + len(sid), mask) + sid


def acl(aces: list[bytes]) -> bytes:
    body = b"".join(aces)
    return struct.pack("<BBHHH", 2, 0, 8 + len(body), len(aces), 0) + body


def descriptor_with_dacl(aces: list[bytes]) -> bytes:
    # Revision 1, SE_SELF_RELATIVE | SE_DACL_PRESENT, DACL right after the header.
    return struct.pack("<BBHIIII", 1, 0, 0x8004, 0, 0, 0, 20) + acl(aces)
