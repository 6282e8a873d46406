"""NFS configuration of `braid serve` (docs/CONFIG.md, "NFS exports"):
nonsense in the NFS keys and flags is refused with one line naming the
key and the fix, a share served over NFS only is unknown to SMB clients,
and the server prints a mount command for each NFS listener and export.

Braid only (its config format and flags).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time

import pytest

import servers

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's config format")


def share(path, extra: str = "", name: str = "d") -> str:
    return f"[[share]]\nname = {json.dumps(name)}\npath = {json.dumps(str(path))}\n{extra}"


@pytest.mark.parametrize("top, extra, says", [
    ("", 'protocols = []\n',
     "share 'd': protocols = []: list at least one of \"smb\" and \"nfs\""),
    ("", 'protocols = ["afp"]\n',
     "share 'd': protocols: 'afp' is not a protocol; use \"smb\" and/or \"nfs\""),
    ("", 'nfs_sec = []\n',
     "share 'd': nfs_sec = []: list at least one flavour, e.g. [\"sys\"]"),
    ("", 'nfs_sec = ["krb5"]\n',
     "share 'd': nfs_sec: 'krb5' is not supported yet; use \"sys\""),
    ("", 'nfs_clients = ["10.0.0.0/33"]\n',
     "share 'd': nfs_clients: '10.0.0.0/33' is not an address or network"),
    ("", 'nfs_clients = ["10.0.0.0/8 async"]\n',
     "share 'd': nfs_clients: '10.0.0.0/8 async': after the network only \"ro\" or \"rw\""),
    ("", 'anon_uid = 4294967296\n',
     "share 'd': anon_uid = 4294967296: use an unprivileged id from 1 to 4294967294"),
    ("", 'anon_gid = -2\n',
     "share 'd': anon_gid = -2: use an unprivileged id"),
    ("", 'protocols = ["smb"]\nnfs_clients = ["10.0.0.0/8"]\n',
     "share 'd': nfs_clients apply to NFS exports, and the share is not one; "
     "add \"nfs\" to protocols or remove them"),
    ('nfs_listen = ["127.0.0.1:20490"]\n', 'encrypt = true\n',
     "share 'd': encrypt = true, but NFS cannot encrypt yet (no krb5p)"),
    ('nfs_listen = ["nfs.example:2049"]\n', '',
     "nfs_listen: 'nfs.example:2049' is not an address:port"),
    ('nfs_lease_time_secs = 5\n', '',
     "nfs_lease_time_secs = 5: use a value from 10 to 3600"),
    ('nfs_grace_time_secs = 30\n', '',
     "nfs_grace_time_secs = 30: use a value from the lease time (90) to 3600"),
    ('nfs_squash = true\n', '', "unknown field `nfs_squash`"),
], ids=["no-protocols", "unknown-protocol", "empty-nfs-sec", "krb5", "bad-network",
        "bad-client-option", "anon-uid-range", "anon-gid-negative", "nfs-keys-without-nfs",
        "encrypt-over-nfs", "nfs-listen-host-name", "lease-too-short", "grace-too-short",
        "unknown-key"])
def test_nonsense_is_refused_in_one_line(tmp_path, top, extra, says):
    line = servers.config_error(tmp_path, top + share(tmp_path, extra))
    assert line.startswith("braid: ") and says in line, line


def test_state_dir_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "state"
    f.write_text("x")
    line = servers.config_error(tmp_path, f"state_dir = {json.dumps(str(f))}\n" + share(tmp_path))
    assert "state_dir" in line and "not a directory" in line, line


def refused_flags(tmp_path, *flags: str) -> str:
    r = subprocess.run([str(servers.BRAID_BIN), "serve", "--share", f"d={tmp_path}",
                        "--user", "u:p", "--admin-listen", "off", *flags],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_nfs_listen_flags_are_checked(tmp_path):
    line = refused_flags(tmp_path, "--nfs-listen", "2049")
    assert line.startswith("braid: nfs_listen: '2049' is not an address:port"), line
    line = refused_flags(tmp_path, "--nfs-listen", "off", "--nfs-listen", "127.0.0.1:20490")
    assert line.startswith("braid: --nfs-listen off turns NFS off"), line
    line = refused_flags(tmp_path, "--nfs-listen", "127.0.0.1:20490", "--encrypt")
    assert "encrypt = true (or --encrypt): NFS cannot encrypt yet" in line, line


def test_a_share_served_over_nfs_only_is_unknown_to_smb(tmp_path):
    (tmp_path / "both").mkdir()
    (tmp_path / "nfsonly").mkdir()
    workdir = tmp_path / "w"
    workdir.mkdir()
    password = "Pw-" + secrets.token_hex(8)
    config = (share(tmp_path / "both", name="both")
              + share(tmp_path / "nfsonly", 'protocols = ["nfs"]\n', name="nfsonly"))
    proc, port = servers.start_braid_with_config(workdir, config, {"u": password})
    try:
        r = subprocess.run(["smbclient", "-L", "//127.0.0.1", "-p", str(port),
                            "-U", f"u%{password}"], capture_output=True, text=True, timeout=60)
        out = r.stdout + r.stderr
        assert re.search(r"^\tboth\s+Disk", out, re.M), out
        assert "nfsonly" not in out, out
        r = subprocess.run(["smbclient", "//127.0.0.1/nfsonly", "-p", str(port),
                            "-U", f"u%{password}", "-c", "ls"],
                           capture_output=True, text=True, timeout=60)
        assert "NT_STATUS_BAD_NETWORK_NAME" in r.stdout + r.stderr, r.stdout + r.stderr
        r = subprocess.run(["smbclient", "//127.0.0.1/both", "-p", str(port),
                            "-U", f"u%{password}", "-c", "ls"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        servers.stop_pid(proc.pid)


def test_start_prints_a_mount_command_with_the_real_port(tmp_path):
    """--nfs-listen 127.0.0.1:0: the line names the port bound."""
    log = tmp_path / "braid.log"
    argv = [str(servers.BRAID_BIN), "serve", "--listen", "127.0.0.1:0",
            "--nfs-listen", "127.0.0.1:0", "--share", f"data={tmp_path}",
            "--user", "u:p", "--admin-listen", "off"]
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        pattern = re.compile(r"^braid: NFSv4\.1/4\.2 on 127\.0\.0\.1:(\d+): mount -t nfs4 "
                             r"-o vers=4\.1,port=(\d+) 127\.0\.0\.1:/data /mnt$", re.M)
        deadline = time.monotonic() + 30
        while True:
            text = log.read_text()
            m = pattern.search(text)
            if m or proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert m, text
        assert m.group(1) == m.group(2) and m.group(1) != "0", text
    finally:
        servers.stop_pid(proc.pid)
