"""CREATE requests a server must refuse, seen from smbprotocol.

The answers are Windows', as smbtorture's smb2.create.gentest records them
(Samba 4.17's smbd gives others: it opens with FILE_CREATE_TREE_CONNECTION,
answers FILE_RESERVE_OPFILTER with INVALID_PARAMETER and takes both
attributes below, so these tests run against Braid only). MS-SMB2 2.2.13
makes FILE_OPEN_BY_FILE_ID and FILE_RESERVE_OPFILTER NOT_SUPPORTED, and
Windows answers FILE_CREATE_TREE_CONNECTION so too;
FILE_ATTRIBUTE_INTEGRITY_STREAM and FILE_ATTRIBUTE_NO_SCRUB_DATA are not
attributes a create may set (INVALID_PARAMETER).
A new or overwritten file asking for FILE_ATTRIBUTE_ENCRYPTED is refused
with ACCESS_DENIED, as by a Windows server without the user's EFS keys:
Braid does not encrypt files at rest. Nothing is created by a refusal, and
the same open without the offending bit succeeds.
"""

from __future__ import annotations

import os

import pytest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.header import NtStatus
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    Open,
    ShareAccess,
)
from smbprotocol.tree import TreeConnect

from smbremote import RawClient

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
RW = FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE
FILE_CREATE_TREE_CONNECTION = 0x00000080
FILE_OPEN_BY_FILE_ID = 0x00002000
FILE_RESERVE_OPFILTER = 0x00100000
FILE_ATTRIBUTE_NORMAL = 0x80
FILE_ATTRIBUTE_ENCRYPTED = 0x4000
FILE_ATTRIBUTE_INTEGRITY_STREAM = 0x8000
FILE_ATTRIBUTE_NO_SCRUB_DATA = 0x20000


pytestmark = pytest.mark.skipif(TARGET != "braid",
                                reason="Samba's smbd answers these creates otherwise")


@pytest.fixture
def share(smb_server):
    client = RawClient(smb_server)
    yield client.tree
    client.close()


def create(t: TreeConnect, name: str, options: int = 0,
           attributes: int = FILE_ATTRIBUTE_NORMAL,
           disposition: int = CreateDisposition.FILE_OVERWRITE_IF) -> Open:
    op = Open(t, name)
    req, receive = op.create(ImpersonationLevel.Impersonation, RW, 0,
                             ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
                             disposition, CreateOptions.FILE_NON_DIRECTORY_FILE, send=False)
    # smbprotocol refuses bits it does not know (FILE_CREATE_TREE_CONNECTION,
    # FILE_ATTRIBUTE_NO_SCRUB_DATA): set them past its checks.
    for field, value in (("create_options", CreateOptions.FILE_NON_DIRECTORY_FILE | options),
                         ("file_attributes", attributes)):
        req[field].flag_strict = False
        req[field] = value
    receive(op.connection.send(req, t.session.session_id, t.tree_connect_id))
    return op


def status_of(call) -> int:
    with pytest.raises(SMBResponseException) as e:
        call()
    return e.value.status


@pytest.mark.parametrize("option", [FILE_CREATE_TREE_CONNECTION, FILE_OPEN_BY_FILE_ID,
                                    FILE_RESERVE_OPFILTER])
def test_unsupported_create_options(share, smb_server, remote_dir, option):
    name = f"{remote_dir}\\opt-{option:x}"
    assert status_of(lambda: create(share, name, options=option)) == NtStatus.STATUS_NOT_SUPPORTED
    assert not (smb_server.share_dir / remote_dir / f"opt-{option:x}").exists()
    create(share, name).close()


@pytest.mark.parametrize("attribute", [FILE_ATTRIBUTE_INTEGRITY_STREAM,
                                       FILE_ATTRIBUTE_NO_SCRUB_DATA])
def test_attributes_a_create_cannot_set(share, remote_dir, attribute):
    name = f"{remote_dir}\\attr-{attribute:x}"
    assert status_of(lambda: create(share, name, attributes=attribute)) \
        == NtStatus.STATUS_INVALID_PARAMETER


def test_encrypted_attribute_is_refused_not_pretended(share, smb_server, remote_dir):
    name = f"{remote_dir}\\efs.txt"
    for disposition in (CreateDisposition.FILE_CREATE, CreateDisposition.FILE_OVERWRITE_IF):
        assert status_of(lambda: create(share, name, attributes=FILE_ATTRIBUTE_ENCRYPTED,
                                        disposition=disposition)) \
            == NtStatus.STATUS_ACCESS_DENIED
        assert not (smb_server.share_dir / remote_dir / "efs.txt").exists()
    op = create(share, name)
    op.write(b"kept", 0)
    op.close()
    # Overwriting an existing file with the attribute is refused too, and
    # the data stays; opening it without overwriting ignores attributes.
    assert status_of(lambda: create(share, name, attributes=FILE_ATTRIBUTE_ENCRYPTED,
                                    disposition=CreateDisposition.FILE_OVERWRITE)) \
        == NtStatus.STATUS_ACCESS_DENIED
    op = create(share, name, attributes=FILE_ATTRIBUTE_ENCRYPTED,
                disposition=CreateDisposition.FILE_OPEN_IF)
    assert op.read(0, 4) == b"kept"
    op.close()
