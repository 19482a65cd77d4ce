#!/usr/bin/env bash
# Data transfer end to end: two processes using only the public DAT API
# (test/helpers/dat_dto_peer.c) over softdat-lo. Scenarios: basic (send/recv
# sizes and segments, RDMA write + send, RDMA read, suppressed completions,
# flush on disconnect), violation (bad rmr_context: REMOTE_ACCESS +
# BROKEN), bind (dat_rmr_bind / unbind on a live connection) and overflow
# (a lost completion breaks the connection), length (EP length limits
# with SOFTDAT_DTO_LENGTH_LIMIT=ep, and the default IA limits), eager (Open
# MPI's eager-RDMA pattern: the target polls the last byte of each RDMA Write
# in memory and finds every byte before it placed; engine-only progress,
# SOFTDAT_POLL_US=off, as in the Open MPI hang this reproduces), rnr
# (InfiniBand semantics: Sends before the peer posted its receives wait
# for them instead of breaking the connection), quiet (a polled ping-pong
# of mostly suppressed Sends: no placement probe per message, none flushed
# when the peer disconnects right after the last).
# Exit 0 pass, 77 skip, else fail.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$(cd "$here/../.." && pwd)/build}
peer=$BUILD/test/helpers/dat_dto_peer
conf=$BUILD/dat.conf
for f in "$peer" "$conf"; do
    [ -e "$f" ] || { echo "not ok - $f missing (run make first)"; exit 1; }
done
command -v timeout >/dev/null || { echo "skip - no timeout(1)"; exit 77; }

tmp=$(mktemp -d)
srv_pid=
cleanup() {
    [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

fail=0
run() { # scenario
    # Below the ephemeral range (32768+): a client whose source port equals
    # the listening port would connect to itself.
    local sc=$1 port=$((20000 + RANDOM % 12000))
    DAT_OVERRIDE=$conf timeout 30 "$peer" server softdat-lo "$port" "$sc" >"$tmp/srv.$sc" 2>&1 &
    srv_pid=$!
    local i=0
    while ! grep -q listening "$tmp/srv.$sc" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$srv_pid" 2>/dev/null; then
            echo "not ok - $sc: server did not start"; cat "$tmp/srv.$sc"; fail=1
            wait "$srv_pid" 2>/dev/null; srv_pid=; return
        fi
        sleep 0.05
    done
    DAT_OVERRIDE=$conf timeout 30 "$peer" client softdat-lo 127.0.0.1 "$port" "$sc" >"$tmp/cli.$sc" 2>&1
    local crc=$?
    wait "$srv_pid"
    local src=$?
    srv_pid=
    if [ $crc -eq 0 ] && [ $src -eq 0 ]; then
        echo "ok - dto $sc${SOFTDAT_DTO_LENGTH_LIMIT:+ (SOFTDAT_DTO_LENGTH_LIMIT=$SOFTDAT_DTO_LENGTH_LIMIT)}${SOFTDAT_POLL_US:+ (SOFTDAT_POLL_US=$SOFTDAT_POLL_US)}"
    else
        echo "not ok - dto $sc (client $crc, server $src)"
        sed 's/^/  client: /' "$tmp/cli.$sc"
        sed 's/^/  server: /' "$tmp/srv.$sc"
        fail=1
    fi
}
run basic
run violation
run bind
run overflow
SOFTDAT_DTO_LENGTH_LIMIT=ep run length
run length
SOFTDAT_POLL_US=off run eager
run eager
run rnr
# quiet: the client's data-path summary (SOFTDAT_LOG=debug, at the
# disconnect) counts its placement probes. Once the client polls (its lease:
# a few ms into the run) only the signalled Sends (every 4th of 2002) need
# one, not each message: well under 3/4 of the messages (each had one
# before; under a sanitizer the timing behind the lease is not counted on).
# The lease is timing: on a loaded host (a busy loop beside the test) the
# client often never holds it while it sends, and every Send carries its
# own probe (6 runs in 12 did). So the best of three runs is held to the
# bound: a change that puts a probe on every message fails all three.
# test_qp_poll's t_quiet_sends_wait_for_a_wanted_probe asserts the
# mechanism itself, with the lease made certain.
# The client's placement probes in the last quiet run (its data-path
# summary at the disconnect).
quiet_probes() {
    sed -n 's/.*connection.s data path: .* \([0-9]*\) placement probes.*/\1/p' "$tmp/cli.quiet" 2>/dev/null | head -1
}
# quiet_verdict LABEL PROBES [WHICH]: at most 1501 probes for the 2002
# Sends (each had one before); not checked under a sanitizer.
quiet_verdict() {
    if [ -n "${SANITIZE:-}" ]; then
        echo "ok - $1: $2 placement probes for 2002 Sends (not checked under $SANITIZE)"
    elif [ -n "$2" ] && [ "$2" -le 1501 ]; then
        echo "ok - $1: $2 placement probes for 2002 Sends, 500 signalled"
    else
        echo "not ok - $1: placement probes '$2' for 2002 Sends${3:-} (want at most 1501)"
        fail=1
    fi
}
best=
for attempt in 1 2 3; do
    SOFTDAT_LOG=debug run quiet
    probes=$(quiet_probes)
    [ -n "$probes" ] || break
    if [ -z "$best" ] || [ "$probes" -lt "$best" ]; then best=$probes; fi
    [ "$best" -le 1501 ] || [ -n "${SANITIZE:-}" ] && break
    echo "# dto quiet: run $attempt sent $probes placement probes for 2002 Sends (the lease not held?)"
done
quiet_verdict "dto quiet" "$best" " in the best of three runs"
# quiet without leases (SOFTDAT_POLL_US=off: the engines place every
# message, as in a program that blocks or watches its memory): a probe
# only suppressed Sends wait for waits for the next signalled one, or the
# engine's timer (QP_PROBE_DEFER_ENGINE_US) on a run that slow; it no
# longer rides with every message. No lease timing is involved, so one run
# is held to the bound (not under a sanitizer, whose run is slow enough
# for the timer to send some).
SOFTDAT_POLL_US=off SOFTDAT_LOG=debug run quiet
quiet_verdict "dto quiet without leases" "$(quiet_probes)"
exit $fail
