#!/usr/bin/env python3
"""Generates the constant tables of HPACK (RFC 7541), its Huffman code, and QPACK (RFC 9204):

    scripts/hpack_tables.py hpack > src/http/h2/hpack_tables.h   (HPACK's static table, hpack.c)
    scripts/hpack_tables.py huff > src/core/huff_tables.h   (the Huffman code, core/huff.c)
    scripts/hpack_tables.py qpack > src/http/h3/qpack_tables.h   (QPACK's static table, qpack.c)
    scripts/hpack_tables.py fieldnames.h > src/core/fieldnames.h   (both tables' names: hpack.c,
    scripts/hpack_tables.py fieldnames.c > src/core/fieldnames.c    qpack.c)

- a static table (RFC 7541 Appendix A, RFC 9204 Appendix A);
- the names of both, one list (issue 37), each with its first index in either table, and one
  hash of them for the lookup by name (one probe, then a compare; the script picks multipliers
  under which no two names collide);
- the Huffman code (RFC 7541 Appendix B, which QPACK shares) for encoding: code and length per
  byte;
- the Huffman decoder: a table indexed by the next HUFF_FAST_BITS bits of the string giving the
  one or two symbols whose codes they begin with (no code is shorter than 5 bits, so two 5- or
  6-bit codes fit in 11 bits) and their lengths; the codes longer than that (rare bytes only:
  every letter, digit and common punctuation is shorter) by the canonical code's first code and
  count per length, with the symbols in code order. The script checks that the code is
  canonical, which the canonical decoding depends on.
The output is committed; rerun the script only to change the tables' layout.
"""
import sys

HUFFMAN = [  # (code, bits) for bytes 0..255 and EOS (256), RFC 7541 Appendix B
    (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28),
    (0xfffffe4, 28), (0xfffffe5, 28), (0xfffffe6, 28), (0xfffffe7, 28),
    (0xfffffe8, 28), (0xffffea, 24), (0x3ffffffc, 30), (0xfffffe9, 28),
    (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28), (0xfffffec, 28),
    (0xfffffed, 28), (0xfffffee, 28), (0xfffffef, 28), (0xffffff0, 28),
    (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28),
    (0xffffff4, 28), (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28),
    (0xffffff8, 28), (0xffffff9, 28), (0xffffffa, 28), (0xffffffb, 28),
    (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12),
    (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11),
    (0x3fa, 10), (0x3fb, 10), (0xf9, 8), (0x7fb, 11),
    (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6),
    (0x0, 5), (0x1, 5), (0x2, 5), (0x19, 6),
    (0x1a, 6), (0x1b, 6), (0x1c, 6), (0x1d, 6),
    (0x1e, 6), (0x1f, 6), (0x5c, 7), (0xfb, 8),
    (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10),
    (0x1ffa, 13), (0x21, 6), (0x5d, 7), (0x5e, 7),
    (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7),
    (0x63, 7), (0x64, 7), (0x65, 7), (0x66, 7),
    (0x67, 7), (0x68, 7), (0x69, 7), (0x6a, 7),
    (0x6b, 7), (0x6c, 7), (0x6d, 7), (0x6e, 7),
    (0x6f, 7), (0x70, 7), (0x71, 7), (0x72, 7),
    (0xfc, 8), (0x73, 7), (0xfd, 8), (0x1ffb, 13),
    (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6),
    (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5),
    (0x24, 6), (0x5, 5), (0x25, 6), (0x26, 6),
    (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7),
    (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5),
    (0x2b, 6), (0x76, 7), (0x2c, 6), (0x8, 5),
    (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7),
    (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15),
    (0x7fc, 11), (0x3ffd, 14), (0x1ffd, 13), (0xffffffc, 28),
    (0xfffe6, 20), (0x3fffd2, 22), (0xfffe7, 20), (0xfffe8, 20),
    (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22), (0x7fffd9, 23),
    (0x3fffd6, 22), (0x7fffda, 23), (0x7fffdb, 23), (0x7fffdc, 23),
    (0x7fffdd, 23), (0x7fffde, 23), (0xffffeb, 24), (0x7fffdf, 23),
    (0xffffec, 24), (0xffffed, 24), (0x3fffd7, 22), (0x7fffe0, 23),
    (0xffffee, 24), (0x7fffe1, 23), (0x7fffe2, 23), (0x7fffe3, 23),
    (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22), (0x7fffe5, 23),
    (0x3fffd9, 22), (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24),
    (0x3fffda, 22), (0x1fffdd, 21), (0xfffe9, 20), (0x3fffdb, 22),
    (0x3fffdc, 22), (0x7fffe8, 23), (0x7fffe9, 23), (0x1fffde, 21),
    (0x7fffea, 23), (0x3fffdd, 22), (0x3fffde, 22), (0xfffff0, 24),
    (0x1fffdf, 21), (0x3fffdf, 22), (0x7fffeb, 23), (0x7fffec, 23),
    (0x1fffe0, 21), (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21),
    (0x7fffed, 23), (0x3fffe1, 22), (0x7fffee, 23), (0x7fffef, 23),
    (0xfffea, 20), (0x3fffe2, 22), (0x3fffe3, 22), (0x3fffe4, 22),
    (0x7ffff0, 23), (0x3fffe5, 22), (0x3fffe6, 22), (0x7ffff1, 23),
    (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20), (0x7fff1, 19),
    (0x3fffe7, 22), (0x7ffff2, 23), (0x3fffe8, 22), (0x1ffffec, 25),
    (0x3ffffe2, 26), (0x3ffffe3, 26), (0x3ffffe4, 26), (0x7ffffde, 27),
    (0x7ffffdf, 27), (0x3ffffe5, 26), (0xfffff1, 24), (0x1ffffed, 25),
    (0x7fff2, 19), (0x1fffe3, 21), (0x3ffffe6, 26), (0x7ffffe0, 27),
    (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27), (0xfffff2, 24),
    (0x1fffe4, 21), (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26),
    (0xffffffd, 28), (0x7ffffe3, 27), (0x7ffffe4, 27), (0x7ffffe5, 27),
    (0xfffec, 20), (0xfffff3, 24), (0xfffed, 20), (0x1fffe6, 21),
    (0x3fffe9, 22), (0x1fffe7, 21), (0x1fffe8, 21), (0x7ffff3, 23),
    (0x3fffea, 22), (0x3fffeb, 22), (0x1ffffee, 25), (0x1ffffef, 25),
    (0xfffff4, 24), (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23),
    (0x3ffffeb, 26), (0x7ffffe6, 27), (0x3ffffec, 26), (0x3ffffed, 26),
    (0x7ffffe7, 27), (0x7ffffe8, 27), (0x7ffffe9, 27), (0x7ffffea, 27),
    (0x7ffffeb, 27), (0xffffffe, 28), (0x7ffffec, 27), (0x7ffffed, 27),
    (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27), (0x3ffffee, 26),
    (0x3fffffff, 30),
]

STATIC = [  # RFC 7541 Appendix A, index 1..61
    (':authority', ''),
    (':method', 'GET'),
    (':method', 'POST'),
    (':path', '/'),
    (':path', '/index.html'),
    (':scheme', 'http'),
    (':scheme', 'https'),
    (':status', '200'),
    (':status', '204'),
    (':status', '206'),
    (':status', '304'),
    (':status', '400'),
    (':status', '404'),
    (':status', '500'),
    ('accept-charset', ''),
    ('accept-encoding', 'gzip, deflate'),
    ('accept-language', ''),
    ('accept-ranges', ''),
    ('accept', ''),
    ('access-control-allow-origin', ''),
    ('age', ''),
    ('allow', ''),
    ('authorization', ''),
    ('cache-control', ''),
    ('content-disposition', ''),
    ('content-encoding', ''),
    ('content-language', ''),
    ('content-length', ''),
    ('content-location', ''),
    ('content-range', ''),
    ('content-type', ''),
    ('cookie', ''),
    ('date', ''),
    ('etag', ''),
    ('expect', ''),
    ('expires', ''),
    ('from', ''),
    ('host', ''),
    ('if-match', ''),
    ('if-modified-since', ''),
    ('if-none-match', ''),
    ('if-range', ''),
    ('if-unmodified-since', ''),
    ('last-modified', ''),
    ('link', ''),
    ('location', ''),
    ('max-forwards', ''),
    ('proxy-authenticate', ''),
    ('proxy-authorization', ''),
    ('range', ''),
    ('referer', ''),
    ('refresh', ''),
    ('retry-after', ''),
    ('server', ''),
    ('set-cookie', ''),
    ('strict-transport-security', ''),
    ('transfer-encoding', ''),
    ('user-agent', ''),
    ('vary', ''),
    ('via', ''),
    ('www-authenticate', ''),
]


QPACK_STATIC = [  # RFC 9204 Appendix A, index 0..98
    (':authority', ''),
    (':path', '/'),
    ('age', '0'),
    ('content-disposition', ''),
    ('content-length', '0'),
    ('cookie', ''),
    ('date', ''),
    ('etag', ''),
    ('if-modified-since', ''),
    ('if-none-match', ''),
    ('last-modified', ''),
    ('link', ''),
    ('location', ''),
    ('referer', ''),
    ('set-cookie', ''),
    (':method', 'CONNECT'),
    (':method', 'DELETE'),
    (':method', 'GET'),
    (':method', 'HEAD'),
    (':method', 'OPTIONS'),
    (':method', 'POST'),
    (':method', 'PUT'),
    (':scheme', 'http'),
    (':scheme', 'https'),
    (':status', '103'),
    (':status', '200'),
    (':status', '304'),
    (':status', '404'),
    (':status', '503'),
    ('accept', '*/*'),
    ('accept', 'application/dns-message'),
    ('accept-encoding', 'gzip, deflate, br'),
    ('accept-ranges', 'bytes'),
    ('access-control-allow-headers', 'cache-control'),
    ('access-control-allow-headers', 'content-type'),
    ('access-control-allow-origin', '*'),
    ('cache-control', 'max-age=0'),
    ('cache-control', 'max-age=2592000'),
    ('cache-control', 'max-age=604800'),
    ('cache-control', 'no-cache'),
    ('cache-control', 'no-store'),
    ('cache-control', 'public, max-age=31536000'),
    ('content-encoding', 'br'),
    ('content-encoding', 'gzip'),
    ('content-type', 'application/dns-message'),
    ('content-type', 'application/javascript'),
    ('content-type', 'application/json'),
    ('content-type', 'application/x-www-form-urlencoded'),
    ('content-type', 'image/gif'),
    ('content-type', 'image/jpeg'),
    ('content-type', 'image/png'),
    ('content-type', 'text/css'),
    ('content-type', 'text/html; charset=utf-8'),
    ('content-type', 'text/plain'),
    ('content-type', 'text/plain;charset=utf-8'),
    ('range', 'bytes=0-'),
    ('strict-transport-security', 'max-age=31536000'),
    ('strict-transport-security', 'max-age=31536000; includesubdomains'),
    ('strict-transport-security', 'max-age=31536000; includesubdomains; preload'),
    ('vary', 'accept-encoding'),
    ('vary', 'origin'),
    ('x-content-type-options', 'nosniff'),
    ('x-xss-protection', '1; mode=block'),
    (':status', '100'),
    (':status', '204'),
    (':status', '206'),
    (':status', '302'),
    (':status', '400'),
    (':status', '403'),
    (':status', '421'),
    (':status', '425'),
    (':status', '500'),
    ('accept-language', ''),
    ('access-control-allow-credentials', 'FALSE'),
    ('access-control-allow-credentials', 'TRUE'),
    ('access-control-allow-headers', '*'),
    ('access-control-allow-methods', 'get'),
    ('access-control-allow-methods', 'get, post, options'),
    ('access-control-allow-methods', 'options'),
    ('access-control-expose-headers', 'content-length'),
    ('access-control-request-headers', 'content-type'),
    ('access-control-request-method', 'get'),
    ('access-control-request-method', 'post'),
    ('alt-svc', 'clear'),
    ('authorization', ''),
    ('content-security-policy', "script-src 'none'; object-src 'none'; base-uri 'none'"),
    ('early-data', '1'),
    ('expect-ct', ''),
    ('forwarded', ''),
    ('if-range', ''),
    ('origin', ''),
    ('purpose', 'prefetch'),
    ('server', ''),
    ('timing-allow-origin', '*'),
    ('upgrade-insecure-requests', '1'),
    ('user-agent', ''),
    ('x-forwarded-for', ''),
    ('x-frame-options', 'deny'),
    ('x-frame-options', 'sameorigin'),
]


FIELDNAME_SLOTS = 512  # 71 names in 256 slots: no multipliers of this hash found for them


def fieldname_hash(name, a, b):
    """Of the name's length and its first two and last two bytes, in any case (| 0x20): the
    last two tell access-control-allow-headers from -methods, the second :path from :method."""
    c = [x | 0x20 for x in (name[0], name[1], name[-2], name[-1])]
    return (len(name) * a + c[0] * b + c[1] + c[2] * 2 + c[3]) & (FIELDNAME_SLOTS - 1)


def pick_hash(names, hash_fn):
    for a in range(1, 64):
        for b in range(1, 64):
            if len({hash_fn(n, a, b) for n in names}) == len(names):
                return a, b
    raise SystemExit("no collision-free name hash")


HUFF_FAST_BITS = 11


def huffman_fast():
    """(sym0, sym1, bits0, bits) for every HUFF_FAST_BITS-bit value: the symbol whose code the
    value begins with and its length (0, 0, 255, 255 when that code is longer: no bit count
    reaches it), and a second whole
    code behind it when one fits (bits = both lengths; else sym1 = 0 and bits = bits0)."""
    by_code = {(bits, code): sym for sym, (code, bits) in enumerate(HUFFMAN)}

    def first_code(v, width):
        for n in range(1, width + 1):
            sym = by_code.get((n, v >> (width - n)))
            if sym is not None:
                return sym, n
        return None, 0

    table = []
    for v in range(1 << HUFF_FAST_BITS):
        sym0, bits0 = first_code(v, HUFF_FAST_BITS)
        if sym0 is None:
            table.append((0, 0, 255, 255))
            continue
        assert sym0 != 256
        rest = HUFF_FAST_BITS - bits0
        sym1, bits1 = first_code(v & ((1 << rest) - 1), rest) if rest else (None, 0)
        if sym1 is None or sym1 == 256:
            table.append((sym0, 0, bits0, bits0))
        else:
            table.append((sym0, sym1, bits0, bits0 + bits1))
    return table


def huffman_canonical():
    """Per code length 0..30: the first code and the count of codes of that length, and the
    index of the first of them in the symbols sorted by (length, code)."""
    order = sorted(range(len(HUFFMAN)), key=lambda s: (HUFFMAN[s][1], HUFFMAN[s][0]))
    code, prev = 0, HUFFMAN[order[0]][1]
    first, count, base = [0] * 31, [0] * 31, [0] * 31
    for i, sym in enumerate(order):
        c, bits = HUFFMAN[sym]
        if i:
            code = (code + 1) << (bits - prev)
        assert c == code, "the Huffman code is not canonical"
        if count[bits] == 0:
            first[bits], base[bits] = c, i
        count[bits] += 1
        prev = bits
    return first, count, base, order


def c_string(s):
    return '"' + s.replace('\\', '\\\\').replace('"', '\\"') + '"'


def begin(w, what, source, guard):
    w("/* Generated by scripts/hpack_tables.py %s: do not edit. %s */" % (what, source))
    w("#ifndef " + guard)
    w("#define " + guard)
    w("")
    w("#include <stdint.h>")
    w("")
    w("// clang-format off")


def end(w):
    w("// clang-format on")
    w("")
    w("#endif")


def hpack(w):
    begin(w, "hpack", "RFC 7541 Appendix A.", "H2_HPACK_TABLES_H")
    w("#define HPACK_STATIC_N %d" % len(STATIC))
    w("")
    w("/* index 1..61 at [index - 1] */")
    w("static const struct hpack_static {")
    w("    const char *name, *value;")
    w("    uint8_t name_len, value_len;")
    w("    uint8_t more; /* the next entry has the same name */")
    w("} hpack_static[HPACK_STATIC_N] = {")
    for i, (n, v) in enumerate(STATIC):
        more = int(i + 1 < len(STATIC) and STATIC[i + 1][0] == n)
        w("    {%s, %s, %d, %d, %d}," % (c_string(n), c_string(v), len(n), len(v), more))
    w("};")
    w("")
    end(w)


def huff(w):
    begin(w, "huff", "RFC 7541 Appendix B.", "CORE_HUFF_TABLES_H")
    w("static const struct huff_code {")
    w("    uint32_t code;")
    w("    uint8_t bits;")
    w("} huff_code[257] = {")
    for i in range(0, 257, 4):
        w("    " + " ".join("{0x%x, %d}," % c for c in HUFFMAN[i:i + 4]))
    w("};")
    w("")
    w("/* Decoding: the next HUFF_FAST_BITS bits of a string, most significant first, begin with")
    w(" * the code of sym[0], bits0 long (255: a longer code), and when bits > bits0 the code of")
    w(" * sym[1] follows whole, bits in all. */")
    w("#define HUFF_FAST_BITS %d" % HUFF_FAST_BITS)
    w("static const struct huff_fast {")
    w("    uint8_t sym[2], bits0, bits;")
    w("} huff_fast[1 << HUFF_FAST_BITS] = {")
    fast = huffman_fast()
    for i in range(0, len(fast), 8):
        w("    " + " ".join("{{%d, %d}, %d, %d}," % e for e in fast[i:i + 8]))
    w("};")
    w("")
    first, count, base, order = huffman_canonical()
    w("/* The longer codes (RFC 7541's code is canonical): per length, the first code, how many")
    w(" * there are, and where they start in huff_sym (symbols in code order; 256: EOS). */")
    w("static const uint32_t huff_first[31] = {")
    for i in range(0, 31, 8):
        w("    " + " ".join("0x%x," % c for c in first[i:i + 8]))
    w("};")
    w("static const uint16_t huff_count[31] = {")
    w("    " + " ".join("%d," % c for c in count))
    w("};")
    w("static const uint16_t huff_base[31] = {")
    w("    " + " ".join("%d," % c for c in base))
    w("};")
    w("static const uint16_t huff_sym[257] = {")
    for i in range(0, 257, 16):
        w("    " + " ".join("%d," % c for c in order[i:i + 16]))
    w("};")
    w("// clang-format on")
    w("")
    w("#endif")


def qpack(w):
    t = QPACK_STATIC
    assert len(t) == 99
    first = {}
    for i, (n, _) in enumerate(t):
        first.setdefault(n, i)
    begin(w, "qpack", "RFC 9204 Appendix A.", "H3_QPACK_TABLES_H")
    w("#define QPACK_STATIC_N %d" % len(t))
    w("")
    w("/* index 0..98; name_idx: the first index with the same name; next: the next index with the")
    w(" * same name, 0 for none (index 0 is never a next one). */")
    w("static const struct qpack_static {")
    w("    const char *name, *value;")
    w("    uint8_t name_len, value_len, name_idx, next;")
    w("} qpack_static[QPACK_STATIC_N] = {")
    for i, (n, v) in enumerate(t):
        nxt = next((k for k in range(i + 1, len(t)) if t[k][0] == n), 0)
        w("    {%s, %s, %d, %d, %d, %d}," % (c_string(n), c_string(v), len(n), len(v), first[n], nxt))
    w("};")
    w("")
    end(w)


def fieldnames():
    """[(name, first HPACK index (1..61, 0 none), 1 + first QPACK index (0 none))] in the
    order of HPACK's table, then QPACK's names HPACK lacks."""
    out, at = [], {}
    for i, (n, _) in enumerate(STATIC):
        if n not in at:
            at[n] = len(out)
            out.append([n, i + 1, 0])
    for i, (n, _) in enumerate(QPACK_STATIC):
        if n not in at:
            at[n] = len(out)
            out.append([n, 0, 0])
        if not out[at[n]][2]:
            out[at[n]][2] = i + 1
    return out


def hashed_fieldnames():
    names = fieldnames()
    return (names,) + pick_hash([n.encode() for n, _, _ in names], fieldname_hash)


FIELDNAMES_H_TOP = """\
/* Generated by scripts/hpack_tables.py fieldnames.h: do not edit.
 * fieldnames: the field names of HPACK's static table (RFC 7541 Appendix A) and QPACK's
 * (RFC 9204 Appendix A), one list, each with its first index in either, found by one hash
 * of the name: how hpack.c and qpack.c name a field by its static index (issue 37).
 * Must not: compare a name (the caller does: HPACK in any case, QPACK exactly).
 * Ownership: constant tables (fieldnames.c). */"""


def fieldnames_h(w):
    names, a, b = hashed_fieldnames()
    w(FIELDNAMES_H_TOP)
    w("#ifndef CORE_FIELDNAMES_H")
    w("#define CORE_FIELDNAMES_H")
    w("")
    w("#include <stddef.h>")
    w("#include <stdint.h>")
    w("")
    w("#define FIELDNAMES_N %d" % len(names))
    w("#define FIELDNAME_SLOTS %d" % FIELDNAME_SLOTS)
    w("")
    w("struct fieldname {")
    w("    const char *name; /* lower case */")
    w("    uint8_t len;")
    w("    uint8_t hpack; /* the first HPACK static index with this name (1..61), 0 for none */")
    w("    uint8_t qpack; /* 1 + the first QPACK static index with it (0..98), 0 for none */")
    w("};")
    w("")
    w("extern const struct fieldname fieldnames[FIELDNAMES_N];")
    w("/* 1 + the fieldnames entry at FIELDNAME_HASH of its name, 0 for none */")
    w("extern const uint8_t fieldname_by_hash[FIELDNAME_SLOTS];")
    w("")
    w("/* Of a name's length and its first two and last two bytes, any case (| 0x20). */")
    w("// clang-format off")
    w("#define FIELDNAME_HASH(n, first, second, last2, last) \\")
    w("    (((n) * %du + (first) * %du + (second) + (last2) * 2u + (last)) & (FIELDNAME_SLOTS - 1))"
      % (a, b))
    w("// clang-format on")
    w("")
    w("/* The one entry name[0, n) may be (its length the same), or NULL: one probe. */")
    w("static inline const struct fieldname *fieldname_at(const char *name, size_t n)")
    w("{")
    w("    if (n < 2)")
    w("        return NULL;")
    w("    unsigned i = fieldname_by_hash[FIELDNAME_HASH(")
    w("        n, (uint8_t)(name[0] | 0x20), (uint8_t)(name[1] | 0x20), (uint8_t)(name[n - 2] | 0x20),")
    w("        (uint8_t)(name[n - 1] | 0x20))];")
    w("    return i && fieldnames[i - 1].len == n ? &fieldnames[i - 1] : NULL;")
    w("}")
    w("")
    w("#endif")


def fieldnames_c(w):
    names, a, b = hashed_fieldnames()
    w("/* Generated by scripts/hpack_tables.py fieldnames.c: do not edit. See fieldnames.h. */")
    w('#include "core/fieldnames.h"')
    w("")
    w("// clang-format off")
    w("const struct fieldname fieldnames[FIELDNAMES_N] = {")
    for n, h, q in names:
        w("    {%s, %d, %d, %d}," % (c_string(n), len(n), h, q))
    w("};")
    w("")
    # one slot a line ([slot] = entry): a map, not a run of numbers
    w("const uint8_t fieldname_by_hash[FIELDNAME_SLOTS] = {")
    slots = sorted((fieldname_hash(n.encode(), a, b), i + 1) for i, (n, _, _) in enumerate(names))
    for k in range(0, len(slots), 6):
        w("    " + " ".join("[%d] = %d," % e for e in slots[k:k + 6]))
    w("};")
    w("// clang-format on")


def main():
    what = {"hpack": hpack, "huff": huff, "qpack": qpack, "fieldnames.h": fieldnames_h,
            "fieldnames.c": fieldnames_c}
    if len(sys.argv) != 2 or sys.argv[1] not in what:
        raise SystemExit("usage: scripts/hpack_tables.py hpack|huff|qpack|fieldnames.h|fieldnames.c"
                         " > FILE")
    out = []
    what[sys.argv[1]](out.append)
    print("\n".join(out))


main()
