#!/usr/bin/env bash
# shellcheck disable=SC2015  # ok/notok always succeed: A && ok || notok is safe
# softdat-perf smoke test: a tiny loopback sweep (sizes 64 and 65536, few
# iterations) of every test with --compare, so each DAT figure comes with its
# raw-TCP baseline. The server runs in the background; its PID is remembered
# and only that PID is ever killed. Everything runs under `timeout`.
# Exit 0 pass, 77 skip (only when the provider answers DAT_NOT_IMPLEMENTED),
# anything else fail.
set -u
SOFTDAT_TOP=${SOFTDAT_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$SOFTDAT_TOP/build}
PERF=$BUILD/bin/softdat-perf
CONF=$BUILD/dat.conf
IA=softdat-lo

fails=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fails=$((fails + 1)); }

[ -x "$PERF" ] && ok "softdat-perf is built" || { notok "missing $PERF"; exit 1; }
[ -f "$CONF" ] && ok "dat.conf is built" || { notok "missing $CONF"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/perf_smoke.XXXXXX") || exit 1
spid=
cleanup() {
    if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then
        kill "$spid" 2>/dev/null
        wait "$spid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

export DAT_OVERRIDE=$CONF
unset LD_LIBRARY_PATH

srv_pin=()
# start_server PORT: starts the server in the background (PID in $spid) and
# waits until it says it is ready. Fails if it exits first (port taken).
start_server() {
    local port=$1
    timeout 120 "${srv_pin[@]}" "$PERF" -s -P "$IA" -p "$port" --idle 60 --timeout 30 \
        >"$tmp/srv.out" 2>"$tmp/srv.err" </dev/null &
    spid=$!
    for _ in $(seq 1 100); do
        grep -q 'server ready' "$tmp/srv.err" 2>/dev/null && return 0
        kill -0 "$spid" 2>/dev/null || { wait "$spid" 2>/dev/null; spid=; return 1; }
        sleep 0.1
    done
    return 1
}

# Two ports per server (DAT conn_qual P, raw TCP P+1): try a few even ones.
# find_server SALT: a server on a free port ($port); fails if none starts.
find_server() {
    port=
    for try in 1 2 3 4 5; do
        local p=$((20000 + (($$ * 7 + try * 1009 + $1) % 20000) / 2 * 2))
        if start_server "$p"; then
            port=$p
            return 0
        fi
        [ -n "$spid" ] && { kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; spid=; }
    done
    return 1
}

# wait_server: the server ends after one client session; give it a bounded
# moment. Sets srv_rc (its exit status, or "killed").
wait_server() {
    for _ in $(seq 1 100); do
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$spid" 2>/dev/null; then
        notok "the server was still running after the client session; killing PID $spid"
        kill "$spid" 2>/dev/null
        wait "$spid" 2>/dev/null
        srv_rc=killed
    else
        wait "$spid"
        srv_rc=$?
    fi
    spid=
}

if ! find_server 0; then
    notok "the server did not start"
    sed 's/^/    server: /' "$tmp/srv.err" | head -20
    exit 1
fi
ok "server listening on conn_qual $port (raw TCP $((port + 1)))"

timeout 120 "$PERF" -c 127.0.0.1 -P "$IA" -p "$port" --compare -v -m 64,65536 -n 200 -t 0.2 -r 3 \
    --timeout 10 >"$tmp/cli.out" 2>"$tmp/cli.err" </dev/null
rc=$?

wait_server

if [ "$rc" = 4 ] && grep -q 'DAT_NOT_IMPLEMENTED' "$tmp/cli.err"; then
    echo "skip - the provider's data path is not implemented yet:"
    grep -m 3 'DAT_NOT_IMPLEMENTED' "$tmp/cli.err" | sed 's/^/    /'
    exit 77
fi

# -v: the IB extension counters of the run's IA, EP and EVD (DAT_COUNTERS).
grep -q '^counters (EP):' "$tmp/cli.err" && grep -Eq 'EP_POST_SEND=[1-9]' "$tmp/cli.err" &&
    grep -Eq 'IA_CM_ACTIVE_EST=[1-9]' "$tmp/cli.err" && ok "-v printed the run's counters" ||
    notok "-v printed no counters"

if [ "$rc" = 0 ]; then
    ok "client --compare exit 0"
else
    notok "client --compare exit $rc"
    sed 's/^/    stdout: /' "$tmp/cli.out" | head -40
    sed 's/^/    stderr: /' "$tmp/cli.err" | head -40
fi
[ "$srv_rc" = 0 ] && ok "server exited 0 after the session" ||
    { notok "server exit $srv_rc"; sed 's/^/    server: /' "$tmp/srv.err" | head -20; }

num='^[0-9]+(\.[0-9]+)?$'
# Columns: test size iters lat_us p99_us GB/s Mmsg/s raw_lat_us raw_GB/s ratio
for t in send_lat write_lat read_lat send_bw write_bw read_bw; do
    for sz in 64 64K; do
        line=$(awk -v t="$t" -v s="$sz" '$1 == t && $2 == s' "$tmp/cli.out")
        if [ -z "$line" ]; then
            notok "$t $sz: no row in the table"
            continue
        fi
        read -r _ _ iters lat p99 gbps mmsgs rawlat rawgbps ratio _ <<<"$line"
        case $t in
        *_lat) dat=$lat; extra=$p99; raw=$rawlat ;;
        *) dat=$gbps; extra=$mmsgs; raw=$rawgbps ;;
        esac
        [[ $iters =~ ^[1-9][0-9]*$ && $dat =~ $num && $extra =~ $num ]] &&
            ok "$t $sz: DAT figures ($iters iters, $dat)" || notok "$t $sz: DAT figures missing: $line"
        [[ $raw =~ $num ]] && ok "$t $sz: raw-TCP baseline ($raw)" || notok "$t $sz: no raw-TCP baseline: $line"
        [[ $ratio =~ $num ]] && ok "$t $sz: ratio $ratio" || notok "$t $sz: no ratio: $line"
    done
done

# The connection-setup baseline: a burst of raw TCP connects, timed.
line=$("$PERF" --connect-rate 50 2>&1 | grep '^connect_rate')
[[ $line =~ ^connect_rate\ +50\ connections\ in\ [0-9.]+\ s:\ [0-9.]+\ us\ per\ connection,\ CPS\ [0-9.]+$ ]] &&
    ok "--connect-rate 50: $line" || notok "--connect-rate 50: '$line'"
line=$("$PERF" --connect-rate 50 --presize-fds 2>&1 | grep '^connect_rate')
[[ $line =~ ^connect_rate\ +50\ connections\ in\ [0-9.]+\ s:\ [0-9.]+\ us\ per\ connection,\ CPS\ [0-9.]+$ ]] &&
    ok "--connect-rate 50 --presize-fds: $line" || notok "--connect-rate 50 --presize-fds: '$line'"

# With -v, a result line per (test, size) went to stderr, for DAT and raw TCP.
n_dat=$(grep -c '^softdat-perf: dat ' "$tmp/cli.err")
n_raw=$(grep -c '^softdat-perf: raw ' "$tmp/cli.err")
[ "$n_dat" = 12 ] && ok "12 DAT progress lines on stderr" || notok "$n_dat DAT progress lines, want 12"
[ "$n_raw" = 8 ] && ok "8 raw-TCP progress lines on stderr" || notok "$n_raw raw-TCP progress lines, want 8"

# Polled mode (-W) with both programs on one CPU, when taskset can pin
# them: each spinner must let the other run (evd.c yields a DTO spinner that
# finds nothing) and a Write ping-pong's target, which polls memory, drives
# the provider itself. The tool checks every message and byte.
pin=()
if command -v taskset >/dev/null 2>&1 && taskset -c 0 true 2>/dev/null; then
    pin=(taskset -c 0)
fi
srv_pin=("${pin[@]}")
if find_server 4099; then
    timeout 120 "${pin[@]}" "$PERF" -c 127.0.0.1 -P "$IA" -p "$port" -W -m 64 -n 2000 -t 2 -r 1 \
        --timeout 30 write_lat send_bw write_bw >"$tmp/cli.out" 2>"$tmp/cli.err" </dev/null
    rc=$?
    wait_server
    if [ "$rc" = 0 ] && [ "$srv_rc" = 0 ]; then
        ok "polled run ${pin[*]:-unpinned}: write_lat, send_bw, write_bw at 64 B passed"
    else
        notok "polled run ${pin[*]:-unpinned}: client exit $rc, server exit $srv_rc"
        sed 's/^/    stdout: /' "$tmp/cli.out" | head -20
        sed 's/^/    stderr: /' "$tmp/cli.err" | head -20
    fi
else
    notok "the server for the polled run did not start"
fi

[ $fails -eq 0 ]
