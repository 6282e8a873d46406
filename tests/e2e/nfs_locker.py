"""nfs_lock_client.py driven from a test: a second NFSv4.1 client (pynfs's
client library, run in a built pynfs tree) that opens a file of the export
and takes, tests and releases byte-range locks on command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance"))
import run_pynfs  # noqa: E402


class NfsLocker:
    """`wrap` runs the client elsewhere (a network namespace's argv)."""

    def __init__(self, host: str, port: int, components: list[str], tree: Path, name: str,
                 wrap=None):
        argv = [run_pynfs.PYTHON, str(HERE / "nfs_lock_client.py"), host, str(port),
                *components, "--", name]
        self.proc = subprocess.Popen(
            wrap(argv) if wrap else argv, cwd=tree / "nfs4.1", stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # `OPEN`, or why the open failed.
        self.opened = self.reply()

    def reply(self) -> str:
        """The client's next answer (pynfs prints a word of its own about
        gssapi first), or what it said when it ended."""
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait(10)
                return f"(ended {self.proc.returncode}: {self.proc.stderr.read()[-1500:]})"
            if line.startswith("> "):
                return line[2:].strip()

    def __call__(self, command: str) -> str:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.reply()

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(10)
