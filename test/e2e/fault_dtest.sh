#!/usr/bin/env bash
# Fault injection for users (issue 13 §4) on a program written by others:
# Debian's dtest, with SOFTDAT_FAULT set for the client (and SOFTDAT_CRC=on
# on both sides for the CRC case), under our libdat2 and Debian's. Each
# fault must reach dtest as a failing RNIC's would — the return code,
# connection event or DTO status dtest prints — and both processes must
# end (no hang). What dtest prints for each is quoted in
# docs/user-guide.md ("Testing your error handling").
# Exit 0 pass, 77 skip, else fail.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"
il_require_bin dtest

SIDE=15828 # dtest's side channel (its server listens there first)

case_() { # reg "fault" "expected client line (ERE)" crc|"" [end line]
    local reg=$1 fault=$2 want=$3 crc=${4:-} end=${5-Test Complete. FAILED}
    local tag
    tag=fault-$reg-$(echo "$fault" | tr -c 'A-Za-z0-9' _)
    IL_SLOG=$IL_TMP/$tag.server.log IL_CLOG=$IL_TMP/$tag.client.log
    if ! il_wait_port_free "$SIDE" 20; then
        il_notok "SOFTDAT_FAULT=$fault ($reg): port $SIDE busy"; return
    fi
    (
        [ -n "$crc" ] && export SOFTDAT_CRC=on
        il_start "$reg" 30 "$IL_SLOG" dtest -P "$IL_IA" -s
        spid=$IL_PID
        il_wait_listen "$SIDE" "$spid" 20 || { il_stop "$spid"; exit 3; }
        export SOFTDAT_FAULT=$fault
        il_run "$reg" 30 dtest -P "$IL_IA" -h 127.0.0.1 >"$IL_CLOG" 2>&1 </dev/null
        crc_rc=$?
        unset SOFTDAT_FAULT
        # The server may wait for a client that gave up: a short grace.
        il_wait "$spid" 2 || il_stop "$spid"
        [ "$crc_rc" -ne 124 ] # timeout(1): the client hung
    )
    local rc=$?
    if [ $rc -eq 0 ] && grep -Eq "$want" "$IL_CLOG" && { [ -z "$end" ] || grep -qF "$end" "$IL_CLOG"; }; then
        il_ok "SOFTDAT_FAULT=$fault${crc:+ (CRC on)} ($reg libdat2): dtest reports \"$(grep -Eo "$want" "$IL_CLOG" | head -1)\"${end:+, then \"$end\"}"
    else
        il_notok "SOFTDAT_FAULT=$fault ($reg libdat2): rc $rc, want /$want/"
        il_show client "$IL_CLOG" 8
        il_show server "$IL_SLOG" 4
    fi
}

for reg in $(il_registries); do
    case_ "$reg" "register=nth:3" 'Error registering [a-z ]+: DAT_INSUFFICIENT_RESOURCES DAT_RESOURCE_MEMORY' ""
    case_ "$reg" "create=nth:2" 'Error creating Protection Zone: DAT_INSUFFICIENT_RESOURCES DAT_RESOURCE_MEMORY' "" ""
    case_ "$reg" "refuse=nth:1" 'DAT_CONNECTION_EVENT_NON_PEER_REJECTED' ""
    case_ "$reg" "drop=nth:20" 'ERROR rdma_write: cookie= [0-9]+ exp 0x9 st 0x1' ""
    case_ "$reg" "crc=nth:5" 'ERROR rdma_write: cookie= [0-9]+ exp 0x9 st 0x1' crc
done
il_finish
