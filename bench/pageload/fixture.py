"""The page the page-load bench loads (issue 42): generated, the same bytes on every run.

One HTML page of 57 files, about 3 MB, shaped like a real landing page: three stylesheets
(preloaded), ten scripts of 10-200 KB (two blocking in <head>, four `defer`, two `async`, two
blocking at the end of <body>), three fonts (preloaded), and 40 PNG images of 10-90 KB. Every
byte that could be compressed is pseudo-random (in comments and pixels), so a server that
compresses on the fly and one that does not send the same amount. Each script records when it
ran (window.__ran[name] = performance.now()), which gives "last script done".

Used as: python3 fixture.py DIR   (writes DIR/index.html and DIR/a/...)
"""

import base64
import os
import random
import struct
import sys
import zlib

SCRIPTS = [  # (name, KiB, how it is loaded)
    ("s01", 60, "head"), ("s02", 120, "head"),
    ("s03", 200, "defer"), ("s04", 30, "defer"), ("s05", 80, "defer"), ("s06", 10, "defer"),
    ("s07", 150, "async"), ("s08", 20, "async"),
    ("s09", 100, "tail"), ("s10", 50, "tail"),
]
STYLES = [("c1", 40), ("c2", 25), ("c3", 15)]
FONTS = [("f1", 60), ("f2", 45), ("f3", 30)]
IMAGES = 40


def noise(rng, n):
    """n printable pseudo-random bytes (base64 of random bytes: incompressible past 6/8)."""
    raw = bytes(rng.getrandbits(8) for _ in range(n * 3 // 4 + 3))
    return base64.b64encode(raw)[:n]


def png(rng, width, height):
    """A valid RGB PNG of noise (zlib level 0: its size is what the pixels are)."""
    rows = b"".join(b"\0" + bytes(rng.getrandbits(8) for _ in range(width * 3)) for _ in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows, 0)) + chunk(b"IEND", b""))


def script(rng, name, kib):
    body = b"window.__ran = window.__ran || {}; window.__ran['%s'] = performance.now();\n" % name.encode()
    pad = kib * 1024 - len(body) - 6
    return body + b"/*" + noise(rng, pad) + b"*/\n"


def style(rng, name, kib):
    body = (b"body{margin:0;font-family:f1,sans-serif}.%s{display:block;padding:1px}"
            b"img{width:160px;height:120px}\n" % name.encode())
    return body + b"/*" + noise(rng, kib * 1024 - len(body) - 5) + b"*/\n"


def build(root):
    rng = random.Random(42)
    os.makedirs(os.path.join(root, "a"), exist_ok=True)
    files = {}
    for name, kib in STYLES:
        files["a/%s.css" % name] = style(rng, name, kib)
    for name, kib in FONTS:
        files["a/%s.woff2" % name] = noise(rng, kib * 1024)
    for name, kib, _ in SCRIPTS:
        files["a/%s.js" % name] = script(rng, name, kib)
    sizes = [10 + (i * 37) % 81 for i in range(IMAGES)]  # 10..90 KiB, spread out
    for i, kib in enumerate(sizes):
        side = int((kib * 1024 / 3) ** 0.5)
        files["a/i%02d.png" % i] = png(rng, side, side)
    head = ['<!doctype html><html><head><meta charset="utf-8"><title>pageload</title>']
    for name, _ in STYLES:
        head.append('<link rel="preload" href="/a/%s.css" as="style">' % name)
        head.append('<link rel="stylesheet" href="/a/%s.css">' % name)
    for name, _ in FONTS:
        head.append('<link rel="preload" href="/a/%s.woff2" as="font" type="font/woff2" crossorigin>' % name)
    for name, _, how in SCRIPTS:
        if how == "head":
            head.append('<script src="/a/%s.js"></script>' % name)
        elif how in ("defer", "async"):
            head.append('<script src="/a/%s.js" %s></script>' % (name, how))
    head.append("</head><body>")
    body = []
    for i in range(IMAGES):
        body.append('<p class="c1">%s</p><img src="/a/i%02d.png" alt="">' % (noise(rng, 200).decode(), i))
    for name, _, how in SCRIPTS:
        if how == "tail":
            body.append('<script src="/a/%s.js"></script>' % name)
    body.append("</body></html>\n")
    files["index.html"] = "\n".join(head + body).encode()
    for rel, data in files.items():
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    return files


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: fixture.py DIR")
    made = build(sys.argv[1])
    print("%d files, %d bytes" % (len(made), sum(len(v) for v in made.values())))
