#!/usr/bin/env bash
# emu/conn across two processes: a server (emu_conn_peer server) and three
# clients: graceful disconnect, abrupt disconnect, rejected. Checks private
# data both ways, a data exchange after the handshake and one terminal event
# per side. Everything is bounded by timeouts; only our own PID is killed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$top/build}
peer=$BUILD/test/helpers/emu_conn_peer
if [ ! -x "$peer" ]; then
    echo "skip: $peer not built"
    exit 77
fi
tmp=$(mktemp -d)
srv_pid=
cleanup() {
    if [ -n "$srv_pid" ] && kill -0 "$srv_pid" 2>/dev/null; then
        kill "$srv_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

fail=0
check() { # file, expected line (exact)
    if grep -qxF -- "$2" "$1"; then
        echo "ok - $(basename "$1"): $2"
    else
        echo "not ok - $(basename "$1"): missing '$2'"
        sed 's/^/    /' "$1"
        fail=1
    fi
}

timeout --kill-after=5 40 "$peer" server --count 3 --timeout 30 >"$tmp/server.out" 2>"$tmp/server.err" &
srv_pid=$!
port=
for _ in $(seq 1 100); do
    port=$(awk '/^LISTEN /{print $2; exit}' "$tmp/server.out")
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "not ok - server did not report its port"
    cat "$tmp/server.err"
    exit 1
fi

timeout --kill-after=5 30 "$peer" client --port "$port" --pdata hello-e2e --timeout 20 >"$tmp/c1.out" 2>&1
echo "client 1 exit $?" >>"$tmp/c1.out"
timeout --kill-after=5 30 "$peer" client --port "$port" --pdata abrupt-one --abrupt --timeout 20 >"$tmp/c2.out" 2>&1
echo "client 2 exit $?" >>"$tmp/c2.out"
timeout --kill-after=5 30 "$peer" client --port "$port" --pdata reject-me --timeout 20 >"$tmp/c3.out" 2>&1
echo "client 3 exit $?" >>"$tmp/c3.out"

wait "$srv_pid"
srv_rc=$?
srv_pid=
echo "server exit $srv_rc" >>"$tmp/server.out"

check "$tmp/c1.out" "ESTABLISHED srv:hello-e2e"
check "$tmp/c1.out" "RX pong"
check "$tmp/c1.out" "DISCONNECTED"
check "$tmp/c1.out" "client 1 exit 0"
check "$tmp/c2.out" "ESTABLISHED srv:abrupt-one"
check "$tmp/c2.out" "DISCONNECTED"
check "$tmp/c2.out" "client 2 exit 0"
check "$tmp/c3.out" "PEER_REJECTED no:reject-me"
check "$tmp/c3.out" "client 3 exit 0"
check "$tmp/server.out" "REQUEST hello-e2e"
check "$tmp/server.out" "REQUEST abrupt-one"
check "$tmp/server.out" "REQUEST reject-me"
check "$tmp/server.out" "RX ping"
check "$tmp/server.out" "server exit 0"
# exactly one terminal event per side and connection
n=$(grep -cE '^(DISCONNECTED|BROKEN)' "$tmp/server.out")
if [ "$n" -eq 2 ]; then echo "ok - server saw 2 terminal events"; else echo "not ok - server terminal events: $n"; fail=1; fi
for f in c1 c2; do
    n=$(grep -cE '^(DISCONNECTED|BROKEN)' "$tmp/$f.out")
    if [ "$n" -eq 1 ]; then echo "ok - $f one terminal event"; else echo "not ok - $f terminal events: $n"; fail=1; fi
done
exit $fail
