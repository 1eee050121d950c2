"""GET and HEAD of files, directory indexes and redirects, the standard headers, MIME types and
the plain error statuses (issue 2, "HTTP behaviour")."""

import contextlib
import hashlib
import os
import socket
import ssl
import time
import urllib.parse

import pytest

from conftest import (BIG, ETAG_RE, HELLO, HELLO_LAST_MODIFIED, IMF_FIXDATE, INDEX_HTML,
                      SUB_INDEX_HTML, UNICODE_NAME, Conn, connect, fetch, parse_http_date,
                      recv_all, request, wait_for)

# Issue 14: each server test runs over TLS too (conftest: scheme).
pytestmark = pytest.mark.schemes("http", "https")


def test_get_file(server):
    r = fetch(server, "/hello.txt")
    assert r.status == 200
    assert r.body == HELLO
    assert r.header("content-length") == "1024"


def test_get_root_serves_index(server):
    r = fetch(server, "/")
    assert r.status == 200
    assert r.body == INDEX_HTML
    assert r.header("content-type").lower().startswith("text/html")


def test_get_subdir_serves_its_index(server):
    r = fetch(server, "/sub/")
    assert r.status == 200
    assert r.body == SUB_INDEX_HTML


@pytest.mark.parametrize("target,location_path,query", [
    ("/sub", "/sub/", ""),
    ("/sub?a=1&b=two%20words", "/sub/", "a=1&b=two%20words"),
    ("/noindex", "/noindex/", ""),
    ("/noindex/cdir?x", "/noindex/cdir/", "x"),
])
def test_directory_without_slash_redirects_keeping_query(server, target, location_path, query):
    r = fetch(server, target)
    assert r.status == 301
    loc = r.header("location")
    assert loc, r
    parts = urllib.parse.urlsplit(loc)
    assert parts.path == location_path
    assert parts.query == query
    if parts.netloc:
        assert parts.scheme == "http"


def test_redirect_follows_to_index(server):
    r = fetch(server, "/sub")
    loc = urllib.parse.urlsplit(r.header("location"))
    r2 = fetch(server, loc.path)
    assert r2.status == 200 and r2.body == SUB_INDEX_HTML


def test_head_has_same_headers_and_no_body(server):
    get = fetch(server, "/hello.txt")
    # fetch() with HEAD tells h11 no body follows, then asserts the server closes with no stray
    # byte: a body sent after a HEAD response fails here.
    head = fetch(server, "/hello.txt", method="HEAD")
    assert head.status == 200
    assert head.body == b""

    def comparable(resp):
        return sorted((n, v) for n, v in resp.headers if n != "date")

    assert comparable(head) == comparable(get)
    assert head.header("content-length") == "1024"


def test_head_of_index_and_big_file(server):
    for path, size in (("/", len(INDEX_HTML)), ("/big.bin", len(BIG))):
        r = fetch(server, path, method="HEAD")
        assert r.status == 200
        assert r.header("content-length") == str(size)


def test_head_then_get_on_one_connection(server):
    """A HEAD answered with a body would be read as the start of the next response."""
    with Conn(server) as c:
        c.send(request("HEAD", "/big.bin"))
        h = c.read("HEAD")
        assert h.status == 200 and h.body == b""
        c.send(request("GET", "/hello.txt"))
        g = c.read("GET")
        assert g.status == 200 and g.body == HELLO


def test_date_moves_on_for_a_file_asked_for_again_and_again(server):
    """A small file's whole answer is kept per second and sent from there (issue 15): the Date
    must still move on, for GET and HEAD alike, on one keep-alive connection."""
    with Conn(server) as c:
        first = c.request("GET", "/hello.txt")
        assert first.body == HELLO
        since = parse_http_date(first.header("date"))

        def moved_on():
            for method, body in (("GET", HELLO), ("HEAD", b"")):
                r = c.request(method, "/hello.txt")
                assert (r.status, r.body) == (200, body)
                assert r.header("content-length") == "1024"
            return parse_http_date(r.header("date")) > since

        assert wait_for(moved_on)


def test_standard_headers(server):
    r = fetch(server, "/hello.txt")
    date = r.header("date")
    assert date and IMF_FIXDATE.match(date), date
    assert abs(parse_http_date(date) - time.time()) < 300
    assert r.header("server")
    ctype = r.header("content-type").lower().replace(" ", "")
    assert ctype.startswith("text/plain")
    assert "charset=utf-8" in ctype
    assert r.header("last-modified") == HELLO_LAST_MODIFIED
    etag = r.header("etag")
    assert etag and ETAG_RE.match(etag) and not etag.startswith("W/"), etag
    for name in ("date", "server", "content-type", "content-length", "last-modified", "etag"):
        assert len(r.header_all(name)) == 1, f"{name} sent {len(r.header_all(name))} times"


def test_last_modified_matches_file_mtime(server, docroot):
    os.utime(docroot / "noext", (1700000000, 1700000000))
    r = fetch(server, "/noext")
    assert r.header("last-modified") == "Tue, 14 Nov 2023 22:13:20 GMT"


TEXT_TYPES = {
    "index.html": ("text/html",),
    "page.htm": ("text/html",),
    "hello.txt": ("text/plain",),
    "style.css": ("text/css",),
    "app.js": ("text/javascript", "application/javascript"),
    "mod.mjs": ("text/javascript", "application/javascript"),
    "feed.xml": ("text/xml", "application/xml"),
}
BINARY_TYPES = {
    "data.json": ("application/json",),
    "image.png": ("image/png",),
    "photo.jpg": ("image/jpeg",),
    "anim.gif": ("image/gif",),
    "icon.svg": ("image/svg+xml",),
    "pic.webp": ("image/webp",),
    "pic.avif": ("image/avif",),
    "font.woff2": ("font/woff2",),
    "font.woff": ("font/woff", "application/font-woff"),
    "code.wasm": ("application/wasm",),
    "doc.pdf": ("application/pdf",),
    "archive.zip": ("application/zip",),
    "clip.mp4": ("video/mp4",),
    "noext": ("application/octet-stream",),
    "file.unknownext": ("application/octet-stream",),
}


def media_type(resp):
    return resp.header("content-type").split(";")[0].strip().lower()


@pytest.mark.parametrize("name", sorted(TEXT_TYPES))
def test_mime_text_types_have_utf8_charset(server, name):
    r = fetch(server, "/" + name)
    assert r.status == 200
    assert media_type(r) in TEXT_TYPES[name], r.header("content-type")
    assert "charset=utf-8" in r.header("content-type").lower().replace(" ", "")


def test_mime_table_samples(server):
    wrong = {}
    for name, accepted in BINARY_TYPES.items():
        r = fetch(server, "/" + name)
        assert r.status == 200, name
        if media_type(r) not in accepted:
            wrong[name] = r.header("content-type")
    assert not wrong, f"unexpected Content-Type for: {wrong}"


def test_unicode_and_space_in_name(server):
    path = "/" + urllib.parse.quote(UNICODE_NAME)
    r = fetch(server, path)
    assert r.status == 200
    assert r.body == b"spaces and unicode in the name\n"


def test_percent_encoded_plain_characters_are_decoded(server):
    r = fetch(server, "/%68ello%2Etxt")
    assert r.status == 200 and r.body == HELLO


def test_query_string_is_not_part_of_the_path(server):
    r = fetch(server, "/hello.txt?v=123&x=%2F..%2F")
    assert r.status == 200 and r.body == HELLO


def test_dot_segments_and_double_slashes_inside_root(server):
    for target in ("//hello.txt", "/./hello.txt", "/sub/../hello.txt", "/sub//./../hello.txt"):
        r = fetch(server, target)
        assert r.status == 200, target
        assert r.body == HELLO, target


def test_absolute_form_target(server):
    r = fetch(server, "http://localhost/hello.txt")
    assert r.status == 200 and r.body == HELLO


def test_http10_without_host(server):
    r = fetch(server, "/hello.txt", version="1.0", host=None)
    assert r.status == 200 and r.body == HELLO


def test_404(server):
    r = fetch(server, "/does-not-exist.html")
    assert r.status == 404
    assert r.header("content-type").lower().startswith("text/html")
    assert len(r.body) > 0


def test_404_for_file_with_trailing_slash_and_missing_dirs(server):
    assert fetch(server, "/hello.txt/").status == 404
    assert fetch(server, "/no/such/dir/file.txt").status == 404


def test_head_404_has_no_body(server):
    r = fetch(server, "/missing", method="HEAD")
    assert r.status == 404 and r.body == b""


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_405_with_allow(server, method):
    r = fetch(server, "/hello.txt", method=method, headers=[("Content-Length", "0")])
    assert r.status == 405
    allow = r.tokens("allow")
    assert {"get", "head"} <= allow, r.header("allow")
    assert method.lower() not in allow


def test_post_with_body_gets_405_and_no_side_effect(server, docroot):
    r = fetch(server, "/new.txt", method="POST",
              headers=[("Content-Length", "5")], body=b"hello")
    assert r.status == 405
    assert not (docroot / "new.txt").exists()


def test_empty_file(server):
    r = fetch(server, "/empty.txt")
    assert r.status == 200
    assert r.header("content-length") == "0"
    assert r.body == b""


def test_1mib_file_byte_exact(server):
    r = fetch(server, "/big.bin")
    assert r.status == 200
    assert r.header("content-length") == str(len(BIG))
    assert len(r.body) == len(BIG)
    assert r.body == BIG


def test_1mib_file_twice_on_one_connection(server):
    with Conn(server) as c:
        for _ in range(2):
            c.send(request("GET", "/big.bin"))
            r = c.read()
            assert r.status == 200 and r.body == BIG


@pytest.mark.slow
def test_64mib_file_byte_exact(make_server, docroot, random_file):
    src, want = random_file(64 << 20)
    os.link(src, docroot / "huge.bin")
    server = make_server(docroot)
    r = fetch(server, "/huge.bin", timeout=60)
    assert r.status == 200
    assert r.header("content-length") == str(64 << 20)
    assert len(r.body) == 64 << 20
    assert hashlib.sha256(r.body).hexdigest() == want


def test_tiny_file_cache_still_serves_exactly(make_server, docroot):
    """With a cache too small to hold anything, every file goes the uncached way."""
    server = make_server(docroot, args=["--cache-size", "4K"])
    with Conn(server) as c:
        for _ in range(2):
            for path, want in (("/hello.txt", HELLO), ("/big.bin", BIG), ("/", INDEX_HTML),
                               ("/empty.txt", b"")):
                c.send(request("GET", path))
                r = c.read()
                assert r.status == 200 and r.body == want, path
        c.send(request("GET", "/big.bin", headers=[("Range", "bytes=1000-1999")]))
        r = c.read()
        assert r.status == 206 and r.body == BIG[1000:2000]


def test_redirect_keeps_percent_encoding(make_server, docroot):
    (docroot / "my dir").mkdir()
    (docroot / "my dir" / "index.html").write_bytes(b"in my dir\n")
    server = make_server(docroot)
    r = fetch(server, "/my%20dir?q=a%20b")
    assert r.status == 301
    loc = r.header("location")
    assert " " not in loc
    parts = urllib.parse.urlsplit(loc)
    assert parts.path == "/my%20dir/" and parts.query == "q=a%20b"
    assert fetch(server, parts.path).body == b"in my dir\n"


def test_head_of_redirect_has_no_body(server):
    r = fetch(server, "/sub", method="HEAD")
    assert r.status == 301 and r.body == b"" and r.header("location")


def test_index_with_query(server):
    assert fetch(server, "/?x=1").body == INDEX_HTML
    assert fetch(server, "/sub/?x=1").body == SUB_INDEX_HTML


def test_mime_lookup_ignores_extension_case(make_server, docroot):
    # nginx lower-cases the extension before looking it up; so do users' cameras (.JPG).
    (docroot / "PHOTO.JPG").write_bytes(b"\xff\xd8\xff")
    (docroot / "Style.CSS").write_bytes(b"a{}")
    server = make_server(docroot)
    assert media_type(fetch(server, "/PHOTO.JPG")) == "image/jpeg"
    assert media_type(fetch(server, "/Style.CSS")) == "text/css"


def test_empty_host_header_is_valid(server):
    with Conn(server) as c:
        c.send(b"GET /hello.txt HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n")
        r = c.read()
        assert r.status == 200 and r.body == HELLO


def test_long_file_name(make_server, docroot):
    name = "n" * 250 + ".txt"
    (docroot / name).write_bytes(b"long name\n")
    server = make_server(docroot)
    assert fetch(server, "/" + name).body == b"long name\n"
    # A segment longer than NAME_MAX names no file: 404 (as nginx), not 414 (the URI is short).
    assert fetch(server, "/" + "m" * 300 + ".txt").status == 404
    assert fetch(server, "/sub/" + "m" * 300 + "/x.txt").status == 404
    # Still 404 with the keep-alive connection intact afterwards.
    with Conn(server) as c:
        assert c.request("GET", "/" + "%6d" * 300).status == 404
        assert c.request("GET", "/hello.txt").body == HELLO


def test_the_scheme_dimension_is_what_it_says(server, scheme):
    """Guards the TLS dimension itself: over https the helpers really speak TLS to the TLS port
    (cleartext sent there is refused), over http they do not."""
    with contextlib.closing(connect(server)) as s:
        assert isinstance(s, ssl.SSLSocket) == (scheme == "https")
    assert server.base_url.startswith(f"{scheme}://")
    if scheme == "https":
        with contextlib.closing(socket.create_connection(server.addr, timeout=5)) as s:
            s.sendall(request("GET", "/hello.txt", close=True))
            got = recv_all(s)
        assert got.startswith(b"HTTP/1.1 400"), got[:200]
        assert b"HTTPS port" in got
