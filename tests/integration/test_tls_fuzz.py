"""A network fuzz pass over TLS (issue 14), on both engines: test_netfuzz's mutated requests sent
inside valid TLS sessions, and real ClientHellos mutated (bytes changed, inserted, deleted, cut)
sent raw to the TLS port. The server must neither crash, hang nor report a sanitizer error
(make_server's teardown checks), and must serve over TLS afterwards. Fixed seeds: a failure
replays."""
import concurrent.futures
import contextlib
import random
import socket
import ssl
import struct

import pytest

from conftest import HELLO, request, StrictReader
from test_netfuzz import SEEDS, mutate
from test_tls import client_hello, make_tls, pki  # noqa: F401 (fixtures)


def send_split(rng, s, data):
    while data:
        k = rng.randint(1, len(data))
        s.sendall(data[:k])
        data = data[k:]


def drain(s, timeout=0.3):
    s.settimeout(timeout)
    with contextlib.suppress(OSError, ssl.SSLError):
        while s.recv(65536):
            pass


def healthy(t):
    with contextlib.closing(t.connect()) as s:
        s.sendall(request("GET", "/hello.txt", close=True))
        assert StrictReader(s).read("GET").body == HELLO


@pytest.mark.parametrize("seed", [1, 2])
def test_mutated_requests_inside_tls_sessions(make_tls, docroot, seed):
    (docroot / "sub").mkdir(exist_ok=True)
    t = make_tls(args=["--autoindex", "--header-timeout", "2", "--keepalive-timeout", "2"])
    rng = random.Random(seed)
    for _ in range(80):
        data = b"".join(mutate(rng, rng.choice(SEEDS)) for _ in range(rng.randint(1, 4)))
        s = t.connect(timeout=2)
        try:
            send_split(rng, s, data)
            if rng.random() < 0.2:  # abort: RST instead of close_notify and FIN
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                drain(s)
        except (OSError, ssl.SSLError):
            pass  # the server may close on a malformed request while we still write
        finally:
            s.close()
        assert t.srv.alive(), t.srv.stderr_text()[-2000:]
    healthy(t)


@pytest.mark.parametrize("seed", [1, 2])
def test_mutated_client_hellos(make_tls, seed):
    """120 mutated ClientHellos, made in order from the seed; they are sent by 8 clients at a
    time (each waits up to 0.2 s for an answer: one after the other took 12 s a seed)."""
    t = make_tls(args=["--header-timeout", "2"])
    hello = client_hello(t)
    rng = random.Random(seed)
    cases = []
    for i in range(120):
        b = bytearray(hello)
        for _ in range(rng.randint(1, 4)):
            j = rng.randrange(len(b))
            op = rng.random()
            if op < 0.6:
                b[j] = rng.randrange(256)
            elif op < 0.8:
                b[j:j] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
            else:
                del b[j:j + rng.randint(1, 16)]
        if rng.random() < 0.2:
            b = b[:rng.randrange(1, len(b))]
        cases.append((bytes(b), seed * 1000 + i))

    def one(case):
        data, sub = case
        r = random.Random(sub)
        with contextlib.closing(socket.create_connection((t.host, t.port), timeout=2)) as s:
            with contextlib.suppress(OSError):
                send_split(r, s, data)
                if r.random() < 0.2:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    drain(s, 0.2)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for _ in pool.map(one, cases):
            assert t.srv.alive(), t.srv.stderr_text()[-2000:]
    healthy(t)
