"""etcd for the end-to-end suites that keep Braid's state in it
(`state_store = "etcd"`): Debian's etcd-server, started once per pytest
session on free loopback ports (conftest.py's `etcd` fixture)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

import servers


class Etcd:
    """Debian's etcd on free loopback ports with a data directory under
    `base`, stopped by PID."""

    def __init__(self, base: Path):
        binary = shutil.which("etcd") or "/usr/bin/etcd"
        if not os.path.exists(binary) or not shutil.which("etcdctl"):
            pytest.fail("etcd or etcdctl is missing: apt-get install etcd-server etcd-client "
                        "(scripts/test.sh installs them)")
        self.url = f"http://127.0.0.1:{servers.free_port()}"
        peer = f"http://127.0.0.1:{servers.free_port()}"
        self.log = base / "etcd.log"
        self.proc = servers._spawn(
            [binary, "--name", "braid-e2e", "--data-dir", str(base / "data"),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"braid-e2e={peer}"], self.log, base)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if json.loads(r.read()).get("health") == "true":
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"etcd did not become healthy:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.2)

    def etcdctl(self, *args: str, data: bytes | None = None) -> str:
        r = subprocess.run(["etcdctl", "--endpoints", self.url, *args], input=data,
                           capture_output=True, env={**os.environ, "ETCDCTL_API": "3"},
                           timeout=30, check=True)
        return r.stdout.decode()

    def stop(self) -> None:
        servers.stop_pid(self.proc.pid)
        self.proc.wait(30)
