"""The command line: help, version, bad options (exit 2), unusable docroot or port (exit 1),
the listening line, engines, IPv6 (issue 2 "CLI", issue 3)."""

import re
import socket
import subprocess

import pytest

from conftest import HELLO, INDEX_HTML, LISTEN_RE, RINGHTTPD, _require_binary, fetch, \
    uring_available
from optiontable import option_table



def run(*args, timeout=10):
    _require_binary()
    try:
        return subprocess.run([RINGHTTPD, *args], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ringhttpd {' '.join(args)} did not exit within {timeout}s")


def one_line(stderr):
    lines = [ln for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    return lines[0]


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help(flag):
    p = run(flag)
    assert p.returncode == 0, p
    assert p.stderr == b"", "--help prints to stdout only"
    text = p.stdout.decode()
    assert text.startswith("Usage: ringhttpd [options] [DOCROOT]\n"), text[:80]
    missing = ["--" + o.name for o in option_table().values()
               if o.where != "file" and "--" + o.name not in text]
    assert not missing, f"--help does not mention {missing}"


def test_version():
    p = run("--version")
    assert p.returncode == 0
    assert p.stderr == b""
    assert re.match(rb"ringhttpd \d+\.\d+\.\d+\nbuilt with: .*\nleft out: ", p.stdout), p.stdout


# (arguments, what the one line says first: the option it names). An option missing its value
# takes DOCROOT as the value.
BAD_OPTIONS = [
    (["--bogus"], "unknown option '--bogus'"),
    (["-Z"], "unknown option '-Z'"),
    (["-p"], "--port wants"),
    (["-p", "abc"], "--port wants"),
    (["-p", "70000"], "--port wants"),
    (["-p", "-1"], "--port wants"),
    (["-t", "abc"], "--threads wants"),
    (["-t", "-3"], "--threads wants"),
    (["-t", "0"], "--threads wants"),
    (["--keepalive-timeout", "0"], "--keepalive-timeout wants"),
    (["--engine", "bogus"], "--engine wants"),
    (["--engine"], "--engine wants"),
    (["--keepalive-timeout", "abc"], "--keepalive-timeout wants"),
    (["--header-timeout", "-5"], "--header-timeout wants"),
    (["--drain-timeout=0"], "--drain-timeout wants"),
    (["--cache-size", "lots"], "--cache-size wants"),
    (["--header", "NoColonHere"], "--header wants"),
    (["--error-page", "notacode"], "--error-page wants"),
    (["--port=12x"], "--port wants"),
]


@pytest.mark.parametrize("args,says", BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_bad_option_exits_2_with_one_line(args, says, docroot):
    """README: a bad option exits 2 with one line naming the option."""
    p = run(*args, str(docroot))
    assert p.returncode == 2, (args, p.returncode, p.stderr)
    line = one_line(p.stderr)
    assert line.startswith("ringhttpd: " + says), line
    assert line.endswith(" (see --help)"), line


def test_two_docroots_is_a_usage_error(docroot):
    p = run("-p", "0", str(docroot), str(docroot))
    assert p.returncode == 2
    assert one_line(p.stderr) == f"ringhttpd: one DOCROOT only; unexpected '{docroot}' (see --help)"


def test_missing_docroot_exits_1(tmp_path, engine):
    p = run("-p", "0", "-b", "127.0.0.1", "--engine", engine, str(tmp_path / "nope"))
    assert p.returncode == 1, p
    assert one_line(p.stderr) == \
        f"ringhttpd: cannot use document root '{tmp_path / 'nope'}': No such file or directory"


def test_docroot_is_a_file_exits_1(docroot, engine):
    p = run("-p", "0", "-b", "127.0.0.1", "--engine", engine, str(docroot / "hello.txt"))
    assert p.returncode == 1, p
    assert one_line(p.stderr) == \
        f"ringhttpd: cannot use document root '{docroot / 'hello.txt'}': Not a directory"


def test_port_in_use_exits_1(docroot, engine):
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        p = run("-p", str(port), "-b", "127.0.0.1", "--engine", engine, str(docroot))
        assert p.returncode == 1, p
        assert one_line(p.stderr).startswith(
            f"ringhttpd: cannot listen on 127.0.0.1 port {port}: Address already in use ")
    finally:
        holder.close()


def test_unassigned_bind_address_exits_1(docroot, engine):
    p = run("-p", "0", "-b", "192.0.2.1", "--engine", engine, str(docroot))
    assert p.returncode == 1, p
    assert one_line(p.stderr) == \
        "ringhttpd: cannot listen on 192.0.2.1 port 0: Cannot assign requested address"


def test_unparsable_bind_address_is_an_error(docroot):
    p = run("-p", "0", "-b", "not-an-address", str(docroot))
    assert p.returncode == 2, p  # a bad option value
    # issue 38: the line goes on with the entry's forms (--bind is a list now)
    assert one_line(p.stderr).startswith(
        "ringhttpd: --bind: 'not-an-address' is not an IPv4 or IPv6 address (with an optional "
        ":PORT; a host name is not resolved); it wants 'ADDR[:PORT] [tls=PORT] [proxy]'")


def test_listening_line(make_server, docroot, engine):
    server = make_server(docroot)
    lines = [ln for ln in server.stderr_text().splitlines() if "listening on" in ln]
    assert len(lines) == 1, lines
    assert LISTEN_RE.fullmatch(lines[0].strip()), lines[0]
    assert server.engine_name == engine
    assert server.threads == 2
    assert server.base_url == f"http://127.0.0.1:{server.port}"
    assert "falling back" not in server.stderr_text()


def test_threads_option(make_server, docroot):
    server = make_server(docroot, args=["-t", "3"])
    assert server.threads == 3
    assert fetch(server, "/hello.txt").body == HELLO


def test_verbose_starts_and_serves(make_server, docroot):
    server = make_server(docroot, args=["-v"])
    assert fetch(server, "/hello.txt").body == HELLO


def test_engine_auto_prefers_uring(make_server, docroot):
    server = make_server(docroot, engine="auto")
    if uring_available():
        assert server.engine_name == "uring", server.stderr_text()
    else:
        assert server.engine_name == "epoll"
        assert "falling back to epoll" in server.stderr_text()
    assert fetch(server, "/").body == INDEX_HTML


def test_long_options_with_equals(make_server, docroot):
    server = make_server(docroot, args=["--threads=1", "--keepalive-timeout=5"])
    assert server.threads == 1
    assert fetch(server, "/hello.txt").body == HELLO


def test_default_docroot_is_cwd(make_server, docroot):
    server = make_server(None, cwd=str(docroot))
    assert fetch(server, "/hello.txt").body == HELLO


def _ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def test_ipv6_bind(make_server, docroot):
    if not _ipv6_loopback():
        pytest.skip("no IPv6 loopback here")
    # bind=, not args: a second -b adds an address now (issue 38), it no longer replaces
    # make_server's 127.0.0.1
    server = make_server(docroot, bind="::1")
    assert server.host == "::1"
    assert server.base_url == f"http://[::1]:{server.port}"
    r = fetch(server, "/hello.txt", host=f"[::1]:{server.port}")
    assert r.status == 200 and r.body == HELLO
    # Not reachable over IPv4 on the same port.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
