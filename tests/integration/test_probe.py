"""The kernel probe, read from one place (issue 11, item 1): what `-v` reports.

The server probes once, before its workers start, into one capabilities struct: io_uring's
setup mode, its opcodes, and each mode the engine relies on tried for real on a small ring (a
provided buffer ring, a multishot accept, a multishot recv into the buffer ring, a cancel of
every operation of an fd), plus whether the kernel has the `tls` ULP for kernel TLS. `-v`
prints that struct once, whatever the number of workers. The test's own oracle for the `tls`
ULP is the same question asked from Python: setsockopt(TCP_ULP, "tls") on a connected loopback
socket, or the ULP listed in /proc/sys/net/ipv4/tcp_available_ulp. What -v says when io_uring is
refused is in test_fallback.py.
"""
import contextlib
import re
import socket

from conftest import HELLO, fetch

TCP_ULP = 31
REQUIRED_OPS = ["ACCEPT", "RECV", "SEND", "SENDMSG", "POLL_ADD", "ASYNC_CANCEL", "CLOSE", "READ",
                "TIMEOUT", "SHUTDOWN"]


@contextlib.contextmanager
def tls_ulp_socket():
    """A connected loopback TCP socket with the kernel's tls ULP set on it, as the server's probe
    sets it, or None when the kernel refuses the ULP."""
    with socket.socket() as lsock, socket.socket() as csock:
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)
        csock.connect(lsock.getsockname())
        try:
            csock.setsockopt(socket.IPPROTO_TCP, TCP_ULP, b"tls")
        except OSError:
            csock = None
        yield csock


def _kernel_has_tls_ulp():
    """True when this kernel has (or loads on demand) the tls ULP, asked as the server asks."""
    with open("/proc/sys/net/ipv4/tcp_available_ulp") as f:
        if "tls" in f.read().split():
            return True
    with tls_ulp_socket() as s:
        return s is not None


def _tls_line(text):
    lines = [l for l in text.splitlines() if l.startswith("ringhttpd: kernel TLS (tls ULP): ")]
    assert len(lines) == 1, f"want one kernel TLS line:\n{text}"
    return lines[0]


def _probe_lines(text):
    return [l for l in text.splitlines() if l.startswith("ringhttpd: io_uring: ")]


def test_verbose_prints_the_probe_once(make_server, docroot, engine):
    want_tls = _kernel_has_tls_ulp()
    server = make_server(docroot, args=["-v", "-t", "3"])
    assert fetch(server, "/hello.txt").body == HELLO
    text = server.stderr_text()

    tls = _tls_line(text)
    assert tls.startswith("ringhttpd: kernel TLS (tls ULP): " + ("yes, " if want_tls else "no, "))

    lines = _probe_lines(text)
    if engine == "epoll":
        assert lines == ["ringhttpd: io_uring: not probed"], text
        return
    # Printed once for three workers: they read the struct, they do not probe again.
    assert len(lines) == 4, text
    ring, opcodes, tried, verdict = lines
    modes = r"SINGLE_ISSUER\|DEFER_TASKRUN\|SUBMIT_ALL|COOP_TASKRUN\|SUBMIT_ALL|plain"
    assert re.fullmatch(rf"ringhttpd: io_uring: ring yes, setup ({modes}), "
                        r"features 0x[0-9a-f]+( \(CQE_SKIP\))?", ring), ring
    ops = opcodes.removeprefix("ringhttpd: io_uring: opcodes ").split()
    for op in REQUIRED_OPS:
        assert op in ops, (op, opcodes)
    assert tried == ("ringhttpd: io_uring: tried: buffer ring yes, multishot accept yes, "
                     "multishot recv yes, cancel fd/all yes"), tried
    assert verdict == "ringhttpd: io_uring: usable"
    assert "falling back" not in text
