#!/usr/bin/env bash
# shellcheck disable=SC2015  # il_ok/il_notok always succeed: A && ok || notok is safe
# The provider's real traffic judged by an independent decoder: capture a
# Debian dtest run (Send, RDMA Write, RDMA Read Request/Response) and a
# dat_dto_peer "violation" run (a Read with a bad rmr_context: Terminate)
# with tshark on loopback, once with SOFTDAT_CRC=on and once with
# SOFTDAT_CRC=off in both processes, and require (recipe of
# research/perf-baselines.md and spec/iwarp-wire-reference.md §7):
#   - MPA Request and Reply seen for every connection, C flag as configured;
#   - every TCP segment with payload decodes as MPA / DDP / RDMAP;
#   - zero malformed frames and zero expert errors;
#   - CRC on: "Good CRC32" count == FPDU count, no "Bad CRC32";
#   - the opcodes Send, RDMA Write, Read Request, Read Response, Terminate.
# Exit 0 pass, 77 skip (no tshark / dtest / capture permission), else fail.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"
il_require_bin tshark dtest
peer=$BUILD/test/helpers/dat_dto_peer
[ -x "$peer" ] || { il_notok "$peer not built"; il_finish; }

DTEST_QUAL=45248 SIDE=15828 PEER_PORT=$((20000 + RANDOM % 20000))
R=(-o tcp.try_heuristic_first:TRUE --enable-heuristic iwarp_mpa_tcp
   --disable-heuristic rpcrdma_iwarp --disable-heuristic smb_direct_iwarp)

capture() { # crc: capture one dtest run and one violation run into $IL_TMP/cap-$crc.pcapng
    local crc=$1 cap=$IL_TMP/cap-$1.pcapng err=$IL_TMP/tshark-$1.err
    tshark -q -i lo -f "tcp port $DTEST_QUAL or tcp port $PEER_PORT" -w "$cap" -a duration:90 \
        >/dev/null 2>"$err" </dev/null &
    local tpid=$!
    il_pids+=("$tpid")
    local i=0
    until grep -q 'Capturing on' "$err" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 150 ] || ! kill -0 "$tpid" 2>/dev/null; then
            echo "skip - cannot capture on lo:"; sed 's/^/  # /' "$err"
            exit 77
        fi
        sleep 0.1
    done
    sleep 0.5 # the capture filter is live a moment after the banner

    export SOFTDAT_CRC=$crc
    il_pair "wire-dtest-$crc" ours 60 $SIDE dtest "-P $IL_IA -s -b 4096 -B 10" \
        "-P $IL_IA -h 127.0.0.1 -b 4096 -B 10"
    if [ "$IL_SRC" = 0 ] && [ "$IL_CRC" = 0 ] && grep -q PASSED "$IL_CLOG" && grep -q PASSED "$IL_SLOG"; then
        il_ok "CRC $crc: dtest -b 4096 -B 10 PASSED under capture"
    else
        il_notok "CRC $crc: dtest under capture (client $IL_CRC, server $IL_SRC)"
        il_show client "$IL_CLOG" 8; il_show server "$IL_SLOG" 8
    fi
    local slog=$IL_TMP/wire-peer-$crc.server.log clog=$IL_TMP/wire-peer-$crc.client.log
    il_start ours 30 "$slog" "$peer" server "$IL_IA" "$PEER_PORT" violation
    local spid=$IL_PID
    if il_wait_log "$slog" listening "$spid" 10; then
        il_run ours 30 "$peer" client "$IL_IA" 127.0.0.1 "$PEER_PORT" violation >"$clog" 2>&1 </dev/null
        local c=$?
        il_wait "$spid" 15
        local s=$?
        [ $c -eq 0 ] && [ $s -eq 0 ] && il_ok "CRC $crc: dat_dto_peer violation (Terminate) under capture" ||
            { il_notok "CRC $crc: dat_dto_peer violation (client $c, server $s)"; il_show client "$clog" 8; }
    else
        il_notok "CRC $crc: dat_dto_peer server did not start"; il_show server "$slog" 8
        il_stop "$spid"
    fi
    unset SOFTDAT_CRC
    sleep 0.5
    kill -INT "$tpid" 2>/dev/null
    il_wait "$tpid" 10 >/dev/null
}

judge() { # crc
    local crc=$1 cap=$IL_TMP/cap-$1.pcapng
    ts() { tshark -r "$cap" "${R[@]}" "$@" 2>/dev/null; }
    local n m
    [ -s "$cap" ] || { il_notok "CRC $crc: empty capture"; return; }

    n=$(ts -Y '_ws.malformed || _ws.expert.severity == error' | wc -l)
    [ "$n" -eq 0 ] && il_ok "CRC $crc: no malformed frames, no expert errors" ||
        { il_notok "CRC $crc: $n malformed/error frames"; ts -Y '_ws.malformed || _ws.expert.severity == error' | head -5 | sed 's/^/  # /'; }

    # Two connections (dtest, violation): a Request and an accepted Reply each.
    local hs
    hs=$(ts -Y 'iwarp_mpa.req || iwarp_mpa.rep' -T fields -e iwarp_mpa.req -e iwarp_mpa.rep \
            -e iwarp_mpa.crc_flag -e iwarp_mpa.rej_flag)
    n=$(grep -c . <<<"$(ts -Y iwarp_mpa.req)"); m=$(grep -c . <<<"$(ts -Y iwarp_mpa.rep)")
    [ "$n" -ge 2 ] && [ "$n" -eq "$m" ] && il_ok "CRC $crc: $n MPA Requests, $m Replies" ||
        il_notok "CRC $crc: MPA Requests $n, Replies $m (want >= 2, equal)"
    # The C flag of every Request and Reply (tshark prints 1/0 or True/False).
    local want_c=0 cflags
    [ "$crc" = on ] && want_c=1
    cflags=$(ts -Y 'iwarp_mpa.req || iwarp_mpa.rep' -T fields -e iwarp_mpa.crc_flag |
        sed 's/True/1/; s/False/0/' | sort -u | tr '\n' ' ')
    [ "$cflags" = "$want_c " ] && il_ok "CRC $crc: MPA C flag $want_c in every Request/Reply" ||
        { il_notok "CRC $crc: MPA C flags '$cflags', want $want_c"; echo "$hs" | head -4 | sed 's/^/  # /'; }

    # Every segment with payload is MPA (handshake or FPDUs). A TCP
    # retransmission (a loaded host drops on loopback too) repeats bytes
    # tshark already decoded and is not dissected again: not a failure.
    n=$(ts -Y 'tcp.len > 0 && !iwarp_mpa && !tcp.analysis.retransmission' | wc -l)
    [ "$n" -eq 0 ] && il_ok "CRC $crc: every TCP payload segment decodes as iWARP MPA" ||
        { il_notok "CRC $crc: $n payload segments not decoded as MPA"; ts -Y 'tcp.len > 0 && !iwarp_mpa && !tcp.analysis.retransmission' | head -5 | sed 's/^/  # /'; }

    local fpdus good bad verbose
    fpdus=$(ts -Y iwarp_mpa.fpdu -T fields -e iwarp_mpa.ulpdulength -E occurrence=a -E aggregator=' ' | wc -w)
    verbose=$(ts -O iwarp_mpa)
    good=$(grep -c 'Good CRC32' <<<"$verbose"); bad=$(grep -c 'Bad CRC32' <<<"$verbose")
    if [ "$crc" = on ]; then
        [ "$fpdus" -gt 0 ] && [ "$good" -eq "$fpdus" ] && [ "$bad" -eq 0 ] &&
            il_ok "CRC on: $fpdus FPDUs, $good Good CRC32, 0 bad" ||
            il_notok "CRC on: $fpdus FPDUs, Good CRC32 $good, Bad CRC32 $bad"
    else
        [ "$fpdus" -gt 0 ] && [ "$good" -eq 0 ] && [ "$bad" -eq 0 ] &&
            il_ok "CRC off: $fpdus FPDUs, no CRC verdicts" ||
            il_notok "CRC off: $fpdus FPDUs, Good CRC32 $good, Bad CRC32 $bad (want 0/0)"
    fi

    local ops
    ops=$(ts -Y iwarp_mpa.fpdu -T fields -e iwarp_rdma.opcode -E occurrence=a -E aggregator=' ' |
        tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ')
    local op name missing=
    for op in 0x00:Write 0x01:ReadRequest 0x02:ReadResponse 0x03:Send 0x07:Terminate; do
        name=${op#*:}; op=${op%%:*}
        [[ " $ops" == *" $op "* ]] || missing+=" $name($op)"
    done
    [ -z "$missing" ] && il_ok "CRC $crc: opcodes seen: $ops" ||
        il_notok "CRC $crc: opcodes seen '$ops', missing$missing"
}

for crc in on off; do
    capture "$crc"
    judge "$crc"
done
il_finish
