#!/usr/bin/env python3
"""Braid vs Samba: what signing and encryption cost, with `braid bench` as the
client (for docs/BENCHMARKS.md, issue 3).

    scripts/bench-security.py [--reps N] [--duration S] [--io-size 1m]
                              [--queue-depth N] [--file-size 1g] [--out FILE]

Both servers serve one share directory on loopback (tests/e2e/servers.py;
Braid with --signing enabled so that "plain" is unsigned on both). For every
repetition, security setting (plain = SMB 3.0.2 unsigned, sign = 3.1.1
AES-128-GMAC, encrypt = 3.1.1 AES-128-GCM), pattern (sequential read,
sequential write) and server, interleaved, it runs one `braid bench` of
--duration seconds (1 thread, --queue-depth requests in flight, --io-size
I/Os over one --file-size file) and records the throughput, the server's CPU
(utime+stime of its process tree) and the client's, per GiB moved. Prints a
Markdown table of medians: each server's throughput kept against its own
plain run, and Braid against Samba. Every read run starts with both files
held in the page cache (re-pinned before it: an O_DIRECT write by Braid
drops the cached pages it overwrites, so a read run after a write run would
otherwise measure Braid's disk reads against Samba's cached ones).

Unlike smbclient (one request stream, ~2 x 8 MiB in flight, GnuTLS on one
thread), braid bench keeps a deep queue and runs its crypto on aws-lc, so
what is measured is more the server's cost than the client's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import servers  # noqa: E402

SECURITY = ["plain", "sign", "encrypt"]
PATTERNS = ["read", "write"]


def steal_and_total() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return fields[7], sum(fields)


def run_bench(srv: servers.Server, args, security: str, rw: str, duration: float,
              warmup: float) -> dict:
    argv = [str(servers.BRAID_BIN), "bench", "--target",
            f"//{srv.host}:{srv.port}/{srv.share}", "-u", srv.user,
            "-b", args.io_size, "-t", "1", "-o", str(args.queue_depth), "--files", "1",
            "--file-size", args.file_size, "-d", str(duration), "--warmup", str(warmup),
            "--security", security, "--rw", rw, "--dir", f"bench-{srv.target}",
            "--quiet", "--json"]
    env = dict(os.environ, BRAID_PASSWORD=srv.password)
    cpu0, n0 = servers.tree_cpu(srv.pid)
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # smbd serves the connection from a child that exits after it closes.
    cpu1, _ = servers.settled_tree_cpu(srv.pid, n0)
    if out.returncode != 0:
        raise RuntimeError(f"braid bench failed on {srv.target}:\n{out.stderr}")
    report = json.loads(out.stdout)
    client = (kids1.ru_utime + kids1.ru_stime) - (kids0.ru_utime + kids0.ru_stime)
    # CPU counts the warm-up too; so do the bytes over the whole run.
    gib_total = report["total"]["bytes"] / 2**30 * (duration + warmup) / duration
    return {
        "mib_s": report["total"]["mib_s"],
        "server_cpu": (cpu1 - cpu0) / gib_total,
        "client_cpu": client / gib_total,
        "errors": report["total"]["errors"],
    }


def repin(old: subprocess.Popen | None, files: list[str]) -> subprocess.Popen:
    """(Re)start scripts/pin-in-cache.py on files; returns once they are resident."""
    if old is not None:
        old.send_signal(signal.SIGTERM)
        old.wait()
    pin = subprocess.Popen([sys.executable, str(REPO / "scripts" / "pin-in-cache.py"), *files],
                           stdout=subprocess.PIPE, text=True)
    pin.stdout.readline()
    return pin


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=8)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--io-size", default="1m")
    ap.add_argument("--queue-depth", type=int, default=8)
    ap.add_argument("--file-size", default="1g")
    ap.add_argument("--out")
    args = ap.parse_args()
    os.environ.setdefault("BRAID_EXTRA_ARGS", "--signing enabled")

    work = Path(tempfile.mkdtemp(prefix="braid-secbench.", dir="/var/tmp"))
    share = work / "share"
    share.mkdir()
    started: list[servers.Server] = []
    pin = None
    try:
        for target in ("braid", "samba"):
            (work / target).mkdir()
            started.append(servers.start(target, share, work / target))
            print(f"{target}: pid {started[-1].pid}, port {started[-1].port}", file=sys.stderr)
        # Each server gets its own bench file, created by a short write run,
        # then held in the page cache (scripts/pin-in-cache.py says why).
        for srv in started:
            run_bench(srv, args, "plain", "write", 2, 0)
        files = [str(p) for p in share.glob("bench-*/*") if p.is_file()]

        results: dict[tuple[str, str, str], list[dict]] = {}
        steal0, total0 = steal_and_total()
        for rep in range(1, args.reps + 1):
            for security in SECURITY:
                for rw in PATTERNS:
                    if rw == "read":
                        # Braid's large writes bypass the page cache, and an
                        # O_DIRECT write drops the cached pages it overwrites
                        # (the pin's included): a read run right after a
                        # Braid write run would start from a cold file and
                        # measure the disk. Re-pin before every read run so
                        # both servers read the same, cached data.
                        pin = repin(pin, files)
                    for srv in started:
                        r = run_bench(srv, args, security, rw, args.duration, args.warmup)
                        results.setdefault((security, rw, srv.target), []).append(r)
                        print(f"{srv.target:5s} {security:7s} {rw:5s} #{rep}: "
                              f"{r['mib_s']:6.0f} MiB/s, server {r['server_cpu']:.2f} "
                              f"client {r['client_cpu']:.2f} CPU-s/GiB", file=sys.stderr)
        steal1, total1 = steal_and_total()
    finally:
        if pin is not None:
            pin.send_signal(signal.SIGTERM)
        for srv in started:
            srv.stop()
        subprocess.run(["rm", "-rf", str(work)], check=False)

    def med(sec, rw, target, key):
        vals = [r[key] for r in results[sec, rw, target]]
        return statistics.median(vals)

    steal = 100 * (steal1 - steal0) / max(1, total1 - total0)
    lines = [
        f"`braid bench`, 1 thread, queue depth {args.queue_depth}, {args.io_size} sequential "
        f"I/O over a {args.file_size} file, {args.duration:.0f} s per run; median of "
        f"{args.reps} runs, interleaved; CPU-seconds per GiB moved. {os.cpu_count()} CPUs, "
        f"{os.uname().release}; CPU time stolen by the hypervisor during the run: {steal:.1f}%.",
        "",
        "| security | pattern | Braid MiB/s | Samba MiB/s | Braid/Samba | Braid CPU s/GiB "
        "| Samba CPU s/GiB | Braid/Samba | kept by Braid | kept by Samba "
        "| client CPU s/GiB (Braid, Samba) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for sec in SECURITY:
        for rw in PATTERNS:
            b, s = med(sec, rw, "braid", "mib_s"), med(sec, rw, "samba", "mib_s")
            bc, sc = med(sec, rw, "braid", "server_cpu"), med(sec, rw, "samba", "server_cpu")
            kb = b / med("plain", rw, "braid", "mib_s")
            ks = s / med("plain", rw, "samba", "mib_s")
            cb, cs = med(sec, rw, "braid", "client_cpu"), med(sec, rw, "samba", "client_cpu")
            lines.append(f"| {sec} | {rw} | {b:.0f} | {s:.0f} | {b / s:.2f} | {bc:.2f} | "
                         f"{sc:.2f} | {bc / sc:.2f} | {100 * kb:.0f}% | {100 * ks:.0f}% | "
                         f"{cb:.2f}, {cs:.2f} |")
    errors = sum(r["errors"] for rs in results.values() for r in rs)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if errors:
        print(f"{errors} I/O errors reported by braid bench", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
