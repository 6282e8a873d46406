"""NFS state that survives a restart of Braid (issue 56), seen by the Linux
kernel's NFSv4.1 client (nfsv4.ko, Debian's kernel in a VM: kernel_vm.py).

Braid runs with a `state_dir`, a 10 s lease and a 20 s grace time, in a
network namespace of the test's own where the VM reaches it at 198.18.0.1
(as in test_nfs_kernel.py). Twice the host kills it with SIGKILL (its PID
only), as a crash would, and starts it again with the same command line,
config and state_dir on the same address and port
(servers.crash_and_restart_braid_nfs). ONE boot mounts the export
(`vers=4.1,nconnect=4`) and checks, each check printing `OK name` or
`FAIL name detail` (one pytest test per check):

- a copy across a restart: the guest copies 8 MiB of known pseudo-random
  bytes (carried in the initramfs) into the mount through a pipe from a
  slow reader (256 KiB every 0.15 s; dd writes with O_DIRECT, so the bytes
  reach the server as they are copied and the host sees how far the copy
  got). The host kills Braid once a third of the file is in the export
  (checking that the copy had not ended) and starts it again; the kernel
  reconnects, reclaims its open and sends again what the dead process did
  not answer; the copy ends without an error and the file, read back by
  the guest after dropping its page cache and on the host in the export
  directory, has the source's SHA-256;
- a lock across a restart: a second NFS client (pynfs's client library,
  nfs_lock_client.py, as test_nfs_smb_locks.py runs it) opens a file, so
  that the kernel gets no delegation of it; a guest process takes an fcntl
  write lock on the whole file, writes 1 MiB of known bytes with fsync and
  keeps the lock, which the server holds (admin API; the second client's
  LOCKT is DENIED). Braid is killed and started again. The kernel reclaims
  its open (CLAIM_PREVIOUS) and its lock (LOCK with reclaim) and sends
  RECLAIM_COMPLETE; the guest process writes 256 KiB more under its lock
  with fsync (a client whose lock was not reclaimed marks it lost and
  fails that I/O with EIO). While the grace period lasts (it waits for
  the second client, recorded before the restart, which never comes back)
  the admin API shows the kernel's client holding a lock again, and a new
  client's OPEN is refused with NFS4ERR_GRACE. Once it is over, F_GETLK
  from another guest process reports the lock, a new second client
  testing for a conflicting lock and asking for one is DENIED, and the
  export holds both parts' bytes; when the guest process has unlocked,
  that client gets its lock; the guest reads the whole file back after
  dropping its page cache;
- the same at the same restart with a lock held under a write delegation:
  another guest process locks a file nobody else has open, so the kernel
  holds a write delegation of it and keeps the lock to itself (the admin
  API shows one of its two locks at the server). At the reclaim the kernel
  asks for the delegation back (CLAIM_PREVIOUS, delegate_type WRITE); RFC
  8881 10.2.1 has the server grant it (recalled at once if it wants it
  back), and the kernel then sends its locks. A server that grants none
  leaves Linux's client treating the open as delegated: it never sends
  the lock (no LOCK in the `trace` lines). After the grace period a second
  client asking for a conflicting lock on that file must be DENIED.

The copy runs first, while the kernel is the only client Braid recorded:
that restart's grace period ends at its RECLAIM_COMPLETE.

At the end the guest prints the kernel client's nfs4 tracepoints (`trace`
lines in the console log: EXCHANGE_ID, CREATE_SESSION, the reclaims,
RECLAIM_COMPLETE, every error status it got), how it recovered.

Checked by hand to fail without what it tests: with the state store's NFS
client records removed before each restart (no grace period), the
kernel's reclaims get NFS4ERR_NO_GRACE, it opens the file anew and marks
its lock lost: the guest's write after the restart fails with EIO, the
second client's OPEN is not refused in grace and its LOCK and LOCKT are
granted (the copy still ends whole: the kernel opens the file anew with
its file handle). Without `state_dir` the file handles go stale
(NFS4ERR_BADHANDLE): the copy fails with EIO and the mount is lost.

Braid only: the test restarts the Braid it started, with Braid's config.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernel_vm
from nfs_locker import NfsLocker
import servers

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance"))
import run_pynfs  # noqa: E402

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")

pytestmark = [
    pytest.mark.skipif(TARGET != "braid",
                       reason="restarts the Braid it starts, with Braid's config: Braid only"),
    pytest.mark.skipif(kernel_vm.missing_tools() is not None,
                       reason=str(kernel_vm.missing_tools())),
]

SERVER = "198.18.0.1"
PORT = 20490
EXPORT = "share"
VM_TIMEOUT = 300
SEED = 20261207
LEASE = 10
GRACE = 20
COPY_MIB = 8
CHUNK_KIB = 256
LOCK_FIRST = 1 << 20    # bytes the lock holder writes before the restart
LOCK_SECOND = 256 << 10  # and after it

# The guest's lock holder and lock tester (static: the initramfs has no C
# library). Each step prints `OK name` or `FAIL name detail`.
RESTARTTOOL_C = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failed;
static const char *prefix = "";
static void result(const char *name, int good, const char *detail) {
    if (good) printf("OK %s%s\n", prefix, name);
    else { printf("FAIL %s%s %s (errno %d %s)\n", prefix, name, detail, errno, strerror(errno)); failed = 1; }
    fflush(stdout);
}
static void touch(const char *path) { close(open(path, O_WRONLY | O_CREAT, 0644)); }
static int wait_for(const char *path) {
    for (int i = 0; i < 6000; i++) { if (access(path, F_OK) == 0) return 1; usleep(50000); }
    return 0;
}
/* All of `len` bytes of `buf` at `off`. */
static int put(int fd, const char *buf, size_t len, off_t off) {
    while (len > 0) {
        ssize_t n = pwrite(fd, buf, len, off);
        if (n <= 0) return 0;
        buf += n; len -= n; off += n;
    }
    return 1;
}

int main(int argc, char **argv) {
    /* hold NAME FILE DATA SPLIT DIR: lock FILE (write, whole file), write
       DATA's first SPLIT bytes with fsync, touch DIR/locked; at DIR/go
       write the rest with fsync, touch DIR/wrote; at DIR/release unlock.
       Its results are NAME-lock, NAME-write-before, NAME-write-after and
       NAME-unlock. */
    if (argc == 7 && !strcmp(argv[1], "hold")) {
        static char name[64];
        snprintf(name, sizeof name, "%s-", argv[2]);
        prefix = name;
        argv++;
        const char *dir = argv[5];
        char path[512];
        long split = atol(argv[4]);
        int in = open(argv[3], O_RDONLY);
        struct stat st;
        if (in < 0 || fstat(in, &st) != 0) { result("lock", 0, argv[3]); return 2; }
        char *data = malloc(st.st_size);
        if (!data || read(in, data, st.st_size) != st.st_size) { result("lock", 0, "read"); return 2; }
        int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { result("lock", 0, argv[2]); return 2; }
        struct flock fl;
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        int locked = fcntl(fd, F_SETLKW, &fl) == 0;
        result("lock", locked, "F_SETLKW");
        if (!locked) return 2;
        result("write-before", put(fd, data, split, 0) && fsync(fd) == 0, "pwrite/fsync");
        snprintf(path, sizeof path, "%s/locked", dir);
        touch(path);
        snprintf(path, sizeof path, "%s/go", dir);
        if (!wait_for(path)) { result("write-after", 0, "never told to go on"); return 2; }
        result("write-after", put(fd, data + split, st.st_size - split, split) && fsync(fd) == 0,
               "pwrite/fsync under the lock after the restart");
        snprintf(path, sizeof path, "%s/wrote", dir);
        touch(path);
        snprintf(path, sizeof path, "%s/release", dir);
        if (!wait_for(path)) { result("unlock", 0, "never told to unlock"); return 2; }
        fl.l_type = F_UNLCK;
        result("unlock", fcntl(fd, F_SETLK, &fl) == 0 && close(fd) == 0, "F_UNLCK/close");
        return failed;
    }
    /* getlk FILE: what F_GETLK says of a write lock on the whole file. */
    if (argc == 3 && !strcmp(argv[1], "getlk")) {
        int fd = open(argv[2], O_RDWR);
        struct flock fl;
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        if (fd < 0 || fcntl(fd, F_GETLK, &fl) != 0) { perror("F_GETLK"); return 2; }
        if (fl.l_type == F_UNLCK) printf("unlocked\n");
        else printf("locked %s %lld %lld\n", fl.l_type == F_WRLCK ? "w" : "r",
                    (long long)fl.l_start, (long long)fl.l_len);
        return 0;
    }
    fprintf(stderr, "usage: restarttool hold NAME FILE DATA SPLIT DIR | getlk FILE\n");
    return 2;
}
"""

# The kernel client's tracepoints the guest prints at the end: how it
# recovered its state after each restart.
TRACE_EVENTS = ("nfs4_state_mgr", "nfs4_state_mgr_failed", "nfs4_exchange_id",
                "nfs4_create_session", "nfs4_reclaim_complete", "nfs4_open_reclaim",
                "nfs4_open_expired", "nfs4_state_lock_reclaim", "nfs4_set_lock",
                "nfs4_unlock", "nfs4_get_lock", "nfs4_set_delegation",
                "nfs4_reclaim_delegation", "nfs4_delegreturn", "nfs4_delegreturn_exit",
                "nfs4_cb_recall", "nfs4_xdr_status")

# The guest's script (kernel_vm.NFS_HELPERS' ok/fail/pause first).
GUEST = r"""
M=/mnt
rt=/bin/restarttool
# await FILE [SECONDS]: wait (60 s by default) for FILE to appear.
await() {{ i=0; n=$((${{2:-60}} * 10)); while [ ! -e $1 ] && [ $i -lt $n ]; do sleep 0.1; i=$((i+1)); done; [ -e $1 ]; }}
sum() {{ sha256sum < $1 | cut -d' ' -f1; }}
# The client's state recovery, printed at the end (`trace ...` lines).
T=/sys/kernel/tracing
mount -t tracefs nodev $T && for e in {trace_events}; do echo 1 > $T/events/nfs4/$e/enable; done

if {mount}; then ok mount; else fail mount "exit $?"; dmesg | tail -n 20; exit 1; fi

# --- a copy across a restart: a slow reader feeds dd, which writes with
# O_DIRECT; the host kills Braid at pause copy-kill, once a third is in ---
( i=0; while [ $i -lt {chunks} ]; do
      dd if=/copy.bin bs={chunk}k skip=$i count=1 2>/dev/null; sleep 0.15; i=$((i+1))
  done | dd of=$M/copy.bin bs={chunk}k iflag=fullblock oflag=direct 2>/tmp/copy.err
  echo $? > /tmp/copy.rc ) &
copier=$!
pause copy-kill
wait $copier
[ "$(cat /tmp/copy.rc)" = 0 ] && ok copy-done || fail copy-done "dd exit $(cat /tmp/copy.rc): $(cat /tmp/copy.err)"
echo 3 > /proc/sys/vm/drop_caches
want=$(sum /copy.bin); got=$(sum $M/copy.bin)
[ "$want" = "$got" ] && ok copy-read-back || fail copy-read-back "sha256 $got, copied $want ($(stat -c %s $M/copy.bin) bytes)"
pause copy-host

# --- a lock across a restart, two of them: on locked.bin, which the host's
# second client has had open since pause copy-host (so this client has no
# delegation of it and its lock is held at the server), and on deleg.bin,
# which nobody else has open (this client holds a write delegation of it,
# and its lock under the delegation only) ---
mkdir -p /tmp/h /tmp/d
$rt hold hold $M/locked.bin /lock.bin {split} /tmp/h & holder=$!
$rt hold deleg $M/deleg.bin /lock.bin {split} /tmp/d & dholder=$!
if await /tmp/h/locked && await /tmp/d/locked; then
    pause lock-kill
    t0=$(date +%s)
    touch /tmp/h/go /tmp/d/go
    await /tmp/h/wrote 120 || {{ fail hold-write-after "no answer in 120 s"; kill -9 $holder; }}
    await /tmp/d/wrote 120 || {{ fail deleg-write-after "no answer in 120 s"; kill -9 $dholder; }}
    echo "the writes after the restart took $(($(date +%s) - t0)) s"
    # The host's checks come first: this client's OPEN of deleg.bin now
    # would get it a new delegation, whose recall by the host's client
    # would send the lock.
    pause lock-grace
    got=$($rt getlk $M/locked.bin)
    [ "$got" = "locked w 0 0" ] && ok getlk-after || fail getlk-after "'$got'"
    got=$($rt getlk $M/deleg.bin)
    [ "$got" = "locked w 0 0" ] && ok deleg-getlk-after || fail deleg-getlk-after "'$got'"
    touch /tmp/h/release /tmp/d/release
    wait $holder && ok holder-exit || fail holder-exit "exit $?"
    wait $dholder && ok deleg-holder-exit || fail deleg-holder-exit "exit $?"
    pause lock-released
    echo 3 > /proc/sys/vm/drop_caches
    want=$(sum /lock.bin)
    got=$(sum $M/locked.bin)
    [ "$want" = "$got" ] && ok lock-read-back || fail lock-read-back "sha256 $got, wrote $want ($(stat -c %s $M/locked.bin) bytes)"
    got=$(sum $M/deleg.bin)
    [ "$want" = "$got" ] && ok deleg-read-back || fail deleg-read-back "sha256 $got, wrote $want ($(stat -c %s $M/deleg.bin) bytes)"
else
    fail hold-lock "the holders never got their locks"; kill $holder $dholder
fi
umount $M && ok umount || fail umount "exit $?"
grep -v '^#' $T/trace | tail -n 300 | sed 's/^ */trace /'
echo "@@ checks-done"
"""

CHECKS = ["mount", "copy-done", "copy-read-back",
          "hold-lock", "hold-write-before", "hold-write-after", "getlk-after", "holder-exit",
          "hold-unlock", "lock-read-back",
          "deleg-lock", "deleg-write-before", "deleg-write-after", "deleg-getlk-after",
          "deleg-holder-exit", "deleg-unlock", "deleg-read-back", "umount"]
# What the host checks at the guest's pauses.
HOST_CHECKS = ["host-copy-mid", "host-copy-restart", "host-copy-bytes",
               "host-lock-open", "host-lock-at-server", "host-lock-restart",
               "host-reclaimed", "host-grace-refused", "host-grace-over",
               "host-lock-test-denied", "host-lock-denied", "host-lock-bytes",
               "host-lock-free",
               "host-deleg-lock-local", "host-deleg-lock-test-denied", "host-deleg-lock-denied",
               "host-deleg-lock-free"]


def admin_view(ns: kernel_vm.NetNs, log: Path) -> dict:
    """/api/v1/sessions of the Braid in the namespace (its admin port is in
    its log: `braid: admin API on http://ADDR/`, the last start's last)."""
    found = re.findall(r"admin API on http://([0-9.:]+)/", log.read_text(errors="replace"))
    if not found:
        raise RuntimeError(f"no admin address in {log}")
    out = ns.run(["python3", "-c",
                  "import sys, urllib.request; "
                  "print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())",
                  f"http://{found[-1]}/api/v1/sessions"], timeout=30)
    return json.loads(out.stdout)


def kernel_clients(view: dict) -> list[dict]:
    """The NFS client records of the admin view but the second client's."""
    return [c for c in view.get("nfs_clients") or []
            if not c.get("owner", "").startswith("braid-lock")]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "(missing)"


def Locker(ns: kernel_vm.NetNs, tree: Path, name: str) -> NfsLocker:
    """A second NFS client in the namespace (nfs_locker.py)."""
    return NfsLocker(SERVER, PORT, [EXPORT], tree, name, wrap=ns.argv)


def wait_for_grace_end(ns: kernel_vm.NetNs, server, restarted: float) -> tuple[bool, str]:
    """Until Braid's grace period is over (admin API): (over within the
    grace time and its extensions, detail)."""
    longest = GRACE + LEASE + 10
    while True:
        grace = admin_view(ns, server.log_path).get("nfs_grace") or {}
        took = time.monotonic() - restarted
        if not grace.get("active"):
            return True, f"grace over {took:.1f} s after the restart (grace time {GRACE} s)"
        if took > longest:
            return False, f"still in grace {took:.0f} s after the restart: {grace}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def restart_vm(tmp_path_factory):
    """Boot once; returns ({check: (ok, detail)}, console lines, base)."""
    kernel = kernel_vm.prepare()
    source = run_pynfs.find_pynfs()
    if source is None:
        pytest.fail("pynfs not found (../shared/pynfs or $BRAID_PYNFS)")
    tree = run_pynfs.build_pynfs(source, io.StringIO())
    base = tmp_path_factory.mktemp("nfs-kernel-restart-")
    export_dir, workdir, state_dir = base / "export", base / "server", base / "state"
    export_dir.mkdir()
    workdir.mkdir()
    state_dir.mkdir(mode=0o700)
    rng = random.Random(SEED)
    copy_data = rng.randbytes(COPY_MIB << 20)
    lock_data = rng.randbytes(LOCK_FIRST + LOCK_SECOND)
    (base / "copy.bin").write_bytes(copy_data)
    (base / "lock.bin").write_bytes(lock_data)
    tool_src, tool = base / "restarttool.c", base / "restarttool"
    tool_src.write_text(RESTARTTOOL_C)
    subprocess.run(["cc", "-static", "-O2", "-o", str(tool), str(tool_src)], check=True,
                   capture_output=True, timeout=120)
    files = {"/copy.bin": base / "copy.bin", "/lock.bin": base / "lock.bin",
             "/bin/restarttool": tool}
    script = GUEST.format(mount=kernel_vm.nfs_mount_command(SERVER, PORT, "/" + EXPORT),
                          chunks=(COPY_MIB << 10) // CHUNK_KIB, chunk=CHUNK_KIB,
                          split=LOCK_FIRST, trace_events=" ".join(TRACE_EVENTS))
    top_config = (f'state_dir = "{state_dir}"\n'
                  f"nfs_lease_time_secs = {LEASE}\nnfs_grace_time_secs = {GRACE}\n")

    host: dict[str, tuple[bool, str]] = {}
    ns = kernel_vm.NetNs([SERVER])
    server = None
    locker: Locker | None = None   # the second client, after the restart
    dlocker: Locker | None = None  # the same on deleg.bin
    blocker: Locker | None = None  # the second client before the restart
    restarted = 0.0
    try:
        server = servers.start_braid_nfs(export_dir, workdir, port=PORT, export=EXPORT,
                                         host=SERVER, wrap=ns.argv, top_config=top_config)

        def restart(name: str) -> None:
            nonlocal restarted
            took = servers.crash_and_restart_braid_nfs(server, wrap=ns.argv)
            restarted = time.monotonic()
            host[name] = (True, f"SIGKILL and a new Braid answering in {took:.2f} s")

        def copy_kill() -> None:
            """Kill Braid once a third of the copy is in the export."""
            copy, total = export_dir / "copy.bin", COPY_MIB << 20
            deadline = time.monotonic() + 60
            size = 0
            while time.monotonic() < deadline:
                size = copy.stat().st_size if copy.exists() else 0
                if size >= total // 3:
                    break
                time.sleep(0.02)
            mid = total // 3 <= size < total
            host["host-copy-mid"] = (mid, f"{size} of {total} bytes in the export at the kill")
            if not mid:
                return
            restart("host-copy-restart")
            (workdir / "copy-kill.txt").write_text(f"killed at {size} of {total} bytes\n")

        def lock_kill() -> None:
            """The guest's lock is held at the server: the second client
            (whose open kept the kernel from a delegation) is refused it;
            then Braid is killed and started again."""
            view = admin_view(ns, server.log_path)
            clients = kernel_clients(view)
            held = len(clients) == 1 and clients[0].get("locks", 0) >= 1
            host["host-lock-at-server"] = (held, "the kernel's clients before the kill: "
                                           + json.dumps(clients))
            # Of its two locks, the server holds one: deleg.bin's is under
            # the kernel's write delegation.
            local = (len(clients) == 1 and clients[0].get("locks") == 1
                     and clients[0].get("delegations", 0) >= 1)
            host["host-deleg-lock-local"] = (local, "the kernel's clients before the kill: "
                                             + json.dumps(clients))
            if blocker is not None and blocker.opened == "OPEN":
                got = blocker(f"test 0 {len(lock_data)} w")
                if got != "DENIED":
                    host["host-lock-at-server"] = (False, f"LOCKT before the kill: {got}")
            restart("host-lock-restart")

        def lock_grace() -> None:
            """After the restart, while the grace period lasts: the kernel
            reclaimed (its client holds a lock again and sent
            RECLAIM_COMPLETE; only the second client's record, which never
            comes back, is waited for); a new client's OPEN is refused
            with NFS4ERR_GRACE. After it: conflicting locks are DENIED."""
            nonlocal locker, dlocker
            view = admin_view(ns, server.log_path)
            clients, grace = kernel_clients(view), view.get("nfs_grace") or {}
            reclaimed = (grace.get("active") is True and grace.get("clients_to_reclaim") == 1
                         and len(clients) == 1 and clients[0].get("reclaim_complete") is True
                         and clients[0].get("locks", 0) >= 1)
            host["host-reclaimed"] = (reclaimed, f"grace {grace}, the kernel's clients: "
                                      + json.dumps(clients))
            early = Locker(ns, tree, "locked.bin")
            early.close()
            host["host-grace-refused"] = (early.opened == "NFS4ERR_GRACE",
                                          f"a new client's OPEN in the grace period: "
                                          f"{early.opened}")
            host["host-grace-over"] = wait_for_grace_end(ns, server, restarted)
            locker = Locker(ns, tree, "locked.bin")
            if locker.opened != "OPEN":
                host["host-lock-denied"] = (False, f"the second client's OPEN: {locker.opened}")
                return
            got = locker(f"test 0 {len(lock_data)} w")
            host["host-lock-test-denied"] = (got == "DENIED", f"LOCKT (write): {got}")
            got = locker("lock 0 1 w")
            host["host-lock-denied"] = (got == "DENIED", f"LOCK 0-1 (write): {got}")
            got = sha256(export_dir / "locked.bin")
            want = hashlib.sha256(lock_data).hexdigest()
            host["host-lock-bytes"] = (got == want, f"sha256 in the export {got}, "
                                       f"written {want}")
            # deleg.bin: the kernel held its lock under a write delegation;
            # whether the restarted Braid gave the delegation back at the
            # reclaim (RFC 8881 10.2.1: granted, and recalled at once if it
            # wants it back) or not, the lock must be held at the server
            # now.
            dlocker = Locker(ns, tree, "deleg.bin")
            if dlocker.opened != "OPEN":
                host["host-deleg-lock-denied"] = (False, f"the second client's OPEN: "
                                                  f"{dlocker.opened}")
                return
            got = dlocker(f"test 0 {len(lock_data)} w")
            host["host-deleg-lock-test-denied"] = (got == "DENIED", f"LOCKT (write): {got}")
            got = dlocker("lock 0 1 w")
            host["host-deleg-lock-denied"] = (got == "DENIED", f"LOCK 0-1 (write): {got}")

        def at_pause(name: str) -> None:
            nonlocal locker, blocker
            if name == "copy-kill":
                copy_kill()
            elif name == "copy-host":
                got = sha256(export_dir / "copy.bin")
                want = hashlib.sha256(copy_data).hexdigest()
                host["host-copy-bytes"] = (got == want, f"sha256 in the export {got}, "
                                           f"copied {want}")
                # The second client opens the lock check's file first.
                (export_dir / "locked.bin").write_bytes(b"")
                blocker = Locker(ns, tree, "locked.bin")
                host["host-lock-open"] = (blocker.opened == "OPEN",
                                          f"the second client's OPEN: {blocker.opened}")
            elif name == "lock-kill":
                lock_kill()
                if blocker is not None:
                    blocker.close()
            elif name == "lock-grace":
                lock_grace()
            elif name == "lock-released":
                for check, helper in (("host-lock-free", locker),
                                      ("host-deleg-lock-free", dlocker)):
                    if helper is None or helper.opened != "OPEN":
                        host[check] = (False, "no second client")
                        continue
                    got = helper("lock 0 1 w")
                    host[check] = (got == "OK", f"LOCK 0-1 (write) once the guest "
                                   f"unlocked: {got}")
                    helper.close()

        lines = kernel_vm.run_nfs_script(kernel, ns, script, base, VM_TIMEOUT, files=files,
                                         at_pause=at_pause)
        if server.alive() is False:
            pytest.fail(f"braid died during the VM run; log tail:\n{server.log_tail()}")
    finally:
        for helper in (locker, dlocker, blocker):
            if helper is not None:
                helper.close()
        if server is not None:
            server.stop()
        ns.close()
    (base / "console.log").write_text("\n".join(lines) + "\n")
    results = kernel_vm.results_of(lines, host)
    return results, lines, base


def test_vm_finished(restart_vm):
    results, lines, _ = restart_vm
    problem = kernel_vm.finished_problem(results, lines, CHECKS + HOST_CHECKS)
    assert problem is None, problem


@pytest.mark.parametrize("check", CHECKS + HOST_CHECKS)
def test_nfs_kernel_restart(restart_vm, check):
    problem = kernel_vm.check_problem(*restart_vm, check)
    assert problem is None, problem
