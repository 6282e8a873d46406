"""NFS and SMB byte-range locks on one file hold each other off (issue 42):
Braid mirrors both into the kernel's open file description locks (SMB's
with the share's `posix_locking`, on by default; NFS's always, one file
description per NFS lock owner), so each side meets the other's there.

The NFS client is pynfs's client library (nfs_lock_client.py, run in the
copy of pynfs tests/conformance/run_pynfs.py builds); SMB is smbprotocol.
Braid only: Samba and nfs-ganesha each serve one of the two protocols.
"""

from __future__ import annotations

import os
import uuid

import pytest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import FilePipePrinterAccessMask as Access
from smbprotocol.open import LockFlags

import servers
from nfs_locker import NfsLocker
from smb_nfs import both, pynfs_tree  # noqa: F401
from smbremote import RawClient, lock_element

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid",
                                reason="one share over SMB and NFS: Braid only")

LOCK_NOT_GRANTED = 0xC0000055
EXCLUSIVE_NOW = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY


@pytest.fixture
def file(both, pynfs_tree):
    smb, nfs = both
    name = f"l-{uuid.uuid4().hex[:12]}"
    (smb.share_dir / name).write_bytes(bytes(256))
    servers.give_to_share_owner(smb.share_dir, smb.share_dir / name)
    components = [p for p in nfs.export.split("/") if p]
    locker = NfsLocker(nfs.host, nfs.port, components, pynfs_tree, name)
    assert locker.opened == "OPEN", locker.opened
    raw = RawClient(smb)
    op = raw.open(name, Access.GENERIC_READ | Access.GENERIC_WRITE)
    yield locker, op
    op.close()
    raw.close()
    locker.close()


def test_an_nfs_lock_holds_smb_off(file):
    nfs, op = file
    assert nfs("lock 0 100 w") == "OK"
    with pytest.raises(SMBResponseException) as refused:
        op.lock([lock_element(10, 10, EXCLUSIVE_NOW)])
    assert refused.value.status == LOCK_NOT_GRANTED
    # Bytes the NFS lock does not cover stay lockable.
    op.lock([lock_element(100, 10, EXCLUSIVE_NOW)])
    op.lock([lock_element(100, 10, LockFlags.SMB2_LOCKFLAG_UNLOCK)])
    # NFS's POSIX unlock splits its range: 0-9 stays locked.
    assert nfs("unlock 10 90 w") == "OK"
    op.lock([lock_element(10, 10, EXCLUSIVE_NOW)])
    with pytest.raises(SMBResponseException):
        op.lock([lock_element(5, 1, EXCLUSIVE_NOW)])
    op.lock([lock_element(10, 10, LockFlags.SMB2_LOCKFLAG_UNLOCK)])


def test_an_smb_lock_holds_nfs_off(file):
    nfs, op = file
    op.lock([lock_element(200, 10, EXCLUSIVE_NOW)])
    assert nfs("lock 205 1 r") == "DENIED"
    assert nfs("test 200 10 w") == "DENIED"
    assert nfs("test 210 10 w") == "OK"
    op.lock([lock_element(200, 10, LockFlags.SMB2_LOCKFLAG_UNLOCK)])
    assert nfs("test 200 10 w") == "OK"
    assert nfs("lock 205 1 r") == "OK"
