"""Durable handles seen from smbprotocol (a client Braid did not write).

A file opened with a batch oplock and a durable handle request survives the
loss of its TCP connection: a new connection and session reconnect it with
the DHnC context and read back what was written through it, and the
reconnected handle keeps writing. A reconnect by a second session while the
open is connected, or after another client's open closed it, is refused.
An application instance (AppInstanceId) failing over to another client
takes the file from its older instance, and an older instance cannot take
it from a newer one (AppInstanceVersion: STATUS_FILE_FORCED_CLOSED).
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from smbprotocol.create_contexts import (
    CreateContextName,
    SMB2CreateAppInstanceId,
    SMB2CreateAppInstanceVersion,
    SMB2CreateContextRequest,
    SMB2CreateDurableHandleRequestV2,
    SMB2CreateDurableHandleReconnect,
    SMB2CreateDurableHandleRequest,
    SMB2CreateDurableHandleResponse,
)
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.header import NtStatus
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    Open,
    RequestedOplockLevel,
    ShareAccess,
)

from smbremote import RawClient as Client

ALL_ACCESS = (FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE
              | FilePipePrinterAccessMask.DELETE)
NORMAL = 0x80
STATUS_FILE_FORCED_CLOSED = 0xC00000B6  # not among smbprotocol's names


def context(name, data) -> SMB2CreateContextRequest:
    c = SMB2CreateContextRequest()
    c["buffer_name"] = name
    c["buffer_data"] = data
    return c


def durable_open(client: Client, name: str,
                 share: int = ShareAccess.FILE_SHARE_READ) -> tuple[Open, list]:
    op = Open(client.tree, name)
    ctx = context(CreateContextName.SMB2_CREATE_DURABLE_HANDLE_REQUEST,
                  SMB2CreateDurableHandleRequest())
    replies = op.create(ImpersonationLevel.Impersonation, ALL_ACCESS, NORMAL,
                        share, CreateDisposition.FILE_OVERWRITE_IF,
                        CreateOptions.FILE_NON_DIRECTORY_FILE, create_contexts=[ctx],
                        oplock_level=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH)
    return op, replies or []


def reconnect(client: Client, name: str, file_id: bytes) -> Open:
    op = Open(client.tree, name)
    data = SMB2CreateDurableHandleReconnect()
    data["data"] = file_id
    ctx = context(CreateContextName.SMB2_CREATE_DURABLE_HANDLE_RECONNECT, data)
    # MS-SMB2 3.3.5.9.7: the other fields of a reconnect are not looked at.
    op.create(ImpersonationLevel.Impersonation, 0, 0, 0, CreateDisposition.FILE_OPEN, 0,
              create_contexts=[ctx], oplock_level=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH)
    return op


@pytest.fixture
def clients(smb_server):
    made: list[Client] = []

    def make() -> Client:
        c = Client(smb_server)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def test_durable_open_survives_a_dropped_connection(clients, remote_dir):
    name = f"{remote_dir}\\durable.bin"
    first = clients()
    op, replies = durable_open(first, name)
    # smbprotocol hands back the decoded response contexts.
    assert any(isinstance(r, SMB2CreateDurableHandleResponse) for r in replies)
    assert op.oplock_level == RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH
    data = bytes(range(256)) * 1024
    op.write(data, 0)
    file_id = op.file_id
    first.drop()

    second = clients()
    again = reconnect(second, name, file_id)
    # Same persistent id (Samba hands out a new volatile one; Braid keeps it).
    assert again.file_id[:8] == file_id[:8]
    assert again.read(0, len(data)) == data
    again.write(b"tail", len(data))
    assert again.read(len(data), 4) == b"tail"
    again.close()


def test_reconnect_of_a_connected_open_is_refused(clients, remote_dir):
    name = f"{remote_dir}\\connected.bin"
    first = clients()
    op, _ = durable_open(first, name)
    other = clients()
    with pytest.raises(SMBResponseException) as e:
        reconnect(other, name, op.file_id)
    assert e.value.status == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
    op.write(b"still mine", 0)
    assert op.read(0, 10) == b"still mine"
    op.close()


def test_conflicting_open_closes_a_disconnected_durable_open(clients, remote_dir):
    name = f"{remote_dir}\\taken.bin"
    first = clients()
    op, _ = durable_open(first, name)
    op.write(b"old", 0)
    file_id = op.file_id
    first.drop()

    # Share mode read-only on the durable open: this write open conflicts,
    # and succeeds only because the disconnected open is closed for it.
    second = clients()
    taker, _ = durable_open(second, name)
    taker.write(b"new", 0)
    taker.close()

    third = clients()
    with pytest.raises(SMBResponseException) as e:
        reconnect(third, name, file_id)
    assert e.value.status == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND


def test_open_waiting_on_a_break_takes_over_when_the_holder_disconnects(clients, remote_dir):
    """The holder is sent a break, never answers, and its connection drops
    while the new open waits: the now disconnected durable open cannot
    acknowledge, so it is closed and the waiting open gets the batch oplock
    (not level II after the 35 s acknowledgment timer), as Windows does."""
    name = f"{remote_dir}\\breaking.bin"
    share_all = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE
    first = clients()
    op, _ = durable_open(first, name, share_all)
    assert op.oplock_level == RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH
    file_id = op.file_id

    second = clients()
    taken: dict = {}

    def take() -> None:
        taken["open"], _ = durable_open(second, name, share_all)

    # smbprotocol does not acknowledge oplock breaks (its receiver on
    # `first` stops at the break, which drops that connection by itself).
    waiter = threading.Thread(target=take)
    waiter.start()
    time.sleep(1.0)
    first.drop()
    waiter.join(60)
    assert not waiter.is_alive()
    assert taken["open"].oplock_level == RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH

    third = clients()
    with pytest.raises(SMBResponseException) as e:
        reconnect(third, name, file_id)
    assert e.value.status == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
    taken["open"].close()


def app_instance_open(client: Client, name: str, app: bytes, version: tuple[int, int]) -> Open:
    """A durable (DH2Q, batch oplock) open of `name` by application
    instance `app` at `version` (high, low): what a clustered application
    sends, failing over from one client machine to another."""
    op = Open(client.tree, name)
    dh2q = SMB2CreateDurableHandleRequestV2()
    dh2q["create_guid"] = uuid.uuid4().bytes
    app_id = SMB2CreateAppInstanceId()
    app_id["app_instance_id"] = app
    app_version = SMB2CreateAppInstanceVersion()
    app_version["app_instance_version_high"], app_version["app_instance_version_low"] = version
    contexts = [context(CreateContextName.SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2, dh2q),
                context(CreateContextName.SMB2_CREATE_APP_INSTANCE_ID, app_id),
                context(CreateContextName.SMB2_CREATE_APP_INSTANCE_VERSION, app_version)]
    op.create(ImpersonationLevel.Impersonation, ALL_ACCESS, NORMAL,
              ShareAccess.FILE_SHARE_READ, CreateDisposition.FILE_OPEN_IF,
              CreateOptions.FILE_NON_DIRECTORY_FILE, create_contexts=contexts,
              oplock_level=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH)
    return op


def test_an_older_application_instance_cannot_take_the_file_from_a_newer_one(clients, remote_dir):
    """MS-SMB2 3.3.5.9.13: a create by another client with the same
    AppInstanceId closes the open first, unless its AppInstanceVersion is
    not newer than the open's: then STATUS_FILE_FORCED_CLOSED, and the
    open stays."""
    name = f"{remote_dir}\\app-version.bin"
    app = uuid.uuid4().bytes
    first = app_instance_open(clients(), name, app, (2, 0))
    first.write(b"first", 0)
    for older in ((1, 9), (2, 0)):
        with pytest.raises(SMBResponseException) as e:
            app_instance_open(clients(), name, app, older)
        assert e.value.status == STATUS_FILE_FORCED_CLOSED, (older, e.value)
    first.write(b"still", 0)
    newer = app_instance_open(clients(), name, app, (2, 1))
    # The old instance's open was closed for the new one.
    with pytest.raises(SMBResponseException) as e:
        first.write(b"gone", 0)
    assert e.value.status == NtStatus.STATUS_FILE_CLOSED, e.value
    assert newer.read(0, 5) == b"still"
    newer.close()
