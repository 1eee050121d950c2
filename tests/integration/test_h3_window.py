"""What one HTTP/3 stream may have in flight (issue 42): the congestion window's, not a fixed
bound. A stream's bytes written into packets and not yet acknowledged were held to 256 KiB
(with the bytes staged and not yet written), which caps one download at 256 KiB a round trip
whatever the path: 52 Mbit/s at 40 ms. Measured without a clock: a client that stops
acknowledging sees, from then on, only what the server may have in flight unacknowledged."""

import collections
import socket
import time

import pytest

from aioquic.h3.connection import H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import HandshakeCompleted
from h3client import configuration

pytestmark = pytest.mark.schemes("https")

BIG = 32 << 20
OLD_BOUND = 256 << 10  # the old build's bytes a stream had unacknowledged, at most


@pytest.fixture(scope="module")
def bigroot(tmp_path_factory):
    root = tmp_path_factory.mktemp("h3window")
    with open(root / "big.bin", "wb") as f:
        f.truncate(BIG)  # a sparse file: zeros, read from the page cache
    return root


def _unacked_after_warmup(port, ca, warm, delay=0.05, quiet=1.0, limit=10.0):
    """Download /big.bin over one connection, acknowledging as usual until `warm` body bytes
    arrived (the congestion window has grown, nothing lost: the socket's buffer is large),
    then never send again: the body bytes that still arrive, what the server sends without
    an acknowledgement. Stops when nothing new came for `quiet` seconds (the server's probes
    repeat what it sent), or after `limit`."""
    cfg = configuration(ca)
    cfg.max_stream_data = cfg.max_data = 64 << 20  # flow control is not what stops the server
    quic = QuicConnection(configuration=cfg)
    h3 = H3Connection(quic)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        # root (make check): past rmem_max, so the burst the test waits for is not dropped
        sock.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    sock.connect(("127.0.0.1", port))
    addr = ("127.0.0.1", port)
    quic.connect(addr, now=time.monotonic())
    sid = None
    got, status, after, stopped = 0, None, None, None
    held = collections.deque()  # (when to send, datagram): the path's delay, one way
    end = time.monotonic() + 60
    while time.monotonic() < end:
        now = time.monotonic()
        if after is None:
            for data, _ in quic.datagrams_to_send(now=now):
                held.append((now + delay, data))
            while held and held[0][0] <= now:
                sock.send(held.popleft()[1])
            t = quic.get_timer()
            if t is not None and t <= now:
                quic.handle_timer(now=now)
                continue
            due = [x for x in (t, held[0][0] if held else None) if x is not None]
            wait = max(0.0005, min([0.05] + [x - now for x in due]))
        else:
            if now - last_new > quiet or now - stopped > limit:
                quic.close()  # so the server need not wait out its idle timeout to drain
                for data, _ in quic.datagrams_to_send(now=now):
                    sock.send(data)
                return status, got, after
            wait = 0.05
        sock.settimeout(wait)
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        quic.receive_datagram(data, addr, now=time.monotonic())
        ev = quic.next_event()
        while ev is not None:
            for e in h3.handle_event(ev):
                if isinstance(e, HeadersReceived):
                    status = dict(e.headers).get(b":status")
                elif isinstance(e, DataReceived):
                    got += len(e.data)
                    if after is not None:
                        after += len(e.data)
                        last_new = time.monotonic()
            if isinstance(ev, HandshakeCompleted) and sid is None:
                sid = quic.get_next_available_stream_id()
                h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                      (b":authority", b"localhost"), (b":path", b"/big.bin")],
                                end_stream=True)
            ev = quic.next_event()
        if after is None and got >= warm:
            after, stopped, last_new = 0, time.monotonic(), time.monotonic()
    raise AssertionError("the download did not reach %d bytes (got %d)" % (warm, got))


@pytest.mark.parametrize("cc", ["cubic", "bbr2"])
def test_one_stream_may_have_more_than_256k_in_flight(make_server, bigroot, cc):
    """Over a loss-free path of 100 ms (the client holds its datagrams) the server's window
    for one stream grows past the old fixed 256 KiB: after 8 MiB acknowledged, the client
    that stops acknowledging still receives more than 256 KiB of the body. The old build:
    at most 256 KiB, whatever the congestion window allowed (seen: 0-96 KiB). What is in
    flight at one instant varies with where the window's round stands (seen: 123 KiB to
    3.4 MiB, most over 400 KiB), so up to four connections are tried, each a new window;
    the old bound holds on every one. A bound remains: the file is not all sent."""
    srv = make_server(bigroot, args=("--quic-cc", cc))
    seen = []
    for _ in range(4):
        status, got, after = _unacked_after_warmup(srv.port, srv.ca, 8 << 20, delay=0.1)
        assert status == b"200"
        assert got < BIG, got
        seen.append(after)
        if after > OLD_BOUND + (64 << 10):
            break
    assert max(seen) > OLD_BOUND + (64 << 10), seen
