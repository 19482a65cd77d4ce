#!/usr/bin/env bash
# Debian's dtest (send/recv, RDMA write, RDMA read, ping-pong) against
# softdat over loopback, under our libdat2 and under Debian's. Variants:
# the default options at 64 KiB, polling (-p), CNO wait (-c), small and
# large buffers and bursts, the default 4 MiB buffer, and -w (RDMA write
# streaming, which uses RDMA-write-with-immediate through the IB extension).
# Each run: both sides exit 0 and print "DAPL Test Complete. PASSED".
# dtest uses the fixed side-channel port 15828 and conn qual 45248, so it
# never runs concurrently with another dtest-family test.
# Exit 0 pass, 77 skip, else fail.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"
il_require_bin dtest

SIDE=15828
PASS_RE='DAPL Test Complete\. PASSED'

case_() { # reg label "args"
    local reg=$1 label=$2 args=$3 tag
    tag=dtest-$reg-$(echo "$label" | tr -c 'A-Za-z0-9' _)
    il_pair "$tag" "$reg" 90 $SIDE dtest "-P $IL_IA -s $args" "-P $IL_IA -h 127.0.0.1 $args"
    local name="dtest $label, $reg libdat2"
    if [ "$IL_SRC" = 0 ] && [ "$IL_CRC" = 0 ] && grep -Eq "$PASS_RE" "$IL_SLOG" &&
        grep -Eq "$PASS_RE" "$IL_CLOG"; then
        il_ok "$name (${IL_SECS}s)"
    else
        il_notok "$name (client exit $IL_CRC, server exit $IL_SRC, ${IL_SECS}s)"
        il_show client "$IL_CLOG"; il_show server "$IL_SLOG"
    fi
}

for reg in $(il_registries); do
    case_ "$reg" "-b 65536 -B 10" "-b 65536 -B 10"
    case_ "$reg" "-p -b 65536 -B 10 (polling)" "-p -b 65536 -B 10"
    case_ "$reg" "-c -b 65536 -B 10 (CNO wait)" "-c -b 65536 -B 10"
    case_ "$reg" "-b 4096 -B 100" "-b 4096 -B 100"
    case_ "$reg" "-b 1048576 -B 10" "-b 1048576 -B 10"
    case_ "$reg" "-w -b 65536 -B 10 (RDMA write + immediate)" "-w -b 65536 -B 10"
done
# The default buffer (4 MiB, two 412 MiB LMRs) once, with the man page's burst.
case_ ours "default -b (4 MiB) -B 10" "-B 10"
il_finish
