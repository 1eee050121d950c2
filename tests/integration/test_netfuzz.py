"""Mutation fuzzing over the network: valid requests (ranges, conditionals, listings, bodies,
Expect, chunked, OPTIONS *, traversal) are mutated, concatenated, split at random points and
sometimes cut off with a reset. The server must neither crash, hang nor report a sanitizer
error (make_server's teardown checks exit 0 and stderr), and must serve correctly afterwards.
Bounded by a connection count and fixed seeds, so a failure replays."""
import random
import socket
import struct

import pytest

from conftest import HELLO, connect, fetch

SEEDS = [
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-10,100-200,5000-\r\n\r\n",
    b"HEAD /sub HTTP/1.0\r\n\r\n",
    b"GET /sub/ HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n"
    b"If-None-Match: \"x\", W/\"y\"\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n",
    b"POST /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
    b"GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"0\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br;q=0.5, gzip, *;q=0\r\n"
    b"If-Range: \"abc\"\r\nRange: bytes=-5\r\n\r\n",
]


def mutate(rng, data):
    b = bytearray(data)
    for _ in range(rng.randint(0, 6)):
        op = rng.random()
        i = rng.randrange(len(b) + 1)
        if op < 0.3 and b:
            b[min(i, len(b) - 1)] = rng.randrange(256)
        elif op < 0.5:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op < 0.7 and b:
            del b[i:i + rng.randint(1, 8)]
        elif op < 0.85:
            b[i:i] = rng.choice(SEEDS)
        else:
            b[i:i] = b"\r\n"
    return bytes(b)


@pytest.mark.parametrize("seed", [1, 2])
def test_mutated_requests_never_break_the_server(make_server, docroot, seed):
    (docroot / "sub").mkdir(exist_ok=True)
    server = make_server(docroot, args=["--autoindex", "--header-timeout", "2",
                                        "--keepalive-timeout", "2"])
    rng = random.Random(seed)
    for _ in range(150):
        data = b"".join(mutate(rng, rng.choice(SEEDS)) for _ in range(rng.randint(1, 4)))
        s = connect(server, timeout=2)
        try:
            while data:
                k = rng.randint(1, len(data))
                s.sendall(data[:k])
                data = data[k:]
            if rng.random() < 0.2:  # abort: RST instead of FIN
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                s.settimeout(0.3)
                try:
                    while s.recv(65536):
                        pass
                except OSError:
                    pass
        except OSError:
            pass  # the server may close on a malformed request while we still write
        finally:
            s.close()
        assert server.alive(), server.stderr_text()[-2000:]
    assert fetch(server, "/hello.txt").body == HELLO
