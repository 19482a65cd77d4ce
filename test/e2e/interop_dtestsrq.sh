#!/usr/bin/env bash
# Debian's dtestsrq (shared receive queue) against softdat over loopback,
# under our libdat2 and under Debian's: several connections whose receives
# come from one SRQ, bursts of full-buffer messages checked for length and
# content. The same program with -S 0 (no SRQ: per-EP receive queues) runs
# too, so the multi-connection data path is covered while SRQ is missing.
# A case whose run ends on DAT_NOT_IMPLEMENTED (and only such a case) is
# skipped. dtestsrq listens on conn qual 45248 (no side channel).
# Exit 0 pass, 77 skip (every case skipped), else fail.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"
il_require_bin dtestsrq

QUAL=45248
BAD='[Ee]rror|ERR|FAILED|unexpected|mismatch'

case_() { # reg label "args"
    local reg=$1 label=$2 args=$3 tag
    tag=dtestsrq-$reg-$(echo "$label" | tr -c 'A-Za-z0-9' _)
    il_pair "$tag" "$reg" 60 $QUAL dtestsrq "-P $IL_IA -s $args" "-P $IL_IA -h 127.0.0.1 $args"
    local name="dtestsrq $label, $reg libdat2"
    if [ "$IL_SRC" = 0 ] && [ "$IL_CRC" = 0 ] && ! grep -Eq "$BAD" "$IL_SLOG" "$IL_CLOG" &&
        grep -q 'Test Complete' "$IL_CLOG" && grep -q 'Test Complete' "$IL_SLOG"; then
        il_ok "$name (${IL_SECS}s)"
    elif il_not_implemented "$IL_SLOG" "$IL_CLOG"; then
        il_skip "$name: $(grep -ho 'dat_[a-z_]*: DAT_NOT_IMPLEMENTED' "$IL_SLOG" "$IL_CLOG" | head -1 |
            sed 's/: DAT_NOT_IMPLEMENTED//') not implemented (DAT_NOT_IMPLEMENTED)"
    else
        il_notok "$name (client exit $IL_CRC, server exit $IL_SRC, ${IL_SECS}s)"
        grep -hE "$BAD" "$IL_CLOG" | head -5 | sed 's/^/  # client: /'
        grep -hE "$BAD" "$IL_SLOG" | head -5 | sed 's/^/  # server: /'
        il_show client "$IL_CLOG" 6; il_show server "$IL_SLOG" 6
    fi
}

for reg in $(il_registries); do
    for n in 1 4 16; do
        for b in 1 16; do
            case_ "$reg" "SRQ, $n connections, burst $b" "-c $n -B $b"
        done
    done
    case_ "$reg" "SRQ, 4 connections, burst 100" "-c 4 -B 100"
    case_ "$reg" "SRQ, default message size (DAT_IB_TRANSPORT_MTU)" ""
    case_ "$reg" "-S 0 (no SRQ), 4 connections, burst 10" "-S 0 -c 4 -B 10"
    case_ "$reg" "-S 0 (no SRQ), -b 65536, 2 connections" "-S 0 -c 2 -B 4 -b 65536"
    # IB UD without SRQ; UD EPs on an SRQ are DAT_MODEL_NOT_SUPPORTED (ep_ud.c)
    case_ "$reg" "-u -S 0 (UD, no SRQ), 4 connections, burst 10" "-u -S 0 -c 4 -B 10"
done
il_finish
