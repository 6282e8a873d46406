"""An NFSv4.1 client that holds a read or write delegation and answers its
recall,
on pynfs's client library (run with cwd = a built pynfs's nfs4.1, as
test_nfs_smb_delegations.py does): what nfs-rs and the kernel client in
a VM cannot be driven to do from a test.

    python3 nfs_deleg_client.py HOST PORT EXPORT_COMPONENT... -- FILE DELAY [write]
        [read-after] [recall-wait=SECONDS] [cb-getattr=DELTA,SIZE]

Opens FILE of the export for reading (creating it if need be) asking for
a read delegation (over a session whose connection is bound to the
backchannel); with `write`, for reading and writing asking for a write
delegation. Without one it prints `NO DELEGATION` and exits; with one
it prints `DELEGATED`; on
CB_RECALL prints `RECALLED`, waits DELAY seconds (a write delegation's
holder then writes what it "cached", the bytes `nfs-cached`, at offset 0
with the delegation's stateid, as a client flushes before returning) and
returns the delegation (DELEGRETURN), then prints `RETURNED`; with
`read-after`, then READs the file through its open and prints
`READ <hex of the bytes>`. With no recall within `recall-wait` seconds
(60 unless given) it prints `NOT RECALLED`. With `cb-getattr`, after
`DELEGATED` it prints `BASE CHANGE SIZE` (the file's change attribute
and size then) and answers CB_GETATTR with that change attribute plus
DELTA and SIZE (the base size if negative), printing `CB_GETATTR` each
time: a holder that modified the file in its cache (DELTA > 0) or not.
Exits when stdin closes.
"""

import sys
import threading
import time

from pynfs_session import lookup_ops, op, session  # noqa: E402 - sets up pynfs
from xdrdef.nfs4_const import (
    CREATE_SESSION4_FLAG_CONN_BACK_CHAN, UNCHECKED4, NFS4_OK, OPEN4_CREATE,
    OPEN4_SHARE_ACCESS_READ, OPEN4_SHARE_ACCESS_WANT_READ_DELEG, OPEN4_SHARE_DENY_NONE,
    OP_CB_RECALL, OPEN_DELEGATE_READ, CLAIM_NULL, FATTR4_MODE, OPEN4_SHARE_ACCESS_BOTH,
    OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG, OPEN_DELEGATE_WRITE, FILE_SYNC4,
    OP_CB_GETATTR, FATTR4_CHANGE, FATTR4_SIZE,
)
from xdrdef.nfs4_type import createhow4, open_claim4, open_owner4, openflag4


def main():
    sep = sys.argv.index("--")
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3:sep]
    name, delay = sys.argv[sep + 1].encode(), float(sys.argv[sep + 2])
    modes = sys.argv[sep + 3:]
    write = "write" in modes
    read_after = "read-after" in modes
    recall_wait = 60.0
    cb_getattr = None
    for m in modes:
        if m.startswith("recall-wait="):
            recall_wait = float(m.split("=", 1)[1])
        if m.startswith("cb-getattr="):
            delta, size = m.split("=", 1)[1].split(",")
            cb_getattr = (int(delta), int(size))
    if write:
        access, kind = OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG, OPEN_DELEGATE_WRITE
    else:
        access, kind = OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_READ_DELEG, OPEN_DELEGATE_READ
    client, sess = session(host, port, 1, b"braid-deleg", flags=CREATE_SESSION4_FLAG_CONN_BACK_CHAN)
    recalled = threading.Event()

    def pre_hook(arg, env):
        recalled.stateid = arg.stateid
        env.notify = recalled.set

    client.cb_pre_hook(OP_CB_RECALL, pre_hook)
    lookup = lookup_ops(path)
    how = openflag4(OPEN4_CREATE, createhow4(UNCHECKED4, {FATTR4_MODE: 0o666}))
    res = sess.compound(lookup + [
        op.open(0, access, OPEN4_SHARE_DENY_NONE, open_owner4(0, b"deleg-owner"), how,
                open_claim4(CLAIM_NULL, name)),
        op.getfh()])
    assert res.status == NFS4_OK, res
    opened, fh = res.resarray[-2], res.resarray[-1].object
    if opened.delegation.delegation_type != kind:
        print("NO DELEGATION", flush=True)
        return 0
    print("DELEGATED", flush=True)
    if cb_getattr is not None:
        res = sess.compound([op.putfh(fh), op.getattr(1 << FATTR4_CHANGE | 1 << FATTR4_SIZE)])
        assert res.status == NFS4_OK, res
        base = res.resarray[-1].obj_attributes
        print(f"BASE {base[FATTR4_CHANGE]} {base[FATTR4_SIZE]}", flush=True)
        delta, size = cb_getattr
        answer = {FATTR4_CHANGE: base[FATTR4_CHANGE] + delta,
                  FATTR4_SIZE: base[FATTR4_SIZE] if size < 0 else size}

        def getattr_post_hook(arg, env, res):
            res.obj_attributes = answer
            print("CB_GETATTR", flush=True)
            return res

        client.cb_post_hook(OP_CB_GETATTR, getattr_post_hook)
    recalled.wait(recall_wait)
    if not recalled.is_set():
        print("NOT RECALLED", flush=True)
        return 1
    print("RECALLED", flush=True)
    time.sleep(delay)
    if write:
        res = sess.compound([op.putfh(fh),
                             op.write(recalled.stateid, 0, FILE_SYNC4, b"nfs-cached")])
        assert res.status == NFS4_OK, res
    res = sess.compound([op.putfh(fh), op.delegreturn(recalled.stateid)])
    assert res.status == NFS4_OK, res
    print("RETURNED", flush=True)
    if read_after:
        res = sess.compound([op.putfh(fh), op.read(opened.stateid, 0, 4096)])
        assert res.status == NFS4_OK, res
        print("READ " + res.resarray[-1].data.hex(), flush=True)
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
