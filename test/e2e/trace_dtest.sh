#!/usr/bin/env bash
# Traces of a Debian program: dtest (send/recv, RDMA Write, RDMA Read,
# ping-pong) against softdat on loopback, each side with
# SOFTDAT_TRACE=...-%p.jsonl and SOFTDAT_PCAP=...-%p.pcapng, under our
# libdat2 and under Debian's. Both traces parse as JSON Lines (the records
# dtest's operations imply: posts of rdma_write and rdma_read, their
# successful completions, the connection on both sides, the frames: every
# frame one side sent the other received, 64 KiB messages in several
# FPDUs; the target's memory checks, all allowed), softdat-trace merges
# them into one view and draws them (--html, the SVG checked by
# test/e2e/lib/check_diagram.py), and tshark decodes both captures with as
# many FPDUs as the frame records (test/e2e/lib/pcap_judge.sh).
# dtest uses the fixed side-channel port 15828 (never concurrently with
# another dtest-family test). Exit 0 pass, 77 skip, else fail.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"
il_require_bin dtest python3
# shellcheck source=test/e2e/lib/pcap_judge.sh
. "$here/lib/pcap_judge.sh"
pj_ok() { il_ok "$@"; }
pj_notok() { il_notok "$@"; }
st=$BUILD/bin/softdat-trace
[ -x "$st" ] || { echo "not ok - $st missing (run make first)"; exit 1; }

for reg in $(il_registries); do
    export SOFTDAT_TRACE=$IL_TMP/trace-$reg-%p.jsonl SOFTDAT_PCAP=$IL_TMP/trace-$reg-%p.pcapng
    il_pair "dtest-trace-$reg" "$reg" 90 15828 dtest "-P $IL_IA -s -b 65536 -B 10" \
        "-P $IL_IA -h 127.0.0.1 -b 65536 -B 10"
    unset SOFTDAT_TRACE SOFTDAT_PCAP
    name="dtest traced, $reg libdat2"
    if [ "$IL_SRC" != 0 ] || [ "$IL_CRC" != 0 ]; then
        il_notok "$name: client exit $IL_CRC, server exit $IL_SRC"
        il_show client "$IL_CLOG"; il_show server "$IL_SLOG"
        continue
    fi
    # Which file is which: the server is the side that created a PSP.
    files=("$IL_TMP"/trace-$reg-*.jsonl)
    if [ ${#files[@]} -ne 2 ] || [ ! -e "${files[0]}" ]; then
        il_notok "$name: ${#files[@]} trace files, want 2"; continue
    fi
    if grep -q '"fn":"psp_create"' "${files[0]}"; then srv=${files[0]} cli=${files[1]}; else srv=${files[1]} cli=${files[0]}; fi
    if out=$(python3 - "$srv" "$cli" 2>&1 <<'PY'
import json, sys
def load(p):
    recs = [json.loads(l) for l in open(p, encoding="utf-8")]
    assert recs[0]["rec"] == "trace" and recs[0]["what"] == "open", p + ": no header"
    for r in recs:
        for k in ("rec", "mono_ns", "t_ns", "pid", "tid"):
            assert k in r, f"{p}: record without {k}: {r}"
    return recs
s, c = load(sys.argv[1]), load(sys.argv[2])
def n(recs, **w):
    return sum(all(r.get(k) == v for k, v in w.items()) for r in recs)
for side, recs in (("server", s), ("client", c)):
    assert n(recs, rec="state", to="CONNECTED") >= 1, side + ": never CONNECTED"
    assert n(recs, rec="call", fn="ia_open", rc="DAT_SUCCESS") == 1, side + ": ia_open"
# dtest's client writes and reads the server's buffers; the server's
# program sees no event for them.
both = s + c
assert n(both, rec="post", op="rdma_write", rc="DAT_SUCCESS") >= 1, "no rdma_write post"
assert n(both, rec="post", op="rdma_read", rc="DAT_SUCCESS") >= 1, "no rdma_read post"
assert n(both, rec="event", op="rdma_write", status="SUCCESS") >= 1, "no rdma_write completion"
assert n(both, rec="event", op="rdma_read", status="SUCCESS") >= 1, "no rdma_read completion"
assert n(s, rec="call", fn="cr_accept", rc="DAT_SUCCESS") >= 1, "server never accepted"
# The wire: the frames one side sent are the frames the other received.
key = lambda r: (r.get("flow"), r.get("seq"), r.get("kind"))
sent = {key(r) for r in both if r["rec"] == "frame" and r["dir"] == "tx"}
got = {key(r) for r in both if r["rec"] == "frame" and r["dir"] == "rx"}
assert sent and sent == got, f"frames sent {len(sent)}, received {len(got)}, differ: {sorted(sent ^ got)[:3]}"
assert n(both, rec="frame", kind="mpa_req") == 2 and n(both, rec="frame", kind="mpa_rep") == 2, "MPA handshake"
# 64 KiB Writes and Reads: more than one FPDU each (65520 bytes a segment).
assert n(both, rec="frame", op="rdma_write", last=False) >= 1, "no multi-FPDU Write"
checks = [r for r in both if r["rec"] == "memcheck"]
assert any(r["access"] == "write" for r in checks) and any(r["access"] == "read" for r in checks), "memchecks"
assert all(r["allowed"] for r in checks), "a denied memory check: " + str([r for r in checks if not r["allowed"]][:1])
print(f"{len(s)} server and {len(c)} client records, {len(sent)} frames each way matched, {len(checks)} checks")
PY
    ); then
        il_ok "$name: traces parse, $out"
    else
        il_notok "$name: traces:"; echo "$out" | sed 's/^/  # /' | tail -n 10
        continue
    fi
    if "$st" "$srv" "$cli" >"$IL_TMP/view-$reg" 2>"$IL_TMP/view-$reg.err" &&
        grep -q 'POST rdma_write' "$IL_TMP/view-$reg" && grep -q 'EVENT DTO_COMPLETION rdma_read SUCCESS' "$IL_TMP/view-$reg"; then
        il_ok "$name: softdat-trace merges them ($(cat "$IL_TMP/view-$reg.err" | sed 's/^softdat-trace: //'))"
    else
        il_notok "$name: softdat-trace view"; il_show view "$IL_TMP/view-$reg"; il_show err "$IL_TMP/view-$reg.err"
    fi
    if "$st" --html "$IL_TMP/dtest-$reg.html" "$cli" "$srv" 2>"$IL_TMP/html-$reg.err" &&
        out=$(python3 "$here/lib/check_diagram.py" "$IL_TMP/dtest-$reg.html" any 2>&1); then
        il_ok "$name: softdat-trace --html draws them ($(grep -c 'class="frame"' "$IL_TMP/dtest-$reg.html") frame arrows)"
    else
        il_notok "$name: diagram"; il_show err "$IL_TMP/html-$reg.err"; echo "${out:-}" | sed 's/^/  # /'
    fi
    if command -v tshark >/dev/null; then
        for side in srv cli; do
            f=${!side}
            pcap_judge "$name: $side capture" "${f%.jsonl}.pcapng" "$f" off
        done
    else
        echo "skip - no tshark: $name captures not decoded"
    fi
done
il_finish
