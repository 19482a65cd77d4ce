#!/usr/bin/env bash
# Debian's dtestcm (connection setup rate, no data transfer) against
# softdat over loopback, through our libdat2 and Debian's: server in the
# background (killed only by its PID), client, both bounded by timeout.
# dtestcm uses the fixed side-channel port 15828 and conn qual 45248.
# Exit 0 pass, 77 skip.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$(cd "$here/../.." && pwd)/build}
conf=$BUILD/dat.conf
dtestcm=$(command -v dtestcm || true)
if [ -z "$dtestcm" ]; then
    echo "skip - dtestcm (Debian dapl2-utils) is not installed"
    exit 77
fi
[ -e "$conf" ] || { echo "not ok - $conf missing (run make first)"; exit 1; }
tmp=$(mktemp -d)
spid=
cleanup() {
    [ -n "$spid" ] && kill "$spid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# dtestcm's side channel is a fixed TCP port: other dtest-family runs on
# this host (e.g. other test scripts) would answer our client instead.
side_busy() { ss -Htln 2>/dev/null | awk '{print $4}' | grep -qE ':(15828|45248)$'; }
wait_side_free() {
    local i=0
    while side_busy; do
        i=$((i + 1))
        [ $i -gt 300 ] && return 1
        sleep 0.1
    done
}

fail=0
ran=0
# Another dtest-family program on this host can take 15828 or 45248
# between our check and our server's bind (the server then says so): retry.
contended() { grep -qE "Couldn't listen to port 15828|psp_create: DAT_CONN_QUAL_IN_USE" "$tmp/s.log"; }
run() { # name libdir count
    local try
    for try in 1 2 3 4 5; do
        run_once "$@"
        [ "$result" = contended ] || return
        sleep 2
    done
    echo "ok - $1 # SKIP ports 15828/45248 kept busy by another dtest"
}
run_once() { # name libdir count
    local name=$1 libdir=$2 n=$3
    result=
    if ! wait_side_free; then
        result=contended
        return
    fi
    DAT_OVERRIDE="$conf" LD_LIBRARY_PATH="$libdir" timeout 120 "$dtestcm" -P softdat-lo -s -c "$n" \
        > "$tmp/s.log" 2>&1 &
    spid=$!
    sleep 1
    DAT_OVERRIDE="$conf" LD_LIBRARY_PATH="$libdir" timeout 120 "$dtestcm" -P softdat-lo -h 127.0.0.1 -c "$n" \
        > "$tmp/c.log" 2>&1
    local crc=$?
    wait "$spid"
    local src=$?
    spid=
    if contended; then
        result=contended
        return
    fi
    ran=$((ran + 1))
    if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q "ALL $n CONNECTED on Client" "$tmp/c.log" &&
        grep -q "ALL $n CONNECTED on Server" "$tmp/s.log"; then
        echo "ok - $name: $(grep -o 'CPS *[0-9.]*' "$tmp/c.log")"
    else
        echo "not ok - $name (client $crc, server $src)"
        tail -n 15 "$tmp/c.log" | sed 's/^/  # client: /'; tail -n 15 "$tmp/s.log" | sed 's/^/  # server: /'
        fail=1
    fi
}
run "dtestcm -c 10, our libdat2" "$BUILD/lib" 10
run "dtestcm -c 1000, our libdat2" "$BUILD/lib" 1000
if [ -e /usr/lib/x86_64-linux-gnu/libdat2.so.2 ]; then
    run "dtestcm -c 1000, Debian libdat2" /usr/lib/x86_64-linux-gnu 1000
fi
[ $fail -eq 0 ] && [ $ran -eq 0 ] && exit 77
exit $fail
