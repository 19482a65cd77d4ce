#!/usr/bin/env bash
# Debian's dapltest against softdat over loopback, under our libdat2 and
# under Debian's: one server (-T S, conn qual 62000) per registry, then
# transaction tests (-T T) with send/recv, RDMA write and RDMA read mixes,
# several threads and endpoints, data validation (-V), completion polling
# (-P), reaping sends on receives (-f) and RSPs (-r); a performance test
# (-T P, RDMA write and read); -T Q stops the server, which must then exit
# 0. Finally the limit test (-T L, no server), per sub-test, with one and
# with four open instances of the IA (-w 1, -w 4).
# This dapltest has no CNO option for -T T (only dtest -c exercises CNOs).
# Exit 0 pass, 77 skip, else fail.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"
il_require_bin dapltest

PORT=62000 # this dapltest's default server qualifier (abi-and-loading.md §4.5)
H="-s 127.0.0.1 -D $IL_IA"

# client REG LABEL SECS ARGS...: one client run against the running server.
# dapltest's exit status alone does not tell a failed transfer, so the log
# must also have no error line and end the way a good run ends.
client() {
    local reg=$1 label=$2 secs=$3; shift 3
    local log=$IL_TMP/dapltest-$reg-$((++n)).log t0=$SECONDS rc
    local smark
    smark=$(wc -l <"$slog")
    il_run "$reg" "$secs" dapltest "$@" >"$log" 2>&1 </dev/null
    rc=$?
    sleep 0.2 # the server's verdict for this client follows the client's exit
    local name="dapltest $label, $reg libdat2" good=$IL_DAPLTEST_GOOD
    # A performance client prints its statistics only when every
    # transfer completed; it reports a failed post or reap nowhere.
    [ "$1" = "-T" ] && [ "$2" = P ] && good='^raw: '
    if [ $rc -eq 0 ] && grep -Eq "$good" "$log" && ! grep -Eq "$bad" "$log" &&
        ! tail -n +"$((smark + 1))" "$slog" | grep -Eq "$bad"; then
        il_ok "$name ($((SECONDS - t0))s)"
    else
        il_notok "$name (exit $rc, $((SECONDS - t0))s)"
        il_show client "$log" 12
        tail -n +"$((smark + 1))" "$slog" | grep -E -A2 "$bad" | sed 's/^/  # server: /'
    fi
}
bad=$IL_DAPLTEST_BAD

n=0
for reg in $(il_registries); do
    if ! il_wait_port_free $PORT 20; then
        il_notok "dapltest server, $reg libdat2: port $PORT busy"
        continue
    fi
    slog=$IL_TMP/dapltest-server-$reg.log
    il_start "$reg" 200 "$slog" dapltest -T S -D "$IL_IA"
    spid=$IL_PID
    if ! il_wait_listen $PORT "$spid" 20; then
        il_notok "dapltest server, $reg libdat2: not listening on $PORT"
        il_show server "$slog"; il_stop "$spid"; continue
    fi
    # shellcheck disable=SC2086
    {
    client "$reg" "-T T SR 256" 30 -T T $H -i 100 -t 1 -w 1 client SR 256 server SR 256
    client "$reg" "-T T SR+RW+RR 4096 -V" 30 -T T $H -i 100 -t 1 -w 1 -V \
        client SR 4096 client RW 4096 client RR 4096 server SR 4096
    client "$reg" "-T T RW/RR multi-segment, -t 2 -w 2" 60 -T T $H -i 100 -t 2 -w 2 \
        client SR 1024 2 server RW 8192 2 client RR 8192 2 server SR 1024 2
    client "$reg" "-T T many endpoints: -t 2 -w 8 SR+RW+RR -V" 60 -T T $H -i 50 -t 2 -w 8 -V \
        client SR 512 client RW 4096 client RR 4096 server SR 512
    client "$reg" "-T T -P polling SR+RW+RR 64K" 30 -T T $H -i 50 -t 1 -w 1 -P \
        client SR 65536 server RW 65536 client RR 65536 server SR 65536
    client "$reg" "-T T -f reap sends on recv" 30 -T T $H -i 100 -t 1 -w 1 \
        client SR 256 -f server SR 256 -f
    client "$reg" "-T T -r RSPs" 30 -T T $H -i 20 -t 1 -w 1 -r client SR 256 server SR 256
    client "$reg" "-T P RW 4096 x2 pipeline" 30 -T P $H -n $PORT -i 200 RW 4096 2
    client "$reg" "-T P RR 65536" 30 -T P $H -n $PORT -i 100 RR 65536
    }
    qlog=$IL_TMP/dapltest-quit-$reg.log
    il_run "$reg" 20 dapltest -T Q -s 127.0.0.1 -D "$IL_IA" >"$qlog" 2>&1 </dev/null
    qrc=$?
    il_wait "$spid" 15
    src=$?
    if [ $qrc -eq 0 ] && [ $src -eq 0 ] && grep -q 'Exiting' "$slog"; then
        il_ok "dapltest -T Q stops the server, $reg libdat2"
    else
        il_notok "dapltest -T Q / server exit, $reg libdat2 (quit exit $qrc, server exit $src)"
        il_show quit "$qlog"; il_show server "$slog" 25
    fi
done

# Limit test: no server. Each sub-test on its own so a report names it,
# then all of them in one process (IA close / provider unload in between).
# A sub-test passes when it created its objects and any failure it met was
# a resource limit (DAT_INSUFFICIENT_RESOURCES), not a refused parameter.
limit_ok() { # log
    grep -Eq 'created: [1-9]|posted per EP: [1-9]|OK - stopping now|IAs opened: [1-9]' "$1" &&
        ! grep -E 'fails?:|[Ee]rror' "$1" | grep -vq 'DAT_INSUFFICIENT_RESOURCES'
}
# -w 4: four open instances of the IA; dapltest creates an EP of one
# instance with EVDs of another (shared objects, issue 8 §4a).
for reg in $(il_registries); do
    for w in 1 4; do
    for sub in limit_ia limit_pz limit_cno limit_evd limit_ep limit_rsp limit_psp limit_lmr \
        limit_rpost limit_size_lmr ""; do
        log=$IL_TMP/dapltest-L-$reg-w$w-${sub:-all}.log t0=$SECONDS
        # shellcheck disable=SC2086
        il_run "$reg" 90 dapltest -T L -D "$IL_IA" -w $w -m 100 $sub >"$log" 2>&1 </dev/null
        rc=$?
        if [ $rc -eq 0 ] && limit_ok "$log"; then
            il_ok "dapltest -T L -w $w -m 100 ${sub:-(all)}, $reg libdat2 ($((SECONDS - t0))s)"
        else
            il_notok "dapltest -T L -w $w -m 100 ${sub:-(all)}, $reg libdat2 (exit $rc)"
            grep -E 'fails?:|[Ee]rror' "$log" | grep -v INSUFFICIENT_RESOURCES | head -5 | sed 's/^/  # limit: /'
        fi
    done
    done
done
# Once at dapltest's own default maximum (1000 of each object, 1000 IAs
# open at once) with four instances, under our registry (about a minute;
# several under a sanitizer, so not there: the -m 100 runs above cover the
# same paths).
if [ -n "$IL_SANITIZER_RT" ]; then
    il_skip "dapltest -T L -w 4 at the default maximum: too slow under a sanitizer"
else
    log=$IL_TMP/dapltest-L-default-max.log t0=$SECONDS
    il_run ours 300 dapltest -T L -D "$IL_IA" -w 4 >"$log" 2>&1 </dev/null
    rc=$?
    if [ $rc -eq 0 ] && limit_ok "$log" && grep -q 'IAs opened: 1000' "$log" && grep -q 'EPs created: 1000' "$log"; then
        il_ok "dapltest -T L -w 4 (default maximum, all sub-tests), ours libdat2 ($((SECONDS - t0))s)"
    else
        il_notok "dapltest -T L -w 4 (default maximum), ours libdat2 (exit $rc)"
        grep -E 'fails?:|[Ee]rror' "$log" | grep -v INSUFFICIENT_RESOURCES | head -5 | sed 's/^/  # limit: /'
    fi
fi
il_finish
