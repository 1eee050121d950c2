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

from conftest import wait_for

PEBBLE = shutil.which("pebble")
CHALLTESTSRV = shutil.which("pebble-challtestsrv")

pytestmark = pytest.mark.skipif(not PEBBLE or not CHALLTESTSRV,
                                reason="pebble not installed (scripts/deps.sh test)")

ISSUE_TIMEOUT = 60


def free_port():
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=20):
    def up():
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited {proc.returncode}")
        with contextlib.closing(socket.socket()) as s:
            return s.connect_ex(("127.0.0.1", port)) == 0
    assert wait_for(up, timeout), f"{proc.args[0]} did not listen on {port}"


class Pebble:
    """pebble and pebble-challtestsrv for one test, validating on http_port and tls_port."""

    def __init__(self, tmp, test_ca, http_port, tls_port, validity=None):
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
            [PEBBLE, "-config", str(cfile), "-dnsserver", f"127.0.0.1:{self.dns_port}",
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
    return free_port(), free_port()


@pytest.fixture
def pebble(tmp_path, test_ca, ports):
    started = []

    def start(validity=None, http_port=None, tls_port=None):
        p = Pebble(tmp_path, test_ca, http_port or ports[0], tls_port or ports[1], validity)
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
