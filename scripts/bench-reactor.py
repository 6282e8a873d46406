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
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from bench_nfs_compare import add_compare_args, compare, servers, summarize  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--builds",
                    default=f"spawn=/work/main/target/release/braid,"
                            f"reactor={ROOT / 'target' / 'release' / 'braid'}")
    add_compare_args(ap)
    args = ap.parse_args()
    builds = [b.split("=", 1) for b in args.builds.split(",")]
    if any(len(b) != 2 for b in builds):
        ap.error("--builds is label=path[,label=path...]")
    if args.summarize:
        summarize(args.summarize, builds[0][0])
        return 0

    base = Path(tempfile.mkdtemp(prefix="braid-reactor-", dir="/var/tmp"))

    def start(label: str, path: str):
        # A copy: a rebuild during the run changes nothing.
        binary = base / f"braid-{label}"
        shutil.copy2(path, binary)

        def run(share: Path, work: Path):
            default_bin = servers.BRAID_BIN
            servers.BRAID_BIN = binary
            try:
                return servers.start_nfs("braid", share, work)
            finally:
                servers.BRAID_BIN = default_bin
        return run

    # The load generator is this tree's build (servers.BRAID_BIN).
    compare(base, [(label, start(label, path)) for label, path in builds], args, builds[0][0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
