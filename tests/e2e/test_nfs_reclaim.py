"""NFS reclaims after a crash are checked against what each client held
(issue 56; RFC 8881 8.4.2.1): Braid records every open (access and deny),
byte-range lock and delegation in its state store as it changes
(nfs/state/held.rs), and after `kill -9` and a restart a reclaim of
anything a client did not hold is NFS4ERR_RECLAIM_BAD. Without that
check, one client could reclaim, during the grace period, a lock another
client held and has not reclaimed yet.

The clients are pynfs's client library (nfs_reclaim_client.py): the kernel
client reclaims only what it held. With the local store and with etcd
(`state_store = "etcd"`, the session's etcd: conftest.py). Braid only: nfs-ganesha and knfsd keep
client records, not what the clients held, and take reclaims on trust.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import re
import urllib.request
import uuid
from pathlib import Path

import pytest

import servers
from smb_nfs import pynfs_tree  # noqa: F401

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid",
                                reason="reclaims checked against recorded state: Braid only")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance"))
import run_pynfs  # noqa: E402

LEASE = 10
GRACE = 60


def run_client(nfs, tree: Path, phase: str, name: str, stdin: str = "") -> dict:
    components = [p for p in nfs.export.split("/") if p]
    r = subprocess.run(
        [run_pynfs.PYTHON, str(HERE / "nfs_reclaim_client.py"), nfs.host, str(nfs.port),
         *components, "--", phase, name],
        cwd=tree / "nfs4.1", input=stdin, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert r.returncode == 0 and lines, f"{phase}: {r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return json.loads(lines[-1])


def start(workdir: Path, export_dir: Path, port: int | None = None, etcd_url: str | None = None):
    top = (f'state_dir = "{workdir / "state"}"\n'
           f"nfs_lease_time_secs = {LEASE}\nnfs_grace_time_secs = {GRACE}\n")
    if etcd_url:
        # A key prefix of this Braid's own in the session's etcd.
        top += (f'state_store = "etcd"\netcd_endpoints = ["{etcd_url}"]\n'
                f'etcd_prefix = "/braid-e2e/{workdir.name}"\n')
    return servers.start_braid_nfs(export_dir, workdir, port=port, top_config=top)


@pytest.fixture(params=["local", "etcd"])
def store(request):
    """The state store: files under state_dir, or the session's etcd."""
    return request.getfixturevalue("etcd").url if request.param == "etcd" else None


@pytest.fixture
def crashed_server(tmp_path, pynfs_tree, store):
    """A Braid with a state directory where two clients took state, killed
    with SIGKILL and started again: (server, the state's file handles,
    the clients' name)."""
    export_dir = tmp_path / "export"
    export_dir.mkdir()
    nfs = start(tmp_path, export_dir, etcd_url=store)
    name = f"reclaim-{uuid.uuid4().hex[:8]}"
    handles = run_client(nfs, pynfs_tree, "before", name)
    os.kill(nfs.pid, signal.SIGKILL)
    nfs.proc.wait(10)
    again = start(tmp_path, export_dir, port=nfs.port, etcd_url=store)
    yield again, handles, name
    again.stop()


def metrics(nfs) -> dict[str, float]:
    """The restarted Braid's /metrics (its admin address from its log)."""
    log = nfs.log_path.read_text(errors="replace")
    admin = re.findall(r"admin API on (http://[0-9.:]+)/", log)[-1]
    with urllib.request.urlopen(f"{admin}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {k: float(v) for k, v in
            (line.rsplit(" ", 1) for line in text.splitlines() if line and line[0] != "#")}


def test_reclaims_are_checked_against_what_each_client_held(crashed_server, pynfs_tree):
    nfs, handles, name = crashed_server
    got = run_client(nfs, pynfs_tree, "after", name, json.dumps(handles) + "\n")
    assert got == {
        "B reopens a, which it never opened": "NFS4ERR_RECLAIM_BAD",
        "B reopens b with a deny it did not hold": "NFS4ERR_RECLAIM_BAD",
        "B reopens b with a delegation it did not hold": "NFS4ERR_RECLAIM_BAD",
        "B reopens b": "NFS4_OK",
        "B relocks A's lock on b": "NFS4ERR_RECLAIM_BAD",
        "B reclaim complete": "NFS4_OK",
        "A reopens a": "NFS4_OK",
        "A relocks its lock on a": "NFS4_OK",
        "A relocks a range it did not hold": "NFS4ERR_RECLAIM_BAD",
        "A reopens b": "NFS4_OK",
        "A relocks its lock on b": "NFS4_OK",
        "A reopens d with its read delegation": "NFS4_OK",
        # OPEN_DELEGATE_READ: the delegation A held is A's again.
        "A's delegation on d": 1,
        "A reclaim complete": "NFS4_OK",
    }, got
    # Counted in /metrics: every refusal above, and what was reclaimed.
    m = metrics(nfs)
    assert m["braid_nfs_reclaims_refused_total"] == 5, m
    assert m['braid_nfs_reclaims_total{kind="open"}'] == 4, m
    assert m['braid_nfs_reclaims_total{kind="lock"}'] == 2, m
    assert m['braid_nfs_reclaims_total{kind="delegation"}'] == 1, m
    # Both recorded clients sent RECLAIM_COMPLETE: the grace period ended.
    assert m["braid_nfs_grace_active"] == 0 and m["braid_nfs_clients_to_reclaim"] == 0, m


def test_a_torn_record_journal_is_reported_and_the_whole_records_kept(tmp_path, pynfs_tree):
    """A crash in the middle of an append leaves a torn last frame in
    state_dir/nfs-held.journal: the start says so in one line naming the
    file, and the records before it still let their clients reclaim."""
    export_dir = tmp_path / "export"
    export_dir.mkdir()
    nfs = start(tmp_path, export_dir)
    name = f"torn-{uuid.uuid4().hex[:8]}"
    handles = run_client(nfs, pynfs_tree, "before", name)
    os.kill(nfs.pid, signal.SIGKILL)
    nfs.proc.wait(10)
    # The journal is mapped and longer than its frames (zeros after
    # them): a frame half written back before the machine went down.
    journal = tmp_path / "state" / "nfs-held.journal"
    data = bytearray(journal.read_bytes())
    end = len(data.rstrip(b"\0"))
    torn = b"BRS1" + (64).to_bytes(4, "little") + b"\x5a" * 40
    data[end:end + len(torn)] = torn
    journal.write_bytes(bytes(data))
    again = start(tmp_path, export_dir, port=nfs.port)
    try:
        got = run_client(again, pynfs_tree, "after", name, json.dumps(handles) + "\n")
        assert got["A relocks its lock on a"] == "NFS4_OK", got
        assert got["B relocks A's lock on b"] == "NFS4ERR_RECLAIM_BAD", got
        deadline = time.monotonic() + 10
        while "nfs-held.journal" not in again.log_path.read_text(errors="replace"):
            assert time.monotonic() < deadline, again.log_tail()
            time.sleep(0.2)
        lines = [ln for ln in again.log_path.read_text(errors="replace").splitlines()
                 if "nfs-held.journal" in ln]
        assert len(lines) == 1 and "skipped" in lines[0], lines
    finally:
        again.stop()
