#!/usr/bin/env python3
"""Hold files in the page cache for a benchmark: mmap and mlock them, then
wait until killed. This VM runs DAMON proactive reclaim (pageout of pages
idle for about a minute: /sys/kernel/mm/damon/admin), which otherwise drops
a benchmark's input file from the cache between runs and turns a server
measurement into a disk one.

    scripts/pin-in-cache.py FILE... &   # prints "pinned N bytes" when ready
"""
import ctypes
import os
import signal
import sys

PROT_READ, MAP_SHARED = 0x1, 0x01
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

total = 0
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    addr = libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
    os.close(fd)
    if addr in (None, ctypes.c_void_p(-1).value):
        sys.exit(f"mmap {path}: {os.strerror(ctypes.get_errno())}")
    # mlock faults every page in and keeps it resident until we exit.
    if libc.mlock(addr, size) != 0:
        sys.exit(f"mlock {path}: {os.strerror(ctypes.get_errno())}")
    total += size
print(f"pinned {total} bytes", flush=True)
signal.pause()
