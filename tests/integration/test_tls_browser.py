"""The test site over HTTPS in headless Chromium (issue 14), on both engines: every request
succeeds, no console error, the page is a secure context, HSTS arrives, and Chromium used h2
(issue 18: ALPN; the responses' protocol, performance entries, the access log).

The certificate is signed by a CA this module makes (openssl), which Chromium trusts as any
operator's browser would: the CA is added to the NSS database Chromium reads on Linux
($HOME/.pki/nssdb, HOME a directory of the test's; certutil from libnss3-tools), so the page
counts as a secure context with no certificate warning. Chromium and the site come from
test_browser.py (skipped, never failed, where Chromium cannot run)."""
import json
import re
import subprocess

import pytest

pytest.importorskip("websocket", reason="websocket-client is not installed")

import test_browser
from test_browser import EXPECTED, _assert_clean, _open, browser, chromium, site_root  # noqa
from conftest import wait_for
from test_tls import HTTPS_RE, openssl

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site_pki(tmp_path_factory):
    """A CA and a localhost certificate it signed, and a HOME whose NSS database (the one
    Chromium reads on Linux) trusts the CA: (cert, key, home)."""
    d = tmp_path_factory.mktemp("browser-pki")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", d / "ca.key", "-out", d / "ca.crt", "-subj", "/CN=ringhttpd browser CA",
            "-days", "3", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", d / "site.key", "-out", d / "site.csr", "-subj", "/CN=localhost")
    (d / "site.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", d / "site.csr", "-CA", d / "ca.crt", "-CAkey", d / "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", d / "site.ext", "-out", d / "site.crt")
    nssdb = d / "home" / ".pki" / "nssdb"
    nssdb.mkdir(parents=True)
    for args in (["-N", "--empty-password"],
                 ["-A", "-n", "ringhttpd browser CA", "-t", "C,,", "-i", str(d / "ca.crt")]):
        p = subprocess.run(["certutil", "-d", f"sql:{nssdb}", *args], capture_output=True)
        assert p.returncode == 0, p.stderr.decode(errors="replace")
    return d / "site.crt", d / "site.key", d / "home"


@pytest.fixture(scope="module")
def tls_browser(request, site_pki):
    """test_browser's Chromium, started with HOME where the test CA is trusted."""
    test_browser.CHROMIUM_ENV["HOME"] = str(site_pki[2])
    try:
        return request.getfixturevalue("browser")
    finally:
        del test_browser.CHROMIUM_ENV["HOME"]


def assert_every_hop(page, log, hop, version):
    """The page's own performance entries name `hop` (h2, h3) as every resource's next-hop
    protocol, and the access log has a line for each EXPECTED path, every line saying
    `version` (HTTP/2.0, HTTP/3.0)."""
    hops = page.evaluate("JSON.stringify([performance.getEntriesByType('navigation')[0]"
                         ".nextHopProtocol].concat(performance.getEntriesByType('resource')"
                         ".map(e => e.nextHopProtocol)))")
    assert set(json.loads(hops)) == {hop}, hops

    def logged():  # the access log is written in batches
        text = log.read_text() if log.exists() else ""
        return all(f" {p} HTTP/" in text for p in EXPECTED) and text
    text = wait_for(logged)
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines and all(version in line for line in lines), lines[:5]


def test_site_over_https_in_chromium(make_server, engine, tls_browser, site_root, site_pki,
                                    tmp_path):
    """Also (issue 18): Chromium speaks h2 to it, by ALPN: each response's protocol, the
    page's own performance entries and the server's access log say so."""
    cert, key, _ = site_pki
    log = tmp_path / "access.log"
    server = make_server(docroot=str(site_root), engine=engine,
                         args=("--tls-port", "0", "--tls-cert", str(cert), "--tls-key", str(key),
                               "--hsts", "300", "--http2", "on", "--access-log", str(log)))
    port = int(HTTPS_RE.search(server.stderr_text()).group(2))
    page = _open(tls_browser, f"https://localhost:{port}/")
    try:
        assert page.evaluate("location.protocol") == "https:"
        assert page.evaluate("window.isSecureContext") is True
        assert page.poll("document.body.dataset.moduleRan === 'yes'"), page.console_errors()
        _assert_clean(page, server)
        got = {}
        for p in page.events("Network.responseReceived"):
            url = p["response"]["url"]
            if url.startswith("https://"):
                got[re.sub(r"^https://[^/]+", "", url) or "/"] = p["response"]
        for path in EXPECTED:
            assert path in got, f"{path} was never fetched over https: {sorted(got)}"
            assert got[path]["status"] == 200, (path, got[path]["status"])
            assert got[path]["protocol"] == "h2", (path, got[path]["protocol"])
            assert got[path]["securityState"] == "secure", (path, got[path]["securityState"])
        hsts = {k.lower(): v for k, v in got["/"]["headers"].items()}
        assert hsts.get("strict-transport-security") == "max-age=300"
        assert_every_hop(page, log, "h2", "HTTP/2.0")
    finally:
        page.close()
