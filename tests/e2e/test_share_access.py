"""Share-level access, as Samba's `read only`, `write list`, `read list` and
`valid users` give it, seen from smbclient and smbprotocol:

- a `read_only` share serves reads and refuses every change (put, mkdir,
  delete, rename, attributes) with ACCESS_DENIED, and the directory on the
  host is left as it was;
- a user on its `write_list` may write there;
- `valid_users` keeps everyone else out at the tree connect;
- a user on `read_list` may only read a writable share;
- the limit shows in what an open is granted (the MxAc create context),
  and a handle opened for reading cannot write.

Braid only: the config format is Braid's.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import types

import pytest
from smbprotocol.create_contexts import (CreateContextName, SMB2CreateContextRequest,
                                         SMB2CreateQueryMaximalAccessRequest,
                                         SMB2CreateQueryMaximalAccessResponse)
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import (CreateDisposition, CreateOptions, FilePipePrinterAccessMask,
                              ImpersonationLevel, Open, ShareAccess)

import servers
from smbremote import user_tree

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's config format (share access lists)")

STATUS_ACCESS_DENIED = 0xC0000022
# FILE_GENERIC_READ | FILE_GENERIC_EXECUTE: what a read-only share grants.
READ_ONLY_ACCESS = 0x001200A9
CONTENT = b"read me, do not change me\n" * 100


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("shareaccess-")
    ro_dir, team_dir = base / "ro", base / "team"
    for d in (ro_dir, team_dir):
        d.mkdir()
        (d / "readme.txt").write_bytes(CONTENT)
        (d / "sub").mkdir()
    passwords = {u: "Pw-" + secrets.token_hex(8) for u in ("alice", "bob", "editor")}
    proc, port = servers.start_braid_with_config(
        base,
        f'[[share]]\nname = "ro"\npath = "{ro_dir}"\n'
        f'read_only = true\nwrite_list = ["Editor"]\n'
        f'[[share]]\nname = "team"\npath = "{team_dir}"\n'
        f'valid_users = ["alice", "editor"]\nread_list = ["editor"]\n',
        passwords)
    yield types.SimpleNamespace(port=port, passwords=passwords, ro_dir=ro_dir,
                                team_dir=team_dir, base=base)
    servers.stop_pid(proc.pid)


def smbclient(srv, share: str, user: str, commands: str, cwd=None) -> str:
    r = subprocess.run(
        ["smbclient", f"//127.0.0.1/{share}", "-p", str(srv.port),
         "-U", f"{user}%{srv.passwords[user]}", "-m", "SMB3", "-c", commands],
        capture_output=True, text=True, timeout=120, cwd=cwd)
    return r.stdout + r.stderr


def tree_of_host(path) -> dict[str, bytes | None]:
    """Every name under `path` on the host, with file contents."""
    out = {}
    for root, dirs, files in os.walk(path):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), path)] = None
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, path)] = open(p, "rb").read()
    return out


def test_read_only_share_serves_reads_and_refuses_changes(server, tmp_path):
    before = tree_of_host(server.ro_dir)
    (tmp_path / "new.txt").write_bytes(b"new")
    out = smbclient(server, "ro", "alice", f"get readme.txt {tmp_path}/got.txt; ls")
    assert (tmp_path / "got.txt").read_bytes() == CONTENT, out
    assert "readme.txt" in out and "sub" in out, out

    for command in ("put new.txt", "mkdir newdir", "rm readme.txt", "rmdir sub",
                    "rename readme.txt moved.txt", "setmode readme.txt +h"):
        out = smbclient(server, "ro", "alice", command, cwd=tmp_path)
        assert "NT_STATUS_ACCESS_DENIED" in out, f"{command}: {out}"
    assert tree_of_host(server.ro_dir) == before


def test_write_list_user_writes_to_a_read_only_share(server, tmp_path):
    data = os.urandom(256 * 1024)
    (tmp_path / "edit.bin").write_bytes(data)
    out = smbclient(server, "ro", "editor", "put edit.bin", cwd=tmp_path)
    assert "NT_STATUS" not in out, out
    assert (server.ro_dir / "edit.bin").read_bytes() == data
    out = smbclient(server, "ro", "editor", "rm edit.bin")
    assert "NT_STATUS" not in out, out
    assert not (server.ro_dir / "edit.bin").exists()


def test_valid_users_keep_others_out(server, tmp_path):
    out = smbclient(server, "team", "bob", "ls")
    assert "NT_STATUS_ACCESS_DENIED" in out, out
    # bob may still use the shares that do not name their users.
    assert "readme.txt" in smbclient(server, "ro", "bob", "ls")

    data = os.urandom(64 * 1024)
    (tmp_path / "team.bin").write_bytes(data)
    out = smbclient(server, "team", "alice", "put team.bin", cwd=tmp_path)
    assert "NT_STATUS" not in out, out
    assert (server.team_dir / "team.bin").read_bytes() == data


def test_read_list_user_only_reads_a_writable_share(server, tmp_path):
    out = smbclient(server, "team", "editor", f"get readme.txt {tmp_path}/got.txt")
    assert (tmp_path / "got.txt").read_bytes() == CONTENT, out
    (tmp_path / "mine.txt").write_bytes(b"mine")
    out = smbclient(server, "team", "editor", "put mine.txt", cwd=tmp_path)
    assert "NT_STATUS_ACCESS_DENIED" in out, out
    assert not (server.team_dir / "mine.txt").exists()


def test_an_open_is_granted_no_more_than_the_share_allows(server):
    with user_tree(server.port, "alice", server.passwords["alice"], "ro") as tree:

        mxac = SMB2CreateContextRequest()
        mxac["buffer_name"] = CreateContextName.SMB2_CREATE_QUERY_MAXIMAL_ACCESS_REQUEST
        mxac["buffer_data"] = SMB2CreateQueryMaximalAccessRequest()
        f = Open(tree, "readme.txt")
        replies = f.create(ImpersonationLevel.Impersonation,
                           FilePipePrinterAccessMask.FILE_READ_DATA, 0,
                           ShareAccess.FILE_SHARE_READ, CreateDisposition.FILE_OPEN,
                           CreateOptions.FILE_NON_DIRECTORY_FILE, create_contexts=[mxac])
        (answer,) = [r for r in replies if isinstance(r, SMB2CreateQueryMaximalAccessResponse)]
        assert answer["query_status"].get_value() == 0
        assert answer["maximal_access"].get_value() == READ_ONLY_ACCESS
        assert f.read(0, len(CONTENT)) == CONTENT
        with pytest.raises(SMBResponseException) as e:
            f.write(b"changed", 0)
        assert e.value.status == STATUS_ACCESS_DENIED
        f.close()

        for access in (FilePipePrinterAccessMask.FILE_WRITE_DATA,
                       FilePipePrinterAccessMask.DELETE,
                       FilePipePrinterAccessMask.WRITE_DAC,
                       FilePipePrinterAccessMask.GENERIC_ALL):
            with pytest.raises(SMBResponseException) as e:
                Open(tree, "readme.txt").create(
                    ImpersonationLevel.Impersonation, access, 0, ShareAccess.FILE_SHARE_READ,
                    CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
            assert e.value.status == STATUS_ACCESS_DENIED, hex(access)
        assert (server.ro_dir / "readme.txt").read_bytes() == CONTENT


def test_a_bad_user_list_is_one_clear_line(server, tmp_path):
    line = servers.config_error(tmp_path, f'[[share]]\nname = "x"\npath = "{server.ro_dir}"\n'
                                          'valid_users = ["@staff"]\n')
    assert "valid_users" in line and "@staff" in line, line


@pytest.fixture(scope="module")
def hosts_server(tmp_path_factory):
    """Shares limited by client address (Samba's hosts allow / hosts deny);
    the test client is always 127.0.0.1."""
    base = tmp_path_factory.mktemp("hosts-")
    dirs = {name: base / name for name in ("lab", "local", "blocked")}
    for d in dirs.values():
        d.mkdir()
        (d / "readme.txt").write_bytes(CONTENT)
    passwords = {"alice": "Pw-" + secrets.token_hex(8)}
    proc, port = servers.start_braid_with_config(
        base,
        f'[[share]]\nname = "lab"\npath = "{dirs["lab"]}"\nhosts_allow = ["198.18.0.0/15"]\n'
        f'[[share]]\nname = "local"\npath = "{dirs["local"]}"\n'
        f'hosts_allow = ["127.0.0.1"]\nhosts_deny = ["127.0.0.0/8"]\n'
        f'[[share]]\nname = "blocked"\npath = "{dirs["blocked"]}"\n'
        f'hosts_deny = ["127.0.0.0/8", "::1"]\n',
        passwords)
    yield types.SimpleNamespace(port=port, passwords=passwords)
    servers.stop_pid(proc.pid)


def test_shares_limited_by_client_address(hosts_server):
    out = smbclient(hosts_server, "lab", "alice", "ls")
    assert "NT_STATUS_ACCESS_DENIED" in out, "127.0.0.1 is not in the lab's network"
    out = smbclient(hosts_server, "blocked", "alice", "ls")
    assert "NT_STATUS_ACCESS_DENIED" in out, out
    out = smbclient(hosts_server, "local", "alice", "ls")
    assert "readme.txt" in out, "allowed by name, though its network is denied"


def test_a_server_limited_to_other_networks_closes_the_connection(tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    passwords = {"alice": "Pw-" + secrets.token_hex(8)}
    proc, port = servers.start_braid_with_config(
        tmp_path, f'hosts_allow = ["198.18.0.0/15"]\n[[share]]\nname = "s"\npath = "{share}"\n',
        passwords)
    try:
        srv = types.SimpleNamespace(port=port, passwords=passwords)
        out = smbclient(srv, "s", "alice", "ls")
        assert "NT_STATUS_CONNECTION" in out or "NT_STATUS_IO" in out, out
        assert "connection refused: not in hosts_allow" in (tmp_path / "braid.log").read_text()
    finally:
        servers.stop_pid(proc.pid)


@pytest.fixture(scope="module")
def guest_server(tmp_path_factory):
    """Anonymous sessions allowed: a public read-only share open to guests
    (guest_ok), and one that is not."""
    base = tmp_path_factory.mktemp("guests-")
    dirs = {name: base / name for name in ("public", "private")}
    for d in dirs.values():
        d.mkdir()
        (d / "readme.txt").write_bytes(CONTENT)
    passwords = {"alice": "Pw-" + secrets.token_hex(8)}
    proc, port = servers.start_braid_with_config(
        base,
        'allow_guest = true\n'
        f'[[share]]\nname = "public"\npath = "{dirs["public"]}"\nguest_ok = true\n'
        'read_only = true\nwrite_list = ["alice"]\n'
        f'[[share]]\nname = "private"\npath = "{dirs["private"]}"\n',
        passwords)
    yield types.SimpleNamespace(port=port, passwords=passwords, dirs=dirs)
    servers.stop_pid(proc.pid)


def anonymous(srv, share: str, commands: str, cwd) -> str:
    r = subprocess.run(
        ["smbclient", f"//127.0.0.1/{share}", "-p", str(srv.port), "-N", "-m", "SMB3",
         "-c", commands],
        capture_output=True, text=True, timeout=120, cwd=cwd)
    return r.stdout + r.stderr


def test_guests_reach_only_shares_open_to_guests(guest_server, tmp_path):
    out = anonymous(guest_server, "public", "get readme.txt got.txt", tmp_path)
    assert (tmp_path / "got.txt").read_bytes() == CONTENT, out
    (tmp_path / "mine.txt").write_bytes(b"from a guest")
    out = anonymous(guest_server, "public", "put mine.txt", tmp_path)
    assert "NT_STATUS_ACCESS_DENIED" in out, out
    assert not (guest_server.dirs["public"] / "mine.txt").exists()
    out = anonymous(guest_server, "private", "ls", tmp_path)
    assert "NT_STATUS_ACCESS_DENIED" in out, out
    # A user reaches both, and writes where the write list says.
    out = smbclient(guest_server, "private", "alice", "ls")
    assert "readme.txt" in out, out
    out = smbclient(guest_server, "public", "alice", "put mine.txt", cwd=tmp_path)
    assert (guest_server.dirs["public"] / "mine.txt").read_bytes() == b"from a guest", out
