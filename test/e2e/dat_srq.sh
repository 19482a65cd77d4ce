#!/usr/bin/env bash
# Shared receive queue end to end: one server process (one SRQ, several SRQ
# EPs on one recv EVD) and several client processes over softdat-lo, using
# only the public DAT API (test/helpers/dat_srq_peer.c): bytes and
# per-connection order of every message, one low watermark event per
# arming, re-posting after reaping, exactly one DAT_ASYNC_ERROR_EP_BROKEN
# per disconnected SRQ EP, available/outstanding counts at the end.
# Exit 0 pass, 77 skip, else fail.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$(cd "$here/../.." && pwd)/build}
peer=$BUILD/test/helpers/dat_srq_peer
conf=$BUILD/dat.conf
for f in "$peer" "$conf"; do
    [ -e "$f" ] || { echo "not ok - $f missing (run make first)"; exit 1; }
done
command -v timeout >/dev/null || { echo "skip - no timeout(1)"; exit 77; }

tmp=$(mktemp -d)
srv_pid=
cli_pids=()
cleanup() {
    [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
    for p in "${cli_pids[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT

fail=0
run() { # nclients nmsg
    local nc=$1 nm=$2 port=$((20000 + RANDOM % 12000)) tag="srq-$1x$2"
    DAT_OVERRIDE=$conf timeout 60 "$peer" server softdat-lo "$port" "$nc" "$nm" >"$tmp/srv.$tag" 2>&1 &
    srv_pid=$!
    local i=0
    while ! grep -q listening "$tmp/srv.$tag" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$srv_pid" 2>/dev/null; then
            echo "not ok - $tag: server did not start"; cat "$tmp/srv.$tag"; fail=1
            wait "$srv_pid" 2>/dev/null; srv_pid=; return
        fi
        sleep 0.05
    done
    cli_pids=()
    for ((c = 0; c < nc; c++)); do
        DAT_OVERRIDE=$conf timeout 60 "$peer" client softdat-lo 127.0.0.1 "$port" "$c" "$nm" >"$tmp/cli.$tag.$c" 2>&1 &
        cli_pids+=($!)
    done
    local crc=0
    for p in "${cli_pids[@]}"; do wait "$p" || crc=$?; done
    cli_pids=()
    wait "$srv_pid"
    local src=$?
    srv_pid=
    if [ $crc -eq 0 ] && [ $src -eq 0 ]; then
        echo "ok - $tag: $(tail -n 1 "$tmp/srv.$tag")"
    else
        echo "not ok - $tag (clients $crc, server $src)"
        for ((c = 0; c < nc; c++)); do sed "s/^/  client $c: /" "$tmp/cli.$tag.$c"; done
        sed 's/^/  server: /' "$tmp/srv.$tag"
        fail=1
    fi
}
run 1 40
run 4 50
run 8 25
exit $fail
