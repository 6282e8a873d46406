#!/usr/bin/env python3
"""What persistent handles cost (docs/BENCHMARKS.md, "Persistent handles").

1. A persistent open beside a durable one: one Braid with a state_dir, a
   continuously available share "ca" and a plain share "plain"; smbprotocol
   opens and closes a file N times with a DH2Q (persistent on "ca", durable
   with a batch oplock on "plain"), interleaved in rounds. Reported: opens/s
   and Braid's CPU per open (utime + stime), and the state store's synced
   writes per open (strace -c -f -e fsync,rename on a separate pass).
2. Writes on the CA share (write-through) beside the plain share: 1 MiB and
   4 KiB writes, MB/s and Braid's CPU per MiB.
3. Restart to first served request with R recorded persistent handles:
   records are made by opening R persistent handles for real (one client,
   one session), Braid is killed (SIGKILL) and started again; the time from
   the start to a completed NEGOTIATE+SESSION_SETUP+TREE_CONNECT+CREATE of
   another file, and to the log's "restored" line.

Usage: scripts/bench-persistent.py [--opens N] [--rounds K] [--records R]
Needs target/release/braid (cargo build --release -p braid) and
smbprotocol; runs on loopback."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "e2e"))
import servers  # noqa: E402
from bench_server_cost import cpu_seconds  # noqa: E402

from smbprotocol.connection import Capabilities, Connection  # noqa: E402
from smbprotocol.create_contexts import (  # noqa: E402
    CreateContextName, DurableHandleFlags, SMB2CreateContextRequest,
    SMB2CreateDurableHandleRequestV2)
from smbprotocol.open import (  # noqa: E402
    CreateDisposition, CreateOptions, FilePipePrinterAccessMask, ImpersonationLevel, Open,
    RequestedOplockLevel, ShareAccess)
from smbprotocol.session import Session  # noqa: E402
from smbprotocol.tree import TreeConnect  # noqa: E402

USER = "bench"
RW = FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE


class Braid:
    def __init__(self, base: Path):
        self.base = base
        self.state = base / "state"
        self.state.mkdir(mode=0o700)
        for d in ("ca", "plain"):
            (base / d).mkdir()
        self.password = "Pw-" + secrets.token_hex(8)
        self.port = servers.free_port()
        self.config = base / "braid.toml"
        self.config.write_text(
            f'listen = ["127.0.0.1:{self.port}"]\nadmin_listen = "off"\n'
            # One client holds every recorded handle of the restart test.
            "max_open_files = 100000\nmax_open_files_per_client = 100000\n"
            f'state_dir = "{self.state}"\n'
            f'[[share]]\nname = "ca"\npath = "{base / "ca"}"\ncontinuous_availability = true\n'
            f'[[share]]\nname = "plain"\npath = "{base / "plain"}"\n')
        self.log = base / "braid.log"
        self.proc = None

    def start(self) -> float:
        """Start; returns the monotonic time of the spawn."""
        t0 = time.monotonic()
        self.proc = servers._spawn([str(servers.BRAID_BIN), "serve", "--config",
                                    str(self.config), "--user", f"{USER}:{self.password}"],
                                   self.log, self.base)
        return t0

    def wait(self) -> None:
        servers.wait_until_accepting("127.0.0.1", self.port, self.proc, self.log)

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def client(braid: Braid, share: str) -> tuple[Connection, TreeConnect]:
    conn = Connection(uuid.uuid4(), "127.0.0.1", braid.port, require_signing=True)
    conn.client_capabilities |= Capabilities.SMB2_GLOBAL_CAP_PERSISTENT_HANDLES
    conn.connect(timeout=30)
    session = Session(conn, USER, braid.password, require_encryption=False)
    session.connect()
    tree = TreeConnect(session, rf"\\127.0.0.1\{share}")
    tree.connect()
    return conn, tree


def dh2q(persistent: bool) -> SMB2CreateContextRequest:
    req = SMB2CreateDurableHandleRequestV2()
    req["timeout"] = 60000
    req["flags"] = DurableHandleFlags.SMB2_DHANDLE_FLAG_PERSISTENT if persistent else 0
    req["create_guid"] = uuid.uuid4()
    ctx = SMB2CreateContextRequest()
    ctx["buffer_name"] = CreateContextName.SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2
    ctx["buffer_data"] = req
    return ctx


def durable_open(tree: TreeConnect, name: str, persistent: bool) -> Open:
    op = Open(tree, name)
    oplock = (RequestedOplockLevel.SMB2_OPLOCK_LEVEL_NONE if persistent
              else RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH)
    op.create(ImpersonationLevel.Impersonation, RW, 0x80, ShareAccess.FILE_SHARE_READ,
              CreateDisposition.FILE_OVERWRITE_IF, CreateOptions.FILE_NON_DIRECTORY_FILE,
              create_contexts=[dh2q(persistent)], oplock_level=oplock)
    return op


def open_loop(braid: Braid, tree: TreeConnect, persistent: bool, n: int) -> tuple[float, float]:
    """(opens/s, Braid CPU µs per open+close) of n open+close."""
    c0, t0 = cpu_seconds(braid.proc.pid), time.monotonic()
    for i in range(n):
        durable_open(tree, f"f{i % 16}.bin", persistent).close()
    c1, t1 = cpu_seconds(braid.proc.pid), time.monotonic()
    return n / (t1 - t0), (c1 - c0) / n * 1e6


def synced_writes_per_open(braid: Braid, tree: TreeConnect, persistent: bool, n: int) -> float:
    out = Path(tempfile.mktemp(prefix="bench-persistent-strace."))
    tracer = subprocess.Popen(["strace", "-c", "-f", "-e", "trace=fsync,fdatasync", "-o",
                               str(out), "-p", str(braid.proc.pid)], stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    for i in range(n):
        durable_open(tree, f"s{i % 16}.bin", persistent).close()
    time.sleep(0.5)
    tracer.send_signal(signal.SIGINT)
    tracer.wait()
    calls = 0
    for line in out.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[-1] in ("fsync", "fdatasync"):
            calls += int(parts[3])
    out.unlink()
    return calls / n


def write_loop(braid: Braid, tree: TreeConnect, size: int, total: int) -> tuple[float, float]:
    """(MB/s, Braid CPU ms per MiB) writing `total` bytes in `size` writes."""
    op = Open(tree, f"w{size}.bin")
    op.create(ImpersonationLevel.Impersonation, RW, 0x80, 0, CreateDisposition.FILE_OVERWRITE_IF,
              CreateOptions.FILE_NON_DIRECTORY_FILE)
    data = os.urandom(size)
    c0, t0 = cpu_seconds(braid.proc.pid), time.monotonic()
    for off in range(0, total, size):
        op.write(data, off)
    c1, t1 = cpu_seconds(braid.proc.pid), time.monotonic()
    op.close()
    mib = total / 2**20
    return total / (t1 - t0) / 1e6, (c1 - c0) / mib * 1e3


def restart_time(base: Path, records: int) -> dict:
    braid = Braid(base)
    braid.start()
    braid.wait()
    conn, tree = client(braid, "ca")
    for i in range(records):
        durable_open(tree, f"held{i}.bin", True)
    braid.kill()
    try:
        conn.disconnect(close=False)
    except Exception:
        pass
    # The store's journal (braid-fs state_journal.rs): one frame per
    # record, each starting with the seal's magic.
    stored = (braid.state / "smb-opens.journal").read_bytes().count(b"BRS1")
    offset = braid.log.stat().st_size
    t0 = braid.start()
    braid.wait()
    t_listen = time.monotonic() - t0
    conn, tree = client(braid, "ca")
    op = Open(tree, "first.bin")
    op.create(ImpersonationLevel.Impersonation, RW, 0x80, 0, CreateDisposition.FILE_OVERWRITE_IF,
              CreateOptions.FILE_NON_DIRECTORY_FILE)
    t_first = time.monotonic() - t0
    op.close()
    conn.disconnect()
    log = braid.log.read_bytes()[offset:].decode(errors="replace")
    restored = [ln for ln in log.splitlines() if "restored from the state store" in ln]
    servers.stop_pid(braid.proc.pid)
    return {"records": stored, "listening_s": round(t_listen, 3),
            "first_create_s": round(t_first, 3), "log": restored[-1][-160:] if restored else ""}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--opens", type=int, default=500)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--records", type=int, default=10000)
    p.add_argument("--write-mib", type=int, default=256)
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} cores; braid {servers.BRAID_BIN}")
    with tempfile.TemporaryDirectory(prefix="bench-persistent-") as tmp:
        base = Path(tmp)
        (base / "a").mkdir()
        braid = Braid(base / "a")
        braid.start()
        braid.wait()
        _, ca = client(braid, "ca")
        _, plain = client(braid, "plain")
        rates = {"durable": [], "persistent": []}
        for _ in range(args.rounds):
            for kind, tree, persistent in (("durable", plain, False), ("persistent", ca, True)):
                rates[kind].append(open_loop(braid, tree, persistent, args.opens))
        for kind, runs in rates.items():
            ops = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            print(f"open+close {kind:10s}: {ops:8.0f} /s  {cpu:7.1f} µs Braid CPU each"
                  f"  (median of {args.rounds} x {args.opens})")
        for kind, tree, persistent in (("durable", plain, False), ("persistent", ca, True)):
            print(f"fsync+fdatasync per open+close, {kind}: "
                  f"{synced_writes_per_open(braid, tree, persistent, 100):.2f}")
        for size in (2**20, 4096):
            total = args.write_mib * 2**20 if size == 2**20 else 8 * 2**20
            for kind, tree in (("plain", plain), ("ca (write-through)", ca)):
                mbs, cpu = write_loop(braid, tree, size, total)
                print(f"{size // 1024:5d} KiB writes, {kind:18s}: {mbs:8.1f} MB/s"
                      f"  {cpu:7.1f} ms Braid CPU per MiB")
        servers.stop_pid(braid.proc.pid)
        (base / "b").mkdir()
        print("restart:", json.dumps(restart_time(base / "b", args.records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
