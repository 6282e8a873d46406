#!/usr/bin/env bash
# Short fuzzing pass over every target in fuzz/ (see fuzz/README.md).
#
#   scripts/fuzz-smoke.sh [SECONDS_PER_TARGET] [TARGET...]
#
# With cargo-fuzz and a nightly toolchain: runs each target under libFuzzer
# for SECONDS_PER_TARGET (default 10), one at a time, single job, starting
# from the committed seeds (fuzz/corpus/<t>) and regression inputs
# (fuzz/artifacts-found/<t>); new corpus entries go to fuzz/target/work/<t>,
# crashes to fuzz/artifacts/<t>/.
# Without them (or with FUZZ_STABLE=1): the stable replay runner runs every
# committed input, then random mutations of them for SECONDS_PER_TARGET.
# Exits non-zero on the first crash.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-10}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(framing smb2_header smb2_requests smb2_responses negotiate_contexts create_contexts
             fscc_set_info security_descriptor ntlmssp spnego der transform dcerpc lsarpc
             nfs_record rpc_call nfs_compound nfs_attrs)
fi

if [ "${FUZZ_STABLE:-0}" != 1 ] && cargo fuzz --version >/dev/null 2>&1 && rustup run nightly rustc --version >/dev/null 2>&1; then
    cargo +nightly fuzz build -O >/dev/null
    for t in "${targets[@]}"; do
        mkdir -p "target/work/$t" "artifacts/$t" "artifacts-found/$t"
        echo "== $t ($secs s)"
        cargo +nightly fuzz run -O "$t" "target/work/$t" "corpus/$t" "artifacts-found/$t" -- \
            -max_total_time="$secs" -print_final_stats=1 \
            -artifact_prefix="artifacts/$t/" 2>&1 | grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+== ERROR|thread '|panicked)|SUMMARY" || true
        if ls "artifacts/$t"/crash-* "artifacts/$t"/oom-* "artifacts/$t"/timeout-* >/dev/null 2>&1; then
            echo "fuzz-smoke: $t found a crash:" >&2
            ls "artifacts/$t" >&2
            exit 1
        fi
    done
    echo "${#targets[@]} passed, 0 failed"
else
    echo "fuzz-smoke: cargo-fuzz/nightly unavailable (or FUZZ_STABLE=1); using the stable replay runner"
    cargo run --release -q --bin replay -- --mutate "$secs" "${targets[@]}"
fi
