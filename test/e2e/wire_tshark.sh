#!/usr/bin/env bash
# Wire-format conformance judged by an independent decoder: capture the
# synthetic iWARP connections of test/helpers/wire_emit on loopback with
# tshark and require that every MPA frame and FPDU decodes, with no
# malformed frames or expert errors, every CRC good, and every opcode seen.
# Exit 0 pass, 77 skip (no tshark / no capture permission), else fail.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$top/build}
emit=$BUILD/test/helpers/wire_emit

command -v tshark >/dev/null 2>&1 || { echo "skip wire_tshark: tshark not installed"; exit 77; }
[ -x "$emit" ] || { echo "not ok wire_tshark: $emit not built"; exit 1; }

tmp=$(mktemp -d)
emit_pid= tshark_pid=
cleanup() {
    [ -n "$emit_pid" ] && kill "$emit_pid" 2>/dev/null
    [ -n "$tshark_pid" ] && kill "$tshark_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

fail=0
ok() { echo "ok $1"; }
bad() { echo "not ok $1"; fail=1; }

mkfifo "$tmp/go"
"$emit" "$tmp/port" <"$tmp/go" >"$tmp/emit.out" 2>"$tmp/emit.err" &
emit_pid=$!
exec 3>"$tmp/go"
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port" 2>/dev/null)
[ -n "$port" ] || { echo "not ok wire_tshark: helper gave no port"; exit 1; }

tshark -q -i lo -f "tcp port $port" -w "$tmp/cap.pcapng" -a duration:60 \
    >"$tmp/tshark.out" 2>"$tmp/tshark.err" &
tshark_pid=$!
for _ in $(seq 150); do
    grep -q "Capturing on" "$tmp/tshark.err" 2>/dev/null && break
    kill -0 "$tshark_pid" 2>/dev/null || break
    sleep 0.1
done
if ! grep -q "Capturing on" "$tmp/tshark.err"; then
    echo "skip wire_tshark: cannot capture on lo:"; sed 's/^/  /' "$tmp/tshark.err"
    exit 77
fi
sleep 0.5 # the capture filter is live a moment after the banner

echo go >&3
exec 3>&-
wait "$emit_pid"; rc=$?; emit_pid=
sleep 0.5
kill -INT "$tshark_pid" 2>/dev/null
for _ in $(seq 100); do kill -0 "$tshark_pid" 2>/dev/null || break; sleep 0.1; done
wait "$tshark_pid" 2>/dev/null; tshark_pid=

sed 's/^/  emit: /' "$tmp/emit.err"
[ $rc -eq 0 ] && ok "helper exchanged and self-validated all messages" ||
    { bad "helper exit $rc"; exit 1; }
read -r crc_kv nocrc_kv <"$tmp/emit.out"
n_crc=${crc_kv#fpdus_crc=}; n_nocrc=${nocrc_kv#fpdus_nocrc=}
total=$((n_crc + n_nocrc))
echo "  sent: $n_crc FPDUs with CRC, $n_nocrc without"

R=(-o tcp.try_heuristic_first:TRUE --enable-heuristic iwarp_mpa_tcp
   --disable-heuristic rpcrdma_iwarp --disable-heuristic smb_direct_iwarp)
ts() { tshark -r "$tmp/cap.pcapng" "${R[@]}" "$@" 2>/dev/null; }

n=$(ts -Y 'iwarp_mpa && _ws.malformed' | wc -l)
[ "$n" -eq 0 ] && ok "no malformed MPA frames" || bad "$n malformed MPA frames"
n=$(ts -Y '_ws.malformed || _ws.expert.severity == error' | wc -l)
[ "$n" -eq 0 ] && ok "no malformed frames or expert errors" || bad "$n malformed/error frames"

n=$(ts -Y iwarp_mpa.req | wc -l); m=$(ts -Y iwarp_mpa.rep | wc -l)
[ "$n" -eq 3 ] && [ "$m" -eq 3 ] && ok "3 MPA Requests and 3 Replies decoded" ||
    bad "MPA Requests $n, Replies $m (want 3/3)"

n=$(ts -Y iwarp_mpa.fpdu -T fields -e iwarp_mpa.ulpdulength -E occurrence=a \
       -E aggregator=' ' | wc -w)
[ "$n" -eq "$total" ] && ok "$n FPDUs decoded" || bad "FPDUs decoded $n, sent $total"

verbose=$(ts -O iwarp_mpa)
good=$(grep -c 'Good CRC32' <<<"$verbose"); badc=$(grep -c 'Bad CRC32' <<<"$verbose")
[ "$good" -eq "$n_crc" ] && [ "$badc" -eq 0 ] && ok "$good Good CRC32, 0 bad" ||
    bad "CRC verdicts: good $good (want $n_crc), bad $badc"

ops=$(ts -Y iwarp_mpa.fpdu -T fields -e iwarp_rdma.opcode -E occurrence=a \
         -E aggregator=' ' | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ')
want="0x00 0x01 0x02 0x03 0x04 0x05 0x06 0x07 0x08 0x09 0x0a 0x0b "
[ "$ops" = "$want" ] && ok "opcodes seen: $ops" || bad "opcodes seen '$ops', want '$want'"

# Terminate decoded as DDP / untagged buffer / invalid QN, header copied
terms=$(ts -Y 'iwarp_rdma.opcode == 7' -T fields -e iwarp_rdma.term_layer \
           -e iwarp_rdma.term_etype_ddp -e iwarp_rdma.term_errcode_ddp_untagged \
           -e iwarp_rdma.hdrct_d | sort -u)
case "$terms" in
    *$'\t'*) [ "$(wc -l <<<"$terms")" -eq 1 ] && grep -qE '^0x0*1\s0x0*2\s0x0*1\s(1|True)' <<<"$terms" &&
        ok "Terminate fields: $terms" || bad "Terminate fields: $terms" ;;
    *) bad "no Terminate decoded" ;;
esac

# MSN per (direction, QN) must be 1,2,3,... and L set once per message
seq_err=$(ts -Y 'iwarp_ddp.tagged_flag == 0' -T fields -e tcp.srcport -e tcp.dstport \
             -e iwarp_ddp.qn -e iwarp_ddp.msn -e iwarp_ddp.last_flag -E occurrence=a -E aggregator=, |
    awk -F'\t' '{ n = split($3, q, ","); split($4, m, ","); split($5, l, ",");
                  for (i = 1; i <= n; i++) { k = $1 ">" $2 "/" q[i];
                    if (!(k in want)) want[k] = 1;
                    if (m[i] + 0 != want[k]) { print k, m[i], want[k] > "/dev/stderr"; bad++ }
                    if (l[i] == "1" || l[i] == "True") want[k]++ } }
                END { print bad + 0 }' | tail -1)
[ "$seq_err" -eq 0 ] && ok "untagged MSNs consecutive per direction and queue" ||
    bad "$seq_err MSN sequence errors"

if [ $fail -ne 0 ]; then
    echo "--- capture summary"; ts -Y 'iwarp_mpa || iwarp_ddp_rdmap' | head -60
fi
exit $fail
