"""Fixtures for the end-to-end suites.

The server under test is chosen by BRAID_E2E_TARGET:
  braid (default)  target/release/braid serve (build it first; $BRAID_BIN overrides)
  samba            Samba's smbd with a private config (the reference the suites are
                   validated against)
  ganesha          nfs-ganesha, the NFSv4.1 reference: only the NFS suites run
                   (test_nfs_*.py); every other test is skipped
The NFS suites (test_nfs_*.py) start their NFS server themselves
(servers.start_nfs) and skip with samba.

Each test module gets its own server on a free loopback port with a fresh share
directory; it is stopped by PID when the module is done.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest

import servers
from etcd_server import Etcd

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")


class SmbTarget(NamedTuple):
    host: str
    port: int
    share: str
    user: str
    password: str
    share_dir: Path


def pytest_report_header(config):
    return f"e2e target: {TARGET}"


def pytest_collection_modifyitems(config, items):
    """With BRAID_E2E_TARGET=ganesha only the NFS suites run: ganesha serves
    no SMB, and Braid's own tests have no Braid to run against."""
    if TARGET != "ganesha":
        return
    skip = pytest.mark.skip(reason="BRAID_E2E_TARGET=ganesha runs the NFS suites only")
    for item in items:
        if not item.path.name.startswith("test_nfs_"):
            item.add_marker(skip)


@pytest.fixture(scope="module")
def server_process(tmp_path_factory) -> servers.Server:
    """The running server (process handle, log) behind smb_server."""
    base = tmp_path_factory.mktemp(f"{TARGET}-")
    share_dir = base / "share"
    workdir = base / "server"
    share_dir.mkdir()
    workdir.mkdir()
    server = servers.start(TARGET, share_dir, workdir)
    yield server
    alive = server.alive()
    server.stop()
    if not alive:
        pytest.fail(f"{TARGET} server (pid {server.pid}) died during the tests; "
                    f"log {server.log_path}:\n{server.log_tail()}")


@pytest.fixture(scope="module")
def smb_server(server_process) -> SmbTarget:
    """(host, port, share, user, password, share_dir) of a running server."""
    s = server_process
    return SmbTarget(s.host, s.port, s.share, s.user, s.password, s.share_dir)


@pytest.fixture
def remote_dir(smb_server) -> str:
    """A fresh, empty directory in the share for one test; returns its name.

    Created through the backing directory (and handed to the share's owner), so
    that tests do not depend on the server for their setup."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    path = smb_server.share_dir / name
    path.mkdir()
    servers.give_to_share_owner(smb_server.share_dir, path)
    return name


@pytest.fixture(scope="session")
def etcd(tmp_path_factory):
    """One etcd for the session, started by the first test that asks."""
    e = Etcd(tmp_path_factory.mktemp("etcd"))
    yield e
    e.stop()
