"""The epoll fallback, tested where it matters: under a seccomp filter that forbids io_uring.

Issue 3: io_uring is blocked by Docker's and containerd's default seccomp profiles (EPERM) and
missing on old kernels (ENOSYS). build/tools/noiouring (tests/tools/noiouring.c) installs such a
filter and execs ringhttpd; with --engine auto the server must say it fell back, name the errno,
run the epoll engine and serve correctly; with --engine uring it must exit 1 with a clear error.

The launcher is found beside the server under test ($RINGHTTPD, default build/ringhttpd):
/x/build/ringhttpd means /x/build/tools/noiouring (the ASan build has its own,
build/asan/tools/noiouring); the tests skip when it is missing.
"""
import concurrent.futures
import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import (BIG, DOCROOT_FILES, HELLO, INDEX_HTML, RINGHTTPD, Conn, fetch, request,
                      uring_available)

ERRNOS = {
    # errno name -> the words strerror() uses for it, which a clear message may use instead
    "EPERM": "Operation not permitted",
    "ENOSYS": "Function not implemented",
}
NR_IO_URING = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
TIMEOUT = 10


@pytest.fixture
def engine():
    """Overrides conftest's [uring, epoll] parametrisation: every server here is --engine auto
    (make_server's default), and the choice is the filter's, so running twice would test nothing
    more."""
    return "auto"


@pytest.fixture
def launcher():
    tool = Path(RINGHTTPD).parent / "tools" / "noiouring"
    if not os.access(tool, os.X_OK):
        pytest.skip(f"{tool} is missing (built by `make` from tests/tools/noiouring.c)")
    return tool


def _assert_serves(server):
    """Several requests on one kept-alive connection, a 1 MiB file byte-exact, then in parallel."""
    with Conn(server, timeout=TIMEOUT) as c:
        local = c.sock.getsockname()
        for path, want in [("/hello.txt", HELLO), ("/style.css", DOCROOT_FILES["style.css"]),
                           ("/", INDEX_HTML), ("/big.bin", BIG), ("/hello.txt", HELLO)]:
            c.send(request("GET", path))
            r = c.read()
            assert r.status == 200, (path, r)
            assert r.body == want, f"{path}: body differs ({len(r.body)} bytes, want {len(want)})"
            assert r.keep_alive, f"{path}: the server closed a keep-alive connection: {r}"
        c.send(request("HEAD", "/big.bin"))
        r = c.read("HEAD")
        assert r.status == 200 and r.header("content-length") == str(len(BIG)) and not r.body
        c.send(request("GET", "/no-such-file"))
        assert c.read().status == 404
        assert c.sock.getsockname() == local
        assert c.is_open()

    def big(_):
        r = fetch(server, "/big.bin", timeout=TIMEOUT)
        return r.status, r.body == BIG

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for status, same in pool.map(big, range(8)):
            assert (status, same) == (200, True)


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
def test_auto_falls_back_to_epoll(make_server, launcher, docroot, errno_name):
    server = make_server(docroot, wrapper=[str(launcher), "--errno", errno_name, "--"])
    text = server.stderr_text()
    fell = [l for l in text.splitlines() if "falling back to epoll" in l]
    assert fell, f"no 'falling back to epoll' line in stderr:\n{text}"
    assert errno_name in fell[0], f"fallback line does not name {errno_name}: {fell[0]!r}"
    assert text.index(fell[0]) < text.index(_listening_line(text)), \
        "the fallback line must come before the listening line"
    assert server.engine_name == "epoll", _listening_line(text)

    _assert_serves(server)

    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=TIMEOUT) == 0, server.stderr_text()


def test_auto_without_filter_uses_io_uring(make_server, docroot):
    """The control: the fallback above is the filter's doing, not this machine's."""
    if not uring_available():
        pytest.skip("io_uring is unusable here even without the filter")
    server = make_server(docroot)
    assert server.engine_name == "uring", _listening_line(server.stderr_text())
    assert "falling back" not in server.stderr_text()
    assert fetch(server, "/hello.txt").body == HELLO


@pytest.mark.parametrize("errno_name", sorted(ERRNOS))
def test_forced_uring_under_filter_exits_1(launcher, docroot, errno_name):
    """--engine uring where io_uring is forbidden: a clear error and exit 1, not a crash or a hang."""
    if not os.access(RINGHTTPD, os.X_OK):
        pytest.skip(f"server binary {RINGHTTPD} not built")
    cmd = [str(launcher), "--errno", errno_name, "--", RINGHTTPD,
           "-p", "0", "-b", "127.0.0.1", "-t", "2", "--engine", "uring", str(docroot)]
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


@pytest.mark.parametrize("errno_name", sorted(ERRNOS))
def test_verbose_fallback_names_the_failed_requirement(make_server, launcher, docroot,
                                                       errno_name):
    """-v under the filter (issue 11): the probe's struct shows the ring refused with that errno
    and nothing after it tried, and the one fallback line names the failed requirement."""
    server = make_server(docroot, args=["-v"], wrapper=[str(launcher), "--errno", errno_name, "--"])
    assert server.engine_name == "epoll"
    text = server.stderr_text()
    probe = [l for l in text.splitlines() if l.startswith("ringhttpd: io_uring: ")]
    assert len(probe) == 4, text
    assert probe[0].startswith(f"ringhttpd: io_uring: ring no ({ERRNOS[errno_name]}), "), text
    assert probe[2] == ("ringhttpd: io_uring: tried: buffer ring untried, multishot accept "
                        "untried, multishot recv untried, cancel fd/all untried"), text
    assert probe[3] == ("ringhttpd: io_uring: not usable: io_uring_setup failed "
                        f"({ERRNOS[errno_name]})"), text
    fell = [l for l in text.splitlines() if "falling back to epoll" in l]
    assert fell == [f"ringhttpd: io_uring unavailable: io_uring_setup failed ({errno_name}: "
                    f"{ERRNOS[errno_name]}); falling back to epoll"], text
    assert len([l for l in text.splitlines() if "kernel TLS (tls ULP): " in l]) == 1, text
    assert fetch(server, "/hello.txt").body == HELLO


IORING_REGISTER_PBUF_RING = 22


def test_register_op_filter(launcher):
    """The launcher's --register-op: io_uring works, except that one registration opcode."""
    probe = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "params = ctypes.create_string_buffer(120)\n"
        "fd = libc.syscall(ctypes.c_long(425), 8, params)\n"
        "assert fd >= 0, ctypes.get_errno()\n"
        "out = []\n"
        "for op in (22, 8):\n"
        "    ret = libc.syscall(ctypes.c_long(427), fd, op, None, 0)\n"
        "    out.append(f'{op}={ret}:{ctypes.get_errno() if ret < 0 else 0}')\n"
        "print(' '.join(out))\n"
    )
    res = subprocess.run(
        [str(launcher), "--errno", "EACCES", "--register-op", str(IORING_REGISTER_PBUF_RING),
         "--", sys.executable, "-c", probe],
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert res.returncode == 0, res.stderr
    got = dict(item.split("=") for item in res.stdout.split())
    assert got["22"] == f"-1:{errno.EACCES}", res.stdout
    assert not got["8"].endswith(f":{errno.EACCES}"), res.stdout  # the kernel's own answer


def test_auto_falls_back_when_a_tried_feature_fails(make_server, launcher, docroot):
    """Issue 11: a kernel whose ring sets up but refuses a feature the engine relies on (here a
    5.18 answer, EINVAL, to registering a provided buffer ring) is caught by the probe's real
    tries: one line names the feature, and epoll serves, instead of connections failing later."""
    server = make_server(docroot, args=["-v"], wrapper=[
        str(launcher), "--errno", "EINVAL", "--register-op", str(IORING_REGISTER_PBUF_RING), "--"])
    text = server.stderr_text()
    assert server.engine_name == "epoll", text
    probe = [l for l in text.splitlines() if l.startswith("ringhttpd: io_uring: ")]
    assert probe[0].startswith("ringhttpd: io_uring: ring yes, "), text
    assert probe[2] == ("ringhttpd: io_uring: tried: buffer ring no (Invalid argument), multishot "
                        "accept untried, multishot recv untried, cancel fd/all untried"), text
    fell = [l for l in text.splitlines() if "falling back to epoll" in l]
    assert fell == ["ringhttpd: io_uring unavailable: registering a provided buffer ring failed "
                    "(needs kernel 5.19) (EINVAL: Invalid argument); falling back to epoll"], text
    _assert_serves(server)


def test_forced_uring_names_the_failed_feature(launcher, docroot):
    cmd = [str(launcher), "--errno", "EINVAL", "--register-op", str(IORING_REGISTER_PBUF_RING),
           "--", RINGHTTPD, "-p", "0", "-b", "127.0.0.1", "-t", "1", "--engine", "uring",
           str(docroot)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert res.returncode == 1, res.stderr
    assert res.stderr == ("ringhttpd: --engine uring: io_uring is unavailable: registering a "
                          "provided buffer ring failed (needs kernel 5.19) (EINVAL: Invalid "
                          "argument)\n"), res.stderr
