"""The page-load bench (issue 42): headless Chromium loads bench/pageload/fixture.py's page from
ringhttpd and the HTTP/3 peers through a delay-and-loss path, and reports DOMContentLoaded,
load and "last script done" (medians and p90) per server, protocol and path.

How a load runs, every part real:
- everything lives in a network namespace of its own (`ip netns add`), on its loopback (MTU
  1500, as a real path; 127.0.0.1 only), so the ports never meet another process's;
- iptables sends the servers' TCP and UDP packets (both directions, at INPUT: shaper.c says
  why not OUTPUT) to NFQUEUE 0, where
  build/bench/shaper holds each for RTT/2 and drops LOSS% of them (seeded by the load's number,
  so every server draws the same sequence); the shaper is started afresh for each load and its
  counters are kept with the load's figures;
- Chromium starts with a fresh profile directory for each load, `--origin-to-force-quic-on`
  for HTTP/3 (else `--disable-quic`), and is driven over the DevTools protocol (websocket):
  Page.navigate, wait for the load event, then one Runtime.evaluate that reads the Navigation
  Timing entry, every Resource Timing entry and the scripts' own "ran at" marks;
- a load counts only if all 56 subresources arrived and every one (and the page) came over the
  protocol the cell is about (nextHopProtocol "h2" or "h3"); others are reported as bad.

Run by bench/pageload/run (which checks root, Chromium and builds the shaper).
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
SHARED_PEERS = os.path.join(os.path.dirname(TOP), "..", "shared", "peers", "h3peers")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
NS = "ringhttpd-pageload-%d" % os.getpid()
QUEUE = 0
RESOURCES = 56

PROFILES = {  # name: (RTT ms, loss % each way)
    "rtt0": (0, 0), "rtt0-loss1": (0, 1),
    "rtt40": (40, 0), "rtt40-loss1": (40, 1),
    "rtt100": (100, 0), "rtt100-loss1": (100, 1),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def ns(cmd):
    return cmd  # main() re-ran us inside the namespace: every child is there too


def sh(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    return r


class Namespace:
    """The shaped loopback of the namespace we run in (made by enter_namespace)."""

    def __init__(self, ports):
        self.ports = ports

    def __enter__(self):
        sh(ns(["ip", "link", "set", "lo", "up", "mtu", "1500"]))
        plist = ",".join(str(p) for p in self.ports)
        for proto in ("tcp", "udp"):
            sh(ns(["iptables", "-A", "INPUT", "-i", "lo", "-p", proto, "-m", "multiport",
                   "--ports", plist, "-j", "NFQUEUE", "--queue-num", str(QUEUE)]))
        return self

    def __exit__(self, *exc):
        sh(["iptables", "-F", "INPUT"], check=False)


def enter_namespace():
    """Runs this program again inside a new network namespace and removes it afterwards."""
    if os.environ.get("PAGELOAD_NS"):
        return
    sh(["ip", "netns", "add", NS])
    try:
        env = dict(os.environ, PAGELOAD_NS=NS)
        child = subprocess.Popen(["ip", "netns", "exec", NS, sys.executable] + sys.argv, env=env)
        # SIGTERM/SIGINT: the inner run stops its servers, shaper and Chromium, then we go
        signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
        signal.signal(signal.SIGINT, lambda *_: child.send_signal(signal.SIGTERM))
        rc = child.wait()
        for pid in sh(["ip", "netns", "pids", NS], check=False).stdout.split():
            os.kill(int(pid), signal.SIGKILL)  # ours: nothing else runs in this namespace
    finally:
        sh(["ip", "netns", "del", NS], check=False)
    sys.exit(rc)


class Proc:
    """A process we started (in the namespace), stopped by its PID (its group: Chromium's
    helpers and nginx's worker are its children, started in the session we gave it)."""

    def __init__(self, cmd, out=None, env=None):
        self.cmd = cmd
        self.p = subprocess.Popen(ns(cmd), stdout=out or subprocess.DEVNULL,
                                  stderr=subprocess.STDOUT if out else subprocess.DEVNULL,
                                  start_new_session=True, env=env)

    def stop(self, sig=signal.SIGTERM, wait=10):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(wait)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()


def group_cpu_ms(pgid):
    """CPU time (user + system, ms) of the processes in process group pgid that still run,
    their reaped children's included: a server's (nginx's and h2o's workers are in their
    master's group) or Chromium's (its helpers), read from /proc."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            f = open("/proc/%s/stat" % d).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(f[2]) == pgid:  # fields after the name: state, ppid, pgrp, ...
            total += sum(int(x) for x in f[11:15])  # utime stime cutime cstime
    return total * 1000.0 / tick


def wait_port(port, udp=False, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        r = sh(ns(["ss", "-Hln" + ("u" if udp else "t"), "sport = :%d" % port]), check=False)
        if r.stdout.strip():
            return True
        time.sleep(0.1)
    return False


# ---- servers ----------------------------------------------------------------------------

class Server:
    def __init__(self, name, port, proto, argv, env=None, prep=None):
        self.name, self.port, self.proto, self.argv, self.env, self.prep = \
            name, port, proto, argv, env, prep
        self.proc = None

    def start(self, workdir):
        if self.prep:
            self.prep()
        logf = open(os.path.join(workdir, self.name + ".log"), "w")
        self.proc = Proc(self.argv, out=logf, env=self.env)
        if not (wait_port(self.port) and wait_port(self.port, udp=True)):
            raise RuntimeError("%s did not start (see %s.log)" % (self.name, self.name))

    def stop(self):
        if self.proc:
            self.proc.stop()


def peer_servers(peers, work, root, cert, key, only):
    """nginx, h2o and caddy as peers/h3peers builds and configures them (one worker, TLS 1.3,
    the same certificate), with our fixture as the root and the real media types (the peers'
    own bench config maps everything to octet-stream, which a browser will not run)."""
    out = []
    run = os.path.join(work, "run")
    nginx = os.path.join(peers, "nginx", "sbin", "nginx")
    if "nginx" in only and os.access(nginx, os.X_OK):
        os.makedirs(os.path.join(run, "nginx"), exist_ok=True)
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""worker_processes 1; daemon off; master_process on;
pid %(run)s/nginx/nginx.pid; error_log %(run)s/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off; include %(peers)s/nginx/conf/mime.types; default_type application/octet-stream;
  sendfile on; tcp_nopush on; keepalive_requests 100000000;
  client_body_temp_path %(run)s/nginx/cb; proxy_temp_path %(run)s/nginx/p;
  fastcgi_temp_path %(run)s/nginx/f; uwsgi_temp_path %(run)s/nginx/u; scgi_temp_path %(run)s/nginx/s;
  ssl_protocols TLSv1.3; ssl_certificate %(cert)s; ssl_certificate_key %(key)s;
  server {
    listen 127.0.0.1:28443 ssl; listen 127.0.0.1:28443 quic reuseport;
    http2 on; http3 on; quic_gso on; server_name localhost; root %(root)s;
  }
}
""" % dict(run=run, peers=peers, cert=cert, key=key, root=root))
        out.append(Server("nginx", 28443, "h3", [nginx, "-c", conf, "-e", run + "/nginx/error.log"]))
    h2o = os.path.join(peers, "h2o", "bin", "h2o")
    if "h2o" in only and os.access(h2o, os.X_OK):
        d = os.path.join(run, "h2o")
        conf = os.path.join(work, "h2o.conf")

        def prep(d=d):
            os.makedirs(d, exist_ok=True)
            shutil.chown(d, "nobody")  # h2o writes its pid file there after dropping to nobody
        with open(conf, "w") as f:
            f.write("""num-threads: 1
pid-file: %(d)s/h2o.pid
error-log: %(d)s/error.log
listen: &listen_ssl
  host: 127.0.0.1
  port: 28444
  ssl:
    certificate-file: %(cert)s
    key-file: %(key)s
    minimum-version: TLSv1.3
    ocsp-update-interval: 0
    neverbleed: OFF
listen:
  <<: *listen_ssl
  type: quic
http2-graceful-shutdown-timeout: 1
http3-graceful-shutdown-timeout: 1
hosts:
  default:
    paths:
      /:
        file.dir: %(root)s
""" % dict(d=d, cert=cert, key=key, root=root))
        out.append(Server("h2o", 28444, "h3", [h2o, "-c", conf], prep=prep))
    caddy = os.path.join(peers, "bin", "caddy")
    if "caddy" in only and os.access(caddy, os.X_OK):
        d = os.path.join(run, "caddy")
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(work, "Caddyfile")
        with open(conf, "w") as f:
            f.write("""{
	admin off
	auto_https off
	persist_config off
	servers {
		protocols h1 h2 h3
	}
}
https://localhost:28445 {
	bind 127.0.0.1
	tls %(cert)s %(key)s {
		protocols tls1.3
	}
	root * %(root)s
	file_server
}
""" % dict(cert=cert, key=key, root=root))
        env = dict(os.environ, GOMAXPROCS="1", XDG_DATA_HOME=d + "/data", XDG_CONFIG_HOME=d + "/config")
        out.append(Server("caddy", 28445, "h3", [caddy, "run", "--config", conf, "--adapter", "caddyfile"],
                          env=env))
    return out


def ringhttpd_server(binary, name, port, quic_cc, tcp_cc, engine, root, cert, key):
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port + 100), "--tls-port", str(port),
            "--tls-cert", cert, "--tls-key", key, "--threads", "1", "--compress", "off",
            "--access-log", "/dev/null", "--engine", engine, "--quic-cc", quic_cc,
            "--tcp-cc", tcp_cc, "-v", root]
    return Server(name, port, "h3", argv)


# ---- Chromium over the DevTools protocol --------------------------------------------------

class Cdp:
    def __init__(self, url):
        self.ws = websocket.create_connection(url, timeout=120, suppress_origin=True)
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == mid:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, timeout):
        end = time.time() + timeout
        while True:
            for i, m in enumerate(self.events):
                if m.get("method") == method:
                    return self.events.pop(i)
            left = end - time.time()
            if left <= 0:
                return None
            self.ws.settimeout(left)
            try:
                self.events.append(json.loads(self.ws.recv()))
            except websocket.WebSocketTimeoutException:
                return None

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass


MEASURE_JS = """JSON.stringify((() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource').map(r => ({
    name: r.name, proto: r.nextHopProtocol, end: r.responseEnd, type: r.initiatorType,
    size: r.encodedBodySize, start: r.startTime, sent: r.requestStart, first: r.responseStart}));
  return {dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd, proto: nav.nextHopProtocol,
          ran: window.__ran || {}, res: res};
})())"""


def make_cert(work):
    """A self-signed ECDSA P-256 pair for localhost and 127.0.0.1 (the peers' kind): paths."""
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    sh(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
    os.chmod(key, 0o644)  # h2o reads it after dropping to nobody
    return cert, key


def spki_hash(cert):
    """base64(sha256(SubjectPublicKeyInfo)): what --ignore-certificate-errors-spki-list takes
    (Chromium's QUIC does not honour --ignore-certificate-errors alone)."""
    pub = sh(["openssl", "x509", "-in", cert, "-noout", "-pubkey"]).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub.encode(),
                         capture_output=True, check=True).stdout
    import base64
    import hashlib
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


SEED_SERVER_PROPERTIES = True  # --first-visit: False
# The network anonymization key of top-frame site https://localhost, serialized as Chromium
# writes it into "Network Persistent State" (a pickled site, not transient, no nonce).
CHROMIUM_NAK_LOCALHOST = ["GAAAABEAAABodHRwczovL2xvY2FsaG9zdAAAAA==", False, 0]


def chromium_load(url, proto, port, timeout, spki):
    """One load with a fresh profile: the figures, or raises with why."""
    prof = tempfile.mkdtemp(prefix="pageload-profile-")
    args = [CHROMIUM, "--headless=new", "--no-sandbox", "--user-data-dir=" + prof,
            "--remote-debugging-port=0", "--remote-allow-origins=*", "--ignore-certificate-errors",
            "--ignore-certificate-errors-spki-list=" + spki,
            "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-extensions",
            "--disable-default-apps", "--disable-features=MediaRouter,OptimizationHints",
            "--host-resolver-rules=MAP localhost 127.0.0.1", "--window-size=1280,900"]
    if proto == "h3":
        args += ["--enable-quic", "--origin-to-force-quic-on=localhost:%d" % port]
    else:
        args += ["--disable-quic"]
    if SEED_SERVER_PROPERTIES:
        # What Chromium keeps of a server it has been to (a returning visitor): that it speaks
        # HTTP/2 and, for h3, that it offers h3 by Alt-Svc, keyed by the top frame's site as
        # Chromium 156 writes it itself after a visit. Without it the ResourceScheduler holds
        # a page's delayable requests (images) to 10 in flight for as long as the page loads on
        # a server it does not know to take priorities, and --origin-to-force-quic-on never
        # teaches it (nothing is recorded after a forced QUIC load), where over HTTP/2 the
        # ALPN does after the first response (issue 42: h3 requests went out in a trickle).
        os.makedirs(os.path.join(prof, "Default"), exist_ok=True)
        srv = {"anonymization": CHROMIUM_NAK_LOCALHOST, "server": "https://localhost:%d" % port,
               "supports_spdy": True}
        if proto == "h3":
            srv["alternative_service"] = [{"advertised_alpns": ["h3"], "expiration": "99999999999999999",
                                           "port": port, "protocol_str": "quic"}]
        with open(os.path.join(prof, "Default", "Network Persistent State"), "w") as f:
            json.dump({"net": {"http_server_properties": {"servers": [srv], "version": 5}}}, f)
    errf = open(os.path.join(prof, "stderr.log"), "w+")
    proc = Proc(args + ["about:blank"], out=errf)
    cdp = None
    try:
        ws_url = None
        end = time.time() + 30
        while time.time() < end and not ws_url:
            time.sleep(0.05)
            p = os.path.join(prof, "DevToolsActivePort")
            if os.path.exists(p):
                lines = open(p).read().split("\n")
                if len(lines) >= 2 and lines[1]:
                    dport = int(lines[0])
                    ws_url = True
        if not ws_url:
            raise RuntimeError("Chromium did not start")
        # the page target (about:blank); /json/list over loopback in the namespace
        out = urllib.request.urlopen("http://127.0.0.1:%d/json/list" % dport, timeout=10).read()
        pages = [t for t in json.loads(out) if t.get("type") == "page"]
        cdp = Cdp(pages[0]["webSocketDebuggerUrl"])
        cdp.call("Page.enable")
        t0 = time.time()
        cdp.call("Page.navigate", url=url)
        if not cdp.wait_event("Page.loadEventFired", timeout):
            raise RuntimeError("no load event in %d s" % timeout)
        for _ in range(50):  # loadEventEnd is set once the handlers have run
            r = json.loads(cdp.call("Runtime.evaluate", expression=MEASURE_JS,
                                    returnByValue=True)["result"]["value"])
            if r["load"] > 0:
                break
            time.sleep(0.02)
        r["wall"] = (time.time() - t0) * 1e3
        r["browser_cpu"] = group_cpu_ms(proc.p.pid)  # its start-up included
        return r
    finally:
        if cdp:
            try:
                cdp.call("Browser.close")
            except Exception:
                pass
            cdp.close()
        proc.stop(wait=5)
        shutil.rmtree(prof, ignore_errors=True)


def check(r, proto):
    """Why a load does not count, or None."""
    if r["proto"] != proto:
        return "page over %s" % r["proto"]
    # Chromium fetches /favicon.ico on its own, at a time of its own: not a part of the page
    r["res"] = [x for x in r["res"] if not x["name"].endswith("/favicon.ico")]
    names = {x["name"] for x in r["res"]}
    if len(names) != RESOURCES:  # a file fetched twice (a preload not matched) is still one
        odd = sorted(n for n in names if not re.search(r"/a/[a-z0-9]+\.(css|js|woff2|png)$", n))
        return "%d resources, not %d%s" % (len(names), RESOURCES, " (%s)" % ", ".join(odd) if odd else "")
    wrong = [x["name"] for x in r["res"] if x["proto"] != proto]
    if wrong:
        return "%d resources not over %s (%s: %s)" % (len(wrong), proto, wrong[0],
                                                       [x["proto"] for x in r["res"]][0])
    if len(r["ran"]) != 10:
        return "%d scripts ran, not 10" % len(r["ran"])
    return None


def shaper_start(shaper, rtt, loss, seed):
    out = tempfile.TemporaryFile("w+")
    p = subprocess.Popen(ns([shaper, "--queue", str(QUEUE), "--delay-ms", str(rtt / 2.0),
                             "--loss", str(loss), "--seed", str(seed)]),
                         stdout=subprocess.PIPE, stderr=out, text=True, start_new_session=True)
    line = p.stdout.readline()
    if not line.startswith("ready"):
        p.kill()
        raise RuntimeError("shaper did not start")
    return p, out


def shaper_stop(p, out):
    p.send_signal(signal.SIGTERM)
    p.wait(10)
    out.seek(0)
    m = re.search(r"seen (\d+) dropped (\d+) overflow (\d+) released (\d+) held_max (\d+) "
                  r"late_avg_us ([\d.]+) late_max_us ([\d.]+)", out.read())
    return {k: float(v) for k, v in zip(
        ("seen", "dropped", "overflow", "released", "held_max", "late_avg_us", "late_max_us"),
        m.groups())} if m else {}


def pct(v, q):
    v = sorted(v)
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ringhttpd", required=True)
    ap.add_argument("--shaper", required=True)
    ap.add_argument("--peers", default=os.environ.get("RINGHTTPD_PEERS", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "work", "peers")))
    ap.add_argument("--loads", type=int, default=7)
    ap.add_argument("--profiles", default=",".join(PROFILES))
    ap.add_argument("--cells", default="ringhttpd-h2,ringhttpd-h2-reno,ringhttpd-h3,ringhttpd-h3-epoll,"
                    "h2o,nginx,caddy",
                    help="ringhttpd-h2[-CC], ringhttpd-h3[-CC][-epoll], h2o, nginx, caddy")
    ap.add_argument("--quic-cc", default="cubic", help="ringhttpd-h3's controller (the default one)")
    ap.add_argument("--interleave", action="store_true",
                    help="load i of every cell before load i+1 of any (A B A B): a slow minute of "
                         "a shared machine then hits every cell alike")
    ap.add_argument("--timeout", type=int, default=90)
    ap.add_argument("--first-visit", action="store_true",
                    help="a browser that knows nothing of the server (no HTTP/2 or Alt-Svc record): "
                         "over forced QUIC Chromium then holds images to 10 requests in flight")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "results", "pageload"))
    ap.add_argument("--work", default="/tmp/ringhttpd-pageload")
    a = ap.parse_args()
    global SEED_SERVER_PROPERTIES
    SEED_SERVER_PROPERTIES = not a.first_visit
    enter_namespace()

    def stop(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)

    profiles = a.profiles.split(",")
    cells = a.cells.split(",")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    os.chmod(a.work, 0o755)
    root = os.path.join(a.work, "www")
    sys.path.insert(0, HERE)
    import fixture
    fixture.build(root)
    for dp, dn, fn in os.walk(root):
        os.chmod(dp, 0o755)
        for f in fn:
            os.chmod(os.path.join(dp, f), 0o644)
    cert, key = make_cert(a.work)
    spki = spki_hash(cert)

    # One ringhttpd per (quic cc, tcp cc, engine) the cells name; ports from 28450.
    servers, cell_server = [], {}
    rh = {}
    for c in cells:
        m = re.fullmatch(r"ringhttpd-(h2|h3)(?:-(bbr2|bbr|cubic|reno))?(-epoll)?", c)
        if m:
            proto, cc, epoll = m.group(1), m.group(2), bool(m.group(3))
            qcc = cc or a.quic_cc
            # h2's default: BBR, the host's, as the issue measured it (TCP has no bbr2 here)
            tcc = {"bbr2": "bbr", None: "bbr"}.get(cc, cc)
            if proto == "h2":
                qcc = a.quic_cc
            key_ = (qcc, tcc, epoll)
            if key_ not in rh:
                port = 28450 + len(rh)
                rh[key_] = ringhttpd_server(a.ringhttpd, "ringhttpd-%s-%s-%s" % (qcc, tcc, "epoll" if epoll else "uring"),
                                            port, qcc, tcc, "epoll" if epoll else "uring", root, cert, key)
                servers.append(rh[key_])
            cell_server[c] = (rh[key_], proto)
    peers = peer_servers(a.peers, a.work, root, cert, key, [c for c in cells if c in ("h2o", "nginx", "caddy")])
    for s in peers:
        servers.append(s)
        cell_server[s.name] = (s, "h3")
    missing = [c for c in cells if c not in cell_server]
    if missing:
        log("pageload: not built, skipped: %s (peers from %s)" % (", ".join(missing), a.peers))
        cells = [c for c in cells if c in cell_server]

    results = []
    os.makedirs(a.out, exist_ok=True)
    raw = open(os.path.join(a.out, "raw.jsonl"), "w")
    with Namespace([s.port for s in servers]):
        try:
            for s in servers:
                s.start(a.work)
            for prof in profiles:
                rtt, loss = PROFILES[prof]
                order = ([(i, c) for i in range(a.loads) for c in cells] if a.interleave
                         else [(i, c) for c in cells for i in range(a.loads)])
                for i, c in order:
                    srv, proto = cell_server[c]
                    sp, so = shaper_start(a.shaper, rtt, loss, i + 1)
                    err, r = None, None
                    cpu0 = group_cpu_ms(srv.proc.p.pid)
                    try:
                        r = chromium_load("https://localhost:%d/" % srv.port, proto, srv.port, a.timeout,
                                          spki)
                        err = check(r, proto)
                    except Exception as e:
                        err = str(e)
                    st = shaper_stop(sp, so)
                    server_cpu = group_cpu_ms(srv.proc.p.pid) - cpu0
                    row = {"profile": prof, "cell": c, "load": i, "error": err, "shaper": st}
                    if r:
                        seen = [x["name"] for x in r["res"]]
                        row["fetched_twice"] = sorted({n for n in seen if seen.count(n) > 1})
                        # every resource's request start, first byte, end and when its request
                        # went out on the connection (ms from the navigation), in the order they
                        # ended: which ones finished late, and which the browser held back
                        row["res"] = [[x["name"].rsplit("/", 1)[-1], x["type"], round(x.get("start") or 0),
                                       round(x.get("first") or 0), round(x["end"]), round(x.get("sent") or 0)]
                                      for x in sorted(r["res"], key=lambda x: x["end"])]
                    if r:
                        scripts = [x["end"] for x in r["res"] if x["type"] == "script"]
                        row.update(dcl=r["dcl"], load_ms=r["load"],
                                   scripts=max(r["ran"].values()) if r["ran"] else None,
                                   script_end=max(scripts) if scripts else None, wall=r["wall"],
                                   server_cpu=server_cpu, browser_cpu=r["browser_cpu"])
                    results.append(row)
                    raw.write(json.dumps(row) + "\n")
                    raw.flush()
                    log("%-12s %-22s #%d %s" % (prof, c, i, err or "dcl %.0f load %.0f scripts %.0f (shaper: %d pkts, %d dropped, late avg %.0f us)" % (
                        row["dcl"], row["load_ms"], row["scripts"], st.get("seen", 0), st.get("dropped", 0), st.get("late_avg_us", 0))))
        finally:
            for s in servers:
                s.stop()
    report(results, profiles, cells, a, os.path.join(a.out, "latest.md"))


def report(results, profiles, cells, a, path):
    lines = ["# Page-load bench (bench/pageload)", "",
             "Command: `%s`" % " ".join(sys.argv), "",
             "Medians (p90) in ms over good loads; last script = the latest of the scripts' own "
             "`performance.now()` marks. Bad: loads that failed the protocol/resource check. "
             "CPU: ms of CPU time a load took, the server's (from the navigation to the load "
             "event and its measuring) and the browser's (all its processes, start-up to the "
             "load event).", ""]
    for prof in profiles:
        lines += ["## %s (RTT %d ms, loss %g%% each way)" % ((prof,) + PROFILES[prof]), "",
                  "| cell | good/bad | last script | DOMContentLoaded | load | server CPU | browser CPU |",
                  "|---|---|---|---|---|---|---|"]
        for c in cells:
            rows = [r for r in results if r["profile"] == prof and r["cell"] == c]
            good = [r for r in rows if not r["error"]]
            def f(k):
                v = [r[k] for r in good if r.get(k) is not None]
                return "%.0f (%.0f)" % (statistics.median(v), pct(v, 0.9)) if v else "-"
            lines.append("| %s | %d/%d | %s | %s | %s | %s | %s |" % (
                c, len(good), len(rows) - len(good), f("scripts"), f("dcl"), f("load_ms"),
                f("server_cpu"), f("browser_cpu")))
        sh_rows = [r["shaper"] for r in results if r["profile"] == prof and r["shaper"]]
        if sh_rows:
            lines += ["", "Shaper: %d packets a load (median), drop rate %.2f%%, release late by "
                      "%.0f us on average (max %.1f ms over the profile)" % (
                          statistics.median(s["seen"] for s in sh_rows),
                          100.0 * sum(s["dropped"] for s in sh_rows) / max(1, sum(s["seen"] for s in sh_rows)),
                          statistics.mean(s["late_avg_us"] for s in sh_rows),
                          max(s["late_max_us"] for s in sh_rows) / 1e3)]
        errs = [r for r in results if r["profile"] == prof and r["error"]]
        for r in errs[:5]:
            lines.append("- bad: %s #%d: %s" % (r["cell"], r["load"], r["error"]))
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
