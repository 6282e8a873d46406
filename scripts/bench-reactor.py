#!/usr/bin/env python3
"""Two Braid builds beside nfs-ganesha in one interleaved `braid bench
compare` run: by default main's build as `spawn` (every COMPOUND handed to
a blocking-pool thread) and this worktree's as `reactor` (a COMPOUND starts
on the reactor and moves to the pool at its first operation that may wait;
docs/BENCHMARKS.md section 7, "Starting the COMPOUND on the reactor").
The sibling of scripts/bench-exec-mode.py, which compares modes of one
build; this one compares builds, so it measures any two commits.

Each binary is copied first (a rebuild during the run changes nothing).
Prints each repetition (ops/s and server CPU µs per operation, utime +
stime of the server's process tree over the measured window), the
medians, and each build's median per-repetition ratio to the first one,
with the load average at the start and the end.

Usage: python3 scripts/bench-reactor.py
       [--builds spawn=/work/main/target/release/braid,reactor=target/release/braid]
       [--profiles metadata,fio-randread-4k] [--reps 5] [--duration 5]
       [--no-ganesha] [--summarize compare.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import servers  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_exec_mode", ROOT / "scripts" / "bench-exec-mode.py")
bench_exec_mode = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_exec_mode)
loadavg = bench_exec_mode.loadavg
summarize = bench_exec_mode.summarize


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--builds",
                    default=f"spawn=/work/main/target/release/braid,"
                            f"reactor={ROOT / 'target' / 'release' / 'braid'}")
    ap.add_argument("--profiles", default="metadata,fio-randread-4k")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--no-ganesha", action="store_true")
    ap.add_argument("--summarize", type=Path, help="only print the summary of a compare.json")
    args = ap.parse_args()
    builds = [b.split("=", 1) for b in args.builds.split(",")]
    if any(len(b) != 2 for b in builds):
        ap.error("--builds is label=path[,label=path...]")
    if args.summarize:
        summarize(args.summarize, builds[0][0])
        return 0

    base = Path(tempfile.mkdtemp(prefix="braid-reactor-", dir="/var/tmp"))
    started = []
    targets: list[tuple[str, int, int]] = []
    default_bin = servers.BRAID_BIN
    try:
        if not args.no_ganesha:
            for d in ("ganesha", "ganesha-work"):
                (base / d).mkdir()
            g = servers.start_nfs("ganesha", base / "ganesha", base / "ganesha-work")
            started.append(g)
            targets.append(("ganesha", g.port, g.pid))
        for label, path in builds:
            binary = base / f"braid-{label}"
            shutil.copy2(path, binary)
            for d in (label, f"{label}-work"):
                (base / d).mkdir()
            servers.BRAID_BIN = binary
            b = servers.start_nfs("braid", base / label, base / f"{label}-work")
            started.append(b)
            targets.append((label, b.port, b.pid))
        servers.BRAID_BIN = default_bin
        # The load generator: this worktree's build.
        argv = [str(default_bin), "bench", "compare", "--profiles", args.profiles,
                "--reps", str(args.reps), "--duration", str(args.duration), "--warmup", "1",
                "--out", str(base / "report")]
        for label, port, pid in targets:
            argv += ["--target", f"{label}=nfs://127.0.0.1:{port}/share",
                     "--server-pid", f"{label}={pid}"]
        print("load average at start:", loadavg(), flush=True)
        subprocess.run(argv, check=True)
        print("load average at end:", loadavg())
        summarize(base / "report" / "compare.json", builds[0][0])
    finally:
        for s in started:
            servers.stop_pid(s.pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
