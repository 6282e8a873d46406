"""CB_GETATTR (RFC 8881 10.4.3, 20.1): another client's GETATTR of the size
or change attribute of a file held under a write delegation asks the
holder what it has cached, rather than recalling the delegation. A holder
that modified the file in its cache makes the other client see its size
and a new change attribute; one that did not, the file's own. The
delegation stays with its holder either way. (A holder that does not
answer is recalled instead: test_nfs_smb_delegations.py.)

The holder is pynfs's client library answering CB_GETATTR
(nfs_deleg_client.py `cb-getattr`), the other client nfs_open_read.py.
Braid only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from smb_nfs import both, pynfs_tree  # noqa: F401
from test_nfs_host_recall import deleg_client, expect, finish, next_line

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid", reason="CB_GETATTR: Braid only")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance"))
import run_pynfs  # noqa: E402


def other_clients_getattr(nfs, pynfs_tree, name: str) -> dict[str, float | int]:
    components = [p for p in nfs.export.split("/") if p]
    out = subprocess.run(
        [run_pynfs.PYTHON, str(HERE / "nfs_open_read.py"), nfs.host, str(nfs.port),
         *components, "--", name, "30", "getattr"],
        cwd=pynfs_tree / "nfs4.1", capture_output=True, text=True, timeout=60)
    seen = {}
    for line in out.stdout.splitlines():
        words = line.split()
        if words and words[0] in ("WAITED", "SIZE", "CHANGE"):
            seen[words[0]] = float(words[1]) if words[0] == "WAITED" else int(words[1])
            if words[0] == "WAITED":
                seen["DELAYS"] = int(words[2])
    assert {"SIZE", "CHANGE"} <= seen.keys(), f"GETATTR failed: {out.stdout} {out.stderr[-2000:]}"
    return seen


@pytest.mark.parametrize("modified", [True, False])
def test_getattr_asks_the_write_delegation_holder_instead_of_recalling(
        both, pynfs_tree, modified):
    smb, nfs = both
    name = f"cg-{uuid.uuid4().hex[:12]}"
    (smb.share_dir / name).write_bytes(b"0123456789")
    mode = "cb-getattr=1,5" if modified else "cb-getattr=0,-1"
    holder = deleg_client(nfs, pynfs_tree, name, "write", mode, "recall-wait=4")
    try:
        expect(holder, "DELEGATED")
        base = expect(holder, "BASE").split()
        base_change, base_size = int(base[1]), int(base[2])
        assert base_size == 10
        seen = other_clients_getattr(nfs, pynfs_tree, name)
        assert next_line(holder) == "CB_GETATTR", "the holder was not asked"
        # Answered from the holder, not held off for a recall.
        assert seen["DELAYS"] == 0, seen
        if modified:
            assert seen["SIZE"] == 5, seen
            assert seen["CHANGE"] != base_change, seen
        else:
            assert seen["SIZE"] == 10, seen
            assert seen["CHANGE"] == base_change, seen
        assert next_line(holder, 10) == "NOT RECALLED"
    finally:
        finish(holder)


def test_the_change_attribute_stays_while_the_holder_reports_the_same_modification(
        both, pynfs_tree):
    smb, nfs = both
    name = f"cs-{uuid.uuid4().hex[:12]}"
    (smb.share_dir / name).write_bytes(b"abc")
    holder = deleg_client(nfs, pynfs_tree, name, "write", "cb-getattr=2,7", "recall-wait=6")
    try:
        expect(holder, "DELEGATED")
        expect(holder, "BASE")
        first = other_clients_getattr(nfs, pynfs_tree, name)
        second = other_clients_getattr(nfs, pynfs_tree, name)
        assert next_line(holder) == "CB_GETATTR"
        assert next_line(holder) == "CB_GETATTR"
        assert first["SIZE"] == second["SIZE"] == 7
        assert first["CHANGE"] == second["CHANGE"], (first, second)
        assert next_line(holder, 10) == "NOT RECALLED"
    finally:
        finish(holder)
