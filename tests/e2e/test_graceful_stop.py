"""A graceful stop (SIGTERM) of Braid, seen from smbprotocol: new work
stops first, then the state is saved (braid-server `stop.rs`).

- Once SIGTERM arrives, a new TCP connection to the SMB port is refused,
  while a WRITE whose bytes are still arriving keeps the process up: that
  WRITE is read to its end, run and answered (success, every byte on
  disk), and only then does Braid exit, with status 0.
- A WRITE that never finishes arriving holds the stop no longer than its
  deadline (5 s): Braid then exits with status 0 all the same, and the
  durable handle of that client's connection is kept for the next start.
- A client holding a durable (not persistent) v2 handle on a plain share
  and one holding a persistent handle on a continuously available share,
  both having written, find their handles after the stop and a start with
  the same state store: a DH2C on a new connection (same ClientGuid) gets
  each back, with its bytes.

Runs with the local store and with etcd, as test_persistent_handles.py
(whose Braid, clients and helpers these tests use).

Braid only: Braid's config, and restarts of its process.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import time
import uuid

import pytest
from smbprotocol.open import CreateDisposition, RequestedOplockLevel

from smbremote import SHARE_ALL
from test_persistent_handles import (  # noqa: F401 (fixtures)
    PERSISTENT, RWH, braid, clients, create, open_durable, open_plain, reconnect)

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
                                reason="Braid's config format and restarts of its process")

WRITE_SIZE = 4 * 1024 * 1024


def requests_received(braid, session_id: int) -> int:
    """SMB frames Braid has begun to read on the session's one channel
    (counted once a frame's length is read, before its body)."""
    for s in json.loads(braid.get("/api/v1/sessions"))["sessions"]:
        if s["id"] == session_id:
            return s["channels"][0]["requests"]
    raise AssertionError(f"session {session_id:#x} not in /api/v1/sessions")


def connect_refused(port: int) -> bool:
    """Whether a connect to `port` is refused now. A connect that races the
    listener's close may be reset instead (its SYN was taken, then the
    socket went): not an answer yet, the caller asks again."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        return False


def send_in_two_parts(client, between, finish: bool = True) -> None:
    """Make the client's next message go out in two parts, calling
    `between()` once the first is sent (the second never, unless `finish`)."""
    transport = client.conn.transport
    plain_send = transport.send

    def send(message: bytes) -> None:
        transport.send = plain_send
        frame = struct.pack(">I", len(message)) + message
        half = len(frame) // 2
        transport._sock.sendall(frame[:half])
        between()
        if finish:
            transport._sock.sendall(frame[half:])

    transport.send = send


def wait_until_reading(braid, session_id: int, before: int) -> None:
    """Until Braid has read the length of a frame after the `before`th on
    the session's channel: the frame is under way."""
    deadline = time.monotonic() + 10
    while requests_received(braid, session_id) == before:
        assert time.monotonic() < deadline, "Braid did not start reading the frame"
        time.sleep(0.02)


def test_a_stop_refuses_new_connections_and_finishes_a_write_in_flight(braid, clients):
    client = clients("plain")
    name = "in-flight.bin"
    op, _ = create(client, name, [], SHARE_ALL, CreateDisposition.FILE_OVERWRITE_IF,
                   RequestedOplockLevel.SMB2_OPLOCK_LEVEL_NONE, None)
    data = os.urandom(WRITE_SIZE)
    session_id = client.session.session_id
    proc = braid.proc

    before = requests_received(braid, session_id)

    def stop_while_the_write_arrives() -> None:
        wait_until_reading(braid, session_id, before)
        os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 3
        while not connect_refused(braid.port):
            assert time.monotonic() < deadline, "the SMB port still accepts after SIGTERM"
            time.sleep(0.05)
        assert proc.poll() is None, "Braid exited with a WRITE half received"

    message, receive = op.write(data, 0, send=False)
    send_in_two_parts(client, stop_while_the_write_arrives)
    request = client.conn.send(message, sid=session_id, tid=client.tree.tree_connect_id)
    assert receive(request) == len(data)
    assert proc.wait(30) == 0, braid.log_since(0)[-4000:]
    braid.proc = None
    assert (braid.dirs["plain"] / name).read_bytes() == data
    braid.start()


def test_a_write_that_never_arrives_holds_the_stop_only_until_its_deadline(braid, clients):
    guid, create_guid = uuid.uuid4(), uuid.uuid4()
    batch = RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH
    client = clients("plain", guid)
    op, got = open_durable(client, "stuck.bin", create_guid, flags=0, oplock=batch)
    assert "durable" in got, got
    op.write(b"before the stop", 0)
    file_id = op.file_id
    session_id = client.session.session_id
    proc = braid.proc
    before = requests_received(braid, session_id)
    stopped = []

    def stop_with_half_a_write() -> None:
        wait_until_reading(braid, session_id, before)
        os.kill(proc.pid, signal.SIGTERM)
        stopped.append(time.monotonic())

    message, _ = op.write(os.urandom(WRITE_SIZE), 0, send=False)
    send_in_two_parts(client, stop_with_half_a_write, finish=False)
    client.conn.send(message, sid=session_id, tid=client.tree.tree_connect_id)
    assert proc.wait(30) == 0, braid.log_since(0)[-4000:]
    took = time.monotonic() - stopped[0]
    assert 4 < took < 12, f"the stop took {took:.1f} s"
    braid.proc = None
    braid.start()

    again, _ = reconnect(clients("plain", guid), "stuck.bin", file_id, create_guid, flags=0,
                         oplock=batch)
    assert again.read(0, 15) == b"before the stop"
    again.close()


def test_durable_and_persistent_handles_survive_a_graceful_stop(braid, clients):
    durable_guid, persistent_guid = uuid.uuid4(), uuid.uuid4()
    durable_create, persistent_create = uuid.uuid4(), uuid.uuid4()
    key = uuid.uuid4().bytes
    batch = RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH

    durable, got = open_durable(clients("plain", durable_guid), "durable.bin", durable_create,
                                flags=0, oplock=batch)
    assert "durable" in got and not got["durable"][1] & PERSISTENT, got
    persistent, got = open_durable(clients("ca", persistent_guid), "persistent.bin",
                                   persistent_create, lease_key=key)
    assert got.get("durable", (0, 0))[1] & PERSISTENT, got
    durable_data, persistent_data = os.urandom(64 * 1024), os.urandom(96 * 1024)
    durable.write(durable_data, 0)
    persistent.write(persistent_data, 0)
    durable_id, persistent_id = durable.file_id, persistent.file_id

    proc = braid.proc
    offset = braid.log_size()
    braid.stop()
    assert proc.returncode == 0, braid.log_since(offset)[-4000:]
    assert "2 durable open(s) kept" in braid.log_since(offset), braid.log_since(offset)[-4000:]
    braid.start()

    # Both wait, disconnected, for their clients.
    waiting = {o["path"]: o for o in json.loads(braid.get("/api/v1/opens"))["opens"]}
    assert waiting["durable.bin"]["disconnected"] and not waiting["durable.bin"]["persistent"]
    assert waiting["persistent.bin"]["disconnected"] and waiting["persistent.bin"]["persistent"]

    again, _ = reconnect(clients("plain", durable_guid), "durable.bin", durable_id,
                         durable_create, flags=0, oplock=batch)
    assert again.file_id[:8] == durable_id[:8]
    assert again.read(0, len(durable_data)) == durable_data
    again.close()
    again, got = reconnect(clients("ca", persistent_guid), "persistent.bin", persistent_id,
                           persistent_create, lease_key=key)
    assert again.file_id[:8] == persistent_id[:8]
    assert got.get("lease") == RWH
    assert again.read(0, len(persistent_data)) == persistent_data
    again.close()
    # Closed by their owners, they are gone from the store: a plain open
    # that shares nothing succeeds.
    open_plain(clients("ca"), "persistent.bin", 0).close()
