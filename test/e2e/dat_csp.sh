#!/usr/bin/env bash
# Two-process CSP model and dat_cr_handoff: the dat_csp_peer helper as
# server (background, killed only by its PID, bounded by timeout) and
# client (dat_ep_common_connect), through our libdat2 (IPv4 and IPv6) and
# through Debian's, where the helper reaches the CSP calls Debian's
# registry does not export through our provider table. Exit 0 pass.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$(cd "$here/../.." && pwd)/build}
peer=$BUILD/test/helpers/dat_csp_peer
conf=$BUILD/dat.conf
for f in "$peer" "$conf"; do
    [ -e "$f" ] || { echo "not ok - $f missing (run make first)"; exit 1; }
done
tmp=$(mktemp -d)
spid=
cleanup() {
    [ -n "$spid" ] && kill "$spid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

fail=0
# run NAME LIBDIR [IA HOST]: LIBDIR empty = our libdat2 (RUNPATH). The
# server binds its CSP to a port of our choosing and prints it.
run() {
    local name=$1 libdir=$2 ianame=${3:-softdat-lo} host=${4:-127.0.0.1}
    local envs=(env -u LD_LIBRARY_PATH DAT_OVERRIDE="$conf")
    [ -n "$libdir" ] && envs+=(LD_LIBRARY_PATH="$libdir")
    : > "$tmp/server.log"
    "${envs[@]}" timeout 60 "$peer" -s -P "$ianame" > "$tmp/server.log" 2>&1 &
    spid=$!
    local i=0
    while ! grep -q '^ready' "$tmp/server.log" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$spid" 2>/dev/null; then
            echo "not ok - $name: server did not start"; sed 's/^/  # /' "$tmp/server.log"
            kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; spid=; fail=1; return
        fi
        sleep 0.1
    done
    local port
    port=$(awk '/^ready/ {print $2; exit}' "$tmp/server.log")
    "${envs[@]}" timeout 60 "$peer" -c -P "$ianame" -h "$host" -p "$port" > "$tmp/client.log" 2>&1
    local crc=$?
    wait "$spid"
    local src=$?
    spid=
    if [ $crc -eq 0 ] && [ $src -eq 0 ]; then
        echo "ok - $name ($(grep -h -o 'CSP calls .*\|calling the provider table' "$tmp/server.log" | head -1))"
    else
        echo "not ok - $name (client $crc, server $src)"
        sed 's/^/  # client: /' "$tmp/client.log"; sed 's/^/  # server: /' "$tmp/server.log"
        fail=1
    fi
}

run "our libdat2: CSP accept, handoff to PSP and RSP, reject" ""
run "our libdat2, IPv6 (::1)" "" softdat-lo6 ::1
debian=/usr/lib/x86_64-linux-gnu
if [ -e "$debian/libdat2.so.2" ]; then
    run "Debian libdat2: same exchange" "$debian"
else
    echo "ok - Debian libdat2 not installed # SKIP"
fi
exit $fail
