"""Soak: minutes of mixed, partly hostile load against the sanitizer build, then a check that
nothing grew (issue 10). `make soak` runs it; SOAK_SECONDS (default 600) is split between the
engines (io_uring first, skipped when this kernel refuses it; then epoll).

Per engine: start the server (-t 2, short keep-alive and header timeouts so an idle period
ends every connection), warm up with every kind of request, wait idle, take the baseline (open
fds, VmRSS); run the load until its deadline; wait idle again and compare. The load, on a
dozen threads, each bounded by the deadline: keep-alive sessions (200, 404, ranges, HEAD,
pipelining), Connection: close requests, large downloads checked by SHA-256, clients that
stop reading for a while, resets at every stage of a request (before sending, mid-head, after
the head, mid-response, mid-download), garbage, and partial heads left to time out.

Fails (exit 1) on: any sanitizer report, a crash, a wrong answer to a well-behaved client, a
non-zero exit on SIGTERM, more open fds after the idle period than at the baseline, or RSS
more than RSS_SLACK_KIB above the baseline. Prints the figures either way.
"""

import hashlib
import os
import pathlib
import random
import socket
import struct
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))

from conftest import Conn, Server, fetch, request, uring_available  # noqa: E402

RINGHTTPD = os.environ.get("RINGHTTPD") or str(HERE.parents[1] / "build" / "asan" / "ringhttpd")
SECONDS = int(os.environ.get("SOAK_SECONDS", "600"))
IDLE = 14  # > keep-alive, header and linger timeouts, and the 10 s after which idle pipes close
RSS_SLACK_KIB = 24 * 1024
THREADS = 12
# A small quarantine, and freed memory handed back, so RSS reflects the server, not ASan: with
# 16 MiB of quarantine, 5 minutes grew RSS by 17 MB on either engine, where the normal build
# (RINGHTTPD=build/ringhttpd) grew by 0.5 MB.
ASAN_ENV = {"ASAN_OPTIONS": "quarantine_size_mb=4:allocator_release_to_os_interval_ms=500:"
                            "detect_leaks=1:abort_on_error=0"}

# Misses are remembered in the file cache (up to 2048 entries per worker): a bounded set of
# missing names fills it during the warm-up, so the comparison does not count the cache filling
# (a million names grew RSS by ~400 KB a minute until the bound, before and after issue 10).
MISSES = 256
SMALL = {f"/f{i}.txt": (f"file {i}\n" * (i * 37 + 1)).encode() for i in range(20)}
LARGE_SIZE = 6 << 20


def make_docroot(base):
    root = base / "www"
    root.mkdir()
    for path, body in SMALL.items():
        (root / path[1:]).write_bytes(body)
    (root / "index.html").write_bytes(b"<!doctype html><p>soak</p>\n")
    (root / "dir").mkdir()
    (root / "dir" / "index.html").write_bytes(b"<p>dir</p>\n")
    large = random.Random(7).randbytes(LARGE_SIZE)
    (root / "large.bin").write_bytes(large)
    (root / "mid.bin").write_bytes(large[:400_000])  # above --cache-max-file: a file range
    return root, hashlib.sha256(large).hexdigest(), large[:400_000]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def reset(sock):
    """Closes with a reset (SO_LINGER 0) instead of a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class Load:
    def __init__(self, srv, digest, mid, deadline):
        self.srv = srv
        self.digest = digest
        self.mid = mid
        self.deadline = deadline
        self.counts = {}
        self.failures = []
        self.lock = threading.Lock()

    def count(self, kind):
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1

    def fail(self, what):
        with self.lock:
            if len(self.failures) < 20:
                self.failures.append(what)

    def sock(self, timeout=10):
        return socket.create_connection(self.srv.addr, timeout=timeout)

    # Well-behaved clients: every answer is checked.

    def keepalive(self, rng):
        with Conn(self.srv, timeout=20) as c:
            for _ in range(rng.randint(1, 12)):
                k = rng.randrange(6)
                if k == 0:
                    path, body = rng.choice(list(SMALL.items()))
                    r = c.request("GET", path)
                    ok = r.status == 200 and r.body == body
                elif k == 1:
                    r = c.request("GET", f"/missing-{rng.randrange(MISSES)}")
                    ok = r.status == 404
                elif k == 2:
                    r = c.request("GET", "/mid.bin", headers=[("Range", "bytes=1000-2999")])
                    ok = r.status == 206 and r.body == self.mid[1000:3000]
                elif k == 3:
                    r = c.request("HEAD", "/f3.txt")
                    ok = r.status == 200 and r.body == b""
                elif k == 4:
                    r = c.request("GET", "/dir")
                    ok = r.status == 301
                else:  # three pipelined
                    c.send(request("GET", "/f1.txt") + request("GET", "/index.html") +
                           request("GET", "/f2.txt"))
                    rs = c.read_many(["GET"] * 3)
                    ok = [r.status for r in rs] == [200] * 3 and rs[2].body == SMALL["/f2.txt"]
                if not ok:
                    self.fail(f"keepalive kind {k}: status {r.status}")
                self.count("keepalive-req")

    def close_req(self, rng):
        path, body = rng.choice(list(SMALL.items()))
        r = fetch(self.srv, path, timeout=20)
        if r.status != 200 or r.body != body:
            self.fail(f"close {path}: {r.status}")
        self.count("close-req")

    def large(self, rng):
        if rng.random() < 0.5:
            r = fetch(self.srv, "/large.bin", timeout=60)
            ok = r.status == 200 and hashlib.sha256(r.body).hexdigest() == self.digest
        else:
            r = fetch(self.srv, "/mid.bin", timeout=60, headers=[("Range", "bytes=100000-")])
            ok = r.status == 206 and r.body == self.mid[100000:]
        if not ok:
            self.fail(f"large: {r.status}")
        self.count("large")

    def stalled(self, rng):
        """Asks for the large file, reads a little, stops for a while, then reads the rest
        (checked) or resets."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        s.settimeout(30)
        s.connect(self.srv.addr)
        s.sendall(request("GET", "/large.bin", close=True))
        got = s.recv(4096)
        time.sleep(min(rng.uniform(1, 6), max(0, self.deadline - time.monotonic())))
        if rng.random() < 0.5:
            reset(s)
            self.count("stalled-reset")
            return
        chunks = [got]
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            chunks.append(b)
        s.close()
        body = b"".join(chunks).partition(b"\r\n\r\n")[2]
        if hashlib.sha256(body).hexdigest() != self.digest:
            self.fail(f"stalled reader got {len(body)} bad bytes")
        self.count("stalled-read")

    # Hostile clients: the server must survive and stay correct for the others.

    def resets(self, rng):
        s = self.sock()
        stage = rng.randrange(5)
        try:
            if stage >= 1:
                s.sendall(b"GET /f5.txt HTTP/1.1\r\nHo")
            if stage >= 2:
                s.sendall(b"st: x\r\n\r\n" if stage != 4 else
                          b"st: x\r\n\r\n" + request("GET", "/large.bin"))
            if stage >= 3:
                s.recv(rng.choice([1, 100, 5000]))
        except OSError:
            pass
        reset(s)
        self.count(f"reset-{stage}")

    def garbage(self, rng):
        s = self.sock()
        try:
            s.sendall(rng.randbytes(rng.randint(1, 3000)) + b"\r\n\r\n")
            s.settimeout(5)
            while s.recv(65536):
                pass
        except OSError:
            pass
        s.close()
        self.count("garbage")

    def partial(self, rng):
        s = self.sock()
        try:
            s.sendall(b"GET /f1.txt HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * rng.randint(1, 15000))
            time.sleep(min(rng.uniform(0, 2), max(0, self.deadline - time.monotonic())))
        except OSError:
            pass
        (reset if rng.random() < 0.5 else socket.socket.close)(s)
        self.count("partial")

    def run(self, idx):
        rng = random.Random(idx)
        kinds = [self.keepalive] * 4 + [self.close_req] * 3 + [self.large] * 2 + \
                [self.stalled, self.resets, self.resets, self.garbage, self.partial]
        while time.monotonic() < self.deadline:
            fn = rng.choice(kinds)
            try:
                fn(rng)
            except Exception as e:  # a well-behaved client's failure is a finding
                if fn in (self.keepalive, self.close_req, self.large, self.stalled):
                    self.fail(f"{fn.__name__}: {type(e).__name__}: {e}")
            if not self.srv.alive():
                self.fail("server died")
                return


def soak(engine, seconds, base):
    root, digest, mid = make_docroot(base)
    argv = [RINGHTTPD, "-p", "0", "-b", "127.0.0.1", "-t", "2", "--engine", engine,
            "--keepalive-timeout", "3", "--header-timeout", "3", "--splice-pipes", "8", str(root)]
    srv = Server(argv, env=ASAN_ENV)
    srv.wait_ready(30)
    pid = srv.proc.pid
    print(f"soak[{engine}]: {seconds} s of load against {RINGHTTPD}", flush=True)

    warm = Load(srv, digest, mid, time.monotonic() + min(20, seconds / 5))
    warm_threads = [threading.Thread(target=warm.run, args=(1000 + i,)) for i in range(THREADS)]
    for t in warm_threads:
        t.start()
    for t in warm_threads:
        t.join()
    time.sleep(IDLE)
    fd0, rss0 = fd_count(pid), rss_kib(pid)

    load = Load(srv, digest, mid, time.monotonic() + seconds)
    threads = [threading.Thread(target=load.run, args=(i,)) for i in range(THREADS)]
    peak = rss0
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        if srv.alive():
            peak = max(peak, rss_kib(pid))
        time.sleep(1)
    time.sleep(IDLE)
    alive = srv.alive()
    fd1, rss1 = (fd_count(pid), rss_kib(pid)) if alive else (-1, -1)
    rc = srv.stop()
    reports = srv.sanitizer_reports()

    total = sum(load.counts.values())
    print(f"soak[{engine}]: {total} client sessions: " +
          ", ".join(f"{k} {v}" for k, v in sorted(load.counts.items())))
    print(f"soak[{engine}]: fds {fd0} -> {fd1}; RSS {rss0} KiB -> {rss1} KiB "
          f"(peak {peak} KiB); exit {rc}")
    problems = list(load.failures) + warm.failures
    if reports:
        problems.append("sanitizer report:\n" + srv.stderr_text()[-8000:])
    if not alive:
        problems.append(f"server died during the load: exit {srv.proc.returncode}")
    if rc != 0:
        problems.append(f"exit {rc} on SIGTERM")
    if alive and fd1 > fd0:
        problems.append(f"fds grew: {fd0} -> {fd1}")
    if alive and rss1 - rss0 > RSS_SLACK_KIB:
        problems.append(f"RSS grew {rss1 - rss0} KiB (more than {RSS_SLACK_KIB})")
    for p in problems:
        print(f"soak[{engine}]: FAIL: {p}")
    return not problems


def main():
    engines = (["uring"] if uring_available() else []) + ["epoll"]
    if "uring" not in engines:
        print("soak: io_uring refused by this kernel; epoll only")
    ok = True
    with tempfile.TemporaryDirectory(prefix="ringhttpd-soak-") as tmp:
        for i, engine in enumerate(engines):
            base = pathlib.Path(tmp) / engine
            base.mkdir()
            ok &= soak(engine, max(10, SECONDS // len(engines)), base)
    print("soak: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
