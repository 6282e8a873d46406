#!/usr/bin/env python3
"""The metadata cache's attribute layer on vs off: SMB stats and listings of
settled files, interleaved (docs/BENCHMARKS.md section 9).

    scripts/bench-attr-cache.py [--braid BIN] [--reps N] [--count N]
        [--list] [--strace]

Two servers of one build (BIN, default target/release/braid), one share
each, `metadata_cache` off and on, each share holding 100 files (1,000
with --list) made before the servers start. After a warm-up pass, each
repetition runs --count `smbclient.stat`s (CREATE, QUERY_INFO, CLOSE),
or with --list --count listings of the share's root (`smbclient.scandir`),
against each server in turn, the order reversed every other repetition.
Server CPU per operation is utime+stime of the server (/proc/PID/stat)
around the run; with --strace, the server's system calls per operation
(`strace -c -f`; its own overhead makes the CPU figure meaningless then).
Prints one JSON line per run.

With --fds both servers have the metadata cache on and only the kept fds
differ (`metadata_cache_max_fds = 0` for the "off" one): what keeping the
fds of closed files (braid-fs `meta/fd_cache.rs`) saves a stat.
"""
import argparse
import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import servers  # noqa: E402
from bench_server_cost import measure  # noqa: E402
import smbclient  # noqa: E402


def start(base: Path, cache: bool, files: int, fds_only: bool = False):
    share, work = base / "share", base / "server"
    share.mkdir()
    work.mkdir()
    for i in range(files):
        (share / f"f{i:04d}.txt").write_bytes(b"x")
    servers.give_to_share_owner(share, *share.iterdir())
    port, password = servers.free_port(), "Pw-" + secrets.token_hex(6)
    top = ""
    if fds_only:
        top = "metadata_cache_max_fds = 256\n" if cache else "metadata_cache_max_fds = 0\n"
        cache = True
    (work / "braid.toml").write_text(
        top + f'[[share]]\nname = "s"\npath = {json.dumps(str(share))}\n'
        f'metadata_cache = {"true" if cache else "false"}\n')
    argv = [str(servers.BRAID_BIN), "serve", "--config", str(work / "braid.toml"),
            "--listen", f"127.0.0.1:{port}", "--user", f"{servers.DEFAULT_USER}:{password}"]
    proc = servers._spawn(argv, work / "braid.log", work)
    servers.wait_until_accepting("127.0.0.1", port, proc, work / "braid.log")
    return proc, dict(port=port, username=servers.DEFAULT_USER, password=password)


def one(kw: dict, i: int, listing: bool, files: int) -> None:
    if listing:
        list(smbclient.scandir(r"\\127.0.0.1\s", **kw))
    else:
        smbclient.stat(rf"\\127.0.0.1\s\f{i % files:04d}.txt", **kw)


def run(proc, kw, a, files) -> dict:
    for i in range(files if not a.list else 2):
        one(kw, i, a.list, files)
    return measure(proc.pid, a.count, lambda i: one(kw, i, a.list, files), a.strace)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--braid", type=Path, default=REPO / "target/release/braid")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--list", action="store_true", help="listings instead of stats")
    ap.add_argument("--strace", action="store_true")
    ap.add_argument("--fds", action="store_true",
                    help="cache on in both; only the kept fds differ")
    a = ap.parse_args()
    servers.BRAID_BIN = a.braid.resolve()
    files = 1000 if a.list else 100
    with tempfile.TemporaryDirectory(prefix="braid-attr.", dir="/var/tmp") as d:
        procs = {}
        try:
            for cache in (False, True):
                base = Path(d) / ("on" if cache else "off")
                base.mkdir()
                procs[cache] = start(base, cache, files, a.fds)
            time.sleep(0.3)  # every file older than the layer's 50 ms margin
            for rep in range(a.reps):
                for cache in ((False, True) if rep % 2 == 0 else (True, False)):
                    r = run(*procs[cache], a, files)
                    print(json.dumps(dict(cache=cache, rep=rep, load1=os.getloadavg()[0], **r)),
                          flush=True)
        finally:
            for proc, _ in procs.values():
                proc.kill()
                proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
