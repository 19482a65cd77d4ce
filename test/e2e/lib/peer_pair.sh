# Sourced by the two-process peer tests (dat_cm.sh, dat_csp.sh): a helper
# peer as server (background, killed only by its PID, bounded by timeout)
# that prints "ready PORT", then the same helper as client.
#   pp_init HELPER              the helper in $BUILD/test/helpers
#   pp_run NAME LIBDIR [IA HOST] LIBDIR empty = our libdat2 (RUNPATH)
#   pp_debian NAME              pp_run through Debian's libdat2, or a SKIP line
# Options: PP_SERVER_ARGS / PP_CLIENT_ARGS (arrays), and pp_ok_detail (a
# function printing a detail for the ok line from "$tmp/server.log").
# The result is in $fail (0 pass, 1 a case failed).
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$(cd "$here/../.." && pwd)/build}
conf=$BUILD/dat.conf
tmp=$(mktemp -d)
spid=
fail=0
PP_SERVER_ARGS=()
PP_CLIENT_ARGS=()
pp_cleanup() {
    [ -n "$spid" ] && kill "$spid" 2>/dev/null
    rm -rf "$tmp"
}
trap pp_cleanup EXIT

pp_init() {
    peer=$BUILD/test/helpers/$1
    for f in "$peer" "$conf"; do
        [ -e "$f" ] || { echo "not ok - $f missing (run make first)"; exit 1; }
    done
}

pp_ok_detail() { :; }

pp_run() {
    local name=$1 libdir=$2 ianame=${3:-softdat-lo} host=${4:-127.0.0.1}
    local envs=(env -u LD_LIBRARY_PATH DAT_OVERRIDE="$conf")
    [ -n "$libdir" ] && envs+=(LD_LIBRARY_PATH="$libdir")
    : > "$tmp/server.log"
    "${envs[@]}" timeout 60 "$peer" -s -P "$ianame" "${PP_SERVER_ARGS[@]}" > "$tmp/server.log" 2>&1 &
    spid=$!
    local i=0
    while ! grep -q '^ready' "$tmp/server.log" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$spid" 2>/dev/null; then
            echo "not ok - $name: server did not start"; sed 's/^/  # /' "$tmp/server.log"
            kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; spid=; fail=1; return
        fi
        sleep 0.1
    done
    local port
    port=$(awk '/^ready/ {print $2; exit}' "$tmp/server.log")
    "${envs[@]}" timeout 60 "$peer" -c -P "$ianame" -h "$host" -p "$port" "${PP_CLIENT_ARGS[@]}" \
        > "$tmp/client.log" 2>&1
    local crc=$?
    wait "$spid"
    local src=$?
    spid=
    if [ $crc -eq 0 ] && [ $src -eq 0 ]; then
        local detail
        detail=$(pp_ok_detail)
        echo "ok - $name${detail:+ ($detail)}"
    else
        echo "not ok - $name (client $crc, server $src)"
        sed 's/^/  # client: /' "$tmp/client.log"; sed 's/^/  # server: /' "$tmp/server.log"
        fail=1
    fi
}

pp_debian() {
    local debian=/usr/lib/x86_64-linux-gnu
    if [ -e "$debian/libdat2.so.2" ]; then
        pp_run "$1" "$debian"
    else
        echo "ok - Debian libdat2 not installed # SKIP"
    fi
}
