"""An NFSv4.2 client's READ_PLUS (RFC 7862 15.10), on pynfs's client
library (run with cwd = a built pynfs's nfs4.1, as nfs_open_read.py is).

    python3 nfs_read_plus.py HOST PORT EXPORT_COMPONENT... -- FILE OFFSET COUNT [OFFSET COUNT ...]

OPENs FILE for reading in a minor version 2 session whose replies may
reach 2 MiB, and reads each OFFSET COUNT range with READ_PLUS, as a
client does: from where the last reply stopped until COUNT bytes are
covered or a reply says eof. Prints, for each range, the segments as
`DATA OFFSET HEX` and `HOLE OFFSET LENGTH` lines, then `CALLS N` and
`EOF 0|1`; or `FAILED STATUS` (and exits 1).
"""

import sys

from pynfs_session import lookup_ops, op, session  # noqa: E402 - sets up pynfs
from xdrdef.nfs4_const import (
    NFS4_OK, NFS4_CONTENT_DATA, NFS4_CONTENT_HOLE, OPEN4_NOCREATE, OPEN4_SHARE_ACCESS_READ,
    OPEN4_SHARE_ACCESS_WANT_NO_DELEG, OPEN4_SHARE_DENY_NONE, CLAIM_NULL,
)
from xdrdef.nfs4_type import channel_attrs4, open_claim4, open_owner4, openflag4


def main():
    sep = sys.argv.index("--")
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3:sep]
    name = sys.argv[sep + 1].encode()
    ranges = [int(v) for v in sys.argv[sep + 2:]]
    big = 2 * 1024 * 1024
    _, sess = session(host, port, 2, b"braid-read-plus", fore_attrs=channel_attrs4(0, big, big, 8192, 128, 8, []))
    lookup = lookup_ops(path)
    res = sess.compound(lookup + [
        op.open(0, OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                OPEN4_SHARE_DENY_NONE, open_owner4(0, b"reader"),
                openflag4(OPEN4_NOCREATE), open_claim4(CLAIM_NULL, name)),
        op.getfh()])
    if res.status != NFS4_OK:
        print(f"FAILED {res.status}", flush=True)
        return 1
    stateid, fh = res.resarray[-2].stateid, res.resarray[-1].object
    for offset, count in zip(ranges[::2], ranges[1::2]):
        pos, end, calls, eof = offset, offset + count, 0, False
        while pos < end and not eof:
            res = sess.compound([op.putfh(fh), op.read_plus(stateid, pos, end - pos)])
            calls += 1
            if res.status != NFS4_OK:
                print(f"FAILED {res.status}", flush=True)
                return 1
            ok = res.resarray[-1].switch.switch
            for seg in ok.rpr_contents:
                if seg.rpc_content == NFS4_CONTENT_DATA:
                    d = seg.rpc_data
                    print(f"DATA {d.d_offset} {d.d_data.hex()}")
                    pos = d.d_offset + len(d.d_data)
                elif seg.rpc_content == NFS4_CONTENT_HOLE:
                    h = seg.rpc_hole
                    print(f"HOLE {h.di_offset} {h.di_length}")
                    pos = h.di_offset + h.di_length
                else:
                    print(f"UNKNOWN {seg.rpc_content}")
                    return 1
            eof = ok.rpr_eof
            if not ok.rpr_contents and not eof:
                print("FAILED empty reply before eof", flush=True)
                return 1
        print(f"CALLS {calls}")
        print(f"EOF {int(eof)}", flush=True)
    sess.compound([op.putfh(fh), op.close(0, stateid)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
