"""The epoll fallback, tested where it matters: under a seccomp filter that forbids io_uring.

Issue 3: io_uring is blocked by Docker's and containerd's default seccomp profiles (EPERM) and
missing on old kernels (ENOSYS). build/tools/noiouring (tests/tools/noiouring.c) installs such a
filter and execs ringhttpd; with --engine auto the server must say it fell back, name the errno,
run the epoll engine and serve correctly; with --engine uring it must exit 1 with a clear error.

The launcher is found beside the server under test: RINGHTTPD=/x/build/ringhttpd means
/x/build/tools/noiouring (the ASan build has its own, build/asan/tools/noiouring).
"""
import concurrent.futures
import hashlib
import http.client
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ERRNOS = {
    # errno name -> the words strerror() uses for it, which a clear message may use instead
    "EPERM": "Operation not permitted",
    "ENOSYS": "Function not implemented",
}
NR_IO_URING = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
MIB = 1 << 20
TIMEOUT = 10


def _server_binary():
    path = os.environ.get("RINGHTTPD")
    if not path:
        pytest.skip("RINGHTTPD is not set (run through `make integration`)")
    return Path(path)


@pytest.fixture
def launcher():
    tool = _server_binary().parent / "tools" / "noiouring"
    if not os.access(tool, os.X_OK):
        pytest.skip(f"{tool} is missing (built by `make` from tests/tools/noiouring.c)")
    return tool


@pytest.fixture
def site(tmp_path):
    """A docroot of our own, so the byte-exact checks know exactly what is on disk."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_bytes(b"<!doctype html><title>fallback</title><p>hello\n")
    (root / "hello.txt").write_bytes(b"hello from epoll\n")
    (root / "sub").mkdir()
    (root / "sub" / "style.css").write_bytes(b"body { color: #123456; }\n")
    (root / "big.bin").write_bytes(random.Random(3).randbytes(MIB))
    return root


def _get(conn, path):
    conn.request("GET", path)
    resp = conn.getresponse()
    return resp, resp.read()


def _assert_serves(server, site):
    """Several requests on one kept-alive connection, a 1 MiB file byte-exact, then in parallel."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    try:
        local_ports = set()
        for path, name in [
            ("/hello.txt", "hello.txt"),
            ("/sub/style.css", "sub/style.css"),
            ("/", "index.html"),
            ("/big.bin", "big.bin"),
            ("/hello.txt", "hello.txt"),
        ]:
            resp, body = _get(conn, path)
            want = (site / name).read_bytes()
            assert resp.status == 200, (path, resp.status, body[:200])
            assert int(resp.getheader("Content-Length")) == len(want), path
            assert hashlib.sha256(body).hexdigest() == hashlib.sha256(want).hexdigest(), path
            assert not resp.will_close, f"{path}: server closed a keep-alive connection"
            local_ports.add(conn.sock.getsockname()[1])
        # http.client silently reconnects after a close; one local port means one connection.
        assert len(local_ports) == 1, "requests did not share one kept-alive connection"

        resp, body = _get(conn, "/no-such-file")
        assert resp.status == 404
    finally:
        conn.close()

    want = hashlib.sha256((site / "big.bin").read_bytes()).hexdigest()

    def fetch(_):
        c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
        try:
            resp, body = _get(c, "/big.bin")
            return resp.status, hashlib.sha256(body).hexdigest()
        finally:
            c.close()

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for status, digest in pool.map(fetch, range(8)):
            assert (status, digest) == (200, want)


def _listening_line(text):
    lines = [l for l in text.splitlines() if "listening on http://" in l]
    assert lines, f"no listening line in stderr:\n{text}"
    return lines[-1]


@pytest.mark.parametrize("errno_name", sorted(ERRNOS))
def test_filter_makes_io_uring_fail(launcher, errno_name):
    """The launcher itself: every io_uring system call fails with the chosen errno."""
    probe = (
        "import ctypes, errno, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "params = ctypes.create_string_buffer(120)\n"
        "out = []\n"
        f"for name, nr in {sorted(NR_IO_URING.items())!r}:\n"
        "    args = (8, params) if name == 'io_uring_setup' else (0, 0, 0, 0, 0, 0)\n"
        "    ret = libc.syscall(ctypes.c_long(nr), *args)\n"
        "    out.append(f'{name}={ret}:{errno.errorcode.get(ctypes.get_errno(), \"?\")}')\n"
        "print(' '.join(out))\n"
    )
    res = subprocess.run(
        [str(launcher), "--errno", errno_name, "--", sys.executable, "-c", probe],
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert res.returncode == 0, res.stderr
    got = dict(item.split("=") for item in res.stdout.split())
    assert got == {name: f"-1:{errno_name}" for name in NR_IO_URING}, res.stdout


def test_launcher_usage_errors(launcher):
    for argv in ([], ["--errno", "EBOGUS", "--", "true"], ["--errno"], ["--frobnicate", "true"]):
        res = subprocess.run([str(launcher), *argv], capture_output=True, text=True,
                             timeout=TIMEOUT)
        assert res.returncode == 2, (argv, res.returncode)
        assert res.stderr.startswith("noiouring: "), (argv, res.stderr)


@pytest.mark.parametrize("errno_name", sorted(ERRNOS))
def test_auto_falls_back_to_epoll(make_server, launcher, site, errno_name):
    server = make_server(docroot=str(site), engine="auto",
                         wrapper=[str(launcher), "--errno", errno_name, "--"])
    text = server.stderr_text()
    fell = [l for l in text.splitlines() if "falling back to epoll" in l]
    assert fell, f"no 'falling back to epoll' line in stderr:\n{text}"
    assert errno_name in fell[0], f"fallback line does not name {errno_name}: {fell[0]!r}"
    assert text.index(fell[0]) < text.index(_listening_line(text)), \
        "the fallback line must come before the listening line"
    assert "(engine epoll," in _listening_line(text)

    _assert_serves(server, site)

    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=TIMEOUT) == 0, server.stderr_text()


def test_auto_without_filter_uses_io_uring(make_server, site):
    """The control: the fallback above is the filter's doing, not this machine's."""
    server = make_server(docroot=str(site), engine="auto")
    line = _listening_line(server.stderr_text())
    if "(engine uring," not in line:
        pytest.skip(f"io_uring is unusable on this machine without any filter: {line}")
    assert "falling back" not in server.stderr_text()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    try:
        assert _get(conn, "/hello.txt")[1] == (site / "hello.txt").read_bytes()
    finally:
        conn.close()


@pytest.mark.parametrize("errno_name", sorted(ERRNOS))
def test_forced_uring_under_filter_exits_1(launcher, site, errno_name):
    """--engine uring where io_uring is forbidden: a clear error and exit 1, not a crash or a hang."""
    cmd = [str(launcher), "--errno", errno_name, "--", str(_server_binary()),
           "-p", "0", "-b", "127.0.0.1", "-t", "2", "--engine", "uring", str(site)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"--engine uring under the filter did not exit within {TIMEOUT}s: {e.stderr}")
    err = res.stderr
    assert res.returncode == 1, f"exit status {res.returncode}, stderr:\n{err}"
    assert "listening on" not in err
    assert "uring" in err.lower(), f"the error does not say io_uring is the problem:\n{err}"
    assert errno_name in err or ERRNOS[errno_name] in err, \
        f"the error does not say why ({errno_name}):\n{err}"
    for crash in ("Sanitizer", "Segmentation", "Aborted", "core dumped", "panic"):
        assert crash not in err, f"looks like a crash:\n{err}"
    assert len(err.strip().splitlines()) <= 5, f"a clear error is short:\n{err}"
