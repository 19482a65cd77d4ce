#!/usr/bin/env bash
# Every example in examples/ run as a user would: examples/run NAME (both
# sides, two processes on loopback, each with SOFTDAT_TRACE). Checks that
# each run succeeds (the examples check their own outcomes and exit 1 on
# any surprise) and that its two traces parse as JSON Lines with the
# records its semantics imply (test/e2e/lib/check_example_trace.py), e.g.
# for rdma_write: the post on the requester naming the target's STag, the
# requester's completion, and no DTO event at the target.
# Exit 0 pass, 77 skip, else fail.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$top/build}
export BUILD
command -v python3 >/dev/null || { echo "skip - no python3"; exit 77; }
command -v timeout >/dev/null || { echo "skip - no timeout(1)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export EX_OUT=$tmp

fail=0
names=$(cd "$top/examples" && ls *.c | sed 's/\.c$//')
[ -n "$names" ] || { echo "not ok - no examples"; exit 1; }
for name in $names; do
    if [ ! -x "$BUILD/examples/$name" ]; then
        echo "not ok - $name: $BUILD/examples/$name missing (run make first)"; fail=1; continue
    fi
    port=$((20000 + RANDOM % 12000))
    if ! timeout 90 "$top/examples/run" "$name" "$port" >"$tmp/$name.out" 2>&1; then
        echo "not ok - $name: examples/run failed"
        sed 's/^/  /' "$tmp/$name.out"
        fail=1
        continue
    fi
    echo "ok - $name: both sides succeeded"
    python3 "$here/lib/check_example_trace.py" "$name" "$tmp/$name.server.jsonl" "$tmp/$name.client.jsonl" || fail=1
done
exit $fail
