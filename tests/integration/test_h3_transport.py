"""HTTP/3's transport (issue 29): a client whose address changes mid-download keeps its
connection on a server with two workers (datagrams routed to the worker by connection ID,
whatever their source), and the download arrives byte-exact; SIGHUP's certificates reach
QUIC handshakes; a train of datagrams coalesced by UDP GRO is split, and served as without;
clients that abuse flow control (never extend it, send past it) hold nothing unbounded; sends
are io_uring operations on the io_uring engine."""

import asyncio
import os
import random
import shutil
import signal
import socket
import struct
import threading
import time

import pytest

from aioquic.asyncio.client import connect
from conftest import _openssl, wait_for
from h3client import _Proto, configuration, h3_get, h3_get_moving
from test_accesslog import scrape
from test_h3 import rss_kib

pytestmark = pytest.mark.schemes("https")

LARGE = random.Random(29).randbytes(3 << 20)
UDP_SEGMENT = 103  # linux/udp.h


@pytest.fixture(scope="module")
def h3root(tmp_path_factory):
    root = tmp_path_factory.mktemp("h3root")
    (root / "large.bin").write_bytes(LARGE)
    return root


def test_client_that_moves_keeps_its_connection(make_server, h3root):
    """Four connections at once to two workers, each moving three times during a 3 MiB
    download: to a new port on 127.0.0.2 with a new connection ID (migration), then a new port
    on 127.0.0.1 and one on 127.0.0.2 again (NAT rebinding, the ID kept). (A new ID while
    ngtcp2 0.12 still validates the path before is refused by its count of the client's IDs,
    CONNECTION_ID_LIMIT_ERROR, when aioquic replaces the one it retires at once.) Each move lands on a worker by the kernel's
    hash of the new 4-tuple unless the server routes by connection ID: twelve moves with two
    workers, so a server that does not route fails all but once in 4,096 runs."""
    srv = make_server(h3root, args=("-v",))
    assert "datagrams routed to workers by connection ID: yes" in srv.stderr_text()
    got = h3_get_moving("127.0.0.1", srv.port, srv.ca, "/large.bin",
                        ["127.0.0.2", "127.0.0.1", "127.0.0.2"], conns=4)
    for resp, moved in got:
        assert resp.status == 200
        assert bytes(resp.body) == LARGE
        assert [a[0] for a in moved] == ["::ffff:127.0.0.2", "::ffff:127.0.0.1",
                                         "::ffff:127.0.0.2"], moved


def _server_ids(cid):
    """QUIC-LB's plaintext reading of connection ID cid for 8-byte server IDs (AWS NLB's):
    (config rotation, self-encoded length, server ID), as a balancer decodes it."""
    return cid[0] >> 5, (cid[0] & 0x1f) + 1, cid[1:9]


def test_every_connection_id_carries_the_server_id(make_server, h3root, monkeypatch):
    """Issue 38: with --quic-server-id, every connection ID the server gives a client (its
    Retry's, its Initial's, each NEW_CONNECTION_ID's) opens with QUIC-LB's first octet (the
    config rotation bits, the ID's length after it) and the 8-byte server ID, where an L4
    balancer (QUIC-LB plaintext, AWS NLB) routes on it; and the worker steering still holds
    on two workers: four connections that move three times each keep their downloads, as
    test_client_that_moves_keeps_its_connection's do without a server ID. --limit-conn: every
    new client is sent a Retry first."""
    from aioquic.quic.connection import QuicConnection
    sid = bytes.fromhex("1122334455667788")
    srv = make_server(h3root, args=("-v", "--quic-server-id", "3:0x" + sid.hex(),
                                    "--limit-conn", "16"))
    err = srv.stderr_text()
    assert "datagrams routed to workers by connection ID: yes" in err
    assert "connection IDs carry server ID 3:0x1122334455667788" in err
    given = {"retry": [], "initial": set(), "new": set()}
    on_retry, on_new = QuicConnection._receive_retry_packet, QuicConnection._handle_new_connection_id_frame

    def retry(self, header, *args, **kwargs):
        given["retry"].append(header.source_cid)
        return on_retry(self, header, *args, **kwargs)

    def new_cid(self, *args, **kwargs):
        out = on_new(self, *args, **kwargs)
        given["initial"].add(self._remote_initial_source_connection_id)
        given["new"].update(c.cid for c in self._peer_cid_available)
        return out

    monkeypatch.setattr(QuicConnection, "_receive_retry_packet", retry)
    monkeypatch.setattr(QuicConnection, "_handle_new_connection_id_frame", new_cid)
    got = h3_get_moving("127.0.0.1", srv.port, srv.ca, "/large.bin",
                        ["127.0.0.2", "127.0.0.1", "127.0.0.2"], conns=4)
    for resp, moved in got:
        assert resp.status == 200
        assert bytes(resp.body) == LARGE
        assert len(moved) == 3
    assert len(given["retry"]) == 4 and len(given["initial"]) == 4
    assert len(given["new"]) >= 4 * 3  # each connection is given several more
    every = given["retry"] + sorted(given["initial"]) + sorted(given["new"])
    for cid in every:
        assert _server_ids(cid) == (3, len(cid), sid), cid.hex()
    # the rest of each ID is the server's own: no two alike
    assert len(set(every)) == len(every)


def _leaf(ca, d, name):
    """A pair for DNS name `name`, signed by the session's CA: (crt, key)."""
    key, csr, crt, ext = (d / f"{name}.{x}" for x in ("key", "csr", "crt", "ext"))
    ext.write_text(f"subjectAltName=DNS:{name}\nbasicConstraints=CA:FALSE\n"
                   "extendedKeyUsage=serverAuth\n")
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
    _openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca.parent / "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", crt)
    return crt, key


def test_sighup_gives_new_handshakes_the_new_certificate(make_server, h3root, tmp_path,
                                                        test_ca):
    """A site's pair re-read on SIGHUP serves QUIC handshakes as it serves TLS ones: before,
    the client asking for b.test gets the default (localhost) certificate and refuses it;
    after the files become b.test's and the reload, it gets b.test's."""
    srv_ca = test_ca[0]
    old_crt, old_key = _leaf(srv_ca, tmp_path, "old.test")
    new_crt, new_key = _leaf(srv_ca, tmp_path, "b.test")
    crt, key = tmp_path / "site.crt", tmp_path / "site.key"
    shutil.copy(old_crt, crt)
    shutil.copy(old_key, key)
    srv = make_server(h3root, args=("--tls-cert", str(crt), "--tls-key", str(key)))
    with pytest.raises(Exception):
        h3_get("127.0.0.1", srv.port, srv.ca, [("GET", "/large.bin")], server_name="b.test",
               timeout=3)
    shutil.copy(new_crt, crt)
    shutil.copy(new_key, key)
    srv.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "TLS certificates re-read" in srv.stderr_text(), timeout=10)
    r, = h3_get("127.0.0.1", srv.port, srv.ca, [("HEAD", "/large.bin")], server_name="b.test",
                timeout=5)
    assert r.status == 200 and r.header("content-length") == str(len(LARGE))


def _initials(count):
    """`count` client Initials (aioquic's, 1200 bytes each, a connection each): their bytes
    and the IDs the server's answers carry (each client's own)."""
    from aioquic.quic.connection import QuicConnection
    from h3client import configuration
    out = []
    for _ in range(count):
        conn = QuicConnection(configuration=configuration(__file__))  # never verified
        conn.connect(("127.0.0.1", 1), now=time.monotonic())
        d, = [d for d, _ in conn.datagrams_to_send(now=time.monotonic())]
        out.append((d, conn.host_cid))
    return out


@pytest.mark.parametrize("gro", ["on", "off"])
def test_a_train_of_datagrams_is_split_with_gro(make_server, h3root, gro):
    """Four client Initials sent as one GSO train (one sendmsg with UDP_SEGMENT): with GRO on
    the server's socket receives them as one 4,800-byte buffer, which the server splits by
    the segment size; off, the kernel splits them first. Either way each of the four clients
    gets its answer (its own ID as the destination of the server's Initial), and -v says
    whether GRO is used."""
    srv = make_server(h3root, args=("-v", "--http3-gro", gro, "--metrics", "127.0.0.1:0"))
    assert f"GRO {'yes' if gro == 'on' else 'no (--http3-gro off)'}" in srv.stderr_text()
    initials = _initials(4)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.2)
    try:
        train = b"".join(d for d, _ in initials)
        s.sendmsg([train], [(socket.SOL_UDP, UDP_SEGMENT, struct.pack("H", 1200))], 0,
                  ("127.0.0.1", srv.port))
        want, answered = {cid for _, cid in initials}, set()
        deadline = time.monotonic() + 5
        while answered != want and time.monotonic() < deadline:
            try:
                d = s.recv(65536)
            except socket.timeout:
                continue
            if d[0] & 0x80:  # a long header: its destination ID's length at 5, the ID at 6
                answered.add(d[6:6 + d[5]])
        assert answered == want, (answered, want)
        def trains():
            return sum(v for k, v in scrape(srv).items()
                       if k.startswith("ringhttpd_udp_gro_trains_total"))
        if gro == "on":  # the counters are published at the worker's next timer run
            wait_for(lambda: trains() >= 1, timeout=5)
        assert trains() == (1 if gro == "on" else 0), trains()
    finally:
        s.close()


@pytest.mark.parametrize("gso", ["on", "off"])
def test_sends_are_io_uring_operations_on_io_uring(make_server, h3root, engine, gso):
    """On the io_uring engine the port's datagrams leave as SENDMSG operations (with
    UDP_SEGMENT, or one per datagram with GSO off) submitted with the loop turn's others; on
    epoll by sendmsg. Either way a 3 MiB download on two connections arrives whole, and the
    sends metric says how many datagrams a send carried: more than two with GSO, one without."""
    srv = make_server(h3root, args=("-v", "--http3-gso", gso, "--metrics", "127.0.0.1:0"))
    got = h3_get_moving("127.0.0.1", srv.port, srv.ca, "/large.bin", [], conns=2)
    assert all(bytes(r.body) == LARGE for r, _ in got)
    def sends():
        return sum(v for k, v in scrape(srv).items()
                   if k.startswith("ringhttpd_udp_ring_sends_total"))
    said = "datagrams sent by io_uring" in srv.stderr_text()
    if engine == "uring":  # the counters are published at the worker's next timer run
        assert wait_for(lambda: sends() > 100, timeout=5), sends()
        assert said, srv.stderr_text()
    else:
        assert not said and sends() == 0, sends()
    # Datagrams per send, what the kernel's cost follows: several with GSO, one without.
    def count(name):
        return sum(v for k, v in scrape(srv).items() if k.startswith(name))
    assert wait_for(lambda: count("ringhttpd_udp_sends_total") > 100, timeout=5)
    dgrams, ops = count("ringhttpd_udp_datagrams_sent_total"), count("ringhttpd_udp_sends_total")
    if gso == "on":
        assert dgrams > 2 * ops, (dgrams, ops)
    else:
        assert dgrams == ops, (dgrams, ops)


class _Stingy(threading.Thread):
    """A client that never extends flow control: 16 KiB for the connection and 4 KiB a
    stream, no MAX_DATA or MAX_STREAM_DATA ever after, 20 downloads of LARGE at once; it
    keeps the connection alive (PINGs) until told to stop. .got: body bytes per stream;
    .error: what ended it, if anything did."""

    def __init__(self, srv):
        super().__init__(daemon=True)
        self.srv, self.got, self.error = srv, {}, None
        self.stop = threading.Event()

    def run(self):
        try:
            asyncio.run(asyncio.wait_for(self._run(), 60))
        except Exception as e:  # reported through .error, asserted by the test
            self.error = e

    async def _run(self):
        cfg = configuration(self.srv.ca)
        cfg.max_data, cfg.max_stream_data = 16384, 4096
        async with connect("127.0.0.1", self.srv.port, configuration=cfg,
                           create_protocol=_Proto, wait_connected=True) as client:
            quic = client._quic
            quic._write_connection_limits = lambda *a, **k: None
            quic._write_stream_limits = lambda *a, **k: None
            tasks = [asyncio.ensure_future(client.request("GET", "/large.bin"))
                     for _ in range(20)]
            while not self.stop.is_set():
                for sid, (resp, _) in client.pending.items():
                    self.got[sid] = len(resp.body)
                if client.terminated:
                    raise ConnectionError(client.terminated)
                client._quic.send_ping(0)
                client.transmit()
                await asyncio.sleep(0.05)
            for t in tasks:
                t.cancel()


def test_client_that_never_extends_flow_control(make_server, h3root):
    """The server sends no byte past the limits the client gave (the client, aioquic, would
    close with FLOW_CONTROL_ERROR), holds a bounded amount for the stalled responses, serves
    another client meanwhile, and a SIGTERM ends the stalled connection at --drain-timeout."""
    srv = make_server(h3root, args=("--drain-timeout", "1"))
    before = rss_kib(srv.proc.pid)
    stingy = _Stingy(srv)
    stingy.start()
    try:
        # Stalled: every byte the connection allows has arrived (the headers take a few).
        wait_for(lambda: stingy.error or sum(stingy.got.values()) >= 12 * 1024, timeout=10)
        assert stingy.error is None, stingy.error
        time.sleep(0.5)  # room for a server that would overrun the limit to do so
        assert stingy.error is None, stingy.error
        assert sum(stingy.got.values()) <= 16384, stingy.got
        assert all(n <= 4096 for n in stingy.got.values()), stingy.got
        r, = h3_get("127.0.0.1", srv.port, srv.ca, [("GET", "/large.bin")], timeout=10)
        assert bytes(r.body) == LARGE
        assert rss_kib(srv.proc.pid) - before < 32 * 1024
        start = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(timeout=10)
        assert time.monotonic() - start < 8
    finally:
        stingy.stop.set()
        stingy.join(timeout=10)


def test_client_that_sends_past_the_stream_limit(make_server, h3root):
    """A request stream whose first bytes sit at 1 MiB, past the 64 KiB a request stream may
    send (the client's own flow control bypassed: its sender hands out that frame): the
    server closes the connection with FLOW_CONTROL_ERROR (RFC 9000 4.1) and goes on
    serving. (No request precedes it, so the stream cannot have been answered and forgotten
    before the frame arrives.)"""
    from aioquic.quic.packet import QuicStreamFrame
    srv = make_server(h3root)

    async def overrun():
        async with connect("127.0.0.1", srv.port, configuration=configuration(srv.ca),
                           create_protocol=_Proto, wait_connected=True) as client:
            quic = client._quic
            sid = quic.get_next_available_stream_id()
            quic.send_stream_data(sid, b"y")
            sender = quic._get_or_create_stream_for_send(sid).sender
            frames = [QuicStreamFrame(data=b"y", offset=1 << 20)]
            sender.get_frame = lambda *a, **k: frames.pop() if frames else None
            client.transmit()
            for _ in range(100):
                if client.terminated:
                    return client.terminated
                await asyncio.sleep(0.05)
            return None

    ended = asyncio.run(asyncio.wait_for(overrun(), 30))
    assert ended is not None and ended.error_code == 0x3, ended  # FLOW_CONTROL_ERROR
    r, = h3_get("127.0.0.1", srv.port, srv.ca, [("GET", "/large.bin")], timeout=10)
    assert bytes(r.body) == LARGE


def test_restart_with_reuse_port_keeps_http3(make_server, h3root):
    """A successor started beside a running server with --reuse-port finds the UDP port in use
    and routes nothing; once the predecessor has drained and gone, every connection reaches
    the successor's worker that made its IDs (the predecessor took its program off: left on,
    its indices would name the successor's sockets in the order the kernel reshuffled them
    into as ours closed, and no handshake would finish). Then the successor finds its sockets'
    new order by a probe and routes by connection ID itself: connections that move during a
    download (as in test_client_that_moves_keeps_its_connection: twelve moves over two
    workers, which the kernel's hash alone survives once in 4,096 runs) arrive byte-exact."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        tls_port = s.getsockname()[1]
    ports = ("-p", "0", "--tls-port", str(tls_port), "--reuse-port", "-v")
    a = make_server(h3root, args=ports)
    assert "routed to workers by connection ID: yes" in a.stderr_text(), a.stderr_text()
    b = make_server(h3root, args=ports)
    assert "connection ID: no (another process shares the UDP port)" in b.stderr_text()
    r, = h3_get("127.0.0.1", tls_port, a.ca, [("GET", "/large.bin")], timeout=10)
    assert bytes(r.body) == LARGE
    a.stop(signal.SIGTERM, timeout=10)
    for _ in range(6):  # each lands on one of b's two workers by its own first ID
        r, = h3_get("127.0.0.1", tls_port, b.ca, [("HEAD", "/large.bin")], timeout=5)
        assert r.status == 200
    routed = "connection ID (the UDP port is ours alone now)"
    wait_for(lambda: routed in b.stderr_text(), timeout=5)  # checked after the moves
    got = h3_get_moving("127.0.0.1", tls_port, b.ca, "/large.bin",
                        ["127.0.0.2", "127.0.0.1", "127.0.0.2"], conns=4)
    for resp, moved in got:
        assert resp.status == 200
        assert bytes(resp.body) == LARGE
        assert len(moved) == 3, moved
    assert routed in b.stderr_text(), b.stderr_text()


def test_restart_with_reuse_port_keeps_http3_on_two_tls_entries(make_server, h3root):
    """The hand-over with two UDP ports (issue 38: HTTP/3 on every TLS listener): 127.0.0.1 and
    [::1] on TLS ports of their own, each a reuseport group of its own. The successor finds
    both ports shared and routes neither; the predecessor answers HTTP/3 on both until it
    stops, then the successor does, and routes each port by connection ID once it is its
    alone."""
    ports = []
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with socket.socket(family) as s:
            s.bind((host, 0))
            ports.append(s.getsockname()[1])
    t1, t2 = ports
    args = ("-p", "0", "--tls-port", str(t1), "-b", f"[::1] tls={t2}", "--reuse-port", "-v")
    urls = (f"https://127.0.0.1:{t1}/", f"https://[::1]:{t2}/")
    a = make_server(h3root, args=args)
    for url in urls:
        assert f"HTTP/3 on {url}: datagrams routed to workers by connection ID: yes" in \
            a.stderr_text(), a.stderr_text()
    b = make_server(h3root, args=args)
    for url in urls:
        assert f"HTTP/3 on {url}: datagrams routed to workers by connection ID: no (another " \
            "process shares the UDP port)" in b.stderr_text(), b.stderr_text()
    targets = (("127.0.0.1", t1), ("::1", t2))
    for host, port in targets:
        r, = h3_get(host, port, a.ca, [("GET", "/large.bin")], timeout=10)
        assert bytes(r.body) == LARGE, (host, port)
    a.stop(signal.SIGTERM, timeout=10)
    for _ in range(3):
        for host, port in targets:
            r, = h3_get(host, port, b.ca, [("HEAD", "/large.bin")], timeout=5)
            assert r.status == 200, (host, port)
    for url in urls:
        routed = f"HTTP/3 on {url}: datagrams routed to workers by connection ID (the UDP port " \
            "is ours alone now)"
        wait_for(lambda: routed in b.stderr_text(), timeout=5)
    for host, port in targets:
        r, = h3_get(host, port, b.ca, [("GET", "/large.bin")], timeout=10)
        assert bytes(r.body) == LARGE, (host, port)


class _Sizes(_Proto):
    """_Proto that notes the size of every datagram the server sends."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sizes = []

    def datagram_received(self, data, addr):
        self.sizes.append(len(data))
        super().datagram_received(data, addr)


def test_path_mtu_discovery_grows_packets(make_server, h3root):
    """Packets start at QUIC's 1,200 bytes and grow once Path MTU Discovery proves the path
    carries more (loopback does; ngtcp2 probes only into a buffer that can hold a probe, and
    the server once offered it the path's size alone): fewer packets, each encrypted and sent,
    for the same bytes. The download arrives byte-exact, and nothing passes ngtcp2's 1,452."""
    srv = make_server(h3root)

    async def run():
        async with connect("127.0.0.1", srv.port, configuration=configuration(srv.ca),
                           create_protocol=_Sizes, wait_connected=True) as client:
            first = await client.request("GET", "/large.bin")
            return first, client.sizes

    resp, sizes = asyncio.run(asyncio.wait_for(run(), 30))
    assert resp.status == 200 and bytes(resp.body) == LARGE
    big = [n for n in sizes if n > 1200]
    assert big and max(sizes) <= 1452, (len(sizes), max(sizes))
    # most of the download's packets are the larger size, not just the probes
    assert len(big) > len(sizes) // 2, (len(big), len(sizes))


def test_no_datagram_of_any_length_ends_the_server(make_server, h3root):
    """Issue 35: Debian's ngtcp2 0.12 asserts that a datagram is not empty, so one 0-byte UDP
    datagram (no handshake, any source address) aborted the process on both engines. Empty
    datagrams, every length up to 64 bytes of a long and of a short header, and a real
    client's Initial cut at every 7th byte: the server receives them all, stays up and still
    answers HTTP/3."""
    srv = make_server(h3root, args=("--metrics", "127.0.0.1:0"))
    (initial, _), = _initials(1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        dgrams = [b""] * 3 + [b"\xc0" * n for n in range(65)] + [b"\x40" * n for n in range(65)]
        dgrams += [initial[:n] for n in range(0, len(initial), 7)]
        for d in dgrams:
            s.sendto(d, ("127.0.0.1", srv.port))
        time.sleep(0.3)
        assert srv.alive(), srv.stderr_text()[-2000:]
        resp, = h3_get("127.0.0.1", srv.port, srv.ca, [("GET", "/large.bin")])
        assert resp.status == 200 and bytes(resp.body) == LARGE
        wait_for(lambda: sum(v for k, v in scrape(srv).items()
                             if k.startswith("ringhttpd_udp_datagrams_received_total"))
                 >= len(dgrams), timeout=5)
    finally:
        s.close()


def _handshake_via_retry(first, second, ca):
    """An aioquic client whose first Initial goes to port `first`, which must answer with a
    Retry; the client's next flight (with the token) and the rest of the handshake go to port
    `second`, as an L4 balancer may send them, whose answers the client takes as from `first`
    (the balancer's one address). True when the handshake completes there."""
    from aioquic.quic.connection import QuicConnection
    from aioquic.quic.events import HandshakeCompleted
    from h3client import configuration
    conn = QuicConnection(configuration=configuration(ca))
    conn.connect(("127.0.0.1", first), now=time.monotonic())
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.2)
    try:
        for d, _ in conn.datagrams_to_send(now=time.monotonic()):
            s.sendto(d, ("127.0.0.1", first))
        retry = s.recv(65536)
        assert retry[0] & 0xf0 == 0xf0, "not a Retry"  # long header, type 3
        conn.receive_datagram(retry, ("127.0.0.1", first), now=time.monotonic())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for d, _ in conn.datagrams_to_send(now=time.monotonic()):
                s.sendto(d, ("127.0.0.1", second))
            try:
                d = s.recv(65536)
            except socket.timeout:
                t = conn.get_timer()
                if t is None:
                    return False  # closed: refused
                if t <= time.monotonic():
                    conn.handle_timer(now=time.monotonic())
                continue
            # as from the one address a balancer shows the client
            conn.receive_datagram(d, ("127.0.0.1", first), now=time.monotonic())
            while (ev := conn.next_event()) is not None:
                if isinstance(ev, HandshakeCompleted):
                    return True
        return False
    finally:
        s.close()


def test_retry_token_from_one_instance_is_accepted_by_another(make_server, h3root, tmp_path):
    """Issue 38: two instances given one --quic-secret-file accept each other's Retry tokens
    (a balancer may send a client's second Initial to another instance); an instance with a
    secret of its own refuses it (INVALID_TOKEN) and the handshake does not complete.
    --http3-max-conns 1: every new client must prove its address first."""
    secret = tmp_path / "quic.secret"
    secret.write_bytes(os.urandom(32))
    args = ("--http3-max-conns", "1", "--quic-secret-file", str(secret))
    a, b = make_server(h3root, args=args), make_server(h3root, args=args)
    c = make_server(h3root, args=("--http3-max-conns", "1"))
    assert _handshake_via_retry(a.port, b.port, a.ca)
    assert not _handshake_via_retry(a.port, c.port, a.ca)


def _rotate(current, previous, fresh):
    """An operator's rotation: the current secret becomes the previous one, a fresh one
    current (the files' names stay those the command line gave)."""
    previous.write_bytes(current.read_bytes())
    current.write_bytes(fresh)


def _hup_and_wait(srv, count):
    """SIGHUP, then until the server said its secrets were re-read `count` times in all."""
    srv.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: srv.stderr_text().count("HTTP/3 secrets re-read") >= count, timeout=10)


def _via_retry_soon(first, second, ca, want):
    """_handshake_via_retry until it gives `want`: a worker adopts a reload's secrets at its
    next timer run, just after the reload's log line. Bounded: a few tries."""
    for _ in range(5):
        if _handshake_via_retry(first, second, ca) == want:
            return want
        time.sleep(0.2)
    return not want


def test_quic_secrets_rotate_across_a_fleet_on_reload(make_server, h3root, tmp_path):
    """Issue 38: --quic-secret-file is repeatable (the first makes Retry tokens, every one is
    accepted) and the files are read again on SIGHUP, so a fleet rotates the secret as it
    rotates ticket keys: `cp current previous; openssl rand 32 > current; kill -HUP`. Two
    instances start with the same files; B rotates first: A's tokens (made with the old
    secret, now B's second) still pass at B, B's (the new one) do not at A until A rotates
    too. A file that cannot be used at a reload keeps the secrets in use, said in the log.
    --limit-conn: every new client must first prove its address by a Retry."""
    first = os.urandom(32)
    files = {}
    for name in ("a", "b"):
        cur, prev = tmp_path / f"{name}.current", tmp_path / f"{name}.previous"
        cur.write_bytes(first)
        prev.write_bytes(os.urandom(32))
        files[name] = (cur, prev)
    a, b = (make_server(h3root, args=("--limit-conn", "64", "--quic-secret-file", str(cur),
                                      "--quic-secret-file", str(prev)))
            for cur, prev in (files["a"], files["b"]))
    assert _handshake_via_retry(a.port, b.port, a.ca)
    assert _handshake_via_retry(b.port, a.port, a.ca)
    fresh = os.urandom(32)
    _rotate(*files["b"], fresh)
    _hup_and_wait(b, 1)
    assert _via_retry_soon(b.port, a.port, a.ca, False) is False  # A knows no new secret yet
    assert _handshake_via_retry(a.port, b.port, a.ca)  # the old one, B's second now
    _rotate(*files["a"], fresh)
    _hup_and_wait(a, 1)
    assert _via_retry_soon(b.port, a.port, a.ca, True)
    assert _handshake_via_retry(a.port, b.port, a.ca)
    # A secret file that cannot be used: the reload says so and keeps the secrets in use.
    files["b"][0].write_bytes(b"short")
    b.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "HTTP/3 secrets kept as they were" in b.stderr_text(), timeout=10)
    assert "needs at least 32 bytes" in b.stderr_text()
    assert _handshake_via_retry(a.port, b.port, a.ca)


def _reset_tokens(port, ca, want=3):
    """The (connection ID, stateless reset token) pairs the server at port gave an aioquic
    client: its first ID's (transport parameter) and NEW_CONNECTION_ID's."""
    from aioquic.asyncio.client import connect as quic_connect

    async def run():
        async with quic_connect("127.0.0.1", port, configuration=configuration(ca),
                                create_protocol=_Proto, wait_connected=True) as client:
            q = client._quic
            for _ in range(100):  # the server sends them once the handshake is confirmed
                if len(q._peer_cid_available) >= want:
                    break
                await asyncio.sleep(0.05)
            return [(c.cid, c.stateless_reset_token) for c in [q._peer_cid] + q._peer_cid_available]
    return asyncio.run(asyncio.wait_for(run(), 20))


def _reset_for(port, cid):
    """What the server at port answers a short-header packet for connection ID cid, which it
    does not hold: a stateless reset (RFC 9000 10.3), whose last 16 bytes are its token."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(1)
    try:
        for _ in range(3):
            s.sendto(bytes([0x40 | (os.urandom(1)[0] & 0x3f)]) + cid + os.urandom(48),
                     ("127.0.0.1", port))
            try:
                return s.recv(2048)
            except socket.timeout:
                continue
        return None
    finally:
        s.close()


def test_stateless_resets_agree_across_instances(make_server, h3root, tmp_path):
    """Issue 38: a client whose instance is gone (a restart, a balancer that moved it) is
    reset at once by whichever instance its packets reach, when they share the secret file:
    instance B, which never saw the connection, answers a packet for each of the IDs A gave
    with a stateless reset carrying the very token A gave for that ID; an instance with a
    secret of its own answers with a token the client does not know (it waits for its idle
    timer instead)."""
    secret = tmp_path / "quic.secret"
    secret.write_bytes(os.urandom(32))
    a = make_server(h3root, args=("--quic-secret-file", str(secret)))
    b = make_server(h3root, args=("--quic-secret-file", str(secret)))
    c = make_server(h3root)
    pairs = _reset_tokens(a.port, a.ca)
    assert len(pairs) >= 3
    for cid, token in pairs:
        assert len(token) == 16
        got = _reset_for(b.port, cid)
        assert got is not None and got[0] & 0xc0 == 0x40, got  # looks like a short header
        assert got[-16:] == token
        other = _reset_for(c.port, cid)
        assert other is not None and other[-16:] != token


def test_quic_secret_file_too_short_is_refused(make_server, h3root, tmp_path):
    secret = tmp_path / "quic.secret"
    secret.write_bytes(os.urandom(31))
    srv = make_server(h3root, args=("--quic-secret-file", str(secret)), ready=False)
    assert srv.proc.wait(timeout=10) == 1
    wait_for(lambda: "needs at least 32 bytes" in srv.stderr_text(), timeout=5)


def _frames(trace, name):
    """The frame types of the trace's events named `name` (qlog: packet_sent/received)."""
    out = []
    for ev in trace["events"]:
        if ev.get("name", "").endswith(name):
            out.extend(f.get("frame_type") for f in ev.get("data", {}).get("frames", []))
    return out


@pytest.mark.slow  # 64 MiB through aioquic, a Python QUIC stack: tens of seconds
def test_a_64_mib_download_survives_migration_and_rebinding(make_server, tmp_path):
    """Issue 35's untested case: one 64 MiB download whose client moves three times (to a new
    address with a new connection ID, then two NAT rebindings to new ports) arrives byte-exact
    on a server with two workers, and the server validates each new path: it sends
    PATH_CHALLENGE there and the client answers with PATH_RESPONSE; and until the client could
    have answered, the server sent to the new path at most 3x what came from it (RFC 9000
    8.2.1's amplification limit), counted per client socket."""
    root = tmp_path / "root"
    root.mkdir()
    data = random.Random(35).randbytes(64 << 20)
    (root / "big.bin").write_bytes(data)
    srv = make_server(root)
    from aioquic.quic.connection import QuicConnection
    from h3client import new_logger
    # Each new socket's own bytes (h3client._Counted), and at each PATH_CHALLENGE the client
    # reads what that socket had carried: all the server sent there before it could have the
    # answer.
    paths, at_challenge, clients = {}, [], []
    challenge = QuicConnection._handle_path_challenge_frame

    def seen_challenge(self, *args, **kwargs):
        for c in clients:
            key = getattr(c, "path_now", None)
            if c._quic is self and key in paths:
                at_challenge.append((key, tuple(paths[key])))
        return challenge(self, *args, **kwargs)
    import h3client
    proto = h3client._Proto

    class Tracked(proto):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            clients.append(self)
    logger = new_logger()
    QuicConnection._handle_path_challenge_frame = seen_challenge
    h3client._Proto = Tracked
    try:
        (resp, moved), = h3_get_moving("127.0.0.1", srv.port, srv.ca, "/big.bin",
                                       ["127.0.0.2", "127.0.0.1", "127.0.0.2"], timeout=240,
                                       logger=logger, paths=paths)
    finally:
        QuicConnection._handle_path_challenge_frame = challenge
        h3client._Proto = proto
    assert resp.status == 200 and len(resp.body) == len(data) and bytes(resp.body) == data
    assert [a[0] for a in moved] == ["::ffff:127.0.0.2", "::ffff:127.0.0.1", "::ffff:127.0.0.2"]
    trace, = logger.to_dict()["traces"]
    challenges = _frames(trace, "packet_received").count("path_challenge")
    responses = _frames(trace, "packet_sent").count("path_response")
    assert challenges >= 3 and responses >= 3, (challenges, responses)
    # Each new path's first challenge: until then the server had only what came from it
    firsts = {}
    for path, (sent, received) in at_challenge:
        firsts.setdefault(path, (sent, received))
    assert len(firsts) >= 3, at_challenge
    for path, (sent, received) in firsts.items():
        assert received <= 3 * sent, (path, sent, received)
