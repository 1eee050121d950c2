"""Listeners (issue 38): with no --bind, one process serves IPv4 and IPv6 clients on every
protocol (HTTP/1.1, HTTP/2 over TLS, HTTP/3), logging each by its own family (an IPv4 client
of the [::] socket as 127.0.0.1, not ::ffff:127.0.0.1) and limiting it by its own address; an
address given to --bind is that address alone."""

import socket
import subprocess

import pytest

from conftest import wait_for
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
