#!/usr/bin/env bash
# Multi-threaded run (issue 13): test/helpers/dat_mt_peer.c, one process,
# two thread-safe IAs over loopback. Four threads post Sends, RDMA Writes
# and RDMA Reads to two shared EPs (shared EVDs), one thread waits on the
# client's request EVD, one on the server's receive EVD (and reposts);
# every byte and every completion count is checked, descriptors return to
# their count after each of MT_CYCLES (default 3) open/traffic/close
# cycles, resident memory stays flat after the first. Clean under
# make tsan / make asan (docs/reliability.md).
#
#   MT_ROUNDS (default 20, at most 50), MT_CYCLES (default 3).
# Exit 0 pass, 77 skip, else fail.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"

peer=$BUILD/test/helpers/dat_mt_peer
[ -x "$peer" ] || { il_notok "$peer missing (run make first)"; il_finish; }
# The same IA, declared thread-safe (dat_ia_openv with DAT_TRUE needs it).
{ cat "$BUILD/dat.conf"; grep -v "^#" "$BUILD/dat.conf" | sed "s/nonthreadsafe/threadsafe/"; } >"$IL_TMP/dat.conf"
IL_CONF=$IL_TMP/dat.conf
[ -n "${SANITIZE:-}" ] && export MT_NO_RSS_CHECK=1
PORT=$((28000 + RANDOM % 4000))
t0=$SECONDS
il_run ours 300 "$peer" softdat-lo "$PORT" "${MT_ROUNDS:-20}" "${MT_CYCLES:-3}" >"$IL_TMP/mt.log" 2>&1 </dev/null
rc=$?
if [ $rc -eq 0 ] && ! grep -q FAIL "$IL_TMP/mt.log" && grep -q "^mt cycle ${MT_CYCLES:-3}: fds" "$IL_TMP/mt.log"; then
    il_ok "4 threads posting to 2 shared EPs, 2 waiting threads: every byte and count right, descriptors back, memory flat ($((SECONDS - t0)) s)"
    sed 's/^/# /' "$IL_TMP/mt.log"
else
    il_notok "multi-threaded run: exit $rc"
    il_show mt "$IL_TMP/mt.log" 20
fi
il_finish
