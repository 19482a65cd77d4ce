#!/usr/bin/env bash
# shellcheck disable=SC2015  # ok/notok always succeed: A && ok || notok is safe
# The first-hour behaviour of the tools and the registry (issue 11):
# --version from the VERSION file, a short usage on a bad option (exit 2),
# a failed IA open or a refused connection ends softdat-perf at once with one
# clear line and no table, `softdat-perf -s -P nosuch` exits at once, an
# unknown IA name makes libdat2 name the dat.conf it read and the IAs there,
# progress on stderr at least every second, the header's CRC as negotiated,
# and -v adding detail (softdat-perf's per-row lines, softdat-trace's
# every record). Servers run in the background, are
# remembered by PID and stopped only by that PID. Exit 0 pass, else fail.
set -u
SOFTDAT_TOP=${SOFTDAT_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$SOFTDAT_TOP/build}
PERF=$BUILD/bin/softdat-perf
INFO=$BUILD/bin/softdat-info
TRACE=$BUILD/bin/softdat-trace
export DAT_OVERRIDE=$BUILD/dat.conf
unset LD_LIBRARY_PATH SOFTDAT_CRC

fails=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fails=$((fails + 1)); }
show() { sed 's/^/    /' "$@" | head -n 20; }

for f in "$PERF" "$INFO" "$TRACE" "$DAT_OVERRIDE"; do
    [ -e "$f" ] || { echo "not ok - $f missing (run make first)"; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/softdat-tools.XXXXXX") || exit 1
spid=
cleanup() {
    if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then
        kill "$spid" 2>/dev/null
        wait "$spid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# --- --version: one line, the VERSION file's text
want=$(cat "$SOFTDAT_TOP/VERSION")
for t in "$PERF" "$INFO" "$TRACE"; do
    n=$(basename "$t")
    out=$(timeout 10 "$t" --version 2>&1); rc=$?
    [ $rc = 0 ] && [ "$out" = "$n (softdat) $want" ] && ok "$n --version: $out" ||
        notok "$n --version: exit $rc, '$out' (want '$n (softdat) $want')"
done

# --- a bad option: a short usage (at most 3 lines) on stderr, exit 2
for t in "$PERF" "$INFO" "$TRACE"; do
    n=$(basename "$t")
    timeout 10 "$t" --no-such-option >"$tmp/o" 2>"$tmp/e"; rc=$?
    lines=$(wc -l <"$tmp/e")
    [ $rc = 2 ] && [ "$lines" -ge 2 ] && [ "$lines" -le 3 ] && grep -q '^usage:' "$tmp/e" &&
        grep -q -- '--help' "$tmp/e" && [ ! -s "$tmp/o" ] &&
        ok "$n --no-such-option: exit 2, $lines lines of usage" ||
        { notok "$n --no-such-option: exit $rc, $lines lines"; show "$tmp/e"; }
done

# --- unknown IA: the registry names the file and the IAs in it
timeout 20 "$INFO" nosuch-ia >/dev/null 2>"$tmp/e"; rc=$?
grep -q "no IA named 'nosuch-ia' in $DAT_OVERRIDE" "$tmp/e" && grep -q 'softdat-lo' "$tmp/e" &&
    [ $rc = 1 ] && ok "unknown IA: libdat2 names $DAT_OVERRIDE and its IAs" ||
    { notok "unknown IA message (exit $rc)"; show "$tmp/e"; }

# --- client: failed IA open, then a refused connection
timeout 20 "$PERF" -c 127.0.0.1 -P nosuch-ia -p 9 >"$tmp/o" 2>"$tmp/e"; rc=$?
n_err=$(grep -c '^softdat-perf:' "$tmp/e")
[ $rc = 3 ] && [ ! -s "$tmp/o" ] && [ "$n_err" = 1 ] && grep -q "cannot open IA 'nosuch-ia'" "$tmp/e" &&
    ok "client -P nosuch-ia: exit 3, one line, no table" ||
    { notok "client -P nosuch-ia: exit $rc, $n_err lines of its own, stdout $(wc -c <"$tmp/o") bytes"; show "$tmp/e" "$tmp/o"; }

# A port nothing listens on: bind one, note its number, close it.
free_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 29931)
timeout 60 "$PERF" -c 127.0.0.1 -p "$free_port" --compare >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc = 3 ] && [ ! -s "$tmp/o" ] && grep -q 'no server listening' "$tmp/e" &&
    ok "client against no server: exit 3, 'no server listening', no table" ||
    { notok "client against no server: exit $rc"; show "$tmp/e" "$tmp/o"; }

# --- server with an unknown IA: exits at once, non-zero
t0=$SECONDS
timeout 30 "$PERF" -s -P nosuch-ia -p "$free_port" >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc != 0 ] && [ $rc != 124 ] && [ $((SECONDS - t0)) -le 5 ] && grep -q "cannot open IA 'nosuch-ia'" "$tmp/e" &&
    ! grep -q 'server ready' "$tmp/e" && ok "server -P nosuch-ia: exit $rc in $((SECONDS - t0)) s" ||
    { notok "server -P nosuch-ia: exit $rc after $((SECONDS - t0)) s"; show "$tmp/e"; }

# --- a real run: progress, CRC state, -v
start_server() { # PORT [extra server args]
    local port=$1; shift
    timeout 120 "$PERF" -s -p "$port" --idle 60 "$@" >"$tmp/srv.out" 2>"$tmp/srv.err" </dev/null &
    spid=$!
    for _ in $(seq 1 100); do
        grep -q 'server ready' "$tmp/srv.err" 2>/dev/null && return 0
        kill -0 "$spid" 2>/dev/null || { wait "$spid" 2>/dev/null; spid=; return 1; }
        sleep 0.1
    done
    return 1
}
stop_server() {
    for _ in $(seq 1 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$spid" 2>/dev/null; then kill "$spid" 2>/dev/null; fi
    wait "$spid" 2>/dev/null
    spid=
}
pick_port() {
    local try p
    for try in 1 2 3 4 5; do
        p=$((22000 + (($$ * 13 + try * 811 + $1) % 16000) / 2 * 2))
        if start_server "$p" "${@:2}"; then port=$p; return 0; fi
        [ -n "$spid" ] && { kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; spid=; }
    done
    return 1
}

# About three seconds of measuring (two sizes, 1 s cap each, bandwidth).
if pick_port 0; then
    timeout 120 "$PERF" -c 127.0.0.1 -p "$port" -m 64,4K -n 10000000 -t 1.5 -r 1 send_bw >"$tmp/o" 2>"$tmp/e"; rc=$?
    stop_server
    n_prog=$(grep -c '^softdat-perf: step [0-9]*/2: dat send_bw' "$tmp/e")
    [ $rc = 0 ] && [ "$n_prog" -ge 2 ] && ok "a 3-second run: $n_prog progress lines on stderr" ||
        { notok "progress: exit $rc, $n_prog progress lines"; show "$tmp/e"; }
    head -n 1 "$tmp/o" | grep -q 'crc off,' && ok "header: crc off (loopback, auto)" ||
        { notok "header lacks 'crc off': $(head -n 1 "$tmp/o")"; }
    [ "$(grep -c '^send_bw' "$tmp/o")" = 2 ] && ! grep -q '^softdat-perf: dat ' "$tmp/e" &&
        ok "figures once: 2 table rows, no result lines on stderr without -v" ||
        { notok "figures printed twice or missing"; show "$tmp/o" "$tmp/e"; }
else
    notok "server did not start"; show "$tmp/srv.err"
fi

if pick_port 1 --crc on; then
    timeout 120 "$PERF" -c 127.0.0.1 -p "$port" --crc on -v -m 64 -n 200 -t 0.2 send_lat >"$tmp/o" 2>"$tmp/e"; rc=$?
    stop_server
    [ $rc = 0 ] && head -n 1 "$tmp/o" | grep -q 'crc on,' && ok "--crc on: header says crc on" ||
        { notok "--crc on: exit $rc, header $(head -n 1 "$tmp/o")"; show "$tmp/e"; }
    grep -q '^softdat-perf: dat  send_lat' "$tmp/e" && grep -q 'MPA CRC on' "$tmp/e" &&
        ok "-v: result lines and the negotiated CRC on stderr" || { notok "-v detail missing"; show "$tmp/e"; }
    grep -q 'connection established: MPA CRC on' "$tmp/srv.err" && ok "server reports MPA CRC on" ||
        { notok "server CRC line missing"; show "$tmp/srv.err"; }
else
    notok "server (--crc on) did not start"; show "$tmp/srv.err"
fi

# --- softdat-trace: -v is its -a (every record), as -v adds detail in the
# other tools
if SOFTDAT_TRACE=$tmp/info.jsonl timeout 30 "$INFO" softdat-lo >/dev/null 2>&1 &&
   timeout 10 "$TRACE" -a "$tmp/info.jsonl" >"$tmp/trace-a" 2>&1 &&
   timeout 10 "$TRACE" -v "$tmp/info.jsonl" >"$tmp/trace-v" 2>&1 &&
   timeout 10 "$TRACE" "$tmp/info.jsonl" >"$tmp/trace-plain" 2>&1; then
    na=$(wc -l <"$tmp/trace-a") np=$(wc -l <"$tmp/trace-plain")
    cmp -s "$tmp/trace-a" "$tmp/trace-v" && [ "$na" -gt "$np" ] &&
        ok "softdat-trace -v: the same as -a ($na lines, $np without)" ||
        notok "softdat-trace -v differs from -a, or adds nothing ($na lines, $np without)"
else
    notok "softdat-trace -a/-v on a trace of softdat-info:"; show "$tmp/trace-v"
fi

[ $fails -eq 0 ]
