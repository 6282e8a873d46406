"""A second NFSv4.1 client that opens a file for reading and reads it, on
pynfs's client library (run with cwd = a built pynfs's nfs4.1, as
test_nfs_kernel.py does): the conflicting open that recalls another
client's write delegation.

    python3 nfs_open_read.py HOST PORT EXPORT_COMPONENT... -- FILE TIMEOUT [getattr]

OPENs FILE for reading (no delegation wanted), answering NFS4ERR_DELAY by
trying again every 0.2 s for up to TIMEOUT seconds (its own loop: pynfs's
`compound` retries leak a slot each time they give up), then READs up to
4096 bytes from offset 0 and CLOSEs. Prints `WAITED SECONDS DELAYS` and
`READ HEX`, or `FAILED STATUS` and exits 1. With `getattr`, it only asks
for FILE's size and change attribute (GETATTR, retried the same way) and
prints `SIZE N` and `CHANGE N` instead of opening and reading.
"""

import sys
import time

from pynfs_session import lookup_ops, op, session  # noqa: E402 - sets up pynfs
from xdrdef.nfs4_const import (
    NFS4_OK, NFS4ERR_DELAY, OPEN4_NOCREATE, FATTR4_SIZE, FATTR4_CHANGE, OPEN4_SHARE_ACCESS_READ,
    OPEN4_SHARE_ACCESS_WANT_NO_DELEG, OPEN4_SHARE_DENY_NONE, CLAIM_NULL,
)
from xdrdef.nfs4_type import open_claim4, open_owner4, openflag4


def until_not_delayed(sess, ops, timeout: float):
    """The compound's result once it is not NFS4ERR_DELAY (tried every
    0.2 s for up to `timeout` s), after printing `WAITED SECONDS DELAYS`;
    None, after printing `FAILED STATUS`, if it did not succeed."""
    started, delays = time.monotonic(), 0
    while True:
        res = sess.compound(ops, handle_state_errors=False)
        if res.status != NFS4ERR_DELAY or time.monotonic() - started > timeout:
            break
        delays += 1
        time.sleep(0.2)
    if res.status != NFS4_OK:
        print(f"FAILED {res.status}", flush=True)
        return None
    print(f"WAITED {time.monotonic() - started:.2f} {delays}", flush=True)
    return res


def main():
    sep = sys.argv.index("--")
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3:sep]
    name, timeout = sys.argv[sep + 1].encode(), float(sys.argv[sep + 2])
    _, sess = session(host, port, 1, b"braid-reader")
    lookup = lookup_ops(path)
    if sys.argv[sep + 3:] == ["getattr"]:
        asked = op.getattr(1 << FATTR4_SIZE | 1 << FATTR4_CHANGE)
        res = until_not_delayed(sess, lookup + [op.lookup(name), asked], timeout)
        if res is None:
            return 1
        attrs = res.resarray[-1].obj_attributes
        print(f"SIZE {attrs[FATTR4_SIZE]}", flush=True)
        print(f"CHANGE {attrs[FATTR4_CHANGE]}", flush=True)
        return 0
    opening = lookup + [
        op.open(0, OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                OPEN4_SHARE_DENY_NONE, open_owner4(0, b"reader"),
                openflag4(OPEN4_NOCREATE), open_claim4(CLAIM_NULL, name)),
        op.getfh()]
    res = until_not_delayed(sess, opening, timeout)
    if res is None:
        return 1
    stateid, fh = res.resarray[-2].stateid, res.resarray[-1].object
    res = sess.compound([op.putfh(fh), op.read(stateid, 0, 4096)])
    if res.status != NFS4_OK:
        print(f"FAILED {res.status}", flush=True)
        return 1
    print(f"READ {res.resarray[-1].switch.switch.data.hex()}", flush=True)
    sess.compound([op.putfh(fh), op.close(0, stateid)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
