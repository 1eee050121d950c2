"""The fleet example (issue 38) run as shipped: contrib/fleet/fleet.sh starts two ringhttpd
instances, each serving its own `cp -r` copy of one tree and sharing the ticket-key and QUIC
secret files, behind HAProxy (Debian 12's) in `mode tcp` with `send-proxy-v2` on the TLS port
and `send-proxy` (v1) on the cleartext port; only the ports are the test's (its environment).
Through it, from a client bound to 127.0.0.9: both access logs and --limit-conn see the
client's own address; a TLS session made at one instance resumes at the other; an ETag from
one instance (identity and Brotli) is a 304 at the other; a reproducible build (same size,
mtime 0, other bytes) gets a new ETag on both. The PROXY refusals (a header from a source not
trusted, a truncated one, 200 bytes of garbage) are test_proxy.py's, checked here once against
an instance of the example."""

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RINGHTTPD, free_port, wait_for
from test_proxy import _connects, _raw, terminate

pytestmark = pytest.mark.schemes("https")

FLEET_SH = Path(__file__).resolve().parents[2] / "contrib" / "fleet" / "fleet.sh"
CLIENT = "127.0.0.9"
JS = "".join(f"function f{i}(a, b) {{ return a * {i} + b; }}\n" for i in range(2000)).encode()


class Fleet:
    def __init__(self, proc, state, ports, ca, err, env):
        self.proc, self.state, self.ports, self.ca = proc, state, ports, ca
        self.err, self.env = err, env

    def log(self, name):
        p = self.state / f"{name}.access.log"
        return p.read_text(errors="replace").splitlines() if p.exists() else []

    def served_by(self, path):
        """The instance ("a" or "b") whose access log has a request for path, or None."""
        for name in ("a", "b"):
            if any(f" {path} " in line for line in self.log(name)):
                return name
        return None


@pytest.fixture
def fleet(engine, test_ca, tmp_path):
    """start(limit_conn=100): the example running, its ports ready: a Fleet."""
    ca, crt, key = test_ca
    site = tmp_path / "site"
    (site / "assets").mkdir(parents=True)
    (site / "index.html").write_bytes(b"<!doctype html><title>fleet</title>\n")
    (site / "hello.txt").write_bytes(b"hello from the fleet\n")
    (site / "assets" / "app.js").write_bytes(JS)
    started = []

    def start(limit_conn=100):
        ports = {k: free_port() for k in ("FLEET_HTTPS", "FLEET_HTTP", "FLEET_A_HTTPS",
                                          "FLEET_A_HTTP", "FLEET_B_HTTPS", "FLEET_B_HTTP")}
        state = tmp_path / "state"
        env = dict(os.environ, RINGHTTPD=RINGHTTPD, FLEET_CERT=str(crt), FLEET_KEY=str(key),
                   FLEET_ENGINE=engine, FLEET_LIMIT_CONN=str(limit_conn),
                   **{k: str(v) for k, v in ports.items()})
        err = tmp_path / "fleet.stderr"
        with open(err, "wb") as out:
            proc = subprocess.Popen(["sh", str(FLEET_SH), str(site), str(state)], env=env,
                                    stdout=subprocess.DEVNULL, stderr=out)
        started.append(proc)
        for port in ports.values():
            if not wait_for(lambda: _connects(port) or proc.poll() is not None, timeout=20) \
                    or proc.poll() is not None:
                pytest.fail(f"fleet.sh did not come up: {err.read_text()[-3000:]}")
        fl = Fleet(proc, state, ports, ca, err, env)
        # HAProxy may have checked an instance before it listened (it then waits for two good
        # checks, 2 s apart): ready once each frontend has reached both instances. From
        # 127.0.0.8, a client no test counts.
        for proto in ("http", "https"):
            seen = set()
            for i in range(100):
                path = f"/hello.txt?ready={proto}{i}"
                if proto == "http":
                    curl(f"http://127.0.0.1:{ports['FLEET_HTTP']}{path}", source="127.0.0.8")
                else:
                    https(fl, ports["FLEET_HTTPS"], path, source="127.0.0.8")
                wait_for(lambda: fl.served_by(path), timeout=2)
                seen.add(fl.served_by(path))
                if seen >= {"a", "b"}:
                    break
                time.sleep(0.1)
            assert seen >= {"a", "b"}, f"the balancer's {proto} frontend never reached both"
        return fl

    yield start
    for proc in started:
        terminate(proc, 20)  # fleet.sh stops what it started


def curl(*args, source=CLIENT):
    """curl from source: (status, headers lowercased, body)."""
    p = subprocess.run(["curl", "-sS", "--interface", source, "-D", "-", *args],
                       capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    head, _, body = p.stdout.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def https(fl, port, path, *args, source=CLIENT):
    return curl("--cacert", str(fl.ca), "--resolve", f"localhost:{port}:127.0.0.1",
                *args, f"https://localhost:{port}{path}", source=source)


def test_both_instances_see_the_clients_own_address(fleet):
    """Requests through the balancer (TLS with PROXY v2, HTTP/1.1 and HTTP/2; cleartext with
    v1) reach both instances (round robin), and both access logs name 127.0.0.9, never the
    balancer's 127.0.0.1 (whose only requests are its health checks; the fixture's own are
    127.0.0.8's)."""
    fl = fleet()
    paths = []
    for i in range(4):
        for proto, port in (("v2", fl.ports["FLEET_HTTPS"]), ("v1", fl.ports["FLEET_HTTP"])):
            path = f"/hello.txt?{proto}={i}"
            if proto == "v2":
                status, _, body = https(fl, port, path, *(("--http2",) if i % 2 else ()))
            else:
                status, _, body = curl(f"http://127.0.0.1:{port}{path}")
            assert status == 200 and body == b"hello from the fleet\n"
            paths.append(path)
    wait_for(lambda: all(fl.served_by(p) for p in paths), timeout=5)
    assert {fl.served_by(p) for p in paths} == {"a", "b"}
    for name in ("a", "b"):
        lines = [line for line in fl.log(name)
                 if " /healthz " not in line and "?ready=" not in line]  # checks, the fixture's
        assert lines and [x for x in lines if not x.startswith(CLIENT + " ")] == []


def _hold(port, source, tag):
    """A kept-alive connection through the balancer from source that got a 200 for tag, or
    None when it was refused (closed)."""
    import socket
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET /hello.txt?{tag} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    try:
        got = s.recv(100)
    except OSError:
        got = b""
    if got.startswith(b"HTTP/1.1 200"):
        return s
    s.close()
    return None


def test_limit_conn_counts_the_client_behind_the_balancer(fleet):
    """--limit-conn 1 on each instance: while 127.0.0.9 holds a connection at each, its next
    one is refused wherever the balancer sends it, and 127.0.0.10's is served (without the
    PROXY header every client would be the balancer, and 127.0.0.10 refused too)."""
    fl = fleet(limit_conn=1)
    port = fl.ports["FLEET_HTTP"]
    held = []
    try:
        for i in range(6):  # round robin: two in a row land on both instances, as a rule
            s = _hold(port, CLIENT, f"held={i}")
            if s:
                held.append(s)
            wait_for(lambda: fl.served_by(f"/hello.txt?held={i}"), timeout=2)
            if {fl.served_by(f"/hello.txt?held={j}") for j in range(i + 1)} >= {"a", "b"}:
                break
        assert len(held) == 2
        for i in range(2):  # each instance in turn (round robin)
            assert _hold(port, CLIENT, f"more={i}") is None
        for i in range(2):  # other clients, one at each; kept: a close is counted late
            s = _hold(port, f"127.0.0.{10 + i}", f"other={i}")
            assert s is not None
            held.append(s)
    finally:
        for s in held:
            s.close()


def _s_client(fl, path, *args):
    """openssl s_client from 127.0.0.9 through the balancer, one GET of path: its output."""
    req = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    p = subprocess.run(["openssl", "s_client", "-bind", f"{CLIENT}:0", "-connect",
                        f"127.0.0.1:{fl.ports['FLEET_HTTPS']}", "-servername", "localhost",
                        "-CAfile", str(fl.ca), "-ign_eof", *args],
                       input=req.encode(), capture_output=True, timeout=30)
    return p.stdout.decode(errors="replace")


def test_a_tls_session_from_one_instance_resumes_at_the_other(fleet, tmp_path):
    """The shared --ticket-key-file: a session made at one instance (openssl s_client
    -sess_out) resumes at the other one (-sess_in: "Reused"), which the balancer picked."""
    fl = fleet()
    sess = tmp_path / "tls.sess"
    out = _s_client(fl, "/hello.txt?s=0", "-sess_out", str(sess))
    assert "hello from the fleet" in out and sess.stat().st_size > 0, out[-2000:]
    assert wait_for(lambda: fl.served_by("/hello.txt?s=0"), timeout=5)
    first = fl.served_by("/hello.txt?s=0")
    for i in range(1, 5):  # round robin: the next connection goes to the other, as a rule
        out = _s_client(fl, f"/hello.txt?s={i}", "-sess_in", str(sess))
        assert "hello from the fleet" in out, out[-2000:]
        assert wait_for(lambda: fl.served_by(f"/hello.txt?s={i}"), timeout=5)
        if fl.served_by(f"/hello.txt?s={i}") != first:
            assert "Reused, TLSv1.3" in out, out[-2000:]
            return
    pytest.fail("the balancer never sent a connection to the other instance")


def test_rotating_the_secrets_keeps_sessions_resuming(fleet, tmp_path):
    """`fleet.sh rotate STATE` (the current secrets become the previous ones, new current ones,
    SIGHUP to both instances): both re-read the files, and a session made before the rotation
    still resumes (its ticket key is now the second, which still decrypts)."""
    fl = fleet()
    sess = tmp_path / "tls.sess"
    out = _s_client(fl, "/hello.txt?r=0", "-sess_out", str(sess))
    assert "hello from the fleet" in out
    old = (fl.state / "ticket.key").read_bytes()
    subprocess.run(["sh", str(FLEET_SH), "rotate", str(fl.state)], env=fl.env, check=True,
                   timeout=30)
    assert (fl.state / "ticket.key.previous").read_bytes() == old
    assert (fl.state / "ticket.key").read_bytes() != old
    assert wait_for(lambda: fl.err.read_text().count("HTTP/3 secrets re-read (2 files)") == 2,
                    timeout=10), fl.err.read_text()[-2000:]
    for i in range(1, 3):  # one connection to each instance, by round robin as a rule
        out = _s_client(fl, f"/hello.txt?r={i}", "-sess_in", str(sess))
        assert "Reused, TLSv1.3" in out, out[-2000:]


def until_etag(fl, port, path, *args):
    """The first response from the instance at port to carry an ETag (digests are made off
    the loop: the first responses may have none)."""
    for _ in range(200):
        status, h, body = https(fl, port, path, *args)
        assert status == 200
        if "etag" in h:
            return h, body
        time.sleep(0.025)
    pytest.fail(f"{path} never came with an ETag")


def until_304(fl, port, path, tag, *extra, allowed=()):
    """The first 304 the instance at port gives to If-None-Match: tag, its headers; the
    responses before it may only be 200s with no ETag or one of `allowed`."""
    for _ in range(400):
        status, h, body = https(fl, port, path, "-H", f"If-None-Match: {tag}", *extra)
        if status == 304:
            assert body == b"" and h["etag"] == tag, h
            return h
        assert status == 200 and h.get("etag") in (None, *allowed), h
        time.sleep(0.025)
    pytest.fail(f"{path}: never a 304 for {tag}")


def test_an_etag_from_one_instance_is_a_304_at_the_other(fleet):
    """Each instance serves its own `cp -r` copy (other inodes and mtimes): an ETag from A is
    a 304 at B, for the identity and for a Brotli variant made on the fly, which has its own."""
    fl = fleet()
    root = fl.state
    assert os.stat(root / "a" / "assets" / "app.js").st_ino != \
        os.stat(root / "b" / "assets" / "app.js").st_ino
    a, b = fl.ports["FLEET_A_HTTPS"], fl.ports["FLEET_B_HTTPS"]
    ident, body = until_etag(fl, a, "/assets/app.js")
    assert body == JS and "content-encoding" not in ident
    br = ("-H", "Accept-Encoding: br")
    for _ in range(200):  # the variant is made off the loop too
        hb, _ = until_etag(fl, a, "/assets/app.js", *br)
        if hb.get("content-encoding") == "br":
            break
        time.sleep(0.025)
    assert hb.get("content-encoding") == "br" and hb["etag"] != ident["etag"]
    for tag, extra in ((ident["etag"], ()), (hb["etag"], br)):
        # Each worker of B digests its copy (and makes the variant) off the loop at its first
        # request, serving meanwhile what it has (no response waits for a hash)
        h = until_304(fl, b, "/assets/app.js", tag, *extra, allowed=(ident["etag"],))
        assert h["etag"] == tag


def test_a_reproducible_build_gets_a_new_etag_on_both(fleet):
    """A deploy of a reproducible build (same size, mtime 0, other bytes: nginx's and caddy's
    mtime-size ETags would not change) to both copies: a new ETag, the same at A and B, and
    the old one is a 200 at either."""
    fl = fleet()
    a, b = fl.ports["FLEET_A_HTTPS"], fl.ports["FLEET_B_HTTPS"]
    old, _ = until_etag(fl, a, "/assets/app.js")
    assert old["etag"] == until_etag(fl, b, "/assets/app.js")[0]["etag"]
    new = JS.replace(b"return a * 1 + b", b"return a * 7 + b")
    assert len(new) == len(JS) and new != JS
    for name in ("a", "b"):
        f = fl.state / name / "assets" / "app.js"
        tmp = f.with_name(".app.js.new")  # as a deploy writes: a new file, renamed in place
        tmp.write_bytes(new)
        os.utime(tmp, (0, 0))
        os.rename(tmp, f)
    got = {}
    for name, port in (("a", a), ("b", b)):
        for _ in range(200):
            h, body = until_etag(fl, port, "/assets/app.js")
            if body == new:
                break
            time.sleep(0.025)
        assert body == new and h["last-modified"] == "Thu, 01 Jan 1970 00:00:00 GMT"
        got[name] = h["etag"]
    assert got["a"] == got["b"] != old["etag"]
    for port in (a, b):
        # a worker that has not looked at the file since the deploy (its cache checks an
        # entry once a second) still answers for the old bytes: until it looks
        for _ in range(400):
            status, _, body = https(fl, port, "/assets/app.js", "-H",
                                    f"If-None-Match: {old['etag']}")
            if status != 304:
                break
            time.sleep(0.025)
        assert status == 200 and body == new
        # a worker that has the new bytes but not yet their digest serves them without one
        until_304(fl, port, "/assets/app.js", got["a"], allowed=(old["etag"],))


def test_proxy_headers_only_from_the_balancer(fleet):
    """test_proxy.py's refusals, once against an instance of the example: from the balancer's
    address, a truncated v1 header and 200 bytes of garbage close the connection with nothing
    sent; from another address a PROXY line is no address (a bad request, or closed)."""
    fl = fleet()
    port = fl.ports["FLEET_A_HTTP"]
    assert _raw(port, b"PROXY TCP4 127.0.0.7 127.0.0.1 1234 80") == b""
    assert _raw(port, os.urandom(200)) == b""
    out = _raw(port, b"PROXY TCP4 203.0.113.9 127.0.0.1 1234 80\r\n"
               b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n", source="127.0.0.5")
    assert out == b"" or out.startswith(b"HTTP/1.1 400"), out[:200]
    assert not any(re.match(r"203\.0\.113\.9 ", line) for line in fl.log("a"))
