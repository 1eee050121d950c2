"""--metrics (issue 12): a separate listener serving the Prometheus text format; the values
match the traffic the test sent, and promtool accepts the output."""

import shutil
import socket
import subprocess
import threading
import time

import pytest

from conftest import HELLO, Conn, fetch, raw, wait_for
from test_accesslog import metrics_addr, scrape, scrape_text


def total(samples, name, **labels):
    """Sum of name's samples (over workers) whose labels include `labels`."""
    out = 0.0
    for key, value in samples.items():
        base, _, rest = key.partition("{")
        if base != name:
            continue
        if all(f'{k}="{v}"' in rest for k, v in labels.items()):
            out += value
    return out


def test_metrics_match_traffic(make_server, docroot):
    srv = make_server(docroot, args=["--metrics", "127.0.0.1:0", "--access-log", "off"])
    for _ in range(3):
        assert fetch(srv, "/hello.txt").body == HELLO
    for _ in range(2):
        assert fetch(srv, "/hello.txt", method="HEAD").status == 200
    assert fetch(srv, "/missing.txt").status == 404
    # A malformed HTTP/1 request (a first line that is not HTTP/1 at all is closed unanswered
    # when HTTP/2 is on: it may be another protocol, e.g. a bad HTTP/2 preface).
    assert raw(srv, b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n").startswith(
        b"HTTP/1.1 400")
    with Conn(srv) as c:  # one connection, three requests: two reuse it
        for _ in range(3):
            assert c.request("GET", "/index.html").status == 200
    big = fetch(srv, "/big.bin")
    assert big.status == 200
    samples = scrape(srv)

    assert total(samples, "ringhttpd_requests_total", code="200", method="GET") == 7
    assert total(samples, "ringhttpd_requests_total", code="200", method="HEAD") == 2
    assert total(samples, "ringhttpd_requests_total", code="404", method="GET") == 1
    assert total(samples, "ringhttpd_requests_total", code="400") == 1
    assert total(samples, "ringhttpd_requests_total") == 11
    assert total(samples, "ringhttpd_request_duration_seconds_count") == 11
    assert total(samples, "ringhttpd_request_duration_seconds_bucket", le="+Inf") == 11
    assert total(samples, "ringhttpd_keepalive_requests_total") == 2
    assert total(samples, "ringhttpd_connections_accepted_total") == 9
    # Everything the test opened has been answered; the last close may still be in flight.
    closed = total(samples, "ringhttpd_connections_closed_total")
    open_now = total(samples, "ringhttpd_connections_open")
    assert closed + open_now == 9 and open_now <= 1
    assert total(samples, "ringhttpd_response_bytes_total") > 3 * len(HELLO) + (1 << 20)
    assert total(samples, "ringhttpd_file_cache_hits_total") > 0
    assert total(samples, "ringhttpd_file_cache_misses_total") > 0
    assert total(samples, "ringhttpd_file_cache_bytes") >= len(HELLO)
    assert total(samples, "ringhttpd_engine_enters_total") > 0
    assert total(samples, "ringhttpd_engine_completions_total") > 0
    assert total(samples, "ringhttpd_workers") == 2
    assert total(samples, "ringhttpd_engine_info", engine=srv.engine_name) == 1
    assert total(samples, "process_start_time_seconds") > 1.6e9
    # A scrape is not traffic: the counters did not move for it.
    again = scrape(srv)
    assert total(again, "ringhttpd_requests_total") == 11


def test_metrics_access_log_counters(make_server, docroot, tmp_path):
    log = tmp_path / "access.log"
    srv = make_server(docroot, args=["--metrics", "127.0.0.1:0", "--access-log", str(log)])
    for _ in range(5):
        fetch(srv, "/hello.txt")
    srv.stop()
    assert len(log.read_bytes().splitlines()) == 5


def test_promtool_accepts_output(make_server, docroot):
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool not installed (scripts/deps.sh test installs Debian's prometheus)")
    srv = make_server(docroot, args=["--metrics", "127.0.0.1:0"])
    fetch(srv, "/hello.txt")
    fetch(srv, "/missing.txt")
    raw(srv, b"garbage\r\n\r\n")
    text = scrape_text(srv)
    r = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()


def test_metrics_listener_is_separate(make_server, docroot):
    srv = make_server(docroot, args=["--metrics", "127.0.0.1:0"])
    host, port = metrics_addr(srv)
    assert port != srv.port
    assert fetch(srv, "/metrics").status == 404  # not on the public port
    # Other paths and methods on the metrics port.
    import socket
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 404")
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 405")


def test_metrics_bad_option(make_server):
    srv = make_server(args=["--metrics", "nonsense"], ready=False)
    assert srv.proc.wait(timeout=10) == 2
    srv.stop()  # joins the reader threads: all of stderr is in
    assert "--metrics wants ADDR:PORT" in srv.stderr_text()


def test_metrics_count_compression(make_server, docroot):
    """Variants made and kept, bytes saved, CPU time and the variant cache's size (issue 17)."""
    from test_compress import JS, PNG, until_encoded
    (docroot / "app.js").write_bytes(JS)
    (docroot / "pic.png").write_bytes(PNG)
    srv = make_server(docroot, args=["-t", "1", "--metrics", "127.0.0.1:0"])
    before = scrape(srv)
    assert total(before, "ringhttpd_compress_variants_made_total") == 0
    assert total(before, "ringhttpd_compress_cache_bytes") == 0
    br = until_encoded(srv, "/app.js", "br", "br")
    gz = until_encoded(srv, "/app.js", "gzip", "gzip")
    assert fetch(srv, "/pic.png", headers=[("Accept-Encoding", "br")]).status == 200  # not made
    s = scrape(srv)
    assert total(s, "ringhttpd_compress_variants_made_total") == 2
    assert total(s, "ringhttpd_compress_variants_kept_total") == 2
    assert total(s, "ringhttpd_compress_input_bytes_total") == 2 * len(JS)
    assert total(s, "ringhttpd_compress_saved_bytes_total") == 2 * len(JS) - len(br.body) - len(gz.body)
    assert total(s, "ringhttpd_compress_cache_bytes") == len(br.body) + len(gz.body)
    assert total(s, "ringhttpd_compress_cpu_seconds_total") > 0
    # Served from the cache from now on: nothing more is made.
    until_encoded(srv, "/app.js", "br", "br")
    assert total(scrape(srv), "ringhttpd_compress_variants_made_total") == 2


# ------------------------------------------------ issue 25: no client keeps a scrape waiting

def _metrics_request(srv, data, timeout=3.0):
    """Sends data to the metrics listener and returns everything until it closes; raises
    socket.timeout if it neither answers nor closes within timeout."""
    with socket.create_connection(metrics_addr(srv), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def _scrape_ok(srv):
    data = _metrics_request(srv, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    return data.startswith(b"HTTP/1.1 200") and b"ringhttpd_workers" in data


def test_trickling_client_does_not_stop_scrapes(make_server, docroot):
    """A client sending its request a byte a second (the old listener served one connection at
    a time and restarted a 5 s receive timeout on every byte: every scrape failed for as long
    as the client liked). Scrapes go on being answered, and the trickler is closed at the
    request deadline (a few seconds) long before it has sent its 12 bytes."""
    srv = make_server(docroot, args=["--metrics", "127.0.0.1:0"])
    closed = []

    def trickle():
        with socket.create_connection(metrics_addr(srv), timeout=5) as s:
            for b in b"GET /metrics":
                try:
                    s.sendall(bytes([b]))
                    time.sleep(1.0)
                    s.setblocking(False)
                    try:
                        if s.recv(100) == b"":
                            closed.append(True)
                            return
                    except BlockingIOError:
                        pass
                    finally:
                        s.setblocking(True)
                except OSError:
                    closed.append(True)
                    return

    t = threading.Thread(target=trickle)
    t.start()
    oks = []
    try:
        time.sleep(0.5)
        while t.is_alive() and len(oks) < 8:
            try:
                oks.append(_scrape_ok(srv))
            except OSError:
                oks.append(False)
            time.sleep(0.5)
    finally:
        t.join()
    assert oks and all(oks), oks
    assert closed, "the trickling client was never closed"


def test_idle_connections_do_not_stop_scrapes(make_server, docroot):
    """~100 connections opened and left silent (the old listener took 40-65 to stop every
    scrape): scrapes are answered while they stay open; past the bound on open metrics
    connections the oldest silent one is closed for each newcomer, and that is logged."""
    srv = make_server(docroot, args=["--metrics", "127.0.0.1:0"])
    idle = []
    try:
        for _ in range(100):
            idle.append(socket.create_connection(metrics_addr(srv), timeout=5))
        for _ in range(3):
            assert _scrape_ok(srv)
    finally:
        for s in idle:
            s.close()
    assert wait_for(lambda: "closed the oldest waiting one" in srv.stderr_text()), \
        srv.stderr_text()
    assert _scrape_ok(srv)


@pytest.mark.parametrize("garbage,want", [
    (b"k\r\n", 400),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)) * 2 + b"\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n", 400),
    (b"GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    (b"x" * 5000, 431),
], ids=["k", "tls-hello", "no-colon", "http-2.0", "no-line-end"])
def test_metrics_listener_answers_garbage_and_closes(make_server, docroot, garbage, want):
    """What is not an HTTP/1 request gets the parser's error status (400, 431, 505) at once and
    the connection closes, as on the public port; the listener never waits on it (the old one
    waited for a blank line, 5 s a byte)."""
    srv = make_server(docroot, args=["--metrics", "127.0.0.1:0"])
    data = _metrics_request(srv, garbage, timeout=2.0)
    status = int(data.split(b" ", 2)[1])
    assert data.startswith(b"HTTP/1.1 ") and status == want, data[:200]
    assert b"\r\nConnection: close\r\n" in data
    assert _scrape_ok(srv)


def test_a_reload_with_a_config_file_keeps_metrics(make_server, docroot, tmp_path):
    """A SIGHUP with --config parses the command line again: --metrics ADDR:PORT must still
    read as it did (the colon was once cut out of argv, and every such reload failed)."""
    import signal
    conf = tmp_path / "sites.yaml"
    conf.write_text(f"sites:\n  - root: {docroot}\n    default: true\n")
    srv = make_server(None, args=["--metrics", "127.0.0.1:0", "--config", str(conf)])
    srv.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: "reload (SIGHUP)" in srv.stderr_text(), 15, 0.2)
    assert wait_for(lambda: "reload (SIGHUP): serving" in srv.stderr_text(), 5, 0.2), \
        srv.stderr_text()
    assert "ringhttpd_requests_total" in scrape_text(srv)
