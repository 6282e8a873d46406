"""SIDs to names and back over the lsarpc pipe, seen from Samba's rpcclient
and smbcacls.

ACL tools ask the server who a SID is (`smbcacls`, Windows' Security tab)
and which SID a name is (`smbcacls -a ACL:alice:...`). Braid answers for
its own users (the SID a user's files are owned by), the Guest account,
the "None" group, and the well-known SIDs (NT AUTHORITY, BUILTIN,
Everyone); a name it does not know is NONE_MAPPED, and an anonymous caller
cannot open the pipe at all.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import struct
import subprocess

import pytest
from smbprotocol.open import CreateDisposition

import servers
from smbremote import FILE_ALL_ACCESS, OWNER, RawClient, owner_sid

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")


def rpcclient(target, command: str, user: str | None = None) -> subprocess.CompletedProcess:
    creds = "%" if user == "" else f"{target.user}%{target.password}"
    return subprocess.run(
        ["rpcclient", "-p", str(target.port), "-U", creds, target.host, "-c", command],
        capture_output=True, text=True, timeout=60)


def sid_string(sid: bytes) -> str:
    """MS-DTYP 2.4.2.1: S-1-<authority>-<sub-authorities>."""
    count = sid[1]
    authority = int.from_bytes(sid[2:8], "big")
    subs = struct.unpack_from(f"<{count}I", sid, 8)
    return "-".join(["S", str(sid[0]), str(authority)] + [str(s) for s in subs])


def file_owner(target, name: str) -> str:
    c = RawClient(target)
    try:
        op = c.open(name, FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE)
        owner = owner_sid(c.query_sd(op, OWNER))
        op.close()
    finally:
        c.close()
    return sid_string(owner)


def test_a_users_sid_and_name_resolve_both_ways(smb_server, remote_dir):
    r = rpcclient(smb_server, f"lookupnames {smb_server.user}")
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(rf"^{re.escape(smb_server.user)} (S-1-5-21-[0-9-]+) \(User: 1\)$",
                  r.stdout, re.M)
    assert m, r.stdout
    sid = m.group(1)
    if TARGET == "braid":
        # The SID the user's own files are owned by (Samba's test server
        # runs as root and shows the Unix owner instead).
        assert sid == file_owner(smb_server, f"{remote_dir}\\mine.txt")
    r = rpcclient(smb_server, f"lookupsids {sid}")
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith(sid))
    domain_and_name = line.split(" ", 1)[1]
    assert domain_and_name.lower().endswith(f"\\{smb_server.user.lower()} (1)"), line


def test_well_known_sids_and_names(smb_server):
    r = rpcclient(smb_server, "lookupsids S-1-5-18 S-1-1-0 S-1-5-32-544 S-1-5-11")
    assert r.returncode == 0, r.stdout + r.stderr
    # Windows writes "NT AUTHORITY", Samba "NT Authority".
    for expected in ("S-1-5-18 NT AUTHORITY\\SYSTEM (5)",
                     "S-1-1-0 \\Everyone (5)",
                     "S-1-5-32-544 BUILTIN\\Administrators (4)",
                     "S-1-5-11 NT AUTHORITY\\Authenticated Users (5)"):
        assert expected.lower() in r.stdout.lower(), r.stdout
    r = rpcclient(smb_server, "lookupnames BUILTIN\\\\Administrators")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "S-1-5-32-544 (Local Group: 4)" in r.stdout, r.stdout


def test_unknown_names_and_sids_are_not_mapped(smb_server):
    r = rpcclient(smb_server, "lookupnames no-such-user-here")
    assert "NT_STATUS_NONE_MAPPED" in r.stdout + r.stderr, r.stdout + r.stderr
    # An unknown SID comes back as itself, unmapped.
    sid = "S-1-5-21-1111111111-2222222222-3333333333-512"
    r = rpcclient(smb_server, f"lookupsids {sid}")
    assert "NT_STATUS_NONE_MAPPED" in r.stdout + r.stderr or f"{sid} *unknown*" in r.stdout, \
        r.stdout + r.stderr


@pytest.mark.skipif(TARGET != "braid", reason="Samba's test config allows guest access")
def test_anonymous_callers_cannot_look_up_names(smb_server):
    r = rpcclient(smb_server, "lookupnames " + smb_server.user, user="")
    assert r.returncode != 0 or "S-1-5-21" not in r.stdout, r.stdout


SMBCACLS_IN_NETNS = r"""
set -e
ip link set lo up
"$BRAID" serve --listen 127.0.0.1:445 --share share="$SHARE" --user "alice:$PASS" \
    > "$WORK/braid.log" 2>&1 &
pid=$!
trap 'kill $pid' EXIT
for _ in $(seq 50); do
    smbclient -L //127.0.0.1 -U "alice%$PASS" >/dev/null 2>&1 && break
    sleep 0.1
done
smbcacls //127.0.0.1/share f.txt -U "alice%$PASS" -a 'ACL:BUILTIN\Users:ALLOWED/0x0/READ'
smbcacls //127.0.0.1/share f.txt -U "alice%$PASS"
"""


@pytest.mark.skipif(TARGET != "braid", reason="starts its own Braid")
def test_smbcacls_shows_and_takes_names(tmp_path):
    """smbcacls reaches only port 445: Braid runs in a network namespace of
    its own (root and `unshare` needed, as CI has)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a private network namespace")
    share = tmp_path / "share"
    share.mkdir()
    (share / "f.txt").write_text("hi\n")
    env = dict(os.environ, BRAID=str(servers.BRAID_BIN), SHARE=str(share),
               WORK=str(tmp_path), PASS=secrets.token_hex(8))
    r = subprocess.run(["unshare", "-n", "bash", "-c", SMBCACLS_IN_NETNS],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    netbios = "BRAID"
    assert f"OWNER:{netbios}\\alice" in lines, r.stdout
    assert f"GROUP:{netbios}\\None" in lines, r.stdout
    assert "ACL:NT AUTHORITY\\SYSTEM:ALLOWED/0x0/FULL" in lines, r.stdout
    # The ACE added by name is stored with BUILTIN\Users' SID and shown by name.
    assert "ACL:BUILTIN\\Users:ALLOWED/0x0/READ" in lines, r.stdout


def test_the_server_says_it_is_a_standalone_server(smb_server):
    """MS-DSSP DsRolerGetPrimaryDomainInformation, on the lsarpc pipe:
    Windows' Security tab and `net` ask it before deciding where accounts
    are looked up."""
    r = rpcclient(smb_server, "dsroledominfo")
    assert r.returncode == 0, r.stdout + r.stderr
    # DsRole_RoleStandaloneServer, and no directory service.
    assert "Machine Role = [2]" in r.stdout, r.stdout
    assert "Directory Service not running on server" in r.stdout, r.stdout
