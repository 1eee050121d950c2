"""On-the-fly compression (br, zstd, gzip), cached per file version, and dictionary transport
(dcz, RFC 9842) (issue 17).

A variant is made off the loop when it would take more than about a millisecond, and until it
is ready the server answers with the identity body (with Vary): tests that want the variant
ask again, a bounded number of times, until it arrives. Each worker has its own variant
cache, so tests that follow a variant across requests run one worker (-t 1).
"""

import base64
import gzip
import hashlib
import json
import os
import random
import re
import signal
import threading
import time

import brotli
import pytest
import zstandard

from conftest import Conn, fetch, request, wait_for
from test_accesslog import scrape
from test_metrics import total

WORDS = ("function", "return", "const", "let", "value", "index", "element", "document",
         "window", "length", "push", "this", "prototype", "undefined", "null", "true")


def js_text(size, seed=1):
    """Deterministic JavaScript-like text: compressible, but not trivially."""
    rng = random.Random(seed)
    out, n = [], 0
    while n < size:
        line = "%s %s_%d = %s(%d);\n" % (rng.choice(WORDS), rng.choice(WORDS), rng.randrange(999),
                                          rng.choice(WORDS), rng.randrange(100000))
        out.append(line)
        n += len(line)
    return "".join(out).encode()[:size]


JS = js_text(32 * 1024)          # every coding is made off the loop at this size
SMALL_JS = js_text(2 * 1024, 2)  # cheap enough for gzip and zstd on the loop
TINY = b"console.log('tiny');\n"  # below --compress-min
PNG = b"\x89PNG\r\n\x1a\n" + bytes(random.Random(3).randbytes(8000))

DECODE = {
    "br": brotli.decompress,
    "zstd": lambda b: zstandard.ZstdDecompressor().decompress(b, max_output_size=1 << 26),
    "gzip": gzip.decompress,
    None: lambda b: b,
}
# The identity's digest (the first 32 hex digits of its SHA-256) and the variant's coding.
ETAG = re.compile(r'^"[0-9a-f]{32}(-[a-z0-9]+)?"$')


@pytest.fixture
def site(docroot):
    (docroot / "app.js").write_bytes(JS)
    (docroot / "small.js").write_bytes(SMALL_JS)
    (docroot / "tiny.js").write_bytes(TINY)
    (docroot / "pic.png").write_bytes(PNG)
    (docroot / "pre.js").write_bytes(JS)
    (docroot / "pre.js.br").write_bytes(b"PRECOMPRESSED-BROTLI")
    return docroot


def get(server, path, ae=None, method="GET", headers=()):
    h = list(headers)
    if ae is not None:
        h.append(("Accept-Encoding", ae))
    return fetch(server, path, method=method, headers=h)


def encoding(r):
    return r.header("content-encoding")


def until_encoded(server, path, ae, want, headers=(), tries=200):
    """Asks until the response comes in `want` (the variant is ready); bounded."""
    for _ in range(tries):
        r = get(server, path, ae, headers=headers)
        assert r.status == 200, r  # no caller sends a Range
        if encoding(r) == want:
            return r
        assert encoding(r) is None, r.headers  # meanwhile: identity, never another coding
        time.sleep(0.02)
    pytest.fail(f"{path} never arrived as {want}")


@pytest.mark.parametrize("enc", ["br", "zstd", "gzip"])
def test_each_encoding_decodes_to_the_file(make_server, site, enc):
    s = make_server(site, args=["-t", "1"])
    for path, body in (("/app.js", JS), ("/small.js", SMALL_JS)):
        r = until_encoded(s, path, enc, enc)
        assert DECODE[enc](r.body) == body
        assert r.header("content-length") == str(len(r.body))
        assert len(r.body) < len(body) * 0.95
        assert "accept-encoding" in r.tokens("vary")
        assert r.header("content-type").startswith("text/javascript")


def test_small_gzip_is_made_on_the_loop(make_server, site):
    """2 KiB at libdeflate 12 costs far below a millisecond: the first response carries it."""
    s = make_server(site, args=["-t", "1"])
    r = get(s, "/small.js", "gzip")
    assert encoding(r) == "gzip" and gzip.decompress(r.body) == SMALL_JS


@pytest.mark.parametrize("ae,want", [
    ("gzip, deflate, br, zstd", "br"),
    ("gzip;q=1, br;q=0.5", "gzip"),
    ("zstd, gzip;q=0.9", "zstd"),
    ("br;q=0, *", "zstd"),
    ("*;q=0.5, gzip", "gzip"),
    ("identity", None),
    ("br;q=0, zstd;q=0, gzip;q=0", None),
    ("deflate", None),
])
def test_q_values_choose_the_coding(make_server, site, ae, want):
    s = make_server(site, args=["-t", "1"])
    if want is None:
        for _ in range(3):
            r = get(s, "/app.js", ae)
            assert encoding(r) is None and r.body == JS
            assert "accept-encoding" in r.tokens("vary")
        return
    r = until_encoded(s, "/app.js", ae, want)
    assert DECODE[want](r.body) == JS


def test_precompressed_sibling_wins(make_server, site):
    s = make_server(site, args=["-t", "1"])
    for _ in range(5):
        r = get(s, "/pre.js", "br")
        assert encoding(r) == "br" and r.body == b"PRECOMPRESSED-BROTLI"
        time.sleep(0.02)


def test_incompressible_and_tiny_untouched(make_server, site):
    s = make_server(site, args=["-t", "1"])
    for path, body in (("/pic.png", PNG), ("/tiny.js", TINY)):
        for _ in range(3):
            r = get(s, path, "gzip, deflate, br, zstd")
            assert r.status == 200 and encoding(r) is None and r.body == body
            assert r.header("vary") is None
            time.sleep(0.02)


def test_vary_on_identity(make_server, site):
    s = make_server(site, args=["-t", "1"])
    for ae in (None, "identity", "gzip"):
        r = get(s, "/app.js", ae)
        assert "accept-encoding" in r.tokens("vary"), (ae, r.headers)
    r = get(s, "/app.js", method="HEAD")
    assert "accept-encoding" in r.tokens("vary")


def test_etags_per_variant_and_304(make_server, site):
    s = make_server(site, args=["-t", "1"])
    identity = get(s, "/app.js").header("etag")
    tags = {None: identity}
    for enc in ("br", "zstd", "gzip"):
        r = until_encoded(s, "/app.js", enc, enc)
        tags[enc] = r.header("etag")
        assert ETAG.match(tags[enc]) and not tags[enc].startswith("W/")
    assert len(set(tags.values())) == 4, tags
    for enc in ("br", "zstd", "gzip"):
        r = get(s, "/app.js", enc, headers=[("If-None-Match", tags[enc])])
        assert r.status == 304 and r.header("etag") == tags[enc] and r.body == b""
        assert "accept-encoding" in r.tokens("vary")
        # another variant's tag does not match the one selected
        other = tags["gzip" if enc != "gzip" else "br"]
        r = get(s, "/app.js", enc, headers=[("If-None-Match", other)])
        assert r.status == 200 and encoding(r) == enc
    r = get(s, "/app.js", None, headers=[("If-None-Match", tags["br"])])
    assert r.status == 200 and r.body == JS


def test_ranges_on_the_variant(make_server, site):
    s = make_server(site, args=["-t", "1"])
    full = until_encoded(s, "/app.js", "br", "br")
    body, tag = full.body, full.header("etag")
    r = get(s, "/app.js", "br", headers=[("Range", "bytes=10-99")])
    assert r.status == 206 and encoding(r) == "br" and r.body == body[10:100]
    assert r.header("content-range") == f"bytes 10-99/{len(body)}"
    assert r.header("etag") == tag
    r = get(s, "/app.js", "br", headers=[("Range", "bytes=0-4,-5")])
    assert r.status == 206 and encoding(r) == "br"
    ctype = r.header("content-type")
    assert ctype.startswith("multipart/byteranges; boundary=")
    assert body[:5] in r.body and body[-5:] in r.body
    assert f"bytes 0-4/{len(body)}".encode() in r.body
    # If-Range: the variant's own tag keeps the range, the identity's gives the whole variant
    r = get(s, "/app.js", "br", headers=[("Range", "bytes=0-9"), ("If-Range", tag)])
    assert r.status == 206 and r.body == body[:10]
    ident = get(s, "/app.js").header("etag")
    r = get(s, "/app.js", "br", headers=[("Range", "bytes=0-9"), ("If-Range", ident)])
    assert r.status == 200 and r.body == body
    r = get(s, "/app.js", "br", headers=[("Range", f"bytes={len(body)}-")])
    assert r.status == 416 and r.header("content-range") == f"bytes */{len(body)}"


def test_head_equals_get(make_server, site):
    s = make_server(site, args=["-t", "1"])
    g = until_encoded(s, "/app.js", "zstd", "zstd")
    h = get(s, "/app.js", "zstd", method="HEAD")
    assert h.status == 200 and h.body == b""
    drop = {"date"}
    assert [x for x in h.headers if x[0] not in drop] == [x for x in g.headers if x[0] not in drop]


def test_rewritten_in_place_never_serves_a_stale_variant(make_server, site):
    """Same inode, same size, mtime restored: only the ctime tells the versions apart."""
    s = make_server(site, args=["-t", "1"])
    path = site / "app.js"
    r = until_encoded(s, "/app.js", "gzip", "gzip")
    assert gzip.decompress(r.body) == JS
    st = os.stat(path)
    new = js_text(len(JS), seed=99)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, new)
    finally:
        os.close(fd)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_ino == st.st_ino
    # The cache re-checks a file at most once a second: wait for identity to show the change.
    for _ in range(300):
        if get(s, "/app.js").body == new:
            break
        time.sleep(0.02)
    else:
        pytest.fail("the rewritten file was never served")
    for _ in range(20):  # from then on, no variant decodes to the old bytes
        r = get(s, "/app.js", "gzip")
        assert DECODE[encoding(r)](r.body) == new
        time.sleep(0.02)


def test_concurrent_clients_during_compression(make_server, docroot):
    """200 clients ask for br of one large file while it is being compressed: every answer is
    byte-exact (identity or br), another client on the same workers is answered meanwhile, and
    each worker compresses the file once."""
    big = js_text(3 << 20, seed=7)
    (docroot / "big.js").write_bytes(big)
    (docroot / "other.txt").write_bytes(b"other\n")
    s = make_server(docroot, args=["-v", "--compress-max", "8M"])
    results, errors = [], []

    def client():
        try:
            with Conn(s, timeout=60) as c:
                r = c.request("GET", "/big.js", headers=[("Accept-Encoding", "br")])
                results.append((encoding(r), DECODE[encoding(r)](r.body) == big))
        except Exception as e:  # collected and reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client) for _ in range(200)]
    for t in threads:
        t.start()
    for _ in range(5):  # other clients are served while compression runs
        r = get(s, "/other.txt")
        assert r.status == 200 and r.body == b"other\n"
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    assert len(results) == 200 and all(ok for _, ok in results)
    r = until_encoded(s, "/big.js", "br", "br", tries=1000)
    assert brotli.decompress(r.body) == big
    made = re.findall(r"worker \d+: br /big\.js", s.stderr_text())
    assert 1 <= len(made) <= s.threads, made


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


@pytest.mark.slow  # RSS means nothing under ASan, whose quarantine keeps freed memory
def test_cache_bound_holds_under_distinct_files(make_server, docroot):
    """150 distinct 320 KiB files, gzip: ~17 MiB of variants unbounded, 2 MiB allowed."""
    n, size = 150, 320 << 10
    for i in range(n):
        (docroot / f"f{i}.js").write_bytes(js_text(size, seed=1000 + i))
    s = make_server(docroot, args=["-v", "-t", "1", "--compress-cache", "2M",
                                   "--cache-max-file", "0"])
    get(s, "/f0.js", "gzip")
    base = rss_kib(s.proc.pid)
    for i in range(n):
        until_encoded(s, f"/f{i}.js", "gzip", "gzip", tries=1000)
    grown = rss_kib(s.proc.pid) - base
    s.stop()
    m = re.search(r"(\d+) variants made \((\d+) kept.*?(\d+) bytes cached", s.stderr_text())
    assert m, s.stderr_text()
    assert int(m.group(2)) >= n and int(m.group(3)) <= 2 << 20
    assert grown < 12 << 10, f"RSS grew {grown} KiB"


def test_compress_off_and_options(make_server, site):
    s = make_server(site, args=["-t", "1", "--compress", "off"])
    r = get(s, "/small.js", "gzip")
    assert encoding(r) is None and r.header("vary") is None and r.body == SMALL_JS
    s2 = make_server(site, args=["-t", "1", "--compress-types", "image/png, text/css"])
    r = get(s2, "/small.js", "gzip")
    assert encoding(r) is None and r.header("vary") is None
    for _ in range(10):  # random bytes never save 5%: the variant is not kept
        r = get(s2, "/pic.png", "gzip")
        assert encoding(r) is None and r.body == PNG and "accept-encoding" in r.tokens("vary")
        time.sleep(0.02)
    (site / "mid.js").write_bytes(SMALL_JS[:300])
    r = get(s2, "/mid.js", "gzip")
    assert encoding(r) is None
    s3 = make_server(site, args=["-t", "1", "--compress-min", "200", "--compress-max", "1K"])
    r = until_encoded(s3, "/mid.js", "gzip", "gzip")
    assert gzip.decompress(r.body) == SMALL_JS[:300]
    r = get(s3, "/small.js", "gzip")
    assert encoding(r) is None and r.header("vary") is None


def b64hash(data):
    return ":" + base64.b64encode(hashlib.sha256(data).digest()).decode() + ":"


def dcz_decode(body, dictionary):
    assert body[:8] == bytes([0x5E, 0x2A, 0x4D, 0x18, 0x20, 0, 0, 0])
    assert body[8:40] == hashlib.sha256(dictionary).digest()
    d = zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(
        dictionary, dict_type=zstandard.DICT_TYPE_RAWCONTENT))
    return d.decompress(body[40:], max_output_size=1 << 26)


@pytest.fixture
def releases(docroot):
    (docroot / "assets").mkdir()
    v1 = js_text(40_000, seed=11)
    v2 = v1[:20_000] + b"// release 2\n" + v1[20_000:39_000]
    (docroot / "assets" / "app.v1.js").write_bytes(v1)
    (docroot / "assets" / "app.v2.js").write_bytes(v2)
    (docroot / "assets" / "app.css").write_bytes(js_text(5000, seed=12))
    return docroot, v1, v2


def test_dictionary_delta(make_server, releases):
    root, v1, v2 = releases
    s = make_server(root, args=["-t", "1", "--dictionary", "/assets/*.js"])
    r = get(s, "/assets/app.v1.js", "gzip, br")
    assert r.header("use-as-dictionary") == 'match="/assets/*.js"'
    assert r.tokens("vary") >= {"accept-encoding", "available-dictionary"}
    hdr = [("Available-Dictionary", b64hash(v1))]
    r = until_encoded(s, "/assets/app.v2.js", "gzip, br, zstd, dcz", "dcz", headers=hdr)
    assert dcz_decode(r.body, v1) == v2
    assert r.tokens("vary") >= {"accept-encoding", "available-dictionary"}
    assert r.header("use-as-dictionary") == 'match="/assets/*.js"'
    assert len(r.body) < len(brotli.compress(v2)) / 4
    tag = r.header("etag")
    r2 = get(s, "/assets/app.v2.js", "dcz", headers=hdr + [("If-None-Match", tag)])
    assert r2.status == 304 and r2.header("etag") == tag
    r3 = get(s, "/assets/app.v2.js", "dcz", headers=hdr + [("Range", "bytes=0-39")])
    assert r3.status == 206 and r3.body == r.body[:40]
    # not for paths outside the pattern
    r = get(s, "/assets/app.css", "dcz", headers=hdr)
    assert r.header("use-as-dictionary") is None and encoding(r) != "dcz"


@pytest.mark.parametrize("value", [
    "unknown",          # a hash no file has
    ":not-base64!:",
    ":YWJj:",            # 3 bytes
    "",
    "sha-256=abc",
])
def test_dictionary_fallback(make_server, releases, value):
    root, v1, v2 = releases
    s = make_server(root, args=["-t", "1", "--dictionary", "/assets/*.js"])
    if value == "unknown":
        value = b64hash(b"no such dictionary")
    for _ in range(20):
        r = get(s, "/assets/app.v2.js", "br, dcz", headers=[("Available-Dictionary", value)])
        assert r.status == 200 and encoding(r) in (None, "br")
        assert DECODE[encoding(r)](r.body) == v2
        time.sleep(0.02)


def test_dictionary_without_dcz_in_accept_encoding(make_server, releases):
    root, v1, v2 = releases
    s = make_server(root, args=["-t", "1", "--dictionary", "/assets/*.js"])
    r = until_encoded(s, "/assets/app.v2.js", "br", "br",
                      headers=[("Available-Dictionary", b64hash(v1))])
    assert brotli.decompress(r.body) == v2


def test_dictionary_above_the_size_bound(make_server, releases):
    """A dictionary larger than --compress-max is never used."""
    root, v1, v2 = releases
    big_v1 = v1 + js_text(30_000, seed=13)
    (root / "assets" / "app.v1.js").write_bytes(big_v1)
    s = make_server(root, args=["-t", "1", "--dictionary", "/assets/*.js",
                                "--compress-max", "50000"])
    for _ in range(20):
        r = get(s, "/assets/app.v2.js", "dcz",
                headers=[("Available-Dictionary", b64hash(big_v1))])
        assert encoding(r) is None and r.body == v2
        time.sleep(0.02)


def listing_dir(docroot, name, n):
    d = docroot / name
    d.mkdir()
    for i in range(n):
        (d / f"file-with-a-longish-name-{i:05d}.txt").write_bytes(b"x" * (i % 13))
    return d


def test_autoindex_listing_compressed(make_server, docroot):
    """A listing is compressed through the variant cache as a file is: made off the loop above
    about a millisecond's work (identity meanwhile), on the loop below, so that the first
    response to ask for it carries it."""
    listing_dir(docroot, "many", 60)
    listing_dir(docroot, "few", 9)  # about 1.8 KB: gzip 12 costs a fraction of a millisecond
    s = make_server(docroot, args=["-t", "1", "--autoindex"])
    few = get(s, "/few/", "gzip")
    assert encoding(few) == "gzip" and gzip.decompress(few.body) == get(s, "/few/").body
    plain = get(s, "/many/")
    assert plain.status == 200 and encoding(plain) is None and len(plain.body) > 1024
    assert plain.tokens("vary") >= {"accept", "accept-encoding"}
    for enc in ("br", "zstd", "gzip"):
        r = until_encoded(s, "/many/", enc, enc)
        assert DECODE[enc](r.body) == plain.body
        assert r.tokens("vary") >= {"accept", "accept-encoding"}
    j = until_encoded(s, "/many/", "gzip", "gzip", headers=[("Accept", "application/json")])
    assert b"file-with-a-longish-name-00059.txt" in gzip.decompress(j.body)
    assert j.header("content-type") == "application/json"


@pytest.mark.parametrize("enc", ["br", "zstd", "gzip"])
def test_large_listing_compressed(make_server, docroot, enc):
    """A listing of 1,500 entries (about 200 KB of HTML) costs more than a loop turn to
    compress: it is made off the loop and later requests carry it; the build before the variant
    cache served it identity forever. HEAD and conditional requests (a listing has no
    validators: they never match) describe the same bytes."""
    listing_dir(docroot, "big", 1500)
    s = make_server(docroot, args=["-t", "1", "--autoindex"])
    plain = get(s, "/big/")
    assert plain.status == 200 and encoding(plain) is None and len(plain.body) > 150_000
    assert plain.header("etag") is None and plain.header("last-modified") is None
    r = until_encoded(s, "/big/", enc, enc)
    assert DECODE[enc](r.body) == plain.body
    assert len(r.body) < len(plain.body) // 4
    assert r.header("content-length") == str(len(r.body))
    assert r.header("content-type") == "text/html; charset=utf-8"
    assert r.tokens("vary") >= {"accept", "accept-encoding"}
    assert r.header("etag") is None and r.header("last-modified") is None
    head = get(s, "/big/", enc, method="HEAD")
    assert head.status == 200 and head.body == b"" and encoding(head) == enc
    assert head.header("content-length") == str(len(r.body))
    for cond in (("If-None-Match", '"abc"'), ("If-None-Match", plain.header("date")),
                 ("If-Modified-Since", "Fri, 01 Jan 2100 00:00:00 GMT")):
        c = get(s, "/big/", enc, headers=[cond])
        assert c.status == 200 and encoding(c) == enc and c.body == r.body, cond
    j = until_encoded(s, "/big/", enc, enc, headers=[("Accept", "application/json")])
    assert j.header("content-type") == "application/json"
    names = [e["name"] for e in json.loads(DECODE[enc](j.body))["entries"]]
    assert len(names) == 1500 and names[-1] == "file-with-a-longish-name-01499.txt"


def test_small_listing_compressed_once(make_server, docroot):
    """Asked again and again, a listing is compressed once per coding (a re-rendering with the
    same bytes, after the listing's 5 s reuse time, keeps its variants), not once per request."""
    listing_dir(docroot, "many", 60)
    s = make_server(docroot, args=["-t", "1", "--autoindex", "--metrics", "127.0.0.1:0"])
    plain = get(s, "/many/")
    until_encoded(s, "/many/", "gzip", "gzip")
    with Conn(s) as c:
        for _ in range(30):
            r = c.request("GET", "/many/", headers=[("Accept-Encoding", "gzip")])
            assert encoding(r) == "gzip" and gzip.decompress(r.body) == plain.body
    made = total(scrape(s), "ringhttpd_compress_variants_made_total")
    assert made == 1


def until_listed(server, path, enc, needle, seconds):
    """Asks until the listing comes as `enc` and shows needle; bounded."""
    deadline = time.monotonic() + seconds
    while True:
        r = get(server, path, enc)
        if encoding(r) == enc and needle in DECODE[enc](r.body):
            return
        assert time.monotonic() < deadline, f"{needle} never in the {enc} listing"
        time.sleep(0.1)


def test_listing_changed_is_never_served_stale_compressed(make_server, docroot):
    """A listing rendered anew (an entry added: the directory changed; a file's size changed
    in place: the listing's 5 s reuse time ran out) is a new body, and its compressed variant
    is made from it: the old variant is never sent for it."""
    d = listing_dir(docroot, "many", 40)
    s = make_server(docroot, args=["-t", "1", "--autoindex"])
    for enc in ("br", "gzip"):
        until_encoded(s, "/many/", enc, enc)
    (d / "new-entry.txt").write_bytes(b"n")
    for enc in ("br", "gzip"):
        until_listed(s, "/many/", enc, b"new-entry.txt", 10)
    (d / "file-with-a-longish-name-00001.txt").write_bytes(b"y" * 5000)
    for enc in ("br", "gzip"):
        until_listed(s, "/many/", enc, b"4.9 KiB", 15)
    # Whatever it comes as, the compressed listing is the identity one.
    plain = get(s, "/many/")
    for enc in ("br", "gzip"):
        r = until_encoded(s, "/many/", enc, enc)
        assert DECODE[enc](r.body) == plain.body


def test_error_page_compressed(make_server, site):
    page = b"<!doctype html><title>Not here</title>\n" + js_text(4000, seed=5)
    (site / "404.html").write_bytes(page)
    s = make_server(site, args=["-t", "1", "--error-page", "404=/404.html"])
    r = get(s, "/nope", "gzip")  # 4 KiB at libdeflate 12: made on the loop
    assert r.status == 404 and encoding(r) == "gzip" and gzip.decompress(r.body) == page
    assert "accept-encoding" in r.tokens("vary")
    r = get(s, "/nope")
    assert r.status == 404 and encoding(r) is None and r.body == page
    h = get(s, "/nope", "gzip", method="HEAD")
    assert h.status == 404 and h.body == b"" and encoding(h) == "gzip"


def test_deltas_against_different_dictionaries_have_different_etags(make_server, releases):
    root, v1, v2 = releases
    v0 = v1[:30_000]
    (root / "assets" / "app.v0.js").write_bytes(v0)
    s = make_server(root, args=["-t", "1", "--dictionary", "/assets/*.js"])
    tags = set()
    for old in (v0, v1):
        r = until_encoded(s, "/assets/app.v2.js", "dcz", "dcz",
                          headers=[("Available-Dictionary", b64hash(old))])
        assert dcz_decode(r.body, old) == v2
        assert ETAG.match(r.header("etag")), r.header("etag")
        tags.add(r.header("etag"))
    assert len(tags) == 2, tags


@pytest.mark.parametrize("layout", ["top", "site"])
def test_reload_turns_compression_on_and_off(make_server, site, tmp_path, layout):
    """As `nginx -s reload` turns gzip on: SIGHUP re-reading --config with compression on where
    no site had it at start (the workers made no compressor, and the reload was reported as
    needing a restart). An open keep-alive connection gets each coding, byte-exact, without a
    restart; off again, the identity body (the variants went with the cache); on again, the
    compressor kept from the first time."""
    conf = tmp_path / "c.yaml"

    def write(state):
        conf.write_text(f"compress: {state}\n" if layout == "top" else f"""sites:
  - hosts: [a.test]
    default: true
    root: {site}
    compress: {state}
""")

    write("off")
    s = make_server(site if layout == "top" else None, args=["--config", str(conf), "-t", "1"])
    with Conn(s) as c:
        def coding(ae):
            r = c.request("GET", "/app.js", headers=[("Accept-Encoding", ae)])
            assert r.status == 200 and DECODE[encoding(r)](r.body) == JS
            return encoding(r)

        assert coding("br, zstd, gzip") is None
        for state in ("on", "off", "on"):
            write(state)
            s.proc.send_signal(signal.SIGHUP)
            for ae in ("gzip", "br", "zstd"):
                want = ae if state == "on" else None
                assert wait_for(lambda: coding(ae) == want), (state, ae)
        assert c.request("GET", "/small.js", headers=[("Accept-Encoding", "gzip")]).header(
            "content-encoding") == "gzip"  # made on the loop, by the same worker
    assert "next restart" not in s.stderr_text()
    # The variant cache is sized at start: a new bound is reported, not silently ignored.
    conf.write_text(conf.read_text() + "compress-cache: 1M\n" if layout == "top" else
                    "compress-cache: 1M\n" + conf.read_text())
    s.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: "compress-cache changed" in s.stderr_text())
    assert "takes effect at the next restart" in s.stderr_text()
    assert gzip.decompress(until_encoded(s, "/app.js", "gzip", "gzip").body) == JS


def test_dictionary_bound_is_the_sites_compress_max(make_server, tmp_path):
    """A dictionary is bounded by the --compress-max of the site the request was routed to, as
    the body is (it was the top level's): the same 20 KB dictionary is used where the site's
    bound is 64K and never where it is 8K, whatever the top level says."""
    old = js_text(20_000, seed=21)
    new = old[:3000] + b"// release 2\n" + old[3000:6000]
    roots = {}
    for name in ("small", "big"):
        roots[name] = tmp_path / name
        (roots[name] / "assets").mkdir(parents=True)
        (roots[name] / "assets" / "app.v1.js").write_bytes(old)
        (roots[name] / "assets" / "app.v2.js").write_bytes(new)
    conf = tmp_path / "c.yaml"
    hdr = [("Available-Dictionary", b64hash(old))]
    for top in ("12K", "32K"):  # below the dictionary, then above it
        conf.write_text(f"""compress-max: {top}
dictionary: /assets/*.js
sites:
  - hosts: [small.test]
    default: true
    root: {roots["small"]}
    compress-max: 8K
  - hosts: [big.test]
    root: {roots["big"]}
    compress-max: 64K
""")
        s = make_server(args=["--config", str(conf), "-t", "1"])

        def ask(host):
            return fetch(s, "/assets/app.v2.js", host=host,
                         headers=hdr + [("Accept-Encoding", "dcz")])

        assert wait_for(lambda: encoding(ask("big.test")) == "dcz"), top
        assert dcz_decode(ask("big.test").body, old) == new
        for _ in range(20):  # the small site's job would have been done by now (one worker)
            r = ask("small.test")
            assert (r.status, encoding(r), r.body) == (200, None, new), top
            time.sleep(0.02)
        s.stop()
