"""End-to-end tests of Braid's admin API and `braid status` (docs/ADMIN.md).

A signed smbprotocol session writes a file; the admin API must then show the
session (user, dialect, signing, one channel), the share's bytes written, and
the WRITE in the Prometheus metrics. Braid only: Samba has no such API.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request

import pytest
import smbclient
from smbprotocol.exceptions import SMBAuthenticationError, SMBException

import servers

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
                                reason="the admin API is Braid's")

DATA = bytes(range(256)) * 1024  # 256 KiB


def get(server, path: str) -> str:
    with urllib.request.urlopen(f"http://{server.admin}{path}", timeout=10) as r:
        assert r.status == 200
        return r.read().decode()


def get_json(server, path: str):
    return json.loads(get(server, path))


def metric(text: str, name: str, **labels) -> float | None:
    """The value of one sample in Prometheus text, or None if absent."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    full = f"{name}{{{want}}}" if labels else name
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        if key == full:
            return float(value)
    return None


@pytest.fixture
def session(smb_server, remote_dir):
    """A signed smbprotocol session that has written DATA; yields its cache."""
    cache: dict = {}
    smbclient.register_session(
        smb_server.host, username=smb_server.user, password=smb_server.password,
        port=smb_server.port, require_signing=True, encrypt=False, connection_cache=cache)
    path = f"\\\\{smb_server.host}\\{smb_server.share}\\{remote_dir}\\admin.bin"
    with smbclient.open_file(path, mode="wb", port=smb_server.port,
                             connection_cache=cache) as f:
        f.write(DATA)
    yield cache
    smbclient.reset_connection_cache(connection_cache=cache)


def our_sessions(server, user: str) -> list[dict]:
    """The user's valid sessions, once the previous tests' ones are gone."""
    deadline = time.monotonic() + 5
    while True:
        found = [s for s in get_json(server, "/api/v1/sessions")["sessions"]
                 if s["user"].lower() == user.lower() and s["state"] == "valid"]
        if len(found) <= 1 or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_sessions_show_the_signed_session(server_process, smb_server, session):
    found = our_sessions(server_process, smb_server.user)
    assert len(found) == 1, found
    s = found[0]
    assert s["dialect"] == "3.1.1"
    assert s["signing"] in ("AES-128-GMAC", "AES-128-CMAC", "HMAC-SHA256")
    assert s["encryption"] is None  # negotiated maybe, but not in use
    assert s["encrypt_data"] is False
    assert s["client_address"] == "127.0.0.1"
    assert s["max_channels"] >= 1
    assert s["current_channels"] == 1
    assert s["trees"] >= 1
    assert s["id_hex"] == f"0x{s['id']:016x}"
    (ch,) = s["channels"]
    assert ch["local_address"] == f"127.0.0.1:{smb_server.port}"
    assert ch["remote_address"].startswith("127.0.0.1:")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", ch["connected_since"])
    assert ch["requests"] >= 5  # negotiate, 2x session setup, tree connect, create, write
    assert ch["bytes_in"] >= len(DATA)
    assert ch["bytes_out"] > 0


def test_shares_count_bytes_written(server_process, smb_server, session):
    shares = {s["name"]: s for s in get_json(server_process, "/api/v1/shares")["shares"]}
    sh = shares[smb_server.share]
    assert sh["path"] == str(smb_server.share_dir)
    assert sh["encrypt"] is False
    assert sh["write_ops"] >= 1
    assert sh["bytes_written"] >= len(DATA)
    assert sh["operations"] >= sh["write_ops"] + 2  # create and write at least
    assert sh["operations_by_command"]["write"] == sh["write_ops"]
    assert sh["operations_by_command"]["create"] >= 1
    assert isinstance(sh["opens"], int)


def test_metrics_count_the_write(server_process, smb_server, session):
    text = get(server_process, "/metrics")
    share = smb_server.share
    assert metric(text, "braid_smb_operations_total", share=share, command="write") >= 1
    assert metric(text, "braid_smb_operation_errors_total", share=share, command="write") == 0
    count = metric(text, "braid_smb_operation_duration_seconds_count", share=share,
                   command="write")
    inf = metric(text, "braid_smb_operation_duration_seconds_bucket", share=share,
                 command="write", le="+Inf")
    assert count >= 1 and inf == count
    assert metric(text, "braid_smb_bytes_total", share=share, direction="in") >= len(DATA)
    assert metric(text, "braid_smb_operations_total", share="", command="session_setup") >= 2
    assert metric(text, "braid_sessions") >= 1
    assert metric(text, "braid_channels") >= 1
    assert metric(text, "braid_connections") >= 1
    assert metric(text, "braid_connections_accepted_total") >= 1
    assert "# TYPE braid_smb_operation_duration_seconds histogram" in text


def test_auth_failures_are_counted(server_process, smb_server):
    before = metric(get(server_process, "/metrics"), "braid_auth_failures_total")
    with pytest.raises((SMBAuthenticationError, SMBException)):
        smbclient.register_session(
            smb_server.host, username=smb_server.user, password="wrong-password",
            port=smb_server.port, connection_cache={})
    after = metric(get(server_process, "/metrics"), "braid_auth_failures_total")
    assert after == before + 1


def test_braid_status(server_process, smb_server, session):
    out = subprocess.run([str(servers.BRAID_BIN), "status", "--admin", server_process.admin,
                          "--json"], capture_output=True, text=True, timeout=30, check=True)
    doc = json.loads(out.stdout)
    users = [s["user"] for s in doc["sessions"]]
    assert smb_server.user in users, doc
    table = subprocess.run([str(servers.BRAID_BIN), "status", "--admin", server_process.admin],
                           capture_output=True, text=True, timeout=30, check=True).stdout
    lines = table.splitlines()
    assert lines[0].split() == ["Session", "Protocol", "User", "Client", "Dialect", "Signing",
                                "Encryption", "MaxChannels", "CurrentChannels"], table
    row = next(line for line in lines if smb_server.user in line)
    assert "3.1.1" in row and row.split()[1] == "smb", table
    channel = lines[lines.index(row) + 1]
    assert channel.startswith("    127.0.0.1:") and " -> 127.0.0.1:" in channel, table


def test_logged_off_session_disappears(server_process, smb_server, session):
    (s,) = our_sessions(server_process, smb_server.user)
    smbclient.reset_connection_cache(connection_cache=session)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ids = [x["id"] for x in get_json(server_process, "/api/v1/sessions")["sessions"]]
        if s["id"] not in ids:
            break
        time.sleep(0.1)
    assert s["id"] not in ids


def test_status_without_server_is_one_line():
    port = servers.free_port()
    r = subprocess.run([str(servers.BRAID_BIN), "status", "--admin", f"127.0.0.1:{port}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert len(r.stderr.strip().splitlines()) == 1
    assert "admin" in r.stderr


def test_opens_show_who_holds_what(server_process, smb_server, remote_dir):
    """GET /api/v1/opens and `braid status --opens` list a file and a
    directory smbprotocol holds open, with its user, access and share
    mode; they are gone once closed."""
    import uuid
    from smbprotocol.connection import Connection
    from smbprotocol.open import (CreateDisposition, CreateOptions, DirectoryAccessMask,
                                  FilePipePrinterAccessMask, ImpersonationLevel, Open,
                                  ShareAccess)
    from smbprotocol.session import Session
    from smbprotocol.tree import TreeConnect

    conn = Connection(uuid.uuid4(), smb_server.host, smb_server.port)
    conn.connect()
    try:
        session = Session(conn, smb_server.user, smb_server.password, require_encryption=False)
        session.connect()
        tree = TreeConnect(session, rf"\\{smb_server.host}\{smb_server.share}")
        tree.connect()
        held = Open(tree, rf"{remote_dir}\held.txt")
        held.create(ImpersonationLevel.Impersonation,
                    FilePipePrinterAccessMask.FILE_READ_DATA
                    | FilePipePrinterAccessMask.FILE_WRITE_DATA,
                    0, ShareAccess.FILE_SHARE_READ, CreateDisposition.FILE_OPEN_IF,
                    CreateOptions.FILE_NON_DIRECTORY_FILE)
        folder = Open(tree, remote_dir)
        folder.create(ImpersonationLevel.Impersonation, DirectoryAccessMask.FILE_LIST_DIRECTORY,
                      0, ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE
                      | ShareAccess.FILE_SHARE_DELETE,
                      CreateDisposition.FILE_OPEN, CreateOptions.FILE_DIRECTORY_FILE)

        opens = {o["path"]: o for o in get_json(server_process, "/api/v1/opens")["opens"]
                 if o["path"].startswith(remote_dir)}
        assert set(opens) == {remote_dir, rf"{remote_dir}\held.txt"}, opens
        f = opens[rf"{remote_dir}\held.txt"]
        assert (f["user"], f["share"], f["client_address"], f["directory"]) == (
            smb_server.user, smb_server.share, "127.0.0.1", False), f
        assert int(f["access"], 16) & 0x3 == 0x3, "FILE_READ_DATA | FILE_WRITE_DATA"
        assert (f["share_access"], f["caching"], f["locks"], f["durable"]) == (
            "R", "none", 0, False), f
        d = opens[remote_dir]
        assert d["directory"] and d["share_access"] == "RWD", d

        table = subprocess.run([str(servers.BRAID_BIN), "status", "--admin",
                                server_process.admin, "--opens"],
                               capture_output=True, text=True, timeout=30, check=True).stdout
        lines = table.splitlines()
        assert lines[0].split()[:5] == ["Session", "User", "Client", "Share", "Path"], table
        row = next(line for line in lines if rf"{remote_dir}\held.txt" in line)
        assert smb_server.user in row and " R " in row, table

        held.close()
        folder.close()
        left = [o for o in get_json(server_process, "/api/v1/opens")["opens"]
                if o["path"].startswith(remote_dir)]
        assert left == [], left
    finally:
        conn.disconnect()


def test_opens_show_a_durable_open_waiting_for_its_client(server_process, smb_server,
                                                         remote_dir):
    """A durable open with a batch oplock is listed as such; once its
    connection is dropped it stays listed, disconnected, until the client
    reconnects it or its timeout passes."""
    from smbremote import RawClient
    from test_durable import durable_open

    name = rf"{remote_dir}\durable.bin"
    client = RawClient(smb_server)
    try:
        durable_open(client, name)

        def mine():
            return [o for o in get_json(server_process, "/api/v1/opens")["opens"]
                    if o["path"] == name]

        (o,) = mine()
        assert (o["durable"], o["disconnected"], o["caching"]) == (True, False, "oplock batch"), o
        client.drop()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            found = mine()
            if found and found[0]["disconnected"]:
                break
            time.sleep(0.1)
        (o,) = found
        assert (o["disconnected"], o["durable"], o["session_id"], o["user"], o["share"]) == (
            True, True, None, smb_server.user, smb_server.share), o
        table = subprocess.run([str(servers.BRAID_BIN), "status", "--admin",
                                server_process.admin, "--opens"],
                               capture_output=True, text=True, timeout=30, check=True).stdout
        row = next(line for line in table.splitlines() if name in line)
        assert row.startswith("-  ") and row.rstrip().endswith("waiting"), table
    finally:
        client.close()


def test_a_configured_token_is_required(tmp_path):
    """`admin_token_file`: without `Authorization: Bearer <token>` every
    endpoint is 401 and shows nothing; with it, the API and `braid status
    --admin-token-file` work. A token file other users may read is
    refused at startup with one line naming the key."""
    token = os.urandom(24).hex()
    token_file = tmp_path / "admin-token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o644)
    admin = f"127.0.0.1:{servers.free_port()}"
    share = tmp_path / "share"
    share.mkdir()
    config = (f'admin_listen = "{admin}"\nadmin_token_file = "{token_file}"\n'
              f'[[share]]\nname = "share"\npath = "{share}"\n')
    refused = servers.config_error(tmp_path, config)
    assert "admin_token_file" in refused and "chmod 600" in refused, refused
    assert token not in refused
    token_file.chmod(0o600)

    proc, _ = servers.start_braid_with_config(tmp_path, config, {"alice": "pw-alice"})
    try:
        for path in ("/metrics", "/api/v1/sessions", "/api/v1/shares", "/api/v1/opens"):
            for headers in ({}, {"Authorization": "Bearer " + "0" * 48}):
                req = urllib.request.Request(f"http://{admin}{path}", headers=headers)
                with pytest.raises(urllib.error.HTTPError) as e:
                    urllib.request.urlopen(req, timeout=10)
                assert e.value.code == 401
                assert e.value.headers["WWW-Authenticate"].startswith("Bearer")
            req = urllib.request.Request(f"http://{admin}{path}",
                                         headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(req, timeout=10) as r:
                assert r.status == 200
        status = [str(servers.BRAID_BIN), "status", "--admin", admin, "--json"]
        r = subprocess.run(status, capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and "401" in r.stderr, r.stderr
        r = subprocess.run(status + ["--admin-token-file", str(token_file)],
                           capture_output=True, text=True, timeout=30, check=True)
        assert json.loads(r.stdout) == {"sessions": []}
    finally:
        servers.stop_pid(proc.pid)
    assert token not in (tmp_path / "braid.log").read_text()
