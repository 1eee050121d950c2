"""How HTTP/2 responses leave the engines (issue 18, 64 MiB over h2c): a plan of alternating
9-byte DATA frame headers and 16 KiB file pieces. The io_uring engine reads a plan's file bytes
into a splice pipe (io-wq), composes them with their headers into the worker's scratch pipe and
sends that by one splice (engine/sendplan.c sendplan_recompose, sendplan_drain; without a
scratch pipe, frame by frame: sendplan_pipe); the epoll engine composes straight from the file
(sendplan_composed), or corks its sendfiles. Every test reads raw frames and checks each byte of
each body, so a byte sent twice, dropped or out of order breaks the framing or the comparison."""
import random
import re
import socket
import struct
import subprocess

import pytest

from conftest import HELLO, fetch
from test_tls_io import slow  # noqa: F401 (fixture: a file whose reads wait for the test)
from test_h2 import (DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, RST_STREAM, SETTINGS,
                     WINDOW_UPDATE, ACK, frame, get_block, hpack_str, need, open_h2)

SIZE = 6 << 20
FILE = random.Random(18).randbytes(SIZE)
CANCEL = 0x8


def big_window(server):
    """An h2c connection whose windows never stall the server (as h2load's and curl's)."""
    s = open_h2(server, settings=struct.pack(">HI", 4, (1 << 31) - 1))
    s.sendall(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 31) - 1 - 65535)))
    return s


def get(sid, path, range_=None):
    blk = get_block(path)
    if range_:
        blk += b"\x00" + hpack_str(b"range") + hpack_str(range_.encode())
    return frame(HEADERS, END_HEADERS | END_STREAM, sid, blk)


class Reader:
    """Frames from a socket, parsed as they come: DATA payloads by stream, ended streams."""

    def __init__(self, sock):
        self.s = sock
        self.buf = b""
        self.bodies = {}
        self.ended = set()
        self.seen = []  # (type, flags, stream) of every frame

    def pump(self, limit=1 << 20):
        chunk = self.s.recv(limit)
        assert chunk, "closed early"
        self.buf += chunk
        while len(self.buf) >= 9 and len(self.buf) >= 9 + int.from_bytes(self.buf[:3], "big"):
            n = int.from_bytes(self.buf[:3], "big")
            ftype, flags = self.buf[3], self.buf[4]
            sid = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
            payload = self.buf[9:9 + n]
            self.buf = self.buf[9 + n:]
            self.seen.append((ftype, flags, sid))
            assert ftype != GOAWAY, payload
            if ftype == SETTINGS and not flags & ACK:
                self.s.sendall(frame(SETTINGS, ACK, 0))
            if ftype == DATA:
                self.bodies.setdefault(sid, bytearray()).extend(payload)
            if ftype in (DATA, HEADERS) and flags & END_STREAM:
                self.ended.add(sid)
        return len(chunk)

    def until_ended(self, sid, timeout=60):
        self.s.settimeout(timeout)
        while sid not in self.ended:
            self.pump()
        return bytes(self.bodies.get(sid, b""))


def put_file(docroot, name="six.bin"):
    (docroot / name).write_bytes(FILE)
    return "/" + name


def test_range_across_pipe_boundaries_byte_exact(make_server, docroot):
    """A range starting off a page boundary and longer than several 1 MiB pipes and 304 KiB
    plans: each fill is short somewhere (an unaligned range needs one page more than a pipe
    holds), and the frames around the fills must carry the file in order."""
    path = put_file(docroot)
    srv = make_server(docroot)
    start, end = 4093, 4093 + (3 << 20) + 12345
    s = big_window(srv)
    s.sendall(get(1, path.encode(), f"bytes={start}-{end}") + get(3, path.encode()))
    r = Reader(s)
    assert r.until_ended(1) == FILE[start:end + 1]
    assert r.until_ended(3) == FILE
    s.close()


def test_multipart_ranges_of_large_parts_byte_exact(make_server, docroot):
    """Several large ranges in one response: file runs that do not continue each other, with
    part headers between them (each run is a fill of its own)."""
    need("curl")
    path = put_file(docroot)
    srv = make_server(docroot)
    ranges = [(1, 300000), (700001, 1900000), (4 << 20, (5 << 20) + 77)]
    spec = ",".join(f"{a}-{b}" for a, b in ranges)
    out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-D", "/dev/stderr", "-r",
                          spec, "-o", "-", srv.url(path)], capture_output=True, timeout=60,
                         check=True)
    head = out.stderr.decode()
    assert head.startswith("HTTP/2 206"), head
    boundary = re.search(r"boundary=(\S+)", head).group(1).encode()
    parts = out.stdout.split(b"--" + boundary)[1:-1]
    assert len(parts) == len(ranges)
    for part, (a, b) in zip(parts, ranges):
        body = part.split(b"\r\n\r\n", 1)[1][:-2]  # the CRLF before the next delimiter
        assert body == FILE[a:b + 1], (a, b)


@pytest.mark.parametrize("pipes", [1, 2])
def test_stalled_reader_loses_its_pipe_and_resumes_byte_exact(make_server, docroot, pipes):
    """Few pipes for the worker: a client that stops reading mid-download is parked with bytes
    in its pipe; a second download takes that pipe (its bytes dropped); when the first client
    reads again its response resumes from the file at exactly the byte the socket last took.
    With one pipe the io_uring engine sends raw fills (no scratch pipe fits the bound), with
    two the pipe taken holds composed frames (headers and file bytes) and the second download
    composes through the scratch pipe."""
    path = put_file(docroot)
    srv = make_server(docroot, args=["-t", "1", "--splice-pipes", str(pipes)])
    a = socket.socket()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    a.connect(srv.addr)
    a.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" +
              frame(SETTINGS, 0, 0, struct.pack(">HI", 4, (1 << 31) - 1)) +
              frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 31) - 1 - 65535)) +
              get(1, path.encode()))
    ra = Reader(a)
    a.settimeout(30)
    while sum(len(b) for b in ra.bodies.values()) < 100000:
        ra.pump(4096)
    # a stops reading; b downloads the whole file twice on one connection
    b = big_window(srv)
    b.sendall(get(1, path.encode()) + get(3, path.encode(), "bytes=1-"))
    rb = Reader(b)
    assert rb.until_ended(1) == FILE
    assert rb.until_ended(3) == FILE[1:]
    b.close()
    assert ra.until_ended(1) == FILE
    a.close()


def test_client_resets_mid_frame_and_the_connection_goes_on(make_server, docroot):
    """The client resets a large download after reading part of a frame; frames already
    queued may still come, but the next stream's response on the same connection is whole and
    the framing never breaks (a misplaced byte would desynchronise every frame after it)."""
    path = put_file(docroot)
    srv = make_server(docroot)
    s = big_window(srv)
    s.sendall(get(1, path.encode()))
    r = Reader(s)
    s.settimeout(30)
    got = 0
    while got < 200000 + 4567:
        got += r.pump(4567)
    s.sendall(frame(RST_STREAM, 0, 1, struct.pack(">I", CANCEL)) +
              get(3, path.encode(), "bytes=12345-") + get(5, b"/hello.txt"))
    assert r.until_ended(3) == FILE[12345:]
    from conftest import HELLO
    assert r.until_ended(5) == HELLO
    assert 1 not in r.ended or len(r.bodies[1]) == SIZE
    assert not [f for f in r.seen if f[0] == RST_STREAM and f[2] != 1]
    s.close()


def test_loop_serves_others_while_an_h2c_fill_reads_a_cold_file(make_server, docroot, slow,
                                                                 engine):
    """io_uring: a plan's file bytes are read into its pipe by io-wq, never on the loop (the
    frames are composed from the pipe afterwards), so while slowfs holds that read the same
    worker keeps answering. The epoll engine reads files on its loop by design: skipped."""
    if engine == "epoll":
        pytest.skip("the epoll engine splices and sendfiles on its loop (epoll.c)")
    srv = make_server(docroot, args=["-t", "1", "--compress", "off"])
    s = big_window(srv)
    s.sendall(get(1, b"/cold/slow.bin"))
    r = Reader(s)
    try:
        assert slow.wait_read(), "the server never read the file"
        for _ in range(3):
            got = fetch(srv, "/hello.txt")
            assert got.status == 200 and got.body == HELLO
    finally:
        slow.release()
    assert r.until_ended(1) == slow.data
    s.close()
