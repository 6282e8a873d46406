#!/usr/bin/env python3
"""Server CPU per leased open, and per write to a leased file, of two Braid
builds, interleaved: the cost of watching cached files for host writes.

    scripts/bench-lease-builds.py OLD_BRAID NEW_BRAID [ROUNDS]

Each build serves a fresh share (tests/e2e/servers.py). Per round and
build, one smbprotocol client (tests/e2e/smbremote.py) makes 4000 opens
of one file with a Read+Handle lease, each read once (4 KiB) and closed
("open"), the same once for each of 3000 files not opened before in
that round ("distinct"), then holds one open with a Read+Write+Handle lease, reads it
once and writes 4 KiB 6000 times ("write"); a read through a cached open
is what has Braid watch the file for host writes. The order of the
builds is reversed every other round. Prints
server CPU (utime+stime) per operation. The client is slow (Python); only
the server's CPU is counted.
"""
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import servers  # noqa: E402
from smbremote import RawClient  # noqa: E402

R, H, W = 1, 2, 4
READ, WRITE = 0x1 | 0x80, 0x2
OPENS, DISTINCT, WRITES = 4000, 3000, 6000
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 6

bins = {"old": str(Path(sys.argv[1]).resolve()), "new": str(Path(sys.argv[2]).resolve())}
base = Path(tempfile.mkdtemp(prefix="braid-leasebench.", dir="/var/tmp"))
srv = {}
for name, b in bins.items():
    servers.BRAID_BIN = Path(b)
    d = base / name
    (d / "share").mkdir(parents=True)
    (d / "w").mkdir()
    (d / "share" / "f.bin").write_bytes(b"\0" * 4096)
    for i in range(DISTINCT * ROUNDS):
        (d / "share" / f"d{i}.bin").write_bytes(b"\0" * 4096)
    srv[name] = servers.start("braid", d / "share", d / "w")
KINDS = ("open", "distinct", "write")
res = {(n, k): [] for n in bins for k in KINDS}
order = list(bins)
block = uuid.uuid4().bytes * 256
for rnd in range(ROUNDS):
    for name in (order if rnd % 2 == 0 else order[::-1]):
        s = srv[name]
        c = RawClient(s)
        c0, _ = servers.tree_cpu(s.pid)
        for _ in range(OPENS):
            op = c.open_cached("f.bin", READ, lease=R | H)
            op.read(0, 4096)
            op.close()
        c1, _ = servers.tree_cpu(s.pid)
        for i in range(DISTINCT * rnd, DISTINCT * (rnd + 1)):
            op = c.open_cached(f"d{i}.bin", READ, lease=R | H)
            op.read(0, 4096)
            op.close()
        c1d, _ = servers.tree_cpu(s.pid)
        op = c.open_cached("f.bin", READ | WRITE, lease=R | W | H)
        assert op.granted_lease == R | W | H, op.granted_lease
        op.read(0, 4096)
        c2, _ = servers.tree_cpu(s.pid)
        for i in range(WRITES):
            op.write(block, (i % 256) * 4096)
        c3, _ = servers.tree_cpu(s.pid)
        op.close()
        c.close()
        res[(name, "open")].append((c1 - c0) / OPENS * 1e6)
        res[(name, "distinct")].append((c1d - c1) / DISTINCT * 1e6)
        res[(name, "write")].append((c3 - c2) / WRITES * 1e6)
        print(name, rnd, *(f"{k} {res[(name, k)][-1]:.1f} µs" for k in KINDS), flush=True)
for s in srv.values():
    s.stop()
for (n, k), v in res.items():
    v = sorted(v)
    print(f"{n} {k}: median {v[len(v) // 2]:.1f} min {v[0]:.1f} µs server CPU per op")
