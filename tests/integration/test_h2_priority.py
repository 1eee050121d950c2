"""RFC 9218 priorities over HTTP/2 (issue 30), on both engines, over TLS (ALPN h2): a page whose
stylesheets (urgency 0..2, the `priority` request field) arrive before its images (urgency 5)
although the images were asked for first, and a PRIORITY_UPDATE frame that moves one response
ahead of the others. Python's h2 is the client; its windows are opened wide, so that what the
server sends first is its scheduler's choice and not flow control's."""
import os
import socket
import ssl
import struct
import time

import pytest

h2 = pytest.importorskip("h2", reason="h2 is not installed (tests/requirements.txt)")
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402
import h2.settings  # noqa: E402

pytestmark = pytest.mark.schemes("https")

ASSET = 200 * 1024  # each stylesheet and image: many frames, so the order is the scheduler's
IMAGES, STYLESHEETS = 30, 10
PRIORITY_UPDATE = 0x10


@pytest.fixture
def page(make_server, docroot):
    """index.html and its 40 assets, all ASSET bytes of distinct content."""
    for i in range(IMAGES):
        (docroot / f"img{i}.png").write_bytes(os.urandom(ASSET))
    for i in range(STYLESHEETS):
        (docroot / f"style{i}.css").write_bytes(b"/*" + os.urandom(ASSET - 4).hex()[:ASSET - 4]
                                                .encode() + b"*/")
    return make_server(docroot)


class Client:
    """One h2 connection over TLS that records the order in which streams end."""

    def __init__(self, server):
        sock = socket.create_connection(server.addr, timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ctx = ssl.create_default_context(cafile=str(server.ca))
        ctx.set_alpn_protocols(["h2"])
        self.sock = ctx.wrap_socket(sock, server_hostname="localhost")
        assert self.sock.selected_alpn_protocol() == "h2"
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window(1 << 30)
        self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
        self.sock.sendall(self.conn.data_to_send())
        self.ended = []      # stream ids in the order their last byte came
        self.order = []      # stream ids in the order their DATA came, one a frame
        self.bytes = {}      # stream id -> body bytes so far
        self.status = {}

    def request(self, path, priority=None, end=True):
        sid = self.conn.get_next_available_stream_id()
        fields = [(":method", "GET"), (":scheme", "https"), (":authority", "localhost"),
                  (":path", path)]
        if priority:
            fields.append(("priority", priority))
        self.conn.send_headers(sid, fields, end_stream=end)
        self.bytes[sid] = 0
        return sid

    def send(self, raw=b""):
        self.sock.sendall(self.conn.data_to_send() + raw)

    def pump(self, sids):
        deadline = time.monotonic() + 60
        while not all(s in self.ended for s in sids):
            assert time.monotonic() < deadline, "timed out"
            data = self.sock.recv(1 << 20)
            assert data, "the server closed the connection"
            for ev in self.conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    self.status[ev.stream_id] = int(dict(ev.headers)[b":status"])
                elif isinstance(ev, h2.events.DataReceived):
                    self.bytes[ev.stream_id] += len(ev.data)
                    if ev.data:
                        self.order.append(ev.stream_id)
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    self.ended.append(ev.stream_id)
                elif isinstance(ev, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                    pytest.fail(f"unexpected {ev}")
            data = self.conn.data_to_send()
            if data:
                self.sock.sendall(data)

    def close(self):
        self.sock.close()


def test_stylesheets_before_images_asked_first(page):
    """The browser asks for the images (u=5) before the stylesheets (u=0..2), all in one
    flight: every stylesheet ends before any image does, each byte-complete."""
    c = Client(page)
    try:
        html = c.request("/index.html", "u=0")
        c.send()
        c.pump([html])
        images = [c.request(f"/img{i}.png", "u=5") for i in range(IMAGES)]
        css = [c.request(f"/style{i}.css", f"u={i % 3}") for i in range(STYLESHEETS)]
        c.send()
        c.pump(images + css)
        assert all(c.status[s] == 200 and c.bytes[s] == ASSET for s in images + css)
        order = [s for s in c.ended if s in images or s in css]
        last_css = max(order.index(s) for s in css)
        first_image = min(order.index(s) for s in images)
        assert last_css < first_image, f"stream end order {order}"
    finally:
        c.close()
    assert page.alive()


def test_priority_update_moves_a_response_ahead(page):
    """Ten images of the same urgency, then a PRIORITY_UPDATE (RFC 9218 7.1) raising the last
    one to urgency 0 in the same flight: it ends first."""
    c = Client(page)
    try:
        sids = [c.request(f"/img{i}.png", "u=4") for i in range(10)]
        value = b"u=0"
        update = struct.pack(">I", sids[-1]) + value
        frame = struct.pack(">I", len(update))[1:] + bytes([PRIORITY_UPDATE, 0]) + \
            struct.pack(">I", 0) + update
        c.send(frame)
        c.pump(sids)
        assert c.ended[0] == sids[-1], f"stream end order {c.ended}"
        assert all(c.bytes[s] == ASSET for s in sids)
    finally:
        c.close()
    assert page.alive()


def test_non_incremental_one_after_another_ahead_of_incremental_ones(page):
    """As over HTTP/3 (test_h3_sched.py): two incremental responses (u=3, i) asked for first,
    then four non-incremental ones of the same urgency (no priority field): once the first of
    those has begun, the four come one whole after another in the order asked, with no
    incremental DATA between them."""
    c = Client(page)
    try:
        inc = [c.request(f"/img{i}.png", "u=3, i") for i in range(2)]
        non = [c.request(f"/style{i}.css") for i in range(4)]
        c.send()
        c.pump(inc + non)
        assert all(c.bytes[s] == ASSET for s in inc + non)
        start = c.order.index(non[0])
        end = len(c.order) - 1 - c.order[::-1].index(non[-1])
        between = c.order[start:end + 1]
        runs = [s for i, s in enumerate(between) if i == 0 or between[i - 1] != s]
        assert not set(between) & set(inc) and runs == non, runs
    finally:
        c.close()
    assert page.alive()


def test_non_incremental_in_the_order_asked_whatever_order_they_ended(page):
    """Four non-incremental requests opened in order (HEADERS), their ends (empty DATA with
    END_STREAM) then sent together in the reverse order: the responses come in stream-ID order,
    the order the client asked in (RFC 9218 10), each whole before the next. The build before
    issue 42 sent them in the order their ends were read."""
    c = Client(page)
    try:
        sids = [c.request(f"/style{i}.css", end=False) for i in range(4)]
        c.send()
        for sid in reversed(sids):
            c.conn.end_stream(sid)
        c.send()
        c.pump(sids)
        assert all(c.bytes[s] == ASSET for s in sids)
        runs = [s for i, s in enumerate(c.order) if i == 0 or c.order[i - 1] != s]
        assert runs == sids, runs
    finally:
        c.close()
    assert page.alive()


def test_a_stream_waiting_for_its_window_comes_back_to_its_place(page):
    """Stream windows of 16 KiB (SETTINGS_INITIAL_WINDOW_SIZE; the connection's stays wide):
    three non-incremental responses each send their first 16 KiB and wait, none holding the
    others. The client then opens the third stream's window and the first's, in that order in
    one flight: the first's DATA come before the third's (a stream whose window opens goes back
    to its place in the order asked, RFC 9218 10, not behind the others). The build before
    issue 42 put each at the back as its window opened: the third first."""
    c = Client(page)
    try:
        c.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16384})
        sids = [c.request(f"/style{i}.css") for i in range(3)]
        c.send()
        deadline = time.monotonic() + 30

        def read_until(done):
            while not done():
                assert time.monotonic() < deadline, "timed out"
                data = c.sock.recv(1 << 20)
                assert data, "the server closed the connection"
                for ev in c.conn.receive_data(data):
                    if isinstance(ev, h2.events.DataReceived) and ev.data:
                        c.bytes[ev.stream_id] += len(ev.data)
                        c.order.append(ev.stream_id)
                    elif isinstance(ev, h2.events.StreamEnded):
                        c.ended.append(ev.stream_id)
                    elif isinstance(ev, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                        pytest.fail(f"unexpected {ev}")
                c.send()  # SETTINGS ACKs and the like; no WINDOW_UPDATE is sent for DATA
        read_until(lambda: all(c.bytes[s] == 16384 for s in sids))
        before = len(c.order)
        c.conn.increment_flow_control_window(ASSET, stream_id=sids[2])
        c.conn.increment_flow_control_window(ASSET, stream_id=sids[0])
        c.send()
        read_until(lambda: sids[0] in c.ended and sids[2] in c.ended)
        after = c.order[before:]
        runs = [s for i, s in enumerate(after) if i == 0 or after[i - 1] != s]
        assert runs == [sids[0], sids[2]], runs
        c.conn.increment_flow_control_window(ASSET, stream_id=sids[1])
        c.send()
        read_until(lambda: sids[1] in c.ended)
        assert all(c.bytes[s] == ASSET for s in sids)
    finally:
        c.close()
    assert page.alive()
