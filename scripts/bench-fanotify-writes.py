#!/usr/bin/env python3
"""What a fanotify mark costs the process that writes: µs per pwrite(2)
to one cached file, with no mark, with the directory marks Braid takes on
watched or leased directories (braid-fs host_changes.rs) asking for
FAN_MODIFY or FAN_CLOSE_WRITE, and with the inode mark it takes on a file
a client caches (host_writes.rs: FAN_MODIFY | FAN_ATTRIB, FAN_REPORT_FID).

    scripts/bench-fanotify-writes.py [WRITES] [BLOCK_BYTES] [RUNS]

The writer is a small C program (compiled here with `cc`) doing WRITES
pwrite()s of BLOCK_BYTES (default 300000 x 4096) over the first 256
blocks of a file; a marking process (this script, forked) holds the mark
and drains its queue meanwhile, as Braid's reader task does. Prints the
writer's wall time per write for each mark, RUNS times (default 2).
Needs Linux 5.13 for unprivileged fanotify, or root.
"""
import ctypes
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRITER = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int fd = open(argv[1], O_WRONLY | O_CREAT, 0644);
  long n = atol(argv[2]);
  size_t bs = atol(argv[3]);
  char *buf = aligned_alloc(4096, bs);
  for (size_t i = 0; i < bs; i++) buf[i] = i;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++) pwrite(fd, buf, bs, (i % 256) * bs);
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.3f\n", ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9) / n * 1e6);
  return 0;
}
"""

FAN_CLOEXEC, FAN_NONBLOCK = 0x1, 0x2
FAN_REPORT_FID, FAN_REPORT_DFID_NAME = 0x200, 0xC00
FAN_MARK_ADD = 0x1
FAN_MODIFY, FAN_ATTRIB, FAN_CLOSE_WRITE = 0x2, 0x4, 0x8
FAN_CREATE, FAN_DELETE = 0x100, 0x200
FAN_EVENT_ON_CHILD, FAN_ONDIR = 0x08000000, 0x40000000
DIR_BASE = FAN_CREATE | FAN_DELETE | FAN_ATTRIB | FAN_EVENT_ON_CHILD | FAN_ONDIR

# name: (group flags, mask, mark the directory (else the file))
MARKS = {
    "none": None,
    "directory, FAN_MODIFY (before d2da393)": (FAN_REPORT_DFID_NAME, DIR_BASE | FAN_MODIFY, True),
    "directory, FAN_CLOSE_WRITE (host_changes.rs)": (FAN_REPORT_DFID_NAME, DIR_BASE | FAN_CLOSE_WRITE, True),
    "the file, FAN_MODIFY | FAN_ATTRIB (host_writes.rs)": (FAN_REPORT_FID, FAN_MODIFY | FAN_ATTRIB, False),
}


def hold_mark(group_flags: int, mask: int, path: str, ready_w: int, stop_r: int) -> None:
    """In a child: mark `path`, say so on `ready_w`, drain until `stop_r` closes."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                                   ctypes.c_char_p]
    fd = libc.fanotify_init(group_flags | FAN_CLOEXEC | FAN_NONBLOCK, os.O_RDONLY)
    if fd < 0 or libc.fanotify_mark(fd, FAN_MARK_ADD, mask, -100, path.encode()) != 0:
        os.write(ready_w, b"E")
        os._exit(1)
    os.write(ready_w, b"R")
    p = select.poll()
    p.register(fd, select.POLLIN)
    p.register(stop_r, select.POLLIN)
    while True:
        for f, _ in p.poll():
            if f == stop_r:
                os._exit(0)
            try:
                os.read(fd, 65536)
            except BlockingIOError:
                pass


def run(writer: Path, target: Path, mark, writes: int, block: int) -> float:
    child = None
    if mark is not None:
        group, mask, on_dir = mark
        ready_r, ready_w = os.pipe()
        stop_r, stop_w = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(stop_w)
            hold_mark(group, mask, str(target.parent if on_dir else target), ready_w, stop_r)
        os.close(stop_r)
        if os.read(ready_r, 1) != b"R":
            raise SystemExit("fanotify_mark failed (Linux 5.13 or root needed)")
    try:
        out = subprocess.run([str(writer), str(target), str(writes), str(block)],
                             capture_output=True, text=True, check=True)
        return float(out.stdout)
    finally:
        if child is not None:
            os.close(stop_w)
            os.waitpid(child, 0)


def main() -> None:
    writes = int(sys.argv[1]) if len(sys.argv) > 1 else 300000
    block = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    with tempfile.TemporaryDirectory(prefix="braid-fanbench.", dir="/var/tmp") as tmp:
        tmp = Path(tmp)
        (tmp / "w.c").write_text(WRITER)
        subprocess.run(["cc", "-O2", "-o", str(tmp / "w"), str(tmp / "w.c")], check=True)
        (tmp / "d").mkdir()
        target = tmp / "d" / "f.bin"
        target.write_bytes(b"\0" * block * 256)
        for name, mark in MARKS.items():
            got = [run(tmp / "w", target, mark, writes, block) for _ in range(runs)]
            time.sleep(0.2)
            print(f"{name}: " + ", ".join(f"{g:.2f}" for g in got) + f" µs per {block}-byte write")


main()
