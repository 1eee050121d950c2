"""Running ringhttpd as a service (issue 13, items 8-10 of issue 10): signals, SIGHUP reload,
a DOCROOT re-pointed or recreated under a running server, the drain's listeners, zero-downtime
restarts, a port already in use, systemd socket activation and notification, --user, Landlock."""
import errno
import os
import pathlib
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time

import pytest

from conftest import HELLO, Conn, fetch, free_port, recv_all, request, stalled_download, \
    tls_wrap, wait_for


def body_or_status(server, path):
    r = fetch(server, path)
    return r.body if r.status == 200 else r.status


# ---------------------------------------------------------------------------------------------
# Signals (issue 10 item 8).


@pytest.mark.schemes("http", "https")  # issue 14: the drain over TLS too
def test_habitual_signals_do_not_kill_and_sigquit_drains(server):
    for sig in (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP):
        server.proc.send_signal(sig)
        time.sleep(0.1)
        assert server.alive(), f"{sig!r} killed the server: {server.stderr_text()[-2000:]}"
        assert fetch(server, "/hello.txt").body == HELLO
    assert "SIGUSR1" in server.stderr_text()
    assert server.stop(signal.SIGQUIT) == 0, server.stderr_text()[-3000:]


@pytest.mark.schemes("http", "https")  # issue 14: the drain over TLS too
def test_second_stop_signal_ends_the_drain_at_once(make_server, docroot, random_file):
    """A stalled download would hold the drain for 60 s; a second SIGTERM ends it now."""
    os.link(random_file(16 << 20)[0], docroot / "huge.bin")
    server = make_server(docroot, args=["--drain-timeout", "60"])
    s = stalled_download(server, "/huge.bin")
    try:
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert server.alive(), "the first SIGTERM must drain, not exit"
        assert server.stop(signal.SIGINT, timeout=8) == 0, server.stderr_text()[-3000:]
        assert "closing every connection now" in server.stderr_text()
    finally:
        s.close()


# ---------------------------------------------------------------------------------------------
# The drain's listeners (issue 10 item 9).


def _refused(addr):
    try:
        with socket.create_connection(addr, timeout=2) as s:
            s.sendall(request("GET", "/hello.txt", close=True))
            s.settimeout(2)
            s.recv(1)
            return False  # accepted (answered or closed): not refused
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


@pytest.mark.schemes("http", "https")  # issue 14: the drain over TLS too
def test_drain_stops_queueing_new_connections(make_server, docroot, random_file):
    """While a drain finishes a slow download, new clients are refused, not left queued in a
    listener that nobody accepts from (and reset at exit)."""
    os.link(random_file(16 << 20)[0], docroot / "huge.bin")
    server = make_server(docroot, args=["--drain-timeout", "30"])
    s = stalled_download(server, "/huge.bin")
    try:
        server.proc.send_signal(signal.SIGTERM)
        assert wait_for(lambda: _refused(server.addr), timeout=8), \
            "new connections still queue during the drain"
        assert server.alive(), "the drain should still be waiting for the download"
    finally:
        s.close()
    assert server.stop(signal.SIGTERM, timeout=10) == 0


@pytest.mark.schemes("http", "https")  # issue 14: the drain over TLS too
def test_connections_queued_at_drain_start_are_answered(make_server, docroot):
    """Clients that connected just before the stop signal get their response."""
    server = make_server(docroot, args=["-t", "1"])
    socks = []
    try:
        for _ in range(20):
            # Over TLS the handshake is done here: the connection is accepted, not queued.
            c = tls_wrap(server, socket.create_connection(server.addr, timeout=10))
            c.sendall(request("GET", "/hello.txt", close=True))
            socks.append(c)
        server.proc.send_signal(signal.SIGTERM)
        for c in socks:
            got = recv_all(c)
            assert got.startswith(b"HTTP/1.1 200") and got.endswith(HELLO), got[:200]
    finally:
        for c in socks:
            c.close()
    assert server.stop(timeout=10) == 0


# ---------------------------------------------------------------------------------------------
# Zero-downtime restart and a port already in use (issue 13).


def test_port_served_by_an_unrelated_process_is_an_error(make_server, docroot):
    # The other process even set SO_REUSEPORT: joining it silently would split its traffic.
    other = socket.socket()
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    other.bind(("127.0.0.1", 0))
    other.listen(8)
    port = other.getsockname()[1]
    try:
        server = make_server(docroot, args=["-p", str(port)], ready=False)
        assert server.proc.wait(timeout=10) == 1
        server.stop()
        err = server.stderr_text()
        assert "Address already in use" in err and "--reuse-port" in err, err
    finally:
        other.close()


def _load(server, stop, errors, counts, i):
    """One client: a new connection per request until told to stop (bounded anyway), over TLS
    to the TLS port when server is under the https scheme."""
    for _ in range(100000):
        if stop.is_set():
            return
        try:
            r = fetch_addr(server.addr, "/hello.txt", server)
            if r != HELLO:
                errors.append(f"client {i}: wrong answer {r[:100]!r}")
            counts[i] += 1
        except OSError as e:
            errors.append(f"client {i} at {time.monotonic():.3f}: {e!r}")


def fetch_addr(addr, path, server=None):
    """GET path on a new connection to addr (through TLS when server is an https one)."""
    with socket.create_connection(addr, timeout=10) as sock:
        s = tls_wrap(server, sock) if server is not None else sock
        s.sendall(request("GET", path, close=True))
        got = recv_all(s)
    head, _, body = got.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200 "):
        return head
    return body


@pytest.mark.schemes("http", "https")  # issue 14: the TLS port is handed over too
def test_zero_downtime_restart_three_times_under_load(make_server, docroot):
    """The documented procedure: start the new process on the same port with --reuse-port, then
    SIGTERM the old one. Clients hammering the port meanwhile see no error at all. Under https
    they hammer the TLS port, which the successor shares too (--tls-port, its own reuseport
    group: the hand-over steers each port's group)."""
    first = make_server(docroot)
    ports = ["-p", str(first.clear_port or first.port)]
    if first.scheme == "https":
        ports += ["--tls-port", str(first.port)]
    stop, errors, counts = threading.Event(), [], [0] * 4
    clients = [threading.Thread(target=_load, args=(first, stop, errors, counts, i))
               for i in range(4)]
    for t in clients:
        t.start()
    current, events = first, []
    try:
        for _ in range(3):
            time.sleep(0.5)
            events.append(f"start {time.monotonic():.3f}")
            successor = make_server(docroot, args=[*ports, "--reuse-port"])
            events.append(f"ready {time.monotonic():.3f}")
            time.sleep(0.3)
            events.append(f"stop {time.monotonic():.3f}")
            assert current.stop(signal.SIGTERM, timeout=15) == 0, current.stderr_text()[-3000:]
            events.append(f"gone {time.monotonic():.3f}")
            current = successor
        time.sleep(0.5)
    finally:
        stop.set()
        for t in clients:
            t.join(timeout=30)
    assert not errors, (errors[:10], events)
    assert all(n > 0 for n in counts), counts


def _fetch_unix(path, url):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(path)
        sock.sendall(request("GET", url, close=True))
        got = recv_all(sock)
    head, _, body = got.partition(b"\r\n\r\n")
    return body if head.startswith(b"HTTP/1.1 200 ") else head


def _load_on(fetch_one, stop, errors, counts, i):
    """As _load, through fetch_one() (an address of its own, or a Unix socket)."""
    for _ in range(100000):
        if stop.is_set():
            return
        try:
            r = fetch_one()
            if r != HELLO:
                errors.append(f"client {i}: wrong answer {r[:100]!r}")
            counts[i] += 1
        except OSError as e:
            errors.append(f"client {i} at {time.monotonic():.3f}: {e!r}")


def test_zero_downtime_restart_with_two_addresses_and_a_unix_socket(make_server, docroot,
                                                                    tmp_path):
    """Issue 38: the hand-over with several listeners. 127.0.0.1 and [::1] on one port (two
    reuseport groups, each handed over on its own: the count is by address) and a Unix socket
    (the successor renames its own over the path); clients on all three see no error across
    two restarts, and the last instance removes the socket file at exit."""
    port, sock = free_port(), tmp_path / "r.sock"
    args = ["-p", str(port), "-b", "::1", "-b", f"unix:{sock}"]
    first = make_server(docroot, args=args)
    fetchers = [lambda: fetch_addr(("127.0.0.1", port), "/hello.txt"),
                lambda: fetch_addr(("::1", port), "/hello.txt"),
                lambda: _fetch_unix(str(sock), "/hello.txt")]
    stop, errors, counts = threading.Event(), [], [0] * 3
    clients = [threading.Thread(target=_load_on, args=(f, stop, errors, counts, i))
               for i, f in enumerate(fetchers)]
    for t in clients:
        t.start()
    current = first
    try:
        for _ in range(2):
            time.sleep(0.5)
            successor = make_server(docroot, args=[*args, "--reuse-port"])
            assert "taken over from the process that served it" in successor.stderr_text()
            time.sleep(0.3)
            assert current.stop(signal.SIGTERM, timeout=15) == 0, current.stderr_text()[-3000:]
            assert sock.exists()  # the predecessor left the successor's file in place
            current = successor
        time.sleep(0.5)
    finally:
        stop.set()
        for t in clients:
            t.join(timeout=30)
    assert not errors, errors[:10]
    assert all(n > 0 for n in counts), counts
    assert current.stop() == 0
    assert not sock.exists()


# ---------------------------------------------------------------------------------------------
# SIGHUP reload, a re-pointed or recreated DOCROOT (issue 13, issue 10 item 10).


@pytest.fixture
def releases(tmp_path):
    """site/release-1 and site/release-2 (different a.txt and data.bin), site/current -> 1."""
    site = tmp_path / "site"
    for n in (1, 2):
        rel = site / f"release-{n}"
        rel.mkdir(parents=True)
        (rel / "a.txt").write_bytes(b"release %d\n" % n)
        # Sizes differ, so a body of one release with the length of the other shows.
        (rel / "data.bin").write_bytes(bytes([48 + n]) * (300000 + 50000 * n))
    (site / "current").symlink_to("release-1")
    return site


def repoint(site, target):
    tmp = site / "current.tmp"
    if tmp.is_symlink():
        tmp.unlink()
    tmp.symlink_to(target)
    os.rename(tmp, site / "current")  # ln -sfn target current.tmp && mv -T current.tmp current


def test_repointed_docroot_symlink_is_followed_without_a_signal(make_server, releases):
    server = make_server(releases / "current")
    assert fetch(server, "/a.txt").body == b"release 1\n"
    repoint(releases, "release-2")
    assert wait_for(lambda: body_or_status(server, "/a.txt") == b"release 2\n"), \
        "the re-pointed DOCROOT was not picked up"
    repoint(releases, "release-1")
    assert wait_for(lambda: body_or_status(server, "/a.txt") == b"release 1\n")


def test_removed_and_recreated_docroot_is_picked_up(make_server, tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    (www / "a.txt").write_bytes(b"old\n")
    server = make_server(www)
    assert fetch(server, "/a.txt").body == b"old\n"
    shutil.rmtree(www)
    www.mkdir()
    (www / "a.txt").write_bytes(b"new\n")
    assert wait_for(lambda: body_or_status(server, "/a.txt") == b"new\n"), \
        "a recreated DOCROOT still serves the deleted one"


def test_no_response_mixes_two_releases(make_server, releases):
    """While the symlink flips back and forth, every response is one release's file whole:
    its Content-Length and ETag match its bytes."""
    server = make_server(releases / "current", args=["--cache-max-file", "320K"])
    stop, bad, seen = threading.Event(), [], set()

    def client():
        for _ in range(2000):
            if stop.is_set():
                return
            with Conn(server, timeout=10) as c:
                for _ in range(5):
                    r = c.request("GET", "/data.bin")
                    n = r.body[:1]
                    if r.status != 200 or r.body != n * len(r.body) or n not in b"12":
                        bad.append((r.status, len(r.body), r.body[:1]))
                    elif len(r.body) != 300000 + 50000 * int(n):
                        bad.append(("length", len(r.body), n))
                    seen.add((n, r.header("etag")))

    threads = [threading.Thread(target=client) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(8):
            repoint(releases, f"release-{2 - i % 2}")
            time.sleep(0.6)
            if i == 4:
                server.proc.send_signal(signal.SIGHUP)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not bad, bad[:10]
    assert {n for n, _ in seen} == {b"1", b"2"}, seen
    etags = {}
    for n, etag in seen:
        if etag:  # none while a file version's digest is made off the loop (issue 38)
            etags.setdefault(etag, set()).add(n)
    assert all(len(v) == 1 for v in etags.values()), etags


def test_sighup_rereads_mime_types_and_forgets_cached_files(make_server, docroot, tmp_path):
    types = tmp_path / "extra.types"
    types.write_text("application/x-first ringtest\n")
    (docroot / "f.ringtest").write_bytes(b"x")
    server = make_server(docroot, args=["--mime-types", str(types)])
    assert fetch(server, "/f.ringtest").header("content-type") == "application/x-first"
    types.write_text("application/x-second ringtest\n")
    server.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: fetch(server, "/f.ringtest").header("content-type")
                      == "application/x-second"), server.stderr_text()[-2000:]


def test_failed_reload_keeps_the_old_state_and_says_why(make_server, releases, tmp_path):
    types = tmp_path / "extra.types"
    types.write_text("application/x-first ringtest\n")
    (releases / "release-1" / "f.ringtest").write_bytes(b"x")
    server = make_server(releases / "current", args=["--mime-types", str(types)])
    types.write_text("not a valid line \x01\n")
    server.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: "reload (SIGHUP) failed" in server.stderr_text())
    assert "line 1" in server.stderr_text()
    assert fetch(server, "/f.ringtest").header("content-type") == "application/x-first"
    # DOCROOT gone: the symlink points nowhere. Still serving the old release.
    types.write_text("application/x-first ringtest\n")
    repoint(releases, "release-gone")
    server.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: "cannot use document root" in server.stderr_text())
    assert fetch(server, "/a.txt").body == b"release 1\n"
    assert server.alive()


# ---------------------------------------------------------------------------------------------
# systemd: notification and socket activation (issue 13).


def test_sd_notify_ready_reloading_stopping(make_server, docroot, tmp_path):
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(10)
    try:
        server = make_server(docroot, env={"NOTIFY_SOCKET": path})

        def next_msg():
            return dict(line.split("=", 1)
                        for line in sock.recv(4096).decode().splitlines() if "=" in line)

        ready = next_msg()
        assert ready.get("READY") == "1" and "STATUS" in ready, ready
        server.proc.send_signal(signal.SIGHUP)
        reloading = next_msg()
        assert reloading.get("RELOADING") == "1", reloading
        usec = int(reloading["MONOTONIC_USEC"])
        assert abs(usec / 1e6 - time.clock_gettime(time.CLOCK_MONOTONIC)) < 30
        assert next_msg().get("READY") == "1"
        assert fetch(server, "/hello.txt").body == HELLO
        server.proc.send_signal(signal.SIGTERM)
        assert next_msg().get("STOPPING") == "1"
        assert server.stop() == 0
    finally:
        sock.close()


@pytest.mark.skipif(not shutil.which("systemd-socket-activate"),
                    reason="systemd-socket-activate missing (Debian package systemd)")
@pytest.mark.parametrize("nsockets", [1, 2])
def test_socket_activation(make_server, docroot, nsockets):
    ports = [free_port() for _ in range(nsockets)]
    wrapper = ["systemd-socket-activate"]
    for p in ports:
        wrapper += ["-l", f"127.0.0.1:{p}"]
    wrapper += ["--fdname=" + ":".join(f"web{i}" for i in range(nsockets)), "--"]
    server = make_server(docroot, wrapper=wrapper, args=["-v", "-t", "3"], ready=False)
    # systemd-socket-activate starts the service at the first connection, as systemd does.
    assert wait_for(lambda: server.stderr_text().count("Listening on") == nsockets, 10)
    first = socket.create_connection(("127.0.0.1", ports[0]), timeout=10)
    first.sendall(request("GET", "/hello.txt", close=True))
    server.wait_ready()
    got = recv_all(first)
    first.close()
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(HELLO), got[:200]
    assert "on sockets from systemd" in server.stderr_text()
    assert f"socket activation: {nsockets} socket" in server.stderr_text()
    assert server.port == ports[0]
    for p in ports:
        for _ in range(12):  # more requests than workers: every worker's dup is accepting
            assert fetch_addr(("127.0.0.1", p), "/hello.txt") == HELLO
    assert server.stop() == 0, server.stderr_text()[-3000:]


def test_socket_activation_of_two_addresses_and_a_unix_socket_serves_all(make_server, docroot,
                                                                          tmp_path):
    """Issue 38: three sockets from the service manager (127.0.0.1, [::1], a Unix socket) and
    one worker: each is served (worker i used to get socket i % n only, so with fewer workers
    than sockets the others were never accepted), the Unix client is logged as unix:."""
    v4, v6, un = socket.socket(), socket.socket(socket.AF_INET6), socket.socket(socket.AF_UNIX)
    v4.bind(("127.0.0.1", 0))
    v6.bind(("::1", 0))
    path = str(tmp_path / "act.sock")
    un.bind(path)
    holders = [v4, v6, un]
    for h in holders:
        h.listen(64)
    fds = [h.fileno() for h in holders]
    wrapper = [sys.executable, "-c", "import os, sys; fds = [int(f) for f in sys.argv[1:4]]; "
               "[os.dup2(f, 3 + i) for i, f in enumerate(fds)]; "
               "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='3'); "
               "os.execvp(sys.argv[4], sys.argv[4:])", *map(str, fds)]
    try:
        server = make_server(docroot, wrapper=wrapper, pass_fds=fds, args=["-t", "1", "-v"])
        assert "socket activation: 3 sockets" in server.stderr_text()
        for _ in range(3):
            assert fetch_addr(v4.getsockname()[:2], "/hello.txt") == HELLO
            assert fetch_addr(v6.getsockname()[:2], "/hello.txt") == HELLO
            assert _fetch_unix(path, "/hello.txt") == HELLO
        assert wait_for(lambda: b"\nunix: " in b"\n" + server.stdout_bytes(), 5)
        assert server.stop(signal.SIGTERM) == 0, server.stderr_text()[-3000:]
        assert os.path.exists(path)  # the service manager's socket: not ours to remove
    finally:
        for h in holders:
            h.close()


def test_socket_activated_restart_keeps_the_socket_listening(make_server, docroot):
    """With socket activation the service manager's socket outlives each instance: after one
    drains and exits, a client still queues in it (not refused) and the next instance answers.
    The test holds the socket as systemd would and hands it over as LISTEN_FDS fd 3."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(64)
    addr = holder.getsockname()
    wrapper = [sys.executable, "-c", "import os, sys; os.dup2(int(sys.argv[1]), 3); "
               "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1'); "
               "os.execvp(sys.argv[2], sys.argv[2:])", str(holder.fileno())]
    try:
        first = make_server(docroot, wrapper=wrapper, pass_fds=[holder.fileno()])
        assert "on sockets from systemd" in first.stderr_text()
        assert fetch_addr(addr, "/hello.txt") == HELLO
        assert first.stop(signal.SIGTERM) == 0, first.stderr_text()[-3000:]
        waiting = socket.create_connection(addr, timeout=10)  # refused once the socket is shut
        waiting.sendall(request("GET", "/hello.txt", close=True))
        second = make_server(docroot, wrapper=wrapper, pass_fds=[holder.fileno()])
        got = recv_all(waiting)
        waiting.close()
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(HELLO), got[:200]
        assert second.stop(signal.SIGTERM) == 0, second.stderr_text()[-3000:]
    finally:
        holder.close()


# ---------------------------------------------------------------------------------------------
# Least privilege (issue 13).


@pytest.fixture
def public_root():
    """A docroot nobody can traverse to (pytest's tmp dirs are private to root)."""
    base = tempfile.mkdtemp(prefix="ringhttpd-public-")
    os.chmod(base, 0o755)
    root = pathlib.Path(base) / "www"
    root.mkdir(mode=0o755)
    (root / "hello.txt").write_bytes(HELLO)
    (root / "hello.txt").chmod(0o644)
    (root / "private.txt").write_bytes(b"root only\n")
    (root / "private.txt").chmod(0o600)
    yield root
    shutil.rmtree(base)


def _status_ids(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.split()
    return fields


@pytest.mark.skipif(os.geteuid() != 0, reason="--user needs the test to run as root")
def test_user_drops_root_after_binding(make_server, public_root):
    import pwd
    nobody = pwd.getpwnam("nobody")
    server = make_server(public_root, args=["--user", "nobody"])
    ids = _status_ids(server.proc.pid)
    assert ids["Uid"] == [str(nobody.pw_uid)] * 4, ids["Uid"]
    assert ids["Gid"] == [str(nobody.pw_gid)] * 4, ids["Gid"]
    assert ids.get("Groups", []) == [], ids.get("Groups")
    assert fetch(server, "/hello.txt").body == HELLO
    assert fetch(server, "/private.txt").status == 403
    assert "serving as root" not in server.stderr_text()


def test_root_without_user_says_so_once(server):
    if os.geteuid() != 0:
        assert "serving as root" not in server.stderr_text()
    else:
        assert server.stderr_text().count("serving as root") == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="starts the server as nobody with setpriv")
def test_user_naming_the_running_user_is_a_note_not_an_error(make_server, public_root):
    """A container that runs as its image's USER (a Kubernetes pod's runAsUser) and a command
    line that also says --user for it, as contrib/kubernetes's did (issue 36.3): nothing to
    change, so it serves with a note instead of exiting 1. Another user still cannot be
    reached without root."""
    import grp
    import pwd
    nobody = pwd.getpwnam("nobody")
    group = grp.getgrgid(nobody.pw_gid).gr_name
    as_nobody = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                 "--clear-groups"]
    for spec in ("nobody", f"nobody:{group}"):
        server = make_server(public_root, args=["--user", spec], wrapper=as_nobody)
        assert _status_ids(server.proc.pid)["Uid"] == [str(nobody.pw_uid)] * 4
        assert fetch(server, "/hello.txt").body == HELLO
        assert f"--user {spec}: already running as that user and group" in server.stderr_text()
        server.stop()
    root_group = grp.getgrgid(0).gr_name
    server = make_server(public_root, args=["--user", f"nobody:{root_group}"],
                         wrapper=as_nobody, ready=False)
    assert server.proc.wait(timeout=10) == 1
    server.stop()
    assert "only a process started as root can change user" in server.stderr_text()


def test_user_errors(make_server, docroot):
    server = make_server(docroot, args=["--user", "no-such-user-ringhttpd"], ready=False)
    assert server.proc.wait(timeout=10) == 1
    server.stop()
    assert "no user 'no-such-user-ringhttpd'" in server.stderr_text()


# Execs argv[3:] with system call argv[1] (an x86_64 number) failing with errno argv[2], as
# under a seccomp filter: systemd-nspawn 252's does not know Landlock, and systemd's
# RestrictSUIDSGID= (implied by DynamicUser=) makes openat2 fail with ENOSYS. Both were found
# running dist/ringhttpd.service under a booted container. Other architectures skip.
DENY_SYSCALL = r"""
import ctypes, os, struct, sys
def insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)
prog = b"".join([
    insn(0x20, 0, 0, 0),                               # ld [nr]
    insn(0x15, 0, 1, int(sys.argv[1])),                # jeq #nr ? next : allow
    insn(0x06, 0, 0, 0x00050000 | int(sys.argv[2])),   # ret ERRNO(errno)
    insn(0x06, 0, 0, 0x7fff0000),                      # ret ALLOW
])
buf = ctypes.create_string_buffer(prog)
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxQ", 4, ctypes.addressof(buf)))
assert libc.prctl(38, 1, 0, 0, 0) == 0                             # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0) == 0       # PR_SET_SECCOMP, FILTER
os.execvp(sys.argv[3], sys.argv[3:])
"""
x86_64_only = pytest.mark.skipif(os.uname().machine != "x86_64",
                                 reason="the filter knows x86_64 system call numbers")


def _deny(nr, err):
    return [sys.executable, "-c", DENY_SYSCALL, str(nr), str(err)]


@x86_64_only
def test_landlock_forbidden_by_a_syscall_filter_serves_without_it(make_server, docroot):
    server = make_server(docroot, wrapper=_deny(444, errno.EPERM))  # landlock_create_ruleset
    assert fetch(server, "/hello.txt").body == HELLO
    assert "landlock: forbidden by a system call filter" in server.stderr_text()
    assert server.stop() == 0


@x86_64_only
def test_openat2_forbidden_by_a_syscall_filter_is_a_clear_start_error(make_server, docroot):
    """Without openat2 every request was a 500; now the process says why and exits 1."""
    server = make_server(docroot, wrapper=_deny(437, errno.ENOSYS), ready=False)  # openat2
    assert server.proc.wait(timeout=10) == 1
    server.stop()
    assert "openat2 is not usable here" in server.stderr_text(), server.stderr_text()


def _landlock_applies(make_server, root):
    s = make_server(root, args=["-v"])
    text = s.stderr_text()
    s.stop()
    return "landlock: applied" in text


def test_landlock_denies_a_root_repointed_outside_the_allowed_tree(make_server, tmp_path):
    """RESOLVE_BENEATH confines each request to the current root, whatever that root is; Landlock
    confines the process to the tree the root was configured in. A DOCROOT symlink re-pointed
    (by mistake or by an attacker who can write it) to /etc-like places outside that tree would
    let RESOLVE_BENEATH read them; Landlock does not."""
    site = tmp_path / "site"
    (site / "release-1").mkdir(parents=True)
    (site / "release-1" / "a.txt").write_bytes(b"site\n")
    (site / "current").symlink_to("release-1")
    secret = tmp_path / "elsewhere" / "secrets"
    secret.mkdir(parents=True)
    (secret / "key.txt").write_bytes(b"secret\n")
    if not _landlock_applies(make_server, site / "current"):
        pytest.skip("this kernel has no Landlock")
    server = make_server(site / "current")
    assert fetch(server, "/a.txt").body == b"site\n"
    repoint(site, secret)
    server.proc.send_signal(signal.SIGHUP)
    # Refused, and said (issue 36: it used to be taken, then 403 to every request, silently).
    assert wait_for(lambda: "outside the directories Landlock let this process read"
                    in server.stderr_text()), server.stderr_text()[-2000:]
    assert fetch(server, "/key.txt").status == 404  # still the previous release
    assert fetch(server, "/a.txt").body == b"site\n"
    # The same without Landlock serves it: the test would catch a confinement that is not there.
    repoint(site, "release-1")
    unconfined = make_server(site / "current", args=["--no-landlock"])
    repoint(site, secret)
    unconfined.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: body_or_status(unconfined, "/key.txt") == b"secret\n")


def test_landlock_still_lets_a_recreated_docroot_and_a_sibling_release_be_served(
        make_server, releases):
    server = make_server(releases / "current", args=["-v"])
    repoint(releases, "release-2")
    assert wait_for(lambda: body_or_status(server, "/a.txt") == b"release 2\n")


def test_two_servers_started_at_once_never_share_a_port(docroot):
    """Without --reuse-port a second process on a served port is refused. Two started at the
    same moment both passed that check (each probed before the other listened) and then shared
    the port through SO_REUSEPORT, each taking some of its connections (7 of 20 tries on the old
    build; a parallel test's ACME validation reached the wrong server). Now exactly one serves.
    The check is the server's, before any engine runs: once, with the default engine."""
    import subprocess
    from conftest import RINGHTTPD
    shared = 0
    for _ in range(12):
        port = free_port()
        argv = [RINGHTTPD, "-p", str(port), "-b", "127.0.0.1", "-t", "2", "--access-log", "off",
                str(docroot)]
        procs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for _ in range(2)]
        try:
            deadline = time.monotonic() + 10
            # one refuses and exits (1); wait for it, or for the time a refusal takes at most
            while time.monotonic() < deadline and all(p.poll() is None for p in procs):
                time.sleep(0.05)
            time.sleep(0.3)  # the other one's check has run too by now
            shared += all(p.poll() is None for p in procs)
            for p in procs:
                if p.poll() is not None:
                    assert p.returncode == 1
                    assert b"another process serves it" in p.stderr.read()
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    p.wait(10)
    assert shared == 0, f"both served one port in {shared} of 12 tries"
