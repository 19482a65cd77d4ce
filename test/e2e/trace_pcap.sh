#!/usr/bin/env bash
# SOFTDAT_PCAP judged by an independent decoder: run examples (both sides
# write their own capture and trace) and decode each capture with tshark
# (MPA heuristic, the recipe of test/e2e/wire_dat.sh), requiring:
#   - zero malformed packets and zero expert errors;
#   - every TCP payload segment decodes as MPA (or is part of a PDU tshark
#     reassembled);
#   - as many MPA Requests + Replies and as many FPDUs as the process's
#     trace has frame records (mpa_req/mpa_rep, fpdu);
#   - with SOFTDAT_CRC=on: a Good CRC32 for every FPDU and every frame
#     record "crc":"ok";
#   - protection: the Terminates in both captures;
#   - IPv6 and 100 KiB messages (softdat-perf over ::1): the same;
#   - UD (dat_ud_peer): every UDP datagram decodes as RoCEv2 BTH + DETH,
#     as many as the trace's datagram records;
#   - SOFTDAT_PCAP_MAX: a capped capture stops at the cap and still reads.
# Exit 0 pass, 77 skip (no tshark), else fail.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$top/build}
export BUILD
command -v tshark >/dev/null || { echo "skip - no tshark"; exit 77; }
command -v python3 >/dev/null || { echo "skip - no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export EX_OUT=$tmp
export DAT_OVERRIDE=${DAT_OVERRIDE:-$BUILD/dat.conf}
# shellcheck source=test/e2e/lib/pcap_judge.sh
. "$here/lib/pcap_judge.sh"
R=("${PJ_R[@]}")
fail=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fail=1; }
pj_ok() { ok "$@"; }
pj_notok() { notok "$@"; }

run_example() { # name crc
    local name=$1 crc=$2 port=$((20000 + RANDOM % 12000))
    if ! SOFTDAT_CRC=$crc timeout 90 "$top/examples/run" "$name" "$port" >"$tmp/$name.out" 2>&1; then
        notok "$name (CRC $crc): examples/run failed"; sed 's/^/  /' "$tmp/$name.out"; return 1
    fi
    return 0
}

for spec in send_recv:off rdma_write:off rdma_read:off write_imm:off fetch_add:off srq:off rdma_write:on protection:on; do
    name=${spec%%:*} crc=${spec#*:}
    run_example "$name" "$crc" || continue
    for side in server client; do
        pcap_judge "$name $side (CRC $crc)" "$tmp/$name.$side.pcapng" "$tmp/$name.$side.jsonl" "$crc"
    done
    if [ "$name" = protection ]; then
        for side in server client; do
            n=$(tshark -r "$tmp/$name.$side.pcapng" "${R[@]}" -Y 'iwarp_rdma.opcode == 0x07' 2>/dev/null | wc -l)
            [ "$n" -eq 2 ] && ok "protection $side: the 2 Terminates decoded" || notok "protection $side: $n Terminates"
        done
    fi
done

# IPv6 and large messages: softdat-perf over ::1 (softdat-lo6), 100 KiB
# Sends and Writes (two FPDUs each, 32 KiB pcap segments): IPv6 headers,
# the same counts.
perf=$BUILD/bin/softdat-perf
if [ -x "$perf" ] && ip -6 addr show dev lo 2>/dev/null | grep -q '::1'; then
    port=$((20000 + RANDOM % 12000))
    SOFTDAT_PCAP=$tmp/v6.server.pcapng SOFTDAT_TRACE=$tmp/v6.server.jsonl timeout 60 "$perf" -s -P softdat-lo6 \
        -p "$port" --idle 30 >"$tmp/v6.server.log" 2>&1 &
    spid=$!
    sleep 0.5
    SOFTDAT_PCAP=$tmp/v6.client.pcapng SOFTDAT_TRACE=$tmp/v6.client.jsonl timeout 60 "$perf" -c ::1 -P softdat-lo6 \
        -p "$port" -m 64,100K -n 50 -t 0.2 -r 1 send_lat write_bw >"$tmp/v6.client.log" 2>&1
    prc=$?
    wait "$spid"
    if [ $prc -ne 0 ]; then
        notok "softdat-perf over ::1 with SOFTDAT_PCAP: exit $prc"; tail -3 "$tmp/v6.client.log" | sed 's/^/  # /'
    else
        for side in server client; do
            grep -q '"flow":"\[::1\]' "$tmp/v6.$side.jsonl" || notok "IPv6 $side: frame flows are not [::1]"
            pcap_judge "IPv6, 100 KiB messages, $side" "$tmp/v6.$side.pcapng" "$tmp/v6.$side.jsonl" off
        done
    fi
else
    echo "skip - no softdat-perf or no ::1 on lo: the IPv6 capture is not checked"
fi

# UD: dat_ud_peer (every size 0 .. 32 KiB, a burst) writes its datagrams
# as UDP packets; decoded as RoCEv2 (docs/wire.md §7.4), every one is
# BTH + DETH, as many as the trace's datagram records that name a peer.
peer=$BUILD/test/helpers/dat_ud_peer
if [ -x "$peer" ]; then
    port=$((20000 + RANDOM % 12000))
    SOFTDAT_PCAP=$tmp/ud.server.pcapng SOFTDAT_TRACE=$tmp/ud.server.jsonl timeout 60 "$peer" server softdat-lo "$port" \
        >"$tmp/ud.server.log" 2>&1 &
    spid=$!
    for _ in $(seq 1 100); do grep -q listening "$tmp/ud.server.log" && break; sleep 0.1; done
    SOFTDAT_PCAP=$tmp/ud.client.pcapng SOFTDAT_TRACE=$tmp/ud.client.jsonl timeout 60 "$peer" client softdat-lo \
        127.0.0.1 "$port" >"$tmp/ud.client.log" 2>&1
    crc=$?
    wait "$spid"
    src=$?
    if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
        notok "dat_ud_peer with SOFTDAT_PCAP: client $crc, server $src"; tail -3 "$tmp/ud.client.log" | sed 's/^/  # /'
    else
        for side in server client; do
            cap=$tmp/ud.$side.pcapng
            D=("${R[@]}")
            for p in $(tshark -r "$cap" -Y udp -T fields -e udp.srcport -e udp.dstport 2>/dev/null | tr '\t' '\n' | sort -un); do
                D+=(-d "udp.port==$p,infiniband")
            done
            D+=(--disable-heuristic mellanox_eoib)
            bad=$(tshark -r "$cap" "${D[@]}" -Y '_ws.malformed || _ws.expert.severity == error' 2>/dev/null | wc -l)
            udp=$(tshark -r "$cap" "${D[@]}" -Y udp 2>/dev/null | wc -l)
            ib=$(tshark -r "$cap" "${D[@]}" -Y 'infiniband.bth && infiniband.deth' 2>/dev/null | wc -l)
            recs=$(grep -c '"kind":"datagram".*"flow"' "$tmp/ud.$side.jsonl")
            if [ "$bad" -eq 0 ] && [ "$udp" -gt 0 ] && [ "$ib" -eq "$udp" ] && [ "$udp" -eq "$recs" ]; then
                ok "UD $side: $udp UDP datagrams decode as BTH + DETH = the trace's datagram records, 0 malformed"
            else
                notok "UD $side: malformed $bad, UDP $udp, BTH+DETH $ib, datagram records $recs"
            fi
        done
    fi
fi

# The cap: 2 KiB holds the headers and a few packets, then stops (the
# file stays a valid pcapng).
port=$((20000 + RANDOM % 12000))
SOFTDAT_PCAP=$tmp/cap.server.pcapng SOFTDAT_PCAP_MAX=2K timeout 60 "$BUILD/examples/rdma_write" server "$port" \
    >/dev/null 2>"$tmp/cap.err" &
spid=$!
SOFTDAT_PCAP=$tmp/cap.client.pcapng timeout 60 "$BUILD/examples/rdma_write" client "$port" 127.0.0.1 >/dev/null 2>&1
wait "$spid"
size=$(stat -c %s "$tmp/cap.server.pcapng" 2>/dev/null || echo 0)
if [ "$size" -gt 0 ] && [ "$size" -le 2048 ] && grep -q 'SOFTDAT_PCAP_MAX' "$tmp/cap.err" &&
    tshark -r "$tmp/cap.server.pcapng" >/dev/null 2>&1; then
    ok "SOFTDAT_PCAP_MAX=2K: $size bytes, capture stopped with a message, file still reads"
else
    notok "SOFTDAT_PCAP_MAX=2K: size $size"; sed 's/^/  # /' "$tmp/cap.err"
fi
exit $fail
