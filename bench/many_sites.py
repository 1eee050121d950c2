#!/usr/bin/env python3
"""Issue 40's figures at N sites (default 10,000), each with its own ECDSA P-256 certificate:
start time (spawn to the HTTPS listening line), reload time (SIGHUP to "TLS certificates
re-read", nothing changed and one certificate rewritten), resident memory per site and per
certificate, full TLS handshakes per second against one of the N certificates and against a
server with one certificate (openssl s_time -new), and keep-alive HTTPS GETs of 1 KiB (h2load,
HTTP/1.1) on both.

  .venv/bin/python bench/many_sites.py [--n 10000] [--dir /tmp/many] [--binary build/ringhttpd]

Certificates are made once into --dir (tests/integration/manysites.py) and reused by later
runs. Every server listens on 127.0.0.1 only and is stopped by its PID at the end."""
import argparse
import os
import pathlib
import re
import signal
import socket
import ssl
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "integration"))
import manysites  # noqa: E402

HTTPS_RE = re.compile(rb"listening on https://[^\s:/]+:(\d+)/")


class Server:
    def __init__(self, binary, args, timeout=600):
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([binary, "-p", "0", "-b", "127.0.0.1", "-t", "2",
                                      "--access-log", "off", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.err = b""
        os.set_blocking(self.proc.stderr.fileno(), False)
        m = self.wait(HTTPS_RE, timeout)
        self.started = time.monotonic() - self.t0
        self.port = int(m.group(1))

    def wait(self, pattern, timeout, since=0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = self.proc.stderr.read()
            if chunk:
                self.err += chunk
            m = re.compile(pattern).search(self.err, since) if isinstance(pattern, bytes) \
                else pattern.search(self.err, since)
            if m:
                return m
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        raise SystemExit(f"no {pattern!r} in time:\n{self.err[-3000:].decode(errors='replace')}")

    def rss_kib(self):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def reload(self, timeout=600):
        mark = len(self.err)
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGHUP)
        self.wait(rb"TLS certificates re-read", timeout, mark)
        return time.monotonic() - t0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def s_time(port, seconds=8):
    """Full handshakes a second, openssl s_time -new (no SNI: Debian 12's s_time has no
    -servername; the default certificate)."""
    p = subprocess.run(["openssl", "s_time", "-connect", f"127.0.0.1:{port}", "-new",
                        "-time", str(seconds)], capture_output=True, text=True,
                       timeout=seconds + 30)
    m = re.search(r"(\d+) connections in ([\d.]+) real seconds", p.stdout)
    return int(m.group(1)) / float(m.group(2)) if m else float("nan")


def sni_handshakes(port, name, seconds=8):
    """Full handshakes a second with SNI name, one Python client (the client is the limit:
    a ratio between two servers, not an absolute figure)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            with ctx.wrap_socket(sock, server_hostname=name):
                n += 1
    return n / (time.monotonic() - t0)


def h2load(port, seconds=8):
    """Keep-alive HTTPS GETs of 1 KiB a second (HTTP/1.1, 50 connections, the default site)."""
    p = subprocess.run(["h2load", "--h1", "-c", "50", "-t", "1", "-D", str(seconds),
                        f"https://127.0.0.1:{port}/1k.bin"],
                       capture_output=True, text=True, timeout=seconds + 60)
    m = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", p.stdout)
    return float(m.group(1)) if m else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--dir", default="/tmp/ringhttpd-many-sites")
    ap.add_argument("--binary", default=str(HERE.parent / "build" / "ringhttpd"))
    a = ap.parse_args()
    d = pathlib.Path(a.dir) / str(a.n)
    if not (d / "sites.yaml").exists():
        d.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        names = manysites.make(d, a.n)
        print(f"made {a.n} certificates in {time.monotonic() - t0:.1f} s")
    names = [manysites.site_name(i) for i in range(a.n)]
    for n in names:
        if not (d / "roots" / n / "1k.bin").exists():
            (d / "roots" / n / "1k.bin").write_bytes(b"x" * 1024)
    # the same sites without certificates (the RSS per site), and one site with one
    bare = d / "bare.yaml"
    bare.write_text("tls-port: 0\n" + f"tls-cert: {d}/certs/{names[0]}.crt\n"
                    f"tls-key: {d}/certs/{names[0]}.key\nsites:\n" +
                    "".join(f"  - hosts: [{n}]\n    root: {d}/roots/{n}\n" for n in names))
    one = d / "one.yaml"
    one.write_text(f"tls-port: 0\nsites:\n  - hosts: [{names[1]}]\n    root: {d}/roots/{names[1]}\n"
                   f"    tls-cert: {d}/certs/{names[1]}.crt\n"
                   f"    tls-key: {d}/certs/{names[1]}.key\n")

    base = Server(a.binary, ["--config", str(one)])
    rss_one = base.rss_kib()
    hs_one = s_time(base.port)
    sni_one = sni_handshakes(base.port, names[1])
    ka_one = h2load(base.port)
    base.stop()

    plain = Server(a.binary, ["--config", str(bare)])
    rss_bare = plain.rss_kib()
    plain.stop()

    srv = Server(a.binary, ["--config", str(d / "sites.yaml")])
    start = srv.started
    rss_all = srv.rss_kib()
    reload_same = srv.reload()
    changed = names[a.n // 2]
    (d / "spare").mkdir(exist_ok=True)
    ca_cert, ca_key = manysites.make_ca(d / "spare")
    manysites.make_leaf(d, ca_cert, ca_key, changed)
    reload_one = srv.reload()
    rss_after = srv.rss_kib()
    hs_all = s_time(srv.port)
    sni_all = sni_handshakes(srv.port, names[a.n - 1])
    ka_all = h2load(srv.port)
    srv.stop()

    print(f"sites and certificates: {a.n} (2 workers)")
    print(f"start (spawn to the HTTPS listener): {start:.2f} s; one site: {base.started:.2f} s")
    print(f"reload, nothing changed: {reload_same:.2f} s; one certificate rewritten: "
          f"{reload_one:.2f} s")
    print(f"RSS: one site {rss_one} KiB; {a.n} sites without certificates {rss_bare} KiB; "
          f"with one each {rss_all} KiB (after two reloads {rss_after} KiB)")
    print(f"RSS per site: {(rss_bare - rss_one) / (a.n - 1):.2f} KiB; per certificate: "
          f"{(rss_all - rss_bare) / a.n:.2f} KiB")
    print(f"full handshakes/s (openssl s_time -new, no SNI): one certificate {hs_one:.0f}, "
          f"{a.n} certificates {hs_all:.0f} ({hs_all / hs_one:.3f}x)")
    print(f"full handshakes/s (Python ssl, SNI of the last site): one certificate "
          f"{sni_one:.0f}, {a.n} certificates {sni_all:.0f} ({sni_all / sni_one:.3f}x)")
    print(f"load average during the run: {os.getloadavg()}")
    print(f"keep-alive HTTPS 1 KiB (h2load --h1 -c 50): one site {ka_one:.0f} req/s, "
          f"{a.n} sites {ka_all:.0f} req/s ({ka_all / ka_one:.3f}x)")


if __name__ == "__main__":
    main()
