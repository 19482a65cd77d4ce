#!/usr/bin/env bash
# Debian's dtestcm (connection setup rate: N connections set up, checked
# with 48-byte private data both ways, torn down; no data transfer) against
# softdat over loopback, under our libdat2 and under Debian's, with RC
# connections and (-u) IB UD address exchanges. The server
# busy-polls dat_evd_dequeue on its CR EVD, so this also shows the engine
# making progress while the consumer only dequeues. A run passes when both
# sides exit 0 and report "ALL N CONNECTED". dtestcm uses the fixed
# side-channel port 15828 and conn qual 45248.
# Exit 0 pass, else fail.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"
il_require_bin dtestcm

SIDE=15828

case_() { # reg n [extra args]
    local reg=$1 n=$2 x=${3:-} tag=dtestcm-$1-$2${3:+-ud}
    il_pair "$tag" "$reg" 120 $SIDE dtestcm "-P $IL_IA -s -c $n $x" "-P $IL_IA -h 127.0.0.1 -c $n $x"
    local name="dtestcm${x:+ $x} -c $n, $reg libdat2"
    if [ "$IL_SRC" = 0 ] && [ "$IL_CRC" = 0 ] && grep -q "ALL $n CONNECTED on Client" "$IL_CLOG" &&
        grep -q "ALL $n CONNECTED on Server" "$IL_SLOG"; then
        il_ok "$name: $(grep -o 'CPS *[0-9.]*' "$IL_CLOG" | head -1) (${IL_SECS}s)"
    else
        il_notok "$name (client exit $IL_CRC, server exit $IL_SRC, ${IL_SECS}s)"
        il_show client "$IL_CLOG" 10; il_show server "$IL_SLOG" 10
    fi
}

for reg in $(il_registries); do
    case_ "$reg" 10
    case_ "$reg" 1000
    case_ "$reg" 1000 -u # IB UD address exchanges (lib/provider/ep_ud.c)
done
il_finish
