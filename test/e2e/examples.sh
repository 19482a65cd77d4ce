#!/usr/bin/env bash
# Every example in examples/ run as a user would: examples/run NAME (both
# sides, two processes on loopback, each with SOFTDAT_TRACE). Checks that
# each run succeeds (the examples check their own outcomes and exit 1 on
# any surprise) and that its two traces parse as JSON Lines with the
# records its semantics imply (test/e2e/lib/check_example_trace.py), e.g.
# for rdma_write: the post on the requester naming the target's STag, the
# requester's completion, and no DTO event at the target. Then
# softdat-trace merges the rdma_write traces: text view and --json.
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

# softdat-trace on the rdma_write run, read as a person reads it: every
# post or event that mentions the Write is in the client's column (the
# second: its rows start with the first column's "|"), the server's column
# has none (only its RNIC's rows: the frame received, the memory check),
# and the client column shows the post before its completion.
view=$tmp/rdma_write.view
st=$BUILD/bin/softdat-trace
if [ ! -x "$st" ]; then
    echo "not ok - $st missing"; fail=1
elif ! "$st" "$tmp/rdma_write.server.jsonl" "$tmp/rdma_write.client.jsonl" >"$view" 2>"$tmp/st.err"; then
    echo "not ok - softdat-trace failed:"; sed 's/^/  /' "$tmp/st.err"; fail=1
else
    head_ok=0
    head -n 1 "$view" | grep -q 'rdma_write.server (pid [0-9]*).*rdma_write.client (pid [0-9]*)' && head_ok=1
    in_server=$(grep -cE '^ *[0-9]+\.[0-9]+  (EVENT|POST) [^|]*rdma_write' "$view")
    post=$(grep -nE '^ *[0-9]+\.[0-9]+  \| +POST rdma_write\(ep1\) len=1024' "$view" | head -n 1 | cut -d: -f1)
    done_=$(grep -nE '^ *[0-9]+\.[0-9]+  \| +EVENT DTO_COMPLETION rdma_write SUCCESS len=1024' "$view" |
        head -n 1 | cut -d: -f1)
    if [ $head_ok = 1 ] && [ "$in_server" = 0 ] && [ -n "$post" ] && [ -n "$done_" ] && [ "$post" -lt "$done_" ]; then
        echo "ok - softdat-trace: the Write's post and completion in the client's column, nothing in the server's"
    else
        echo "not ok - softdat-trace view of rdma_write (header $head_ok, server rows with the write: $in_server," \
            "post row ${post:-none}, completion row ${done_:-none}):"
        sed 's/^/  /' "$view" | head -n 80
        fail=1
    fi
    # --json: the merge, in time order, every record tagged with its lane.
    if "$st" --json "$tmp/rdma_write.server.jsonl" "$tmp/rdma_write.client.jsonl" | python3 -c '
import json, sys
prev, lanes, n = 0, set(), 0
for line in sys.stdin:
    r = json.loads(line)
    assert r["mono_ns"] >= prev, "not in time order"
    prev = r["mono_ns"]
    lanes.add(r["lane"])
    n += 1
assert lanes == {"rdma_write.server", "rdma_write.client"}, lanes
print(n)' >"$tmp/st.n" 2>&1; then
        echo "ok - softdat-trace --json: $(cat "$tmp/st.n") records merged in time order, two lanes"
    else
        echo "not ok - softdat-trace --json:"; sed 's/^/  /' "$tmp/st.n"; fail=1
    fi
fi
exit $fail
