#!/usr/bin/env bash
# IB unreliable datagrams end to end: two processes
# (test/helpers/dat_ud_peer.c) using only the public DAT API and the
# dat_ib_* macros. The UD address exchange (extended connection events,
# private data both ways), one datagram of every size from 0 to the UD MTU
# echoed back with bytes, length and source AH checked, a burst of 32
# datagrams all echoed (nothing lost), the MTU + 1 refusal, ud_cm_free /
# ud_ah_free and a post to a freed AH refused. Runs on loopback under our
# libdat2 and Debian's (IPv4, and IPv6 under ours), and between two network
# namespaces joined by a veth pair (test/e2e/lib/netns.sh).
# Exit 0 pass, 77 skip, else fail.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"
# shellcheck source=test/e2e/lib/netns.sh
. "$here/lib/netns.sh"
peer=$BUILD/test/helpers/dat_ud_peer
[ -x "$peer" ] || { il_notok "$peer not built"; il_finish; }

# ud_case LABEL REG CONF SERVER_IA CLIENT_IA HOST INNS
ud_case() {
    local label=$1 reg=$2 conf=$3 sia=$4 cia=$5 host=$6 inns=$7
    local port=$((20000 + RANDOM % 12000)) tag pre=
    tag=ud-$(echo "$label" | tr -c 'A-Za-z0-9' _)
    local slog=$IL_TMP/$tag.server.log clog=$IL_TMP/$tag.client.log
    # Our helper links our libdat2; for Debian's, preload it (a sanitizer
    # runtime, if the build has one, must come first).
    [ "$reg" = debian ] && pre="$IL_SANITIZER_RT $IL_DEBIAN_LIBDAT"
    local envs=(env DAT_OVERRIDE="$conf" LD_PRELOAD="$pre")
    "${envs[@]}" timeout --kill-after=5 40 "$peer" server "$sia" "$port" >"$slog" 2>&1 </dev/null &
    local spid=$!
    il_pids+=("$spid")
    if ! il_wait_log "$slog" listening "$spid" 20; then
        il_notok "$label: server did not start"; il_show server "$slog" 10
        il_stop "$spid"; return
    fi
    local run=("${envs[@]}" timeout --kill-after=5 40 "$peer" client "$cia" "$host" "$port")
    if [ "$inns" = 1 ]; then ns_exec "${run[@]}" >"$clog" 2>&1 </dev/null; else "${run[@]}" >"$clog" 2>&1 </dev/null; fi
    local crc=$?
    il_wait "$spid" 15
    local src=$?
    if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q 'client: ok' "$clog" && grep -q 'server: ok' "$slog"; then
        il_ok "$label ($(grep -o '[0-9]* datagrams echoed' "$slog"))"
    else
        il_notok "$label (client $crc, server $src)"
        il_show client "$clog" 12; il_show server "$slog" 12
    fi
}

for reg in $(il_registries); do
    ud_case "UD loopback, $reg libdat2" "$reg" "$IL_CONF" softdat-lo softdat-lo 127.0.0.1 0
done
if ip -6 addr show dev lo 2>/dev/null | grep -q '::1'; then
    ud_case "UD loopback IPv6 (::1), ours libdat2" ours "$IL_CONF" softdat-lo6 softdat-lo6 ::1 0
else
    il_skip "UD over IPv6: no ::1 on lo"
fi
if ns_setup; then
    for reg in $(il_registries); do
        ud_case "UD between two network namespaces (veth), $reg libdat2" "$reg" "$NS_CONF" softdat-nsa softdat-nsb \
            "$NS_A" 1
    done
else
    il_skip "UD between network namespaces: $NS_WHY"
fi
il_finish
