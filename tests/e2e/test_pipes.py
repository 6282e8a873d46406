"""Named pipes on IPC$ as smbprotocol sees them: pipes are opened by their
bare name, and a READ of an empty pipe waits, as a blocking-mode pipe's
read does on Windows, until the answer to a request written to the pipe
arrives, the READ is cancelled, or the pipe is closed (STATUS_PIPE_BROKEN).
Samba's smbd answers neither the CANCEL nor the CLOSE of such a READ (it
stays waiting), so those two cases are Braid's only.
"""

from __future__ import annotations

import os
import struct
import uuid

import pytest
from smbprotocol.connection import Connection
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import (CreateDisposition, CreateOptions, FilePipePrinterAccessMask,
                              ImpersonationLevel, Open, ShareAccess, SMB2ReadRequest,
                              SMB2ReadResponse)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")
STATUS_PENDING = 0x00000103
STATUS_CANCELLED = 0xC0000120
STATUS_PIPE_BROKEN = 0xC000014B
STATUS_OBJECT_NAME_NOT_FOUND = 0xC0000034

# C706 12.6.3.1 p_syntax_id_t: the UUID in NDR (little-endian fields) order.
SRVSVC = uuid.UUID("4b324fc8-1670-01d3-1278-5a47bf6ee188").bytes_le + struct.pack("<I", 3)
NDR20 = uuid.UUID("8a885d04-1ceb-11c9-9fe8-08002b104860").bytes_le + struct.pack("<I", 2)
PTYPE_BIND_ACK = 12


def bind_pdu(call_id: int) -> bytes:
    """C706 12.6.4.3 bind: one presentation context, srvsvc over NDR 2.0."""
    body = struct.pack("<HHIB3x", 4280, 4280, 0, 1)
    body += struct.pack("<HBx", 0, 1) + SRVSVC + NDR20
    header = struct.pack("<BBBB4sHHI", 5, 0, 11, 3, b"\x10\0\0\0", 16 + len(body), 0, call_id)
    return header + body


class IpcClient:
    def __init__(self, target):
        self.conn = Connection(uuid.uuid4(), target.host, target.port)
        self.conn.connect(timeout=5)
        self.session = Session(self.conn, target.user, target.password,
                               require_encryption=False)
        self.session.connect()
        self.tree = TreeConnect(self.session, rf"\\{target.host}\IPC$")
        self.tree.connect()

    def open_pipe(self, name: str) -> Open:
        pipe = Open(self.tree, name)
        pipe.create(ImpersonationLevel.Impersonation,
                    FilePipePrinterAccessMask.FILE_READ_DATA
                    | FilePipePrinterAccessMask.FILE_WRITE_DATA, 0,
                    ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
                    CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
        return pipe

    def send_read(self, pipe: Open):
        """Send a READ of the pipe; return the request once its first answer
        is the interim STATUS_PENDING one (asserted)."""
        m = SMB2ReadRequest()
        m["length"] = 4280
        m["file_id"] = pipe.file_id
        req = self.conn.send(m, self.session.session_id, self.tree.tree_connect_id)
        # Not receive(wait=False): it forgets a request it saw pending.
        assert req.response_event.wait(10), "no answer"
        with req.response_event_lock:
            assert req.response["status"].get_value() == STATUS_PENDING
            req.response_event.clear()
        return req

    def close(self):
        self.conn.disconnect()


@pytest.fixture
def ipc(smb_server):
    c = IpcClient(smb_server)
    yield c
    c.close()


def test_pipes_are_opened_by_their_bare_name(ipc):
    ipc.open_pipe("srvsvc").close()
    for name in ("\\srvsvc", "pipe\\srvsvc", "\\pipe\\srvsvc", "nosuchpipe"):
        with pytest.raises(SMBResponseException) as e:
            ipc.open_pipe(name)
        assert e.value.status == STATUS_OBJECT_NAME_NOT_FOUND, name


def test_a_waiting_read_gets_the_answer_to_a_later_write(ipc):
    pipe = ipc.open_pipe("srvsvc")
    waiting = ipc.send_read(pipe)
    pipe.write(bind_pdu(call_id=7), 0)
    answer = SMB2ReadResponse()
    answer.unpack(ipc.conn.receive(waiting, timeout=10)["data"].get_value())
    data = answer["buffer"].get_value()
    ptype, call_id = data[2], struct.unpack_from("<I", data, 12)[0]
    assert (ptype, call_id) == (PTYPE_BIND_ACK, 7), data.hex()
    pipe.close()


@pytest.mark.skipif(TARGET != "braid",
                    reason="Samba's smbd does not answer a CANCEL of a READ waiting on a pipe")
def test_a_waiting_read_can_be_cancelled(ipc):
    pipe = ipc.open_pipe("srvsvc")
    waiting = ipc.send_read(pipe)
    waiting.cancel()
    with pytest.raises(SMBResponseException) as e:
        ipc.conn.receive(waiting, timeout=10)
    assert e.value.status == STATUS_CANCELLED
    # The pipe still works.
    pipe.write(bind_pdu(call_id=8), 0)
    assert pipe.read(0, 4280)[2] == PTYPE_BIND_ACK
    pipe.close()


@pytest.mark.skipif(TARGET != "braid", reason="Samba's smbd leaves the READ waiting")
def test_closing_the_pipe_ends_a_waiting_read(ipc):
    pipe = ipc.open_pipe("srvsvc")
    waiting = ipc.send_read(pipe)
    pipe.close()
    with pytest.raises(SMBResponseException) as e:
        ipc.conn.receive(waiting, timeout=10)
    assert e.value.status == STATUS_PIPE_BROKEN
