"""NTFS's quota index, `$Extend\\$Quota:$Q:$INDEX_ALLOCATION`, with the
independent client `smbprotocol`.

Windows clients open it at the root of a share to read and set per-user
quotas. Braid keeps none, so the index is a fixed object with nothing on
disk behind it, as Samba's smbd shows its "fake file" on a share without
quota support: HIDDEN | SYSTEM | DIRECTORY | ARCHIVE, no times, no sizes,
and an empty quota list (STATUS_NO_MORE_ENTRIES).

Runs against Samba too (BRAID_E2E_TARGET=samba; its private config makes the
test user an admin user, whom alone smbd lets open the index). Where the two
answer differently the tests say so: Samba compares the name case-sensitively,
answers a malformed quota query with INTERNAL_ERROR, a quota query on an
ordinary open with INVALID_HANDLE, and a file SET_INFO on the index stops
its smbd on an assertion.
"""

from __future__ import annotations

import datetime
import os
import struct

import pytest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    ImpersonationLevel,
    Open,
    SMB2CloseRequest,
    SMB2CloseResponse,
    SMB2CreateResponse,
    SMB2LockElement,
    SMB2LockRequest,
    SMB2QueryInfoRequest,
    SMB2QueryInfoResponse,
    SMB2SetInfoRequest,
)
from smbprotocol.structure import IntField

from smbremote import SHARE_ALL, RawClient, owner_sid

IS_BRAID = os.environ.get("BRAID_E2E_TARGET", "braid") == "braid"
braid_only = pytest.mark.skipif(not IS_BRAID, reason="Samba answers otherwise (module docstring)")

QUOTA = "$Extend\\$Quota:$Q:$INDEX_ALLOCATION"
# HIDDEN | SYSTEM | DIRECTORY | ARCHIVE: what Windows Server 2016 shows.
INDEX_ATTRIBUTES = 0x02 | 0x04 | 0x10 | 0x20
# SEC_RIGHTS_FILE_READ, as smbtorture smb2.create.quota-fake-file asks.
FILE_READ = 0x0012_0089
NO_TIME = datetime.datetime(1601, 1, 1, tzinfo=datetime.timezone.utc)

INFO_FILE, INFO_SECURITY, INFO_QUOTA = 1, 3, 4
FILE_BASIC, FILE_STANDARD, FILE_SET_BASIC = 4, 5, 4

SUCCESS = 0
NO_MORE_ENTRIES = 0x8000_001A
INVALID_HANDLE = 0xC000_0008
INVALID_PARAMETER = 0xC000_000D
ACCESS_DENIED = 0xC000_0022
OBJECT_NAME_INVALID = 0xC000_0033
OBJECT_NAME_COLLISION = 0xC000_0035
NOT_SUPPORTED = 0xC000_00BB
FILE_CLOSED = 0xC000_0128

SYSTEM_SID = bytes([1, 1, 0, 0, 0, 0, 0, 5]) + struct.pack("<I", 18)


@pytest.fixture
def client(smb_server):
    c = RawClient(smb_server)
    yield c
    c.close()


def open_index(c: RawClient, name: str = QUOTA, access: int = FILE_READ,
               disposition: int = CreateDisposition.FILE_OPEN, options: int = 0) -> Open:
    op = Open(c.tree, name)
    op.create(ImpersonationLevel.Anonymous, access, 0x80, SHARE_ALL, disposition, options)
    return op


def status(fn) -> int:
    try:
        fn()
    except SMBResponseException as e:
        return e.status
    return SUCCESS


def with_class(req, cls: int):
    # smbprotocol's FileInfoClass field takes only the classes it knows.
    field = IntField(size=1)
    field.structure, field.name = req, "file_info_class"
    req.fields["file_info_class"] = field
    req["file_info_class"] = cls
    return req


def query_request(op: Open, info_type: int, cls: int, data: bytes = b"", out: int = 4096):
    req = with_class(SMB2QueryInfoRequest(), cls)
    req["info_type"] = info_type
    req["output_buffer_length"] = out
    if data:
        req["buffer"] = data
    req["file_id"] = op.file_id
    return req


def query(c: RawClient, op: Open, info_type: int, cls: int, data: bytes = b"") -> bytes:
    resp = SMB2QueryInfoResponse()
    resp.unpack(c._send(query_request(op, info_type, cls, data))["data"].get_value())
    return resp["buffer"].get_value()


def set_info(c: RawClient, op: Open, info_type: int, cls: int, data: bytes) -> None:
    req = with_class(SMB2SetInfoRequest(), cls)
    req["info_type"] = info_type
    req["file_id"] = op.file_id
    req["buffer"] = data
    c._send(req)


def quota_query(restart: bool = True, sid_list: bytes = b"", start_sid: bytes = b"") -> bytes:
    """MS-SMB2 2.2.37.1 SMB2_QUERY_QUOTA_INFO (a start SID at offset 0)."""
    return struct.pack("<BBHIII", 0, int(restart), 0, len(sid_list), len(start_sid), 0) \
        + sid_list + start_sid


def get_quota_info(*sids: bytes) -> bytes:
    """MS-FSCC 2.4.36.1 FILE_GET_QUOTA_INFORMATION list (SIDs are 4-aligned)."""
    out = b""
    for i, sid in enumerate(sids):
        nxt = 8 + len(sid) if i + 1 < len(sids) else 0
        out += struct.pack("<II", nxt, len(sid)) + sid
    return out


def quota_entry(sid: bytes, threshold: int, limit: int) -> bytes:
    """MS-FSCC 2.4.36 FILE_QUOTA_INFORMATION, one entry."""
    return struct.pack("<IIqqqq", 0, len(sid), 0, 0, threshold, limit) + sid


def nothing_on_disk(share_dir) -> bool:
    return not any(p.name.lower() == "$extend" for p in share_dir.iterdir())


def test_the_index_opens_as_samba_shows_it(client, smb_server):
    op = open_index(client)
    assert op.file_attributes == INDEX_ATTRIBUTES
    assert (op.creation_time, op.last_access_time, op.last_write_time, op.change_time) \
        == (NO_TIME,) * 4
    assert (op.allocation_size, op.end_of_file) == (0, 0)
    assert op.create_action == 1  # FILE_OPENED

    basic = query(client, op, INFO_FILE, FILE_BASIC)
    creation, access = struct.unpack_from("<QQ", basic)
    assert (creation, access) == (0, 0)
    assert struct.unpack_from("<I", basic, 32)[0] == INDEX_ATTRIBUTES
    standard = query(client, op, INFO_FILE, FILE_STANDARD)
    alloc, eof, links, delete_pending, directory = struct.unpack_from("<QQIBB", standard)
    assert (alloc, eof, links, delete_pending, directory) == (0, 0, 1, 0, 1)

    op.close(get_attributes=True)
    assert op.file_attributes == INDEX_ATTRIBUTES
    assert op.creation_time == NO_TIME
    assert nothing_on_disk(smb_server.share_dir)


def test_open_if_creates_nothing_and_opens_share_no_mode(client, smb_server):
    first = open_index(client, access=0x0012_019F, disposition=CreateDisposition.FILE_OPEN_IF)
    # Nothing is shared or locked: a second open with every right opens too.
    second = open_index(client, access=0x0012_019F)
    first.close()
    second.close()
    assert nothing_on_disk(smb_server.share_dir)


def test_only_the_root_names_the_index(client, remote_dir):
    assert status(lambda: open_index(client, f"{remote_dir}\\{QUOTA}")) == OBJECT_NAME_INVALID
    assert status(lambda: open_index(client, QUOTA.replace("$Q:", "$O:"))) == OBJECT_NAME_INVALID


@braid_only
def test_any_case_names_the_index_and_it_cannot_be_created_or_replaced(client, smb_server):
    open_index(client, QUOTA.lower()).close()
    open_index(client, QUOTA.upper().replace("\\", "/")).close()
    assert status(lambda: open_index(client, disposition=CreateDisposition.FILE_CREATE)) \
        == OBJECT_NAME_COLLISION
    for d in (CreateDisposition.FILE_OVERWRITE_IF, CreateDisposition.FILE_SUPERSEDE):
        assert status(lambda: open_index(client, access=0x0012_019F, disposition=d)) \
            == INVALID_PARAMETER
    assert status(lambda: open_index(client, access=0x0011_0080,
                                     options=CreateOptions.FILE_DELETE_ON_CLOSE)) \
        == 0xC000_0121  # STATUS_CANNOT_DELETE
    assert nothing_on_disk(smb_server.share_dir)


def test_the_quota_list_is_empty(client):
    op = open_index(client)
    for data in (quota_query(), quota_query(restart=False),
                 quota_query(sid_list=get_quota_info(SYSTEM_SID))):
        assert status(lambda: query(client, op, INFO_QUOTA, 0, data)) == NO_MORE_ENTRIES
    op.close()


def test_a_quota_query_on_an_ordinary_open(client, remote_dir):
    f = client.open(f"{remote_dir}\\plain", 0x0012_019F, CreateDisposition.FILE_OVERWRITE_IF)
    # MS-SMB2 3.3.5.20.4: the object store keeps no user quotas. Samba
    # takes only its fake file for a quota handle.
    want = NOT_SUPPORTED if IS_BRAID else INVALID_HANDLE
    assert status(lambda: query(client, f, INFO_QUOTA, 0, quota_query())) == want
    f.close()


@braid_only
def test_malformed_quota_queries_are_invalid_parameter(client):
    op = open_index(client)
    for data in (
        b"",
        b"\x00\x01\x00",
        struct.pack("<BBHIII", 0, 1, 0, 100, 0, 0),       # SidListLength past the buffer
        quota_query(sid_list=b"\x00" * 12),                 # a SID of revision 0
        quota_query(sid_list=struct.pack("<II", 0, 40) + SYSTEM_SID),  # SidLength too long
    ):
        assert status(lambda: query(client, op, INFO_QUOTA, 0, data)) == INVALID_PARAMETER, data
    # A well-formed start SID: the enumeration from it is empty too.
    assert status(lambda: query(client, op, INFO_QUOTA, 0, quota_query(start_sid=SYSTEM_SID))) \
        == NO_MORE_ENTRIES
    op.close()


def test_quota_sets_are_refused(client, remote_dir):
    op = open_index(client, access=0x0012_019F)
    # The user's own SID, as the owner of a file the user creates.
    f = client.open(f"{remote_dir}\\mine", 0x0012_019F, CreateDisposition.FILE_OVERWRITE_IF)
    me = owner_sid(client.query_sd(f, 1))
    f.close()
    assert status(lambda: set_info(client, op, INFO_QUOTA, 0, quota_entry(me, 1 << 20, 2 << 20))) \
        == ACCESS_DENIED
    assert status(lambda: set_info(client, op, INFO_QUOTA, 0, b"")) == INVALID_PARAMETER
    op.close()


def test_reads_writes_and_listings_are_refused(client):
    op = open_index(client, access=0x0012_019F)
    assert status(lambda: op.read(0, 10)) == ACCESS_DENIED
    assert status(lambda: op.write(b"data", 0)) == ACCESS_DENIED
    assert status(lambda: op.flush()) == ACCESS_DENIED
    assert status(lambda: op.query_directory("*", 1)) == NOT_SUPPORTED
    op.close()


@braid_only
def test_the_index_cannot_be_changed_or_locked(client):
    op = open_index(client, access=0x001F_01FF)
    basic = struct.pack("<qqqqII", 0, 0, 0, 0, 0x20, 0)
    assert status(lambda: set_info(client, op, INFO_FILE, FILE_SET_BASIC, basic)) == ACCESS_DENIED
    assert status(lambda: set_info(client, op, INFO_FILE, 13, b"\x01")) == ACCESS_DENIED
    assert status(lambda: query(client, op, INFO_SECURITY, 0)) == ACCESS_DENIED
    lock = SMB2LockRequest()
    element = SMB2LockElement()
    element["offset"], element["length"], element["flags"] = 0, 1, 0x2 | 0x10
    lock["locks"] = [element]
    lock["file_id"] = op.file_id
    assert status(lambda: client._send(lock)) == INVALID_PARAMETER
    op.close()
    assert status(lambda: query(client, op, INFO_FILE, FILE_BASIC)) == FILE_CLOSED


def test_related_compound_open_query_close(client):
    """CREATE, QUERY_INFO and CLOSE of the index in one related compound,
    as Windows sends them."""
    op = Open(client.tree, QUOTA)
    create, _ = op.create(ImpersonationLevel.Impersonation, FILE_READ, 0x80, SHARE_ALL,
                          CreateDisposition.FILE_OPEN, 0, send=False)
    related = b"\xff" * 16
    q = query_request(op, INFO_FILE, FILE_BASIC)
    q["file_id"] = related
    close = SMB2CloseRequest()
    close["flags"] = 1
    close["file_id"] = related
    requests = client.conn.send_compound([create, q, close], client.session.session_id,
                                         client.tree.tree_connect_id, related=True)
    responses = [client.conn.receive(r) for r in requests]
    created = SMB2CreateResponse()
    created.unpack(responses[0]["data"].get_value())
    assert created["file_attributes"].get_value() == INDEX_ATTRIBUTES
    info = SMB2QueryInfoResponse()
    info.unpack(responses[1]["data"].get_value())
    assert struct.unpack_from("<I", info["buffer"].get_value(), 32)[0] == INDEX_ATTRIBUTES
    closed = SMB2CloseResponse()
    closed.unpack(responses[2]["data"].get_value())
    assert closed["file_attributes"].get_value() == INDEX_ATTRIBUTES
