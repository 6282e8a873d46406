"""A minimal Chrome DevTools Protocol client for headless Chromium over
--remote-debugging-pipe (no WebSocket library needed): Chromium reads
NUL-terminated JSON messages on fd 3 and writes its answers and events on
fd 4. Enough to open a page, evaluate JavaScript in it and take a
screenshot (tests/e2e/test_dashboard.py)."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(self, profile_dir: Path, width: int = 1400, height: int = 2200):
        binary = chromium_binary()
        if binary is None:
            raise RuntimeError("chromium not installed (apt-get install chromium)")
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # Out of the way of 3 and 4, which the child gets.
        hi_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 100)
        hi_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 100)
        os.close(to_chrome_r)
        os.close(from_chrome_w)

        def child_fds():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        argv = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--remote-debugging-pipe",
                f"--user-data-dir={profile_dir}", f"--window-size={width},{height}", "about:blank"]
        self.log = open(profile_dir / "chromium.log", "wb")
        # close_fds=False: Python's own descriptors are close-on-exec
        # anyway, and closing would take 3 and 4 too (after preexec_fn).
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     preexec_fn=child_fds, close_fds=False)
        os.close(hi_r)
        os.close(hi_w)
        self.w = to_chrome_w
        self.r = from_chrome_r
        self.buf = b""
        self.next_id = 0
        self.session: str | None = None
        self.width, self.height = width, height

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def _read(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise TimeoutError("no answer from chromium")
            ready, _, _ = select.select([self.r], [], [], left)
            if ready:
                chunk = os.read(self.r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self.buf += chunk
        msg, _, self.buf = self.buf.partition(b"\0")
        return json.loads(msg)

    def call(self, method: str, params: dict | None = None, timeout: float = 30,
             page: bool = True) -> dict:
        i = self._send(method, params, self.session if page else None)
        while True:
            m = self._read(timeout)
            if m.get("id") == i:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", {"url": "about:blank"}, page=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 page=False)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        self.call("Page.navigate", {"url": url})

    def eval(self, expression: str):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30):
        deadline = time.monotonic() + timeout
        while True:
            try:
                v = self.eval(expression)
            except RuntimeError:
                v = None
            if v:
                return v
            if time.monotonic() > deadline:
                raise TimeoutError(f"never true: {expression}")
            time.sleep(0.2)

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close", page=False, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.w)
        os.close(self.r)
        self.log.close()
