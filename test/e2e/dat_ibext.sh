#!/usr/bin/env bash
# IB extensions end to end: two processes (test/helpers/dat_ibext_peer.c)
# over softdat-lo using only the public DAT API and the dat_ib_* macros:
# RDMA Write with immediate data both ways (256 B, 70000 B, no data; the
# receiver's transfered_length is the Write's), fetch-and-add and
# compare-and-swap, the IB capability attributes, and Sends completed just
# before an abrupt disconnect all reaching the peer. Runs under our
# libdat2 and, when installed, Debian's.
# Exit 0 pass, 77 skip, else fail.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$(cd "$here/../.." && pwd)/build}
peer=$BUILD/test/helpers/dat_ibext_peer
conf=$BUILD/dat.conf
for f in "$peer" "$conf"; do
    [ -e "$f" ] || { echo "not ok - $f missing (run make first)"; exit 1; }
done
command -v timeout >/dev/null || { echo "skip - no timeout(1)"; exit 77; }
debian_libdat=/usr/lib/x86_64-linux-gnu/libdat2.so.2
asan_rt=$(ldd "$peer" 2>/dev/null | awk '/libasan/ {print $3}')

tmp=$(mktemp -d)
srv_pid=
cleanup() {
    [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

fail=0
run() { # registry
    local reg=$1 port=$((20000 + RANDOM % 12000)) pre=
    # Our helper links our libdat2 (rpath/LD_LIBRARY_PATH from the build);
    # for Debian's, preload the system library instead.
    # (An ASan build needs its runtime first in the list.)
    [ "$reg" = debian ] && pre="$asan_rt $debian_libdat"
    DAT_OVERRIDE=$conf LD_PRELOAD=$pre timeout 30 "$peer" server softdat-lo "$port" >"$tmp/srv.$reg" 2>&1 &
    srv_pid=$!
    local i=0
    while ! grep -q listening "$tmp/srv.$reg" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$srv_pid" 2>/dev/null; then
            echo "not ok - ibext ($reg libdat2): server did not start"; cat "$tmp/srv.$reg"; fail=1
            wait "$srv_pid" 2>/dev/null; srv_pid=; return
        fi
        sleep 0.05
    done
    DAT_OVERRIDE=$conf LD_PRELOAD=$pre timeout 30 "$peer" client softdat-lo 127.0.0.1 "$port" >"$tmp/cli.$reg" 2>&1
    local crc=$?
    wait "$srv_pid"
    local src=$?
    srv_pid=
    if [ $crc -eq 0 ] && [ $src -eq 0 ]; then
        echo "ok - ibext: write-immediate, atomics, abrupt disconnect keeps data ($reg libdat2)"
    else
        echo "not ok - ibext ($reg libdat2) (client $crc, server $src)"
        sed 's/^/  client: /' "$tmp/cli.$reg"
        sed 's/^/  server: /' "$tmp/srv.$reg"
        fail=1
    fi
}
run ours
if [ -e "$debian_libdat" ]; then run debian; else echo "# Debian libdat2 not installed: ours only"; fi
exit $fail
