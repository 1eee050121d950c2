"""Kernel TLS (issue 14): after the handshake a TLS connection's send side goes to the kernel.

Where the kernel has the `tls` ULP, OpenSSL hands the write keys over at the switch to the
application keys; the server then sends responses as it does in cleartext (headers from memory,
file bodies by sendfile or splice, zero-copy) and the kernel seals the records; OpenSSL's own
records after the switch (a TLS 1.3 ticket, TLS 1.2's Finished, close_notify) go with their
content type. Receiving stays in user space. The kernel's own counters (/proc/net/tls_stat:
TlsTxSw, TlsCurrTxSw) show it did the sending, and `--ktls off` shows it did not.

This host's kernel has no `tls` module: every test here is marked `vm` and skips unless the
ULP is there; `make test-vm` runs them under Debian's 6.1 kernel with tls.ko loaded. The
parts that need no kernel (the keys and sequence numbers OpenSSL hands over, proved by
decrypting records sealed with them) are unit tests (tests/unit/test_tls.c, tls_ktls_*).
"""
import contextlib
import hashlib
import os
import re
import struct
import subprocess
import time
import urllib.request

import pytest

from conftest import BIG, HELLO, StrictReader, request, wait_for
from test_probe import _kernel_has_tls_ulp, tls_ulp_socket
from test_tls import make_tls, pki, read_to_close_notify  # noqa: F401 (make_tls, pki: fixtures)

SOL_TLS, TLS_TX = 282, 1


def _kernel_seals_aes_gcm():
    """Whether the kernel takes AES-128-GCM keys (TLS_TX) on a loopback socket with the ULP: the
    ULP can be there while the crypto modules cannot be loaded (a VM without modprobe), and then
    the server rightly stays in user space (its probe tries the same)."""
    with tls_ulp_socket() as s:
        if s is None:
            return False
        try:
            # struct tls12_crypto_info_aes_gcm_128: version, cipher_type, iv, key, salt, rec_seq
            s.setsockopt(SOL_TLS, TLS_TX, struct.pack("<HH", 0x0304, 51) + bytes(36))
            return True
        except OSError:
            return False


ULP = _kernel_has_tls_ulp()
SEALS = ULP and _kernel_seals_aes_gcm()
NO_ULP = ("this kernel has no tls ULP (kernel TLS): make test-vm runs these under Debian's 6.1 "
          "kernel with tls.ko")
pytestmark = [
    pytest.mark.vm,
    pytest.mark.skipif(not ULP, reason=NO_ULP),
]
# Every test but the last needs the kernel to seal AES-GCM and ChaCha20-Poly1305.
seals = pytest.mark.skipif(not SEALS, reason=NO_ULP if not ULP else "the tls ULP is there but "
                           "TLS_TX refuses AES-GCM keys (its crypto modules could not be loaded)")


def tls_stat():
    """/proc/net/tls_stat as {name: int} (TlsTxSw: software TX sessions made so far, ...)."""
    with open("/proc/net/tls_stat") as f:
        return {k: int(v) for k, v in (line.split() for line in f if line.strip())}


def metric(t, name):
    m = re.search(r"metrics on http://([^/\s]+)/metrics", t.srv.stderr_text())
    text = urllib.request.urlopen(f"http://{m.group(1)}/metrics", timeout=10).read().decode()
    return sum(float(v) for v in re.findall(rf"^{name}{{[^}}]*}} (\S+)$", text, re.M))


def curl_sha(t, path, *args):
    """sha256 of the body curl downloads (with curl's own TLS options), and curl's status."""
    script = 'ca=$0 to=$1; shift; curl -sS --fail --cacert "$ca" --resolve "$to" "$@" | sha256sum'
    p = subprocess.run(["sh", "-c", script, t.ca, f"localhost:{t.port}:{t.host}", *args,
                        t.url(path)], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert not p.stderr, p.stderr
    return p.stdout.split()[0].decode()


CIPHERS = [
    ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256"),
    ("1.2", "ECDHE-ECDSA-AES256-GCM-SHA384"),
    ("1.2", "ECDHE-ECDSA-CHACHA20-POLY1305"),
    ("1.3", "TLS_AES_128_GCM_SHA256"),
    ("1.3", "TLS_AES_256_GCM_SHA384"),
    ("1.3", "TLS_CHACHA20_POLY1305_SHA256"),
]


def curl_cipher(version, cipher):
    if version == "1.2":
        return ["--tlsv1.2", "--tls-max", "1.2", "--ciphers", cipher, "--http1.1"]
    return ["--tlsv1.3", "--tls13-ciphers", cipher, "--http1.1"]


@seals
@pytest.mark.parametrize("version,cipher", CIPHERS, ids=[c for _, c in CIPHERS])
def test_each_version_and_cipher_is_sent_by_the_kernel(make_tls, docroot, random_file, version,
                                                       cipher):
    """Small, 1 MiB and (for one cipher of each version) 64 MiB, byte-exact; every connection
    a kernel TLS session (TlsTxSw), counted in the metrics."""
    t = make_tls(args=["--metrics", "127.0.0.1:0"])
    opts = curl_cipher(version, cipher)
    before = tls_stat()["TlsTxSw"]
    assert curl_sha(t, "/hello.txt", *opts) == hashlib.sha256(HELLO).hexdigest()
    assert curl_sha(t, "/big.bin", *opts) == hashlib.sha256(BIG).hexdigest()
    conns = 2
    if cipher in ("TLS_AES_128_GCM_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"):
        src, digest = random_file(64 << 20)
        os.link(src, docroot / "huge.bin")
        assert curl_sha(t, "/huge.bin", *opts) == digest
        conns += 1
    assert tls_stat()["TlsTxSw"] - before >= conns
    assert metric(t, "ringhttpd_tls_kernel_connections_total") == conns


@seals
def test_keepalive_pipelining_ranges_and_head(make_tls):
    t = make_tls()
    with contextlib.closing(t.connect()) as s:
        rd = StrictReader(s)
        for _ in range(4):
            s.sendall(request("GET", "/hello.txt"))
            r = rd.read("GET")
            assert r.status == 200 and r.body == HELLO and r.keep_alive
        assert tls_stat()["TlsCurrTxSw"] >= 1  # this connection, sealed by the kernel now
        s.sendall(request("GET", "/big.bin", headers=[("Range", "bytes=1000-1999")]))
        r = rd.read("GET")
        assert r.status == 206 and r.body == BIG[1000:2000]
        s.sendall(request("GET", "/big.bin", headers=[("Range", "bytes=0-9,-10")]))
        r = rd.read("GET")
        assert r.status == 206 and r.header("content-type").startswith("multipart/byteranges")
        assert BIG[:10] in r.body and BIG[-10:] in r.body
        s.sendall(request("HEAD", "/big.bin") + request("GET", "/big.bin") +
                  request("HEAD", "/hello.txt") + request("GET", "/nope"))
        rs = [rd.read(m) for m in ("HEAD", "GET", "HEAD", "GET")]
        assert [r.status for r in rs] == [200, 200, 200, 404]
        assert rs[0].body == b"" and rs[0].header("content-length") == str(len(BIG))
        assert rs[1].body == BIG and rs[2].body == b""


@seals
def test_h2_over_kernel_tls(make_tls):
    t = make_tls()
    before = tls_stat()["TlsTxSw"]
    assert curl_sha(t, "/big.bin", "--http2") == hashlib.sha256(BIG).hexdigest()
    p = subprocess.run(["curl", "-sS", "--http2", "-o", "/dev/null", "-w", "%{http_version}",
                        "--cacert", t.ca, "--resolve", f"localhost:{t.port}:{t.host}",
                        t.url("/hello.txt"), t.url("/big.bin")], capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith(b"2"), p
    assert tls_stat()["TlsTxSw"] - before >= 2


@seals
@pytest.mark.parametrize("version", ["-tls1_2", "-tls1_3"])
def test_resumption_with_a_ticket_sent_by_the_kernel(make_tls, tmp_path, version):
    """TLS 1.3's ticket leaves after the switch (a record the kernel seals with its type);
    TLS 1.2's resumed handshake has the server's Finished sealed by the kernel."""
    t = make_tls()
    sess = tmp_path / "sess.pem"
    p = t.s_client(version, "-sess_out", sess, "-ign_eof", data=request("GET", "/", close=True))
    assert p.returncode == 0 and sess.exists(), p.stderr
    p = t.s_client(version, "-sess_in", sess, "-ign_eof",
                   data=request("GET", "/hello.txt", close=True))
    out = p.stdout.decode(errors="replace")
    assert b"Reused, TLSv1." in p.stdout, out[:2000]
    assert "HTTP/1.1 200 OK" in out and HELLO.decode()[:40] in out


@seals
def test_close_notify_reaches_the_client(make_tls):
    """After a file sent zero-copy, close_notify: a record the kernel seals with its type."""
    t = make_tls()
    before = tls_stat()["TlsTxSw"]
    data = read_to_close_notify(t, "/big.bin")
    assert data.startswith(b"HTTP/1.1 200") and data.endswith(BIG)
    assert tls_stat()["TlsTxSw"] == before + 1


@seals
def test_ktls_off_leaves_the_kernel_out(make_tls):
    t = make_tls(args=["--ktls", "off", "-v", "--metrics", "127.0.0.1:0"])
    assert "ringhttpd: kTLS: no (--ktls off)" in t.srv.stderr_text()
    before = tls_stat()["TlsTxSw"]
    assert curl_sha(t, "/big.bin", "--http1.1") == hashlib.sha256(BIG).hexdigest()
    assert tls_stat()["TlsTxSw"] == before
    assert metric(t, "ringhttpd_tls_kernel_connections_total") == 0


@seals
def test_verbose_says_ktls_yes(make_tls):
    t = make_tls(args=["-v"])
    text = t.srv.stderr_text()
    assert "ringhttpd: kTLS: yes" in text, text
    assert "ringhttpd: kernel TLS (tls ULP): yes" in text, text


@seals
def test_key_update_closes_rather_than_sending_wrong_records(make_tls, tmp_path):
    """A TLS 1.3 client asking for a KeyUpdate (s_client's K command): the kernel (6.1) cannot
    change its send keys, so the server closes the connection; the client never sees a record
    it cannot decrypt, and the server goes on serving."""
    t = make_tls()
    out = tmp_path / "out.txt"
    with open(out, "wb") as f:
        p = subprocess.Popen(["openssl", "s_client", "-connect", f"{t.host}:{t.port}",
                              "-CAfile", t.ca, "-tls1_3", "-servername", "localhost"],
                             stdin=subprocess.PIPE, stdout=f, stderr=subprocess.STDOUT)
        try:
            p.stdin.write(request("GET", "/hello.txt"))
            p.stdin.flush()
            assert wait_for(lambda: HELLO[-40:] in out.read_bytes(), timeout=30), out.read_bytes()
            p.stdin.write(b"K\n")
            p.stdin.flush()
            time.sleep(1)
            with contextlib.suppress(BrokenPipeError):
                p.stdin.write(request("GET", "/hello.txt"))
                p.stdin.flush()
            p.wait(timeout=30)  # the server closed: s_client ends
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    text = out.read_bytes().decode(errors="replace")
    assert "KEYUPDATE" in text, text
    assert "bad record mac" not in text and "decryption failed" not in text, text
    assert curl_sha(t, "/hello.txt", "--http1.1") == hashlib.sha256(HELLO).hexdigest()


@pytest.mark.skipif(SEALS, reason="the kernel seals AES-GCM here: the fallback is not reachable")
def test_a_tls_ulp_without_its_ciphers_stays_in_user_space(make_tls):
    """The ULP without the crypto modules (a VM whose kernel cannot load them): TLS_TX would
    refuse the keys after OpenSSL had stopped encrypting. The probe finds it; TLS goes on in
    user space (the old build closed every connection after its handshake)."""
    t = make_tls(args=["-v"])
    text = t.srv.stderr_text()
    assert "ringhttpd: kTLS: no (the tls ULP seals none of our ciphers" in text, text
    assert curl_sha(t, "/big.bin", "--http1.1") == hashlib.sha256(BIG).hexdigest()
    with contextlib.closing(t.connect()) as s:
        s.sendall(request("GET", "/hello.txt", close=True))
        assert StrictReader(s).read("GET").body == HELLO
