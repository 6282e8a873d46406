"""READ_PLUS (RFC 7862 15.10): an NFSv4.2 READ that answers a sparse
file's holes as holes. The client is pynfs's client library
(nfs_read_plus.py) in a minor version 2 session; the file is made sparse
on the host (its holes are the file system's: ext4 or tmpfs keep them).
The bytes the segments stand for must equal the file's, and a hole of a
megabyte must come back as a hole, not as a megabyte of zeros. Braid only
(nfs-ganesha's 4.2 is not run here).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from smb_nfs import both, pynfs_tree  # noqa: F401

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid", reason="NFSv4.2 READ_PLUS: Braid only")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance"))
import run_pynfs  # noqa: E402

MIB = 1024 * 1024


def read_plus(nfs, pynfs_tree, name: str, *ranges: int) -> list[tuple[list[tuple], bool]]:
    """One READ_PLUS per (offset, count): its segments, ("DATA", offset,
    bytes) or ("HOLE", offset, length), and its eof."""
    components = [p for p in nfs.export.split("/") if p]
    out = subprocess.run(
        [run_pynfs.PYTHON, str(HERE / "nfs_read_plus.py"), nfs.host, str(nfs.port),
         *components, "--", name, *map(str, ranges)],
        cwd=pynfs_tree / "nfs4.1", capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"{out.stdout} {out.stderr[-2000:]}"
    replies, segments = [], []
    for line in out.stdout.splitlines():
        words = line.split()
        if not words or words[0] not in ("DATA", "HOLE", "EOF", "CALLS", "FAILED", "UNKNOWN"):
            continue  # pynfs's own notices ("Could not find gssapi module")
        if words[0] == "DATA":
            segments.append(("DATA", int(words[1]), bytes.fromhex(words[2] if len(words) > 2 else "")))
        elif words[0] == "HOLE":
            segments.append(("HOLE", int(words[1]), int(words[2])))
        elif words[0] == "CALLS":
            pass
        elif words[0] == "EOF":
            replies.append((segments, words[1] == "1"))
            segments = []
        else:
            pytest.fail(f"unexpected line: {line}")
    assert len(replies) == len(ranges) // 2, out.stdout[-2000:]
    return replies


def bytes_of(segments: list[tuple], offset: int) -> bytes:
    """The bytes the segments stand for, checking they follow each other
    from `offset` without a gap."""
    out = bytearray()
    for kind, at, what in segments:
        assert at == offset + len(out), (kind, at, offset + len(out))
        out += what if kind == "DATA" else bytes(what)
    return bytes(out)


def sparse_file(share_dir: Path, name: str) -> bytes:
    """4 KiB of data at 0 and at 1 MiB, holes between and after, 3 MiB in
    all; the file's bytes."""
    first, second = os.urandom(4096), os.urandom(4096)
    with open(share_dir / name, "wb") as f:
        f.write(first)
        f.seek(MIB)
        f.write(second)
        f.truncate(3 * MIB)
    os.chmod(share_dir / name, 0o644)
    return (share_dir / name).read_bytes()


def test_holes_come_back_as_holes_and_the_bytes_are_the_files(both, pynfs_tree):
    smb, nfs = both
    name = f"rp-{uuid.uuid4().hex[:12]}"
    want = sparse_file(smb.share_dir, name)
    replies = read_plus(nfs, pynfs_tree, name, 0, MIB, MIB, MIB, 2 * MIB, MIB)
    got = b"".join(bytes_of(segs, i * MIB) for i, (segs, _) in enumerate(replies))
    assert got == want
    assert [eof for _, eof in replies] == [False, False, True]
    # The megabyte-long holes are holes on the wire.
    first, _ = replies[0]
    assert first[0][:2] == ("DATA", 0) and len(first[0][2]) == 4096, first[0][:2]
    assert first[1] == ("HOLE", 4096, MIB - 4096), first[1]
    last, _ = replies[2]
    assert last == [("HOLE", 2 * MIB, MIB)], last


def test_a_dense_file_is_one_data_segment(both, pynfs_tree):
    smb, nfs = both
    name = f"rp-{uuid.uuid4().hex[:12]}"
    data = os.urandom(300_000)
    (smb.share_dir / name).write_bytes(data)
    os.chmod(smb.share_dir / name, 0o644)
    [(segments, eof)] = read_plus(nfs, pynfs_tree, name, 1000, 200_000)
    assert segments == [("DATA", 1000, data[1000:201_000])]
    assert not eof
    # Up to the end: eof; past it: nothing, and eof.
    [(segments, eof), (past, past_eof)] = read_plus(nfs, pynfs_tree, name, 250_000, MIB,
                                                    400_000, 10)
    assert segments == [("DATA", 250_000, data[250_000:])] and eof
    assert past == [] and past_eof
