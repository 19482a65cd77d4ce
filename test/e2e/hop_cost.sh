#!/usr/bin/env bash
# shellcheck disable=SC2015  # ok/notok always succeed: A && ok || notok is safe
# scripts/hop-cost counts the provider's instructions per round trip of a
# polled 64 B ping-pong under callgrind, on the InfiniBand-semantics IA and
# the iWARP one (docs/perf-log.md §11). Checked: it runs to the end, every
# figure is a positive count, the hop is the sum of its three parts, and
# the placement confirmation of InfiniBand semantics (at valgrind's pace a
# probe behind each Send, the answer to the peer's probe with the reply)
# shows as more instructions per post and more frames parsed per round
# trip than plain iWARP's. Skipped without valgrind and
# in sanitizer builds (valgrind cannot run them). Exit 0 pass, 77 skip,
# else fail.
set -u
SOFTDAT_TOP=${SOFTDAT_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$SOFTDAT_TOP/build}

if ! command -v valgrind >/dev/null 2>&1 || ! command -v callgrind_annotate >/dev/null 2>&1; then
    echo "skip - valgrind not installed (scripts/install-deps)"
    exit 77
fi
if ldd "$BUILD/lib/libdaplsoft.so.2" 2>/dev/null | grep -Eq 'lib(asan|tsan)\.so'; then
    echo "skip - sanitizer build: valgrind cannot run it"
    exit 77
fi

fails=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fails=$((fails + 1)); }

out=$(timeout --kill-after=5 300 "$SOFTDAT_TOP/scripts/hop-cost" --build "$BUILD" --hops 500 2>&1)
rc=$?
[ $rc -eq 0 ] && ok "scripts/hop-cost ran (exit 0)" || { notok "scripts/hop-cost exit $rc: $out"; exit 1; }
echo "$out" | sed 's/^/  # /'

# value ROW COLUMN: the figure in that row (1: softdat-lo, 2: softdat-lo-iw).
value() { echo "$out" | awk -v row="$1" -v col="$2" '$0 ~ "^ *" row " " { print $(NF - 2 + col) }'; }

for ia in 1 2; do
    name=$([ $ia = 1 ] && echo softdat-lo || echo softdat-lo-iw)
    s=$(value post_send $ia) r=$(value post_recv $ia) x=$(value receive $ia) h=$(value hop $ia)
    if [ -n "$s" ] && [ -n "$r" ] && [ -n "$x" ] && [ -n "$h" ] &&
        [ "$s" -gt 0 ] && [ "$r" -gt 0 ] && [ "$x" -gt 0 ]; then
        ok "$name: post_send $s, post_recv $r, receive $x instructions per round trip"
    else
        notok "$name: missing or zero figures (post_send '$s', post_recv '$r', receive '$x')"
        continue
    fi
    d=$((s + r + x - h))
    [ "${d#-}" -le 2 ] && ok "$name: the hop ($h) is the sum of its parts" ||
        notok "$name: hop $h, parts sum to $((s + r + x))"
    for part in "transmit pass" "FPDU building" "socket write" "header parse" completions "event posts" \
        "memory checks"; do
        v=$(value "  $part" $ia)
        [ -n "$v" ] && [ "$v" -gt 0 ] && [ "$v" -le "$h" ] || notok "$name: '$part' is '$v' (hop $h)"
    done
done
# The transmit side: the receive figure also counts empty passes when the
# host is slow to schedule the client (hop-cost says so on stderr).
ib=$(value post_send 1) iw=$(value post_send 2)
[ -n "$ib" ] && [ -n "$iw" ] && [ "$ib" -gt "$iw" ] &&
    ok "InfiniBand semantics cost more per post than iWARP's ($ib against $iw): the probe and the answer it carries" ||
    notok "softdat-lo post_send '$ib' not above softdat-lo-iw '$iw'"

fib=$(value "frames parsed" 1) fiw=$(value "frames parsed" 2)
awk -v a="$fib" -v b="$fiw" 'BEGIN { exit !(a != "" && b >= 1 && a > b) }' &&
    ok "frames parsed per round trip: $fib on softdat-lo, $fiw on softdat-lo-iw" ||
    notok "frames parsed per round trip: '$fib' on softdat-lo, '$fiw' on softdat-lo-iw"

[ $fails -eq 0 ] || exit 1
exit 0
