"""HTTP/3's frame and stream rules (RFC 9114 6, 7, 4.1; RFC 9204 4.2-4.4; RFC 9218) as src/http/h3
enforces them, each broken by a client that writes raw frames (aioquic with no HTTP/3 layer of
its own, h3client._Bare) and answered with the connection's or the stream's error code; what
must be tolerated (unknown and reserved frame and stream types) is; blocked field sections wait
for the encoder stream and a reset cancels them; priorities order the answers; GOAWAY on drain
names the first request not seen. One server per test, a connection per case."""

import asyncio
import signal

import pytest
from aioquic.buffer import encode_uint_var as vi
from pylsqpack import Decoder

from conftest import BIG, HELLO
from h3client import data_order, h3_bare, h3_frame, h3_frames, h3_raw, qpack_int, Response

pytestmark = pytest.mark.schemes("https")

SETTINGS = h3_frame(0x4, b"")
FIELDS = (b"\xd1"                      # :method GET (static 17)
          b"\xd7"                      # :scheme https (static 23)
          b"\x51\x0a/hello.txt"        # :path, name static 1, literal value
          b"\x50\x09localhost")        # :authority, name static 0, literal value
GET = h3_frame(0x1, b"\x00\x00" + FIELDS)  # Required Insert Count 0, Base 0
TRAILERS = h3_frame(0x1, b"\x00\x00\x23x-t\x01v")  # a literal name


def bare(srv, script, timeout=10):
    return h3_bare("127.0.0.1", srv.port, srv.ca, script, timeout)


def closed_with(srv, steps):
    """The error code of the CONNECTION_CLOSE a fresh connection gets after steps(client)."""
    async def script(c):
        await steps(c)
        await c.until(lambda: c.terminated is not None, 5)
        return c.terminated and c.terminated.error_code
    return bare(srv, script)


def status_of(c, sid):
    """The :status of what the server sent on request stream sid (its first HEADERS)."""
    frames = h3_frames(c.data.get(sid, b""))
    if not frames or frames[0][0] != 0x1:
        return None
    _, headers = Decoder(4096, 16).feed_header(sid, frames[0][1])
    return int(dict(headers)[b":status"])


async def answered(c, sid, timeout=5):
    await c.until(lambda: sid in c.ended, timeout)
    return status_of(c, sid)


def ctl(c, data, end=False):
    """The client's control stream: its type, then data."""
    return c.uni(b"\x00" + data, end)


def request(c, data, end=True):
    sid = c._quic.get_next_available_stream_id()
    c.send(sid, data, end)
    return sid


async def ping(c):
    """Until the server has acknowledged what was sent before (the PING goes in the same
    packet, or after it)."""
    done = asyncio.get_running_loop().create_future()
    uid = 29
    old = c.quic_event_received

    def hook(ev):
        from aioquic.quic.events import PingAcknowledged
        if isinstance(ev, PingAcknowledged) and ev.uid == uid and not done.done():
            done.set_result(True)
        old(ev)
    c.quic_event_received = hook
    c._quic.send_ping(uid)
    c.transmit()
    await asyncio.wait_for(done, 5)


# (what the client does, the code the connection closes with)
CONTROL_CASES = {
    "first_frame_not_settings": (lambda c: ctl(c, h3_frame(0x7, vi(0))), 0x10A),
    "second_settings": (lambda c: ctl(c, SETTINGS + SETTINGS), 0x105),
    "data_on_control": (lambda c: ctl(c, SETTINGS + h3_frame(0x0, b"x")), 0x105),
    "headers_on_control": (lambda c: ctl(c, SETTINGS + GET), 0x105),
    "http2_frame_on_control": (lambda c: ctl(c, SETTINGS + h3_frame(0x6, b"\0" * 8)), 0x105),
    "http2_setting": (lambda c: ctl(c, h3_frame(0x4, vi(0x2) + vi(0))), 0x109),
    "control_stream_closed": (lambda c: ctl(c, SETTINGS, end=True), 0x104),
    "second_control_stream": (lambda c: (ctl(c, SETTINGS), ctl(c, SETTINGS)), 0x103),
    "second_encoder_stream": (lambda c: (c.uni(b"\x02"), c.uni(b"\x02")), 0x103),
    "push_stream_from_client": (lambda c: c.uni(b"\x01\x00"), 0x103),
    "cancel_push_never_promised": (lambda c: ctl(c, SETTINGS + h3_frame(0x3, vi(0))), 0x108),
    "max_push_id_shrinks": (lambda c: ctl(c, SETTINGS + h3_frame(0xD, vi(10)) +
                                          h3_frame(0xD, vi(5))), 0x108),
    # 100 request streams allowed: stream 400 is the 101st
    "priority_update_past_the_limit": (lambda c: ctl(c, SETTINGS + h3_frame(0xF0700, vi(400) +
                                                                          b"u=1")), 0x108),
    "decoder_stream_increment": (lambda c: c.uni(b"\x03\x01"), 0x202),  # we insert nothing
}


def test_control_and_unidirectional_stream_rules(make_server, docroot):
    """Each way of breaking the control stream's or the unidirectional streams' rules ends the
    connection with its code (RFC 9114 6.2, 7.2, 8.1; RFC 9204 4.2, 4.4), and the server
    goes on answering."""
    srv = make_server(docroot)

    def steps_of(act):
        async def steps(c):
            act(c)
        return steps
    got = {name: closed_with(srv, steps_of(act)) for name, (act, _) in CONTROL_CASES.items()}
    assert got == {name: code for name, (_, code) in CONTROL_CASES.items()}

    async def fine(c):
        ctl(c, SETTINGS + h3_frame(0xD, vi(3)))  # MAX_PUSH_ID is accepted
        return await answered(c, request(c, GET))
    assert bare(srv, fine) == 200


REQUEST_CASES = {
    "data_before_headers": (h3_frame(0x0, b"x") + GET, 0x105),
    "data_after_trailers": (GET + h3_frame(0x0, b"ab") + TRAILERS + h3_frame(0x0, b"c"), 0x105),
    "headers_after_trailers": (GET + TRAILERS + TRAILERS, 0x105),
    "http2_frame": (GET + h3_frame(0x2, b""), 0x105),
    "settings_on_request": (h3_frame(0x4, b"") + GET, 0x105),
    "priority_update_on_request": (GET + h3_frame(0xF0700, vi(0) + b"u=1"), 0x105),
    "frame_cut_by_fin": (GET[:-3], 0x106),
}


def test_request_stream_rules(make_server, docroot):
    """Frames out of order or out of place on a request stream, and a frame cut short by the
    stream's end, end the connection (RFC 9114 4.1, 7.1, 7.2); a request with a body and
    trailers is answered."""
    srv = make_server(docroot)

    def steps_of(data):
        async def steps(c):
            ctl(c, SETTINGS)
            request(c, data)
        return steps
    got = {name: closed_with(srv, steps_of(data)) for name, (data, _) in REQUEST_CASES.items()}
    assert got == {name: code for name, (_, code) in REQUEST_CASES.items()}

    async def fine(c):
        ctl(c, SETTINGS)
        sid = request(c, GET + h3_frame(0x0, b"body") + TRAILERS)
        return await answered(c, sid), bytes(h3_frames(c.data[sid])[1][1])
    assert bare(srv, fine) == (200, HELLO)


def test_malformed_or_incomplete_request_resets_its_stream(make_server, docroot):
    """A malformed request (an upper-case field name, RFC 9114 4.2) is reset with
    H3_MESSAGE_ERROR, a stream that ends with no HEADERS with H3_REQUEST_INCOMPLETE; the
    connection goes on and answers the next request."""
    srv = make_server(docroot)

    async def script(c):
        ctl(c, SETTINGS)
        upper = request(c, h3_frame(0x1, b"\x00\x00" + FIELDS + b"\x24X-Up\x01v"))
        empty = request(c, h3_frame(0x21, b"reserved"))
        await c.until(lambda: upper in c.resets and empty in c.resets, 5)
        return c.resets.get(upper), c.resets.get(empty), await answered(c, request(c, GET))
    assert bare(srv, script) == (0x10E, 0x10D, 200)


def test_unknown_and_reserved_types_are_skipped(make_server, docroot):
    """Reserved frame types (0x1f * N + 0x21) on the control and request streams and an unknown
    frame type are skipped; a reserved unidirectional stream type is read and dropped with
    STOP_SENDING (H3_STREAM_CREATION_ERROR, as nghttp3); the request is answered."""
    srv = make_server(docroot)

    async def script(c):
        ctl(c, SETTINGS + h3_frame(0x21 + 0x1F * 2, b"grease") + h3_frame(0x1234, b""))
        odd = c.uni(vi(0x21 + 0x1F) + b"whatever")
        sid = request(c, h3_frame(0x21, b"x") + GET + h3_frame(0x40, b"yy"))
        status = await answered(c, sid)
        await c.until(lambda: odd in c.stops, 5)
        return status, c.stops.get(odd), c.terminated
    assert bare(srv, script) == (200, 0x103, None)


def test_streams_of_reserved_types_beside_the_three(make_server, docroot):
    """Beside its control and QPACK streams a client may open streams of reserved types (RFC
    9114 6.2.3: they exercise that unknown types are dropped), 8 per connection: the old build
    allowed three unidirectional streams in all, so a client that sends such a stream before
    its QPACK streams could not open those. The connection goes on serving."""
    srv = make_server(docroot)

    async def script(c):
        ctl(c, SETTINGS)
        c.uni(b"\x02")  # QPACK encoder
        c.uni(b"\x03")  # QPACK decoder
        opened = 0
        for i in range(8):
            if not await c.until(lambda: c._quic._remote_max_streams_uni > 3 + i, 5):
                break
            c.uni(vi(0x21 + 0x1F * i) + b"grease", end=True)
            opened += 1
        return opened, await answered(c, request(c, GET)), c.terminated
    assert bare(srv, script, timeout=30) == (8, 200, None)


def _insert(name, value):
    return qpack_int(len(name), 5, 0x40) + name + qpack_int(len(value), 7) + value


def test_qpack_duplicates_past_their_allowance_end_the_connection(make_server, docroot):
    """A Duplicate instruction is one byte and copies a whole table entry: after a 4,000-byte
    entry, each 64 KiB of them made the old build copy 256 MB (about 0.1 s of a core per MiB
    of input, for as long as a client keeps sending: it never ended the connection). Copies
    from the table now have an allowance (16 tables' worth, 2 more per request); past it the
    connection ends with H3_EXCESSIVE_LOAD, and the server goes on serving."""
    srv = make_server(docroot)

    async def script(c):
        ctl(c, SETTINGS)
        enc = c.uni(b"\x02" + qpack_int(4096, 5, 0x20) + _insert(b"x", b"v" * 4000))
        for _ in range(32):  # up to 2 MiB of Duplicate (000 index(5)) of the newest entry
            if c.terminated is not None:
                break
            c.send(enc, bytes(65536))
            await asyncio.sleep(0.05)
        await c.until(lambda: c.terminated is not None, 3)
        return c.terminated and c.terminated.error_code
    assert bare(srv, script, timeout=30) == 0x107

    async def fine(c):
        ctl(c, SETTINGS)
        return await answered(c, request(c, GET))
    assert bare(srv, fine) == 200


def test_blocked_section_waits_and_a_reset_cancels_it(make_server, docroot):
    """A request whose section refers to a dynamic table entry not yet inserted waits (RFC
    9204 2.1.2) and is answered once the encoder stream brings it, its section then
    acknowledged on our decoder stream; a blocked request reset by the client is cancelled
    there (Stream Cancellation, 4.4.2)."""
    srv = make_server(docroot)

    async def script(c):
        ctl(c, SETTINGS)
        enc = c.uni(b"\x02")
        # Required Insert Count 1 (encoded 2), Base 1: relative index 0 is the first insert
        first = request(c, h3_frame(0x1, b"\x02\x00" + FIELDS + b"\x80"))
        await ping(c)
        # Required Insert Count 2 (encoded 3): an entry that never comes; the stream is reset
        # before its end (after it, QUIC has nothing left to reset)
        second = request(c, h3_frame(0x1, b"\x03\x00" + FIELDS + b"\x80"), end=False)
        await ping(c)
        c.send(enc, qpack_int(4096, 5, 0x20) + _insert(b"x-late", b"v"))
        status = await answered(c, first)
        c._quic.reset_stream(second, 0x10C)
        c.transmit()
        dec = 11  # the server's third unidirectional stream: its decoder stream
        await c.until(lambda: 0x40 | second in c.data.get(dec, b"")[1:], 5)
        return status, bytes(c.data.get(dec, b""))
    status, dec = bare(srv, script)
    assert status == 200
    assert dec[0] == 0x03 and 0x80 | 0 in dec[1:], dec  # Section Acknowledgment, stream 0
    assert 0x40 | 4 in dec[1:], dec  # Stream Cancellation, stream 4


def _two_at_once(srv, prio_a, prio_b):
    """GET /big.bin twice in one datagram with priority fields prio_a and prio_b: the streams,
    in the order their answers ended, and how often the data received switched stream."""
    async def script(client):
        quic, loop = client._quic, asyncio.get_running_loop()
        ends, sids = [], []
        for prio in (prio_a, prio_b):
            sid = quic.get_next_available_stream_id()
            client.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                         (b":authority", b"localhost"), (b":path", b"/big.bin"),
                                         (b"priority", prio)], end_stream=True)
            fut = loop.create_future()
            client.pending[sid] = (Response(), fut)
            fut.add_done_callback(lambda _, s=sid: ends.append(s))
            sids.append(sid)
        order = data_order(client)
        client.transmit()
        await asyncio.gather(*(client.pending[s][1] for s in sids))
        assert all(bytes(client.pending[s][0].body) == BIG for s in sids)
        return sids, ends, sum(a != b for a, b in zip(order, order[1:]))
    return h3_raw("127.0.0.1", srv.port, srv.ca, script)


def test_priorities_order_the_answers(make_server, docroot):
    """RFC 9218: of two large answers asked for at once, the lower urgency ends first though
    asked for second; two incremental ones of one urgency share the connection packet by
    packet (round robin), where non-incremental ones take turns only when one must wait."""
    srv = make_server(docroot)
    (late, urgent), ends, _ = _two_at_once(srv, b"u=6", b"u=0")
    assert ends == [urgent, late], ends
    _, _, switches = _two_at_once(srv, b"u=3, i", b"u=3, i")
    assert switches > 200, switches  # 1 MiB each: ~1,800 packets


def test_goaway_on_drain_names_the_first_stream_not_seen(make_server, docroot):
    """SIGTERM: the control stream carries GOAWAY with the first request stream the server has
    not seen (RFC 9114 5.2); a request opened before it is still answered, one opened after is
    refused (H3_REQUEST_REJECTED); then the server exits 0."""
    srv = make_server(docroot)

    async def script(c):
        ctl(c, SETTINGS)
        assert await answered(c, request(c, GET)) == 200
        open_sid = request(c, GET, end=False)  # stream 4: no FIN yet, so no answer yet
        await ping(c)
        srv.proc.send_signal(signal.SIGTERM)

        def goaway():
            return [p for t, p in h3_frames(c.data.get(3, b"")[1:]) if t == 0x7]
        await c.until(goaway, 5)
        late = request(c, GET)
        await c.until(lambda: late in c.resets, 5)
        c.send(open_sid, b"", end=True)
        return goaway(), c.resets.get(late), await answered(c, open_sid)
    got, refused, status = bare(srv, script)
    assert got == [vi(8)] and refused == 0x10B and status == 200
    assert srv.proc.wait(timeout=10) == 0


@pytest.mark.parametrize("first", [2, 3, 8])
def test_reserved_streams_opened_first_never_cost_the_qpack_streams(make_server, docroot, first):
    """A client that opens streams of reserved types before its control and QPACK streams
    (issue 35.5): the old build kept four unidirectional streams and refused the rest with
    STOP_SENDING, so with 2 first the decoder stream was told to stop (RFC 9204 4.2 forbids
    that) and with 3 the encoder stream was lost and a request that needs it waited for ever.
    Now each type is read first, the reserved streams are refused (STOP_SENDING) and their
    credit given back, the critical three always get through and the request is answered."""
    srv = make_server(docroot)

    async def script(c):
        grease = [c.uni(vi(0x21 + 0x1F * i) + b"grease") for i in range(first)]
        await c.until(lambda: all(g in c.stops for g in grease), 5)
        ctl(c, SETTINGS)
        enc = c.uni(b"\x02")
        dec = c.uni(b"\x03")
        # a section that needs the encoder stream: Required Insert Count 1, Base 1
        sid = request(c, h3_frame(0x1, b"\x02\x00" + FIELDS + b"\x80"))
        c.send(enc, qpack_int(4096, 5, 0x20) + _insert(b"x-late", b"v"))
        status = await answered(c, sid)
        await ping(c)
        return (status, sorted(c.stops.get(g) for g in grease), c.stops.get(enc),
                c.stops.get(dec), c.terminated)
    assert bare(srv, script) == (200, [0x103] * first, None, None, None)


def test_reserved_streams_past_their_bound_end_the_connection(make_server, docroot):
    """Each refused stream's credit is given back, and ngtcp2 keeps each such stream to the
    connection's end: past 16 of them the connection ends with H3_EXCESSIVE_LOAD, and the
    server goes on serving."""
    srv = make_server(docroot)

    async def script(c):
        ctl(c, SETTINGS)
        for i in range(40):
            if not await c.until(lambda: c._quic._remote_max_streams_uni > 1 + i, 3):
                break
            c.uni(vi(0x21 + 0x1F * i) + b"grease")
        await c.until(lambda: c.terminated is not None, 5)
        return c.terminated and c.terminated.error_code
    assert bare(srv, script, timeout=30) == 0x107

    async def fine(c):
        ctl(c, SETTINGS)
        return await answered(c, request(c, GET))
    assert bare(srv, fine) == 200
