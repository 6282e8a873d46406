"""What bench-exec-mode.py and bench-reactor.py share: nfs-ganesha and
several Braid NFS servers started side by side, one interleaved `braid
bench compare` run over all of them, and its summary (each repetition,
the medians, and each server's median per-repetition ratio to a
baseline), with the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import servers  # noqa: E402

# Starts one Braid NFS server serving the first directory (its files in
# the second).
StartBraid = Callable[[Path, Path], "servers.NfsServer"]


def add_compare_args(ap: argparse.ArgumentParser) -> None:
    """The options `compare` reads, and --summarize."""
    ap.add_argument("--profiles", default="metadata,fio-randread-4k")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--no-ganesha", action="store_true")
    ap.add_argument("--summarize", type=Path, help="only print the summary of a compare.json")


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


def compare(base: Path, braids: list[tuple[str, StartBraid]], args, baseline: str) -> None:
    """Start ganesha (unless args.no_ganesha) and each (label, start) Braid
    under `base`, run `braid bench compare` over them with args.profiles,
    args.reps and args.duration, print the summary, stop them all."""
    started = []
    targets: list[tuple[str, int, int]] = []
    try:
        if not args.no_ganesha:
            for d in ("ganesha", "ganesha-work"):
                (base / d).mkdir()
            g = servers.start_nfs("ganesha", base / "ganesha", base / "ganesha-work")
            started.append(g)
            targets.append(("ganesha", g.port, g.pid))
        for label, start in braids:
            for d in (label, f"{label}-work"):
                (base / d).mkdir()
            b = start(base / label, base / f"{label}-work")
            started.append(b)
            targets.append((label, b.port, b.pid))
        argv = [str(servers.BRAID_BIN), "bench", "compare", "--profiles", args.profiles,
                "--reps", str(args.reps), "--duration", str(args.duration), "--warmup", "1",
                "--out", str(base / "report")]
        for label, port, pid in targets:
            argv += ["--target", f"{label}=nfs://127.0.0.1:{port}/share",
                     "--server-pid", f"{label}={pid}"]
        print("load average at start:", loadavg(), flush=True)
        subprocess.run(argv, check=True)
        print("load average at end:", loadavg())
        summarize(base / "report" / "compare.json", baseline)
    finally:
        for s in started:
            servers.stop_pid(s.pid)
