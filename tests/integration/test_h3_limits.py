"""Per-client limits over HTTP/3 (issue 35.4): --limit-conn counts QUIC connections as it
counts TCP ones, in one table per client (a new QUIC connection's first flight is steered by
its source address with TCP's hash, steer.h), and --limit-req with two workers is exact for
HTTP/3 clients. Every wait is bounded."""

import asyncio
import socket
import ssl
import time

import pytest

from aioquic.asyncio.client import connect
from h3client import _Proto, configuration, wait_closed
from test_accesslog import scrape

pytestmark = pytest.mark.schemes("https")

CONNECTION_REFUSED = 0x2


def counter(srv, name):
    return sum(v for k, v in scrape(srv).items() if k.startswith(name + "{"))


async def _hold(srv, n, timeout=10):
    """Opens n QUIC connections one after another, each asking for /index.html; returns
    (statuses or close codes, the open clients' context managers to leave)."""
    out, open_ = [], []
    for _ in range(n):
        cm = connect("127.0.0.1", srv.port, configuration=configuration(srv.ca),
                     create_protocol=_Proto, wait_connected=True)
        try:
            client = await asyncio.wait_for(cm.__aenter__(), timeout)
        except (ConnectionError, asyncio.TimeoutError) as e:
            out.append(("refused", str(e)))
            continue
        open_.append(cm)
        try:
            r = await asyncio.wait_for(client.request("GET", "/index.html"), timeout)
            out.append(r.status)
        except (ConnectionError, asyncio.TimeoutError):
            t = client.terminated
            out.append(("closed", t.error_code if t else None))
    return out, open_


def tls_get(srv):
    """A TLS connection over TCP to the TLS port with one request answered and kept open."""
    ctx = ssl.create_default_context(cafile=str(srv.ca))
    raw = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s = ctx.wrap_socket(raw, server_hostname="localhost")
    s.sendall(b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n")
    head = s.recv(4096)
    return s, head


def test_limit_conn_counts_quic_connections_across_workers(make_server, docroot):
    """--limit-conn 2 with two workers: two QUIC connections of 127.0.0.1 are served and held
    open, the next three are refused with CONNECTION_REFUSED and counted; the old build served
    all five (QUIC was never counted, and its connections spread by connection ID)."""
    srv = make_server(docroot, args=["--limit-conn", "2", "--metrics", "127.0.0.1:0"])
    assert srv.threads == 2

    async def run():
        out, held = await _hold(srv, 5)
        for cm in held:
            await cm.__aexit__(None, None, None)
        return out

    out = asyncio.run(asyncio.wait_for(run(), 90))
    assert out[:2] == [200, 200], out
    assert all(o != 200 for o in out[2:]), out
    assert counter(srv, "ringhttpd_limit_conn_refused_total") == 3
    assert "127.0.0.1 has 2 connections open: refusing another" in srv.stderr_text()


def test_one_client_over_tcp_and_quic_is_counted_once(make_server, docroot):
    """--limit-conn 2, two workers: one TLS connection over TCP and one QUIC connection of
    127.0.0.1 held open; the next QUIC connection and the next TCP one are both refused (the
    old build served them: QUIC was counted nowhere)."""
    srv = make_server(docroot, args=["--limit-conn", "2", "--metrics", "127.0.0.1:0"])
    assert srv.threads == 2
    tcp, head = tls_get(srv)
    assert head.startswith(b"HTTP/1.1 200"), head

    async def run():
        out, held = await _hold(srv, 2)
        third = None
        try:
            third = tls_get(srv)
        except (OSError, ssl.SSLError):
            pass
        for cm in held:
            await cm.__aexit__(None, None, None)
        return out, third

    try:
        out, third = asyncio.run(asyncio.wait_for(run(), 60))
        assert out[0] == 200 and out[1] != 200, out
        assert third is None or not third[1].startswith(b"HTTP/1.1 200"), third
        assert counter(srv, "ringhttpd_limit_conn_refused_total") == 2
    finally:
        tcp.close()


def test_limit_req_over_http3_is_exact_with_two_workers(make_server, docroot):
    """--limit-req 1r/m,burst=3,nodelay with two workers: twelve QUIC connections of one
    client, a request each, get exactly four 200s (the burst and one), the rest 429. The old
    build spread the connections over both workers by their random IDs, each worker's table
    letting four through (up to eight 200s)."""
    srv = make_server(docroot, args=["--limit-req", "1r/m,burst=3,nodelay"])
    assert srv.threads == 2

    async def run():
        out, held = await _hold(srv, 12)
        for cm in held:
            await cm.__aexit__(None, None, None)
        return out

    out = asyncio.run(asyncio.wait_for(run(), 150))
    assert out.count(200) == 4 and out.count(429) == 8, out


def test_forged_initials_take_no_slot_of_the_address_they_name(make_server, docroot):
    """A UDP source can be forged: Initials that claim 127.0.0.1 and never go on (here sent by
    the test from 127.0.0.1's ports, as a forger elsewhere would) must not hold that client's
    --limit-conn slots for the handshake timeout. With the limit in force an address is counted
    only once our Retry's token proves it, so after 8 such Initials, each answered with a
    Retry, the real client of 127.0.0.1 is still served."""
    srv = make_server(docroot, args=["--limit-conn", "1", "-t", "1"])
    from aioquic.quic.connection import QuicConnection
    import time
    forged = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    forged.bind(("127.0.0.1", 0))
    forged.settimeout(5)
    try:
        for i in range(8):
            conn = QuicConnection(configuration=configuration(srv.ca))
            conn.connect(("127.0.0.1", srv.port), now=time.monotonic())
            sent = 0
            for d, _ in conn.datagrams_to_send(now=time.monotonic()):
                forged.sendto(d, ("127.0.0.1", srv.port))
                sent += 1
            try:
                answer = forged.recv(65536)
            except socket.timeout:  # seen once in make check (epoll, at 2 s): say more
                pytest.fail(f"no answer to Initial {i + 1} ({sent} datagrams)\n"
                            f"{srv.stderr_text()[-2000:]}")
            assert answer[0] & 0xf0 == 0xf0, "not a Retry"  # long header, type 3
    finally:
        forged.close()

    async def run():
        out, held = await _hold(srv, 1)
        for cm in held:
            await cm.__aexit__(None, None, None)
        return out
    assert asyncio.run(asyncio.wait_for(run(), 60)) == [200]


def test_quic_connections_take_conn_slots(make_server, docroot):
    """Issue 37: an HTTP/3 connection has a conn slot (its resume token and peer are conn's), one
    of --max-conns' as a TCP connection's: with -t 1 --max-conns 2, two QUIC connections held
    open are served and the third is refused (no slot: the handshake fails); once they close
    their slots are back and a new one is served, as is a TCP one. The old build served all
    three (QUIC connections had no slot)."""
    srv = make_server(docroot, args=["-t", "1", "--max-conns", "2"])

    async def run():
        out, held = await _hold(srv, 3)
        for cm in held:
            await cm.__aexit__(None, None, None)
        # a closed connection keeps its slot through its draining period (RFC 9000 10.2:
        # three PTOs), as quic_ep_conns counts it: asked again until then, a bounded number
        for _ in range(40):
            again, held = await _hold(srv, 1)
            for cm in held:
                await cm.__aexit__(None, None, None)
            if again == [200]:
                break
            await asyncio.sleep(0.25)
        return out, again

    out, again = asyncio.run(asyncio.wait_for(run(), 90))
    assert out[:2] == [200, 200], out
    assert out[2] != 200, out
    assert again == [200], again
    tcp, head = tls_get(srv)
    tcp.close()
    assert head.startswith(b"HTTP/1.1 200"), head


def test_an_idle_quic_connection_is_reclaimed_for_a_tcp_newcomer(make_server, docroot):
    """Issue 37: an HTTP/3 connection with no request open is on conn's idle queue like an idle
    keep-alive one: with -t 1 --max-conns 1 and a QUIC connection held open after its request,
    a TLS connection over TCP is served, the QUIC one ended for it (GOAWAY, then
    CONNECTION_CLOSE) once its closing period frees the slot. With slots but no idle queue the
    newcomer was refused ("none idle")."""
    srv = make_server(docroot, args=["-t", "1", "--max-conns", "1"])

    async def run():
        out, held = await _hold(srv, 1)
        got = None
        try:
            # the QUIC connection is idle once its stream is done, the client's ACK of the
            # answer in: a newcomer before that finds it busy and is refused ("none idle"),
            # and is asked again until a deadline (not a count: under make check's load the
            # closing period outlasted 40 quick refusals)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    got = await asyncio.wait_for(asyncio.to_thread(tls_get, srv), 30)
                    break
                except (OSError, ssl.SSLError, asyncio.TimeoutError):
                    await asyncio.sleep(0.25)
        finally:
            for cm in held:
                await cm.__aexit__(None, None, None)
        return out, got

    out, got = asyncio.run(asyncio.wait_for(run(), 150))
    assert got, srv.stderr_text()
    tcp, head = got
    tcp.close()
    assert out == [200], (out, srv.stderr_text())
    assert head.startswith(b"HTTP/1.1 200"), head
    assert "--max-conns 1 reached: closing idle connections" in srv.stderr_text()
