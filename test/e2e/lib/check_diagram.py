#!/usr/bin/env python3
"""Check a softdat-trace --html diagram (docs/trace.md §8).

    check_diagram.py HTML MODE [PNG]

The page must hold one well-formed SVG (parsed with xml.etree) whose
elements carry their records (data-i indexes the embedded JSON array), and
what MODE's run implies:
  rdma_write  the Write FPDU (STag, offset) sent by A and received by B,
              B's memory check allowed for that STag, the placement at B,
              A's completion, and no DTO event for the Write at B;
  protection  B's denied checks, B's Terminates, A's Reads completed in
              error and BROKEN connections at A, the connection's end at B;
  any         at least one frame matched across the two sides and one
              allowed memory check.
PNG (a screenshot of the page) must not be blank: a pure-python PNG
decoder counts its non-white pixels, and the green of the allowed check
must be there. Prints ok/not ok lines; exit 1 on failure."""
import json
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

NS = "{http://www.w3.org/2000/svg}"
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
    return cond


def groups(svg, cls=None, **data):
    out = []
    for g in svg.iter(NS + "g"):
        classes = (g.get("class") or "").split()
        if cls and cls not in classes:
            continue
        if all(g.get("data-" + k) == v for k, v in data.items()):
            out.append(g)
    return out


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB/RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                raise ValueError(f"PNG depth {depth} colour type {ctype} not handled")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, bpp, rows


def check_png(path, want_green):
    try:
        w, h, bpp, rows = png_pixels(path)
    except (OSError, ValueError, zlib.error) as e:
        expect(False, f"screenshot {path}: {e}")
        return
    total = w * h
    ink = green = 0
    for line in rows:
        for i in range(0, len(line), bpp):
            r, g, b = line[i], line[i + 1], line[i + 2]
            if r < 245 or g < 245 or b < 245:
                ink += 1
                if g > r + 40 and g > b + 40:
                    green += 1
    if expect(ink > total // 200, f"screenshot {w}x{h}: only {ink} non-white pixels (blank?)"):
        print(f"ok - screenshot {w}x{h}: {ink} non-white pixels ({100.0 * ink / total:.1f}%), {green} green")
    if want_green:
        expect(green > 50, f"screenshot: {green} green pixels, no allowed check drawn?")


def main():
    html_path, mode = sys.argv[1], sys.argv[2]
    png = sys.argv[3] if len(sys.argv) > 3 else None
    page = open(html_path, encoding="utf-8").read()
    expect("<script src" not in page and "<link" not in page and not re.search(r"https?://(?!www\.w3\.org)", page),
           "the page loads something from elsewhere")
    m = re.search(r"<svg\b.*?</svg>", page, re.S)
    if not expect(m is not None, "no <svg> in the page"):
        return report(mode)
    try:
        svg = ET.fromstring(m.group(0))
    except ET.ParseError as e:
        expect(False, f"the SVG is not well-formed XML: {e}")
        return report(mode)
    rm = re.search(r'<script type="application/json" id="recs">(.*?)</script>', page, re.S)
    recs = json.loads(rm.group(1)) if rm else []
    expect(recs, "no embedded records")
    for g in svg.iter(NS + "g"):
        i = g.get("data-i")
        if i is not None:
            expect(0 <= int(i) < len(recs), f"data-i {i} out of range")
            expect(g.find(NS + "title") is not None, "an element without its hover text")
    if mode == "rdma_write":
        wr = groups(svg, "frame", op="rdma_write", dir="tx", side="A", matched="1")
        wr = [g for g in wr if recs[int(g.get("data-i"))].get("payload_len") == 1024]
        if expect(len(wr) == 1, f"{len(wr)} 1 KiB Write FPDUs from A matched at B, want 1"):
            stag, to = wr[0].get("data-stag"), wr[0].get("data-to")
            expect(stag and to and stag != "" and to != "", "Write FPDU without STag/offset")
            label = "".join(wr[0].itertext())
            expect(f"stag={stag} to={to}" in label, f"Write arrow label '{label}' lacks its STag/offset")
            expect(len(groups(svg, "memcheck", side="B", stag=stag, access="write")) == 1 and
                   len(groups(svg, "allowed", side="B", stag=stag)) == 1, "no allowed write check at B for the STag")
            expect(len(groups(svg, "placement", side="B", op="rdma_write", stag=stag)) == 1, "no placement at B")
        expect(len(groups(svg, "event", side="A", type="DTO_COMPLETION", op="rdma_write", status="SUCCESS")) == 1,
               "no successful Write completion at A")
        expect(not groups(svg, "event", side="B", op="rdma_write"), "a Write event at the target B")
        expect(not groups(svg, "post", side="B", op="rdma_write"), "a Write post at B")
    elif mode == "protection":
        expect(len(groups(svg, "denied", side="B")) == 2, "want 2 denied checks at B")
        expect(len(groups(svg, "frame", op="terminate", side="B")) == 2, "want 2 Terminates sent by B")
        expect(len(groups(svg, "event", side="A", op="rdma_read", status="ERR_REMOTE_ACCESS")) == 2,
               "want 2 Reads completed ERR_REMOTE_ACCESS at A")
        expect(len(groups(svg, "event", side="A", type="CONNECTION_BROKEN")) == 2, "want 2 BROKEN at A")
        ends = groups(svg, "event", side="B", type="CONNECTION_BROKEN") + \
            groups(svg, "event", side="B", type="CONNECTION_DISCONNECTED")
        expect(len(ends) == 2, f"{len(ends)} connection ends at B, want 2")
    else:
        expect(groups(svg, "frame", matched="1"), "no frame matched across the sides")
        expect(groups(svg, "allowed"), "no allowed memory check")
    if png:
        check_png(png, mode != "protection")
    return report(mode)


def report(mode):
    if failures:
        for f in failures:
            print(f"not ok - diagram ({mode}): {f}")
        return 1
    print(f"ok - diagram ({mode}): the SVG holds what the run did")
    return 0


if __name__ == "__main__":
    sys.exit(main())
