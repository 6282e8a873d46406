"""What a server spends on a loop of client operations: its CPU per
operation (utime + stime of the process, /proc/PID/stat fields 14 and
15: Braid is one process), the rate, and optionally its system calls per operation
(`strace -c -f` attached for the loop). Shared by the bench-*.py scripts
that compare two Braid servers of one build."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(pid: int, count: int, op: Callable[[int], None], strace: bool) -> dict:
    """Run `op(i)` for i in 0..count against the server `pid`."""
    tracer, out = None, None
    if strace:
        out = Path(tempfile.mktemp(prefix="bench-strace."))
        tracer = subprocess.Popen(["strace", "-c", "-f", "-o", str(out), "-p", str(pid)],
                                  stderr=subprocess.DEVNULL)
        time.sleep(1.0)
    c0, t0 = cpu_seconds(pid), time.monotonic()
    for i in range(count):
        op(i)
    c1, t1 = cpu_seconds(pid), time.monotonic()
    calls = {}
    if tracer:
        time.sleep(0.5)
        tracer.send_signal(signal.SIGINT)
        tracer.wait()
        for line in out.read_text().splitlines():
            p = line.split()
            if len(p) >= 5 and p[0][0].isdigit() and p[-1] != "total":
                try:
                    calls[p[-1]] = round(int(p[3]) / count, 2)
                except ValueError:
                    pass
        out.unlink()
    return dict(cpu_us_per_op=round((c1 - c0) / count * 1e6, 1),
                ops_per_s=round(count / (t1 - t0), 1), syscalls_per_op=calls)
