"""Path safety (no way out of DOCROOT, hidden files hidden) and request smuggling defences
(issue 2, "Path safety" and "Request smuggling")."""

import os
import socket
import time

import pytest

from conftest import HELLO, INDEX_HTML, OUTSIDE_CONTENT, SECRET_CONTENT, Conn, fetch, \
    parse_response, raw, request

OUTSIDE_MARK = OUTSIDE_CONTENT.split(b":")[0]
SECRET_MARK = SECRET_CONTENT.split(b":")[0]

TRAVERSALS = [
    "/../outside.txt",
    "/../../outside.txt",
    "/sub/../../outside.txt",
    "/sub/../../../outside.txt",
    "/./../outside.txt",
    "//../outside.txt",
    "/%2e%2e/outside.txt",
    "/%2E%2E/outside.txt",
    "/.%2e/outside.txt",
    "/%2e./outside.txt",
    "/..%2foutside.txt",
    "/..%2Foutside.txt",
    "/%2e%2e%2foutside.txt",
    "/sub/%2e%2e/%2e%2e/outside.txt",
    "/sub%2f..%2f..%2foutside.txt",
    "/..%5coutside.txt",
    "/..\\outside.txt",
    "/%252e%252e/outside.txt",
    "/%c0%ae%c0%ae/outside.txt",
    "/....//outside.txt",
    "/..;/outside.txt",
    "/sub/..%2f..%2foutside.txt",
    "http://localhost/../outside.txt",
    "http://localhost/%2e%2e/outside.txt",
    "/outdir/outside.txt",
    "/outdir/root/hello.txt/../../outside.txt",
    "/link-out.txt",
    "/link-out-abs.txt",
    "/../../../../../../../../etc/passwd",
    "/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
]


@pytest.mark.parametrize("target", TRAVERSALS)
def test_no_escape_from_docroot(server, target):
    data = raw(server, request("GET", target, close=True), timeout=3)
    assert data, f"no response at all to {target}"
    assert OUTSIDE_MARK not in data, f"{target} served a file outside the docroot"
    assert b"root:x:0:0" not in data, f"{target} served /etc/passwd"
    r, rest = parse_response(data)
    assert rest == b""
    assert r.status == 404, f"{target}: {r.status}"


def test_traversal_never_leaks_on_one_connection(server):
    """All traversals on kept-alive connections, every response parsed strictly."""
    c = Conn(server)
    try:
        for target in TRAVERSALS:
            c.send(request("GET", target))
            r = c.read()
            assert r.status == 404 and r.keep_alive, f"{target}: {r.status}"
            assert OUTSIDE_MARK not in r.body, target
    finally:
        c.close()


def test_symlink_out_of_docroot_is_refused(server):
    for target in ("/link-out.txt", "/link-out-abs.txt", "/outdir/outside.txt",
                   "/outdir/root/hello.txt"):
        r = fetch(server, target)
        assert r.status == 404, f"{target}: {r.status}"
        assert OUTSIDE_MARK not in r.body
    # HEAD must not reveal the outside file's size either.
    r = fetch(server, "/link-out.txt", method="HEAD")
    assert r.status == 404
    assert r.header("content-length") != str(len(OUTSIDE_CONTENT))


def test_symlink_inside_docroot_still_works(make_server, docroot):
    (docroot / "alias.txt").symlink_to("hello.txt")
    (docroot / "subalias").symlink_to("sub", target_is_directory=True)
    server = make_server(docroot)
    assert fetch(server, "/alias.txt").body == HELLO
    assert fetch(server, "/subalias/inner.txt").body == b"inner file\n"


@pytest.mark.parametrize("target", [
    "/.secret", "/%2esecret", "/%2Esecret", "/sub/.hidden", "/sub/%2ehidden",
    "/sub/../.secret", "/./.secret", "/.well-known/../.secret", "/.well-known/../sub/.hidden",
    "/.secret?x=1", "/sub/.hidden/", "/.git/config", "/.well-known/.secret",
])
def test_hidden_files_are_404(server, target):
    r = fetch(server, target)
    assert r.status == 404, f"{target}: {r.status}"
    assert SECRET_MARK not in r.body


def test_hidden_directory_contents_are_404(make_server, docroot):
    (docroot / ".git").mkdir()
    (docroot / ".git" / "config").write_bytes(SECRET_CONTENT)
    (docroot / "sub" / ".private").mkdir()
    (docroot / "sub" / ".private" / "key.txt").write_bytes(SECRET_CONTENT)
    server = make_server(docroot)
    for target in ("/.git/config", "/.git/", "/.git", "/sub/.private/key.txt",
                   "/sub/%2eprivate/key.txt"):
        r = fetch(server, target)
        assert r.status == 404, target
        assert SECRET_MARK not in r.body


def test_well_known_is_served(server):
    r = fetch(server, "/.well-known/test.txt")
    assert r.status == 200 and r.body == b"well-known content\n"
    r = fetch(server, "/%2ewell-known/test.txt")
    assert r.status == 200 and r.body == b"well-known content\n"


def test_well_known_only_at_the_top(make_server, docroot):
    (docroot / "sub" / ".well-known").mkdir()
    (docroot / "sub" / ".well-known" / "x.txt").write_bytes(SECRET_CONTENT)
    server = make_server(docroot)
    r = fetch(server, "/sub/.well-known/x.txt")
    assert r.status == 404 and SECRET_MARK not in r.body


# ---------------------------------------------------------------------------------------------
# Request smuggling.

def expect_400_close(server, data):
    with Conn(server) as c:
        c.send(data, ignore_errors=True)
        r = c.read()
        assert r.status == 400, r
        c.expect_close()


SMUGGLED = request("GET", "/.secret")  # would be a 404 if it were ever parsed as a request


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_content_length_with_transfer_encoding_is_400_and_close(server, method):
    body = b"0\r\n\r\n" + SMUGGLED
    expect_400_close(server, request(method, "/hello.txt", headers=[
        f"Content-Length: {len(body)}", "Transfer-Encoding: chunked"], body=body))
    expect_400_close(server, request(method, "/hello.txt", headers=[
        "Transfer-Encoding: chunked", f"Content-Length: {len(body)}"], body=body))


@pytest.mark.parametrize("headers", [
    ["Content-Length: 5", "Content-Length: 6"],
    ["Content-Length: 6", "Content-Length: 5"],
    ["Content-Length: 5, 6"],
])
def test_differing_content_lengths_are_400(server, headers):
    expect_400_close(server, request("GET", "/hello.txt", headers=headers, body=b"hello!"))


def test_get_body_is_discarded_not_parsed(server):
    body = SMUGGLED
    with Conn(server) as c:
        c.send(request("GET", "/hello.txt", headers=[f"Content-Length: {len(body)}"], body=body)
               + request("GET", "/", close=True))
        a = c.read()
        b = c.read()
        assert a.status == 200 and a.body == HELLO
        assert b.status == 200 and b.body == INDEX_HTML, "the body was parsed as a request"
        c.expect_close()


def test_head_body_is_discarded_not_parsed(server):
    body = SMUGGLED
    with Conn(server) as c:
        c.send(request("HEAD", "/hello.txt", headers=[f"Content-Length: {len(body)}"],
                       body=body) + request("GET", "/", close=True))
        a = c.read("HEAD")
        b = c.read()
        assert a.status == 200
        assert b.status == 200 and b.body == INDEX_HTML
        c.expect_close()


def test_get_body_arriving_in_pieces_is_discarded(server):
    body = SMUGGLED + b"x" * 3000
    with Conn(server) as c:
        c.send(request("GET", "/hello.txt", headers=[f"Content-Length: {len(body)}"]))
        a = c.read()
        assert a.status == 200 and a.body == HELLO
        for i in range(0, len(body), 700):
            c.send(body[i:i + 700])
            time.sleep(0.01)
        c.send(request("GET", "/sub/inner.txt"))
        b = c.read()
        assert b.status == 200 and b.body == b"inner file\n"


def test_identical_duplicate_content_length_is_accepted(server):
    body = SMUGGLED
    n = len(body)
    with Conn(server) as c:
        c.send(request("GET", "/hello.txt", headers=[f"Content-Length: {n}",
                                                      f"Content-Length: {n}"], body=body)
               + request("GET", "/", close=True))
        a = c.read()
        if a.status == 400:  # rejecting it is also safe, if the connection is then closed
            c.expect_close()
            return
        assert a.status == 200 and a.body == HELLO
        b = c.read()
        assert b.status == 200 and b.body == INDEX_HTML
        c.expect_close()


def test_error_response_body_is_not_parsed_either(server):
    """A 404 for a GET with a body must still consume that body."""
    body = SMUGGLED
    with Conn(server) as c:
        c.send(request("GET", "/missing", headers=[f"Content-Length: {len(body)}"], body=body)
               + request("GET", "/hello.txt", close=True))
        a = c.read()
        assert a.status == 404
        b = c.read()
        assert b.status == 200 and b.body == HELLO
        c.expect_close()


def test_redirect_location_has_no_header_injection(server):
    r = fetch(server, "/sub?a=%0d%0aX-Injected:%201")
    assert r.status == 301
    assert r.header("x-injected") is None
    assert "\r" not in r.header("location") and "\n" not in r.header("location")


def test_chunked_get_body_is_never_parsed_as_a_request(server):
    """A chunked body on a GET: the request is answered and the connection closed without the
    body being read; the request hidden in it is never answered."""
    chunk = SMUGGLED
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(chunk), chunk)
    with Conn(server) as c:
        c.send(request("GET", "/hello.txt", headers=["Transfer-Encoding: chunked"], body=body)
               + request("GET", "/", close=True), ignore_errors=True)
        a = c.read()
        assert a.status == 200 and a.body == HELLO and not a.keep_alive, a
        c.expect_close()


def test_fifo_and_socket_in_docroot_do_not_block_the_worker(make_server, docroot):
    """Opening a FIFO for reading blocks until a writer comes: one worker must not hang on it."""
    os.mkfifo(docroot / "pipe.txt")
    sock_path = docroot / "unix.sock"
    us = socket.socket(socket.AF_UNIX)
    us.bind(str(sock_path))
    server = make_server(docroot, args=["-t", "1"])
    try:
        r = fetch(server, "/pipe.txt")
        assert r.status == 403, f"FIFO: {r.status}"
        # open() of a socket fails with ENXIO, which the server answers with 500 (as nginx does).
        r = fetch(server, "/unix.sock")
        assert r.status == 500, f"socket: {r.status}"
        assert fetch(server, "/hello.txt").body == HELLO
    finally:
        us.close()


@pytest.mark.parametrize("size", [40000, 200000])
def test_large_get_body_is_discarded_or_connection_closed(server, size):
    """A big body on a GET is discarded (bounded: 200000 bytes still are) and the connection kept;
    the requests inside it are never answered."""
    body = (SMUGGLED * (size // len(SMUGGLED) + 1))[:size]
    with Conn(server, timeout=10) as c:
        c.send(request("GET", "/hello.txt", headers=[f"Content-Length: {size}"]), )
        c.send(body, ignore_errors=True)
        c.send(request("GET", "/", close=True), ignore_errors=True)
        a = c.read()
        assert a.status == 200 and a.body == HELLO and a.keep_alive, a
        b = c.read()
        assert b.status == 200 and b.body == INDEX_HTML, "the body was parsed as requests"
        c.expect_close()


# Open redirects (issue 10, item 1): the 301 to a directory's slash form must name a path on
# this server whatever the target looked like; a Location starting with "//" or "/\" sends a
# browser to another host.
OPEN_REDIRECTS = [
    ("//evil.example/..%2fsub", "/sub/"),
    ("//evil.example/../sub", "/sub/"),
    ("///evil.example/..%2f..%2fsub", "/sub/"),
    ("/%2fevil.example/..%2fsub", "/sub/"),
    ("/%2F%2Fevil.example%2F..%2Fsub", "/sub/"),
    ("/\\evil.example/..%2fsub", "/sub/"),
    ("/%5cevil.example/..%2fsub", "/sub/"),
    ("/%5C%5Cevil.example/..%2fsub", "/sub/"),
    ("http://evil.example//evil.example/..%2fsub", "/sub/"),
    ("http://evil.example/sub", "/sub/"),
    ("https://evil.example/%2f%2fsub", "/sub/"),
    ("/../../../sub", "/sub/"),
    ("/sub/../../noindex/cdir", "/noindex/cdir/"),
    ("//sub?next=//evil.example", "/sub/?next=//evil.example"),
]


@pytest.mark.parametrize("target,location", OPEN_REDIRECTS)
def test_redirect_location_is_a_local_path(server, target, location):
    data = f"GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode()
    r, _ = parse_response(raw(server, data))
    assert r.status == 301
    loc = r.header("location")
    assert loc == location
    assert loc.startswith("/") and not loc.startswith("//") and "\\" not in loc


def test_redirect_location_of_a_backslash_directory_is_encoded(make_server, docroot):
    """A directory whose name holds a backslash: the Location encodes it (browsers treat a raw
    "/\\" like "//"), and following it reaches the directory."""
    (docroot / "\\evil.example").mkdir()
    (docroot / "\\evil.example" / "index.html").write_bytes(b"local\n")
    server = make_server(docroot)
    r, _ = parse_response(raw(server, b"GET /\\evil.example HTTP/1.1\r\nHost: x\r\n"
                                      b"Connection: close\r\n\r\n"))
    assert r.status == 301
    assert r.header("location") == "/%5Cevil.example/"
    assert fetch(server, "/%5Cevil.example/").body == b"local\n"
