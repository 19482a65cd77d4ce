#!/usr/bin/env bash
# shellcheck disable=SC2015  # ok/notok always succeed: A && ok || notok is safe
# Fuzz smoke test (issue 13 §1): builds the libFuzzer targets (make
# fuzz-build, clang + ASan + UBSan, into $BUILD/fuzz) and runs each one over
# its committed seed corpus and then for a few seconds of fresh mutations.
# Any crash, leak, sanitizer report or failed property fails the test; the
# long runs are `make fuzz` (docs/reliability.md).
# Exit 0 pass, 77 skip when clang or its libFuzzer runtime is missing.
set -u
SOFTDAT_TOP=${SOFTDAT_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$SOFTDAT_TOP/build}
SECS=${FUZZ_SMOKE_SECONDS:-3}

fails=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fails=$((fails + 1)); }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fuzz_smoke.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# Skip (77) only when the toolchain cannot make a fuzzer at all.
if ! command -v clang >/dev/null 2>&1; then
    echo "skip - clang not found (scripts/install-deps)"; exit 77
fi
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$tmp/probe.c"
if ! clang -fsanitize=fuzzer,address,undefined -o "$tmp/probe" "$tmp/probe.c" >"$tmp/probe.log" 2>&1; then
    echo "skip - clang cannot link libFuzzer+ASan (libclang-rt-dev missing?):"
    sed 's/^/    /' "$tmp/probe.log" | head -5
    exit 77
fi

# A make of our own, not the jobserver of a `make check` around us.
unset MAKEFLAGS MAKELEVEL MFLAGS
if make -C "$SOFTDAT_TOP" -j2 BUILD="$BUILD" fuzz-build >"$tmp/build.log" 2>&1; then
    ok "fuzz targets built"
else
    notok "make fuzz-build"; tail -20 "$tmp/build.log"; exit 1
fi

for src in "$SOFTDAT_TOP"/test/fuzz/fuzz_*.c; do
    t=$(basename "$src" .c)
    name=${t#fuzz_}
    bin=$BUILD/fuzz/$t
    seeds=$SOFTDAT_TOP/test/fuzz/corpus/$name
    [ -x "$bin" ] || { notok "$t not built"; continue; }
    n=$(find "$seeds" -type f | wc -l)
    [ "$n" -gt 0 ] && ok "$t: $n committed seeds" || notok "$t: no seeds in $seeds"
    # Every seed once: each must run clean.
    if timeout -k 5 120 "$bin" "$seeds"/* >"$tmp/$t.seeds.log" 2>&1; then
        ok "$t: the seed corpus runs clean"
    else
        notok "$t: a seed fails"; tail -20 "$tmp/$t.seeds.log"
    fi
    # A short fresh run from the seeds (work copy: the tree is not written).
    mkdir -p "$tmp/work/$name" "$tmp/art/$name"
    cp "$seeds"/* "$tmp/work/$name/"
    if timeout -k 5 $((SECS + 60)) "$bin" -max_total_time="$SECS" -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$tmp/art/$name/" "$tmp/work/$name" \
        >"$tmp/$t.log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/$t.log" | tail -1)
        ok "$t: ${runs:-?} executions in ${SECS}s, no crash"
    else
        notok "$t: crash or sanitizer report"; tail -30 "$tmp/$t.log"
        ls "$tmp/art/$name" 2>/dev/null
    fi
done

[ $fails -eq 0 ]
