"""The access log (issue 12): Combined/Common/JSON lines for every request, parse failures
included, nginx escaping of client bytes, --real-ip-from, whole lines under concurrency (to a
pipe), SIGUSR1 reopen, and a stuck log pipe that must not stop the server answering.

Lines are read from a file after the server has stopped (it hands every buffered line to the
writer at exit), or from its standard output (a pipe: the default destination)."""

import base64
import json
import os
import shutil
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import HELLO, Conn, fetch, raw, request

MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
# A quoted field as nginx writes it: printable ASCII except '"' and '\', or \xHH.
QUOTED = rb'"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\x[0-9A-F]{2})*)"'
COMMON_RE = re.compile(
    rb"^(\S+) - - \[(\d{2})/(?:" + MONTHS.encode() + rb")/(\d{4}):(\d{2}):(\d{2}):(\d{2}) "
    rb"\+0000\] " + QUOTED + rb" (\d{3}) (\d+)")
COMBINED_RE = re.compile(COMMON_RE.pattern + rb" " + QUOTED + rb" " + QUOTED + rb"$")
COMMON_LINE_RE = re.compile(COMMON_RE.pattern + rb"$")
RFC3339_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def unescape(field):
    """nginx's \\xHH back to bytes."""
    return re.sub(rb"\\x([0-9A-F]{2})", lambda m: bytes([int(m.group(1), 16)]), field)


def combined(line):
    m = COMBINED_RE.match(line)
    assert m, f"not a Combined Log Format line: {line!r}"
    return {
        "addr": m.group(1).decode(), "request": unescape(m.group(7)), "status": int(m.group(8)),
        "bytes": int(m.group(9)), "referer": unescape(m.group(10)),
        "agent": unescape(m.group(11)),
    }


def log_lines(path):
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), "a torn last line"
    return data.splitlines()


# While HTTP/2 is on, the cleartext port closes a first line that cannot be HTTP/1 at all (a
# broken HTTP/2 preface, h2spec 3.5/2) without an answer, logged as 444
# (test_not_http1_closed_and_logged_444); the tests that log such lines as 400s turn HTTP/2 off,
# as a port serving only HTTP/1 does.
H1_ONLY = ("--http2", "off")


def logged_server(make_server, docroot, tmp_path, fmt="combined", extra=()):
    path = tmp_path / "access.log"
    srv = make_server(docroot, args=["--access-log", str(path), "--log-format", fmt, *extra])
    return srv, path


def traffic(srv):
    """GET, HEAD, 404, range, 304, 400: [(request line, status, body bytes)]."""
    fetch(srv, "/hello.txt", headers=[("Referer", "http://ref.example/a"),
                                      ("User-Agent", "test-agent/1.0")])
    fetch(srv, "/hello.txt", method="HEAD")
    fetch(srv, "/missing.txt")
    r = fetch(srv, "/hello.txt", headers=[("Range", "bytes=0-99")])
    assert r.status == 206
    etag = fetch(srv, "/hello.txt").header("etag")
    assert fetch(srv, "/hello.txt", headers=[("If-None-Match", etag)]).status == 304
    notfound_len = len(fetch(srv, "/missing.txt").body)
    assert raw(srv, b"BAD REQUEST LINE\r\n\r\n").startswith(b"HTTP/1.1 400")
    return [
        (b"GET /hello.txt HTTP/1.1", 200, len(HELLO)),
        (b"HEAD /hello.txt HTTP/1.1", 200, 0),
        (b"GET /missing.txt HTTP/1.1", 404, notfound_len),
        (b"GET /hello.txt HTTP/1.1", 206, 100),
        (b"GET /hello.txt HTTP/1.1", 200, len(HELLO)),
        (b"GET /hello.txt HTTP/1.1", 304, 0),
        (b"GET /missing.txt HTTP/1.1", 404, notfound_len),
        (b"BAD REQUEST LINE", 400, None),
    ]


def test_combined_lines(make_server, docroot, tmp_path):
    srv, path = logged_server(make_server, docroot, tmp_path, extra=H1_ONLY)
    want = traffic(srv)
    assert srv.stop() == 0
    got = [combined(line) for line in log_lines(path)]
    assert len(got) == len(want)
    # Requests on different connections may be logged by either worker: compare as multisets.
    assert sorted((g["request"], g["status"]) for g in got) == sorted((r, s) for r, s, _ in want)
    for g in got:
        assert g["addr"] == "127.0.0.1"
        match = [b for r, s, b in want if r == g["request"] and s == g["status"]]
        if match[0] is not None:
            assert g["bytes"] == match[0], g
    first = [g for g in got if g["referer"] != b"-"]
    assert len(first) == 1 and first[0]["referer"] == b"http://ref.example/a"
    assert first[0]["agent"] == b"test-agent/1.0"


def test_common_format(make_server, docroot, tmp_path):
    srv, path = logged_server(make_server, docroot, tmp_path, fmt="common")
    fetch(srv, "/hello.txt", headers=[("User-Agent", "not-in-common")])
    assert srv.stop() == 0
    (line,) = log_lines(path)
    m = COMMON_LINE_RE.match(line)
    assert m and m.group(7) == b"GET /hello.txt HTTP/1.1" and int(m.group(9)) == len(HELLO)


def test_json_lines(make_server, docroot, tmp_path):
    srv, path = logged_server(make_server, docroot, tmp_path, fmt="json", extra=H1_ONLY)
    want = traffic(srv)
    with Conn(srv) as c:  # keep-alive: the second request reuses the connection
        assert c.request("GET", "/hello.txt").status == 200
        assert c.request("GET", "/index.html").status == 200
    assert srv.stop() == 0
    got = [json.loads(line) for line in log_lines(path)]
    assert len(got) == len(want) + 2
    for g in got:
        assert RFC3339_MS.match(g["time"]), g
        assert g["remote_addr"] == "127.0.0.1"
        assert isinstance(g["request_time_us"], int) and g["request_time_us"] >= 0
        assert isinstance(g["connection_reused"], bool)
    parsed = [g for g in got if g["method"] is not None]
    assert sorted((g["method"], g["target"], g["protocol"], g["status"]) for g in parsed) == \
        sorted([("GET", "/hello.txt", "HTTP/1.1", 200), ("HEAD", "/hello.txt", "HTTP/1.1", 200),
                ("GET", "/missing.txt", "HTTP/1.1", 404), ("GET", "/hello.txt", "HTTP/1.1", 206),
                ("GET", "/hello.txt", "HTTP/1.1", 200), ("GET", "/hello.txt", "HTTP/1.1", 304),
                ("GET", "/missing.txt", "HTTP/1.1", 404), ("GET", "/hello.txt", "HTTP/1.1", 200),
                ("GET", "/index.html", "HTTP/1.1", 200)])
    (bad,) = [g for g in got if g["method"] is None]
    assert bad["status"] == 400 and bad["request"] == "BAD REQUEST LINE"
    sizes = {(g["status"], g["method"]): g["body_bytes_sent"] for g in parsed}
    assert sizes[(206, "GET")] == 100 and sizes[(304, "GET")] == 0
    assert sizes[(200, "HEAD")] == 0
    referer = [g for g in got if g.get("referer")]
    assert referer and referer[0]["referer"] == "http://ref.example/a"
    assert referer[0]["user_agent"] == "test-agent/1.0"
    reused = [g["connection_reused"] for g in got if g.get("target") == "/index.html"]
    assert reused == [True]
    assert sum(g["connection_reused"] for g in got) == 1


HOSTILE_AGENT = b'evil "quoted" \\back\\ \x80\xff\xc3\xa9 \tend'
HOSTILE_REFERER = b"http://x/\"><script>\xe2\x82\xac\xed\xa0\x80"


@pytest.mark.parametrize("fmt", ["combined", "json"])
def test_hostile_bytes_escaped(make_server, docroot, tmp_path, fmt):
    srv, path = logged_server(make_server, docroot, tmp_path, fmt=fmt)
    # The target reaches the log raw: this parser lets quotes and backslashes through.
    target = b'/a"b\\c%7F'
    req = (b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nUser-Agent: " + HOSTILE_AGENT +
           b"\r\nReferer: " + HOSTILE_REFERER + b"\r\nConnection: close\r\n\r\n")
    assert raw(srv, req).startswith(b"HTTP/1.1 ")
    # A request line with control bytes fails to parse and is logged from its raw bytes.
    assert raw(srv, b"GET /\x01\x1b[31m\x7f\xff HTTP/1.1\r\nHost: x\r\n\r\n").startswith(
        b"HTTP/1.1 400")
    assert srv.stop() == 0
    lines = log_lines(path)
    assert len(lines) == 2
    for line in lines:
        assert all(0x20 <= b < 0x7f for b in line) or fmt == "json", line
        assert all(b >= 0x20 for b in line), line  # no raw control byte in any format
    if fmt == "combined":
        first = [combined(line) for line in lines]
        ok = [g for g in first if g["status"] != 400]
        assert len(ok) == 1
        assert ok[0]["agent"] == HOSTILE_AGENT and ok[0]["referer"] == HOSTILE_REFERER
        assert ok[0]["request"] == b"GET " + target + b" HTTP/1.1"
        (bad,) = [g for g in first if g["status"] == 400]
        assert bad["request"] == b"GET /\x01\x1b[31m\x7f\xff HTTP/1.1"
    else:
        objs = [json.loads(line.decode("utf-8")) for line in lines]  # valid UTF-8 and JSON
        (ok,) = [o for o in objs if o["status"] != 400]
        # Valid UTF-8 is kept; each byte of an invalid sequence is the code point of its value.
        assert ok["user_agent"] == HOSTILE_AGENT.decode("latin-1").replace("\xc3\xa9", "\u00e9")
        assert ok["referer"] == 'http://x/"><script>\u20ac\u00ed\u00a0\u0080'
        assert ok["target"] == '/a"b\\c%7F'
        (bad,) = [o for o in objs if o["status"] == 400]
        assert bad["request"] == "GET /\x01\x1b[31m\x7f\u00ff HTTP/1.1"


def test_parse_failures_logged(make_server, docroot, tmp_path):
    srv, path = logged_server(make_server, docroot, tmp_path, extra=H1_ONLY)
    assert raw(srv, b"\x00\x01garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
    long_target = b"/" + b"a" * 9000
    assert raw(srv, b"GET " + long_target + b" HTTP/1.1\r\nHost: x\r\n\r\n").startswith(
        b"HTTP/1.1 414")
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(100))
    assert raw(srv, b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n").startswith(
        b"HTTP/1.1 431")
    assert srv.stop() == 0
    got = sorted((combined(line) for line in log_lines(path)), key=lambda g: g["status"])
    assert [g["status"] for g in got] == [400, 414, 431]
    assert got[0]["request"] == b"\x00\x01garbage"
    assert got[1]["request"].startswith(b"GET /aaaa") and len(got[1]["request"]) <= 1536
    assert got[2]["request"] == b"GET /hello.txt HTTP/1.1"


def test_not_http1_closed_and_logged_444(make_server, docroot, tmp_path):
    """With h2c sharing the port, a first line that is neither HTTP/1 nor the HTTP/2 preface is
    closed unanswered, and still leaves an access-log line (444, nginx's "closed without a
    response") and a count in the metrics; HTTP/1 garbage keeps its 400."""
    srv, path = logged_server(make_server, docroot, tmp_path)
    assert raw(srv, b"NOT HTTP AT ALL\r\n\r\n") == b""
    assert raw(srv, b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n") == b""
    assert raw(srv, b"GET /x HTTX/1.1\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert fetch(srv, "/hello.txt").status == 200
    assert srv.stop() == 0
    got = sorted(((g["status"], g["request"], g["bytes"]) for g in map(combined,
                                                                      log_lines(path))))
    assert [(s, r) for s, r, _ in got] == [
        (200, b"GET /hello.txt HTTP/1.1"), (400, b"GET /x HTTX/1.1"),
        (444, b"NOT HTTP AT ALL"), (444, b"PRI * HTTP/2.0")]
    assert [b for s, _, b in got if s == 444] == [0, 0]


def test_400_and_444_after_a_health_check_are_still_logged(make_server, docroot, tmp_path):
    """A response for a request that cannot be parsed came from the pool with its last user's
    fields: after a health check (not logged, note.quiet) the 400 or 444 was not logged either
    on the old build."""
    srv, path = logged_server(make_server, docroot, tmp_path, extra=["-t", "1", "--health",
                                                                      "/healthz"])
    for _ in range(3):
        assert fetch(srv, "/healthz").status == 200
        assert raw(srv, b"NOT HTTP AT ALL\r\n\r\n") == b""
        assert fetch(srv, "/healthz").status == 200
        assert raw(srv, b"GET /x HTTX/1.1\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert srv.stop() == 0
    got = [(g["status"], g["request"]) for g in map(combined, log_lines(path))]
    assert got == [(444, b"NOT HTTP AT ALL"), (400, b"GET /x HTTX/1.1")] * 3, got


@pytest.mark.parametrize("trusted,xff,want", [
    ([], "203.0.113.7", "127.0.0.1"),                                  # peer not trusted
    (["127.0.0.0/8"], "203.0.113.7, 10.1.2.3", "10.1.2.3"),            # rightmost untrusted
    (["127.0.0.1", "10.0.0.0/8"], "203.0.113.7, 10.1.2.3", "203.0.113.7"),
    (["127.0.0.1", "10.0.0.0/8"], "10.0.0.9,10.1.2.3", "10.0.0.9"),    # all trusted: leftmost
    (["127.0.0.1", "10.0.0.0/8"], "bogus, 10.1.2.3", "10.1.2.3"),      # stops at garbage
    (["127.0.0.1"], "2001:db8::1", "2001:db8::1"),
])
def test_real_ip_from(make_server, docroot, tmp_path, trusted, xff, want):
    extra = [a for t in trusted for a in ("--real-ip-from", t)]
    srv, path = logged_server(make_server, docroot, tmp_path, extra=extra)
    fetch(srv, "/hello.txt", headers=[("X-Forwarded-For", xff)])
    assert srv.stop() == 0
    (line,) = log_lines(path)
    assert combined(line)["addr"] == want


def test_real_ip_from_rejects_garbage(make_server):
    srv = make_server(args=["--real-ip-from", "10.0.0.0/33"], ready=False)
    assert srv.proc.wait(timeout=10) == 2
    srv.stop()  # joins the reader threads: all of stderr is in
    assert "--real-ip-from wants an address or CIDR" in srv.stderr_text()


@pytest.mark.slow
def test_lines_whole_under_concurrency(make_server, docroot):
    """200 clients, 2 workers, the default destination (standard output, a pipe here): every
    request has exactly one complete line, and no line is torn or interleaved."""
    srv = make_server(docroot)
    clients, per_client = 200, 10
    errors = []

    def client(n):
        try:
            with Conn(srv, timeout=20) as c:
                for i in range(per_client):
                    agent = f"client-{n}-{i}-" + "u" * (n % 50)
                    c.send(request("GET", f"/hello.txt?c={n}&i={i}",
                                   headers=[("User-Agent", agent)]))
                    assert c.read("GET").status == 200
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    assert srv.stop() == 0
    out = srv.stdout_bytes()
    assert out.endswith(b"\n")
    lines = out.splitlines()
    assert len(lines) == clients * per_client
    seen = set()
    for line in lines:
        g = combined(line)
        m = re.match(rb"GET /hello\.txt\?c=(\d+)&i=(\d+) HTTP/1\.1", g["request"])
        assert m, line
        n, i = int(m.group(1)), int(m.group(2))
        assert g["agent"] == f"client-{n}-{i}-".encode() + b"u" * (n % 50)
        seen.add((n, i))
    assert len(seen) == clients * per_client


def test_default_is_stdout_combined(make_server, docroot):
    srv = make_server(docroot)
    fetch(srv, "/hello.txt")
    assert srv.stop() == 0
    (line,) = srv.stdout_bytes().splitlines()
    assert combined(line)["status"] == 200


def test_access_log_off(make_server, docroot):
    srv = make_server(docroot, args=["--access-log", "off"])
    fetch(srv, "/hello.txt")
    assert srv.stop() == 0
    assert srv.stdout_bytes() == b""


def test_sigusr1_reopens_without_loss(make_server, docroot, tmp_path):
    srv, path = logged_server(make_server, docroot, tmp_path)
    rotated = tmp_path / "access.log.1"
    stop = threading.Event()
    sent = []
    errors = []

    def load():
        try:
            with Conn(srv, timeout=10) as c:
                i = 0
                while not stop.is_set() and i < 20000:
                    assert c.request("GET", f"/hello.txt?n={i}").status == 200
                    sent.append(i)
                    i += 1
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    t = threading.Thread(target=load)
    t.start()
    # Rotate once the old file has lines (the workers hand lines over at least once a second).
    deadline = time.monotonic() + 10
    while path.stat().st_size == 0 and t.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    os.rename(path, rotated)  # logrotate's move, then its postrotate signal
    srv.proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists(), "SIGUSR1 did not reopen the log"
    before = len(sent)
    while len(sent) < before + 200 and t.is_alive():
        time.sleep(0.01)
    stop.set()
    t.join(30)
    assert not errors, errors
    assert srv.stop() == 0
    old, new = log_lines(rotated), log_lines(path)
    assert old and new, (len(old), len(new))
    numbers = [int(re.search(rb"\?n=(\d+) ", line).group(1)) for line in old + new]
    for line in old + new:
        combined(line)
    assert sorted(numbers) == list(range(len(sent)))
    assert "reopened" in srv.stderr_text()


def test_stuck_pipe_does_not_stop_answers(make_server, docroot, tmp_path):
    """The log is a FIFO nobody reads: the writer blocks on it, the workers keep answering,
    and lines past the bounded backlog are dropped and reported, not waited for."""
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # held open, never read until the end
    try:
        srv = make_server(docroot, args=["--access-log", str(fifo), "--metrics", "127.0.0.1:0"])
        long_path = "/missing.txt?" + "x" * 1400  # long lines fill pipe and backlog sooner
        answered = 0
        with Conn(srv, timeout=10) as c:
            for i in range(4000):
                c.send(request("GET", f"{long_path}{i}"))
                assert c.read("GET").status == 404
                answered += 1
        assert answered == 4000
        assert fetch(srv, "/hello.txt").body == HELLO  # still serving
        assert "access log: the writer is behind" in srv.stderr_text()
        metrics = scrape(srv)
        dropped = sum(v for k, v in metrics.items()
                      if k.startswith("ringhttpd_access_log_dropped_lines_total"))
        assert dropped > 0
    finally:
        # Unstick the writer so the server can exit with everything written or dropped.
        drained = threading.Event()

        def drain():
            while not drained.is_set():
                try:
                    if not os.read(reader, 1 << 16):
                        time.sleep(0.01)
                except BlockingIOError:
                    time.sleep(0.01)

        t = threading.Thread(target=drain, daemon=True)
        t.start()
        if "srv" in locals():
            assert srv.stop() == 0
        drained.set()
        t.join(5)
        os.close(reader)


METRICS_LINE = re.compile(r"ringhttpd: metrics on http://([0-9.]+):(\d+)/metrics")


def metrics_addr(srv):
    m = METRICS_LINE.search(srv.stderr_text())
    assert m, srv.stderr_text()
    return m.group(1), int(m.group(2))


def scrape_text(srv):
    host, port = metrics_addr(srv)
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return body.decode()


def scrape(srv):
    """{'name{labels}': value} of every sample."""
    out = {}
    for line in scrape_text(srv).splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out



def test_accept_emfile_logged_rate_limited(make_server, docroot):
    """The error log: out of fds at accept is reported, one line a second at most per worker,
    not one line per failure (the worker stops accepting until a connection closes or a second
    passes: worker_accept_failed, from the faults work)."""
    if not shutil.which("prlimit"):
        pytest.skip("prlimit (util-linux) is not installed")
    srv = make_server(docroot, wrapper=["prlimit", "--nofile=48:48", "--"],
                      args=["--access-log", "off"])
    socks = []
    try:
        for _ in range(80):  # more than 48 fds can hold: accept fails with EMFILE
            s = socket.create_connection(srv.addr, timeout=5)
            s.sendall(request("GET", "/hello.txt"))
            socks.append(s)
        deadline = time.monotonic() + 15
        while ("accept: Too many open files" not in srv.stderr_text()
               and time.monotonic() < deadline):
            time.sleep(0.1)
        time.sleep(2)  # the clients keep the fds taken: at most a line a second meanwhile
    finally:
        for s in socks:
            s.close()
    lines = [ln for ln in srv.stderr_text().splitlines() if "accept: Too many open files" in ln]
    assert lines, srv.stderr_text()
    # The limit is one line a second per worker: read it from the lines' own timestamps, so a
    # slow test machine cannot make the count look too high (or too low).
    stamps = {}
    for ln in lines:
        m = re.match(r"^\d{4}-\d\d-\d\dT(\d\d):(\d\d):(\d\d\.\d{3})Z \[error\] ringhttpd: "
                     r"worker (\d): ", ln)
        assert m, ln
        h, mi, sec, worker = m.groups()
        stamps.setdefault(worker, []).append(int(h) * 3600 + int(mi) * 60 + float(sec))
    for worker, ts in stamps.items():
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        # 1 s on the monotonic clock; the wall-clock stamps round to a millisecond.
        assert all(g >= 0.99 for g in gaps), (worker, gaps, lines)
    # Serving again once fds are free: the server sees the clients' closes in its own time, and
    # until then a file open may still fail with EMFILE (a 500), so ask until a bound.
    deadline = time.monotonic() + 15
    while True:
        r = fetch(srv, "/hello.txt")
        if r.status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert r.status == 200 and r.body == HELLO


def test_response_cut_short_is_logged(make_server, docroot, tmp_path):
    """A response that never finishes (a client that stops reading, then the drain deadline
    closes it) is logged all the same, with the status and the body bytes actually sent."""
    srv, path = logged_server(make_server, docroot, tmp_path, extra=["--drain-timeout", "1"])
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock.settimeout(10)
    with sock:
        sock.connect(srv.addr)
        sock.sendall(request("GET", "/big.bin"))
        assert sock.recv(100).startswith(b"HTTP/1.1 200")  # then read nothing more
        assert srv.stop() == 0  # SIGTERM: the drain gives up on it after a second
    (line,) = log_lines(path)
    g = combined(line)
    assert g["request"] == b"GET /big.bin HTTP/1.1" and g["status"] == 200
    assert 0 < g["bytes"] < 1 << 20, g


@pytest.mark.parametrize("trusted,want", [([], "127.0.0.1"), (["127.0.0.1"], "203.0.113.7")],
                         ids=["peer", "real_ip"])
def test_client_address_logged_after_basic_auth(make_server, docroot, tmp_path, trusted, want):
    """Issue 26: a request that passed --basic-auth (verified off the loop, then from the
    worker's cache) is logged with the client's address, and --real-ip-from applies to it as to
    every other request: auth looked the peer up itself and marked it unknown, so those lines
    had an empty first field."""
    pw = tmp_path / "pw.htpasswd"
    subprocess.run(["htpasswd", "-c", "-b", "-B", "-C", "5", str(pw), "alice", "secret"],
                   check=True, capture_output=True)
    (docroot / "private").mkdir()
    (docroot / "private" / "x.txt").write_bytes(b"secret\n")
    extra = ["-t", "1", "--basic-auth", f"/private/={pw}",
             *[a for t in trusted for a in ("--real-ip-from", t)]]
    srv, path = logged_server(make_server, docroot, tmp_path, extra=extra)
    xff = ("X-Forwarded-For", "203.0.113.7")
    cred = ("Authorization", "Basic " + base64.b64encode(b"alice:secret").decode())
    assert fetch(srv, "/private/x.txt", headers=[xff]).status == 401
    assert fetch(srv, "/private/x.txt", headers=[cred, xff]).body == b"secret\n"  # verified
    assert fetch(srv, "/private/x.txt", headers=[cred, xff]).body == b"secret\n"  # remembered
    with Conn(srv) as c:  # a keep-alive connection: the check waits, then its next request
        assert c.request("GET", "/private/x.txt", headers=[
            ("Authorization", "Basic " + base64.b64encode(b"alice:wrong").decode()), xff
        ]).status == 401
        assert c.request("GET", "/hello.txt", headers=[xff]).status == 200
    assert srv.stop() == 0
    got = [(combined(line)["addr"], combined(line)["status"]) for line in log_lines(path)]
    assert got == [(want, 401), (want, 200), (want, 200), (want, 401), (want, 200)]
