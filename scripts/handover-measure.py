"""handover-measure.py BINARY ENGINE RESTARTS [tls]: the zero-downtime restart, measured (issue 13).

Starts BINARY on a free port of 127.0.0.1 with 2 threads, keeps 4 clients making one connection
per request (connect, send, read to close), and RESTARTS times starts a successor with
--reuse-port, waits 0.3 s, SIGTERMs the old process and waits for it to exit. Prints the
requests answered and each failure with its time after the last event (so a reset at the old
listeners' close shows up 1-2 s after "term"). With "tls" the server also listens on a TLS port
(a certificate made here with openssl) and the clients speak TLS to that port, which the
successor shares too (issue 14). Run it in a network namespace of its own, where
nobody else's traffic or sysctls interfere and `nstat` counts only this run:
    unshare -n sh -c 'ip link set lo up; python3 scripts/handover-measure.py build/ringhttpd uring 40'
Exit status 1 when any request failed."""
import pathlib
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

BINARY, ENGINE, RESTARTS = sys.argv[1], sys.argv[2], int(sys.argv[3])
TLS = sys.argv[4:5] == ["tls"]
HELLO = b"x" * 1024
root = pathlib.Path(tempfile.mkdtemp())
(root / "hello.txt").write_bytes(HELLO)
t0 = time.monotonic()
tls_args, ctx = [], None
if TLS:
    pki = pathlib.Path(tempfile.mkdtemp())
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", pki / "k.pem", "-out",
                    pki / "c.pem", "-subj", "/CN=localhost", "-days", "2", "-addext",
                    "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    tls_args = ["--tls-cert", str(pki / "c.pem"), "--tls-key", str(pki / "k.pem")]
    ctx = ssl.create_default_context(cafile=str(pki / "c.pem"))


def now():
    return time.monotonic() - t0


def start(ports, reuse):
    """ports: (http, tls) to share, or (0, 0) for the first; returns the process and its ports."""
    argv = [BINARY, "-p", str(ports[0]), "-b", "127.0.0.1", "-t", "2", "--engine", ENGINE,
            "--access-log", "off", *(["--reuse-port"] if reuse else []),
            *(["--tls-port", str(ports[1]), *tls_args] if TLS else []), str(root)]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    tls_port = 0
    for line in proc.stderr:
        if "listening on https://" in line:
            tls_port = int(line.split("127.0.0.1:")[1].split("/")[0])
        elif "listening on" in line:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, (int(line.split("127.0.0.1:")[1].split("/")[0]), tls_port)
    raise SystemExit(f"{BINARY} exited before listening")


stop, errors, counts = threading.Event(), [], [0] * 4


def client(i, port):
    while not stop.is_set():
        phase = "connect"
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            phase = "handshake"
            with ctx.wrap_socket(sock, server_hostname="localhost") if TLS else sock as s:
                phase = "send"
                s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                phase, got = "recv", b""
                while True:
                    try:
                        chunk = s.recv(65536)
                    except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                        break
                    if not chunk:
                        break
                    got += chunk
            if not got.endswith(HELLO):
                errors.append((now(), i, "short answer", got[:60]))
            counts[i] += 1
        except OSError as e:
            errors.append((now(), i, phase, repr(e)))


current, ports = start((0, 0), False)
clients = [threading.Thread(target=client, args=(i, ports[1] if TLS else ports[0]))
           for i in range(4)]
for t in clients:
    t.start()
events = []
for _ in range(RESTARTS):
    time.sleep(0.5)
    successor, _ = start(ports, True)
    time.sleep(0.3)
    events.append((now(), "term"))
    current.send_signal(signal.SIGTERM)
    rc = current.wait(timeout=30)
    events.append((now(), f"old exited {rc}"))
    current = successor
time.sleep(0.5)
stop.set()
for t in clients:
    t.join()
current.send_signal(signal.SIGTERM)
current.wait()
print(f"{ENGINE}{' tls' if TLS else ''}: {RESTARTS} restarts, {sum(counts)} requests answered, {len(errors)} failed")
for at, i, what, detail in errors:
    last = max((e for e in events if e[0] <= at), default=(0.0, "start"))
    print(f"  client {i} at {at:.3f} s ({at - last[0]:.3f} s after {last[1]}): {what} {detail}")
sys.exit(1 if errors else 0)
