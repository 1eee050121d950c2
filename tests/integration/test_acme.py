"""Automatic HTTPS (issue 27): ringhttpd obtains and renews its own certificates by ACME.

Against Debian's pebble (Let's Encrypt's test CA) with pebble-challtestsrv as its DNS, answering
127.0.0.1 for every name, all on loopback: pebble validates HTTP-01 on ringhttpd's cleartext port
and TLS-ALPN-01 on its TLS port (its httpPort and tlsPort are set to them), PEBBLE_VA_NOSLEEP=1.
Pebble's own HTTPS uses the session test CA's localhost certificate, which ringhttpd trusts with
--acme-ca-root. The certificates ringhttpd gets are checked with curl against Pebble's root,
fetched from its management port. A small fake ACME server in this file stands for a CA that
fails (500s, garbage JSON, a wrong content type, a hang). RINGHTTPD_ACME_BACKOFF shortens the
backoff after a failure to seconds, RINGHTTPD_ACME_TIMEOUT an exchange's timeout.
"""
import contextlib
import hashlib
import http.server
import json
import os
import pathlib
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.request

import pytest

from conftest import free_port, wait_for

PEBBLE = shutil.which("pebble")
CHALLTESTSRV = shutil.which("pebble-challtestsrv")

pytestmark = pytest.mark.skipif(not PEBBLE or not CHALLTESTSRV,
                                reason="pebble not installed (scripts/deps.sh test)")

ISSUE_TIMEOUT = 60


def wait_port(port, proc, timeout=20):
    def up():
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited {proc.returncode}")
        with contextlib.closing(socket.socket()) as s:
            return s.connect_ex(("127.0.0.1", port)) == 0
    assert wait_for(up, timeout), f"{proc.args[0]} did not listen on {port}"


class Pebble:
    """pebble and pebble-challtestsrv for one test, validating on http_port and tls_port."""

    def __init__(self, tmp, test_ca, http_port, tls_port, validity=None, dnsserver=None):
        ca, crt, key = test_ca
        self.ca = ca
        self.dns_port = free_port()
        self.acme_port = free_port()
        self.mgmt_port = free_port()
        self.chall_mgmt = free_port()
        conf = {"pebble": {
            "listenAddress": f"127.0.0.1:{self.acme_port}",
            "managementListenAddress": f"127.0.0.1:{self.mgmt_port}",
            "certificate": str(crt), "privateKey": str(key),
            "httpPort": http_port, "tlsPort": tls_port,
            "ocspResponderURL": "", "externalAccountBindingRequired": False}}
        if validity:
            conf["pebble"]["certificateValidityPeriod"] = validity
        cfile = tmp / f"pebble-{self.acme_port}.json"
        cfile.write_text(json.dumps(conf))
        self.log = open(tmp / f"pebble-{self.acme_port}.log", "wb")
        self.dns = subprocess.Popen(
            [CHALLTESTSRV, "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "",
             "-dns01", f"127.0.0.1:{self.dns_port}", "-http01", "", "-https01", "",
             "-tlsalpn01", "", "-management", f"127.0.0.1:{self.chall_mgmt}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        env = dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT="0")
        self.proc = subprocess.Popen(
            [PEBBLE, "-config", str(cfile), "-dnsserver",
             dnsserver or f"127.0.0.1:{self.dns_port}",
             "-strict=false"], stdout=self.log, stderr=subprocess.STDOUT, env=env)
        wait_port(self.chall_mgmt, self.dns)
        wait_port(self.acme_port, self.proc)
        wait_port(self.mgmt_port, self.proc)
        self.directory = f"https://127.0.0.1:{self.acme_port}/dir"
        self.logfile = tmp / f"pebble-{self.acme_port}.log"

    def root(self, tmp):
        """Pebble's root certificate (made anew at each start), as a file for curl."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        with urllib.request.urlopen(f"https://127.0.0.1:{self.mgmt_port}/roots/0",
                                    context=ctx, timeout=10) as r:
            pem = r.read()
        path = tmp / f"pebble-root-{self.acme_port}.pem"
        path.write_bytes(pem)
        return path

    def orders(self):
        """New orders Pebble logged (one line each)."""
        return self.logfile.read_text(errors="replace").count("POST /order-plz")

    def stop(self):
        for p in (self.proc, self.dns):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.log.close()


@pytest.fixture
def ports():
    return free_port(), free_port()  # conftest's: distinct, and no other test's


@pytest.fixture
def pebble(tmp_path, test_ca, ports):
    started = []

    def start(validity=None, http_port=None, tls_port=None, dnsserver=None):
        p = Pebble(tmp_path, test_ca, http_port or ports[0], tls_port or ports[1], validity,
                   dnsserver)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


def acme_args(pb, state, ports, *more, challenge="auto", ca_root=None):
    return ["-p", str(ports[0]), "--tls-port", str(ports[1]), "--acme-email", "ops@example.org",
            "--acme-ca", pb.directory, "--acme-ca-root", str(ca_root or pb.ca),
            "--acme-state", str(state), "--acme-challenge", challenge, *more]


def curl_https(name, port, root, path="/", timeout=10):
    """curl --cacert ROOT --resolve NAME:PORT:127.0.0.1 https://NAME:PORT/path: (rc, body)."""
    p = subprocess.run(
        ["curl", "-sS", "--max-time", str(timeout), "--cacert", str(root), "--resolve",
         f"{name}:{port}:127.0.0.1", f"https://{name}:{port}{path}"],
        capture_output=True, timeout=timeout + 5)
    return p.returncode, p.stdout + p.stderr


def wait_issued(srv, name, timeout=ISSUE_TIMEOUT):
    ok = wait_for(lambda: f"certificate for {name}" in srv.stderr_text() and
                  ("issued" in srv.stderr_text() or "found" in srv.stderr_text()), timeout, 0.2)
    assert ok, srv.stderr_text()[-4000:]


def wait_https(name, port, root, want=b"index", timeout=15):
    """Until the certificate is live (new contexts are adopted at the next accept)."""
    last = []

    def ok():
        last[:] = [curl_https(name, port, root)]
        return last[0][0] == 0 and want in last[0][1]
    assert wait_for(ok, timeout, 0.2), last


@pytest.mark.parametrize("challenge", ["http-01", "tls-alpn-01"])
def test_first_issuance_then_https_serves_the_page(make_server, docroot, pebble, ports, tmp_path,
                                                   challenge):
    pb = pebble()
    state = tmp_path / "state"
    srv = make_server(docroot, args=acme_args(pb, state, ports, "--acme-domain", "a.test",
                                              challenge=challenge))
    # HTTP is served at once, whatever the CA is doing.
    out = subprocess.run(["curl", "-sS", f"http://127.0.0.1:{ports[0]}/"], capture_output=True,
                         timeout=10)
    assert out.returncode == 0 and b"index" in out.stdout
    wait_issued(srv, "a.test")
    root = pb.root(tmp_path)
    wait_https("a.test", ports[1], root)
    assert "ordering a certificate for a.test" in srv.stderr_text()
    # The state directory: 0700, the account key and the pair 0600.
    assert (state.stat().st_mode & 0o777) == 0o700
    assert (state / "account.key").stat().st_mode & 0o777 == 0o600
    assert (state / "a.test.pem").stat().st_mode & 0o777 == 0o600
    # Another name was never asked for: no certificate for it.
    rc, _ = curl_https("b.test", ports[1], root)
    assert rc != 0


@pytest.mark.skipif(os.geteuid() != 0, reason="--user needs root")
def test_state_directory_belongs_to_the_user_served_as(make_server, docroot, pebble, ports,
                                                       tmp_path):
    """Made (as root) before --user drops: the thread writes there afterwards as the user."""
    import pwd
    import tempfile
    nobody = pwd.getpwnam("nobody")
    base = pathlib.Path(tempfile.mkdtemp(prefix="ringhttpd-acme-"))  # pytest's are root's only
    try:
        base.chmod(0o755)
        www = base / "www"
        www.mkdir(mode=0o755)
        (www / "index.html").write_text("index\n")
        (www / "index.html").chmod(0o644)
        pb = pebble()
        state = base / "state"
        srv = make_server(www, args=acme_args(pb, state, ports, "--acme-domain", "a.test",
                                              "--user", "nobody"))
        wait_issued(srv, "a.test")
        wait_https("a.test", ports[1], pb.root(tmp_path))
        for f in (state, state / "account.key", state / "a.test.pem"):
            assert f.stat().st_uid == nobody.pw_uid, f
    finally:
        shutil.rmtree(base)


def test_several_names_in_one_order_metrics_and_verbose_state(make_server, docroot, pebble,
                                                             ports, tmp_path):
    from test_accesslog import scrape_text
    pb = pebble()
    state = tmp_path / "state"
    srv = make_server(docroot, args=acme_args(pb, state, ports, "--acme-domain", "a.test",
                                              "--acme-domain", "www.a.test", "--metrics",
                                              "127.0.0.1:0", "--metrics-per-cert", "-v"))
    assert "a.test, www.a.test: no valid certificate yet" in srv.stderr_text()
    wait_issued(srv, "a.test, www.a.test")
    root = pb.root(tmp_path)
    wait_https("a.test", ports[1], root)
    wait_https("www.a.test", ports[1], root)
    assert pb.orders() == 1
    assert srv.stderr_text().count("ordering a certificate") == 1
    text = scrape_text(srv)
    for name in ("a.test", "www.a.test"):
        line = [ln for ln in text.splitlines() if ln.startswith(
            f'ringhttpd_tls_certificate_expiry_timestamp_seconds{{name="{name}"}}')]
        assert line and float(line[0].split()[-1]) > time.time() + 3600, text
    assert 'ringhttpd_acme_orders_total{outcome="issued"} 1' in text
    assert 'ringhttpd_acme_orders_total{outcome="failed"} 0' in text


def test_sites_own_pair_and_acme_off_left_alone(make_server, docroot, pebble, ports, tmp_path,
                                                 test_ca):
    ca, crt, key = test_ca
    pb = pebble()
    state = tmp_path / "state"
    (docroot / "own").mkdir()
    (docroot / "own" / "index.html").write_text("own site\n")
    conf = tmp_path / "sites.yaml"
    conf.write_text(f"""
sites:
  - hosts: [one.test, www.one.test]
    root: {docroot}
    default: true
  - hosts: [localhost]
    root: {docroot / 'own'}
    tls-cert: {crt}
    tls-key: {key}
  - hosts: [off.test, '*.wild.test']
    root: {docroot}
    acme: off
""")
    srv = make_server(None, args=acme_args(pb, state, ports, "--config", str(conf)))
    wait_issued(srv, "one.test, www.one.test")
    root = pb.root(tmp_path)
    wait_https("www.one.test", ports[1], root)
    assert pb.orders() == 1
    assert sorted(p.name for p in state.glob("*.pem")) == ["one.test.pem"]
    # The site's own pair serves its name, untouched.
    p = subprocess.run(["curl", "-sS", "--cacert", str(ca), f"https://localhost:{ports[1]}/"],
                       capture_output=True, timeout=10)
    assert p.returncode == 0 and b"own site" in p.stdout
    assert "off.test" not in srv.stderr_text()


def test_restart_finds_the_certificate_and_orders_nothing(make_server, docroot, pebble, ports,
                                                          tmp_path):
    pb = pebble()
    state = tmp_path / "state"
    args = acme_args(pb, state, ports, "--acme-domain", "a.test", "-v")
    srv = make_server(docroot, args=args)
    wait_issued(srv, "a.test")
    root = pb.root(tmp_path)
    wait_https("a.test", ports[1], root)
    assert srv.stop() == 0
    key = (state / "account.key").read_bytes()
    srv2 = make_server(docroot, args=args)
    assert "acme: a.test: valid until" in srv2.stderr_text()
    # Live from the first handshake: no order, no wait.
    rc, body = curl_https("a.test", ports[1], root)
    assert rc == 0 and b"index" in body, body
    time.sleep(1)
    assert pb.orders() == 1
    assert "ordering" not in srv2.stderr_text()
    assert (state / "account.key").read_bytes() == key  # made once and kept


def test_two_processes_sharing_the_state_order_once(make_server, docroot, pebble, tmp_path):
    """A validates HTTP-01 on its cleartext port, B TLS-ALPN-01 on its TLS port (pebble's
    httpPort and tlsPort), so whichever wins the lock can be validated; the other must pick
    the certificate up from the directory."""
    import fcntl
    pa, pb_ports = (free_port(), free_port()), (free_port(), free_port())
    pb = pebble(http_port=pa[0], tls_port=pb_ports[1])
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    # Both start while the certificate's lock is held, so both find it busy, then race for it.
    with open(state / "a.test.pem.lock", "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        a = make_server(docroot, args=acme_args(pb, state, pa, "--acme-domain", "a.test",
                                                challenge="http-01"))
        b = make_server(docroot, args=acme_args(pb, state, pb_ports, "--acme-domain", "a.test",
                                                challenge="tls-alpn-01"))
        time.sleep(1.5)
        assert pb.orders() == 0
    root = pb.root(tmp_path)
    wait_https("a.test", pa[1], root, timeout=ISSUE_TIMEOUT)
    wait_https("a.test", pb_ports[1], root, timeout=ISSUE_TIMEOUT)
    assert pb.orders() == 1
    logs = a.stderr_text() + b.stderr_text()
    assert logs.count("ordering a certificate") == 1, logs
    assert "found in the state directory" in logs, logs


def test_reload_adds_a_site_and_its_name_is_ordered_at_once(make_server, docroot, pebble, ports,
                                                           tmp_path):
    """A site added to --config and loaded by SIGHUP gets its certificate without a restart;
    the first site's certificate, valid, is only read again, not ordered anew."""
    import signal
    pb = pebble()
    state = tmp_path / "state"
    (docroot / "two").mkdir()
    (docroot / "two" / "index.html").write_text("second site\n")
    conf = tmp_path / "sites.yaml"
    one = f"""
sites:
  - hosts: [one.test]
    root: {docroot}
    default: true
"""
    conf.write_text(one)
    srv = make_server(None, args=acme_args(pb, state, ports, "--config", str(conf)))
    wait_issued(srv, "one.test")
    root = pb.root(tmp_path)
    wait_https("one.test", ports[1], root)
    assert pb.orders() == 1
    conf.write_text(one + f"""  - hosts: [two.test, '*.two.test']
    root: {docroot / 'two'}
""")
    srv.proc.send_signal(signal.SIGHUP)
    wait_issued(srv, "two.test")
    wait_https("two.test", ports[1], root, want=b"second site", timeout=ISSUE_TIMEOUT)
    wait_https("one.test", ports[1], root)
    assert pb.orders() == 2
    logs = srv.stderr_text()
    assert logs.count("ordering a certificate for one.test") == 1, logs
    assert logs.count("ordering a certificate for two.test") == 1, logs
    # A site that leaves keeps its certificate (files and serving) until it expires.
    conf.write_text(one)
    srv.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: logs != srv.stderr_text() and
                    srv.stderr_text().count("reload (SIGHUP): serving") == 2, 15, 0.2)
    rc, body = curl_https("two.test", ports[1], root)
    assert rc == 0, body
    assert (state / "two.test.pem").exists()
    assert pb.orders() == 2


@pytest.mark.parametrize("challenge", ["http-01", "tls-alpn-01"])
def test_shared_state_the_process_that_did_not_order_answers_the_challenge(
        make_server, docroot, pebble, tmp_path, challenge):
    """Two processes share the state directory and, with --reuse-port, the ports the CA
    validates on (pebble's httpPort and tlsPort). To make the non-ordering process the one that
    answers, every time: A orders a.test while listening elsewhere (it stopped listening on the
    shared ports, as a predecessor in a hand-over does); pebble reaches only B, whose own table
    never had the token. B's own name (b.test) is ordered by B alongside, so B's ACME thread is
    busy with an exchange of its own while A's answer must appear in B's table."""
    shared, own = (free_port(), free_port()), (free_port(), free_port())
    pb = pebble(http_port=shared[0], tls_port=shared[1])
    state = tmp_path / "state"
    env = dict(os.environ, RINGHTTPD_ACME_BACKOFF="600")  # a failed validation is not retried
    b = make_server(docroot, env=env, args=acme_args(pb, state, shared, "--reuse-port",
                                                     "--acme-domain", "b.test",
                                                     challenge=challenge))
    a = make_server(docroot, env=env, args=acme_args(pb, state, own, "--reuse-port",
                                                     "--acme-domain", "a.test",
                                                     challenge=challenge))
    root = None
    wait_issued(a, "a.test")
    root = pb.root(tmp_path)
    wait_https("a.test", own[1], root)
    wait_issued(b, "b.test")
    wait_https("b.test", shared[1], root)
    assert "ordering a certificate for a.test" in a.stderr_text()
    assert "ordering a certificate for a.test" not in b.stderr_text()
    assert "failed" not in a.stderr_text() + b.stderr_text()
    # The answers left the directory with the order.
    assert wait_for(lambda: not list(state.glob("*.challenge")), 10, 0.2), list(state.iterdir())


def test_shared_state_and_ports_every_validation_answered_whoever_gets_it(make_server, docroot,
                                                                         pebble, tmp_path):
    """Two processes with --reuse-port on the same ports and one state directory, as in a
    zero-downtime restart: one orders a certificate for six names (six validations, each a new
    connection the kernel hands to either process's listeners); all six succeed, in one
    order."""
    shared = (free_port(), free_port())
    pb = pebble(http_port=shared[0], tls_port=shared[1])
    state = tmp_path / "state"
    names = ["a.test"] + [f"w{i}.a.test" for i in range(5)]
    args = acme_args(pb, state, shared, "--reuse-port", *[x for n in names
                                                          for x in ("--acme-domain", n)],
                     challenge="http-01")
    env = dict(os.environ, RINGHTTPD_ACME_BACKOFF="600")  # a failed validation is not retried
    a = make_server(docroot, env=env, args=args)
    b = make_server(docroot, env=env, args=args)
    root = pb.root(tmp_path)
    for n in names:
        wait_https(n, shared[1], root, timeout=ISSUE_TIMEOUT)
    logs = a.stderr_text() + b.stderr_text()
    assert logs.count("ordering a certificate") == 1, logs
    assert "failed" not in logs, logs
    assert pb.orders() == 1


def test_renewal_while_a_client_downloads_over_the_old_certificate(make_server, docroot, pebble,
                                                                  ports, tmp_path, random_file):
    pb = pebble(validity=9)  # renewed at two thirds: ~6 s
    state = tmp_path / "state"
    big, digest = random_file(64 << 20)
    os.link(big, docroot / "renew.bin")
    srv = make_server(docroot, args=acme_args(pb, state, ports, "--acme-domain", "a.test"))
    wait_issued(srv, "a.test")
    root = pb.root(tmp_path)
    wait_https("a.test", ports[1], root)
    first = (state / "a.test.pem").read_bytes()
    # A download over the first certificate, read slowly until the renewal, then to its end.
    ctx = ssl.create_default_context(cafile=str(root))
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    raw.settimeout(30)
    raw.connect(("127.0.0.1", ports[1]))
    with ctx.wrap_socket(raw, server_hostname="a.test") as s:
        leaf = first.decode().split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----"
        assert s.getpeercert(binary_form=True) == ssl.PEM_cert_to_DER_cert(leaf.strip())
        s.sendall(b"GET /renew.bin HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(65536)
        head, _, body = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        h, n = hashlib.sha256(body), len(body)
        renewed = lambda: "certificate for a.test renewed" in srv.stderr_text()  # noqa: E731
        deadline = time.monotonic() + 40
        while not renewed() and time.monotonic() < deadline:
            chunk = s.recv(16384)
            assert chunk, "the download ended before the renewal"
            h.update(chunk)
            n += len(chunk)
            time.sleep(0.02)
        assert renewed(), srv.stderr_text()[-3000:]
        assert n < 64 << 20, "the download ended before the renewal"
        assert (state / "a.test.pem").read_bytes() != first
        wait_https("a.test", ports[1], root)  # new connections: the new certificate
        while chunk := s.recv(1 << 20):
            h.update(chunk)
            n += len(chunk)
    assert n == 64 << 20 and h.hexdigest() == digest
    assert pb.orders() == 2


# ---- a CA that fails: the server keeps serving, logs the problem and tries again ----------


class FakeCA(http.server.ThreadingHTTPServer):
    daemon_threads = True


def fake_ca(mode):
    """A CA whose every answer is broken as mode says; .hits counts directory requests. In
    "pending" mode it is a CA that works until a challenge, whose authorization stays pending
    (so its token stays published), with challenge token tok123 for a.test."""
    hits = []

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def send(self, status, body, ctype="application/json", extra=()):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Replay-Nonce", f"n{len(hits)}x{time.monotonic_ns()}")
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def base(self):
            return f"http://127.0.0.1:{self.server.server_address[1]}"

        def do_HEAD(self):
            self.send(200, b"")

        def do_GET(self):
            hits.append(self.path)
            if mode == "hang":
                time.sleep(30)
                return
            if mode == "500":
                return self.send(500, {"type": "urn:ietf:params:acme:error:serverInternal",
                                       "detail": "fake outage"},
                                 "application/problem+json", [("Retry-After", "1")])
            if mode == "garbage":
                return self.send(200, b"{\"newNonce\": [unterminated")
            if mode == "type":
                return self.send(200, b"<html>not an ACME directory</html>", "text/html")
            b = self.base()
            if self.path.startswith("/renewalInfo/"):  # RFC 9773: a window an hour long
                start = time.time() + (-7200 if mode == "ari-past" else 30 * 86400)
                iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa
                return self.send(200, {"suggestedWindow": {"start": iso(start),
                                                           "end": iso(start + 3600)}})
            d = {"newNonce": b + "/nonce", "newAccount": b + "/acct", "newOrder": b + "/order"}
            if mode.startswith("ari"):
                d["renewalInfo"] = b + "/renewalInfo/"
            return self.send(200, d)

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            self.rfile.read(n)
            b = self.base()
            if self.path == "/acct":
                return self.send(201, {"status": "valid"}, extra=[("Location", b + "/acct/1")])
            if self.path == "/order" and mode.startswith("ari"):
                return self.send(500, {"type": "urn:ietf:params:acme:error:serverInternal",
                                       "detail": "no orders today"}, "application/problem+json")
            if self.path == "/order":
                return self.send(201, {"status": "pending", "authorizations": [b + "/authz"],
                                       "finalize": b + "/fin"},
                                 extra=[("Location", b + "/order/1")])
            if self.path == "/authz":
                return self.send(200, {"status": "pending",
                                       "identifier": {"type": "dns", "value": "a.test"},
                                       "challenges": [{"type": t, "url": b + "/ch",
                                                       "token": "tok123", "status": "pending"}
                                                      for t in ("http-01", "tls-alpn-01")]})
            if self.path == "/ch":
                return self.send(200, {"type": "http-01", "status": "processing"})
            return self.send(404, b"{}")

    srv = FakeCA(("127.0.0.1", 0), H)
    srv.hits = hits
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


FAKE_ENV = {"RINGHTTPD_ACME_BACKOFF": "1", "RINGHTTPD_ACME_TIMEOUT": "2"}

FAILURES = {
    "500": "serverInternal: fake outage",
    "garbage": "no JSON object",
    "type": "Content-Type 'text/html', not JSON",
    "hang": "Timeout",
    "down": "Couldn't connect",
}


@pytest.mark.parametrize("mode", list(FAILURES))
def test_a_failing_ca_never_stops_serving(make_server, docroot, ports, tmp_path, mode):
    ca = None
    if mode == "down":
        url = f"http://127.0.0.1:{free_port()}/dir"
    else:
        ca = fake_ca(mode)
        url = f"http://127.0.0.1:{ca.server_address[1]}/dir"
    try:
        srv = make_server(docroot, env=FAKE_ENV, args=[
            "-p", str(ports[0]), "--tls-port", str(ports[1]), "--acme-email", "ops@example.org",
            "--acme-ca", url, "--acme-state", str(tmp_path / "state"), "--acme-domain",
            "a.test"])
        # Requests are answered all along, however the CA misbehaves: none waits for an
        # exchange with it (each may take RINGHTTPD_ACME_TIMEOUT, 2 s, curl's limit here), until
        # the problem has been logged and tried again (backoff shortened to a second).
        deadline, asked = time.monotonic() + 20, 0
        while "(2 in a row" not in srv.stderr_text() and time.monotonic() < deadline:
            out = subprocess.run(["curl", "-sS", "--max-time", "2",
                                  f"http://127.0.0.1:{ports[0]}/"], capture_output=True,
                                 timeout=10)
            assert out.returncode == 0 and b"index" in out.stdout
            asked += 1
            time.sleep(0.1)
        assert "(2 in a row" in srv.stderr_text() and asked, srv.stderr_text()
        err = srv.stderr_text()
        assert "acme: order for a.test failed" in err and FAILURES[mode] in err, err
        if ca:
            assert len(ca.hits) >= 2
        # A handshake for the name still waiting gets a clear alert.
        ctx = ssl.create_default_context()
        with pytest.raises(ssl.SSLError, match="UNRECOGNIZED_NAME"):
            with socket.create_connection(("127.0.0.1", ports[1]), timeout=5) as s:
                ctx.wrap_socket(s, server_hostname="a.test")
        assert not list((tmp_path / "state").glob("*.pem"))
    finally:
        if ca:
            ca.shutdown()
            ca.server_close()


def test_challenge_answers_only_its_token_and_name_ahead_of_everything(make_server, docroot,
                                                                       ports, tmp_path):
    ca = fake_ca("pending")
    (docroot / ".well-known" / "acme-challenge").mkdir(parents=True)
    (docroot / ".well-known" / "acme-challenge" / "nope").write_text("a file\n")
    htpasswd = tmp_path / "htpasswd"
    subprocess.run(["htpasswd", "-cbB", str(htpasswd), "u", "p"], check=True,
                   capture_output=True)
    try:
        make_server(docroot, env=FAKE_ENV, args=[
            "-p", str(ports[0]), "--tls-port", str(ports[1]), "--acme-email", "ops@example.org",
            "--acme-ca", f"http://127.0.0.1:{ca.server_address[1]}/dir", "--acme-state",
            str(tmp_path / "state"), "--acme-domain", "a.test", "--redirect-https",
            "--basic-auth", f"/={htpasswd}", "--acme-challenge", "http-01"])

        def get(host, path):
            p = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "-H",
                                f"Host: {host}", f"http://127.0.0.1:{ports[0]}{path}"],
                               capture_output=True, timeout=10)
            body, _, code = p.stdout.rpartition(b"\n")
            return int(code), body
        tok = "/.well-known/acme-challenge/tok123"
        assert wait_for(lambda: get("a.test", tok)[0] == 200, 20)
        code, body = get(f"a.test:{ports[0]}", tok)
        thumb = body.decode().split(".", 1)
        assert code == 200 and thumb[0] == "tok123" and len(thumb[1]) == 43, body
        # Never for another name, nor for a token it does not hold (a file there or not).
        assert get("b.test", tok)[0] == 404
        assert get("a.test", "/.well-known/acme-challenge/nope")[0] == 404
        assert get("a.test", "/.well-known/acme-challenge/tok12")[0] == 404
        # Everything else still meets --redirect-https first.
        assert get("a.test", "/")[0] == 308
    finally:
        ca.shutdown()
        ca.server_close()


def test_stop_abandons_a_hanging_exchange(make_server, docroot, ports, tmp_path):
    """SIGTERM while the ACME thread waits on a CA that never answers (a minute's timeout):
    the exchange is abandoned, the process drains and exits 0 at once (and, under ASan, frees
    what the half-made client held)."""
    ca = fake_ca("hang")
    try:
        srv = make_server(docroot, env={"RINGHTTPD_ACME_TIMEOUT": "60"}, args=[
            "-p", str(ports[0]), "--tls-port", str(ports[1]), "--acme-email", "ops@example.org",
            "--acme-ca", f"http://127.0.0.1:{ca.server_address[1]}/dir", "--acme-state",
            str(tmp_path / "state"), "--acme-domain", "a.test"])
        assert wait_for(lambda: ca.hits, 10)
        assert srv.stop(timeout=10) == 0, srv.stderr_text()
        assert "order for a.test failed" not in srv.stderr_text()
    finally:
        ca.shutdown()
        ca.server_close()


@pytest.mark.parametrize("window", ["past", "future"])
def test_ari_window_decides_the_renewal_and_a_failure_keeps_the_certificate(
        make_server, docroot, ports, tmp_path, test_ca, window):
    """A certificate valid for two days (renewal by lifetime: in 32 hours) found at start; the
    CA's renewalInfo window, asked with the certificate's ARI ID, says now (past) or in a month
    (future). Now: a renewal is ordered at once; the CA refuses it and the certificate, still
    valid, keeps serving. Future: nothing is ordered."""
    ca_crt, _, _ = test_ca
    d = tmp_path / "pre"
    d.mkdir()
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    subprocess.run(["openssl", "req", "-new", *ec, "-keyout", d / "k.pem", "-out", d / "r.csr",
                    "-subj", "/CN=a.test"], check=True, capture_output=True)
    (d / "ext").write_text("subjectAltName=DNS:a.test\nauthorityKeyIdentifier=keyid\n")
    subprocess.run(["openssl", "x509", "-req", "-in", d / "r.csr", "-CA", ca_crt, "-CAkey",
                    ca_crt.parent / "ca.key", "-set_serial", "0x87654321", "-days", "2",
                    "-extfile", d / "ext", "-out", d / "c.pem"], check=True, capture_output=True)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "a.test.pem").write_bytes((d / "c.pem").read_bytes() + (d / "k.pem").read_bytes())
    ca = fake_ca("ari-" + window)
    try:
        srv = make_server(docroot, env=FAKE_ENV, args=[
            "-p", str(ports[0]), "--tls-port", str(ports[1]), "--acme-email", "ops@example.org",
            "--acme-ca", f"http://127.0.0.1:{ca.server_address[1]}/dir", "--acme-state",
            str(state), "--acme-domain", "a.test", "-v"])
        assert "acme: a.test: valid until" in srv.stderr_text()
        ari = wait_for(lambda: [h for h in ca.hits if h.startswith("/renewalInfo/")], 10)
        # RFC 9773 4.1: base64url(AKI keyIdentifier) "." base64url(serial 00 87 65 43 21)
        assert ari and ari[0].endswith(".AIdlQyE"), ca.hits
        if window == "past":
            assert wait_for(lambda: "(1 in a row" in srv.stderr_text(), 15), srv.stderr_text()
            err = srv.stderr_text()
            assert "ordering a certificate for a.test" in err and "(renewal)" in err
            assert "no orders today" in err and "the current certificate stays" in err
        else:
            time.sleep(2)
            assert "ordering" not in srv.stderr_text()
        # Either way the certificate found is served.
        rc, body = curl_https("a.test", ports[1], ca_crt)
        assert rc == 0 and b"index" in body, body
    finally:
        ca.shutdown()
        ca.server_close()


def thumbprint(state):
    """RFC 7638 thumbprint of the account key ringhttpd made in state (P-256), computed here."""
    import base64
    import hashlib
    der = subprocess.run(["openssl", "pkey", "-in", state / "account.key", "-pubout",
                          "-outform", "DER"], check=True, capture_output=True).stdout
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()  # noqa: E731
    jwk = '{"crv":"P-256","kty":"EC","x":"%s","y":"%s"}' % (b64(der[-64:-32]), b64(der[-32:]))
    return b64(hashlib.sha256(jwk.encode()).digest())


def test_tls_alpn_challenge_certificate_for_its_name_only(make_server, docroot, ports,
                                                          tmp_path):
    """RFC 8737: ALPN acme-tls/1 with SNI a.test gets a self-signed certificate for a.test
    whose critical acmeIdentifier holds SHA-256 of the key authorization; another name gets
    nothing, the connection carries no HTTP, and an ordinary handshake for a.test (still
    waiting) gets unrecognized_name."""
    import hashlib
    ca = fake_ca("pending")
    state = tmp_path / "state"
    try:
        make_server(docroot, env=FAKE_ENV, args=[
            "-p", str(ports[0]), "--tls-port", str(ports[1]), "--acme-email", "ops@example.org",
            "--acme-ca", f"http://127.0.0.1:{ca.server_address[1]}/dir", "--acme-state",
            str(state), "--acme-domain", "a.test", "--acme-challenge", "tls-alpn-01"])

        def hello(name, alpn):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols([alpn])
            s = socket.create_connection(("127.0.0.1", ports[1]), timeout=5)
            return ctx.wrap_socket(s, server_hostname=name)
        got = []

        def answered():
            try:
                with hello("a.test", "acme-tls/1") as t:
                    got[:] = [t.selected_alpn_protocol(), t.getpeercert(binary_form=True)]
                    t.sendall(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
                    got.append(t.recv(4096))
                return True
            except (ssl.SSLError, OSError):
                return False
        assert wait_for(answered, 15)
        proto, der, reply = got
        assert proto == "acme-tls/1"
        assert reply == b""  # closed: a validation carries no HTTP
        digest = hashlib.sha256(("tok123." + thumbprint(state)).encode()).digest()
        assert b"\x04\x20" + digest in der
        text = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-text"],
                              input=der, capture_output=True, check=True).stdout.decode()
        assert "1.3.6.1.5.5.7.1.31: critical" in text and "DNS:a.test" in text, text
        for name, alpn in (("b.test", "acme-tls/1"), ("a.test", "http/1.1")):
            with pytest.raises(ssl.SSLError, match="UNRECOGNIZED_NAME"):
                hello(name, alpn)
    finally:
        ca.shutdown()
        ca.server_close()


# ---- issue 35: reloads during a renewal; instances started together on one directory ------


def served_leaf(name, port, root):
    """The DER certificate the TLS port presents for SNI name."""
    ctx = ssl.create_default_context(cafile=str(root))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=name) as s:
            return s.getpeercert(binary_form=True)


def pem_leaf(pem):
    """The first certificate of a pair file (chain then key), as DER."""
    text = pem.decode()
    leaf = text.split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----"
    return ssl.PEM_cert_to_DER_cert(leaf.strip())


def pair_matches(path):
    """Whether the pair file's key is the one its first certificate names (openssl's view)."""
    cert = subprocess.run(["openssl", "x509", "-in", str(path), "-noout", "-pubkey"],
                          capture_output=True, timeout=10)
    key = subprocess.run(["openssl", "pkey", "-in", str(path), "-pubout"], capture_output=True,
                         timeout=10)
    return cert.returncode == 0 and key.returncode == 0 and cert.stdout == key.stdout


def test_sighup_during_a_renewal_loses_no_certificate(make_server, docroot, pebble, ports,
                                                      tmp_path):
    """SIGHUPs sent over and over while the ACME thread renews (a configuration tool reloading
    in a loop): the renewal completes, the pair on disk is whole (its key matches its
    certificate, no temporary file is left), every reload succeeds, and new connections get the
    renewed certificate. The test checks that reloads did land between the renewal's start and
    its end, so it tests what it says."""
    import signal
    pb = pebble(validity=9)  # renewed at two thirds: ~6 s
    state = tmp_path / "state"
    conf = tmp_path / "sites.yaml"
    conf.write_text(f"""
sites:
  - hosts: [a.test]
    root: {docroot}
    default: true
""")
    srv = make_server(None, args=acme_args(pb, state, ports, "--config", str(conf)))
    wait_issued(srv, "a.test")
    root = pb.root(tmp_path)
    wait_https("a.test", ports[1], root)
    first = (state / "a.test.pem").read_bytes()
    started = lambda: "ordering a certificate for a.test" in srv.stderr_text().split(  # noqa: E731
        "certificate for a.test issued")[-1]
    assert wait_for(started, 30, 0.01), srv.stderr_text()[-3000:]
    renewals = lambda: srv.stderr_text().count("certificate for a.test renewed")  # noqa: E731

    def reload_landed_in_a_renewal():
        logs, at = srv.stderr_text(), 0
        while (start := logs.find("(renewal)", at)) >= 0:
            end = logs.find("certificate for a.test renewed", start)
            if end < 0:
                return False
            if "reload (SIGHUP)" in logs[start:end]:
                return True
            at = end
        return False
    # A renewal can end between two signals on a loaded machine: then the next one (every ~6
    # s with this validity) is tried, three at most, so the premise is met without a timing.
    sent = 0
    while not (renewals() and reload_landed_in_a_renewal()) and renewals() < 3 and sent < 1800:
        srv.proc.send_signal(signal.SIGHUP)
        sent += 1
        time.sleep(0.02)
    assert renewals(), srv.stderr_text()[-3000:]
    # A few more, after the renewal, so a reload also re-reads the renewed pair.
    for _ in range(5):
        srv.proc.send_signal(signal.SIGHUP)
        time.sleep(0.05)
    logs = srv.stderr_text()
    assert reload_landed_in_a_renewal(), "no reload landed during a renewal"
    assert "failed" not in logs, logs[-3000:]
    assert wait_for(lambda: srv.stderr_text().count("reload (SIGHUP): serving") >= 2, 15, 0.2)
    now = (state / "a.test.pem").read_bytes()
    assert now != first
    assert pair_matches(state / "a.test.pem")
    assert not [p.name for p in state.iterdir() if p.name.endswith(".tmp")]
    assert wait_for(lambda: served_leaf("a.test", ports[1], root) ==
                    pem_leaf((state / "a.test.pem").read_bytes()), 15, 0.2)
    assert srv.proc.poll() is None


def test_two_instances_started_together_order_each_certificate_once(make_server, docroot, pebble,
                                                                    tmp_path):
    """Two instances on one state directory, started at the same moment (no lock held before,
    unlike test_two_processes_sharing_the_state_order_once), each wanting the same two
    certificates: Pebble sees one order per certificate and one account key is made; both
    instances serve both names with the same certificate. A validates HTTP-01 on Pebble's
    httpPort, B TLS-ALPN-01 on its tlsPort, so whichever wins a certificate's lock can be
    validated."""
    pa, pb_ports = (free_port(), free_port()), (free_port(), free_port())
    pb = pebble(http_port=pa[0], tls_port=pb_ports[1])
    state = tmp_path / "state"
    conf = tmp_path / "sites.yaml"
    conf.write_text(f"""
sites:
  - hosts: [a.test, www.a.test]
    root: {docroot}
    default: true
  - hosts: [b.test]
    root: {docroot}
""")
    a = make_server(None, ready=False, args=acme_args(pb, state, pa, "--config", str(conf),
                                                      challenge="http-01"))
    b = make_server(None, ready=False, args=acme_args(pb, state, pb_ports, "--config", str(conf),
                                                      challenge="tls-alpn-01"))
    a.wait_ready()
    b.wait_ready()
    root = pb.root(tmp_path)
    for name in ("a.test", "www.a.test", "b.test"):
        for port in (pa[1], pb_ports[1]):
            wait_https(name, port, root, timeout=ISSUE_TIMEOUT)
    logs = a.stderr_text() + b.stderr_text()
    assert logs.count("ordering a certificate for a.test") == 1, logs
    assert logs.count("ordering a certificate for b.test") == 1, logs
    assert logs.count("made a new account key") == 1, logs
    assert "failed" not in logs, logs
    assert pb.orders() == 2
    for name, file in (("a.test", "a.test.pem"), ("www.a.test", "a.test.pem"),
                       ("b.test", "b.test.pem")):
        want = pem_leaf((state / file).read_bytes())
        assert served_leaf(name, pa[1], root) == want
        assert served_leaf(name, pb_ports[1], root) == want
        assert pair_matches(state / file)


def test_a_reload_keeps_a_failed_orders_backoff(make_server, docroot, ports, tmp_path):
    """A configuration tool that reloads (SIGHUP) every few seconds while the CA fails must
    not turn the backoff into an order a reload: CAs count failed orders (Let's Encrypt
    refuses a name after a few an hour), so a certificate whose order failed waits for its next
    try however often the configuration is read again. A name new in the reloaded
    configuration is still ordered at once. The old build ordered again at every reload."""
    import signal
    ca = fake_ca("500")
    url = f"http://127.0.0.1:{ca.server_address[1]}/dir"
    conf = tmp_path / "sites.yaml"
    one = f"""
sites:
  - hosts: [a.test]
    root: {docroot}
    default: true
"""
    conf.write_text(one)
    env = dict(os.environ, RINGHTTPD_ACME_BACKOFF="600", RINGHTTPD_ACME_TIMEOUT="2")
    try:
        srv = make_server(None, env=env, args=[
            "-p", str(ports[0]), "--tls-port", str(ports[1]), "--acme-email", "ops@example.org",
            "--acme-ca", url, "--acme-state", str(tmp_path / "state"), "--config", str(conf)])
        assert wait_for(lambda: "order for a.test failed (1 in a row" in srv.stderr_text(), 20,
                        0.1), srv.stderr_text()
        for n in range(1, 4):
            srv.proc.send_signal(signal.SIGHUP)
            assert wait_for(lambda: srv.stderr_text().count("reload (SIGHUP): serving") == n,
                            15, 0.1), srv.stderr_text()
        # The new name of a fourth reload is ordered at once, and only it: its failure is the
        # second line that says an order failed; a.test's stays the only one of its own.
        conf.write_text(one + f"""  - hosts: [b.test]
    root: {docroot}
""")
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: "order for b.test failed (1 in a row" in srv.stderr_text(), 20,
                        0.1), srv.stderr_text()
        logs = srv.stderr_text()
        assert logs.count("ordering a certificate for a.test") == 1, logs
        assert logs.count("order for a.test failed") == 1, logs
        assert logs.count("ordering a certificate for b.test") == 1, logs
        assert srv.proc.poll() is None
    finally:
        ca.shutdown()
        ca.server_close()
