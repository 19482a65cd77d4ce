#!/usr/bin/env bash
# Load and scale (issue 13 §5): test/helpers/dat_scale_peer.c connects N
# endpoints between two processes over loopback (one shared set of EVDs per
# side), measures a 64-byte Send ping-pong on the newest endpoint and the
# resident memory per endpoint at 1, 100, 1,000 and 10,000 endpoints, frees
# them all (descriptors back to their count), then runs CYCLES connect /
# 4 KiB Send / disconnect cycles (descriptors and memory flat). The figures
# are printed, never asserted (a shared machine); what is asserted: every
# connection, every echo, every descriptor returned.
#
#   SCALE_N (default 2000; 10000 for the full run, about a minute, see
#   docs/reliability.md), SCALE_CYCLES (default 1000).
# Needs RLIMIT_NOFILE above N + 100 (the helper raises its soft limit to
# the hard one).
# Exit 0 pass, 77 skip, else fail.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"

peer=$BUILD/test/helpers/dat_scale_peer
[ -x "$peer" ] || { il_notok "$peer missing (run make first)"; il_finish; }
N=${SCALE_N:-2000}
CYCLES=${SCALE_CYCLES:-1000}
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt $((N + 100)) ]; then
    echo "skip - descriptor hard limit $hard is below $((N + 100)) (SCALE_N=$N)"
    exit 77
fi
PORT=$((24000 + RANDOM % 4000))
il_start ours 600 "$IL_TMP/srv.log" "$peer" server softdat-lo "$PORT" "$N" "$CYCLES"
spid=$IL_PID
if ! il_wait_log "$IL_TMP/srv.log" listening "$spid" 20; then
    il_notok "server did not start"; il_show server "$IL_TMP/srv.log"; il_finish
fi
t0=$SECONDS
# A sanitizer's quarantine keeps freed memory: no memory verdict there.
[ -n "${SANITIZE:-}" ] && export SCALE_NO_RSS_CHECK=1
il_run ours 600 "$peer" client softdat-lo 127.0.0.1 "$PORT" "$N" "$CYCLES" >"$IL_TMP/cli.log" 2>&1 </dev/null
crc=$?
il_wait "$spid" 60
src=$?
if [ $crc -eq 0 ] && [ $src -eq 0 ] && ! grep -q FAIL "$IL_TMP/cli.log" "$IL_TMP/srv.log" &&
    grep -q "^at $N eps:" "$IL_TMP/cli.log" && grep -q "^cycles $CYCLES:" "$IL_TMP/cli.log"; then
    il_ok "$N connected endpoints, every echo right, descriptors back; $CYCLES connect/transfer/disconnect cycles with descriptors and memory flat ($((SECONDS - t0)) s)"
    grep -E '^(at |cycles |fds=)' "$IL_TMP/cli.log" | sed 's/^/# /'
else
    il_notok "scale: client $crc, server $src"
    il_show client "$IL_TMP/cli.log" 10
    grep -v 'connect EVD full' "$IL_TMP/srv.log" | tail -5 | sed 's/^/  # server: /'
fi
il_finish
