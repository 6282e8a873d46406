#!/usr/bin/env python3
"""Server CPU per metadata operation of two Braid builds, interleaved.

    scripts/bench-metadata-builds.py OLD_BRAID NEW_BRAID [ROUNDS]

Each build serves a fresh share (tests/e2e/servers.py); `braid bench
--metadata -t 1` (8 tasks: --metadata's queue depth is 8; each: create,
close, open, query, close, delete, and a
mkdir + rmdir every 8th turn) runs 6 s against each in turn, the order
reversed every other round. Prints server CPU (utime+stime) per operation.
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import servers  # noqa: E402

bins = {"old": str(Path(sys.argv[1]).resolve()), "new": str(Path(sys.argv[2]).resolve())}
base = Path(tempfile.mkdtemp(prefix="braid-mdbench.", dir="/var/tmp"))
srv = {}
for name, b in bins.items():
    servers.BRAID_BIN = Path(b)
    d = base / name; (d / "share").mkdir(parents=True); (d / "w").mkdir()
    srv[name] = servers.start("braid", d / "share", d / "w")
res = {n: [] for n in bins}
order = list(bins)
for rnd in range(int(sys.argv[3]) if len(sys.argv) > 3 else 6):
    for name in (order if rnd % 2 == 0 else order[::-1]):
        s = srv[name]
        c0, _ = servers.tree_cpu(s.pid)
        out = subprocess.run([bins["new"], "bench", "--target", f"//127.0.0.1:{s.port}/{s.share}",
                              "-u", s.user, "--metadata", "-t", "1", "-d", "6", "--warmup", "0", "--dir", "md", "--quiet", "--json"],
                             env=dict(os.environ, BRAID_PASSWORD=s.password), capture_output=True, text=True)
        c1, _ = servers.tree_cpu(s.pid)
        rep = json.loads(out.stdout)
        ops = rep["total"]["count"]
        res[name].append((c1 - c0) / ops * 1e6)
        print(name, rnd, round(res[name][-1], 1), "µs/op", ops, "ops", flush=True)
for s in srv.values():
    s.stop()
subprocess.run(["rm", "-rf", str(base)])
for n, v in res.items():
    v = sorted(v)
    print(f"{n}: median {v[len(v)//2]:.1f} min {v[0]:.1f} µs server CPU per op")
