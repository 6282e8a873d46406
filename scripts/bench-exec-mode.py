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
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import servers  # noqa: E402


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def summarize(path: Path, baseline: str) -> None:
    data = json.loads(path.read_text())
    by_profile: dict[str, dict[str, list]] = {}
    for case in data["cases"]:
        by_profile.setdefault(case["profile"], {})[case["variant"]] = case["runs"]
    for profile, variants in by_profile.items():
        print(f"\n{profile}")
        for variant, runs in variants.items():
            ops = [r["iops"] for r in runs]
            cpu = [r["server_cpu_us_per_op"] for r in runs]
            line = (f"  {variant:10} ops/s {statistics.median(ops):8.0f} "
                    f"(runs {' '.join(f'{x:.0f}' for x in ops)})  "
                    f"CPU µs/op {statistics.median(cpu):6.1f} "
                    f"(runs {' '.join(f'{x:.1f}' for x in cpu)})")
            base = variants.get(baseline)
            if base and variant != baseline:
                ops_ratio = statistics.median(r["iops"] / b["iops"] for r, b in zip(runs, base))
                cpu_ratio = statistics.median(
                    r["server_cpu_us_per_op"] / b["server_cpu_us_per_op"]
                    for r, b in zip(runs, base))
                line += f"  vs {baseline}: ops/s {ops_ratio:.2f}x, CPU/op {cpu_ratio:.2f}x"
            print(line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default="spawn,inplace")
    ap.add_argument("--profiles", default="metadata,fio-randread-4k")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--no-ganesha", action="store_true")
    ap.add_argument("--summarize", type=Path, help="only print the summary of a compare.json")
    args = ap.parse_args()
    modes = args.modes.split(",")
    if args.summarize:
        summarize(args.summarize, modes[0])
        return 0

    base = Path(tempfile.mkdtemp(prefix="braid-exec-", dir="/var/tmp"))
    started = []
    targets: list[tuple[str, int, int]] = []
    try:
        if not args.no_ganesha:
            for d in ("ganesha", "ganesha-work"):
                (base / d).mkdir()
            g = servers.start_nfs("ganesha", base / "ganesha", base / "ganesha-work")
            started.append(g)
            targets.append(("ganesha", g.port, g.pid))
        for mode in modes:
            os.environ["BRAID_EXEC"] = mode
            for d in (mode, f"{mode}-work"):
                (base / d).mkdir()
            b = servers.start_nfs("braid", base / mode, base / f"{mode}-work")
            started.append(b)
            targets.append((mode, b.port, b.pid))
        os.environ.pop("BRAID_EXEC", None)
        argv = [str(servers.BRAID_BIN), "bench", "compare", "--profiles", args.profiles,
                "--reps", str(args.reps), "--duration", str(args.duration), "--warmup", "1",
                "--out", str(base / "report")]
        for label, port, pid in targets:
            argv += ["--target", f"{label}=nfs://127.0.0.1:{port}/share",
                     "--server-pid", f"{label}={pid}"]
        print("load average at start:", loadavg(), flush=True)
        subprocess.run(argv, check=True)
        print("load average at end:", loadavg())
        summarize(base / "report" / "compare.json", modes[0])
    finally:
        for s in started:
            servers.stop_pid(s.pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
