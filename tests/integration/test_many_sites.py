"""Issue 40, step 1, on both engines: no cap on sites and certificates. 1,000 sites of one
--config file, each with its own ECDSA certificate naming it alone: every SNI name gets its own
certificate (verified against the test's CA, hostname checked) and its site's content over
HTTP/1.1 (all 1,000), HTTP/2 and HTTP/3 (every 25th name), and every HTTPS answer of HTTP/1.1
and HTTP/2 carries Alt-Svc (it was composed for 8 sites per worker). 40 process-level pairs are
chosen by their certificates' own names, a wildcard covering one label. A reload of the 1,000
sites after one certificate file was rewritten serves the new certificate for that name and
takes the other 999 over as they were (the -v log line counts them).

Certificates are made by manysites.py with `cryptography` (1,000 `openssl req` runs would take
a process each)."""
import re
import signal
import socket
import ssl
import subprocess

import pytest

import manysites
from conftest import StrictReader, wait_for
from h3client import h3_get

HTTPS_RE = re.compile(r"ringhttpd: listening on https://[^\s:/]+:(\d+)/")
N = 1000
START = 60.0  # seconds a start of 1,000 certificates may take on a loaded 2-core test machine


@pytest.fixture(scope="module")
def thousand(tmp_path_factory):
    d = tmp_path_factory.mktemp("many")
    return d, manysites.make(d, N)


def https_port(srv):
    m = wait_for(lambda: HTTPS_RE.search(srv.stderr_text()), START)
    assert m, srv.stderr_text()[-2000:]
    return int(m.group(1))


def start(make_server, *args):
    srv = make_server(args=list(args), ready=False)
    srv.wait_ready(START)
    return srv, https_port(srv)


def tls(port, ca, sni, alpn="http/1.1"):
    """A TLS connection to port with SNI sni, the certificate verified for sni."""
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.set_alpn_protocols([alpn])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        return ctx.wrap_socket(sock, server_hostname=sni)
    except BaseException:
        sock.close()
        raise


def get(s, host):
    s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return StrictReader(s).read("GET")


def der_of(port, sni):
    """The DER certificate port presents for sni (not verified: any name)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        with ctx.wrap_socket(sock, server_hostname=sni) as s:
            return s.getpeercert(binary_form=True)


def sans_of(der):
    from cryptography import x509
    ext = x509.load_der_x509_certificate(der).extensions.get_extension_for_class(
        x509.SubjectAlternativeName)
    return ext.value.get_values_for_type(x509.DNSName)


def test_a_thousand_sites_each_get_their_own_certificate_and_content(make_server, thousand):
    d, names = thousand
    ca = d / "ca.crt"
    srv, port = start(make_server, "--config", str(d / "sites.yaml"))
    alt = f'h3=":{port}"'
    for name in names:  # HTTP/1.1: every name
        with tls(port, ca, name) as s:
            assert s.getpeercert()["subjectAltName"] == (("DNS", name),), name
            r = get(s, name)
            assert r.status == 200 and r.body == f"site {name}\n".encode(), (name, r)
            assert alt in (r.header("alt-svc") or ""), (name, r.headers)
    sample = names[::25] + names[-1:]
    for name in sample:  # HTTP/2, curl verifying the certificate for the name
        p = subprocess.run(["curl", "-sS", "--http2", "--cacert", str(ca), "-D", "-", "--resolve",
                            f"{name}:{port}:127.0.0.1", "-w", "\n%{http_version}",
                            f"https://{name}:{port}/"], capture_output=True, timeout=30)
        assert p.returncode == 0, (name, p.stderr)
        out = p.stdout.decode()
        assert out.endswith("\n2") and f"site {name}\n" in out, (name, out)
        assert re.search(r"(?im)^alt-svc: .*" + re.escape(alt), out), (name, out)
    for name in sample:  # HTTP/3: aioquic verifies the certificate for the name
        (r,) = h3_get("127.0.0.1", port, ca, [("GET", "/")], server_name=name)
        assert r.status == 200 and bytes(r.body) == f"site {name}\n".encode(), (name, r)
        assert r.header("alt-svc") is None  # HTTP/3's own answers do not announce it
    assert srv.alive()


def test_forty_process_pairs_are_chosen_by_their_own_names(make_server, tmp_path):
    ca_cert, ca_key = manysites.make_ca(tmp_path)
    args = []
    for i in range(40):
        name = f"p{i:02d}.test"
        sans = [name, "*.w.test"] if i == 39 else [name]  # the last one is the wildcard's
        crt, key = manysites.make_leaf(tmp_path, ca_cert, ca_key, name, sans)
        args += ["--tls-cert", str(crt), "--tls-key", str(key)]
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "index.html").write_text("one\n")
    srv, port = start(make_server, "--tls-port", "0", *args, str(tmp_path / "root"))
    for i in range(40):
        assert sans_of(der_of(port, f"p{i:02d}.test"))[0] == f"p{i:02d}.test", i
    assert sans_of(der_of(port, "x.w.test")) == ["p39.test", "*.w.test"]
    # a wildcard names one label: deeper, and unknown names, get the first pair, the default
    assert sans_of(der_of(port, "a.x.w.test")) == ["p00.test"]
    assert sans_of(der_of(port, "nobody.test")) == ["p00.test"]
    with tls(port, tmp_path / "ca.crt", "p17.test") as s:
        assert get(s, "p17.test").body == b"one\n"
    # HTTP/3 chooses alike (aioquic checks the certificate's names)
    for name in ("p00.test", "p17.test", "p38.test", "x.w.test"):
        (r,) = h3_get("127.0.0.1", port, tmp_path / "ca.crt", [("GET", "/")], server_name=name)
        assert r.status == 200 and bytes(r.body) == b"one\n", (name, r)
    with pytest.raises(Exception):  # the default certificate, which does not name it
        h3_get("127.0.0.1", port, tmp_path / "ca.crt", [("GET", "/")], server_name="a.x.w.test",
               timeout=5)


def test_a_reload_takes_unchanged_certificates_over_and_reads_the_changed_one(
        make_server, thousand, tmp_path):
    d, names = thousand
    # a copy of the certificates: the module's files stay as they are for the other tests
    work = tmp_path / "w"
    subprocess.run(["cp", "-a", str(d), str(work)], check=True, timeout=60)
    conf = manysites.write_config(work, names)
    srv, port = start(make_server, "-v", "--config", str(conf))
    changed = names[500]
    before, other = der_of(port, changed), der_of(port, names[7])
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    ca_pem = (work / "ca.crt").read_bytes()
    # the CA's key is not kept: a new CA signs the new leaf, whose name is the same
    ca2_cert, ca2_key = manysites.make_ca(tmp_path)
    manysites.make_leaf(work, ca2_cert, ca2_key, changed)  # rewrites certs/CHANGED.* in place
    (work / "ca.crt").write_bytes(ca_pem)
    mark = len(srv.stderr_text())
    srv.proc.send_signal(signal.SIGHUP)
    line = wait_for(lambda: re.search(r"TLS: (\d+) certificates, (\d+) of them as they were",
                                      srv.stderr_text()[mark:]), START)
    assert line and line.groups() == (str(N), str(N - 1)), srv.stderr_text()[mark:]
    wait_for(lambda: der_of(port, changed) != before, 10)
    after = der_of(port, changed)
    assert after != before
    assert x509.load_der_x509_certificate(after).issuer == ca2_cert.subject
    assert after == x509.load_pem_x509_certificate(
        (work / "certs" / f"{changed}.crt").read_bytes()).public_bytes(
            serialization.Encoding.DER)
    assert der_of(port, names[7]) == other
    with tls(port, work / "ca.crt", names[7]) as s:
        assert get(s, names[7]).body == f"site {names[7]}\n".encode()
    # HTTP/3 too: the rewritten one verifies against the new CA only, the others the old
    # (HTTP/3's endpoints get theirs after the TLS port's, then the reload says so)
    assert wait_for(lambda: "TLS certificates re-read" in srv.stderr_text()[mark:], START)
    assert "HTTP/3: certificates as they were" not in srv.stderr_text()[mark:]
    (r,) = h3_get("127.0.0.1", port, tmp_path / "ca.crt", [("GET", "/")], server_name=changed)
    assert r.status == 200 and bytes(r.body) == f"site {changed}\n".encode(), r
    (r,) = h3_get("127.0.0.1", port, work / "ca.crt", [("GET", "/")], server_name=names[7])
    assert r.status == 200 and bytes(r.body) == f"site {names[7]}\n".encode(), r
    # a reload with nothing changed keeps them all, on both ports
    mark = len(srv.stderr_text())
    srv.proc.send_signal(signal.SIGHUP)
    line = wait_for(lambda: re.search(r"TLS: (\d+) certificates, (\d+) of them as they were",
                                      srv.stderr_text()[mark:]), START)
    assert line and line.groups() == (str(N), str(N)), srv.stderr_text()[mark:]
    assert wait_for(lambda: "TLS certificates re-read" in srv.stderr_text()[mark:], START)
    assert "HTTP/3: certificates as they were, not read again" in srv.stderr_text()[mark:]
    (r,) = h3_get("127.0.0.1", port, tmp_path / "ca.crt", [("GET", "/")], server_name=changed)
    assert r.status == 200, r


def test_every_site_of_many_announces_http3(make_server, thousand, tmp_path):
    """Alt-Svc on every site's HTTPS answers, those with HSTS (composed per site) and those
    without, 40 sites on one keep-alive connection (one certificate: no 421)."""
    d, names = thousand
    sites = names[:40]
    top = f"tls-cert: {d}/certs/{sites[0]}.crt\ntls-key: {d}/certs/{sites[0]}.key"
    conf = tmp_path / "sites.yaml"
    conf.write_text(f"tls-port: 0\n{top}\nsites:\n" + "".join(
        f"  - hosts: [{n}]\n    root: {d}/roots/{n}\n" + ("    hsts: 600\n" if i % 2 else "")
        for i, n in enumerate(sites)))
    srv, port = start(make_server, "--config", str(conf))
    alt = f'h3=":{port}"'
    with tls(port, d / "ca.crt", sites[0]) as s:
        for i, n in enumerate(sites):
            r = get(s, n)
            assert r.status == 200 and r.body == f"site {n}\n".encode(), (n, r)
            assert alt in (r.header("alt-svc") or ""), (i, n, r.headers)
            assert (r.header("strict-transport-security") is not None) == bool(i % 2), (n, r)


def test_a_file_of_twelve_thousand_sites_is_read_and_an_alias_bomb_is_not(tmp_path):
    """A file's values were capped at 20,000 (an alias bomb's guard): 12,000 sites of two keys
    each were refused. The cap grows with the file's size now (a value per 4 bytes); aliases
    that make 9 values of a byte are still refused."""
    from conftest import RINGHTTPD
    (tmp_path / "www").mkdir()
    conf = tmp_path / "sites.yaml"
    conf.write_text("sites:\n" + "".join(
        f"  - hosts: [{manysites.site_name(i)}]\n    root: {tmp_path}/www\n"
        for i in range(12000)))
    p = subprocess.run([RINGHTTPD, "--check-config", str(conf)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "ok (12000 sites)" in p.stdout, p.stderr[-2000:]
    bomb = tmp_path / "bomb.yaml"  # 14 bytes a site, 32 values each: 9 values a byte
    names = ", ".join(f"n{i}.test" for i in range(32))
    bomb.write_text(f"sites:\n  - hosts: &h [{names}]\n    root: {tmp_path}/www\n" +
                    "  - hosts: *h\n" * 5000)
    p = subprocess.run([RINGHTTPD, "--check-config", str(bomb)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "too many values" in p.stderr, (p.returncode, p.stderr[-500:])


def test_a_reload_of_many_sites_needs_no_second_fd_per_root(make_server, tmp_path):
    """Each site's root is an open directory; a reload opened them all again while the old
    ones lived, so 300 sites under RLIMIT_NOFILE 450 could start but never reload ("Too many
    open files"). A root that is still the same directory is shared now; one recreated is
    opened anew and served."""
    names = [manysites.site_name(i) for i in range(300)]
    for n in names:
        (tmp_path / "roots" / n).mkdir(parents=True)
        (tmp_path / "roots" / n / "index.html").write_text(f"site {n}\n")
    conf = tmp_path / "sites.yaml"
    conf.write_text("sites:\n" + "".join(f"  - hosts: [{n}]\n    root: {tmp_path}/roots/{n}\n"
                                         for n in names))
    srv = make_server(args=["--config", str(conf)], wrapper=["prlimit", "--nofile=450:450"])
    moved = tmp_path / "roots" / names[7]
    (moved / "index.html").unlink()
    moved.rmdir()
    moved.mkdir()
    (moved / "index.html").write_text("recreated\n")
    for round_ in range(3):
        mark = len(srv.stderr_text())
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: "reload (SIGHUP): serving" in srv.stderr_text()[mark:]
                        or "failed" in srv.stderr_text()[mark:], 30), srv.stderr_text()[mark:]
        assert "failed" not in srv.stderr_text()[mark:], srv.stderr_text()[mark:]
    from conftest import fetch
    assert fetch(srv, "/", host=names[7]).body == b"recreated\n"
    assert fetch(srv, "/", host=names[299]).body == f"site {names[299]}\n".encode()
