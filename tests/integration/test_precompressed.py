"""Precompressed siblings (.br, .zst, .gz) chosen per Accept-Encoding (issue 4)."""

import gzip

import pytest

from conftest import INDEX_HTML, Conn, fetch, request, wait_for

# Issue 14: each server test runs over TLS too (conftest: scheme).
pytestmark = pytest.mark.schemes("http", "https")

CSS = b"body { color: #abcdef; margin: 0 auto; }\n" * 20
ENCODED = {
    "br": b"BROTLI-BYTES:" + bytes(range(200)),  # the server never decodes: any bytes will do
    "zstd": b"(\xb5/\xfd ZSTD-BYTES:" + bytes(range(150)),
    "gzip": gzip.compress(CSS, mtime=0),
}
SUFFIX = {"br": ".br", "zstd": ".zst", "gzip": ".gz"}
JS = b"export function f() { return 42; }\n" * 10
JS_GZ = gzip.compress(JS, mtime=0)


@pytest.fixture
def pre_server(make_server, docroot):
    (docroot / "x.css").write_bytes(CSS)
    for enc, data in ENCODED.items():
        (docroot / ("x.css" + SUFFIX[enc])).write_bytes(data)
    (docroot / "y.js").write_bytes(JS)
    (docroot / "y.js.gz").write_bytes(JS_GZ)
    (docroot / "z.css").write_bytes(CSS)
    return make_server(docroot)


def get(server, ae, path="/x.css", method="GET", headers=()):
    h = list(headers)
    if ae is not None:
        h.append(("Accept-Encoding", ae))
    return fetch(server, path, method=method, headers=h)


def encoding_of(r):
    ce = r.header("content-encoding")
    return ce.strip().lower() if ce else None


def assert_variant(r, enc):
    assert r.status == 200, r
    assert encoding_of(r) == enc, f"want {enc}, got {r.header('content-encoding')}"
    want = CSS if enc is None else ENCODED[enc]
    assert r.body == want
    assert r.header("content-length") == str(len(want))
    assert r.header("content-type").lower().startswith("text/css")
    assert "accept-encoding" in r.tokens("vary"), r.headers


@pytest.mark.parametrize("ae,enc", [
    ("br", "br"),
    ("zstd", "zstd"),
    ("gzip", "gzip"),
    ("gzip, deflate, br, zstd", "br"),
    ("gzip, deflate, br", "br"),
    ("gzip, zstd", "zstd"),
    ("zstd, gzip", "zstd"),
    ("gzip;q=1, br;q=0.5", "gzip"),
    ("br;q=0.5, zstd;q=0.8, gzip;q=0.1", "zstd"),
    ("br;q=0, gzip", "gzip"),
    ("br;q=0, zstd;q=0, gzip", "gzip"),
    ("gzip ; q=0.8 , br;q=0.9", "br"),
    ("GZIP", "gzip"),
    ("Br;Q=1.0", "br"),
    ("gzip;q=1.000, br;q=1", "br"),
    ("deflate", None),
    ("identity", None),
    ("", None),
    (None, None),
    ("br;q=0, zstd;q=0, gzip;q=0", None),
    ("gzip;q=0.000", None),
    ("compress, x-gzip-not", None),
])
def test_variant_choice(pre_server, ae, enc):
    assert_variant(get(pre_server, ae), enc)


def test_distinct_etags_per_encoding(pre_server):
    tags = {}
    for ae, enc in (("identity", None), ("br", "br"), ("zstd", "zstd"), ("gzip", "gzip")):
        r = get(pre_server, ae)
        assert_variant(r, enc)
        tags[enc] = r.header("etag")
    assert all(tags.values())
    assert len(set(tags.values())) == 4, tags


def test_conditional_on_encoded_variant(pre_server):
    br = get(pre_server, "br")
    r = get(pre_server, "br", headers=[("If-None-Match", br.header("etag"))])
    assert r.status == 304 and r.body == b""
    assert r.header("etag") == br.header("etag")
    assert "accept-encoding" in r.tokens("vary")
    # The br tag must not validate the identity variant.
    r2 = get(pre_server, None, headers=[("If-None-Match", br.header("etag"))])
    assert r2.status == 200 and r2.body == CSS


def test_head_of_encoded_variant(pre_server):
    g = get(pre_server, "br")
    h = get(pre_server, "br", method="HEAD")
    assert h.status == 200 and h.body == b""
    assert encoding_of(h) == "br"
    assert h.header("content-length") == g.header("content-length")
    assert h.header("etag") == g.header("etag")


def test_ranges_apply_to_encoded_bytes(pre_server):
    data = ENCODED["br"]
    r = get(pre_server, "br", headers=[("Range", "bytes=0-3")])
    assert r.status == 206
    assert encoding_of(r) == "br"
    assert r.body == data[:4]
    assert r.header("content-range") == f"bytes 0-3/{len(data)}"
    r = get(pre_server, "gzip", headers=[("Range", "bytes=-10")])
    assert r.status == 206 and r.body == ENCODED["gzip"][-10:]
    assert r.header("content-range") == \
        f"bytes {len(ENCODED['gzip']) - 10}-{len(ENCODED['gzip']) - 1}/{len(ENCODED['gzip'])}"


def test_only_existing_siblings_are_used(pre_server):
    r = get(pre_server, "br", path="/y.js")
    assert r.status == 200 and r.body == JS and encoding_of(r) is None
    assert "accept-encoding" in r.tokens("vary")
    r = get(pre_server, "br, gzip", path="/y.js")
    assert r.body == JS_GZ and encoding_of(r) == "gzip"
    assert r.header("content-type").split(";")[0].strip() in ("text/javascript",
                                                              "application/javascript")


def test_file_without_siblings_is_plain(pre_server):
    r = get(pre_server, "br, zstd, gzip", path="/z.css")
    assert r.status == 200 and r.body == CSS and encoding_of(r) is None


def test_sibling_requested_directly_is_not_content_encoded(pre_server):
    r = get(pre_server, "gzip", path="/x.css.gz")
    assert r.status == 200 and r.body == ENCODED["gzip"]
    assert encoding_of(r) is None, "a .gz file asked for by name must not claim Content-Encoding"


def test_variants_on_one_connection(pre_server):
    with Conn(pre_server) as c:
        for ae, enc in (("br", "br"), ("identity", None), ("gzip", "gzip"), ("zstd", "zstd")):
            c.send(request("GET", "/x.css", headers=[("Accept-Encoding", ae)]))
            assert_variant(c.read(), enc)


def test_sibling_that_appears_later_is_offered(pre_server, docroot):
    """The header lines of a file's plain answer are kept with it (issue 15): a sibling that
    appears later must still bring Vary, and be served, within the second the server takes to
    see it."""
    with Conn(pre_server) as c:
        for _ in range(3):
            r = c.request("GET", "/z.css")
            assert r.body == CSS and r.header("vary") is None
        (docroot / "z.css.gz").write_bytes(ENCODED["gzip"])
        assert wait_for(lambda: "accept-encoding" in c.request("GET", "/z.css").tokens("vary"))
        r = c.request("GET", "/z.css")
        assert r.body == CSS and encoding_of(r) is None
        c.send(request("GET", "/z.css", headers=[("Accept-Encoding", "gzip")]))
        r = c.read()
        assert r.body == ENCODED["gzip"] and encoding_of(r) == "gzip"


def test_missing_original_is_404_even_with_sibling(make_server, docroot):
    (docroot / "only.css.gz").write_bytes(gzip.compress(b"x"))
    server = make_server(docroot)
    r = get(server, "gzip", path="/only.css")
    assert r.status == 404, r.headers


def test_directory_index_has_precompressed_sibling(make_server, docroot):
    gz = gzip.compress(INDEX_HTML, mtime=0)
    (docroot / "index.html.gz").write_bytes(gz)
    server = make_server(docroot)
    r = get(server, "gzip", path="/")
    assert r.status == 200 and r.body == gz and encoding_of(r) == "gzip"
    assert r.header("content-type").lower().startswith("text/html")
    r = get(server, None, path="/")
    assert r.body == INDEX_HTML and "accept-encoding" in r.tokens("vary")
