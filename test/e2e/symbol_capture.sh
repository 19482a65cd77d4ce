#!/usr/bin/env bash
# The provider inside a host program that exports symbols of its own with
# libevent's internal names (Open MPI 1.6 exports its bundled libevent
# 1.4's `epollops`, `pollops`, `selectops`).
#  1. The hazard is real: libevent_capture_probe shows a libevent 2.1 loaded
#     the ordinary way binding to the host's tables (crash or no backend).
#  2. softdat is immune: dat_dto_peer_hostile (dat_dto_peer plus those
#     exports, -rdynamic) runs the basic transfer scenario as server and
#     client, under our registry and Debian's.
# Under ASan/TSan the provider cannot use RTLD_DEEPBIND: skipped there.
# Exit 0 pass, 77 skip, else fail.
IL_NETNS=${IL_NETNS:-no}
# shellcheck source=lib/interop.sh
. "$(dirname "$0")/lib/interop.sh"
probe=$BUILD/test/helpers/libevent_capture_probe
peer=$BUILD/test/helpers/dat_dto_peer_hostile
for f in "$probe" "$peer" "$IL_CONF"; do
    [ -e "$f" ] || { echo "not ok - $f missing (run make first)"; exit 1; }
done
if [ -n "$IL_SANITIZER_RT" ]; then
    echo "skip - sanitizer build: the provider binds libevent without RTLD_DEEPBIND there"
    exit 77
fi

out=$("$probe" 2>&1)
case $out in
    captured*) il_ok "hazard reproduced: libevent bound the ordinary way is captured ($out)" ;;
    isolated*) il_note "this libevent is not captured by the host's exports; immunity still checked" ;;
    *) il_notok "capture probe failed: $out" ;;
esac

nm -D "$peer" | grep -q ' D epollops$' || il_notok "hostile peer does not export epollops"

while read -r reg; do
    port=$((20000 + RANDOM % 12000))
    # The peer's RUNPATH finds our libdat2; LD_LIBRARY_PATH picks Debian's.
    run=$peer
    [ "$reg" = debian ] && run="LD_LIBRARY_PATH=$(dirname "$IL_DEBIAN_LIBDAT") $peer"
    if il_pair "hostile.$reg" "$reg" 40 "$port" env \
        "$run server softdat-lo $port basic" "$run client softdat-lo 127.0.0.1 $port basic"; then
        il_ok "$reg registry: transfers inside a host exporting libevent 1.4 names (${IL_SECS}s)"
    else
        il_notok "$reg registry: hostile host (server $IL_SRC, client $IL_CRC)"
        il_show server "$IL_SLOG"; il_show client "$IL_CLOG"
    fi
done < <(il_registries)
il_finish
