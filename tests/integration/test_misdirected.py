"""The 421 rule (RFC 9110 15.5.20) as one rule for every transport (issue 37): a request over
HTTP/2 (TLS) and over HTTP/3 (QUIC) on a connection whose certificate was picked for a.test
gets 421 Misdirected Request for a Host (:authority) that certificate does not name and another
certificate does; a name it covers, or an address, is served. With one certificate (name set)
only, an ECDSA and an RSA pair of the same names, nothing is misdirected on either transport:
there is no other certificate a client could get by asking again (the HTTP/3 copy of the rule
counted pairs, not name sets, and answered 421 there). A site's own certificate (a site's
tls-cert/tls-key) is that site's over either transport: a request on its connection must be
routed to that site, whatever else the certificate names (HTTP/3 took every certificate for a
process-level one and answered by its names only). Runs on both engines; certificates from
test_sites_tls's CA."""
import signal
import subprocess

import pytest
from aioquic import tls as aioquic_tls

from conftest import HELLO, wait_for
from h3client import h3_get
from test_sites_tls import HTTPS_RE, openssl, pki, write_conf  # noqa: F401  (pki: a fixture)


@pytest.fixture(scope="module")
def rsa_b(pki):
    """An RSA pair for b.test with the names of pki's ECDSA one (subject and subjectAltName):
    the same name set, a key of another type."""
    d = pki
    openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", d / "b-rsa.key",
            "-out", d / "b-rsa.csr", "-subj", "/CN=b.test")
    (d / "b-rsa.ext").write_text("subjectAltName=DNS:b.test\nbasicConstraints=CA:FALSE\n"
                                 "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", d / "b-rsa.csr", "-CA", d / "ca.crt", "-CAkey", d / "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", d / "b-rsa.ext", "-out", d / "b-rsa.crt")
    return d / "b-rsa.crt", d / "b-rsa.key"


def start(make_server, docroot, pairs):
    """A server with --tls-cert/--tls-key for each (cert, key) of pairs (the first the
    default); its TLS port, where QUIC listens too."""
    args = ["--tls-port", "0"]
    for cert, key in pairs:
        args += ["--tls-cert", str(cert), "--tls-key", str(key)]
    srv = make_server(docroot, args=args)
    m = HTTPS_RE.search(srv.stderr_text())
    assert m, srv.stderr_text()
    return int(m.group(1))


def h2(port, ca, sni, host, path="/hello.txt", tls=()):
    """GET path over HTTP/2 on a TLS connection made for sni, :authority host: status. ca None:
    the certificate is not checked (one that does not name sni). tls: curl's TLS options."""
    check = ["--cacert", str(ca)] if ca else ["-k"]
    p = subprocess.run(["curl", "-sS", "--http2", *check, *tls, "--resolve",
                        f"{sni}:{port}:127.0.0.1", "-H", f"Host: {host}", "-o", "/dev/null",
                        "-w", "%{http_code} %{http_version}", f"https://{sni}:{port}{path}"],
                       capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    status, version = p.stdout.decode().split()
    assert version == "2", version
    return int(status)


def h3(port, ca, sni, hosts, path="/hello.txt"):
    """GET path with each of hosts as :authority, on one QUIC connection made for sni."""
    got = h3_get("127.0.0.1", port, ca, [("GET", path, (), h) for h in hosts], server_name=sni)
    for r in got:
        if r.status == 200 and path == "/hello.txt":
            assert bytes(r.body) == HELLO
    return [r.status for r in got]


# a.test's connection: (Host, status) over either transport
A_CONN = [("a.test", 200), ("www.a.test", 200), ("A.TEST:443", 200), ("b.test", 421),
          ("localhost", 421), ("127.0.0.1", 200), ("[::1]:443", 200), ("a.test", 200)]


def test_a_connection_for_a_test_is_misdirected_to_b_test_on_h2_and_h3(make_server, docroot,
                                                                       pki):
    port = start(make_server, docroot, [(pki / "localhost.crt", pki / "localhost.key"),
                                        (pki / "a.test.crt", pki / "a.test.key"),
                                        (pki / "b.test.crt", pki / "b.test.key")])
    ca = pki / "ca.crt"
    assert [h2(port, ca, "a.test", h) for h, _ in A_CONN] == [s for _, s in A_CONN]
    assert h3(port, ca, "a.test", [h for h, _ in A_CONN]) == [s for _, s in A_CONN]
    # b.test's own connection serves it, and a.test is misdirected there
    assert (h2(port, ca, "b.test", "b.test"), h2(port, ca, "b.test", "a.test")) == (200, 421)
    assert h3(port, ca, "b.test", ["b.test", "a.test", "b.test"]) == [200, 421, 200]


def test_one_name_set_in_two_key_types_is_never_misdirected(make_server, docroot, pki, rsa_b):
    port = start(make_server, docroot, [(pki / "b.test.crt", pki / "b.test.key"), rsa_b])
    ca = pki / "ca.crt"
    assert [h2(port, ca, "b.test", h) for h in ("b.test", "localhost", "a.test")] == [200] * 3
    assert h3(port, ca, "b.test", ["b.test", "localhost", "a.test"]) == [200] * 3


# A client that takes an RSA certificate only: over TLS 1.2 an ECDHE-RSA suite, over QUIC (TLS
# 1.3) RSA signatures only (aioquic's list, set per connection; it has no option for it).
RSA_ONLY_H2 = ("--tlsv1.2", "--tls-max", "1.2", "--ciphers", "ECDHE-RSA-AES128-GCM-SHA256")
RSA_ONLY_H3 = [aioquic_tls.SignatureAlgorithm.RSA_PSS_RSAE_SHA256,
               aioquic_tls.SignatureAlgorithm.RSA_PKCS1_SHA256]


def test_one_name_set_apart_in_the_list_is_one_certificate_on_h2_and_h3(make_server, docroot,
                                                                      pki, rsa_b, monkeypatch):
    """b.test's ECDSA and RSA pairs with a.test's between them are still one name set, as
    they are when neighbours: a client that takes RSA only gets b.test's RSA pair over either
    transport, and the 421 rule reads the same two certificates (HTTP/3 grouped neighbours
    only, so b.test's SNI found its ECDSA pair alone and that client got no handshake)."""
    port = start(make_server, docroot, [(pki / "b.test.crt", pki / "b.test.key"),
                                        (pki / "a.test.crt", pki / "a.test.key"), rsa_b])
    ca = pki / "ca.crt"
    assert [h2(port, ca, "b.test", h, tls=RSA_ONLY_H2) for h in ("b.test", "a.test")] == \
        [200, 421]
    init = aioquic_tls.Context.__init__

    def rsa_only(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._signature_algorithms = list(RSA_ONLY_H3)

    monkeypatch.setattr(aioquic_tls.Context, "__init__", rsa_only)
    assert h3(port, ca, "b.test", ["b.test", "a.test", "b.test"]) == [200, 421, 200]



def sites_server(make_server, tmp_path, pki, **kw):
    """test_sites_tls's sites (a.test and *.a.test with their own pair, b.test and b-alias.test
    with theirs, whose certificate does not name b-alias.test) and a site c for x.a.test, which
    a.test's certificate covers, without a pair: the server and its TLS port."""
    more = f"  - hosts: [x.a.test]\n    root: {tmp_path}/c\n"
    srv = make_server(args=["--config", str(write_conf(tmp_path, pki, more=more, **kw))])
    m = HTTPS_RE.search(srv.stderr_text())
    assert m, srv.stderr_text()
    return srv, int(m.group(1))


def agree(port, ca, sni, want):
    """want: [(Host, status)] on a connection made for sni, over HTTP/2 (one connection each)
    and over HTTP/3 (one connection for all)."""
    assert [(h, h2(port, ca, sni, h, "/")) for h, _ in want] == want
    assert list(zip([h for h, _ in want], h3(port, ca, sni, [h for h, _ in want], "/"))) == want


def test_a_sites_own_certificate_is_that_sites_on_h2_and_h3(make_server, tmp_path, pki):
    """Over HTTP/3 the certificate that SNI a.test picked was taken for a process-level one, so
    x.a.test (site c, which a.test's certificate happens to cover) was served on it while
    HTTP/2 answered 421, and localhost (the default site, a) was 421 there and served over
    HTTP/2; b-alias.test, which picks site b's pair by the site's name, got the default
    certificate over HTTP/3 and 421 for every name of site b."""
    _, port = sites_server(make_server, tmp_path, pki)
    ca = pki / "ca.crt"
    agree(port, ca, "a.test", [("a.test", 200), ("www.a.test", 200), ("x.a.test", 421),
                               ("b.test", 421), ("localhost", 200), ("127.0.0.1", 200)])
    # x.a.test's own connection: SNI picks a.test's pair by site a's wildcard, for site c
    agree(port, ca, "x.a.test", [("x.a.test", 200), ("a.test", 421)])
    agree(port, None, "b-alias.test", [("b-alias.test", 200), ("b.test", 200), ("a.test", 421)])
    # the process's pair (localhost, the default certificate) answers by the names it holds
    agree(port, ca, "localhost", [("localhost", 200), ("x.a.test", 421), ("a.test", 421)])


def test_the_default_sites_certificate_is_the_default_sites_on_h2_and_h3(make_server, tmp_path,
                                                                          pki):
    """Without a process pair an unknown SNI gets the default site's (a's) certificate, which
    is site a's: x.a.test, which it covers, is misdirected over either transport."""
    _, port = sites_server(make_server, tmp_path, pki, process_pair=False)
    agree(port, None, "unknown.test", [("a.test", 200), ("www.a.test", 200), ("x.a.test", 421),
                                       ("b.test", 421), ("unknown.test", 200)])



def test_a_reload_that_changes_only_a_sites_names_is_followed_on_h2_and_h3(make_server,
                                                                           tmp_path, pki):
    """Site b's pair with one more name of site b's, its files as they were: SNI b3.test picks
    site b's pair over either transport after the reload (HTTP/3 kept the pairs it had read,
    with their old sites, when the files were the same)."""
    srv, port = sites_server(make_server, tmp_path, pki)
    agree(port, None, "b3.test", [("b3.test", 421)])  # the default certificate: not its name
    conf = tmp_path / "sites.yaml"
    conf.write_text(conf.read_text().replace("b-alias.test]", "b-alias.test, b3.test]"))
    srv.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: "TLS certificates re-read" in srv.stderr_text()), srv.stderr_text()
    agree(port, None, "b3.test", [("b3.test", 200), ("b.test", 200), ("a.test", 421)])
