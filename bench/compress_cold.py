#!/usr/bin/env python3
"""Cold start to the first compressed response of a 5 MiB script, and another client's latency
on the same worker meanwhile (issue 17). Starts `build/ringhttpd -t 1` on a fresh docroot,
asks for /big.js with `Accept-Encoding: br` every 10 ms until it comes back br (the first
answers are identity: the variant is made off the loop), while a second connection requests a
1 KiB file back to back. Prints the time to the first br response, the compressor's CPU time
(from -v), and the other client's request count, p50, p99 and max.

    python3 bench/compress_cold.py [BINARY]
"""
import http.client
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..",
                                                          "build", "ringhttpd")
WORDS = ["function", "return", "const", "value", "index", "element", "document", "window"]


def main():
    rng = random.Random(5)
    root = tempfile.mkdtemp(prefix="ringhttpd-cold-")
    lines, n = [], 0
    while n < 5 << 20:
        line = "%s %s_%d = %s(%d);\n" % (rng.choice(WORDS), rng.choice(WORDS), rng.randrange(999),
                                          rng.choice(WORDS), rng.randrange(100000))
        lines.append(line)
        n += len(line)
    with open(os.path.join(root, "big.js"), "w") as f:
        f.write("".join(lines)[:5 << 20])
    with open(os.path.join(root, "small.txt"), "wb") as f:
        f.write(b"x" * 1024)
    srv = subprocess.Popen([BIN, "-p", "19191", "-b", "127.0.0.1", "-t", "1", "-v", root],
                           stderr=subprocess.PIPE, text=True)
    try:
        while "listening" not in srv.stderr.readline():
            pass
        lat, stop = [], threading.Event()

        def other():
            c = http.client.HTTPConnection("127.0.0.1", 19191)
            while not stop.is_set():
                t = time.perf_counter()
                c.request("GET", "/small.txt")
                c.getresponse().read()
                lat.append(time.perf_counter() - t)

        th = threading.Thread(target=other)
        th.start()
        time.sleep(0.2)
        base = len(lat)
        c = http.client.HTTPConnection("127.0.0.1", 19191)
        t0 = time.perf_counter()
        for _ in range(3000):
            c.request("GET", "/big.js", headers={"Accept-Encoding": "br"})
            r = c.getresponse()
            body = r.read()
            if r.getheader("Content-Encoding") == "br":
                break
            time.sleep(0.01)
        first = time.perf_counter() - t0
        during = sorted(lat[base:])
        stop.set()
        th.join()
    finally:
        srv.terminate()
        err = srv.communicate(timeout=10)[1]
        shutil.rmtree(root)
    m = re.search(r"br /big\.js: (\d+) -> (\d+) bytes in ([\d.]+) ms", err)
    print("first br response after %.0f ms (%s)" % (first * 1e3, m.group(0) if m else "?"))
    print("other client meanwhile: %d requests, p50 %.2f ms, p99 %.2f ms, max %.2f ms" % (
        len(during), statistics.median(during) * 1e3,
        during[int(len(during) * 0.99)] * 1e3, during[-1] * 1e3))
    print("br body %d bytes" % len(body))


if __name__ == "__main__":
    main()
