"""HTTP/2 with Python's `h2` (issue 18), on both engines, over h2c (prior knowledge on the
cleartext port) and over TLS (ALPN h2, the scheme dimension of conftest): many concurrent
streams on one connection with byte-exact bodies, a client resetting streams mid-body while
the others finish, and the connection still serving after."""
import gzip
import hashlib
import os
import socket
import subprocess
import ssl
import time

import pytest

from conftest import BIG, HELLO, INDEX_HTML

h2 = pytest.importorskip("h2", reason="h2 is not installed (tests/requirements.txt)")
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.errors  # noqa: E402
import h2.events  # noqa: E402
import h2.settings  # noqa: E402

pytestmark = pytest.mark.schemes("http", "https")


class Stream:
    def __init__(self, path):
        self.path = path
        self.headers = None
        self.body = bytearray()
        self.ended = False
        self.reset = None  # error code when the server reset it

    @property
    def status(self):
        return int(dict(self.headers)[b":status"])

    @property
    def done(self):
        return self.ended or self.reset is not None


class H2Client:
    """One HTTP/2 connection: h2c prior knowledge for an http server, ALPN h2 for https."""

    def __init__(self, server, timeout=30.0, stream_window=None):
        sock = socket.create_connection(server.addr, timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.scheme = server.scheme
        if server.scheme == "https":
            ctx = ssl.create_default_context(cafile=str(server.ca))
            ctx.set_alpn_protocols(["h2", "http/1.1"])
            sock = ctx.wrap_socket(sock, server_hostname="localhost")
            assert sock.selected_alpn_protocol() == "h2"
        self.sock = sock
        self.timeout = timeout
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.conn.initiate_connection()
        # A large connection window: DATA already in flight on streams this client reset is
        # dropped by h2 without always giving its window back.
        self.conn.increment_flow_control_window(1 << 30)
        if stream_window is not None:
            self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE:
                                       stream_window})
        self.hold = set()  # streams whose window is never given back
        self.streams = {}
        self.terminated = None
        self.settings_seen = False
        self.flush()
        self.pump(lambda: self.settings_seen)  # max_concurrent_streams is the server's now

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def get(self, path, method="GET"):
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(sid, [(":method", method), (":scheme", self.scheme),
                                     (":authority", "localhost"), (":path", path)],
                               end_stream=True)
        self.streams[sid] = Stream(path)
        self.flush()
        return sid

    def _event(self, ev):
        if isinstance(ev, h2.events.ResponseReceived):
            self.streams[ev.stream_id].headers = ev.headers
        elif isinstance(ev, h2.events.DataReceived):
            if ev.stream_id in self.streams:
                self.streams[ev.stream_id].body += ev.data
            # Give the window back at once so flow control never stalls the test.
            if ev.stream_id not in self.hold:
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            self.streams[ev.stream_id].ended = True
        elif isinstance(ev, h2.events.StreamReset):
            if ev.stream_id in self.streams and ev.remote_reset:
                self.streams[ev.stream_id].reset = ev.error_code
        elif isinstance(ev, h2.events.RemoteSettingsChanged):
            self.settings_seen = True
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.terminated = ev

    def pump(self, until, timeout=None):
        """Reads and handles frames until until() is true; fails after timeout seconds."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not until():
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail("timed out waiting on the HTTP/2 connection: " + ", ".join(
                    f"{sid} {s.path} {len(s.body)}B ended={s.ended}"
                    for sid, s in self.streams.items() if not s.done)[:2000])
            self.sock.settimeout(left)
            data = self.sock.recv(1 << 20)
            assert data, "the server closed the HTTP/2 connection"
            for ev in self.conn.receive_data(data):
                self._event(ev)
            self.flush()
            assert self.terminated is None, f"GOAWAY: {self.terminated}"

    def close(self):
        self.sock.close()


@pytest.fixture
def site(make_server, docroot, random_file):
    src, digest = random_file(4 << 20)
    os.link(src, docroot / "four.bin")
    return make_server(docroot), digest


def test_many_concurrent_streams_byte_exact(site):
    """As many streams as the server allows at once (up to 100), of 1 KiB, 1 MiB and 4 MiB
    files, all in flight on one connection: every body byte-exact, twice over."""
    server, four_digest = site
    c = H2Client(server, timeout=60)
    try:
        limit = min(100, c.conn.remote_settings.max_concurrent_streams)
        assert limit >= 8, limit
        want = {"/hello.txt": hashlib.sha256(HELLO).hexdigest(),
                "/big.bin": hashlib.sha256(BIG).hexdigest(),
                "/index.html": hashlib.sha256(INDEX_HTML).hexdigest(),
                "/four.bin": four_digest}
        paths = list(want)
        for _round in range(2):
            sids = [c.get(paths[i % len(paths)]) for i in range(limit)]
            c.pump(lambda: all(c.streams[s].done for s in sids))
            for s in sids:
                st = c.streams[s]
                assert st.reset is None, (st.path, st.reset)
                assert st.status == 200, (st.path, st.status)
                assert hashlib.sha256(st.body).hexdigest() == want[st.path], st.path
        # HEAD on the same connection: headers, no body.
        sid = c.get("/big.bin", method="HEAD")
        c.pump(lambda: c.streams[sid].done)
        assert c.streams[sid].status == 200 and c.streams[sid].body == b""
        assert dict(c.streams[sid].headers)[b"content-length"] == str(len(BIG)).encode()
    finally:
        c.close()
    assert server.alive()


def test_client_resets_streams(site):
    """Twenty 4 MiB downloads; every other one is reset (CANCEL) once its first DATA arrived:
    the others still finish byte-exact, the connection keeps serving, the server lives.

    Python's h2 answers each DATA frame still arriving on a stream it reset with a
    RST_STREAM(STREAM_CLOSED), and the server counts every RST_STREAM against its rapid-reset
    budget (100 a second): so the client keeps little in flight on the streams it will reset
    (16 KiB stream windows, never given back for them)."""
    server, four_digest = site
    c = H2Client(server, timeout=60, stream_window=16384)
    try:
        n = min(20, c.conn.remote_settings.max_concurrent_streams)
        sids = [c.get("/four.bin") for _ in range(n)]
        victims = sids[::2]
        c.hold.update(victims)
        c.pump(lambda: all(c.streams[s].body or c.streams[s].done for s in victims))
        for s in victims:
            c.conn.reset_stream(s, h2.errors.ErrorCodes.CANCEL)
        c.flush()
        keep = [s for s in sids if s not in victims]
        c.pump(lambda: all(c.streams[s].done for s in keep))
        for s in keep:
            assert c.streams[s].reset is None
            assert hashlib.sha256(c.streams[s].body).hexdigest() == four_digest
        # Streams reset before the server even saw them answered: a burst, reset at once.
        burst = [c.get("/four.bin") for _ in range(n // 2)]
        for s in burst:
            c.conn.reset_stream(s, h2.errors.ErrorCodes.CANCEL)
        c.flush()
        sid = c.get("/hello.txt")
        c.pump(lambda: c.streams[sid].done)
        assert c.streams[sid].status == 200 and bytes(c.streams[sid].body) == HELLO
    finally:
        c.close()
    assert server.alive()
    c2 = H2Client(server)
    try:
        sid = c2.get("/hello.txt")
        c2.pump(lambda: c2.streams[sid].done)
        assert bytes(c2.streams[sid].body) == HELLO
    finally:
        c2.close()


@pytest.mark.parametrize("excess", [1, 40])
def test_streams_past_the_limit_are_refused_not_the_connection(make_server, docroot, excess):
    """Issue 25, RFC 9113 5.1.2: a stream past SETTINGS_MAX_CONCURRENT_STREAMS gets
    RST_STREAM(REFUSED_STREAM), which the client may retry, and the connection goes on serving
    the streams it has. nghttp2 does that only while its SETTINGS are unacknowledged: after the
    client's ACK it sent GOAWAY(PROTOCOL_ERROR) and every stream was lost. The 128 streams are
    kept open by a zero stream window (each response waits for it after its HEADERS); the
    client is made to ignore the limit (as one that races a lowered limit would), once with
    one stream too many, once with a burst of 40 (well under the refused-stream budget)."""
    srv = make_server(docroot)
    c = H2Client(srv, stream_window=0)
    try:
        c.pump(lambda: c.conn.remote_settings.max_concurrent_streams == 128)  # and ACKed
        held = [c.get("/hello.txt") for _ in range(128)]
        c.pump(lambda: all(c.streams[s].headers for s in held))  # all 128 open on the server
        mcs = h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS
        c.conn.remote_settings[mcs] = 1 << 20  # past the limit
        c.conn.remote_settings.acknowledge()
        extra = [c.get("/hello.txt") for _ in range(excess)]
        c.pump(lambda: all(c.streams[s].done for s in extra))
        assert [c.streams[s].reset for s in extra] == \
            [h2.errors.ErrorCodes.REFUSED_STREAM] * excess
        assert not any(c.streams[s].done for s in held)
        # The window opens: the 128 finish on the same connection; a refused one is retried.
        c.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 65535})
        c.flush()
        c.pump(lambda: all(c.streams[s].done for s in held))
        for s in held:
            assert (c.streams[s].status, bytes(c.streams[s].body)) == (200, HELLO)
        sid = c.get("/hello.txt")
        c.pump(lambda: c.streams[sid].done)
        assert (c.streams[sid].status, bytes(c.streams[sid].body)) == (200, HELLO)
    finally:
        c.close()


def h1_fields(server, path, *args):
    """The fields an HTTP/1.1 HEAD gets: {name: value}, names in lower case."""
    out = subprocess.run(["curl", "-sS", "--http1.1", "-I", *args, server.url(path)],
                         capture_output=True, timeout=30, check=True).stdout.decode()
    return {k.strip().lower(): v.strip() for k, v in
            (line.split(":", 1) for line in out.splitlines()[1:] if ":" in line)}


@pytest.mark.parametrize("table", [4096, 200, 0])
def test_file_fields_right_on_every_response_whatever_the_table(make_server, docroot, table):
    """A file's Last-Modified, ETag, Content-Type and Content-Length are HPACK-encoded once and
    kept with the file, then indexed once per connection (issue 30): over one connection, 25
    files (one a gzip variant) asked three times each, with the client's header table at
    4096, 200 bytes (entries evicted all the time) or 0, every response carries the fields an
    HTTP/1.1 HEAD of the same file gets, and the client's HPACK decoder never fails."""
    names = [f"f{i}.{('txt', 'css', 'bin')[i % 3]}" for i in range(24)]
    for i, n in enumerate(names):
        (docroot / n).write_bytes(os.urandom(100 + 37 * i))
    css = b"p { margin: 0 }\n" * 300
    (docroot / "v.css").write_bytes(css)
    (docroot / "v.css.gz").write_bytes(gzip.compress(css, mtime=0))
    server = make_server(docroot, args=["--compress", "off"])
    want = {n: h1_fields(server, "/" + n) for n in names}
    want["v.css"] = h1_fields(server, "/v.css", "-H", "Accept-Encoding: gzip")
    assert want["v.css"]["content-encoding"] == "gzip"
    c = H2Client(server)
    try:
        c.conn.update_settings({h2.settings.SettingCodes.HEADER_TABLE_SIZE: table})
        c.flush()
        for rnd in range(3):
            sids = {}
            for n in names + ["v.css"]:
                sid = c.conn.get_next_available_stream_id()
                extra = [(b"accept-encoding", b"gzip")] if n == "v.css" else []
                c.conn.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"http"),
                                          (b":authority", b"localhost"),
                                          (b":path", f"/{n}?r={rnd}".encode())] + extra,
                                    end_stream=True)
                c.streams[sid] = Stream(n)
                sids[sid] = n
            c.flush()
            c.pump(lambda: all(c.streams[s].ended for s in sids))
            for sid, n in sids.items():
                got = {k.decode(): v.decode() for k, v in c.streams[sid].headers}
                assert got[":status"] == "200", (n, got)
                for k in ("last-modified", "etag", "content-type", "content-length",
                          "accept-ranges", "content-encoding", "vary", "server"):
                    assert got.get(k) == want[n].get(k), (rnd, n, k, got, want[n])
                body = c.streams[sid].body
                assert len(body) == int(want[n]["content-length"])
                if n == "v.css":
                    assert gzip.decompress(body) == css
                else:
                    assert body == (docroot / n).read_bytes()
    finally:
        c.close()
