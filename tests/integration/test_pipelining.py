"""Pipelined requests are answered in order, and a request split across any number of reads is
parsed correctly (issue 2; seHTTPd answered 1 of 3 pipelined requests)."""

import time

import pytest

from conftest import BIG, HELLO, INDEX_HTML, SUB_INDEX_HTML, Conn, request

# Issue 14: each server test runs over TLS too (conftest: scheme).
pytestmark = pytest.mark.schemes("http", "https")

FILES = [("/hello.txt", HELLO), ("/", INDEX_HTML), ("/sub/", SUB_INDEX_HTML),
         ("/sub/inner.txt", b"inner file\n"), ("/empty.txt", b""),
         ("/noindex/a.txt", b"file a\n")]


def test_three_pipelined_requests_in_one_write(server):
    with Conn(server) as c:
        c.send(request("GET", "/hello.txt") + request("GET", "/") + request("GET", "/sub/"))
        rs = c.read_many(["GET"] * 3)
        assert [r.status for r in rs] == [200, 200, 200]
        assert [r.body for r in rs] == [HELLO, INDEX_HTML, SUB_INDEX_HTML]
        assert c.is_open()


def test_fifty_pipelined_requests_in_order(server):
    order = [FILES[(i * 7) % len(FILES)] for i in range(50)]
    with Conn(server, timeout=10) as c:
        c.send(b"".join(request("GET", p) for p, _ in order))
        for i, (path, want) in enumerate(order):
            r = c.read()
            assert r.status == 200, (i, path)
            assert r.body == want, f"response {i} is not {path}"


def test_pipelined_with_head_in_the_middle(server):
    with Conn(server) as c:
        c.send(request("GET", "/hello.txt") + request("HEAD", "/big.bin") +
               request("GET", "/") + request("HEAD", "/hello.txt") + request("GET", "/sub/"))
        a, b, d, e, f = c.read_many(["GET", "HEAD", "GET", "HEAD", "GET"])
        assert a.body == HELLO
        assert b.status == 200 and b.body == b"" and b.header("content-length") == str(len(BIG))
        assert d.body == INDEX_HTML
        assert e.status == 200 and e.header("content-length") == "1024"
        assert f.body == SUB_INDEX_HTML


def test_pipelined_mixed_statuses(server):
    with Conn(server) as c:
        c.send(request("GET", "/missing") + request("GET", "/sub") +
               request("POST", "/hello.txt", headers=["Content-Length: 3"], body=b"abc") +
               request("GET", "/hello.txt"))
        rs = c.read_many(["GET", "GET", "POST", "GET"])
        assert [r.status for r in rs[:2]] == [404, 301]
        assert rs[2].status == 405
        assert rs[3].status == 200 and rs[3].body == HELLO


def test_pipelined_large_responses(server):
    """Two 1 MiB bodies back to back: partial sends must resume, and in order."""
    with Conn(server, timeout=20) as c:
        c.send(request("GET", "/big.bin") + request("GET", "/hello.txt") +
               request("GET", "/big.bin"))
        rs = c.read_many(["GET"] * 3)
        assert [r.body for r in rs] == [BIG, HELLO, BIG]


def test_pipelined_last_asks_close(server):
    with Conn(server) as c:
        c.send(request("GET", "/hello.txt") + request("GET", "/") +
               request("GET", "/sub/", close=True))
        rs = c.read_many(["GET"] * 3)
        assert [r.body for r in rs] == [HELLO, INDEX_HTML, SUB_INDEX_HTML]
        c.expect_close()


def test_requests_after_close_are_not_answered(server):
    with Conn(server) as c:
        c.send(request("GET", "/hello.txt", close=True) + request("GET", "/"))
        r = c.read()
        assert r.body == HELLO
        c.expect_close()


def test_pipelined_bad_request_stops_the_pipeline(server):
    with Conn(server) as c:
        c.send(request("GET", "/hello.txt") + b"NOT A REQUEST\r\n\r\n" + request("GET", "/"))
        ok = c.read()
        assert ok.status == 200 and ok.body == HELLO
        bad = c.read()
        assert bad.status == 400
        c.expect_close()


def _send_bytewise(c, data, pause=0.001):
    for i in range(len(data)):
        c.send(data[i:i + 1])
        if pause:
            time.sleep(pause)


def test_request_split_byte_by_byte(server):
    with Conn(server, timeout=10) as c:
        _send_bytewise(c, request("GET", "/hello.txt", headers=["User-Agent: bytewise",
                                                                "Accept: */*"]))
        r = c.read()
        assert r.status == 200 and r.body == HELLO
        # Twice on the same connection, the second with CRLFs split everywhere.
        _send_bytewise(c, request("GET", "/sub/inner.txt") + request("HEAD", "/"))
        a, b = c.read_many(["GET", "HEAD"])
        assert a.body == b"inner file\n"
        assert b.status == 200 and b.header("content-length") == str(len(INDEX_HTML))


def test_request_split_at_every_position(server):
    """The same request cut in two at every offset, on one connection."""
    data = request("GET", "/hello.txt", headers=["X-Split: 1"])
    with Conn(server, timeout=10) as c:
        for cut in range(1, len(data)):
            c.send(data[:cut])
            time.sleep(0.002)
            c.send(data[cut:])
            r = c.read()
            assert r.status == 200 and r.body == HELLO, f"cut at {cut}"


def test_bare_lf_line_endings(server):
    with Conn(server) as c:
        c.send(b"GET /hello.txt HTTP/1.1\nHost: x\n\nGET / HTTP/1.1\nHost: x\n\n")
        a, b = c.read_many(["GET", "GET"])
        assert a.body == HELLO and b.body == INDEX_HTML


def test_leading_empty_line_is_ignored(server):
    with Conn(server) as c:
        c.send(request("GET", "/hello.txt") + b"\r\n" + request("GET", "/"))
        a, b = c.read_many(["GET", "GET"])
        assert a.body == HELLO and b.body == INDEX_HTML


def test_thousand_pipelined_requests(server):
    """Far more than one receive buffer of requests in one write: requests straddle buffers."""
    paths = [FILES[i % len(FILES)] for i in range(1000)]
    methods = ["HEAD" if i % 7 == 3 else "GET" for i in range(1000)]
    with Conn(server, timeout=20) as c:
        c.send(b"".join(request(m, p, headers=[f"X-Seq: {i}"])
                        for i, (m, (p, _)) in enumerate(zip(methods, paths))))
        answered = 0
        for i, (m, (p, want)) in enumerate(zip(methods, paths)):
            try:
                r = c.read(m)
            except pytest.fail.Exception as e:
                pytest.fail(f"after {answered} of 1000 pipelined responses: {e}")
            assert r.status == 200, (i, p)
            assert r.body == (b"" if m == "HEAD" else want), (i, p)
            answered += 1


def test_large_heads_straddling_buffers(server):
    """Heads of 12 KiB (under the 16 KiB limit), pipelined and split at odd places."""
    big_headers = [f"X-Fill-{i}: " + "v" * 1000 for i in range(12)]
    one = request("GET", "/hello.txt", headers=big_headers)
    assert 12000 < len(one) < 16000
    data = one * 3 + request("GET", "/")
    with Conn(server) as c:
        for i in range(0, len(data), 4093):
            c.send(data[i:i + 4093])
            time.sleep(0.002)
        rs = c.read_many(["GET"] * 4)
        assert [r.body for r in rs] == [HELLO, HELLO, HELLO, INDEX_HTML]
