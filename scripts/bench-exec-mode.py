#!/usr/bin/env python3
"""How a COMPOUND leaves the reactor, measured: nfs-ganesha and one Braid
NFS server per BRAID_EXEC mode (same build: `spawn`, the default, hands
each COMPOUND to a blocking-pool thread; `inplace` runs it under tokio's
`block_in_place`), all in one `braid bench compare` run, interleaved
(docs/BENCHMARKS.md section 7, "Removing the thread hand-off").

BRAID_EXEC is read only by the build of commit df0ae6d (the measuring
commit; the next one reverted it because `inplace` lost): build that
commit to rerun the comparison. On any other build every mode runs the
same code, which makes this script a measure of two identical servers'
spread.

Prints each repetition (ops/s and server CPU µs per operation, utime +
stime of the server's process tree over the measured window), the
medians, and each mode's per-repetition ratio to `spawn` (median of the
ratios of runs that went back to back), with the load average at the
start and the end.

Usage: python3 scripts/bench-exec-mode.py [--modes spawn,inplace]
       [--profiles metadata,fio-randread-4k] [--reps 5] [--duration 5]
       [--no-ganesha] [--summarize compare.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_nfs_compare import add_compare_args, compare, servers, summarize  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default="spawn,inplace")
    add_compare_args(ap)
    args = ap.parse_args()
    modes = args.modes.split(",")
    if args.summarize:
        summarize(args.summarize, modes[0])
        return 0

    base = Path(tempfile.mkdtemp(prefix="braid-exec-", dir="/var/tmp"))

    def start(mode: str):
        def run(share: Path, work: Path):
            # Read once by the measuring build at start (see above).
            os.environ["BRAID_EXEC"] = mode
            try:
                return servers.start_nfs("braid", share, work)
            finally:
                os.environ.pop("BRAID_EXEC", None)
        return run

    compare(base, [(mode, start(mode)) for mode in modes], args, modes[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
