#!/usr/bin/env python3
"""Run the listed smbtorture tests against a running SMB server and report.

Tests come from smbtorture.txt (must pass) and smbtorture-pending.txt (run and
reported, but their failures do not fail the run). They are run in batches, one
smbtorture call per batch, each under a timeout; tests of a batch that produced
no result (a hang, a crash) are re-run one by one.

Then, as a user running them would, each one-run list (smbtorture-core.txt and
smbtorture-multichannel.txt, the project brief's lists) runs in a single
smbtorture call in the listed order, and so does each sequence of SEQUENCES
(tests that once failed only after another in the same process); each such run
counts as one test, passed when every test in it passed.

Prints one line per test, then `smbtorture: N passed, N failed` (counting the
required tests and the one-run checks; pending ones are summarised separately)
and `smbtorture skipped: N`, each skipped test on a `SKIP` line. Exit status 0
only when every required test passed. Only `success` passes: a skip, an xfail
or a listed suite reporting fewer sub-tests than its list records is a failure
(a required test must run, all of it), and so is a call of smbtorture that
exits non-zero with no test failed, and a list that `smbtorture --list` cannot
check.

Lists: one name per line; `#` starts a comment. A name that stands for more
than one test (a suite, as `smbtorture --list` shows) records how many in a
comment starting with the count, e.g. `smb2.lock  # 25 tests`."""

from __future__ import annotations

import argparse
import secrets
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
import servers  # noqa: E402  (tests/e2e/servers.py)
# A test name may contain spaces ("smb2.ioctl.copy-chunk streams"): the name
# runs up to the " [" that starts a reason, or to the end of the line.
RESULT_RE = re.compile(r"^(success|failure|error|skip|xfail|uxsuccess): (.+?)((?: \[.*)?)$")


COUNT_RE = re.compile(r"^\s*(\d+) tests?\b")


def read_entries(path: Path) -> list[tuple[str, int | None]]:
    """(name, recorded sub-test count or None) for each listed test."""
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        name, _, comment = line.partition("#")
        name = name.strip()
        if name:
            m = COUNT_RE.match(comment)
            entries.append((name, int(m.group(1)) if m else None))
    return entries


def read_list(path: Path) -> list[str]:
    return [name for name, _ in read_entries(path)]


def known_under(name: str, known: list[str]) -> int:
    """How many of smbtorture's tests a listed name stands for."""
    return sum(1 for k in known if k == name or k.startswith(name + "."))


def check_lists(lists: dict[str, list[tuple[str, int | None]]], known: list[str],
                exclusive: tuple[str, str] = ("smbtorture.txt", "smbtorture-pending.txt")
                ) -> list[str]:
    """Problems with the lists: a name listed twice in one list or in both
    exclusive lists, a name smbtorture does not know, a suite whose recorded
    count is missing or not what `smbtorture --list` says."""
    problems = []
    for label, entries in lists.items():
        seen = set()
        for n, count in entries:
            if n in seen:
                problems.append(f"{n} is listed twice in {label}")
            seen.add(n)
            under = known_under(n, known)
            if under == 0:
                problems.append(f"{n} is not a test smbtorture knows (smbtorture --list)")
            elif under > 1 and count != under:
                problems.append(f"{n} in {label} stands for {under} tests (smbtorture --list):"
                                f" record it as `{n}  # {under} tests`")
            elif under == 1 and count not in (None, 1):
                problems.append(f"{n} in {label} is one test, not {count}")
    a, b = (set(n for n, _ in lists.get(x, [])) for x in exclusive)
    for n in sorted(a & b):
        problems.append(f"{n} is in both {exclusive[0]} and {exclusive[1]}")
    return problems


def owner(result_name: str, names: list[str]) -> str | None:
    """The listed name a result belongs to (a listed suite owns its sub-tests)."""
    if result_name.startswith("rpc."):
        # smbtorture names a selected RPC test with its test case twice
        # ("rpc.srvsvc.srvsvc (admin access).srvsvc (admin access).NetSessEnum").
        parts = result_name.split(".")
        result_name = ".".join(p for i, p in enumerate(parts) if i == 0 or p != parts[i - 1])
    for n in names:
        if result_name == n or result_name.startswith(n + "."):
            return n
    return None


# Tests that need a share configured their own way, as Samba's selftest
# runs them (run with --start, the server has these shares):
# smb2.acls_non_canonical expects DACL inheritance bits kept as sent.
# smb2.create_no_streams expects a share without named streams.
# Persistent handles need a continuously available share ("ca").
TEST_SHARES = {"smb2.durable-v2-open.persistent-open-oplock": "ca",
               "smb2.durable-v2-open.persistent-open-lease": "ca", "smb2.replay.replay5": "ca",
               "smb2.acls_non_canonical": "noncanon", "smb2.create_no_streams": "nostreams",
               "smb2.twrp": "snaps", "smb2.ioctl.shadow_copy": "snaps",
               "vfs.fruit": "fruit", "vfs.fruit_timemachine": "timemachine",
               "vfs.fruit_file_id": "zerofileid", "vfs.fruit_conversion": "adconvert_plain",
               "smb2.change_notify_disabled": "nonotify", "vfs.fruit_netatalk": "netatalk",
               "vfs.unfruit": "fruit"}

# Previous versions (smb2.twrp): the snapshot seed_snapshots makes in the
# "snaps" share, and what smbtorture is told to find in it.
SNAPSHOT = "@GMT-2015.10.31-19.40.30"
SNAPSHOT_STREAM = b"stream data as of the snapshot\n"
TWRP = [f"--option=torture:twrp_snapshot={SNAPSHOT}",
        "--option=torture:twrp_file=foo",
        "--option=torture:twrp_stream=bar",
        f"--option=torture:twrp_stream_size={len(SNAPSHOT_STREAM)}"]


# Tests that take a channel down: smbtorture drops the client's packets on
# one connection with iptables (as root; scripts/test.sh installs it), and
# the server must notice that its break was not acknowledged and send it on
# another channel. Without iptables smbtorture would ask for a Samba-only
# test FSCTL instead.
IPTABLES = ["--option=torture:use_iptables=yes"]
BLOCKING_TESTS = (
    "smb2.multichannel.oplocks.test2",
    "smb2.multichannel.oplocks.test3_specification",
    "smb2.multichannel.leases.test2",
    "smb2.multichannel.leases.test4",
    "smb2.oplock.batch22b",
    "smb2.replay.dhv2-pending3n-vs-oplock-sane",
    "smb2.replay.dhv2-pending3n-vs-lease-sane",
    "smb2.replay.dhv2-pending3l-vs-oplock-sane",
    "smb2.replay.dhv2-pending3l-vs-lease-sane",
    "smb2.replay.dhv2-pending3o-vs-oplock-sane",
    "smb2.replay.dhv2-pending3o-vs-lease-sane",
)
TEST_OPTIONS = {name: IPTABLES for name in BLOCKING_TESTS}
TEST_OPTIONS["smb2.twrp"] = TWRP
# vfs.fruit's two-share tests reach the same directory without Apple's
# extensions through share2.
TEST_OPTIONS["vfs.fruit"] = ["--option=torture:share2=nofruit"]
# vfs.fruit_conversion writes a macOS ._ file through a share without
# Apple's rules and has it converted through share2, which deletes the ._
# files conversion leaves empty.
TEST_OPTIONS["vfs.fruit_conversion"] = ["--option=torture:share2=adconvert",
                                        "--option=torture:delete_empty_adfiles=true"]
# vfs.fruit_netatalk sets Netatalk's metadata xattr on the share's files
# itself, as Netatalk would: localdir is that share's directory.
TEST_OPTIONS["vfs.fruit_netatalk"] = ["--option=torture:localdir={options}/netatalk"]
# vfs.unfruit converts a file's streams back into an AppleDouble file with
# Samba's `net --recursive vfs stream2adouble SHARE PATH` and reads the
# result through share2, which does not convert: {net} is a script that
# runs `braid vfs stream2adouble` (or Samba's own net) on the server's
# config (write_net_wrapper).
TEST_OPTIONS["vfs.unfruit"] = ["--option=torture:share2=nofruit", "--option=torture:net={net}",
                               "--option=torture:sharename=fruit"]
# The load tests run for torture:timelimit seconds (10 by default): what
# they check (every open, echo and oplock break answered as it should be)
# shows within 3.
TEST_OPTIONS["smb2.bench"] = ["--option=torture:timelimit=3"]
TEST_OPTIONS["smb2.create.bench-path-contention-shared"] = ["--option=torture:timelimit=3"]
# libsmbclient.*: Samba's client library, which GNOME's gvfs and KDE's kio
# use, over SMB3, with torture:smburl as Samba's selftest sets it: the share
# ({url} is smb://user:password@host:port), the server alone for
# list_shares (it wants IPC$ among the shares srvsvc lists), a file for
# utimes. Only the tests that reach the server are listed: version,
# initialize, configuration, setConfiguration and options test the library
# alone, and opendir browses the workgroup over NetBIOS.
LIBSMBCLIENT = "--option=torture:clientprotocol=SMB3"
TEST_OPTIONS["libsmbclient"] = [LIBSMBCLIENT, "--option=torture:smburl={url}/{share}"]
TEST_OPTIONS["libsmbclient.list_shares"] = [LIBSMBCLIENT, "--option=torture:smburl={url}"]
TEST_OPTIONS["libsmbclient.utimes"] = [LIBSMBCLIENT,
                                       "--option=torture:smburl={url}/{share}/utimes.txt"]


def write_net_wrapper(kind: str, server, base: Path) -> Path:
    """What smbtorture runs as Samba's `net` (vfs.unfruit): `$net
    --recursive vfs stream2adouble SHARE PATH` on this server's shares."""
    script = base / "net"
    if kind == "braid":
        body = (f'[ "$1" = --recursive ] && {{ shift; rec=--recursive; }}\n'
                f'[ "$1" = vfs ] || exit 2\n'
                f'shift\n'
                f'exec {servers.BRAID_BIN} vfs "$1" ${{rec:-}} '
                f'--config {server.workdir / "braid.toml"} "$2" "$3"\n')
    else:
        body = f'exec net -s {server.workdir / "smb.conf"} "$@"\n'
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script


def seed_snapshots(server, share_dir: Path) -> None:
    """Give the "snaps" share a file with a stream and a subdirectory, made
    through the server (so the stream is stored as that server stores
    streams), then a snapshot of it, as a backup tool would make one: a copy
    of the tree with its xattrs in .snapshots/@GMT-..., the subdirectory's
    file hard-linked, as rsync --link-dest makes unchanged files."""
    with tempfile.TemporaryDirectory() as tmp:
        data, stream = Path(tmp) / "data", Path(tmp) / "stream"
        data.write_bytes(b"the file as of the snapshot\n")
        stream.write_bytes(SNAPSHOT_STREAM)
        subprocess.run(["smbclient", f"//{server.host}/snaps", "-p", str(server.port),
                        "-U", f"{server.user}%{server.password}",
                        "-c", f"put {data} foo; put {stream} foo:bar; mkdir subdir; "
                              f"put {data} subdir\\hardlink"],
                       check=True, capture_output=True, timeout=60)
    snap = share_dir / servers.SNAPSHOT_DIR / SNAPSHOT
    (snap / "subdir").mkdir(parents=True)
    subprocess.run(["cp", "-a", str(share_dir / "foo"), str(snap / "foo")], check=True)
    os.link(share_dir / "subdir" / "hardlink", snap / "subdir" / "hardlink")
    servers.give_to_share_owner(share_dir, share_dir / servers.SNAPSHOT_DIR)


def matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def share_for(args, name: str) -> str:
    for prefix, share in TEST_SHARES.items():
        if matches(name, prefix):
            return share
    return args.share


# smb2.multichannel.bugs.bug_15346 opens its 31 extra channels to port 445
# of the host, whatever -p says. Such a test connects to an address of its
# own in 127/8, which an iptables DNAT rule (as root, for the batch only)
# sends to the server's address and port, so the server's own port and
# anything else listening on port 445 stay as they are.
PORT_445_TESTS = ("smb2.multichannel.bugs.bug_15346",)


def needs_port_445(name: str) -> bool:
    return any(matches(name, prefix) for prefix in PORT_445_TESTS)


# A test that blocks a channel races with the client's own delayed ACK: the
# last response on a channel (multichannel.leases.test4: the CREATE on
# channel 1, answered just before smbtorture blocks it) may still be
# unacknowledged when the block starts. The server's kernel then
# retransmits it unanswered, and after that retransmission timeout the
# congestion window of one segment keeps the break behind it unsent: the
# client never sees a break on that channel, and the next channel's break
# arrives out of the order the test wants (1 run of 6 on a loaded machine,
# 2026-11-26; with the route below, 20 of 20 passed). No server can send past its own TCP stack, and Samba's CI
# avoids iptables for these tests (a test-only FSCTL instead). So such a
# test also connects to its own address, whose route (for the batch only)
# has the client acknowledge every segment at once (`ip route ... quickack
# 1`): what smbtorture received has been acknowledged before it blocks.
def needs_quickack(name: str) -> bool:
    return any(matches(name, prefix) for prefix in BLOCKING_TESTS)


def alias_host(args) -> str:
    """An address per server port, so that runners side by side do not meet."""
    return f"127.45.{args.port // 256}.{args.port % 256}"


def host_for(args, name: str) -> str:
    aliased = needs_port_445(name) or needs_quickack(name)
    return alias_host(args) if aliased else args.host


def binding_for(args, name: str) -> str:
    """What smbtorture connects to: a share, or for the RPC tests the named
    pipes on IPC$ over SMB2."""
    if name.startswith("rpc."):
        return f"ncacn_np:{args.host}[smb2]"
    return f"//{host_for(args, name)}/{share_for(args, name)}"


def nat_rule(args, action: str) -> list[str]:
    return ["iptables", "-t", "nat", action, "OUTPUT", "-d", f"{alias_host(args)}/32",
            "-p", "tcp", "-j", "DNAT", "--to-destination", f"{args.host}:{args.port}",
            "-m", "comment", "--comment", "braid-smbtorture-alias"]


def quickack_route(args, action: str) -> list[str]:
    return ["ip", "route", action, "table", "local", "local", f"{alias_host(args)}/32",
            "dev", "lo", "quickack", "1"]


def change_host(command: list[str], what: str, log) -> bool:
    """Run a command that changes the host for a batch; log why it failed."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        log.write(f"===== {what} failed: {done.stderr.strip()}\n")
    return done.returncode == 0


def options_for(name: str) -> list[str]:
    """The options of the longest listed prefix of name."""
    best = max((p for p in TEST_OPTIONS if matches(name, p)), key=len, default=None)
    return TEST_OPTIONS[best] if best is not None else []


def expand(option: str, args) -> str:
    """Fill in what a test's options need from the running server."""
    return (option.replace("{options}", str(args.options_dir))
            .replace("{net}", str(args.net))
            .replace("{url}", f"smb://{quote(args.user, safe='')}:{quote(args.password, safe='')}"
                              f"@{args.host}:{args.port}")
            .replace("{share}", args.share))


def redact(text: str, args) -> str:
    """The log keeps no password, the smburl's and the second user's included."""
    for secret in (args.password, quote(args.password or "", safe=""), args.password2):
        if secret:
            text = text.replace(secret, "****")
    return text


def run_batch(args, names: list[str], timeout: float, log, plain: bool = False):
    """Run names (all on one share) in one smbtorture call; plain: on the
    default share with no options of the runner's, as a user would.

    Returns {listed name: [(status, detail)]}: the results of each listed
    name's tests; the test that was running when smbtorture stopped without
    finishing it gets an error, and when smbtorture exits non-zero without a
    test failed, every test that reported gets one too."""
    if plain:
        target, extra = f"//{args.host}/{args.share}", []
    else:
        target = binding_for(args, names[0])
        own = [expand(o, args) for o in options_for(names[0])]
        extra = args.extra
        if any(o.startswith("--option=torture:localdir=") for o in own):
            extra = [o for o in extra if not o.startswith("--option=torture:localdir=")]
        extra = extra + own
    # Some tests make scratch directories in --basedir (default: the current
    # directory, here the repository).
    cmd = ["smbtorture", target, "-p", str(args.port), f"--basedir={args.scratch}",
           "-U", f"{args.user}%{args.password}", "--fullname", *extra, *names]
    log.write(redact(f"\n===== smbtorture {target} -p {args.port} "
                     f"{' '.join(extra + names)}\n", args))
    log.flush()
    nat = not plain and host_for(args, names[0]) != args.host
    nat = nat and change_host(nat_rule(args, "-A"), "iptables DNAT to the server", log)
    quickack = nat and needs_quickack(names[0])
    quickack = quickack and change_host(quickack_route(args, "add"), "quickack route", log)
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout)
        out, rc, timed_out = done.stdout, done.returncode, False
    except subprocess.TimeoutExpired as e:
        out, rc, timed_out = e.stdout or b"", None, True
    finally:
        if quickack:
            subprocess.run(quickack_route(args, "del"), capture_output=True)
        if nat:
            subprocess.run(nat_rule(args, "-D"), capture_output=True)
    text = out.decode(errors="replace")
    log.write(redact(text, args))
    if timed_out:
        log.write(f"\n===== timed out after {timeout:.0f}s\n")
    else:
        log.write(f"\n===== smbtorture exited {rc}\n")
    log.flush()

    results: dict[str, list[tuple[str, str]]] = {}
    running = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("test: "):
            running = owner(line[6:].strip(), names)
            continue
        m = RESULT_RE.match(line)
        if not m:
            continue
        status, name, detail = m.groups()
        if detail.strip() == "[":  # multi-line reason, up to a line "]"
            reason = []
            for follow in lines[i + 1:]:
                if follow == "]":
                    break
                reason.append(follow.strip())
            detail = " ".join(reason)
        listed = owner(name, names)
        if listed is not None:
            results.setdefault(listed, []).append((status, detail.strip(" []")))
        running = None
    if running is not None:
        reason = f"timed out after {timeout:.0f}s" if timed_out else "smbtorture died"
        results.setdefault(running, []).append(("error", reason))
    elif rc and all(s == "success" for outs in results.values() for s, _ in outs):
        # Every test passed, yet smbtorture says something failed (a crash
        # after the last result, a failure outside the listed names).
        for outs in results.values():
            outs.append(("error", f"smbtorture exited {rc} with no test failed"))
    return results


# rpc.mgmt points torture:binding at each pipe it maps (lpcfg_set_cmdline),
# so every later test of its smbtorture run would connect to the last of
# them. smb2.multichannel.oplocks.test3_specification asserts that no lease
# break has been counted without resetting smbtorture's global count, so
# after any test with lease breaks in its process (leases.test4 has 32) it
# fails at its first check. Each runs in a batch of its own.
SOLO_TESTS = ("rpc.mgmt", "smb2.multichannel.oplocks.test3_specification")


def run_all(args, tests: list[str], log) -> dict[str, list[tuple[str, str]]]:
    """Run tests in batches; a batch cut short by a hang or crash is resumed
    after the test that was running."""
    deadline = time.monotonic() + args.total_timeout
    results: dict[str, list[tuple[str, str]]] = {}
    # Each batch runs on one share with one set of options: the tests are
    # grouped by both, in the order each group first appears in the list.
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for t in tests:
        solo = (t,) if any(matches(t, p) for p in SOLO_TESTS) else ()
        groups.setdefault((binding_for(args, t), tuple(options_for(t)) + solo), []).append(t)
    batches = [g[i:i + args.batch_size] for g in groups.values()
               for i in range(0, len(g), args.batch_size)]
    for queue in batches:
        while queue:
            left = deadline - time.monotonic()
            if left <= 0:
                for name in queue:
                    results[name] = [("error", f"not run: total timeout {args.total_timeout:.0f}s")]
                break
            got = run_batch(args, queue, min(args.batch_timeout, left), log)
            results.update(got)
            remaining = [n for n in queue if n not in results]
            if remaining and len(remaining) == len(queue):
                # No progress at all (e.g. smbtorture refused to start): give up on
                # the first one so that the loop always advances.
                results[remaining[0]] = [("error", "no result from smbtorture")]
                remaining = remaining[1:]
            queue = remaining
    return results


def verdict(outcomes: list[tuple[str, str]], expected: int = 1) -> tuple[bool, str]:
    """Passed only when every result is `success` (not `xfail`, not `skip`)
    and at least the expected number of sub-tests reported."""
    if not outcomes:
        return False, "no result (timeout or crash)"
    bad = [(s, d) for s, d in outcomes if s != "success"]
    if not bad and len(outcomes) < expected:
        return False, (f"only {len(outcomes)} of its {expected} tests reported"
                       " (smbtorture stopped between two?)")
    if not bad:
        return True, "success" if len(outcomes) == 1 else f"success ({len(outcomes)} tests)"
    status, detail = bad[0]
    summary = f"{status}" + (f": {detail}" if detail else "")
    if len(outcomes) > 1 or expected > 1:
        summary += f" ({len(bad)} of {max(len(outcomes), expected)} tests not passed)"
    return False, summary


# Sequences run in one smbtorture call each, in this order, on the default
# share: tests that once failed only after others in the same process.
SEQUENCES = {
    # Issue 47: smbtorture 4.17's smb2.getinfo.fsinfo leaves a second
    # connection's handle to the share root open (SYNCHRONIZE |
    # READ_ATTRIBUTES | LIST_DIRECTORY, sharing READ | DELETE) for the rest
    # of the process; renames into the root must not fail on it.
    "root-handle-then-renames": ["smb2.getinfo.fsinfo", "smb2.rename.rename_dir_bench",
                                 "smb2.rename.close-full-information"],
}


def run_one(args, label: str, entries: list[tuple[str, int | None]], log):
    """Run a list in a single smbtorture call, in its order, as a user would.
    Returns (passed, summary, [(name, ok, why)], skips)."""
    names = [n for n, _ in entries]
    started = time.monotonic()
    log.write(f"\n===== one run: {label} ({len(names)} tests)\n")
    results = run_batch(args, names, args.one_run_timeout, log, plain=True)
    rows = []
    for n, count in entries:
        ok, why = verdict(results.get(n, []), count or 1)
        rows.append((n, ok, why))
    skips = [(n, d) for n, _ in entries for s, d in results.get(n, []) if s == "skip"]
    bad = [r for r in rows if not r[1]]
    took = time.monotonic() - started
    if bad:
        return False, f"{len(bad)} of {len(names)} tests not passed in one call ({took:.0f}s)", \
            rows, skips
    return True, f"{len(names)} tests in one smbtorture call ({took:.0f}s)", rows, skips


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--start", choices=["braid", "samba"],
                   help="start this server (free port, fresh share) for the run, stop it after;"
                        " otherwise give --port, --user and --password of a running one")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int)
    p.add_argument("--share", default="share")
    p.add_argument("--user")
    p.add_argument("--password", default=os.environ.get("SMB_PASSWORD"),
                   help="default: $SMB_PASSWORD")
    p.add_argument("--list", type=Path, default=HERE / "smbtorture.txt")
    p.add_argument("--pending", type=Path, default=HERE / "smbtorture-pending.txt")
    p.add_argument("--batch-size", type=int, default=30)
    p.add_argument("--batch-timeout", type=float, default=300.0,
                   help="seconds for one smbtorture call (default 300)")
    p.add_argument("--total-timeout", type=float, default=1200.0,
                   help="tests not started by then are failed as not run (default 1200)")
    p.add_argument("--log", type=Path, default=Path("smbtorture.log"),
                   help="full smbtorture output (default ./smbtorture.log)")
    p.add_argument("--one-run", type=Path, action="append", dest="one_run",
                   help="a list to run in a single smbtorture call as well (repeatable;"
                        " default: smbtorture-core.txt and smbtorture-multichannel.txt)")
    p.add_argument("--no-one-run", action="store_true",
                   help="run neither the one-run lists nor SEQUENCES")
    p.add_argument("--one-run-timeout", type=float, default=900.0,
                   help="seconds for each single-call run (default 900)")
    p.add_argument("--filter", help="only run tests whose name contains this string"
                                    " (and the one-run lists and sequences whose name does)")
    p.add_argument("extra", nargs="*", help="extra smbtorture options (after --)")
    args = p.parse_args()
    # The directory of the option shares, for tests that reach their files
    # (known once the runner started the server).
    args.options_dir = None
    args.net = None
    args.password2 = None
    if not args.start and None in (args.port, args.user, args.password):
        p.error("give --start, or --port, --user and --password (or $SMB_PASSWORD)")

    req_entries, pend_entries = read_entries(args.list), read_entries(args.pending)
    required, pending = [n for n, _ in req_entries], [n for n, _ in pend_entries]
    expected = {n: c or 1 for n, c in req_entries + pend_entries}
    one_runs: dict[str, list[tuple[str, int | None]]] = {}
    if not args.no_one_run:
        for path in args.one_run or [HERE / "smbtorture-core.txt",
                                     HERE / "smbtorture-multichannel.txt"]:
            if not path.exists():
                print(f"run_smbtorture: one-run list {path} not found", file=sys.stderr)
                return 2
            one_runs[path.name] = read_entries(path)
        for label, names in SEQUENCES.items():
            one_runs[f"sequence {label}"] = [(n, None) for n in names]
    if args.filter:
        one_runs = {k: v for k, v in one_runs.items() if args.filter in k}
    try:
        listing = subprocess.run(["smbtorture", "--list"], capture_output=True, text=True,
                                 timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"run_smbtorture: smbtorture --list failed: {e}", file=sys.stderr)
        return 2
    # One test per line; names may contain spaces.
    known = [ln.strip() for ln in listing.stdout.splitlines() if ln.strip()]
    if listing.returncode != 0 or not known:
        print(f"run_smbtorture: smbtorture --list failed (exit {listing.returncode}):"
              f" the listed names cannot be checked\n{listing.stderr.strip()[-2000:]}",
              file=sys.stderr)
        return 2
    problems = check_lists({args.list.name: req_entries, args.pending.name: pend_entries,
                            **one_runs}, known, (args.list.name, args.pending.name))
    if problems:
        for msg in problems:
            print(f"run_smbtorture: {msg}", file=sys.stderr)
        return 2

    tests = required + pending
    if args.filter:
        tests = [t for t in tests if args.filter in t]
    started = time.monotonic()
    server, died = None, False
    if args.start:
        base = Path(tempfile.mkdtemp(prefix=f"smbtorture-{args.start}-"))
        (base / "share").mkdir()
        (base / "server").mkdir()
        (base / "hideunread").mkdir()
        (base / "noncanon").mkdir()
        (base / "nostreams").mkdir()
        (base / "snaps").mkdir()
        (base / "noperm").mkdir()
        (base / "options").mkdir()
        try:
            # smb2.dosmode expects "hidefile" hidden by the share's rules;
            # smb2.acls.ACCESSBASED needs an access-based share "hideunread".
            server = servers.start(args.start, base / "share", base / "server",
                                   user2=("braidtest2", "Pw2-" + secrets.token_hex(8)),
                                   hide_files=("hidefile",),
                                   abe_share=("hideunread", base / "hideunread"),
                                   noncanonical_share=("noncanon", base / "noncanon"),
                                   nostreams_share=("nostreams", base / "nostreams"),
                                   snapshot_share=("snaps", base / "snaps"),
                                   # smb2.ioctl.bug14788.*: IOCTLs on a tree
                                   # whose files the user may not touch.
                                   noperm_share=("noperm", base / "noperm"),
                                   # vfs.fruit*: macOS clients' extensions;
                                   # a share without change notification.
                                   option_shares=base / "options")
            seed_snapshots(server, base / "snaps")
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            if server is not None:
                server.stop()
            print(f"run_smbtorture: could not start {args.start}: {e}")
            print(f"smbtorture: 0 passed, {len(required)} failed (server did not start)")
            return 1
        args.host, args.port, args.share = server.host, server.port, server.share
        args.user, args.password = server.user, server.password
        # kernel_oplocks8 and localposixlock1 reach the share's files directly,
        # as a local process would, to take kernel leases and POSIX locks.
        args.extra = [f"--option=torture:localdir={base / 'share'}", *args.extra]
        args.options_dir = base / "options"
        args.net = write_net_wrapper(args.start, server, base)
        if server.user2 is not None:
            args.password2 = server.user2[1]
            args.extra = [f"--option=torture:user2name={server.user2[0]}",
                          f"--option=torture:user2password={server.user2[1]}", *args.extra]
        print(f"started {args.start} on port {server.port} (pid {server.pid}, log {server.log_path})")
    try:
        with open(args.log, "w") as log, tempfile.TemporaryDirectory(
                prefix="smbtorture-scratch-") as scratch:
            args.scratch = scratch
            results = run_all(args, tests, log)
            one_results = {label: run_one(args, label, entries, log)
                           for label, entries in one_runs.items()}
    finally:
        if server is not None:
            died = not server.alive()
            if died:
                print(f"{args.start} server died during the run; log tail:\n{server.log_tail()}")
            server.stop()

    counts = {"req_pass": 0, "req_fail": 0, "pend_pass": 0, "pend_fail": 0}
    skips = []
    pending_set = set(pending)
    for name in tests:
        ok, summary = verdict(results.get(name, []), expected.get(name, 1))
        kind = "pending " if name in pending_set else ""
        mark = "PASS" if ok else "FAIL"
        print(f"{mark} {kind}{name}: {summary}")
        key = ("pend_" if kind else "req_") + ("pass" if ok else "fail")
        counts[key] += 1
        skips += [(f"{kind}{name}", d) for s, d in results.get(name, []) if s == "skip"]
    for label, (ok, summary, rows, one_skips) in one_results.items():
        print(f"{'PASS' if ok else 'FAIL'} one run of {label}: {summary}")
        for name, row_ok, why in rows:
            if not row_ok:
                print(f"    FAIL {name}: {why}")
        counts["req_pass" if ok else "req_fail"] += 1
        skips += [(f"{name} (one run of {label})", d) for name, d in one_skips]
    for name, detail in skips:
        print(f"SKIP {name}" + (f": {detail}" if detail else ""))
    print(f"smbtorture skipped: {len(skips)} (a skipped required test fails)")
    elapsed = time.monotonic() - started
    if counts["pend_pass"] + counts["pend_fail"]:
        print(f"smbtorture pending: {counts['pend_pass']} passed, {counts['pend_fail']} failed"
              " (not counted; move passing ones to smbtorture.txt)")
    print(f"smbtorture: {counts['req_pass']} passed, {counts['req_fail']} failed"
          f" ({elapsed:.0f}s; log {args.log})")
    if server is not None:
        if counts["req_fail"] == 0 and not died:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"server files kept in {base}")
    return 0 if counts["req_fail"] == 0 and not died else 1


if __name__ == "__main__":
    sys.exit(main())
