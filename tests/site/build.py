"""Builds the browser-test site (tests/site/public) into a docroot, adding what is not committed.

Committed in tests/site/public: HTML, CSS, JS modules, JSON, an SVG, and a PNG and a WebP that
`python3 tests/site/build.py --images` made with nothing but zlib and struct.
Made at build time, never committed:
  - fonts/site.woff: a WOFF 1.0 wrapped here (zlib) around DejaVu Serif Bold from Debian's
    fonts-dejavu-core, because a valid font cannot be written from scratch and a font file is
    not ours to commit. The browser test installs that package when the TTF is missing.
  - app.css.gz (gzip) and app.css.br (brotli, when the `brotli` module is importable): the
    precompressed siblings of app.css that ringhttpd should serve with Content-Encoding.

    python3 tests/site/build.py DEST      # build a docroot in DEST (then: ringhttpd DEST)
    python3 tests/site/build.py --images  # regenerate public/img/gradient.png and pattern.webp
"""
import gzip
import shutil
import struct
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
PUBLIC = HERE / "public"
FONT_CANDIDATES = [
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSerif-Bold.ttf"),
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"),
]
FONT_PACKAGE = "fonts-dejavu-core"
PRECOMPRESSED = ["app.css"]


def find_font():
    """The TTF the site's web font is made from, or None when fonts-dejavu-core is missing."""
    return next((p for p in FONT_CANDIDATES if p.is_file()), None)


def ttf_to_woff(ttf: bytes) -> bytes:
    """Wraps an sfnt (TrueType/OpenType) font in WOFF 1.0: each table zlib-compressed."""
    flavor, num_tables = struct.unpack_from(">IH", ttf, 0)
    tables = []
    for i in range(num_tables):
        tag, checksum, offset, length = struct.unpack_from(">4sIII", ttf, 12 + 16 * i)
        tables.append((tag, checksum, ttf[offset:offset + length]))
    tables.sort(key=lambda t: t[0])

    def pad4(n):
        return (n + 3) & ~3
    total_sfnt = 12 + 16 * num_tables + sum(pad4(len(t[2])) for t in tables)
    directory, blobs = [], []
    offset = 44 + 20 * num_tables
    for tag, checksum, data in tables:
        packed = zlib.compress(data, 9)
        if len(packed) >= len(data):  # the spec: store a table as is when zlib does not help
            packed = data
        directory.append(struct.pack(">4sIIII", tag, offset, len(packed), len(data), checksum))
        blobs.append(packed + b"\0" * (pad4(len(packed)) - len(packed)))
        offset += pad4(len(packed))
    header = struct.pack(">4sIIHHIHHIIIII", b"wOFF", flavor, offset, num_tables, 0, total_sfnt,
                         1, 0, 0, 0, 0, 0, 0)
    return header + b"".join(directory) + b"".join(blobs)


def png(width, height, pixel) -> bytes:
    """An 8-bit RGB PNG; pixel(x, y) returns (r, g, b)."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    rows = [bytes(c for x in range(width) for c in pixel(x, y)) for y in range(height)]
    # Filter "Up" (2) on every row after the first: a vertical gradient becomes runs zlib loves.
    raw = b"\0" + rows[0] + b"".join(
        b"\2" + bytes((a - b) & 0xFF for a, b in zip(row, above))
        for above, row in zip(rows, rows[1:]))
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b""))


class _Bits:
    """An LSB-first bit writer, as VP8L reads its stream."""
    def __init__(self):
        self.value, self.count = 0, 0

    def put(self, value, nbits):
        assert 0 <= value < (1 << nbits)
        self.value |= value << self.count
        self.count += nbits

    def bytes(self):
        return self.value.to_bytes((self.count + 7) // 8, "little")


def webp_stripes(width, height, stripe, colour_a, colour_b) -> bytes:
    """A lossless WebP (VP8L) of diagonal stripes in two colours that differ only in green.

    The smallest encoder that is still a real one: no transform, no colour cache, one prefix-code
    group; red, blue, alpha and distance are single-symbol "simple" codes (zero bits a pixel) and
    green a two-symbol simple code, so every pixel is one bit: which of the two greens it is.
    """
    (r, ga, b), (r2, gb, b2) = colour_a, colour_b
    assert (r, b) == (r2, b2) and ga < gb, "the two colours may differ only in green, a < b"
    bits = _Bits()
    bits.put(0x2F, 8)                      # VP8L signature
    bits.put(width - 1, 14)
    bits.put(height - 1, 14)
    bits.put(0, 1)                         # alpha is not used
    bits.put(0, 3)                         # version 0
    bits.put(0, 1)                         # no transform
    bits.put(0, 1)                         # no colour cache
    bits.put(0, 1)                         # no meta prefix codes

    def simple_code(*symbols):
        bits.put(1, 1)                     # simple code
        bits.put(len(symbols) - 1, 1)
        bits.put(1, 1)                     # first symbol takes 8 bits
        for s in symbols:
            bits.put(s, 8)
    simple_code(ga, gb)                    # green (canonical: the smaller symbol is code 0)
    simple_code(r)                         # red
    simple_code(b)                         # blue
    simple_code(255)                       # alpha
    simple_code(0)                         # distance (never used)
    for y in range(height):
        for x in range(width):
            bits.put(((x + y) // stripe) % 2, 1)
    stream = bits.bytes()
    chunk = b"VP8L" + struct.pack("<I", len(stream)) + stream + (b"\0" if len(stream) % 2 else b"")
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def make_images(img_dir: Path):
    img_dir.mkdir(parents=True, exist_ok=True)
    (img_dir / "gradient.png").write_bytes(
        png(96, 96, lambda x, y: (40 + 2 * x, 60 + y, 200 - x)))
    (img_dir / "pattern.webp").write_bytes(
        webp_stripes(96, 96, 12, (230, 90, 40), (230, 170, 40)))


def build(dest: Path, font: Path = None) -> dict:
    """Copies public/ into dest and adds the generated files; returns what it made."""
    dest = Path(dest)
    shutil.copytree(PUBLIC, dest, dirs_exist_ok=True)
    made = {"font": None, "encodings": {}}
    font = font or find_font()
    if font is not None:
        (dest / "fonts").mkdir(exist_ok=True)
        (dest / "fonts" / "site.woff").write_bytes(ttf_to_woff(font.read_bytes()))
        made["font"] = dest / "fonts" / "site.woff"
    try:
        import brotli
    except ImportError:
        brotli = None
    for name in PRECOMPRESSED:
        data = (dest / name).read_bytes()
        # mtime=0: the same bytes on every build, so their ETag only moves with the content.
        (dest / f"{name}.gz").write_bytes(gzip.compress(data, 9, mtime=0))
        made["encodings"].setdefault(name, []).append("gzip")
        if brotli is not None:
            (dest / f"{name}.br").write_bytes(brotli.compress(data))
            made["encodings"][name].append("br")
    return made


if __name__ == "__main__":
    if sys.argv[1:] == ["--images"]:
        make_images(PUBLIC / "img")
    elif len(sys.argv) == 2 and not sys.argv[1].startswith("-"):
        result = build(Path(sys.argv[1]))
        if result["font"] is None:
            print(f"build: no DejaVu font (apt-get install {FONT_PACKAGE}); the web font will 404",
                  file=sys.stderr)
        print(result)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
