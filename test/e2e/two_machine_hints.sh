#!/usr/bin/env bash
# shellcheck disable=SC2015  # ok/notok always succeed: A && ok || notok is safe
# The two-machine mistakes, in a private network namespace that has a second,
# non-loopback address (192.0.2.1, TEST-NET-1, on its own lo): a server on
# softdat-lo reached through the other address, and a client whose IA is on
# loopback. Each must end softdat-perf with exit 3 and a hint naming the
# cause. Also conn_qual > 16 bits: logged at debug level with its port.
# Skips (77) when no private namespace can be made.
# Exit 0 pass, 77 skip, else fail.
set -u
if [ -z "${TM_NETNS:-}" ]; then
    for u in "unshare -n" "unshare -rn"; do
        if $u true 2>/dev/null; then
            TM_NETNS=1 exec $u -- bash "$0" "$@"
        fi
    done
    echo "skip - cannot create a private network namespace (unshare -n)"
    exit 77
fi
ip link set lo up && ip addr add 192.0.2.1/32 dev lo ||
    { echo "skip - cannot configure the namespace's lo"; exit 77; }

SOFTDAT_TOP=${SOFTDAT_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$SOFTDAT_TOP/build}
PERF=$BUILD/bin/softdat-perf
[ -x "$PERF" ] && [ -f "$BUILD/dat.conf" ] || { echo "not ok - build first"; exit 1; }
unset LD_LIBRARY_PATH SOFTDAT_LOG

fails=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/softdat-2m.XXXXXX") || exit 1
spid=
cleanup() {
    if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# softdat-lo plus an IA on the "other machine's" address.
cp "$BUILD/dat.conf" "$tmp/dat.conf"
grep '^softdat-lo[[:space:]]' "$BUILD/dat.conf" | sed -e 's/^softdat-lo /softdat-t1 /' -e 's/"lo"/"192.0.2.1"/' \
    >>"$tmp/dat.conf"
export DAT_OVERRIDE=$tmp/dat.conf

port=19875   # the namespace is ours: the default port is free
timeout 60 "$PERF" -s -P softdat-lo -p $port --idle 30 >/dev/null 2>"$tmp/srv.err" </dev/null &
spid=$!
for _ in $(seq 1 100); do
    grep -q 'server ready' "$tmp/srv.err" && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
done
grep -q 'server ready' "$tmp/srv.err" && ok "server on softdat-lo" || { notok "server did not start"; cat "$tmp/srv.err"; exit 1; }

# A client on a real address, towards the server host's real address.
SOFTDAT_CONNECT_RETRY_MS=0 timeout 30 "$PERF" -c 192.0.2.1 -P softdat-t1 -p $port -m 64 -n 10 send_lat \
    >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc = 3 ] && [ ! -s "$tmp/o" ] && grep -q 'may be bound to loopback only' "$tmp/e" &&
    grep -q 'not softdat-lo' "$tmp/e" && ok "remote client refused: exit 3 and the loopback-server hint" ||
    { notok "remote client: exit $rc"; sed 's/^/    /' "$tmp/e"; }

# A client on loopback, towards another host's address.
SOFTDAT_CONNECT_RETRY_MS=0 timeout 30 "$PERF" -c 192.0.2.1 -P softdat-lo -p $port -m 64 -n 10 send_lat \
    >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc = 3 ] && [ ! -s "$tmp/o" ] && grep -q 'unreachable from a loopback IA' "$tmp/e" &&
    ok "loopback client to another host: exit 3 and the loopback-IA hint" ||
    { notok "loopback client: exit $rc"; sed 's/^/    /' "$tmp/e"; }

# The server still serves its own host; its session ends it.
timeout 60 "$PERF" -c 127.0.0.1 -P softdat-lo -p $port -m 64 -n 10 send_lat >/dev/null 2>&1 &&
    ok "local client still served" || notok "local client failed"
for _ in $(seq 1 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; spid=

# conn_qual 70000 is TCP port 4464 (its low 16 bits), and says so at debug level.
cat >"$tmp/cq.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <dat2/udat.h>
int main(void)
{
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, cr;
    DAT_PSP_HANDLE psp;
    if (dat_ia_open("softdat-lo", 8, &async, &ia) != DAT_SUCCESS ||
        dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr) != DAT_SUCCESS ||
        dat_psp_create(ia, 70000, cr, DAT_PSP_CONSUMER_FLAG, &psp) != DAT_SUCCESS)
        return 1;
    printf("listening\n");
    fflush(stdout);
    if (system("ss -Htln 'sport = :4464' | grep -q . && echo port-4464-listens") != 0)
        return 2;
    dat_psp_free(psp);
    dat_evd_free(cr);
    dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG);
    return 0;
}
EOF
if cc -std=c11 -I"$SOFTDAT_TOP/include" -o "$tmp/cq" "$tmp/cq.c" -L"$BUILD/lib" -ldat2 \
       -Wl,-rpath,"$BUILD/lib" ${SANITIZE:+-fsanitize=$SANITIZE} 2>"$tmp/cc.err"; then
    out=$(SOFTDAT_LOG=debug timeout 30 "$tmp/cq" 2>&1); rc=$?
    [ $rc = 0 ] && grep -q '^port-4464-listens$' <<<"$out" &&
        grep -q 'conn_qual 70000 listens on TCP port 4464 (its low 16 bits)' <<<"$out" &&
        ok "conn_qual 70000: listens on port 4464, logged at debug level" ||
        { notok "conn_qual 70000 (exit $rc)"; grep -E 'conn_qual|port|listening' <<<"$out" | head -n 5 | sed 's/^/    /'; }
    out=$(timeout 30 "$tmp/cq" 2>&1)
    grep -q 'conn_qual 70000' <<<"$out" && notok "the conn_qual line shows without SOFTDAT_LOG=debug" ||
        ok "no conn_qual line at the default log level"
else
    notok "the conn_qual program does not build"; head -n 5 "$tmp/cc.err"
fi

[ $fails -eq 0 ]
