"""Writes fuzz_quic's seeds (tests/fuzz/seeds/quic/): a 0-byte datagram, real client Initials
(aioquic's), a whole handshake's client flight captured from aioquic client and server talking
in memory (its later packets do not decrypt at our endpoint, whose keys differ, but they are
real QUIC), the Initial as a GRO train, truncations, and records for fuzz_quic's own client
(handshakes, requests, NAT rebindings, Retry, corruption, an idle timeout, a drain). Input
format: tests/fuzz/fuzz_quic.c.
Run: .venv/bin/python tests/fuzz/quic_seeds.py (it makes a throwaway certificate)."""

import os
import pathlib
import struct
import subprocess
import sys
import tempfile

from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection

OUT = pathlib.Path(__file__).resolve().parent / "seeds" / "quic"
CLIENT = ("127.0.0.1", 40000)  # fuzz_quic's peer 0
SERVER = ("127.0.0.1", 4433)


def record(data, peer=0, tick=None, seg=None, noflush=False, op=0):
    """A raw record (a datagram from address peer; seg: a GRO train), or with op 0x40 a client
    record (seg: the offset of the byte flipped in the client's datagrams)."""
    op |= peer | (8 if noflush else 0)
    out = b""
    if tick is not None:
        op |= 0x10
        out += bytes([tick])
    if seg is not None:
        op |= 4
        out += struct.pack(">H", seg)
    return bytes([op]) + out + struct.pack(">H", len(data)) + data


def client(data=b"", peer=0, fin=False, corrupt=None, tick=None):
    """A client record: fuzz_quic's own ngtcp2 client (made at the first), data on a new
    request stream once its handshake is done."""
    return record(data, peer, tick, corrupt, op=0x40 | (0x80 if fin else 0))


def seed(name, recs, config=0x03 | 0x0c):  # retry above 1000, 64 connections
    (OUT / name).write_bytes(bytes([config]) + b"".join(recs))


def handshake(tmp):
    key, crt = tmp / "key.pem", tmp / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-keyout", str(key), "-out", str(crt)], check=True, capture_output=True)
    ccfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost",
                             verify_mode=0)
    scfg = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
    scfg.load_cert_chain(str(crt), str(key))
    client = QuicConnection(configuration=ccfg)
    now = 1.0
    client.connect(SERVER, now=now)
    server = None
    flight = []
    h3 = None
    for _ in range(20):
        now += 0.01
        sent = [d for d, _ in client.datagrams_to_send(now=now)]
        flight += sent
        if server is None and sent:
            odcid = client.original_destination_connection_id
            server = QuicConnection(configuration=scfg, original_destination_connection_id=odcid)
        for d in sent:
            server.receive_datagram(d, CLIENT, now=now)
        for d, _ in server.datagrams_to_send(now=now):
            client.receive_datagram(d, SERVER, now=now)
        while client.next_event():
            pass
        if h3 is None and client._handshake_complete:
            h3 = H3Connection(client)
            sid = client.get_next_available_stream_id()
            h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                  (b":authority", b"localhost"), (b":path", b"/")], end_stream=True)
    return flight


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        flight = handshake(pathlib.Path(t))
    initial = flight[0]
    seed("empty", [record(b"")])
    seed("empty_then_initial", [record(b""), record(initial)])
    seed("initial", [record(initial)])
    seed("initial_retry", [record(initial)], config=0x00 | 0x0c)
    seed("initial_two_workers", [record(initial)], config=0x13)
    seed("handshake_flight", [record(d, tick=1) for d in flight])
    seed("initial_gro_train", [record(initial * 3, seg=len(initial))])
    seed("initial_from_two_addresses", [record(initial), record(initial, peer=2)])
    seed("initial_then_timeout", [record(initial), record(b"", tick=200)])
    for n in (1, 7, 43, 200, 1199):
        seed(f"initial_cut_{n}", [record(initial[:n])])
    seed("short_header", [record(b"\x40" + initial[6:6 + 18] + b"\x00" * 40)])
    req = b"GET / HTTP/1.1\r\n\r\n"
    seed("client_handshake", [client(), client()])
    seed("client_requests", [client(), client(req, fin=True), client(b"x" * 4000, fin=True),
                             client(b"y" * 100, fin=False), client(tick=40)])
    seed("client_rebinds", [client(), client(req, fin=True), client(b"z" * 3000, peer=1, fin=True),
                            client(peer=2, tick=20), client(b"w" * 10, peer=3, fin=True)])
    seed("client_retry", [client(), client(req, fin=True)], config=0x00 | 0x0c)
    seed("client_corrupted", [client(), client(req, fin=True, corrupt=30)])
    seed("client_idle_timeout", [client(), client(req, fin=True), client(tick=255),
                                 client(req, fin=True)])
    seed("client_two_workers_drain", [client(), client(req, fin=True), client(b"q" * 2000)],
         config=0x13)
    print(f"{len(flight)} client datagrams in the flight; seeds in {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
