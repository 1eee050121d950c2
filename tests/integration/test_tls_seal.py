"""Records sealed by ringhttpd itself (`--tls-seal on`, issue 14): after the handshake OpenSSL
hands the write keys over as it would to kernel TLS, and tls.c seals every record (AES-GCM or
ChaCha20-Poly1305, TLS 1.2 and 1.3) from the plaintext where it lies. Real clients decrypting
bodies byte-exact (1 KiB, 1 MiB, 64 MiB, ranges) with each version and cipher prove the keys,
nonces and sequence numbers; also TLS 1.2 keep-alive and pipelining, resumption on a second connection
(its ticket sealed by us), close_notify on a clean close, and a client's KeyUpdate request,
which ends the connection with close_notify (the sealer does not derive new keys). The unit
tests (tests/unit/test_tls.c, tls_sealer_*) decrypt the records with an OpenSSL client."""
import contextlib
import os
import select
import socket
import ssl
import subprocess
import time

import pytest

from conftest import BIG, HELLO, StrictReader, request
from test_h2 import rss_kib
from test_tls import make_tls, pki, read_to_close_notify  # noqa: F401 (fixtures)

pytestmark = pytest.mark.schemes("http")  # TLS comes from make_tls, with its own options

SEAL = ("--tls-seal", "on")

CASES = [  # (curl's version options, cipher)
    (("--tls-max", "1.2", "--ciphers", "ECDHE-ECDSA-AES128-GCM-SHA256"), "AES128-GCM"),
    (("--tls-max", "1.2", "--ciphers", "ECDHE-ECDSA-AES256-GCM-SHA384"), "AES256-GCM"),
    (("--tls-max", "1.2", "--ciphers", "ECDHE-ECDSA-CHACHA20-POLY1305"), "CHACHA20"),
    (("--tlsv1.3", "--tls13-ciphers", "TLS_AES_128_GCM_SHA256"), "TLS_AES_128_GCM"),
    (("--tlsv1.3", "--tls13-ciphers", "TLS_AES_256_GCM_SHA384"), "TLS_AES_256_GCM"),
    (("--tlsv1.3", "--tls13-ciphers", "TLS_CHACHA20_POLY1305_SHA256"), "TLS_CHACHA20"),
]


@pytest.fixture(scope="module")
def bodies(tmp_path_factory):
    d = tmp_path_factory.mktemp("sealroot")
    files = {"1k.bin": os.urandom(1024), "1m.bin": os.urandom(1 << 20),
             "64m.bin": os.urandom(64 << 20)}
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d, files


@pytest.mark.parametrize("opts,cipher", CASES, ids=[c[1] for c in CASES])
def test_sealed_bodies_byte_exact(make_tls, bodies, tmp_path, opts, cipher):
    root, files = bodies
    t = make_tls(args=SEAL, root=root)
    names = ["1k.bin", "1m.bin", "64m.bin", "1k.bin"]  # one connection, kept alive
    outs = []
    for i, name in enumerate(names):
        outs += ["-o", str(tmp_path / f"{i}.out"), t.url(f"/{name}")]
    p = subprocess.run(["curl", "-sS", "--http1.1", "-w", "%{ssl_verify_result} %{num_connects}"
                        "\n", "--cacert", t.ca, "--resolve", f"localhost:{t.port}:{t.host}",
                        *opts, "-v", *outs], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert cipher.encode() in p.stderr, p.stderr[-2000:]
    for i, name in enumerate(names):
        assert (tmp_path / f"{i}.out").read_bytes() == files[name], name
    assert [line.split()[1] for line in p.stdout.decode().splitlines()] == ["1", "0", "0", "0"]
    for rng, (a, b) in (("1000-70999", (1000, 71000)), ("1048000-", (1048000, 1 << 20))):
        p = subprocess.run(["curl", "-sS", "--http1.1", "--cacert", t.ca, "--resolve",
                            f"localhost:{t.port}:{t.host}", *opts, "-r", rng, t.url("/1m.bin")],
                           capture_output=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert p.stdout == files["1m.bin"][a:b], rng


def test_sealed_tls12_keepalive_pipelining_and_ranges(make_tls):
    """TLS 1.3 goes through the sealer in all of test_tls.py (on by default); TLS 1.2, whose
    records carry an explicit nonce, here: several responses sealed back to back."""
    t = make_tls(args=SEAL)
    ctx = t.context(minimum_version=ssl.TLSVersion.TLSv1_2,
                    maximum_version=ssl.TLSVersion.TLSv1_2)
    ctx.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")
    with contextlib.closing(t.connect(ctx=ctx)) as s:
        assert s.version() == "TLSv1.2"
        rd = StrictReader(s)
        for _ in range(3):
            s.sendall(request("GET", "/hello.txt"))
            r = rd.read("GET")
            assert r.status == 200 and r.body == HELLO and r.keep_alive
        s.sendall(request("GET", "/hello.txt") + request("HEAD", "/big.bin") +
                  request("GET", "/big.bin") +
                  request("GET", "/big.bin", headers=[("Range", "bytes=1000-1999")]) +
                  request("GET", "/big.bin", headers=[("Range", "bytes=0-9,-10")]) +
                  request("GET", "/nope"))
        rs = [rd.read(m) for m in ("GET", "HEAD", "GET", "GET", "GET", "GET")]
        assert [r.status for r in rs] == [200, 200, 200, 206, 206, 404]
        assert rs[0].body == HELLO and rs[2].body == BIG and rs[3].body == BIG[1000:2000]
        assert BIG[:10] in rs[4].body and BIG[-10:] in rs[4].body


@pytest.mark.parametrize("version", ["-tls1_2", "-tls1_3"])
def test_sealed_session_resumes_on_a_second_connection(make_tls, tmp_path, version):
    """TLS 1.3's ticket is a record the sealer seals; TLS 1.2's abbreviated handshake has the
    server's Finished as the first record under the handed-over keys."""
    t = make_tls(args=SEAL)
    sess = tmp_path / "sess.pem"
    p = t.s_client(version, "-sess_out", sess, "-ign_eof", data=request("GET", "/", close=True))
    assert p.returncode == 0 and sess.exists() and b"HTTP/1.1 200" in p.stdout
    p = t.s_client(version, "-sess_in", sess, "-ign_eof",
                   data=request("GET", "/hello.txt", close=True))
    assert b"Reused, TLSv1." in p.stdout, p.stdout.decode(errors="replace")[:2000]
    assert HELLO in p.stdout


def test_sealed_close_notify_on_clean_close(make_tls):
    t = make_tls(args=SEAL)
    for path, body in (("/hello.txt", HELLO), ("/big.bin", BIG)):
        data = read_to_close_notify(t, path)
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(body)


def read_until(proc, want, timeout=20):
    """stdout of proc until it holds want (or the process ends)."""
    got = b""
    deadline = time.monotonic() + timeout
    while want not in got and time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            got += chunk
    return got


def after_key_updates(make_tls, key, times, then):
    """openssl s_client (TLS 1.3) to a sealing server: a first request answered, then `key`
    (b"K": a KeyUpdate asking for ours; b"k": one that does not) typed `times` times, then the
    request `then`; returns what s_client printed from there to its end."""
    t = make_tls(args=SEAL)
    proc = subprocess.Popen(["openssl", "s_client", "-connect", f"{t.host}:{t.port}", "-CAfile",
                             t.ca, "-tls1_3", "-crlf"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        proc.stdin.write(b"GET /hello.txt HTTP/1.1\nHost: localhost\n\n")
        proc.stdin.flush()
        out = read_until(proc, HELLO)
        assert HELLO in out, out[-2000:]
        out = b""
        for _ in range(times):
            proc.stdin.write(key + b"\n")
            proc.stdin.flush()
            out += read_until(proc, b"KEYUPDATE")
        try:
            proc.stdin.write(then)
            proc.stdin.flush()
        except BrokenPipeError:  # s_client has gone already: the server closed (as after 'K')
            pass
        out += read_until(proc, b"\x00never")  # to the end of the output: the server closed
        assert proc.wait(timeout=20) is not None
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return out


def test_sealed_key_update_request_ends_with_close_notify(make_tls):
    """openssl s_client's 'K' sends a KeyUpdate with update_requested: the sealer answers with
    close_notify (sealed with the keys the client still reads with) and the connection ends;
    the request sent after it gets no answer."""
    out = after_key_updates(make_tls, b"K", 1, b"GET /big.bin HTTP/1.1\nHost: localhost\n\n")
    assert b"HTTP/1.1 200" not in out, out[-2000:]
    assert b"closed" in out or b"DONE" in out, out[-2000:]


def test_sealed_client_key_update_without_request_keeps_serving(make_tls):
    """s_client's 'k': the client changes its own keys and asks nothing of ours; OpenSSL reads
    with the new keys, the sealer goes on with the same ones, and the next request is answered
    on the same connection."""
    out = after_key_updates(make_tls, b"k", 2, b"GET /big.bin HTTP/1.1\nHost: localhost\n"
                            b"Connection: close\n\n")
    assert b"HTTP/1.1 200" in out and BIG[-64:] in out, out[-2000:]


# ---- an idle connection's sealer (tls_conn_idle): its cipher context goes, the key stays ----


@pytest.mark.parametrize("version", ["TLSv1_2", "TLSv1_3"])
def test_sealed_keepalive_across_idle_periods_and_resumption_after(make_tls, version):
    """The sealer frees its cipher context when the connection goes idle (twice per 2 s at
    most) and when it has rested 2 s (tls_xport.c's rest timer); each next record remakes it from
    the key kept. Responses right after, in a burst, and after a rest of 3.5 s all decrypt
    byte-exact; the session of that connection still resumes on a second one afterwards."""
    t = make_tls(args=SEAL)
    v = getattr(ssl.TLSVersion, version)
    ctx = t.context(minimum_version=v, maximum_version=v)
    with contextlib.closing(t.connect(ctx=ctx)) as s:
        assert s.version() == version.replace("_", ".")
        rd = StrictReader(s, timeout=10)
        for pause in (0, 0, 0, 0, 3.5, 0, 3.5):
            time.sleep(pause)
            s.sendall(request("GET", "/hello.txt") + request("GET", "/big.bin"))
            a, b = rd.read("GET"), rd.read("GET")
            assert a.body == HELLO and b.body == BIG and b.keep_alive
        session = s.session
    s = ctx.wrap_socket(socket.create_connection((t.host, t.port), timeout=5),
                        server_hostname="localhost", session=session)
    with contextlib.closing(s):
        s.sendall(request("GET", "/hello.txt"))
        assert StrictReader(s).read("GET").body == HELLO
        assert s.session_reused


def idle_bytes_per_connection(t, n):
    """Server RSS growth per connection over n TLS 1.3 connections that each made one
    keep-alive request and then rested past the rest timer (bench/idle_rss.py's method)."""
    ctx = t.context(minimum_version=ssl.TLSVersion.TLSv1_3)
    ctx.set_alpn_protocols(["http/1.1"])

    def one():
        s = t.connect(ctx=ctx)
        s.sendall(request("GET", "/hello.txt"))
        assert StrictReader(s).read("GET").body == HELLO
        return s

    socks = [one()]  # warm-up: the first buffers and caches
    try:
        time.sleep(0.5)
        before = rss_kib(t.srv)
        socks += [one() for _ in range(n)]
        time.sleep(3.5)
        return (rss_kib(t.srv) - before) * 1024 / n
    finally:
        for s in socks:
            s.close()


def test_an_idle_sealed_connection_holds_no_more_than_one_openssl_seals(make_tls):
    """The saving that tls_conn_idle makes, guarded: a sealing connection took OpenSSL's write
    keys into a cipher context of its own (1.2 KB: EVP_CIPHER_CTX, key schedule, GHASH table)
    beside OpenSSL's, which stays; held while idle, it made an idle TLS connection ~1.1 KB
    larger than with --tls-seal off (measured: 18.3 KB against 17.2 KB; now both ~17.2 KB)."""
    per = {}
    for seal in ("off", "on"):
        t = make_tls(args=("--tls-seal", seal, "-t", "1", "--keepalive-timeout", "60"))
        per[seal] = idle_bytes_per_connection(t, 400)
        t.srv.stop()
    assert per["on"] < per["off"] + 512, per
