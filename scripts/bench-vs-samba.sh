#!/usr/bin/env bash
# Braid vs Samba: single-client sequential throughput and server CPU cost, for
# docs/BENCHMARKS.md.
#
#   scripts/bench-vs-samba.sh [--only braid|samba] [--modes default,sign,encrypt]
#                             [--reps N] [--size-mib N] [--dir DIR] [--out FILE]
#                             [--client-env VAR=VALUE]...
#
# One share directory (one backing filesystem) is served by both servers at
# once, Braid (target/release/braid) and Samba's smbd, on loopback ports. For
# every repetition, operation (get, put) and server, interleaved, it times
#   smbclient -m SMB3 [mode options] -c 'get big /dev/null'   (read SIZE)
#   smbclient -m SMB3 [mode options] -c 'put big up-...'      (write SIZE)
# and reads the server's CPU time before and after: utime+stime+cutime+cstime
# (/proc/PID/stat fields 14-17) summed over the server's process tree, so that
# smbd's per-connection child counts (it is reaped into cutime when it exits).
# Prints a Markdown table of medians with Braid/Samba ratios.
#
# Modes: default (client defaults: signed only if the server requires it, as
# Braid does by default), sign (--option=clientsigning=required), encrypt
# (--client-protection=encrypt); sign-gmac, sign-cmac, sign-hmac and
# enc-aes128gcm, enc-aes128ccm, enc-aes256gcm, enc-aes256ccm restrict the
# client to one algorithm. Samba runs with the private config of
# tests/e2e/servers.py (the one the conformance list is validated with).
#
# --client-env sets a variable for smbclient only (not for the servers). With
# GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824
# smbclient's heap keeps its 8 MiB receive buffers instead of returning them
# to the kernel (BENCHMARKS run 20; both are needed: setting either alone
# fixes the other at its default). The client's minor page faults per GiB
# are reported with its CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# Braid requires signing by default and Samba does not: serve both with
# signing enabled-but-optional so that each mode compares like with like
# ('default' is unsigned on both, 'sign' signed on both).
export BRAID_EXTRA_ARGS="${BRAID_EXTRA_ARGS:---signing enabled}"
export PATH=$PATH:/usr/sbin:/sbin

ONLY=""
MODES="default"
REPS=3
SIZE_MIB=1024
DIR=""
OUT=""
CLIENT_ENV=()
while [ $# -gt 0 ]; do
    case $1 in
        --only) ONLY=$2; shift 2 ;;
        --modes) MODES=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --size-mib) SIZE_MIB=$2; shift 2 ;;
        --dir) DIR=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --client-env)
            [[ $2 == [A-Za-z_]*=* ]] || { echo "--client-env takes VAR=VALUE, got '$2'" >&2; exit 2; }
            CLIENT_ENV+=("$2"); shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

case $ONLY in
    "") SERVERS=(braid samba) ;;
    braid|samba) SERVERS=("$ONLY") ;;
    *) echo "--only takes braid or samba" >&2; exit 2 ;;
esac
for tool in smbclient smbd python3; do
    command -v "$tool" >/dev/null || { echo "$tool not found (scripts/test.sh installs it)" >&2; exit 1; }
done

WORK=$(mktemp -d /var/tmp/braid-bench.XXXXXX)
SHARE_DIR=${DIR:-$WORK/share}
mkdir -p "$SHARE_DIR"
RESULTS=$WORK/results.tsv
declare -A PID PORT USER_ PASS
PIN_PID=""
cleanup() {
    [ -n "$PIN_PID" ] && kill "$PIN_PID" 2>/dev/null
    for s in "${!PID[@]}"; do
        python3 tests/e2e/servers.py stop "${PID[$s]}" || true
    done
    rm -f "$SHARE_DIR"/big "$SHARE_DIR"/up-*
    rm -rf "$WORK"
}
trap cleanup EXIT

SIZE=$((SIZE_MIB * 1024 * 1024))
echo "creating a ${SIZE_MIB} MiB file in $SHARE_DIR" >&2
head -c "$SIZE" /dev/urandom >"$SHARE_DIR/big"
cat "$SHARE_DIR/big" >/dev/null   # into the page cache: both servers read it from there
# ...and keep it there: this VM's DAMON reclaim pages out what sat idle for
# a minute, which would turn some gets into disk reads.
python3 scripts/pin-in-cache.py "$SHARE_DIR/big" >"$WORK/pin.log" 2>&1 &
PIN_PID=$!
for _ in $(seq 100); do grep -q pinned "$WORK/pin.log" && break; sleep 0.1; done

for s in "${SERVERS[@]}"; do
    mkdir -p "$WORK/$s"
    read -r pid port _share user pass < <(python3 tests/e2e/servers.py start --target "$s" \
        --share-dir "$SHARE_DIR" --workdir "$WORK/$s")
    PID[$s]=$pid PORT[$s]=$port USER_[$s]=$user PASS[$s]=$pass
    echo "$s: pid $pid, port $port" >&2
done
# Samba's start hands the share directory to its test user; keep the file readable.
chmod a+r "$SHARE_DIR/big"

mode_options() {
    case $1 in
        default|warmup) echo "" ;;
        sign) echo "--option=clientsigning=required" ;;
        encrypt) echo "--client-protection=encrypt" ;;
        # One algorithm each: both servers take the client's only offer.
        sign-gmac) echo "--option=clientsigning=required --option=clientsmb3signingalgorithms=AES-128-GMAC" ;;
        sign-cmac) echo "--option=clientsigning=required --option=clientsmb3signingalgorithms=AES-128-CMAC" ;;
        sign-hmac) echo "--option=clientsigning=required --option=clientsmb3signingalgorithms=HMAC-SHA256" ;;
        enc-aes128gcm) echo "--client-protection=encrypt --option=clientsmb3encryptionalgorithms=AES-128-GCM" ;;
        enc-aes128ccm) echo "--client-protection=encrypt --option=clientsmb3encryptionalgorithms=AES-128-CCM" ;;
        enc-aes256gcm) echo "--client-protection=encrypt --option=clientsmb3encryptionalgorithms=AES-256-GCM" ;;
        enc-aes256ccm) echo "--client-protection=encrypt --option=clientsmb3encryptionalgorithms=AES-256-CCM" ;;
        *) echo "unknown mode $1" >&2; exit 2 ;;
    esac
}

cpu_of() { python3 tests/e2e/servers.py cpu "$@"; }   # [--settle-to N] PID -> "SECONDS NPROCS"

# measure SERVER MODE OP REP -> appends "mode op server rep seconds server_cpu client_cpu
# client_faults" to RESULTS
measure() {
    local s=$1 mode=$2 op=$3 rep=$4 cmd cpu0 n0 cpu1 t0 t1 ccpu cflt
    case $op in
        get) cmd="get big /dev/null" ;;
        # Each server overwrites its own file: truncation recycles the
        # pages, so every put writes into memory the guest has touched.
        put) cmd="put $SHARE_DIR/big up-$s" ;;
    esac
    # Start every measurement with no dirty pages in flight: writeback of
    # the previous put otherwise slows whichever server runs next.
    sync
    read -r cpu0 n0 < <(cpu_of "${PID[$s]}")
    t0=$(date +%s.%N)
    # The client's CPU (user+system) goes to $WORK/client.cpu: client and
    # server share this machine's cores.
    # shellcheck disable=SC2046
    if ! python3 -c '
import resource, subprocess, sys
rc = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1] + ".log", "w"), stderr=subprocess.STDOUT).returncode
u = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1] + ".cpu", "w").write(f"{u.ru_utime + u.ru_stime} {u.ru_minflt}\n")
sys.exit(rc)' "$WORK/client" env "${CLIENT_ENV[@]}" timeout 600 smbclient "//127.0.0.1/share" -p "${PORT[$s]}" \
            -U "${USER_[$s]}%${PASS[$s]}" -m SMB3 $(mode_options "$mode") -c "$cmd"; then
        cp "$WORK/client.log" "$WORK/last.log"
        echo "$s $mode $op #$rep: smbclient failed:" >&2
        cat "$WORK/last.log" >&2
        echo -e "$mode\t$op\t$s\t$rep\tNA\tNA\tNA\tNA" >>"$RESULTS"
        return
    fi
    t1=$(date +%s.%N)
    read -r ccpu cflt <"$WORK/client.cpu"
    # Wait for smbd's per-connection child to exit and be reaped into cutime.
    read -r cpu1 _ < <(cpu_of --settle-to "$n0" "${PID[$s]}")
    awk -v s="$s" -v m="$mode" -v o="$op" -v r="$rep" -v sz="$SIZE" \
        -v w="$(awk -v a="$t1" -v b="$t0" 'BEGIN { print a - b }')" \
        -v c="$(awk -v a="$cpu1" -v b="$cpu0" 'BEGIN { print a - b }')" \
        -v k="$ccpu" -v f="$cflt" 'BEGIN {
        printf "%s\t%s\t%s\t%d\t%.4f\t%.2f\t%.2f\t%d\n", m, o, s, r, w, c, k, f >> "'"$RESULTS"'"
        printf "%-6s %-13s %s #%d: %7.0f MB/s, server CPU %.2f s/GiB, client CPU %.2f s/GiB, %d faults\n",
               s, m, o, r, sz / w / 1e6, c / (sz / 2^30), k / (sz / 2^30), f > "/dev/stderr" }'

}

: >"$RESULTS"
IFS=, read -r -a MODE_LIST <<<"$MODES"
# Warm-up, not measured: one put per server creates the file it overwrites
# from then on. On a VM the first write of never-touched guest memory is
# several times slower than a write into recycled pages (dd: 400 MB/s vs
# 2.5 GB/s here); overwriting keeps every measured put on recycled pages.
for s in "${SERVERS[@]}"; do
    measure "$s" warmup put 0 2>/dev/null
done
: >"$RESULTS"
for mode in "${MODE_LIST[@]}"; do
    mode_options "$mode" >/dev/null
done
read -r _ _ _ _ _ _ _ _ STEAL0 _ < <(grep '^cpu ' /proc/stat)
read -r _ TOTAL0 < <(awk '/^cpu /{ t = 0; for (i = 2; i <= NF; i++) t += $i; print "x", t }' /proc/stat)
# Modes interleaved within each repetition, so that "kept vs default"
# compares transfers made minutes, not a quarter of an hour, apart.
for rep in $(seq "$REPS"); do
    for mode in "${MODE_LIST[@]}"; do
        for op in get put; do
            for s in "${SERVERS[@]}"; do
                measure "$s" "$mode" "$op" "$rep"
            done
        done
    done
done

read -r _ _ _ _ _ _ _ _ STEAL1 _ < <(grep '^cpu ' /proc/stat)
read -r _ TOTAL1 < <(awk '/^cpu /{ t = 0; for (i = 2; i <= NF; i++) t += $i; print "x", t }' /proc/stat)
STEAL_PCT=$(awk -v a="$STEAL0" -v b="$STEAL1" -v c="$TOTAL0" -v d="$TOTAL1" \
    'BEGIN { printf "%.1f", (d > c) ? 100 * (b - a) / (d - c) : 0 }')

table() {
    echo "Sequential transfer of a ${SIZE_MIB} MiB file with smbclient -m SMB3 over loopback;"
    echo "median of $REPS runs (modes interleaved in each); server CPU = user+system seconds of"
    echo "the server's process tree; client CPU = smbclient's. $(nproc) CPUs, $(uname -r),"
    echo "$(smbd --version); CPU time stolen by the hypervisor during the run: ${STEAL_PCT}%."
    echo
    echo "| mode | op | Braid MB/s | Samba MB/s | Braid/Samba | Braid CPU s/GiB | Samba CPU s/GiB | Braid/Samba | kept by Braid | kept by Samba | client CPU s/GiB (Braid, Samba) | client page faults per GiB (Braid, Samba) |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    python3 - "$RESULTS" "$SIZE" <<'EOF'
import statistics, sys
from collections import defaultdict

size = int(sys.argv[2])
runs = defaultdict(list)
order = []
for line in open(sys.argv[1]):
    mode, op, server, _rep, secs, cpu, client, faults = line.split("\t")
    if (mode, op) not in order:
        order.append((mode, op))
    if secs != "NA":
        runs[mode, op, server].append((float(secs), float(cpu), float(client), int(faults)))

def med(mode, op, server, i):
    vals = [r[i] for r in runs.get((mode, op, server), [])]
    return statistics.median(vals) if vals else None

def fmt(x, spec):
    return "—" if x is None else format(x, spec)

for mode, op in order:
    b_t, s_t = med(mode, op, "braid", 0), med(mode, op, "samba", 0)
    b_c, s_c = med(mode, op, "braid", 1), med(mode, op, "samba", 1)
    b_mb = size / b_t / 1e6 if b_t else None
    s_mb = size / s_t / 1e6 if s_t else None
    gib = size / 2**30
    b_cpu = b_c / gib if b_c is not None else None
    s_cpu = s_c / gib if s_c is not None else None
    r_mb = b_mb / s_mb if b_mb and s_mb else None
    r_cpu = b_cpu / s_cpu if b_cpu is not None and s_cpu else None
    # Throughput kept: this mode's median time against 'default' (unsigned,
    # unencrypted) for the same server and operation.
    def kept(server):
        base, this = med("default", op, server, 0), med(mode, op, server, 0)
        return base / this if base and this else None
    cli = [med(mode, op, s, 2) for s in ("braid", "samba")]
    cli = ", ".join(fmt(c / gib if c is not None else None, ".2f") for c in cli)
    flt = [med(mode, op, s, 3) for s in ("braid", "samba")]
    flt = ", ".join(fmt(f / gib if f is not None else None, ".0f") for f in flt)
    k_b, k_s = kept("braid"), kept("samba")
    print(f"| {mode} | {op} | {fmt(b_mb, '.0f')} | {fmt(s_mb, '.0f')} | {fmt(r_mb, '.2f')} "
          f"| {fmt(b_cpu, '.2f')} | {fmt(s_cpu, '.2f')} | {fmt(r_cpu, '.2f')} "
          f"| {fmt(k_b and 100 * k_b, '.0f')}% | {fmt(k_s and 100 * k_s, '.0f')}% | {cli} | {flt} |")
EOF
}

echo >&2
if [ -n "$OUT" ]; then
    table | tee "$OUT"
else
    table
fi
if grep -q $'\tNA\t' "$RESULTS"; then
    echo "some transfers failed (see above)" >&2
    exit 1
fi
