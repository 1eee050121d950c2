"""Large files (above --cache-max-file): sent as file ranges, by io_uring splice through the
per-worker pipe pool (--file-send splice) or by sendfile (--file-send sendfile; the epoll engine
always uses sendfile). Every test runs for both modes on the io_uring engine and once on epoll,
and checks the bytes exactly: a pipe reused with another response's bytes in it, a short splice
that loses or repeats bytes, or headers overtaken by the body would all show as a wrong digest.
"""

import concurrent.futures
import hashlib
import os
import re
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import BIG, HELLO, StrictReader, fetch, request, tls_wrap

# Issue 14: each server test runs over TLS too (conftest: scheme).
pytestmark = pytest.mark.schemes("http", "https")

MODES = ["splice", "sendfile"]
LARGE = 4 << 20


@pytest.fixture(params=MODES)
def mode(request, engine):
    if engine == "epoll" and request.param != MODES[0]:
        pytest.skip("the epoll engine always sends files with sendfile")
    return request.param


@pytest.fixture
def large(docroot, random_file):
    """(path on the server, bytes) of a 4 MiB random file in the docroot."""
    src, _ = random_file(LARGE)
    os.link(src, docroot / "large.bin")
    return "/large.bin", src.read_bytes()


def _socket(server, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect((server.host, server.port))
    return tls_wrap(server, s)


def _linger0(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _download(server, path, rcvbuf=None, stall=0.0, timeout=60.0):
    """GET path on a new connection; with rcvbuf and stall, holds the server's send back (so
    it keeps its pipe) for `stall` seconds before reading. Returns the sha256 of the body."""
    s = _socket(server, rcvbuf)
    try:
        s.sendall(request("GET", path, close=True))
        if stall:
            time.sleep(stall)
        r = StrictReader(s, timeout=timeout).read()
        assert r.status == 200, r
        return hashlib.sha256(r.body).hexdigest()
    finally:
        s.close()


def _args(mode, *extra):
    return ["--file-send", mode, *extra]


def test_more_concurrent_downloads_than_pipes(make_server, docroot, large, mode):
    """Two pipes per worker and 16 concurrent downloads, some stalled: the rest wait for a pipe
    (FIFO), and every download completes byte-exact."""
    path, want = large
    digest = hashlib.sha256(want).hexdigest()
    server = make_server(docroot, args=_args(mode, "--splice-pipes", "2"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        futs = [pool.submit(_download, server, path, 4096 if i % 3 == 0 else None,
                            0.3 if i % 3 == 0 else 0.0) for i in range(16)]
        # Small files keep being served while every pipe is taken.
        for _ in range(5):
            assert fetch(server, "/hello.txt").body == HELLO
        for f in futs:
            assert f.result(timeout=120) == digest
    assert fetch(server, "/big.bin").body == BIG


@pytest.mark.slow
def test_200_concurrent_downloads_default_pool(make_server, docroot, mode):
    """More downloads at once than the default pool (64 pipes per worker) holds."""
    server = make_server(docroot, args=_args(mode))
    digest = hashlib.sha256(BIG).hexdigest()
    socks = []
    try:
        for _ in range(200):
            s = _socket(server, rcvbuf=8192)
            s.sendall(request("GET", "/big.bin", close=True))
            socks.append(s)
        time.sleep(0.3)

        def read(s):
            r = StrictReader(s, timeout=60).read()
            assert r.status == 200
            return hashlib.sha256(r.body).hexdigest()

        with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
            assert list(pool.map(read, socks)) == [digest] * 200
    finally:
        for s in socks:
            s.close()


def _multipart(resp):
    """[(content-range, body)] of a multipart/byteranges response."""
    ctype = resp.header("content-type")
    m = re.match(r"multipart/byteranges; boundary=(\S+)$", ctype or "")
    assert m, ctype
    delim = b"--" + m.group(1).encode()
    body = resp.body
    assert body.endswith(delim + b"--\r\n"), body[-80:]
    parts = []
    pos = body.index(delim)
    assert body[:pos].strip() == b""
    while True:
        pos += len(delim)
        if body[pos:pos + 2] == b"--":
            break
        assert body[pos:pos + 2] == b"\r\n"
        head_end = body.index(b"\r\n\r\n", pos)
        heads = dict(line.split(b": ", 1) for line in body[pos + 2:head_end].split(b"\r\n"))
        start = head_end + 4
        cr = heads[b"Content-Range"].decode()
        m2 = re.match(r"bytes (\d+)-(\d+)/(\d+)$", cr)
        assert m2, cr
        n = int(m2.group(2)) - int(m2.group(1)) + 1
        parts.append((cr, body[start:start + n]))
        assert body[start + n:start + n + 2] == b"\r\n"
        pos = start + n + 2
        assert body[pos:pos + len(delim)] == delim
    return parts


def test_multipart_ranges_of_a_large_file(make_server, docroot, large, mode):
    path, want = large
    server = make_server(docroot, args=_args(mode, "--splice-pipes", "1"))
    ranges = [(0, 99), (4095, 4097), (300001, 2500000), (3000000, 3000000), (LARGE - 70000,
                                                                           LARGE - 1)]
    spec = "bytes=" + ",".join("%d-%d" % r for r in ranges)
    r = fetch(server, path, headers=[("Range", spec)], timeout=30)
    assert r.status == 206
    parts = _multipart(r)
    assert [p[0] for p in parts] == ["bytes %d-%d/%d" % (a, b, LARGE) for a, b in ranges]
    for (a, b), (_, data) in zip(ranges, parts):
        assert data == want[a:b + 1], (a, b)
    # A single unaligned range: one file segment that starts mid-page.
    r = fetch(server, path, headers=[("Range", "bytes=12345-")], timeout=30)
    assert r.status == 206 and r.body == want[12345:]


def test_reset_mid_download_while_others_continue(make_server, docroot, large, mode):
    """Clients that reset with bytes still in their pipe: the pipe is closed (never reused
    dirty), others' downloads go on and later ones get exactly their own bytes."""
    path, want = large
    digest = hashlib.sha256(want).hexdigest()
    server = make_server(docroot, args=_args(mode, "--splice-pipes", "2"))
    stop = threading.Event()
    done = []

    def background():
        while not stop.is_set():
            done.append(_download(server, path) == digest)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futs = [pool.submit(background) for _ in range(2)]
        try:
            for i in range(12):
                s = _socket(server, rcvbuf=4096)
                s.sendall(request("GET", path))
                s.recv(1000)  # the response has started
                time.sleep(0.02 * (i % 3))
                _linger0(s)
                s.close()
        finally:
            stop.set()
        for f in futs:
            f.result(timeout=120)
    assert done and all(done)
    assert server.alive(), server.stderr_text()[-3000:]
    for _ in range(4):
        assert _download(server, path) == digest
    assert fetch(server, "/big.bin").body == BIG


def test_pipelined_requests_behind_a_large_file(make_server, docroot, large, mode):
    path, want = large
    server = make_server(docroot, args=_args(mode))
    s = _socket(server)
    try:
        s.sendall(request("GET", path) + request("GET", "/hello.txt") +
                  request("GET", path, headers=[("Range", "bytes=1000-1999,2000000-2000099")]) +
                  request("HEAD", path) + request("GET", path, headers=[("Range", "bytes=-5")]) +
                  request("GET", "/big.bin", close=True))
        reader = StrictReader(s, timeout=30)
        r = reader.read()
        assert r.status == 200 and r.body == want
        r = reader.read()
        assert r.status == 200 and r.body == HELLO
        r = reader.read()
        assert r.status == 206
        assert [d for _, d in _multipart(r)] == [want[1000:2000], want[2000000:2000100]]
        r = reader.read("HEAD")
        assert r.status == 200 and r.header("content-length") == str(LARGE) and r.body == b""
        r = reader.read()
        assert r.status == 206 and r.body == want[-5:]
        r = reader.read()
        assert r.status == 200 and r.body == BIG
        reader.expect_close()
    finally:
        s.close()


def _notsent(server, client):
    """Bytes the server's socket to `client` holds unsent (tcp_info, as `ss -ti` shows it)."""
    lport = client.getsockname()[1]
    out = subprocess.run(["ss", "-tinH", "state", "established", f"( sport = :{server.port} "
                          f"and dport = :{lport} )"], capture_output=True, text=True,
                         check=True).stdout
    assert f":{lport}" in out, out
    m = re.search(r"\bnotsent:(\d+)", out)
    return int(m.group(1)) if m else 0


def _stalled_notsent(server, path):
    """Starts a download of `path` that does not read, and returns the server's unsent bytes
    once they have stopped growing; then reads the whole response and checks it."""
    s = _socket(server, rcvbuf=65536)
    try:
        s.sendall(request("GET", path, close=True))
        last, n = -1, 0
        for _ in range(50):
            time.sleep(0.1)
            n = _notsent(server, s)
            if n == last and n > 0:
                break
            last = n
        r = StrictReader(s, timeout=60).read()
        assert r.status == 200 and len(r.body) == LARGE
        return n
    finally:
        s.close()


def test_send_lowat_bounds_what_a_stalled_client_holds(make_server, docroot, large, mode):
    """--send-lowat (TCP_NOTSENT_LOWAT, 128K by default): a client that stops reading holds at
    most about that much beyond its window in the server's socket, not megabytes; 0 gives the
    kernel's default back, which on Linux queues up to the send buffer."""
    path, want = large
    bound = (128 << 10) + (64 << 10)  # the low-water mark plus one segment under way
    server = make_server(docroot, args=_args(mode))
    held = _stalled_notsent(server, path)
    assert 0 < held <= bound, held
    assert _download(server, path) == hashlib.sha256(want).hexdigest()

    with open("/proc/sys/net/ipv4/tcp_wmem") as f:
        wmem_max = int(f.read().split()[2])
    if wmem_max < 4 * bound:
        pytest.skip(f"net.ipv4.tcp_wmem allows only {wmem_max} bytes: no contrast to show")
    server = make_server(docroot, args=_args(mode, "--send-lowat", "0"))
    assert _stalled_notsent(server, path) > 2 * bound


def test_send_lowat_option_is_validated(make_server, engine):
    for bad in ("x", "-1", "4G", "12Q"):
        server = make_server(args=["--send-lowat", bad], ready=False)
        assert server.proc.wait(timeout=10) == 2
        assert "--send-lowat" in server.stderr_text()


def test_file_send_option_is_validated(make_server, engine):
    server = make_server(args=["--file-send", "mmap"], ready=False)
    assert server.proc.wait(timeout=10) == 2
    assert "--file-send" in server.stderr_text()
    server = make_server(args=["--splice-pipes", "0"], ready=False)
    assert server.proc.wait(timeout=10) == 2
