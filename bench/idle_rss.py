#!/usr/bin/env python3
"""Resident memory per idle keep-alive connection (issue 5: <= 2 KiB at 10 000 connections).

Starts ringhttpd with one worker, opens N connections that each make one keep-alive request and
then stay idle, and reports the server's RSS delta divided by N. Loopback only; bounded; every
process it starts is stopped by PID.

    bench/idle_rss.py [--binary build/ringhttpd] [--engine uring] [-n 10000] [--h2] [--tls]
                      [--nginx]

--h2: each connection is prior-knowledge HTTP/2 (h2c) and makes its one request on stream 1
(connections opened one after the other, the first as the warm-up); --streams K makes K
requests at once first, as a page load does (then the connections measured are a second n,
opened once the first n have idled a few seconds).

Before the baseline reading, warm-up connections make --cycle round trips one after the other
(keep-alive GETs, on HTTP/2 each on a stream of its own; 500 a connection, which then closes):
each lands in a receive buffer of its own, so the io_uring engine's ring of provided buffers
(1,024 of 4 KiB, a fixed cost per worker that the first connections would otherwise touch page
by page: 2.1 KB a connection at n=2000) is resident before the baseline, as on any server that
has run a while. The other engine and nginx make the same round trips.

--tls (issue 14) does the same over TLS 1.3 (a P-256 certificate made with openssl in the
temporary directory; handshakes one after the other); with --h2 too, the connections choose h2
by ALPN. --nginx measures nginx's worker instead (one worker, the same certificate,
ssl_protocols TLSv1.3; h2c on a listener of its own marked `http2`, as nginx 1.22 wants), for
the figure beside it:

    bench/idle_rss.py --tls -n 2000
    bench/idle_rss.py --tls --nginx -n 2000
    bench/idle_rss.py --h2 --nginx -n 2000
    bench/idle_rss.py --tls --h2 [--nginx] -n 2000
"""
import argparse
import os
import re
import resource
import selectors
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time


# preface, empty SETTINGS, HEADERS (GET, http, :path /a.txt, :authority x) END_STREAM
H2_BLOCK = b"\x82\x86\x04\x06/a.txt\x01\x01x"
H2_REQUEST = (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00" +
              len(H2_BLOCK).to_bytes(3, "big") + b"\x01\x05\x00\x00\x00\x01" + H2_BLOCK)
H1_REQUEST = b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"


def h2_request(streams):
    """The preface, SETTINGS and `streams` GETs of /a.txt on streams 1, 3, 5..."""
    return H2_REQUEST + b"".join(len(H2_BLOCK).to_bytes(3, "big") + b"\x01\x05" +
                                 (2 * i + 1).to_bytes(4, "big") + H2_BLOCK
                                 for i in range(1, streams))


def h2_answered(buf, streams=1):
    """Whether buf (what an h2 server sent) holds the ends of `streams` responses."""
    at = ended = 0
    while len(buf) - at >= 9 + int.from_bytes(buf[at:at + 3], "big"):
        n = int.from_bytes(buf[at:at + 3], "big")
        if buf[at + 3] in (0, 1) and buf[at + 4] & 1:
            ended += 1
        at += 9 + n
    return ended >= streams


def h2_get(stream):
    """A HEADERS frame: GET /a.txt on `stream`, END_STREAM, behind a WINDOW_UPDATE giving the
    connection back the 1 KiB the last answer took; and the header of the DATA frame that ends
    this one's answer (1 KiB, END_STREAM)."""
    sid = stream.to_bytes(4, "big")
    refill = b"\x00\x00\x04\x08\x00\x00\x00\x00\x00" + (1024).to_bytes(4, "big")
    return (refill + len(H2_BLOCK).to_bytes(3, "big") + b"\x01\x05" + sid + H2_BLOCK,
            b"\x00\x04\x00\x00\x01" + sid)


def h1_response_end(buf):
    """The length of the whole first HTTP/1.1 response in buf, or 0 while it is incomplete."""
    head, sep, _ = buf.partition(b"\r\n\r\n")
    if not sep:
        return 0
    m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
    end = len(head) + 4 + (int(m.group(1)) if m else 0)
    return end if len(buf) >= end else 0


CYCLE_PER_CONN = 500  # warm-up round trips per connection


def cycle(s, h2, rounds, first_stream=3):
    """Makes `rounds` round trips on s, one after the other (a GET, each answered before the
    next is sent; HTTP/2 from stream first_stream on), so each one's bytes arrive in a receive
    of their own. (Not PINGs: more than 100 a second are a flood to ringhttpd.)"""
    for i in range(rounds):
        req, end = h2_get(first_stream + 2 * i) if h2 else (H1_REQUEST, None)
        s.sendall(req)
        got = b""
        while not (end in got if h2 else h1_response_end(got)):
            data = s.recv(65536)
            if not data:
                sys.exit("idle_rss: server closed the warm-up connection")
            got += data


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/ringhttpd")
    ap.add_argument("--engine", default="uring")
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("--h2", action="store_true", help="h2c connections instead of HTTP/1.1")
    ap.add_argument("--tls", action="store_true", help="idle TLS connections")
    ap.add_argument("--nginx", action="store_true", help="measure nginx's worker instead")
    ap.add_argument("--streams", type=int, default=1,
                    help="with --h2: requests per connection before it idles (a page load)")
    ap.add_argument("--cycle", type=int, default=1200,
                    help="round trips of the warm-up connection before the baseline (0: none)")
    args = ap.parse_args()
    if args.tls or args.nginx or args.h2:
        return one_by_one_main(args)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < args.n + 100:
        sys.exit(f"idle_rss: open-file hard limit {hard} is below {args.n + 100}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    root = tempfile.mkdtemp(prefix="idle-rss-")
    with open(os.path.join(root, "a.txt"), "wb") as f:
        f.write(b"x" * 1024)
    proc = subprocess.Popen(
        [args.binary, "-p", "0", "-b", "127.0.0.1", "-t", "1", "--engine", args.engine,
         "--keepalive-timeout", "120", "--max-conns", str(args.n + 100), "--access-log", "off",
         root],
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
        for done in range(0, max(args.cycle, 1), CYCLE_PER_CONN):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as warm:
                cycle(warm, False, min(CYCLE_PER_CONN, max(args.cycle, 1) - done))
        time.sleep(0.5)
        before = rss_kib(proc.pid)

        req = H1_REQUEST
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
        print(f"idle_rss: engine {m.group(2)}, {args.n} idle keep-alive connections: "
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


NGINX_CONF = """worker_processes 1;
daemon off;
master_process on;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
worker_rlimit_nofile {nofile};
events {{ worker_connections {nofile}; use epoll; }}
http {{
    access_log off;
    keepalive_timeout 120s;
    http2_idle_timeout 120s;
    client_body_temp_path {root}/tmp;
    proxy_temp_path {root}/tmp;
    fastcgi_temp_path {root}/tmp;
    uwsgi_temp_path {root}/tmp;
    scgi_temp_path {root}/tmp;
    server {{
        listen 127.0.0.1:{port}{listen} backlog=4096;
        ssl_certificate {root}/c.pem;
        ssl_certificate_key {root}/k.pem;
        ssl_protocols TLSv1.3;
        root {root}/www;
    }}
}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_by_one_main(args):
    """Idle connections opened one after the other (TLS handshakes, or nginx): ringhttpd's
    cleartext or --tls-port, or nginx's worker; HTTP/1.1 keep-alive or HTTP/2 (--h2)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    root = tempfile.mkdtemp(prefix="idle-rss-tls-")
    os.chmod(root, 0o755)  # nginx workers run as nobody
    os.makedirs(os.path.join(root, "www"))
    os.makedirs(os.path.join(root, "tmp"))
    with open(os.path.join(root, "www", "a.txt"), "wb") as f:
        f.write(b"x" * 1024)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{root}/k.pem", "-out",
                    f"{root}/c.pem", "-subj", "/CN=localhost", "-days", "2"], check=True,
                   capture_output=True)
    if args.nginx:
        port = free_port()
        listen = (" ssl" if args.tls else "") + (" http2" if args.h2 else "")
        with open(f"{root}/nginx.conf", "w") as f:
            f.write(NGINX_CONF.format(root=root, port=port, nofile=2 * args.n + 1000, listen=listen))
        proc = subprocess.Popen(["nginx", "-c", f"{root}/nginx.conf"], stderr=subprocess.PIPE,
                                text=True)
        time.sleep(1)
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            measured = int(f.read().split()[0])  # the worker
        what = "nginx worker"
    else:
        proc = subprocess.Popen(
            [args.binary, "-p", "0", "-b", "127.0.0.1", "-t", "1", "--engine", args.engine,
             "--keepalive-timeout", "120", "--max-conns", str(2 * args.n + 100), "--access-log",
             "off", "--tls-port", "0", "--tls-cert", f"{root}/c.pem", "--tls-key",
             f"{root}/k.pem", "--tls-min", "1.3", f"{root}/www"],
            stderr=subprocess.PIPE, text=True)
        m = None
        while not m:
            line = proc.stderr.readline()
            if not line:
                sys.exit("idle_rss: server did not start")
            m = re.search(r"(https?)://127.0.0.1:(\d+)/", line)
            if m and (m.group(1) == "https") != args.tls:
                m = None
        port = int(m.group(2))
        measured = proc.pid
        what = f"ringhttpd ({args.engine})"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"] if args.h2 else ["http/1.1"])
    req = h2_request(args.streams) if args.h2 else H1_REQUEST

    def one():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        if args.tls:
            s = ctx.wrap_socket(s)
            if args.h2 and s.selected_alpn_protocol() != "h2":
                sys.exit(f"idle_rss: ALPN chose {s.selected_alpn_protocol()}, not h2")
        s.sendall(req)
        got = b""
        while not (h2_answered(got, args.streams) if args.h2 else len(got) >= 1024 + 100):
            data = s.recv(65536)
            if not data:
                sys.exit("idle_rss: server closed a connection")
            got += data
        return s

    socks = []
    kind = ("TLS 1.3 " if args.tls else "") + ("HTTP/2" if args.h2 else "keep-alive")
    if args.h2 and args.streams > 1:
        kind += f" ({args.streams} requests each)"
    try:
        socks.append(one())  # warm up
        # The receive buffers cycled, on connections of their own that close again: nginx
        # ends a connection after 1,000 requests (keepalive_requests, http2_max_requests).
        for done in range(0, args.cycle, CYCLE_PER_CONN):
            with one() as warm:
                cycle(warm, args.h2, min(CYCLE_PER_CONN, args.cycle - done),
                      first_stream=2 * args.streams + 1)
        if args.h2 and args.streams > 1:
            # A server that has run a while: what earlier connections gave back when they went
            # idle is in the heap's free lists. Measure the next n connections against that.
            for _ in range(args.n):
                socks.append(one())
            time.sleep(3)
        time.sleep(0.5)
        before = rss_kib(measured)
        for _ in range(args.n):
            socks.append(one())
        time.sleep(3)  # ringhttpd's h2 sessions give back a burst's leftovers 2 s into idling
        after = rss_kib(measured)
        per = (after - before) * 1024 / args.n
        print(f"idle_rss: {what}, {args.n} idle {kind} connections: "
              f"RSS {before} KiB -> {after} KiB, {per:.0f} bytes per connection")
    finally:
        for s in socks:
            s.close()
        proc.send_signal(signal.SIGTERM if not args.nginx else signal.SIGQUIT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
