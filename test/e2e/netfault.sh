#!/usr/bin/env bash
# Network faults (issue 13 §3), between two network namespaces joined by a
# veth pair (test/e2e/lib/netns.sh), with tc qdiscs on both ends of the
# link: netem where the kernel has it, tbf (rate + small queue) otherwise.
# test/helpers/dat_stream_peer.c is each side (public DAT API only).
#
#   verify on a clean link, a slow link that drops from a small queue
#   (tbf), and with netem: delay with jitter (reordering), loss, reordering,
#   duplication, and all of them at once: 24 rounds of a 256 KiB RDMA
#   Write, a Send of up to 60 KiB and a 128 KiB RDMA Read, every byte
#   checked, every message exactly once and in order.
#   link cut mid-stream (both ends drop every frame, silently): with
#   SOFTDAT_PEER_TIMEOUT_MS=3000 each side — the sender and the pure
#   receiver — sees its posted DTOs all complete (FLUSHED or an error) and
#   one connection event within the bound (10 s); descriptors back to their
#   count before dat_ia_open.
#   peer killed (SIGKILL) mid-stream: the survivor's DTOs complete and its
#   connection event arrives at once (the kernel closes the dead peer's
#   socket).
# Exit 0 pass, 77 skip (no namespaces), else fail; the netem cases are
# skipped (reported) where the kernel has no sch_netem.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck shell=bash source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"
# shellcheck source=test/e2e/lib/netns.sh
. "$here/lib/netns.sh"

peer=$BUILD/test/helpers/dat_stream_peer
[ -x "$peer" ] || { il_notok "$peer missing (run make first)"; il_finish; }
command -v tc >/dev/null 2>&1 || { echo "skip - tc (iproute2) not installed"; exit 77; }
if ! ns_setup; then
    echo "skip - $NS_WHY"
    exit 77
fi
# netem (sch_netem) is a kernel module some kernels lack; tbf (a rate and a
# small queue: queueing delay and tail drops, so TCP loses and retransmits)
# is nearly always there. Link cuts need neither: the link goes down.
HAVE_NETEM=0 HAVE_TBF=0
tc qdisc add dev sd-va root netem delay 1ms 2>/dev/null && HAVE_NETEM=1
tc qdisc del dev sd-va root 2>/dev/null
tc qdisc add dev sd-va root tbf rate 50mbit burst 16kb limit 20kb 2>/dev/null && HAVE_TBF=1
tc qdisc del dev sd-va root 2>/dev/null

PORT=24601
qdisc() { # "QDISC args" | "" (none): on both ends of the link
    tc qdisc del dev sd-va root 2>/dev/null
    ns_exec tc qdisc del dev sd-vb root 2>/dev/null
    [ -z "$1" ] && return 0
    # shellcheck disable=SC2086  # the qdisc arguments are words
    tc qdisc add dev sd-va root $1 && ns_exec tc qdisc add dev sd-vb root $1
}

# start_server MODE: the server in namespace B (PID SRV), waits for "listening".
start_server() {
    PORT=$((PORT + 1))
    : >"$IL_TMP/srv.log" # the previous case's "listening" must not count
    ns_exec env DAT_OVERRIDE="$NS_CONF" SOFTDAT_PEER_TIMEOUT_MS="${PTO:-}" \
        timeout 90 "$peer" server softdat-nsb "$PORT" "$1" >"$IL_TMP/srv.log" 2>&1 &
    SRV=$!
    il_pids+=("$SRV")
    local i=0
    until grep -q listening "$IL_TMP/srv.log" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$SRV" 2>/dev/null; then return 1; fi
        sleep 0.05
    done
}

client() { # MODE [SECONDS]
    env DAT_OVERRIDE="$NS_CONF" SOFTDAT_PEER_TIMEOUT_MS="${PTO:-}" \
        timeout 90 "$peer" client softdat-nsa "$NS_B" "$PORT" "$@" >"$IL_TMP/cli.log" 2>&1
}

show() { il_show client "$IL_TMP/cli.log" 8; il_show server "$IL_TMP/srv.log" 8; }

verify_case() { # label "qdisc args"
    qdisc "$2" || { il_notok "$1: cannot apply $2"; return; }
    local t0=$SECONDS
    if ! start_server verify; then
        il_notok "$1: server did not start"; show; return
    fi
    client verify
    local crc=$?
    wait "$SRV"
    local src=$?
    if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q '^verified 24 rounds' "$IL_TMP/cli.log"; then
        il_ok "$1 (${2:-no qdisc}): 24 rounds, 9 MiB moved, every byte checked ($((SECONDS - t0)) s)"
    else
        il_notok "$1 (${2:-no qdisc}): client $crc, server $src"; show
    fi
}

verify_case "no faults" ""
if [ $HAVE_TBF = 1 ]; then
    verify_case "slow link, queue drops (loss and retransmission)" "tbf rate 40mbit burst 8kb limit 12kb"
else
    il_skip "slow link with queue drops: tc tbf unavailable in this kernel"
fi
if [ $HAVE_NETEM = 1 ]; then
    verify_case "delay and jitter (reorders)" "netem delay 8ms 4ms"
    verify_case "loss" "netem loss 3%"
    verify_case "reordering" "netem delay 2ms reorder 25% 50%"
    verify_case "duplication" "netem duplicate 5%"
    verify_case "everything at once" "netem delay 4ms 2ms loss 1% duplicate 2% reorder 10% 50%"
else
    il_skip "netem delay, loss, reordering, duplication: sch_netem unavailable in this kernel (Error: Specified qdisc kind is unknown)"
fi
qdisc ""

# results FILE: "ok" when the stream side ended cleanly after the failure.
stream_ok() {
    grep -q '^result ' "$1" && grep -Eq '^fds=([0-9]+)/\1$' "$1" && ! grep -q FAIL "$1"
}

# Link cut: both sides stream until the link stops passing packets.
PTO=3000
if start_server stream; then
    client stream 30 &
    CLI=$!
    il_pids+=("$CLI")
    sleep 1.5
    # The cable is pulled: nothing passes either way and neither side is
    # told (a qdisc on each end that can send no packet: tbf with a 64-byte
    # bucket drops every frame; setting the link down instead would make
    # the sender's own route vanish, a local error, not a silent peer).
    qdisc "tbf rate 8bit burst 64 limit 64"
    cut=$SECONDS
    wait "$CLI"
    crc=$?
    took=$((SECONDS - cut))
    wait "$SRV"
    src=$?
    took_srv=$((SECONDS - cut))
    # Asserted for both: the sender (its data in flight: TCP_USER_TIMEOUT)
    # and the pure receiver (nothing of its own unacknowledged: keepalive,
    # whose probes the cut drops at its own qdisc, and the connection's
    # own check of what the socket last received, docs/reliability.md)
    # notice within the bound, every DTO posted completes, descriptors
    # return.
    if [ $crc -eq 0 ] && stream_ok "$IL_TMP/cli.log" && [ $took -le 10 ] &&
        grep -q 'failed_at=' "$IL_TMP/cli.log" &&
        [ $src -eq 0 ] && stream_ok "$IL_TMP/srv.log" && [ $took_srv -le 10 ]; then
        il_ok "link cut mid-stream: both sides' DTOs all completed and their connections ended, the sender ${took} s and the pure receiver ${took_srv} s after the cut (SOFTDAT_PEER_TIMEOUT_MS=3000, bound 10 s); descriptors back to their start"
        il_note "client: $(grep '^result' "$IL_TMP/cli.log")"
        il_note "server: $(grep '^result' "$IL_TMP/srv.log")"
    else
        il_notok "link cut: client $crc (${took} s after the cut), server $src (${took_srv} s)"; show
    fi
else
    il_notok "link cut: server did not start"; show
fi
qdisc ""
PTO=

# Peer killed: SIGKILL the server mid-stream.
if start_server stream; then
    client stream 30 &
    CLI=$!
    il_pids+=("$CLI")
    sleep 1
    # the server runs under timeout(1) inside nsenter: kill the program itself
    spid=$(pgrep -f "^$peer server softdat-nsb $PORT " | head -1)
    if [ -n "$spid" ]; then kill -9 "$spid"; fi
    killed=$SECONDS
    wait "$CLI"
    crc=$?
    wait "$SRV" 2>/dev/null
    took=$((SECONDS - killed))
    if [ -n "$spid" ] && [ $crc -eq 0 ] && stream_ok "$IL_TMP/cli.log" && [ $took -le 3 ]; then
        il_ok "peer killed (SIGKILL) mid-stream: the client's DTOs completed and its connection ended within ${took} s; descriptors back to their start"
        il_note "client: $(grep '^result' "$IL_TMP/cli.log")"
    else
        il_notok "peer killed: pid '$spid', client $crc after ${took} s"; show
    fi
else
    il_notok "peer killed: server did not start"; show
fi

il_finish
