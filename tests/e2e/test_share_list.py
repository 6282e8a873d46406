"""Share enumeration: `smbclient -L` lists the shares (srvsvc over IPC$).

smbclient opens the `srvsvc` named pipe on IPC$, binds DCE/RPC and calls
NetShareEnumAll at level 1, as Windows' Explorer does when it browses a
server. Runs against Samba too (BRAID_E2E_TARGET=samba) for the module's
server; the many-shares test is Braid's (its config format).
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import uuid

import pytest
from smbprotocol.connection import Connection
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import (CreateDisposition, CreateOptions, FilePipePrinterAccessMask,
                              ImpersonationLevel, Open, ShareAccess)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

import servers

OBJECT_NAME_NOT_FOUND = 0xC0000034
IS_BRAID = os.environ.get("BRAID_E2E_TARGET", "braid") == "braid"


def list_shares(port: int, user: str, password: str, *options: str) -> dict[str, str]:
    """smbclient -L: {share name: type} as it prints them."""
    r = subprocess.run(
        ["smbclient", "-L", "//127.0.0.1", "-p", str(port), "-U", f"{user}%{password}",
         *options],
        capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert "Sharename" in out, out
    shares = {}
    listing = out.split("Sharename", 1)[1].splitlines()[2:]
    for line in listing:
        m = re.match(r"^\t(\S+)\s+(Disk|IPC|Printer)\b", line)
        if not m:
            break
        shares[m.group(1)] = m.group(2)
    assert "NT_STATUS" not in out.split("Sharename", 1)[0], out
    return shares


@pytest.mark.parametrize("options", [
    ("-m", "SMB3"),
    ("-m", "SMB2"),
    ("-m", "SMB3", "--client-protection=encrypt"),
], ids=["smb3", "smb2", "encrypted"])
def test_smbclient_lists_the_shares(smb_server, options):
    shares = list_shares(smb_server.port, smb_server.user, smb_server.password, *options)
    assert shares.get(smb_server.share) == "Disk", shares
    assert shares.get("IPC$") == "IPC", shares


@pytest.mark.skipif(not IS_BRAID, reason="Braid's config format")
def test_a_long_list_comes_in_several_fragments(tmp_path):
    # 300 shares do not fit one 4280-byte RPC fragment nor one pipe read:
    # the answer is fragmented and read in pieces.
    names = [f"share-{i:03d}-{'x' * 20}" for i in range(300)]
    config = ""
    for name in names:
        d = tmp_path / name
        d.mkdir()
        config += f'[[share]]\nname = "{name}"\npath = "{d}"\n'
    password = "Pw-" + secrets.token_hex(8)
    proc, port = servers.start_braid_with_config(tmp_path, config, {"alice": password})
    try:
        shares = list_shares(port, "alice", password, "-m", "SMB3")
    finally:
        servers.stop_pid(proc.pid)
    assert sorted(n for n, t in shares.items() if t == "Disk") == names
    assert shares["IPC$"] == "IPC"


def ipc_session(smb_server):
    conn = Connection(uuid.uuid4(), smb_server.host, smb_server.port)
    conn.connect()
    session = Session(conn, smb_server.user, smb_server.password, require_encryption=False)
    session.connect()
    tree = TreeConnect(session, rf"\\{smb_server.host}\IPC$")
    tree.connect()
    return conn, tree


def open_pipe(tree, name: str) -> Open:
    pipe = Open(tree, name)
    pipe.create(ImpersonationLevel.Impersonation,
                FilePipePrinterAccessMask.FILE_READ_DATA
                | FilePipePrinterAccessMask.FILE_WRITE_DATA,
                0, ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
                CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
    return pipe


def test_an_unknown_pipe_is_not_found(smb_server):
    conn, tree = ipc_session(smb_server)
    try:
        with pytest.raises(SMBResponseException) as e:
            open_pipe(tree, "no-such-pipe")
        assert e.value.status == OBJECT_NAME_NOT_FOUND
    finally:
        conn.disconnect()


def test_garbage_on_the_pipe_harms_nothing(smb_server):
    """Bytes that are no DCE/RPC PDU get an error (or the pipe dropped),
    and the server goes on listing shares for everyone."""
    conn, tree = ipc_session(smb_server)
    try:
        pipe = open_pipe(tree, "srvsvc")
        garbage = [b"\x05\x00\x0b\x03\x10\x00\x00\x00\xff\xff\x00\x00\x01\x00\x00\x00",
                   os.urandom(3000), b"\x05" * 16]
        for junk in garbage:
            try:
                pipe.write(junk, 0)
            except SMBResponseException:
                pass
    finally:
        conn.disconnect()
    shares = list_shares(smb_server.port, smb_server.user, smb_server.password, "-m", "SMB3")
    assert shares.get(smb_server.share) == "Disk", shares


@pytest.mark.skipif(not IS_BRAID, reason="Braid's config format")
def test_comments_and_shares_left_out_of_the_list(tmp_path):
    """A share's `comment` shows in `smbclient -L`; a share with
    `browseable = false` is left out of it (Samba's `browseable = no`) but
    connects by name."""
    docs, hidden = tmp_path / "docs", tmp_path / "hidden"
    docs.mkdir()
    hidden.mkdir()
    (hidden / "inside.txt").write_bytes(b"here")
    password = "Pw-" + secrets.token_hex(8)
    proc, port = servers.start_braid_with_config(
        tmp_path,
        f'[[share]]\nname = "docs"\npath = "{docs}"\ncomment = "Team documents"\n'
        f'[[share]]\nname = "hidden"\npath = "{hidden}"\nbrowseable = false\n',
        {"alice": password})
    try:
        r = subprocess.run(
            ["smbclient", "-L", "//127.0.0.1", "-p", str(port), "-U", f"alice%{password}"],
            capture_output=True, text=True, timeout=120)
        assert re.search(r"^\tdocs\s+Disk\s+Team documents$", r.stdout, re.M), r.stdout
        assert list_shares(port, "alice", password) == {"docs": "Disk", "IPC$": "IPC"}
        r = subprocess.run(
            ["smbclient", "//127.0.0.1/hidden", "-p", str(port), "-U", f"alice%{password}",
             "-c", "ls"], capture_output=True, text=True, timeout=120)
        assert "inside.txt" in r.stdout, r.stdout + r.stderr
    finally:
        servers.stop_pid(proc.pid)
