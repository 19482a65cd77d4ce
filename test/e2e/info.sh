#!/usr/bin/env bash
# shellcheck disable=SC2015  # ok/notok always succeed: A && ok || notok is safe
# softdat-info against the softdat-lo IA of the build's dat.conf, once with
# our libdat2 (found through the tool's RUNPATH) and once with Debian's
# (LD_LIBRARY_PATH wins over RUNPATH). Exit 0 pass, 77 skip, else fail.
set -u
SOFTDAT_TOP=${SOFTDAT_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$PWD/build}
INFO=$BUILD/bin/softdat-info
CONF=$BUILD/dat.conf

if [ ! -f "$BUILD/lib/libdaplsoft.so.2" ] || [ ! -f "$CONF" ]; then
    echo "skip - the provider is not built ($BUILD/lib/libdaplsoft.so.2, $CONF)"
    exit 77
fi

fails=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fails=$((fails + 1)); }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/softdat-info.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

[ -x "$INFO" ] && ok "softdat-info is built" || { notok "missing $INFO"; exit 1; }

# run LABEL ENV... -- ARGS...: runs softdat-info, output in $tmp/LABEL.{out,err,rc}
run() {
    local label=$1; shift
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env -u LD_LIBRARY_PATH DAT_OVERRIDE="$CONF" "${envs[@]}" \
        timeout 60 "$INFO" "$@" >"$tmp/$label.out" 2>"$tmp/$label.err" </dev/null
    echo $? >"$tmp/$label.rc"
}

# The libdat2.so.2 the dynamic loader picks for softdat-info, as a real path.
resolved_dat2() {
    local p
    p=$(ldd "$INFO" | awk '$1 == "libdat2.so.2" { print $3 }')
    [ -n "$p" ] && realpath "$p"
}

# check LABEL: the assertions every successful softdat-lo run must satisfy.
check() {
    local label=$1 what=$2 out=$tmp/$1.out
    local rc; rc=$(cat "$tmp/$label.rc")
    if [ "$rc" != 0 ]; then
        notok "$what: exit $rc"
        sed 's/^/    stdout: /' "$out" | head -40
        sed 's/^/    stderr: /' "$tmp/$label.err" | head -20
        return
    fi
    ok "$what: exit 0"
    grep -Eq '^ia_name: softdat-lo$' "$out" &&
        ok "$what: shows IA softdat-lo" || notok "$what: no 'ia_name: softdat-lo'"
    grep -Eq '^ +ia_address: +127\.0\.0\.1 \(AF_INET\)$' "$out" &&
        ok "$what: IA address 127.0.0.1" || notok "$what: IA address is not 127.0.0.1: $(grep ia_address "$out")"
    grep -Eq '^ +extension_supported: +IB ' "$out" &&
        ok "$what: extension IB" || notok "$what: extension is not IB: $(grep extension_supported "$out")"
    grep -Eq '^ +extension_features: .*counters.*iwarp-socket-service-points' "$out" &&
        ok "$what: counters and socket service points advertised" ||
        notok "$what: extension features: $(grep extension_features "$out")"
    grep -Eq '^ +dapl_version: +2\.0$' "$out" &&
        ok "$what: dapl_version 2.0" || notok "$what: dapl_version is not 2.0"
    grep -Eq '^ +max_eps: +[1-9]' "$out" &&
        ok "$what: max_eps > 0" || notok "$what: max_eps not positive"
    [ ! -s "$tmp/$label.err" ] &&
        ok "$what: nothing on stderr" || { notok "$what: stderr not empty"; sed 's/^/    /' "$tmp/$label.err" | head; }
}

# 1. our libdat2 (RUNPATH $ORIGIN/../lib)
run ours -- softdat-lo
check ours "our libdat2"
run ours_list -- -l
grep -q 'softdat-lo ' "$tmp/ours_list.out" && grep -q 'softdat-lo6 ' "$tmp/ours_list.out" &&
    [ "$(cat "$tmp/ours_list.rc")" = 0 ] &&
    ok "-l lists softdat-lo and softdat-lo6" || notok "-l output: $(cat "$tmp/ours_list.out")"
run ours_all --
[ "$(cat "$tmp/ours_all.rc")" = 0 ] && grep -q '^ia_name: softdat-lo$' "$tmp/ours_all.out" &&
    ok "no IA named: every IA shown, exit 0" || notok "no IA named: exit $(cat "$tmp/ours_all.rc")"

# error paths: an unknown IA is a failure with the DAT error text on stderr
run unknown -- no-such-ia
[ "$(cat "$tmp/unknown.rc")" = 1 ] && grep -q 'DAT_PROVIDER_NOT_FOUND' "$tmp/unknown.err" &&
    ok "unknown IA: exit 1, DAT_PROVIDER_NOT_FOUND on stderr" ||
    notok "unknown IA: exit $(cat "$tmp/unknown.rc"), stderr: $(cat "$tmp/unknown.err")"
run badopt -- --no-such-option
[ "$(cat "$tmp/badopt.rc")" = 2 ] && ok "bad option: exit 2" || notok "bad option: exit $(cat "$tmp/badopt.rc")"
run help -- -h
[ "$(cat "$tmp/help.rc")" = 0 ] && grep -q '^usage:' "$tmp/help.out" &&
    ok "-h: usage on stdout, exit 0" || notok "-h failed"

# 2. Debian's libdat2 loading our provider
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
debian_lib=/usr/lib/$multiarch
if [ -f "$debian_lib/libdat2.so.2" ]; then
    run debian LD_LIBRARY_PATH="$debian_lib" -- softdat-lo
    [ "$(LD_LIBRARY_PATH="$debian_lib" resolved_dat2)" = "$(realpath "$debian_lib/libdat2.so.2")" ] &&
        ok "Debian run resolves $debian_lib/libdat2.so.2" ||
        notok "Debian run resolves $(LD_LIBRARY_PATH="$debian_lib" resolved_dat2)"
    check debian "Debian libdat2"
else
    echo "skip - Debian libdat2 not installed (apt-get install libdapl2); interop half not run"
fi

[ "$(resolved_dat2)" = "$(realpath "$BUILD/lib/libdat2.so.2")" ] &&
    ok "default run resolves the build's libdat2" ||
    notok "default run resolves $(resolved_dat2), not the build's libdat2"

[ $fails -eq 0 ]
