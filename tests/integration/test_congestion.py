"""Congestion control (issue 42): --quic-cc picks HTTP/3's controller among ngtcp2's (bbr, bbr2,
cubic, reno) and a 1 MiB download arrives byte-exact with each, on both engines; --tcp-cc sets
TCP_CONGESTION on the TCP listeners, which every accepted socket inherits: read back with
getsockopt on the server's own accepted socket (taken with pidfd_getfd) and seen by `ss -ti`;
without it the host's default stays; a name the kernel lacks is one clear line at start
(exit 2), as is a malformed one; -v says which controllers are on."""

import ctypes
import os
import random
import re
import socket
import ssl
import subprocess
import time

import pytest

from h3client import h3_get

pytestmark = pytest.mark.schemes("https")

BODY = random.Random(42).randbytes(1 << 20)
TCP_CONGESTION = 13  # netinet/tcp.h
SYS_PIDFD_OPEN, SYS_PIDFD_GETFD = 434, 438  # x86_64 and arm64


def available():
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        return f.read().split()


def host_default():
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        return f.read().strip()


@pytest.fixture(scope="module")
def ccroot(tmp_path_factory):
    root = tmp_path_factory.mktemp("ccroot")
    (root / "one.bin").write_bytes(BODY)
    return root


@pytest.mark.parametrize("cc", ["bbr", "bbr2", "cubic", "reno"])
def test_quic_cc_downloads_with_each_controller(make_server, ccroot, cc):
    srv = make_server(ccroot, args=("-v", "--quic-cc", cc))
    assert f"HTTP/3: congestion control {cc}, paced" in srv.stderr_text()
    (resp,) = h3_get("127.0.0.1", srv.port, srv.ca, [("GET", "/one.bin")])
    assert resp.status == 200
    assert bytes(resp.body) == BODY


def test_quic_cc_default_is_said(make_server, ccroot):
    srv = make_server(ccroot, args=("-v",))
    text = srv.stderr_text()
    assert "HTTP/3: congestion control " in text
    said = text.split("HTTP/3: congestion control ", 1)[1].split(",", 1)[0]
    assert said in ("bbr", "bbr2", "cubic", "reno")


def start_fails(make_server, ccroot, args):
    srv = make_server(ccroot, args=args, ready=False)
    rc = srv.proc.wait(timeout=10)
    return rc, srv.stderr_text()


@pytest.mark.parametrize("args,says", [
    (("--quic-cc", "vegas"), "--quic-cc wants bbr, bbr2, cubic or reno, got 'vegas'"),
    (("--quic-cc", "BBR"), "--quic-cc wants bbr, bbr2, cubic or reno, got 'BBR'"),
    (("--tcp-cc", "Bbr!"), "--tcp-cc wants a congestion control name"),
    (("--tcp-cc", ""), "--tcp-cc wants a congestion control name"),
    (("--tcp-cc", "a" * 16), "--tcp-cc wants a congestion control name"),
])
def test_malformed_values_are_usage_errors(make_server, ccroot, args, says):
    rc, text = start_fails(make_server, ccroot, args)
    assert rc == 2, text
    assert says in text, text


def test_tcp_cc_the_kernel_lacks_is_a_clear_error(make_server, ccroot):
    name = "nosuchcc"
    assert name not in available()
    rc, text = start_fails(make_server, ccroot, ("--tcp-cc", name))
    assert rc == 2, text
    line = [ln for ln in text.splitlines() if "--tcp-cc" in ln]
    assert line, text
    assert "the kernel has no such TCP congestion control" in line[0]
    assert " ".join(available()) in line[0]  # the kernel's list, to pick from
    assert "cannot listen" not in text  # not blamed on the port


def server_fd_cc(pid, client):
    """The congestion control of the server's socket connected to `client`, by getsockopt on
    that very socket (duplicated into this process with pidfd_getfd; root may)."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        pytest.skip("pidfd_open: %s" % os.strerror(ctypes.get_errno()))
    want = client.getsockname()
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                    continue
            except OSError:
                continue
            fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
            if fd < 0:
                if ctypes.get_errno() == 1:
                    pytest.skip("pidfd_getfd not permitted here")
                continue
            s = socket.socket(fileno=fd)
            try:
                if s.type == socket.SOCK_STREAM and s.getpeername() == want:
                    return s.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).rstrip(b"\0").decode()
            except OSError:
                pass
            finally:
                s.close()
    finally:
        os.close(pidfd)
    return None


def ss_cc(port):
    """What `ss -ti` says of the server's end of the connection on port."""
    out = subprocess.run(["ss", "-Htin", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    return out


def ports(srv):
    """The server's clear-text and TLS ports, from its listening lines."""
    text = srv.stderr_text()
    clear = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", text)
    tls = re.search(r"listening on https://127\.0\.0\.1:(\d+)/", text)
    return int(clear.group(1)), int(tls.group(1))


def accepted_cc(srv, port, tls=False):
    """Connects to port (a TLS handshake on the TLS port: the server accepts a connection once
    its first bytes came, and closes one whose bytes are no TLS) and reads what the server's
    socket for it uses, while it is open."""
    client = socket.create_connection(("127.0.0.1", port), timeout=5)
    if tls:
        ctx = ssl.create_default_context(cafile=str(srv.ca))
        client = ctx.wrap_socket(client, server_hostname="localhost")
    else:
        client.sendall(b"GET / HTTP/1.1\r\n")  # half a request: the connection stays open
    try:
        for _ in range(100):
            cc = server_fd_cc(srv.proc.pid, client)
            if cc:
                return cc, ss_cc(port)
            time.sleep(0.05)
        return None, ss_cc(port)
    finally:
        client.close()


def test_tcp_cc_is_the_accepted_sockets(make_server, ccroot):
    """Both TCP listeners (clear and TLS) hand over sockets with --tcp-cc's controller, a
    different one from the host's default, so inheriting the default cannot pass."""
    other = [c for c in available() if c != host_default()]
    if not other:
        pytest.skip("the kernel has one TCP congestion control only")
    cc = other[0]
    srv = make_server(ccroot, args=("-v", "--tcp-cc", cc))
    assert f"TCP congestion control: {cc} (--tcp-cc)" in srv.stderr_text()
    clear, tls = ports(srv)
    for port in (clear, tls):
        got, ss = accepted_cc(srv, port, tls=port == tls)
        assert got == cc, (port, got, ss)
        assert cc in ss.split(), ss


def test_without_tcp_cc_the_hosts_default_stays(make_server, ccroot):
    srv = make_server(ccroot, args=("-v",))
    assert f"TCP congestion control: {host_default()} (the host's default)" in srv.stderr_text()
    got, ss = accepted_cc(srv, ports(srv)[0])
    assert got == host_default(), ss
