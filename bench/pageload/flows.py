"""Bulk flows for choosing HTTP/3's congestion controller (issue 42): 64 MiB downloads over
clean and lossy paths, and fairness against a competing TCP CUBIC flow at a TBF bottleneck.

The path is pageload.py's (a network namespace of our own, its loopback at MTU 1500, the
NFQUEUE shaper holding every packet RTT/2 and dropping LOSS%), and for the fairness runs a
bottleneck before it: the loopback's ingress is redirected to an ifb device whose root qdisc is
TBF (RATE, a queue of one bandwidth-delay product). The bottleneck is on the receive side on
purpose: at a sender's own qdisc, TCP Small Queues would keep TCP's share of the queue at about
1 ms of its pacing rate while UDP fills it, and QUIC would look fairer to TCP than it is.

Clients: h3load (quic-go; peers/h3peers builds it, or build/h3load) for HTTP/3, curl for
HTTP/2; each fetches one 64 MiB file and stops at the run's time limit, and its throughput is
the body bytes it got over the time it ran. A fairness run starts both at once on the same
ringhttpd (--quic-cc under test, --tcp-cc cubic) and reports each flow's share and Jain's index.

Run by bench/pageload/run --flows (root; it builds the shaper).
"""

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pageload  # noqa: E402
from pageload import PROFILES, Namespace, sh, shaper_start, shaper_stop  # noqa: E402

BIG = 64 << 20


def h3_fetch(h3load, url, secs):
    p = subprocess.Popen([h3load, "-n1", "-c1", "-m1", "-D%g" % secs, url], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    return p


def h3_result(p, keep=False):
    out = p.communicate()[0]
    took = re.search(r"finished in ([\d.]+)s", out)
    got = re.search(r"traffic: [\d.]+MB \((\d+)\)", out)
    if not took or not got:
        return None, out.strip()[-300:]
    return (int(got.group(1)), float(took.group(1))), (out.strip()[-400:] if keep else None)


def h2_fetch(url, secs):
    return subprocess.Popen(["curl", "-sk", "--http2", "-o", "/dev/null", "--max-time", str(secs),
                             "-w", "%{size_download} %{time_total} %{http_version}", url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def h2_result(p):
    out = p.communicate()[0].split()
    if len(out) < 3 or out[2] != "2":
        return None, " ".join(out)
    return (int(out[0]), float(out[1])), None


def mbit(r):
    return r[0] * 8 / r[1] / 1e6


def bottleneck(rate_mbit, rtt_ms, bdps=1.0):
    """TBF at the loopback's ingress (through ifb0), a queue of bdps bandwidth-delay products
    (at least 64 KB)."""
    bdp = max(64 << 10, int(rate_mbit * 1e6 / 8 * rtt_ms / 1e3 * bdps))
    sh(["ip", "link", "add", "ifb0", "type", "ifb"])
    sh(["ip", "link", "set", "ifb0", "up"])
    sh(["tc", "qdisc", "add", "dev", "ifb0", "root", "tbf", "rate", "%dmbit" % rate_mbit,
        "burst", "32k", "limit", str(bdp)])
    sh(["tc", "qdisc", "add", "dev", "lo", "handle", "ffff:", "ingress"])
    sh(["tc", "filter", "add", "dev", "lo", "parent", "ffff:", "protocol", "all", "u32", "match", "u32", "0", "0", "action", "mirred",
        "egress", "redirect", "dev", "ifb0"])
    return bdp


def echo_rtts(port, n=30):
    """Round trips of one byte over TCP to an echo server of ours (a ping the shaper holds as
    it holds the servers' packets: same hook, same port list): sorted, in ms."""
    import socket
    import threading
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(1)

    def serve():
        c, _ = srv.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            d = c.recv(64)
            if not d:
                break
            c.sendall(d)
        c.close()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        s.sendall(b"x")
        s.recv(64)
        out.append((time.monotonic() - t0) * 1e3)
        time.sleep(0.01)
    s.close()
    srv.close()
    return sorted(out)


def calibrate(a, tcp_srv, lines):
    """What the shaper costs and whether its delay is the one asked for."""
    lines += ["## The shaper checked", "",
              "| check | asked | measured (median, min-max) | shaper: packets, late by (avg/max) |",
              "|---|---|---|---|"]
    for rtt in (0, 40, 100):
        sp, so = shaper_start(a.shaper, rtt, 0, 1)
        v = echo_rtts(28479)
        st = shaper_stop(sp, so)
        lines.append("| TCP echo round trip, 30 x 1 byte | %d ms | %.2f ms (%.2f-%.2f) | %d, %.0f us / %.2f ms |" % (
            rtt, statistics.median(v), v[0], v[-1], st.get("seen", 0), st.get("late_avg_us", 0),
            st.get("late_max_us", 0) / 1e3))
    url = "https://127.0.0.1:%d/64m.bin" % tcp_srv.port
    for shaped in (False, True):
        got = []
        for r in range(a.rounds):
            if shaped:
                sp, so = shaper_start(a.shaper, 0, 0, 1)
            else:
                sh(["iptables", "-I", "INPUT", "-i", "lo", "-j", "ACCEPT"])  # ahead of NFQUEUE
            res, err = h2_result(h2_fetch(url, 60))
            if shaped:
                shaper_stop(sp, so)
            else:
                sh(["iptables", "-D", "INPUT", "-i", "lo", "-j", "ACCEPT"])
            if res:
                got.append(mbit(res))
        lines.append("| 64 MiB over HTTP/2 (TCP BBR), RTT 0, %s | - | %s Mbit/s | |" % (
            "through the shaper" if shaped else "no shaper (NFQUEUE bypassed)",
            "%.0f (%.0f-%.0f)" % (statistics.median(got), min(got), max(got)) if got else "failed"))
    lines.append("")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ringhttpd", required=True)
    ap.add_argument("--shaper", required=True)
    ap.add_argument("--h3load", default=None)
    ap.add_argument("--ccs", default="bbr,bbr2,cubic,reno")
    ap.add_argument("--profiles", default="rtt40,rtt100-loss1")
    ap.add_argument("--secs", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=int, default=30, help="bottleneck Mbit/s (fairness)")
    ap.add_argument("--fair-rtt", type=int, default=40)
    ap.add_argument("--queue-bdp", type=float, default=1.0, help="the bottleneck's queue, in BDPs")
    ap.add_argument("--no-fairness", action="store_true")
    ap.add_argument("--no-downloads", action="store_true")
    ap.add_argument("--no-calibrate", action="store_true")
    ap.add_argument("--fair-ccs", default=None, help="the controllers of the fairness runs (--ccs)")
    ap.add_argument("--out", default=os.path.join(pageload.HERE, "..", "results", "pageload"))
    ap.add_argument("--work", default="/tmp/ringhttpd-flows")
    a = ap.parse_args()
    pageload.enter_namespace()

    def stop(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)

    h3load = a.h3load
    for cand in (h3load, os.path.join(os.environ.get("RINGHTTPD_PEERS", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "work", "peers")), "bin", "h3load"),
                 os.path.join(pageload.TOP, "build", "h3load")):
        if cand and os.access(cand, os.X_OK):
            h3load = cand
            break
    else:
        print("flows: skipped: no h3load (make build/h3load, or the peers' bin/h3load)")
        return
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(os.path.join(a.work, "www"))
    with open(os.path.join(a.work, "www", "64m.bin"), "wb") as f:
        f.write(os.urandom(BIG))
    cert, key = pageload.make_cert(a.work)
    ccs = a.ccs.split(",")
    servers = {}
    for i, cc in enumerate(ccs):
        tcc = {"bbr2": "bbr"}.get(cc, cc)
        servers[cc] = pageload.ringhttpd_server(a.ringhttpd, "ringhttpd-" + cc, 28460 + i, cc, tcc,
                                                "uring", os.path.join(a.work, "www"), cert, key)
    # the TCP CUBIC competitor (and the h2 yardsticks): their own ringhttpd, --tcp-cc each
    tcp = {c: pageload.ringhttpd_server(a.ringhttpd, "ringhttpd-tcp-" + c, 28470 + i, "cubic", c,
                                        "uring", os.path.join(a.work, "www"), cert, key)
           for i, c in enumerate(("cubic", "bbr", "reno"))}
    lines = ["# Bulk flows (bench/pageload/flows.py)", "", "Command: `%s`" % " ".join(sys.argv), ""]
    with Namespace([s.port for s in list(servers.values()) + list(tcp.values())] + [28479]):
        try:
            for s in list(servers.values()) + list(tcp.values()):
                s.start(a.work)
            if not a.no_calibrate:
                calibrate(a, tcp["bbr"], lines)
            if not a.no_downloads:
                for prof in a.profiles.split(","):
                    rtt, loss = PROFILES[prof]
                    lines += ["## 64 MiB download, %s (RTT %d ms, loss %g%% each way; at most %g s)"
                              % (prof, rtt, loss, a.secs), "",
                              "| flow | Mbit/s, median of %d (min-max) | complete |" % a.rounds,
                              "|---|---|---|"]
                    cells = [("h3 " + cc, servers[cc], "h3") for cc in ccs] + \
                            [("h2 tcp " + c, tcp[c], "h2") for c in tcp]
                    for name, srv, proto in cells:
                        got = []
                        for r in range(a.rounds):
                            sp, so = shaper_start(a.shaper, rtt, loss, r + 1)
                            url = "https://127.0.0.1:%d/64m.bin" % srv.port
                            if proto == "h3":
                                res, err = h3_result(h3_fetch(h3load, url, a.secs))
                            else:
                                res, err = h2_result(h2_fetch(url, a.secs))
                            shaper_stop(sp, so)
                            pageload.log("%s %s #%d %s" % (prof, name, r, err or "%.1f Mbit/s, %d bytes in %.2f s" % (mbit(res), res[0], res[1])))
                            if res:
                                got.append(res)
                        if got:
                            v = [mbit(x) for x in got]
                            lines.append("| %s | %.1f (%.1f-%.1f) | %d/%d |" % (
                                name, statistics.median(v), min(v), max(v),
                                sum(1 for x in got if x[0] == BIG), len(got)))
                        else:
                            lines.append("| %s | failed | |" % name)
                    lines.append("")
            if not a.no_fairness:
                bdp = bottleneck(a.rate, a.fair_rtt, a.queue_bdp)
                lines += ["## Fairness: one HTTP/3 flow against one TCP CUBIC flow (HTTP/2), together",
                          "", "Bottleneck: TBF %d Mbit/s at the receiver, queue %d bytes (%g BDP); RTT %d ms, "
                          "no random loss; both start at once, %g s each." % (a.rate, bdp, a.queue_bdp, a.fair_rtt,
                                                                             a.secs),
                          "", "| HTTP/3 cc | h3 Mbit/s | TCP CUBIC Mbit/s | h3 share | Jain's index |",
                          "|---|---|---|---|---|"]
                for cc in (a.fair_ccs.split(",") if a.fair_ccs else ccs) + ["tcp-bbr", "(tcp cubic alone)"]:
                    shares, jain, h3v, tcpv = [], [], [], []
                    for r in range(a.rounds):
                        sp, so = shaper_start(a.shaper, a.fair_rtt, 0, r + 1)
                        t = h2_fetch("https://127.0.0.1:%d/64m.bin" % tcp["cubic"].port, a.secs)
                        q = None
                        if cc in servers:
                            q = h3_fetch(h3load, "https://127.0.0.1:%d/64m.bin" % servers[cc].port, a.secs)
                        elif cc == "tcp-bbr":  # the yardstick: TCP BBR (the host's) against CUBIC
                            q = h2_fetch("https://127.0.0.1:%d/64m.bin" % tcp["bbr"].port, a.secs)
                        tr, terr = h2_result(t)
                        if not q:
                            qr, qerr = (0, a.secs), None
                        elif cc == "tcp-bbr":
                            qr, qerr = h2_result(q)
                        else:
                            qr, qerr = h3_result(q, keep=True)
                            if qr and qr[0] == 0:
                                pageload.log("fair %s #%d: the HTTP/3 flow got nothing: %s" % (cc, r, qerr))
                        shaper_stop(sp, so)
                        if not tr or not qr:
                            pageload.log("fair %s #%d: %s %s" % (cc, r, terr, qerr))
                            continue
                        x, y = mbit(qr), mbit(tr)
                        h3v.append(x)
                        tcpv.append(y)
                        if q:
                            shares.append(x / (x + y))
                            jain.append((x + y) ** 2 / (2 * (x * x + y * y)))
                        pageload.log("fair %s #%d: h3 %.1f tcp %.1f Mbit/s" % (cc, r, x, y))
                    if tcpv:
                        lines.append("| %s | %s | %.1f | %s | %s |" % (
                            cc, "%.1f" % statistics.median(h3v) if shares else "-", statistics.median(tcpv),
                            "%.2f" % statistics.median(shares) if shares else "-",
                            "%.3f" % statistics.median(jain) if jain else "-"))
                lines.append("")
        finally:
            for s in list(servers.values()) + list(tcp.values()):
                s.stop()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "flows.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
