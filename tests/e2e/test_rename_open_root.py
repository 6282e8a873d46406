"""Renames while another connection holds the share's root open (issue 47).

smbtorture 4.17's smb2.getinfo.fsinfo leaves a second connection's handle to
the share root open for the rest of its process: desired access SYNCHRONIZE |
READ_ATTRIBUTES | LIST_DIRECTORY, sharing READ | DELETE. A listing open like
that must hold no rename beneath the root back, though it does not share
write: renames open the target's directory for FILE_ADD_FILE or
FILE_ADD_SUBDIRECTORY (MS-FSA 2.1.5.14.11), and what refuses them is an open
of that directory with DELETE access (smbtorture
smb2.rename.*_delete_access), which the last test keeps. Each test passes
against Samba's smbd too (BRAID_E2E_TARGET=samba).
"""

from __future__ import annotations

import uuid

import pytest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.file_info import FileRenameInformation
from smbprotocol.header import NtStatus
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    ImpersonationLevel,
    Open,
    ShareAccess,
    SMB2SetInfoRequest,
)

import servers
from smbremote import SHARE_ALL, RawClient

SYNCHRONIZE = 0x0010_0000
READ_ATTRIBUTES = 0x80
LIST_DIRECTORY = 0x1
DELETE = 0x0001_0000
FILE_SYNCHRONOUS_IO_NONALERT = 0x20  # Samba's NTCREATEX_OPTIONS_ASYNC_ALERT
SMB2_0_INFO_FILE = 1
FILE_RENAME_INFORMATION = 10


def open_root(client: RawClient, access: int, share: int) -> Open:
    """The share's root, opened as smb2.getinfo.fsinfo opens it."""
    op = Open(client.tree, "")
    op.create(ImpersonationLevel.Impersonation, access, 0, share,
              CreateDisposition.FILE_OPEN, FILE_SYNCHRONOUS_IO_NONALERT)
    return op


def rename(client: RawClient, old: str, new: str, is_dir: bool) -> None:
    """Open `old` for DELETE (sharing everything) and rename it to `new`
    with FileRenameInformation, as a client renames."""
    op = Open(client.tree, old)
    op.create(ImpersonationLevel.Impersonation, DELETE | SYNCHRONIZE | READ_ATTRIBUTES,
              0, SHARE_ALL, CreateDisposition.FILE_OPEN,
              CreateOptions.FILE_DIRECTORY_FILE if is_dir
              else CreateOptions.FILE_NON_DIRECTORY_FILE)
    try:
        info = FileRenameInformation()
        info["replace_if_exists"] = False
        info["file_name"] = new
        req = SMB2SetInfoRequest()
        req["info_type"] = SMB2_0_INFO_FILE
        req["file_info_class"] = FILE_RENAME_INFORMATION
        req["file_id"] = op.file_id
        req["buffer"] = info
        client._send(req)
    finally:
        op.close()


@pytest.fixture
def holder(smb_server):
    """A connection holding the root open with fsinfo's access and sharing."""
    client = RawClient(smb_server)
    root = open_root(client, SYNCHRONIZE | READ_ATTRIBUTES | LIST_DIRECTORY,
                     ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_DELETE)
    yield root
    root.close()
    client.close()


@pytest.fixture
def renamer(smb_server):
    client = RawClient(smb_server)
    yield client
    client.close()


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_rename_directory_beneath_the_held_root(smb_server, holder, renamer):
    old, new = fresh("dir"), fresh("dir-new")
    (smb_server.share_dir / old).mkdir()
    (smb_server.share_dir / old / "inside").write_bytes(b"kept")
    servers.give_to_share_owner(smb_server.share_dir, smb_server.share_dir / old)

    rename(renamer, old, new, is_dir=True)

    assert not (smb_server.share_dir / old).exists()
    assert (smb_server.share_dir / new / "inside").read_bytes() == b"kept"


def test_rename_nested_directory_beneath_the_held_root(smb_server, holder, renamer):
    top = fresh("top")
    (smb_server.share_dir / top / "a" / "b").mkdir(parents=True)
    servers.give_to_share_owner(smb_server.share_dir, smb_server.share_dir / top)

    # Within its parent, then up into the root itself.
    rename(renamer, f"{top}\\a\\b", f"{top}\\a\\c", is_dir=True)
    assert (smb_server.share_dir / top / "a" / "c").is_dir()
    moved = fresh("moved")
    rename(renamer, f"{top}\\a\\c", moved, is_dir=True)
    assert (smb_server.share_dir / moved).is_dir()
    assert not (smb_server.share_dir / top / "a" / "c").exists()


def test_rename_file_beneath_the_held_root(smb_server, holder, renamer):
    old, new = fresh("file"), fresh("file-new")
    (smb_server.share_dir / old).write_bytes(b"data")
    servers.give_to_share_owner(smb_server.share_dir, smb_server.share_dir / old)

    rename(renamer, old, new, is_dir=False)

    assert (smb_server.share_dir / new).read_bytes() == b"data"
    assert not (smb_server.share_dir / old).exists()


def test_an_open_with_delete_access_still_refuses(smb_server, renamer):
    """smb2.rename.share_delete_and_delete_access's rule, on the root: an
    open of the target directory with DELETE access (here sharing
    everything, on the renamer's own connection) refuses the rename."""
    old = fresh("refused")
    (smb_server.share_dir / old).mkdir()
    servers.give_to_share_owner(smb_server.share_dir, smb_server.share_dir / old)
    root = open_root(renamer, SYNCHRONIZE | READ_ATTRIBUTES | LIST_DIRECTORY | DELETE,
                     SHARE_ALL)
    try:
        with pytest.raises(SMBResponseException) as excinfo:
            rename(renamer, old, fresh("never"), is_dir=True)
        assert excinfo.value.status == NtStatus.STATUS_SHARING_VIOLATION
    finally:
        root.close()
    assert (smb_server.share_dir / old).is_dir()
