#!/usr/bin/env python3
"""Run the listed pynfs NFSv4.1 server tests against an NFS server and report.

pynfs (the NFSv4.0/4.1 conformance suite, not packaged) is found at
$BRAID_PYNFS, else at ../shared/pynfs beside the repository. A copy without
its generated XDR code (or whose symbolic links were flattened into files
naming their targets) is copied to target/pynfs/ and built there
(`python3 setup.py build`, which needs Debian's python3-ply).

Tests come from pynfs.txt (the floor: every code must pass) unless --list
names another list (pynfs-pending.txt holds the codes still to reach), or
--codes names codes. One list line: a code, then pynfs's module.test. They
run in one call of nfs4.1/testserver.py with --minorversion 1 (or
--minorversion 2 for the NFSv4.2 list, pynfs-42.txt) --maketree
--json under a timeout (the COUR tests sleep through a 70 s lease each).

A test passed when its JSON entry has no "failure", "error" or "skipped" key
and pynfs's own summary calls it PASS (or WARNING, shown as such): the JSON
alone cannot tell a pass from a test that was not run. A listed code missing
from the results, or pynfs crashing, is a failure. With an empty list the
server only has to answer an NFS NULL call.

Prints `PASS code name` / `FAIL code name: reason` per test, then
`pynfs: N passed, M failed`. Exit status 0 only when every listed test
passed; 3 when pynfs is not found (scripts/test.sh reports that as skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "e2e"))
import nfs_rpc  # noqa: E402  (tests/e2e/nfs_rpc.py)
import servers  # noqa: E402  (tests/e2e/servers.py)

# The reboot tests' lease time: each test sleeps through one, so short. The
# grace period is long, but ends as soon as every recorded client sent
# RECLAIM_COMPLETE, as it does in each REBT test (nfs/state/grace.rs); it
# only has to outlast the slowest reclaim (hundreds of pynfs clients).
REBOOT_LEASE_SECS = 10
REBOOT_GRACE_SECS = 120
PYTHON = "/usr/bin/python3"  # pynfs runs on the system Python (3.11 on Debian 12)
BUILD_DIR = ROOT / "target" / "pynfs"
NOT_FOUND = ("pynfs: not found (set BRAID_PYNFS to a built pynfs checkout, see "
             "tests/conformance/README or the field notes)")
EXIT_NOT_FOUND = 3
# What pynfs's summary prints for a test: "CODE  st_x.testY  : OUTCOME".
OUTCOME_RE = re.compile(r"^(\S+)\s+(\S+)\s+: (PASS|FAILURE|WARNING|OMIT|NOT RUN|RUNNING|"
                        r"WAITING|UNSUPPORTED)\b")


def read_list(path: Path) -> list[tuple[str, str]]:
    """(code, name) of each listed test; `#` starts a comment."""
    if not path.exists():
        return []
    tests = []
    for line in path.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            tests.append((words[0], words[1] if len(words) > 1 else ""))
    return tests


def check_list(label: str, tests: list[tuple[str, str]], known: set[str]) -> list[str]:
    problems, seen = [], set()
    for code, _ in tests:
        if code in seen:
            problems.append(f"{code} is listed twice in {label}")
        seen.add(code)
        if known and code not in known:
            problems.append(f"{code} in {label} is not a code pynfs knows (--showcodes)")
    return problems


def find_pynfs() -> Path | None:
    env = os.environ.get("BRAID_PYNFS")
    candidate = Path(env) if env else ROOT.parent / "shared" / "pynfs"
    if (candidate / "nfs4.1" / "testserver.py").is_file():
        return candidate.resolve()
    return None


def is_built(tree: Path) -> bool:
    return ((tree / "rpc" / "rpc_pack.py").exists()
            and (tree / "nfs4.1" / "xdrdef" / "nfs4_pack.py").exists()
            and (tree / "nfs4.1" / "use_local.py").is_file()
            and not _flattened_links(tree))


def _flattened_links(tree: Path) -> list[tuple[Path, str]]:
    """Files that hold nothing but a relative path to another file of the
    tree: symbolic links a copy flattened (nfs4.0/use_local.py holds
    "../nfs4.1/use_local.py")."""
    found = []
    for path in tree.rglob("*"):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 256:
            continue
        try:
            text = path.read_text().strip()
        except (UnicodeDecodeError, OSError):
            continue
        if (text.startswith("../") or text.startswith("./")) and "\n" not in text \
                and (path.parent / text).exists():
            found.append((path, text))
    return found


def build_pynfs(source: Path, log) -> Path:
    """A built copy of source in target/pynfs (reused while its stamp
    names the same source)."""
    stamp = BUILD_DIR / ".braid-source"
    if stamp.exists() and stamp.read_text() == str(source) and is_built(BUILD_DIR):
        return BUILD_DIR
    shutil.rmtree(BUILD_DIR, ignore_errors=True)
    BUILD_DIR.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, BUILD_DIR, symlinks=True)
    for path in [BUILD_DIR, *BUILD_DIR.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)
    for path, target in _flattened_links(BUILD_DIR):
        path.unlink()
        path.symlink_to(target)
    # setup.py runs each part's setup with `python3` from PATH: the system one.
    env = dict(os.environ, PATH="/usr/bin:/bin:" + os.environ.get("PATH", ""))
    done = subprocess.run([PYTHON, "setup.py", "build"], cwd=BUILD_DIR, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    log.write(f"===== build of {source} in {BUILD_DIR}\n{done.stdout}{done.stderr}\n")
    if done.returncode != 0 or not is_built(BUILD_DIR):
        hint = ("" if subprocess.run([PYTHON, "-c", "import ply"], capture_output=True)
                .returncode == 0 else " (python3-ply is missing: apt-get install python3-ply)")
        raise RuntimeError(f"could not build pynfs from {source} in {BUILD_DIR}{hint}")
    stamp.write_text(str(source))
    return BUILD_DIR


def known_codes(tree: Path) -> set[str]:
    out = subprocess.run([PYTHON, "testserver.py", "--showcodes"], cwd=tree / "nfs4.1",
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError("testserver.py --showcodes failed:\n" + out.stderr[-2000:])
    # One code a line (and a word about gssapi among them).
    return {ln.strip() for ln in out.stdout.splitlines() if re.fullmatch(r"\s*\w+\s*", ln)}


def parse_target(text: str) -> tuple[str, int, str]:
    m = re.fullmatch(r"\[?([^\]]+?)\]?:(\d+)(/.*)", text)
    if not m:
        raise ValueError(f"--target {text!r}: expected HOST:PORT/PATH")
    return m.group(1), int(m.group(2)), m.group(3)


def run_pynfs(tree: Path, target: str, codes: list[str], timeout: float, log,
              out_json: Path, minorversion: int = 1, helper: list[str] | None = None
              ) -> tuple[dict[str, dict], dict[str, str], str | None]:
    """Run codes in one testserver.py call (with `helper`, pynfs's
    --serverhelper and its argument, for the reboot tests). Returns (JSON
    entry by code, summary outcome by code, why pynfs did not finish or
    None)."""
    cmd = [PYTHON, "testserver.py", target, "--minorversion", str(minorversion), "--maketree",
           "--json", str(out_json)]
    if helper:
        cmd += ["--serverhelper", helper[0], "--serverhelperarg", helper[1]]
    cmd += codes
    log.write(f"\n===== {' '.join(cmd)}\n")
    log.flush()
    problem = None
    try:
        done = subprocess.run(cmd, cwd=tree / "nfs4.1", stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        text = done.stdout.decode(errors="replace")
        if done.returncode != 0:
            problem = f"pynfs exited with status {done.returncode}"
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace")
        problem = f"pynfs timed out after {timeout:.0f}s"
    log.write(text)
    if problem:
        log.write(f"\n===== {problem}\n")
    log.flush()
    outcomes = {}
    for line in text.splitlines():
        m = OUTCOME_RE.match(line)
        if m:
            outcomes[m.group(1)] = m.group(3)
    entries: dict[str, dict] = {}
    try:
        data = json.loads(out_json.read_text())
        for case in data.get("testcase", []):
            entries[case.get("code", "")] = case
    except (OSError, ValueError) as e:
        if problem is None:
            problem = f"no JSON results from pynfs ({e})"
        tail = [ln for ln in text.strip().splitlines() if ln.strip()][-1:]
        problem += f": {tail[0].strip()}" if tail else ""
    return entries, outcomes, problem


def verdict(code: str, entries: dict[str, dict], outcomes: dict[str, str],
            problem: str | None) -> tuple[bool, str]:
    entry = entries.get(code)
    if entry is None:
        return False, f"no result ({problem})" if problem else "no result from pynfs"
    for key in ("failure", "error"):
        if key in entry:
            reason = entry[key]
            message = reason.get("message", "") if isinstance(reason, dict) else str(reason)
            first = (message or "").strip().splitlines()
            return False, f"{key}: {first[0] if first else '(no message)'}"
    if "skipped" in entry:
        return False, "skipped (a listed test must run)"
    # The JSON says nothing of a test pynfs did not run (a dependency
    # failed, or the run was cut short): its summary must call it passed.
    outcome = outcomes.get(code)
    if outcome is None:
        return False, (f"not run ({problem})" if problem
                       else "not run (no outcome in pynfs's summary)")
    if outcome not in ("PASS", "WARNING"):
        return False, f"pynfs says {outcome}"
    return True, "warning" if outcome == "WARNING" else "pass"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--start", choices=["braid", "ganesha"],
                   help="start this server (free loopback port, fresh export) for the run,"
                        " stop it after; otherwise give --target of a running one")
    p.add_argument("--target", help="HOST:PORT/PATH of a running NFSv4.1 server")
    p.add_argument("--list", type=Path, default=HERE / "pynfs.txt",
                   help="the codes to run (default tests/conformance/pynfs.txt)")
    p.add_argument("--codes", nargs="+", metavar="CODE", help="run just these codes")
    p.add_argument("--reboot", action="store_true",
                   help="the list holds pynfs's reboot tests (REBT): start Braid with a"
                        " state_dir, a short lease and a long grace time, and let pynfs restart it"
                        " (SIGKILL, then the same command) through reboot_braid.py")
    p.add_argument("--reboot-lease", type=int, default=REBOOT_LEASE_SECS, metavar="SECS",
                   help="with --reboot: Braid's lease time (default %(default)s); its grace"
                        f" time is {REBOOT_GRACE_SECS} s or the lease, whichever is longer")
    p.add_argument("--minorversion", type=int, choices=[1, 2], default=1,
                   help="the NFSv4 minor version pynfs speaks (default 1; pynfs-42.txt"
                        " holds the NFSv4.2 tests, run with 2)")
    p.add_argument("--timeout", type=float, default=1500.0,
                   help="seconds for the pynfs call (default 1500)")
    p.add_argument("--log", type=Path, default=Path("pynfs.log"),
                   help="full pynfs output (default ./pynfs.log)")
    args = p.parse_args()
    if bool(args.start) == bool(args.target):
        p.error("give one of --start or --target")
    if args.reboot and args.start != "braid":
        p.error("--reboot restarts a Braid it starts: give --start braid")

    source = find_pynfs()
    if source is None:
        print(NOT_FOUND)
        return EXIT_NOT_FOUND

    started = time.monotonic()
    args.log.parent.mkdir(parents=True, exist_ok=True)
    with open(args.log, "w") as log:
        try:
            tree = source if is_built(source) else build_pynfs(source, log)
            known = known_codes(tree)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            print(f"run_pynfs: pynfs does not run: {e}")
            print("pynfs: 0 passed, 1 failed")
            return 1
        if args.codes:
            tests = [(c, "") for c in args.codes]
            label = "--codes"
        else:
            tests = read_list(args.list)
            label = args.list.name
        problems = check_list(label, tests, known)
        if problems:
            for msg in problems:
                print(f"run_pynfs: {msg}", file=sys.stderr)
            return 2
        codes = [c for c, _ in tests]

        server, base, died, helper = None, None, False, None
        if args.start:
            base = Path(tempfile.mkdtemp(prefix=f"pynfs-{args.start}-"))
            (base / "export").mkdir()
            (base / "server").mkdir()
            try:
                kwargs = {}
                if args.reboot:
                    (base / "state").mkdir(mode=0o700)
                    grace = max(REBOOT_GRACE_SECS, args.reboot_lease)
                    kwargs["top_config"] = (f'state_dir = "{base / "state"}"\n'
                                            f"nfs_lease_time_secs = {args.reboot_lease}\n"
                                            f"nfs_grace_time_secs = {grace}\n")
                server = servers.start_nfs(args.start, base / "export", base / "server",
                                           **kwargs)
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                print(f"run_pynfs: could not start {args.start}: {e}")
                print(f"server files kept in {base}")
                print(f"pynfs: 0 passed, {max(len(codes), 1)} failed")
                return 1
            target = server.pynfs_target
            print(f"started {args.start} on port {server.port} (pid {server.pid}, "
                  f"log {server.log_path})")
            if args.reboot:
                reboot_state = base / "server" / "reboot.json"
                reboot_state.write_text(json.dumps({
                    "pid": server.pid,
                    # /proc's cmdline ends each argument with a NUL.
                    "argv": servers._cmdline(server.pid)[:-1],
                    "cwd": str(base / "server"), "log": str(server.log_path),
                    "host": server.host, "port": server.port}))
                helper = [str(HERE / "reboot_braid.py"), str(reboot_state)]
        else:
            target = args.target
        try:
            host, port, _ = parse_target(target)
            try:
                reply = nfs_rpc.null_ping(host, port, timeout=10)
                ping = None if reply.ok else f"NULL answered {reply.status} {reply.detail}"
            except (OSError, nfs_rpc.RpcError) as e:
                ping = f"no answer to NULL ({e})"
            if ping is not None or not codes:
                results = None
            else:
                with tempfile.TemporaryDirectory(prefix="pynfs-json-") as tmp:
                    results = run_pynfs(tree, target, codes, args.timeout, log,
                                        Path(tmp) / "out.json", args.minorversion, helper)
        finally:
            if server is not None and helper:
                # The Braid running now is the last one the helper started
                # (the first, killed, is reaped here).
                new_pid = json.loads(reboot_state.read_text())["pid"]
                if new_pid != server.pid and server.proc is not None:
                    server.proc.poll()
                    server.proc = None
                server.pid = new_pid
            if server is not None:
                died = not server.alive()
                if died:
                    print(f"{args.start} server died during the run; log tail:\n"
                          f"{server.log_tail()}")
                server.stop()

    elapsed = time.monotonic() - started
    passed = failed = 0
    if ping is not None:
        print(f"FAIL NULL {target}: {ping}")
        failed = max(len(codes), 1)
    elif results is not None:
        entries, outcomes, problem = results
        if problem:
            print(f"run_pynfs: {problem}")
        for code, name in tests:
            ok, why = verdict(code, entries, outcomes, problem)
            entry = entries.get(code, {})
            shown = name or ".".join(x for x in (entry.get("classname"), entry.get("name")) if x)
            if ok:
                passed += 1
                print(f"PASS {code} {shown}" + (" (pynfs warned)" if why == "warning" else ""))
            else:
                failed += 1
                print(f"FAIL {code} {shown}: {why}")
    if died:
        failed = max(failed, 1)
    if base is not None:
        if failed == 0:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"server files kept in {base}")
    print(f"pynfs against {target}: {elapsed:.0f}s, full output in {args.log}")
    print(f"pynfs: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
