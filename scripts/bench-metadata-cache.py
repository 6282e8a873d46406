#!/usr/bin/env python3
"""Metadata cache on vs off, beside Samba and nfs-ganesha, interleaved.

    scripts/bench-metadata-cache.py [--braid BIN] [--reps N] [--duration S]
        [--threads 8,64] [--big 100000] [--only smb|nfs] [--no-peers]

One build (BIN, default target/release/braid) serves four fresh shares in
four processes: SMB with the cache off and on (`--no-metadata-cache`,
`--metadata-cache`), NFS
with it off and on; Samba and nfs-ganesha serve two more (tests/e2e/
servers.py, loopback, private configs). Every share is a directory of the
same file system (under --base, default /var/tmp).

Part 1, `braid bench --metadata -o 1` (create, close, open, query, close,
delete, and a mkdir + rmdir every 8th turn; each task in a directory of its
own, one request in flight each) with each --threads count of tasks, every target in turn, the order reversed
every other repetition. Server CPU per operation: utime+stime of the
server's process tree (/proc/PID/stat) around the run.

Part 2, creates into a directory already holding --big entries against an
empty one: the same loop with one task, its directory populated locally
(on the share's directory, before the servers start) or left empty; the
create rate and p50 are the `create` operation's.

Prints one JSON line per run and a summary table (medians).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import servers  # noqa: E402


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def populate(directory: Path, count: int, owner: tuple[int, int]) -> None:
    """`count` empty files in `directory` (names unlike the bench's fN)."""
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        os.close(os.open(directory / f"pre-{i:07d}.dat", os.O_CREAT | os.O_WRONLY, 0o644))
    os.chown(directory, *owner)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--braid", type=Path, default=REPO / "target/release/braid")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--threads", default="8,64")
    ap.add_argument("--big", type=int, default=100000,
                    help="entries in the large directory (0: skip part 2)")
    ap.add_argument("--only", choices=["smb", "nfs"])
    ap.add_argument("--no-peers", action="store_true", help="Braid only")
    ap.add_argument("--skip-part1", action="store_true")
    ap.add_argument("--base", type=Path, default=Path("/var/tmp"),
                    help="file system the shares are made on (e.g. a journaled ext4)")
    a = ap.parse_args()
    braid = a.braid.resolve()
    servers.BRAID_BIN = braid
    base = Path(tempfile.mkdtemp(prefix="braid-mdcache.", dir=a.base))
    os.chmod(base, 0o755)
    protos = [a.only] if a.only else ["smb", "nfs"]
    names = []
    for p in protos:
        names += [f"{p}-braid-off", f"{p}-braid-on"]
        if not a.no_peers:
            names.append("smb-samba" if p == "smb" else "nfs-ganesha")
    srv = {}
    saved = os.environ.get("BRAID_EXTRA_ARGS", "")
    try:
        for name in names:
            d = base / name
            share = d / "share"
            (d / "w").mkdir(parents=True)
            share.mkdir(parents=True)
            if a.big:
                # Part 2's directories, made before the server starts so
                # that nothing it caches or watches sees the population.
                populate(share / "big" / "md0", a.big, (os.stat(base).st_uid, os.stat(base).st_gid))
                (share / "small" / "md0").mkdir(parents=True)
            # Both ways explicitly: the cache is on by default.
            flag = " --metadata-cache" if name.endswith("-on") else " --no-metadata-cache"
            os.environ["BRAID_EXTRA_ARGS"] = saved + flag
            proto, target = name.split("-")[0], name.split("-")[1]
            if proto == "smb":
                srv[name] = servers.start(target, share, d / "w")
            else:
                srv[name] = servers.start_nfs(target, share, d / "w")
            if target == "samba":
                # Samba's user must reach the populated directories.
                for sub in ("big", "small"):
                    for p in [share / sub, share / sub / "md0"]:
                        if p.exists():
                            os.chown(p, *_uid_gid(srv[name].user))
        os.environ["BRAID_EXTRA_ARGS"] = saved

        def url(name: str) -> str:
            s = srv[name]
            if name.startswith("smb"):
                return f"//127.0.0.1:{s.port}/{s.share}"
            return f"nfs://127.0.0.1:{s.port}{s.export}"

        def bench(name: str, extra: list[str]) -> dict:
            s = srv[name]
            env = dict(os.environ)
            argv = [str(braid), "bench", "--target", url(name), "--metadata",
                    "-d", str(a.duration), "--warmup", str(a.warmup), "--quiet", "--json",
                    # One request in flight per task: --metadata's default
                    # queue depth is 8, which would make -t N run 8N tasks.
                    "-o", "1"] + extra
            if name.startswith("smb"):
                argv += ["-u", s.user]
                env["BRAID_PASSWORD"] = s.password
            load = loadavg()
            c0, _ = servers.tree_cpu(s.pid)
            out = subprocess.run(argv, env=env, capture_output=True, text=True)
            c1, _ = servers.tree_cpu(s.pid)
            if out.returncode != 0:
                raise RuntimeError(f"{name}: {out.stderr.strip()[-2000:]}")
            rep = json.loads(out.stdout)
            ops = rep["total"]["count"]
            cr = rep["ops"].get("create", {})
            row = {"target": name, "ops_s": rep["total"]["iops"],
                   "p50_us": rep["total"]["latency_us"]["p50"],
                   "errors": rep["total"]["errors"],
                   "create_s": cr.get("iops", 0.0),
                   "create_p50_us": cr.get("latency_us", {}).get("p50", 0.0),
                   "cpu_us_op": (c1 - c0) / max(ops, 1) * 1e6, "load1": load}
            return row

        results = []
        if not a.skip_part1:
            for t in [int(x) for x in a.threads.split(",")]:
                for rep in range(a.reps):
                    order = names if rep % 2 == 0 else names[::-1]
                    for name in order:
                        row = bench(name, ["-t", str(t), "--dir", f"p1-t{t}-r{rep}"])
                        row.update(part="metadata", threads=t, rep=rep)
                        print(json.dumps(row), flush=True)
                        results.append(row)
        if a.big:
            for rep in range(a.reps):
                order = names if rep % 2 == 0 else names[::-1]
                for name in order:
                    for d in (["big", "small"] if rep % 2 == 0 else ["small", "big"]):
                        row = bench(name, ["-t", "1", "--dir", d])
                        row.update(part=f"dir-{d}", threads=1, rep=rep)
                        print(json.dumps(row), flush=True)
                        results.append(row)
        summarize(results, names)
    finally:
        os.environ["BRAID_EXTRA_ARGS"] = saved
        for s in srv.values():
            s.stop()
        subprocess.run(["rm", "-rf", str(base)])
    return 0


def _uid_gid(user: str) -> tuple[int, int]:
    import pwd
    pw = pwd.getpwnam(user)
    return pw.pw_uid, pw.pw_gid


def summarize(results: list[dict], names: list[str]) -> None:
    def med(rows, key):
        return statistics.median(r[key] for r in rows) if rows else float("nan")

    print("\n| part | threads | target | ops/s | p50 µs | create/s | create p50 µs | server CPU µs/op | runs |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    keys = sorted({(r["part"], r["threads"]) for r in results})
    for part, t in keys:
        for name in names:
            rows = [r for r in results if r["part"] == part and r["threads"] == t and r["target"] == name]
            if rows:
                print(f"| {part} | {t} | {name} | {med(rows, 'ops_s'):.0f} | {med(rows, 'p50_us'):.0f} "
                      f"| {med(rows, 'create_s'):.0f} | {med(rows, 'create_p50_us'):.0f} "
                      f"| {med(rows, 'cpu_us_op'):.1f} | {len(rows)} |")


if __name__ == "__main__":
    sys.exit(main())
