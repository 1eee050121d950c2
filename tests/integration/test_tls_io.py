"""TLS bodies read off the loop (issue 14): a file sent over TLS is read by the engine (io_uring
READ; epoll preadv2(RWF_NOWAIT), then a reader thread for a cold file) while the worker goes on
serving others. A file system whose reads wait until the test lets them go (slowfs.py, FUSE)
makes "the read is outstanding" deterministic: with the read on the loop, as before, the other
client's request waited behind it. Also a cold 64 MiB file (dropped from the page cache) byte-
exact, and connections reset or drained while their read is outstanding."""
import contextlib
import hashlib
import os
import signal
import socket
import struct
import threading

import pytest

from conftest import HELLO, StrictReader, connect, fetch, request, wait_for
from slowfs import SlowFS

pytestmark = pytest.mark.schemes("https")

SLOW_SIZE = 8 << 20  # larger than what the file cache keeps in memory: sent as a file range


@pytest.fixture
def slow(docroot):
    """docroot/cold/slow.bin on slowfs (reads held until .release()); skipped without FUSE."""
    data = os.urandom(SLOW_SIZE)
    try:
        fs = SlowFS(docroot / "cold", "slow.bin", data)
    except OSError as e:
        pytest.skip(f"cannot mount a FUSE file system here: {e}")
    try:
        yield fs
    finally:
        fs.unmount()


def one_worker(make_server, docroot, *args):
    # One worker: the client that must keep getting answers shares the downloader's loop.
    server = make_server(docroot, args=["-t", "1", "--compress", "off", *args])
    # In clear text the epoll engine's sendfile waits for slowfs on the loop: not what is tested.
    assert server.scheme == "https"
    return server


def download(server, path, timeout=60):
    with contextlib.closing(connect(server, timeout=timeout)) as s:
        s.sendall(request("GET", path, close=True))
        return StrictReader(s, timeout=timeout).read("GET")


def test_loop_serves_others_while_a_tls_file_read_waits(make_server, docroot, slow):
    server = one_worker(make_server, docroot)
    result = {}
    t = threading.Thread(target=lambda: result.update(r=download(server, "/cold/slow.bin")))
    t.start()
    try:
        assert slow.wait_read(), "the server never read the file"
        # The read is outstanding (slowfs holds it): the same worker still answers, over TLS
        # and in clear text. With the read on the loop this request waited until release().
        for _ in range(3):
            r = fetch(server, "/hello.txt")
            assert r.status == 200 and r.body == HELLO
        assert server.alive()
    finally:
        slow.release()
        t.join(timeout=60)
    r = result["r"]
    assert r.status == 200 and len(r.body) == SLOW_SIZE
    assert hashlib.sha256(r.body).digest() == hashlib.sha256(slow.data).digest()


def reset(sock):
    """Closes sock with a TCP reset (SO_LINGER 0) instead of a FIN."""
    raw = socket.socket(fileno=os.dup(sock.fileno()))
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raw.close()
    sock.close()


def test_reset_while_a_tls_file_read_waits(make_server, docroot, slow):
    """The client resets while its body's read is outstanding: the connection closes only once
    the read ended (the read's buffer is the connection's), and the worker goes on."""
    server = one_worker(make_server, docroot)
    socks = []
    for _ in range(3):
        s = connect(server, timeout=10)
        s.sendall(request("GET", "/cold/slow.bin"))
        socks.append(s)
    assert slow.wait_read()
    for s in socks:
        reset(s)
    r = fetch(server, "/hello.txt")  # served meanwhile, after the resets were seen
    assert r.status == 200 and r.body == HELLO
    slow.release()
    for _ in range(2):  # the reads end into closed connections; everything else still works
        r = download(server, "/cold/slow.bin")
        assert r.status == 200 and r.body == slow.data
    assert server.stop() == 0, server.stderr_text()[-3000:]
    assert not server.sanitizer_reports()


def test_drain_waits_for_an_outstanding_tls_file_read(make_server, docroot, slow):
    """SIGTERM while a body's read is outstanding: the response finishes after the read, then
    the process exits 0."""
    server = one_worker(make_server, docroot)
    result = {}
    t = threading.Thread(target=lambda: result.update(r=download(server, "/cold/slow.bin")))
    t.start()
    assert slow.wait_read()
    server.proc.send_signal(signal.SIGTERM)
    slow.release()
    t.join(timeout=60)
    assert result["r"].status == 200 and result["r"].body == slow.data
    assert server.proc.wait(timeout=15) == 0


def drop_from_page_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # only clean pages can be dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_cold_64_mib_byte_exact_while_others_get_answers(make_server, docroot, random_file):
    src, digest = random_file(64 << 20)
    os.link(src, docroot / "cold.bin")
    drop_from_page_cache(docroot / "cold.bin")
    server = one_worker(make_server, docroot)
    stop, answers, errors = threading.Event(), [0], []

    def others():
        while not stop.is_set():
            try:
                r = fetch(server, "/hello.txt")
                if r.status != 200 or r.body != HELLO:
                    errors.append(r.status)
                answers[0] += 1
            except OSError as e:
                errors.append(repr(e))

    t = threading.Thread(target=others)
    t.start()
    try:
        h = hashlib.sha256()
        with contextlib.closing(connect(server, timeout=60)) as s:
            s.sendall(request("GET", "/cold.bin", close=True))
            got = b""
            while b"\r\n\r\n" not in got:
                got += s.recv(65536)
            head, _, body = got.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head
            h.update(body)
            n = len(body)
            while n < 64 << 20:
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                h.update(chunk)
                n += len(chunk)
    finally:
        stop.set()
        t.join(timeout=30)
    assert n == 64 << 20 and h.hexdigest() == digest
    assert not errors, errors[:5]
    assert wait_for(lambda: answers[0] > 0)
