"""One `smbprotocol` session (its `smbclient` module) in one test directory,
shared by the e2e tests that use that client."""

from __future__ import annotations

import smbclient


class Remote:
    """Paths and call options for one smbprotocol session in one test directory."""

    def __init__(self, target, directory: str, encrypt: bool = False):
        self.target = target
        self.directory = directory
        self.encrypt = encrypt
        self.cache: dict = {}
        self.kw = {"port": target.port, "connection_cache": self.cache}
        self.session = smbclient.register_session(
            target.host, username=target.user, password=target.password, port=target.port,
            encrypt=encrypt, require_signing=True, connection_cache=self.cache)

    def path(self, *parts: str) -> str:
        return "\\".join([f"\\\\{self.target.host}\\{self.target.share}", self.directory, *parts])

    def local(self, *parts: str):
        return self.target.share_dir.joinpath(self.directory, *parts)

    def write(self, name: str, data: bytes) -> None:
        with smbclient.open_file(self.path(name), mode="wb", **self.kw) as f:
            f.write(data)

    def read(self, name: str) -> bytes:
        with smbclient.open_file(self.path(name), mode="rb", **self.kw) as f:
            return f.read()

    def close(self) -> None:
        smbclient.reset_connection_cache(connection_cache=self.cache)
