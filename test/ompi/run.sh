#!/usr/bin/env bash
# Open MPI 1.6.5's uDAPL transport over softdat: a real DAT program written
# for InfiniBand hardware, with the transport's DEFAULT settings.
#
#   test/ompi/run.sh            build Open MPI once (test/ompi/build.sh, cached
#                               in $BUILD/ompi), then OMPI_RUNS (20) runs of
#                               test/ompi/mpi_check (ping-pong 1 B..4 MiB with
#                               data verified, a multi-message exchange,
#                               allreduce, bcast) per registry (ours, Debian's)
#                               on loopback, and the same between two network
#                               namespaces (root only)
#   test/ompi/run.sh perf       8 B latency and 4 MiB bandwidth, udapl over
#                               softdat beside Open MPI's own tcp transport
# Every run is bounded (OMPI_TIMEOUT, 40 s); a series stops after 3 failures. Exit 0 pass, 77 skip, else fail.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$top/build}
BUILD=$(cd "$BUILD" && pwd)
runs=${OMPI_RUNS:-20}
tmo=${OMPI_TIMEOUT:-40}
mode=${1:-check}

"$here/build.sh"
rc=$?
[ $rc -eq 0 ] || exit $rc
P=$BUILD/ompi/install
prog=$BUILD/ompi/mpi_check
if [ ! -x "$prog" ] || [ "$here/mpi_check.c" -nt "$prog" ]; then
    "$P/bin/mpicc" -O2 -Wl,-rpath,"$P/lib" -o "$prog" "$here/mpi_check.c" || exit 1
fi
export PATH=$P/bin:$PATH
deb_lib=/usr/lib/x86_64-linux-gnu
tmp=$(mktemp -d)
cleanup() {
    ip netns del sdompi-a 2>/dev/null
    ip netns del sdompi-b 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# mpi REG CONF IA [ARGS...] -- MPIRUN_PREFIX...: one job of 2 ranks.
mpi() {
    local reg=$1 conf=$2 ia=$3; shift 3
    local lib=$BUILD/lib
    [ "$reg" = debian ] && lib=$deb_lib
    env DAT_OVERRIDE="$conf" LD_LIBRARY_PATH="$lib" timeout --kill-after=5 "$tmo" \
        mpirun -np 2 -x DAT_OVERRIDE -x LD_LIBRARY_PATH --mca btl udapl,self \
        --mca btl_udapl_if_include "$ia" "$@" </dev/null
}

registries() {
    echo ours
    [ -e "$deb_lib/libdat2.so.2" ] && echo debian
    return 0
}

fail=0
series() { # TAG REG CONF IA [mpirun args...]
    local tag=$1 reg=$2 conf=$3 ia=$4; shift 4
    local ok=0 t0=$SECONDS i bad=0
    for i in $(seq 1 "$runs"); do
        [ $bad -ge 3 ] && break
        if mpi "$reg" "$conf" "$ia" "$@" "$prog" >"$tmp/run.log" 2>&1 &&
            grep -q '^mpi_check: ok' "$tmp/run.log"; then
            ok=$((ok + 1))
        else
            bad=$((bad + 1))
            echo "  # run $i failed (exit $?):"
            tail -8 "$tmp/run.log" | sed 's/^/  #   /'
        fi
    done
    if [ $ok -eq "$runs" ]; then
        echo "ok - $tag, $reg registry: $ok/$runs MPI runs passed ($((SECONDS - t0)) s)"
    else
        echo "not ok - $tag, $reg registry: $ok/$runs MPI runs passed"
        fail=1
    fi
}

if [ "$mode" = perf ]; then
    conf=$BUILD/dat.conf
    for r in 1 2 3; do
        u=$(mpi ours "$conf" softdat-lo "$prog" perf 2>&1 | grep '^mpi_check perf')
        t=$(env LD_LIBRARY_PATH="$BUILD/lib" timeout "$tmo" mpirun -np 2 --mca btl tcp,self \
            --mca btl_tcp_if_include lo "$prog" perf 2>&1 | grep '^mpi_check perf')
        echo "round $r: udapl/softdat: ${u#mpi_check perf: }"
        echo "round $r: tcp btl:       ${t#mpi_check perf: }"
    done
    exit 0
fi

while read -r reg; do
    series "loopback softdat-lo (InfiniBand semantics), default transport settings" \
        "$reg" "$BUILD/dat.conf" softdat-lo
done < <(registries)

# Two network namespaces joined by a veth pair whose ends have the same
# name, so one dat.conf record ("sdveth") names each side's own address.
# mpirun and rank 0 run in one namespace, rank 1 in the other.
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null &&
    ip netns add sdompi-a 2>/dev/null && ip netns add sdompi-b 2>/dev/null &&
    ip link add sdveth netns sdompi-a type veth peer name sdveth netns sdompi-b 2>/dev/null; then
    ip -n sdompi-a addr add 10.231.0.1/24 dev sdveth && ip -n sdompi-a link set sdveth up &&
        ip -n sdompi-a link set lo up
    ip -n sdompi-b addr add 10.231.0.2/24 dev sdveth && ip -n sdompi-b link set sdveth up &&
        ip -n sdompi-b link set lo up
    sed -n 's|"lo"|"sdveth"|; s|^softdat-lo |softdat-ns |p' "$BUILD/dat.conf" >"$tmp/ns.conf"
    cat >"$tmp/rank1" <<EOS
#!/bin/sh
exec ip netns exec sdompi-b "\$@"
EOS
    chmod +x "$tmp/rank1"
    while read -r reg; do
        lib=$BUILD/lib
        [ "$reg" = debian ] && lib=$deb_lib
        ok=0 t0=$SECONDS bad=0
        for i in $(seq 1 "$runs"); do
            [ $bad -ge 3 ] && break
            if ip netns exec sdompi-a env DAT_OVERRIDE="$tmp/ns.conf" LD_LIBRARY_PATH="$lib" \
                timeout --kill-after=5 "$tmo" mpirun -x DAT_OVERRIDE -x LD_LIBRARY_PATH \
                --mca btl udapl,self --mca btl_udapl_if_include softdat-ns \
                --mca oob_tcp_if_include sdveth \
                -np 1 "$prog" : -np 1 "$tmp/rank1" "$prog" </dev/null >"$tmp/ns.log" 2>&1 &&
                grep -q '^mpi_check: ok' "$tmp/ns.log"; then
                ok=$((ok + 1))
            else
                bad=$((bad + 1))
                echo "  # netns run $i failed:"; tail -8 "$tmp/ns.log" | sed 's/^/  #   /'
            fi
        done
        if [ $ok -eq "$runs" ]; then
            echo "ok - two network namespaces (veth), $reg registry: $ok/$runs MPI runs passed ($((SECONDS - t0)) s)"
        else
            echo "not ok - two network namespaces (veth), $reg registry: $ok/$runs MPI runs passed"
            fail=1
        fi
    done < <(registries)
else
    echo "skip - two network namespaces: needs root and ip netns"
fi
exit $fail
