"""NT security descriptors (Windows ACLs) seen from smbprotocol.

Braid stores the descriptor a client sets on a file (SET_INFO, security) in
the file's xattr `user.braid.sd` and checks every open against its DACL. A
DACL that denies the user FILE_WRITE_DATA makes an open for writing fail
with STATUS_ACCESS_DENIED while an open for reading works, and the
descriptor reads back as it was set.

Only against Braid: Samba's private test config (servers.py) keeps no NT ACLs
of its own (no acl_xattr module).
"""

from __future__ import annotations

import os

import pytest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.header import NtStatus
from smbprotocol.open import CreateDisposition

from smbremote import (
    CI,
    DACL,
    FILE_ALL_ACCESS,
    OI,
    OWNER,
    SYSTEM,
    RawClient,
    ace,
    acl,
    dacl_of,
    descriptor_with_dacl,
    owner_sid,
)

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
pytestmark = pytest.mark.skipif(TARGET != "braid", reason="Samba's test config stores no NT ACLs")

FILE_READ_DATA, FILE_WRITE_DATA, FILE_APPEND_DATA = 0x1, 0x2, 0x4
READ_CONTROL, WRITE_DAC = 0x20000, 0x40000


@pytest.fixture
def client(smb_server):
    c = RawClient(smb_server)
    yield c
    c.close()


def test_a_dacl_denying_write_is_enforced_and_reads_back(client, remote_dir):
    name = f"{remote_dir}\\acl.txt"
    op = client.open(name, FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE)
    user = owner_sid(client.query_sd(op, OWNER))
    sd = descriptor_with_dacl([
        ace(1, FILE_WRITE_DATA | FILE_APPEND_DATA, user),  # denied
        ace(0, FILE_ALL_ACCESS, user),                       # allowed
    ])
    client.set_sd(op, DACL, sd)
    op.close()

    with pytest.raises(SMBResponseException) as e:
        client.open(name, FILE_WRITE_DATA)
    assert e.value.status == NtStatus.STATUS_ACCESS_DENIED

    reader = client.open(name, FILE_READ_DATA | READ_CONTROL)
    assert client.query_sd(reader, DACL) == sd
    reader.close()

    # The owner may still change the DACL (implicit WRITE_DAC), and the
    # write is allowed again once the deny entry is gone.
    owner = client.open(name, WRITE_DAC)
    client.set_sd(owner, DACL, descriptor_with_dacl([ace(0, FILE_ALL_ACCESS, user)]))
    owner.close()
    writer = client.open(name, FILE_WRITE_DATA)
    writer.close()


def test_an_empty_dacl_denies_data_access_but_not_the_owner_read_control(client, remote_dir):
    name = f"{remote_dir}\\empty.txt"
    op = client.open(name, FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE)
    client.set_sd(op, DACL, descriptor_with_dacl([]))
    op.close()
    for access in (FILE_READ_DATA, FILE_WRITE_DATA):
        with pytest.raises(SMBResponseException) as e:
            client.open(name, access)
        assert e.value.status == NtStatus.STATUS_ACCESS_DENIED
    rc = client.open(name, READ_CONTROL)
    assert client.query_sd(rc, DACL) == descriptor_with_dacl([])
    rc.close()


def test_a_malformed_descriptor_is_refused(client, remote_dir):
    op = client.open(f"{remote_dir}\\bad.txt", FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE)
    bad = descriptor_with_dacl([])[:24]  # the ACL is cut short
    with pytest.raises(SMBResponseException) as e:
        client.set_sd(op, DACL, bad)
    assert e.value.status == 0xC0000079  # STATUS_INVALID_SECURITY_DESCR
    op.close()


def test_nothing_is_stored_where_no_acl_was_set(client, smb_server, remote_dir):
    """A file under a directory without an ACL of its own stores no
    descriptor (no xattr block for it) and reads back the default: the
    asker and SYSTEM with full control, as a new file with nothing to
    inherit gets on Windows."""
    d = client.open_dir(f"{remote_dir}\\sub", FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE)
    f = client.open(f"{remote_dir}\\sub\\f.txt", FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE)
    for op in (d, f):
        sd = client.query_sd(op, OWNER | DACL)
        user = owner_sid(sd)
        assert dacl_of(sd) == acl([ace(0, FILE_ALL_ACCESS, user), ace(0, FILE_ALL_ACCESS, SYSTEM)])
    f.close()
    d.close()
    host = smb_server.share_dir / remote_dir / "sub"
    for path in (host, host / "f.txt"):
        assert "user.braid.sd" not in os.listxattr(path)


def test_below_a_directory_with_an_acl_new_files_store_what_they_inherit(
        client, smb_server, remote_dir):
    d = client.open_dir(f"{remote_dir}\\acl", FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE)
    user = owner_sid(client.query_sd(d, OWNER))
    client.set_sd(d, DACL, descriptor_with_dacl([ace(0, FILE_ALL_ACCESS, user, OI | CI)]))
    d.close()
    name = f"{remote_dir}\\acl\\f.txt"
    f = client.open(name, FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE)
    assert dacl_of(client.query_sd(f, DACL)) == acl([ace(0, FILE_ALL_ACCESS, user)])
    f.write(b"hello", 0)
    f.close()
    path = smb_server.share_dir / remote_dir / "acl" / "f.txt"
    assert "user.braid.sd" in os.listxattr(path)
    # AllocationSize counts the data's block, never the xattr block the
    # descriptor took beside it (ext4: st_blocks counts both).
    again = client.open(name, FILE_READ_DATA)
    assert again.allocation_size == min(os.stat(path).st_blocks * 512, 4096)
    again.close()
