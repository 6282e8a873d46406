#!/usr/bin/env bash
# Braid's test command: everything CI runs (.ci/run calls this).
#
#   scripts/test.sh
#
# On a Debian 12 machine, as root, it installs what is missing (Samba's smbd
# and VFS modules, smbclient and smbtorture; iptables, with which smbtorture
# takes channels down, and iproute2; qemu and a static busybox, with which the
# Linux kernel's SMB3 and NFSv4.1 clients run in a VM, and Debian's kernel
# package, unpacked; nfs-ganesha and its VFS back end, the NFS peer; python3-ply
# and python3-setuptools, with which run_pynfs.py builds its copy of pynfs;
# Python's smbprotocol, pytest and nfs-rs, an independent NFSv4.1 client),
# then runs:
#   1. cargo fmt --check, cargo clippy -D warnings, no silent early return in a
#      Rust test (scripts/check-skips.py rust), cargo test --workspace
#   2. cargo build --release -p braid
#   3. the end-to-end suites (tests/e2e, pytest) against target/release/braid,
#      failing on any skip tests/e2e/allowed-skips.txt does not list for the target,
#      NFS ones (test_nfs_*.py: the kernel's NFSv4.1 client in the VM) included
#   4. the smbtorture conformance list (tests/conformance) against it, and
#      its smb2.create and smb2.rename suites again with the metadata cache
#      off (--no-metadata-cache; it is on by default)
#   5. the pynfs NFSv4.1 conformance list (tests/conformance/pynfs.txt), the
#      NFSv4.2 list (pynfs-42.txt, Braid only) and the reboot list
#      (pynfs-reboot.txt, Braid killed and restarted by pynfs) against
#      it (about 7 minutes for the full list); pynfs is not packaged: it is
#      found at $BRAID_PYNFS or ../shared/pynfs, and when it is not there the
#      step shows as SKIPPED in the summary, counted neither passed nor failed
# and ends with a summary, one line per step with its counts (skips included:
# the tests a step skipped are listed at the end of its log) and a last line
# "N passed, N failed".
# Exit status is non-zero if anything failed.
#
# Environment:
#   BRAID_E2E_TARGET=samba  run steps 3-4 against Samba's smbd instead (to check
#                           the harness itself); default braid
#   BRAID_E2E_TARGET=ganesha
#                           run the NFS tests of step 3 and step 5 against
#                           nfs-ganesha instead (the SMB ones skip)
#   SKIP_CARGO=1            skip the cargo steps (only with a target other than braid)
#   BRAID_PYNFS=DIR         a pynfs checkout (default ../shared/pynfs)
#   BRAID_TEST_LOGS=DIR     where step logs go (default target/test-logs)
#
# Rust must already be installed (rustup: https://rustup.rs); the script looks in
# ~/.cargo/bin when cargo is not on PATH.

set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TARGET=${BRAID_E2E_TARGET:-braid}
SKIP_CARGO=${SKIP_CARGO:-0}
LOGS=${BRAID_TEST_LOGS:-$ROOT/target/test-logs}
mkdir -p "$LOGS"
export BRAID_E2E_TARGET=$TARGET

PASSED=0
FAILED=0
SKIPS=0
SUMMARY=()
START=$SECONDS

say() { printf '\n==== %s\n' "$*"; }

# record NAME PASSED FAILED SECONDS [SKIPPED]: SKIPPED tests (default 0)
# were skipped in the step, shown beside its counts (a step counts a
# skipped test it requires as failed too); its log lists them.
record() {
    PASSED=$((PASSED + $2))
    FAILED=$((FAILED + $3))
    SKIPS=$((SKIPS + ${5:-0}))
    SUMMARY+=("$(printf '%-28s %5d passed %5d failed %5d skipped %6ds' \
        "$1" "$2" "$3" "${5:-0}" "$4")")
}

# run_pynfs_list NAME LIST MINOR [OPTION...]: one pynfs list against $TARGET,
# recorded as NAME; OPTIONs go to run_pynfs.py (--reboot).
run_pynfs_list() {
    local name=$1 list=$2 minor=$3 t0 rc np nf ns
    shift 3
    say "$name: $list against $TARGET (minor version $minor)"
    t0=$SECONDS
    timeout --kill-after=30 1800 python3 tests/conformance/run_pynfs.py --start "$TARGET" \
        --list "$list" --minorversion "$minor" "$@" \
        --log "$LOGS/$name.log" >"$LOGS/$name-results.txt" 2>&1
    rc=$?
    grep -v '^PASS ' "$LOGS/$name-results.txt"
    if [ $rc -eq 3 ]; then
        skipped "$name" "$(sed -nE 's/^pynfs: (not found.*)/pynfs \1/p' "$LOGS/$name-results.txt" \
            | head -n 1)"
        return
    fi
    read -r np nf < <(sed -nE 's/^pynfs: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' \
        "$LOGS/$name-results.txt" | tail -n 1)
    np=${np:-0} nf=${nf:-0}
    # run_pynfs.py fails a skipped test; shown as skipped here too.
    ns=$(grep -E '^FAIL .*: skipped' "$LOGS/$name-results.txt" |
        list_skips "$LOGS/$name.log" "skipped $name tests")
    if [ $rc -ne 0 ] && [ "$nf" -eq 0 ]; then
        nf=1
        echo "$name: runner exited $rc (see $LOGS/$name-results.txt)"
    fi
    record "$name" "$np" "$nf" $((SECONDS - t0)) "$ns"
}

# list_skips LOG TITLE: append the lines of stdin (the skipped tests) to LOG
# under TITLE, and print their number.
list_skips() {
    local lines n=0
    lines=$(cat)
    [ -n "$lines" ] && n=$(printf '%s\n' "$lines" | wc -l)
    {
        printf '\n==== %s: %d\n' "$2" "$n"
        [ -n "$lines" ] && printf '%s\n' "$lines"
    } >>"$1"
    echo "$n"
}

# skipped NAME REASON: a step that did not run, shown in the summary and
# counted neither passed nor failed.
skipped() {
    SUMMARY+=("$(printf '%-28s SKIPPED (%s)' "$1" "$2")")
}

# check NAME TIMEOUT CMD...: a step that counts as one check; its log goes to
# $LOGS/NAME.log and its tail is shown when it fails.
check() {
    local name=$1 limit=$2 t0=$SECONDS rc
    shift 2
    say "$name: $*"
    timeout --kill-after=30 "$limit" "$@" >"$LOGS/$name.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        record "$name" 1 0 $((SECONDS - t0))
    else
        [ $rc -eq 124 ] && echo "$name: timed out after ${limit}s"
        tail -n 60 "$LOGS/$name.log"
        echo "$name: FAILED (exit $rc, full log $LOGS/$name.log)"
        record "$name" 0 1 $((SECONDS - t0))
    fi
    return $rc
}

# ---- dependencies -------------------------------------------------------------

install_dependencies() {
    local missing=() cmd pkg
    for pair in smbd:samba smbpasswd:samba smbclient:smbclient smbtorture:samba-testsuite \
                python3:python3 useradd:passwd timeout:coreutils iptables:iptables ip:iproute2; do
        cmd=${pair%%:*} pkg=${pair#*:}
        command -v "$cmd" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$cmd" >/dev/null 2>&1 \
            || missing+=("$pkg")
    done
    if ! python3 -m pip --version >/dev/null 2>&1; then
        missing+=(python3-pip)
    fi
    # The Samba peer's shares load vfs_acl_xattr (tests/e2e/servers.py); it is
    # in samba-vfs-modules, only a Recommends of samba, which
    # --no-install-recommends leaves out.
    if ! compgen -G '/usr/lib/*/samba/vfs/acl_xattr.so' >/dev/null; then
        missing+=(samba-vfs-modules)
    fi
    # tests/e2e/test_srvsvc.py asks srvsvc with Samba's own DCE/RPC client,
    # the system Python's samba module.
    if ! /usr/bin/python3 -c 'import samba.dcerpc.srvsvc' >/dev/null 2>&1; then
        missing+=(python3-samba)
    fi
    # tests/e2e/test_kernel_client.py, test_smb_kernel_restart.py,
    # test_nfs_kernel.py and test_nfs_kernel_restart.py boot Debian's kernel (its SMB3 client,
    # cifs.ko, and NFSv4.1 client, nfsv4.ko) under qemu with a static
    # busybox as its userland; the NFS ones build small static lock tools
    # for it with cc (which Rust needs anyway).
    command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
    # The NFS peer (tests/e2e/servers.py start_nfs), with its VFS back end;
    # run_pynfs.py builds pynfs's XDR code with ply on the system Python.
    PATH=$PATH:/usr/sbin:/sbin command -v ganesha.nfsd >/dev/null 2>&1 || missing+=(nfs-ganesha)
    compgen -G '/usr/lib/*/ganesha/libfsalvfs.so' >/dev/null || missing+=(nfs-ganesha-vfs)
    /usr/bin/python3 -c 'import ply' >/dev/null 2>&1 || missing+=(python3-ply)
    /usr/bin/python3 -c 'import setuptools' >/dev/null 2>&1 || missing+=(python3-setuptools)
    if ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed'; then
        missing+=(busybox-static)
    fi
    # tests/e2e/test_nfs_clone.py serves a btrfs image (CLONE needs a file
    # system that shares extents) and reads its extents with filefrag.
    PATH=$PATH:/usr/sbin:/sbin command -v mkfs.btrfs >/dev/null 2>&1 || missing+=(btrfs-progs)
    PATH=$PATH:/usr/sbin:/sbin command -v filefrag >/dev/null 2>&1 || missing+=(e2fsprogs)
    # tests/e2e/test_dashboard.py loads the admin dashboard in headless
    # Chromium (DevTools protocol over --remote-debugging-pipe).
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    # The etcd state store (crates/braid-etcd's tests, the etcd variant of
    # tests/e2e/test_persistent_handles.py) runs against Debian's etcd;
    # etcdctl alters a record there.
    command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
    command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing Debian packages: ${missing[*]}"
        if [ "$(id -u)" -ne 0 ]; then
            echo "need root to install ${missing[*]}"; return 1
        fi
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) \
            || return 1
    fi
    export PATH=$PATH:/usr/sbin:/sbin

    # The kernel package itself is only unpacked (target/kernel-client/).
    python3 tests/e2e/kernel_vm.py prepare || return 1

    if ! python3 -c 'import smbprotocol, smbclient, pytest' 2>/dev/null; then
        say "installing Python packages: smbprotocol pytest"
        python3 -m pip install -q smbprotocol pytest 2>/dev/null \
            || python3 -m pip install -q --break-system-packages smbprotocol pytest \
            || return 1
    fi
    # nfs-rs: an independent NFSv4.1 client (tests/e2e/test_nfs_smb_shared.py).
    if ! python3 -c 'import nfs_rs' 2>/dev/null; then
        say "installing Python package: nfs-rs"
        python3 -m pip install -q nfs-rs 2>/dev/null \
            || python3 -m pip install -q --break-system-packages nfs-rs \
            || return 1
    fi

    if ! command -v cargo >/dev/null 2>&1; then
        if [ -x "$HOME/.cargo/bin/cargo" ]; then
            export PATH=$HOME/.cargo/bin:$PATH
        elif [ "$SKIP_CARGO" != 1 ]; then
            echo "cargo not found: install Rust with rustup (https://rustup.rs)"; return 1
        fi
    fi
}

say "dependencies"
t0=$SECONDS
if install_dependencies >"$LOGS/dependencies.log" 2>&1; then
    record dependencies 1 0 $((SECONDS - t0))
else
    cat "$LOGS/dependencies.log"
    record dependencies 0 1 $((SECONDS - t0))
    printf '%s\n' "${SUMMARY[@]}"
    echo "$PASSED passed, $FAILED failed"
    exit 1
fi
export PATH=$PATH:/usr/sbin:/sbin
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH=$PATH:$HOME/.cargo/bin

# ---- cargo --------------------------------------------------------------------

BUILD_OK=1
if [ "$SKIP_CARGO" = 1 ]; then
    [ "$TARGET" = braid ] && { echo "SKIP_CARGO=1 needs BRAID_E2E_TARGET=samba or ganesha"; exit 2; }
    say "cargo steps skipped (SKIP_CARGO=1)"
else
    check cargo-fmt 600 cargo fmt --all --check
    check cargo-clippy 2400 cargo clippy --workspace --all-targets -- -D warnings
    # A Rust test that returns early without a word passes without testing.
    check rust-skips 120 python3 scripts/check-skips.py rust

    # The release binary first: the client crate's integration tests drive it.
    check cargo-build-release 2400 cargo build --release -p braid || BUILD_OK=0

    say "cargo-test: cargo test --workspace --no-fail-fast"
    t0=$SECONDS
    timeout --kill-after=30 2400 cargo test --workspace --no-fail-fast >"$LOGS/cargo-test.log" 2>&1
    rc=$?
    read -r tp tf < <(grep -E '^test result: ' "$LOGS/cargo-test.log" |
        sed -E 's/.* ([0-9]+) passed; ([0-9]+) failed.*/\1 \2/' |
        awk '{p += $1; f += $2} END {print p + 0, f + 0}')
    if [ $rc -ne 0 ] && [ "$tf" -eq 0 ]; then
        tf=1   # did not build, or timed out
    fi
    # Ignored tests are the Rust tests' skips.
    ts=$(grep -E '^test .* \.\.\. ignored' "$LOGS/cargo-test.log" | sed -E 's/ \.\.\. ignored.*//' |
        list_skips "$LOGS/cargo-test.log" "skipped (#[ignore]) tests")
    if [ $rc -ne 0 ]; then
        grep -E '^(test .* FAILED|error(\[|:)|failures:)' "$LOGS/cargo-test.log" | head -n 40
        tail -n 30 "$LOGS/cargo-test.log"
        echo "cargo-test: FAILED (exit $rc, full log $LOGS/cargo-test.log)"
    fi
    record cargo-test "$tp" "$tf" $((SECONDS - t0)) "$ts"

    # Replays every committed fuzz seed and regression input through the
    # decoders (stable toolchain), then 3 s of random mutations per target.
    check fuzz-replay 1200 env FUZZ_STABLE=1 scripts/fuzz-smoke.sh 3
fi

# ---- end to end ------------------------------------------------------------------

if [ "$TARGET" = braid ] && [ $BUILD_OK = 0 ]; then
    say "e2e, smbtorture and pynfs skipped: the release build failed"
    record e2e 0 1 0
    record smbtorture 0 1 0
    record pynfs 0 1 0
else
    say "e2e: pytest tests/e2e against $TARGET"
    t0=$SECONDS
    # -rfEs: the end of the log lists each failure, error and skip (with
    # its reason), so the tail shown here names them.
    timeout --kill-after=30 2100 python3 -m pytest tests/e2e -q -rfEs -p no:cacheprovider \
        --junitxml="$LOGS/e2e.xml" 2>&1 | tee "$LOGS/e2e.log" | tail -n 40
    rc=${PIPESTATUS[0]}
    read -r ep ef es < <(python3 - "$LOGS/e2e.xml" <<'EOF' 2>/dev/null || echo "0 0 0"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
total = sum(int(s.get("tests", 0)) for s in suites)
bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
print(total - bad - skipped, bad, skipped)
EOF
)
    # Tests that assert rates and latencies (@pytest.mark.timing) get one
    # more try when they are all that failed; the log names them.
    if [ "$ef" -gt 0 ] && python3 scripts/rerun-timing.py "$LOGS/e2e.xml" \
            "$LOGS/e2e-rerun.xml" >>"$LOGS/e2e.log" 2>&1; then
        grep '^rerun-timing: passed' "$LOGS/e2e.log"
        ep=$((ep + ef)); ef=0; rc=0
    elif [ "$ef" -gt 0 ]; then
        grep '^rerun-timing:' "$LOGS/e2e.log"
    fi
    if [ $rc -ne 0 ] && [ "$ef" -eq 0 ]; then
        ef=1   # collection error, crash or timeout
        echo "e2e: pytest exited $rc (full log $LOGS/e2e.log)"
    fi
    record e2e "$ep" "$ef" $((SECONDS - t0)) "$es"
    # Skips CI does not expect for this target (tests/e2e/allowed-skips.txt).
    check e2e-skips 120 python3 scripts/check-skips.py pytest --target "$TARGET" "$LOGS/e2e.xml"

    if [ "$TARGET" = ganesha ]; then
        skipped smbtorture "ganesha serves no SMB"
    else
        say "smbtorture: tests/conformance against $TARGET"
        t0=$SECONDS
        timeout --kill-after=30 1800 python3 tests/conformance/run_smbtorture.py --start "$TARGET" \
            --log "$LOGS/smbtorture.log" >"$LOGS/smbtorture-results.txt" 2>&1
        rc=$?
        grep -v '^PASS ' "$LOGS/smbtorture-results.txt"
        read -r sp sf < <(sed -nE 's/^smbtorture: ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/p' \
            "$LOGS/smbtorture-results.txt" | tail -n 1)
        sp=${sp:-0} sf=${sf:-0}
        # The runner's SKIP lines (a skipped required test fails as well).
        ss=$(grep '^SKIP ' "$LOGS/smbtorture-results.txt" |
            list_skips "$LOGS/smbtorture.log" "skipped smbtorture tests")
        if [ $rc -ne 0 ] && [ "$sf" -eq 0 ]; then
            sf=1
            echo "smbtorture: runner exited $rc (see $LOGS/smbtorture-results.txt)"
        fi
        record smbtorture "$sp" "$sf" $((SECONDS - t0)) "$ss"
        if [ "$TARGET" = braid ]; then
            # The lists run with the metadata cache on (the default); the
            # suites that exercise name lookups most run with it off too.
            say "smbtorture-cache-off: smb2.create and smb2.rename, --no-metadata-cache"
            t0=$SECONDS
            cp=0 cf=0
            for f in smb2.create smb2.rename; do
                BRAID_EXTRA_ARGS="${BRAID_EXTRA_ARGS:-} --no-metadata-cache" \
                    timeout --kill-after=30 600 python3 tests/conformance/run_smbtorture.py \
                    --start braid --no-one-run --filter "$f" \
                    --log "$LOGS/smbtorture-cache-off-$f.log" >"$LOGS/smbtorture-cache-off-$f.txt" 2>&1
                rc=$?
                grep -v '^PASS ' "$LOGS/smbtorture-cache-off-$f.txt"
                read -r sp sf < <(sed -nE 's/^smbtorture: ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/p' \
                    "$LOGS/smbtorture-cache-off-$f.txt" | tail -n 1)
                sp=${sp:-0} sf=${sf:-0}
                [ $rc -ne 0 ] && [ "$sf" -eq 0 ] && sf=1
                cp=$((cp + sp)) cf=$((cf + sf))
            done
            record smbtorture-cache-off "$cp" "$cf" $((SECONDS - t0))
        fi
    fi

    # pynfs: the NFSv4.1 conformance list (tests/conformance/pynfs.txt),
    # then the NFSv4.2 list (pynfs-42.txt, pynfs speaking minor version 2).
    # Exit status 3: pynfs is not on this machine.
    if [ "$TARGET" = samba ]; then
        skipped pynfs "Samba's smbd serves no NFS"
    else
        run_pynfs_list pynfs tests/conformance/pynfs.txt 1
        if [ "$TARGET" = braid ]; then
            run_pynfs_list pynfs-4.2 tests/conformance/pynfs-42.txt 2
            # The reboot tests (REBT): pynfs kills and restarts Braid.
            run_pynfs_list pynfs-reboot tests/conformance/pynfs-reboot.txt 1 --reboot
        else
            skipped pynfs-4.2 "the peer's private config serves NFSv4.1 only"
            skipped pynfs-reboot "reboot_braid.py restarts Braid only"
        fi
    fi
fi

# ---- summary --------------------------------------------------------------------

say "summary (target $TARGET, $((SECONDS - START))s, logs in $LOGS)"
printf '%s\n' "${SUMMARY[@]}"
echo "$SKIPS skipped (each step's log ends with the list)"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
