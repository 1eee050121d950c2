"""The transport seam (issue 11 item 5): a transport that does not keep file segments zero-copy
carries every kind of response unchanged, on both engines. The test build's "copy" transport
(RINGHTTPD_TEST_TRANSPORT=copy in build/ringhttpd-test, conftest's RINGHTTPD_TEST) does what
TLS does with buffers and sequencing, minus the cipher: received bytes reach HTTP/1 from its own
buffer, and a plan leaves as 16 KiB chunks copied from memory or pread from the file, one chunk
in flight at a time. The binary a user runs links neither test double (issue 26)."""

import hashlib
import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import BIG, HELLO, INDEX_HTML, RINGHTTPD, RINGHTTPD_TEST, Conn, fetch, request

ENV = {"RINGHTTPD_TEST_TRANSPORT": "copy"}


@pytest.fixture
def copy_server(make_server, docroot):
    srv = make_server(docroot, env=ENV, binary=RINGHTTPD_TEST)
    assert "test transport copy" in srv.stderr_text()
    return srv


def test_the_binary_a_user_runs_has_no_test_double(make_server, docroot):
    """Issue 26: the seams' test doubles are linked into the test build only. The binary a user
    runs has none of their symbols, and the variables that pick them change nothing."""
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    symbols = subprocess.run([nm, RINGHTTPD], capture_output=True, text=True, check=True).stdout
    names = {line.split()[-1] for line in symbols.splitlines() if line.strip()}
    doubles = {"transport_copy", "proto_lines", "transport_test_hook", "proto_test_hook"}
    assert not names & doubles, sorted(names & doubles)
    env = {**ENV, "RINGHTTPD_TEST_PROTO": "lines"}
    srv = make_server(docroot, env=env)
    assert "test transport" not in srv.stderr_text()
    assert "test protocol" not in srv.stderr_text()
    assert fetch(srv, "/hello.txt").body == HELLO


def test_small_and_large_files(copy_server):
    assert fetch(copy_server, "/hello.txt").body == HELLO
    r = fetch(copy_server, "/big.bin", timeout=20)
    assert r.status == 200 and r.body == BIG


def test_file_larger_than_memory_budget_by_sha256(make_server, docroot, random_file):
    """64 MiB through a 16 KiB buffer: the plan is turned into chunks with backpressure."""
    path, digest = random_file(64 << 20)
    os.link(path, docroot / "huge.bin")
    srv = make_server(docroot, env=ENV, binary=RINGHTTPD_TEST)
    with socket.create_connection(srv.addr, timeout=30) as s:
        s.sendall(request("GET", "/huge.bin", close=True))
        data = bytearray()
        while chunk := s.recv(1 << 20):
            data += chunk
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert b"Content-Length: %d" % (64 << 20) in head
    assert hashlib.sha256(body).hexdigest() == digest


def test_ranges_single_and_multipart(copy_server):
    r = fetch(copy_server, "/big.bin", headers=["Range: bytes=100000-100099"])
    assert r.status == 206 and r.body == BIG[100000:100100]
    r = fetch(copy_server, "/big.bin", headers=["Range: bytes=0-9,500000-500009"])
    assert r.status == 206
    assert BIG[0:10] in r.body and BIG[500000:500010] in r.body
    assert r.header("content-type").startswith("multipart/byteranges")


def test_pipelining_keep_alive_and_close_rules(copy_server):
    with Conn(copy_server, timeout=20) as c:
        c.send(request("GET", "/hello.txt") + request("HEAD", "/big.bin") +
               request("GET", "/big.bin") + request("GET", "/missing") + request("GET", "/"))
        a, b, d, e, f = c.read_many(["GET", "HEAD", "GET", "GET", "GET"])
        assert a.body == HELLO
        assert b.status == 200 and b.body == b""
        assert d.body == BIG
        assert e.status == 404
        assert f.body == INDEX_HTML
        assert c.is_open()
        # A body on GET is read and dropped; the connection stays usable.
        c.send(request("GET", "/hello.txt", headers=["Content-Length: 5"], body=b"abcde"))
        assert c.read().body == HELLO
        # A malformed request: 400, then the server closes.
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\nbad header\r\n\r\n")
        assert c.read(allow_close=True).status == 400
        c.expect_close()


def test_conditional_and_head(copy_server):
    r = fetch(copy_server, "/hello.txt")
    etag = r.header("etag")
    r = fetch(copy_server, "/hello.txt", headers=[f"If-None-Match: {etag}"])
    assert r.status == 304 and r.body == b""
    r = fetch(copy_server, "/hello.txt", method="HEAD")
    assert r.status == 200 and r.header("content-length") == "1024" and r.body == b""


# ---------------------------------------------------------------------------------------------
# The protocol seam (issue 11 item 5): a second protocol takes a connection over after the
# HTTP/2 preface and answers through serve and the core unchanged. The server's test-only
# "lines" protocol (RINGHTTPD_TEST_PROTO=lines) stands in for HTTP/2: one request per line
# ("GET /path"), every complete request served at once (several responses held, as streams
# are), each answered as "STATUS n", its field lines, "BODY len", then the body.

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def lines_exchange(srv, chunks, timeout=20):
    with socket.create_connection(srv.addr, timeout=timeout) as s:
        for chunk in chunks:
            s.sendall(chunk)
            time.sleep(0.05)
        s.shutdown(socket.SHUT_WR)
        data = bytearray()
        while chunk := s.recv(1 << 20):
            data += chunk
    out, rest = [], bytes(data)
    while rest:
        line, rest = rest.split(b"\n", 1)
        assert line.startswith(b"STATUS "), line
        status, fields = int(line[7:]), []
        while True:
            line, rest = rest.split(b"\n", 1)
            if line.startswith(b"BODY "):
                n = int(line[5:])
                out.append((status, fields, rest[:n]))
                rest = rest[n:]
                break
            name, _, value = line.partition(b": ")
            fields.append((name.decode(), value.decode()))
    return out


@pytest.fixture(params=["clear", "copy"])
def lines_server(request, make_server, docroot):
    env = {"RINGHTTPD_TEST_PROTO": "lines"}
    if request.param == "copy":
        env.update(ENV)
    srv = make_server(docroot, env=env, binary=RINGHTTPD_TEST)
    assert "test protocol lines" in srv.stderr_text()
    return srv


def test_second_protocol_answers_through_serve(lines_server):
    rs = lines_exchange(lines_server, [PREFACE + b"GET /hello.txt\nHEAD /big.bin\nGET /big.bin\n"
                                       b"GET /missing\nGET /sub\n"])
    assert [r[0] for r in rs] == [200, 200, 200, 404, 301]
    hello, head, big, missing, moved = rs
    assert hello[2] == HELLO and ("content-length", "1024") in hello[1]
    assert head[2] == b"" and ("content-length", str(len(BIG))) in head[1]
    assert big[2] == BIG
    assert b"404" in missing[2]
    assert ("location", "/sub/") in moved[1]
    for _, fields, _ in rs:  # the HTTP/1-only fields are not in the structured response
        names = {n for n, _ in fields}
        assert "connection" not in names and "keep-alive" not in names
        assert "date" in names and "server" in names


def test_preface_split_across_reads(lines_server):
    rs = lines_exchange(lines_server, [PREFACE[:5], PREFACE[5:17], PREFACE[17:] + b"GET /\n"])
    assert [(r[0], r[2]) for r in rs] == [(200, INDEX_HTML)]


def test_http1_unchanged_beside_it(lines_server):
    assert fetch(lines_server, "/hello.txt").body == HELLO
    with Conn(lines_server) as c:
        c.send(request("GET", "/hello.txt") + request("GET", "/"))
        assert [r.body for r in c.read_many(["GET", "GET"])] == [HELLO, INDEX_HTML]
