"""What the pynfs-driven client scripts (nfs_open_read.py,
nfs_lock_client.py, nfs_deleg_client.py, nfs_read_plus.py, nfs_clone.py)
share: pynfs's client library set up (they run with cwd = a built pynfs's
nfs4.1), a client and its session, and the operations that look up an
export's path.
"""

import os
import sys
import time

sys.path.insert(0, os.getcwd())
import use_local  # noqa: F401,E402 - pynfs's path setup
import nfs4client  # noqa: E402
import nfs_ops  # noqa: E402
from rpc.security import AuthSys  # noqa: E402

op = nfs_ops.NFS4ops()


def session(host: str, port: int, minor: int, name: bytes, **create_session_args):
    """A new client (named `name` and the time, so that every run is a new
    one) of minor version `minor`, as root with AUTH_SYS (as pynfs's tests
    run; the tests' exports squash no root), and a session of it with
    RECLAIM_COMPLETE sent: (client, session). `create_session_args` go to
    pynfs's create_session (flags, fore_attrs)."""
    c = nfs4client.NFS4Client(host, port, minor)
    c.set_cred(AuthSys().init_cred(uid=0, gid=0, name=b"braid-test"))
    client = c.new_client(b"%s-%d" % (name, time.time_ns()))
    sess = client.create_session(**create_session_args)
    sess.compound([op.reclaim_complete(False)])
    return client, sess


def lookup_ops(path: list[str]) -> list:
    """PUTROOTFH and a LOOKUP per component of the export's path."""
    return [op.putrootfh()] + [op.lookup(p.encode()) for p in path]
