#!/usr/bin/env python3
"""Kept fds over NFS (braid-fs `meta/fd_cache.rs`): open, read, close loops
over existing files, kept fds on against off, interleaved
(docs/BENCHMARKS.md section 9).

    scripts/bench-fd-cache-nfs.py [--braid BIN] [--reps N] [--count N] [--strace]

Two servers of one build (BIN, default target/release/braid), one NFS
export each of 100 small files made before the servers start, both with
`metadata_cache = true`; the "off" one with `metadata_cache_max_fds = 0`.
Each repetition runs --count opens (nfs-rs: OPEN, READ, CLOSE) against
each server in turn, the order reversed every other repetition. Server CPU
per operation is utime+stime of the server (/proc/PID/stat) around the run;
with --strace, the server's system calls per operation (`strace -c -f`; its
overhead makes the CPU figure meaningless then). One JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import nfs_rs  # noqa: E402
import servers  # noqa: E402
from bench_server_cost import measure  # noqa: E402

FILES = 100


def start(base: Path, keep: bool):
    share, work = base / "share", base / "server"
    share.mkdir()
    work.mkdir()
    for i in range(FILES):
        (share / f"f{i:04d}.txt").write_bytes(b"x" * 100)
    port, nfs_port = servers.free_port(), servers.free_port()
    top = "metadata_cache_max_fds = 256\n" if keep else "metadata_cache_max_fds = 0\n"
    (work / "braid.toml").write_text(
        top + f'[[share]]\nname = "s"\npath = {json.dumps(str(share))}\n'
        'protocols = ["nfs"]\nroot_squash = false\nmetadata_cache = true\n')
    argv = [str(servers.BRAID_BIN), "serve", "--config", str(work / "braid.toml"),
            "--listen", f"127.0.0.1:{port}", "--nfs-listen", f"127.0.0.1:{nfs_port}",
            "--user", f"{servers.DEFAULT_USER}:Pw-bench1"]
    proc = servers._spawn(argv, work / "braid.log", work)
    servers._wait_for_nfs("127.0.0.1", nfs_port, proc, work / "braid.log")
    client = nfs_rs.Client.connect(f"nfs://127.0.0.1:{nfs_port}/s?version=4.1", uid=0, gid=0,
                                   noresvport=True, connect_timeout=10, operation_timeout=30)
    return proc, client


def one(client, i: int) -> None:
    # A fixed length, not f.read() to EOF: nfs-rs closes the file while
    # its read-ahead READs are in flight, then sends those slots' old
    # sequence id again, which any server must answer with
    # NFS4ERR_RETRY_UNCACHED_REP (RFC 8881 2.10.6.1.3; seen on the wire,
    # 2026-11-28).
    with client.open(f"f{i % FILES:04d}.txt", "rb") as f:
        f.read(100)


def run(proc, client, a) -> dict:
    for i in range(FILES):
        one(client, i)
    return measure(proc.pid, a.count, lambda i: one(client, i), a.strace)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--braid", type=Path, default=REPO / "target/release/braid")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--strace", action="store_true")
    a = ap.parse_args()
    servers.BRAID_BIN = a.braid.resolve()
    with tempfile.TemporaryDirectory(prefix="braid-fdnfs.", dir="/var/tmp") as d:
        procs = {}
        try:
            for keep in (False, True):
                base = Path(d) / ("on" if keep else "off")
                base.mkdir()
                procs[keep] = start(base, keep)
            for rep in range(a.reps):
                for keep in ((False, True) if rep % 2 == 0 else (True, False)):
                    r = run(*procs[keep], a)
                    print(json.dumps(dict(kept_fds=keep, rep=rep, load1=os.getloadavg()[0],
                                          **r)), flush=True)
        finally:
            for proc, client in procs.values():
                try:
                    client.close()
                except Exception:
                    pass
                proc.kill()
                proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
