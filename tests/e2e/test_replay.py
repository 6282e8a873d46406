"""Replayed WRITEs (MS-SMB2 3.2.4.1.7, 3.3.5.2.10) as smbprotocol sends them.

A client whose channel dies sends its outstanding requests again on another
channel with SMB2_FLAGS_REPLAY_OPERATION. smbprotocol has no multichannel,
so these tests set that flag on its requests themselves (its header class,
swapped for the length of a `with replaying(...)`); the bytes on the wire
are otherwise smbprotocol's own, signed as it signs them.
"""

from __future__ import annotations

import contextlib
import os

import pytest
import smbprotocol.connection
from smbprotocol.header import SMB2HeaderRequest, Smb2Flags
from smbprotocol.open import CreateDisposition

from smbremote import FILE_ALL_ACCESS, RawClient

MIB = 1 << 20


class _ReplayHeader(SMB2HeaderRequest):
    def __init__(self):
        super().__init__()
        self["flags"].set_flag(Smb2Flags.SMB2_FLAGS_REPLAY_OPERATIONS)


@contextlib.contextmanager
def replaying(monkeypatch):
    """Requests sent inside carry SMB2_FLAGS_REPLAY_OPERATION."""
    with monkeypatch.context() as m:
        m.setattr(smbprotocol.connection, "SMB2HeaderRequest", _ReplayHeader)
        yield


def block(middle: bytes) -> bytes:
    """1 MiB that is zero but for `middle` at its centre: two such blocks
    agree in their first and last 64 KiB (a disk image's blocks often do)."""
    pad = (MIB - len(middle)) // 2
    return b"\0" * pad + middle + b"\0" * (MIB - pad - len(middle))


@pytest.fixture
def image(smb_server, remote_dir):
    """A new file `image` open for reading and writing."""
    c = RawClient(smb_server)
    try:
        op = c.open(f"{remote_dir}\\image", FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE)
        yield op
        op.close(False)
    finally:
        c.close()


def test_a_replayed_write_is_applied_when_only_its_middle_differs(
        smb_server, remote_dir, image, monkeypatch):
    """Two replayed WRITEs of one range whose data differ only in the middle
    are two writes: the second lands (a server that took it for a replay of
    the first would answer it written and keep the first's data)."""
    first, second = block(os.urandom(4096)), block(os.urandom(4096))
    with replaying(monkeypatch):
        assert image.write(first, 0) == MIB
        assert image.write(second, 0) == MIB
    assert image.read(0, MIB) == second
    assert (smb_server.share_dir / remote_dir / "image").read_bytes() == second


@pytest.mark.skipif(os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
                    reason="Samba applies a replayed WRITE again")
def test_a_replayed_write_seen_before_is_not_applied_again(image, monkeypatch):
    """A replay of a WRITE the server already carried out gets that
    WRITE's answer and does not undo a newer WRITE to the same range (the
    case a write retried on a second channel after its first channel died
    must not hit)."""
    original, newer = block(os.urandom(4096)), block(os.urandom(4096))
    with replaying(monkeypatch):
        assert image.write(original, 0) == MIB
    assert image.write(newer, 0) == MIB
    with replaying(monkeypatch):
        assert image.write(original, 0) == MIB
    assert image.read(0, MIB) == newer


@pytest.mark.skipif(os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
                    reason="Samba applies a replayed WRITE again")
def test_a_replayed_append_is_applied_once(smb_server, remote_dir, monkeypatch):
    """An append (offset 0xFFFFFFFFFFFFFFFF through an open that may only
    append, MS-FSA 2.1.5.3) is not idempotent: its replay gets the first
    execution's answer and adds nothing, while the same bytes sent again
    as a new request (no replay flag) are a second append."""
    FILE_APPEND_DATA, SYNCHRONIZE, READ_ATTRIBUTES = 0x4, 0x100000, 0x80
    line = b"one line of a log\n"
    c = RawClient(smb_server)
    try:
        log = c.open(f"{remote_dir}\\log", FILE_APPEND_DATA | SYNCHRONIZE | READ_ATTRIBUTES,
                     CreateDisposition.FILE_CREATE)
        with replaying(monkeypatch):
            assert log.write(line, 0xFFFFFFFFFFFFFFFF) == len(line)
            assert log.write(line, 0xFFFFFFFFFFFFFFFF) == len(line)
        assert (smb_server.share_dir / remote_dir / "log").read_bytes() == line
        assert log.write(line, 0xFFFFFFFFFFFFFFFF) == len(line)
        assert (smb_server.share_dir / remote_dir / "log").read_bytes() == line * 2
        log.close(False)
    finally:
        c.close()
