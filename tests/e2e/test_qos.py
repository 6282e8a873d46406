"""Provisioned performance (issue 45) seen from real clients: `braid bench`
over SMB and over NFSv4.1 against one Braid serving

- `qos`: 500 IOPS, 20 MiB/s in and out (no burst);
- `burst`: 200 IOPS baseline, 600 burst, a 1600-credit bucket (about 4 s
  of burst), the same directory as `free` so its files are made there;
- `free`: no limits.

What is checked: measured IOPS and MiB/s within 5% of the limit over 10 s
(SMB and NFS); a burst at `burst_iops` while credits last, then the
baseline; two clients with the same load within 10% of each other; the
free share keeps its latency while `qos` is throttled; no request fails;
the admin API shows it all, and limits change through the API and on
SIGHUP without dropping clients.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

import pynfs_lib
import servers

BIN = str(servers.BRAID_BIN)
TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid", reason="provisioned QoS is Braid's own")

USER = "qosuser"
QOS = "iops = 500\ningress_mibps = 20\negress_mibps = 20\n"
BURST = "iops = 200\nburst_iops = 600\nburst_credits = 1600\n"


def config_text(share_dir: Path, qos: str = QOS, homes: str | None = None) -> str:
    def share(name: str, path: Path, limits: str, extra: str = 'root_squash = false\n') -> str:
        t = f'[[share]]\nname = "{name}"\npath = {json.dumps(str(path))}\n' + extra
        if limits:
            t += "[share.qos]\n" + limits
        return t
    text = (share("qos", share_dir / "qos", qos) + share("burst", share_dir / "free", BURST)
            + share("free", share_dir / "free", ""))
    if homes is not None:
        # Samba's [homes]: each user's share, with these limits.
        text += share("homes", share_dir / "homes" / "%U", homes, "")
    return text


class Braid:
    def __init__(self, base: Path, qos: str = QOS, homes: str | None = None, extra: str = ""):
        self.share_dir = base / "shares"
        for d in ("qos", "free", "homes"):
            (self.share_dir / d).mkdir(parents=True)
        self.workdir = base / "server"
        self.workdir.mkdir()
        self.port, self.nfs_port = servers.free_port(), servers.free_port()
        self.admin = f"127.0.0.1:{servers.free_port()}"
        self.password = "Pw-" + secrets.token_hex(8)
        self.config = self.workdir / "braid.toml"
        self.config.write_text(extra + config_text(self.share_dir, qos, homes))
        self.log = self.workdir / "braid.log"
        argv = [BIN, "serve", "--config", str(self.config),
                "--listen", f"127.0.0.1:{self.port}",
                "--nfs-listen", f"127.0.0.1:{self.nfs_port}",
                "--user", f"{USER}:{self.password}", "--admin-listen", self.admin]
        self.proc = servers._spawn(argv, self.log, self.workdir)
        servers.wait_until_accepting("127.0.0.1", self.port, self.proc, self.log)
        servers._wait_for_nfs("127.0.0.1", self.nfs_port, self.proc, self.log)

    def smb(self, share: str) -> str:
        return f"//127.0.0.1:{self.port}/{share}"

    def nfs(self, share: str) -> str:
        return f"nfs://127.0.0.1:{self.nfs_port}/{share}"

    def bench_argv(self, target: str, *args: str) -> list[str]:
        argv = [BIN, "bench", "--target", target, "--json", "--quiet", "--files", "2",
                "--file-size", "8m", *args]
        if target.startswith("//"):
            argv += ["--user", USER]
        return argv

    def env(self) -> dict:
        return dict(os.environ, BRAID_PASSWORD=self.password)

    def bench(self, target: str, *args: str, timeout: float = 120) -> dict:
        argv = self.bench_argv(target, *args)
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env())
        assert p.returncode == 0, f"{' '.join(argv)} failed:\n{p.stderr}\n{p.stdout[-2000:]}"
        return json.loads(p.stdout)

    def start_bench(self, target: str, *args: str) -> subprocess.Popen:
        return subprocess.Popen(self.bench_argv(target, *args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env())

    def api(self, path: str, method: str = "GET", body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://{self.admin}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def share_qos(self, name: str) -> dict:
        status, body = self.api("/api/v1/shares")
        assert status == 200, body
        return next(s for s in json.loads(body)["shares"] if s["name"] == name)["qos"]


@pytest.fixture(scope="module")
def braid(tmp_path_factory):
    b = Braid(tmp_path_factory.mktemp("qos-"))
    yield b
    alive = b.proc.poll() is None
    servers.stop_pid(b.proc.pid)
    if not alive:
        pytest.fail(f"braid died during the QoS tests; log:\n{b.log.read_text()[-3000:]}")


def no_errors(r: dict) -> None:
    assert r["total"]["errors"] == 0, r["warnings"]
    assert r["total"]["count"] > 0


def within(measured: float, limit: float, frac: float) -> bool:
    return abs(measured - limit) <= frac * limit


# 10 measured seconds after 2 s of warm-up (the share's first moment, when
# its buckets are full, is not measured).
RUN = ("--duration", "10", "--warmup", "2")


@pytest.mark.timing
@pytest.mark.parametrize("proto", ["smb", "nfs"])
def test_iops_at_the_limit(braid, proto):
    target = braid.smb("qos") if proto == "smb" else braid.nfs("qos")
    r = braid.bench(target, "--rw", "randread", "--io-size", "4k", "--threads", "4",
                    "--queue-depth", "8", "--dir", f"iops-{proto}", *RUN)
    no_errors(r)
    print(f"{proto} 4k randread at 500 IOPS: {r['total']['iops']:.1f} IOPS, "
          f"p50 {r['total']['latency_us']['p50']:.0f} us")
    assert within(r["total"]["iops"], 500, 0.05), r["total"]
    # Every second near the limit, not a burst and a stall (a second may
    # dip when the machine is busy; the next makes up a little of it).
    for s in r["per_second"]:
        assert within(s["iops"], 500, 0.25), r["per_second"]
    q = braid.share_qos("qos")
    assert q["enabled"] and q["iops"] == 500 and q["throttled"], q
    assert q["throttled_fraction"]["iops"] > 0.3, q


@pytest.mark.parametrize("proto,rw,direction", [("smb", "randread", "egress"),
                                                ("nfs", "randwrite", "ingress")])
@pytest.mark.timing
def test_throughput_at_the_limit(braid, proto, rw, direction):
    # 64 KiB at 500 IOPS would be 31 MiB/s: the 20 MiB/s limit binds.
    target = braid.smb("qos") if proto == "smb" else braid.nfs("qos")
    r = braid.bench(target, "--rw", rw, "--io-size", "64k", "--threads", "4",
                    "--queue-depth", "8", "--dir", f"mibs-{proto}", *RUN)
    no_errors(r)
    print(f"{proto} 64k {rw} at 20 MiB/s: {r['total']['mib_s']:.2f} MiB/s")
    assert within(r["total"]["mib_s"], 20, 0.05), r["total"]
    q = braid.share_qos("qos")
    assert q["throttled_fraction"][direction] > 0.1, q
    current = q["current_read_mibps"] if direction == "egress" else q["current_write_mibps"]
    assert within(current, 20, 0.15), q


@pytest.mark.timing
def test_burst_while_credits_last_then_baseline(braid):
    # The files are made through `free` (same directory), so the burst
    # share's credits are all there when the run starts.
    braid.bench(braid.smb("free"), "--rw", "randread", "--io-size", "4k", "--duration", "1",
                "--warmup", "0", "--dir", "burst")
    before = braid.share_qos("burst")
    assert before["credits"] == before["credit_capacity"] == 1600, before
    r = braid.bench(braid.smb("burst"), "--rw", "randread", "--io-size", "4k", "--threads",
                    "4", "--queue-depth", "8", "--dir", "burst", "--duration", "10",
                    "--warmup", "0")
    no_errors(r)
    per = [s["iops"] for s in r["per_second"]]
    print(f"burst 200/600, 1600 credits, IOPS per second: {per}")
    assert len(per) == 10, per
    # 1600 credits at 600 - 200 = 400 a second: about 4 s of burst (the
    # first second also has the buckets' tenth of a second at the start).
    assert 540 <= per[0] <= 700, per
    for i in (1, 2, 3):
        assert within(per[i], 600, 0.10), per
    for i in range(5, 10):
        assert within(per[i], 200, 0.10), per
    q = braid.share_qos("burst")
    assert q["credits"] < 50 and q["throttled"], q
    # Idle now: the bucket refills at the baseline (200 a second).
    time.sleep(2)
    q = braid.share_qos("burst")
    assert q["seconds_to_full"] is not None and q["credits"] > 200, q


@pytest.mark.timing
def test_two_clients_get_the_same_share(braid):
    args = ("--rw", "randread", "--io-size", "4k", "--threads", "4", "--queue-depth", "8",
            "--duration", "10", "--warmup", "2")
    a = braid.start_bench(braid.smb("qos"), *args, "--dir", "fair-a")
    b = braid.start_bench(braid.smb("qos"), *args, "--dir", "fair-b")
    reports = []
    for p in (a, b):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        reports.append(json.loads(out))
    for r in reports:
        no_errors(r)
    x, y = (r["total"]["iops"] for r in reports)
    print(f"two clients: {x:.1f} and {y:.1f} IOPS")
    assert abs(x - y) <= 0.10 * max(x, y), (x, y)
    # Together, the share's limit (their windows differ by start-up time).
    assert within(x + y, 500, 0.10), (x, y)


@pytest.mark.timing
def test_a_share_within_its_limits_keeps_its_latency(braid):
    args = ("--rw", "randread", "--io-size", "4k", "--threads", "1", "--queue-depth", "1",
            "--duration", "4", "--warmup", "1", "--dir", "latency")
    alone = braid.bench(braid.smb("free"), *args)
    no_errors(alone)
    flood = braid.start_bench(braid.smb("qos"), "--rw", "randread", "--io-size", "4k",
                              "--threads", "4", "--queue-depth", "16", "--duration", "8",
                              "--warmup", "0", "--dir", "flood")
    try:
        time.sleep(2)
        during = braid.bench(braid.smb("free"), *args)
    finally:
        out, err = flood.communicate(timeout=120)
    assert flood.returncode == 0, err
    no_errors(json.loads(out))
    no_errors(during)
    assert braid.share_qos("qos")["throttled"]
    p50_alone = alone["total"]["latency_us"]["p50"]
    p50_during = during["total"]["latency_us"]["p50"]
    print(f"free share p50 alone {p50_alone:.0f} us, while qos is throttled {p50_during:.0f} us")
    # The flood's 64 requests wait in `qos`'s queue, not in `free`'s path.
    assert p50_during <= 2 * p50_alone + 300, (p50_alone, p50_during)
    assert during["total"]["iops"] > 600, during["total"]


def test_limits_change_through_the_api_and_on_sighup(braid):
    # A client stays connected while the limits change under it.
    run = braid.start_bench(braid.nfs("qos"), "--rw", "randread", "--io-size", "4k",
                            "--threads", "2", "--queue-depth", "8", "--duration", "10",
                            "--warmup", "0", "--dir", "live")
    try:
        # Past its second second of measuring (after connecting and making
        # its files, under a second).
        time.sleep(4.5)
        status, body = braid.api("/api/v1/shares/qos/qos", "PUT", {"iops": 1000})
        assert status == 200, body
        assert json.loads(body)["iops"] == 1000
        status, body = braid.api("/api/v1/shares/qos/qos", "PUT",
                                 {"iops": 1000, "burst_iops": 10})
        assert status == 400 and "qos.burst_iops = 10 is below qos.iops = 1000" in body, body
        status, body = braid.api("/api/v1/shares/nope/qos", "PUT", {"iops": 1})
        assert status == 404, body
    finally:
        out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    r = json.loads(out)
    no_errors(r)
    per = [s["iops"] for s in r["per_second"]]
    print(f"nfs IOPS per second, PUT iops 500 -> 1000 at ~4 s: {per}")
    # 500 a second before the change, 1000 after.
    assert within(per[1], 500, 0.15) and within(per[-1], 1000, 0.15), per
    # SIGHUP: the config's new limits apply (its table changed).
    braid.config.write_text(config_text(braid.share_dir, "iops = 300\n"))
    os.kill(braid.proc.pid, signal.SIGHUP)
    deadline = time.time() + 10
    while braid.share_qos("qos")["iops"] != 300:
        assert time.time() < deadline, braid.share_qos("qos")
        time.sleep(0.2)
    q = braid.share_qos("qos")
    assert q["ingress_mibps"] is None and q["egress_mibps"] is None, q
    braid.config.write_text(config_text(braid.share_dir))
    os.kill(braid.proc.pid, signal.SIGHUP)
    deadline = time.time() + 10
    while braid.share_qos("qos")["iops"] != 500:
        assert time.time() < deadline
        time.sleep(0.2)


def test_metrics_split_by_result(braid):
    status, text = braid.api("/metrics")
    assert status == 200
    lines = text.splitlines()
    ok = [ln for ln in lines if ln.startswith('braid_qos_operations_total{share="qos",class="read"')]
    counts = {ln.split('result="')[1].split('"')[0]: int(float(ln.split()[-1])) for ln in ok}
    assert counts["success_after_throttling"] > 0 and counts["success"] >= 0, counts
    assert counts["error"] == 0, counts
    assert any(ln.startswith('braid_qos_throttle_wait_seconds_count{share="qos"}') for ln in lines)
    assert any(ln.startswith('braid_qos_throttled_fraction{share="qos",reason="iops"}')
               for ln in lines)


def test_bad_limits_are_refused_in_one_line(tmp_path):
    (tmp_path / "d").mkdir()
    line = servers.config_error(tmp_path, f'[[share]]\nname = "x"\npath = "{tmp_path / "d"}"\n'
                                           "[share.qos]\niops = 500\nburst_iops = 100\n")
    assert "share 'x'" in line and "qos.burst_iops = 100 is below qos.iops = 500" in line, line


def test_status_shows_the_shares_qos(braid):
    p = subprocess.run([BIN, "status", "--admin", braid.admin, "--shares"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    row = next(ln for ln in p.stdout.splitlines() if ln.split() and ln.split()[0] == "qos")
    assert "500" in row, p.stdout


def test_a_long_wait_goes_async_and_the_reads_succeed(tmp_path):
    """MS-SMB2 3.3.4.2: an SMB request QoS holds back longer than half a
    second gets an interim STATUS_PENDING (its AsyncId reaches the client),
    so a low limit never runs into the client's request timeout; every read
    then returns the file's bytes. The share is held to 1 IOPS."""
    from smbremote import RawClient
    from smbprotocol.open import FilePipePrinterAccessMask

    b = Braid(tmp_path)
    try:
        b.config.write_text(config_text(b.share_dir, "iops = 1\n"))
        os.kill(b.proc.pid, signal.SIGHUP)
        deadline = time.time() + 10
        while b.share_qos("qos")["iops"] != 1:
            assert time.time() < deadline, b.share_qos("qos")
            time.sleep(0.2)
        data = os.urandom(4 * 4096)
        (b.share_dir / "qos" / "f").write_bytes(data)
        target = servers.Server("braid", "127.0.0.1", b.port, "qos", USER, b.password,
                                b.share_dir / "qos", b.workdir, b.proc.pid, b.log, b.proc)
        c = RawClient(target)
        try:
            op = c.open("f", FilePipePrinterAccessMask.FILE_READ_DATA)
            started = time.monotonic()
            sent = []
            for i in range(4):
                msg, receive = op.read(i * 4096, 4096, send=False)
                sent.append((c.conn.send(msg, c.session.session_id, c.tree.tree_connect_id),
                             receive, i))
            for request, receive, i in sent:
                assert receive(request) == data[i * 4096:(i + 1) * 4096]
            elapsed = time.monotonic() - started
            went_async = [i for request, _, i in sent if request.async_id is not None]
            op.close()
        finally:
            c.conn.disconnect()
        # One read a second: the last waited about three seconds.
        assert elapsed > 2.0, elapsed
        assert len(went_async) >= 2, went_async
    finally:
        servers.stop_pid(b.proc.pid)


def copy_seconds(b: Braid, share: str, src: str, dst: str) -> float:
    """smbprotocol's server-side copy (FSCTL_SRV_COPYCHUNK_WRITE, 16
    chunks of 1 MiB per request); how long it took."""
    import smbclient
    smbclient.register_session("127.0.0.1", username=USER, password=b.password, port=b.port)
    try:
        started = time.monotonic()
        smbclient.copyfile(rf"\\127.0.0.1\{share}\{src}", rf"\\127.0.0.1\{share}\{dst}",
                           port=b.port)
        return time.monotonic() - started
    finally:
        smbclient.reset_connection_cache()


def nfs_copy_seconds(b: Braid, share: str, src: bytes, dst: bytes, size: int) -> float:
    """An NFSv4.2 server-side COPY (RFC 7862 15.2) of SRC to DST in `share`,
    16 MiB a request, over pynfs's client library; how long it took."""
    nfs4client, op, K, T = pynfs_lib.load()
    sess = pynfs_lib.root_session(nfs4client, b"127.0.0.1", b.nfs_port,
                                  b"braid-qos-copy-" + share.encode() + secrets.token_hex(4).encode(),
                                  minorversion=2)
    owner = T.open_owner4(0, b"qos-copy")

    def opened(name: bytes, access: int, create: bool):
        how = (T.openflag4(K.OPEN4_CREATE, T.createhow4(K.UNCHECKED4, {K.FATTR4_MODE: 0o644}))
               if create else T.openflag4(K.OPEN4_NOCREATE))
        res = sess.compound([op.putrootfh(), op.lookup(share.encode()),
                             op.open(0, access | K.OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                                     K.OPEN4_SHARE_DENY_NONE, owner, how,
                                     T.open_claim4(K.CLAIM_NULL, name)),
                             op.getfh()])
        assert res.status == K.NFS4_OK, res
        return res.resarray[-1].object, res.resarray[-2].stateid

    src_fh, src_stateid = opened(src, K.OPEN4_SHARE_ACCESS_READ, False)
    dst_fh, dst_stateid = opened(dst, K.OPEN4_SHARE_ACCESS_WRITE, True)
    started = time.monotonic()
    done, chunk = 0, 16 << 20
    while done < size:
        res = sess.compound([op.putfh(src_fh), op.savefh(), op.putfh(dst_fh),
                             op.copy(src_stateid, dst_stateid, done, done, chunk, 0, 1, [])])
        assert res.status == K.NFS4_OK, res
        copied = res.resarray[-1].cr_response.wr_count
        assert copied > 0, res
        done += copied
    elapsed = time.monotonic() - started
    res = sess.compound([op.putfh(dst_fh), op.commit(0, 0)])
    assert res.status == K.NFS4_OK, res
    return elapsed


@pytest.mark.timing
@pytest.mark.parametrize("proto", ["smb", "nfs"])
@pytest.mark.parametrize("direction", ["egress", "ingress"])
def test_a_server_side_copy_is_charged_what_it_reads_and_writes(tmp_path, proto, direction):
    """SMB's FSCTL_SRV_COPYCHUNK and NFSv4.2's COPY move no data over the
    wire, but the server reads and writes every byte: a copy of 48 MiB
    through a share held to 8 MiB/s one way (egress: what it reads;
    ingress: what it writes) takes what the model says. The first 16 MiB
    request goes on the full bucket and leaves it 16 MiB in debt; each of
    the two after waits until the debt is paid: (48 - 16) / 8 = 4 s. The
    same copy through the share without limits is the control."""
    b = Braid(tmp_path, qos=f"{direction}_mibps = 8\n")
    try:
        data = os.urandom(48 << 20)
        for d in ("qos", "free"):
            (b.share_dir / d / "src").write_bytes(data)
        if proto == "smb":
            def copy(share):
                return copy_seconds(b, share, "src", "dst")
        else:
            def copy(share):
                return nfs_copy_seconds(b, share, b"src", b"dst", len(data))
        free = copy("free")
        limited = copy("qos")
        print(f"48 MiB {proto} server-side copy, {direction} 8 MiB/s: {limited:.2f} s "
              f"(model 4.0 s; no limit: {free:.2f} s)")
        assert (b.share_dir / "qos" / "dst").read_bytes() == data
        assert (b.share_dir / "free" / "dst").read_bytes() == data
        assert free < 2.0, free
        assert 3.4 <= limited <= 5.0, limited
        q = b.share_qos("qos")
        assert q["throttled_fraction"][direction] > 0.02, q
        other = "ingress" if direction == "egress" else "egress"
        assert q["throttled_fraction"][other] == 0, q
    finally:
        servers.stop_pid(b.proc.pid)


@pytest.mark.timing
def test_a_home_share_gets_the_templates_limits(tmp_path):
    """Each user's home share ([homes], crates/braid-server/src/homes.rs)
    is provisioned as its template says: 200 IOPS here."""
    b = Braid(tmp_path, homes="iops = 200\n")
    try:
        # The first run makes the data files (their writes are charged too).
        b.bench(b.smb(USER), "--rw", "randread", "--io-size", "4k", "--duration", "1",
                "--warmup", "0")
        # Making them left the bucket in debt (16 MiB of writes is 256
        # operations, ~1.3 s at 200 IOPS): the run below starts once it is
        # repaid, and its warm-up is not measured.
        time.sleep(2)
        r = b.bench(b.smb(USER), "--rw", "randread", "--io-size", "4k", "--threads", "4",
                    "--queue-depth", "8", "--duration", "8", "--warmup", "2")
        no_errors(r)
        print(f"home share at 200 IOPS: {r['total']['iops']:.1f} IOPS, per second "
              f"{[round(s['iops']) for s in r['per_second']]}")
        assert (b.share_dir / "homes" / USER).is_dir()
        # Unthrottled, this machine serves thousands of these a second.
        assert within(r["total"]["iops"], 200, 0.08), r["total"]
        # The admin API and /metrics show the home share beside the
        # configured ones, with its limits and what it served.
        status, body = b.api("/api/v1/shares")
        assert status == 200, body
        listed = {s["name"]: s for s in json.loads(body)["shares"]}
        home = listed[USER]
        assert home["home"] is True and listed["qos"]["home"] is False, listed.keys()
        assert home["path"] == str(b.share_dir / "homes" / USER), home["path"]
        assert home["qos"]["iops"] == 200, home["qos"]
        assert home["operations_by_type"]["read"]["count"] >= r["total"]["count"], home
        status, metrics = b.api("/metrics")
        assert status == 200
        assert f'braid_qos_iops_limit{{share="{USER}"}} 200' in metrics, \
            [line for line in metrics.splitlines() if line.startswith("braid_qos_iops_limit")]
    finally:
        servers.stop_pid(b.proc.pid)
