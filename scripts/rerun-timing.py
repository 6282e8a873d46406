#!/usr/bin/env python3
"""One more try for the e2e tests that measure time, and only for them.

Some e2e tests assert rates and latencies (QoS holding a share at its
IOPS or MiB/s, every second of a burst, two clients' fair shares, a free
share's latency beside a throttled one, the dashboard's advice for a
measured workload). They carry `@pytest.mark.timing`. On CI's 2-core
machine a second can be lost to another process, so such a test may fail
once without the server doing anything wrong.

    rerun-timing.py JUNIT.xml RERUN_JUNIT.xml

reads the failures of a finished e2e run from its JUnit XML. If every one
of them is a timing test (at most MAX_RERUN), it runs them once more and
exits 0 when they all pass then; the log names each test that needed the
second try, so a test that keeps needing it is seen. Exit 1 when any
failure is not a timing test, when there are too many, or when a rerun
fails too: the step stays failed.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# More timing failures than this in one run is a slow server or a broken
# limiter, not a busy second.
MAX_RERUN = 3


def node_id(case: ET.Element) -> str:
    """tests/e2e/test_x.py::[Class::]name from a JUnit testcase."""
    parts = (case.get("classname") or "").split(".")
    for k, part in enumerate(parts):
        if part.startswith("test_"):
            path = "/".join(parts[: k + 1]) + ".py"
            return "::".join([path, *parts[k + 1:], case.get("name", "")])
    return "::".join(p for p in [case.get("classname"), case.get("name")] if p)


def failures(junit: Path) -> list[str]:
    root = ET.parse(junit).getroot()
    return [node_id(c) for c in root.iter("testcase")
            if c.find("failure") is not None or c.find("error") is not None]


def timing_tests() -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "tests/e2e", "-q",
                          "--collect-only", "-m", "timing", "-p", "no:cacheprovider"],
                         cwd=ROOT, capture_output=True, text=True)
    return {line.strip() for line in out.stdout.splitlines() if "::" in line}


def main() -> int:
    junit, rerun_junit = Path(sys.argv[1]), Path(sys.argv[2])
    failed = failures(junit)
    if not failed:
        return 0
    timing = timing_tests()
    others = [f for f in failed if f not in timing]
    if others:
        print(f"rerun-timing: not retried, {len(others)} failure(s) not marked timing: "
              + ", ".join(others))
        return 1
    if len(failed) > MAX_RERUN:
        print(f"rerun-timing: not retried, {len(failed)} timing failures (more than "
              f"{MAX_RERUN})")
        return 1
    print("rerun-timing: once more, failed on the first run: " + ", ".join(failed), flush=True)
    rc = subprocess.run([sys.executable, "-m", "pytest", *failed, "-q", "-rfE",
                         "-p", "no:cacheprovider", f"--junitxml={rerun_junit}"],
                        cwd=ROOT).returncode
    if rc != 0 or failures(rerun_junit):
        print("rerun-timing: failed again", flush=True)
        return 1
    print(f"rerun-timing: passed on the second run: {', '.join(failed)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
