"""pynfs's NFSv4.1/4.2 client library, imported in-process for tests that
drive operations no other client here can send on demand (built under
target/pynfs by tests/conformance/run_pynfs.py when need be)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance"))
import run_pynfs  # noqa: E402  (tests/conformance/run_pynfs.py)


def load(log_name: str = "pynfs-lib-build.log"):
    """(nfs4client, an nfs_ops.NFS4ops, nfs4_const, nfs4_type)."""
    source = run_pynfs.find_pynfs()
    if source is None:
        pytest.fail(run_pynfs.NOT_FOUND)
    log = open(HERE.parents[1] / "target" / log_name, "w")
    tree = source if run_pynfs.is_built(source) else run_pynfs.build_pynfs(source, log)
    for sub in ("nfs4.1", "", "xdr"):
        path = str(tree / sub) if sub else str(tree)
        if path not in sys.path:
            sys.path.insert(1, path)
    import nfs4client  # noqa: F401
    import nfs_ops
    from xdrdef import nfs4_const, nfs4_type
    return nfs4client, nfs_ops.NFS4ops(), nfs4_const, nfs4_type


def root_session(nfs4client, host: bytes, port: int, name: bytes, minorversion: int = 1):
    """A session of a new client, AUTH_SYS as root (the exports these tests
    start squash no root), as pynfs runs."""
    import rpc.security
    c = nfs4client.NFS4Client(host, port, minorversion=minorversion)
    c.set_cred(rpc.security.AuthSys().init_cred(uid=0, gid=0, name=b"braid-e2e"))
    return c.new_client_session(name)
