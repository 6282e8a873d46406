"""Start and stop the SMB server under test: Braid, or Samba's smbd as a reference;
and the NFSv4.1 server under test (start_nfs): Braid's, or nfs-ganesha's.

Used by the pytest fixture (conftest.py) and, through the small command line at
the bottom, by the shell scripts (conformance run, benchmark):

    python3 tests/e2e/servers.py start --target samba --share-dir D --workdir W
        -> prints "PID PORT SHARE USER PASSWORD" once the server accepts
           connections, leaves it running, and exits.

Both servers listen on loopback only. Samba runs with a private configuration
whose state lives entirely under the work directory; it authenticates a system
user (created with useradd if missing) whose password is set with smbpasswd.

NFS: Braid serves its share NAME at the NFSv4 pseudo path /NAME
(`--nfs-listen`); nfs-ganesha (FSAL VFS, NFSv4.1 only, AUTH_SYS, no
rpcbind) runs as root with a private config and state under the work
directory and exports the same path. Ganesha is given Bind_addr, but has
been seen listening on every address regardless (field notes; here, on
2026-11-28, it bound [::ffff:127.0.0.1] only): its port is taken free on
all addresses, and a test that needs another address runs it in a network
namespace of its own (`wrap`). Both are up once they answer an ONC RPC
NULL call (nfs_rpc.py).

    python3 tests/e2e/servers.py start-nfs --target ganesha --export-dir D --workdir W
        -> prints "PID PORT /EXPORT" once the server answers NULL.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BRAID_BIN = Path(os.environ.get("BRAID_BIN", REPO_ROOT / "target" / "release" / "braid"))

DEFAULT_SHARE = "share"
# Samba maps SMB users to Unix accounts, so the test user must exist in
# /etc/passwd. Braid is given the same name so both targets look alike.
DEFAULT_USER = "braidtest"
START_TIMEOUT = 30.0


def free_port(host: str = "127.0.0.1") -> int:
    """Ask the kernel for a currently unused TCP port on host."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def process_tree(pid: int) -> list[int]:
    """pid and all its live descendants (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def tree_cpu(pid: int) -> tuple[float, int]:
    """(CPU seconds, process count) of pid and its descendants: utime + stime of
    each live process plus cutime + cstime (children that exited and were reaped).

    A child reaped while the tree is read has its CPU moved into its parent's
    cutime: read before its parent it would count twice, and skipped it would
    not count at all. So each process is read after its parent
    (process_tree's order), and when one has gone by the time it is read, the
    whole tree is read again."""
    ticks = os.sysconf("SC_CLK_TCK")
    for _ in range(50):
        total, count, lost = 0, 0, False
        for p in process_tree(pid):
            try:
                fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                lost = True
                break
            # fields[0] is stat field 3 (state): utime..cstime are fields 14-17.
            total += sum(int(x) for x in fields[11:15])
            count += 1
        if not lost:
            return total / ticks, count
    raise RuntimeError(f"the process tree of {pid} kept changing while read")


def settled_tree_cpu(pid: int, baseline_count: int, timeout: float = 5.0) -> tuple[float, int]:
    """tree_cpu once the tree is back to baseline_count processes (a client's
    connection just closed: smbd's per-connection child exits and is reaped
    into its parent's cutime), or after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        seconds, count = tree_cpu(pid)
        if count <= baseline_count or time.monotonic() > deadline:
            return seconds, count
        time.sleep(0.05)


@dataclass
class Server:
    target: str
    host: str
    port: int
    share: str
    user: str
    password: str
    share_dir: Path
    workdir: Path
    pid: int
    log_path: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)
    # Braid's admin HTTP API ("host:port"), None for Samba.
    admin: str | None = None
    # A second account (name, password), when asked for: tests that one user
    # cannot use another's session (smbtorture smb2.session.bind_different_user).
    user2: tuple[str, str] | None = None

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 10.0) -> None:
        stop_pid(self.pid, timeout)
        if self.proc is not None:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def same_config(pid: int) -> list[int]:
    """Processes outside pid's tree started with its private config file
    (an absolute *.conf path on its command line), and their descendants:
    smbd starts samba-dcerpcd for the named pipes, which leaves smbd's
    process tree (it runs in a session of its own) with its rpcd_* workers."""
    confs = [a for a in _cmdline(pid) if a.endswith(".conf") and os.path.isabs(a)]
    if not confs:
        return []
    tree = set(process_tree(pid))
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in tree:
            argv = _cmdline(int(entry))
            if any(c in a for a in argv for c in confs):
                found.extend(process_tree(int(entry)))
    return found


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """Stop a server started by start(): SIGTERM to it and its descendants
    (smbd's per-connection children and helpers, and the RPC daemons it
    started with the same config), SIGKILL after timeout."""
    pids = process_tree(pid) + same_config(pid)
    # The main process first, so that it can shut its children down itself.
    for group in ([pid], pids):
        for p in group:
            try:
                os.kill(p, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout / 2
        while time.monotonic() < deadline:
            if not any(Path(f"/proc/{p}").exists() and not _zombie(p) for p in group):
                break
            time.sleep(0.05)
    if not any(Path(f"/proc/{p}").exists() and not _zombie(p) for p in pids):
        return
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _zombie(pid: int) -> bool:
    """Whether every thread of `pid` has exited. The main thread turns
    zombie as soon as it returns, while other threads (blocking-pool
    workers in a syscall) may still hold files open: a mount the server
    served cannot be unmounted until they are gone too."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    for task in tasks:
        try:
            if (task / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                return False
        except OSError:
            continue  # that thread has just gone
    return True


def wait_until_accepting(host: str, port: int, proc: subprocess.Popen, log_path: Path,
                         timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"server exited with status {proc.returncode} before accepting; log:\n"
                + log_path.read_text(errors="replace")[-4000:]
            )
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"server did not accept on {host}:{port} within {timeout}s")


def _spawn(argv: list[str], log_path: Path, cwd: Path,
           extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start `argv` logging to `log_path`; `extra_env` is added to the
    server's environment only (test switches such as BRAID_TEST_BROKEN_*)."""
    log = open(log_path, "ab")
    env = {**os.environ, **extra_env} if extra_env else None
    try:
        return subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env)
    finally:
        log.close()


def start_braid(share_dir: Path, workdir: Path, port: int | None = None,
                share: str = DEFAULT_SHARE, user: str = DEFAULT_USER,
                password: str | None = None,
                user2: tuple[str, str] | None = None,
                hide_files: tuple[str, ...] = (),
                abe_share: tuple[str, Path] | None = None,
                noncanonical_share: tuple[str, Path] | None = None,
                nostreams_share: tuple[str, Path] | None = None,
                snapshot_share: tuple[str, Path] | None = None,
                noperm_share: tuple[str, Path] | None = None,
                option_shares: Path | None = None) -> Server:
    """hide_files: name patterns the share reports hidden; abe_share: a
    second share (name, directory) with access-based enumeration;
    noncanonical_share: one that keeps DACL inheritance bits as sent;
    nostreams_share: one without named streams; snapshot_share: one whose
    `.snapshots` directory holds previous versions (`@GMT-...` names);
    noperm_share: one whose root grants the user nothing (an NT ACL with an
    empty DACL; for Samba, mode 0000), which a tree connect still reaches.
    option_shares: a directory in which to serve the OPTION_SHARES (macOS
    clients' metadata streams, Time Machine, zero file ids, no change
    notification)."""
    if not BRAID_BIN.exists():
        raise RuntimeError(f"{BRAID_BIN} not found: run `cargo build --release -p braid`")
    port = port or free_port()
    password = password or "Pw-" + secrets.token_hex(8)
    log_path = workdir / "braid.log"
    argv = [str(BRAID_BIN), "serve", "--listen", f"127.0.0.1:{port}",
            "--user", f"{user}:{password}"]
    if (hide_files or abe_share is not None or noncanonical_share is not None
            or nostreams_share is not None or snapshot_share is not None
            or noperm_share is not None or option_shares is not None):
        config = workdir / "braid.toml"
        text = f"[[share]]\nname = {json.dumps(share)}\npath = {json.dumps(str(share_dir))}\n"
        text += f"hide_files = {json.dumps(list(hide_files))}\n"
        if abe_share is not None:
            text += (f"[[share]]\nname = {json.dumps(abe_share[0])}\n"
                     f"path = {json.dumps(str(abe_share[1]))}\naccess_based_enumeration = true\n")
        if noncanonical_share is not None:
            text += (f"[[share]]\nname = {json.dumps(noncanonical_share[0])}\n"
                     f"path = {json.dumps(str(noncanonical_share[1]))}\n"
                     "canonicalize_acl_flags = false\n")
        if nostreams_share is not None:
            text += (f"[[share]]\nname = {json.dumps(nostreams_share[0])}\n"
                     f"path = {json.dumps(str(nostreams_share[1]))}\n"
                     "named_streams = false\n")
        if snapshot_share is not None:
            text += (f"[[share]]\nname = {json.dumps(snapshot_share[0])}\n"
                     f"path = {json.dumps(str(snapshot_share[1]))}\n"
                     f"snapshot_dir = {json.dumps(SNAPSHOT_DIR)}\n")
        if noperm_share is not None:
            os.setxattr(noperm_share[1], "user.braid.sd", NO_ACCESS_SD)
            text += (f"[[share]]\nname = {json.dumps(noperm_share[0])}\n"
                     f"path = {json.dumps(str(noperm_share[1]))}\n")
        if option_shares is not None:
            for name, (subdir, braid_options, _) in OPTION_SHARES.items():
                (option_shares / subdir).mkdir(exist_ok=True)
                text += (f"[[share]]\nname = {json.dumps(name)}\n"
                         f"path = {json.dumps(str(option_shares / subdir))}\n{braid_options}")
        config.write_text(text)
        argv += ["--config", str(config)]
    else:
        argv += ["--share", f"{share}={share_dir}"]
    if user2 is not None:
        argv += ["--user", f"{user2[0]}:{user2[1]}"]
    # The admin API on a free port of its own (the default 9445 may be taken).
    admin = f"127.0.0.1:{free_port()}"
    argv += ["--admin-listen", admin]
    # Extra flags for benchmarks, e.g. BRAID_EXTRA_ARGS="--signing enabled".
    argv += os.environ.get("BRAID_EXTRA_ARGS", "").split()
    proc = _spawn(argv, log_path, workdir)
    wait_until_accepting("127.0.0.1", port, proc, log_path)
    return Server("braid", "127.0.0.1", port, share, user, password, share_dir, workdir,
                  proc.pid, log_path, proc, admin=admin, user2=user2)


def start_braid_with_config(workdir: Path, config: str,
                            users: dict[str, str]) -> tuple[subprocess.Popen, int]:
    """Braid serving what the TOML `config` (shares and options, no
    `listen`) says, on a free loopback port, with `users` (name: password).
    Returns the process and the port; stop it with stop_pid."""
    port = free_port()
    path = workdir / "braid.toml"
    # No admin API unless the config asks for one.
    admin = "" if "admin_listen" in config else 'admin_listen = "off"\n'
    path.write_text(f'listen = ["127.0.0.1:{port}"]\n{admin}' + config)
    argv = [str(BRAID_BIN), "serve", "--config", str(path)]
    for user, password in users.items():
        argv += ["--user", f"{user}:{password}"]
    argv += os.environ.get("BRAID_EXTRA_ARGS", "").split()
    log = workdir / "braid.log"
    proc = _spawn(argv, log, workdir)
    wait_until_accepting("127.0.0.1", port, proc, log)
    return proc, port


def config_error(workdir: Path, config: str) -> str:
    """`braid serve` with the TOML `config`, which it must refuse: returns
    the one line it says why (asserting it exits non-zero with one line)."""
    path = workdir / "refused.toml"
    path.write_text(config)
    r = subprocess.run([str(BRAID_BIN), "serve", "--config", str(path)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0, r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


SAMBA_CONF = """\
[global]
    server role = standalone server
    smb ports = {port}
    # Two loopback addresses with distinct interface indexes and a non-zero
    # speed, so that multichannel tests see interfaces to bind channels on.
    interfaces = "127.0.0.1;if_index=1,speed=10000000000,capability=RSS" \
"127.0.0.2;if_index=2,speed=10000000000,capability=RSS"
    bind interfaces only = yes
    server multi channel support = yes
    server min protocol = SMB2_02
    pid directory = {w}/run
    lock directory = {w}/lock
    state directory = {w}/state
    cache directory = {w}/cache
    private dir = {w}/private
    ncalrpc dir = {w}/ncalrpc
    usershare path = {w}/usershares
    max log size = 0
    log level = 1
    disable netbios = yes
    load printers = no
    printing = bsd
    printcap name = /dev/null
    disable spoolss = yes
    map to guest = never
    passdb backend = tdbsam
    # Global in vfs_fruit: whole-file server-side copies for macOS
    # clients, on the shares that load fruit (OPTION_SHARES).
    fruit:copyfile = yes

[{share}]
    path = {share_dir}
    read only = no
    guest ok = no
    # What smbtorture's conformance list needs from Samba (all pass with these):
    # - smb2.getinfo.fsinfo queries FS quota info, which smbd answers for uid 0
    #   only: admin users makes the test user act as root on this share.
    # - smb2.session.reauth4 sets a DACL granting the anonymous SID from an
    #   anonymous re-authenticated session: smbd can store that as an NT ACL in
    #   an xattr but cannot map it onto a POSIX ACL.
    admin users = {user}
    vfs objects = acl_xattr
    acl_xattr:ignore system acls = yes
"""


# A self-relative security descriptor (MS-DTYP 2.4.6) owned by SYSTEM with
# an empty DACL: nobody is granted anything. Braid keeps a file's NT ACL in
# the xattr user.braid.sd.
_SYSTEM_SID = bytes([1, 1, 0, 0, 0, 0, 0, 5, 18, 0, 0, 0])
NO_ACCESS_SD = (bytes([1, 0]) + (0x8004).to_bytes(2, "little")
                + (20).to_bytes(4, "little") + (32).to_bytes(4, "little")
                + (0).to_bytes(4, "little") + (44).to_bytes(4, "little")
                + _SYSTEM_SID + _SYSTEM_SID + bytes([2, 0, 8, 0, 0, 0, 0, 0]))

# Where a snapshot share keeps its snapshots, for Braid and for Samba's
# vfs_shadow_copy2 (whose default names, @GMT-%Y.%m.%d-%H.%M.%S, Braid's
# default matches).
SNAPSHOT_DIR = ".snapshots"

SAMBA_SNAPSHOT_SHARE = """
[{name}]
    path = {path}
    read only = no
    guest ok = no
    vfs objects = shadow_copy2 streams_xattr acl_xattr
    shadow:snapdir = {snapdir}
    shadow:mountpoint = {path}
    acl_xattr:ignore system acls = yes
"""

# Shares that differ from the default one by an option: name -> (directory,
# Braid options, Samba options). For macOS clients' extensions (smbtorture
# vfs.fruit*) "fruit" and "nofruit" serve one directory with and without
# them; "fruit" keeps resource forks in AppleDouble ._ files (Samba's
# default fruit:resource = file) and shows those files to clients, as
# Samba's own selftest share does; the others keep metadata and resource
# forks in streams. "adconvert" and "adconvert_plain" serve one directory
# with and without the conversion of macOS's ._ files, which drops blank
# resource forks and the ._ files left empty. "nonotify" serves no change
# notification (Samba's `change notify` is a global option: its share here
# still serves them).
SAMBA_FRUIT = ("vfs objects = catia fruit streams_xattr acl_xattr\n"
               "    fruit:metadata = stream\n    fruit:resource = stream\n")
SAMBA_FRUIT_FILE = ("vfs objects = catia fruit streams_xattr acl_xattr\n"
                    "    fruit:metadata = stream\n    fruit:resource = file\n"
                    "    fruit:veto_appledouble = no\n")
BRAID_FRUIT_FILE = 'macos_resource = "file"\nmacos_veto_appledouble = false\n'
OPTION_SHARES = {
    "fruit": ("fruit", BRAID_FRUIT_FILE, SAMBA_FRUIT_FILE),
    "nofruit": ("fruit", "macos = false\n", "vfs objects = streams_xattr acl_xattr\n"),
    "timemachine": ("timemachine", 'time_machine = true\ntime_machine_max_size = "32K"\n',
                    SAMBA_FRUIT + "    fruit:time machine = yes\n"
                                  "    fruit:time machine max size = 32K\n"),
    "zerofileid": ("zerofileid", "macos_zero_file_id = true\n",
                   SAMBA_FRUIT + "    fruit:zero_file_id = yes\n"),
    "adconvert": ("adconvert",
                  BRAID_FRUIT_FILE + "macos_wipe_blank_resource_fork = true\n"
                                     "macos_delete_empty_appledouble = true\n",
                  SAMBA_FRUIT_FILE + "    fruit:wipe_intentionally_left_blank_rfork = yes\n"
                                     "    fruit:delete_empty_adfiles = yes\n"),
    # Finder info in Netatalk's metadata xattr, resource forks in ._
    # files (Samba's vfs_fruit defaults), and Netatalk's open and deny-mode
    # locks respected (Samba's selftest share for vfs.fruit_netatalk).
    "netatalk": ("netatalk",
                 BRAID_FRUIT_FILE + 'macos_metadata = "netatalk"\nnetatalk_locking = true\n',
                 SAMBA_FRUIT_FILE.replace("fruit:metadata = stream", "fruit:metadata = netatalk")
                 + "    fruit:locking = netatalk\n"),
    "adconvert_plain": ("adconvert", "macos = false\n",
                        "vfs objects = streams_xattr acl_xattr\n"),
    "nonotify": ("nonotify", "change_notify = false\n", "vfs objects = acl_xattr\n"),
    # Persistent handles (smb2.durable-v2-open.persistent-open-*,
    # smb2.replay.replay5). Samba 4.17 has no continuous availability: its
    # share stays plain, and those tests check the non-CA answers there.
    "ca": ("ca", "continuous_availability = true\n", "vfs objects = acl_xattr\n"),
    # What a file gets below a directory whose ACL has no inheritable ACE
    # (vfs.acl_xattr): Braid's default is Samba's "windows" style.
    "acl_xattr_ign_sysacl_windows": ("aclwindows", "",
                                     "vfs objects = acl_xattr\n"
                                     "    acl_xattr:default acl style = windows\n"),
}

SAMBA_OPTION_SHARE = """
[{name}]
    path = {path}
    read only = no
    guest ok = no
    acl_xattr:ignore system acls = yes
    {options}
"""

SAMBA_EXTRA_SHARE = """
[{name}]
    path = {path}
    read only = no
    guest ok = no
    {option}
    vfs objects = acl_xattr
    acl_xattr:ignore system acls = yes
"""


def ensure_unix_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home",
                        "--shell", "/usr/sbin/nologin", name], check=True)
        return pwd.getpwnam(name)


def make_reachable(path: Path) -> None:
    """Let the unprivileged Samba user traverse down to path (mkdtemp makes 0700 dirs)."""
    for p in [path, *path.parents]:
        if p == Path("/"):
            break
        mode = p.stat().st_mode
        if mode & 0o011 != 0o011:
            os.chmod(p, mode | 0o011)


def give_to_share_owner(share_dir: Path, *paths: Path) -> None:
    """chown paths (recursively) to the owner of share_dir, so that files seeded
    from outside the server are writable through it under Samba too."""
    st = share_dir.stat()
    for top in paths:
        for p in [top, *(top.rglob("*") if top.is_dir() else [])]:
            os.chown(p, st.st_uid, st.st_gid, follow_symlinks=False)


def start_samba(share_dir: Path, workdir: Path, port: int | None = None,
                share: str = DEFAULT_SHARE, user: str = DEFAULT_USER,
                password: str | None = None,
                user2: tuple[str, str] | None = None,
                hide_files: tuple[str, ...] = (),
                abe_share: tuple[str, Path] | None = None,
                noncanonical_share: tuple[str, Path] | None = None,
                nostreams_share: tuple[str, Path] | None = None,
                snapshot_share: tuple[str, Path] | None = None,
                noperm_share: tuple[str, Path] | None = None,
                option_shares: Path | None = None) -> Server:
    for tool in ("smbd", "smbpasswd"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} not found: apt-get install samba")
    port = port or free_port()
    password = password or "Pw-" + secrets.token_hex(8)
    account = ensure_unix_user(user)
    os.chown(share_dir, account.pw_uid, account.pw_gid)
    make_reachable(share_dir)

    for sub in ("run", "lock", "state", "cache", "private", "ncalrpc", "usershares"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    conf = workdir / "smb.conf"
    text = SAMBA_CONF.format(port=port, w=workdir, share=share, share_dir=share_dir, user=user)
    if hide_files:
        text += "    hide files = /" + "/".join(hide_files) + "/\n"
    for extra, option in ((abe_share, "hide unreadable = yes"),
                          (noncanonical_share, "acl flag inherited canonicalization = no"),
                          # Samba serves streams only with a streams module,
                          # which this config loads nowhere.
                          (nostreams_share, "")):
        if extra is not None:
            os.chown(extra[1], account.pw_uid, account.pw_gid)
            make_reachable(extra[1])
            text += SAMBA_EXTRA_SHARE.format(name=extra[0], path=extra[1], option=option)
    if snapshot_share is not None:
        os.chown(snapshot_share[1], account.pw_uid, account.pw_gid)
        make_reachable(snapshot_share[1])
        text += SAMBA_SNAPSHOT_SHARE.format(name=snapshot_share[0], path=snapshot_share[1],
                                            snapdir=SNAPSHOT_DIR)
    if noperm_share is not None:
        make_reachable(noperm_share[1])
        os.chmod(noperm_share[1], 0)
        text += SAMBA_EXTRA_SHARE.format(name=noperm_share[0], path=noperm_share[1], option="")
    if option_shares is not None:
        for name, (subdir, _, samba_options) in OPTION_SHARES.items():
            (option_shares / subdir).mkdir(exist_ok=True)
            os.chown(option_shares / subdir, account.pw_uid, account.pw_gid)
            make_reachable(option_shares / subdir)
            text += SAMBA_OPTION_SHARE.format(name=name, path=option_shares / subdir,
                                           options=samba_options)
    conf.write_text(text)
    accounts = [(user, password)]
    if user2 is not None:
        ensure_unix_user(user2[0])
        accounts.append(user2)
    for name, secret in accounts:
        subprocess.run(["smbpasswd", "-c", str(conf), "-a", "-s", name],
                       input=f"{secret}\n{secret}\n", text=True, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    log_path = workdir / "smbd.stdout"
    argv = ["smbd", "--foreground", "--no-process-group", "--debug-stdout", "-s", str(conf)]
    proc = _spawn(argv, log_path, workdir)
    wait_until_accepting("127.0.0.1", port, proc, log_path)
    return Server("samba", "127.0.0.1", port, share, user, password, share_dir, workdir,
                  proc.pid, log_path, proc, user2=user2)


@dataclass
class NfsServer:
    """An NFSv4.1 server: export_dir served at the pseudo path `export`
    ("/share"), on host:port."""
    target: str
    host: str
    port: int
    export: str
    export_dir: Path
    workdir: Path
    pid: int
    log_path: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)

    alive = Server.alive
    log_tail = Server.log_tail
    stop = Server.stop

    @property
    def pynfs_target(self) -> str:
        """HOST:PORT/PATH, as pynfs's testserver.py takes it."""
        return f"{self.host}:{self.port}{self.export}"


GANESHA_CONF = """\
# nfs-ganesha for Braid's tests: NFSv4.1 only, AUTH_SYS, no rpcbind, NLM,
# rquota or UDP; all state under {w}.
NFS_CORE_PARAM {{
    NFS_Port = {port};
    Bind_addr = {host};
    Protocols = 4;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
}}
NFSv4 {{
    Minor_Versions = 1;
    Graceless = true;
    RecoveryBackend = fs;
    RecoveryRoot = {w}/recov;
    Only_Numeric_Owners = true;
}}
EXPORT {{
    Export_Id = 1;
    Path = {export_dir};
    Pseudo = {export};
    Protocols = 4;
    Transports = TCP;
    Access_Type = RW;
    Squash = No_Root_Squash;
    SecType = sys;
    FSAL {{ Name = VFS; }}
}}
"""


def _ganesha_bin() -> str:
    for candidate in (shutil.which("ganesha.nfsd"), "/usr/bin/ganesha.nfsd",
                      "/usr/sbin/ganesha.nfsd"):
        if candidate and Path(candidate).exists():
            return candidate
    raise RuntimeError("ganesha.nfsd not found: apt-get install --no-install-recommends "
                       "nfs-ganesha nfs-ganesha-vfs")


def _wait_for_nfs(host: str, port: int, proc: subprocess.Popen, log_path: Path,
                  wrap=None, timeout: float = START_TIMEOUT) -> None:
    """Until the server answers an NFSv4 NULL call (from inside wrap's
    network namespace when given)."""
    if str(Path(__file__).resolve().parent) not in sys.path:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
    import nfs_rpc  # tests/e2e/nfs_rpc.py, beside this file
    try:
        if wrap is None:
            nfs_rpc.wait_for_null(host, port, timeout, alive=lambda: proc.poll() is None)
            return
        # Poll from inside the namespace: nothing outside it reaches host.
        script = Path(nfs_rpc.__file__)
        deadline = time.monotonic() + timeout
        while True:
            r = subprocess.run(wrap([sys.executable, str(script), "ping", f"{host}:{port}",
                                     "-t", "2"]), capture_output=True, text=True)
            if r.returncode == 0:
                return
            if proc.poll() is not None:
                raise RuntimeError("the NFS server exited before answering NULL")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no NFS NULL answer from {host}:{port} within {timeout}s "
                                   f"({r.stdout.strip()})")
            time.sleep(0.2)
    except RuntimeError as e:
        if proc.poll() is None:
            stop_pid(proc.pid)
        raise RuntimeError(f"{e}; log {log_path}:\n"
                           + (log_path.read_text(errors="replace")[-4000:]
                              if log_path.exists() else "(no log)")) from None


def start_ganesha(export_dir: Path, workdir: Path, port: int | None = None,
                  export: str = DEFAULT_SHARE, host: str = "127.0.0.1",
                  wrap=None) -> NfsServer:
    """nfs-ganesha serving export_dir at /export on host:port. It may
    listen on every address whatever Bind_addr says: without `wrap` (a
    function that puts an argv in a network namespace) the port is one
    free on all of them."""
    binary = _ganesha_bin()
    if os.geteuid() != 0:
        raise RuntimeError("nfs-ganesha needs root")
    port = port or free_port("0.0.0.0")
    (workdir / "recov").mkdir(parents=True, exist_ok=True)
    conf = workdir / "ganesha.conf"
    conf.write_text(GANESHA_CONF.format(port=port, host=host, w=workdir,
                                        export_dir=export_dir, export="/" + export))
    log_path = workdir / "ganesha.log"
    argv = [binary, "-F", "-f", str(conf), "-L", str(log_path),
            "-p", str(workdir / "ganesha.pid"), "-N", "NIV_EVENT"]
    proc = _spawn(wrap(argv) if wrap else argv, workdir / "ganesha.stdout", workdir)
    _wait_for_nfs(host, port, proc, log_path, wrap)
    return NfsServer("ganesha", host, port, "/" + export, export_dir, workdir, proc.pid,
                     log_path, proc)


def start_braid_nfs(export_dir: Path, workdir: Path, port: int | None = None,
                    export: str = DEFAULT_SHARE, host: str = "127.0.0.1",
                    wrap=None, extra_config: str = "", top_config: str = "") -> NfsServer:
    """Braid serving export_dir as share `export`, over NFSv4.1 on
    host:port (its pseudo path /export) and over SMB on a loopback port.
    `extra_config` is TOML appended to its config (more [[share]] tables);
    `top_config` top-level keys put before them (state_dir, lease times)."""
    if not BRAID_BIN.exists():
        raise RuntimeError(f"{BRAID_BIN} not found: run `cargo build --release -p braid`")
    port = port or free_port(host if wrap is None else "127.0.0.1")
    password = "Pw-" + secrets.token_hex(8)
    log_path = workdir / "braid.log"
    # A config rather than --share: the export must be no_root_squash, as
    # ganesha's is (Squash = No_Root_Squash), since pynfs and the kernel
    # client's tests run as root and create device nodes and chown.
    config = workdir / "braid-nfs.toml"
    config.write_text(top_config + f'[[share]]\nname = "{export}"\npath = "{export_dir}"\n'
                      'root_squash = false\n' + extra_config)
    argv = [str(BRAID_BIN), "serve", "--config", str(config),
            "--listen", f"127.0.0.1:{free_port()}",
            "--nfs-listen", f"{host}:{port}",
            "--user", f"{DEFAULT_USER}:{password}",
            "--admin-listen", f"127.0.0.1:{free_port()}"]
    argv += os.environ.get("BRAID_EXTRA_ARGS", "").split()
    proc = _spawn(wrap(argv) if wrap else argv, log_path, workdir)
    _wait_for_nfs(host, port, proc, log_path, wrap)
    return NfsServer("braid", host, port, "/" + export, export_dir, workdir, proc.pid,
                     log_path, proc)


def crash_and_restart_braid(server: Server | NfsServer, ready, wrap=None) -> float:
    """Kill the Braid `server` names with SIGKILL, as a crash would (its
    PID only), and start it again with the same command line (so the same
    config, state_dir, addresses and ports), in wrap's network namespace
    when given, as it was started. Returns once ready(proc) has returned
    (it raises if the new process does not come up); `server` then names
    the new process. The seconds it took."""
    started = time.monotonic()
    argv = _cmdline(server.pid)[:-1]  # /proc's cmdline ends each argument with a NUL
    if not argv or Path(argv[0]).resolve() != BRAID_BIN.resolve():
        raise RuntimeError(f"pid {server.pid} is not the Braid started ({argv})")
    os.kill(server.pid, signal.SIGKILL)
    if server.proc is not None:
        server.proc.wait(30)
    with open(server.log_path, "ab") as log:
        log.write(b"\n===== servers.py: SIGKILL and start again\n")
    proc = _spawn(wrap(argv) if wrap else argv, server.log_path, server.workdir)
    server.proc, server.pid = proc, proc.pid
    ready(proc)
    return time.monotonic() - started


def crash_and_restart_braid_nfs(server: NfsServer, wrap=None) -> float:
    """crash_and_restart_braid for a Braid start_braid_nfs started:
    returns once the new process answers an NFS NULL call."""
    return crash_and_restart_braid(
        server, lambda proc: _wait_for_nfs(server.host, server.port, proc, server.log_path,
                                           wrap), wrap)


def start_braid_smb_nfs(share_dir: Path, workdir: Path,
                        share: str = DEFAULT_SHARE,
                        share_options: str = "") -> tuple[Server, NfsServer]:
    """One Braid serving share_dir as share `share` over SMB and over
    NFSv4.1 (pseudo path /share, no root squash), each on a free loopback
    port: (the SMB side, the NFS side), one process; stop either.
    `share_options`: more TOML lines for the share's table."""
    if not BRAID_BIN.exists():
        raise RuntimeError(f"{BRAID_BIN} not found: run `cargo build --release -p braid`")
    port, nfs_port = free_port(), free_port()
    password = "Pw-" + secrets.token_hex(8)
    log_path = workdir / "braid.log"
    config = workdir / "braid-smb-nfs.toml"
    config.write_text(f'[[share]]\nname = {json.dumps(share)}\n'
                      f'path = {json.dumps(str(share_dir))}\n'
                      'protocols = ["smb", "nfs"]\nroot_squash = false\n'
                      + share_options)
    admin = f"127.0.0.1:{free_port()}"
    argv = [str(BRAID_BIN), "serve", "--config", str(config),
            "--listen", f"127.0.0.1:{port}", "--nfs-listen", f"127.0.0.1:{nfs_port}",
            "--user", f"{DEFAULT_USER}:{password}", "--admin-listen", admin]
    argv += os.environ.get("BRAID_EXTRA_ARGS", "").split()
    proc = _spawn(argv, log_path, workdir)
    wait_until_accepting("127.0.0.1", port, proc, log_path)
    _wait_for_nfs("127.0.0.1", nfs_port, proc, log_path)
    return (Server("braid", "127.0.0.1", port, share, DEFAULT_USER, password, share_dir,
                   workdir, proc.pid, log_path, proc, admin=admin),
            NfsServer("braid", "127.0.0.1", nfs_port, "/" + share, share_dir, workdir,
                      proc.pid, log_path, proc))


def start_nfs(target: str, export_dir: Path, workdir: Path, **kwargs) -> NfsServer:
    """The NFSv4.1 server under test: braid or ganesha."""
    if target == "braid":
        return start_braid_nfs(export_dir, workdir, **kwargs)
    if target == "ganesha":
        return start_ganesha(export_dir, workdir, **kwargs)
    raise ValueError(f"unknown NFS target {target!r} (expected braid or ganesha)")


def start(target: str, share_dir: Path, workdir: Path, **kwargs) -> Server:
    if target == "braid":
        return start_braid(share_dir, workdir, **kwargs)
    if target == "samba":
        return start_samba(share_dir, workdir, **kwargs)
    raise ValueError(f"unknown target {target!r} (expected braid or samba)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_start = sub.add_parser("start", help="start a server, print PID PORT SHARE USER PASSWORD")
    p_start.add_argument("--target", choices=["braid", "samba"], required=True)
    p_start.add_argument("--share-dir", type=Path, required=True)
    p_start.add_argument("--workdir", type=Path, required=True)
    p_start.add_argument("--port", type=int)
    p_start.add_argument("--share", default=DEFAULT_SHARE)
    p_start.add_argument("--user", default=DEFAULT_USER)
    p_start.add_argument("--password")
    p_nfs = sub.add_parser("start-nfs", help="start an NFSv4.1 server, print PID PORT /EXPORT")
    p_nfs.add_argument("--target", choices=["braid", "ganesha"], required=True)
    p_nfs.add_argument("--export-dir", type=Path, required=True)
    p_nfs.add_argument("--workdir", type=Path, required=True)
    p_nfs.add_argument("--port", type=int)
    p_nfs.add_argument("--export", default=DEFAULT_SHARE)
    p_stop = sub.add_parser("stop", help="stop a server (and its children) by PID")
    p_stop.add_argument("pid", type=int)
    p_cpu = sub.add_parser("cpu", help="print CPU seconds and process count of PID's tree")
    p_cpu.add_argument("pid", type=int)
    p_cpu.add_argument("--settle-to", type=int, metavar="N",
                       help="first wait (up to 5 s) until the tree has at most N processes")
    args = parser.parse_args()

    if args.cmd == "cpu":
        if args.settle_to is None:
            seconds, count = tree_cpu(args.pid)
        else:
            seconds, count = settled_tree_cpu(args.pid, args.settle_to)
        print(f"{seconds:.2f} {count}")
        return 0

    if args.cmd == "stop":
        stop_pid(args.pid)
        return 0
    if args.cmd == "start-nfs":
        args.export_dir.mkdir(parents=True, exist_ok=True)
        args.workdir.mkdir(parents=True, exist_ok=True)
        nfs = start_nfs(args.target, args.export_dir.resolve(), args.workdir.resolve(),
                        port=args.port, export=args.export)
        print(nfs.pid, nfs.port, nfs.export)
        return 0
    args.share_dir.mkdir(parents=True, exist_ok=True)
    args.workdir.mkdir(parents=True, exist_ok=True)
    server = start(args.target, args.share_dir.resolve(), args.workdir.resolve(),
                   port=args.port, share=args.share, user=args.user, password=args.password)
    print(server.pid, server.port, server.share, server.user, server.password)
    return 0


if __name__ == "__main__":
    sys.exit(main())
