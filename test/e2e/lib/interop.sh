# shellcheck shell=bash
# shellcheck disable=SC2034  # IL_* results are read by the sourcing script
# Shared helpers for the interop_*.sh and wire_dat.sh end-to-end scripts:
# TAP-ish "ok"/"not ok" lines, the two registries (ours / Debian's),
# background processes remembered by PID (and killed only by that PID),
# bounded waits for a listening port or a log line, and cleanup on exit.
#
# Source it after setting nothing: it sets BUILD (if unset), IL_CONF,
# IL_TMP, il_fail and an EXIT trap. Scripts then call il_finish.
set -u

# dtest, dtestx and dtestcm use the fixed side-channel port 15828 and fixed
# conn quals (45248, 31112, 62000): another dtest on the host (a colleague's
# test run, a parallel CI job) would answer our client. So the script
# re-executes itself once in a private network namespace with its own
# loopback when the system allows it (root: unshare -n; else a user
# namespace: unshare -rn), and otherwise runs in the host's namespace,
# waiting for the fixed ports to be free. IL_NETNS=no disables this.
if [ -z "${IL_NETNS:-}" ] && command -v unshare >/dev/null 2>&1 && command -v ip >/dev/null 2>&1; then
    for il_u in "unshare -n" "unshare -rn"; do
        if $il_u ip link set lo up 2>/dev/null; then
            IL_NETNS=private exec $il_u -- bash -c 'ip link set lo up && exec "$@"' il-netns \
                bash "$0" "$@"
        fi
    done
fi
[ -n "${IL_NETNS:-}" ] || IL_NETNS=host
IL_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
BUILD=${BUILD:-$IL_TOP/build}
IL_CONF=$BUILD/dat.conf
IL_DEBIAN_LIBDAT=/usr/lib/x86_64-linux-gnu/libdat2.so.2
IL_IA=${IL_IA:-softdat-lo}
IL_TMP=$(mktemp -d "${TMPDIR:-/tmp}/softdat-interop.XXXXXX") || exit 1
# A sanitized provider (make asan / tsan) loaded by an uninstrumented
# Debian program needs its runtime loaded first; the program's own leaks
# are not ours to report.
IL_SANITIZER_RT=$(ldd "$BUILD/lib/libdaplsoft.so.2" 2>/dev/null | awk '/lib(asan|tsan)\.so/ {print $3; exit}')
il_fail=0 il_ran=0 il_skipped=0
il_pids=()

il_cleanup() {
    local p
    for p in "${il_pids[@]}"; do
        if kill -0 "$p" 2>/dev/null; then
            kill "$p" 2>/dev/null
            wait "$p" 2>/dev/null
        fi
    done
    if [ -n "${IL_KEEP:-}" ]; then echo "# logs kept in $IL_TMP"; else rm -rf "$IL_TMP"; fi
}
trap il_cleanup EXIT

il_ok() { echo "ok - $*"; il_ran=$((il_ran + 1)); }
il_notok() { echo "not ok - $*"; il_fail=1; il_ran=$((il_ran + 1)); }
il_skip() { echo "skip - $*"; il_skipped=$((il_skipped + 1)); }
il_note() { echo "# $*"; }
il_note "network: $IL_NETNS namespace (IL_NETNS=no to use the host's)"
# il_show PREFIX FILE [N]: the last N lines of FILE, commented.
il_show() { tail -n "${3:-15}" "$2" 2>/dev/null | sed "s|^|  # $1: |"; }

# il_require_bin NAME...: exit 77 unless every program is installed.
il_require_bin() {
    local b
    for b in "$@"; do
        command -v "$b" >/dev/null 2>&1 || { echo "skip - $b is not installed"; exit 77; }
    done
    [ -e "$IL_CONF" ] || { echo "not ok - $IL_CONF missing (run make first)"; exit 1; }
}

# il_registries: the registries to run under, one "name" per line: "ours"
# always, "debian" when Debian's libdat2 is installed.
il_registries() {
    echo ours
    [ -e "$IL_DEBIAN_LIBDAT" ] && echo debian
    return 0
}

# il_run REG SECS CMD...: runs CMD under timeout with DAT_OVERRIDE and the
# registry REG (ours: LD_LIBRARY_PATH=$BUILD/lib; debian: none) in the
# foreground. Other variables (SOFTDAT_LOG, SOFTDAT_CRC) pass through.
il_cmd() { # REG SECS CMD... -> IL_CMD (array)
    local reg=$1 secs=$2; shift 2
    IL_CMD=(env -u LD_LIBRARY_PATH DAT_OVERRIDE="$IL_CONF")
    [ "$reg" = ours ] && IL_CMD+=(LD_LIBRARY_PATH="$BUILD/lib")
    [ -n "$IL_SANITIZER_RT" ] &&
        IL_CMD+=(LD_PRELOAD="$IL_SANITIZER_RT" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
            TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$IL_TOP/test/e2e/lib/tsan-debian.supp")
    IL_CMD+=(timeout --kill-after=5 "$secs" "$@")
}
il_run() {
    il_cmd "$@"
    "${IL_CMD[@]}"
}

# il_start REG SECS LOG CMD...: il_run in the background, output to LOG;
# IL_PID is the PID of timeout itself (the subshell execs it), which
# forwards a TERM to its child: killing IL_PID ends the program.
il_start() {
    local log=$3
    il_cmd "$1" "$2" "${@:4}"
    # Emptied here, not only by the background redirection: a caller that
    # waits for a line in LOG (il_wait_log) must not find a previous run's.
    : >"$log"
    (exec "${IL_CMD[@]}" >"$log" 2>&1 </dev/null) &
    IL_PID=$!
    il_pids+=("$IL_PID")
}

# il_stop PID: kills PID (only that PID) if it still runs, reaps it.
il_stop() {
    [ -n "${1:-}" ] || return 0
    if kill -0 "$1" 2>/dev/null; then
        kill "$1" 2>/dev/null
        wait "$1" 2>/dev/null
    fi
    return 0
}

# il_wait PID SECS: waits at most SECS for PID to end; returns its exit
# status, or kills it and returns 124 when it did not end in time.
il_wait() {
    local pid=$1 n=$(($2 * 10)) i=0
    while kill -0 "$pid" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt $n ]; then
            il_stop "$pid"
            return 124
        fi
        sleep 0.1
    done
    wait "$pid"
}

# il_listening PORT: true when something listens on TCP PORT (any address).
il_listening() { ss -Htln "sport = :$1" 2>/dev/null | grep -q .; }

# il_wait_port_free PORT SECS: waits for PORT to have no listener (a
# previous test's server still exiting). Returns 1 when it stays busy.
il_wait_port_free() {
    local i=0 n=$(($2 * 10))
    while il_listening "$1"; do
        i=$((i + 1))
        [ $i -gt $n ] && return 1
        sleep 0.1
    done
    return 0
}

# il_wait_listen PORT PID SECS: waits until PORT listens while PID lives.
il_wait_listen() {
    local port=$1 pid=$2 i=0 n=$(($3 * 10))
    until il_listening "$port"; do
        kill -0 "$pid" 2>/dev/null || return 1
        i=$((i + 1))
        [ $i -gt $n ] && return 1
        sleep 0.1
    done
    return 0
}

# il_wait_log FILE REGEX PID SECS: waits until FILE matches REGEX while PID
# lives.
il_wait_log() {
    local file=$1 re=$2 pid=$3 i=0 n=$(($4 * 10))
    until grep -Eq "$re" "$file" 2>/dev/null; do
        kill -0 "$pid" 2>/dev/null || return 1
        i=$((i + 1))
        [ $i -gt $n ] && return 1
        sleep 0.1
    done
    return 0
}

# dapltest's exit status does not tell a failed transfer: the words in its
# log do. A good transaction client ends with IL_DAPLTEST_GOOD; no line of
# a good run matches IL_DAPLTEST_BAD (grep -E).
IL_DAPLTEST_GOOD='End of Work -- Client Exiting'
IL_DAPLTEST_BAD='Test Error|Test Failed|[Ee]rror:|FAIL|mismatch|swallowing|DAT_[A-Z_]+ +DAT_'

# il_not_implemented FILE...: true when a run ended on DAT_NOT_IMPLEMENTED
# (the status name or its code 0x000c0000 / "NOT_IMPLEMENTED").
il_not_implemented() { grep -Eq 'DAT_NOT_IMPLEMENTED|NOT_IMPLEMENTED' "$@" 2>/dev/null; }

# il_finish: exit 0 if nothing failed; 77 if nothing ran and something was
# skipped; 1 otherwise.
il_finish() {
    if [ $il_fail -ne 0 ]; then exit 1; fi
    if [ $il_ran -eq 0 ] && [ $il_skipped -gt 0 ]; then exit 77; fi
    exit 0
}

# il_pair TAG REG SECS PORT BIN "SERVER ARGS" "CLIENT ARGS": runs a
# server/client pair of BIN (args word-split) under registry REG: waits for
# PORT to be free, starts the server, waits until it listens on PORT, runs
# the client, then reaps the server (bounded). Sets IL_SLOG, IL_CLOG (log
# files), IL_SRC, IL_CRC (exit statuses; 124 = timed out) and IL_SECS
# (elapsed seconds). Returns 0 when both exited 0.
il_pair() {
    local tag=$1 reg=$2 secs=$3 port=$4 bin=$5 sargs=$6 cargs=$7 t0=$SECONDS
    IL_SLOG=$IL_TMP/$tag.server.log IL_CLOG=$IL_TMP/$tag.client.log
    IL_SRC=- IL_CRC=-
    if ! il_wait_port_free "$port" 20; then
        echo "port $port busy" >"$IL_SLOG"; : >"$IL_CLOG"
        IL_SRC=busy IL_SECS=0
        return 1
    fi
    # shellcheck disable=SC2086
    il_start "$reg" "$secs" "$IL_SLOG" "$bin" $sargs
    local spid=$IL_PID
    if ! il_wait_listen "$port" "$spid" 20; then
        il_stop "$spid"; wait "$spid" 2>/dev/null
        IL_SRC=not-listening IL_SECS=$((SECONDS - t0))
        : >"$IL_CLOG"
        return 1
    fi
    # shellcheck disable=SC2086
    il_run "$reg" "$secs" "$bin" $cargs >"$IL_CLOG" 2>&1 </dev/null
    IL_CRC=$?
    # A failed client often leaves the server waiting for ever: short wait.
    local grace=15
    [ "$IL_CRC" = 0 ] || grace=3
    il_wait "$spid" "$grace"
    IL_SRC=$?
    IL_SECS=$((SECONDS - t0))
    [ "$IL_SRC" = 0 ] && [ "$IL_CRC" = 0 ]
}
