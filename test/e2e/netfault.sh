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
# Exit 0 pass, 77 skip (no namespaces), else fail. Where the kernel has no
# sch_netem, the same delay/loss/reordering/duplication cases run over a
# second link between the namespaces made of two TUN devices and
# test/helpers/tun_impair, a userspace netem (skipped, reported, only if
# TUN devices cannot be created either).
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

# The IAs and server address the cases use: the veth link by default, the
# TUN link (tun_case) while it is up.
IA_A=softdat-nsa IA_B=softdat-nsb ADDR_B=$NS_B

# start_server MODE: the server in namespace B (PID SRV), waits for "listening".
start_server() {
    PORT=$((PORT + 1))
    : >"$IL_TMP/srv.log" # the previous case's "listening" must not count
    ns_exec env DAT_OVERRIDE="$NS_CONF" SOFTDAT_PEER_TIMEOUT_MS="${PTO:-}" \
        timeout 90 "$peer" server "$IA_B" "$PORT" "$1" >"$IL_TMP/srv.log" 2>&1 &
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
        timeout 90 "$peer" client "$IA_A" "$ADDR_B" "$PORT" "$@" >"$IL_TMP/cli.log" 2>&1
}

show() { il_show client "$IL_TMP/cli.log" 8; il_show server "$IL_TMP/srv.log" 8; }

verify_case() { # label "qdisc args"
    qdisc "$2" || { il_notok "$1: cannot apply $2"; return; }
    verify_run "$1" "${2:-no qdisc}"
}

verify_run() { # label what
    local t0=$SECONDS
    if ! start_server verify; then
        il_notok "$1: server did not start"; show; return
    fi
    client verify
    local crc=$?
    wait "$SRV"
    local src=$?
    if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q '^verified 24 rounds' "$IL_TMP/cli.log"; then
        il_ok "$1 ($2): 24 rounds, 9 MiB moved, every byte checked ($((SECONDS - t0)) s)"
    else
        il_notok "$1 ($2): client $crc, server $src"; show
    fi
}

# The userspace netem: two TUN devices, sd-ta here (10.78.0.1) and sd-tb in
# namespace B (10.78.0.2), joined by tun_impair with the given impairments
# for the duration of one case; the devices vanish with it.
TUN_A=10.78.0.1 TUN_B=10.78.0.2 TUN_N=0
impair=$BUILD/test/helpers/tun_impair
tun_case() { # label "tun_impair args"
    # Fresh device names per case: a closed TUN device goes a moment later.
    TUN_N=$((TUN_N + 1))
    local ta=sd-ta$TUN_N tb=sd-tb$TUN_N
    rm -f "$IL_TMP/tun.log" # its "ready" must be this run's
    "$impair" "$ta" "$tb" $2 --seed 13 --time 120 >"$IL_TMP/tun.log" 2>&1 &
    local tun=$! i=0
    il_pids+=("$tun")
    until grep -q '^ready' "$IL_TMP/tun.log" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 50 ] || ! kill -0 "$tun" 2>/dev/null; then
            il_notok "$1: tun_impair did not start: $(head -1 "$IL_TMP/tun.log")"; return
        fi
        sleep 0.1
    done
    if ! ip link set "$tb" netns "$NS_PID" 2>"$IL_TMP/tun.err" ||
        ! ip addr add "$TUN_A" peer "$TUN_B" dev "$ta" 2>>"$IL_TMP/tun.err" ||
        ! ip link set "$ta" up 2>>"$IL_TMP/tun.err" ||
        ! ns_exec sh -c "ip addr add $TUN_B peer $TUN_A dev $tb && ip link set $tb up" 2>>"$IL_TMP/tun.err"; then
        il_notok "$1: cannot set up the TUN link: $(tr '\n' ' ' <"$IL_TMP/tun.err")"
        kill "$tun"; wait "$tun" 2>/dev/null; return
    fi
    IA_A=softdat-ta IA_B=softdat-tb ADDR_B=$TUN_B
    verify_run "$1" "userspace netem: tun_impair $2"
    IA_A=softdat-nsa IA_B=softdat-nsb ADDR_B=$NS_B
    kill "$tun"
    wait "$tun" 2>/dev/null
    il_note "$(grep '^tun_impair:' "$IL_TMP/tun.log")"
}

# Can this kernel give us TUN devices (the userspace netem's link)?
HAVE_TUN=0
if [ -x "$impair" ] && [ -c /dev/net/tun ]; then
    "$impair" sd-tprobe-a sd-tprobe-b --time 0.2 >/dev/null 2>&1 && HAVE_TUN=1
fi
# softdat IAs on the TUN link's addresses.
awk -v a="$TUN_A" -v b="$TUN_B" '
    $1 == "softdat-nsa" { l = $0; sub(/^softdat-nsa /, "softdat-ta ", l); sub(/"10\.77\.0\.1"/, "\"" a "\"", l); print l }
    $1 == "softdat-nsb" { l = $0; sub(/^softdat-nsb /, "softdat-tb ", l); sub(/"10\.77\.0\.2"/, "\"" b "\"", l); print l }
    ' "$NS_CONF" >>"$NS_CONF.tun" && cat "$NS_CONF.tun" >>"$NS_CONF"

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
elif [ $HAVE_TUN = 1 ]; then
    il_note "no sch_netem in this kernel: the netem cases run over TUN devices and tun_impair (userspace netem)"
    tun_case "delay and jitter (reorders)" "--delay 8 --jitter 4"
    tun_case "loss" "--loss 3"
    tun_case "reordering" "--delay 2 --reorder 25"
    tun_case "duplication" "--dup 5"
    tun_case "everything at once" "--delay 4 --jitter 2 --loss 1 --dup 2 --reorder 10"
else
    il_skip "netem delay, loss, reordering, duplication: no sch_netem in this kernel and no TUN devices for the userspace netem"
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
