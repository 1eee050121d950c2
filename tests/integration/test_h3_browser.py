"""The test site over HTTP/3 in headless Chromium (issue 29), on both engines: Chromium, told
to use QUIC for the test origin (--origin-to-force-quic-on, the test CA trusted as in
test_tls_browser), loads every resource with next-hop protocol h3, and the access log says
HTTP/3.0. Skipped, never failed, where Chromium cannot run (test_browser's rule)."""
import re
import socket

import pytest

pytest.importorskip("websocket", reason="websocket-client is not installed")

import test_browser
from test_browser import EXPECTED, _assert_clean, _open, browser, chromium, site_root  # noqa
from test_tls_browser import assert_every_hop, site_pki  # noqa
from conftest import free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quic_port():
    return free_port()


@pytest.fixture(scope="module")
def h3_browser(request, site_pki, quic_port):
    """test_browser's Chromium with QUIC on and forced for localhost:quic_port."""
    flags = list(test_browser.CHROMIUM_FLAGS)
    test_browser.CHROMIUM_FLAGS[:] = [f for f in flags if f != "--disable-quic"] + [
        "--enable-quic", f"--origin-to-force-quic-on=localhost:{quic_port}",
        # the server listens on 127.0.0.1: QUIC, unlike TCP, does not fall back from ::1
        "--host-resolver-rules=MAP localhost 127.0.0.1"]
    test_browser.CHROMIUM_ENV["HOME"] = str(site_pki[2])
    try:
        return request.getfixturevalue("browser")
    finally:
        test_browser.CHROMIUM_FLAGS[:] = flags
        del test_browser.CHROMIUM_ENV["HOME"]


def test_site_over_h3_in_chromium(make_server, engine, h3_browser, site_root, site_pki,
                                  quic_port, tmp_path):
    cert, key, _ = site_pki
    log = tmp_path / "access.log"
    server = make_server(docroot=str(site_root), engine=engine,
                         args=("--tls-port", str(quic_port), "--tls-cert", str(cert),
                               "--tls-key", str(key), "--access-log", str(log)))
    page = _open(h3_browser, f"https://localhost:{quic_port}/")
    try:
        assert page.evaluate("window.isSecureContext") is True
        assert page.poll("document.body.dataset.moduleRan === 'yes'"), page.console_errors()
        _assert_clean(page, server)
        got = {}
        for p in page.events("Network.responseReceived"):
            url = p["response"]["url"]
            if url.startswith("https://"):
                got[re.sub(r"^https://[^/]+", "", url) or "/"] = p["response"]
        for path in EXPECTED:
            assert path in got, f"{path} was never fetched: {sorted(got)}"
            assert got[path]["status"] == 200, (path, got[path]["status"])
            assert got[path]["protocol"] == "h3", (path, got[path]["protocol"])
        assert_every_hop(page, log, "h3", "HTTP/3.0")
    finally:
        page.close()
