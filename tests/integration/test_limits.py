"""Per-client limits and edge fields (issue 28): --limit-conn, --limit-req and --limit-req-for
keyed on the client address (127.0.0.1 and 127.0.0.2 are two clients), or on the forwarded one
behind --real-ip-from; --cors preflights and actual requests; --early-hints over HTTP/1.1, to
curl and Python's clients, and over HTTP/2. Every loop is bounded; the only waits are the
Retry-After a 429 names.
"""
import hashlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time

import h2.connection
import h2.events
import pytest

from conftest import Conn, StrictReader, request, wait_for
from test_accesslog import scrape


class ConnFrom(Conn):
    """A keep-alive connection to `server` from the local address `src` (127.0.0.0/8)."""

    def __init__(self, server, src, timeout=5.0):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.bind((src, 0))
        sock.connect(server.addr)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        StrictReader.__init__(self, sock, timeout)


def get(server, path="/index.html", src="127.0.0.1", headers=()):
    with ConnFrom(server, src) as c:
        return c.request("GET", path, headers=headers)


def counter(srv, name):
    return sum(v for k, v in scrape(srv).items() if k.startswith(name + "{"))


# ---- --limit-conn ------------------------------------------------------------------------------


def test_limit_conn_refuses_the_next_connection_of_one_address(make_server, docroot):
    srv = make_server(docroot, args=["--limit-conn", "2", "--metrics", "127.0.0.1:0"])
    held = [ConnFrom(srv, "127.0.0.1") for _ in range(2)]
    try:
        for c in held:  # a request each: accepted (TCP_DEFER_ACCEPT waits for bytes) and open
            assert c.request("GET", "/index.html").status == 200
        third = ConnFrom(srv, "127.0.0.1")
        third.send(request("GET", "/index.html"), ignore_errors=True)
        assert third.read_or_close() is None  # closed at accept, not a byte of an answer
        third.close()
        # another client is served meanwhile, and more than twice
        others = [ConnFrom(srv, "127.0.0.2") for _ in range(3)]
        for c in others:
            assert c.request("GET", "/index.html").status == 200
            c.close()
        assert counter(srv, "ringhttpd_limit_conn_refused_total") == 1
    finally:
        held[0].close()

    def served_again():
        with ConnFrom(srv, "127.0.0.1") as c:
            c.send(request("GET", "/index.html"), ignore_errors=True)
            r = c.read_or_close()
            return r is not None and r.status == 200

    assert wait_for(served_again, timeout=5)  # one closed: room for one more
    held[1].close()


def test_limit_conn_keys_on_the_address_with_the_access_log_off(make_server, docroot):
    """The client address is looked up once, at the accept, only when something reads it: the
    limits must ask for it themselves when the access log does not (else every client would
    share one key, and 127.0.0.2 would be refused with 127.0.0.1)."""
    # one worker: both addresses meet in one table (steering could put them apart)
    srv = make_server(docroot, args=["--limit-conn", "1", "--access-log", "off", "--threads", "1"])
    held = ConnFrom(srv, "127.0.0.1")
    try:
        assert held.request("GET", "/index.html").status == 200
        with ConnFrom(srv, "127.0.0.1") as second:
            second.send(request("GET", "/index.html"), ignore_errors=True)
            assert second.read_or_close() is None
        with ConnFrom(srv, "127.0.0.2") as other:
            assert other.request("GET", "/index.html").status == 200
    finally:
        held.close()


def test_limit_conn_is_exact_across_workers(make_server, docroot):
    """Two workers: the listeners steer one address to one worker, so its table counts all of
    the address's connections. With the kernel's hash they would split about 2 and 2 over the
    workers, each worker below 4, and the next ones would get in."""
    srv = make_server(docroot, args=["--limit-conn", "4"])
    assert srv.threads == 2
    held_then_refused(srv, "127.0.0.1", 4, 6, [200] * 4)


def held_then_refused(srv, src, n, tries, statuses):
    """n connections from src held open (a request each, the i-th answered with statuses[i]),
    then each of `tries` more closed at accept."""
    held = [ConnFrom(srv, src) for _ in range(n)]
    try:
        assert [c.request("GET", "/index.html").status for c in held] == statuses
        for _ in range(tries):
            with ConnFrom(srv, src) as extra:
                extra.send(request("GET", "/index.html"), ignore_errors=True)
                assert extra.read_or_close() is None
    finally:
        for c in held:
            c.close()


def test_a_reload_adds_limits_to_a_process_started_without_them(make_server, docroot, tmp_path):
    """SIGHUP with --limit-req and --limit-conn added to the file of a process started with
    neither: in force at once (it used to take a restart: the workers had made no tables, and
    limit-conn was reported as the process's), steered across the two workers, and for a
    connection open from before."""
    conf = tmp_path / "c.yaml"
    conf.write_text("compress: off\n")
    srv = make_server(docroot, args=["--config", str(conf)])
    assert srv.threads == 2
    old = ConnFrom(srv, "127.0.0.1")
    try:
        assert old.request("GET", "/index.html").status == 200
        conf.write_text("compress: off\nlimit-req: 1r/m\nlimit-conn: 2\n")
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: "reload (SIGHUP): serving" in srv.stderr_text())

        def refused_second():
            with ConnFrom(srv, "127.0.0.2") as c:
                c.request("GET", "/index.html")
                return c.request("GET", "/index.html").status == 429
        assert wait_for(refused_second)
        assert "next restart" not in srv.stderr_text()
        # from before the reload, its address known (the access log looked it up): counted
        assert [old.request("GET", "/index.html").status for _ in range(2)] == [200, 429]
        # every worker refuses the third: steered since the reload
        held_then_refused(srv, "127.0.0.3", 2, 4, [200, 429])  # 1r/m, no burst: the 2nd is over
    finally:
        old.close()


@pytest.fixture
def activated(make_server, docroot):
    """A server started as systemd's socket activation starts it: the test holds the listening
    socket and hands it over as LISTEN_FDS fd 3 (test_operations' harness); two workers
    accept from it, nothing steers."""
    holders = []

    def start(args):
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen(64)
        holders.append(holder)
        wrapper = [sys.executable, "-c", "import os, sys; os.dup2(int(sys.argv[1]), 3); "
                   "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1'); "
                   "os.execvp(sys.argv[2], sys.argv[2:])", str(holder.fileno())]
        srv = make_server(docroot, args=args, wrapper=wrapper, pass_fds=[holder.fileno()])
        assert "on sockets from systemd" in srv.stderr_text() and srv.threads == 2
        return srv

    yield start
    for h in holders:
        h.close()


def test_limits_are_exact_under_socket_activation(activated, docroot):
    """Both workers accept from systemd's socket, a client's connections reaching either: the
    workers count clients in one table (they counted per worker: the fifth connection, or the
    second request on another connection, got in where the other worker had seen less)."""
    (docroot / "api").mkdir()
    (docroot / "api" / "x.json").write_text("{}")
    srv = activated(["--limit-conn", "4", "--limit-req-for", "/api/* 1r/m"])
    held_then_refused(srv, "127.0.0.1", 4, 6, [200] * 4)
    assert [get(srv, "/api/x.json", src="127.0.0.2").status for _ in range(6)] == \
        [200] + [429] * 5
    assert get(srv, "/api/x.json", src="127.0.0.3").status == 200  # another client


def test_limit_conn_counts_requests_per_forwarded_address_behind_a_proxy(make_server, docroot,
                                                                        random_file):
    """Behind --real-ip-from, as nginx's limit_conn with realip: a proxy's connections are not
    one client's, so each request counts for its forwarded address while it is answered, and
    one past --limit-conn is a 503 with Retry-After (it used to be served: the proxy's
    connections were not counted at all). An idle keep-alive connection holds no count."""
    big, _ = random_file(1 << 20)
    os.link(big, docroot / "slow.bin")
    srv = make_server(docroot, args=["--limit-conn", "1", "--real-ip-from", "127.0.0.1",
                                     "--limit-rate", "64K", "--metrics", "127.0.0.1:0"])
    xff = lambda a: [("X-Forwarded-For", a)]  # noqa: E731
    slow = ConnFrom(srv, "127.0.0.1")
    try:  # a response in flight for 198.51.100.1 (paced: ~16 s, unread)
        slow.send(request("GET", "/slow.bin", headers=xff("198.51.100.1")))

        def refused():
            r = get(srv, headers=xff("198.51.100.1"))
            return r.status == 503 and r.header("retry-after") == "1"
        assert wait_for(refused)
        assert get(srv, headers=xff("198.51.100.2")).status == 200  # another client
        assert get(srv, src="127.0.0.2").status == 200  # a client not behind the proxy
        assert counter(srv, "ringhttpd_limit_conn_refused_total") >= 1
    finally:
        slow.close()
    # the response released with its connection: 198.51.100.1 served again, and a kept-alive
    # connection between requests counts for nobody
    with ConnFrom(srv, "127.0.0.1") as idle:
        assert wait_for(lambda: idle.request("GET", "/index.html",
                                             headers=xff("198.51.100.1")).status == 200)
        assert get(srv, headers=xff("198.51.100.1")).status == 200


# ---- --limit-req -------------------------------------------------------------------------------


def test_limit_req_burst_then_429_then_served_after_retry_after(make_server, docroot):
    srv = make_server(docroot, args=["--limit-req", "1r/s,burst=2,nodelay",
                                     "--metrics", "127.0.0.1:0"])
    with ConnFrom(srv, "127.0.0.1") as c:
        statuses = [c.request("GET", "/index.html").status for _ in range(3)]
        assert statuses == [200, 200, 200]  # 1 + burst at once
        r = c.request("GET", "/index.html")
        assert r.status == 429
        retry = int(r.header("retry-after"))
        assert 1 <= retry <= 2
        assert r.keep_alive  # a 429 keeps the connection
        assert get(srv, src="127.0.0.2").status == 200  # another client is not limited
        time.sleep(retry)
        assert c.request("GET", "/index.html").status == 200
    assert counter(srv, "ringhttpd_limit_req_refused_total") == 1


def test_limit_req_for_a_pattern_only(make_server, docroot):
    (docroot / "api").mkdir()
    (docroot / "api" / "x.json").write_text("{}")
    srv = make_server(docroot, args=["--limit-req-for", "/api/* 1r/m"])
    assert get(srv, "/api/x.json").status == 200
    r = get(srv, "/api/x.json")
    assert r.status == 429 and 55 <= int(r.header("retry-after")) <= 63
    for _ in range(5):  # other paths are not limited
        assert get(srv, "/index.html").status == 200


def test_limit_req_keys_on_the_forwarded_address_of_a_trusted_proxy(make_server, docroot):
    srv = make_server(docroot, args=["--limit-req", "1r/m", "--real-ip-from", "127.0.0.1"])
    xff = lambda a: [("X-Forwarded-For", a)]  # noqa: E731
    assert get(srv, headers=xff("198.51.100.1")).status == 200
    assert get(srv, headers=xff("198.51.100.1")).status == 429
    assert get(srv, headers=xff("198.51.100.2")).status == 200  # another client behind it
    assert get(srv, headers=xff("2001:db8::1")).status == 200
    assert get(srv, headers=xff("2001:db8::2")).status == 429  # the same /64
    # An untrusted peer's X-Forwarded-For is ignored: spoofing new addresses gets nothing.
    assert get(srv, src="127.0.0.2", headers=xff("203.0.113.1")).status == 200
    assert get(srv, src="127.0.0.2", headers=xff("203.0.113.2")).status == 429


def test_limit_options_refused_when_malformed(make_server, docroot):
    for args in (["--limit-req", "10r/h"], ["--limit-req-for", "/x"], ["--limit-conn", "0"],
                 ["--cors", "/x https://a/b"], ["--early-hints", "/ style.css"],
                 ["--limit-rate", "fast"]):
        srv = make_server(docroot, args=args, ready=False)
        assert srv.proc.wait(timeout=10) == 2, args


# ---- --limit-rate ------------------------------------------------------------------------------


def timed_download(server, path):
    """(seconds, sha256 hex) of one GET of path, read whole."""
    start = time.monotonic()
    with ConnFrom(server, "127.0.0.1", timeout=30) as c:
        r = c.request("GET", path)
    assert r.status == 200
    return time.monotonic() - start, hashlib.sha256(r.body).hexdigest()


@pytest.mark.slow
def test_limit_rate_paces_a_large_download(make_server, docroot, random_file):
    """10 MiB at --limit-rate 1M takes about 10 s (a generous bound: the issue's), intact; with
    --limit-rate-after 8M the first 8 MiB go at once; a small file is not held up. (The issue
    names these figures; the file runs on its own pytest worker, so make check waits ~12 s.)"""
    big, digest = random_file(10 << 20)
    os.link(big, docroot / "paced.bin")
    srv = make_server(docroot, args=["--limit-rate", "1M/s"])
    took, got = timed_download(srv, "/paced.bin")
    assert got == digest
    assert 7 <= took <= 20, took
    assert timed_download(srv, "/index.html")[0] < 2
    srv = make_server(docroot, args=["--limit-rate", "1M", "--limit-rate-after", "8M"])
    took, got = timed_download(srv, "/paced.bin")
    assert got == digest and took < 5, took


@pytest.mark.slow
def test_limit_rate_paces_an_http2_connection(make_server, docroot, random_file, tmp_path):
    """Over HTTP/2 the connection's wire is paced (its streams share the rate): 3 MiB at 1M
    in about 2-3 s, intact."""
    big, digest = random_file(3 << 20)
    os.link(big, docroot / "paced.bin")
    srv = make_server(docroot, args=["--limit-rate", "1M"])
    out = tmp_path / "got.bin"
    res = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-o", str(out), "-w",
                          "%{http_version} %{time_total}", srv.url("/paced.bin")],
                         capture_output=True, text=True, timeout=30)
    version, took = res.stdout.split()
    assert version == "2"
    assert hashlib.sha256(out.read_bytes()).hexdigest() == digest
    assert 1.5 <= float(took) <= 10, took


# ---- --cors ------------------------------------------------------------------------------------

CORS = ["--cors", "/api/* https://app.example", "--cors", "/api/* https://other.example",
        "--cors", "/fonts/* *"]


@pytest.fixture
def cors_server(make_server, docroot):
    (docroot / "api").mkdir()
    (docroot / "api" / "x.json").write_text("{}")
    (docroot / "fonts").mkdir()
    (docroot / "fonts" / "f.woff2").write_bytes(b"wOF2")
    return make_server(docroot, args=CORS)


def test_cors_preflight_and_actual_request(cors_server):
    srv = cors_server
    with ConnFrom(srv, "127.0.0.1") as c:
        r = c.request("OPTIONS", "/api/x.json", headers=[
            ("Origin", "https://app.example"), ("Access-Control-Request-Method", "GET"),
            ("Access-Control-Request-Headers", "range")])
        assert r.status == 204
        assert r.header("access-control-allow-origin") == "https://app.example"
        assert r.tokens("access-control-allow-methods") == {"get", "head"}
        assert "range" in r.tokens("access-control-allow-headers")
        assert int(r.header("access-control-max-age")) > 0
        r = c.request("GET", "/api/x.json", headers=[("Origin", "https://other.example")])
        assert r.status == 200 and r.body == b"{}"
        assert r.header("access-control-allow-origin") == "https://other.example"
        assert "origin" in r.tokens("vary")
        r = c.request("HEAD", "/fonts/f.woff2", headers=[("Origin", "https://any.example")])
        assert r.header("access-control-allow-origin") == "*"
        # other methods keep their 405, with or without an Origin
        r = c.request("POST", "/api/x.json", headers=[("Origin", "https://app.example")])
        assert r.status == 405 and r.header("access-control-allow-origin") is None


def test_cors_disallowed_garbage_and_huge_origins_get_no_cors_fields(cors_server):
    srv = cors_server
    for origin in ("https://evil.example", "https://app.example.evil", "null",
                   "::garbage::", "\xe9t\xff",
                   "https://app.example, https://evil.example", "https://" + "a" * 8000):
        with ConnFrom(srv, "127.0.0.1") as c:
            r = c.request("GET", "/api/x.json", headers=[("Origin", origin)])
            assert r.status == 200 and r.header("access-control-allow-origin") is None, origin
            assert "origin" in r.tokens("vary")  # a cache must not reuse it for another origin
            r = c.request("OPTIONS", "/api/x.json", headers=[
                ("Origin", origin), ("Access-Control-Request-Method", "GET")])
            assert r.header("access-control-allow-origin") is None
            assert r.header("access-control-allow-methods") is None
    r = get(srv, "/index.html", headers=[("Origin", "https://app.example")])
    assert r.header("access-control-allow-origin") is None and "origin" not in r.tokens("vary")


# ---- --early-hints -----------------------------------------------------------------------------

HINTS = ["--early-hints", "/ </style.css>; rel=preload; as=style",
         "--early-hints", "/*.html <https://cdn.example>; rel=preconnect"]


def test_early_hints_over_http1_to_a_navigation(make_server, docroot):
    srv = make_server(docroot, args=HINTS)
    with ConnFrom(srv, "127.0.0.1") as c:
        r = c.request("GET", "/", headers=[("Sec-Fetch-Mode", "navigate")])
        assert r.status == 200
        assert [i.status_code for i in r.informational] == [103]
        hint_links = [v for n, v in r.informational[0].headers if n == b"link"]
        assert hint_links == [b"</style.css>; rel=preload; as=style"]
        assert r.header_all("link") == ["</style.css>; rel=preload; as=style"]
        # not for a HEAD, nor for a path no rule names; the keep-alive connection goes on
        r = c.request("HEAD", "/", headers=[("Sec-Fetch-Mode", "navigate")])
        assert not r.informational and r.header("link") is None
        r = c.request("GET", "/index.html", headers=[("Sec-Fetch-Mode", "navigate")])
        assert r.header_all("link") == ["<https://cdn.example>; rel=preconnect"]
    # curl -v shows the 103 before the 200
    out = subprocess.run(["curl", "-sv", "-o", "/dev/null", "-H", "Sec-Fetch-Mode: navigate",
                          srv.url("/")], capture_output=True, text=True, timeout=20).stderr
    assert out.index("< HTTP/1.1 103 Early Hints") < out.index("< HTTP/1.1 200 OK")


def test_early_hints_not_sent_to_clients_that_may_take_a_103_for_the_answer(make_server, docroot):
    """Python's http.client (urllib, requests) takes a 103 for the response: over HTTP/1.1 only
    a browser's navigation gets one; everyone gets the Link fields on the 200. HTTP/1.0 never
    gets a 1xx (RFC 9110 15.2)."""
    srv = make_server(docroot, args=HINTS)
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=5)
    conn.request("GET", "/")
    r = conn.getresponse()
    assert r.status == 200 and r.read() == (docroot / "index.html").read_bytes()
    assert r.getheader("link") == "</style.css>; rel=preload; as=style"
    conn.close()
    with ConnFrom(srv, "127.0.0.1") as c:
        r = c.request("GET", "/", version="1.0", headers=[("Sec-Fetch-Mode", "navigate")])
        assert r.status == 200 and not r.informational


def test_early_hints_over_http2_before_the_200(make_server, docroot):
    srv = make_server(docroot, args=HINTS)
    sock = socket.create_connection(srv.addr, timeout=5)
    conn = h2.connection.H2Connection()
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "GET"), (":path", "/"), (":scheme", "http"),
                          (":authority", "localhost")], end_stream=True)
    sock.sendall(conn.data_to_send())
    seen = []
    deadline = time.monotonic() + 5
    while not any(isinstance(e, h2.events.StreamEnded) for e in seen):
        assert time.monotonic() < deadline, seen
        data = sock.recv(65536)
        assert data, seen
        seen += conn.receive_data(data)
        sock.sendall(conn.data_to_send())
    sock.close()
    heads = [e for e in seen if isinstance(e, (h2.events.InformationalResponseReceived,
                                               h2.events.ResponseReceived))]
    assert [dict(e.headers)[b":status"] for e in heads] == [b"103", b"200"]
    assert dict(heads[0].headers)[b"link"] == b"</style.css>; rel=preload; as=style"
    assert dict(heads[1].headers)[b"link"] == b"</style.css>; rel=preload; as=style"
    # nghttp sees the same
    out = subprocess.run(["nghttp", "-v", srv.url("/")], capture_output=True, text=True,
                         timeout=20).stdout
    assert out.index(":status: 103") < out.index(":status: 200")


def test_a_spoofed_forwarded_for_without_real_ip_from_is_ignored(make_server, docroot, tmp_path):
    """Issue 35: with no --real-ip-from at all, X-Forwarded-For names nobody: a client that
    sends a new forwarded address with each request is still one bucket (--limit-req) and one
    count (--limit-conn), and the access log names the socket's address."""
    log = tmp_path / "access.log"
    srv = make_server(docroot, args=["--limit-req", "1r/m", "--limit-conn", "1",
                                     "--access-log", str(log)])
    xff = lambda a: [("X-Forwarded-For", a)]  # noqa: E731

    def one(headers):
        """A request on a connection of its own, once --limit-conn's one slot is free again
        (the previous connection's close reaches the worker after the client's)."""
        deadline = time.monotonic() + 10
        while True:
            try:
                return get(srv, headers=headers)
            except (Exception, pytest.fail.Exception):  # refused at accept: slot still held
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    assert one(xff("203.0.113.1")).status == 200
    assert one(xff("203.0.113.2")).status == 429
    assert one(xff("2001:db8::1, 203.0.113.3")).status == 429
    deadline = time.monotonic() + 10
    while True:  # as one(), for the connection that is then held
        held = ConnFrom(srv, "127.0.0.1")
        try:
            r = held.request("GET", "/index.html", headers=xff("198.51.100.9"))
            break
        except (Exception, pytest.fail.Exception):
            held.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with held:
        assert r.status == 429
        with ConnFrom(srv, "127.0.0.1") as extra:
            extra.send(request("GET", "/index.html", headers=xff("198.51.100.10")),
                       ignore_errors=True)
            assert extra.read_or_close() is None  # the one connection is held: closed
    assert wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= 4, timeout=5)
    lines = log.read_text().splitlines()
    assert all(line.startswith("127.0.0.1 ") for line in lines), lines
    assert not any(a in line.split(" ")[0] for line in lines
                   for a in ("203.0.113", "198.51.100", "2001:db8"))
