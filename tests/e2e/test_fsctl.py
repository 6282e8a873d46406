"""File system controls seen from smbprotocol, a client Braid did not write.

Server-side copy (FSCTL_SRV_REQUEST_RESUME_KEY + FSCTL_SRV_COPYCHUNK): a
file written over the wire is copied by the server into another file, in
1 MiB chunks and across two tree connects, and read back byte for byte; a
made-up resume key, a chunk past the source's end and an over-limit request
get the statuses MS-SMB2 3.3.5.15.6 names.

Block cloning (FSCTL_DUPLICATE_EXTENTS_TO_FILE): ranges of one file made to
read as ranges of another, across two tree connects, without either file
changing size; a closed source, a range past the source's last cluster,
overlapping ranges of one file and malformed input get the statuses MS-SMB2
3.3.5.15.17 and MS-FSCC 2.3.8 name. The share's file system may not clone
(ext4 does not): the server then copies, and the bytes are the same.

Sparse files (FSCTL_SET_SPARSE, FSCTL_SET_ZERO_DATA,
FSCTL_QUERY_ALLOCATED_RANGES): a sparse file written at two places lists
just those ranges, zeroing one reads back zeros without changing the size,
and the backing file really has a hole there.

Trim (FSCTL_FILE_LEVEL_TRIM): a range freed in the middle of a disk image
reads back as zeros, its whole pages go back to the file system, the rest
of the file is untouched, and malformed requests get the statuses MS-FSCC
2.3.14 names.
"""

from __future__ import annotations

import os
import struct
import uuid

import pytest
from smbprotocol.connection import Connection
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.header import NtStatus
from smbprotocol.ioctl import (
    CtlCode,
    IOCTLFlags,
    SMB2IOCTLRequest,
    SMB2IOCTLResponse,
    SMB2SrvCopyChunk,
    SMB2SrvCopyChunkCopy,
    SMB2SrvCopyChunkResponse,
)
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    Open,
    ShareAccess,
    SMB2QueryInfoRequest,
    SMB2QueryInfoResponse,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
MIB = 1024 * 1024
RW = FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE
STATUS_INVALID_VIEW_SIZE = 0xC000001F


@pytest.fixture
def session(smb_server):
    conn = Connection(uuid.uuid4(), smb_server.host, port=smb_server.port, require_signing=True)
    conn.connect()
    sess = Session(conn, smb_server.user, smb_server.password, require_encryption=False)
    sess.connect()
    yield sess
    conn.disconnect(close=True)


def tree(session, target) -> TreeConnect:
    t = TreeConnect(session, rf"\\{target.host}\{target.share}")
    t.connect()
    return t


def open_file(t: TreeConnect, name: str, disposition=CreateDisposition.FILE_OVERWRITE_IF) -> Open:
    op = Open(t, name)
    op.create(ImpersonationLevel.Impersonation, RW, 0x80,
              ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE, disposition,
              CreateOptions.FILE_NON_DIRECTORY_FILE)
    return op


def ioctl(op: Open, code: int, data: bytes, max_output: int) -> bytes:
    req = SMB2IOCTLRequest()
    # smbprotocol's CtlCode lacks some controls (FSCTL_DUPLICATE_EXTENTS_TO_FILE).
    req["ctl_code"].enum_strict = False
    req["ctl_code"] = code
    req["file_id"] = op.file_id
    req["max_output_response"] = max_output
    req["flags"] = IOCTLFlags.SMB2_0_IOCTL_IS_FSCTL
    req["buffer"] = data
    conn = op.connection
    request = conn.send(req, sid=op.tree_connect.session.session_id,
                        tid=op.tree_connect.tree_connect_id)
    resp = conn.receive(request)
    out = SMB2IOCTLResponse()
    out["ctl_code"].enum_strict = False
    out.unpack(resp["data"].get_value())
    return out["buffer"].get_value()


def resume_key(op: Open) -> bytes:
    return ioctl(op, CtlCode.FSCTL_SRV_REQUEST_RESUME_KEY, b"", 32)[:24]


def copychunk(dest: Open, key: bytes, chunks: list[tuple[int, int, int]]) -> SMB2SrvCopyChunkResponse:
    copy = SMB2SrvCopyChunkCopy()
    copy["source_key"] = key
    items = []
    for src_off, dst_off, length in chunks:
        c = SMB2SrvCopyChunk()
        c["source_offset"] = src_off
        c["target_offset"] = dst_off
        c["length"] = length
        items.append(c)
    copy["chunks"] = items
    out = ioctl(dest, CtlCode.FSCTL_SRV_COPYCHUNK_WRITE, copy.pack(), 12)
    resp = SMB2SrvCopyChunkResponse()
    resp.unpack(out)
    return resp


def test_copy_reads_back_byte_for_byte(session, smb_server, remote_dir):
    data = os.urandom(3 * MIB + 12345)
    t1, t2 = tree(session, smb_server), tree(session, smb_server)
    src = open_file(t1, f"{remote_dir}\\src.bin")
    src.write(data, 0)
    dest = open_file(t2, f"{remote_dir}\\dest.bin")  # another tree connect
    key = resume_key(src)
    chunks = [(off, off, min(MIB, len(data) - off)) for off in range(0, len(data), MIB)]
    resp = copychunk(dest, key, chunks)
    assert resp["chunks_written"].get_value() == len(chunks)
    assert resp["total_bytes_written"].get_value() == len(data)
    assert dest.read(3 * MIB, len(data) - 3 * MIB) == data[3 * MIB:]
    got = b"".join(dest.read(off, MIB) for off in range(0, 3 * MIB, MIB))
    assert got == data[:3 * MIB]
    # What a second client sees on disk is the same.
    assert (smb_server.share_dir / remote_dir / "dest.bin").read_bytes() == data


def test_overlapping_copy_within_one_file(session, smb_server, remote_dir):
    data = os.urandom(256 * 1024)
    t = tree(session, smb_server)
    op = open_file(t, f"{remote_dir}\\self.bin")
    op.write(data, 0)
    copychunk(op, resume_key(op), [(0, 4096, len(data))])
    assert op.read(0, 4096 + len(data)) == data[:4096] + data


def test_bad_key_past_end_and_limits(session, smb_server, remote_dir):
    t = tree(session, smb_server)
    src = open_file(t, f"{remote_dir}\\a.bin")
    src.write(b"x" * 8192, 0)
    dest = open_file(t, f"{remote_dir}\\b.bin")
    key = bytearray(resume_key(src))
    key[20] ^= 0xFF  # the server's tag no longer matches
    with pytest.raises(SMBResponseException) as e:
        copychunk(dest, bytes(key), [(0, 0, 4096)])
    assert e.value.status == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
    with pytest.raises(SMBResponseException) as e:
        copychunk(dest, resume_key(src), [(4096, 0, 8192)])
    assert e.value.status == STATUS_INVALID_VIEW_SIZE
    with pytest.raises(SMBResponseException) as e:
        copychunk(dest, resume_key(src), [(0, 0, 2 * MIB)])  # over the 1 MiB chunk limit
    assert e.value.status == NtStatus.STATUS_INVALID_PARAMETER
    # None of the refused requests wrote anything.
    assert (smb_server.share_dir / remote_dir / "b.bin").stat().st_size == 0


def allocated(op: Open, offset: int, length: int) -> list[tuple[int, int]]:
    out = ioctl(op, CtlCode.FSCTL_QUERY_ALLOCATED_RANGES, struct.pack("<QQ", offset, length), 1024)
    return [struct.unpack_from("<QQ", out, i) for i in range(0, len(out), 16)]


FSCTL_SET_SPARSE = 0x000900C4
FSCTL_SET_ZERO_DATA = 0x000980C8


def test_sparse_file_ranges_and_zeroing(session, smb_server, remote_dir):
    t = tree(session, smb_server)
    op = open_file(t, f"{remote_dir}\\sparse.bin")
    ioctl(op, FSCTL_SET_SPARSE, b"\x01", 0)
    a, b = os.urandom(64 * 1024), os.urandom(64 * 1024)
    op.write(a, 0)
    op.write(b, 4 * MIB)
    size = 4 * MIB + len(b)
    assert allocated(op, 0, size) == [(0, len(a)), (4 * MIB, len(b))]
    # Zero the first range: a hole in its place, the size unchanged.
    ioctl(op, FSCTL_SET_ZERO_DATA, struct.pack("<QQ", 0, len(a)), 0)
    assert allocated(op, 0, size) == [(4 * MIB, len(b))]
    assert op.read(0, len(a)) == bytes(len(a))
    assert op.read(4 * MIB, len(b)) == b
    path = smb_server.share_dir / remote_dir / "sparse.bin"
    st = path.stat()
    assert st.st_size == size
    assert st.st_blocks * 512 < size // 2  # the backing file has holes
    # Zeroing past the end does not extend the file.
    ioctl(op, FSCTL_SET_ZERO_DATA, struct.pack("<QQ", size, size + 4096), 0)
    assert path.stat().st_size == size
    # Not sparse: the whole range counts as allocated, as on NTFS.
    ioctl(op, FSCTL_SET_SPARSE, b"\x00", 0)
    assert allocated(op, 0, size) == [(0, size)]


FSCTL_DUPLICATE_EXTENTS_TO_FILE = 0x00098344
SMB2_0_INFO_FILESYSTEM, FILE_FS_ATTRIBUTE_INFORMATION = 2, 5
FILE_FS_SECTOR_SIZE_INFORMATION = 11
FILE_SUPPORTS_BLOCK_REFCOUNTING = 0x08000000


def query_fs(op: Open, info_class: int) -> bytes:
    req = SMB2QueryInfoRequest()
    req["info_type"] = SMB2_0_INFO_FILESYSTEM
    req["file_info_class"] = info_class
    req["output_buffer_length"] = 1024
    req["file_id"] = op.file_id
    conn = op.connection
    request = conn.send(req, sid=op.tree_connect.session.session_id,
                        tid=op.tree_connect.tree_connect_id)
    resp = SMB2QueryInfoResponse()
    resp.unpack(conn.receive(request)["data"].get_value())
    return resp["buffer"].get_value()


FSCTL_FILE_LEVEL_TRIM = 0x00098208
SSINFO_FLAGS_TRIM_ENABLED = 0x8
STATUS_INTEGER_OVERFLOW = 0xC0000095


def file_level_trim(op: Open, ranges: list[tuple[int, int]], count: int | None = None) -> int:
    # MS-FSCC 2.3.13 FILE_LEVEL_TRIM: Key, NumRanges, then (Offset, Length)s.
    data = struct.pack("<II", 0, len(ranges) if count is None else count)
    data += b"".join(struct.pack("<QQ", o, n) for o, n in ranges)
    (processed,) = struct.unpack("<I", ioctl(op, FSCTL_FILE_LEVEL_TRIM, data, 4))
    return processed


def test_trim_gives_whole_pages_back_and_keeps_the_rest(session, smb_server, remote_dir):
    t = tree(session, smb_server)
    op = open_file(t, f"{remote_dir}\\disk.img")
    # FileFsSectorSizeInformation: Flags is the fifth ULONG.
    (flags,) = struct.unpack_from("<I", query_fs(op, FILE_FS_SECTOR_SIZE_INFORMATION), 16)
    if not flags & SSINFO_FLAGS_TRIM_ENABLED:
        assert TARGET != "braid"
        pytest.skip("the share does not offer FSCTL_FILE_LEVEL_TRIM")
    data = os.urandom(4 * MIB)
    op.write(data, 0)
    path = smb_server.share_dir / remote_dir / "disk.img"
    before = path.stat().st_blocks
    # A guest frees 2 MiB in the middle, cut to pages: [1 MiB, 3 MiB).
    assert file_level_trim(op, [(MIB - 100, 2 * MIB + 200)]) == 1
    assert op.read(0, MIB) == data[:MIB]
    assert op.read(MIB, 2 * MIB) == bytes(2 * MIB)
    assert op.read(3 * MIB, MIB) == data[3 * MIB:]
    st = path.stat()
    assert st.st_size == 4 * MIB
    # Its blocks went back (less at most a block of extent bookkeeping).
    assert (before - st.st_blocks) * 512 >= 2 * MIB - 4096
    # Malformed requests name their fault.
    for ranges, count, status in (([], None, NtStatus.STATUS_INVALID_PARAMETER),
                                  ([(0, 4096)], 2, NtStatus.STATUS_INVALID_PARAMETER),
                                  ([(2**64 - 4096, 8192)], None, STATUS_INTEGER_OVERFLOW)):
        with pytest.raises(SMBResponseException) as e:
            file_level_trim(op, ranges, count)
        assert e.value.status == status
    op.close()


def needs_block_cloning(op: Open) -> None:
    """Skip, as smbtorture does, where the share does not advertise block
    cloning in FileFsAttributeInformation (Samba's smbd off btrfs); Braid
    always does."""
    (attributes,) = struct.unpack_from("<I", query_fs(op, FILE_FS_ATTRIBUTE_INFORMATION))
    advertised = bool(attributes & FILE_SUPPORTS_BLOCK_REFCOUNTING)
    if TARGET == "braid":
        assert advertised
    elif not advertised:
        pytest.skip("the share does not advertise FILE_SUPPORTS_BLOCK_REFCOUNTING")


def dup_extents(dest: Open, src_id: bytes, src_off: int, dest_off: int, count: int) -> None:
    # MS-FSCC 2.3.7.2 SMB2_DUPLICATE_EXTENTS_DATA: the source's SMB2_FILEID,
    # then SourceFileOffset, TargetFileOffset and ByteCount (signed 64-bit).
    data = src_id + struct.pack("<qqq", src_off, dest_off, count)
    assert ioctl(dest, FSCTL_DUPLICATE_EXTENTS_TO_FILE, data, 0) == b""


def test_duplicate_extents_reads_back_byte_for_byte(session, smb_server, remote_dir):
    data = os.urandom(3 * MIB + 5000)  # ends inside a cluster
    t1, t2 = tree(session, smb_server), tree(session, smb_server)
    src = open_file(t1, f"{remote_dir}\\src.bin")
    needs_block_cloning(src)
    src.write(data, 0)
    dest = open_file(t2, f"{remote_dir}\\dest.bin")  # another tree connect
    dest.write(bytes(len(data)), 0)  # the target must already be that long
    # The whole file, its length ending at the source's (unaligned) end.
    dup_extents(dest, src.file_id, 0, 0, len(data))
    assert dest.read(3 * MIB, len(data) - 3 * MIB) == data[3 * MIB:]
    got = b"".join(dest.read(off, MIB) for off in range(0, 3 * MIB, MIB))
    assert got == data[:3 * MIB]
    path = smb_server.share_dir / remote_dir / "dest.bin"
    assert path.read_bytes() == data
    # A range to another place, and one past the target's end: cut there.
    dup_extents(dest, src.file_id, MIB, 0, 64 * 1024)
    dup_extents(dest, src.file_id, 0, 3 * MIB, 2 * MIB)
    want = data[MIB:MIB + 64 * 1024] + data[64 * 1024:3 * MIB] + data[:5000]
    assert path.read_bytes() == want
    assert path.stat().st_size == len(data)
    assert (smb_server.share_dir / remote_dir / "src.bin").read_bytes() == data


def test_duplicate_extents_refusals(session, smb_server, remote_dir):
    t = tree(session, smb_server)
    src = open_file(t, f"{remote_dir}\\a.bin")
    needs_block_cloning(src)
    src.write(b"x" * 8192, 0)
    dest = open_file(t, f"{remote_dir}\\b.bin")
    dest.write(b"y" * 8192, 0)
    closed = open_file(t, f"{remote_dir}\\c.bin")
    closed_id = closed.file_id
    closed.close()

    def status(src_id, src_off, dest_off, count, on=dest):
        with pytest.raises(SMBResponseException) as e:
            dup_extents(on, src_id, src_off, dest_off, count)
        return e.value.status

    # No such open in the session (MS-SMB2 3.3.5.15.17).
    assert status(closed_id, 0, 0, 4096) == NtStatus.STATUS_INVALID_HANDLE
    # Past the source's allocation (its last cluster).
    assert status(src.file_id, 0, 0, 64 * 1024) == NtStatus.STATUS_NOT_SUPPORTED
    # Overlapping ranges of one file.
    assert status(src.file_id, 0, 2048, 4096, on=src) == NtStatus.STATUS_NOT_SUPPORTED
    # Negative values, and a range that wraps.
    assert status(src.file_id, -4096, 0, 4096) == NtStatus.STATUS_INVALID_PARAMETER
    assert status(src.file_id, 0, 0, -1) == NtStatus.STATUS_INVALID_PARAMETER
    assert status(src.file_id, 0, 2**63 - 4096, 8192) == NtStatus.STATUS_INVALID_PARAMETER
    # A buffer shorter than SMB2_DUPLICATE_EXTENTS_DATA.
    with pytest.raises(SMBResponseException) as e:
        ioctl(dest, FSCTL_DUPLICATE_EXTENTS_TO_FILE, src.file_id + bytes(16), 0)
    assert e.value.status == NtStatus.STATUS_INVALID_PARAMETER
    # None of them changed anything.
    assert dest.read(0, 8192) == b"y" * 8192
    assert src.read(0, 8192) == b"x" * 8192
