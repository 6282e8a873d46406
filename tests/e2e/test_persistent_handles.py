"""Persistent handles (MS-SMB2 3.3.5.9.10, 3.3.5.9.12) and the state store
behind them, seen from smbprotocol across restarts of Braid's process.

Braid runs with a `state_dir`, a share "ca" (`continuous_availability =
true`) and a share "plain", on one port kept across restarts:

- NEGOTIATE offers SMB2_GLOBAL_CAP_PERSISTENT_HANDLES; a tree connect to
  "ca" reports SMB2_SHARE_CAP_CONTINUOUS_AVAILABILITY, to "plain" not.
- A DH2Q asking for a persistent handle on "ca" is granted one. After a
  SIGKILL and a start, its client (same ClientGuid and user, new session)
  gets it back with a DH2C: same persistent file id, RWH lease still RWH,
  the bytes written before the kill; it writes again and closes.
- Until then the open's byte-range lock refuses another client's lock, and
  its share modes another client's open (SHARING_VIOLATION); once its
  timeout runs out with no reconnect, all is released (a conflicting open
  succeeds, a late DH2C gets OBJECT_NAME_NOT_FOUND).
- A store record overwritten with garbage while Braid is down: Braid
  starts, logs the record's path, and grants nothing from it.
- A durable (not persistent) v2 handle with a batch oplock on "plain"
  survives a graceful stop (SIGTERM) and start.
- After a SIGKILL and a start, a client that replays its persistent CREATE
  (SMB2_FLAGS_REPLAY_OPERATION, the same DH2Q CreateGuid, a new connection
  with the same ClientGuid: MS-SMB2 3.3.5.9.10) gets the restored open:
  same file id, its lease, the DH2Q response granting persistence again,
  and the bytes written before the kill. The same create without the
  replay flag gets STATUS_DUPLICATE_OBJECTID; a replay with another
  CreateGuid is a new create, refused by the restored open's share modes.

Each test that uses `braid` runs twice: with the local store (files under
`state_dir`) and with `state_store = "etcd"`, against one etcd (Debian's
etcd-server) started for the pytest session on free loopback ports, each
Braid under a key prefix of its own; the corrupt record is then altered
with etcdctl. With etcd unreachable Braid starts, names the endpoint in its
log, refuses persistent opens and serves the rest.

The client offers SMB2_GLOBAL_CAP_PERSISTENT_HANDLES in its NEGOTIATE, as
Windows does and smbprotocol does not by itself: MS-SMB2 3.3.5.4 offers
persistent handles only to a client that does.

Braid only: Braid's config, and restarts of its process.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from smbprotocol.connection import Capabilities, Connection, Dialects
from smbprotocol.create_contexts import (
    CreateContextName, DurableHandleFlags, SMB2CreateContextRequest,
    SMB2CreateDurableHandleReconnectV2, SMB2CreateDurableHandleRequestV2,
    SMB2CreateDurableHandleResponseV2, SMB2CreateRequestLeaseV2, SMB2CreateResponseLeaseV2)
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.header import NtStatus
from smbprotocol.open import (
    CreateDisposition, CreateOptions, FilePipePrinterAccessMask, ImpersonationLevel, LockFlags,
    Open, RequestedOplockLevel, ShareAccess)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

import servers
from smbremote import NORMAL, SHARE_ALL, lock_element
from test_replay import replaying

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
                                reason="Braid's config format and restarts of its process")

USER = "alice"
PERSISTENT = DurableHandleFlags.SMB2_DHANDLE_FLAG_PERSISTENT
RWH = 0x7  # lease state: read, handle and write caching
READ_WRITE = FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE
SHARE_READ = ShareAccess.FILE_SHARE_READ
EXCLUSIVE_NOW = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
STATUS_FILE_LOCK_CONFLICT = 0xC0000054
STATUS_LOCK_NOT_GRANTED = 0xC0000055
STATUS_DUPLICATE_OBJECTID = 0xC000022A


class Braid:
    """Braid with a state_dir (made 0700), share "ca" (continuously
    available) and share "plain", for USER; killed, stopped and started
    again on the same port, config and state_dir. With `etcd_url` the
    state store is etcd, under a key prefix of this Braid's own."""

    def __init__(self, base: Path, etcd_url: str | None = None):
        self.base = base
        self.state_dir = base / "state"
        self.state_dir.mkdir(mode=0o700)
        self.etcd_url = etcd_url
        self.etcd_prefix = f"/braid-e2e/{uuid.uuid4().hex}"
        store = (f'state_store = "etcd"\netcd_endpoints = ["{etcd_url}"]\n'
                 f'etcd_prefix = "{self.etcd_prefix}"\n') if etcd_url else ""
        self.dirs = {"ca": base / "ca", "plain": base / "plain"}
        for d in self.dirs.values():
            d.mkdir()
        self.password = "Pw-" + secrets.token_hex(8)
        self.port = servers.free_port()
        self.admin = f"127.0.0.1:{servers.free_port()}"
        self.log = base / "braid.log"
        self.config = base / "braid.toml"
        self.config.write_text(
            f'listen = ["127.0.0.1:{self.port}"]\nadmin_listen = "{self.admin}"\n'
            f"state_dir = {json.dumps(str(self.state_dir))}\n{store}"
            f'[[share]]\nname = "ca"\npath = {json.dumps(str(self.dirs["ca"]))}\n'
            "continuous_availability = true\n"
            f'[[share]]\nname = "plain"\npath = {json.dumps(str(self.dirs["plain"]))}\n')
        self.proc = None

    def start(self) -> None:
        """Start Braid and wait until it accepts. If the port is still
        held (EADDRINUSE) just after a kill, try again for up to 30 s."""
        deadline = time.monotonic() + 30
        argv = [str(servers.BRAID_BIN), "serve", "--config", str(self.config),
                "--user", f"{USER}:{self.password}"]
        while True:
            offset = self.log_size()
            proc = servers._spawn(argv, self.log, self.base)
            try:
                servers.wait_until_accepting("127.0.0.1", self.port, proc, self.log)
            except RuntimeError:
                if (proc.poll() is not None and "in use" in self.log_since(offset)
                        and time.monotonic() < deadline):
                    time.sleep(0.5)
                    continue
                raise
            self.proc = proc
            return

    def get(self, path: str) -> str:
        """GET `path` from the admin API."""
        with urllib.request.urlopen(f"http://{self.admin}{path}", timeout=10) as r:
            return r.read().decode()

    def metric(self, name: str) -> float:
        for line in self.get("/metrics").splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(f"{name} not in /metrics")

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self.proc = None

    def stop(self) -> None:
        """SIGTERM, and wait for Braid to exit by itself."""
        proc, self.proc = self.proc, None
        servers.stop_pid(proc.pid, timeout=30)
        proc.wait(30)
        assert proc.returncode != -signal.SIGKILL, \
            f"Braid did not exit on SIGTERM within 30 s:\n{self.log_since(0)[-4000:]}"

    def log_size(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def log_since(self, offset: int) -> str:
        with open(self.log, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def finish(self) -> None:
        """Stop Braid; fail if it died on its own."""
        if self.proc is not None:
            died = self.proc.poll() is not None
            servers.stop_pid(self.proc.pid)
            assert not died, f"Braid died during the test:\n{self.log_since(0)[-4000:]}"


class Client:
    """One signed connection with ClientGuid `guid` that offers persistent
    handles, one session of USER and one tree connect to `share`."""

    def __init__(self, braid: Braid, share: str, guid: uuid.UUID):
        self.conn = Connection(guid, "127.0.0.1", braid.port, require_signing=True)
        self.conn.client_capabilities |= Capabilities.SMB2_GLOBAL_CAP_PERSISTENT_HANDLES
        try:
            self.conn.connect(timeout=30)
            self.session = Session(self.conn, USER, braid.password, require_encryption=False)
            self.session.connect()
            self.tree = TreeConnect(self.session, rf"\\127.0.0.1\{share}")
            self.tree.connect()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Drop the connection (no LOGOFF: after a kill nobody answers)."""
        try:
            self.conn.disconnect(close=False)
        except Exception:
            pass


@pytest.fixture(params=["local", "etcd"])
def braid(request, tmp_path):
    """Braid with the local store, then with etcd (the session's)."""
    url = request.getfixturevalue("etcd").url if request.param == "etcd" else None
    srv = Braid(tmp_path, url)
    srv.start()
    yield srv
    srv.finish()


@pytest.fixture
def clients(braid):
    """clients(share="ca", guid=None): a new Client (a fresh ClientGuid
    unless given), dropped after the test."""
    made: list[Client] = []

    def make(share: str = "ca", guid: uuid.UUID | None = None) -> Client:
        c = Client(braid, share, guid or uuid.uuid4())
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def context(name: bytes, data) -> SMB2CreateContextRequest:
    c = SMB2CreateContextRequest()
    c["buffer_name"] = name
    c["buffer_data"] = data
    return c


def lease_context(key: bytes) -> SMB2CreateContextRequest:
    req = SMB2CreateRequestLeaseV2()
    req["lease_key"] = key
    req["lease_state"] = RWH
    req["parent_lease_key"] = b"\0" * 16
    req["epoch"] = b"\0\0"
    return context(CreateContextName.SMB2_CREATE_REQUEST_LEASE_V2, req)


def granted(replies) -> dict:
    """From decoded CREATE response contexts: "durable": (timeout, flags)
    of a DH2Q response, "lease": the lease state of a lease response."""
    out = {}
    for r in replies or []:
        if isinstance(r, SMB2CreateDurableHandleResponseV2):
            out["durable"] = (r["timeout"].get_value(), r["flags"].get_value())
        elif isinstance(r, SMB2CreateResponseLeaseV2):
            out["lease"] = r["lease_state"].get_value()
    return out


def create(client: Client, name: str, contexts: list, share: int, disposition: int,
           oplock: int, lease_key: bytes | None) -> tuple[Open, dict]:
    if lease_key is not None:
        contexts = contexts + [lease_context(lease_key)]
        oplock = RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE
    op = Open(client.tree, name)
    replies = op.create(ImpersonationLevel.Impersonation, READ_WRITE, NORMAL, share, disposition,
                        CreateOptions.FILE_NON_DIRECTORY_FILE, create_contexts=contexts,
                        oplock_level=oplock)
    return op, granted(replies)


def open_durable(client: Client, name: str, create_guid: uuid.UUID, *, flags: int = PERSISTENT,
                 timeout_ms: int = 60000, share: int = SHARE_READ,
                 oplock: int = RequestedOplockLevel.SMB2_OPLOCK_LEVEL_NONE,
                 lease_key: bytes | None = None) -> tuple[Open, dict]:
    """Create `name` (overwriting it) for reading and writing with a DH2Q."""
    req = SMB2CreateDurableHandleRequestV2()
    req["timeout"] = timeout_ms
    req["flags"] = flags
    req["create_guid"] = create_guid
    ctx = context(CreateContextName.SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2, req)
    return create(client, name, [ctx], share, CreateDisposition.FILE_OVERWRITE_IF, oplock,
                  lease_key)


def reconnect(client: Client, name: str, file_id: bytes, create_guid: uuid.UUID, *,
              flags: int = PERSISTENT, share: int = SHARE_READ,
              oplock: int = RequestedOplockLevel.SMB2_OPLOCK_LEVEL_NONE,
              lease_key: bytes | None = None) -> tuple[Open, dict]:
    """A DH2C for the open `file_id`, with the original request's other
    fields, as Windows sends it."""
    req = SMB2CreateDurableHandleReconnectV2()
    req["file_id"] = file_id
    req["create_guid"] = create_guid
    req["flags"] = flags
    ctx = context(CreateContextName.SMB2_CREATE_DURABLE_HANDLE_RECONNECT_V2, req)
    return create(client, name, [ctx], share, CreateDisposition.FILE_OPEN, oplock, lease_key)


def open_plain(client: Client, name: str, share: int) -> Open:
    """An open of the existing `name` for reading and writing, no oplock."""
    op, _ = create(client, name, [], share, CreateDisposition.FILE_OPEN,
                   RequestedOplockLevel.SMB2_OPLOCK_LEVEL_NONE, None)
    return op


def open_status(client: Client, name: str, share: int) -> int:
    """The status of an open_plain (0: it succeeded, and is closed again)."""
    try:
        open_plain(client, name, share).close()
    except SMBResponseException as e:
        return e.status
    return 0


def status_of(call) -> int:
    with pytest.raises(SMBResponseException) as e:
        call()
    return e.value.status


def test_persistent_handles_and_ca_share_are_advertised(clients):
    ca, plain = clients("ca"), clients("plain")
    assert ca.conn.dialect >= Dialects.SMB_3_0_0
    assert ca.conn.server_capabilities.has_flag(Capabilities.SMB2_GLOBAL_CAP_PERSISTENT_HANDLES)
    assert ca.tree.is_ca_share
    assert not plain.tree.is_ca_share


def test_persistent_handle_with_a_lease_survives_a_kill(braid, clients):
    guid, create_guid, key = uuid.uuid4(), uuid.uuid4(), uuid.uuid4().bytes
    name = "survivor.bin"
    op, got = open_durable(clients(guid=guid), name, create_guid, lease_key=key)
    assert got.get("durable", (0, 0))[1] & PERSISTENT, got
    assert got.get("lease") == RWH
    data = os.urandom(256 * 1024)
    op.write(data, 0)
    file_id = op.file_id
    braid.kill()
    braid.start()

    # The admin API and /metrics show the open waiting for its client.
    waiting = [o for o in json.loads(braid.get("/api/v1/opens"))["opens"]
               if o["path"] == name]
    assert len(waiting) == 1 and waiting[0]["persistent"] and waiting[0]["disconnected"], waiting
    assert waiting[0]["caching"] == "lease RWH"
    assert braid.metric("braid_smb_opens_restored_total") == 1
    assert braid.metric("braid_smb_durable_opens_waiting") == 1

    again, got = reconnect(clients(guid=guid), name, file_id, create_guid, lease_key=key)
    assert again.file_id[:8] == file_id[:8]
    assert got.get("lease") == RWH
    assert braid.metric("braid_smb_durable_reconnects_total") == 1
    assert braid.metric("braid_smb_durable_opens_waiting") == 0
    assert again.read(0, len(data)) == data
    again.write(b"after the restart", len(data))
    again.close()
    assert (braid.dirs["ca"] / name).read_bytes() == data + b"after the restart"


def test_byte_range_lock_of_a_persistent_open_survives_a_kill(braid, clients):
    guid, create_guid = uuid.uuid4(), uuid.uuid4()
    name = "locked.bin"
    op, got = open_durable(clients(guid=guid), name, create_guid, share=SHARE_ALL)
    assert got.get("durable", (0, 0))[1] & PERSISTENT, got
    op.write(b"x" * 100, 0)
    op.lock([lock_element(0, 100, EXCLUSIVE_NOW)])
    file_id = op.file_id
    braid.kill()
    braid.start()

    theirs = open_plain(clients(), name, SHARE_ALL)
    status = status_of(lambda: theirs.lock([lock_element(10, 10, EXCLUSIVE_NOW)]))
    assert status in (STATUS_LOCK_NOT_GRANTED, STATUS_FILE_LOCK_CONFLICT), hex(status)

    again, _ = reconnect(clients(guid=guid), name, file_id, create_guid, share=SHARE_ALL)
    again.lock([lock_element(0, 100, LockFlags.SMB2_LOCKFLAG_UNLOCK)])
    # Unlocked by its owner, the range is free for the other client.
    theirs.lock([lock_element(10, 10, EXCLUSIVE_NOW)])
    theirs.lock([lock_element(10, 10, LockFlags.SMB2_LOCKFLAG_UNLOCK)])
    theirs.close()
    again.close()


def test_share_modes_of_a_persistent_open_hold_until_it_reconnects(braid, clients):
    guid, create_guid = uuid.uuid4(), uuid.uuid4()
    name = "shared.bin"
    op, got = open_durable(clients(guid=guid), name, create_guid, share=SHARE_READ)
    assert got.get("durable", (0, 0))[1] & PERSISTENT, got
    op.write(b"mine", 0)
    file_id = op.file_id
    braid.kill()
    braid.start()

    # The persistent open lets others read only: a writer is refused, as
    # if its owner were still connected (a durable open would be closed).
    third = clients()
    assert open_status(third, name, SHARE_ALL) == NtStatus.STATUS_SHARING_VIOLATION
    again, _ = reconnect(clients(guid=guid), name, file_id, create_guid)
    assert again.read(0, 4) == b"mine"
    assert open_status(third, name, SHARE_ALL) == NtStatus.STATUS_SHARING_VIOLATION
    again.close()
    assert open_status(third, name, SHARE_ALL) == 0


def test_persistent_open_is_released_when_its_timeout_runs_out(braid, clients):
    timeout_ms = 5000
    guid, create_guid = uuid.uuid4(), uuid.uuid4()
    name = "expiring.bin"
    op, got = open_durable(clients(guid=guid), name, create_guid, timeout_ms=timeout_ms)
    assert got.get("durable") == (timeout_ms, PERSISTENT)
    op.write(b"before", 0)
    file_id = op.file_id
    braid.kill()
    braid.start()
    restarted = time.monotonic()

    third = clients()
    elapsed = time.monotonic() - restarted
    status = open_status(third, name, SHARE_ALL)
    assert status == NtStatus.STATUS_SHARING_VIOLATION, \
        f"status {status:#x} {elapsed:.1f} s after the restart"
    time.sleep(max(0.0, restarted + timeout_ms / 1000 + 2 - time.monotonic()))

    assert braid.metric("braid_smb_durable_expired_total") == 1
    taker = open_plain(third, name, 0)
    assert taker.read(0, 6) == b"before"
    taker.close()
    status = status_of(lambda: reconnect(clients(guid=guid), name, file_id, create_guid))
    assert status == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND


def test_a_corrupt_store_record_is_logged_and_grants_nothing(braid, clients, request):
    guid, create_guid = uuid.uuid4(), uuid.uuid4()
    name = "corrupt.bin"
    op, got = open_durable(clients(guid=guid), name, create_guid, share=SHARE_READ)
    assert got.get("durable", (0, 0))[1] & PERSISTENT, got
    op.write(b"written", 0)
    file_id = op.file_id
    braid.kill()

    garbage = b"\xff\x00 not a record \xfe" + os.urandom(64)
    if braid.etcd_url:
        etcd = request.getfixturevalue("etcd")
        space = f"{braid.etcd_prefix}/smb-opens/"
        records = etcd.etcdctl("get", "--prefix", "--keys-only", space).split()
        assert records, f"no record under {space} after a persistent open"
        for key in records:
            etcd.etcdctl("put", key, data=garbage)  # the value from stdin
    else:
        # The local store's journal (braid-fs state_journal.rs): the
        # frames, then zeros; the frames are overwritten.
        journal = braid.state_dir / "smb-opens.journal"
        data = bytearray(journal.read_bytes())
        end = len(data.rstrip(b"\0"))
        assert end, f"no record in {journal} after a persistent open"
        data[:end] = (garbage * (end // len(garbage) + 1))[:end]
        journal.write_bytes(bytes(data))
        records = [journal]
    offset = braid.log_size()
    braid.start()
    # The port accepts (the kernel completes handshakes) from the bind on,
    # while the records are still being restored: the log may name them a
    # moment after start() returns.
    deadline = time.monotonic() + 10
    while True:
        log = braid.log_since(offset)
        missing = [path for path in records if str(path) not in log]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not missing, f"the log since the restart does not name {missing}:\n{log[-4000:]}"

    status = status_of(lambda: reconnect(clients(guid=guid), name, file_id, create_guid))
    assert status == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
    exclusive = open_plain(clients(), name, 0)
    assert exclusive.read(0, 7) == b"written"
    exclusive.close()


def test_durable_v2_handle_survives_a_graceful_restart(braid, clients):
    guid, create_guid = uuid.uuid4(), uuid.uuid4()
    name = "durable.bin"
    batch = RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH
    op, got = open_durable(clients("plain", guid), name, create_guid, flags=0, oplock=batch)
    assert op.oplock_level == batch
    assert "durable" in got and not got["durable"][1] & PERSISTENT, got
    data = os.urandom(64 * 1024)
    op.write(data, 0)
    file_id = op.file_id
    braid.stop()
    braid.start()

    again, _ = reconnect(clients("plain", guid), name, file_id, create_guid, flags=0,
                         oplock=batch)
    assert again.file_id[:8] == file_id[:8]
    assert again.oplock_level == batch
    assert again.read(0, len(data)) == data
    again.close()


def test_without_etcd_braid_starts_and_refuses_only_persistent_opens(tmp_path):
    dead = f"http://127.0.0.1:{servers.free_port()}"
    braid = Braid(tmp_path, dead)
    braid.start()
    try:
        # One line at start names the endpoint.
        deadline = time.monotonic() + 10
        while "refuses new persistent opens" not in braid.log_since(0):
            assert time.monotonic() < deadline, braid.log_since(0)[-4000:]
            time.sleep(0.1)
        line = next(ln for ln in braid.log_since(0).splitlines() if "refuses new persistent" in ln)
        assert dead in line, line

        client = Client(braid, "ca", uuid.uuid4())
        try:
            op, _ = create(client, "plain.bin", [], SHARE_READ, CreateDisposition.FILE_OVERWRITE_IF,
                           RequestedOplockLevel.SMB2_OPLOCK_LEVEL_NONE, None)
            op.write(b"before", 0)
            started = time.monotonic()
            status = status_of(lambda: open_durable(client, "persistent.bin", uuid.uuid4()))
            assert status == NtStatus.STATUS_INSUFFICIENT_RESOURCES, hex(status)
            assert time.monotonic() - started < 5
            # The open that needs no store goes on.
            op.write(b"after", 6)
            assert op.read(0, 11) == b"beforeafter"
            op.close()
        finally:
            client.close()
    finally:
        braid.finish()


def test_a_replayed_create_gets_its_persistent_open_back_after_a_kill(braid, clients,
                                                                      monkeypatch):
    guid, create_guid, key = uuid.uuid4(), uuid.uuid4(), uuid.uuid4().bytes
    name = "replayed.bin"
    op, got = open_durable(clients(guid=guid), name, create_guid, lease_key=key)
    assert got.get("durable", (0, 0))[1] & PERSISTENT, got
    data = os.urandom(128 * 1024)
    op.write(data, 0)
    file_id = op.file_id
    braid.kill()
    braid.start()

    client = clients(guid=guid)
    # Another CreateGuid names no open: a new create, which the restored
    # open's share modes (read only) refuse.
    with replaying(monkeypatch):
        status = status_of(lambda: open_durable(client, name, uuid.uuid4(), lease_key=key))
    assert status == NtStatus.STATUS_SHARING_VIOLATION, hex(status)
    # MS-SMB2 3.3.5.9.10: the open's CreateGuid without the replay flag.
    status = status_of(lambda: open_durable(client, name, create_guid, lease_key=key))
    assert status == STATUS_DUPLICATE_OBJECTID, hex(status)

    with replaying(monkeypatch):
        again, got = open_durable(client, name, create_guid, lease_key=key)
    assert again.file_id == file_id
    assert got.get("lease") == RWH
    assert got.get("durable") == (60000, PERSISTENT), got
    assert braid.metric("braid_smb_durable_opens_waiting") == 0
    assert again.read(0, len(data)) == data
    again.write(b"after the replay", len(data))
    again.close()
    assert (braid.dirs["ca"] / name).read_bytes() == data + b"after the replay"
