#!/usr/bin/env python3
"""Check the two traces of one example run (examples/run NAME): both parse
as JSON Lines with the documented common fields, and each example's
records say what its semantics are (docs/tutorial.md).

    check_example_trace.py NAME SERVER.jsonl CLIENT.jsonl
Prints "ok - ..." / "not ok - ..." lines; exit 1 on any failure."""
import json
import sys

COMMON = ("rec", "mono_ns", "t_ns", "pid", "tid")
failures = []


def load(path):
    recs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except ValueError as e:
                failures.append(f"{path}:{n}: not JSON: {e}")
                continue
            for k in COMMON:
                if k not in r:
                    failures.append(f"{path}:{n}: no {k}")
            recs.append(r)
    if not recs or recs[0].get("rec") != "trace" or recs[0].get("what") != "open":
        failures.append(f"{path}: first record is not the trace header")
    return recs


def sel(recs, **want):
    out = []
    for r in recs:
        if all(r.get(k) == v for k, v in want.items()):
            out.append(r)
    return out


def expect(cond, what):
    if not cond:
        failures.append(what)


def expect_n(recs, n, side, **want):
    got = len(sel(recs, **want))
    ok = got == n if isinstance(n, int) else n(got)
    expect(ok, f"{side}: {got} records with {want}")
    return sel(recs, **want)


def dto_ok(recs, **want):
    return sel(recs, rec="event", status="SUCCESS", **want)


def main():
    name, spath, cpath = sys.argv[1:4]
    s, c = load(spath), load(cpath)
    for side, recs in (("server", s), ("client", c)):
        expect_n(recs, 1, side, rec="call", fn="ia_open", rc="DAT_SUCCESS")
        expect_n(recs, 1, side, rec="call", fn="ia_close", rc="DAT_SUCCESS")
        # Everything from one process, and only from it.
        expect(len({r["pid"] for r in recs}) == 1, f"{side}: records from several pids")
    connected = name not in ("reject",)
    if connected:
        for side, recs in (("server", s), ("client", c)):
            est = sel(recs, rec="state", to="CONNECTED")
            expect(est and all(r.get("conn", "").startswith("c") for r in est),
                   f"{side}: no state record to CONNECTED with a connection id")
    # The wire: each side saw one MPA Request and one Reply per connection
    # (sent or received), and every frame one side sent the other received
    # (same flow and stream offset).
    for side, recs in (("server", s), ("client", c)):
        reqs, reps = sel(recs, rec="frame", kind="mpa_req"), sel(recs, rec="frame", kind="mpa_rep")
        # (a connect refused before the server listened and retried is a
        # Request without a Reply)
        expect(reps and len(reqs) >= len(reps), f"{side}: {len(reqs)} MPA Requests, {len(reps)} Replies")
        for r in sel(recs, rec="frame"):
            expect(r.get("ia") == "ia1" and r.get("flow") and "seq" in r, f"{side}: frame without ia/flow/seq: {r}")
    key = lambda r: (r.get("flow"), r.get("seq"), r.get("kind"))
    sent = {key(r) for r in sel(s, rec="frame", dir="tx")} | {key(r) for r in sel(c, rec="frame", dir="tx")}
    got = {key(r) for r in sel(s, rec="frame", dir="rx")} | {key(r) for r in sel(c, rec="frame", dir="rx")}
    expect(sent == got, f"frames sent but not received: {sorted(sent - got)[:3]}, received not sent: "
                        f"{sorted(got - sent)[:3]}")

    if name == "send_recv":
        expect_n(c, 1, "client", rec="post", op="send", len=14, cookie="0x2a", rc="DAT_SUCCESS")
        expect_n(c, 1, "client", rec="event", type="DTO_COMPLETION", op="send", cookie="0x2a", status="SUCCESS")
        expect_n(s, 1, "server", rec="post", op="recv", cookie="0x7", len=4096)
        expect_n(s, 1, "server", rec="event", type="DTO_COMPLETION", op="receive", cookie="0x7", len=14,
                 status="SUCCESS")
    elif name == "rdma_write":
        posts = expect_n(c, 1, "client", rec="post", op="rdma_write", len=1024, rc="DAT_SUCCESS")
        expect_n(c, 1, "client", rec="event", op="rdma_write", status="SUCCESS")
        # The STag the requester names is the one the target's LMR got.
        lmrs = sel(s, rec="call", fn="lmr_create", len=1024)
        expect(posts and lmrs and posts[0].get("rmr_ctx") == lmrs[0].get("rmr_ctx"),
               "client's rmr_ctx is not the server's LMR's")
        expect(lmrs and posts and posts[0].get("remote_addr") == lmrs[0].get("reg_addr"),
               "client's remote_addr is not the server's buffer")
        # One-sided: no event at the target for the write; its only
        # successful receives are the notifying Send and the bye.
        expect_n(s, 0, "server", rec="event", op="rdma_write")
        expect_n(s, 2, "server", rec="event", op="receive", status="SUCCESS")
        # On the wire: the Write FPDU names the target's STag and buffer,
        # the target's memory table allowed it, and the target consumer
        # was not told (above).
        stag = posts[0].get("rmr_ctx") if posts else None
        to = posts[0].get("remote_addr") if posts else None
        expect_n(c, 1, "client", rec="frame", dir="tx", op="rdma_write", stag=stag, to=to, payload_len=1024)
        expect_n(s, 1, "server", rec="frame", dir="rx", op="rdma_write", stag=stag, to=to, payload_len=1024)
        expect_n(s, 1, "server", rec="memcheck", access="write", stag=stag, to=to, len=1024, allowed=True,
                 reason="ok", conn=sel(s, rec="state", to="CONNECTED")[0].get("conn") if s else None)
    elif name == "rdma_read":
        expect_n(c, 1, "client", rec="post", op="rdma_read", len=4096, remote_len=4096, rc="DAT_SUCCESS")
        expect_n(c, 1, "client", rec="event", op="rdma_read", len=4096, status="SUCCESS")
        expect_n(s, 0, "server", rec="event", op="rdma_read")
        expect_n(s, 1, "server", rec="event", op="receive", status="SUCCESS")  # the bye
    elif name == "write_imm":
        expect_n(c, 1, "client", rec="post", op="write_imm", imm="0x1234", len=512, rc="DAT_SUCCESS")
        expect_n(c, 1, "client", rec="event", type="IB_DTO", ext="write_imm", status="SUCCESS")
        expect_n(s, 1, "server", rec="event", type="IB_DTO", ext="write_imm_data", imm="0x1234", len=512,
                 status="SUCCESS", stream="ext")
    elif name == "fetch_add":
        expect_n(c, 3, "client", rec="post", op="fetch_add", add="0x5", rc="DAT_SUCCESS")
        expect_n(c, 3, "client", rec="event", type="IB_DTO", ext="fetch_add", status="SUCCESS")
        expect_n(s, 0, "server", rec="event", type="IB_DTO")
    elif name == "protection":
        expect_n(c, 2, "client", rec="post", op="rdma_read", rc="DAT_SUCCESS")
        expect_n(c, 2, "client", rec="event", op="rdma_read", status="ERR_REMOTE_ACCESS")
        expect_n(c, 2, "client", rec="event", type="CONNECTION_BROKEN")
        ends = [r for r in s if r.get("type") in ("CONNECTION_BROKEN", "CONNECTION_DISCONNECTED")]
        expect(len(ends) == 2, f"server: {len(ends)} connection ends, want 2")
        expect_n(s, 0, "server", rec="event", op="rdma_read")
        # The target refused both Reads (its memory table says why) and
        # said so with a Terminate the requester received.
        expect_n(s, 1, "server", rec="memcheck", access="read", allowed=False, reason="no such stag")
        expect_n(s, 1, "server", rec="memcheck", access="read", allowed=False, reason="out of bounds")
        expect_n(s, 2, "server", rec="frame", dir="tx", op="terminate")
        expect_n(c, 1, "client", rec="frame", dir="rx", op="terminate",
                 term_text="RDMAP remote protection: invalid STag")
        expect_n(c, 1, "client", rec="frame", dir="rx", op="terminate",
                 term_text="RDMAP remote protection: base or bounds violation")
        for side, recs in (("server", s), ("client", c)):
            expect_n(recs, 2, side, rec="state", to="DISCONNECTED")
            expect(len({r.get("conn") for r in sel(recs, rec="state", to="CONNECTED")}) == 2,
                   f"{side}: the two connections do not have two ids")
        # The requester may log the break (a DTO completed in error) unless
        # the target's Terminate broke the connection first: when it does,
        # the log record names the EP and connection, not a pointer.
        for r in sel(c, rec="log", fn="break_conn"):
            expect(r.get("scope", "").startswith("ep") and " c" in r.get("scope", ""),
                   f"client: break logged without an EP/connection scope: {r}")
    elif name == "reject":
        expect_n(s, 1, "server", rec="event", type="CONNECTION_REQUEST")
        expect_n(s, 1, "server", rec="call", fn="cr_reject", rc="DAT_SUCCESS")
        expect_n(c, 1, "client", rec="event", type="CONNECTION_PEER_REJECTED")
        expect_n(c, 0, "client", rec="event", type="CONNECTION_ESTABLISHED")
        expect_n(c, lambda n: n >= 1, "client", rec="state", to="ACTIVE_CONNECTION_PENDING")
    elif name == "srq":
        expect_n(s, 4, "server", rec="post", fn="srq_post_recv", op="recv", rc="DAT_SUCCESS")
        recv = dto_ok(s, op="receive")
        expect(len(recv) == 4, f"server: {len(recv)} receives, want 4")
        expect(len({r.get("ep") for r in recv}) == 2, "server: receives not from two EPs")
        expect_n(s, 2, "server", rec="call", fn="ep_create_with_srq", rc="DAT_SUCCESS")
        expect_n(c, 4, "client", rec="post", op="send", rc="DAT_SUCCESS")
    else:
        failures.append(f"no checks for example {name}")

    if failures:
        for f in failures:
            print(f"not ok - {name} trace: {f}")
        return 1
    print(f"ok - {name} trace: {len(s)} server and {len(c)} client records as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
