"""How HTTP/3 answers share a connection (RFC 9218 10, issue 42): within one urgency the
non-incremental answers go out one after another in the order they were asked for, each whole
before the next begins, ahead of incremental answers that have already sent; incremental ones
take turns; a PRIORITY_UPDATE moves a stream at once. The client (aioquic) records which stream
each piece of data arrived on; its flow-control windows hold every answer at once, so the order
is the server's scheduler's."""

import asyncio
import os
import socket

import pytest
from aioquic.buffer import encode_uint_var as vi

from h3client import Response, data_order, h3_raw

pytestmark = pytest.mark.schemes("https")

KIB = 1024


def _pages(docroot, sizes):
    """Files a0.bin, a1.bin... of the given sizes, distinct random content; their bytes."""
    out = []
    for i, n in enumerate(sizes):
        data = os.urandom(n)
        (docroot / f"a{i}.bin").write_bytes(data)
        out.append(data)
    return out


def _big_receive_buffer(client):
    """A receive buffer that holds what the server sends in a burst: a Python client reads
    slower than the server writes, and what the socket drops comes again later, out of the
    order the scheduler chose."""
    sock = client._transport.get_extra_info("socket")
    try:
        sock.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE (root)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)


def _fetch(srv, asks, before=None, fin_order=None):
    """asks: [(path, priority field or None)], all sent at once on one connection. With
    fin_order (indexes into asks), the requests' HEADERS go first, then `await before(client,
    sids)` (if given), then the requests' ends, in one packet in that order. Returns the stream
    IDs, their bodies, and the sequence of stream IDs data arrived on (one entry per event)."""
    async def script(client):
        quic, loop = client._quic, asyncio.get_running_loop()
        _big_receive_buffer(client)
        sids = []
        for path, prio in asks:
            sid = quic.get_next_available_stream_id()
            fields = [(b":method", b"GET"), (b":scheme", b"https"),
                      (b":authority", b"localhost"), (b":path", path.encode())]
            if prio is not None:
                fields.append((b"priority", prio.encode()))
            client.h3.send_headers(sid, fields, end_stream=fin_order is None)
            client.pending[sid] = (Response(), loop.create_future())
            sids.append(sid)
        order = data_order(client)
        client.transmit()
        if fin_order is not None:
            if before:
                await before(client, sids)
            else:
                await client.ping()  # the HEADERS are in: the ends come in a packet of their own
            ends = [sids[i] for i in fin_order]
            for sid in ends:
                quic.send_stream_data(sid, b"", end_stream=True)
            # aioquic writes its streams' frames in the order of its queue: make it ours
            quic._streams_queue.sort(key=lambda st: ends.index(st.stream_id)
                                     if st.stream_id in ends else -1)
            client.transmit()
        await asyncio.gather(*(client.pending[s][1] for s in sids))
        return sids, [bytes(client.pending[s][0].body) for s in sids], order
    return h3_raw("127.0.0.1", srv.port, srv.ca, script)


def _runs(order, sids):
    """order restricted to sids, with repeats folded: the order the streams' data came in."""
    out = []
    for s in order:
        if s in sids and (not out or out[-1] != s):
            out.append(s)
    return out


def test_non_incremental_one_after_another_ahead_of_incremental_ones(make_server, docroot):
    """Two incremental answers asked for first (u=3, i: as Chromium asks for images), then four
    non-incremental ones (no priority field: u=3, as Chromium's scripts): once the first of
    those has begun, the four arrive one whole after another in the order asked, and no
    incremental data comes between them. Round robin within the urgency (the build before
    issue 42) sent a piece of each incremental answer between two non-incremental ones."""
    bodies = _pages(docroot, [600 * KIB, 600 * KIB] + [100 * KIB] * 4)
    srv = make_server(docroot)
    asks = [("/a0.bin", "u=3, i"), ("/a1.bin", "u=3, i")] + [(f"/a{i}.bin", None)
                                                            for i in range(2, 6)]
    sids, got, order = _fetch(srv, asks)
    assert got == bodies
    inc, non = sids[:2], sids[2:]
    start = order.index(non[0])
    end = len(order) - 1 - order[::-1].index(non[-1])
    between = order[start:end + 1]
    assert not set(between) & set(inc), _runs(order, sids)
    assert _runs(between, non) == non, _runs(order, sids)


def test_incremental_ones_take_turns(make_server, docroot):
    """Three incremental answers of one urgency share the connection: each one's data is
    interleaved with the others' (many switches), and all arrive whole."""
    bodies = _pages(docroot, [400 * KIB] * 3)
    srv = make_server(docroot)
    sids, got, order = _fetch(srv, [(f"/a{i}.bin", "u=4, i") for i in range(3)])
    assert got == bodies
    assert len(_runs(order, sids)) > 30, _runs(order, sids)


def test_lower_urgency_first_whatever_the_order_asked(make_server, docroot):
    """u=5 asked first, then u=1, then u=3 (all non-incremental): they come in urgency order,
    each whole before the next."""
    bodies = _pages(docroot, [150 * KIB] * 3)
    srv = make_server(docroot)
    sids, got, order = _fetch(srv, [("/a0.bin", "u=5"), ("/a1.bin", "u=1"), ("/a2.bin", "u=3")])
    assert got == bodies
    assert _runs(order, sids) == [sids[1], sids[2], sids[0]]


def test_priority_update_moves_a_stream_at_once(make_server, docroot):
    """Three non-incremental requests opened (HEADERS, not yet ended), then a PRIORITY_UPDATE
    (RFC 9218 7.1) on the control stream giving the last one urgency 0, acknowledged, then the
    requests' ends: the updated stream's answer comes first, then the other two in order."""
    bodies = _pages(docroot, [150 * KIB] * 3)
    srv = make_server(docroot)

    async def update(client, sids):
        from aioquic.h3.connection import encode_frame
        client._quic.send_stream_data(client.h3._local_control_stream_id,
                                      encode_frame(0xF0700, vi(sids[2]) + b"u=0"))
        client.transmit()
        await client.ping()  # the server has read it before the requests end

    sids, got, order = _fetch(srv, [(f"/a{i}.bin", None) for i in range(3)], update,
                              fin_order=[0, 1, 2])
    assert got == bodies
    assert _runs(order, sids) == [sids[2], sids[0], sids[1]]



def test_non_incremental_in_the_order_asked_whatever_order_they_ended(make_server, docroot):
    """Four non-incremental requests opened in order, their ends (FIN) arriving together in the
    reverse order: the answers go out in stream-ID order, the order the client asked in (RFC
    9218 10), each whole before the next. The build before issue 42 served them in the order
    their ends were read (last asked, first served)."""
    bodies = _pages(docroot, [150 * KIB] * 4)
    srv = make_server(docroot)
    sids, got, order = _fetch(srv, [(f"/a{i}.bin", None) for i in range(4)], fin_order=[3, 2, 1, 0])
    assert got == bodies
    assert _runs(order, sids) == sids
