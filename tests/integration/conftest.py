"""Shared fixtures and helpers for the ringhttpd integration suite.

Every test here starts the real binary named by $RINGHTTPD (default: build/ringhttpd in the
repository) on a kernel-chosen port of 127.0.0.1 and talks to it with real clients. Every test
that uses a server runs once per engine. This file is an API other test files rely on
(test_fallback.py, test_browser.py): extend it, do not change what is documented here.

Fixtures
--------
engine
    "uring" or "epoll" (test ids ``[uring]`` / ``[epoll]``). The uring case is skipped, not
    failed, when this kernel refuses io_uring_setup (seccomp, sysctl, old kernel).
make_server(docroot=None, args=(), engine=None, wrapper=(), env=None, cwd=None, ready=True,
            pass_fds=(), binary=None)
    Factory. Starts ``[*wrapper, $RINGHTTPD, '-p', '0', '-b', '127.0.0.1', '-t', '2',
    '--engine', ENGINE, *args, docroot]`` (docroot omitted when None; ENGINE is the ``engine``
    fixture's value unless ``engine=`` is given, e.g. "auto"). Options in ``args`` come after the
    defaults, so ``args=['-p', '8081']`` overrides the port; ``--bind`` is a list, so
    ``args=['-b', '::1']`` adds an address and ``bind='::1'`` replaces 127.0.0.1 (``bind=None``:
    no ``-b``, the default listeners). ``env`` is merged over
    os.environ. Waits (10 s at most) for the ``listening on`` line and returns a ``Server``; fails
    the test if the process exits or stays silent. At teardown every server it started that is
    still running gets SIGTERM and must exit 0; one that exited non-zero without the test calling
    .stop() fails the test (a crash); every server's stderr must be free of sanitizer reports
    ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:").
    ``ready=False`` returns at once (call .wait_ready() yourself, or .proc.wait() for a server
    expected to refuse to start); ``cwd`` is the server's working directory (the default
    DOCROOT is "."). ``pass_fds`` are file descriptors the server inherits at the same numbers
    (subprocess.Popen's pass_fds), e.g. a listening socket the test holds as systemd would.
    ``binary`` runs another build in place of $RINGHTTPD: RINGHTTPD_TEST for the seams' test
    doubles (skipped when it is not built).
    Because it depends on ``engine``, any test using make_server runs for both engines; a test
    module may override the ``engine`` fixture (e.g. to return "auto") to run once.
docroot
    pathlib.Path of a fresh document root (see DOCROOT_FILES below and the fixture's docstring).
    Its parent holds ``outside.txt`` (content OUTSIDE_CONTENT), reachable from inside only
    through the symlinks ``link-out.txt`` and ``outdir/``: a server that serves either leaks.
server
    make_server(docroot) for the current engine.
scheme
    "http" (the default; plain modules keep their test ids) or "https". A module opts
    into the TLS dimension with ``pytestmark = pytest.mark.schemes("http", "https")``: then every
    test of it that uses make_server runs over each scheme (ids ``[uring-https]``...), and a test
    marked ``@pytest.mark.no_tls("reason")`` runs over http only. With "https", make_server adds
    ``--tls-port 0`` and a certificate (ECDSA P-256, CN localhost, SAN localhost/127.0.0.1/::1)
    signed by a session test CA (``test_ca`` fixture, path in TEST_CA after first use) before the
    test's ``args``; the returned Server's .port, .addr, .base_url ("https://...") are the TLS
    listener's (.clear_port keeps the cleartext one, .scheme says which), and connect(), Conn,
    raw(), fetch() and stalled_download() speak TLS (ALPN http/1.1, SNI localhost, the test CA)
    to it; SSL_CERT_FILE and CURL_CA_BUNDLE point at the test CA for the test (httpx, curl).
    $RINGHTTPD_SCHEMES (comma-separated, e.g. "http") narrows the dimension for a whole run;
    a module marked with one scheme only (``schemes("https")``, a TLS-only module) keeps it.
random_file (session scope)
    random_file(size) -> (path, sha256 hex): one file of random bytes per size for the whole
    session, to os.link into a docroot (large-transfer tests without writing GiBs to /tmp).

class Server
    .proc (subprocess.Popen), .host ("127.0.0.1" or "::1", no brackets), .port (int),
    .base_url ("http://127.0.0.1:PORT", no trailing slash), .engine_name and .threads (from the
    listening line), .url(path) -> base_url + path, .stop(sig=SIGTERM, timeout=10) -> returncode
    (SIGKILL and returncode -9 if it does not exit in time), .stderr_text() -> all stderr so far.
    Also .addr ((host, port)), .alive(), .wait_ready(timeout), .stdout_bytes(),
    .sanitizer_reports() -> [lines].

Helpers
-------
request(method="GET", path="/", headers=(), version="1.1", body=b"", host="localhost",
        close=False) -> bytes
    Builds one request. ``headers`` is a sequence of (name, value) pairs or of raw
    "Name: value" strings; ``close=True`` adds ``Connection: close``; ``host=None`` omits Host.
raw(server, data, timeout=2.0) -> bytes
    Sends raw bytes on a new socket and returns everything received until the server closes
    (or a reset arrives) or ``timeout`` seconds pass. No framing checks: for garbage and probes.
connect(server, timeout=5.0) -> socket
    A TCP_NODELAY socket connected to the server, with that timeout.
tls_wrap(server, sock) -> socket
    sock itself for a cleartext server; for an https one (the scheme dimension), sock wrapped
    in TLS with the handshake done. Tests that make their own sockets pass them through it.
    (SSLSocket has no MSG_PEEK and its shutdown() ends TLS: is_open() keeps what it reads for
    the next read; tests needing a half-close inside TLS opt out with no_tls.)
recv_all(sock) -> bytes
    Everything received on sock until the peer closes (the socket's own timeout applies).
stalled_download(server, path, rcvbuf=65536, timeout=10.0) -> socket
    A client that asks for ``path`` (a large file) with a small receive buffer, has seen the
    response start with ``HTTP/1.1 200`` and then reads nothing more: a response in flight the
    server cannot finish until the test reads or closes. The caller closes it.
wait_for(check, timeout=10.0, interval=0.05)
    Polls check() until it returns a true value (returned) or timeout seconds pass (its last
    value is returned).
Conn(server, timeout=5.0)
    A socket to the server plus StrictReader: .send(bytes, ignore_errors=False),
    .request(method, path, **request_kwargs) -> Response (send one request, read its response),
    .read(method="GET", timeout=None, allow_close=False) -> Response,
    .read_many(methods) -> [Response], .read_or_close(method) -> Response, or None when the
    server closes before sending a byte, .expect_close(timeout=5.0) (the server closes with no
    further byte), .is_open(wait=0.2), .close(), .sock, .eof. Usable as a context manager.
    All responses are parsed by h11 (our_role=CLIENT): any framing error
    (bad status line, bad or conflicting Content-Length, body on HEAD/204/304 seen as junk
    before the next response or before close, truncated body) fails the test.
    ``method`` must be the method of the request being answered: it tells h11 whether a body
    follows (HEAD).
StrictReader(sock, timeout=5.0)
    The same reader over a socket you made yourself.
parse_response(data, method="GET") -> (Response, rest)
    Strictly parses the first response in bytes received up to the server's close (from raw()).
fetch(server, path="/", method="GET", headers=(), version="1.1", body=b"", host="localhost",
      timeout=5.0) -> Response
    One request with ``Connection: close`` on a new connection; reads the response strictly
    and checks the server then closes with no stray bytes.
Response
    .status, .reason (str), .http_version (str), .headers [(lower-case name, value str)],
    .body (bytes), .informational [Response-like 1xx], .keep_alive (h11's view: False when the
    server said close), .header(name) -> first value or None, .header_all(name) -> [values],
    .tokens(name) -> set of lower-case comma-separated tokens over all occurrences.

Module data: RINGHTTPD (the binary's path), RINGHTTPD_TEST ($RINGHTTPD_TEST, default
$RINGHTTPD with "-test" appended: the same server linked with the seams' test doubles, which
RINGHTTPD_TEST_TRANSPORT / RINGHTTPD_TEST_PROTO select; `make all` builds it), DOCROOT_FILES (relative path -> bytes of regular
files in the docroot), HELLO (the 1 KiB text), BIG (the 1 MiB binary), INDEX_HTML,
SUB_INDEX_HTML, UNICODE_NAME, HELLO_MTIME / HELLO_LAST_MODIFIED, OUTSIDE_CONTENT,
SECRET_CONTENT, SANITIZER_MARKERS, LISTEN_RE, IMF_FIXDATE, ETAG_RE; functions
uring_available(), http_date(ts), parse_http_date(value).
"""

import contextlib
import ctypes
import email.utils
import hashlib
import itertools
import os
import pathlib
import random
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
import zlib

import h11
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
RINGHTTPD = os.environ.get("RINGHTTPD") or str(REPO / "build" / "ringhttpd")
RINGHTTPD_TEST = os.environ.get("RINGHTTPD_TEST") or RINGHTTPD + "-test"

START_TIMEOUT = 10.0
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
LISTEN_RE = re.compile(
    r"ringhttpd: listening on http://(\[[0-9A-Fa-f:.]+\]|[^\s:/]+):(\d+)/ "
    r"\(engine (\w+), (\d+) threads?\)"
)
HTTPS_LISTEN_RE = re.compile(
    r"ringhttpd: listening on https://(\[[0-9A-Fa-f:.]+\]|[^\s:/]+):(\d+)/")

# ---------------------------------------------------------------------------------------------
# The standard document root.

HELLO = b"".join(b"line %03d: the quick brown fox jumps over the lazy dog..........\n" % i
                 for i in range(16))
assert len(HELLO) == 1024
BIG = random.Random(20240601).randbytes(1 << 20)
INDEX_HTML = b"<!doctype html>\n<title>ringhttpd test</title>\n<p>root index</p>\n"
SUB_INDEX_HTML = b"<!doctype html>\n<title>sub</title>\n<p>sub index</p>\n"
OUTSIDE_CONTENT = b"OUTSIDE-THE-DOCROOT-7f3a9c: this must never be served\n"
SECRET_CONTENT = b"SECRET-DOTFILE-5b21: hidden files are never served\n"
HELLO_MTIME = 1614834367  # Thu, 04 Mar 2021 05:06:07 GMT
HELLO_LAST_MODIFIED = "Thu, 04 Mar 2021 05:06:07 GMT"
UNICODE_NAME = "sp ace \u00fcn\u00efc\u00f8de.txt"

DOCROOT_FILES = {
    "index.html": INDEX_HTML,
    "hello.txt": HELLO,
    "empty.txt": b"",
    "big.bin": BIG,
    "style.css": b"body { color: #123456; }\n",
    "app.js": b"console.log('app');\n",
    "mod.mjs": b"export const x = 1;\n",
    "data.json": b'{"ok": true}\n',
    "feed.xml": b"<?xml version=\"1.0\"?><feed/>\n",
    "page.htm": b"<p>htm</p>\n",
    "image.png": b"\x89PNG\r\n\x1a\n" + bytes(range(64)),
    "photo.jpg": b"\xff\xd8\xff\xe0" + bytes(range(64)),
    "anim.gif": b"GIF89a" + bytes(16),
    "icon.svg": b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n",
    "pic.webp": b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(16),
    "pic.avif": b"\x00\x00\x00\x1cftypavif" + bytes(16),
    "font.woff2": b"wOF2" + bytes(32),
    "font.woff": b"wOFF" + bytes(32),
    "code.wasm": b"\x00asm\x01\x00\x00\x00",
    "doc.pdf": b"%PDF-1.4\n%%EOF\n",
    "archive.zip": b"PK\x05\x06" + bytes(18),
    "clip.mp4": b"\x00\x00\x00\x18ftypmp42" + bytes(16),
    "noext": b"no extension\n",
    "file.unknownext": b"unknown extension\n",
    UNICODE_NAME: b"spaces and unicode in the name\n",
    "sub/index.html": SUB_INDEX_HTML,
    "sub/inner.txt": b"inner file\n",
    "noindex/a.txt": b"file a\n",
    "noindex/b.txt": b"file b in noindex\n",
    "noindex/cdir/c.txt": b"file c\n",
    ".secret": SECRET_CONTENT,
    "sub/.hidden": SECRET_CONTENT,
    ".well-known/test.txt": b"well-known content\n",
}


def _make_docroot(base: pathlib.Path, shared_big: pathlib.Path) -> pathlib.Path:
    root = base / "root"
    root.mkdir()
    for rel, content in DOCROOT_FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if rel == "big.bin":
            os.link(shared_big, p)  # hundreds of docroots, one 1 MiB file on disk
        else:
            p.write_bytes(content)
    os.utime(root / "hello.txt", (HELLO_MTIME, HELLO_MTIME))
    (base / "outside.txt").write_bytes(OUTSIDE_CONTENT)
    (root / "link-out.txt").symlink_to("../outside.txt")
    (root / "link-out-abs.txt").symlink_to(base / "outside.txt")
    (root / "outdir").symlink_to("..", target_is_directory=True)
    return root


@pytest.fixture(scope="session")
def random_file(tmp_path_factory):
    """Factory: random_file(size) -> (path, sha256 hex) of a session-wide file of random bytes,
    made once per size. os.link it into a docroot; never write to it."""
    base = tmp_path_factory.mktemp("shared")
    cache = {}

    def get(size):
        if size not in cache:
            path = base / f"random-{size}.bin"
            digest = hashlib.sha256()
            with open(path, "wb") as f:
                left = size
                while left:
                    chunk = os.urandom(min(left, 1 << 20))
                    f.write(chunk)
                    digest.update(chunk)
                    left -= len(chunk)
            cache[size] = (path, digest.hexdigest())
        return cache[size]

    return get


_PORT_NEXT = itertools.count()


def free_port():
    """A port for a test that must name it before its server starts (ACME's CA validates on
    it, a browser is told it, systemd-socket-activate binds it): free for TCP and UDP on
    127.0.0.1 now, and never handed to another test of the session. It comes from a range of
    its own per pytest-xdist worker (1,000 ports from 20000 up), below the kernel's ephemeral
    range, where every `-p 0` server's port and every bind to port 0 come from: two ports
    picked by binding to 0 and closing were handed to two parallel tests at once, whose servers
    then shared the port (an ACME validation reached the other test's server: 404)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    base = 20000 + (int(worker[2:]) % 10 if worker[2:].isdigit() else 0) * 1000
    for _ in range(1000):
        port = base + next(_PORT_NEXT) % 1000
        t = socket.socket()
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            t.bind(("127.0.0.1", port))
            u.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            t.close()
            u.close()
    pytest.fail("no free port in this worker's range")


@pytest.fixture(scope="session")
def _shared_big(tmp_path_factory):
    path = tmp_path_factory.mktemp("shared-big") / "big.bin"
    path.write_bytes(BIG)
    return path


@pytest.fixture
def docroot(tmp_path, _shared_big):
    """A fresh document root (tmp_path/"root") holding DOCROOT_FILES:

    index.html, hello.txt (HELLO, 1 KiB, mtime HELLO_MTIME), empty.txt, big.bin (BIG, 1 MiB,
    a hard link to one session-wide file: never write to it),
    one file per common extension, noext, file.unknownext, a file named UNICODE_NAME (spaces and
    non-ASCII), sub/ with index.html, inner.txt and .hidden, noindex/ (a.txt, b.txt, cdir/c.txt,
    no index), .secret, .well-known/test.txt. Outside it: tmp_path/"outside.txt"
    (OUTSIDE_CONTENT); inside it, symlinks out: link-out.txt (relative), link-out-abs.txt
    (absolute) and outdir/ (-> the parent directory). Tests may add files before or after
    starting a server.
    """
    yield _make_docroot(tmp_path, _shared_big)
    # A test that wrote through the link changed big.bin for every later test of the session
    # (test_caching once did: 27 unrelated failures): it fails here, and the copy is put right.
    if _shared_big.read_bytes() != BIG:
        _shared_big.write_bytes(BIG)
        pytest.fail("this test wrote to docroot/big.bin, the session's shared hard link "
                    "(give the file an inode of its own first: write a copy, os.replace)")


# ---------------------------------------------------------------------------------------------
# io_uring probe, so the uring half is skipped (not failed) where the kernel refuses it.

_URING = None


def uring_available() -> bool:
    """True when io_uring_setup works in this process (as it would for the server)."""
    global _URING
    if _URING is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            params = ctypes.create_string_buffer(120)
            fd = libc.syscall(425, 4, params)  # __NR_io_uring_setup on x86_64 and arm64
            if fd >= 0:
                os.close(fd)
            _URING = fd >= 0
        except OSError:
            _URING = False
    return _URING


@pytest.fixture(params=["uring", "epoll"], ids=["uring", "epoll"])
def engine(request):
    if request.param == "uring" and not uring_available():
        pytest.skip("io_uring is not available on this kernel / in this sandbox")
    return request.param


# ---------------------------------------------------------------------------------------------
# The scheme dimension: modules marked schemes("http", "https") run their server tests over TLS
# too (see the module docstring).

SCHEMES = tuple(s for s in os.environ.get("RINGHTTPD_SCHEMES", "http,https").split(",") if s)
TEST_CA = None  # the session CA's certificate path, once test_ca has made it


def pytest_configure(config):
    config.addinivalue_line("markers", "schemes(*names): run the module's server tests over "
                            "each scheme (http, https)")
    config.addinivalue_line("markers", "no_tls(reason): this test runs over http only")


def pytest_collection_modifyitems(config, items):
    """$RINGHTTPD_ENGINE_SPLIT=1 (make check's ASan pass) runs each engine-parametrized test on
    one engine only, chosen by a stable hash of the test's id without the engine: the pass still
    covers both engines' code across the suite (about half the tests each) in half the time; the
    pass before it runs every test on both."""
    if os.environ.get("RINGHTTPD_ENGINE_SPLIT") != "1":
        return
    keep, drop = [], []
    for item in items:
        eng = getattr(getattr(item, "callspec", None), "params", {}).get("engine")
        if eng is None:
            keep.append(item)
            continue
        key = re.sub(rf"(?<=[\[-]){eng}(?=[\]-])", "", item.nodeid)
        pick = ("uring", "epoll")[zlib.crc32(key.encode()) & 1]
        (keep if eng == pick else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_generate_tests(metafunc):
    if "scheme" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("schemes")
    # $RINGHTTPD_SCHEMES narrows a module that runs over several schemes; a module that names
    # one (schemes("https"): its tests are about TLS) runs over it always, never in clear text.
    named = marker.args if marker else ("http",)
    schemes = [s for s in named if s in SCHEMES] or list(named[:1]) or ["http"]
    if metafunc.definition.get_closest_marker("no_tls"):
        schemes = [s for s in schemes if s != "https"] or ["http"]
    if marker:
        metafunc.parametrize("scheme", schemes, indirect=True)


@pytest.fixture
def scheme(request):
    return getattr(request, "param", "http")


def _openssl(*args):
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory):
    """(ca.crt, localhost.crt, localhost.key): a CA made for this session and an ECDSA P-256
    leaf it signed for localhost, 127.0.0.1 and ::1."""
    global TEST_CA
    d = tmp_path_factory.mktemp("test-ca")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", d / "ca.key", "-out", d / "ca.crt",
             "-subj", "/CN=ringhttpd session test CA", "-days", "3")
    _openssl("req", "-new", *ec, "-keyout", d / "localhost.key", "-out", d / "localhost.csr",
             "-subj", "/CN=localhost")
    (d / "localhost.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n"
                                     "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", d / "localhost.csr", "-CA", d / "ca.crt", "-CAkey",
             d / "ca.key", "-CAcreateserial", "-days", "2", "-extfile", d / "localhost.ext",
             "-out", d / "localhost.crt")
    TEST_CA = str(d / "ca.crt")
    return d / "ca.crt", d / "localhost.crt", d / "localhost.key"


_CLIENT_CTX = {}


def client_context(ca):
    """A client SSLContext trusting `ca`, offering ALPN http/1.1 only (one per CA)."""
    if ca not in _CLIENT_CTX:
        ctx = ssl.create_default_context(cafile=str(ca))
        ctx.set_alpn_protocols(["http/1.1"])
        _CLIENT_CTX[ca] = ctx
    return _CLIENT_CTX[ca]


def tls_wrap(server, sock):
    """sock unchanged for a cleartext server; wrapped in TLS (handshake done) for an https one."""
    if getattr(server, "scheme", "http") != "https":
        return sock
    try:
        return client_context(server.ca).wrap_socket(sock, server_hostname="localhost")
    except BaseException:
        sock.close()
        raise


# ---------------------------------------------------------------------------------------------
# The server process.


def _require_binary(binary=RINGHTTPD):
    if not os.access(binary, os.X_OK):
        pytest.skip(f"server binary {binary} not built (set $RINGHTTPD or run make)")


class Server:
    def __init__(self, argv, env=None, cwd=None, pass_fds=()):
        self.argv = list(argv)
        self.host = None
        self.port = None
        self.base_url = None
        self.engine_name = None
        self.threads = None
        self.stopped = False  # set by stop(): the test ended the process itself
        self.scheme = "http"
        self.clear_port = None
        self.ca = None  # the CA path when this server is under the TLS dimension
        self._lines = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=full_env, cwd=cwd, pass_fds=tuple(pass_fds))
        self._stdout = []
        self._threads = [
            threading.Thread(target=self._read_stderr, daemon=True),
            threading.Thread(target=self._read_stdout, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_stderr(self):
        for raw_line in self.proc.stderr:
            line = raw_line.decode("utf-8", "replace")
            with self._lock:
                self._lines.append(line)
            if self.port is None:
                m = LISTEN_RE.search(line)
                if m:
                    host = m.group(1)
                    self.host = host.strip("[]")
                    self.port = int(m.group(2))
                    self.engine_name = m.group(3)
                    self.threads = int(m.group(4))
                    self.base_url = f"http://{host}:{self.port}"
                    self._ready.set()
        self._ready.set()  # EOF: wake the waiter, which sees port None

    def _read_stdout(self):
        for raw_line in self.proc.stdout:
            self._stdout.append(raw_line)

    def wait_ready(self, timeout=START_TIMEOUT):
        if not self._ready.wait(timeout):
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"server printed no listening line within {timeout}s: {self.argv}\n"
                        f"stderr:\n{self.stderr_text()}")
        if self.port is None:
            rc = self.proc.wait(timeout=5)
            pytest.fail(f"server exited ({rc}) before listening: {self.argv}\n"
                        f"stderr:\n{self.stderr_text()}")
        if self.ca is not None and self.scheme == "http":
            m = wait_for(lambda: HTTPS_LISTEN_RE.search(self.stderr_text()), timeout)
            if not m:
                pytest.fail(f"server printed no https listening line: {self.argv}\n"
                            f"stderr:\n{self.stderr_text()}")
            self.clear_port = self.port
            self.port = int(m.group(2))
            self.base_url = f"https://{m.group(1)}:{self.port}"
            self.scheme = "https"

    def url(self, path="/"):
        return self.base_url + path

    @property
    def addr(self):
        return (self.host, self.port)

    def stderr_text(self):
        if self.proc.poll() is not None and not getattr(self, "_drained", False):
            self._threads[0].join(timeout=5)  # exited: its last lines may still be in the pipe
            self._drained = True
        with self._lock:
            return "".join(self._lines)

    def stdout_bytes(self):
        return b"".join(self._stdout)

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Sends sig to the server's PID and waits; SIGKILL after timeout. Returns returncode.
        20 s: a SIGTERM drains for up to --drain-timeout (10 s by default) before the server
        exits, so a 10 s wait raced a server doing what it is told (seen with a browser's
        connection held to the drain's end)."""
        self.stopped = True
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                with self._lock:
                    self._lines.append(
                        f"[test harness: no exit {timeout}s after {sig!r}; killed]\n")
        for t in self._threads:
            t.join(timeout=5)
        return self.proc.returncode

    def sanitizer_reports(self):
        return [line for line in self.stderr_text().splitlines()
                if any(m in line for m in SANITIZER_MARKERS)]


@pytest.fixture
def make_server(engine, scheme, request):
    default_engine = engine
    started = []
    tls_args = ()
    ca = None
    if scheme == "https":
        ca, crt, key = request.getfixturevalue("test_ca")
        tls_args = ("--tls-port", "0", "--tls-cert", str(crt), "--tls-key", str(key))
        mp = request.getfixturevalue("monkeypatch")
        mp.setenv("SSL_CERT_FILE", str(ca))
        mp.setenv("CURL_CA_BUNDLE", str(ca))

    def factory(docroot=None, args=(), engine=None, wrapper=(), env=None, cwd=None, ready=True,
                pass_fds=(), binary=None, bind="127.0.0.1"):
        _require_binary(binary or RINGHTTPD)
        eng = engine if engine is not None else default_engine
        # bind None: no --bind, the default listeners (every address, both families)
        argv = [*wrapper, binary or RINGHTTPD, "-p", "0", *(("-b", bind) if bind else ()),
                "-t", "2", "--engine", eng, *tls_args, *args]
        if docroot is not None:
            argv.append(str(docroot))
        for attempt in range(3):
            srv = Server(argv, env=env, cwd=cwd, pass_fds=pass_fds)
            srv.ca = ca
            started.append(srv)
            if not ready:
                break
            try:
                srv.wait_ready()
                break
            except BaseException:
                # --tls-port 0: HTTP/3 binds UDP on the TCP port the kernel picked, which a
                # client's ephemeral UDP socket of another test may hold; a new start picks anew
                if attempt == 2 or "--tls-port" not in argv or \
                        "cannot bind UDP" not in srv.stderr_text() or \
                        "Address already in use" not in srv.stderr_text():
                    raise
                started.remove(srv)
        return srv

    yield factory

    problems = []
    for srv in started:
        was_running = srv.proc.poll() is None
        stopped_by_test = srv.stopped
        rc = srv.stop(signal.SIGTERM, timeout=10)
        if was_running and rc != 0:
            problems.append(f"server {srv.argv} exited {rc} on SIGTERM (expected 0)\n"
                            f"stderr:\n{srv.stderr_text()[-4000:]}")
        elif not was_running and not stopped_by_test and srv.port is not None and rc != 0:
            problems.append(f"server {srv.argv} died during the test (exit {rc})\n"
                            f"stderr:\n{srv.stderr_text()[-4000:]}")
        reports = srv.sanitizer_reports()
        if reports:
            problems.append(f"sanitizer report from {srv.argv}:\n{srv.stderr_text()[-8000:]}")
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def server(make_server, docroot):
    return make_server(docroot)


# ---------------------------------------------------------------------------------------------
# Clients.


def request(method="GET", path="/", headers=(), version="1.1", body=b"", host="localhost",
            close=False):
    """Builds one request as bytes (see the module docstring)."""
    lines = [f"{method} {path} HTTP/{version}".encode("latin-1")]
    if host is not None:
        lines.append(b"Host: " + host.encode("latin-1"))
    for h in headers:
        if isinstance(h, (tuple, list)):
            name, value = h
            h = f"{name}: {value}"
        lines.append(h.encode("utf-8") if isinstance(h, str) else h)
    if close:
        lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def connect(server, timeout=5.0):
    sock = socket.create_connection((server.host, server.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return tls_wrap(server, sock)


# A TLS peer closing without close_notify, or a broken record, ends a read like a reset does.
_EOF_ERRORS = (ssl.SSLZeroReturnError, ssl.SSLEOFError)


def recv_all(sock):
    chunks = []
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except _EOF_ERRORS:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def stalled_download(server, path, rcvbuf=65536, timeout=10.0):
    family = socket.AF_INET6 if ":" in server.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(timeout)
        sock.connect((server.host, server.port))
        sock = tls_wrap(server, sock)
        sock.sendall(request("GET", path))
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    except BaseException:
        sock.close()
        raise
    return sock


def wait_for(check, timeout=10.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(interval)


def all_stopped(pid):
    """Whether every thread of process pid is stopped (state T). SIGSTOP takes a running thread
    only at its next return to user space: a test that stops a server waits for this."""
    states = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return bool(states) and all(s in ("T", "t") for s in states)


def raw(server, data, timeout=2.0):
    """Sends data, returns all bytes received until close, reset or timeout seconds."""
    deadline = time.monotonic() + timeout
    chunks = []
    with contextlib.closing(connect(server, timeout=timeout)) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except (ConnectionResetError, *_EOF_ERRORS):
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


class Response:
    def __init__(self, ev, body, informational, keep_alive):
        self.status = ev.status_code
        self.reason = ev.reason.decode("latin-1")
        self.http_version = ev.http_version.decode("latin-1")
        self.headers = [(n.decode("latin-1").lower(), v.decode("latin-1")) for n, v in ev.headers]
        self.body = body
        self.informational = informational
        self.keep_alive = keep_alive

    def header(self, name):
        name = name.lower()
        for n, v in self.headers:
            if n == name:
                return v
        return None

    def header_all(self, name):
        name = name.lower()
        return [v for n, v in self.headers if n == name]

    def tokens(self, name):
        out = set()
        for v in self.header_all(name):
            out.update(t.strip().lower() for t in v.split(",") if t.strip())
        return out

    def __repr__(self):
        return (f"<Response {self.status} {self.reason!r} headers={self.headers!r} "
                f"body[{len(self.body)}]={self.body[:120]!r}>")


class StrictReader:
    """Reads responses from a socket with h11 as the framing judge (see module docstring)."""

    def __init__(self, sock, timeout=5.0):
        self.sock = sock
        self.timeout = timeout
        self.h11 = h11.Connection(our_role=h11.CLIENT, max_incomplete_event_size=64 * 1024)
        self.eof = False
        self.reset = False
        self.received = 0
        self._reopen = False
        self._pushback = b""  # bytes is_open() had to take from a TLS socket (it cannot peek)

    def _recv(self, deadline, what):
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"timed out waiting for {what}")
        if self._pushback:
            data, self._pushback = self._pushback, b""
            self.received += len(data)
            return data
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(256 * 1024)
        except socket.timeout:
            pytest.fail(f"timed out waiting for {what}")
        except (ConnectionResetError, *_EOF_ERRORS):
            self.reset = True
            data = b""
        if not data:
            self.eof = True
        self.received += len(data)
        return data

    def _start(self, method):
        c = self.h11
        if c.our_state is h11.DONE and c.their_state is h11.DONE:
            c.start_next_cycle()
        elif self._reopen:
            # h11 treats every HTTP/1.0 response as closing; one that said "Connection:
            # keep-alive" is persistent, so continue on a fresh parser with the buffered bytes.
            extra, _ = c.trailing_data
            c = self.h11 = h11.Connection(our_role=h11.CLIENT,
                                          max_incomplete_event_size=64 * 1024)
            if extra:
                c.receive_data(bytes(extra))
        elif c.our_state is not h11.IDLE:
            pytest.fail(f"another response was expected but the previous one ended the "
                        f"connection (h11 states {c.our_state}/{c.their_state})")
        # h11 only has to know the method (HEAD: no body) and that a request is outstanding.
        c.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
        c.send(h11.EndOfMessage())

    def read(self, method="GET", timeout=None, allow_close=False):
        """Reads one complete response to a `method` request; returns a Response.

        With allow_close=True, returns None when the server closes before sending any byte
        of a response (a close mid-response still fails)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        self._start(method)
        c = self.h11
        head = None
        body = []
        informational = []
        got_any = False
        try:
            while True:
                ev = c.next_event()
                if ev is h11.NEED_DATA:
                    if self.eof:
                        c.receive_data(b"")
                        continue
                    data = self._recv(deadline, f"a response to {method}")
                    got_any = got_any or bool(data)
                    if not data and not got_any and allow_close and head is None \
                            and not c.trailing_data[0]:
                        return None
                    c.receive_data(data)
                    continue
                if isinstance(ev, h11.InformationalResponse):
                    informational.append(ev)
                elif isinstance(ev, h11.Response):
                    head = ev
                elif isinstance(ev, h11.Data):
                    body.append(bytes(ev.data))
                elif isinstance(ev, h11.EndOfMessage):
                    break
                elif isinstance(ev, h11.ConnectionClosed):
                    if allow_close and head is None and not got_any:
                        return None
                    pytest.fail(f"server closed the connection before a complete response "
                                f"to {method} (head={head!r})")
                else:
                    pytest.fail(f"unexpected h11 event {ev!r}")
        except h11.RemoteProtocolError as e:
            if allow_close and head is None and not got_any and self.eof:
                return None
            if self.eof and head is None:
                pytest.fail(f"server closed the connection (reset={self.reset}) without a "
                            f"response to {method}" + (" (after part of one)" if got_any else ""))
            pytest.fail(f"HTTP framing error in response to {method}: {e} "
                        f"(head so far: {head!r}, body bytes: {sum(map(len, body))}, "
                        f"eof={self.eof}, reset={self.reset})")
        keep_alive = c.their_state is h11.DONE
        self._reopen = False
        if head.http_version == b"1.0" and not keep_alive:
            tokens = {t.strip().lower() for n, v in head.headers if n.lower() == b"connection"
                      for t in v.decode("latin-1").split(",")}
            keep_alive = self._reopen = "keep-alive" in tokens and "close" not in tokens
        return Response(head, b"".join(body), informational, keep_alive)

    def read_or_close(self, method="GET", timeout=None):
        return self.read(method, timeout, allow_close=True)

    def read_many(self, methods):
        return [self.read(m) for m in methods]

    def expect_close(self, timeout=5.0):
        """Asserts the server closes the connection (FIN or RST) with no further bytes."""
        extra, _closed = self.h11.trailing_data
        extra = bytes(extra) + self._pushback
        self._pushback = b""
        deadline = time.monotonic() + timeout
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"server did not close the connection within {timeout}s")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except (ConnectionResetError, *_EOF_ERRORS):
                self.reset = True
                break
            if not data:
                self.eof = True
                break
            extra += data
        assert extra == b"", f"stray bytes after the last response: {extra[:200]!r}"

    def is_open(self, wait=0.2):
        """True when nothing (no byte, no close) arrives within `wait` seconds."""
        extra, _ = self.h11.trailing_data
        if extra or self.eof or self._pushback:
            return False
        self.sock.settimeout(wait)
        tls = isinstance(self.sock, ssl.SSLSocket)
        try:
            if tls:  # no MSG_PEEK over TLS: keep what arrives for the next read
                data = self.sock.recv(65536)
                self._pushback = data
                self.eof = not data
            else:
                data = self.sock.recv(1, socket.MSG_PEEK)
        except socket.timeout:
            return True
        except (ConnectionResetError, *_EOF_ERRORS):
            self.reset = self.eof = tls
            return False
        return False if not data else True


class Conn(StrictReader):
    """A new connection to `server` with a strict reader attached."""

    def __init__(self, server, timeout=5.0):
        super().__init__(connect(server, timeout), timeout)

    def send(self, data, ignore_errors=False):
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            if not ignore_errors:
                raise

    def request(self, method="GET", path="/", **kw):
        """Sends request(method, path, **kw) and reads its response."""
        self.send(request(method, path, **kw))
        return self.read(method)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def parse_response(data, method="GET"):
    """Strictly parses the first response in `data` (bytes received up to the server's close).

    Returns (Response, the bytes after it); fails the test on any framing error or when data
    holds no complete response."""
    c = h11.Connection(our_role=h11.CLIENT, max_incomplete_event_size=64 * 1024)
    c.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
    c.send(h11.EndOfMessage())
    c.receive_data(data)
    c.receive_data(b"")
    head, body, informational = None, [], []
    try:
        while True:
            ev = c.next_event()
            if isinstance(ev, h11.InformationalResponse):
                informational.append(ev)
            elif isinstance(ev, h11.Response):
                head = ev
            elif isinstance(ev, h11.Data):
                body.append(bytes(ev.data))
            elif isinstance(ev, h11.EndOfMessage):
                break
            else:
                pytest.fail(f"no complete response in {data[:200]!r} (h11: {ev!r})")
    except h11.RemoteProtocolError as e:
        pytest.fail(f"HTTP framing error: {e} in {data[:200]!r}")
    rest = bytes(c.trailing_data[0])
    return Response(head, b"".join(body), informational, c.their_state is h11.DONE), rest


def fetch(server, path="/", method="GET", headers=(), version="1.1", body=b"",
          host="localhost", timeout=5.0):
    """One request with Connection: close; strict read; asserts a clean close after it."""
    with Conn(server, timeout) as c:
        c.send(request(method, path, headers=headers, version=version, body=body, host=host,
                       close=True))
        resp = c.read(method)
        c.expect_close(timeout)
        return resp


# ---------------------------------------------------------------------------------------------
# Small shared assertions.

IMF_FIXDATE = re.compile(
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} "
    r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$")
ETAG_RE = re.compile(r'^(W/)?"[\x21\x23-\x7e\x80-\xff]*"$')


def http_date(ts):
    return email.utils.formatdate(ts, usegmt=True)


def parse_http_date(value):
    return email.utils.parsedate_to_datetime(value).timestamp()
