#!/usr/bin/env python3
"""Run the listed smbtorture tests against a running SMB server and report.

Tests come from smbtorture.txt (must pass) and smbtorture-pending.txt (run and
reported, but their failures do not fail the run). They are run in batches, one
smbtorture call per batch, each under a timeout; tests of a batch that produced
no result (a hang, a crash) are re-run one by one.

Prints one line per test, then `smbtorture: N passed, N failed` (counting the
required tests; pending ones are summarised separately). Exit status 0 only when
every required test passed. A skip counts as a failure: a required test must run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULT_RE = re.compile(r"^(success|failure|error|skip|xfail|uxsuccess): (\S+)(.*)$")


def read_list(path: Path) -> list[str]:
    if not path.exists():
        return []
    names = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


def check_lists(required: list[str], pending: list[str], known: list[str]) -> list[str]:
    problems = []
    for label, names in (("smbtorture.txt", required), ("smbtorture-pending.txt", pending)):
        seen = set()
        for n in names:
            if n in seen:
                problems.append(f"{n} is listed twice in {label}")
            seen.add(n)
    for n in sorted(set(required) & set(pending)):
        problems.append(f"{n} is in both smbtorture.txt and smbtorture-pending.txt")
    if known:
        known_set = set(known)
        for n in required + pending:
            if n not in known_set and not any(k.startswith(n + ".") for k in known):
                problems.append(f"{n} is not a test smbtorture knows (smbtorture --list)")
    return problems


def owner(result_name: str, names: list[str]) -> str | None:
    """The listed name a result belongs to (a listed suite owns its sub-tests)."""
    for n in names:
        if result_name == n or result_name.startswith(n + "."):
            return n
    return None


def run_batch(args, names: list[str], timeout: float, log) -> dict[str, list[tuple[str, str]]]:
    """Run names in one smbtorture call; return {listed name: [(status, detail)]}."""
    cmd = ["smbtorture", f"//{args.host}/{args.share}", "-p", str(args.port),
           "-U", f"{args.user}%{args.password}", "--fullname", *args.extra, *names]
    log.write(f"\n===== {' '.join(cmd[:3])} ... {' '.join(names)}\n")
    log.flush()
    results: dict[str, list[tuple[str, str]]] = {}
    try:
        out = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=timeout).stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout or b""
        log.write(f"===== batch timed out after {timeout}s\n")
    text = out.decode(errors="replace")
    log.write(text)
    log.flush()
    for line in text.splitlines():
        m = RESULT_RE.match(line)
        if not m:
            continue
        status, name, detail = m.groups()
        listed = owner(name, names)
        if listed is not None:
            results.setdefault(listed, []).append((status, detail.strip(" []")))
    return results


def verdict(outcomes: list[tuple[str, str]]) -> tuple[bool, str]:
    if not outcomes:
        return False, "no result (timeout or crash)"
    bad = [(s, d) for s, d in outcomes if s not in ("success", "xfail")]
    if not bad:
        return True, "success" if len(outcomes) == 1 else f"success ({len(outcomes)} tests)"
    status, detail = bad[0]
    summary = f"{status}" + (f": {detail}" if detail else "")
    if len(outcomes) > 1:
        summary += f" ({len(bad)} of {len(outcomes)} tests not passed)"
    return False, summary


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--share", default="share")
    p.add_argument("--user", required=True)
    p.add_argument("--password", default=os.environ.get("SMB_PASSWORD"),
                   help="default: $SMB_PASSWORD")
    p.add_argument("--list", type=Path, default=HERE / "smbtorture.txt")
    p.add_argument("--pending", type=Path, default=HERE / "smbtorture-pending.txt")
    p.add_argument("--batch-size", type=int, default=30)
    p.add_argument("--batch-timeout", type=float, default=600.0)
    p.add_argument("--test-timeout", type=float, default=180.0,
                   help="timeout when re-running a test on its own")
    p.add_argument("--log", type=Path, default=Path("smbtorture.log"),
                   help="full smbtorture output (default ./smbtorture.log)")
    p.add_argument("--filter", help="only run tests whose name contains this string")
    p.add_argument("extra", nargs="*", help="extra smbtorture options (after --)")
    args = p.parse_args()
    if args.password is None:
        p.error("--password or $SMB_PASSWORD is required")

    required, pending = read_list(args.list), read_list(args.pending)
    listing = subprocess.run(["smbtorture", "--list"], capture_output=True, text=True)
    known = listing.stdout.split() if listing.returncode == 0 else []
    problems = check_lists(required, pending, known)
    if problems:
        for msg in problems:
            print(f"run_smbtorture: {msg}", file=sys.stderr)
        return 2

    tests = required + pending
    if args.filter:
        tests = [t for t in tests if args.filter in t]
    started = time.monotonic()
    results: dict[str, list[tuple[str, str]]] = {}
    with open(args.log, "w") as log:
        for i in range(0, len(tests), args.batch_size):
            batch = tests[i:i + args.batch_size]
            results.update(run_batch(args, batch, args.batch_timeout, log))
            for name in batch:
                if name not in results:  # the batch died before reaching it
                    results.update(run_batch(args, [name], args.test_timeout, log))

    counts = {"req_pass": 0, "req_fail": 0, "pend_pass": 0, "pend_fail": 0}
    for name in tests:
        ok, summary = verdict(results.get(name, []))
        kind = "pending " if name in pending else ""
        mark = "PASS" if ok else "FAIL"
        print(f"{mark} {kind}{name}: {summary}")
        key = ("pend_" if kind else "req_") + ("pass" if ok else "fail")
        counts[key] += 1
    elapsed = time.monotonic() - started
    if counts["pend_pass"] + counts["pend_fail"]:
        print(f"smbtorture pending: {counts['pend_pass']} passed, {counts['pend_fail']} failed"
              " (not counted; move passing ones to smbtorture.txt)")
    print(f"smbtorture: {counts['req_pass']} passed, {counts['req_fail']} failed"
          f" ({elapsed:.0f}s; log {args.log})")
    return 0 if counts["req_fail"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
