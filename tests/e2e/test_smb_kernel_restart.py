"""An SMB persistent handle that survives a restart of Braid (issue 56),
seen by the Linux kernel's SMB3 client (cifs.ko, Debian's kernel in a VM:
kernel_vm.py).

Braid runs with a `state_dir` and a share "ca" with
`continuous_availability = true`, in a network namespace of the test's own
where the VM reaches it at 198.18.0.1 (as in test_kernel_client.py). ONE
boot mounts the share with `vers=3.1.1,persistenthandles,hard` and copies
8 MiB of known pseudo-random bytes (carried in the initramfs) into it
through a pipe from a slow reader (256 KiB every 0.15 s; dd writes with
O_DIRECT, and writes on a CA share are write-through, so the bytes reach
the export as they are copied and the host sees how far the copy got).
After a third of the file the reader stops (dd waits on the pipe, the
file open); once that much is in the export the host checks that the
open is persistent (admin API, /api/v1/opens), kills Braid with SIGKILL
(its PID only), as a crash would, and starts it again with the same
command line, config and state_dir (servers.crash_and_restart_braid).
The kernel reconnects by itself (new session, about 3 s later), takes
its open back with a DH2C (SMB2_CREATE_DURABLE_HANDLE_RECONNECT_V2), and
the reader goes on (why it stops for the kill: KILL_AT). Checks, each
printed `OK name` or `FAIL name detail` (one pytest test per check):

- the restarted Braid restored the open from its state store
  (braid_smb_opens_restored_total) and the client reconnected it
  (braid_smb_durable_reconnects_total rose from 0; the admin API shows one
  open of the file, persistent, on a session again, where a fresh open
  would leave the restored one waiting, disconnected, beside it);
- the guest's /proc/fs/cifs/open_files, sampled through the copy, shows
  the file under one persistent file id on two sessions (before and after
  the restart);
- the copy ends without an error, and the file has the source's SHA-256
  on the host in the export and in the guest after a remount.

At the end the guest prints its cifs kernel messages (`dmesg` lines).

The copy and the SHA-256s alone would not show it: checked by hand (a
local change of the config, not kept), Linux 6.1 falls back to a fresh
open when its DH2C is refused, and the copy still ends whole. Without
`state_dir` the restarted Braid has no open to restore: no reconnect,
the client opens copy.bin anew (another persistent file id, 0x5 then 0x1)
and braid_smb_opens_restored_total and braid_smb_durable_reconnects_total
stay 0 (host-restored, host-reconnected and same-persistent-fid fail).
Without `continuous_availability` Braid offers no persistent handles
(no share is CA) and the `persistenthandles` mount fails ("persistent
handles not supported by server", EOPNOTSUPP); mounted without that
option, the client's open is durable but not persistent, lost with the
process, and the same three checks (and host-persistent-open) fail.

Braid only: the test restarts the Braid it started, with Braid's config.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernel_vm
import servers

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")

pytestmark = [
    pytest.mark.skipif(TARGET != "braid",
                       reason="restarts the Braid it starts, with Braid's config: Braid only"),
    pytest.mark.skipif(kernel_vm.missing_tools() is not None,
                       reason=str(kernel_vm.missing_tools())),
]

SERVER = "198.18.0.1"
PORT = 4445
ADMIN = "127.0.0.1:9445"
SHARE = "ca"
USER = "braid"
VM_TIMEOUT = 300
SEED = 20261208
COPY_MIB = 8
CHUNK_KIB = 256
# The chunk before which the reader stops for the kill (a third of the
# copy in). The kill lands between two WRITEs, the last one received
# whole and perhaps not yet answered (the client sends it again after
# the reconnect): Linux 6.1 fails a WRITE whose send the kill cuts off
# with ECONNABORTED ("Error -32 sending data on socket to server"), to
# the application, not sent again, even on a `hard` mount (as it does
# one a cut channel interrupts: test_kernel_client.py), so a kill at an
# arbitrary moment fails the copy now and then, whatever the server does.
KILL_AT = (COPY_MIB << 10) // CHUNK_KIB // 3 + 1

# The guest's script (kernel_vm.NFS_HELPERS' ok/fail/pause first).
GUEST = r"""
M=/mnt
sum() {{ sha256sum < $1 | cut -d' ' -f1; }}
mnt() {{ mount -t cifs //{server}/{share} $M -o username={user},password={password},port={port},vers=3.1.1,persistenthandles,hard; }}
if mnt; then ok mount; else fail mount "exit $?"; dmesg | grep -i cifs | tail -n 20; exit 1; fi
grep -i "Mounts:\|Capabilities\|persistent" /proc/fs/cifs/DebugData | sed 's/^/debugdata /'

# --- a copy across a restart: a slow reader feeds dd, which writes with
# O_DIRECT. After {kill_at} chunks the reader stops at pause copy-kill
# (its marker on the console, fd 3, not into the pipe) while the host
# kills Braid once they are all in the export: no WRITE is then being
# sent (one cut mid-send fails with ECONNABORTED: see KILL_AT). Each chunk
# the reader also notes the client's open files (tree id, session id,
# persistent file id, ...) ---
exec 3>&1
( i=0; while [ $i -lt {chunks} ]; do
      [ $i = {kill_at} ] && pause copy-kill >&3
      dd if=/copy.bin bs={chunk}k skip=$i count=1 2>/dev/null
      grep copy.bin /proc/fs/cifs/open_files >> /tmp/open_files; sleep 0.15; i=$((i+1))
  done | dd of=$M/copy.bin bs={chunk}k iflag=fullblock oflag=direct 2>/tmp/copy.err
  echo $? > /tmp/copy.rc ) &
copier=$!
wait $copier
[ "$(cat /tmp/copy.rc)" = 0 ] && ok copy-done || fail copy-done "dd exit $(cat /tmp/copy.rc): $(cat /tmp/copy.err)"
sort -u /tmp/open_files | sed 's/^/open_files /'
fids=$(awk '{{print $3}}' /tmp/open_files | sort -u | tr '\n' ' ')
sessions=$(awk '{{print $2}}' /tmp/open_files | sort -u | tr '\n' ' ')
[ $(echo $fids | wc -w) = 1 ] && ok same-persistent-fid || fail same-persistent-fid "persistent file ids: $fids"
[ $(echo $sessions | wc -w) = 2 ] && ok two-sessions || fail two-sessions "session ids: $sessions"
pause copy-host
umount $M && ok umount || fail umount "exit $?"
if mnt; then ok remount; else fail remount "exit $?"; fi
echo 3 > /proc/sys/vm/drop_caches
want=$(sum /copy.bin); got=$(sum $M/copy.bin)
[ "$want" = "$got" ] && ok copy-read-back || fail copy-read-back "sha256 $got, copied $want ($(stat -c %s $M/copy.bin) bytes)"
umount $M
dmesg | grep -i cifs | tail -n 40 | sed 's/^/dmesg /'
echo "@@ checks-done"
"""

CHECKS = ["mount", "copy-done", "same-persistent-fid", "two-sessions", "umount", "remount",
          "copy-read-back"]
# What the host checks at the guest's pauses.
HOST_CHECKS = ["host-copy-mid", "host-persistent-open", "host-copy-restart", "host-restored",
               "host-reconnected", "host-copy-bytes"]


def ns_get(ns: kernel_vm.NetNs, path: str) -> str:
    """GET the admin API inside the namespace (it listens on its loopback)."""
    return ns.run(["python3", "-c",
                   "import sys, urllib.request; "
                   "print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())",
                   f"http://{ADMIN}{path}"], timeout=30).stdout


def metric(ns: kernel_vm.NetNs, name: str) -> float:
    for line in ns_get(ns, "/metrics").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def copy_opens(ns: kernel_vm.NetNs) -> list[dict]:
    return [o for o in json.loads(ns_get(ns, "/api/v1/opens"))["opens"]
            if o["share"] == SHARE and o["path"] == "copy.bin"]


def wait_ready(ns: kernel_vm.NetNs, proc: subprocess.Popen, log: Path) -> None:
    """Until Braid accepts SMB connections on SERVER:PORT and answers on
    its admin port (both inside the namespace)."""
    deadline = time.monotonic() + servers.START_TIMEOUT
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"braid exited {proc.returncode}:\n"
                               + log.read_text(errors="replace")[-3000:])
        try:
            ns.run([sys.executable, "-c", "import socket, sys; "
                    "socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()",
                    SERVER, str(PORT)], timeout=10)
            ns_get(ns, "/api/v1/sessions")
            return
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            if time.monotonic() > deadline:
                raise RuntimeError(f"braid did not come up on {SERVER}:{PORT} in the namespace")
            time.sleep(0.1)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "(missing)"


@pytest.fixture(scope="module")
def restart_vm(tmp_path_factory):
    """Boot once; returns ({check: (ok, detail)}, console lines, base)."""
    kernel = kernel_vm.prepare()
    base = tmp_path_factory.mktemp("smb-kernel-restart-")
    export_dir, workdir, state_dir = base / "export", base / "server", base / "state"
    export_dir.mkdir()
    workdir.mkdir()
    state_dir.mkdir(mode=0o700)
    copy_data = random.Random(SEED).randbytes(COPY_MIB << 20)
    (base / "copy.bin").write_bytes(copy_data)
    password = "Pw-" + secrets.token_hex(8)
    config = workdir / "braid.toml"
    config.write_text(f'listen = ["{SERVER}:{PORT}"]\nadmin_listen = "{ADMIN}"\n'
                      f"state_dir = {json.dumps(str(state_dir))}\n"
                      f'[[share]]\nname = "{SHARE}"\npath = {json.dumps(str(export_dir))}\n'
                      "continuous_availability = true\n")
    script = GUEST.format(server=SERVER, share=SHARE, user=USER, password=password, port=PORT,
                          chunks=(COPY_MIB << 10) // CHUNK_KIB, chunk=CHUNK_KIB,
                          kill_at=KILL_AT)

    host: dict[str, tuple[bool, str]] = {}
    ns = kernel_vm.NetNs([SERVER])
    server = None
    lines: list[str] = []
    try:
        log = workdir / "braid.log"
        proc = servers._spawn(ns.argv([str(servers.BRAID_BIN), "serve", "--config", str(config),
                                       "--user", f"{USER}:{password}", "--log",
                                       os.environ.get("BRAID_KERNEL_TEST_LOG", "info")]),
                              log, workdir)
        server = servers.Server("braid", SERVER, PORT, SHARE, USER, password, export_dir,
                                workdir, proc.pid, log, proc, admin=ADMIN)
        wait_ready(ns, proc, log)

        def copy_kill() -> None:
            """Once the chunks fed before the pause are in the export (a
            third of the copy) and the open is persistent: kill Braid,
            start it again, and wait for the client to reconnect its open."""
            copy, total, fed = export_dir / "copy.bin", COPY_MIB << 20, KILL_AT * CHUNK_KIB << 10
            deadline = time.monotonic() + 60
            size = 0
            while time.monotonic() < deadline:
                size = copy.stat().st_size if copy.exists() else 0
                if size >= fed:
                    break
                time.sleep(0.02)
            opens = copy_opens(ns)
            mid = total // 3 <= size == fed < total
            host["host-copy-mid"] = (mid, f"{size} of {total} bytes in the export at the kill "
                                     f"({fed} fed before the pause)")
            host["host-persistent-open"] = (
                len(opens) == 1 and opens[0]["persistent"] and not opens[0]["disconnected"],
                "the opens of copy.bin before the kill: " + json.dumps(opens))
            if not mid:
                return
            took = servers.crash_and_restart_braid(
                server, lambda p: wait_ready(ns, p, log), wrap=ns.argv)
            restarted = time.monotonic()
            host["host-copy-restart"] = (True, f"SIGKILL at {size} of {total} bytes and a new "
                                         f"Braid answering in {took:.2f} s")
            restored = metric(ns, "braid_smb_opens_restored_total")
            host["host-restored"] = (restored >= 1, f"braid_smb_opens_restored_total "
                                     f"{restored:g} after the restart; opens of copy.bin: "
                                     + json.dumps(copy_opens(ns)))
            # The client reconnects on its own (its next attempt, up to a
            # few seconds after the restart) and reopens its persistent
            # handle while the copy goes on.
            deadline = restarted + 60
            while True:
                reconnects = metric(ns, "braid_smb_durable_reconnects_total")
                opens = copy_opens(ns)
                good = (reconnects >= 1 and len(opens) == 1 and opens[0]["persistent"]
                        and not opens[0]["disconnected"] and opens[0]["session_id"] is not None)
                if good or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            host["host-reconnected"] = (good, f"braid_smb_durable_reconnects_total "
                                        f"{reconnects:g} {time.monotonic() - restarted:.1f} s "
                                        "after the restart; "
                                        "opens of copy.bin: " + json.dumps(opens))

        def at_pause(name: str) -> None:
            if name == "copy-kill":
                copy_kill()
            elif name == "copy-host":
                got = sha256(export_dir / "copy.bin")
                want = hashlib.sha256(copy_data).hexdigest()
                host["host-copy-bytes"] = (got == want, f"sha256 in the export {got}, "
                                           f"copied {want}")

        lines = kernel_vm.run_nfs_script(kernel, ns, script, base, VM_TIMEOUT,
                                         files={"/copy.bin": base / "copy.bin"},
                                         at_pause=at_pause, modules=("cifs",))
        if server.alive() is False:
            pytest.fail(f"braid died during the VM run; log tail:\n{server.log_tail()}")
    finally:
        if server is not None:
            server.stop()
        ns.close()
    (base / "console.log").write_text("\n".join(lines) + "\n")
    results = kernel_vm.results_of(lines, host)
    (base / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return results, lines, base


def test_vm_finished(restart_vm):
    results, lines, _ = restart_vm
    problem = kernel_vm.finished_problem(results, lines, CHECKS + HOST_CHECKS)
    assert problem is None, problem


@pytest.mark.parametrize("check", CHECKS + HOST_CHECKS)
def test_smb_kernel_restart(restart_vm, check):
    problem = kernel_vm.check_problem(*restart_vm, check)
    assert problem is None, problem
