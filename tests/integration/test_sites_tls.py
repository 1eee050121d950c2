"""The TLS half of issue 19, on both engines: each site of the --config file has its own
certificate (tls-cert/tls-key keys in a site), the SNI name picks the pair of the site that names
it (exact, then wildcard, else the default pair), and a request whose Host routes to another site
than the one the connection's certificate belongs to gets 421 Misdirected Request (RFC 9110
15.5.20), over HTTP/1.1 and HTTP/2; with process-level pairs only, a Host the connection's
certificate does not name gets 421. --check-config reads a site's pair and names it.

Certificates come from a test CA made here with `openssl req`/`openssl x509`."""
import contextlib
import re
import signal
import socket
import ssl
import subprocess

import pytest

from conftest import RINGHTTPD, StrictReader, fetch, wait_for

HTTPS_RE = re.compile(r"ringhttpd: listening on https://[^\s:/]+:(\d+)/")


def openssl(*args):
    return subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True,
                          timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA; a.test (with *.a.test), b.test (its certificate does not name b-alias.test, which
    site b also answers to) and localhost (with 127.0.0.1), the process-level default; c.test
    for a site a reload adds, b2.test (also naming b.test) for site b's renewed pair."""
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", d / "ca.key", "-out", d / "ca.crt", "-subj", "/CN=ringhttpd sites CA",
            "-days", "3")
    for name, san in [("a.test", "DNS:a.test,DNS:*.a.test"), ("b.test", "DNS:b.test"),
                      ("localhost", "DNS:localhost,IP:127.0.0.1"), ("c.test", "DNS:c.test"),
                      ("b2.test", "DNS:b2.test,DNS:b.test")]:
        openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", d / f"{name}.key", "-out", d / f"{name}.csr", "-subj", f"/CN={name}")
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n"
                                       "extendedKeyUsage=serverAuth\n")
        openssl("x509", "-req", "-in", d / f"{name}.csr", "-CA", d / "ca.crt", "-CAkey",
                d / "ca.key", "-CAcreateserial", "-days", "2", "-extfile", d / f"{name}.ext",
                "-out", d / f"{name}.crt")
    return d


def write_conf(tmp_path, pki, process_pair=True, b_key="b.test", b_cert="b.test", default="a",
               a_keys="", b_keys="", more=""):
    for name in ("a", "b", "c"):
        root = tmp_path / name
        root.mkdir(exist_ok=True)
        (root / "index.html").write_text(f"site {name.upper()}\n")
    top = (f"tls-cert: {pki}/localhost.crt\ntls-key: {pki}/localhost.key\n"
           if process_pair else "")
    conf = tmp_path / "sites.yaml"
    conf.write_text(f"""tls-port: 0
{top}sites:
  - hosts: [a.test, "*.a.test"]
    default: {str(default == "a").lower()}
    root: {tmp_path}/a
    tls-cert: {pki}/a.test.crt
    tls-key: {pki}/a.test.key
{a_keys}  - hosts: [b.test, b-alias.test]
    default: {str(default == "b").lower()}
    root: {tmp_path}/b
    tls-cert: {pki}/{b_cert}.crt
    tls-key: {pki}/{b_key}.key
{b_keys}{more}""")
    return conf


def line_of(conf, text):
    """The 1-based number of the last line of conf that contains text."""
    return [i for i, line in enumerate(conf.read_text().splitlines(), 1) if text in line][-1]


class Sites:
    def __init__(self, srv, pki):
        self.srv = srv
        self.ca = str(pki / "ca.crt")
        m = HTTPS_RE.search(srv.stderr_text())
        assert m, srv.stderr_text()
        self.port = int(m.group(1))

    def cn(self, *args):
        p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{self.port}",
                            "-CAfile", self.ca, *args], input=b"", capture_output=True,
                           timeout=20)
        m = re.search(r"subject=.*?CN ?= ?([^\s,/]+)", p.stdout.decode(errors="replace"))
        return m and m.group(1)

    def curl(self, name, *args):
        """curl to https://NAME:PORT/ (SNI NAME, verified against the CA): (status, body)."""
        p = subprocess.run(["curl", "-sS", "--cacert", self.ca, "--resolve",
                            f"{name}:{self.port}:127.0.0.1", "-w", "\n%{http_code} %{http_version}",
                            *args, f"https://{name}:{self.port}/"], capture_output=True,
                           timeout=30)
        assert p.returncode == 0, p.stderr
        body, _, tail = p.stdout.decode().rpartition("\n")
        return tail, body

    def connect(self, sni):
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.check_hostname = False  # an unknown SNI gets a certificate for another name
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        return ctx.wrap_socket(sock, server_hostname=sni)


@pytest.fixture
def start(make_server, tmp_path, pki):
    def factory(**kw):
        return Sites(make_server(args=["--config", str(write_conf(tmp_path, pki, **kw))]), pki)
    return factory


def ask(s, host):
    """One keep-alive GET / with Host: host on TLS socket s."""
    s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return StrictReader(s).read("GET")


def test_sni_picks_each_sites_certificate(start):
    t = start()
    assert t.cn("-servername", "a.test") == "a.test"
    assert t.cn("-servername", "x.a.test") == "a.test"  # the site's wildcard
    assert t.cn("-servername", "b.test") == "b.test"
    # the site's name picks its pair although the certificate does not name it
    assert t.cn("-servername", "b-alias.test") == "b.test"
    assert t.cn("-servername", "unknown.test") == "localhost"  # the default pair
    assert t.cn("-noservername") == "localhost"


def test_without_a_process_pair_the_first_sites_is_the_default(start):
    t = start(process_pair=False)
    assert t.cn("-servername", "b.test") == "b.test"
    assert t.cn("-servername", "unknown.test") == "a.test"


def test_without_a_process_pair_the_default_sites_is_the_default(start):
    """The `default: true` site's pair, not the first site's (it was the first's)."""
    t = start(process_pair=False, default="b")
    assert t.cn("-servername", "unknown.test") == "b.test"
    assert t.cn("-noservername") == "b.test"
    assert t.cn("-servername", "a.test") == "a.test"
    with contextlib.closing(t.connect("unknown.test")) as s:
        r = ask(s, "unknown.test")  # routed to the default site, b: its certificate, no 421
        assert r.status == 200 and r.body == b"site B\n"


@pytest.mark.parametrize("proto", ["--http1.1", "--http2"])
def test_curl_gets_each_site_with_its_certificate(start, proto):
    t = start()
    want_version = "2" if proto == "--http2" else "1.1"
    assert t.curl("a.test", proto) == (f"200 {want_version}", "site A\n")
    assert t.curl("www.a.test", proto) == (f"200 {want_version}", "site A\n")
    assert t.curl("b.test", proto) == (f"200 {want_version}", "site B\n")


def test_host_of_another_site_is_misdirected_http1(start):
    t = start()
    with contextlib.closing(t.connect("b.test")) as s:
        r = ask(s, "a.test")
        assert r.status == 421, r
        r = ask(s, "b.test")  # the same connection, its own site: served
        assert r.status == 200 and r.body == b"site B\n"
        r = ask(s, "B.TEST:443")  # case and port do not matter
        assert r.status == 200
        assert ask(s, "x.a.test").status == 421
    with contextlib.closing(t.connect("x.a.test")) as s:  # wildcard SNI: site a's connection
        assert ask(s, "a.test").status == 200
        assert ask(s, "b-alias.test").status == 421


@pytest.mark.parametrize("proto", ["--http1.1", "--http2"])
def test_host_of_another_site_is_misdirected_curl(start, proto):
    """A browser coalescing a.test onto a connection made for b.test is RFC 9110's case: curl
    with SNI b.test and Host (h2: :authority) a.test."""
    t = start()
    status, _ = t.curl("b.test", proto, "-H", "Host: a.test")
    assert status.split()[0] == "421"
    status, body = t.curl("b.test", proto, "-H", "Host: b-alias.test")
    assert (status.split()[0], body) == ("200", "site B\n")


def test_default_pair_serves_only_the_names_it_covers(start):
    """An unknown SNI gets the process's pair (localhost): a Host of site a (which has its own
    certificate) is misdirected there, localhost (routed to the default site) is not."""
    t = start()
    with contextlib.closing(t.connect("unknown.test")) as s:
        assert ask(s, "a.test").status == 421
        r = ask(s, "localhost")
        assert r.status == 200 and r.body == b"site A\n"


def test_process_pairs_only_421_for_a_host_the_certificate_does_not_name(make_server, pki,
                                                                         tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (root / "index.html").write_text("one\n")
    srv = make_server(root, args=["--tls-port", "0",
                                  "--tls-cert", str(pki / "localhost.crt"),
                                  "--tls-key", str(pki / "localhost.key"),
                                  "--tls-cert", str(pki / "b.test.crt"),
                                  "--tls-key", str(pki / "b.test.key")])
    t = Sites(srv, pki)
    with contextlib.closing(t.connect("b.test")) as s:
        assert ask(s, "b.test").status == 200
        assert ask(s, "localhost").status == 421
        assert ask(s, "b.test").status == 200
        # an address names nothing a browser could coalesce: a balancer's probe is served
        assert ask(s, "127.0.0.1:8443").status == 200
        assert ask(s, "[::1]").status == 200
    with contextlib.closing(t.connect("localhost")) as s:
        assert ask(s, "127.0.0.1").status == 200  # an IP the certificate names
        assert ask(s, "b.test").status == 421


def test_check_config_names_a_site_pair_whose_key_does_not_match(tmp_path, pki):
    conf = write_conf(tmp_path, pki, b_key="a.test")
    p = subprocess.run([RINGHTTPD, "--check-config", str(conf)], capture_output=True, timeout=30)
    err = p.stderr.decode()
    assert p.returncode == 1, err
    line = line_of(conf, "tls-key")
    assert f"{conf}:{line}: tls-key:" in err and "b.test.crt" in err, err


def test_start_names_the_line_of_a_site_pair_whose_key_does_not_match(make_server, tmp_path,
                                                                       pki):
    """The start says what --check-config says: file, line and key (it named the files only)."""
    conf = write_conf(tmp_path, pki, b_key="a.test")
    srv = make_server(args=["--config", str(conf)], ready=False)
    assert srv.proc.wait(timeout=30) == 1
    line = line_of(conf, "tls-key")
    assert wait_for(lambda: f"{conf}:{line}: tls-key:" in srv.stderr_text()), srv.stderr_text()
    assert "b.test.crt" in srv.stderr_text()
    good = write_conf(tmp_path, pki)
    p = subprocess.run([RINGHTTPD, "--check-config", str(good)], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr


def test_site_pair_needs_tls_port(tmp_path, pki):
    conf = write_conf(tmp_path, pki)
    conf.write_text(conf.read_text().replace("tls-port: 0\n", ""))
    p = subprocess.run([RINGHTTPD, "--check-config", str(conf)], capture_output=True, timeout=30)
    assert p.returncode != 0 and "tls-port" in p.stderr.decode(), p.stderr


def test_reload_keeps_serving_each_sites_certificate(start):
    t = start()
    t.srv.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: "TLS certificates re-read" in t.srv.stderr_text()), \
        t.srv.stderr_text()
    assert t.cn("-servername", "b-alias.test") == "b.test"
    assert t.curl("a.test", "--http1.1") == ("200 1.1", "site A\n")
    with contextlib.closing(t.connect("b.test")) as s:
        assert ask(s, "a.test").status == 421


def test_reload_adds_a_site_with_its_own_pair_and_changes_a_pair(make_server, tmp_path, pki):
    """SIGHUP builds contexts from the new file's pairs (it kept the start's, and said a
    restart was needed): a site added with its own certificate and a site whose pair changed
    take effect; a connection from before keeps its certificate and is served."""
    conf = write_conf(tmp_path, pki)
    t = Sites(make_server(args=["--config", str(conf)]), pki)
    assert t.cn("-servername", "c.test") == "localhost"
    with contextlib.closing(t.connect("b.test")) as kept:
        assert ask(kept, "b.test").status == 200
        write_conf(tmp_path, pki, b_cert="b2.test", b_key="b2.test",
                   more=f"  - hosts: [c.test]\n    root: {tmp_path}/c\n"
                        f"    tls-cert: {pki}/c.test.crt\n    tls-key: {pki}/c.test.key\n")
        t.srv.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: t.cn("-servername", "c.test") == "c.test"), t.srv.stderr_text()
        assert "restart" not in t.srv.stderr_text()
        assert t.cn("-servername", "b.test") == "b2.test"
        assert t.curl("c.test", "--http1.1") == ("200 1.1", "site C\n")
        assert t.curl("b.test", "--http2") == ("200 2", "site B\n")
        with contextlib.closing(t.connect("c.test")) as s:
            assert ask(s, "b.test").status == 421  # c's certificate: another site
        assert ask(kept, "b.test").status == 200


def test_reload_with_a_bad_new_pair_keeps_the_running_configuration(make_server, tmp_path,
                                                                    pki):
    """A new pair whose key does not match: the reload fails as a whole, naming the file,
    line and key; the sites and certificates in use stay (a site added by the same file is
    not served)."""
    conf = write_conf(tmp_path, pki)
    t = Sites(make_server(args=["--config", str(conf)]), pki)
    write_conf(tmp_path, pki, b_cert="b2.test", b_key="b.test",
               more=f"  - hosts: [c.test]\n    root: {tmp_path}/c\n")
    line = line_of(conf, "tls-key")  # site b's, the last pair
    t.srv.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: "reload (SIGHUP) failed" in t.srv.stderr_text()), t.srv.stderr_text()
    err = t.srv.stderr_text()
    assert f"{conf}:{line}: tls-key:" in err and "b2.test.crt" in err, err
    assert t.cn("-servername", "b.test") == "b.test"
    assert t.curl("b.test", "--http1.1") == ("200 1.1", "site B\n")
    assert fetch(t.srv, "/", host="c.test").body == b"site A\n"  # no site c: the default


def test_site_hsts_and_redirect_https(make_server, tmp_path, pki):
    """hsts and redirect-https per site (they were the process's only)."""
    conf = write_conf(tmp_path, pki, a_keys="    hsts: 600\n", b_keys="    redirect-https: true\n")
    srv = make_server(args=["--config", str(conf)])
    t = Sites(srv, pki)
    p = subprocess.run(["curl", "-sS", "-D", "-", "-o", "/dev/null", "--cacert", t.ca, "--resolve",
                        f"a.test:{t.port}:127.0.0.1", f"https://a.test:{t.port}/"],
                       capture_output=True, text=True, timeout=30)
    assert "strict-transport-security: max-age=600" in p.stdout.lower(), p.stdout
    p = subprocess.run(["curl", "-sS", "-D", "-", "-o", "/dev/null", "--cacert", t.ca, "--resolve",
                        f"b.test:{t.port}:127.0.0.1", f"https://b.test:{t.port}/"],
                       capture_output=True, text=True, timeout=30)
    assert "strict-transport-security" not in p.stdout.lower(), p.stdout
    assert fetch(srv, "/", host="b.test").status == 308
    assert fetch(srv, "/", host="a.test").status == 200
