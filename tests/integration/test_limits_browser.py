"""103 Early Hints in a real browser (issue 28): headless Chromium loads the test site over
HTTPS and HTTP/2 (where browsers act on hints) from ringhttpd with --early-hints, sees the 103
before the page's response (DevTools' Network.responseReceivedEarlyHints, with its Link), and
loads the page cleanly. The CA, Chromium and the site are test_tls_browser's and
test_browser's (skipped, never failed, where Chromium cannot run)."""
import pytest

pytest.importorskip("websocket", reason="websocket-client is not installed")

from test_browser import _assert_clean, _open, browser, chromium, site_root  # noqa: F401
from test_tls import HTTPS_RE
from test_tls_browser import site_pki, tls_browser  # noqa: F401

pytestmark = pytest.mark.slow

HINT = "</app.css>; rel=preload; as=style"


def test_chromium_receives_early_hints(make_server, engine, tls_browser, site_root, site_pki):
    cert, key, _ = site_pki
    server = make_server(docroot=str(site_root), engine=engine,
                         args=("--tls-port", "0", "--tls-cert", str(cert), "--tls-key", str(key),
                               "--early-hints", f"/ {HINT}"))
    port = int(HTTPS_RE.search(server.stderr_text()).group(2))
    # DevTools misses Network.responseReceivedEarlyHints for about one load in five (seen with
    # the server sending the 103 on every response: `nghttp -v` 30 of 30), so a load that
    # reports none is tried again in a new tab, eight times at most; every load must be clean.
    # Three were not enough under make check's load (1 run in 12 saw none: the miss grows with
    # the machine's load, and each load costs a third of a second).
    for attempt in range(8):
        page = _open(tls_browser, f"https://localhost:{port}/")
        try:
            assert page.poll("document.body.dataset.moduleRan === 'yes'"), page.console_errors()
            _assert_clean(page, server)
            main = [p["response"] for p in page.events("Network.responseReceived")
                    if p["response"]["url"].rstrip("/").endswith(f":{port}")]
            assert main and main[0]["protocol"] == "h2", main
            hints = page.events("Network.responseReceivedEarlyHints")
        finally:
            page.close()
        if hints:
            break
    assert hints, "no 103 reached the page in eight loads"
    links = [v for h in hints for k, v in h["headers"].items() if k.lower() == "link"]
    assert any("app.css" in v for v in links), hints
