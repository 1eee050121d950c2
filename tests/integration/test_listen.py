"""Listeners (issue 38): with no --bind, one process serves IPv4 and IPv6 clients on every
protocol (HTTP/1.1, HTTP/2 over TLS, HTTP/3), logging each by its own family (an IPv4 client
of the [::] socket as 127.0.0.1, not ::ffff:127.0.0.1) and limiting it by its own address; an
address given to --bind is that address alone."""

import grp
import os
import pathlib
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile

import pytest

from conftest import BIG, HELLO, free_port, recv_all, wait_for
from h3client import h3_get

pytestmark = pytest.mark.schemes("https")


def curl(*args):
    return subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                           *args], capture_output=True, timeout=30)


def log_lines(srv):
    return srv.stdout_bytes().decode(errors="replace").splitlines()


def test_no_bind_serves_both_families_on_every_protocol(make_server, docroot):
    srv = make_server(docroot, bind=None)
    assert "listening on https://[::]:" in srv.stderr_text()
    ca = str(srv.ca)
    for host, url_host in (("127.0.0.1", "127.0.0.1"), ("::1", "[::1]")):
        p = curl(f"http://{url_host}:{srv.clear_port}/hello.txt")
        assert p.stdout == b"200 1.1", (host, p)
        p = curl("--http2", "--cacert", ca, "--resolve", f"localhost:{srv.port}:{host}",
                 f"https://localhost:{srv.port}/noext")
        assert p.stdout == b"200 2", (host, p)
        r, = h3_get(host, srv.port, srv.ca, [("GET", "/index.html")])
        assert r.status == 200, host
    wait_for(lambda: sum(line.startswith("127.0.0.1 ") for line in log_lines(srv)) >= 3 and
             sum(line.startswith("::1 ") for line in log_lines(srv)) >= 3, timeout=5)
    assert not any("::ffff:" in line for line in log_lines(srv)), log_lines(srv)


def test_limit_conn_keys_an_ipv4_client_of_the_dual_socket_by_its_own_address(make_server,
                                                                               docroot):
    """--limit-conn 1 on the [::] socket: 127.0.0.1 holding a connection does not stop
    127.0.0.2 (a mapped address read as IPv6 would put every IPv4 client in one /64)."""
    srv = make_server(docroot, bind=None, args=("--limit-conn", "1", "-t", "1"))
    held = socket.create_connection(("127.0.0.1", srv.clear_port), timeout=5)
    held.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert held.recv(100).startswith(b"HTTP/1.1 200")
    try:
        p = curl("--interface", "127.0.0.2", f"http://127.0.0.1:{srv.clear_port}/hello.txt")
        assert p.stdout == b"200 1.1", p
        p = curl("--interface", "127.0.0.1", f"http://127.0.0.1:{srv.clear_port}/hello.txt")
        assert p.stdout != b"200 1.1", p
    finally:
        held.close()


def test_an_address_given_is_that_one_only(make_server, docroot):
    srv = make_server(docroot, bind="::1")
    assert curl(f"http://[::1]:{srv.clear_port}/hello.txt").stdout == b"200 1.1"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", srv.clear_port), timeout=2).close()


# ---------------------------------------------------------------------------------------------
# Several listeners (issue 38): --bind repeatable, each entry with its own ports and PROXY flag,
# Unix sockets; a duplicate or an overlap is a start error, not an EADDRINUSE later.

LINE_RE = re.compile(r"ringhttpd: listening on (https?)://(\[[0-9a-f:.]+\]|[0-9.]+):(\d+)/")


def listening(srv):
    """{(scheme, host): port} from every listening line (host without brackets)."""
    return {(m.group(1), m.group(2).strip("[]")): int(m.group(3))
            for m in LINE_RE.finditer(srv.stderr_text())}


def get(host, port, path="/hello.txt", tls=None, proxy=b"", unix=None, timeout=5):
    """One HTTP/1.0 request; its status line and the whole answer (b"" when closed at once)."""
    if unix:
        sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(timeout)
        sock.connect(unix)
    else:
        sock = socket.create_connection((host, port), timeout=timeout)
    with sock:
        if tls:
            sock = tls.wrap_socket(sock, server_hostname="localhost")
        try:
            sock.sendall(proxy + f"GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
            return recv_all(sock)
        except (ConnectionResetError, BrokenPipeError):
            # refused before the request was written: a unix socket says EPIPE, TCP ECONNRESET
            return b""


def run(*args, timeout=10):
    return subprocess.run([os.environ["RINGHTTPD"], *args], capture_output=True, text=True,
                          timeout=timeout)


def test_two_entries_each_on_its_own_ports_for_http_and_https(make_server, docroot):
    """-b 127.0.0.1 -b '[::1]:P tls=Q': the second entry no longer replaces the first; each
    entry serves cleartext and TLS (HTTP/1.1 and HTTP/2) on its own ports."""
    p2, q2 = free_port(), free_port()
    srv = make_server(docroot, args=("-b", f"[::1]:{p2} tls={q2}"))
    ports = listening(srv)
    assert ports[("http", "::1")] == p2 and ports[("https", "::1")] == q2, ports
    ca = str(srv.ca)
    for host, clear, tls in (("127.0.0.1", srv.clear_port, srv.port), ("::1", p2, q2)):
        url_host = f"[{host}]" if ":" in host else host
        assert curl(f"http://{url_host}:{clear}/hello.txt").stdout == b"200 1.1", host
        p = curl("--http2", "--cacert", ca, "--resolve", f"localhost:{tls}:{host}",
                 f"https://localhost:{tls}/hello.txt")
        assert p.stdout == b"200 2", (host, p)
    # HTTP/3 on each entry's TLS port (test_http3_on_every_tls_entry_... below)
    for host, tls in (("127.0.0.1", srv.port), ("::1", q2)):
        r, = h3_get(host, tls, srv.ca, [("GET", "/index.html")])
        assert r.status == 200, host
    # each entry is its address only: the first's ports are not open on ::1, nor the second's
    # on 127.0.0.1
    for host, port in (("::1", srv.clear_port), ("127.0.0.1", p2)):
        with pytest.raises(OSError):
            socket.create_connection((host, port), timeout=2).close()


def test_a_second_bind_on_the_same_port_adds_the_address(make_server, docroot):
    """(-p 0 would give each entry a port of its own: the kernel picks one per address.)"""
    srv = make_server(docroot, args=("-b", "::1", "-p", str(free_port()), "--tls-port",
                                     str(free_port())))
    for host in ("127.0.0.1", "[::1]"):
        assert curl(f"http://{host}:{srv.clear_port}/hello.txt").stdout == b"200 1.1", host
    ports = listening(srv)
    assert ports[("https", "127.0.0.1")] == ports[("https", "::1")] == srv.port, ports


def test_yaml_bind_list_with_strings_and_mappings(make_server, docroot, tmp_path):
    p1, p2, q2 = free_port(), free_port(), free_port()
    sock = tmp_path / "r.sock"
    conf = tmp_path / "r.yaml"
    conf.write_text(f"""bind:
  - 127.0.0.1:{p1}
  - {{address: "::1", port: {p2}, tls-port: {q2}}}
  - {{address: "unix:{sock}", mode: "0600", proxy: true}}
""")
    srv = make_server(docroot, bind=None, args=("--config", str(conf)))
    ports = listening(srv)
    assert ports[("http", "127.0.0.1")] == p1 and ports[("http", "::1")] == p2, ports
    assert ports[("https", "::1")] == q2, ports
    assert f"listening on unix:{sock} (PROXY header)" in srv.stderr_text()
    assert os.stat(sock).st_mode & 0o777 == 0o600
    assert curl(f"http://[::1]:{p2}/hello.txt").stdout == b"200 1.1"
    proxy = b"PROXY TCP4 192.0.2.7 127.0.0.1 5555 80\r\n"
    assert get(None, None, unix=str(sock), proxy=proxy).startswith(b"HTTP/1.1 200")
    wait_for(lambda: any(line.startswith("192.0.2.7 ") for line in log_lines(srv)), timeout=5)


@pytest.mark.parametrize("binds, says", [
    (("127.0.0.1", "127.0.0.1"), "is given twice"),
    (("0.0.0.0", "127.0.0.1"), "overlap (the wildcard takes the other's connections)"),
    (("*", "0.0.0.0"), "overlap (with no address, or *, the [::] socket takes IPv4 too)"),
    (("[::]", "::1"), "overlap"),
])
def test_duplicate_or_overlapping_entries_are_a_start_error(docroot, engine, binds, says):
    port = free_port()
    args = [a for b in binds for a in ("-b", b)]
    p = run("-p", str(port), "--engine", engine, *args, str(docroot))
    assert p.returncode == 2, p
    assert says in p.stderr, p.stderr
    assert "Address already in use" not in p.stderr


def test_the_same_address_as_one_port_and_another_tls_port_is_refused(docroot, engine, test_ca):
    _, crt, key = test_ca
    port = free_port()
    p = run("-p", "0", "--engine", engine, "--tls-cert", str(crt), "--tls-key", str(key),
            "--tls-port", "0", "-b", f"127.0.0.1:{port}", "-b", f"127.0.0.1 tls={port}",
            str(docroot))
    assert p.returncode == 2, p
    assert "given twice (as one entry's port and another's TLS port)" in p.stderr, p.stderr


def test_tls_port_with_only_a_unix_socket_is_refused(docroot, test_ca, tmp_path):
    _, crt, key = test_ca
    p = run("-p", "0", "--tls-cert", str(crt), "--tls-key", str(key), "--tls-port", "0",
            "-b", f"unix:{tmp_path / 'r.sock'}", str(docroot))
    assert p.returncode == 2, p
    assert "--tls-port needs a --bind entry that is an IP address, or a Unix socket marked tls" \
        in p.stderr, p.stderr


@pytest.mark.parametrize("arg, says", [
    ("[::1]:x", "'[::1]:x' is not an IPv4 or IPv6 address"),
    ("example.com", "'example.com' is not an IPv4 or IPv6 address"),
    ("127.0.0.1 mode=0600", "'mode=0600' is not a word it knows"),
    ("unix:/tmp/r.sock tls=8443", "'tls=8443' is not a word it knows"),
    ("unix:relative.sock", "wants an absolute path"),
    ("127.0.0.1 tls=8443", "tls=8443 needs --tls-port"),
])
def test_bind_syntax_errors_name_the_word(docroot, arg, says):
    p = run("-p", "0", "-b", arg, str(docroot))
    assert p.returncode == 2, p
    assert says in p.stderr, p.stderr


def test_proxy_flag_is_per_listener(make_server, docroot):
    """'-b 127.0.0.1:P proxy': that listener wants a PROXY header from everyone and logs its
    client; the plain listener beside it serves without one, and takes a PROXY line there for
    what it is (a malformed request), never as an address."""
    pport = free_port()
    srv = make_server(docroot, args=("-b", f"127.0.0.1:{pport} proxy"))
    assert f"listening on http://127.0.0.1:{pport}/ (PROXY header)" in srv.stderr_text()
    v1 = b"PROXY TCP4 198.51.100.4 127.0.0.1 4000 80\r\n"
    v2 = (b"\r\n\r\n\x00\r\nQUIT\n" + b"\x21\x11" + (12).to_bytes(2, "big") +
          bytes([203, 0, 113, 9]) + bytes([127, 0, 0, 1]) + (4001).to_bytes(2, "big") +
          (80).to_bytes(2, "big"))
    assert get("127.0.0.1", pport, proxy=v1).startswith(b"HTTP/1.1 200")
    assert get("127.0.0.1", pport, proxy=v2).startswith(b"HTTP/1.1 200")
    assert get("127.0.0.1", pport) == b""  # no header: closed
    assert get("127.0.0.1", srv.clear_port).startswith(b"HTTP/1.1 200")
    out = get("127.0.0.1", srv.clear_port, proxy=v1)  # a malformed request line: closed
    assert out == b"" or out.startswith(b"HTTP/1.1 400"), out[:200]
    wait_for(lambda: any(line.startswith("198.51.100.4 ") for line in log_lines(srv)) and
             any(line.startswith("203.0.113.9 ") for line in log_lines(srv)), timeout=5)
    assert "no PROXY header from a client of a proxy listener" in srv.stderr_text()


# ---------------------------------------------------------------------------------------------
# HTTP/3 on every TLS listener (issue 38): each TLS entry has its UDP sockets on its own address
# and TLS port, and its HTTPS answers' Alt-Svc names that port; a listener without HTTP/3 (a
# Unix socket) advertises none.


def alt_svc(host, port, ca, version="--http2", unix=None, field="alt-svc"):
    """The Alt-Svc field (or another) of an HTTPS answer from host:port (or the Unix socket),
    or None."""
    where = ("--unix-socket", unix) if unix else ("--resolve", f"localhost:{port}:{host}")
    p = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-D", "-", "--cacert", str(ca), version,
                        *where, f"https://localhost:{port or 443}/hello.txt"],
                       capture_output=True, timeout=30)
    assert p.returncode == 0, p
    head = p.stdout.decode()
    assert head.split("\r\n", 1)[0].split()[1] == "200", head
    found = [line.split(":", 1)[1].strip() for line in head.split("\r\n")
             if line.lower().startswith(field + ":")]
    return found[0] if found else None


def test_http3_on_every_tls_entry_with_its_own_alt_svc(make_server, docroot, tmp_path):
    """Three TLS entries (127.0.0.1 and ::1, and a second port of 127.0.0.1) and a TLS Unix
    socket: each IP entry serves HTTP/3 on its own TLS port, says so on its listening line, and
    its HTTP/1.1 and HTTP/2 answers name that port in Alt-Svc (after the HSTS line, composed
    per site and port); the Unix socket has no UDP beside it and advertises none. Before, only
    the first TLS entry had HTTP/3, and every entry's Alt-Svc named the first's port."""
    p2, q2, p3, q3 = free_port(), free_port(), free_port(), free_port()
    sock = tmp_path / "tls.sock"
    srv = make_server(docroot, args=("-b", f"[::1]:{p2} tls={q2}", "-b",
                                     f"127.0.0.1:{p3} tls={q3}", "-b", f"unix:{sock} tls",
                                     "--hsts", "600"))
    err = srv.stderr_text()
    for url in (f"127.0.0.1:{srv.port}", f"[::1]:{q2}", f"127.0.0.1:{q3}"):
        assert f"listening on https://{url}/ (TLS; HTTP/3 on UDP)" in err, err
    assert f"listening on unix:{sock} (TLS)\n" in err, err
    for host, port in (("127.0.0.1", srv.port), ("::1", q2), ("127.0.0.1", q3)):
        for version in ("--http2", "--http1.1"):
            assert alt_svc(host, port, srv.ca, version) == f'h3=":{port}"; ma=86400', \
                (host, port, version)
            assert alt_svc(host, port, srv.ca, version, field="strict-transport-security") == \
                "max-age=600"
        got = h3_get(host, port, srv.ca, [("GET", "/hello.txt"), ("GET", "/index.html")])
        assert [r.status for r in got] == [200, 200], (host, port)
        assert got[0].header("alt-svc") is None  # not advertised to a client already on it
    assert alt_svc(None, None, srv.ca, unix=str(sock)) is None
    assert alt_svc(None, None, srv.ca, unix=str(sock), field="strict-transport-security") == \
        "max-age=600"


def test_socket_activation_beside_two_tls_entries_serves_http3_on_both(make_server, docroot):
    """systemd's socket is the cleartext listener; the TLS entries' listeners and their UDP
    sockets are ours: HTTP/3 on each TLS port, each naming its own in Alt-Svc."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(64)
    q2 = free_port()
    wrapper = [sys.executable, "-c", "import os, sys; os.dup2(int(sys.argv[1]), 3); "
               "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1'); "
               "os.execvp(sys.argv[2], sys.argv[2:])", str(holder.fileno())]
    try:
        srv = make_server(docroot, wrapper=wrapper, pass_fds=[holder.fileno()],
                          args=("-b", f"[::1] tls={q2}"))
        err = srv.stderr_text()
        assert "on sockets from systemd" in err, err
        for host, port in (("127.0.0.1", srv.port), ("::1", q2)):
            url = f"[{host}]" if ":" in host else host
            assert f"listening on https://{url}:{port}/ (TLS; HTTP/3 on UDP)" in err, err
            r, = h3_get(host, port, srv.ca, [("GET", "/hello.txt")])
            assert r.status == 200 and bytes(r.body) == HELLO, (host, port)
            assert alt_svc(host, port, srv.ca) == f'h3=":{port}"; ma=86400', (host, port)
        with socket.create_connection(holder.getsockname()[:2], timeout=5) as c:
            c.sendall(b"GET /hello.txt HTTP/1.0\r\n\r\n")
            assert recv_all(c).startswith(b"HTTP/1.1 200")
    finally:
        holder.close()


def test_wildcard_entry_serves_http3_on_both_families_beside_another_entry(make_server,
                                                                           docroot):
    """'*' (the [::] socket taking IPv4 too) serves HTTP/3 to 127.0.0.1 and ::1 on its TLS
    port; a second entry on ::1 and ports of its own serves HTTP/3 on its own."""
    p2, q2 = free_port(), free_port()
    srv = make_server(docroot, bind="*", args=("-b", f"[::1]:{p2} tls={q2}"))
    assert f"listening on https://[::]:{srv.port}/ (TLS; HTTP/3 on UDP)" in srv.stderr_text()
    for host, port in (("127.0.0.1", srv.port), ("::1", srv.port), ("::1", q2)):
        r, = h3_get(host, port, srv.ca, [("GET", "/hello.txt")])
        assert r.status == 200 and bytes(r.body) == HELLO, (host, port)
        assert alt_svc(host, port, srv.ca) == f'h3=":{port}"; ma=86400', (host, port)
    wait_for(lambda: sum(" HTTP/3.0\" 200 " in line for line in log_lines(srv)) >= 3, timeout=5)


@pytest.mark.parametrize("bind", [None, "0.0.0.0"])
def test_a_wildcard_answers_http3_from_the_address_the_client_sent_to(make_server, docroot,
                                                                      bind):
    """A wildcard UDP socket ([::] taking both families, or 0.0.0.0) answers each datagram from
    the address it was sent to (IP_PKTINFO / IPV6_PKTINFO), not from the one the route picks:
    a client of 127.0.0.2 used to get its answers from 127.0.0.1 and never connected. The 1 MiB
    body goes out in GSO batches that carry the source beside their segment size."""
    srv = make_server(docroot, bind=bind)
    for host in ("127.0.0.2", "127.0.0.1") + (("::1",) if bind is None else ()):
        r, = h3_get(host, srv.port, srv.ca, [("GET", "/big.bin")], timeout=20)
        assert r.status == 200 and bytes(r.body) == BIG, host
    wait_for(lambda: any(line.startswith("127.0.0.2 ") and "HTTP/3.0" in line
                         for line in log_lines(srv)), timeout=5)


# ---------------------------------------------------------------------------------------------
# Unix sockets.


def test_unix_socket_serves_http1_and_h2c_with_its_mode_and_owner(make_server, docroot,
                                                                  tmp_path):
    sock = tmp_path / "r.sock"
    owner = ()
    if os.geteuid() == 0:
        owner = ("owner=nobody:nogroup",)
    srv = make_server(docroot, args=("-b", " ".join((f"unix:{sock}", "mode=0660", *owner))))
    assert f"listening on unix:{sock}" in srv.stderr_text()
    st = os.stat(sock)
    assert stat.S_ISSOCK(st.st_mode) and st.st_mode & 0o777 == 0o660, oct(st.st_mode)
    if owner:
        assert (st.st_uid, st.st_gid) == (pwd.getpwnam("nobody").pw_uid,
                                          grp.getgrnam("nogroup").gr_gid)
    for version in ("--http1.1", "--http2-prior-knowledge"):
        p = curl("--unix-socket", str(sock), version, "http://localhost/hello.txt")
        assert p.stdout in (b"200 1.1", b"200 2"), (version, p)
    assert curl("--unix-socket", str(sock), "--http2-prior-knowledge",
                "http://localhost/hello.txt").stdout == b"200 2"
    wait_for(lambda: sum(line.startswith("unix: ") for line in log_lines(srv)) >= 3, timeout=5)
    assert srv.stop() == 0
    assert not sock.exists()  # removed at exit, as nginx does


def test_unix_socket_marked_tls_speaks_https_with_alpn(make_server, docroot, tmp_path):
    """'unix:PATH tls': TLS on the Unix socket with --tls-port's certificates (HTTP/2 by ALPN,
    HTTP/1.1 too); a cleartext request there is the plain-HTTP-to-HTTPS 400."""
    sock = tmp_path / "tls.sock"
    srv = make_server(docroot, args=("-b", f"unix:{sock} tls"))
    assert f"listening on unix:{sock} (TLS)" in srv.stderr_text()
    for version, want in (("--http2", b"200 2"), ("--http1.1", b"200 1.1")):
        p = curl("--unix-socket", str(sock), "--cacert", str(srv.ca), version,
                 "https://localhost/hello.txt")
        assert p.stdout == want, (version, p)
    p = curl("--unix-socket", str(sock), "http://localhost/hello.txt")
    assert p.stdout == b"400 1.1", p
    p = run("-p", "0", "-b", f"unix:{tmp_path / 'x.sock'} tls", str(docroot))
    assert p.returncode == 2 and "tls needs --tls-port" in p.stderr, p


def test_unix_clients_are_one_address_for_limit_conn_unless_proxy_says(make_server, docroot,
                                                                       tmp_path):
    plain, proxied = tmp_path / "plain.sock", tmp_path / "proxied.sock"
    srv = make_server(docroot, args=("-b", f"unix:{plain}", "-b", f"unix:{proxied} proxy",
                                     "--limit-conn", "1", "-t", "1"))
    held = socket.socket(socket.AF_UNIX)
    held.connect(str(plain))
    held.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert held.recv(100).startswith(b"HTTP/1.1 200")
    try:
        assert not get(None, None, unix=str(plain)).startswith(b"HTTP/1.1 200")
        # behind a local balancer, each client is its own address
        held2 = socket.socket(socket.AF_UNIX)
        held2.connect(str(proxied))
        held2.sendall(b"PROXY TCP4 192.0.2.1 127.0.0.1 1 80\r\n"
                      b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        assert held2.recv(100).startswith(b"HTTP/1.1 200")
        with held2:
            other = b"PROXY TCP4 192.0.2.2 127.0.0.1 1 80\r\n"
            assert get(None, None, unix=str(proxied), proxy=other).startswith(b"HTTP/1.1 200")
            same = b"PROXY TCP4 192.0.2.1 127.0.0.1 2 80\r\n"
            assert not get(None, None, unix=str(proxied), proxy=same).startswith(b"HTTP/1.1 200")
    finally:
        held.close()


def test_limit_conn_behind_a_proxy_listener_counts_a_client_across_workers(make_server,
                                                                         docroot):
    """A listener marked proxy with two workers: the kernel spreads a balancer's connections
    over both (nothing steers by the balancer's address), so the workers must count the client
    the headers name in one table. One client holding its one connection gets no second from
    either worker; another client gets one. The build before this fix counted per worker, so
    about half of eight tries were served."""
    port = free_port()
    srv = make_server(docroot, args=("-b", f"127.0.0.1:{port} proxy", "--limit-conn", "1",
                                     "-t", "2"))
    held = socket.create_connection(("127.0.0.1", port), timeout=5)
    held.sendall(b"PROXY TCP4 192.0.2.1 127.0.0.1 1 80\r\n"
                 b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        assert held.recv(100).startswith(b"HTTP/1.1 200")
        same = b"PROXY TCP4 192.0.2.1 127.0.0.1 2 80\r\n"
        served = [b" 200 " in get("127.0.0.1", port, proxy=same)[:16] for _ in range(8)]
        assert not any(served), served
        other = b"PROXY TCP4 192.0.2.2 127.0.0.1 1 80\r\n"
        assert get("127.0.0.1", port, proxy=other).startswith(b"HTTP/1.1 200")
    finally:
        held.close()
    assert srv.alive()


def test_stale_socket_file_is_replaced_and_a_live_one_refused(make_server, docroot, tmp_path):
    sock = tmp_path / "r.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(sock))
    stale.close()  # the file stays, nobody accepts: what a kill -9 leaves
    srv = make_server(docroot, args=("-b", f"unix:{sock}"))
    assert "removed a stale socket file" in srv.stderr_text()
    assert get(None, None, unix=str(sock)).startswith(b"HTTP/1.1 200")
    p = run("-p", "0", "-b", f"unix:{sock}", str(docroot))
    assert p.returncode == 1, p
    assert f"cannot listen on unix:{sock}: Address already in use" in p.stderr, p.stderr
    assert get(None, None, unix=str(sock)).startswith(b"HTTP/1.1 200")  # still the first's
    regular = tmp_path / "file"
    regular.write_text("not a socket")
    p = run("-p", "0", "-b", f"unix:{regular}", str(docroot))
    assert p.returncode == 1 and "is there already" in p.stderr, p
    assert regular.read_text() == "not a socket"


@pytest.mark.schemes("http")  # pytest's certificates are in a directory only root may read
def test_unix_socket_under_user_and_landlock(make_server, docroot, tmp_path):
    """Bound before the privileges go and Landlock applies; removed at exit all the same, from
    a directory the serving user may write (systemd's RuntimeDirectory=, /run/ringhttpd)."""
    if os.geteuid() != 0:
        pytest.skip("--user needs root")
    base = tempfile.mkdtemp(prefix="ringhttpd-run-")
    try:
        os.chmod(base, 0o755)
        run_dir = pathlib.Path(base) / "run"
        run_dir.mkdir()
        os.chown(run_dir, pwd.getpwnam("nobody").pw_uid, -1)
        sock = run_dir / "r.sock"
        root = pathlib.Path(base) / "www"
        root.mkdir(mode=0o755)
        (root / "hello.txt").write_bytes(b"hi\n")
        (root / "hello.txt").chmod(0o644)
        srv = make_server(root, args=("-b", f"unix:{sock} owner=nobody", "--user", "nobody"))
        assert os.stat(sock).st_uid == pwd.getpwnam("nobody").pw_uid
        assert get(None, None, unix=str(sock)).endswith(b"hi\n")
        assert srv.stop() == 0
        assert not sock.exists(), srv.stderr_text()
    finally:
        shutil.rmtree(base)


# ---------------------------------------------------------------------------------------------
# Reload: the listener list is the process's.


def test_reload_with_a_changed_listener_list_keeps_the_listeners_and_says_so(make_server,
                                                                             docroot, tmp_path):
    p1, p2 = free_port(), free_port()
    conf = tmp_path / "r.yaml"
    conf.write_text(f"bind: [127.0.0.1:{p1}]\n")
    srv = make_server(docroot, bind=None, args=("--config", str(conf)))
    conf.write_text(f"bind: [127.0.0.1:{p1}, '[::1]:{p2}']\n")
    srv.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: "bind changed in" in srv.stderr_text(), timeout=5), \
        srv.stderr_text()
    assert "takes effect at the next restart" in srv.stderr_text()
    assert curl(f"http://127.0.0.1:{p1}/hello.txt").stdout == b"200 1.1"
    with pytest.raises(OSError):
        socket.create_connection(("::1", p2), timeout=2).close()
