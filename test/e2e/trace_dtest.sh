#!/usr/bin/env bash
# Traces of a Debian program: dtest (send/recv, RDMA Write, RDMA Read,
# ping-pong) against softdat on loopback, each side with
# SOFTDAT_TRACE=...-%p.jsonl, under our libdat2 and under Debian's. Both
# traces parse as JSON Lines (the records dtest's operations imply: posts
# of rdma_write and rdma_read, their successful completions, the
# connection on both sides) and softdat-trace merges them into one view.
# dtest uses the fixed side-channel port 15828 (never concurrently with
# another dtest-family test). Exit 0 pass, 77 skip, else fail.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"
il_require_bin dtest python3
st=$BUILD/bin/softdat-trace
[ -x "$st" ] || { echo "not ok - $st missing (run make first)"; exit 1; }

for reg in $(il_registries); do
    export SOFTDAT_TRACE=$IL_TMP/trace-$reg-%p.jsonl
    il_pair "dtest-trace-$reg" "$reg" 90 15828 dtest "-P $IL_IA -s -b 65536 -B 10" \
        "-P $IL_IA -h 127.0.0.1 -b 65536 -B 10"
    unset SOFTDAT_TRACE
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
print(f"{len(s)} server and {len(c)} client records")
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
done
il_finish
