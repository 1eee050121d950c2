"""HTTP/2 memory and deadlines for requests that do not end (issue 35 items 2 and 6, and its
HTTP/2 smaller points): the heads of unfinished streams and half-read frames are counted with
HTTP/1's partial heads under --head-memory, oldest holder reclaimed first; a request body that
sends nothing for --body-timeout is answered 408 however many PINGs keep the connection busy;
PRIORITY_UPDATE naming stream 0 is a connection error; a client's GOAWAY lets the streams it
opened finish. Frames by hand over h2c on a loopback port, the real binary, both engines."""
import socket
import struct
import time

import hpack

from conftest import BIG, wait_for
from h3client import qpack_int  # the prefix integer of RFC 7541 5.1 too
from test_faults import asan_build
from test_h2 import (ACK, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, PING, PROTOCOL_ERROR,
                     SETTINGS, WINDOW_UPDATE, expect_close, frame, get_block, goaway_code,
                     open_h2, read_frames, rss_kib, still_serving)

PRIORITY_UPDATE = 0x10


def literal_indexed(name, value):
    """A literal field with incremental indexing, new name, no Huffman (RFC 7541 6.2.1)."""
    return b"\x40" + qpack_int(len(name), 7) + name + qpack_int(len(value), 7) + value


def post_block(path=b"/hello.txt"):
    blk = b"\x83\x86"  # :method POST, :scheme http
    blk += b"\x04" + bytes([len(path)]) + path
    blk += b"\x01\x09localhost"
    return blk


def split_frames(buf):
    """The whole frames at the start of buf: ([(type, flags, id, payload)], the rest)."""
    out = []
    while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
        n = int.from_bytes(buf[:3], "big")
        out.append((buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n]))
        buf = buf[9 + n:]
    return out, buf


def closed_by_server(s):
    """Whether the server has closed s, by what is already there (no wait: a slow check of many
    sockets would outlast --header-timeout and see its closes instead)."""
    s.setblocking(False)
    try:
        while True:
            if not s.recv(65536):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


# ---- item 2 and 6: memory held for unfinished requests --------------------------------------

CONNS = 60
STREAMS = 100  # below SETTINGS_MAX_CONCURRENT_STREAMS (128)
BIG_ENTRY = b"b" * 3990  # with its name and 32 bytes of overhead, 4,000 bytes of the table
REFS = 3  # times each head names it: ~12 KB of head from a few bytes


def test_unfinished_streams_are_bounded_by_head_memory(make_server, docroot):
    """The adversarial pass's load: a 4,000-byte dynamic-table entry named again in every head,
    100 streams per connection that never send END_STREAM, 60 connections, PINGs every two
    seconds. Each head was copied and kept (~12 KB a stream, 1.2 MB a connection: 70+ MB on one
    worker); counted under --head-memory 4M, the connections that have held longest are closed
    (logged) and the worker stays within a few MB of it, the newest still open."""
    srv = make_server(docroot, args=["-t", "1", "--head-memory", "4M"])
    still_serving(srv)
    base = rss_kib(srv)
    socks = []
    first = literal_indexed(b"x-big", BIG_ENTRY)
    peak = base
    try:
        for _ in range(CONNS):
            s = open_h2(srv)
            payload = b""
            for i in range(STREAMS):
                blk = post_block() + (first if i == 0 else b"") + b"\xbe" * REFS
                payload += frame(HEADERS, END_HEADERS, 2 * i + 1, blk)
            try:
                s.sendall(payload)
            except OSError:
                pass
            socks.append(s)
            peak = max(peak, rss_kib(srv))
        deadline = time.monotonic() + 6  # the client keeps them alive with PINGs
        while time.monotonic() < deadline:
            for s in socks:
                try:
                    s.sendall(frame(PING, 0, 0, b"12345678"))
                except OSError:
                    pass
            time.sleep(2)
            peak = max(peak, rss_kib(srv))
        assert srv.alive()
        growth = peak - base
        if not asan_build():  # its quarantine keeps what was freed: RSS says nothing there
            assert growth < 20 << 10, f"RSS grew {growth} KiB for {CONNS} x {STREAMS} streams"
        assert "request heads hold" in srv.stderr_text(), srv.stderr_text()[-2000:]
        assert closed_by_server(socks[0]), "the oldest holder is still open"
        assert not closed_by_server(socks[-1]), "the newest holder was closed"
        still_serving(srv)
    finally:
        for s in socks:
            s.close()


def test_one_budget_for_both_protocols_oldest_first(make_server, docroot):
    """One ledger: 40 HTTP/1 clients holding partial heads (a 32 KiB buffer each) come first,
    then HTTP/2 clients whose unfinished streams need the room: the HTTP/1 ones, holding
    longest, are closed for them, as they would be for newer HTTP/1 heads. With a count of
    HTTP/2's own, the HTTP/1 heads stayed and the worker held both budgets."""
    # --header-timeout far off: only the ledger may close the HTTP/1 heads here
    srv = make_server(docroot, args=["-t", "1", "--head-memory", "4M", "--header-timeout", "120"])
    h1 = []
    h2 = []
    first = literal_indexed(b"x-big", BIG_ENTRY)
    try:
        for _ in range(40):
            s = socket.create_connection(srv.addr, timeout=5)
            s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 8000)
            h1.append(s)
        time.sleep(0.5)
        assert not any(closed_by_server(s) for s in h1[-5:])
        for _ in range(6):
            s = open_h2(srv)
            s.sendall(b"".join(frame(HEADERS, END_HEADERS, 2 * i + 1, post_block() +
                                     (first if i == 0 else b"") + b"\xbe" * REFS)
                               for i in range(STREAMS)))
            h2.append(s)
        wait_for(lambda: all(closed_by_server(s) for s in h1))
        assert srv.alive()
        assert all(closed_by_server(s) for s in h1), \
            f"{sum(map(closed_by_server, h1))} of {len(h1)} HTTP/1 heads closed"
        assert not closed_by_server(h2[-1]), "the newest HTTP/2 holder was closed"
        still_serving(srv)
    finally:
        for s in h1 + h2:
            s.close()


def test_half_read_frames_are_counted(make_server, docroot):
    """Item 6: a connection that sends the first half of a frame (or opens a header block and
    stops before its CONTINUATION) holds the session's buffer, ~85 KB: 200 of them in 4M of
    --head-memory close the oldest, where they used to hold 17 MB outside it."""
    srv = make_server(docroot, args=["-t", "1", "--head-memory", "4M"])
    still_serving(srv)
    base = rss_kib(srv)
    socks = []
    try:
        for i in range(200):
            s = open_h2(srv)
            if i % 2:  # a HEADERS frame cut in the middle
                f = frame(HEADERS, END_HEADERS | END_STREAM, 1, get_block(b"/hello.txt"))
                s.sendall(f[:12])
            else:  # a header block waiting for its CONTINUATION
                s.sendall(frame(HEADERS, END_STREAM, 1, get_block(b"/hello.txt")))
            socks.append(s)
        assert wait_for(lambda: "request heads hold" in srv.stderr_text()), \
            srv.stderr_text()[-2000:]
        assert srv.alive()
        if not asan_build():
            assert rss_kib(srv) - base < 16 << 10
        still_serving(srv)
    finally:
        for s in socks:
            s.close()


# ---- item 2: the body deadline ------------------------------------------------------------

def response_status(frames, stream):
    dec = hpack.Decoder()
    status = None
    for ftype, flags, sid, payload in frames:
        if ftype == HEADERS:
            fields = dict(dec.decode(payload))
            if sid == stream:
                status = fields.get(":status")
    return status


def test_body_timeout_despite_pings_and_other_streams(make_server, docroot):
    """A POST whose body stops after 3 bytes is answered 408 once --body-timeout (2 s) passes
    without DATA on it, while the client PINGs every half second and another stream is served
    meanwhile; the old build kept it until the 60 s stall timer, refreshed by every PING."""
    srv = make_server(docroot, args=["--body-timeout", "2"])
    s = open_h2(srv)
    s.sendall(frame(HEADERS, END_HEADERS, 1, post_block()) + frame(DATA, 0, 1, b"abc"))
    frames = []
    buf = b""
    s.settimeout(0.5)
    deadline = time.monotonic() + 8
    sent_get = False
    last_ping = 0
    # Until both are answered, in either order: a server the machine stalls past the deadline
    # may write the 408 before the GET's 200, and a read may end between them.
    while time.monotonic() < deadline and None in (response_status(frames, 1),
                                                   response_status(frames, 3)):
        if time.monotonic() - last_ping >= 0.5:
            s.sendall(frame(PING, 0, 0, b"pingping"))
            last_ping = time.monotonic()
        if not sent_get and time.monotonic() > deadline - 7:
            s.sendall(frame(HEADERS, END_HEADERS | END_STREAM, 3, get_block(b"/hello.txt")))
            sent_get = True
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        new, buf = split_frames(buf + chunk)
        frames += new
        if any(f[0] == SETTINGS and not f[1] & ACK for f in new):
            s.sendall(frame(SETTINGS, ACK, 0))
    assert response_status(frames, 1) == "408", [(f[0], f[1], f[2]) for f in frames if f[0] != PING]
    assert response_status(frames, 3) == "200"
    assert srv.alive()
    s.close()
    still_serving(srv)


# ---- smaller points -----------------------------------------------------------------------

def test_priority_update_for_stream_zero_is_a_connection_error(server):
    """RFC 9218 7.1: a PRIORITY_UPDATE whose Prioritized Stream ID is 0 is a connection error of
    type PROTOCOL_ERROR (it used to be ignored)."""
    s = open_h2(server)
    s.sendall(frame(PRIORITY_UPDATE, 0, 0, struct.pack(">I", 0) + b"u=1"))
    frames, _ = read_frames(s, timeout=5)
    assert goaway_code(frames) == PROTOCOL_ERROR
    expect_close(s)
    s.close()
    still_serving(server)


def test_client_goaway_lets_open_streams_finish(server):
    """RFC 9113 6.8: the client's GOAWAY (and its half-close after it, as clients that are done
    do) ends the connection only once the streams it opened are answered: a 1 MiB download
    opened before it completes (the client's windows are wide open: it sends nothing more)."""
    s = open_h2(server, settings=struct.pack(">HI", 4, 0x7FFFFFFF))  # INITIAL_WINDOW_SIZE
    s.sendall(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF - 65535)) +
              frame(HEADERS, END_HEADERS | END_STREAM, 1, get_block(b"/big.bin")) +
              frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0)))
    s.shutdown(socket.SHUT_WR)
    body = bytearray()
    buf = b""
    ended = False
    s.settimeout(10)
    while not ended:
        try:
            chunk = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not chunk:
            break
        new, buf = split_frames(buf + chunk)
        for ftype, flags, sid, payload in new:
            if ftype == DATA and sid == 1:
                body += payload
                ended = ended or bool(flags & END_STREAM)
    s.close()
    assert len(body) == len(BIG) and bytes(body) == BIG, f"{len(body)} of {len(BIG)} bytes"
    still_serving(server)
