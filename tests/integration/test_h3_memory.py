"""What HTTP/3 keeps for requests that never end (issue 35.3), measured as the adversarial pass
did: a 4,000-byte QPACK dynamic-table entry referenced three times in every field section, 100
request streams a connection opened without their end, PINGs every few seconds. The old build
embedded a 16 KiB head buffer in every stream record and kept it until the stream closed, ~1.9
MB a connection for as long as PINGs came; now a waiting request is a copy sized to what was
decoded, counted against --head-memory (the oldest reset past it), and a stream that brings
nothing for --body-timeout is reset however many PINGs the connection gets. Raw QUIC clients
(aioquic, h3client._Bare) on loopback; the server's RSS from /proc."""

import asyncio

import pytest
from aioquic.asyncio.client import connect

from test_faults import asan_build
from h3client import _Bare, configuration, h3_frame, h3_get, qpack_int

pytestmark = pytest.mark.schemes("https")

SETTINGS = h3_frame(0x4, b"")
FIELDS = (b"\xd1"                      # :method GET (static 17)
          b"\xd7"                      # :scheme https (static 23)
          b"\x51\x0a/hello.txt"        # :path, name static 1, literal value
          b"\x50\x09localhost")        # :authority, name static 0, literal value
# Required Insert Count 1 (encoded 2), Base 1; the dynamic entry (relative index 0) three times
HEAVY = h3_frame(0x1, b"\x02\x00" + FIELDS + b"\x80" * 3)
ENTRY = qpack_int(4096, 5, 0x20) + qpack_int(1, 5, 0x40) + b"x" + qpack_int(4000, 7) + b"v" * 4000


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def _ping(c, uid, wait=5):
    """A PING, and its acknowledgement awaited (what was sent before it has been received),
    for at most `wait` seconds."""
    from aioquic.quic.events import PingAcknowledged
    done = asyncio.get_running_loop().create_future()
    old = c.quic_event_received

    def hook(ev):
        if isinstance(ev, PingAcknowledged) and ev.uid == uid and not done.done():
            done.set_result(True)
        old(ev)
    c.quic_event_received = hook
    c._quic.send_ping(uid)
    c.transmit()
    try:
        await asyncio.wait_for(done, wait)
    finally:
        c.quic_event_received = old


async def _heavy_client(srv, streams, opened):
    cfg = configuration(srv.ca)
    cfg.idle_timeout = 150
    async with connect("127.0.0.1", srv.port, configuration=cfg, create_protocol=_Bare,
                       wait_connected=True) as c:
        c.uni(b"\x00" + SETTINGS)
        c.uni(b"\x02" + ENTRY)
        c.uni(b"\x03")
        for _ in range(streams):
            sid = c._quic.get_next_available_stream_id()
            c._quic.send_stream_data(sid, HEAVY, end_stream=False)
        c.transmit()
        # behind 100 sections to decode on a one-thread server sharing the machine: a bound
        # that only a hung server reaches (it was 5 s, which a loaded 2-core machine missed; then
        # 60 s, missed twice in one stop's full runs: 20 clients' 2,000 sections at once can
        # overflow the server's UDP buffer, and aioquic's PTO doubles, 1 + 2 + ... + 32 s = 63 s)
        await _ping(c, 1, wait=130)
        opened.append(c)
        await asyncio.sleep(3600)  # cancelled by the test once measured


def _held_rss(srv, conns, streams, pings):
    """RSS growth (KiB) of the server with conns clients each holding `streams` unfinished
    heavy requests, after `pings` rounds of PINGs two seconds apart; and how many of the
    clients' streams the server reset."""
    async def run():
        before = rss_kib(srv.proc.pid)
        opened = []
        tasks = [asyncio.ensure_future(_heavy_client(srv, streams, opened))
                 for _ in range(conns)]
        loop = asyncio.get_running_loop()
        end = loop.time() + 140
        while len(opened) < conns and loop.time() < end and not any(t.done() for t in tasks):
            await asyncio.sleep(0.05)
        assert len(opened) == conns, [t.exception() for t in tasks if t.done()]
        for i in range(pings):
            await asyncio.sleep(2)
            await asyncio.gather(*(_ping(c, 100 + i) for c in opened))
        grown = rss_kib(srv.proc.pid) - before
        resets = sum(len(c.resets) for c in opened)
        alive = sum(c.terminated is None for c in opened)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return grown, resets, alive
    return asyncio.run(asyncio.wait_for(run(), 200))


def test_unfinished_requests_hold_a_bounded_memory(make_server, docroot):
    """20 connections x 100 unfinished requests, each section 12 KB decoded from 27 bytes:
    the old build grew by ~1.9 MB a connection (38 MB here); with --head-memory 1M the worker
    keeps at most that for them, resetting the oldest (H3_REQUEST_REJECTED), and the rest of
    each stream record is small: well under 500 KiB a connection in all. The connections stay
    up (PINGs come), and the server answers a new client."""
    srv = make_server(docroot, args=["-t", "1", "--head-memory", "1M"])
    conns = 20
    grown, resets, alive = _held_rss(srv, conns, 100, 2)
    assert alive == conns
    # (the sanitizer build keeps freed memory in its quarantine: RSS says nothing there)
    assert grown < 500 * conns or asan_build(), f"RSS grew {grown} KiB for {conns} connections"
    assert resets > 0  # past 1M, the oldest went, and that was said
    assert "unfinished HTTP/3 requests hold" in srv.stderr_text()
    [r] = h3_get("127.0.0.1", srv.port, srv.ca, [("GET", "/hello.txt")])
    assert r.status == 200


def test_a_stream_without_its_end_is_reset_after_the_body_timeout_despite_pings(make_server,
                                                                                 docroot):
    """A request stream whose HEADERS came without its end and that brings nothing more is
    reset (H3_REQUEST_CANCELLED) after --body-timeout, though the client PINGs twice a second
    and another stream of the connection keeps sending (six times as often as the timeout);
    the connection stays. The old build kept such a stream as long as the connection lived."""
    srv = make_server(docroot, args=["--body-timeout", "3"])

    async def run():
        cfg = configuration(srv.ca)
        cfg.idle_timeout = 60
        async with connect("127.0.0.1", srv.port, configuration=cfg, create_protocol=_Bare,
                           wait_connected=True) as c:
            c.uni(b"\x00" + SETTINGS)
            c.uni(b"\x02")
            c.uni(b"\x03")
            plain = h3_frame(0x1, b"\x00\x00" + FIELDS)
            quiet = c._quic.get_next_available_stream_id()
            c.send(quiet, plain)
            busy = c._quic.get_next_available_stream_id()
            c.send(busy, plain)
            for i in range(24):  # 12 s: four times the timeout
                await asyncio.sleep(0.5)
                if busy in c.resets or busy in c.stops:
                    break
                c.send(busy, h3_frame(0x0, b"b"))  # its body, a byte at a time
                await _ping(c, 10 + i)
                if quiet in c.resets:
                    break
            return c.resets.get(quiet), c.resets.get(busy), c.terminated
    assert asyncio.run(asyncio.wait_for(run(), 60)) == (0x10C, None, None)
