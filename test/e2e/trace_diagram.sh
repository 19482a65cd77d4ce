#!/usr/bin/env bash
# The sequence diagram (softdat-trace --html) of examples/run rdma_write
# and examples/run protection: the SVG is well-formed and holds the
# arrows the runs imply (test/e2e/lib/check_diagram.py: the Write FPDU
# with its STag/offset, the target's allowed check and placement, the
# requester's completion and no DTO event at the target; the denied checks,
# Terminates and error events of protection), and, when a Chromium is
# installed, headless Chromium renders the rdma_write page to a PNG that
# is not blank. Without Chromium that part is skipped with a message; the
# SVG is asserted in every case. Then the clock alignment: the server's
# trace shifted 5 s ahead is realigned from the matched frames.
# Exit 0 pass, 77 skip, else fail.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$top/build}
export BUILD
command -v python3 >/dev/null || { echo "skip - no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export EX_OUT=$tmp
fail=0
for name in rdma_write protection; do
    if ! timeout 90 "$top/examples/run" "$name" $((20000 + RANDOM % 12000)) >"$tmp/$name.out" 2>&1; then
        echo "not ok - $name: examples/run failed"; sed 's/^/  /' "$tmp/$name.out"; fail=1; continue
    fi
    if ! grep -q "^diagram: $tmp/$name.html" "$tmp/$name.out" || [ ! -s "$tmp/$name.html" ]; then
        echo "not ok - $name: examples/run made no diagram"; sed 's/^/  /' "$tmp/$name.out"; fail=1; continue
    fi
    echo "ok - $name: examples/run wrote $name.html ($(stat -c %s "$tmp/$name.html") bytes)"
    png=
    if [ "$name" = rdma_write ]; then
        chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
        if [ -z "$chrome" ]; then
            echo "skip - no chromium: the rendering is not checked (apt-get install chromium); the SVG is"
        elif timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars \
            --user-data-dir="$tmp/chrome" --window-size=1600,1600 --screenshot="$tmp/$name.png" \
            "file://$tmp/$name.html" >"$tmp/chrome.log" 2>&1 && [ -s "$tmp/$name.png" ]; then
            echo "ok - headless $(basename "$chrome") rendered $name.html"
            png=$tmp/$name.png
        else
            echo "not ok - headless $chrome did not render $name.html:"; tail -5 "$tmp/chrome.log" | sed 's/^/  # /'
            fail=1
        fi
    fi
    python3 "$here/lib/check_diagram.py" "$tmp/$name.html" "$name" $png || fail=1
done
# (appended to trace_diagram.sh) Two machines' clocks: the server's trace
# shifted by +5 s (as if its CLOCK_MONOTONIC were 5 s ahead) must be
# realigned from the matched frames: softdat-trace reports an offset of
# about 5 s and, merged, every frame is received after it was sent.
shifted=$tmp/rdma_write.server.shifted.jsonl
if [ -s "$tmp/rdma_write.server.jsonl" ]; then
    python3 -c '
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        r["mono_ns"] += 5000000000
        out.write(json.dumps(r, separators=(",", ":")) + "\n")' "$tmp/rdma_write.server.jsonl" "$shifted"
    if "$BUILD/bin/softdat-trace" --json "$tmp/rdma_write.client.jsonl" "$shifted" >"$tmp/shift.json" 2>"$tmp/shift.err" &&
        out=$(python3 - "$tmp/shift.json" "$tmp/shift.err" 2>&1 <<'PY'
import json, re, sys
err = open(sys.argv[2]).read()
m = re.search(r"clock offset ([+-][0-9.]+) us", err)
assert m, "no offset reported: " + err
off = float(m.group(1))
assert abs(off - 5e6) < 5e3, f"offset {off} us, want about 5e6"
recs = [json.loads(l) for l in open(sys.argv[1])]
sent = {}
for i, r in enumerate(recs):
    if r["rec"] == "frame":
        k = (r["flow"], r["seq"], r["kind"])
        if r["dir"] == "tx":
            sent[k] = i
        else:
            assert k in sent, f"frame {k} received before it was sent in the merged order"
print(f"offset {off:.0f} us found, {len(sent)} frames in causal order")
PY
        ); then
        echo "ok - a trace 5 s ahead is realigned from its frames: $out"
    else
        echo "not ok - clock alignment of a shifted trace:"; sed 's/^/  # /' "$tmp/shift.err"; echo "${out:-}" | sed 's/^/  # /'
        fail=1
    fi
fi
exit $fail
