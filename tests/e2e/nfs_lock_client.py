"""An NFSv4.1 client that takes byte-range locks on commands from stdin,
on pynfs's client library (run with cwd = a built pynfs's nfs4.1, as
test_nfs_smb_locks.py does): nfs-rs has no lock call.

    python3 nfs_lock_client.py HOST PORT EXPORT_COMPONENT... -- FILE

Opens FILE of the export for reading and writing, prints `OPEN` (or the
error's name, and ends: NFS4ERR_GRACE while the server is in its grace
period), then for each line of stdin:
    lock OFFSET LENGTH r|w    LOCK (one lock owner throughout)
    unlock OFFSET LENGTH      LOCKU
    test OFFSET LENGTH r|w    LOCKT (another lock owner)
prints `OK`, `DENIED` or the error's name. Answers begin with `> `.
"""

import sys

from pynfs_session import lookup_ops, op, session  # noqa: E402 - sets up pynfs
from xdrdef.nfs4_const import (  # noqa: E402
    CLAIM_NULL, NFS4_OK, NFS4ERR_DENIED, OPEN4_NOCREATE, OPEN4_SHARE_ACCESS_BOTH,
    OPEN4_SHARE_ACCESS_WANT_NO_DELEG, OPEN4_SHARE_DENY_NONE, READ_LT, WRITE_LT,
    nfsstat4,
)
from xdrdef.nfs4_type import (  # noqa: E402
    exist_lock_owner4, lock_owner4, locker4, open_claim4, open_owner4, open_to_lock_owner4,
    openflag4,
)


def main():
    sep = sys.argv.index("--")
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3:sep]
    name = sys.argv[sep + 1].encode()
    _, sess = session(host, port, 1, b"braid-lock")
    lookup = lookup_ops(path)
    res = sess.compound(lookup + [
        op.open(0, OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                OPEN4_SHARE_DENY_NONE, open_owner4(0, b"lock-test"),
                openflag4(OPEN4_NOCREATE), open_claim4(CLAIM_NULL, name)),
        op.getfh()])
    if res.status != NFS4_OK:
        print(">", nfsstat4[res.status], flush=True)
        return 1
    open_sid, fh = res.resarray[-2].stateid, res.resarray[-1].object
    lock_sid = None
    print("> OPEN", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        what, offset, length = words[0], int(words[1]), int(words[2])
        kind = WRITE_LT if words[3:] == ["w"] else READ_LT
        if what == "lock":
            if lock_sid is None:
                locker = locker4(new_lock_owner=True, open_owner=open_to_lock_owner4(
                    0, open_sid, 0, lock_owner4(0, b"locker")))
            else:
                locker = locker4(new_lock_owner=False,
                                 lock_owner=exist_lock_owner4(lock_sid, 0))
            res = sess.compound([op.putfh(fh), op.lock(kind, False, offset, length, locker)])
            if res.status == NFS4_OK:
                lock_sid = res.resarray[-1].lock_stateid
        elif what == "unlock":
            res = sess.compound([op.putfh(fh), op.locku(kind, 0, lock_sid, offset, length)])
            if res.status == NFS4_OK:
                lock_sid = res.resarray[-1].lock_stateid
        else:
            res = sess.compound([op.putfh(fh), op.lockt(
                kind, offset, length, lock_owner4(0, b"tester"))])
        if res.status == NFS4_OK:
            print("> OK", flush=True)
        elif res.status == NFS4ERR_DENIED:
            print("> DENIED", flush=True)
        else:
            print(">", nfsstat4[res.status], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
