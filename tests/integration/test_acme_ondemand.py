"""Certificates on demand (issue 40): a TLS handshake for a name no certificate covers, which
falls to a site with "acme: on-demand", gets a certificate in that handshake when --acme-ask
approves the name, and the alert when it refuses; a flood of random names orders nothing.

Against Debian's pebble, as test_acme.py starts it (its fixtures are reused). The ask endpoint
is a small http.server thread on 127.0.0.1 approving the names of its set (2xx), refusing the
rest (403), and counting the questions per name.
"""
import concurrent.futures
import http.server
import random
import socket
import ssl
import string
import subprocess
import threading
import time
import urllib.parse

import pytest

from conftest import free_port, wait_for
from test_acme import (CHALLTESTSRV, PEBBLE, acme_args, curl_https, pebble,  # noqa: F401
                       ports)

pytestmark = pytest.mark.skipif(not PEBBLE or not CHALLTESTSRV,
                                reason="pebble not installed (scripts/deps.sh test)")


class Ask:
    """--acme-ask's endpoint: 200 for the names in approve, 403 for the others."""

    def __init__(self, approve=(), hang=()):
        self.approve = set(approve)
        self.hang = set(hang)  # answered only after ringhttpd's 5 s wait for an answer
        self.hits = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                name = q.get("domain", [""])[0]
                with outer.lock:
                    outer.hits[name] = outer.hits.get(name, 0) + 1
                if name in outer.hang:
                    time.sleep(8)
                code = 200 if name in outer.approve else 403
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/check"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def asked(self, name=None):
        with self.lock:
            return sum(self.hits.values()) if name is None else self.hits.get(name, 0)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def ask():
    started = []

    def start(approve=(), hang=()):
        a = Ask(approve, hang)
        started.append(a)
        return a
    yield start
    for a in started:
        a.stop()


def ondemand_conf(tmp_path, docroot):
    (docroot / "fixed").mkdir(exist_ok=True)
    (docroot / "fixed" / "index.html").write_text("fixed site\n")
    (docroot / "od").mkdir(exist_ok=True)
    (docroot / "od" / "index.html").write_text("on-demand site\n")
    conf = tmp_path / "sites.yaml"
    conf.write_text(f"""
sites:
  - hosts: [fixed.test]
    root: {docroot / 'fixed'}
    acme: off
  - root: {docroot / 'od'}
    default: true
    acme: on-demand
""")
    return conf


def start(make_server, pb, state, ports, conf, ask_url, *more):
    return make_server(None, args=acme_args(pb, state, ports, "--config", str(conf),
                                            "--acme-ask", ask_url, "--metrics", "127.0.0.1:0",
                                            *more))


def said(srv, text, timeout=10):
    """The server's stderr has text, waiting for it: a line written just before the client saw
    its answer may still be in the pipe when the test looks (CI saw it once under ASan)."""
    return wait_for(lambda: text in srv.stderr_text(), timeout, 0.05)


def handshake(name, port, root, timeout=30):
    """A TLS handshake for name: "ok", or the alert's or error's text."""
    ctx = ssl.create_default_context(cafile=str(root)) if root else ssl.create_default_context()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            with ctx.wrap_socket(s, server_hostname=name):
                return "ok"
    except (ssl.SSLError, OSError, UnicodeError) as e:
        return str(e)


def test_approved_name_gets_its_certificate_in_the_first_handshake(make_server, docroot, pebble,
                                                                   ports, tmp_path, ask):
    from h3client import h3_get
    from test_accesslog import scrape_text
    pb = pebble()
    a = ask(approve={"good.test"})
    state = tmp_path / "state"
    conf = ondemand_conf(tmp_path, docroot)
    srv = start(make_server, pb, state, ports, conf, a.url)
    root = pb.root(tmp_path)
    # The first handshake waits for the certificate and completes with it: HTTP/1.1.
    rc, body = curl_https("good.test", ports[1], root, timeout=40)
    assert rc == 0 and b"on-demand site" in body, (body, srv.stderr_text()[-3000:])
    assert a.asked("good.test") == 1
    assert pb.orders() == 1
    assert (state / "good.test.pem").exists() and (state / "good.test.ondemand").exists()
    # HTTP/2, once the certificate is there (in the workers' contexts by now, or soon).
    p = subprocess.run(["curl", "-sS", "--http2", "--max-time", "20", "--cacert", str(root),
                        "--resolve", f"good.test:{ports[1]}:127.0.0.1", "-w", "%{http_version}",
                        f"https://good.test:{ports[1]}/"], capture_output=True, timeout=30)
    assert p.returncode == 0 and b"on-demand site" in p.stdout and p.stdout.endswith(b"2"), p
    # HTTP/3 after issuance: the certificate set is published to the QUIC endpoint too.
    got = []

    def h3_ok():
        try:
            r = h3_get("127.0.0.1", ports[1], str(root), [("GET", "/")],
                       server_name="good.test", timeout=5)
        except Exception as e:  # noqa: BLE001 - not there yet
            got[:] = [e]
            return False
        got[:] = [r]
        return r[0].status == 200 and b"on-demand site" in r[0].body
    assert wait_for(h3_ok, 20, 0.5), got
    assert a.asked("good.test") == 1 and pb.orders() == 1
    text = scrape_text(srv)
    assert 'ringhttpd_acme_ondemand_total{outcome="approved"} 1' in text, text
    assert 'ringhttpd_acme_ondemand_total{outcome="issued"} 1' in text, text
    assert 'ringhttpd_acme_ondemand_total{outcome="refused"} 0' in text, text
    assert said(srv, "good.test approved by --acme-ask"), srv.stderr_text()[-3000:]
    # Restart: the certificate comes from the state directory; no question, no order.
    assert srv.stop() == 0
    srv2 = start(make_server, pb, state, ports, conf, a.url)
    rc, body = curl_https("good.test", ports[1], root)
    assert rc == 0 and b"on-demand site" in body, body
    time.sleep(1)
    assert a.asked("good.test") == 1 and pb.orders() == 1
    assert "ordering" not in srv2.stderr_text()


def test_refused_name_gets_an_alert_and_no_order(make_server, docroot, pebble, ports, tmp_path,
                                                 ask):
    pb = pebble()
    a = ask(approve={"good.test"}, hang={"slow.test"})
    state = tmp_path / "state"
    srv = start(make_server, pb, state, ports, ondemand_conf(tmp_path, docroot), a.url)
    root = pb.root(tmp_path)
    # An ask endpoint that does not answer in time refuses too.
    out = handshake("slow.test", ports[1], root)
    assert "UNRECOGNIZED_NAME" in out.upper(), out
    assert said(srv, "slow.test refused: --acme-ask"), srv.stderr_text()[-3000:]
    out = handshake("evil.test", ports[1], root)
    assert "UNRECOGNIZED_NAME" in out.upper(), out
    assert a.asked("evil.test") == 1
    # The refusal is believed for a while: asked again, no new question.
    out = handshake("evil.test", ports[1], root)
    assert "UNRECOGNIZED_NAME" in out.upper(), out
    assert a.asked("evil.test") == 1
    # Hostile names are refused before any question.
    for bad in ("a_b.test", "-x.test", "x-.test", "1234.5678", "nodot"):
        out = handshake(bad, ports[1], root, timeout=10)
        assert out != "ok", bad
    assert a.asked() == 2
    # HTTP/3 for a name without a certificate fails its handshake, and nothing else happens.
    from h3client import h3_get
    with pytest.raises(Exception):  # noqa: B017 - aioquic's, whichever way it ends
        h3_get("127.0.0.1", ports[1], str(root), [("GET", "/")], server_name="evil.test",
               timeout=3)
    assert srv.proc.poll() is None
    time.sleep(1)
    assert pb.orders() == 0
    assert said(srv, "evil.test refused by --acme-ask (status 403)"), srv.stderr_text()[-3000:]
    # The fixed site's name is no on-demand name: its own certificate, nobody asked.
    assert a.asked("fixed.test") == 0


def test_a_burst_of_random_names_orders_nothing_and_the_server_keeps_serving(
        make_server, docroot, pebble, ports, tmp_path, ask):
    from test_accesslog import scrape_text
    pb = pebble()
    a = ask(approve=())
    state = tmp_path / "state"
    srv = start(make_server, pb, state, ports, ondemand_conf(tmp_path, docroot), a.url)
    root = pb.root(tmp_path)
    rng = random.Random(40)
    names = ["".join(rng.choice(string.ascii_lowercase) for _ in range(12)) + ".test"
             for _ in range(500)]
    served = []

    def normal():  # during the burst: the cleartext port answers at once
        for _ in range(5):
            p = subprocess.run(["curl", "-sS", "--max-time", "10", "-H", "Host: fixed.test",
                                f"http://127.0.0.1:{ports[0]}/"], capture_output=True, timeout=15)
            served.append(p.returncode == 0 and b"fixed site" in p.stdout)
            time.sleep(0.2)
    t = threading.Thread(target=normal)
    t.start()
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        outs = list(pool.map(lambda n: handshake(n, ports[1], root, timeout=40), names))
    t.join(60)
    assert served and all(served), served
    assert all(o != "ok" for o in outs)
    assert a.asked() <= len(names)
    time.sleep(1)
    assert pb.orders() == 0
    text = scrape_text(srv)
    assert 'ringhttpd_acme_ondemand_total{outcome="approved"} 0' in text, text
    assert 'ringhttpd_acme_orders_total{outcome="issued"} 0' in text, text
    assert srv.proc.poll() is None


def test_site_names_and_host_directories_approve_without_asking(make_server, docroot, pebble,
                                                                ports, tmp_path, ask):
    """A "*.wild.test" site approves its names, a {host} root the names it has a directory for;
    the ask endpoint is never asked for either."""
    pb = pebble()
    a = ask(approve=())
    sites = tmp_path / "sites"
    (sites / "cust.test").mkdir(parents=True)
    (sites / "cust.test" / "index.html").write_text("customer site\n")
    (docroot / "wild").mkdir()
    (docroot / "wild" / "index.html").write_text("wild site\n")
    conf = tmp_path / "sites.yaml"
    conf.write_text(f"""
sites:
  - hosts: ['*.wild.test']
    root: {docroot / 'wild'}
    acme: on-demand
  - root: {sites}/{{host}}
    default: true
    acme: on-demand
""")
    state = tmp_path / "state"
    srv = start(make_server, pb, state, ports, conf, a.url)
    root = pb.root(tmp_path)
    rc, body = curl_https("a.wild.test", ports[1], root, timeout=40)
    assert rc == 0 and b"wild site" in body, (body, srv.stderr_text()[-3000:])
    rc, body = curl_https("cust.test", ports[1], root, timeout=40)
    assert rc == 0 and b"customer site" in body, (body, srv.stderr_text()[-3000:])
    out = handshake("nodir.test", ports[1], root)
    assert "UNRECOGNIZED_NAME" in out.upper(), out
    assert a.asked() == 0
    assert pb.orders() == 2
    assert said(srv, "a.wild.test approved by the site's names"), srv.stderr_text()[-3000:]
    assert said(srv, "cust.test approved by its {host} directory"), srv.stderr_text()[-3000:]


def test_a_failed_order_refuses_the_name_until_its_backoff_is_over(make_server, docroot, ports,
                                                                   tmp_path, ask):
    """An approved name whose order fails gets the alert when it fails (not at the deadline),
    and the next handshakes get it at once, without a question or an order, until the ACME
    thread's next try (backoff: a minute at first, growing to a day)."""
    from test_accesslog import scrape_text
    from test_acme import fake_ca
    a = ask(approve={"good.test"})
    ca = fake_ca("500")
    try:
        url = f"http://127.0.0.1:{ca.server_address[1]}/dir"
        srv = make_server(None, env={"RINGHTTPD_ACME_TIMEOUT": "2"}, args=[
            "-p", str(ports[0]), "--tls-port", str(ports[1]), "--acme-email", "ops@example.org",
            "--acme-ca", url, "--acme-state", str(tmp_path / "state"), "--config",
            str(ondemand_conf(tmp_path, docroot)), "--acme-ask", a.url, "--metrics",
            "127.0.0.1:0"])
        t0 = time.monotonic()
        out = handshake("good.test", ports[1], None)
        assert "UNRECOGNIZED_NAME" in out.upper(), out
        assert time.monotonic() - t0 < 15  # the failure answered it, not the 20 s deadline
        hits = len(ca.hits)
        assert hits >= 1
        for _ in range(3):
            out = handshake("good.test", ports[1], None, timeout=10)
            assert "UNRECOGNIZED_NAME" in out.upper(), out
        assert a.asked("good.test") == 1 and len(ca.hits) == hits
        text = scrape_text(srv)
        assert 'ringhttpd_acme_ondemand_total{outcome="approved"} 1' in text, text
        assert 'ringhttpd_acme_ondemand_total{outcome="failed"} 1' in text, text
        assert said(srv, "the order for good.test failed: refused until the next try"), \
            srv.stderr_text()[-3000:]
    finally:
        ca.shutdown()
        ca.server_close()


def test_orders_per_minute_are_capped(make_server, docroot, pebble, ports, tmp_path, ask):
    """Past the cap (20 a minute; RINGHTTPD_ONDEMAND_ORDERS=1 here) an approved name is refused
    until the next minute, without an order."""
    from test_accesslog import scrape_text
    pb = pebble()
    a = ask(approve={"one.test", "two.test"})
    state = tmp_path / "state"
    srv = make_server(None, env={"RINGHTTPD_ONDEMAND_ORDERS": "1"}, args=acme_args(
        pb, state, ports, "--config", str(ondemand_conf(tmp_path, docroot)), "--acme-ask", a.url,
        "--metrics", "127.0.0.1:0"))
    root = pb.root(tmp_path)
    rc, body = curl_https("one.test", ports[1], root, timeout=40)
    assert rc == 0 and b"on-demand site" in body, (body, srv.stderr_text()[-3000:])
    out = handshake("two.test", ports[1], root)
    if out == "ok":  # a new minute began between the two orders: nothing to see this time
        pytest.skip("the minute turned between the two orders")
    assert "UNRECOGNIZED_NAME" in out.upper(), out
    assert pb.orders() == 1
    text = scrape_text(srv)
    assert 'ringhttpd_acme_ondemand_total{outcome="rate_limited"} 1' in text, text
    assert said(srv, "two.test approved, but 1 orders this minute already"), \
        srv.stderr_text()[-3000:]


@pytest.mark.parametrize("args,says", [
    (["--acme-ask", "http://127.0.0.1:9/ask"], "--acme-ask needs --acme-email"),
    (["--acme-ask", "ftp://x/ask"], "--acme-ask wants an http:// or https:// URL"),
    (["--acme-ask", "http://x/ask?domain=y"], "without a query"),
])
def test_acme_ask_usage_errors(docroot, args, says):
    from conftest import RINGHTTPD
    p = subprocess.run([RINGHTTPD, "-p", "0", *args, str(docroot)], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode == 2 and says in p.stderr, p.stderr


def test_acme_mode_in_a_site_is_on_off_or_on_demand(docroot, tmp_path):
    from conftest import RINGHTTPD
    conf = tmp_path / "sites.yaml"
    conf.write_text(f"sites:\n  - root: {docroot}\n    default: true\n    acme: sometimes\n")
    p = subprocess.run([RINGHTTPD, "--check-config", str(conf)], capture_output=True, text=True,
                       timeout=10)
    assert p.returncode != 0 and "wants on, off or on-demand" in p.stderr, p.stderr
    conf.write_text(f"sites:\n  - root: {docroot}\n    default: true\n    acme: on-demand\n")
    p = subprocess.run([RINGHTTPD, "--check-config", str(conf)], capture_output=True, text=True,
                       timeout=10)
    assert p.returncode == 0, p.stderr


def parked(srv):
    """ringhttpd_tls_handshakes_parked, summed over the workers."""
    from test_accesslog import scrape_text
    return sum(int(line.rsplit(" ", 1)[1]) for line in scrape_text(srv).splitlines()
               if line.startswith("ringhttpd_tls_handshakes_parked{"))


def test_parked_handshakes_are_bounded_per_worker(make_server, docroot, ports, tmp_path, ask):
    """At most 256 handshakes wait per worker (RINGHTTPD_PARK_MAX=3 here, a test hook): past the
    bound one is answered at once (no certificate yet: the alert) while those parked wait on;
    each ends at its deadline, and none is left counted."""
    from test_acme import fake_ca
    a = ask(approve={"good.test"})
    ca = fake_ca("hang")  # the order stays in flight: the approved name's handshakes park
    try:
        url = f"http://127.0.0.1:{ca.server_address[1]}/dir"
        srv = make_server(None, env={"RINGHTTPD_PARK_MAX": "3", "RINGHTTPD_ACME_TIMEOUT": "40"},
                          args=["-t", "1", "-p", str(ports[0]), "--tls-port", str(ports[1]),
                                "--acme-email", "ops@example.org", "--acme-ca", url,
                                "--acme-state", str(tmp_path / "state"), "--config",
                                str(ondemand_conf(tmp_path, docroot)), "--acme-ask", a.url,
                                "--metrics", "127.0.0.1:0"])
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            waiting = [pool.submit(handshake, "good.test", ports[1], None, 40) for _ in range(3)]
            assert wait_for(lambda: parked(srv) == 3, 20, 0.2), srv.stderr_text()[-3000:]
            out = handshake("good.test", ports[1], None, timeout=10)
            assert "UNRECOGNIZED_NAME" in out.upper(), out
            assert not any(f.done() for f in waiting) and parked(srv) == 3
            # the worker serves everyone else meanwhile
            p = subprocess.run(["curl", "-sS", "--max-time", "10", "-H", "Host: fixed.test",
                                f"http://127.0.0.1:{ports[0]}/"], capture_output=True, timeout=15)
            assert p.returncode == 0 and b"fixed site" in p.stdout, p
            outs = [f.result(timeout=45) for f in waiting]
        assert all("UNRECOGNIZED_NAME" in o.upper() for o in outs), outs
        assert wait_for(lambda: parked(srv) == 0, 10, 0.2)
        assert a.asked("good.test") == 1
        assert srv.proc.poll() is None
    finally:
        ca.shutdown()
        ca.server_close()


def test_a_reload_that_gives_a_site_acme_on_demand_takes_effect_at_once(
        make_server, docroot, pebble, ports, tmp_path, ask):
    """No site has acme: on-demand at start; a SIGHUP whose file gives the default site one
    brings certificates on demand without a restart (the thread, the hook, the workers' wake
    were made at start for this)."""
    import signal
    from test_accesslog import scrape_text
    from test_acme import wait_issued
    pb = pebble()
    a = ask(approve={"good.test"})
    state = tmp_path / "state"
    conf = ondemand_conf(tmp_path, docroot)
    on_demand = conf.read_text()
    off = on_demand.replace("acme: off", "acme: on").replace("acme: on-demand", "acme: off")
    conf.write_text(off)
    srv = start(make_server, pb, state, ports, conf, a.url)
    root = pb.root(tmp_path)
    wait_issued(srv, "fixed.test")
    assert handshake("good.test", ports[1], root, timeout=10) != "ok"
    assert a.asked() == 0
    conf.write_text(on_demand)
    srv.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: "reload (SIGHUP): serving" in srv.stderr_text(), 15, 0.2), \
        srv.stderr_text()[-3000:]
    rc, body = curl_https("good.test", ports[1], root, timeout=40)
    assert rc == 0 and b"on-demand site" in body, (body, srv.stderr_text()[-3000:])
    assert a.asked("good.test") == 1
    assert said(srv, "good.test approved by --acme-ask"), srv.stderr_text()[-3000:]
    text = scrape_text(srv)
    assert 'ringhttpd_acme_ondemand_total{outcome="issued"} 1' in text, text
    # Taken away again: a name not yet known is no on-demand name any more (nobody asked).
    conf.write_text(off)
    srv.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: srv.stderr_text().count("reload (SIGHUP): serving") == 2, 15, 0.2)
    assert handshake("other.test", ports[1], root, timeout=10) != "ok"
    assert a.asked() == 1
    assert srv.proc.poll() is None
