"""bench/harness.py — the measuring half of bench/run (which installs the tools, then runs this).

It builds ringhttpd and the ceiling server, writes the docroot, starts every server once on its
own loopback port, runs wrk against each server/scenario pair round by round (interleaved, so a
slow minute of the machine hits every server alike), and writes bench/results/latest.{md,json,png}.
It never touches a process it did not start: servers are stopped by the PIDs it got, on any exit.
"""

import argparse
import copy
import datetime
import gzip
import json
import os
import re
import resource
import shlex
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
WORK = os.path.join(BENCH, "work")
RESULTS = os.path.join(BENCH, "results")
DOCROOT = os.path.join(WORK, "www")
# BENCH_RINGHTTPD=/path/to/binary measures that binary instead of building one (e.g. an older commit's
# build, for a before/after comparison).
RINGHTTPD = os.environ.get("BENCH_RINGHTTPD") or os.path.join(ROOT, "build", "ringhttpd")
# Extra ringhttpd options for every ringhttpd run, e.g. "--file-send sendfile" (split on spaces).
RINGHTTPD_ARGS = os.environ.get("BENCH_RINGHTTPD_ARGS", "").split()
CEILING = os.path.join(WORK, "bin", "ceiling")
# The HTTP/3 load client (bench/h3load, `make build/h3load`) and caddy (bench/run installs it
# with `go install` into WORK/bin).
H3LOAD = os.path.join(ROOT, "build", "h3load")
CADDY = os.path.join(WORK, "bin", "caddy")
# The newest peers, built from source where Debian 12 has none (h2o master, nginx >= 1.25 with
# HTTP/3: ../shared/peers/h3peers/build.sh): a directory with h2o/bin/h2o and nginx/sbin/nginx,
# from RINGHTTPD_PEERS or bench/work/peers; a peer not found there is left out (said so).
PEERS = os.environ.get("RINGHTTPD_PEERS") or os.path.join(WORK, "peers")
REPORT_LUA = os.path.join(BENCH, "conf", "report.lua")
CLK_TCK = os.sysconf("SC_CLK_TCK")
SERVER_CPU, WRK_CPU = "0", "1"
HOST = "127.0.0.1"
BUSY_WARN = 0.10  # cores used by other processes during a run before it is flagged

FILES = {"1k.bin": 1024, "16k.bin": 16 * 1024, "1m.bin": 1 << 20, "64m.bin": 64 << 20,
         "100m.bin": 100 << 20}


# ---------------------------------------------------------------------------------------------
# servers


class Server:
    """One server instance: how to start it, where it listens, whether it is pinned to CPU 0."""

    def __init__(self, name, group, port, pinned=True):
        self.name, self.group, self.port, self.pinned = name, group, port, pinned
        self.proc = None
        self.log_path = os.path.join(WORK, name, "server.log")
        self.state = "not started"  # "running", "missing", or why it failed
        self.log_start = 0
        self.seen_pids = set()
        # Where each scheme reaches it: cleartext HTTP/1.1, HTTPS (TLS servers only) and h2c
        # (prior knowledge; the cleartext port, except nginx's h2c-only listener).
        self.ports = {"http": port, "h2c": port}

    def command(self):
        raise NotImplementedError

    def prepare(self):
        """Writes configs and directories; returns an error string or None."""
        os.makedirs(os.path.join(WORK, self.name, "tmp"), exist_ok=True)
        return None

    def full_command(self):
        cmd = self.command()
        return (["taskset", "-c", SERVER_CPU] + cmd) if self.pinned else cmd


def fill_template(src, dst, **values):
    """Fills @KEY@ placeholders; @NOFILE@ and @MAXCONN@ follow the open files limit we got."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    values.setdefault("NOFILE", nofile)
    values.setdefault("MAXCONN", min(16384, nofile // 2))
    with open(os.path.join(BENCH, "conf", src)) as f:
        text = f.read()
    for key, value in values.items():
        text = text.replace("@%s@" % key, str(value))
    with open(dst, "w") as f:
        f.write(text)


class Ringhttpd(Server):
    def __init__(self, name, port, engine, threads, pinned=True, access_log=False):
        super().__init__(name, "ringhttpd", port, pinned)
        self.engine, self.threads = engine, threads
        # The access log is on by default; every scenario but ka-1k-log measures without it,
        # as the other servers are configured (their "access_log off" and the like).
        self.log_args = (["--access-log", os.path.join(WORK, name, "access.log")]
                         if access_log else ["--access-log", "off"])

    built = False  # set by build(): a binary left from an earlier build is never measured

    def prepare(self):
        super().prepare()
        if not Ringhttpd.built:
            self.state = "missing"
            return "missing (did not build: see bench/work/build.log)"
        return None

    def command(self):
        return [RINGHTTPD, "-p", str(self.port), "-b", HOST, "-t", str(self.threads),
                "--engine", self.engine, *self.log_args, *RINGHTTPD_ARGS, DOCROOT]


class Nginx(Server):
    def __init__(self, port, name="nginx", access_log=False):
        super().__init__(name, "nginx", port)
        self.dir = os.path.join(WORK, name)
        # ka-1k-log: Combined format to a file on disk, buffered as a busy site would have it.
        self.access_log = ("%s/access.log combined buffer=64k flush=1s" % self.dir
                           if access_log else "off")

    def prepare(self):
        super().prepare()
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            os.makedirs(os.path.join(self.dir, "tmp", sub), exist_ok=True)
        fill_template("nginx.conf", os.path.join(self.dir, "nginx.conf"),
                      WORK=self.dir, PORT=self.port, DOCROOT=DOCROOT, ACCESS_LOG=self.access_log)
        return None

    def command(self):
        return ["nginx", "-e", os.path.join(self.dir, "error.log"), "-p", self.dir + "/",
                "-c", os.path.join(self.dir, "nginx.conf")]


class Lighttpd(Server):
    def __init__(self, port):
        super().__init__("lighttpd", "lighttpd", port)
        self.dir = os.path.join(WORK, "lighttpd")

    def prepare(self):
        super().prepare()
        fill_template("lighttpd.conf", os.path.join(self.dir, "lighttpd.conf"),
                      WORK=self.dir, PORT=self.port, DOCROOT=DOCROOT)
        return None

    def command(self):
        return ["lighttpd", "-D", "-f", os.path.join(self.dir, "lighttpd.conf")]


class H2o(Server):
    def __init__(self, port):
        super().__init__("h2o", "h2o", port)
        self.dir = os.path.join(WORK, "h2o")

    def prepare(self):
        super().prepare()
        fill_template("h2o.conf", os.path.join(self.dir, "h2o.conf"),
                      WORK=self.dir, PORT=self.port, DOCROOT=DOCROOT)
        return None

    def command(self):
        return ["h2o", "-c", os.path.join(self.dir, "h2o.conf")]


class Ceiling(Server):
    def __init__(self, name, port, close_mode):
        super().__init__(name, "ceiling", port)
        self.close_mode = close_mode

    def prepare(self):
        super().prepare()
        if not os.access(CEILING, os.X_OK):
            self.state = "missing"
            return "missing (ceiling did not build)"
        return None

    def command(self):
        return [CEILING, "-p", str(self.port), "-b", HOST] + (["--close"] if self.close_mode else [])


def all_servers():
    return [
        Ringhttpd("ringhttpd-uring", 18081, "uring", 1),
        Ringhttpd("ringhttpd-epoll", 18082, "epoll", 1),
        Nginx(18083),
        Lighttpd(18084),
        H2o(18085),
        Ceiling("ceiling", 18086, close_mode=False),
        Ceiling("ceiling-close", 18087, close_mode=True),
        Ringhttpd("ringhttpd-uring-t1", 18088, "uring", 1, pinned=False),
        Ringhttpd("ringhttpd-uring-t2", 18089, "uring", 2, pinned=False),
        Ringhttpd("ringhttpd-uring-log", 18090, "uring", 1, access_log=True),
        Nginx(18091, name="nginx-log", access_log=True),
    ] + compress_servers() + tls_servers()


# ---------------------------------------------------------------------------------------------
# scenarios

FILE_SERVERS = ["ringhttpd-uring", "ringhttpd-epoll", "nginx", "lighttpd", "h2o"]


class Scenario:
    """One load shape. `saturate` marks the small-response scenarios that also run in the
    saturated mode (see saturated()); a new scenario only needs a line in SCENARIOS."""

    def __init__(self, name, what, path, conns, servers, kind="rate", headers=(),
                 status_ok=False, pinned=True, wrk_threads=1, timeout="5s", quick=True,
                 saturate=False, sat_clients=1, scheme="http", sat_quotas=None):
        self.name, self.what, self.path, self.conns = name, what, path, conns
        self.servers, self.kind, self.headers = servers, kind, list(headers)
        self.status_ok, self.pinned, self.wrk_threads = status_ok, pinned, wrk_threads
        self.timeout, self.quick = timeout, quick
        self.saturate, self.sat_clients = saturate, sat_clients
        # The saturated variants' quotas, in % of a core: None is --quota's (NAME-sat); a
        # number is its own (NAME-satPCT), for a load the client can saturate only lower down.
        self.sat_quotas = sat_quotas or [None]
        self.scheme = scheme  # "http", "https" or "h2c": which of the server's ports (Server.ports)
        self.quota = None  # a CpuQuota on the saturated variant, None when free-running
        self.clients = 1   # wrk processes: the first on WRK_CPU, a second on SERVER_CPU

    def saturated(self, quota):
        """The same load with every server held to `quota` (a CpuQuota): the server, not the
        client, is the bottleneck, so req/s measures its efficiency and ranks the table."""
        sc = copy.copy(self)
        suffix = "-sat" if quota.own is None else "-sat%d" % quota.own
        sc.name, sc.kind, sc.saturate = self.name + suffix, "saturated", False
        sc.quota, sc.clients, sc.free_name = quota, self.sat_clients, self.name
        return sc

    @property
    def metric(self):
        """The column ratios are computed on (and the chart plots)."""
        return {"rate": "cpu_rps", "throughput": "mbps", "scaling": "rps",
                "saturated": "rps"}[self.kind]

    def url(self, server):
        port = (getattr(server, "h3_port", None) if self.scheme == "h3"
                else server.ports.get(self.scheme))
        if port is None:
            return None
        return "%s://%s:%d%s" % ("https" if self.scheme in ("https", "h3") else "http", HOST,
                                 port, self.path)

    def command(self, server, duration, client=0):
        """Client 0 runs on WRK_CPU; client 1 (saturated mode's second client, for the scenarios
        one wrk thread cannot saturate) shares SERVER_CPU with the server, which gets its quota
        first because its cgroup has the larger weight (CpuQuota.SHARES)."""
        cmd = ["wrk", "-t%d" % self.wrk_threads, "-c%d" % self.conns, "-d%ds" % duration,
               "--latency", "--timeout", self.timeout, "-s", REPORT_LUA]
        for h in self.headers:
            cmd += ["-H", h]
        cmd.append(self.url(server))
        return (["taskset", "-c", (WRK_CPU, SERVER_CPU)[client]] + cmd) if self.pinned else cmd

    def report(self, stdout, stderr, wall_s):
        """The client's totals (requests, bytes, errors by kind, duration_us, p50_us, p99_us)
        from its output; raises ValueError with what it said when there are none."""
        m = re.search(r"^BENCH-JSON (\{.*\})$", stdout, re.M)
        if not m:
            raise ValueError("wrk: %s" % (stderr.strip() or stdout.strip())[-300:])
        return json.loads(m.group(1))


SCENARIOS = [
    Scenario("ka-1k-c50", "Keep-alive GET of a 1 KiB file, 50 connections", "/1k.bin", 50,
             FILE_SERVERS + ["ceiling"], saturate=True),
    Scenario("ka-1k-c1000", "Keep-alive GET of a 1 KiB file, 1000 connections", "/1k.bin", 1000,
             FILE_SERVERS + ["ceiling"], saturate=True),
    # Saturated, one wrk thread opens and closes connections more slowly than a server at 40%
    # of a core serves them; a second wrk process gets the rest of the server's core.
    Scenario("close-1k", "GET of a 1 KiB file with `Connection: close` (one request per "
             "connection), 50 connections", "/1k.bin", 50, FILE_SERVERS + ["ceiling-close"],
             headers=["Connection: close"], saturate=True, sat_clients=2),
    Scenario("ka-404", "Keep-alive GET of a missing file (404), 50 connections", "/missing.bin",
             50, FILE_SERVERS, status_ok=True),
    Scenario("ka-16k", "Keep-alive GET of a 16 KiB file, 50 connections", "/16k.bin", 50,
             FILE_SERVERS, quick=False),
    Scenario("ka-1m", "Keep-alive GET of a 1 MiB file, 16 connections (throughput)", "/1m.bin",
             16, FILE_SERVERS, kind="throughput"),
    Scenario("ka-100m", "Keep-alive GET of a 100 MiB file, 4 connections (throughput)",
             "/100m.bin", 4, FILE_SERVERS, kind="throughput", timeout="30s", quick=False),
    Scenario("scale-1k", "`ringhttpd --threads` 1 vs 2, keep-alive 1 KiB, 200 connections, "
             "server and wrk (2 threads) unpinned: wrk competes for the same 2 cores",
             "/1k.bin", 200, ["ringhttpd-uring-t1", "ringhttpd-uring-t2"], kind="scaling",
             pinned=False, wrk_threads=2),
    # Issue 12: what the access log costs. Compare with ka-1k-c50 (the same load, logs off).
    Scenario("ka-1k-log", "Keep-alive GET of a 1 KiB file, 50 connections, access log on "
             "(Combined, to a file on disk; nginx with buffer=64k flush=1s)", "/1k.bin", 50,
             ["ringhttpd-uring-log", "nginx-log"], saturate=True),
]


# ---------------------------------------------------------------------------------------------
# compression (issue 17): a 32 KiB script asked for with the Accept-Encoding browsers send, from
# servers that compress it: nginx per request (gzip level 1 and 6), lighttpd (mod_deflate with
# its cache directory), h2o (compress: ON), ringhttpd on the fly (its default) and ringhttpd
# serving the same script's precompressed siblings. Bytes on the wire per response are printed
# under the table, since a server that compresses less sends more.

COMPRESS_JS = "js/app.js"       # served compressed on the fly
PRECOMPRESSED_JS = "pre/app.js"  # the same bytes with .br, .zst and .gz siblings
BROWSER_AE = "Accept-Encoding: gzip, deflate, br, zstd"


class OwnConfig:
    """A peer in another configuration (compressing, TLS): its own directory and config
    template; mixed into the peer's class, whose command() reads self.dir."""

    def own_config(self, name, template, conf_file, **values):
        self.name, self.template, self.conf_file, self.values = name, template, conf_file, values
        self.dir = os.path.join(WORK, name)
        self.log_path = os.path.join(self.dir, "server.log")

    def prepare(self):
        Server.prepare(self)
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            os.makedirs(os.path.join(self.dir, "tmp", sub), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "cache"), exist_ok=True)
        fill_template(self.template, os.path.join(self.dir, self.conf_file), WORK=self.dir,
                      PORT=self.port, DOCROOT=DOCROOT, **self.values)
        return None


class NginxGzip(OwnConfig, Nginx):
    def __init__(self, level, port):
        Nginx.__init__(self, port)
        self.own_config("nginx-gzip%d" % level, "nginx-gzip.conf", "nginx.conf", LEVEL=level)


class LighttpdDeflate(OwnConfig, Lighttpd):
    def __init__(self, port):
        Lighttpd.__init__(self, port)
        self.own_config("lighttpd-deflate", "lighttpd-deflate.conf", "lighttpd.conf")


class H2oCompress(OwnConfig, H2o):
    def __init__(self, port):
        H2o.__init__(self, port)
        self.own_config("h2o-compress", "h2o-compress.conf", "h2o.conf")


def compress_servers():
    return [NginxGzip(1, 18090), NginxGzip(6, 18091), LighttpdDeflate(18092), H2oCompress(18093)]


def write_compress_docroot():
    """js/app.js: 32 KiB of real JavaScript (jquery.js, Debian's libjs-jquery, when present);
    pre/app.js: the same bytes with siblings made by brotli -q 11, zstd -19 and gzip -9."""
    src = "/usr/share/javascript/jquery/jquery.js"
    if os.path.exists(src):
        with open(src, "rb") as f:
            js = f.read(32 * 1024)
    else:  # JavaScript-like text of the same size
        js = b"".join(b"function f%d(a) { return a.map(x => x * %d).join(', '); }\n" % (i, i)
                      for i in range(700))[:32 * 1024]
    for rel in (COMPRESS_JS, PRECOMPRESSED_JS):
        path = os.path.join(DOCROOT, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(js)
    pre = os.path.join(DOCROOT, PRECOMPRESSED_JS)
    with open(pre + ".gz", "wb") as f:
        f.write(gzip.compress(js, 9, mtime=0))
    subprocess.run(["brotli", "-f", "-q", "11", "-o", pre + ".br", pre], check=True)
    subprocess.run(["zstd", "-q", "-f", "-19", pre, "-o", pre + ".zst"], check=True)


COMPRESS_SERVERS = ["ringhttpd-uring", "nginx-gzip1", "nginx-gzip6", "lighttpd-deflate",
                    "h2o-compress"]
SCENARIOS += [
    Scenario("ka-js32k-ae", "Keep-alive GET of a 32 KiB script with `%s`, 50 connections: "
             "compressed on the fly (nginx per request, the others once)" % BROWSER_AE,
             "/" + COMPRESS_JS, 50, COMPRESS_SERVERS, headers=[BROWSER_AE], quick=False,
             saturate=True),
    Scenario("ka-js32k-pre", "The same script from precompressed siblings (ringhttpd's "
             "yardstick for the on-the-fly figure), 50 connections",
             "/" + PRECOMPRESSED_JS, 50, ["ringhttpd-uring"], headers=[BROWSER_AE], quick=False,
             saturate=True),
]


# ---------------------------------------------------------------------------------------------
# HTTPS (issue 14) and HTTP/2 (issue 18): every server gets the same ECDSA P-256 certificate,
# made by make_certificate() with openssl into bench/work/tls/, and TLS 1.3 (check_tls() asks
# each TLS port which version it picks before anything is measured). HTTP/2 over TLS by ALPN,
# h2c by prior knowledge. Clients: wrk (HTTPS, HTTP/1.1; it never resumes a TLS session),
# openssl s_time -reuse (resumed handshakes) and h2load (HTTP/2, and HTTP/1.1 for the 64 MiB
# comparison).

CERT = os.path.join(WORK, "tls", "cert.pem")
KEY = os.path.join(WORK, "tls", "key.pem")


def make_certificate():
    os.makedirs(os.path.dirname(CERT), exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", KEY, "-out", CERT,
                    "-days", "30", "-subj", "/CN=localhost"], check=True, capture_output=True)


def check_tls(port):
    """The TLS version a client offering 1.2 and 1.3 gets from the server on `port`."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection((HOST, port), timeout=2) as raw:
            with ctx.wrap_socket(raw) as conn:
                return conn.version()
    except OSError as e:
        return "no TLS (%s)" % e


class Tls:
    """Mixed into a server that also listens for TLS on tls_port."""

    def tls(self, tls_port):
        self.ports["https"] = tls_port


class RinghttpdTls(Tls, Ringhttpd):
    def __init__(self, name, port, tls_port, engine):
        Ringhttpd.__init__(self, name, port, engine, 1)
        self.tls(tls_port)
        self.h3_port = tls_port  # --http3 is on with --tls-port: QUIC on the same port number

    def command(self):
        cmd = Ringhttpd.command(self)
        return cmd[:-1] + ["--tls-port", str(self.ports["https"]), "--tls-cert", CERT,
                           "--tls-key", KEY, "--tls-min", "1.3"] + cmd[-1:]


class NginxTls(OwnConfig, Tls, Nginx):
    def __init__(self, port, tls_port):
        Nginx.__init__(self, port)
        self.own_config("nginx-tls", "nginx-tls.conf", "nginx.conf", TLS_PORT=tls_port,
                        CERT=CERT, KEY=KEY)
        self.tls(tls_port)
        del self.ports["http"]  # its cleartext listener speaks h2c only (nginx-tls.conf)


class LighttpdTls(OwnConfig, Tls, Lighttpd):
    def __init__(self, port, tls_port):
        Lighttpd.__init__(self, port)
        self.own_config("lighttpd-tls", "lighttpd-tls.conf", "lighttpd.conf",
                        TLS_PORT=tls_port, CERT=CERT, KEY=KEY)
        self.tls(tls_port)


class H2oTls(OwnConfig, Tls, H2o):
    def __init__(self, port, tls_port):
        H2o.__init__(self, port)
        self.own_config("h2o-tls", "h2o-tls.conf", "h2o.conf", TLS_PORT=tls_port, CERT=CERT,
                        KEY=KEY)
        self.tls(tls_port)


class Caddy(OwnConfig, Tls, Server):
    """caddy v2 (HTTP/3 by quic-go), serving the docroot over HTTPS with HTTP/1.1, HTTP/2 and
    HTTP/3 on tls_port, the bench certificate, no access log (bench/conf/Caddyfile)."""

    def __init__(self, port, tls_port):
        Server.__init__(self, "caddy", "caddy", port)
        self.own_config("caddy", "Caddyfile", "Caddyfile", TLS_PORT=tls_port, CERT=CERT,
                        KEY=KEY)
        self.tls(tls_port)
        self.h3_port = tls_port
        del self.ports["h2c"], self.ports["http"]  # it serves HTTPS only (no redirects)

    def prepare(self):
        if not os.access(CADDY, os.X_OK):
            self.state = "missing"
            return "missing (bench/run installs it with go install; is Go 1.25+ on PATH?)"
        OwnConfig.prepare(self)
        return None

    def command(self):
        # XDG_DATA_HOME/XDG_CONFIG_HOME: caddy's storage in its own directory, not ~/.local.
        return ["env", "XDG_DATA_HOME=" + self.dir, "XDG_CONFIG_HOME=" + self.dir,
                "GOMAXPROCS=1", CADDY, "run", "--adapter", "caddyfile", "--config",
                os.path.join(self.dir, "Caddyfile")]


class Peer:
    """Mixed into a newest peer (h2o master, nginx with HTTP/3): its binary is under PEERS, and
    it is left out, saying so, where that was not built."""

    def peer(self, rel):
        self.binary = os.path.join(PEERS, rel)

    def prepare(self):
        if not os.access(self.binary, os.X_OK):
            self.state = "missing"
            return "left out (no %s: set RINGHTTPD_PEERS to a ../shared/peers/h3peers build)" % (
                self.binary)
        return OwnConfig.prepare(self)


class NginxH3(Peer, OwnConfig, Tls, Nginx):
    """nginx >= 1.25 with HTTP/3 (QUIC on its TLS port number), h2c and HTTP/1.1 in clear."""

    def __init__(self, port, tls_port):
        Nginx.__init__(self, port, name="nginx-h3")
        self.own_config("nginx-h3", "nginx-h3.conf", "nginx.conf", TLS_PORT=tls_port,
                        CERT=CERT, KEY=KEY)
        self.tls(tls_port)
        self.h3_port = tls_port
        self.peer(os.path.join("nginx", "sbin", "nginx"))

    def command(self):
        return [self.binary] + Nginx.command(self)[1:]


class H2oMaster(Peer, OwnConfig, Tls, H2o):
    """h2o from master (quicly: HTTP/3 on its TLS port number), h2c and HTTP/1.1 in clear."""

    def __init__(self, port, tls_port):
        H2o.__init__(self, port)
        self.own_config("h2o-master", "h2o-master.conf", "h2o.conf", TLS_PORT=tls_port,
                        CERT=CERT, KEY=KEY)
        self.tls(tls_port)
        self.h3_port = tls_port
        self.peer(os.path.join("h2o", "bin", "h2o"))

    def command(self):
        return [self.binary] + H2o.command(self)[1:]


def tls_servers():
    return [RinghttpdTls("ringhttpd-uring-tls", 18101, 18102, "uring"),
            RinghttpdTls("ringhttpd-epoll-tls", 18103, 18104, "epoll"),
            NginxTls(18105, 18106), LighttpdTls(18107, 18108), H2oTls(18109, 18110),
            Caddy(18111, 18112), NginxH3(18113, 18114), H2oMaster(18115, 18116)]


class STime(Scenario):
    """A resumed TLS handshake per request: `openssl s_time -reuse` (the first connection makes
    a full handshake, every later one resumes its session ticket) sends `GET path HTTP/1.0` and
    reads to the close. One connection at a time per process; `conns` processes, all on
    WRK_CPU."""

    def __init__(self, name, what, path, procs, servers, **kw):
        super().__init__(name, what, path, procs, servers, scheme="https", **kw)
        self.clients = procs

    def command(self, server, duration, client=0):
        return ["taskset", "-c", WRK_CPU, "openssl", "s_time", "-connect",
                "%s:%d" % (HOST, server.ports["https"]), "-www", self.path, "-reuse",
                "-tls1_3", "-time", str(duration)]

    def report(self, stdout, stderr, wall_s):
        m = re.search(r"^(\d+) connections in [\d.]+s; .* bytes read (\d+)$", stdout, re.M)
        if not m:
            raise ValueError("s_time: %s" % (stderr.strip() or stdout.strip())[-300:])
        # It prints "*" per full handshake and "r" per resumed one: only the first may be full.
        marks = "".join(re.findall(r"^[*r]+$", stdout, re.M))
        if marks.count("r") < 0.9 * len(marks):
            raise ValueError("s_time: %d of %d connections resumed" % (marks.count("r"),
                                                                      len(marks)))
        # s_time counts no HTTP status; a short body would show in the bytes per response.
        return {"requests": int(m.group(1)), "bytes": int(m.group(2)),
                "duration_us": wall_s * 1e6, "connect": 0, "read": 0, "write": 0,
                "status": 0, "timeout": 0}


class H2load(Scenario):
    """h2load (nghttp2-client), one thread on WRK_CPU: `conns` connections with `streams`
    concurrent streams each; `uris` (a list of paths) makes it request them in turn (-i);
    scheme "http" means HTTP/1.1 (--h1). h2load reports no latency percentiles. With two
    clients (saturated, sat_clients=2) each opens half the connections, the second beside the
    server on SERVER_CPU as wrk's does."""

    def __init__(self, name, what, path, conns, servers, streams=1, uris=None, **kw):
        super().__init__(name, what, path, conns, servers, **kw)
        self.streams, self.uris = streams, uris

    def command(self, server, duration, client=0):
        cmd = ["taskset", "-c", (WRK_CPU, SERVER_CPU)[client], "h2load", "-t1",
               "-c%d" % max(1, self.conns // self.clients),
               "-m%d" % self.streams, "-D", str(duration)]
        if self.scheme == "http":
            cmd.append("--h1")
        base = self.url(server)
        if self.uris is None:
            return cmd + [base]
        # h2load takes scheme, host and port from the first URI in the file only.
        listing = os.path.join(WORK, server.name, "uris-%s.txt" % self.name)
        os.makedirs(os.path.dirname(listing), exist_ok=True)
        with open(listing, "w") as f:
            f.write("\n".join([base[:-len(self.path)] + self.uris[0]] + self.uris[1:]) + "\n")
        return cmd + ["-i", listing]

    def report(self, stdout, stderr, wall_s):
        req = re.search(r"^requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, "
                        r"(\d+) failed, (\d+) errored, (\d+) timeout", stdout, re.M)
        codes = re.search(r"^status codes: \d+ 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", stdout,
                          re.M)
        traffic = re.search(r"^traffic: .*?\((\d+)\) total", stdout, re.M)
        took = re.search(r"^finished in ([\d.]+)(ms|s),", stdout, re.M)
        if not (req and codes and traffic):
            raise ValueError("h2load: %s" % (stderr.strip() or stdout.strip())[-300:])
        ok, failed, errored, timeout = (int(x) for x in req.groups())
        secs = (float(took.group(1)) / (1000 if took.group(2) == "ms" else 1)) if took else wall_s
        # failed = errored + timed out + streams the server refused or reset: those are
        # counted here as "connect" errors (wrk's nearest kind).
        return {"requests": ok, "bytes": int(traffic.group(1)), "duration_us": secs * 1e6,
                "connect": max(0, failed - errored - timeout), "read": errored, "write": 0,
                "status": sum(int(x) for x in codes.groups()), "timeout": timeout}


class H3load(H2load):
    """HTTP/3 (QUIC on the server's TLS port number, UDP) with bench/h3load, which takes
    h2load's -c, -m and -D and prints h2load's summary lines (traffic: body bytes only)."""

    def command(self, server, duration, client=0):
        return ["taskset", "-c", (WRK_CPU, SERVER_CPU)[client], H3LOAD,
                "-c%d" % max(1, self.conns // self.clients), "-m%d" % self.streams,
                "-D", str(duration), self.url(server)]


PAGE_ASSETS = 40  # the page-load mix: /page/index.html and 40 assets, 1-24 KiB
PAGE_URIS = ["/page/index.html"] + ["/page/a%02d.%s" % (i, ("css", "js")[i % 2])
                                    for i in range(PAGE_ASSETS)]


def write_page_docroot():
    page = os.path.join(DOCROOT, "page")
    os.makedirs(page, exist_ok=True)
    links = "".join('<link rel="stylesheet" href="%s">\n' % u if u.endswith(".css") else
                    '<script src="%s"></script>\n' % u for u in PAGE_URIS[1:])
    with open(os.path.join(page, "index.html"), "w") as f:
        f.write("<!doctype html><title>page</title>\n" + links +
                "<p>%s</p>\n" % ("lorem ipsum " * 300))
    for i, uri in enumerate(PAGE_URIS[1:]):
        size = 1024 * (1 + (i * 7) % 24)
        line = b"/* asset %d */ .c%d { margin: 0 } function f%d() { return %d; }\n" % (i, i, i, i)
        with open(os.path.join(DOCROOT, uri.lstrip("/")), "wb") as f:
            f.write((line * (size // len(line) + 1))[:size])


TLS_SERVERS = ["ringhttpd-uring-tls", "ringhttpd-epoll-tls", "nginx-tls", "lighttpd-tls",
               "h2o-tls", "nginx-h3", "h2o-master"]
# HTTP/3: ringhttpd (QUIC on its TLS port number), caddy, and the newest peers where built
# (PEERS); Debian's nginx and h2o are built without it.
H3_SERVERS = ["ringhttpd-uring-tls", "ringhttpd-epoll-tls", "caddy", "nginx-h3", "h2o-master"]
SCENARIOS += [
    # Saturated, one wrk thread (which decrypts every response) cannot keep a server at 40%
    # busy: a second wrk process on the server's core, as in close-1k-sat.
    Scenario("tls-ka-1k", "HTTPS (TLS 1.3) keep-alive GET of a 1 KiB file, 50 connections",
             "/1k.bin", 50, TLS_SERVERS, scheme="https", saturate=True, sat_clients=2),
    Scenario("tls-close-1k", "HTTPS GET of a 1 KiB file with `Connection: close`: a full "
             "TLS 1.3 handshake (ECDHE, ECDSA P-256) per request, since wrk never resumes a "
             "session; 50 connections", "/1k.bin", 50, TLS_SERVERS,
             headers=["Connection: close"], scheme="https", quick=False),
    STime("tls-resume-1k", "HTTPS GET of a 1 KiB file over a resumed TLS 1.3 session (ticket) "
          "per request: `openssl s_time -reuse`, 4 processes (wrk cannot resume)", "/1k.bin", 4,
          TLS_SERVERS, quick=False),
    # Free-running, the fastest servers out-send one wrk thread's decryption (it, not they,
    # is the bottleneck): tls-1m-sat holds each to the quota, where MB/s is the server's.
    Scenario("tls-1m", "HTTPS keep-alive GET of a 1 MiB file, 16 connections (throughput)",
             "/1m.bin", 16, TLS_SERVERS, kind="throughput", scheme="https", quick=False,
             saturate=True),
    H2load("h2-1k", "HTTP/2 over TLS 1.3 (ALPN h2), GET of a 1 KiB file, h2load -c4 -m100",
           "/1k.bin", 4, TLS_SERVERS, streams=100, scheme="https", saturate=True,
           sat_clients=2),
    H2load("h2c-1k", "HTTP/2 in clear text (h2c, prior knowledge), GET of a 1 KiB file, "
           "h2load -c4 -m100", "/1k.bin", 4, TLS_SERVERS, streams=100, scheme="h2c",
           saturate=True, sat_clients=2, quick=False),
    H2load("h2-page", "Page-load mix over HTTP/2 and TLS 1.3: one HTML and %d assets of "
           "1-24 KiB in turn (h2load -i), 4 connections, 41 streams each" % PAGE_ASSETS,
           PAGE_URIS[0], 4, TLS_SERVERS, streams=len(PAGE_URIS), uris=PAGE_URIS,
           scheme="https", quick=False),
    H2load("h2c-64m", "A 64 MiB file over h2c, one connection, one stream (throughput)",
           "/64m.bin", 1, TLS_SERVERS, kind="throughput",
           scheme="h2c", timeout="30s", quick=False),
    # Saturated at 10% of a core, not --quota's 40%: the quic-go client tops out near 20 k
    # requests a second on a core, so at 40% it, not the server, was the bottleneck (issue 41).
    H3load("h3-1k", "HTTP/3 (QUIC, TLS 1.3), GET of a 1 KiB file, h3load -c4 -m100",
           "/1k.bin", 4, H3_SERVERS, streams=100, scheme="h3", saturate=True, sat_clients=2,
           sat_quotas=[10]),
    H3load("h3-64m", "A 64 MiB file over HTTP/3, one connection, one stream (throughput; "
           "beside h2c-64m)", "/64m.bin", 1, H3_SERVERS, kind="throughput", scheme="h3",
           quick=False),
    H2load("h1-64m", "The same 64 MiB file over HTTP/1.1 (h2load --h1), one connection: "
           "the yardstick for h2c-64m (nginx-tls has no HTTP/1.1 cleartext port)", "/64m.bin",
           1, [n for n in TLS_SERVERS if n != "nginx-tls"], kind="throughput", scheme="http",
           timeout="30s", quick=False),
]


# ---------------------------------------------------------------------------------------------
# processes


def proc_table():
    """pid -> (ppid, utime + stime ticks, starttime) for every process visible now."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        # fields from 3 on: state ppid ... utime(14) stime(15) ... starttime(22)
        table[int(entry)] = (int(rest[1]), int(rest[11]) + int(rest[12]), int(rest[19]))
    return table


def tree_pids(pid, table):
    pids, frontier = {pid}, [pid]
    children = {}
    for p, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(p)
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in pids:
                pids.add(child)
                frontier.append(child)
    return pids


def tree_cpu_ticks(server):
    """utime+stime of the server process and all its descendants (all threads included)."""
    table = proc_table()
    pids = tree_pids(server.proc.pid, table)
    server.seen_pids |= {(p, table[p][2]) for p in pids if p in table}
    return sum(table[p][1] for p in pids if p in table)


def machine_busy_ticks():
    """user+nice+system ticks of all CPUs (interrupt time excluded: no task is charged it)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[1]) + int(fields[2]) + int(fields[3])


def wait_for_idle(limit_s):
    """Waits (at most limit_s) until the rest of the machine uses < BUSY_WARN cores; between
    runs our servers are idle, so whatever is busy then is someone else. Returns seconds waited."""
    t0 = time.time()
    while True:
        b0 = machine_busy_ticks()
        time.sleep(0.5)
        load = (machine_busy_ticks() - b0) / CLK_TCK / 0.5
        if load < BUSY_WARN or time.time() - t0 >= limit_s:
            return time.time() - t0


class CpuQuota:
    """The saturated mode's CPU limit: cgroup v1's cpu controller (CFS bandwidth control). Each
    saturated run gets a child cgroup of our own with cpu.cfs_period_us / cpu.cfs_quota_us set,
    the server's processes (all their threads, io_uring's workers included) are moved into it
    for the run, then back, and the cgroup is removed, also on Ctrl-C. Every server gets the
    same limit. It never touches a cgroup it did not make."""

    SHARES = 10240  # ten times a task's weight: the server gets its quota before a client on its core

    def __init__(self, pct, period_us, own=None):
        self.pct, self.period_us = pct, period_us
        self.own = own  # a scenario's own quota (the variant is named NAME-satPCT), else None
        self.quota_us = max(1000, period_us * pct // 100)
        self.mount, self.home = self.find()

    @staticmethod
    def find():
        """(cpu controller mount, our own cgroup's directory in it), or raises OSError."""
        mount = None
        with open("/proc/mounts") as f:
            for line in f:
                dev, path, fstype, opts = line.split()[:4]
                if fstype == "cgroup" and "cpu" in opts.split(","):
                    mount = path
        if mount is None:
            raise OSError("no cgroup v1 cpu controller mounted (see /proc/mounts)")
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, rel = line.rstrip("\n").split(":", 2)
                if "cpu" in controllers.split(","):
                    return mount, os.path.join(mount, rel.lstrip("/"))
        return mount, mount

    def describe(self):
        return "%d%% of one core (cpu.cfs_quota_us %d per cpu.cfs_period_us %d)" % (
            self.pct, self.quota_us, self.period_us)

    @staticmethod
    def write(path, value):
        with open(path, "w") as f:
            f.write(str(value))

    def enter(self, server):
        """Makes the cgroup and moves the server's process tree into it; returns its path."""
        path = os.path.join(self.home, "ringhttpd-bench.%d.%s" % (os.getpid(), server.name))
        os.makedirs(path, exist_ok=True)
        try:
            self.write(os.path.join(path, "cpu.cfs_period_us"), self.period_us)
            self.write(os.path.join(path, "cpu.cfs_quota_us"), self.quota_us)
            self.write(os.path.join(path, "cpu.shares"), self.SHARES)
            for pid in sorted(tree_pids(server.proc.pid, proc_table())):
                try:
                    self.write(os.path.join(path, "cgroup.procs"), pid)  # the whole process
                except ProcessLookupError:
                    pass
        except BaseException:
            self.leave(path)
            raise
        return path

    def stat(self, path):
        with open(os.path.join(path, "cpu.stat")) as f:
            return {k: int(v) for k, v in (line.split() for line in f)}

    def leave(self, path):
        """Moves whatever is left in the cgroup back home, then removes it."""
        for attempt in range(50):
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    pids = [int(x) for x in f.read().split()]
            except FileNotFoundError:
                return
            for pid in pids:
                try:
                    self.write(os.path.join(self.home, "cgroup.procs"), pid)
                except ProcessLookupError:
                    pass
            try:
                os.rmdir(path)
                return
            except OSError:
                time.sleep(0.1)  # a process that just exited is still being reaped
        print("bench: could not remove cgroup %s" % path, file=sys.stderr, flush=True)


def port_open(port):
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


def log_tail(path, lines=5, start=0):
    try:
        with open(path, errors="replace") as f:
            f.seek(start)
            return " | ".join(f.read().strip().splitlines()[-lines:])
    except OSError:
        return ""


def start_server(server):
    if server.state == "missing":
        return False
    if port_open(server.port):
        server.state = "port %d already in use" % server.port
        return False
    os.makedirs(os.path.dirname(server.log_path), exist_ok=True)
    log = open(server.log_path, "ab")
    server.log_start = log.tell()  # what this start writes is what a failure quotes
    # A session of its own, so a Ctrl-C on the terminal reaches only us; we stop it by PID.
    server.proc = subprocess.Popen(server.full_command(), stdout=log, stderr=log,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    deadline = time.time() + 5
    while time.time() < deadline:
        if server.proc.poll() is not None:
            server.state = "exited with %d at start (%s)" % (
                server.proc.returncode, log_tail(server.log_path, start=server.log_start))
            return False
        if all(port_open(p) for p in set(server.ports.values())):
            server.state = "running"
            tree_cpu_ticks(server)  # records the worker pids for stop_server
            return True
        time.sleep(0.05)
    server.state = "not listening on %d after 5 s" % server.port
    stop_server(server)
    return False


def pid_alive(pid, starttime):
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    rest = stat[stat.rfind(")") + 2:].split()
    return int(rest[19]) == starttime and rest[0] != "Z"


def stop_server(server):
    """SIGTERM, then SIGKILL, to the server and to the worker processes we saw it fork."""
    proc = server.proc
    if proc is None:
        return
    if proc.poll() is None:
        try:
            tree_cpu_ticks(server)
        except Exception:
            pass
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # Workers orphaned by a master that died first: only the exact processes we saw.
    for pid, starttime in server.seen_pids:
        if pid != proc.pid and pid_alive(pid, starttime):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    server.proc = None


# ---------------------------------------------------------------------------------------------
# measuring


def run_wrk(server, scenario, duration):
    """One measured run; returns a result dict (with "failed" set when there is no number)."""
    res = {"server": server.name, "scenario": scenario.name}
    if server.proc is None or server.proc.poll() is not None:
        if server.state == "missing":
            res["failed"] = "missing"
            res["why"] = getattr(server, "why_missing", None)
            return res
        if server.proc is not None:
            server.state = "exited with %d (%s)" % (
                server.proc.returncode, log_tail(server.log_path, start=server.log_start))
        if not start_server(server):  # one restart per run, so one crash does not end the run
            res["failed"] = server.state
            return res
    if scenario.quota is None:
        return measure(server, scenario, duration, res)
    quota = scenario.quota
    res.update({"quota_pct": quota.pct, "cfs_period_us": quota.period_us,
                "cfs_quota_us": quota.quota_us, "clients": scenario.clients})
    try:
        cgroup = quota.enter(server)
    except OSError as e:
        res["failed"] = "cannot apply the CPU quota: %s" % e
        return res
    try:
        st0 = quota.stat(cgroup)
        measure(server, scenario, duration, res)
        st1 = quota.stat(cgroup)
    finally:
        quota.leave(cgroup)
    periods = st1["nr_periods"] - st0["nr_periods"]
    res["throttled"] = (st1["nr_throttled"] - st0["nr_throttled"]) / periods if periods else 0.0
    # Below 90% of its quota the server was not the bottleneck: the client was.
    if res.get("cores") is not None:
        res["saturated"] = res["cores"] >= 0.9 * quota.pct / 100
    return res


def measure(server, scenario, duration, res):
    """Runs the scenario's wrk process(es) against a running server and fills `res`."""
    cmds = [scenario.command(server, duration, client=i) for i in range(scenario.clients)]
    res["command"] = cmds[0]
    if len(cmds) > 1:
        res["commands"] = cmds
    busy0, kids0 = machine_busy_ticks(), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0 = tree_cpu_ticks(server)
    t0 = time.monotonic()
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for cmd in cmds]
    outs = []
    try:
        for proc in procs:
            try:
                outs.append(proc.communicate(timeout=duration + 60))
            except subprocess.TimeoutExpired:
                res["failed"] = "wrk did not finish"
                return res
    finally:
        for proc in procs:  # only on an early exit: wrk stops by itself after -d
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    wall_s = time.monotonic() - t0
    cpu1 = tree_cpu_ticks(server)
    busy1, kids1 = machine_busy_ticks(), resource.getrusage(resource.RUSAGE_CHILDREN)
    if server.proc.poll() is not None:
        res["failed"] = "server exited with %d during the run (%s)" % (
            server.proc.returncode, log_tail(server.log_path, start=server.log_start))
        server.state = res["failed"]
        return res
    reports = []
    for stdout, stderr in outs:
        try:
            reports.append(scenario.report(stdout, stderr, wall_s))
        except ValueError as e:
            res["failed"] = str(e)
            return res
    # Several clients: totals add up, the run lasts as long as the longest, and the latency
    # percentiles are the worst client's (they cannot be merged exactly).
    w = {k: sum(r[k] for r in reports) for k in ("requests", "bytes", "connect", "read",
                                                 "write", "status", "timeout")}
    for k in ("duration_us", "p50_us", "p99_us"):  # h2load and s_time give no percentiles
        values = [r[k] for r in reports if r.get(k) is not None]
        w[k] = max(values) if values else None
    secs = w["duration_us"] / 1e6
    cpu_s = (cpu1 - cpu0) / CLK_TCK
    wrk_s = (kids1.ru_utime + kids1.ru_stime) - (kids0.ru_utime + kids0.ru_stime)
    # What the rest of the machine did meanwhile (other sessions' builds, fuzzers...): a run
    # that shares its cores with them is slower, and this says so.
    res["others"] = max(0.0, (busy1 - busy0) / CLK_TCK - cpu_s - wrk_s) / secs
    res.update({
        "requests": w["requests"], "rps": w["requests"] / secs,
        "mbps": w["bytes"] / secs / 1e6, "cpu_s": cpu_s, "cores": cpu_s / secs,
        "cpu_rps": w["requests"] / cpu_s if cpu_s > 0 else None,
        "p50_us": w["p50_us"], "p99_us": w["p99_us"],
        "socket_errors": {k: w[k] for k in ("connect", "read", "write", "timeout") if w[k]},
        "non2xx": w["status"],
    })
    bad = sum(res["socket_errors"].values()) + (0 if scenario.status_ok else w["status"])
    res["unexpected_errors"] = bad
    if w["requests"] == 0:
        res["failed"] = "no request completed"
    return res


def fmt_num(v, digits=0):
    if v is None:
        return "—"
    return "{:,.{d}f}".format(v, d=digits)


def fmt_lat(us):
    if us is None:
        return "—"
    return "%d µs" % us if us < 1000 else "%.2f ms" % (us / 1000)


def progress_line(rnd, rounds, res):
    head = "[round %d/%d] %-11s %-19s" % (rnd, rounds, res["scenario"], res["server"])
    if res.get("failed") == "missing":
        return head + " missing (not built)"
    if "failed" in res:
        return head + " FAILED: " + res["failed"]
    errs = []
    if res["socket_errors"]:
        errs.append(" ".join("%s=%d" % kv for kv in res["socket_errors"].items()))
    if res["non2xx"]:
        errs.append("non-2xx=%d" % res["non2xx"])
    if res["others"] >= BUSY_WARN:
        errs.append("(machine busy: other processes used %.2f cores)" % res["others"])
    if "quota_pct" in res:
        errs.insert(0, "server at %.0f%% of a core (quota %d%%, throttled in %.0f%% of periods)%s"
                    % (res["cores"] * 100, res["quota_pct"], res["throttled"] * 100,
                       "" if res["saturated"] else " CLIENT-BOUND (not ranked)"))
    return head + " %9s req/s %9s req/CPU-s %8s MB/s  p50 %-9s p99 %-9s %s" % (
        fmt_num(res["rps"]), fmt_num(res["cpu_rps"]), fmt_num(res["mbps"], 1),
        fmt_lat(res["p50_us"]), fmt_lat(res["p99_us"]), " ".join(errs) or "ok")


# ---------------------------------------------------------------------------------------------
# setup


def raise_nofile():
    want = 1 << 20
    for limit in (want, resource.getrlimit(resource.RLIMIT_NOFILE)[1]):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
            return limit
        except (ValueError, OSError):
            continue
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def write_docroot():
    os.makedirs(DOCROOT, exist_ok=True)
    for name, size in FILES.items():
        path = os.path.join(DOCROOT, name)
        if os.path.exists(path) and os.path.getsize(path) == size:
            continue
        block = bytes((i * 131 + 7) % 251 for i in range(65536))
        with open(path + ".tmp", "wb") as f:
            left = size
            while left:
                f.write(block[:min(left, len(block))])
                left -= min(left, len(block))
        os.replace(path + ".tmp", path)
    with open(os.path.join(DOCROOT, "index.html"), "w") as f:
        f.write("<!doctype html><title>bench</title><p>ringhttpd bench docroot</p>\n")
    write_compress_docroot()
    write_page_docroot()
    for name in FILES:  # into the page cache before anything is measured
        with open(os.path.join(DOCROOT, name), "rb") as f:
            while f.read(1 << 20):
                pass


def build(log, want_ringhttpd):
    """Builds ringhttpd (may fail: its runs are then reported missing) and the ceiling server."""
    ok = {}
    with open(log, "w") as f:
        if not want_ringhttpd:
            ok["ringhttpd"] = False
        elif os.environ.get("BENCH_RINGHTTPD"):
            f.write("BENCH_RINGHTTPD=%s: not building ringhttpd\n" % RINGHTTPD)
            ok["ringhttpd"] = os.access(RINGHTTPD, os.X_OK)
        else:
            f.write("$ make -C %s build/ringhttpd\n" % ROOT)
            f.flush()
            r = subprocess.run(["make", "-C", ROOT, "build/ringhttpd"], stdout=f, stderr=f)
            ok["ringhttpd"] = r.returncode == 0 and os.access(RINGHTTPD, os.X_OK)
        f.write("\n$ make -C %s build/h3load\n" % ROOT)
        f.flush()
        r = subprocess.run(["make", "-C", ROOT, "build/h3load"], stdout=f, stderr=f)
        ok["h3load"] = r.returncode == 0 and os.access(H3LOAD, os.X_OK)
    Ringhttpd.built = ok["ringhttpd"]
    os.makedirs(os.path.dirname(CEILING), exist_ok=True)
    cc = os.environ.get("CC", "cc")
    ceiling_cmd = [cc, "-O2", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Wshadow",
                   "-Werror", os.path.join(BENCH, "ceiling.c"), "-o", CEILING, "-luring"]
    with open(log, "a") as f:
        f.write("\n$ %s\n" % " ".join(ceiling_cmd))
        f.flush()
        r = subprocess.run(ceiling_cmd, stdout=f, stderr=f)
    ok["ceiling"] = r.returncode == 0
    return ok


def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return ((out.stdout or "") + (out.stderr or "")).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "?"


def machine_info():
    info = {}
    with open("/proc/cpuinfo") as f:
        models = re.findall(r"^model name\s*:\s*(.*)$", f.read(), re.M)
    info["cpu"] = "%s × %d" % (models[0] if models else "?", os.cpu_count())
    with open("/proc/meminfo") as f:
        kb = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
    info["memory"] = "%.1f GiB" % (kb / 1048576)
    info["kernel"] = os.uname().release
    try:
        with open("/etc/os-release") as f:
            info["os"] = re.search(r'PRETTY_NAME="(.*)"', f.read()).group(1)
    except (OSError, AttributeError):
        info["os"] = "?"
    info["nginx"] = first_line(["nginx", "-v"])
    info["lighttpd"] = first_line(["lighttpd", "-v"])
    info["h2o"] = first_line(["h2o", "--version"])
    info["wrk"] = first_line(["wrk", "-v"])
    info["caddy"] = first_line([CADDY, "version"])
    for name, rel, flag in (("nginx-h3", "nginx/sbin/nginx", "-v"),
                            ("h2o-master", "h2o/bin/h2o", "--version")):
        path = os.path.join(PEERS, rel)
        info[name] = (first_line([path, flag]) if os.access(path, os.X_OK) else
                      "left out (none in %s; RINGHTTPD_PEERS)" % PEERS)
    info["liburing"] = first_line(["dpkg-query", "-W", "-f", "${Version}", "liburing-dev"])
    info["cc"] = first_line([os.environ.get("CC", "cc"), "--version"])
    commit = first_line(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "src"],
                           capture_output=True, text=True).stdout.strip()
    info["ringhttpd"] = "commit %s%s" % (commit, " + uncommitted changes in src/" if dirty else "")
    if os.environ.get("BENCH_RINGHTTPD"):
        info["ringhttpd"] = "%s (BENCH_RINGHTTPD; tree at %s)" % (RINGHTTPD, info["ringhttpd"])
    return info


# ---------------------------------------------------------------------------------------------
# report


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(results, scenarios, servers_by_name):
    """scenario -> server -> medians, plus per-round ratios to nginx and to the ceiling."""
    summary = {}
    for sc in scenarios:
        rows = {}
        ceiling_name = "ceiling-close" if "ceiling-close" in sc.servers else "ceiling"
        for name in sc.servers:
            if name not in servers_by_name:
                continue
            runs = [r for r in results if r["scenario"] == sc.name and r["server"] == name]
            good = [r for r in runs if "failed" not in r]
            row = {"runs": len(runs), "good": len(good),
                   "failures": sorted({r["failed"] for r in runs if "failed" in r}),
                   "why": next((r["why"] for r in runs if r.get("why")), None)}
            for key in ("rps", "cpu_rps", "mbps", "p50_us", "p99_us", "cores", "throttled"):
                row[key] = median([r.get(key) for r in good])
            row["unsaturated"] = sum(1 for r in good if r.get("saturated") is False)
            # Client-bound (below 90% of its quota in every run): shown, not ranked.
            row["client_bound"] = bool(good) and row["unsaturated"] == len(good)
            errs = {}
            for r in good:
                for k, v in r["socket_errors"].items():
                    errs[k] = errs.get(k, 0) + v
                if r["non2xx"]:
                    errs["non-2xx"] = errs.get("non-2xx", 0) + r["non2xx"]
            row["errors"] = errs
            row["others_max"] = max((r["others"] for r in good), default=None)
            row["unexpected"] = sum(r["unexpected_errors"] for r in good)
            nginx_name = "nginx-tls" if "nginx-tls" in sc.servers else "nginx"
            ranked = [r for r in good if r.get("saturated") is not False]
            for ref, col in ((nginx_name, "x_nginx"), (ceiling_name, "x_ceiling")):
                ratios = []
                for r in ranked:
                    other = [o for o in results if o["scenario"] == sc.name and
                             o["server"] == ref and o["round"] == r["round"] and
                             "failed" not in o and o.get("saturated") is not False]
                    if other and other[0][sc.metric] and r[sc.metric] is not None:
                        ratios.append(r[sc.metric] / other[0][sc.metric])
                row[col] = median(ratios) if ref in sc.servers else None
            # The best peer of the round (neither ringhttpd nor the ceiling; client-bound runs
            # do not count), whoever it is: issue 41's targets are against it.
            ratios = []
            for r in ranked:
                peers = [o[sc.metric] for o in results if o["scenario"] == sc.name and
                         o["round"] == r["round"] and "failed" not in o and
                         o.get("saturated") is not False and o[sc.metric] and
                         o["server"] in servers_by_name and
                         servers_by_name[o["server"]].group not in ("ringhttpd", "ceiling")]
                if peers and r[sc.metric] is not None:
                    ratios.append(r[sc.metric] / max(peers))
            row["x_best_peer"] = median(ratios)
            rows[name] = row
        summary[sc.name] = rows
    return summary


METRIC_TITLE = {"cpu_rps": "requests per server CPU-second", "mbps": "MB/s",
                "rps": "requests per second"}
PANEL_TITLE = {"rate": "free-running", "saturated": "saturated (CPU quota)",
               "throughput": "throughput", "scaling": "scaling"}


def write_markdown(path, args, info, scenarios, servers, summary, started, elapsed):
    by_name = {s.name: s for s in servers}
    out = []
    out.append("# ringhttpd benchmark: latest results\n")
    out.append("Run `%s` on %s; %s, %d round%s of %d s per server and scenario, %.0f s in all.\n"
               % (" ".join(["bench/run"] + args.argv), started, "quick" if args.quick else "full",
                  args.rounds, "" if args.rounds == 1 else "s", args.duration, elapsed))
    out.append("Values are medians over rounds. *req/CPU-s* is requests divided by the server's "
               "CPU time (utime+stime of the whole process tree, from /proc/PID/stat, 10 ms "
               "ticks) over the run; the ratio columns compare the metric named in each "
               "scenario's heading with nginx's and with the ceiling's *from the same round*. "
               "MB/s counts response bytes (headers included) as wrk reads them, 1 MB = 10^6 "
               "bytes. Errors are totals over rounds. See bench/README.md for the method.\n")
    if args.quota:
        out.append("Saturated mode (`--quota %d`, tables named *-sat*): the server's processes run "
                   "in a cgroup v1 cpu cgroup with cpu.cfs_period_us %d and cpu.cfs_quota_us %d "
                   "(%d%% of one core), the same for every server; the free-running table of "
                   "the same scenario stands beside it (a scenario with a quota of its own, "
                   "named *-satPCT*, says which in its heading).\n" % (
                       args.quota, args.cfs_period, args.cfs_period * args.quota // 100,
                       args.quota))
    out.append("## Machine\n")
    for key in ("cpu", "memory", "os", "kernel", "nginx", "lighttpd", "h2o", "nginx-h3",
                "h2o-master", "wrk", "liburing", "cc", "ringhttpd"):
        out.append("- **%s**: %s" % (key, info.get(key, "?")))
    out.append("- pinning: servers on CPU %s, wrk (1 thread) on CPU %s, except the scaling "
               "scenario, where neither is pinned" % (SERVER_CPU, WRK_CPU))
    out.append("- open files limit: %d\n" % args.nofile)
    for sc in scenarios:
        rows = summary.get(sc.name, {})
        out.append("## %s\n" % sc.name)
        if sc.quota is None:
            out.append("%s. Ratios on %s.\n" % (sc.what, METRIC_TITLE[sc.metric]))
        else:
            out.append("%s, **saturated**: every server held to %s%s, so the server is the "
                       "bottleneck and req/s measures its efficiency. Ratios on %s. *server CPU* "
                       "is the share of one core the server actually got (a row marked "
                       "*client-bound* got less than 90%% of its quota: the client was the "
                       "bottleneck, so it is shown, not ranked); *throttled* is the median "
                       "share of CFS periods in which the quota ran out; *× best peer* is "
                       "against the best server of the round that is neither ringhttpd nor "
                       "the ceiling. Free-running figures: `%s`.\n" % (
                           sc.what, sc.quota.describe(),
                           ", load from two wrk processes (one on CPU %s, one beside the server "
                           "on CPU %s, whose cgroup outweighs it)" % (WRK_CPU, SERVER_CPU)
                           if sc.clients > 1 else "", METRIC_TITLE[sc.metric], sc.free_name))
        out.append("| server | req/s | req/CPU-s | MB/s | server CPU | p50 | p99 | errors | "
                   "× nginx | × ceiling | × best peer |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
        for name, row in rows.items():
            if row["good"] == 0:
                why = row["failures"][0] if row["failures"] else "not run"
                if why == "missing" and row.get("why"):
                    why = row["why"]
                out.append("| %s | %s | | | | | | | | | |" % (name, why.replace("|", "/")))
                continue
            shown = dict(row["errors"])
            expected = shown.pop("non-2xx", 0) if sc.status_ok else 0
            errs = ", ".join("%s %d" % kv for kv in shown.items()) or "0"
            if expected:
                errs += " (%d 404s, as expected)" % expected
            if row["good"] < row["runs"]:
                errs += " (%d of %d runs failed)" % (row["runs"] - row["good"], row["runs"])
            ratio = lambda v: "—" if v is None else "%.2f" % v
            cpu = "—" if row["cores"] is None else "%.0f%%" % (row["cores"] * 100)
            if sc.quota is not None:
                cpu += " (quota %d%%), throttled %.0f%%" % (sc.quota.pct, row["throttled"] * 100)
                if row["client_bound"]:
                    cpu += " (**client-bound**: below 90% of its quota in every run; not ranked)"
                elif row["unsaturated"]:
                    cpu += " (*client-bound* in %d of %d runs, not ranked in those)" % (
                        row["unsaturated"], row["good"])
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, fmt_num(row["rps"]), fmt_num(row["cpu_rps"]), fmt_num(row["mbps"], 1),
                cpu, fmt_lat(row["p50_us"]), fmt_lat(row["p99_us"]), errs,
                ratio(row["x_nginx"]), ratio(row["x_ceiling"]), ratio(row["x_best_peer"])))
        if sc.kind == "throughput":  # what a megabyte costs the server
            out.append("\nServer CPU per MB: " + ", ".join(
                "%s %.2f ms" % (name, row["cores"] * 1e3 / row["mbps"])
                for name, row in rows.items() if row["good"] and row["mbps"] and row["cores"]))
        if sc.name.startswith("ka-js32k"):  # compression: what each server put on the wire
            out.append("\nBytes per response (headers included): " + ", ".join(
                "%s %.0f" % (name, row["mbps"] * 1e6 / row["rps"])
                for name, row in rows.items() if row["good"] and row["rps"]))
        busiest = max((row["others_max"] or 0 for row in rows.values() if row["good"]),
                      default=0)
        if busiest >= BUSY_WARN:
            out.append("\n**Warning**: other processes on this machine used up to %.2f cores "
                       "during these runs; the figures are less reliable." % busiest)
        out.append("")
    out.append("## Commands\n")
    out.append("Servers (started once, each on its own loopback port; configs in bench/conf/, "
               "filled in under bench/work/):\n")
    out.append("```")
    for s in servers:
        if s.state == "missing":
            out.append("# %s: missing" % s.name)
        else:
            out.append(shlex.join(s.full_command()))
    out.append("```\n")
    out.append("Load (one line per scenario, shown against nginx's port where nginx takes part; "
               "the other servers get the same line with their own port: %s):\n" % ", ".join(
                   "%s %d%s" % (s.name, s.port, " (https %d)" % s.ports["https"]
                                if "https" in s.ports else "") for s in servers))
    out.append("```")
    for sc in scenarios:
        present = [n for n in sc.servers if n in by_name]
        if not present:
            continue
        target = next((n for n in ("nginx", "nginx-tls") if n in present), present[0])
        lines = [shlex.join(sc.command(by_name[target], args.duration, client))
                 for client in range(sc.clients)]
        for line in dict.fromkeys(lines):  # s_time's identical processes: one line
            out.append(line + ("  # %s, with the server's processes in the quota's cgroup" %
                               sc.name if sc.quota else "") +
                       ("  # %d processes at once" % lines.count(line) if lines.count(line) > 1
                        else ""))
    out.append("```\n")
    with open(path, "w") as f:
        f.write("\n".join(out))


def write_chart(path, scenarios, servers, summary):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "matplotlib missing"
    panels = [(k, [sc for sc in scenarios if sc.kind == k]) for k in ("rate", "saturated",
                                                                    "throughput", "scaling")]
    has_data = lambda sc: any(r[sc.metric] is not None for r in summary.get(sc.name, {}).values())
    panels = [(k, [sc for sc in scs if has_data(sc)]) for k, scs in panels]
    panels = [(k, scs) for k, scs in panels if scs]
    if not panels:
        return "nothing to chart"
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 4.2 * len(panels)), squeeze=False)
    # One bar series per server, except that the ceiling's two modes share one series: each
    # scenario has at most one of them.
    series = lambda name: "ceiling" if name == "ceiling-close" else name
    order = []
    for s in servers:
        if series(s.name) not in order:
            order.append(series(s.name))
    palette = plt.get_cmap("tab10").colors
    colors = {name: palette[i % len(palette)] for i, name in enumerate(order)}
    for ax, (kind, scs) in zip(axes[:, 0], panels):
        metric = scs[0].metric
        names = [n for n in order if any(series(m) == n for sc in scs for m in sc.servers)]
        width = 0.8 / max(1, len(names))
        for j, name in enumerate(names):
            xs, ys = [], []
            for i, sc in enumerate(scs):
                rows = summary.get(sc.name, {})
                row = next((r for m, r in rows.items() if series(m) == name), None)
                if row and row[metric] is not None:
                    xs.append(i + (j - (len(names) - 1) / 2) * width)
                    ys.append(row[metric])
            if ys:
                ax.bar(xs, ys, width, label=name, color=colors[name])
        ax.set_xticks(range(len(scs)))
        ax.set_xticklabels([sc.name for sc in scs])
        ax.set_xlim(-0.6, len(scs) - 0.4)
        ax.set_ylabel("%s: %s" % (PANEL_TITLE[kind], METRIC_TITLE[metric]))
        ax.yaxis.set_major_formatter(
            matplotlib.ticker.FuncFormatter(lambda v, _pos: "{:,.0f}".format(v)))
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, ncol=len(names))
    axes[0, 0].set_title("ringhttpd beside its peers and the ceiling (medians over rounds)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


# ---------------------------------------------------------------------------------------------
# main


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/run", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="one round of 3 s runs over fewer scenarios (for development)")
    p.add_argument("--rounds", type=int, help="rounds (default 3, quick 1)")
    p.add_argument("--duration", type=int, help="seconds per run (default 10, quick 3)")
    p.add_argument("--only", help="comma-separated servers or groups "
                   "(ringhttpd, nginx, lighttpd, h2o, ceiling, or a full name below)")
    p.add_argument("--scenario", help="comma-separated scenario names (see --list)")
    p.add_argument("--wait-idle", type=float, default=0, metavar="S",
                   help="before each run, wait up to S seconds for other processes to stop "
                   "using the CPUs (for shared machines; default 0: don't wait)")
    p.add_argument("--quota", type=int, default=40, metavar="PCT",
                   help="saturated mode: the small-response scenarios also run with every "
                   "server held to PCT%% of one core by a cgroup v1 CPU quota (default 40; "
                   "0 turns the saturated runs off)")
    p.add_argument("--cfs-period", type=int, default=100000, metavar="US",
                   help="the quota's cpu.cfs_period_us (default 100000, the kernel's)")
    p.add_argument("--list", action="store_true", help="list servers and scenarios, then exit")
    args = p.parse_args(argv)
    args.argv = argv
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.duration is None:
        args.duration = 3 if args.quick else 10
    if args.rounds < 1 or args.duration < 1:
        p.error("--rounds and --duration must be positive")
    if not 0 <= args.quota <= 100 or not 1000 <= args.cfs_period <= 1000000:
        p.error("--quota takes 0-100, --cfs-period 1000-1000000")
    return args


def all_scenarios(args):
    """SCENARIOS, each small-response one followed by its saturated variant (NAME-sat)."""
    quota = None
    if args.quota:
        try:
            quota = CpuQuota(args.quota, args.cfs_period)
        except OSError as e:
            sys.exit("bench: --quota %d: %s (--quota 0 runs free only)" % (args.quota, e))
    out = []
    for sc in SCENARIOS:
        out.append(sc)
        for pct in sc.sat_quotas if sc.saturate and quota else []:
            out.append(sc.saturated(quota if pct is None else
                                    CpuQuota(pct, args.cfs_period, own=pct)))
    return out


def select(args):
    servers = all_servers()
    known = all_scenarios(args)
    scenarios = [sc for sc in known if sc.quick or not args.quick]
    if args.scenario:
        wanted = args.scenario.split(",")
        unknown = [w for w in wanted if w not in {sc.name for sc in known}]
        if unknown:
            sys.exit("bench: unknown scenario %s (have: %s)" % (
                ", ".join(unknown), ", ".join(sc.name for sc in known)))
        scenarios = [sc for sc in known if sc.name in wanted]
    if args.only:
        wanted = set(args.only.split(","))
        known = {s.name for s in servers} | {s.group for s in servers}
        if wanted - known:
            sys.exit("bench: unknown server %s (have: %s)" % (
                ", ".join(sorted(wanted - known)), ", ".join(sorted(known))))
        servers = [s for s in servers if s.name in wanted or s.group in wanted]
    used = {name for sc in scenarios for name in sc.servers}
    servers = [s for s in servers if s.name in used]
    scenarios = [sc for sc in scenarios if any(s.name in sc.servers for s in servers)]
    return servers, scenarios


class Stop(Exception):
    pass


def on_signal(signum, frame):
    raise Stop("signal %d" % signum)


def main(argv):
    args = parse_args(argv)
    servers, scenarios = select(args)
    if args.list:
        for s in all_servers():
            print("server   %-19s group %-9s port %d%s" % (s.name, s.group, s.port,
                                                        "" if s.pinned else " (unpinned)"))
        for sc in all_scenarios(args):
            print("scenario %-16s %s%s%s" % (
                sc.name, sc.what, " (saturated: %s)" % sc.quota.describe() if sc.quota else "",
                "" if sc.quick else " [full only]"))
        return 0
    if not scenarios or not servers:
        sys.exit("bench: nothing selected to run")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    t0 = time.time()
    os.makedirs(WORK, exist_ok=True)
    os.makedirs(RESULTS, exist_ok=True)
    args.nofile = raise_nofile()
    print("bench: %s run, %d round(s) × %d s, scenarios: %s" % (
        "quick" if args.quick else "full", args.rounds, args.duration,
        ", ".join(sc.name for sc in scenarios)), flush=True)

    build_log = os.path.join(WORK, "build.log")
    print("bench: building ringhttpd and the ceiling server (log: %s)" %
          os.path.relpath(build_log, ROOT), flush=True)
    built = build(build_log, any(s.group == "ringhttpd" for s in servers))
    if not built["ringhttpd"] and any(s.group == "ringhttpd" for s in servers):
        print("bench: ringhttpd did not build; its runs are reported missing", flush=True)
    if not built["h3load"]:
        print("bench: the HTTP/3 load client did not build (Go 1.26+ needed): %s; the h3 "
              "scenarios fail" % log_tail(build_log), flush=True)
    if not built["ceiling"]:
        print("bench: the ceiling server did not build: %s" % log_tail(build_log), flush=True)
    print("bench: writing the docroot in %s" % os.path.relpath(DOCROOT, ROOT), flush=True)
    write_docroot()
    if any(isinstance(s, Tls) for s in servers):
        make_certificate()

    results = []
    exit_code = 0
    try:
        for s in servers:
            why = s.prepare()
            if why:
                s.why_missing = why
                print("bench: %-19s %s" % (s.name, why), flush=True)
                continue
            if start_server(s):
                print("bench: %-19s started, pid %d, port %d%s" % (
                    s.name, s.proc.pid, s.port, "" if s.pinned else " (unpinned)"), flush=True)
                if isinstance(s, Tls):
                    version = check_tls(s.ports["https"])
                    print("bench: %-19s TLS port %d negotiates %s%s" % (
                        s.name, s.ports["https"], version,
                        "" if version == "TLSv1.3" else " (NOT TLS 1.3)"), flush=True)
                # one short warm-up so first-round numbers don't pay for cold caches
                warm = [sc for sc in scenarios if s.name in sc.servers][0]
                subprocess.run(warm.command(s, 1), capture_output=True,
                               timeout=60)
            else:
                print("bench: %-19s did not start: %s" % (s.name, s.state), flush=True)
        by_name = {s.name: s for s in servers}
        for rnd in range(1, args.rounds + 1):
            for sc in scenarios:
                names = [n for n in sc.servers if n in by_name]
                k = (rnd - 1) % len(names)  # rotate who goes first, round by round
                for name in names[k:] + names[:k]:
                    if args.wait_idle:
                        waited = wait_for_idle(args.wait_idle)
                        if waited >= 1:
                            print("bench: waited %.0f s for the machine to go idle" % waited,
                                  flush=True)
                    res = run_wrk(by_name[name], sc, args.duration)
                    res["round"] = rnd
                    results.append(res)
                    print(progress_line(rnd, args.rounds, res), flush=True)
    except Stop as e:
        print("\nbench: stopped by %s; stopping servers" % e, flush=True)
        exit_code = 130
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not skip the cleanup
        for s in servers:
            stop_server(s)

    if exit_code == 130:
        print("bench: interrupted; bench/results/ left as it was", flush=True)
        return exit_code
    summary = summarize(results, scenarios, {s.name: s for s in servers})
    info = machine_info()
    md = os.path.join(RESULTS, "latest.md")
    write_markdown(md, args, info, scenarios, servers, summary, started, time.time() - t0)
    with open(os.path.join(RESULTS, "latest.json"), "w") as f:
        json.dump({"started": started, "argv": args.argv, "machine": info, "runs": results,
                   "summary": summary}, f, indent=1)
    chart_err = write_chart(os.path.join(RESULTS, "latest.png"), scenarios, servers, summary)
    print("bench: wrote %s%s" % (os.path.relpath(md, ROOT), "" if chart_err else
                                 " and bench/results/latest.png"), flush=True)
    if chart_err:
        print("bench: no chart: %s" % chart_err, flush=True)

    bad = [(sc, name, row) for sc, rows in summary.items() for name, row in rows.items()
           if row["unexpected"]]
    crashed = [(r["scenario"], r["server"], r["failed"]) for r in results
               if "failed" in r and r["failed"] != "missing"]
    for sc, name, row in bad:
        print("bench: ERROR %s returned unexpected errors in %s: %s" % (
            name, sc, ", ".join("%s %d" % kv for kv in row["errors"].items())), flush=True)
    for sc, name, why in crashed:
        print("bench: ERROR %s failed in %s: %s" % (name, sc, why), flush=True)
    missing = sorted({r["server"] for r in results if r.get("failed") == "missing"})
    if missing:
        print("bench: not measured (missing): %s" % ", ".join(missing), flush=True)
    if exit_code == 0 and (bad or crashed):
        exit_code = 1
    return exit_code


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Stop as e:
        print("\nbench: stopped by %s" % e, file=sys.stderr)
        sys.exit(130)
