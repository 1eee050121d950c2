"""A scripted HTTP/3 client on aioquic, for test_h3.py: one QUIC connection, requests on it
(in order or all at once), each answer as (status, [(name, value)], body bytes). Every wait is
bounded by `timeout`."""

import asyncio
import socket
import ssl

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated
from aioquic.quic.logger import QuicLogger


class Response:
    def __init__(self):
        self.status = None
        self.headers = []
        self.body = bytearray()
        self.reset = None

    def header(self, name):
        """The first value of field `name` (lower case), or None."""
        for n, v in self.headers:
            if n == name:
                return v
        return None

    def __repr__(self):
        return f"<h3 {self.status} {self.headers} {len(self.body)} bytes>"


class _H3(H3Connection):
    """aioquic checks Content-Length against the body of every response, also of one to
    HEAD, which has no body (RFC 9110 9.3.2): the check is skipped for HEAD streams."""

    def __init__(self, quic):
        super().__init__(quic)
        self.head_streams = set()

    def _check_content_length(self, stream):
        if stream.stream_id not in self.head_streams:
            super()._check_content_length(stream)


class _Proto(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = _H3(self._quic)
        self.pending = {}
        self.terminated = None

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            self.terminated = event
            for resp, fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(f"connection closed: {event}"))
        for ev in self.h3.handle_event(event):
            entry = self.pending.get(getattr(ev, "stream_id", None))
            if entry is None:
                continue
            resp, fut = entry
            if isinstance(ev, HeadersReceived):
                if resp.status is None:
                    resp.headers = [(n.decode(), v.decode()) for n, v in ev.headers]
                    resp.status = int(resp.header(":status"))
            elif isinstance(ev, DataReceived):
                resp.body += ev.data
            if getattr(ev, "stream_ended", False) and not fut.done():
                fut.set_result(resp)

    def send_control(self, frame_type, payload):
        """A frame on our control stream (after SETTINGS), as a browser sends PRIORITY_UPDATE."""
        from aioquic.h3.connection import encode_frame
        self._quic.send_stream_data(self.h3._local_control_stream_id,
                                    encode_frame(frame_type, payload))
        self.transmit()

    async def request(self, method, path, headers=(), authority="localhost", body=b""):
        sid = self._quic.get_next_available_stream_id()
        fields = [(b":method", method.encode()), (b":scheme", b"https"),
                  (b":authority", authority.encode()), (b":path", path.encode())]
        fields += [(n.encode().lower(), v.encode()) for n, v in headers]
        if method == "HEAD":
            self.h3.head_streams.add(sid)
        self.h3.send_headers(sid, fields, end_stream=not body)
        if body:
            self.h3.send_data(sid, body, end_stream=True)
        fut = asyncio.get_running_loop().create_future()
        resp = Response()
        self.pending[sid] = (resp, fut)
        self.transmit()
        return await fut


def data_order(client):
    """A list that from now on gets the stream ID of each piece of stream data the client
    receives, in the order received (what the server's scheduler sent, where nothing is lost)."""
    from aioquic.quic.events import StreamDataReceived
    order, old = [], client.quic_event_received

    def hook(ev):
        if isinstance(ev, StreamDataReceived) and ev.data:
            order.append(ev.stream_id)
        old(ev)
    client.quic_event_received = hook
    return order


def configuration(ca, server_name="localhost", logger=None):
    """ca None: the server's certificate is not checked (one that does not name server_name)."""
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=server_name,
                            quic_logger=logger)
    if ca is None:
        cfg.verify_mode = ssl.CERT_NONE
    else:
        cfg.load_verify_locations(str(ca))
    return cfg


async def _run(host, port, ca, reqs, parallel, timeout, server_name, logger, authority,
               control):
    cfg = configuration(ca, server_name, logger)
    async with connect(host, port, configuration=cfg, create_protocol=_Proto,
                       wait_connected=True) as client:
        for frame_type, payload in control:
            client.send_control(frame_type, payload)
        async def one(r):
            method, path, *rest = r
            headers = rest[0] if rest else ()
            host = rest[1] if len(rest) > 1 else authority or server_name
            return await client.request(method, path, headers, host)
        if parallel:
            coros = [one(r) for r in reqs]
            return await asyncio.wait_for(asyncio.gather(*coros), timeout)
        out = []
        for r in reqs:
            out.append(await asyncio.wait_for(one(r), timeout))
        return out


def h3_get(host, port, ca, reqs, parallel=False, timeout=20, server_name="localhost",
           logger=None, authority=None, control=()):
    """reqs: [(method, path[, [(name, value)...][, authority]])]; their Responses, on one
    connection (authority: the request's own :authority, else `authority` or server_name).
    control: [(frame type, payload)] sent on the control stream before the requests."""
    return asyncio.run(asyncio.wait_for(
        _run(host, port, ca, reqs, parallel, timeout + 5, server_name, logger, authority,
             control),
        timeout + min(10, timeout)))  # a short timeout: a server expected not to answer


def new_logger():
    return QuicLogger()


def insecure_context():
    return ssl.create_default_context()


def qpack_int(value, prefix_bits, first=0):
    """An integer with an N-bit prefix (RFC 9204 4.1.1, RFC 7541 5.1); first: the bits above."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def h3_frame(frame_type, payload):
    from aioquic.h3.connection import encode_frame
    return encode_frame(frame_type, payload)


def h3_raw(host, port, ca, script, timeout=20, server_name="localhost"):
    """Runs `await script(client)` on one connected aioquic client (a _Proto: client._quic is
    the QUIC connection, client.h3 the HTTP/3 one, client.terminated the close, if any, and
    client.request() asks as usual); returns what script returns."""
    async def run():
        cfg = configuration(ca, server_name)
        async with connect(host, port, configuration=cfg, create_protocol=_Proto,
                           wait_connected=True) as client:
            return await asyncio.wait_for(script(client), timeout)
    return asyncio.run(asyncio.wait_for(run(), timeout + 10))


async def wait_closed(client, timeout):
    """Until the peer closes the connection (client.terminated) or timeout seconds pass."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while client.terminated is None and loop.time() < end:
        await asyncio.sleep(0.05)
    return client.terminated


class _Counted(asyncio.DatagramProtocol):
    """Between a socket and the client: counts what this socket alone carries, [sent,
    received] in paths[id], and at each PATH_CHALLENGE the client reads from it (on_challenge)
    what it had carried until then."""

    def __init__(self, client, paths, key):
        self.client, self.paths, self.key = client, paths, key
        paths[key] = [0, 0]

    def connection_made(self, transport):
        real, st = transport.sendto, self.paths[self.key]

        def sendto(data, addr=None):
            st[0] += len(data)
            return real(data, addr)
        transport.sendto = sendto
        self.client.connection_made(transport)

    def datagram_received(self, data, addr):
        self.paths[self.key][1] += len(data)
        self.client.path_now = self.key
        self.client.datagram_received(data, addr)

    def error_received(self, exc):
        self.client.error_received(exc)

    def connection_lost(self, exc):
        pass  # the old socket closes under a live connection


async def rebind(client, host, new_cid, paths=None):
    """The client's next datagrams leave from a new socket on `host` (a new port: NAT
    rebinding; with new_cid, a new connection ID too: migration), the connection the same.
    paths: a dict in which the new socket's own byte counts are kept (_Counted)."""
    loop = asyncio.get_running_loop()
    old = client._transport
    # connect() talks from a dual-stack socket to IPv4-mapped addresses: so does the new one.
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind(("::ffff:" + host, 0))
    make = (lambda: client) if paths is None else \
        (lambda: _Counted(client, paths, sock.getsockname()))
    new, _ = await loop.create_datagram_endpoint(make, sock=sock)
    assert client._transport is new, "connection_made ran"
    old.close()
    if new_cid:
        client.change_connection_id()
    client._quic.send_ping(0)  # a packet from the new address now, not at the next ACK
    client.transmit()


async def _moving(host, port, ca, path, hosts, timeout, logger=None, paths=None):
    cfg = configuration(ca, logger=logger)
    async with connect(host, port, configuration=cfg, create_protocol=_Proto,
                       wait_connected=True) as client:
        task = asyncio.ensure_future(client.request("GET", path))
        while not client.pending and not task.done():
            await asyncio.sleep(0)
        stream = max(client.pending)
        resp = client.pending[stream][0]
        moved = []
        for i, h in enumerate(hosts):
            # Wait until the body is (i+1)/(len+1) of the way, by its announced length.
            while not task.done():
                length = int(resp.header("content-length") or 1 << 62)
                if len(resp.body) * (len(hosts) + 1) >= length * (i + 1):
                    break
                await asyncio.sleep(0.002)
            if task.done():
                break
            await rebind(client, h, new_cid=i == 0, paths=paths)
            moved.append(client._transport.get_extra_info("sockname"))
        await asyncio.wait_for(task, timeout)
        return task.result(), moved


def h3_get_moving(host, port, ca, path, hosts, conns=1, timeout=20, logger=None, paths=None):
    """GETs path on `conns` connections at once; each moves to a new socket on hosts[i] as
    its body passes (i+1)/(len(hosts)+1) of the way. Returns [(Response, [local address
    after each move])]. logger: a QuicLogger for the connections' qlog."""
    async def all_of():
        return await asyncio.gather(*[_moving(host, port, ca, path, hosts, timeout, logger, paths)
                                      for _ in range(conns)])
    return asyncio.run(asyncio.wait_for(all_of(), timeout + 10))


class _Bare(QuicConnectionProtocol):
    """A QUIC connection with no HTTP/3 layer of its own: the script writes every stream byte
    (so it may break HTTP/3's rules), and what the server sends is kept per stream."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.data = {}       # stream id -> bytearray received
        self.ended = set()   # streams whose FIN came
        self.resets = {}     # stream id -> RESET_STREAM error code
        self.stops = {}      # stream id -> STOP_SENDING error code
        self.terminated = None

    def quic_event_received(self, event):
        from aioquic.quic.events import StopSendingReceived, StreamDataReceived, StreamReset
        if isinstance(event, ConnectionTerminated):
            self.terminated = event
        elif isinstance(event, StreamDataReceived):
            self.data.setdefault(event.stream_id, bytearray()).extend(event.data)
            if event.end_stream:
                self.ended.add(event.stream_id)
        elif isinstance(event, StreamReset):
            self.resets[event.stream_id] = event.error_code
        elif isinstance(event, StopSendingReceived):
            self.stops[event.stream_id] = event.error_code

    def uni(self, data, end=False):
        """A new unidirectional stream carrying data: its ID."""
        sid = self._quic.get_next_available_stream_id(is_unidirectional=True)
        self._quic.send_stream_data(sid, data, end_stream=end)
        self.transmit()
        return sid

    def send(self, sid, data, end=False):
        self._quic.send_stream_data(sid, data, end_stream=end)
        self.transmit()

    async def until(self, cond, timeout):
        """Polls cond() until it holds, the connection ends, or timeout seconds pass."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while not cond() and self.terminated is None and loop.time() < end:
            await asyncio.sleep(0.01)
        return cond()


def h3_bare(host, port, ca, script, timeout=10):
    """Runs `await script(client)` on a connected _Bare client (ALPN h3); its result."""
    async def run():
        cfg = configuration(ca)
        async with connect(host, port, configuration=cfg, create_protocol=_Bare,
                           wait_connected=True) as client:
            return await asyncio.wait_for(script(client), timeout)
    return asyncio.run(asyncio.wait_for(run(), timeout + 10))


def h3_frames(data):
    """[(type, payload)] of the whole frames in data (a stream's bytes after its type)."""
    from aioquic.buffer import Buffer
    out, buf = [], Buffer(data=bytes(data))
    while not buf.eof():
        try:
            t = buf.pull_uint_var()
            n = buf.pull_uint_var()
            out.append((t, buf.pull_bytes(n)))
        except Exception:  # a frame cut short: the rest has not come
            break
    return out
