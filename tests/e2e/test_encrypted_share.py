"""A share that requires SMB3 encryption (`encrypt = true` in its [[share]]).

Clients that encrypt (Python smbprotocol with encrypt=True, smbclient with
--client-protection=encrypt) read back what they wrote; an unencrypted
client is refused with ACCESS_DENIED. Braid only: the config format is Braid's.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import uuid

import pytest

import servers

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's config format (encrypt = true per share)")


@pytest.fixture(scope="module")
def encrypted_server(tmp_path_factory):
    base = tmp_path_factory.mktemp("enc-")
    share_dir = base / "secret"
    share_dir.mkdir()
    password = "Pw-" + secrets.token_hex(8)
    proc, port = servers.start_braid_with_config(
        base, f'[[share]]\nname = "secret"\npath = "{share_dir}"\nencrypt = true\n',
        {"alice": password})
    yield port, password, share_dir
    servers.stop_pid(proc.pid)


def smbclient(port, password, *args):
    return subprocess.run(
        ["smbclient", "//127.0.0.1/secret", "-p", str(port), "-U", f"alice%{password}",
         "-m", "SMB3", *args],
        capture_output=True, text=True, timeout=120)


def test_smbprotocol_encrypted_round_trip(encrypted_server):
    import smbclient as pysmb
    port, password, share_dir = encrypted_server
    data = os.urandom(3 * 1024 * 1024 + 17)
    name = f"enc-{uuid.uuid4().hex}.bin"
    path = rf"\\127.0.0.1\secret\{name}"
    cache = {}
    try:
        pysmb.register_session("127.0.0.1", username="alice", password=password,
                               port=port, encrypt=True, connection_cache=cache)
        with pysmb.open_file(path, mode="wb", port=port, connection_cache=cache) as f:
            f.write(data)
        with pysmb.open_file(path, mode="rb", port=port, connection_cache=cache) as f:
            back = f.read()
    finally:
        pysmb.reset_connection_cache(connection_cache=cache)
    assert back == data
    assert (share_dir / name).read_bytes() == data


def test_smbclient_encrypted_put_get(encrypted_server, tmp_path):
    port, password, share_dir = encrypted_server
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(5 * 1024 * 1024))
    dst = tmp_path / "dst.bin"
    r = smbclient(port, password, "--client-protection=encrypt",
                  "-c", f"put {src} up.bin; get up.bin {dst}")
    assert r.returncode == 0, r.stdout + r.stderr
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    assert hashlib.sha256(dst.read_bytes()).hexdigest() == digest
    assert hashlib.sha256((share_dir / "up.bin").read_bytes()).hexdigest() == digest


def test_unencrypted_access_is_refused(encrypted_server):
    port, password, _ = encrypted_server
    # SMB 2.1 cannot encrypt: the tree connect to the share must be refused.
    # (SMB3 clients switch encryption on when the share asks for it, so
    # they are not a test of the refusal.)
    r = subprocess.run(
        ["smbclient", "//127.0.0.1/secret", "-p", str(port), "-U", f"alice%{password}",
         "-m", "SMB2", "-c", "ls"],
        capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "NT_STATUS_ACCESS_DENIED" in r.stdout + r.stderr, r.stdout + r.stderr
