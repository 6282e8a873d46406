"""`braid bench` against Braid and Samba, and `braid lab` on a 2-NIC topology.

Quick (seconds): a 5-second `smoke` profile (64 KiB random, 70% read, data
verified) against each server, checking that the JSON report is well formed
and non-zero; multichannel against Samba's two loopback interfaces; and, as
root, the network lab with two rate-limited NICs showing channels on both.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

import servers

BIN = str(servers.BRAID_BIN)


@pytest.fixture(scope="module", params=["braid", "samba"])
def target(request, tmp_path_factory):
    kind = request.param
    if kind == "samba" and shutil.which("smbd") is None:
        pytest.skip("smbd not installed (apt-get install samba)")
    base = tmp_path_factory.mktemp(f"bench-{kind}-")
    (base / "share").mkdir()
    (base / "server").mkdir()
    srv = servers.start(kind, base / "share", base / "server")
    yield srv
    srv.stop()


def bench(srv, *args: str, timeout: float = 60) -> dict:
    argv = [BIN, "bench", "--target", f"//{srv.host}:{srv.port}/{srv.share}",
            "--user", srv.user, "--json", *args]
    env = dict(os.environ, BRAID_PASSWORD=srv.password)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    assert p.returncode == 0, f"{' '.join(argv)} failed:\n{p.stderr}\n{p.stdout[-2000:]}"
    return json.loads(p.stdout)


def check_report(r: dict, ops: tuple[str, ...]) -> None:
    assert r["elapsed_s"] > 0
    assert r["total"]["count"] > 0 and r["total"]["iops"] > 0
    assert r["total"]["errors"] == 0
    for op in ops:
        st = r["ops"][op]
        assert st["count"] > 0 and st["iops"] > 0, op
        lat = st["latency_us"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99_9"] <= lat["max"], (op, lat)
    assert r["channels"] and all(c["bytes_received"] > 0 for c in r["channels"])
    assert r["server"]["dialect"] in ("3.1.1", "3.0.2")


def test_smoke_profile_json(target):
    r = bench(target, "--profile", "smoke", "--duration", "5", "--warmup", "1")
    check_report(r, ("read", "write"))
    assert r["total"]["mib_s"] > 0
    assert r["verify_errors"] == 0
    assert r["spec"]["profile"] == "smoke" and "password" not in r["spec"]


def test_metadata_mode(target):
    r = bench(target, "--profile", "metadata", "--threads", "2", "--md-files", "8",
              "--duration", "2", "--warmup", "0.5")
    check_report(r, ("create", "open", "close", "query_info", "delete"))


def test_encrypted_sequential(target):
    r = bench(target, "--rw", "read", "--io-size", "1m", "--file-size", "16m",
              "--queue-depth", "4", "--security", "encrypt", "--duration", "2",
              "--warmup", "0.5", "--verify")
    check_report(r, ("read",))
    assert r["server"]["encryption"] is True


# Multichannel on loopback is checked against Samba only (Braid's is covered
# by the lab test): the fixture's Samba parameter alone, no skipped Braid one.
@pytest.mark.parametrize("target", ["samba"], indirect=True)
def test_samba_multichannel(target):
    r = bench(target, "--profile", "smoke", "--channels", "2", "--duration", "2",
              "--warmup", "0.5")
    check_report(r, ("read", "write"))
    # Samba lists the interfaces it finds on the host (127.0.0.1 here):
    # two channels on it.
    assert len(r["channels"]) == 2, r["channels"]
    assert all(c["requests"] > 0 for c in r["channels"])


def test_lab_two_nics(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("braid lab needs root (network namespaces); not root here")
    if shutil.which("ip") is None or shutil.which("tc") is None:
        pytest.skip("iproute2 (ip, tc) not installed")
    out = tmp_path / "lab"
    argv = [BIN, "lab", "--nics", "2", "--rate", "800mbit", "--profiles", "diskspd-mtmf-read-64k",
            "--modes", "multi", "--duration", "2", "--warmup", "0.5", "--file-size", "8m",
            "--json", "--out", str(out)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"braid lab failed:\n{p.stderr}"
    res = json.loads(p.stdout)
    case = res["cases"][0]
    assert case["reports"], case.get("failures")
    rep = case["reports"][0]
    assert rep["server"]["multichannel_offered"], "multichannel is on by default"
    remotes = {c["remote"].rsplit(":", 1)[0] for c in rep["channels"]}
    assert remotes == {"198.18.0.1", "198.18.1.1"}, rep["channels"]
    assert all(c["bytes_received"] > 0 for c in rep["channels"]), rep["channels"]
    assert (out / "lab.html").exists() and (out / "lab.json").exists()
    # Torn down: no namespace of ours left.
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "braidlab-" not in ns
