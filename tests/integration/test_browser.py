"""A real browser against ringhttpd: the site in tests/site loads in headless Chromium (issue 4).

Chromium is Debian's `chromium`, installed here when missing (as root, with apt); where it cannot
be installed the tests are skipped, never failed. The site is built into a tmp docroot by
tests/site/build.py (web font wrapped from fonts-dejavu-core, precompressed app.css siblings),
served by ringhttpd on both engines with --autoindex, and driven over the DevTools protocol
(websocket-client) from a fresh tab per page load. Every wait is bounded; Chromium is ended by
its PID at teardown. Keep the page loads few: Chromium is slow on a 2-core machine.

Set BROWSER_SCREENSHOT_DIR to keep the screenshots.
"""
import base64
import importlib.util
import json
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

websocket = pytest.importorskip("websocket", reason="websocket-client is not installed")

pytestmark = pytest.mark.slow

SITE = Path(__file__).resolve().parent.parent / "site"
WINDOW = (1024, 768)
STARTUP_TIMEOUT = 30
CALL_TIMEOUT = 30
PAGE_TIMEOUT = 30
INSTALL_TIMEOUT = 900

# What the index page must fetch, and the media types it may arrive with. RFC 9239 makes
# text/javascript the one to send; browsers still take the obsolete application/javascript.
JS = ("text/javascript", "application/javascript")
EXPECTED = {
    "/": ("text/html",),
    "/app.css": ("text/css",),
    "/js/app.js": JS,
    "/js/lib/greet.js": JS,
    "/data.json": ("application/json",),
    "/img/logo.svg": ("image/svg+xml",),
    "/img/gradient.png": ("image/png",),
    "/img/pattern.webp": ("image/webp",),
    "/fonts/site.woff": ("font/woff",),
}
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
    "--no-default-browser-check", "--no-proxy-server", "--disable-extensions",
    "--hide-scrollbars", "--mute-audio", "--password-store=basic",
    f"--window-size={WINDOW[0]},{WINDOW[1]}", "--remote-debugging-port=0",
]
CHROMIUM_ENV = {}  # set by a module before its browser starts (test_tls_browser: HOME)


def _load_site_builder():
    spec = importlib.util.spec_from_file_location("site_build", SITE / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


site_build = _load_site_builder()


# ---------------------------------------------------------------------------------------------
# Chromium: find or install, start, end


def _apt_install(packages):
    """Installs Debian packages as root; returns None or why it could not."""
    if os.geteuid() != 0:
        return "not running as root"
    if not shutil.which("apt-get"):
        return "apt-get is missing"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        try:
            res = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                 timeout=INSTALL_TIMEOUT)
        except subprocess.TimeoutExpired:
            return f"`{' '.join(cmd)}` took more than {INSTALL_TIMEOUT}s"
        if res.returncode != 0:
            return f"`{' '.join(cmd)}` failed: {res.stderr.strip()[-500:]}"
    return None


def _find_chromium():
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)


@pytest.fixture(scope="module")
def chromium():
    """The path of a Chromium binary and a font for the site, installing both when missing."""
    missing = []
    if _find_chromium() is None:
        missing.append("chromium")
    if site_build.find_font() is None:
        missing.append(site_build.FONT_PACKAGE)
    if missing:
        why = _apt_install(missing)
        if why is not None:
            pytest.skip(f"cannot install {' '.join(missing)}: {why}")
    path = _find_chromium()
    if path is None:
        pytest.skip("chromium is still missing after installing it")
    if site_build.find_font() is None:
        pytest.skip(f"no DejaVu font after installing {site_build.FONT_PACKAGE}")
    return path


class CDPError(Exception):
    pass


class CDP:
    """The DevTools protocol over one websocket, flat sessions: calls, and events kept in order."""

    def __init__(self, ws_url):
        # Chromium refuses websocket handshakes with an Origin it was not told to allow.
        self.ws = websocket.create_connection(ws_url, timeout=CALL_TIMEOUT, suppress_origin=True)
        self.last_id = 0
        self.events = []

    def _read(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("DevTools: no answer in time")
        self.ws.settimeout(remaining)
        try:
            message = json.loads(self.ws.recv())
        except websocket.WebSocketTimeoutException:
            raise TimeoutError("DevTools: no answer in time") from None
        if "method" in message:
            self.events.append(message)
        return message

    def call(self, method, params=None, session=None, timeout=CALL_TIMEOUT):
        self.last_id += 1
        request = {"id": self.last_id, "method": method, "params": params or {}}
        if session is not None:
            request["sessionId"] = session
        self.ws.send(json.dumps(request))
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(deadline)
            if message.get("id") == request["id"]:
                if "error" in message:
                    raise CDPError(f"{method}: {message['error']}")
                return message.get("result", {})

    def wait_until(self, done, timeout, what):
        """Reads events until done() is true; done() sees self.events."""
        deadline = time.monotonic() + timeout
        while not done():
            try:
                self._read(deadline)
            except TimeoutError:
                raise TimeoutError(f"DevTools: timed out waiting for {what}") from None

    def session_events(self, session, method=None):
        return [e for e in self.events
                if e.get("sessionId") == session and (method is None or e["method"] == method)]

    def close(self):
        self.ws.close()


@pytest.fixture(scope="module")
def browser(chromium):
    """One headless Chromium for the module, spoken to over CDP; ended by PID at teardown."""
    profile = Path(tempfile.mkdtemp(prefix="ringhttpd-chromium-"))
    log = open(profile / "chromium.log", "w+b")
    proc = subprocess.Popen([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                             "about:blank"], env={**os.environ, **CHROMIUM_ENV},
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True)
    cdp = None
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + STARTUP_TIMEOUT
        lines = []
        while len(lines) < 2:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"chromium exited with {proc.returncode} at start:\n"
                            f"{log.read().decode(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"chromium wrote no DevToolsActivePort in {STARTUP_TIMEOUT}s")
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


def _end(proc):
    """Ends the Chromium we started, then any helper left in the process group it leads."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # start_new_session: its group id is its PID
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------------------------------
# One page load in a fresh tab


class Page:
    """What one navigation produced: responses, failures, console errors, and the live tab."""

    def __init__(self, cdp, session, target):
        self.cdp, self.session, self.target = cdp, session, target

    def evaluate(self, expression, timeout=CALL_TIMEOUT):
        result = self.cdp.call("Runtime.evaluate",
                               {"expression": expression, "awaitPromise": True,
                                "returnByValue": True},
                               session=self.session, timeout=timeout)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def poll(self, expression, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.2)

    def events(self, method):
        return [e["params"] for e in self.cdp.session_events(self.session, method)]

    def responses(self):
        """path -> (requestId, response) for every response the tab received."""
        out = {}
        for p in self.events("Network.responseReceived"):
            url = p["response"]["url"]
            if url.startswith("http://"):
                path = "/" + url.split("/", 3)[3] if url.count("/") >= 3 else "/"
                out[path] = (p["requestId"], p["response"])
        return out

    def failures(self):
        return [p for p in self.events("Network.loadingFailed")]

    def console_errors(self):
        errors = []
        for p in self.events("Runtime.consoleAPICalled"):
            if p["type"] in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description")))
                                       for a in p["args"]))
        for p in self.events("Runtime.exceptionThrown"):
            details = p["exceptionDetails"]
            errors.append(details.get("exception", {}).get("description", details.get("text")))
        for p in self.events("Log.entryAdded"):
            if p["entry"]["level"] == "error":
                errors.append(f"{p['entry'].get('url', '')}: {p['entry']['text']}")
        return errors

    def body(self, request_id):
        result = self.cdp.call("Network.getResponseBody", {"requestId": request_id},
                               session=self.session)
        if result["base64Encoded"]:
            return base64.b64decode(result["body"])
        return result["body"].encode()

    def close(self):
        self.cdp.call("Target.closeTarget", {"targetId": self.target})


def _open(cdp, url):
    """Opens url in a new tab with Network, Page, Runtime and Log recording; waits for load
    and for the network to go quiet."""
    target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    page = Page(cdp, session, target)
    for method, params in (("Network.enable", {}), ("Page.enable", {}), ("Runtime.enable", {}),
                           ("Log.enable", {}),
                           ("Network.setCacheDisabled", {"cacheDisabled": True})):
        cdp.call(method, params, session=session)
    nav = cdp.call("Page.navigate", {"url": url}, session=session)
    assert "errorText" not in nav, f"{url}: {nav['errorText']}"
    cdp.wait_until(lambda: page.events("Page.loadEventFired"), PAGE_TIMEOUT, f"load of {url}")

    def quiet():
        started = {p["requestId"] for p in page.events("Network.requestWillBeSent")}
        ended = {p["requestId"] for p in page.events("Network.loadingFinished")}
        ended |= {p["requestId"] for p in page.events("Network.loadingFailed")}
        return started <= ended
    cdp.wait_until(quiet, PAGE_TIMEOUT, f"the network of {url} to go quiet")
    return page


def _assert_clean(page, server):
    failures = page.failures()
    assert not failures, f"failed requests: {failures}"
    bad = {path: r["status"] for path, (_, r) in page.responses().items() if r["status"] >= 400}
    assert not bad, f"error responses: {bad}\nserver stderr:\n{server.stderr_text()}"
    errors = page.console_errors()
    assert not errors, f"console errors: {errors}"


def _header(response, name):
    return {k.lower(): v for k, v in response["headers"].items()}.get(name.lower())


def _png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _screenshot(page, path, min_bytes):
    """Captures the tab as a PNG into path (and BROWSER_SCREENSHOT_DIR) and checks it."""
    shot = base64.b64decode(page.cdp.call("Page.captureScreenshot", {"format": "png"},
                                          session=page.session)["data"])
    path.write_bytes(shot)
    keep = os.environ.get("BROWSER_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)
    width, height = _png_size(shot)
    assert width >= 800 and height >= 500, (width, height)
    # A blank page of this size compresses to a few KiB; the site has images and text.
    assert min_bytes < len(shot) < 5_000_000, len(shot)


# ---------------------------------------------------------------------------------------------
# The site


@pytest.fixture(scope="module")
def site_root(tmp_path_factory, chromium):
    root = tmp_path_factory.mktemp("browser-site")
    made = site_build.build(root)
    assert made["font"] is not None
    docs = root / "docs"
    (docs / ".hidden-secret.txt").write_text("must not be listed\n")
    (docs / "space & ampersand.txt").write_text("a name to escape and percent-encode\n")
    return root


@pytest.fixture(scope="module")
def site_encodings(site_root):
    """Which precompressed siblings build() made: {"app.css": ["gzip", "br"]}."""
    return {name: sorted(p.suffix.lstrip(".").replace("gz", "gzip") for p in
                         site_root.glob(name + ".*"))
            for name in site_build.PRECOMPRESSED}


def test_site_renders(make_server, engine, browser, site_root, site_encodings, tmp_path):
    server = make_server(docroot=str(site_root), engine=engine, args=("--autoindex",))
    page = _open(browser, server.url("/"))
    try:
        assert page.poll("document.body.dataset.moduleRan === 'yes'"), \
            f"the JS module did not run; console: {page.console_errors()}"
        assert page.evaluate("document.getElementById('js-output').textContent") == \
            "Hello from a JavaScript module served by ringhttpd."
        assert page.evaluate("document.querySelectorAll('#items li').length") == 3
        images = page.evaluate("[...document.images].map(i => [i.id, i.complete, "
                               "i.naturalWidth])")
        assert images and all(ok and width > 0 for _, ok, width in images), images
        page.evaluate("document.fonts.ready.then(() => true)")
        # fonts.check() is also true when no face matches, so look for the face itself.
        assert page.evaluate("[...document.fonts].some(f => f.family.replace(/\"/g, '') === "
                             "'SiteFont' && f.status === 'loaded')"), \
            page.evaluate("[...document.fonts].map(f => f.family + ' ' + f.status)")
        assert page.evaluate("getComputedStyle(document.getElementById('box'))"
                             ".borderTopColor") == "rgb(11, 114, 133)", "app.css not applied"

        _assert_clean(page, server)
        responses = page.responses()
        for path, media_types in EXPECTED.items():
            assert path in responses, f"{path} was never fetched: {sorted(responses)}"
            request_id, response = responses[path]
            assert response["status"] == 200, (path, response["status"])
            assert response["mimeType"] in media_types, (path, response["mimeType"])

        # app.css arrives from its best precompressed sibling (Chromium accepts br and gzip, and
        # br wins a tie), and decodes to app.css itself.
        request_id, response = responses["/app.css"]
        sent = {p["requestId"]: p["headers"] for p in
                page.events("Network.requestWillBeSentExtraInfo")}.get(request_id, {})
        accepted = {c.split(";")[0].strip().lower() for c in
                    (_header({"headers": sent}, "Accept-Encoding") or "gzip, br").split(",")}
        want = next(c for c in ("br", "gzip") if c in site_encodings["app.css"] and c in accepted)
        assert _header(response, "Content-Encoding") == want, \
            f"app.css did not arrive as {want}: {response['headers']}"
        assert "accept-encoding" in (_header(response, "Vary") or "").lower()
        assert page.body(request_id) == (site_root / "app.css").read_bytes()

        _screenshot(page, tmp_path / f"site-{engine}.png", min_bytes=15_000)
    finally:
        page.close()


def test_autoindex_in_browser(make_server, engine, browser, site_root, tmp_path):
    server = make_server(docroot=str(site_root), engine=engine, args=("--autoindex",))
    page = _open(browser, server.url("/docs/"))
    try:
        _assert_clean(page, server)
        _, response = page.responses()["/docs/"]
        assert response["status"] == 200
        assert response["mimeType"] == "text/html"

        links = page.evaluate("[...document.querySelectorAll('a')].map(a => "
                              "[a.textContent.trim(), a.getAttribute('href'), a.href])")
        names = [text.rstrip("/") for text, _, _ in links]
        for name in ("archive", "notes.md", "readme.txt", "space & ampersand.txt"):
            assert name in names, f"{name} is not listed: {links}"
        assert ".hidden-secret.txt" not in names, "a hidden file is listed"
        assert names.index("archive") < names.index("notes.md") < names.index("readme.txt"), \
            f"not directories first, then sorted: {names}"
        raw_href = next(href for text, href, _ in links if text == "space & ampersand.txt")
        assert " " not in raw_href and "%20" in raw_href, f"href not percent-encoded: {raw_href}"

        html = page.evaluate("document.documentElement.outerHTML")
        assert str(site_root) not in html and str(site_root.parent) not in html, \
            "the listing shows a filesystem path"

        # The links work: each listed file comes back 200 with its bytes.
        for text, _, absolute in links:
            if text in ("readme.txt", "space & ampersand.txt"):
                got = page.evaluate(f"fetch({json.dumps(absolute)}).then(r => r.status + ' ' + "
                                    "r.headers.get('content-length'))")
                size = (site_root / "docs" / text).stat().st_size
                assert got == f"200 {size}", (text, got)

        _screenshot(page, tmp_path / f"autoindex-{engine}.png", min_bytes=3_000)
    finally:
        page.close()
