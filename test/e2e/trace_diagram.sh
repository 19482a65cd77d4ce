#!/usr/bin/env bash
# The sequence diagram (softdat-trace --html) of examples/run rdma_write
# and examples/run protection: the SVG is well-formed and holds the
# arrows the runs imply (test/e2e/lib/check_diagram.py: the Write FPDU
# with its STag/offset, the target's allowed check and placement, the
# requester's completion and no DTO event at the target; the denied checks,
# Terminates and error events of protection), and, when a Chromium is
# installed, headless Chromium renders the rdma_write page to a PNG that
# is not blank. Without Chromium that part is skipped with a message; the
# SVG is asserted in every case. Exit 0 pass, 77 skip, else fail.
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
exit $fail
