"""The test site over HTTPS in headless Chromium (issue 14), on both engines: every request
succeeds, no console error, the page is a secure context, HSTS arrives.

The certificate is signed by a CA this module makes (openssl); Chromium is told to trust it by
its public key (--ignore-certificate-errors-spki-list, which needs the --user-data-dir the
fixture gives it), so the page counts as a secure context with no certificate warning. Chromium
and the site come from test_browser.py (skipped, never failed, where Chromium cannot run)."""
import base64
import hashlib
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("websocket", reason="websocket-client is not installed")

from test_browser import (CDP, CHROMIUM_FLAGS, EXPECTED, STARTUP_TIMEOUT, _assert_clean,  # noqa
                          _end, _open, chromium, site_root)
from test_tls import HTTPS_RE, openssl

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site_pki(tmp_path_factory):
    """A CA and a localhost certificate it signed; (cert, key, SPKI sha256 in base64)."""
    d = tmp_path_factory.mktemp("browser-pki")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", d / "ca.key", "-out", d / "ca.crt", "-subj", "/CN=ringhttpd browser CA",
            "-days", "3")
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", d / "site.key", "-out", d / "site.csr", "-subj", "/CN=localhost")
    (d / "site.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", d / "site.csr", "-CA", d / "ca.crt", "-CAkey", d / "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", d / "site.ext", "-out", d / "site.crt")
    spki = openssl("x509", "-in", d / "site.crt", "-noout", "-pubkey").stdout
    der = openssl("pkey", "-pubin", "-outform", "DER", stdin=spki).stdout
    return d / "site.crt", d / "site.key", base64.b64encode(hashlib.sha256(der).digest()).decode()


@pytest.fixture(scope="module")
def tls_browser(chromium, site_pki):
    profile = Path(tempfile.mkdtemp(prefix="ringhttpd-chromium-tls-"))
    log = open(profile / "chromium.log", "w+b")
    proc = subprocess.Popen([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                             f"--ignore-certificate-errors-spki-list={site_pki[2]}",
                             "about:blank"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True)
    cdp = None
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + STARTUP_TIMEOUT
        lines = []
        while len(lines) < 2:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"chromium did not start:\n{log.read().decode(errors='replace')}")
            time.sleep(0.1)
            if port_file.exists():
                lines = port_file.read_text().split()
        cdp = CDP(f"ws://127.0.0.1:{int(lines[0])}{lines[1]}")
        yield cdp
    finally:
        if cdp is not None:
            try:
                cdp.call("Browser.close", timeout=5)
            except Exception:
                pass
            cdp.close()
        _end(proc)
        log.close()
        shutil.rmtree(profile, ignore_errors=True)


def test_site_over_https_in_chromium(make_server, engine, tls_browser, site_root, site_pki):
    cert, key, _ = site_pki
    server = make_server(docroot=str(site_root), engine=engine,
                         args=("--tls-port", "0", "--tls-cert", str(cert), "--tls-key", str(key),
                               "--hsts", "300"))
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
            assert got[path]["protocol"] == "http/1.1"
            assert got[path]["securityState"] == "secure", (path, got[path]["securityState"])
        hsts = {k.lower(): v for k, v in got["/"]["headers"].items()}
        assert hsts.get("strict-transport-security") == "max-age=300"
    finally:
        page.close()
