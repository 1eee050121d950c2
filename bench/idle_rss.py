#!/usr/bin/env python3
"""Resident memory per idle keep-alive connection (issue 5: <= 2 KiB at 10 000 connections).

Starts ringhttpd with one worker, opens N connections that each make one keep-alive request and
then stay idle, and reports the server's RSS delta divided by N. Loopback only; bounded; every
process it starts is stopped by PID.

    bench/idle_rss.py [--binary build/ringhttpd] [--engine uring] [-n 10000] [--h2]

--h2: each connection is prior-knowledge HTTP/2 (h2c) and makes its one request on stream 1.
"""
import argparse
import os
import re
import resource
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/ringhttpd")
    ap.add_argument("--engine", default="uring")
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("--h2", action="store_true", help="h2c connections instead of HTTP/1.1")
    args = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < args.n + 100:
        sys.exit(f"idle_rss: open-file hard limit {hard} is below {args.n + 100}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    root = tempfile.mkdtemp(prefix="idle-rss-")
    with open(os.path.join(root, "a.txt"), "wb") as f:
        f.write(b"x" * 1024)
    proc = subprocess.Popen(
        [args.binary, "-p", "0", "-b", "127.0.0.1", "-t", "1", "--engine", args.engine,
         "--keepalive-timeout", "120", "--max-conns", str(args.n + 100), root],
        stderr=subprocess.PIPE, text=True)
    socks = []
    try:
        line = proc.stderr.readline()
        while line and "listening on" not in line:  # warnings (serving as root) come first
            line = proc.stderr.readline()
        m = re.search(r":(\d+)/ \(engine (\w+)", line)
        if not m:
            sys.exit(f"idle_rss: server did not start: {line!r}")
        port = int(m.group(1))
        # Warm up: one request so buffers, caches and the first pool chunks exist.
        warm = socket.create_connection(("127.0.0.1", port), timeout=5)
        warm.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        warm.recv(4096)
        time.sleep(0.5)
        before = rss_kib(proc.pid)

        req = b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"
        if args.h2:
            # preface, empty SETTINGS, HEADERS (GET, http, :path /a.txt, :authority x) END_STREAM
            block = b"\x82\x86\x04\x06/a.txt\x01\x01x"
            req = (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00" +
                   len(block).to_bytes(3, "big") + b"\x01\x05\x00\x00\x00\x01" + block)
        sel = selectors.DefaultSelector()
        pending = {}
        deadline = time.monotonic() + 120
        for i in range(args.n):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(req)
            s.setblocking(False)
            socks.append(s)
            sel.register(s, selectors.EVENT_READ)
            pending[s] = 0
            # Keep the number of unanswered connections bounded, so the accept backlog never
            # overflows.
            while len(pending) > 500 or (i == args.n - 1 and pending):
                if time.monotonic() > deadline:
                    sys.exit("idle_rss: timed out waiting for responses")
                for key, _ in sel.select(timeout=1):
                    data = key.fileobj.recv(65536)
                    if not data:
                        sys.exit("idle_rss: server closed a connection")
                    pending[key.fileobj] += len(data)
                    if pending[key.fileobj] >= 1024 + 100:  # headers + 1 KiB body
                        sel.unregister(key.fileobj)
                        del pending[key.fileobj]
        time.sleep(1)
        after = rss_kib(proc.pid)
        per = (after - before) * 1024 / args.n
        print(f"idle_rss: engine {m.group(2)}, {args.n} idle {'h2c' if args.h2 else 'keep-alive'} "
              f"connections: "
              f"RSS {before} KiB -> {after} KiB, {per:.0f} bytes per connection")
    finally:
        for s in socks:
            s.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
