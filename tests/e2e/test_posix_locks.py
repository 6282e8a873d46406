"""Byte-range locks and local POSIX locks hold each other off.

A local process that locks part of a shared file with fcntl (here: this test
process, through the share's backing directory) and an SMB client that locks
it through the server must see each other's locks, as with Samba's default
"posix locking = yes" (Braid: per-share `posix_locking`, default on).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time

import pytest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import FilePipePrinterAccessMask as Access
from smbprotocol.open import LockFlags

import servers
from smbremote import RawClient, lock_element

LOCK_NOT_GRANTED = 0xC0000055
EXCLUSIVE_NOW = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY


def local_lock_refused(fd: int, offset: int, length: int, exclusive: bool) -> bool:
    """Try a non-blocking POSIX lock; True if a conflicting lock refused it."""
    try:
        fcntl.lockf(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB,
                    length, offset)
    except OSError as e:
        assert e.errno in (errno.EAGAIN, errno.EACCES), e
        return True
    fcntl.lockf(fd, fcntl.LOCK_UN, length, offset)
    return False


@pytest.fixture
def shared_file(smb_server, remote_dir):
    path = smb_server.share_dir / remote_dir / "locked.dat"
    path.write_bytes(bytes(range(100)))
    servers.give_to_share_owner(smb_server.share_dir, path)
    return f"{remote_dir}\\locked.dat", path


def test_client_locks_are_seen_locally(smb_server, shared_file):
    name, path = shared_file
    client = RawClient(smb_server)
    fd = os.open(path, os.O_RDWR)
    try:
        op = client.open(name, Access.GENERIC_READ | Access.GENERIC_WRITE)
        op.lock([lock_element(10, 10, EXCLUSIVE_NOW)])
        assert local_lock_refused(fd, 15, 1, exclusive=False)
        assert not local_lock_refused(fd, 0, 10, exclusive=True)
        assert not local_lock_refused(fd, 20, 5, exclusive=True)

        # A shared lock lets local readers in but not writers.
        op.lock([lock_element(50, 10, LockFlags.SMB2_LOCKFLAG_SHARED_LOCK
                              | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY)])
        assert not local_lock_refused(fd, 55, 1, exclusive=False)
        assert local_lock_refused(fd, 55, 1, exclusive=True)

        op.lock([lock_element(10, 10, LockFlags.SMB2_LOCKFLAG_UNLOCK)])
        assert not local_lock_refused(fd, 15, 1, exclusive=True)

        # Closing the open releases what it still held.
        op.close()
        assert not local_lock_refused(fd, 55, 1, exclusive=True)
    finally:
        os.close(fd)
        client.close()


def test_local_locks_hold_clients_off_until_released(smb_server, shared_file):
    name, path = shared_file
    client = RawClient(smb_server)
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 4, 30)
        op = client.open(name, Access.GENERIC_READ | Access.GENERIC_WRITE)
        with pytest.raises(SMBResponseException) as refused:
            op.lock([lock_element(32, 8, EXCLUSIVE_NOW)])
        assert refused.value.status == LOCK_NOT_GRANTED
        # Bytes the local lock does not cover stay lockable.
        op.lock([lock_element(40, 8, EXCLUSIVE_NOW)])

        # A blocking lock waits for the local release, which the server
        # is never told of.
        done: dict = {}

        def blocking_lock():
            try:
                op.lock([lock_element(30, 2, LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK)])
                done["at"] = time.monotonic()
            except Exception as e:  # reported below
                done["error"] = e

        waiter = threading.Thread(target=blocking_lock)
        waiter.start()
        time.sleep(1.0)
        assert not done, "the lock was granted while the local lock was held"
        released = time.monotonic()
        fcntl.lockf(fd, fcntl.LOCK_UN, 4, 30)
        waiter.join(timeout=10)
        assert "error" not in done, done.get("error")
        assert "at" in done, "the waiting lock was not granted after the local release"
        assert done["at"] - released < 5
        assert local_lock_refused(fd, 30, 1, exclusive=False)
        op.close()
    finally:
        os.close(fd)
        client.close()
