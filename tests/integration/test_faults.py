"""Faults and hostile load (issue 10 items 4-7): out of file descriptors, full at --max-conns,
a flood of partial request heads, large downloads behind clients that stopped reading.

Each test runs on both engines and checks what a client and an operator can see: answers,
closes, the error log, and the server's own CPU time, RSS and fds from /proc. No test asserts
how fast something happens; where a wait is needed it is a poll with a generous deadline.
"""

import functools
import hashlib
import os
import re
import signal
import socket
import time

import pytest

from conftest import (HELLO, RINGHTTPD, Conn, all_stopped, connect, fetch, recv_all, request,
                      wait_for)

TICKS = os.sysconf("SC_CLK_TCK")


@functools.lru_cache(maxsize=None)
def asan_build(path=RINGHTTPD):
    """True for the sanitizer build: its allocator keeps freed memory in a quarantine and adds
    redzones, so RSS figures say nothing about our own accounting there."""
    with open(path, "rb") as f:
        return b"__asan_init" in f.read()


def cpu_seconds(pid):
    """User + system CPU time of the whole process (all threads) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def is_closed(sock, wait=0.0):
    """True when the server has closed (EOF or reset) this socket that sent a partial request
    and got nothing back; False while it is still open."""
    sock.settimeout(wait)
    try:
        return sock.recv(1) == b""
    except (socket.timeout, BlockingIOError):
        return False
    except OSError:
        return True


# --- item 4: out of file descriptors ---------------------------------------------------------

NOFILE = 64


def test_emfile_pauses_accept_without_spinning_and_recovers(make_server, docroot):
    """With RLIMIT_NOFILE at 64 and 120 clients, accept fails with EMFILE. The server must log
    that (rate-limited), use next to no CPU while stuck (it used to spin at 100% on both
    engines), and serve again by itself once clients go away."""
    srv = make_server(docroot, args=["-t", "1"], wrapper=["prlimit", f"--nofile={NOFILE}", "--"])
    pid = srv.proc.pid
    assert fetch(srv, "/hello.txt").body == HELLO
    clients = []
    try:
        for _ in range(120):  # more than the fd limit: the rest wait in the listen backlog
            s = socket.create_connection(srv.addr, timeout=5)
            s.sendall(b"GET /hello.txt HTTP/1.1\r\n")  # TCP_DEFER_ACCEPT waits for data
            clients.append(s)
        # Stuck: every fd the limit allows is in use (the rest wait in the backlog).
        assert wait_for(lambda: fd_count(pid) >= NOFILE - 1), fd_count(pid)
        time.sleep(0.2)
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(2.0)
        cpu1, t1 = cpu_seconds(pid), time.monotonic()
        # A spinning loop burns about a core (2 s here); an idle one, a few ticks. Generous.
        assert cpu1 - cpu0 < 0.3 * (t1 - t0), f"{cpu1 - cpu0:.2f} s CPU in {t1 - t0:.2f} s"
        # Logged, rate-limited: about one line per second, whatever the number of accepts.
        assert wait_for(lambda: "Too many open files" in srv.stderr_text()), srv.stderr_text()
        lines = [ln for ln in srv.stderr_text().splitlines() if "Too many open files" in ln]
        assert 1 <= len(lines) <= 10, lines
        assert "accept" in lines[0]
    finally:
        for s in clients:
            s.close()
    # Recovery: no restart, no signal; the backlog drains and a new client is served.
    r = fetch(srv, "/hello.txt", timeout=15)
    assert r.status == 200 and r.body == HELLO
    assert srv.alive()


# --- item 5: full at --max-conns ----------------------------------------------------------


def test_max_conns_reclaims_oldest_idle_keepalive(make_server, docroot):
    """At --max-conns the next client used to be reset while idle keep-alive connections held
    every slot. Now the oldest idle one is closed for it, the others stay, and it is logged."""
    srv = make_server(docroot, args=["-t", "1", "--max-conns", "4"])
    idle = [Conn(srv) for _ in range(4)]
    try:
        for c in idle:  # oldest first: idle[0] went idle first
            assert c.request("GET", "/hello.txt").status == 200
        with Conn(srv) as new:
            r = new.request("GET", "/hello.txt")
            assert r.status == 200 and r.body == HELLO
        idle[0].expect_close()
        for c in idle[1:]:
            assert c.request("GET", "/hello.txt").status == 200
        assert wait_for(lambda: "--max-conns 4 reached" in srv.stderr_text()), srv.stderr_text()
    finally:
        for c in idle:
            c.close()


def test_max_conns_reclaims_idle_h2c_with_goaway(make_server, docroot):
    """Issue 26: idle HTTP/2 connections are reclaimed at --max-conns as idle HTTP/1.1 ones are
    (the idle queue used to hold only HTTP/1, so two idle h2c connections made a third client
    get a reset). The oldest goes first, told with GOAWAY (NO_ERROR) before its close, as nginx
    does; the other keeps serving."""
    from test_h2 import ACK, GOAWAY, HEADERS, NO_ERROR, SETTINGS, END_HEADERS, END_STREAM, \
        frame, get_block, goaway_code, open_h2, read_frames

    srv = make_server(docroot, args=["-t", "1", "--max-conns", "2", "--http2", "on"])
    idle = []
    try:
        for _ in range(2):
            s = open_h2(srv)
            s.settimeout(5)
            got = b""
            while len(got) < 9 or got[3] != SETTINGS:  # the server's SETTINGS: preface taken
                chunk = s.recv(65536)
                assert chunk, "closed before its SETTINGS"
                got += chunk
            s.sendall(frame(SETTINGS, ACK, 0))
            idle.append(s)
        try:
            r = fetch(srv, "/hello.txt")
        except OSError as e:
            pytest.fail(f"the third connection was refused while two h2c ones were idle: {e!r}")
        assert r.status == 200 and r.body == HELLO
        frames, closed = read_frames(idle[0], until_goaway=False, timeout=5)
        assert goaway_code(frames) == NO_ERROR and closed
        idle[1].sendall(frame(HEADERS, END_STREAM | END_HEADERS, 1, get_block(b"/hello.txt")))
        frames, _ = read_frames(idle[1], until_goaway=False, timeout=2)
        assert any(f[0] == HEADERS and f[2] == 1 for f in frames), frames
        assert not any(f[0] == GOAWAY for f in frames), frames
    finally:
        for s in idle:
            s.close()


def test_max_conns_full_of_busy_connections_refuses_and_logs(make_server, docroot):
    """With every slot busy (requests half sent) there is nothing to reclaim: the newcomer is
    refused, the busy ones keep their slots, and the log says why."""
    srv = make_server(docroot, args=["-t", "1", "--max-conns", "3"])
    busy = [connect(srv) for _ in range(3)]
    try:
        for s in busy:
            s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n")  # head not finished
        time.sleep(0.2)
        s4 = connect(srv)
        s4.sendall(request("GET", "/hello.txt"))
        s4.settimeout(5)
        try:
            got = s4.recv(100)
        except ConnectionResetError:
            got = b""
        assert got == b""
        s4.close()
        assert wait_for(lambda: "none idle: refusing" in srv.stderr_text()), srv.stderr_text()
        for s in busy:  # finishing their heads, they are answered
            s.sendall(b"\r\n")
            s.settimeout(5)
            assert s.recv(15).startswith(b"HTTP/1.1 200")
    finally:
        for s in busy:
            s.close()



def test_a_refusal_logged_does_not_hide_the_reclaim_after_it(make_server, docroot):
    """The two --max-conns lines are rate-limited apart: a newcomer refused (every slot busy)
    and, within the same second, one for which an idle connection is closed are both logged.
    They shared one limiter, so the reclaim went unlogged for a second after any refusal
    (test_h3_limits' reclaim test failed so under make check's load)."""
    srv = make_server(docroot, args=["-t", "1", "--max-conns", "1"])
    busy = connect(srv)
    try:
        busy.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n")  # head not finished
        time.sleep(0.2)
        s2 = connect(srv)
        s2.sendall(request("GET", "/hello.txt"))
        s2.settimeout(5)
        try:
            got = s2.recv(100)
        except ConnectionResetError:
            got = b""
        assert got == b""
        s2.close()
        assert wait_for(lambda: "none idle: refusing" in srv.stderr_text()), srv.stderr_text()
        busy.sendall(b"\r\n")  # answered, then idle on keep-alive
        busy.settimeout(5)
        assert busy.recv(15).startswith(b"HTTP/1.1 200")
        time.sleep(0.1)
        with Conn(srv) as new:
            assert new.request("GET", "/hello.txt").status == 200
        assert wait_for(lambda: "reached: closing idle connections" in srv.stderr_text()), \
            srv.stderr_text()
    finally:
        busy.close()

# --- item 6: memory held by partial heads --------------------------------------------------

FLOOD = 2500
PARTIAL = b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 15900  # no blank line


def test_partial_head_flood_is_bounded_and_memory_comes_back(make_server, docroot):
    """2500 clients each send a 16 KB request head and stop before its end. Each used to pin a
    32 KiB buffer (80 MB on one worker, kept after they left); --head-memory (32M by default)
    bounds it by closing the oldest partial heads, and the pools are trimmed after the burst."""
    srv = make_server(docroot, args=["-t", "1"])
    pid = srv.proc.pid
    assert fetch(srv, "/hello.txt").body == HELLO
    base = rss_kib(pid)
    socks = []
    try:
        for _ in range(FLOOD):
            s = socket.create_connection(srv.addr, timeout=5)
            s.sendall(PARTIAL)
            socks.append(s)
        # The worker reads them all: the oldest are closed to keep the newest within budget.
        budget = (32 << 20) // (32 << 10)  # --head-memory 32M in 32 KiB buffers
        limit = 40 * 1024  # KiB; measured: 53 MB before the bound, 24 MB with it (pages of
        peak = base        # a 32 KiB buffer are touched as far as the head fills it)
        def settled():
            nonlocal peak
            peak = max(peak, rss_kib(pid))
            over = peak - base > limit and not asan_build()
            return over or sum(is_closed(s) for s in socks) >= FLOOD - budget
        assert wait_for(settled, timeout=30), \
            f"{sum(is_closed(s) for s in socks)} closed\n{srv.stderr_text()[-2000:]}"
        if not asan_build():
            assert peak - base < limit, f"RSS grew {peak - base} KiB"
        assert all(is_closed(s) for s in socks[:100]), "not the oldest were closed"
        newest = sum(is_closed(s) for s in socks[-100:])
        assert newest == 0, f"{newest} of the newest 100 heads were closed\n" \
            f"{srv.stderr_text()[-2000:]}"
        assert wait_for(lambda: "request heads hold" in srv.stderr_text()), srv.stderr_text()
        # Others are still served while the flood holds its budget.
        assert fetch(srv, "/hello.txt").body == HELLO
    finally:
        for s in socks:
            s.close()
    if not asan_build():
        # The burst is over: within a few ticks the pools are trimmed to their low-water mark.
        assert wait_for(lambda: rss_kib(pid) - base < 16 * 1024, timeout=10), \
            f"RSS still {rss_kib(pid) - base} KiB above the start"
    assert fetch(srv, "/hello.txt").body == HELLO


def test_a_head_flood_met_in_one_burst_still_closes_the_oldest(make_server, docroot):
    """The same flood, all of it waiting when the worker runs (it is stopped meanwhile): one
    loop turn meets every connection, more receives than the SQ holds. io_uring's receive
    buffers went back to the kernel only at the end of a turn, so the receives a full SQ
    submitted early found none (ENOBUFS, read a turn later) while those submitted last read
    first: the newest heads were listed as the oldest and all 100 of them closed (make check
    saw the flood test above fail so under load, 94-100 of 100)."""
    srv = make_server(docroot, args=["-t", "1"])
    pid = srv.proc.pid
    assert fetch(srv, "/hello.txt").body == HELLO
    socks = []
    os.kill(pid, signal.SIGSTOP)
    try:
        assert wait_for(lambda: all_stopped(pid), timeout=5)
        for _ in range(FLOOD):  # the listen backlog (4096) holds them all
            s = socket.create_connection(srv.addr, timeout=5)
            s.sendall(PARTIAL)
            socks.append(s)
        os.kill(pid, signal.SIGCONT)
        budget = (32 << 20) // (32 << 10)
        assert wait_for(lambda: sum(is_closed(s) for s in socks) >= FLOOD - budget, timeout=30), \
            f"{sum(is_closed(s) for s in socks)} closed\n{srv.stderr_text()[-2000:]}"
        assert all(is_closed(s) for s in socks[:100]), "not the oldest were closed"
        newest = sum(is_closed(s) for s in socks[-100:])
        assert newest == 0, f"{newest} of the newest 100 heads were closed"
        assert fetch(srv, "/hello.txt").body == HELLO
    finally:
        os.kill(pid, signal.SIGCONT)
        for s in socks:
            s.close()


# --- item 7: pipes held by clients that stopped reading ------------------------------------

STALLED = 12
FRESH = 5


def _stalled_reader(srv, path):
    """A client that asks for a large file and then reads nothing (a small receive buffer, so
    the server's side fills at once)."""
    s = socket.socket(srv_family(srv), socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(srv.addr)
    s.sendall(request("GET", path, close=True))
    return s


def srv_family(srv):
    return socket.AF_INET6 if ":" in srv.host else socket.AF_INET


def test_fresh_download_not_starved_by_stalled_readers(make_server, docroot, random_file):
    """12 clients stop reading an 8 MiB file with 4 splice pipes per worker. Each of them used
    to hold a pipe (with bytes in it) until it read again or timed out, and every new large
    download waited about 2 s for one. Now a pipe whose bytes cannot move goes to whoever needs
    it: 5 fresh downloads in a row finish without that wait, and the stalled clients, once they
    read, still get every byte right (the bytes dropped from a taken pipe are read again).

    The one bound on time here is loose by design: before the fix the 5 downloads took at least
    5 s (each waited more than 1 s on the one-second clock); with it, a fraction of a second."""
    path, digest = random_file(8 << 20)
    os.link(path, docroot / "large.bin")
    srv = make_server(docroot, args=["-t", "1", "--splice-pipes", "4"])
    stalled = [_stalled_reader(srv, "/large.bin") for _ in range(STALLED)]
    try:
        time.sleep(0.5)  # let every one of them fill its socket
        t0 = time.monotonic()
        for _ in range(FRESH):
            r = fetch(srv, "/large.bin", timeout=30)
            assert r.status == 200
            assert hashlib.sha256(r.body).hexdigest() == digest
        took = time.monotonic() - t0
        assert took < FRESH * 1.0, f"{FRESH} downloads took {took:.1f} s behind stalled readers"
        for s in stalled:  # they read at last: whole and intact
            data = recv_all(s)
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head[:100]
            assert hashlib.sha256(body).hexdigest() == digest
    finally:
        for s in stalled:
            s.close()
    assert srv.alive()


def test_verbose_says_which_pipes_were_obtained(make_server, docroot, engine):
    """The splice pool is sized from the limits actually granted (here RLIMIT_NOFILE 256: a
    quarter of it over 2 workers, 16 pipes each) and -v says what was obtained."""
    srv = make_server(docroot, args=["-v"], wrapper=["prlimit", "--nofile=256", "--"])
    assert fetch(srv, "/hello.txt").body == HELLO
    if engine == "epoll":
        return  # sendfile: no pipes
    m = re.search(r"up to (\d+) pipes of (\d+) KiB per worker \(asked 64 of 1024 KiB; "
                  r"fs.pipe-max-size \d+, fs.pipe-user-pages-soft \d+.*RLIMIT_NOFILE 256\)",
                  srv.stderr_text())
    assert m, srv.stderr_text()
    assert 1 <= int(m.group(1)) <= 16
