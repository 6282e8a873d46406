"""`operation_metrics` (issue 46): the per-operation metrics and session
workloads the dashboard and the advisor read can be switched off, so that
their cost can be measured on and off (docs/BENCHMARKS.md section 9), and
on again by a reload, without a restart. Seen from `braid bench` over SMB
and NFS and the admin API."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

import servers
from test_qos import Braid, config_text

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid", reason="Braid's own admin API")


def shares(b: Braid) -> dict:
    status, body = b.api("/api/v1/shares")
    assert status == 200, body
    return {s["name"]: s for s in json.loads(body)["shares"]}


def reads_counted(b: Braid) -> int:
    return shares(b)["free"]["operations_by_type"]["read"]["count"]


def workload_operations(b: Braid) -> int:
    status, body = b.api("/api/v1/clients")
    assert status == 200, body
    return sum(s["operations_total"] for s in json.loads(body)["sessions"])


def read_briefly(b: Braid) -> None:
    for target in (b.smb("free"), b.nfs("free")):
        r = b.bench(target, "--rw", "randread", "--io-size", "4k", "--duration", "1",
                    "--warmup", "0", "--dir", "opmetrics")
        assert r["total"]["errors"] == 0 and r["total"]["count"] > 0, r["total"]


def test_off_collects_nothing_and_a_reload_turns_it_on(tmp_path):
    b = Braid(tmp_path, extra="operation_metrics = false\n")
    try:
        read_briefly(b)
        free = shares(b)["free"]
        # The SMB per-command counters still count; the per-operation
        # metrics and the workload table saw nothing.
        assert free["read_ops"] > 0, free
        assert reads_counted(b) == 0, free["operations_by_type"]["read"]
        assert workload_operations(b) == 0
        b.config.write_text(config_text(b.share_dir))
        os.kill(b.proc.pid, signal.SIGHUP)
        deadline = time.time() + 15
        while reads_counted(b) == 0:
            assert time.time() < deadline, "operation_metrics did not come on at reload"
            read_briefly(b)
        read_briefly(b)
        assert reads_counted(b) > 0
        assert workload_operations(b) > 0
        status, body = b.api("/metrics")
        assert status == 200
        assert any(ln.startswith('braid_operations_total{protocol="nfs",share="free",'
                                 'operation="read",result="success"}')
                   for ln in body.splitlines())
    finally:
        servers.stop_pid(b.proc.pid)
