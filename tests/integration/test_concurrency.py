"""Many clients at once, clients that vanish mid-transfer, and the SIGTERM drain (issue 2)."""

import asyncio
import concurrent.futures
import hashlib
import os
import signal
import socket
import struct
import threading
import time

import httpx
import pytest

from conftest import (BIG, HELLO, INDEX_HTML, SUB_INDEX_HTML, Conn, connect, fetch, request,
                      stalled_download, tls_wrap)

# Issue 14: each server test runs over TLS too (conftest: scheme).
pytestmark = pytest.mark.schemes("http", "https")

FILES = [("/hello.txt", HELLO), ("/", INDEX_HTML), ("/sub/", SUB_INDEX_HTML),
         ("/big.bin", BIG), ("/noindex/a.txt", b"file a\n"), ("/empty.txt", b"")]


def _client(server, idx, barrier, rounds):
    with Conn(server, timeout=30) as c:
        try:
            barrier.wait(timeout=30)
        except threading.BrokenBarrierError:
            pass
        for j in range(rounds):
            path, want = FILES[(idx + j) % len(FILES)]
            c.send(request("GET", path))
            r = c.read()
            assert r.status == 200, (idx, j, path, r.status)
            assert r.body == want, (idx, j, path)
    return idx


def _run_clients(server, n, rounds):
    barrier = threading.Barrier(n)
    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(_client, server, i, barrier, rounds) for i in range(n)]
        done = [f.result(timeout=120) for f in futures]
    assert sorted(done) == list(range(n))


def test_20_concurrent_clients(server):
    _run_clients(server, 20, 6)


@pytest.mark.slow
def test_200_concurrent_clients(server):
    _run_clients(server, 200, 5)


def test_concurrent_httpx_async_clients(server):
    """A real async client with its own connection pool: 60 requests, 20 connections."""
    async def main():
        limits = httpx.Limits(max_connections=20, max_keepalive_connections=20)
        timeout = httpx.Timeout(20.0)
        async with httpx.AsyncClient(base_url=server.base_url, limits=limits,
                                     timeout=timeout) as client:
            async def one(i):
                path, want = FILES[i % len(FILES)]
                r = await client.get(path, headers={"Accept-Encoding": "identity"})
                assert r.status_code == 200, (path, r.status_code)
                assert r.content == want, path
                return i
            return await asyncio.gather(*(one(i) for i in range(60)))

    assert sorted(asyncio.run(main())) == list(range(60))


def _linger0(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _start_slow_download(server, path, rcvbuf=8192):
    s = socket.socket(socket.AF_INET6 if ":" in server.host else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect((server.host, server.port))
    s = tls_wrap(server, s)
    s.sendall(request("GET", path))
    got = 0
    while got < 65536:
        chunk = s.recv(65536)
        assert chunk, "server closed before sending the start of the body"
        got += len(chunk)
    return s, got


def test_client_reset_mid_transfer_does_not_disturb_others(make_server, docroot, random_file):
    os.link(random_file(16 << 20)[0], docroot / "huge.bin")
    server = make_server(docroot)
    stop = threading.Event()
    results = {"ok": 0}

    def background():
        while not stop.is_set():
            for path, want in (("/hello.txt", HELLO), ("/big.bin", BIG)):
                r = fetch(server, path, timeout=20)
                assert r.status == 200 and r.body == want, path
                results["ok"] += 1

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        fut = pool.submit(background)
        try:
            for i in range(8):
                s, _ = _start_slow_download(server, "/huge.bin")
                if i % 2 == 0:
                    _linger0(s)  # RST
                s.close()        # odd ones: FIN with unread data (the kernel sends RST too)
                # Also one that stops reading and resets while the server is blocked on it.
                s, _ = _start_slow_download(server, "/huge.bin", rcvbuf=4096)
                time.sleep(0.05)
                _linger0(s)
                s.close()
        finally:
            stop.set()
        fut.result(timeout=60)
    assert results["ok"] > 0
    assert server.alive(), server.stderr_text()[-3000:]
    r = fetch(server, "/huge.bin", timeout=30)
    assert r.status == 200 and len(r.body) == 16 << 20


def test_many_resets_at_once(make_server, docroot, random_file):
    os.link(random_file(16 << 20)[0], docroot / "huge.bin")
    server = make_server(docroot)
    socks = [_start_slow_download(server, "/huge.bin")[0] for _ in range(20)]
    for s in socks:
        _linger0(s)
        s.close()
    assert server.alive()
    assert fetch(server, "/big.bin").body == BIG


def test_sigterm_finishes_in_flight_download(make_server, docroot, random_file):
    src, want = random_file(32 << 20)
    os.link(src, docroot / "huge.bin")
    server = make_server(docroot)
    c = Conn(server, timeout=30)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    try:
        c.send(request("GET", "/huge.bin"))
        # Read the first bytes, so the response is surely in flight, then signal.
        first = c.sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        c.h11.receive_data(first)
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        r = c.read()
        assert r.status == 200
        assert len(r.body) == 32 << 20
        assert hashlib.sha256(r.body).hexdigest() == want
        c.expect_close(timeout=10)
    finally:
        c.close()
    rc = server.stop(timeout=10)
    assert rc == 0, server.stderr_text()[-3000:]


def test_sigterm_with_idle_keepalive_connections_exits_0(make_server, docroot):
    server = make_server(docroot, args=["--keepalive-timeout", "60"])
    conns = [Conn(server) for _ in range(5)]
    try:
        for c in conns:
            assert c.request("GET", "/hello.txt").body == HELLO
        partial = connect(server)
        partial.sendall(b"GET /hello.txt HTTP/1.1\r\nHo")
        rc = server.stop(signal.SIGTERM, timeout=10)
        assert rc == 0, server.stderr_text()[-3000:]
        for c in conns:
            c.expect_close(timeout=5)
        partial.close()
    finally:
        for c in conns:
            c.close()


def test_sigint_exits_0(server):
    assert fetch(server, "/hello.txt").body == HELLO
    assert server.stop(signal.SIGINT, timeout=10) == 0, server.stderr_text()[-3000:]


def test_sigterm_stops_accepting(server):
    assert fetch(server, "/").status == 200
    assert server.stop(signal.SIGTERM) == 0
    with pytest.raises(OSError):
        s = socket.create_connection((server.host, server.port), timeout=2)
        try:
            # Accepted by a lingering backlog would still be wrong: nothing may answer.
            s.sendall(request("GET", "/", close=True))
            if not s.recv(1):
                raise ConnectionRefusedError("closed without an answer")
        finally:
            s.close()


def test_stalled_reader_does_not_block_the_worker(make_server, docroot, random_file):
    """One worker; clients that requested 16 MiB and stopped reading must not stop it serving
    others (a send that would block is finished later, never waited for)."""
    src, _ = random_file(16 << 20)
    os.link(src, docroot / "huge.bin")
    server = make_server(docroot, args=["-t", "1"])
    stalled = []
    try:
        for _ in range(3):
            s = socket.socket(socket.AF_INET6 if ":" in server.host else socket.AF_INET)
            # A fixed 64 KiB receive buffer (no autotuning): 16 MiB can never fit in flight.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            s.settimeout(10)
            s.connect(server.addr)
            s = tls_wrap(server, s)
            s.sendall(request("GET", "/huge.bin"))
            stalled.append(s)  # and not read, for now
        for _ in range(5):
            assert fetch(server, "/hello.txt").body == HELLO
            assert fetch(server, "/big.bin").body == BIG
        # A stalled download resumes where it stopped: its first 4 MiB are byte-exact.
        s = stalled[0]
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(65536)
        head, _, body = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        want = (4 << 20)
        while len(body) < want:
            chunk = s.recv(1 << 20)
            assert chunk, "stalled download was closed by the server"
            body += chunk
        with open(src, "rb") as f:
            assert body[:want] == f.read(want)
    finally:
        for s in stalled:
            s.close()


def test_sigterm_drain_is_bounded_by_a_stalled_client(make_server, docroot, random_file):
    """A client that stops reading cannot keep a stopping server alive past --drain-timeout."""
    os.link(random_file(16 << 20)[0], docroot / "huge.bin")
    server = make_server(docroot, args=["--drain-timeout", "1"])
    s = stalled_download(server, "/huge.bin")
    try:
        rc = server.stop(signal.SIGTERM, timeout=15)
        assert rc == 0, server.stderr_text()[-3000:]
    finally:
        s.close()


def test_300_connections_open_at_once(server):
    """Hundreds of simultaneous connections, all opened before any request is sent."""
    conns = []
    try:
        for _ in range(300):
            conns.append(Conn(server, timeout=20))
        for i, c in enumerate(conns):
            c.send(request("GET", FILES[i % 3][0]))
        for i, c in enumerate(conns):
            r = c.read()
            assert r.status == 200 and r.body == FILES[i % 3][1], i
    finally:
        for c in conns:
            c.close()


def test_many_connections_send_large_heads_at_once(make_server, docroot):
    """300 connections on one worker each send a 14 KiB head at the same moment: more than the
    receive buffers on hand (io_uring: ENOBUFS must re-arm, never drop bytes or connections)."""
    server = make_server(docroot, args=["-t", "1"])
    req = request("GET", "/hello.txt", headers=[f"X-Fill-{i}: " + "v" * 1000 for i in range(14)])
    conns = []
    try:
        for _ in range(300):
            conns.append(Conn(server, timeout=20))
        for c in conns:
            c.send(req)
        for i, c in enumerate(conns):
            r = c.read()
            assert r.status == 200 and r.body == HELLO, i
    finally:
        for c in conns:
            c.close()


def test_concurrent_pipelined_clients_with_large_files(server):
    def one(i):
        with Conn(server, timeout=30) as c:
            reqs = [FILES[(i + j) % 4] for j in range(12)]
            c.send(b"".join(request("GET", p) for p, _ in reqs))
            for j, (p, want) in enumerate(reqs):
                r = c.read()
                assert r.status == 200 and r.body == want, (i, j, p)
        return i

    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        assert sorted(pool.map(one, range(20))) == list(range(20))
