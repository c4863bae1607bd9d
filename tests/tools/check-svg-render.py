#!/usr/bin/env python3
"""Renders a gotap flame-graph SVG in headless Chromium and checks that the frames show.

usage: check-svg-render.py SVG [SVG...]

Parsing the SVG alone would pass a file that a browser draws blank (a bad viewBox, a
fill it does not understand, a missing namespace), so the file is rendered the way a
person would open it, and the screenshot is compared with the <rect> frames it declares:
each frame wide enough to sample must show its own fill colour. Exit 0 when every file
passes, 1 (one line saying why) when one does not, 77 (skip) when Chromium is missing.
Python's standard library only: the PNG decoder below handles what Chromium writes.
"""
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

SVG_NS = "{http://www.w3.org/2000/svg}"
# Chromium's new headless mode counts window decorations in --window-size, so the page's
# viewport is ~87 px shorter than the screenshot: give the window room to spare below.
EXTRA_HEIGHT = 200
MIN_WIDTH = 6  # frames narrower than this are mostly edge and stroke; not sampled
TOLERANCE = 12  # per channel: headless Chromium draws flat fills exactly, this is slack
TIMEOUT_S = 90


def fail(msg):
    print(f"check-svg-render: FAIL: {msg}")
    sys.exit(1)


def decode_png(data):
    """Returns (width, height, channels, rows) for an 8-bit RGB/RGBA, non-interlaced PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {ctype}, interlace {interlace}")
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if ftype == 1:  # Sub
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ftype == 2:  # Up
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif ftype == 3:  # Average
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:  # Paeth
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        elif ftype != 0:
            raise ValueError(f"bad filter type {ftype} on row {y}")
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def parse_colour(fill):
    m = re.fullmatch(r"\s*rgb\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)\s*", fill)
    if m:
        return tuple(int(v) for v in m.groups())
    m = re.fullmatch(r"\s*#([0-9a-fA-F]{6})\s*", fill)
    if m:
        return tuple(bytes.fromhex(m.group(1)))
    return None


def frames(root):
    """The <rect>s placed with x, y, width, height and a fill: the flame graph's frames."""
    out = []
    for r in root.iter(SVG_NS + "rect"):
        a = r.attrib
        if not all(k in a for k in ("x", "y", "width", "height", "fill")):
            continue  # the background (width="100%", no x/y) and anything not a frame
        colour = parse_colour(a["fill"])
        if colour is None:
            fail(f"frame at x={a['x']} y={a['y']} has a fill this check cannot read: {a['fill']!r}")
        out.append((float(a["x"]), float(a["y"]), float(a["width"]), float(a["height"]), colour))
    return out


def screenshot(chromium, svg_path, width, height, png_path):
    with tempfile.TemporaryDirectory(prefix="gotap-chromium-") as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--hide-scrollbars", "--force-device-scale-factor=1", f"--user-data-dir={profile}",
               f"--window-size={width},{height}", f"--screenshot={png_path}",
               "file://" + os.path.abspath(svg_path)]
        # Its own session, so that a hang kills the browser and not only Debian's wrapper script.
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            fail(f"chromium did not finish within {TIMEOUT_S}s: {' '.join(cmd)}")
        if p.returncode != 0 or not os.path.exists(png_path):
            tail = out.decode(errors="replace").strip().splitlines()[-5:]
            fail(f"chromium exited {p.returncode} without a screenshot: {' | '.join(tail)}")


def check(chromium, svg_path):
    try:
        root = ET.parse(svg_path).getroot()
    except ET.ParseError as e:
        fail(f"{svg_path} is not well-formed XML: {e}")
    if root.tag != SVG_NS + "svg":
        fail(f"{svg_path}: the root element is {root.tag}, not an SVG <svg>")
    try:
        svg_w, svg_h = (int(float(root.attrib[k]) + 0.999) for k in ("width", "height"))
    except (KeyError, ValueError):
        fail(f"{svg_path}: <svg> has no numeric width and height")
    rects = frames(root)
    if not rects:
        fail(f"{svg_path} has no frames to check")

    with tempfile.TemporaryDirectory(prefix="gotap-svg-") as tmp:
        png = os.path.join(tmp, "shot.png")
        screenshot(chromium, svg_path, svg_w, svg_h + EXTRA_HEIGHT, png)
        with open(png, "rb") as f:
            w, h, bpp, rows = decode_png(f.read())

    def pixel(x, y):
        return tuple(rows[y][x * bpp : x * bpp + 3])

    # Not blank: the drawing's area holds more than one colour, and not all of it is white.
    area = [pixel(x, y) for y in range(0, min(svg_h, h), 2) for x in range(0, min(svg_w, w), 2)]
    if len(set(area)) < 3 or all(p == (255, 255, 255) for p in area):
        fail(f"{svg_path} rendered blank ({len(set(area))} colours in {svg_w}x{svg_h})")

    checked = 0
    for x, y, fw, fh, colour in rects:
        if fw < MIN_WIDTH:
            continue
        # The interior, 2 px in from the edges (anti-aliasing, the white stroke). A label's
        # glyphs cover part of it, so most of the pixels, not all, must be the fill.
        x0, x1 = int(x) + 2, int(x + fw) - 2
        y0, y1 = int(y) + 2, int(y + fh) - 2
        if x1 > w or y1 > h:
            fail(f"frame at x={x} y={y} lies outside the {w}x{h} screenshot")
        px = [pixel(i, j) for j in range(y0, y1) for i in range(x0, x1)]
        near = sum(1 for p in px if max(abs(a - b) for a, b in zip(p, colour)) <= TOLERANCE)
        if near * 2 < len(px):
            cx, cy = int(x + fw / 2), int(y + fh / 2)
            fail(f"{svg_path}: frame at x={x} y={y} w={fw} should be rgb{colour} but the "
                 f"screenshot shows rgb{pixel(cx, cy)} at its centre ({cx},{cy}); "
                 f"{near}/{len(px)} pixels match")
        checked += 1
    if checked == 0:
        fail(f"{svg_path}: no frame is {MIN_WIDTH} px wide or more")
    print(f"check-svg-render: ok: {svg_path}: {checked} of {len(rects)} frames drawn in their colours")


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        sys.exit(2)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("check-svg-render: SKIP: chromium is not installed (apt-get install chromium)")
        sys.exit(77)
    for path in sys.argv[1:]:
        check(chromium, path)


if __name__ == "__main__":
    main()
