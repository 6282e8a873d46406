"""Per-share options a Samba or Windows file server user expects, seen from
real clients (smbclient's listing, smbprotocol for the ACL):

- `access_based_enumeration = true`: a listing leaves out what the user
  may not read (Windows' access-based enumeration, Samba's `hide
  unreadable`); the owner of a file still sees it.
- `hide_dot_files` (default on, as Samba's `hide dot files`) and
  `hide_files` patterns: the names are reported with the HIDDEN attribute.
- `change_notify = false`: CHANGE_NOTIFY is NOT_IMPLEMENTED there (clients
  poll), while another share notifies.

Braid only: the config format is Braid's.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import types

import pytest
from smbprotocol.change_notify import CompletionFilter, FileSystemWatcher
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import CreateDisposition, DirectoryAccessMask

import servers
from smbremote import (
    ACCESS_ALLOWED,
    DACL,
    FILE_ALL_ACCESS,
    OWNER,
    SYSTEM,
    RawClient,
    ace,
    descriptor_with_dacl,
    owner_sid,
)

STATUS_NOT_IMPLEMENTED = 0xC0000002

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's config format (per-share options)")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("shareopts-")
    abe_dir, plain_dir, veto_dir = base / "abe", base / "plain", base / "veto"
    abe_dir.mkdir()
    plain_dir.mkdir()
    veto_dir.mkdir()
    (veto_dir / "setup.EXE").write_bytes(b"vetoed")
    (veto_dir / ".snapshot").mkdir()
    (veto_dir / ".snapshot" / "old.txt").write_bytes(b"vetoed")
    (veto_dir / "readme.txt").write_bytes(b"served")
    (base / "masked").mkdir()
    macos = base / "macos"
    for d in ("emptied", "still-used"):
        (macos / d).mkdir(parents=True)
        (macos / d / ".DS_Store").write_bytes(b"finder")
        (macos / d / "._photo.jpg").write_bytes(b"resource fork")
    (macos / "still-used" / "photo.jpg").write_bytes(b"jpeg")
    passwords = {u: "Pw-" + secrets.token_hex(8) for u in ("alice", "bob")}
    proc, port = servers.start_braid_with_config(
        base,
        f'[[share]]\nname = "abe"\npath = "{abe_dir}"\n'
        f'access_based_enumeration = true\nhide_files = ["*.secret", "Thumbs.db"]\n'
        f'[[share]]\nname = "plain"\npath = "{plain_dir}"\nhide_dot_files = false\n'
        f'[[share]]\nname = "veto"\npath = "{veto_dir}"\nveto_files = ["*.exe", ".snapshot"]\n'
        f'[[share]]\nname = "masked"\npath = "{base / "masked"}"\n'
        f'create_mask = 0o640\ndirectory_mask = 0o750\n'
        f'[[share]]\nname = "macos"\npath = "{macos}"\n'
        f'veto_files = [".DS_Store", "._*"]\ndelete_veto_files = true\n'
        f'[[share]]\nname = "quiet"\npath = "{base / "masked"}"\nchange_notify = false\n',
        passwords)
    yield types.SimpleNamespace(port=port, passwords=passwords, abe_dir=abe_dir,
                                plain_dir=plain_dir, veto_dir=veto_dir, macos_dir=macos)
    servers.stop_pid(proc.pid)


def listing(srv, share: str, user: str, directory: str = "") -> dict[str, str]:
    """smbclient's `ls` of a directory: name -> attribute letters."""
    mask = f"{directory}\\*" if directory else "*"
    r = subprocess.run(
        ["smbclient", f"//127.0.0.1/{share}", "-p", str(srv.port),
         "-U", f"{user}%{srv.passwords[user]}", "-m", "SMB3", "-c", f'ls "{mask}"'],
        capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    out = {}
    for line in r.stdout.splitlines():
        # "  name      AH        0  Sun Nov 22 13:00:00 2026"
        m = re.match(r"^  (.+?)\s+([A-Z]*)\s+(\d+)\s+\w{3} \w{3}\s+\d+ [\d:]+ \d{4}$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def client_for(srv, share: str, user: str) -> RawClient:
    return RawClient(types.SimpleNamespace(host="127.0.0.1", port=srv.port, user=user,
                                        password=srv.passwords[user], share=share))


def test_access_based_enumeration_lists_only_what_the_user_may_read(server):
    (server.abe_dir / "docs").mkdir()
    alice = client_for(server, "abe", "alice")
    try:
        for name in ("docs\\shared.txt", "docs\\private.txt"):
            alice.open(name, FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE).close(False)
        op = alice.open("docs\\private.txt", FILE_ALL_ACCESS)
        me = owner_sid(alice.query_sd(op, OWNER))
        # Only alice (and SYSTEM) may do anything with private.txt.
        alice.set_sd(op, DACL, descriptor_with_dacl([
            ace(ACCESS_ALLOWED, FILE_ALL_ACCESS, me),
            ace(ACCESS_ALLOWED, FILE_ALL_ACCESS, SYSTEM),
        ]))
        op.close(False)
    finally:
        alice.close()
    assert {"shared.txt", "private.txt"} <= set(listing(server, "abe", "alice", "docs"))
    seen_by_bob = listing(server, "abe", "bob", "docs")
    assert "shared.txt" in seen_by_bob
    assert "private.txt" not in seen_by_bob
    assert {".", ".."} <= set(seen_by_bob)


def test_dot_files_and_hide_files_patterns_are_reported_hidden(server):
    for d in (server.abe_dir, server.plain_dir):
        for name in (".profile", "notes.secret", "THUMBS.DB", "plain.txt"):
            (d / name).write_bytes(b"x")
    abe = listing(server, "abe", "bob")
    assert "H" in abe[".profile"]
    assert "H" in abe["notes.secret"]
    assert "H" in abe["THUMBS.DB"], "patterns match case-insensitively"
    assert "H" not in abe["plain.txt"]
    # The other share hides no dot files and has no patterns.
    plain = listing(server, "plain", "bob")
    assert all("H" not in plain[n] for n in (".profile", "notes.secret", "plain.txt"))


def test_a_file_hidden_by_its_name_can_be_overwritten_without_naming_hidden(server):
    """Only the reported attributes change: an overwrite that does not ask
    for HIDDEN is refused for a file whose stored attributes are hidden
    (MS-FSA 2.1.5.1.2), not for one hidden by the share's name rules."""
    (server.abe_dir / ".overwrite-me").write_bytes(b"old contents")
    bob = client_for(server, "abe", "bob")
    try:
        bob.open(".overwrite-me", FILE_ALL_ACCESS, CreateDisposition.FILE_OVERWRITE).close(False)
    finally:
        bob.close()
    assert (server.abe_dir / ".overwrite-me").read_bytes() == b""


def test_vetoed_names_are_neither_listed_nor_opened(server, tmp_path):
    """`veto_files` (Samba's `veto files`): names matching a pattern are
    left out of listings, and opening, creating or reaching through one is
    OBJECT_NAME_NOT_FOUND / OBJECT_PATH_NOT_FOUND; the host's files stay."""
    assert set(listing(server, "veto", "alice")) == {".", "..", "readme.txt"}

    def smbclient(command: str) -> str:
        r = subprocess.run(
            ["smbclient", "//127.0.0.1/veto", "-p", str(server.port),
             "-U", f"alice%{server.passwords['alice']}", "-m", "SMB3", "-c", command],
            capture_output=True, text=True, timeout=60, cwd=tmp_path)
        return r.stdout + r.stderr

    (tmp_path / "tool.exe").write_bytes(b"new")
    assert "NT_STATUS_OBJECT_NAME_NOT_FOUND" in smbclient("get setup.exe")
    assert "NT_STATUS_OBJECT_PATH_NOT_FOUND" in smbclient("get .snapshot\\old.txt")
    assert "NT_STATUS_OBJECT_NAME_NOT_FOUND" in smbclient("put tool.exe")
    assert "NT_STATUS_OBJECT_NAME_NOT_FOUND" in smbclient("rename readme.txt readme.exe")
    out = smbclient("get readme.txt got.txt")
    assert (tmp_path / "got.txt").read_bytes() == b"served", out
    assert sorted(p.name for p in server.veto_dir.iterdir()) == [
        ".snapshot", "readme.txt", "setup.EXE"]


def test_a_folder_of_vetoed_names_can_be_removed(server):
    """`delete_veto_files` (Samba's `delete veto files`): a folder that
    holds only vetoed names (macOS's .DS_Store and ._ files) is empty to
    clients and rmdir removes it with them; one with a file in it stays."""
    r = subprocess.run(
        ["smbclient", "//127.0.0.1/macos", "-p", str(server.port),
         "-U", f"alice%{server.passwords['alice']}", "-m", "SMB3",
         "-c", "ls emptied\\*; rmdir emptied; rmdir still-used"],
        capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert ".DS_Store" not in out and "NT_STATUS_DIRECTORY_NOT_EMPTY" in out, out
    assert sorted(p.name for p in server.macos_dir.iterdir()) == ["still-used"], out
    assert sorted(p.name for p in (server.macos_dir / "still-used").iterdir()) == [
        ".DS_Store", "._photo.jpg", "photo.jpg"]


def test_create_and_directory_masks_set_the_unix_modes(server, tmp_path):
    """`create_mask` / `directory_mask` (Samba's `create mask`, `directory
    mask`): what a client creates gets exactly 0666 / 0777 masked by them,
    whatever the server's umask."""
    (tmp_path / "new.txt").write_bytes(b"masked")
    r = subprocess.run(
        ["smbclient", "//127.0.0.1/masked", "-p", str(server.port),
         "-U", f"alice%{server.passwords['alice']}", "-m", "SMB3",
         "-c", "put new.txt; mkdir newdir"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    masked = server.veto_dir.parent / "masked"
    assert os.stat(masked / "new.txt").st_mode & 0o7777 == 0o640
    assert os.stat(masked / "newdir").st_mode & 0o7777 == 0o750


def watch_root(c: RawClient):
    """A CHANGE_NOTIFY for new names in the share root, sent."""
    root = c.open_dir("", DirectoryAccessMask.FILE_LIST_DIRECTORY)
    watcher = FileSystemWatcher(root)
    watcher.start(CompletionFilter.FILE_NOTIFY_CHANGE_FILE_NAME)
    return root, watcher


def test_a_share_without_change_notify_says_not_implemented(server):
    quiet = client_for(server, "quiet", "alice")
    try:
        _, watcher = watch_root(quiet)
        with pytest.raises(SMBResponseException) as e:
            watcher.wait()
        assert e.value.status == STATUS_NOT_IMPLEMENTED
    finally:
        quiet.close()
    # The same request on a share that notifies waits for the change.
    plain = client_for(server, "plain", "alice")
    try:
        _, watcher = watch_root(plain)
        plain.open("notified.txt", FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE).close()
        changes = watcher.wait()
        assert [c["file_name"].get_value() for c in changes] == ["notified.txt"]
    finally:
        plain.close()


def test_host_changes_to_vetoed_names_are_not_notified(server):
    """A vetoed name no listing shows is not named by a change notification
    either when a local process creates it (`notify_host_changes`)."""
    c = client_for(server, "veto", "alice")
    try:
        _, watcher = watch_root(c)
        # The request is in place once a change through Braid reached it.
        c.open("sync.txt", FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE).close()
        assert [x["file_name"].get_value() for x in watcher.wait()] == ["sync.txt"]
        watcher = FileSystemWatcher(watcher.open)
        watcher.start(CompletionFilter.FILE_NOTIFY_CHANGE_FILE_NAME)
        (server.veto_dir / "tool.exe").write_bytes(b"vetoed")
        (server.veto_dir / "visible.txt").write_bytes(b"shown")
        assert [x["file_name"].get_value() for x in watcher.wait()] == ["visible.txt"]
    finally:
        c.close()
