"""HTTP/3 over QUIC on the TLS port (issue 29): every file behaviour through the same core as
HTTP/1.1 over TLS (compared answer by answer, bodies byte-exact) with aioquic as the scripted
client and ngtcp2's gtlsclient as a second implementation; Alt-Svc; the access log; what a
careful QUIC server does (Retry, version negotiation, stateless reset, the 3x amplification
limit, refusal past the connection limit, drain); hostile datagrams in bounded loops."""

import asyncio
import base64
import gzip
import hashlib
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import BIG, HELLO, HELLO_LAST_MODIFIED, INDEX_HTML, fetch, wait_for
from slowfs import SlowFS
from h3client import Response, h3_frame, h3_get, h3_raw, new_logger, qpack_int, wait_closed
from test_accesslog import scrape
from test_faults import rss_kib
from test_sites_tls import pki  # noqa: F401  (a fixture: a CA and pairs for a.test, b.test...)

pytestmark = pytest.mark.schemes("https")

# Fields whose value must be the same over HTTP/3 as over HTTP/1.1 (Date may tick between;
# Alt-Svc is HTTPS's over HTTP/1.1 and HTTP/2 only, test_alt_svc_and_off).
SAME = ("content-type", "content-length", "etag", "last-modified", "content-range",
        "content-encoding", "vary", "location", "www-authenticate", "accept-ranges",
        "cache-control")


def h3(server, reqs, **kw):
    return h3_get("127.0.0.1", server.port, server.ca, reqs, **kw)


def udp_exchange(port, datagrams, wait=1.0):
    """Sends each datagram from one socket; returns what came back within `wait` seconds."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.2)
    try:
        for d in datagrams:
            s.sendto(d, ("127.0.0.1", port))
        got, end = [], time.monotonic() + wait
        while time.monotonic() < end:
            try:
                got.append(s.recv(65536))
            except socket.timeout:
                pass
        return got
    finally:
        s.close()


CASES = [
    ("GET", "/"),
    ("GET", "/hello.txt"),
    ("HEAD", "/hello.txt"),
    ("GET", "/big.bin"),
    ("GET", "/empty.txt"),
    ("GET", "/missing.txt"),
    ("GET", "/sub"),  # the directory's slash redirect
    ("GET", "/sub/"),
    ("GET", "/hello.txt", [("range", "bytes=10-99")]),
    ("GET", "/hello.txt", [("range", "bytes=0-1,5-6")]),
    ("GET", "/hello.txt", [("range", "bytes=5000-")]),
    ("GET", "/hello.txt", [("if-modified-since", HELLO_LAST_MODIFIED)]),
    ("GET", "/hello.txt", [("if-unmodified-since", "Mon, 01 Jan 2001 00:00:00 GMT")]),
    ("GET", "/../etc/passwd"),
    ("GET", "/.secret"),
    ("OPTIONS", "/hello.txt"),
    ("DELETE", "/hello.txt"),
]


def test_same_answers_as_https(make_server, docroot):
    """Each request answered over HTTP/3 as over HTTP/1.1 on the TLS port: status, the fields
    that describe the representation, and the body, byte for byte."""
    srv = make_server(docroot)
    # A file over 64 KiB has no ETag until each worker's digest thread made it (issue 38):
    # ask until every answer on both protocols is the settled one.
    for _ in range(100):
        got = h3(srv, CASES)
        if all(r.header("etag") for r in got if r.status == 200):
            break
        time.sleep(0.05)
    for case, r3 in zip(CASES, got):
        method, path, *rest = case
        for _ in range(100):
            r1 = fetch(srv, path, method=method, headers=rest[0] if rest else ())
            if r1.status != 200 or r1.header("etag"):
                break
            time.sleep(0.05)
        assert r3.status == r1.status, (case, r3, r1.status)
        for name in SAME:
            assert r3.header(name) == r1.header(name), (case, name, r3.headers, r1.headers)
        assert bytes(r3.body) == r1.body, case
        for name, _ in r3.headers:
            assert name == name.lower() and name not in ("connection", "keep-alive",
                                                         "transfer-encoding"), r3.headers
    assert bytes(got[1].body) == HELLO and bytes(got[3].body) == BIG
    assert bytes(got[0].body) == INDEX_HTML
    assert got[2].body == b"" and got[2].header("content-length") == str(len(HELLO))


def test_kept_field_encodings_follow_the_file_and_the_clock(make_server, docroot):
    """A cached file's representation fields are QPACK-encoded once per file version and the
    Server and Date lines once per second, then sent as kept: a rewritten file's next answer
    carries its new ETag, Last-Modified and Content-Length (as HTTP/1.1 says them), and a
    later second's Date is the new one, on one connection as on a new one."""
    srv = make_server(docroot)
    f = docroot / "kept.txt"
    f.write_bytes(b"first version\n")
    os.utime(f, (1_600_000_000, 1_600_000_000))
    a, b = h3(srv, [("GET", "/kept.txt"), ("GET", "/kept.txt")])
    assert bytes(a.body) == bytes(b.body) == b"first version\n"
    f.write_bytes(b"the second version, longer\n")
    os.utime(f, (1_700_000_000, 1_700_000_000))
    time.sleep(1.1)  # a new second: Date differs, and the cache looks at the file again
    c, = h3(srv, [("GET", "/kept.txt")])
    r1 = fetch(srv, "/kept.txt")
    assert bytes(c.body) == r1.body == b"the second version, longer\n"
    for name in ("etag", "last-modified", "content-length", "content-type"):
        assert c.header(name) == r1.header(name), (name, c.headers, r1.headers)
    assert c.header("etag") != a.header("etag")
    assert c.header("last-modified") != a.header("last-modified")
    assert c.header("date") != a.header("date") and c.header("date").endswith(" GMT")
    assert a.header("server") == c.header("server") == r1.header("server")


@pytest.mark.parametrize("gso", ["on", "off"])
def test_gso_and_without(make_server, docroot, gso):
    """-v says whether UDP GSO is used; with it off (as where the kernel lacks it) every
    datagram goes by its own sendmsg, and a large file still arrives whole."""
    srv = make_server(docroot, args=("-v", "--http3-gso", gso))
    expect = "UDP GSO yes" if gso == "on" else "UDP GSO no (--http3-gso off)"
    assert expect in srv.stderr_text(), srv.stderr_text()
    r, = h3(srv, [("GET", "/big.bin")])
    assert r.status == 200 and bytes(r.body) == BIG


def test_too_many_streams_wait_their_turn(make_server, docroot):
    """150 requests at once against a limit of 100 open streams: the client waits for
    MAX_STREAMS as streams close, and every request is answered."""
    srv = make_server(docroot)
    got = h3(srv, [("GET", "/hello.txt")] * 150, parallel=True, timeout=60)
    assert all(r.status == 200 and bytes(r.body) == HELLO for r in got)


def test_priority_update_before_the_request(make_server, docroot):
    """RFC 9218's PRIORITY_UPDATE for request stream 0, sent on the control stream before that
    stream opens, as Chromium does: the request is answered (nghttp3 refused the connection
    with H3_ID_ERROR until it was told how many streams the client may open)."""
    srv = make_server(docroot)
    r, = h3(srv, [("GET", "/hello.txt")], control=[(0xF0700, b"\x00u=0, i")])
    assert r.status == 200 and bytes(r.body) == HELLO


def test_conditional_on_etag(make_server, docroot):
    srv = make_server(docroot)
    first, = h3(srv, [("GET", "/hello.txt")])
    etag = first.header("etag")
    again = h3(srv, [("GET", "/hello.txt", [("if-none-match", etag)]),
                     ("GET", "/hello.txt", [("if-range", etag), ("range", "bytes=0-3")]),
                     ("GET", "/hello.txt", [("if-range", '"other"'), ("range", "bytes=0-3")])])
    assert again[0].status == 304 and again[0].body == b""
    assert again[1].status == 206 and bytes(again[1].body) == HELLO[:4]
    assert again[2].status == 200 and bytes(again[2].body) == HELLO


def test_many_streams_in_parallel(make_server, docroot):
    """40 requests at once on one connection (more than one flow-control window of data),
    every body whole."""
    srv = make_server(docroot)
    reqs = [("GET", "/big.bin" if i % 4 == 0 else "/hello.txt") for i in range(40)]
    got = h3(srv, reqs, parallel=True, timeout=60)
    for (m, p), r in zip(reqs, got):
        assert r.status == 200
        assert bytes(r.body) == (BIG if p == "/big.bin" else HELLO)


def test_compressed_variant(make_server, docroot):
    """A compressible file asked for with Accept-Encoding: gzip comes compressed (once the
    variant is made off the loop), with Vary, and decodes to the file."""
    (docroot / "text.txt").write_bytes(HELLO * 8)
    srv = make_server(docroot)
    hdrs = [("accept-encoding", "gzip")]
    for _ in range(50):
        r, = h3(srv, [("GET", "/text.txt", hdrs)])
        assert r.status == 200
        if r.header("content-encoding") == "gzip":
            break
        assert bytes(r.body) == HELLO * 8
        time.sleep(0.1)
    assert r.header("content-encoding") == "gzip", r.headers
    assert "accept-encoding" in (r.header("vary") or "").lower()
    assert gzip.decompress(bytes(r.body)) == HELLO * 8
    r1 = fetch(srv, "/text.txt", headers=[("Accept-Encoding", "gzip")])
    assert r1.header("etag") == r.header("etag") and r1.body == bytes(r.body)


def test_autoindex_and_error_page(make_server, docroot):
    (docroot / "404.html").write_bytes(b"<p>custom not found</p>\n")
    srv = make_server(docroot, args=("--autoindex", "--error-page", "404=/404.html"))
    listing, missing = h3(srv, [("GET", "/noindex/"), ("GET", "/nothing-here")])
    assert listing.status == 200 and b"a.txt" in listing.body and b"cdir/" in listing.body
    assert bytes(listing.body) == fetch(srv, "/noindex/").body
    assert missing.status == 404 and bytes(missing.body) == b"<p>custom not found</p>\n"


def test_basic_auth(make_server, docroot, tmp_path):
    """401 without or with wrong credentials; 200 with good ones, verified off the loop while
    the request waits (bcrypt), and at once from the cache after; 401 bodies as HTTP/1.1's."""
    if not shutil.which("htpasswd"):
        pytest.fail("htpasswd is missing: scripts/deps.sh test installs it")
    pw = tmp_path / "htpasswd"
    subprocess.run(["htpasswd", "-c", "-b", "-B", "-C", "8", str(pw), "alice", "secret"],
                   check=True, capture_output=True, timeout=30)
    srv = make_server(docroot, args=("--basic-auth", f"/={pw}"))
    good = "Basic " + base64.b64encode(b"alice:secret").decode()
    bad = "Basic " + base64.b64encode(b"alice:wrong").decode()
    none, ok, wrong, again = h3(srv, [("GET", "/hello.txt"),
                                      ("GET", "/hello.txt", [("authorization", good)]),
                                      ("GET", "/hello.txt", [("authorization", bad)]),
                                      ("GET", "/hello.txt", [("authorization", good)])])
    assert none.status == 401 and none.header("www-authenticate").startswith("Basic")
    assert bytes(none.body) == fetch(srv, "/hello.txt").body
    assert ok.status == 200 and bytes(ok.body) == HELLO
    assert wrong.status == 401
    assert again.status == 200 and bytes(again.body) == HELLO
    # several streams waiting for the same verification at once
    fresh = "Basic " + base64.b64encode(b"bob:x").decode()
    got = h3(srv, [("GET", "/hello.txt", [("authorization", good)])] * 5 +
             [("GET", "/hello.txt", [("authorization", fresh)])] * 3, parallel=True)
    assert [r.status for r in got] == [200] * 5 + [401] * 3


def test_misdirected_request_by_certificate(make_server, docroot, pki):
    """The 421 rule over HTTP/3 as on the TLS port: with two certificate pairs, a request whose
    :authority the certificate its connection got (by SNI) does not name is answered 421
    Misdirected Request; a name it does, or an address, is served."""
    srv = make_server(docroot, args=("--tls-cert", str(pki / "b.test.crt"),
                                     "--tls-key", str(pki / "b.test.key")))
    got = h3_get("127.0.0.1", srv.port, pki / "ca.crt",
                 [("GET", "/hello.txt", (), "b.test"), ("GET", "/hello.txt", (), "localhost"),
                  ("GET", "/hello.txt", (), "b.test:443"), ("GET", "/hello.txt", (), "[::1]"),
                  ("GET", "/hello.txt", (), "127.0.0.1:443")], server_name="b.test")
    assert [r.status for r in got] == [200, 421, 200, 200, 200], got
    assert bytes(got[0].body) == HELLO
    ok, other = h3(srv, [("GET", "/hello.txt"), ("GET", "/hello.txt", (), "b.test")])
    assert (ok.status, other.status) == (200, 421)


def _wakeups(pid):
    """Voluntary context switches of every thread of pid: how often its threads slept."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return total


def test_basic_auth_wait_is_resumed_by_its_token(make_server, docroot, tmp_path):
    """A request waiting for a slow password check (bcrypt cost 13) is answered when the check
    ends, woken by its resume token: the worker does not wake every 5 ms to ask again meanwhile.
    Measured (threads' voluntary context switches per second of the wait): epoll 155-185 with
    the 5 ms poll, 85-106 without (the engine's 10 ms QUIC tick of then); io_uring 12-40 either
    way, so only epoll tells them apart. Bound: 140 a second."""
    if not shutil.which("htpasswd"):
        pytest.fail("htpasswd is missing: scripts/deps.sh test installs it")
    pw = tmp_path / "htpasswd"
    subprocess.run(["htpasswd", "-c", "-b", "-B", "-C", "13", str(pw), "alice", "secret"],
                   check=True, capture_output=True, timeout=60)
    srv = make_server(docroot, args=("-t", "1", "--basic-auth", f"/={pw}"))
    good = "Basic " + base64.b64encode(b"alice:secret").decode()
    before, start = _wakeups(srv.proc.pid), time.monotonic()
    r, = h3(srv, [("GET", "/hello.txt", [("authorization", good)])])
    took, woke = time.monotonic() - start, _wakeups(srv.proc.pid) - before
    assert r.status == 200 and bytes(r.body) == HELLO
    assert took > 0.2, f"the check took {took:.3f} s: too short to tell"
    assert woke < 140 * took, f"{woke} wake-ups in {took:.3f} s"


def test_an_idle_connection_does_not_wake_the_worker(make_server, docroot):
    """An open HTTP/3 connection with nothing to send or acknowledge costs no wake-ups: the
    loop waits until QUIC's next timer (here the idle timeout), not a 10 ms tick. The old
    build woke ~100 times a second on both engines while any connection was open; now 2-4
    in the two seconds watched. Bound: 40."""
    srv = make_server(docroot, args=("-t", "1", "--keepalive-timeout", "30"))

    async def script(client):
        r = await client.request("GET", "/hello.txt")
        assert r.status == 200 and bytes(r.body) == HELLO
        await asyncio.sleep(0.5)  # the last acknowledgements settle
        before = _wakeups(srv.proc.pid)
        await asyncio.sleep(2.0)
        return _wakeups(srv.proc.pid) - before
    woke = h3_raw("127.0.0.1", srv.port, srv.ca, script)
    assert woke < 40, f"{woke} wake-ups in 2 s with one idle connection"


def cold_fs(docroot, data):
    """slowfs (FUSE) at docroot/cold with data as slow.bin, its reads held; or a skip."""
    try:
        return SlowFS(docroot / "cold", "slow.bin", data)
    except OSError as e:
        pytest.skip(f"cannot mount a FUSE file system here: {e}")


def while_held(srv, fs, reqs, **kw):
    """reqs asked on one connection (h3) while fs holds their file's reads: once a read is
    held, another connection is answered by the same worker; then the reads go. The
    responses."""
    result = {}
    t = threading.Thread(target=lambda: result.update(r=h3(srv, reqs, timeout=60, **kw)))
    t.start()
    try:
        assert fs.wait_read(), "the server never read the file"
        r, = h3(srv, [("GET", "/hello.txt")], timeout=5)
        assert r.status == 200 and bytes(r.body) == HELLO
    finally:
        fs.release()
        t.join(timeout=60)
    return result["r"]


def test_cold_file_is_read_off_the_loop(make_server, docroot):
    """A file chunk the page cache does not have is read by a thread, not on the loop: while
    slowfs (FUSE) holds the read of a 1 MiB file, the same worker answers other HTTP/3
    requests (with pread on the loop they waited for the release); then the file arrives
    byte-exact."""
    data = os.urandom(1 << 20)  # past what the file cache keeps in memory: a file range
    fs = cold_fs(docroot, data)
    try:
        srv = make_server(docroot, args=("-t", "1", "--compress", "off"))
        r = while_held(srv, fs, [("GET", "/cold/slow.bin")])[0]
        assert r.status == 200 and hashlib.sha256(r.body).digest() == hashlib.sha256(data).digest()
        # the server's file cache holds the file open: the mount ends with the server
        assert srv.stop(signal.SIGTERM, timeout=10) == 0
    finally:
        fs.unmount()


def test_cold_read_outlives_its_connection(make_server, docroot):
    """A client that goes away while its file chunk is being read off the loop: once its
    connection is gone, the read's end finds no stream (its response is put back then, not
    before: the file stays open for the thread), the worker goes on serving, and stops cleanly
    (under ASan: no use after free, no leak)."""
    fs = cold_fs(docroot, os.urandom(1 << 20))
    try:
        srv = make_server(docroot, args=("-t", "1", "--compress", "off", "--metrics",
                                         "127.0.0.1:0"))

        async def leave_while_reading(client):
            sid = client._quic.get_next_available_stream_id()
            client.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                         (b":authority", b"localhost"),
                                         (b":path", b"/cold/slow.bin")], end_stream=True)
            client.transmit()
            return await asyncio.get_running_loop().run_in_executor(None, fs.wait_read)

        assert h3_raw("127.0.0.1", srv.port, srv.ca, leave_while_reading), "no read"
        r, = h3(srv, [("GET", "/hello.txt")], timeout=5)  # the connection above is closed
        assert r.status == 200 and bytes(r.body) == HELLO

        def open_conns():
            return sum(v for k, v in scrape(srv).items()
                       if k.startswith("ringhttpd_http3_connections{"))
        assert wait_for(lambda: open_conns() == 0, timeout=10), "connections stay open"
        fs.release()
        r, = h3(srv, [("GET", "/hello.txt")], timeout=5)
        assert r.status == 200 and srv.alive()
        assert srv.stop(signal.SIGTERM, timeout=10) == 0
    finally:
        fs.unmount()


def test_cold_reads_of_one_connection_take_turns(make_server, docroot):
    """Four streams of one connection ask for a cold file at once: the engine reads their
    chunks on the connection's slot (conn_file_read, as it reads TLS bodies) one at a time,
    the others waiting their turn, while the worker answers another connection; once the
    file system lets the reads go, every stream gets the file byte-exact."""
    data = os.urandom(1 << 20)  # a file range, not a cache entry
    fs = cold_fs(docroot, data)
    try:
        srv = make_server(docroot, args=("-t", "1", "--compress", "off"))
        rs = while_held(srv, fs, [("GET", "/cold/slow.bin")] * 4, parallel=True)
        want = hashlib.sha256(data).digest()
        assert [(r.status, hashlib.sha256(r.body).digest()) for r in rs] == [(200, want)] * 4
        assert srv.stop(signal.SIGTERM, timeout=10) == 0
    finally:
        fs.unmount()


def test_cold_reads_outlive_their_connection_and_the_drain(make_server, docroot):
    """A client with four streams waiting for cold chunks goes away: the queued streams go
    with it, the read with the engine keeps the connection's slot, chunk and file until it
    ends. Then a second client's cold read is still held when the server is stopped: the
    drain's deadline passes, and the worker waits for the read before it frees what the read
    writes (under ASan: no use after free, no leak), and exits cleanly once it ends."""
    fs = cold_fs(docroot, os.urandom(1 << 20))
    try:
        srv = make_server(docroot, args=("-t", "1", "--compress", "off", "--drain-timeout", "1",
                                         "--metrics", "127.0.0.1:0"))

        async def leave_while_reading(client):
            for _ in range(4):
                sid = client._quic.get_next_available_stream_id()
                client.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                             (b":authority", b"localhost"),
                                             (b":path", b"/cold/slow.bin")], end_stream=True)
            client.transmit()
            read = await asyncio.get_running_loop().run_in_executor(None, fs.wait_read)
            # The first READ may be the file cache's digest; the answers' reads follow.
            await asyncio.sleep(0.5)
            return read

        assert h3_raw("127.0.0.1", srv.port, srv.ca, leave_while_reading), "no read"

        def open_conns():
            return sum(v for k, v in scrape(srv).items()
                       if k.startswith("ringhttpd_http3_connections{"))
        assert wait_for(lambda: open_conns() == 0, timeout=10), "connections stay open"
        r, = h3(srv, [("GET", "/hello.txt")], timeout=5)
        assert r.status == 200 and bytes(r.body) == HELLO
        fs.release()
        r, = h3(srv, [("GET", "/hello.txt")], timeout=5)
        assert r.status == 200 and srv.alive()
        fs.gate.clear()  # the next cold read is held again (the cache may have the first)
        fs._read_seen.clear()
        def held_client():
            try:  # the stop cuts it: its end is not what is tested
                h3(srv, [("GET", "/cold/slow.bin", [("range", "bytes=900000-")])] * 2,
                   parallel=True, timeout=20)
            except (ConnectionError, asyncio.TimeoutError, TimeoutError):
                pass
        t = threading.Thread(target=held_client, daemon=True)
        t.start()
        assert fs.wait_read(), "the second read never came"
        releaser = threading.Timer(3.0, fs.release)  # after the 1 s drain has run out
        releaser.start()
        try:
            t0 = time.monotonic()
            assert srv.stop(signal.SIGTERM, timeout=20) == 0
            assert time.monotonic() - t0 >= 2.0, "the stop did not wait for the read"
        finally:
            releaser.cancel()
            fs.release()
    finally:
        fs.unmount()


def test_alt_svc_and_off(make_server, docroot):
    srv = make_server(docroot)
    r = fetch(srv, "/hello.txt")
    assert r.header("alt-svc") == f'h3=":{srv.port}"; ma=86400'
    # Not on HTTP/3's own answers: the client is there already (a field less to encode)
    got = h3(srv, [("GET", "/hello.txt"), ("GET", "/missing.txt")])
    assert [r3.status for r3 in got] == [200, 404]
    for r3 in got:
        assert r3.header("alt-svc") is None, r3.headers
    off = make_server(docroot, args=("--http3", "off"))
    assert fetch(off, "/hello.txt").header("alt-svc") is None
    with pytest.raises(Exception):
        h3(off, [("GET", "/")], timeout=1)  # no answer comes: bounded by 2 s


def test_field_names_are_lower_cased(make_server, docroot):
    """RFC 9114 4.2: names go out in lower case, whatever their length (h3.c lowers them eight
    bytes at a time) and whichever tchars sit beside the letters ('@' and '[' are not tchars,
    but '^', '_', '`', '|' and '~' are)."""
    names = ["X", "Ab", "AbCdEfG", "AbCdEfGh", "Z^_`|~Az-09.QM", "X-Very-Long-Header-NAME-ZZ-Top"]
    args = []
    for i, name in enumerate(names):
        args += ["--header", f"{name}: V{i}"]
    srv = make_server(docroot, args=args)
    r, = h3(srv, [("GET", "/hello.txt")])
    assert r.status == 200 and bytes(r.body) == HELLO
    got = dict(r.headers)
    for i, name in enumerate(names):
        assert got.get(name.lower()) == f"V{i}", (name, r.headers)
    for name, _ in r.headers:
        assert name == name.lower(), r.headers


def test_access_log_says_http3(make_server, docroot, tmp_path):
    log = tmp_path / "access.log"
    srv = make_server(docroot, args=("--access-log", str(log)))
    h3(srv, [("GET", "/hello.txt"), ("GET", "/missing")])
    srv.stop()
    text = log.read_text()
    assert '"GET /hello.txt HTTP/3.0" 200 1024' in text, text
    assert '"GET /missing HTTP/3.0" 404' in text, text


def test_gtlsclient_second_implementation(make_server, docroot, tmp_path):
    """ngtcp2's own example client (Debian's ngtcp2-client) downloads byte-exact."""
    if not shutil.which("gtlsclient"):
        pytest.fail("gtlsclient is missing: scripts/deps.sh test installs ngtcp2-client")
    srv = make_server(docroot)
    out = tmp_path / "dl"
    out.mkdir()
    subprocess.run(["gtlsclient", "--quiet", "--no-quic-dump", "--no-http-dump",
                    "--exit-on-all-streams-close", "--timeout=10s", "--download", str(out),
                    "127.0.0.1", str(srv.port), f"https://localhost:{srv.port}/big.bin",
                    f"https://localhost:{srv.port}/hello.txt"],
                   check=True, capture_output=True, timeout=60)
    assert (out / "big.bin").read_bytes() == BIG
    assert (out / "hello.txt").read_bytes() == HELLO


def test_retry_when_loaded(make_server, docroot):
    """With --http3-max-conns 1 the Retry threshold (half of it) is 0: every new client must
    come back with the token of a Retry, and is served."""
    srv = make_server(docroot, args=("-t", "1", "--http3-max-conns", "1"))
    log = new_logger()
    r, = h3(srv, [("GET", "/hello.txt")], logger=log)
    assert r.status == 200 and bytes(r.body) == HELLO
    events = [e for t in log.to_dict()["traces"] for e in t["events"]]
    retries = [e for e in events if e["name"] == "transport:packet_received"
               and e["data"]["header"]["packet_type"] == "retry"]
    assert retries, "no Retry packet came"


def test_metrics_count_http3(make_server, docroot):
    """Requests over HTTP/3 are counted as any others; the QUIC counters move (a Retry with
    --http3-max-conns 1, a version negotiation, a stateless reset)."""
    srv = make_server(docroot, args=("-t", "1", "--http3-max-conns", "1", "--metrics",
                                     "127.0.0.1:0"))
    before = scrape(srv)
    h3(srv, [("GET", "/hello.txt"), ("GET", "/hello.txt")])
    udp_exchange(srv.port, [bytes([0xc0]) + b"\x1a\x2a\x3a\x4a" + b"\x08" + b"a" * 8 +
                            b"\x08" + b"b" * 8 + b"\0" * 1200,
                            bytes([0x41]) + os.urandom(80)], wait=0.5)
    after = scrape(srv)

    def d(key):
        return after.get(key + '{worker="0"}', 0) - before.get(key + '{worker="0"}', 0)
    assert d("ringhttpd_http3_connections_accepted_total") == 1
    assert d("ringhttpd_http3_retries_total") == 1
    assert d("ringhttpd_http3_version_negotiations_total") == 1
    assert d("ringhttpd_http3_stateless_resets_total") == 1
    assert d("ringhttpd_udp_datagrams_received_total") >= 4
    # a request is counted when its stream closes: once the client acknowledged the answer
    ok = 'ringhttpd_requests_total{worker="0",code="200",method="GET"}'
    assert wait_for(lambda: scrape(srv).get(ok, 0) - before.get(ok, 0) == 2), \
        [k for k in scrape(srv) if "requests" in k]


def test_idle_timeout_and_connection_limit(make_server, docroot):
    """With one connection per worker allowed, a second client is refused while the first is
    open (CONNECTION_REFUSED); the first, idle past --keepalive-timeout, is let go."""
    import asyncio
    from aioquic.asyncio.client import connect
    from h3client import _Proto, configuration
    srv = make_server(docroot, args=("-t", "1", "--http3-max-conns", "1", "--keepalive-timeout",
                                     "1", "--metrics", "127.0.0.1:0"))

    async def scenario():
        cfg = configuration(srv.ca)
        async with connect("127.0.0.1", srv.port, configuration=cfg,
                           create_protocol=_Proto) as first:
            r = await asyncio.wait_for(first.request("GET", "/hello.txt"), 10)
            assert r.status == 200
            with pytest.raises(ConnectionError):
                async with connect("127.0.0.1", srv.port, configuration=configuration(srv.ca),
                                   create_protocol=_Proto) as second:
                    await asyncio.wait_for(second.request("GET", "/hello.txt"), 10)
            assert scrape(srv).get('ringhttpd_http3_connections{worker="0"}') == 1
            for _ in range(100):  # the server's idle timer: 1 s (bounded wait: 10 s)
                if scrape(srv).get('ringhttpd_http3_connections{worker="0"}') == 0:
                    break
                await asyncio.sleep(0.1)
            assert scrape(srv).get('ringhttpd_http3_connections{worker="0"}') == 0
    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert scrape(srv).get('ringhttpd_http3_connections_refused_total{worker="0"}', 0) >= 1


def test_version_negotiation(make_server, docroot):
    srv = make_server(docroot)
    dcid, scid = os.urandom(8), os.urandom(8)
    pkt = bytes([0xc0]) + b"\x1a\x2a\x3a\x4a" + bytes([8]) + dcid + bytes([8]) + scid
    pkt += b"\0" * (1200 - len(pkt))
    got = udp_exchange(srv.port, [pkt])
    assert len(got) == 1, got
    vn = got[0]
    assert vn[0] & 0x80 and vn[1:5] == b"\0\0\0\0"
    assert vn[5] == 8 and vn[6:14] == scid and vn[14] == 8 and vn[15:23] == dcid
    versions = [vn[i:i + 4] for i in range(23, len(vn), 4)]
    assert b"\0\0\0\x01" in versions
    # a small datagram of an unknown version is not answered (no amplification)
    assert udp_exchange(srv.port, [pkt[:100]], wait=0.5) == []


def test_stateless_reset_for_unknown_connection(make_server, docroot):
    srv = make_server(docroot)
    pkt = bytes([0x40 | 0x01]) + os.urandom(18) + os.urandom(60)
    got = udp_exchange(srv.port, [pkt])
    assert len(got) == 1
    reset = got[0]
    assert reset[0] & 0xc0 == 0x40 and 21 <= len(reset) < len(pkt)


def _initial_datagram():
    """A real client Initial (aioquic's), for tests that never go on with the handshake."""
    from aioquic.quic.connection import QuicConnection
    from h3client import configuration
    cfg = configuration(__file__)  # never verified: the handshake never completes
    conn = QuicConnection(configuration=cfg)
    conn.connect(("127.0.0.1", 1), now=time.monotonic())
    return [d for d, _ in conn.datagrams_to_send(now=time.monotonic())]


def test_amplification_limit_and_abandoned_handshake(make_server, docroot):
    """A client that sends its Initial and never answers gets at most 3 times the bytes it
    sent (RFC 9000 8.1) over the server's retransmissions, and the server lets it go."""
    srv = make_server(docroot)
    sent = _initial_datagram()
    got = udp_exchange(srv.port, sent, wait=4.0)
    total_in, total_out = sum(map(len, sent)), sum(map(len, got))
    assert total_out > 0, "no answer to a client Initial"
    assert total_out <= 3 * total_in, (total_out, total_in)
    r, = h3(srv, [("GET", "/hello.txt")])  # still serving
    assert bytes(r.body) == HELLO


def test_hostile_datagrams(make_server, docroot):
    """Random and truncated datagrams, in a bounded loop: no crash, memory bounded, still
    serving."""
    srv = make_server(docroot)
    rng = random.Random(29)
    initial = _initial_datagram()[0]
    before = rss_kib(srv.proc.pid)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for i in range(3000):
            kind = i % 4
            if kind == 0:
                d = rng.randbytes(rng.randrange(1, 1500))
            elif kind == 1:
                d = initial[:rng.randrange(1, len(initial))]
            elif kind == 2:  # an Initial with bytes flipped
                b = bytearray(initial)
                for _ in range(8):
                    b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
                d = bytes(b)
            else:  # long header, random version and connection IDs
                d = bytes([0xc0 | rng.randrange(64)]) + rng.randbytes(rng.randrange(5, 1300))
            s.sendto(d, ("127.0.0.1", srv.port))
            if i % 200 == 0:
                time.sleep(0.01)
    finally:
        s.close()
    r, = h3(srv, [("GET", "/big.bin")])
    assert bytes(r.body) == BIG
    assert rss_kib(srv.proc.pid) - before < 64 * 1024, "memory grew by more than 64 MiB"


# QPACK (RFC 9204) instructions and field lines the bomb tests write by hand.
QPACK_SET_CAPACITY = 0x20      # 001xxxxx: Set Dynamic Table Capacity
QPACK_INSERT_LITERAL = 0x40    # 01Hxxxxx: Insert with Literal Name
REQUEST_FIELDS = (b"\xd1"       # :method GET (static 17)
                  b"\xd7"       # :scheme https (static 23)
                  b"\xc1"       # :path / (static 1)
                  b"\x50\x09localhost")  # :authority, name static 0, literal value


def _insert(name, value):
    return (qpack_int(len(name), 5, QPACK_INSERT_LITERAL) + name +
            qpack_int(len(value), 7) + value)


def test_qpack_encoder_past_our_table_is_a_connection_error(make_server, docroot):
    """A client whose encoder stream sets a dynamic table larger than the 4 KiB we allow, or
    inserts an entry larger than the table, loses its connection (QPACK_ENCODER_STREAM_ERROR,
    RFC 9204 4.3.1), and the server goes on serving others."""
    srv = make_server(docroot)

    def abuse(instructions):
        async def script(client):
            await client.request("GET", "/hello.txt")  # our SETTINGS have arrived
            client._quic.send_stream_data(client.h3._local_encoder_stream_id, instructions)
            client.transmit()
            return await wait_closed(client, 5)
        return h3_raw("127.0.0.1", srv.port, srv.ca, script)

    closed = abuse(qpack_int(1 << 20, 5, QPACK_SET_CAPACITY))
    assert closed is not None and closed.error_code == 0x201, closed
    closed = abuse(qpack_int(4096, 5, QPACK_SET_CAPACITY) + _insert(b"x-big", b"v" * 5000))
    assert closed is not None and closed.error_code == 0x201, closed
    r, = h3(srv, [("GET", "/hello.txt")])
    assert bytes(r.body) == HELLO


def test_qpack_bomb_is_bounded(make_server, docroot):
    """A field section of 2,000 references to one 4,000-byte dynamic table entry (8 MB once
    decoded, from 2 KB on the wire), 20 times on one connection: each is answered 431 (past
    HTTP1_MAX_HEAD, as HTTP/1.1's) and the connection stays; so is a section of 40 KB of
    literal value or of 70 fields; memory stays bounded and the server goes on serving."""
    srv = make_server(docroot)
    # Required Insert Count 1 (encoded as 1 % (2 * 4096 // 32) + 1 = 2), Base 1 (delta 0),
    # then indexed field lines of relative index 0 (10xxxxxx: dynamic, the one entry).
    section = b"\x02\x00" + REQUEST_FIELDS + b"\x80" * 2000
    before = rss_kib(srv.proc.pid)

    class OwnInserts:
        """aioquic's encoder made none of the inserts our decoder stream acknowledges."""
        def __init__(self, encoder):
            self.encoder = encoder

        def feed_decoder(self, data):
            return None

        def __getattr__(self, name):
            return getattr(self.encoder, name)

    async def script(client):
        quic = client._quic
        client.h3._encoder = OwnInserts(client.h3._encoder)
        quic.send_stream_data(client.h3._local_encoder_stream_id,
                              qpack_int(4096, 5, QPACK_SET_CAPACITY) +
                              _insert(b"x-bomb", b"a" * 4000))
        outcomes = []
        for _ in range(20):
            sid = quic.get_next_available_stream_id()
            fut = asyncio.get_running_loop().create_future()
            resp = Response()
            client.pending[sid] = (resp, fut)
            quic.send_stream_data(sid, h3_frame(0x01, section), end_stream=True)
            client.transmit()
            try:
                outcomes.append((await asyncio.wait_for(fut, 5)).status)
            except (asyncio.TimeoutError, ConnectionError):
                outcomes.append(None)  # the stream was reset, or the connection closed
            if client.terminated:
                break
        return outcomes, client.terminated

    outcomes, closed = h3_raw("127.0.0.1", srv.port, srv.ca, script)
    assert outcomes == [431] * 20 and closed is None, (outcomes, closed)
    # a section that is large on the wire too: 40 KB of literal value, then 70 fields
    big, many, r = h3(srv, [("GET", "/hello.txt", [("x-big", "b" * 40000)]),
                            ("GET", "/hello.txt", [(f"x-f{i}", "v") for i in range(70)]),
                            ("GET", "/hello.txt")])
    assert (big.status, many.status, r.status) == (431, 431, 200)
    assert bytes(r.body) == HELLO
    assert rss_kib(srv.proc.pid) - before < 32 * 1024, "memory grew by more than 32 MiB"


def test_streams_past_the_limit_close_the_connection(make_server, docroot):
    """A client that opens request streams past the 100 the server allows (ignoring
    MAX_STREAMS) loses its connection with STREAM_LIMIT_ERROR (RFC 9000 4.6); the server goes
    on serving."""
    srv = make_server(docroot)

    async def script(client):
        await client.request("GET", "/hello.txt")
        quic = client._quic
        quic._remote_max_streams_bidi = 1000  # pretend the server allowed it
        for _ in range(150):
            sid = quic.get_next_available_stream_id()
            client.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                         (b":authority", b"localhost"),
                                         (b":path", b"/hello.txt")], end_stream=False)
        client.transmit()
        return await wait_closed(client, 5)

    closed = h3_raw("127.0.0.1", srv.port, srv.ca, script)
    assert closed is not None and closed.error_code == 0x4, closed  # STREAM_LIMIT_ERROR
    r, = h3(srv, [("GET", "/hello.txt")])
    assert bytes(r.body) == HELLO


def test_initial_flood_is_bounded(make_server, docroot):
    """1000 fresh client Initials (each a new connection that never completes): past half of
    --http3-max-conns the server asks for Retry, past all of it refuses; it keeps serving."""
    srv = make_server(docroot, args=("--http3-max-conns", "64"))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for i in range(1000):
            for d in _initial_datagram():
                s.sendto(d, ("127.0.0.1", srv.port))
    finally:
        s.close()
    r, = h3(srv, [("GET", "/hello.txt")])
    assert bytes(r.body) == HELLO


def test_drain_closes_connections(make_server, docroot):
    """SIGTERM: the server ends its QUIC connections and exits 0 within the drain."""
    srv = make_server(docroot)
    h3(srv, [("GET", "/hello.txt")])
    t0 = time.monotonic()
    assert srv.stop(signal.SIGTERM, timeout=15) == 0
    # not held for the closing period (3 PTO) nor the idle timeout: a generous bound
    assert time.monotonic() - t0 < 5
