#!/usr/bin/env python3
"""pynfs's --serverhelper for its reboot tests (st_reboot.py, REBT codes):
`reboot_braid.py STATE reboot` kills the Braid that STATE (a JSON file
run_pynfs.py writes) names with SIGKILL, as a crash would, starts it again
with the same command line, config and state_dir, records the new PID in
STATE and returns once the new process answers on its NFS port."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def gone(pid: int) -> bool:
    """The process has exited (a zombie counts: it serves nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def main() -> int:
    state_path, action = Path(sys.argv[1]), sys.argv[2]
    if action != "reboot":
        print(f"reboot_braid.py: unknown action {action!r} (only 'reboot')", file=sys.stderr)
        return 2
    state = json.loads(state_path.read_text())
    pid = state["pid"]
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 30
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    with open(state["log"], "ab") as log:
        log.write(b"\n===== reboot_braid.py: SIGKILL and start again\n")
        log.flush()
        proc = subprocess.Popen(state["argv"], cwd=state["cwd"], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    state["pid"] = proc.pid
    state_path.write_text(json.dumps(state))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print(f"reboot_braid.py: Braid exited with {proc.returncode}; see {state['log']}",
                  file=sys.stderr)
            return 1
        try:
            socket.create_connection((state["host"], state["port"]), timeout=1).close()
            return 0
        except OSError:
            time.sleep(0.05)
    print("reboot_braid.py: Braid did not listen again within 60 s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
