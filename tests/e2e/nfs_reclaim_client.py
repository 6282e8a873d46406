"""Two NFSv4.1 clients, A and B, that take state before a server restart
and reclaim it after, on pynfs's client library (run with cwd = a built
pynfs's nfs4.1, as test_nfs_reclaim.py does): the kernel client reclaims
only what it held, so it cannot show what a server does with a reclaim of
something else.

    python3 nfs_reclaim_client.py HOST PORT EXPORT_COMPONENT... -- before NAME
    python3 nfs_reclaim_client.py HOST PORT EXPORT_COMPONENT... -- after NAME

`before`: A creates and opens `a` (read/write, deny none) with a write lock
on bytes 0-99 and opens `d` for reading with a read delegation; A and B
both open `b` (read/write), A with a write lock on bytes 0-99 of it. It
prints one JSON line: the files' handles (hex). The state stays: the
process exits without closing anything, as a client cut off by a server
crash.

`after` (the server restarted; the line from `before` on stdin): each
client comes back under its old name and reclaims; B first, so that what
it must not get is still free. Prints one JSON object: each attempt's name
and the status name it got (and, for delegation reclaims, the delegation
type granted).
"""

import json
import sys

from pynfs_session import lookup_ops, op  # noqa: E402 - sets up pynfs
import nfs4client  # noqa: E402
from rpc.security import AuthSys  # noqa: E402
from xdrdef.nfs4_const import (  # noqa: E402
    CLAIM_NULL, CLAIM_PREVIOUS, CREATE_SESSION4_FLAG_CONN_BACK_CHAN, FATTR4_MODE, NFS4_OK,
    OPEN4_CREATE, OPEN4_NOCREATE, OPEN4_SHARE_ACCESS_BOTH, OPEN4_SHARE_ACCESS_READ,
    OPEN4_SHARE_ACCESS_WANT_NO_DELEG, OPEN4_SHARE_ACCESS_WANT_READ_DELEG,
    OPEN4_SHARE_DENY_NONE, OPEN4_SHARE_DENY_WRITE, OPEN_DELEGATE_NONE, OPEN_DELEGATE_READ,
    UNCHECKED4, WRITE_LT, nfsstat4,
)
from xdrdef.nfs4_type import (  # noqa: E402
    createhow4, lock_owner4, locker4, open_claim4, open_owner4, open_to_lock_owner4, openflag4,
)


def connect(host, port, name):
    c = nfs4client.NFS4Client(host, port, 1)
    c.set_cred(AuthSys().init_cred(uid=0, gid=0, name=b"braid-test"))
    client = c.new_client(name)
    return client, client.create_session(flags=CREATE_SESSION4_FLAG_CONN_BACK_CHAN)


def status(res):
    return nfsstat4[res.status]


def lock_op(kind, offset, length, open_sid, owner, reclaim):
    locker = locker4(new_lock_owner=True, open_owner=open_to_lock_owner4(
        0, open_sid, 0, lock_owner4(0, owner)))
    return op.lock(kind, reclaim, offset, length, locker)


def before(host, port, path, name):
    lookup = lookup_ops(path)
    handles = {}
    for who, files in (("A", ["a", "b", "d"]), ("B", ["b"])):
        _, sess = connect(host, port, name + who.encode())
        sess.compound([op.reclaim_complete(False)])
        for f in files:
            deleg = f == "d"
            access = (OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_READ_DELEG if deleg
                      else OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_NO_DELEG)
            how = openflag4(OPEN4_CREATE, createhow4(UNCHECKED4, {FATTR4_MODE: 0o666}))
            res = sess.compound(lookup + [
                op.open(0, access, OPEN4_SHARE_DENY_NONE, open_owner4(0, who.encode() + b"-owner"),
                        how, open_claim4(CLAIM_NULL, f.encode())),
                op.getfh()])
            assert res.status == NFS4_OK, res
            opened, fh = res.resarray[-2], res.resarray[-1].object
            handles[f] = fh.hex()
            if deleg:
                assert opened.delegation.delegation_type == OPEN_DELEGATE_READ, opened
            if who == "A" and f in ("a", "b"):
                res = sess.compound([op.putfh(fh), lock_op(
                    WRITE_LT, 0, 100, opened.stateid, b"A-locker-" + f.encode(), False)])
                assert res.status == NFS4_OK, res
    print(json.dumps(handles), flush=True)


def reopen(sess, fh, owner, access, deny, deleg_type=OPEN_DELEGATE_NONE):
    return sess.compound([op.putfh(fh), op.open(
        0, access, deny, open_owner4(0, owner), openflag4(OPEN4_NOCREATE),
        open_claim4(CLAIM_PREVIOUS, None, deleg_type))])


def after(host, port, name, handles):
    fh = {f: bytes.fromhex(h) for f, h in handles.items()}
    out = {}
    both, none = OPEN4_SHARE_ACCESS_BOTH, OPEN4_SHARE_DENY_NONE

    _, b = connect(host, port, name + b"B")
    out["B reopens a, which it never opened"] = status(reopen(b, fh["a"], b"B-owner", both, none))
    out["B reopens b with a deny it did not hold"] = status(
        reopen(b, fh["b"], b"B-probe", both, OPEN4_SHARE_DENY_WRITE))
    out["B reopens b with a delegation it did not hold"] = status(
        reopen(b, fh["b"], b"B-probe", OPEN4_SHARE_ACCESS_READ, none, OPEN_DELEGATE_READ))
    res = reopen(b, fh["b"], b"B-owner", both, none)
    out["B reopens b"] = status(res)
    if res.status == NFS4_OK:
        res = b.compound([op.putfh(fh["b"]), lock_op(
            WRITE_LT, 0, 100, res.resarray[-1].stateid, b"B-locker-b", True)])
        out["B relocks A's lock on b"] = status(res)
    out["B reclaim complete"] = status(b.compound([op.reclaim_complete(False)]))

    _, a = connect(host, port, name + b"A")
    for f in ("a", "b"):
        res = reopen(a, fh[f], b"A-owner", both, none)
        out[f"A reopens {f}"] = status(res)
        if res.status != NFS4_OK:
            continue
        sid = res.resarray[-1].stateid
        res = a.compound([op.putfh(fh[f]), lock_op(
            WRITE_LT, 0, 100, sid, b"A-locker-" + f.encode(), True)])
        out[f"A relocks its lock on {f}"] = status(res)
        if f == "a":
            res = a.compound([op.putfh(fh[f]), lock_op(
                WRITE_LT, 200, 100, sid, b"A-other-locker", True)])
            out["A relocks a range it did not hold"] = status(res)
    res = reopen(a, fh["d"], b"A-owner", OPEN4_SHARE_ACCESS_READ, none, OPEN_DELEGATE_READ)
    out["A reopens d with its read delegation"] = status(res)
    if res.status == NFS4_OK:
        out["A's delegation on d"] = int(res.resarray[-1].delegation.delegation_type)
    out["A reclaim complete"] = status(a.compound([op.reclaim_complete(False)]))
    print(json.dumps(out), flush=True)


def main():
    sep = sys.argv.index("--")
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3:sep]
    phase, name = sys.argv[sep + 1], sys.argv[sep + 2].encode()
    if phase == "before":
        before(host, port, path, name)
    else:
        after(host, port, name, json.loads(sys.stdin.readline()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
