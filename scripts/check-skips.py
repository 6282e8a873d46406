#!/usr/bin/env python3
"""A test that skips where CI expects it to run is a test that passes
without testing. This check fails on either kind (issue 48):

  check-skips.py rust
      A Rust test in the workspace that returns early without a word: a
      `return;` in a crate's tests/ directory, or in a src file's
      `#[cfg(test)]` part, whose block says nothing (no eprintln!,
      println!, panic!, assert!, or a helper named in the allow-list's
      `rust` lines, which print or panic themselves) before it returns.

  check-skips.py pytest --target TARGET JUNIT.xml
      A pytest test (tests/e2e) that skipped, read from pytest's JUnit XML
      (scripts/test.sh writes target/test-logs/e2e.xml), unless the allow-
      list names it for TARGET (braid, samba or ganesha) with the reason
      it is expected to skip there.

The allow-list is tests/e2e/allowed-skips.txt (its header says the
format). Exit status 1 when anything is found, with one line for each.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = ROOT / "tests/e2e/allowed-skips.txt"

# What counts as saying why a test stops early.
SPEAKS = re.compile(r"\b(eprintln|println|panic|assert|assert_eq|assert_ne|unreachable|todo|"
                    r"unimplemented)!")
RETURN = re.compile(r"\breturn\s*[;}]")
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(async\s+)?fn\s+(\w+)")
TEST_ATTR = re.compile(r"^\s*#\[(tokio::)?test\b")
MACRO = re.compile(r"^\s*macro_rules!")


def allow_list() -> tuple[list[str], set[str], list[tuple[str, str, str, str]]]:
    """(Rust helpers that speak, Rust tests exempted (path::fn),
    [(target, test pattern, message part, why)])."""
    helpers, exempt, skips = [], set(), []
    for n, line in enumerate(ALLOWED.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split("|")]
        if fields[0] == "rust" and len(fields) == 3 and fields[1] and fields[2]:
            helpers.append(fields[1])
        elif fields[0] == "rust-test" and len(fields) == 3 and fields[1] and fields[2]:
            exempt.add(fields[1])
        elif fields[0] in ("braid", "samba", "ganesha") and len(fields) == 4 and all(fields):
            skips.append(tuple(fields))
        else:
            sys.exit(f"{ALLOWED}:{n}: not `rust | helper | why`, `rust-test | path::fn | why` nor "
                     f"`target | test pattern | skip message part | why`: {line}")
    return helpers, exempt, skips


# ---- Rust ------------------------------------------------------------------------


def rust_test_sources() -> list[tuple[Path, int]]:
    """(file, first line that is test code) for each Rust file with tests."""
    out = []
    for p in sorted((ROOT / "crates").rglob("*.rs")):
        rel = p.relative_to(ROOT / "crates").parts
        if "target" in rel:
            continue
        if len(rel) > 1 and rel[1] in ("tests", "benches"):
            out.append((p, 1))
            continue
        lines = p.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines, 1):
            if line.strip().startswith("#[cfg(test)]"):
                out.append((p, i))
                break
    return out


def strip(line: str) -> str:
    """The line without its // comment and string literals (roughly)."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    return line.split("//", 1)[0]


def enclosing_test(lines: list[str], i: int) -> str | None:
    """The name of the #[test] function (or "macro_rules") whose body line
    `i` is in, or None if it is in some other function."""
    for j in range(i, -1, -1):
        if MACRO.match(lines[j]):
            return "macro_rules"
        m = FN.match(lines[j])
        if not m:
            continue
        # The function's own attributes, above it.
        k = j - 1
        while k >= 0 and (lines[k].strip().startswith(("#[", "///", "//"))
                          or not lines[k].strip()):
            if TEST_ATTR.match(lines[k]):
                return m.group(4)
            k -= 1
        return None
    return None


def silent_returns(helpers: list[str], exempt: set[str]) -> list[str]:
    found = []
    for path, first in rust_test_sources():
        rel = path.relative_to(ROOT)
        # Helpers named for every file, or (`path: text`) for one.
        mine = [h.split(": ", 1)[1] if ": " in h else h for h in helpers
                if ": " not in h or h.split(": ", 1)[0] == str(rel)]
        speaks = re.compile("|".join([SPEAKS.pattern, *map(re.escape, mine)]))
        lines = path.read_text(errors="replace").splitlines()
        for i in range(first - 1, len(lines)):
            code = strip(lines[i])
            m = RETURN.search(code)
            if not m:
                continue
            # The enclosing block: back to the `{` that opened it.
            depth, j, opener = 0, i, None
            text = code[: m.start()]
            depth -= text.count("}") - text.count("{")
            if depth > 0:
                opener = i
            while opener is None and j > first - 1:
                j -= 1
                c = strip(lines[j])
                depth += c.count("{") - c.count("}")
                if depth > 0:
                    opener = j
            # Only a test's own body counts (or a macro's, which tests
            # expand): helpers return early for their callers' reasons.
            test_fn = enclosing_test(lines, i)
            if test_fn is None:
                continue
            if f"{rel}::{test_fn}" in exempt:
                continue
            block = "\n".join(lines[(opener if opener is not None else i): i + 1])
            # The statement that opened it may be the probe (`let ... else {`
            # after a helper that speaks, on the line before).
            head = lines[opener - 1] if opener else ""
            if speaks.search(block) or speaks.search(head):
                continue
            found.append(f"{rel}:{i + 1}: returns early without a message: {lines[i].strip()}")
    return found


# ---- pytest ----------------------------------------------------------------------


def test_id(case: ET.Element) -> str:
    """module.py::[Class::]name from a JUnit testcase."""
    parts = (case.get("classname") or "").split(".")
    for k, part in enumerate(parts):
        if part.startswith("test_") or part in ("conftest",):
            return "::".join([part + ".py", *parts[k + 1:], case.get("name", "")])
    return "::".join(p for p in [case.get("classname"), case.get("name")] if p)


def unexpected_skips(junit: Path, target: str,
                     skips: list[tuple[str, str, str, str]]) -> tuple[list[str], int]:
    root = ET.parse(junit).getroot()
    found, allowed = [], 0
    for case in root.iter("testcase"):
        sk = case.find("skipped")
        if sk is None:
            continue
        tid = test_id(case)
        message = sk.get("message") or ""
        if any(t == target and fnmatch.fnmatchcase(tid, pat) and part in message
               for t, pat, part, _ in skips):
            allowed += 1
            continue
        found.append(f"{tid}: skipped against {target}, not in {ALLOWED.relative_to(ROOT)}: "
                     f"{message}")
    return found, allowed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("rust", help="Rust tests returning early without a message")
    py = sub.add_parser("pytest", help="pytest skips not allowed for the target")
    py.add_argument("--target", default="braid", choices=["braid", "samba", "ganesha"])
    py.add_argument("junit", type=Path)
    a = ap.parse_args()
    helpers, exempt, skips = allow_list()
    if a.what == "rust":
        found = silent_returns(helpers, exempt)
        for f in found:
            print(f)
        print(f"check-skips rust: {len(found)} silent early return(s)")
        return 1 if found else 0
    if not a.junit.exists():
        print(f"check-skips pytest: {a.junit} does not exist (did pytest run?)")
        return 1
    found, allowed = unexpected_skips(a.junit, a.target, skips)
    for f in found:
        print(f)
    print(f"check-skips pytest ({a.target}): {len(found)} unexpected skip(s), "
          f"{allowed} allowed")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
