#!/usr/bin/env bash
# iWARP socket service points across two processes (dat_ssp_peer): plain
# TCP streaming mode on a socket the programs made, then dat_iw_ssp_create
# (server) / dat_iw_socket_connect (client) turn that very connection into
# an RDMA connection, checked by an RDMA Write of 4 KiB. Under our libdat2
# (IPv4, IPv6) and Debian's, on loopback and between two network
# namespaces joined by a veth pair (test/e2e/lib/netns.sh; CRC is on
# there, as on any non-loopback link). Exit 0 pass, 77 skip.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"
# shellcheck source=test/e2e/lib/netns.sh
. "$here/lib/netns.sh"
peer=$BUILD/test/helpers/dat_ssp_peer
[ -x "$peer" ] || { echo "not ok - $peer missing (run make first)"; exit 1; }

# run REG LABEL IA_S IA_C HOST [ns]: server here, client here or (ns) in
# the second namespace.
run() {
    local reg=$1 label=$2 ias=$3 iac=$4 host=$5 where=${6:-} t0=$SECONDS
    local slog=$IL_TMP/ssp-$reg-$((++n)).server.log clog=$IL_TMP/ssp-$reg-$n.client.log
    il_start "$reg" 60 "$slog" "$peer" -s -P "$ias"
    local spid=$IL_PID port=
    if il_wait_log "$slog" '^ready' "$spid" 20; then
        port=$(awk '/^ready/ {print $2; exit}' "$slog")
    fi
    if [ -z "$port" ]; then
        il_notok "SSP $label, $reg libdat2: server did not start"; il_show server "$slog"
        il_stop "$spid"; return
    fi
    if [ "$where" = ns ]; then
        il_run "$reg" 60 nsenter -t "$NS_PID" -n "$peer" -c -P "$iac" -h "$host" -p "$port" >"$clog" 2>&1
    else
        il_run "$reg" 60 "$peer" -c -P "$iac" -h "$host" -p "$port" >"$clog" 2>&1
    fi
    local crc=$?
    il_wait "$spid" 15
    local src=$?
    if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q 'bytes of RDMA write verified' "$slog"; then
        il_ok "SSP $label, $reg libdat2 ($((SECONDS - t0))s)"
    else
        il_notok "SSP $label, $reg libdat2 (client $crc, server $src)"
        il_show client "$clog"; il_show server "$slog"
    fi
}

n=0
for reg in $(il_registries); do
    run "$reg" "loopback IPv4" softdat-lo softdat-lo 127.0.0.1
    run "$reg" "loopback IPv6" softdat-lo6 softdat-lo6 ::1
done
if ns_setup; then
    IL_CONF=$NS_CONF
    for reg in $(il_registries); do
        run "$reg" "two namespaces IPv4" softdat-nsa softdat-nsb "$NS_A" ns
        run "$reg" "two namespaces IPv6" softdat-nsa6 softdat-nsb6 "$NS_A6" ns
    done
    ns_cleanup
else
    il_skip "SSP between two network namespaces: $NS_WHY"
fi
il_finish
