#!/usr/bin/env bash
# Debian's dtestx (DAT IB extensions) against softdat, under our libdat2
# and under Debian's:
#  - RC over loopback: RDMA write with immediate data, compare-and-swap,
#    fetch-and-add ("immed/atomic test PASSED"), in the modes default, -v,
#    -m, -p (counters: dat_ib_query/print_counters) and -q
#    (dat_ib_open_query, no server); the RC modes also between two network
#    namespaces (server in the first, client in the second,
#    test/e2e/lib/netns.sh);
#  - unreliable datagrams (-u, -U 1, -U 4, -U 16, -u -m, -U 16 -m) over loopback
#    and between two network namespaces joined by a veth pair
#    (test/e2e/lib/netns.sh): UD address exchange, datagrams both ways,
#    ud_cm_free / ud_ah_free ("UD test PASSED"). In UD mode both sides
#    take -h (the peer's address) and the client -c.
# A run passes when both sides exit 0, both print the PASSED line and
# neither printed an error. When the provider answers DAT_NOT_IMPLEMENTED
# for the feature (and only then) the case is skipped.
# dtestx uses the fixed side-channel port 15828 and conn qual 31112.
# Exit 0 pass, 77 skip (every case skipped), else fail.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"
# shellcheck source=test/e2e/lib/netns.sh
. "$here/lib/netns.sh"
il_require_bin dtestx

SIDE=15828
BAD='[Ee]rror|ERR|returned DAT_|FAILED|unexpected|mismatch|[Ww]rong'
# bad FILE...: an error line, not counting -p's counter listing (a counter
# such as DCNT_IA_CM_ERR_REQ_RETRY may be non-zero: a refused connect that
# the soft RNIC retried while the server was still starting).
bad() { grep -hv 'DCNT_' "$@" | grep -Eq "$BAD"; }

# judge REG LABEL WANT: the verdict on the pair just run (IL_* of il_pair).
judge() {
    local reg=$1 label=$2 want=$3
    local name="dtestx $label, $reg libdat2"
    if [ "$IL_SRC" = 0 ] && [ "$IL_CRC" = 0 ] && ! bad "$IL_SLOG" "$IL_CLOG" &&
        grep -q "$want" "$IL_CLOG" && grep -q "$want" "$IL_SLOG"; then
        il_ok "$name (${IL_SECS}s)"
    elif il_not_implemented "$IL_SLOG" "$IL_CLOG"; then
        il_skip "$name: $(grep -ho '[A-Za-z_]*[a-z_]\+ *returned DAT_NOT_IMPLEMENTED\|[A-Za-z_ ]*DAT_NOT_IMPLEMENTED' "$IL_SLOG" "$IL_CLOG" |
            head -1) not implemented (DAT_NOT_IMPLEMENTED)"
    else
        il_notok "$name (client exit $IL_CRC, server exit $IL_SRC, ${IL_SECS}s)"
        grep -hE "$BAD" "$IL_CLOG" | head -5 | sed 's/^/  # client: /'
        grep -hE "$BAD" "$IL_SLOG" | head -5 | sed 's/^/  # server: /'
        il_show client "$IL_CLOG" 6; il_show server "$IL_SLOG" 6
    fi
}

case_() { # reg label "args"
    local reg=$1 label=$2 args=$3 tag
    tag=dtestx-$reg-$(echo "$label" | tr -c 'A-Za-z0-9' _)
    il_pair "$tag" "$reg" 60 $SIDE dtestx "-P $IL_IA -s $args" "-P $IL_IA -h 127.0.0.1 $args"
    judge "$reg" "$label" 'immed/atomic test PASSED'
}

ud_case() { # reg "args": UD over loopback
    local reg=$1 args=$2 tag
    tag=dtestx-$reg-ud$(echo "$args" | tr -c 'A-Za-z0-9' _)
    il_pair "$tag" "$reg" 60 $SIDE dtestx "-P $IL_IA -s -h 127.0.0.1 $args" "-P $IL_IA -c -h 127.0.0.1 $args"
    judge "$reg" "UD $args, loopback" 'UD test PASSED'
}

# ud_ns_case REG "ARGS": server in our namespace (softdat-nsa), client in
# the child namespace (softdat-nsb), over the veth pair.
ud_ns_case() {
    local reg=$1 args=$2 tag t0=$SECONDS
    tag=dtestx-$reg-ns-ud$(echo "$args" | tr -c 'A-Za-z0-9' _)
    IL_SLOG=$IL_TMP/$tag.server.log IL_CLOG=$IL_TMP/$tag.client.log IL_SRC=- IL_CRC=-
    # shellcheck disable=SC2086
    IL_CONF=$NS_CONF il_start "$reg" 60 "$IL_SLOG" dtestx -P softdat-nsa -s -h "$NS_B" $args
    local spid=$IL_PID
    if il_wait_listen $SIDE "$spid" 20; then
        # shellcheck disable=SC2086
        IL_CONF=$NS_CONF il_cmd "$reg" 60 dtestx -P softdat-nsb -c -h "$NS_A" $args
        ns_exec "${IL_CMD[@]}" >"$IL_CLOG" 2>&1 </dev/null
        IL_CRC=$?
        il_wait "$spid" 15
        IL_SRC=$?
    else
        IL_SRC=not-listening
        il_stop "$spid"
    fi
    IL_SECS=$((SECONDS - t0))
    judge "$reg" "UD $args, two network namespaces" 'UD test PASSED'
}

# query REG: dtestx -q (dat_ib_open_query / dat_ib_close_query, no
# server): the attributes of the IA by name, without opening it.
query() {
    local reg=$1 log=$IL_TMP/dtestx-q-$1.log rc
    il_run "$reg" 30 dtestx -P "$IL_IA" -q >"$log" 2>&1 </dev/null
    rc=$?
    if [ $rc -eq 0 ] && grep -q "Open_Query: $IL_IA num_attrs" "$log" &&
        grep -q 'DAT_COUNTERS=TRUE' "$log" && ! bad "$log"; then
        il_ok "dtestx -q (open query), $reg libdat2"
    else
        il_notok "dtestx -q (open query), $reg libdat2 (exit $rc)"; il_show q "$log" 8
    fi
}

UD_MODES=("-u" "-U 1" "-U 4" "-U 16" "-u -m" "-U 16 -m")
for reg in $(il_registries); do
    case_ "$reg" "RC: write-immediate, cmp-and-swap, fetch-and-add" ""
    case_ "$reg" "-v (verbose)" "-v"
    case_ "$reg" "-m" "-m"
    case_ "$reg" "-p (counters)" "-p"
    # -p: both sides printed their IA, EP and EVD counters, and the client
    # EP counted its write-immediate and its two fetch-and-adds.
    if grep -q 'EP\[0\] Cntrs' "$IL_CLOG" 2>/dev/null && grep -q 'IA Cntrs' "$IL_SLOG" 2>/dev/null &&
        grep -Eq 'DCNT_EP_POST_WRITE_IMM +1$' "$IL_CLOG" && grep -Eq 'DCNT_EP_POST_FETCH_ADD +2$' "$IL_CLOG"; then
        il_ok "dtestx -p counted the client's operations, $reg libdat2"
    else
        il_notok "dtestx -p counters, $reg libdat2"; il_show client "$IL_CLOG" 20
    fi
    query "$reg"
    for m in "${UD_MODES[@]}"; do ud_case "$reg" "$m"; done
done
# ns_case REG LABEL ARGS: server here on softdat-nsa, client in the second
# namespace on softdat-nsb.
ns_case() {
    local reg=$1 label=$2 args=$3 t0=$SECONDS
    local slog=$IL_TMP/dtestx-ns-$reg-$((++nsn)).server.log clog=$IL_TMP/dtestx-ns-$reg-$nsn.client.log
    local name="dtestx $label, two namespaces, $reg libdat2"
    if ! il_wait_port_free $SIDE 20; then
        il_notok "$name: port $SIDE busy"; return
    fi
    # shellcheck disable=SC2086
    il_start "$reg" 60 "$slog" dtestx -P softdat-nsa -s $args
    local spid=$IL_PID
    if ! il_wait_listen $SIDE "$spid" 20; then
        il_notok "$name: server not listening"; il_show server "$slog"; il_stop "$spid"; return
    fi
    # shellcheck disable=SC2086
    il_run "$reg" 60 nsenter -t "$NS_PID" -n dtestx -P softdat-nsb -h "$NS_A" $args >"$clog" 2>&1 </dev/null
    local crc=$?
    il_wait "$spid" 15
    local src=$?
    if [ $crc -eq 0 ] && [ $src -eq 0 ] && ! bad "$slog" "$clog" &&
        grep -q 'immed/atomic test PASSED' "$clog" && grep -q 'immed/atomic test PASSED' "$slog"; then
        il_ok "$name ($((SECONDS - t0))s)"
    else
        il_notok "$name (client exit $crc, server exit $src)"
        il_show client "$clog" 8; il_show server "$slog" 8
    fi
}

nsn=0
if ns_setup; then
    IL_CONF=$NS_CONF
    for reg in $(il_registries); do
        ns_case "$reg" "RC" ""
        ns_case "$reg" "-v" "-v"
        ns_case "$reg" "-m" "-m"
        ns_case "$reg" "-p (counters)" "-p"
        qlog=$IL_TMP/dtestx-ns-q-$reg.log
        il_run "$reg" 30 nsenter -t "$NS_PID" -n dtestx -P softdat-nsb -q >"$qlog" 2>&1 </dev/null
        if [ $? -eq 0 ] && grep -q 'Open_Query: softdat-nsb num_attrs' "$qlog"; then
            il_ok "dtestx -q (open query), second namespace, $reg libdat2"
        else
            il_notok "dtestx -q (open query), second namespace, $reg libdat2"; il_show q "$qlog" 8
        fi
    done
    IL_CONF=$BUILD/dat.conf
    for reg in $(il_registries); do
        for m in "${UD_MODES[@]}"; do ud_ns_case "$reg" "$m"; done
    done
    ns_cleanup
else
    il_skip "dtestx between two network namespaces: $NS_WHY"
    il_skip "dtestx UD between network namespaces: $NS_WHY"
fi
il_finish
