"""QUIC's first packets, as src/quic/quic.c must take them from anyone (issue 35.1, after the
audit of ngtcp2 0.12.1's receive path): version negotiation for a version we do not speak with
the longest connection IDs a version may have, and an Initial whose token is not ours treated as
one without a token. Raw datagrams from a local socket, and aioquic's real Initials; both
engines (the engine fixture), HTTP/3 on the TLS port."""
import socket
import struct
import time

import pytest

from h3client import configuration

pytestmark = pytest.mark.schemes("https")


@pytest.fixture(scope="module")
def h3root(tmp_path_factory):
    root = tmp_path_factory.mktemp("quicroot")
    (root / "index.html").write_text("index\n")
    return root


def _recv_all(s, until, timeout=5):
    """Datagrams on s until until(list of them) holds or the bounded wait ends."""
    got, deadline = [], time.monotonic() + timeout
    s.settimeout(0.2)
    while not until(got) and time.monotonic() < deadline:
        try:
            got.append(s.recv(65536))
        except socket.timeout:
            pass
    return got


def _initial(cid_length=8, token=b""):
    """A real client Initial (aioquic's, 1200 bytes) and the ID the server's answer goes to;
    cid_length sets both of the client's IDs (the first destination's among them)."""
    from aioquic.quic.connection import QuicConnection
    from pathlib import Path
    cfg = configuration(Path(__file__))  # never verified
    cfg.connection_id_length = cid_length
    cfg.token = token
    conn = QuicConnection(configuration=cfg)
    conn.connect(("127.0.0.1", 1), now=time.monotonic())
    d, = [d for d, _ in conn.datagrams_to_send(now=time.monotonic())]
    return d, conn.host_cid


def _answered_to(cid):
    return lambda d: d[0] & 0x80 and d[6:6 + d[5]] == cid


def test_version_negotiation_answers_the_longest_connection_ids(make_server, h3root):
    """RFC 9000 17.2.1: in a version we do not know, either ID may be up to 255 bytes, and the
    Version Negotiation packet echoes both. The old build answered with a 256-byte buffer, too
    small for two long IDs, so such a client heard nothing; IDs of 20 bytes were answered."""
    srv = make_server(h3root)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for dcid, scid in ((b"\x11" * 20, b"\x22" * 20), (b"\x33" * 255, b"\x44" * 255),
                           (b"\x55" * 200, b"")):
            head = b"\xc0" + struct.pack(">I", 0x1a2a3a4a) + bytes([len(dcid)]) + dcid + \
                bytes([len(scid)]) + scid
            s.sendto(head + b"\x00" * (1200 - len(head)), ("127.0.0.1", srv.port))
            vn = _recv_all(s, lambda got: any(d[1:5] == b"\0\0\0\0" for d in got))
            vn = [d for d in vn if d[1:5] == b"\0\0\0\0"]
            assert vn, f"no version negotiation for IDs of {len(dcid)} and {len(scid)} bytes"
            d = vn[0]
            # The answer's destination is the client's source ID and its source the client's
            # destination ID (17.2.1), then the versions we speak: QUIC v1.
            n = d[5]
            assert d[6:6 + n] == scid
            m = d[6 + n]
            assert d[7 + n:7 + n + m] == dcid
            assert d[7 + n + m:] == struct.pack(">I", 1)
        assert srv.alive()
    finally:
        s.close()


def test_an_initial_with_a_token_not_ours_needs_an_eight_byte_id(make_server, h3root):
    """RFC 9000 7.2 and 8.1.3: a client's first Initial has a destination ID of 8 bytes or
    more, and a token the server cannot use counts as none (we issue no NEW_TOKEN; a Retry
    token is checked on its own). ngtcp2_accept checks the length only when there is no token,
    so the old build made a connection for a 4-byte ID behind a bogus token and answered it.
    Now it is dropped: the same client with an 8-byte ID, sent after it from the same socket
    to a server of one worker (so in that order), is answered and the first never is."""
    srv = make_server(h3root, args=("-t", "1"))
    short, short_cid = _initial(cid_length=4, token=b"\x00bogus-token")
    good, good_cid = _initial(cid_length=8, token=b"\x00bogus-token")
    plain, plain_cid = _initial(cid_length=8)
    assert short[6:6 + short[5]] != good[6:6 + good[5]] and short[5] == 4
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(short, ("127.0.0.1", srv.port))
        s.sendto(good, ("127.0.0.1", srv.port))
        s.sendto(plain, ("127.0.0.1", srv.port))
        both = lambda got: all(any(_answered_to(c)(d) for d in got)  # noqa: E731
                               for c in (good_cid, plain_cid))
        got = _recv_all(s, both)
        assert both(got), "an 8-byte ID (with the bogus token, or none) was not answered"
        # The three were read in one turn and answered in one flush (newest connection first,
        # io_uring's sends going out together): an answer to the first comes with the others.
        got += _recv_all(s, lambda got: any(_answered_to(short_cid)(d) for d in got), timeout=2)
        assert not any(_answered_to(short_cid)(d) for d in got), "a 4-byte ID was answered"
        assert srv.alive()
    finally:
        s.close()
