"""Compression dictionary transport in a real browser (issue 17, RFC 9842): headless Chromium
loads release 1 of a script, which the server marks as a dictionary (Use-As-Dictionary), then
release 2, which must arrive as dcz and decode to release 2's bytes.

Chromium only uses dictionaries in a secure context; http://127.0.0.1 is one (a loopback
origin is potentially trustworthy). Reuses test_browser's Chromium fixtures and DevTools client;
skipped where Chromium cannot be had, like that file.
"""
import hashlib
import time

import pytest

from test_browser import CDP, PAGE_TIMEOUT, Page, browser, chromium  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow


def _tab(cdp, url):
    """A tab on url with Network recording and the HTTP cache on (dictionaries live there)."""
    target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    page = Page(cdp, session, target)
    cdp.call("Network.enable", {}, session=session)
    cdp.call("Runtime.enable", {}, session=session)
    cdp.call("Page.enable", {}, session=session)
    cdp.call("Page.navigate", {"url": url}, session=session)
    cdp.wait_until(lambda: page.events("Page.loadEventFired"), PAGE_TIMEOUT, f"load of {url}")
    return page


def test_chromium_receives_dcz(make_server, browser, tmp_path):  # noqa: F811 (fixture)
    root = tmp_path / "root"
    (root / "assets").mkdir(parents=True)
    v1 = b"".join(b"export const item%05d = 'value %05d of release one';\n" % (i, i * 7)
                  for i in range(1500))
    v2 = v1.replace(b"item00042", b"item_changed")
    (root / "assets" / "app.v1.js").write_bytes(v1)
    (root / "assets" / "app.v2.js").write_bytes(v2)
    (root / "index.html").write_bytes(b"<!doctype html><title>dict</title><p>dict</p>\n")
    server = make_server(docroot=str(root), args=("-t", "1", "--dictionary", "/assets/*.js",
                                                  "--cache-control", "max-age=3600"))
    page = _tab(browser, server.url("/index.html"))
    try:
        got = page.evaluate("fetch('/assets/app.v1.js').then(r => r.text()).then(t => t.length)")
        assert got == len(v1)
        # Chromium stores the dictionary after the response ends; ask until it offers it (and
        # until the server has made the delta): bounded.
        want = hashlib.sha256(v2).hexdigest()
        seen = []
        for _ in range(40):
            n = len(page.events("Network.responseReceivedExtraInfo"))
            digest = page.evaluate(
                "fetch('/assets/app.v2.js', {cache: 'no-store'}).then(r => r.arrayBuffer())"
                ".then(b => crypto.subtle.digest('SHA-256', b)).then(d => Array.from("
                "new Uint8Array(d)).map(x => x.toString(16).padStart(2, '0')).join(''))")
            assert digest == want
            extra = page.events("Network.responseReceivedExtraInfo")[n:]
            enc = [{k.lower(): v for k, v in e["headers"].items()}.get("content-encoding")
                   for e in extra]
            seen.extend(enc)
            if "dcz" in enc:
                break
            time.sleep(0.25)
        assert "dcz" in seen, f"release 2 never arrived as dcz: {seen}"
    finally:
        page.close()
