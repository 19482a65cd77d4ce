#!/usr/bin/env python3
"""The body of scripts/bench (see there): runs the rounds, prints the table.

Every figure is a median over the rounds (min-max beside it). A ratio is
softdat's figure over raw TCP's measured by softdat-perf in the same run
(latency: > 1 is slower; bandwidth: < 1 is slower); the other transports
get the same ratio against the median raw-TCP baseline of all rounds, so
each row reads "how far from TCP itself"."""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

PORT = [21000]


def next_port():
    PORT[0] += 7
    return PORT[0]


class Server:
    """A server process started by us, stopped by its PID."""

    def __init__(self, argv, env=None, wait_s=0.4):
        self.p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(wait_s)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def run(argv, env=None, timeout=120, stdout_only=False):
    try:
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        return r.stdout if stdout_only else r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        # Said, so that a missing figure is not mistaken for a tool that
        # is not installed (subprocess.run has killed it).
        print("bench: %s did not finish in %d s: stopped, its figures left out" % (" ".join(argv), timeout),
              file=sys.stderr)
        return ""


def have(tool):
    return shutil.which(tool) is not None


def perf_session(top, server_args, client_args, timeout):
    """One softdat-perf server (started and stopped here) and one client
    run against it with --json; its results, or None (said on stderr)."""
    env = dict(os.environ, DAT_OVERRIDE=os.path.join(top, "build/dat.conf"))
    perf = os.path.join(top, "build/bin/softdat-perf")
    port = next_port()
    srv = Server([perf, "-s", "-p", str(port), "--idle", "120"] + server_args, env)
    try:
        out = run([perf, "-c", "127.0.0.1", "-p", str(port), "--json"] + client_args, env, timeout=timeout,
                  stdout_only=True)
    finally:
        srv.stop()
    try:
        return json.loads(out[out.index("{"):])["results"]
    except ValueError:
        print("bench: softdat-perf %s gave no JSON:" % " ".join(client_args), out[-300:], file=sys.stderr)
        return None


def softdat(top, polled, sizes, record):
    results = perf_session(top, ["--persist"], ["--compare", "-m", sizes] + (["-W"] if polled else []) + ["all"],
                           600)
    if results is None:
        return
    mode = "polled" if polled else "blocking"
    for r in results:
        if r.get("error"):
            continue
        key = (r["test"], r["size"])
        lat = r["lat_median_us"] is not None
        val = r["lat_median_us"] if lat else r["gbps"]
        raw = r["raw"]["lat_median_us"] if lat else r["raw"]["gbps"]
        record("softdat %s" % mode, key, val, raw, "us" if lat else "GB/s")
        if r["test"] in ("send_lat", "send_bw") and not polled:
            record("raw TCP (softdat-perf baseline)", ("tcp_" + ("lat" if lat else "bw"), r["size"]), raw,
                   raw, "us" if lat else "GB/s")


def crc(top, rnd, record):
    """MPA CRC32c on against off: softdat-perf's blocking bandwidth at
    64 KiB and 1 MiB, once with CRC on at both ends, once off; the ratio
    column is CRC on over CRC off of the same round. The order alternates
    between rounds."""
    got = {}
    for mode in (("on", "off") if rnd % 2 == 0 else ("off", "on")):
        results = perf_session(top, ["--crc", mode], ["--crc", mode, "-m", "64K,1M", "bw"], 300)
        if results is None:
            return
        got[mode] = {(r["test"], r["size"]): r["gbps"] for r in results if not r.get("error")}
    for key, on in got["on"].items():
        off = got["off"].get(key)
        if off:
            record("softdat blocking, CRC32c on (ratio: / off)", key, on, off, "GB/s")


def fabric(sizes, record):
    env = dict(os.environ, FI_TCP_IFACE="lo", FI_SOCKETS_IFACE="lo", FI_NET_IFACE="lo")
    for size in sizes:
        port = next_port()
        iters = "10000" if size <= 4096 else "1000"
        srv = Server(["fi_pingpong", "-p", "tcp", "-e", "msg", "-B", str(port), "-I", iters, "-S", str(size)], env)
        try:
            out = run(["fi_pingpong", "-p", "tcp", "-e", "msg", "-P", str(port), "-I", iters, "-S", str(size),
                       "127.0.0.1"], env)
        finally:
            srv.stop()
        # one row: bytes (64, 4k, 1m) #sent #ack total time MB/sec usec/xfer Mxfers/sec
        m = re.search(r"^\s*\d+[kmg]?\s+\S+\s+\S+\s+\S+\s+\S+\s+([\d.]+)\s+([\d.]+)", out, re.M)
        if m:
            record("libfabric tcp (fi_pingpong, busy-poll)", ("pingpong_lat", size), float(m.group(2)), None, "us")
            if size >= 65536:
                record("libfabric tcp (fi_pingpong, busy-poll)", ("pingpong_bw", size), float(m.group(1)) / 1000,
                       None, "GB/s")


def ucx(record):
    env = dict(os.environ, UCX_TLS="tcp", UCX_NET_DEVICES="lo")
    for test, size, unit in (("tag_lat", 64, "us"), ("tag_lat", 4096, "us"), ("tag_bw", 1048576, "GB/s")):
        port = next_port()
        srv = Server(["ucx_perftest", "-p", str(port)], env)
        try:
            n = "20000" if test == "tag_lat" else "2000"
            out = run(["ucx_perftest", "127.0.0.1", "-p", str(port), "-t", test, "-s", str(size), "-n", n], env)
        finally:
            srv.stop()
        m = re.search(r"^Final:\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", out, re.M)
        if not m:
            continue
        if unit == "us":
            record("UCX tcp (ucx_perftest %s)" % test, (test, size), float(m.group(1)), None, unit)
        else:
            record("UCX tcp (ucx_perftest %s)" % test, (test, size), float(m.group(4)) * 1.048576 / 1000, None, unit)


def sockperf(record):
    for busy in (False, True):
        port = next_port()
        srv = Server(["sockperf", "sr", "--tcp", "-i", "127.0.0.1", "-p", str(port)])
        try:
            argv = ["sockperf", "pp", "--tcp", "-i", "127.0.0.1", "-p", str(port), "-m", "64", "-t", "3"]
            if busy:
                argv.append("--nonblocked")
            out = run(argv)
        finally:
            srv.stop()
        m = re.search(r"percentile 50\.000 =\s+([\d.]+)", out)
        if m:
            name = "sockperf ping-pong, %s" % ("busy-poll" if busy else "blocking")
            record(name, ("pingpong_lat_p50", 64), float(m.group(1)), None, "us")


def iperf(record):
    port = next_port()
    srv = Server(["iperf3", "-s", "-p", str(port), "-1"])
    try:
        out = run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "3", "-l", "1M", "-J"])
    finally:
        srv.stop()
    try:
        d = json.loads(out)
        record("iperf3 (1 MiB writes)", ("stream_bw", 1048576), d["end"]["sum_received"]["bits_per_second"] / 8e9,
               None, "GB/s")
    except (ValueError, KeyError):
        pass


CONNS = 500


def connect_rate(top, record):
    """Connection setup: Debian's dtestcm over softdat (N connects in one
    burst, timed until all are established) beside softdat-perf's raw-TCP
    connect/accept burst of the same N, measured the same way."""
    env = dict(os.environ, DAT_OVERRIDE=os.path.join(top, "build/dat.conf"))
    env.pop("LD_LIBRARY_PATH", None)
    perf = os.path.join(top, "build/bin/softdat-perf")
    raw = run([perf, "--connect-rate", str(CONNS), "--json"], stdout_only=True)
    try:
        raw_cps = json.loads(raw)["cps"]
    except (ValueError, KeyError):
        return
    srv = Server(["timeout", "60", "dtestcm", "-s", "-P", "softdat-lo", "-c", str(CONNS)], env=env, wait_s=1.0)
    try:
        out = run(["timeout", "60", "dtestcm", "-P", "softdat-lo", "-h", "127.0.0.1", "-c", str(CONNS)], env=env)
    finally:
        srv.stop()
    # The same burst with the descriptor table grown beforehand, as a
    # softdat IA does at dat_ia_open: without it the raw burst waits for
    # RCU grace periods as its table doubles (docs/perf.md, §10).
    rawp = run([perf, "--connect-rate", str(CONNS), "--presize-fds", "--json"], stdout_only=True)
    try:
        rawp_cps = json.loads(rawp)["cps"]
    except (ValueError, KeyError):
        rawp_cps = None
    m = re.search(r"Connections:\s+[\d.]+\s+usec,\s+CPS\s+([\d.]+)", out)
    if m:
        record("dtestcm over softdat (burst of %d)" % CONNS, ("conn_rate", CONNS), float(m.group(1)), raw_cps,
               "conn/s")
        if rawp_cps:
            record("  ratio against the presized raw burst", ("conn_rate", CONNS), float(m.group(1)), rawp_cps,
                   "conn/s")
    record("raw TCP connect/accept (softdat-perf)", ("conn_rate", CONNS), raw_cps, None, "conn/s")
    if rawp_cps:
        record("raw TCP, descriptor table presized", ("conn_rate", CONNS), rawp_cps, None, "conn/s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one round, softdat-perf sizes 64 and 4K only")
    ap.add_argument("--json", help="also write every sample to this file")
    a = ap.parse_args()
    rounds = 1 if a.quick else a.rounds
    sizes = "64,4K" if a.quick else "64,4K,1M"
    samples = {}  # (name, key) -> {"unit", "vals": [], "raws": []}
    order = []

    def record(name, key, val, raw, unit):
        k = (name, key)
        if k not in samples:
            samples[k] = {"unit": unit, "vals": [], "raws": []}
            order.append(k)
        samples[k]["vals"].append(val)
        if raw is not None:
            samples[k]["raws"].append(raw)

    missing = [t for t in ("fi_pingpong", "ucx_perftest", "sockperf", "iperf3") if not have(t)]
    if missing:
        print("bench: not installed (skipped): %s — scripts/install-deps --bench" % " ".join(missing))
    if not os.path.exists(os.path.join(a.top, "build/bin/softdat-perf")):
        sys.exit("bench: build/bin/softdat-perf missing: run make first")
    load = os.getloadavg()[0]
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    for r in range(rounds):
        print("bench: round %d of %d (load average %.2f)" % (r + 1, rounds, os.getloadavg()[0]), flush=True)
        softdat(a.top, False, sizes, record)
        softdat(a.top, True, sizes, record)
        if not a.quick:
            crc(a.top, r, record)
        if have("fi_pingpong"):
            fabric([64, 4096] if a.quick else [64, 4096, 1048576], record)
        if have("ucx_perftest"):
            ucx(record)
        if have("sockperf"):
            sockperf(record)
        if have("iperf3"):
            iperf(record)
        if have("dtestcm"):
            connect_rate(a.top, record)
    base = {}
    for (name, key), s in samples.items():
        if name.startswith("raw TCP"):
            base[key] = statistics.median(s["vals"])
    print()
    print("softdat bench, %s, %d round(s), %d CPUs, load average at start %.2f" % (started, rounds, os.cpu_count(),
                                                                                  load))
    print("%-42s %-22s %10s %21s %8s" % ("transport", "figure", "median", "min-max", "ratio"))
    for name, key in order:
        s = samples[(name, key)]
        v = s["vals"]
        med = statistics.median(v)
        if s["raws"]:
            ratio = statistics.median([x / y for x, y in zip(v, s["raws"]) if y])
        else:
            lat = s["unit"] == "us"
            b = base.get(("tcp_lat" if lat else "tcp_bw", key[1]))
            ratio = med / b if b else None
            if key[0] == "conn_rate":
                ratio = 1.0
        fig = "%s %s" % (key[0], size_name(key[1]))
        print("%-42s %-22s %8.3f %-2s %9.3f-%-9.3f %8s" % (name, fig, med, s["unit"][:4], min(v), max(v),
                                                           "%.2f" % ratio if ratio is not None else "-"))
    print()
    print("targets (docs/perf.md §10), from the medians above:")
    for ln in targets(samples):
        print(ln)
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"transport": n, "figure": k[0], "size": k[1], "unit": samples[(n, k)]["unit"],
                        "values": samples[(n, k)]["vals"], "raw": samples[(n, k)]["raws"]} for n, k in order], f,
                      indent=1)


def targets(samples):
    """The performance targets (docs/perf.md §10), each checked against
    this run's medians: one line per target, "met" or "not met", with
    the figures it was decided on. Ratios are medians of per-round ratios
    where a figure has its own baseline, else ratios of medians."""
    def med(name, key):
        s = samples.get((name, key))
        return statistics.median(s["vals"]) if s and s["vals"] else None

    def ratio(name, key):
        s = samples.get((name, key))
        if not s or not s["raws"]:
            return None
        return statistics.median([x / y for x, y in zip(s["vals"], s["raws"]) if y])

    def fmt(x):
        return "-" if x is None else "%.3f" % x

    lines = []

    def line(ok, what, detail):
        verdict = "not measured" if ok is None else ("met" if ok else "NOT MET")
        lines.append("  %-12s %s: %s" % (verdict, what, detail))

    def all_ok(vals, test):
        """False if a measured figure misses, None if one is missing,
        else True."""
        known = [v for v in vals if v is not None]
        if any(not test(v) for v in known):
            return False
        return None if not vals or len(known) < len(vals) else True

    B, P = "softdat blocking", "softdat polled"
    fi = med("libfabric tcp (fi_pingpong, busy-poll)", ("pingpong_lat", 64))
    ucx = med("UCX tcp (ucx_perftest tag_lat)", ("tag_lat", 64))
    for t in ("send_lat", "write_lat"):
        v, r = med(P, (t, 64)), ratio(P, (t, 64))
        vs = [r] + [v / x if v and x else None for x in (fi, ucx)]
        # The raw bound is 1.3, the peers' 1.0: one test on scaled ratios.
        line(all_ok([vs[0] / 1.3 if vs[0] is not None else None] + vs[1:], lambda x: x <= 1.0),
             "polled 64 B %s <= 1.3x raw, <= 1.0x libfabric and UCX" % t,
             "%s us; %s raw, %s libfabric, %s UCX" % (fmt(v), fmt(vs[0]), fmt(vs[1]), fmt(vs[2])))
    for t, bound in (("send_lat", 1.1), ("write_lat", 1.5)):
        r = ratio(B, (t, 64))
        line(all_ok([r], lambda x: x <= bound), "blocking 64 B %s <= %.1fx raw" % (t, bound), fmt(r) + "x")
    pairs = []
    for t in ("send_bw", "write_bw", "read_bw"):
        for size in (64, 4096, 1048576):
            b, p = med(B, (t, size)), med(P, (t, size))
            if b and p:
                pairs.append(("%s %s" % (t, size_name(size)), p / b))
    line(all_ok([x for _, x in pairs], lambda x: x >= 1.0), "polled bandwidth >= blocking at every size",
         ", ".join("%s %.3f" % (n, x) for n, x in pairs if x < 1.0) or ("all >= 1" if pairs else "-"))
    rates = []
    for mode in (B, P):
        for t in ("send_bw", "write_bw", "read_bw"):
            for size in (64, 4096):
                r = ratio(mode, (t, size))
                if r is not None:
                    rates.append((t, r))
    line(all_ok([r / (1.5 if t == "write_bw" else 1.0) for t, r in rates], lambda x: x >= 1.0),
         "message rate 64 B / 4 KiB >= 1.0x raw, writes >= 1.5x",
         "lowest %s" % fmt(min((r for _, r in rates), default=None)))
    big = [ratio(m, (t, 1048576)) for m in (B, P) for t in ("send_bw", "write_bw", "read_bw")]
    line(all_ok(big, lambda x: x >= 1.0), "1 MiB >= 1.0x raw",
         "blocking %s, polled %s (send/write/read)" % ("/".join(fmt(x) for x in big[:3]),
                                                      "/".join(fmt(x) for x in big[3:])))
    rw = []
    for m in (B, P):
        r, w = med(m, ("read_bw", 1048576)), med(m, ("write_bw", 1048576))
        rw.append(r / w if r and w else None)
    line(all_ok(rw, lambda x: x >= 0.95), "1 MiB read >= 0.95x write",
         "blocking %s, polled %s" % (fmt(rw[0]), fmt(rw[1])))
    crcs = [ratio("softdat blocking, CRC32c on (ratio: / off)", (t, size))
            for t in ("send_bw", "write_bw", "read_bw") for size in (65536, 1048576)]
    line(all_ok(crcs, lambda x: x >= 0.85), "CRC32c on >= 0.85x off at 64 KiB and 1 MiB",
         "send %s/%s, write %s/%s, read %s/%s (64 KiB/1 MiB)" % tuple(fmt(x) for x in crcs))
    cm = ratio("dtestcm over softdat (burst of %d)" % CONNS, ("conn_rate", CONNS))
    line(all_ok([cm], lambda x: x >= 0.5), "dtestcm within 2x of the raw burst", fmt(cm) + "x")
    return lines


def size_name(n):
    if n >= 1048576 and n % 1048576 == 0:
        return "%dM" % (n // 1048576)
    if n >= 1024 and n % 1024 == 0:
        return "%dK" % (n // 1024)
    return "%dB" % n


if __name__ == "__main__":
    main()
