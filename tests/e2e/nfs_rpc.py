"""A tiny ONC RPC (RFC 5531) client over TCP, standard library only.

The harness uses it to wait until an NFS server answers (the NULL procedure
of program 100003 version 4, with AUTH_NONE) instead of sleeping; hostile-
input tests can use its record marking (RFC 5531 section 11) to send raw
records of their own.

    python3 tests/e2e/nfs_rpc.py ping HOST:PORT       # one NULL call, prints the reply
    python3 tests/e2e/nfs_rpc.py wait HOST:PORT [-t SECONDS]
                                                      # until a NULL call succeeds

Exit status 0 when the server answered the NULL call with SUCCESS.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import time
from typing import NamedTuple

NFS_PROGRAM = 100003
NFS_V4 = 4
NULLPROC = 0

CALL, REPLY = 0, 1
MSG_ACCEPTED, MSG_DENIED = 0, 1
AUTH_NONE, AUTH_SYS = 0, 1
ACCEPT_STATS = {0: "SUCCESS", 1: "PROG_UNAVAIL", 2: "PROG_MISMATCH", 3: "PROC_UNAVAIL",
                4: "GARBAGE_ARGS", 5: "SYSTEM_ERR"}
REJECT_STATS = {0: "RPC_MISMATCH", 1: "AUTH_ERROR"}
LAST_FRAGMENT = 0x80000000
MAX_RECORD = 64 << 20


class RpcError(Exception):
    """The peer broke the protocol, or closed the connection mid-record."""


class Reply(NamedTuple):
    xid: int
    accepted: bool
    # accept_stat name (SUCCESS, PROG_MISMATCH, ...) when accepted, else
    # reject_stat name (RPC_MISMATCH, AUTH_ERROR).
    status: str
    # PROG_MISMATCH / RPC_MISMATCH: (low, high); AUTH_ERROR: (auth_stat,).
    detail: tuple[int, ...]
    # The procedure's results (SUCCESS only), undecoded.
    body: bytes

    @property
    def ok(self) -> bool:
        return self.accepted and self.status == "SUCCESS"


def xdr_opaque(data: bytes) -> bytes:
    """Variable-length opaque: length, bytes, zero padding to 4."""
    return struct.pack(">I", len(data)) + data + b"\0" * (-len(data) % 4)


def auth_none() -> tuple[int, bytes]:
    return AUTH_NONE, b""


def auth_sys(uid: int = 0, gid: int = 0, machine: str = "braid-test",
             gids: tuple[int, ...] = (), stamp: int = 0) -> tuple[int, bytes]:
    """An AUTH_SYS credential (RFC 5531 appendix A): (flavor, body)."""
    body = (struct.pack(">I", stamp) + xdr_opaque(machine.encode())
            + struct.pack(">II", uid, gid) + struct.pack(">I", len(gids))
            + b"".join(struct.pack(">I", g) for g in gids))
    return AUTH_SYS, body


def encode_call(xid: int, prog: int, vers: int, proc: int, args: bytes = b"",
                cred: tuple[int, bytes] = (AUTH_NONE, b""),
                verf: tuple[int, bytes] = (AUTH_NONE, b"")) -> bytes:
    """The RPC message of a CALL (without its record mark)."""
    return (struct.pack(">IIIIII", xid, CALL, 2, prog, vers, proc)
            + struct.pack(">I", cred[0]) + xdr_opaque(cred[1])
            + struct.pack(">I", verf[0]) + xdr_opaque(verf[1]) + args)


def record(message: bytes, fragment: int | None = None) -> bytes:
    """message with record marking: one fragment, or fragments of at most
    `fragment` bytes, the last one flagged."""
    size = fragment or max(len(message), 1)
    pieces = [message[i:i + size] for i in range(0, len(message), size)] or [b""]
    out = []
    for i, piece in enumerate(pieces):
        last = LAST_FRAGMENT if i == len(pieces) - 1 else 0
        out.append(struct.pack(">I", last | len(piece)) + piece)
    return b"".join(out)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RpcError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_record(sock: socket.socket, limit: int = MAX_RECORD) -> bytes:
    """One whole record (all its fragments) from sock."""
    out = bytearray()
    while True:
        (mark,) = struct.unpack(">I", _read_exact(sock, 4))
        size = mark & ~LAST_FRAGMENT
        if len(out) + size > limit:
            raise RpcError(f"record longer than {limit} bytes")
        out += _read_exact(sock, size)
        if mark & LAST_FRAGMENT:
            return bytes(out)


def parse_reply(message: bytes) -> Reply:
    def u32(off: int) -> int:
        if off + 4 > len(message):
            raise RpcError(f"reply cut short at byte {off} of {len(message)}")
        return struct.unpack_from(">I", message, off)[0]

    xid, mtype, stat = u32(0), u32(4), u32(8)
    if mtype != REPLY:
        raise RpcError(f"message type {mtype}, not REPLY")
    if stat == MSG_ACCEPTED:
        verf_len = u32(16)
        off = 20 + verf_len + (-verf_len % 4)
        accept = u32(off)
        off += 4
        name = ACCEPT_STATS.get(accept, f"accept_stat {accept}")
        if accept == 2:
            return Reply(xid, True, name, (u32(off), u32(off + 4)), b"")
        return Reply(xid, True, name, (), message[off:] if accept == 0 else b"")
    if stat == MSG_DENIED:
        reject = u32(12)
        name = REJECT_STATS.get(reject, f"reject_stat {reject}")
        detail = (u32(16), u32(20)) if reject == 0 else (u32(16),)
        return Reply(xid, False, name, detail, b"")
    raise RpcError(f"reply_stat {stat}")


def call(sock: socket.socket, prog: int, vers: int, proc: int, args: bytes = b"",
         cred: tuple[int, bytes] = (AUTH_NONE, b""), xid: int | None = None) -> Reply:
    """Send one CALL on a connected socket and read its REPLY."""
    xid = xid if xid is not None else int.from_bytes(os.urandom(4), "big")
    sock.sendall(record(encode_call(xid, prog, vers, proc, args, cred)))
    reply = parse_reply(read_record(sock))
    if reply.xid != xid:
        raise RpcError(f"reply xid {reply.xid:#x}, call xid {xid:#x}")
    return reply


def null_ping(host: str, port: int, timeout: float = 5.0,
              prog: int = NFS_PROGRAM, vers: int = NFS_V4) -> Reply:
    """Connect, call NULL (AUTH_NONE), close. Raises OSError or RpcError."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        return call(sock, prog, vers, NULLPROC)


def wait_for_null(host: str, port: int, timeout: float = 30.0, alive=None) -> Reply:
    """Call NULL until it succeeds; `alive()` (optional) says whether the
    server process still runs. Raises RuntimeError when it does not
    answer in time, or died."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            raise RuntimeError(f"the NFS server on {host}:{port} exited before answering NULL")
        try:
            reply = null_ping(host, port, timeout=2.0)
            if reply.ok:
                return reply
            last = f"NULL answered {reply.status} {reply.detail}"
        except (OSError, RpcError) as e:
            last = str(e) or type(e).__name__
        time.sleep(0.1)
    raise RuntimeError(f"no NFS NULL answer from {host}:{port} within {timeout}s ({last})")


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cmd", choices=["ping", "wait"])
    p.add_argument("address", help="HOST:PORT")
    p.add_argument("-t", "--timeout", type=float, default=30.0)
    args = p.parse_args()
    host, port = _address(args.address)
    try:
        if args.cmd == "ping":
            reply = null_ping(host, port, timeout=args.timeout)
        else:
            reply = wait_for_null(host, port, timeout=args.timeout)
    except (OSError, RpcError, RuntimeError) as e:
        print(f"{host}:{port}: {e}")
        return 1
    print(f"{host}:{port}: NULL {'accepted' if reply.accepted else 'denied'} {reply.status}"
          + (f" {reply.detail}" if reply.detail else ""))
    return 0 if reply.ok else 1


if __name__ == "__main__":
    sys.exit(main())
