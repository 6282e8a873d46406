"""A file written on the host, by a process other than the server, breaks
the clients that cache it, as a local open breaks them on Windows: a Read
lease or an oplock goes to none while the writer is still at work, and a
file removed or replaced on the host breaks handle caching too. The client
then reads what the host wrote rather than what it cached. (Braid watches
a file from the first READ through an open that caches it: before that
the client has cached nothing of its content.)

Seen with smbprotocol (the breaks taken from its receive loop by
smbremote.Breaks). Braid only: Samba breaks for local writes only with
`kernel oplocks = yes` (off by default), and then grants no leases.
"""

from __future__ import annotations

import os

import pytest
from smbprotocol.open import FilePipePrinterAccessMask, RequestedOplockLevel

from smbremote import Breaks, RawClient

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_E2E_TARGET", "braid") == "samba",
                                reason="Samba breaks for host writes only with kernel oplocks")

READ = FilePipePrinterAccessMask.FILE_READ_DATA | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES
READ_WRITE = READ | FilePipePrinterAccessMask.FILE_WRITE_DATA
R, H, W = 1, 2, 4


def test_a_host_write_breaks_a_read_lease_before_the_writer_closes(smb_server, remote_dir):
    local = smb_server.share_dir / remote_dir / "cached.txt"
    local.write_bytes(b"first\n")
    c = RawClient(smb_server)
    breaks = Breaks(c.conn)
    try:
        op = c.open_cached(f"{remote_dir}\\cached.txt", READ, lease=R | H)
        assert op.granted_lease == R | H
        assert op.read(0, 64) == b"first\n"
        assert breaks.next(0.5) is None, "a break before anything changed"
        with open(local, "ab") as writer:
            writer.write(b"appended on the host\n")
            writer.flush()
            got = breaks.next(5)
            assert got is not None, "no lease break while the host writer has the file open"
        assert (got["current"], got["new"], got["ack_required"]) == (R | H, 0, True), got
        assert op.read(0, 64) == b"first\nappended on the host\n"
        op.close()
    finally:
        c.close()


def test_a_host_write_breaks_oplocks(smb_server, remote_dir):
    d = smb_server.share_dir / remote_dir
    (d / "batch.txt").write_bytes(b"batch")
    (d / "level2.txt").write_bytes(b"level2")
    c = RawClient(smb_server)
    breaks = Breaks(c.conn)
    try:
        batch = c.open_cached(f"{remote_dir}\\batch.txt", READ_WRITE,
                              oplock=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH)
        level2 = c.open_cached(f"{remote_dir}\\level2.txt", READ,
                               oplock=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_II)
        assert batch.oplock_level == RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH
        assert level2.oplock_level == RequestedOplockLevel.SMB2_OPLOCK_LEVEL_II
        assert batch.read(0, 64) == b"batch" and level2.read(0, 64) == b"level2"
        (d / "level2.txt").write_bytes(b"changed")
        got = breaks.next(5)
        assert got == {"oplock": 0, "file_id": level2.file_id}, got
        with open(d / "batch.txt", "r+b") as writer:
            writer.write(b"B")
        got = breaks.next(5)
        assert got == {"oplock": 0, "file_id": batch.file_id}, got
        assert level2.read(0, 64) == b"changed"
        assert batch.read(0, 64) == b"Batch"
        batch.close()
        level2.close()
    finally:
        c.close()


def test_a_file_replaced_on_the_host_breaks_handle_caching(smb_server, remote_dir):
    d = smb_server.share_dir / remote_dir
    (d / "config.ini").write_bytes(b"old")
    c = RawClient(smb_server)
    breaks = Breaks(c.conn)
    try:
        op = c.open_cached(f"{remote_dir}\\config.ini", READ, lease=R | H)
        assert op.granted_lease == R | H
        assert op.read(0, 64) == b"old"
        # A change of mode leaves what the client cached as it was.
        os.chmod(d / "config.ini", 0o640)
        assert breaks.next(1) is None, "a change of mode broke the lease"
        # An editor's save: the new content written aside, then renamed
        # over the file. The cached handle names a file that is gone.
        (d / "config.ini.new").write_bytes(b"new")
        os.replace(d / "config.ini.new", d / "config.ini")
        got = breaks.next(5)
        assert got is not None, "no lease break when the file was replaced"
        assert (got["current"], got["new"]) == (R | H, 0), got
        op.close()
        again = c.open_cached(f"{remote_dir}\\config.ini", READ, lease=R | H)
        assert again.read(0, 64) == b"new"
        again.close()
    finally:
        c.close()
