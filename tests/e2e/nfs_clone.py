"""An NFSv4.2 client's CLONE (RFC 7862 15.13), on pynfs's client library
(run with cwd = a built pynfs's nfs4.1, as nfs_open_read.py is).

    python3 nfs_clone.py HOST PORT EXPORT_COMPONENT... -- SRC DST SRC_OFFSET DST_OFFSET COUNT

OPENs SRC for reading and DST (which exists) for writing in a minor
version 2 session, sends PUTFH SRC, SAVEFH, PUTFH DST, CLONE and CLOSEs
both. Prints `STATUS N` (CLONE's status, 0 for NFS4_OK), or `FAILED
STATUS` (and exits 1) when an OPEN fails.
"""

import sys

from pynfs_session import lookup_ops, op, session  # noqa: E402 - sets up pynfs
from xdrdef.nfs4_const import (
    NFS4_OK, OPEN4_NOCREATE, OPEN4_SHARE_ACCESS_READ, OPEN4_SHARE_ACCESS_BOTH,
    OPEN4_SHARE_ACCESS_WANT_NO_DELEG, OPEN4_SHARE_DENY_NONE, CLAIM_NULL,
)
from xdrdef.nfs4_type import open_claim4, open_owner4, openflag4


def main():
    sep = sys.argv.index("--")
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3:sep]
    src, dst = sys.argv[sep + 1].encode(), sys.argv[sep + 2].encode()
    src_off, dst_off, count = (int(v) for v in sys.argv[sep + 3:sep + 6])
    _, sess = session(host, port, 2, b"braid-clone")
    lookup = lookup_ops(path)
    opened = []
    for name, access in ((src, OPEN4_SHARE_ACCESS_READ), (dst, OPEN4_SHARE_ACCESS_BOTH)):
        res = sess.compound(lookup + [
            op.open(0, access | OPEN4_SHARE_ACCESS_WANT_NO_DELEG, OPEN4_SHARE_DENY_NONE,
                    open_owner4(0, b"cloner"), openflag4(OPEN4_NOCREATE),
                    open_claim4(CLAIM_NULL, name)),
            op.getfh()])
        if res.status != NFS4_OK:
            print(f"FAILED {res.status}", flush=True)
            return 1
        opened.append((res.resarray[-2].stateid, res.resarray[-1].object))
    (src_sid, src_fh), (dst_sid, dst_fh) = opened
    res = sess.compound([op.putfh(src_fh), op.savefh(), op.putfh(dst_fh),
                         op.clone(src_sid, dst_sid, src_off, dst_off, count)])
    print(f"STATUS {res.status}", flush=True)
    for sid, fh in opened:
        sess.compound([op.putfh(fh), op.close(0, sid)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
