#!/usr/bin/env python3
"""What a layer costs when it has nothing to do: IOPS and server CPU per
operation, on against off, 4 KiB random reads at QD 64 (`braid bench
--profile fio-randread-4k`: 1 thread x QD 64, 4 files of 64 MiB), over
SMB and NFSv4.1 (docs/BENCHMARKS.md sections 8 and 9).

Three Braid processes of the same build serve one directory, one per
variant (a fourth writes the data files), so that each process's state (NFS clients whose leases have not
run out, sessions in the workload table) comes from its own runs only:

- `ops-on`:  `operation_metrics = true` (the default), share `plain` (no
  `[share.qos]`);
- `ops-off`: `operation_metrics = false`, share `plain`;
- `qos-on`:  `operation_metrics = true`, share `limited` (limits far above
  what this machine reaches);

run interleaved, in a rotating order, `--reps` times. A fourth process,
not measured, writes the data files first (`--creator VARIANT` has that
variant's server write them instead): a server that wrote the files over
NFS was seen to read them at 7-18% more CPU per operation. Server CPU is the
process's utime + stime from /proc/PID/stat over the whole bench run
(connect and session setup included: a few ms against seconds of load),
divided by the operations the report counts (no warm-up: the data files
are written by one untimed run first and reused after).

With `--concurrent` the variants' runs of one repetition go at the same
time, so that every variant meets the same load at the same moment (on a
machine others load, one run after another can meet very different
loads); add `twin` (ops-on in a process of its own) to the variants to
see how far two identical servers land apart.

Usage: python3 scripts/cost_on_off.py [--reps 4] [--duration 8]
       [--protocols smb,nfs] [--variants ops-on,ops-off,qos-on,twin]
       [--concurrent] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import servers  # noqa: E402

BIN = str(servers.BRAID_BIN)
USER = "costuser"
LIMITS = "iops = 10000000\ningress_mibps = 100000\negress_mibps = 100000\n"
TICK = os.sysconf("SC_CLK_TCK")


def config(share_dir: Path, operation_metrics: bool) -> str:
    path = json.dumps(str(share_dir))
    return (f"operation_metrics = {str(operation_metrics).lower()}\n"
            f'[[share]]\nname = "plain"\npath = {path}\nroot_squash = false\n'
            f'[[share]]\nname = "limited"\npath = {path}\nroot_squash = false\n'
            f"[share.qos]\n{LIMITS}")


class Server:
    def __init__(self, base: Path, share_dir: Path, operation_metrics: bool, password: str,
                 name: str):
        self.workdir = base / f"server-{name}"
        self.workdir.mkdir()
        self.port, self.nfs_port = servers.free_port(), servers.free_port()
        conf = self.workdir / "braid.toml"
        conf.write_text(config(share_dir, operation_metrics))
        self.log = self.workdir / "braid.log"
        argv = [BIN, "serve", "--config", str(conf),
                "--listen", f"127.0.0.1:{self.port}",
                "--nfs-listen", f"127.0.0.1:{self.nfs_port}",
                "--user", f"{USER}:{password}",
                "--admin-listen", f"127.0.0.1:{servers.free_port()}"]
        self.proc = servers._spawn(argv, self.log, self.workdir)
        servers.wait_until_accepting("127.0.0.1", self.port, self.proc, self.log)
        servers._wait_for_nfs("127.0.0.1", self.nfs_port, self.proc, self.log)

    def target(self, proto: str, share: str) -> str:
        if proto == "smb":
            return f"//127.0.0.1:{self.port}/{share}"
        return f"nfs://127.0.0.1:{self.nfs_port}/{share}"

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        # utime and stime are fields 14 and 15 (1-based, pid first).
        return (int(fields[11]) + int(fields[12])) / TICK


def start_bench(server: Server, proto: str, share: str, duration: float,
                password: str) -> tuple:
    argv = [BIN, "bench", "--target", server.target(proto, share), "--profile",
            "fio-randread-4k", "--duration", str(duration), "--warmup", "0",
            "--json", "--quiet"]
    if proto == "smb":
        argv += ["--user", USER]
    env = dict(os.environ, BRAID_PASSWORD=password)
    before = server.cpu_seconds()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    return server, argv, p, before


def finish_bench(started: tuple, duration: float) -> dict:
    server, argv, p, before = started
    out, err = p.communicate(timeout=duration + 300)
    cpu = server.cpu_seconds() - before
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{err}\n{out[-2000:]}")
    total = json.loads(out)["total"]
    if total["errors"]:
        raise SystemExit(f"{total['errors']} errors in {' '.join(argv)}")
    return {"iops": total["iops"], "ops": total["count"], "cpu_s": cpu,
            "cpu_us_per_op": cpu / total["count"] * 1e6,
            "load": os.getloadavg()[0]}


def bench(server: Server, proto: str, share: str, duration: float, password: str) -> dict:
    return finish_bench(start_bench(server, proto, share, duration, password), duration)


VARIANTS = {
    "ops-on": (True, "plain"),
    "ops-off": (False, "plain"),
    "qos-on": (True, "limited"),
    # ops-on again, in a process of its own: how far two identical servers
    # land apart is the noise floor of the comparison.
    "twin": (True, "plain"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--protocols", default="smb,nfs")
    ap.add_argument("--variants", default="ops-on,ops-off,qos-on")
    ap.add_argument("--concurrent", action="store_true",
                    help="run every variant's bench at the same time in each repetition "
                    "(they share the machine's load moment by moment; CPU/op is each "
                    "server's own) instead of one after the other")
    ap.add_argument("--json", help="write every run here")
    ap.add_argument("--creator", help="the variant whose untimed run writes the data files "
                    "(default: a fourth server that is not measured): the server that wrote "
                    "them over NFS was seen to read them at a higher CPU/op")
    args = ap.parse_args()
    protos = args.protocols.split(",")
    names = args.variants.split(",")
    password = "Pw-" + secrets.token_hex(8)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="braid-cost-") as tmp:
        base = Path(tmp)
        share_dir = base / "share"
        share_dir.mkdir()
        srv = {name: Server(base, share_dir, VARIANTS[name][0], password, name)
               for name in names}
        writer = None if args.creator else Server(base, share_dir, True, password, "writer")
        try:
            for proto in protos:
                # Untimed: writes the data files every later run reads, and
                # gives each server the same start.
                if writer:
                    bench(writer, proto, "plain", 2, password)
                first = [args.creator] if args.creator else []
                for name in first + [n for n in names if n not in first]:
                    bench(srv[name], proto, VARIANTS[name][1], 2, password)
                for rep in range(args.reps):
                    # A rotating order, so that no variant always runs first.
                    order = names[rep % len(names):] + names[:rep % len(names)]
                    if args.concurrent:
                        started = [(name, start_bench(srv[name], proto, VARIANTS[name][1],
                                                      args.duration, password))
                                   for name in order]
                        done = [(name, finish_bench(st, args.duration)) for name, st in started]
                    else:
                        done = [(name, bench(srv[name], proto, VARIANTS[name][1], args.duration,
                                             password)) for name in order]
                    for name, r in done:
                        r.update(proto=proto, variant=name, rep=rep)
                        runs.append(r)
                        print(f"{proto} rep {rep} {name:8} {r['iops']:9.0f} IOPS "
                              f"{r['cpu_us_per_op']:6.2f} us/op load {r['load']:.1f}",
                              flush=True)
        finally:
            for s in [*srv.values(), *([writer] if writer else [])]:
                servers.stop_pid(s.proc.pid)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    # Each layer against the run without it: operation metrics against
    # `ops-off`, QoS against `ops-on` (metrics on in both). Ratios are the
    # medians of the per-repetition ratios (runs of one repetition are
    # minutes apart at most, so they share the machine's load).
    baseline = {"ops-on": "ops-off", "qos-on": "ops-on", "twin": "ops-on"}
    # Also the least CPU/op of each variant: on a machine others load, the
    # least disturbed run of each is the steadiest figure.
    print("\n| protocol | variant | runs | IOPS (median) | CPU/op µs (median) | CPU/op µs (least) |"
          " against | IOPS ratio | CPU/op ratio | least CPU/op ratio |")
    print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|")
    for proto in protos:
        of = {name: [r for r in runs if r["proto"] == proto and r["variant"] == name]
              for name in names}
        for name in names:
            rs = of[name]
            iops = statistics.median(r["iops"] for r in rs)
            cpu = statistics.median(r["cpu_us_per_op"] for r in rs)
            base = baseline.get(name)
            least = min(r["cpu_us_per_op"] for r in rs)
            cols = "| | | |"
            if base in of:
                pairs = list(zip(rs, of[base]))
                ri = statistics.median(a["iops"] / b["iops"] for a, b in pairs)
                rc = statistics.median(a["cpu_us_per_op"] / b["cpu_us_per_op"]
                                       for a, b in pairs)
                lb = min(r["cpu_us_per_op"] for r in of[base])
                cols = f"{base} | {ri:.3f} | {rc:.3f} | {least / lb:.3f} |"
            print(f"| {proto} | {name} | {len(rs)} | {iops:.0f} | {cpu:.2f} | {least:.2f} | {cols}")

if __name__ == "__main__":
    main()
