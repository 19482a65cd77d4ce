#!/usr/bin/env bash
# The soft-RNIC data path across two processes on 127.0.0.1: echo Sends of
# several sizes, RDMA Write 1 MiB, Read it back, graceful disconnect; once
# with CRC off, once with CRC on (the peers check which bytes were summed
# in place, staged, placed cut-through) and once with CRC on and
# SOFTDAT_CRC_PLACEMENT=cut-through. Exit 0 pass, 77 skip, else fail.
set -u
BUILD=${BUILD:-$PWD/build}
PEER=$BUILD/test/helpers/emu_qp_peer
[ -x "$PEER" ] || { echo "skip - $PEER is not built"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/softdat-emu-qp.XXXXXX") || exit 1
spid=
cleanup() {
    [ -n "$spid" ] && kill "$spid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

fails=0
for mode in off on on:cut-through; do
    crc=${mode%%:*}
    export SOFTDAT_CRC=$crc
    if [ "$mode" = "${mode#*:}" ]; then unset SOFTDAT_CRC_PLACEMENT
    else export SOFTDAT_CRC_PLACEMENT=${mode#*:}; fi
    timeout 60 "$PEER" server >"$tmp/server.out" 2>"$tmp/server.err" &
    spid=$!
    port=
    for _ in $(seq 1 100); do
        port=$(awk '/^port / { print $2; exit }' "$tmp/server.out" 2>/dev/null)
        [ -n "$port" ] && break
        sleep 0.05
    done
    if [ -z "$port" ]; then
        echo "not ok - crc $mode: server did not start"; cat "$tmp/server.err"
        fails=$((fails + 1)); kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; spid=; continue
    fi
    timeout 60 "$PEER" client "$port" >"$tmp/client.out" 2>"$tmp/client.err"
    crc_rc=$?
    wait "$spid"
    src=$?
    spid=
    if [ "$crc_rc" -eq 0 ] && [ "$src" -eq 0 ]; then
        echo "ok - crc $mode: $(cat "$tmp/client.out")"
    else
        echo "not ok - crc $mode: client rc $crc_rc, server rc $src"
        cat "$tmp/client.out" "$tmp/client.err" "$tmp/server.out" "$tmp/server.err"
        fails=$((fails + 1))
    fi
done
[ "$fails" -eq 0 ]
