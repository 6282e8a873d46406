"""The Linux kernel's NFSv4.1 client (nfsv4.ko, Debian's kernel in a VM:
kernel_vm.py) against the NFS server under test.

BRAID_E2E_TARGET picks the server: braid (default; `braid serve --share
share=DIR --nfs-listen ...`, the share at the pseudo path /share) or
ganesha (nfs-ganesha 4.3, NFSv4.1 only, the reference this test is checked
against). It runs in a network namespace of the test's own, where the VM's
tap device reaches it at 198.18.0.1 (as in test_kernel_client.py).

ONE boot (boots are slow) mounts the export with
`vers=4.1,nconnect=4,port=N` and checks, each check printing `OK name` or
`FAIL name detail` (one pytest test per check):
- 8 MiB of known pseudo-random bytes (carried in the initramfs) written
  with dd and read back after dropping the page cache; the host sees the
  same bytes in the export directory;
- create, rename, hard link, symlink (readlink gives the target), a
  directory of 2000 entries listed (and counted on the host), delete;
- flock(2) and fcntl(2) locks between two processes of the client (a small
  static C tool, built here with cc: busybox has no flock);
- nconnect: 4 `xprt: tcp` lines in /proc/self/mountstats, each having
  carried RPCs, and 4 established TCP connections seen by the server
  (`ss -tn` in the namespace);
- NFSv4.2 (against Braid): a vers=4.2 mount, and on it fallocate(2)
  (ALLOCATE), a punched hole (DEALLOCATE), SEEK_DATA/SEEK_HOLE (SEEK),
  copy_file_range(2) (COPY: the bytes read back equal, and the client's
  per-operation counts in /proc/self/mountstats show the server did the
  copy) and user xattrs (SETXATTR, GETXATTR, LISTXATTRS, REMOVEXATTR; the
  host sees the attribute as user.NAME); a small static C tool does the
  system calls busybox has no command for. nfs-ganesha's private config
  serves 4.1 only, so against it the 4.2 mount must fail cleanly;
- a write delegation (against Braid): while the guest holds a file open
  for writing with bytes it has not sent, its client holds a delegation
  (admin API); a second NFS client's OPEN (pynfs's client library,
  nfs_open_read.py) gets NFS4ERR_DELAY until the kernel, recalled, has
  written back and returned it, then reads the kernel's bytes;
- a vers=4.0 mount fails cleanly (mount exits non-zero within a minute,
  nothing is mounted) and a 4.1 mount works again after it.
"""

from __future__ import annotations

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
import servers

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance"))
import run_pynfs  # noqa: E402

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")

pytestmark = [
    pytest.mark.skipif(TARGET not in ("braid", "ganesha"),
                       reason=f"no NFS server for BRAID_E2E_TARGET={TARGET}"),
    pytest.mark.skipif(kernel_vm.missing_tools() is not None,
                       reason=str(kernel_vm.missing_tools())),
]

SERVER = "198.18.0.1"
PORT = 20490
EXPORT = "share"
MIB = 8
DIR_ENTRIES = 2000
VM_TIMEOUT = 360
SEED = 20261128

# flock(2) and fcntl(2) locks for the guest (static: the initramfs has no C
# library). Exit status 0: done / got the lock; 1: the lock is held
# elsewhere (EWOULDBLOCK, EAGAIN, EACCES); 2: anything else.
LOCKTOOL_C = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static int fd_of(const char *path) {
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0) { fprintf(stderr, "open %s: %s\n", path, strerror(errno)); exit(2); }
    return fd;
}
static void wait_for(const char *ready, const char *release) {
    close(open(ready, O_WRONLY | O_CREAT, 0644));
    for (int i = 0; i < 6000 && access(release, F_OK) != 0; i++) usleep(50000);
}
static struct flock range(const char *type, const char *start, const char *len) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type[0] == 'r' ? F_RDLCK : F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = atoll(start);
    fl.l_len = atoll(len);
    return fl;
}
static int busy(int e) { return e == EWOULDBLOCK || e == EAGAIN || e == EACCES; }

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "flock-hold")) {       /* FILE READY RELEASE */
        int fd = fd_of(argv[2]);
        if (flock(fd, LOCK_EX) != 0) { perror("flock"); return 2; }
        wait_for(argv[3], argv[4]);
        return flock(fd, LOCK_UN) == 0 ? 0 : 2;
    }
    if (argc == 3 && !strcmp(argv[1], "flock-try")) {        /* FILE */
        int fd = fd_of(argv[2]);
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
        if (busy(errno)) return 1;
        perror("flock"); return 2;
    }
    if (argc == 8 && !strcmp(argv[1], "fcntl-hold")) {       /* FILE r|w START LEN READY RELEASE */
        int fd = fd_of(argv[2]);
        struct flock fl = range(argv[3], argv[4], argv[5]);
        if (fcntl(fd, F_SETLKW, &fl) != 0) { perror("F_SETLKW"); return 2; }
        wait_for(argv[6], argv[7]);
        fl.l_type = F_UNLCK;
        return fcntl(fd, F_SETLK, &fl) == 0 ? 0 : 2;
    }
    if (argc == 6 && !strcmp(argv[1], "fcntl-try")) {        /* FILE r|w START LEN */
        int fd = fd_of(argv[2]);
        struct flock fl = range(argv[3], argv[4], argv[5]);
        if (fcntl(fd, F_SETLK, &fl) == 0) return 0;
        if (busy(errno)) return 1;
        perror("F_SETLK"); return 2;
    }
    if (argc == 6 && !strcmp(argv[1], "fcntl-get")) {        /* FILE r|w START LEN */
        int fd = fd_of(argv[2]);
        struct flock fl = range(argv[3], argv[4], argv[5]);
        if (fcntl(fd, F_GETLK, &fl) != 0) { perror("F_GETLK"); return 2; }
        if (fl.l_type == F_UNLCK) printf("unlocked\n");
        else printf("locked %s %lld %lld\n", fl.l_type == F_WRLCK ? "w" : "r",
                    (long long)fl.l_start, (long long)fl.l_len);
        return 0;
    }
    fprintf(stderr, "usage: locktool flock-hold|flock-try|fcntl-hold|fcntl-try|fcntl-get ...\n");
    return 2;
}
"""

# NFSv4.2's system calls for the guest: each step prints `OK v42-NAME` or
# `FAIL v42-NAME detail` (the script's own ok/fail format).
V42TOOL_C = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MIB (1024 * 1024)
static int failed;
static void result(const char *name, int good, const char *detail) {
    if (good) printf("OK v42-%s\n", name);
    else { printf("FAIL v42-%s %s (errno %d %s)\n", name, detail, errno, strerror(errno)); failed = 1; }
    fflush(stdout);
}
static void fill(char *buf, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) { seed = seed * 1103515245u + 12345u; buf[i] = (char)(seed >> 16); }
}
static int all_zero(const char *buf, size_t n) {
    for (size_t i = 0; i < n; i++) if (buf[i]) return 0;
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: v42tool DIR\n"); return 2; }
    char path[512], copy[512], got[4096], page[4096];
    snprintf(path, sizeof path, "%s/sparse", argv[1]);
    snprintf(copy, sizeof copy, "%s/copy", argv[1]);
    fill(page, sizeof page, 42);

    /* Data at 0 and at 1 MiB, a hole between. */
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    result("open", fd >= 0, path);
    if (fd < 0) return 1;
    int wrote = pwrite(fd, page, sizeof page, 0) == sizeof page
             && pwrite(fd, page, sizeof page, MIB) == sizeof page && fsync(fd) == 0;
    result("write", wrote, "pwrite");
    off_t hole = lseek(fd, 0, SEEK_HOLE), data = lseek(fd, 4096, SEEK_DATA);
    char d[128];
    snprintf(d, sizeof d, "SEEK_HOLE from 0 = %lld (want 4096), SEEK_DATA from 4096 = %lld (want %d)",
             (long long)hole, (long long)data, MIB);
    result("seek", hole == 4096 && data == MIB, d);

    /* ALLOCATE past the end grows the file. */
    int r = fallocate(fd, 0, 2 * MIB, MIB);
    struct stat st;
    fstat(fd, &st);
    snprintf(d, sizeof d, "fallocate %d, size %lld (want %d)", r, (long long)st.st_size, 3 * MIB);
    result("allocate", r == 0 && st.st_size == 3 * MIB, d);

    /* DEALLOCATE: the first page reads as zeros, the size stays. */
    r = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096);
    ssize_t n = pread(fd, got, sizeof got, 0);
    fstat(fd, &st);
    data = lseek(fd, 0, SEEK_DATA);
    snprintf(d, sizeof d, "punch %d, read %zd, zeros %d, size %lld, SEEK_DATA from 0 = %lld",
             r, n, n == 4096 && all_zero(got, 4096), (long long)st.st_size, (long long)data);
    result("deallocate", r == 0 && n == 4096 && all_zero(got, 4096) && st.st_size == 3 * MIB
           && data == MIB, d);

    /* COPY: the whole file into another, byte for byte. */
    int out = open(copy, O_RDWR | O_CREAT | O_TRUNC, 0644);
    loff_t in_off = 0, out_off = 0;
    ssize_t total = 0, c;
    while (out >= 0 && total < 3 * MIB
           && (c = copy_file_range(fd, &in_off, out, &out_off, 3 * MIB - total, 0)) > 0)
        total += c;
    int same = 1;
    static char a[MIB], b[MIB];
    for (off_t off = 0; out >= 0 && off < 3 * MIB; off += MIB)
        if (pread(fd, a, MIB, off) != MIB || pread(out, b, MIB, off) != MIB || memcmp(a, b, MIB)) same = 0;
    snprintf(d, sizeof d, "copied %zd of %d bytes, same bytes %d", total, 3 * MIB, same);
    result("copy", total == 3 * MIB && same, d);

    /* xattrs. */
    r = fsetxattr(fd, "user.color", "blue", 4, XATTR_CREATE);
    n = fgetxattr(fd, "user.color", got, sizeof got);
    result("setxattr", r == 0 && n == 4 && !memcmp(got, "blue", 4), "fsetxattr/fgetxattr user.color");
    int excl = fsetxattr(fd, "user.color", "red", 3, XATTR_CREATE) < 0 && errno == EEXIST;
    result("xattr-exclusive", excl, "a second XATTR_CREATE of user.color");
    n = flistxattr(fd, got, sizeof got);
    int listed = 0;
    for (ssize_t i = 0; n > 0 && i < n; i += strlen(got + i) + 1)
        if (!strcmp(got + i, "user.color")) listed = 1;
    result("listxattr", listed, "user.color not listed");
    /* Kept for the host to see: remove a second attribute instead. */
    r = fsetxattr(fd, "user.gone", "x", 1, 0);
    int removed = r == 0 && fremovexattr(fd, "user.gone") == 0
                  && fgetxattr(fd, "user.gone", got, sizeof got) < 0 && errno == ENODATA;
    result("removexattr", removed, "user.gone still there");
    close(out);
    close(fd);
    return failed;
}
"""

# The guest's script (kernel_vm.NFS_HELPERS' ok/fail/pause first).
GUEST = r"""
M=/mnt
lt=/bin/locktool
# expect NAME STATUS CMD...: the command exits with STATUS.
expect() {{ n=$1; want=$2; shift 2; "$@"; got=$?; [ $got = $want ] && ok $n || fail $n "exit $got, not $want: $*"; }}
# await FILE: wait up to 60 s for FILE to appear.
await() {{ i=0; while [ ! -e $1 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; [ -e $1 ]; }}

if {mount}; then ok mount; else fail mount "exit $?"; dmesg | tail -n 20; exit 1; fi
grep " $M nfs4 " /proc/mounts | grep -q "vers=4.1" && ok mounted-4.1 || fail mounted-4.1 "$(grep " $M " /proc/mounts)"

# --- data: known bytes written, read back past the page cache ---
if dd if=/data.bin of=$M/big.bin bs=1M conv=fsync 2>/tmp/dd.err; then ok write; else fail write "$(cat /tmp/dd.err)"; fi
echo 3 > /proc/sys/vm/drop_caches
want=$(md5sum < /data.bin); got=$(md5sum < $M/big.bin)
[ "$want" = "$got" ] && ok read-back || fail read-back "md5 $got, wrote $want"
size=$(stat -c %s $M/big.bin)
[ "$size" = $(({mib} * 1048576)) ] && ok size || fail size "$size"

# --- metadata ---
mkdir $M/d && ok mkdir || fail mkdir "exit $?"
echo hello > $M/d/f && [ "$(cat $M/d/f)" = hello ] && ok create || fail create "$(cat $M/d/f 2>&1)"
mv $M/d/f $M/d/g && [ ! -e $M/d/f ] && [ "$(cat $M/d/g)" = hello ] && ok rename || fail rename "$(ls $M/d)"
ln $M/d/g $M/d/h && [ "$(stat -c %h $M/d/g)" = 2 ] && [ "$(stat -c %i $M/d/g)" = "$(stat -c %i $M/d/h)" ] \
    && ok hardlink || fail hardlink "links $(stat -c %h $M/d/g)"
ln -s g $M/d/s && [ "$(readlink $M/d/s)" = g ] && [ "$(cat $M/d/s)" = hello ] \
    && ok symlink || fail symlink "readlink '$(readlink $M/d/s)'"
mkdir $M/many && (cd $M/many && seq 1 {entries} | sed 's/^/entry-/' | xargs touch) \
    && ok many-created || fail many-created "exit $?"
n=$(ls $M/many | wc -l)
[ "$n" = {entries} ] && ok listing || fail listing "$n entries, not {entries}"
n=$(ls -l $M/many | grep -c entry-)
[ "$n" = {entries} ] && ok listing-stat || fail listing-stat "$n entries, not {entries}"

# --- nconnect ---
n=$(grep -cE '^[[:space:]]*xprt:[[:space:]]+tcp ' /proc/self/mountstats)
[ "$n" = 4 ] && ok xprt-count || fail xprt-count "$n xprt: tcp lines, not 4"
idle=$(grep -E '^[[:space:]]*xprt:[[:space:]]+tcp ' /proc/self/mountstats | awk '$8 == 0' | wc -l)
[ "$idle" = 0 ] && ok xprt-used || fail xprt-used "$idle connections sent no RPC: $(grep xprt: /proc/self/mountstats | tr '\t' ' ')"
grep -E 'xprt:' /proc/self/mountstats | tr '\t' ' ' | sed 's/^/mountstats /'
pause host-view

# --- a connection cut mid-copy: the host kills one of the 4 under direct
# 1 MiB WRITEs; the session and the other connections stay, the client
# reconnects and resends, and every byte arrives ---
rm -f /tmp/cut.err
( for i in $(seq 1 16); do
      dd if=/data.bin of=$M/cut-$i.bin bs=1M oflag=direct 2>/tmp/cut-dd.err \
          || echo "copy $i: $(cat /tmp/cut-dd.err)" >> /tmp/cut.err
  done ) & copier=$!
pause cut
wait $copier
echo 3 > /proc/sys/vm/drop_caches
bad=""; for i in $(seq 1 16); do [ "$(md5sum < $M/cut-$i.bin)" = "$want" ] || bad="$bad $i"; done
[ -z "$bad" ] && [ ! -s /tmp/cut.err ] && ok cut-copy || fail cut-copy "copies$bad differ $(cat /tmp/cut.err 2>/dev/null)"
rm -f $M/cut-*.bin

# --- locks (two processes of this client) ---
rm -f /tmp/r1 /tmp/g1
$lt flock-hold $M/d/lock /tmp/r1 /tmp/g1 & holder=$!
if await /tmp/r1; then
    expect flock-conflict 1 $lt flock-try $M/d/lock
    touch /tmp/g1; wait $holder && ok flock-holder || fail flock-holder "holder exit $?"
    expect flock-free 0 $lt flock-try $M/d/lock
else
    fail flock-conflict "the holder never got its lock"; kill $holder
fi
rm -f /tmp/r2 /tmp/g2
$lt fcntl-hold $M/d/lock w 0 100 /tmp/r2 /tmp/g2 & holder=$!
if await /tmp/r2; then
    expect fcntl-conflict 1 $lt fcntl-try $M/d/lock w 50 10
    expect fcntl-read-conflict 1 $lt fcntl-try $M/d/lock r 0 1
    expect fcntl-other-range 0 $lt fcntl-try $M/d/lock w 100 100
    got=$($lt fcntl-get $M/d/lock w 10 10)
    [ "$got" = "locked w 0 100" ] && ok fcntl-getlk || fail fcntl-getlk "'$got'"
    touch /tmp/g2; wait $holder && ok fcntl-holder || fail fcntl-holder "holder exit $?"
    expect fcntl-free 0 $lt fcntl-try $M/d/lock w 0 100
else
    fail fcntl-conflict "the holder never got its lock"; kill $holder
fi
rm -f /tmp/r3 /tmp/g3
$lt fcntl-hold $M/d/lock r 0 100 /tmp/r3 /tmp/g3 & holder=$!
if await /tmp/r3; then
    expect fcntl-shared 0 $lt fcntl-try $M/d/lock r 0 100
    touch /tmp/g3; wait $holder
else
    fail fcntl-shared "the holder never got its lock"; kill $holder
fi

# --- a write delegation (Braid): the kernel holds one while it has a file
# open for writing, and caches what it writes; at the pause another client
# opens the file, which recalls it: the kernel writes back, returns it, and
# the other client reads what the kernel had cached ---
if [ {braid} = yes ]; then
    exec 3<>$M/wdeleg && printf kernel-cached >&3 && ok wdeleg-write || fail wdeleg-write "exit $?"
    pause wdeleg
    exec 3>&-
    [ "$(cat $M/wdeleg)" = kernel-cached ] && ok wdeleg-after || fail wdeleg-after "'$(cat $M/wdeleg)'"
    rm -f $M/wdeleg
fi

# --- delete ---
rm $M/d/h $M/d/s && [ ! -e $M/d/h ] && [ "$(stat -c %h $M/d/g)" = 1 ] && ok unlink || fail unlink "$(ls $M/d)"
# (after-refusals: the host made it at pause host-view, for the remount)
rm -r $M/many $M/d $M/big.bin && [ "$(ls $M)" = after-refusals ] && ok delete || fail delete "left: $(ls $M)"
umount $M && ok umount || fail umount "exit $?"

# --- NFSv4.2 where the server serves it (Braid), else a clean refusal ---
if [ {serves_42} = yes ]; then
    v=4.2
    if timeout 60 {mount_other} 2>/tmp/m.err; then ok mount-4.2; else fail mount-4.2 "exit $? $(cat /tmp/m.err)"; fi
    grep " /mnt2 nfs4 " /proc/mounts | grep -q "vers=4.2" && ok mounted-4.2 || fail mounted-4.2 "$(grep " /mnt2 " /proc/mounts)"
    mkdir -p /mnt2/v42 && /bin/v42tool /mnt2/v42
    # The client's own count of each operation it sent: the copy and the
    # space changes were the server's work, not reads and writes.
    stats=$(grep -E '^[[:space:]]+(ALLOCATE|DEALLOCATE|SEEK|COPY|SETXATTR|GETXATTR|LISTXATTRS|REMOVEXATTR):' /proc/self/mountstats | tr -s ' \t' ' ')
    echo "$stats" | sed 's/^/mountstats-4.2/'
    none=""; for o in ALLOCATE DEALLOCATE SEEK COPY SETXATTR GETXATTR LISTXATTRS REMOVEXATTR; do
        echo "$stats" | grep -qE "^ ?$o: [1-9]" || none="$none $o"
    done
    [ -z "$none" ] && ok v42-ops-sent || fail v42-ops-sent "no$none in mountstats"
    pause host-v42
    rm -r /mnt2/v42
    umount /mnt2 && ok umount-4.2 || fail umount-4.2 "exit $?"
else
    v=4.2
    timeout 60 {mount_other} 2>/tmp/m.err; rc=$?
    if grep -q " /mnt2 " /proc/mounts; then fail refuse-$v "mounted"; umount /mnt2
    elif [ $rc = 0 ]; then fail refuse-$v "mount exited 0"
    elif [ $rc = 143 ] || [ $rc = 137 ]; then fail refuse-$v "mount hung (killed after 60 s)"
    else ok refuse-$v; echo "refused $v: exit $rc $(cat /tmp/m.err)"; fi
fi

# --- NFSv4.0, refused ---
for v in 4.0; do
    timeout 60 {mount_other} 2>/tmp/m.err; rc=$?
    if grep -q " /mnt2 " /proc/mounts; then fail refuse-$v "mounted"; umount /mnt2
    elif [ $rc = 0 ]; then fail refuse-$v "mount exited 0"
    elif [ $rc = 143 ] || [ $rc = 137 ]; then fail refuse-$v "mount hung (killed after 60 s)"
    else ok refuse-$v; echo "refused $v: exit $rc $(cat /tmp/m.err)"; fi
done
if {mount} && [ -f $M/after-refusals ] ; then ok remount; else fail remount "exit $? $(ls $M 2>&1)"; fi
umount $M
echo "@@ checks-done"
"""

CHECKS = ["mount", "mounted-4.1", "write", "read-back", "size", "mkdir", "create", "rename",
          "hardlink", "symlink", "many-created", "listing", "listing-stat", "xprt-count",
          "xprt-used", "flock-conflict", "flock-holder", "flock-free", "fcntl-conflict",
          "fcntl-read-conflict", "fcntl-other-range", "fcntl-getlk", "fcntl-holder",
          "fcntl-free", "fcntl-shared", "unlink", "delete", "umount",
          "refuse-4.0", "remount", "cut-copy"] + (
    ["wdeleg-write", "wdeleg-after",
     "mount-4.2", "mounted-4.2", "v42-open", "v42-write", "v42-seek", "v42-allocate",
     "v42-deallocate", "v42-copy", "v42-setxattr", "v42-xattr-exclusive", "v42-listxattr",
     "v42-removexattr", "v42-ops-sent", "umount-4.2"] if TARGET == "braid" else ["refuse-4.2"])
# What the host checks at the guest's `pause host-view`; against Braid
# also its admin API: one NFS session with the mount's 4 connections; and
# at `pause wdeleg` the kernel's write delegation and its recall.
HOST_CHECKS = ["host-bytes", "host-listing", "host-connections", "host-cut"] + (
    ["host-admin-session", "host-xattr", "host-copy", "host-wdeleg-granted",
     "host-wdeleg-recalled"] if TARGET == "braid" else [])


def admin_view(ns: kernel_vm.NetNs, log: Path) -> dict:
    """/api/v1/sessions of the Braid in the namespace (its admin port is in
    its log: `braid: admin API on http://ADDR/`)."""
    found = re.findall(r"admin API on http://([0-9.:]+)/", log.read_text(errors="replace"))
    if not found:
        raise RuntimeError(f"no admin address in {log}")
    out = ns.run(["python3", "-c",
                  "import sys, urllib.request; "
                  "print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())",
                  f"http://{found[-1]}/api/v1/sessions"], timeout=30)
    return json.loads(out.stdout)


def write_delegation_recall(ns: kernel_vm.NetNs, server) -> dict[str, tuple[bool, str]]:
    """At the guest's `pause wdeleg` (it holds wdeleg open for writing,
    with bytes it has not sent): its client holds a delegation (an open
    for writing can only have a write one); a second NFS client's OPEN is
    held off (NFS4ERR_DELAY) until the kernel, recalled, wrote back and
    returned it, and then reads the kernel's bytes; the kernel holds one
    delegation fewer."""
    source = run_pynfs.find_pynfs()
    if source is None:
        return {"host-wdeleg-granted": (False, "pynfs not found (BRAID_PYNFS)")}
    tree = run_pynfs.build_pynfs(source, io.StringIO())
    # (It may hold read delegations of files it read before, too.)
    before = [c.get("delegations") for c in admin_view(ns, server.log_path)["nfs_clients"]]
    granted = (len(before) == 1 and before[0] >= 1,
               f"delegations per NFS client before the recall: {before}")
    try:
        out = ns.run([run_pynfs.PYTHON, str(HERE / "nfs_open_read.py"), SERVER, str(PORT),
                      EXPORT, "--", "wdeleg", "60"], cwd=tree / "nfs4.1", timeout=120)
    except subprocess.CalledProcessError as e:
        out = e
    waited = re.search(r"^WAITED (\S+) (\d+)$", out.stdout, re.M)
    read = re.search(r"^READ (\S*)$", out.stdout, re.M)
    after = [c.get("delegations") for c in admin_view(ns, server.log_path)["nfs_clients"]
             if not c.get("owner", "").startswith("braid-reader")]
    good = (waited is not None and int(waited.group(2)) > 0 and read is not None
            and bytes.fromhex(read.group(1)) == b"kernel-cached"
            and len(after) == 1 and len(before) == 1 and after[0] < before[0])
    detail = (f"second client: {out.stdout.strip()[-500:]} {out.stderr.strip()[-500:]}; "
              f"the kernel's delegations before: {before}, after: {after}")
    return {"host-wdeleg-granted": granted, "host-wdeleg-recalled": (good, detail)}


def _static_tool(workdir: Path, name: str, source: str) -> Path:
    src, out = workdir / f"{name}.c", workdir / name
    src.write_text(source)
    subprocess.run(["cc", "-static", "-O2", "-o", str(out), str(src)], check=True,
                   capture_output=True, timeout=120)
    return out


def established(ns: kernel_vm.NetNs) -> list[tuple[str, str]]:
    """(server end, client end) of the server's connections from the VM."""
    ss = ns.run(["ss", "-Htn", "state", "established", "( sport = :%d )" % PORT])
    return [(ln.split()[-2], ln.split()[-1]) for ln in ss.stdout.splitlines()
            if kernel_vm.GUEST_ADDRESS in ln]


def cut_one(ns: kernel_vm.NetNs, server) -> tuple[bool, str]:
    """Kill one of the mount's connections at the server (ss -K) while the
    guest copies: against Braid one that carries no callbacks (its admin
    API says which), against ganesha the last ss lists."""
    time.sleep(0.3)
    conns = established(ns)
    if len(conns) != 4:
        return False, f"{len(conns)} connections before the cut: {conns}"
    victim = conns[-1]
    if TARGET == "braid":
        view = admin_view(ns, server.log_path)
        nfs = [x for x in view["sessions"] if x.get("protocol") == "nfs"]
        fore_only = [c["remote_address"] for x in nfs for c in x["channels"] if not c["back"]]
        victim = next((c for c in conns if c[1] in fore_only), victim)
    local, peer = victim
    # How far the copies were (the cut should land in the middle of them).
    sizes = [(server.export_dir / f"cut-{i}.bin").stat().st_size
             if (server.export_dir / f"cut-{i}.bin").exists() else None for i in range(1, 17)]
    (server.workdir / "cut.txt").write_text(f"{victim} at copy sizes {sizes}\n")
    ns.run(["ss", "-K", "-tn", "sport", "=", ":" + local.rsplit(":", 1)[1],
            "dport", "=", ":" + peer.rsplit(":", 1)[1]])
    left = established(ns)
    if victim in left:
        return False, f"{victim} survived ss -K: {left}"
    if TARGET == "braid":
        view = admin_view(ns, server.log_path)
        nfs = [x for x in view["sessions"] if x.get("protocol") == "nfs"]
        if len(nfs) != 1:
            return False, f"sessions after the cut: {json.dumps(nfs)[:2000]}"
    return True, f"cut {victim}"


@pytest.fixture(scope="module")
def nfs_vm(tmp_path_factory):
    """Boot once; returns ({check: (ok, detail)}, console lines)."""
    kernel = kernel_vm.prepare()
    base = tmp_path_factory.mktemp(f"nfs-kernel-{TARGET}-")
    export_dir, workdir = base / "export", base / "server"
    export_dir.mkdir()
    workdir.mkdir()
    data = random.Random(SEED).randbytes(MIB << 20)
    (base / "data.bin").write_bytes(data)
    files = {"/data.bin": base / "data.bin",
             "/bin/locktool": _static_tool(base, "locktool", LOCKTOOL_C),
             "/bin/v42tool": _static_tool(base, "v42tool", V42TOOL_C)}
    mount = kernel_vm.nfs_mount_command(SERVER, PORT, "/" + EXPORT)
    other = kernel_vm.nfs_mount_command(SERVER, PORT, "/" + EXPORT, "/mnt2", vers="$v",
                                        options="")
    script = GUEST.format(mount=mount, mount_other=other, mib=MIB, entries=DIR_ENTRIES,
                          serves_42="yes" if TARGET == "braid" else "no",
                          braid="yes" if TARGET == "braid" else "no")

    host: dict[str, tuple[bool, str]] = {}
    ns = kernel_vm.NetNs([SERVER])
    server = None
    try:
        server = servers.start_nfs(TARGET, export_dir, workdir, port=PORT, export=EXPORT,
                                   host=SERVER, wrap=ns.argv)

        def at_pause(name):
            if name == "cut":
                host["host-cut"] = cut_one(ns, server)
                return
            if name == "wdeleg":
                host.update(write_delegation_recall(ns, server))
                return
            if name == "host-v42":
                sparse, copy = export_dir / "v42" / "sparse", export_dir / "v42" / "copy"
                try:
                    color = os.getxattr(sparse, "user.color")
                except OSError as e:
                    color = repr(e)
                host["host-xattr"] = (color == b"blue", f"user.color on the host: {color!r}")
                same = (sparse.exists() and copy.exists()
                        and sparse.read_bytes() == copy.read_bytes()
                        and copy.stat().st_size == 3 << 20)
                host["host-copy"] = (same, "the copy differs from its source on the host")
                return
            if name != "host-view":
                return
            big = export_dir / "big.bin"
            same = big.exists() and big.read_bytes() == data
            host["host-bytes"] = (same, "" if same else
                                  f"export holds {big.stat().st_size if big.exists() else 'no'}"
                                  " bytes / different bytes")
            many = export_dir / "many"
            n = len(list(many.iterdir())) if many.is_dir() else 0
            host["host-listing"] = (n == DIR_ENTRIES, f"{n} entries in {many}")
            ss = ns.run(["ss", "-Htn", "state", "established", "( sport = :%d )" % PORT])
            conns = [ln for ln in ss.stdout.splitlines() if kernel_vm.GUEST_ADDRESS in ln]
            host["host-connections"] = (len(conns) == 4,
                                        f"{len(conns)} connections from the VM:\n{ss.stdout}")
            if TARGET == "braid":
                view = admin_view(ns, server.log_path)
                nfs = [x for x in view["sessions"] if x.get("protocol") == "nfs"]
                good = (len(nfs) == 1 and nfs[0]["current_channels"] == 4
                        and nfs[0]["backchannel"]
                        and len(view.get("nfs_clients", [])) == 1)
                host["host-admin-session"] = (good, json.dumps(view, indent=1)[:3000])
            (export_dir / "after-refusals").write_bytes(b"")

        lines = kernel_vm.run_nfs_script(kernel, ns, script, base, VM_TIMEOUT, files=files,
                                         at_pause=at_pause)
        if server.alive() is False:
            pytest.fail(f"{TARGET} died during the VM run; log tail:\n{server.log_tail()}")
    finally:
        if server is not None:
            server.stop()
        ns.close()
    (base / "console.log").write_text("\n".join(lines) + "\n")
    results = kernel_vm.results_of(lines, host)
    return results, lines, base


def test_vm_finished(nfs_vm):
    results, lines, _ = nfs_vm
    problem = kernel_vm.finished_problem(results, lines, CHECKS + HOST_CHECKS)
    assert problem is None, problem


@pytest.mark.parametrize("check", CHECKS + HOST_CHECKS)
def test_nfs_kernel(nfs_vm, check):
    problem = kernel_vm.check_problem(*nfs_vm, check)
    assert problem is None, problem
