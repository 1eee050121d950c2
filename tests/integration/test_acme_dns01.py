"""Wildcard certificates by DNS-01 (issue 40), against Debian's pebble on loopback.

Through the hook (--acme-dns-hook): the test's hook script sets the TXT record in
pebble-challtestsrv, Pebble's DNS server, through its management API (/set-txt, /clear-txt), and
logs its argv and environment. Through RFC 2136 (--acme-dns-update, --acme-dns-tsig): a real
authoritative server, Debian's knot, serves the zone example.test on loopback with a TSIG key
made by keymgr -t (its output is both knot's configuration and ringhttpd's key file), and
Pebble's -dnsserver points at it. Each certificate is for *.example.test and serves
a.example.test and b.example.test over HTTPS. The failures: a hook that exits non-zero, a TSIG
key the server does not know the secret of (its NOTAUTH/BADSIG logged, no retry before the
backoff).
"""
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import RINGHTTPD, free_port, wait_for
from test_acme import (CHALLTESTSRV, PEBBLE, acme_args, curl_https, pebble, ports,  # noqa: F401
                       wait_https, wait_issued, wait_port)

KNOTD = shutil.which("knotd") or shutil.which("/usr/sbin/knotd")
KEYMGR = shutil.which("keymgr") or shutil.which("/usr/sbin/keymgr")
KDIG = shutil.which("kdig")

pytestmark = pytest.mark.skipif(not PEBBLE or not CHALLTESTSRV,
                                reason="pebble not installed (scripts/deps.sh test)")
needs_knot = pytest.mark.skipif(not KNOTD or not KEYMGR or not KDIG,
                                reason="knot not installed (scripts/deps.sh test)")

WILD = "*.example.test"
ZONE = """$ORIGIN example.test.
$TTL 60
@ SOA ns.example.test. admin.example.test. 1 3600 600 86400 60
@ NS ns.example.test.
@ A 127.0.0.1
ns A 127.0.0.1
* A 127.0.0.1
"""


def sites_conf(tmp_path, docroot, *sites):
    """tmp_path/sites.yaml with one site per list of host names, all on docroot, the first the
    default."""
    conf = tmp_path / "sites.yaml"
    conf.write_text("sites:\n" + "".join(
        f"  - hosts: [{', '.join(repr(h) for h in hosts)}]\n    root: {docroot}\n" +
        ("    default: true\n" if i == 0 else "") for i, hosts in enumerate(sites)))
    return conf


def wildcard_site(tmp_path, docroot, *more):
    return sites_conf(tmp_path, docroot, [*more, WILD])


def hook_script(tmp_path, mgmt_port, mode="ok"):
    """A hook that logs how it was called and sets the record in challtestsrv; or fails (a
    line, then 100 KB of output, exit 3); or hangs (and leaves a child holding its output);
    or says it did but does nothing."""
    log = tmp_path / "hook.log"
    hook = tmp_path / "dns-hook"
    body = {
        "fail": 'echo "no such zone here"; head -c 100000 /dev/zero | tr "\\0" x; exit 3',
        "hang": f'sleep 600 & echo "$! $$" > {tmp_path}/hook.pids; echo waiting; sleep 600',
        "silent": 'exit 0',
    }.get(mode) or f"""case "$1" in
present) curl -sS -X POST -d "{{\\"host\\":\\"$2.\\",\\"value\\":\\"$3\\"}}" \\
    http://127.0.0.1:{mgmt_port}/set-txt ;;
cleanup) curl -sS -X POST -d "{{\\"host\\":\\"$2.\\"}}" http://127.0.0.1:{mgmt_port}/clear-txt ;;
esac
echo "hook done: $1\""""
    hook.write_text(f"""#!/bin/sh
echo "$# $1 $2 $3 $RINGHTTPD_DNS01_ACTION $RINGHTTPD_DNS01_FQDN $RINGHTTPD_DNS01_DOMAIN" >> {log}
{body}
""")
    hook.chmod(0o755)
    return hook, log


def served_both(ports, root):
    for name in ("a.example.test", "b.example.test"):
        wait_https(name, ports[1], root)


def test_wildcard_by_the_hook_serves_every_name_metrics_aggregate(make_server, docroot, pebble,
                                                                  ports, tmp_path):
    from test_accesslog import scrape_text
    pb = pebble()
    hook, log = hook_script(tmp_path, pb.chall_mgmt)
    state = tmp_path / "state"
    srv = make_server(None, args=acme_args(
        pb, state, ports, "--config", str(wildcard_site(tmp_path, docroot)),
        "--acme-dns-hook", str(hook), "--acme-dns-resolver", f"127.0.0.1:{pb.dns_port}",
        "--metrics", "127.0.0.1:0", "-v"))
    wait_issued(srv, WILD)
    served_both(ports, pb.root(tmp_path))
    assert (state / "_wildcard.example.test.pem").exists()
    assert pb.orders() == 1
    calls = log.read_text().splitlines()
    assert calls[0].startswith("3 present _acme-challenge.example.test ")
    assert calls[0].endswith(" present _acme-challenge.example.test example.test")
    value = calls[0].split()[3]
    assert len(value) == 43  # base64url of a SHA-256
    assert wait_for(lambda: len(log.read_text().splitlines()) == 2, 10)
    assert log.read_text().splitlines()[1].startswith(
        f"3 cleanup _acme-challenge.example.test {value} ")
    err = srv.stderr_text()
    assert "challenges http-01 and tls-alpn-01, dns-01 by hook" in err
    assert f"_acme-challenge.example.test TXT {value} published" in err
    # The default metrics: a few series whatever the number of names, none per name.
    text = scrape_text(srv)
    assert 'ringhttpd_tls_certificates{state="valid"} 1' in text
    assert 'ringhttpd_tls_certificates{state="awaited"} 0' in text
    assert 'ringhttpd_tls_certificates_expiring{within="7d"} 0' in text
    earliest = [ln for ln in text.splitlines()
                if ln.startswith("ringhttpd_tls_certificate_earliest_expiry_timestamp_seconds ")]
    assert earliest and float(earliest[0].split()[-1]) > time.time() + 3600, text
    assert "ringhttpd_tls_certificate_expiry_timestamp_seconds{" not in text
    promtool = shutil.which("promtool")
    if promtool:
        r = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()


def test_reload_adds_a_wildcard_site_ordered_at_once(make_server, docroot, pebble, ports,
                                                     tmp_path):
    pb = pebble()
    hook, _ = hook_script(tmp_path, pb.chall_mgmt)
    conf = sites_conf(tmp_path, docroot, ["one.test"])
    srv = make_server(None, args=acme_args(
        pb, tmp_path / "state", ports, "--config", str(conf), "--acme-dns-hook", str(hook),
        "--acme-dns-resolver", f"127.0.0.1:{pb.dns_port}"))
    wait_issued(srv, "one.test")
    sites_conf(tmp_path, docroot, ["one.test"], [WILD])
    srv.proc.send_signal(signal.SIGHUP)
    wait_issued(srv, WILD)
    root = pb.root(tmp_path)
    served_both(ports, root)
    wait_https("one.test", ports[1], root)
    assert pb.orders() == 2


def failing_hook(make_server, docroot, pebble, ports, tmp_path, mode, **env):
    """A server whose hook (of mode) answers --acme-domain *.example.test, once its order
    failed: (server, pebble, hook's log). env: test hooks."""
    pb = pebble()
    hook, log = hook_script(tmp_path, pb.chall_mgmt, mode)
    srv = make_server(docroot, env=dict(os.environ, **env),
                      args=acme_args(pb, tmp_path / "state", ports, "--acme-domain", WILD,
                                     "--acme-dns-hook", str(hook), "--acme-dns-resolver",
                                     f"127.0.0.1:{pb.dns_port}"))
    assert wait_for(lambda: f"order for {WILD} failed" in srv.stderr_text(), 60), \
        srv.stderr_text()[-3000:]
    return srv, pb, log


def test_a_hook_that_fails_fails_the_order_once(make_server, docroot, pebble, ports, tmp_path):
    """(The name from --acme-domain this time, without a configuration file.)"""
    srv, pb, log = failing_hook(make_server, docroot, pebble, ports, tmp_path, "fail")
    err = srv.stderr_text()
    assert "dns hook present _acme-challenge.example.test: no such zone here" in err
    assert "dns hook present _acme-challenge.example.test: exited 3" in err
    assert "dns hook present _acme-challenge.example.test: 95922 more bytes of output not logged" \
        in err  # 18 + 100,000 bytes, 4 KiB of them logged
    time.sleep(3)  # the backoff (60 s) holds the next try: no order, no hook run meanwhile
    assert pb.orders() == 1
    assert len(log.read_text().splitlines()) == 1
    assert curl_https("a.example.test", ports[1], pb.ca)[0] != 0


def test_a_hook_that_hangs_is_killed_with_what_it_started(make_server, docroot, pebble, ports,
                                                          tmp_path):
    srv, _, _ = failing_hook(make_server, docroot, pebble, ports, tmp_path, "hang",
                             RINGHTTPD_ACME_DNS_HOOK_TIMEOUT="2")
    err = srv.stderr_text()
    assert "dns hook present _acme-challenge.example.test: killed after 2 s" in err
    assert "dns hook present _acme-challenge.example.test: waiting" in err
    pids = [int(p) for p in (tmp_path / "hook.pids").read_text().split()]
    assert wait_for(lambda: not any(os.path.exists(f"/proc/{p}") and
                                    "Z" not in open(f"/proc/{p}/stat").read().split()[2]
                                    for p in pids), 10), pids
    assert get_ok(srv)


def test_a_record_never_seen_is_not_validated(make_server, docroot, pebble, ports, tmp_path):
    """The hook says it published, the resolver never shows it: no validation is asked for,
    the hook is told to clean up."""
    srv, pb, log = failing_hook(make_server, docroot, pebble, ports, tmp_path, "silent",
                                RINGHTTPD_ACME_DNS_LOOKS="2")
    assert f"not seen at 127.0.0.1:{pb.dns_port} after 2 looks" in srv.stderr_text()
    assert [ln.split()[1] for ln in log.read_text().splitlines()] == ["present", "cleanup"]
    assert "POST /chalZ" not in pb.logfile.read_text()


def get_ok(srv):
    """The server still serves plain HTTP."""
    p = subprocess.run(["curl", "-sS", "--max-time", "10", f"http://127.0.0.1:{srv.port}/"],
                       capture_output=True, timeout=15)
    return p.returncode == 0 and b"index" in p.stdout


def test_usage_errors(tmp_path):
    hook, _ = hook_script(tmp_path, 1)
    key = tmp_path / "k.key"
    key.write_text('key "k" { algorithm hmac-sha256; secret "YQ=="; };')
    base = [RINGHTTPD, "-p", "0", "--tls-port", "0", "--acme-email", "a@example.org"]
    for args, want in (
            (["--acme-domain", WILD], "--acme-domain *.example.test: a wildcard needs DNS-01"),
            (["--acme-domain", "a.test", "--acme-dns-hook", "dns-hook"],
             "--acme-dns-hook wants an executable by its absolute path"),
            (["--acme-domain", "a.test", "--acme-dns-update", "127.0.0.1"],
             "--acme-dns-update and --acme-dns-tsig go together"),
            (["--acme-domain", "a.test", "--acme-dns-hook", str(hook), "--acme-dns-update",
              "127.0.0.1", "--acme-dns-tsig", str(key)], "one or the other"),
            (["--acme-domain", "a.test", "--acme-dns-resolver", "127.0.0.1"],
             "--acme-dns-resolver needs --acme-dns-hook or --acme-dns-update")):
        p = subprocess.run(base + args + [str(tmp_path)], capture_output=True, text=True,
                           timeout=20)
        assert p.returncode == 2 and want in p.stderr, (args, p.returncode, p.stderr)
    # a key file that is no key: one line at start, exit 1
    key.write_text("secret nothing")
    p = subprocess.run(base + ["--acme-domain", "a.test", "--acme-dns-update", "127.0.0.1",
                               "--acme-dns-tsig", str(key), "--acme-state",
                               str(tmp_path / "st"), str(tmp_path)],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode != 0 and f"--acme-dns-tsig {key}: no key in it" in p.stderr, p.stderr


def test_wildcard_left_out_without_dns01(make_server, docroot, pebble, ports, tmp_path):
    pb = pebble()
    conf = sites_conf(tmp_path, docroot, ["one.test", WILD])
    srv = make_server(None, args=acme_args(pb, tmp_path / "state", ports, "--config", str(conf)))
    wait_issued(srv, "one.test")
    assert (f"acme: {WILD} left out of the certificate: a wildcard needs DNS-01"
            in srv.stderr_text())


class Knot:
    """knotd serving example.test on 127.0.0.1, updates allowed with the key of key_file."""

    def __init__(self, tmp, key_file, fillers=0):
        self.port = free_port()
        d = tmp / f"knot-{self.port}"
        (d / "db").mkdir(parents=True)
        (d / "example.test.zone").write_text(ZONE + "".join(
            f'_acme-challenge TXT "filler-{i:02}-{"x" * 40}"\n' for i in range(fillers)))
        conf = d / "knot.conf"
        conf.write_text(f"""server:
    rundir: {d}
    listen: 127.0.0.1@{self.port}
include: {key_file}
database:
    storage: {d}/db
acl:
  - id: update
    key: ringhttpd-test
    action: update
zone:
  - domain: example.test
    storage: {d}
    file: example.test.zone
    acl: update
    zonefile-sync: -1
    journal-content: none
log:
  - target: stderr
    any: info
""")
        self.logfile = d / "knot.log"
        self.log = open(self.logfile, "wb")
        self.proc = subprocess.Popen([KNOTD, "-c", str(conf)], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc)
        self.addr = f"127.0.0.1:{self.port}"

    def txt(self, name, *how):
        p = subprocess.run([KDIG, "@127.0.0.1", "-p", str(self.port), *(how or ["+short"]),
                            "TXT", name], capture_output=True, text=True, timeout=10)
        return p.stdout.split()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture
def knot(tmp_path):
    started = []
    key = tmp_path / "tsig.key"
    key.write_text(subprocess.run([KEYMGR, "-t", "ringhttpd-test", "hmac-sha256"],
                                  capture_output=True, text=True, check=True).stdout)

    def start(fillers=0):
        k = Knot(tmp_path, key, fillers)
        started.append(k)
        return k

    start.key = key
    yield start
    for k in started:
        k.stop()


@needs_knot
def test_wildcard_by_rfc2136_to_knot(make_server, docroot, pebble, knot, ports, tmp_path):
    """The site's apex and its wildcard in one order: the apex by HTTP-01 (Pebble resolves it
    at knot), the wildcard by DNS-01."""
    kn = knot()
    pb = pebble(dnsserver=kn.addr)
    state = tmp_path / "state"
    srv = make_server(None, args=acme_args(
        pb, state, ports, "--config", str(wildcard_site(tmp_path, docroot, "example.test")),
        "--acme-dns-update", kn.addr, "--acme-dns-tsig", str(knot.key)))
    wait_issued(srv, f"example.test, {WILD}")
    root = pb.root(tmp_path)
    served_both(ports, root)
    wait_https("example.test", ports[1], root)
    assert (state / "example.test.pem").exists()
    assert pb.orders() == 1
    assert "DDNS, finished, serial 1 -> 2" in kn.logfile.read_text()
    # withdrawn again once the order is done
    assert wait_for(lambda: kn.txt("_acme-challenge.example.test") == [], 10), \
        kn.txt("_acme-challenge.example.test")
    assert "published (RFC 2136 UPDATE to " + kn.addr in srv.stderr_text()


@needs_knot
def test_rfc2136_a_truncated_answer_is_asked_again_over_tcp(make_server, docroot, pebble, knot,
                                                           ports, tmp_path):
    """The record's name holds 12 TXT records already, too many for a 512-byte UDP answer
    (knot sets TC): ours is looked for over TCP and seen. (Pebble's own look, over UDP only,
    then fails the validation: that is Pebble's.)"""
    kn = knot(fillers=12)
    assert "tc" in kn.txt("_acme-challenge.example.test", "+notcp", "+noedns", "+ignore")
    pb = pebble(dnsserver=kn.addr)
    srv = make_server(None, args=acme_args(
        pb, tmp_path / "state", ports, "--config", str(wildcard_site(tmp_path, docroot)),
        "--acme-dns-update", kn.addr, "--acme-dns-tsig", str(knot.key)))
    assert wait_for(lambda: "published (RFC 2136 UPDATE to " in srv.stderr_text(), 60), \
        srv.stderr_text()[-3000:]
    assert wait_for(lambda: len(kn.txt("_acme-challenge.example.test")) == 12, 30)


@needs_knot
def test_rfc2136_with_a_wrong_key_is_refused_and_not_retried(make_server, docroot, pebble, knot,
                                                           ports, tmp_path):
    kn = knot()
    pb = pebble(dnsserver=kn.addr)
    wrong = tmp_path / "wrong.key"  # BIND's format (tsig-keygen's), the key's name, another secret
    wrong.write_text('key "ringhttpd-test" {\n\talgorithm hmac-sha256;\n'
                     '\tsecret "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";\n};\n')
    srv = make_server(None, args=acme_args(
        pb, tmp_path / "state", ports, "--config", str(wildcard_site(tmp_path, docroot)),
        "--acme-dns-update", kn.addr, "--acme-dns-tsig", str(wrong)))
    assert wait_for(lambda: f"order for {WILD} failed" in srv.stderr_text(), 60), \
        srv.stderr_text()[-3000:]
    err = srv.stderr_text()
    assert (f"{kn.addr} refused the UPDATE of _acme-challenge.example.test in zone "
            "example.test with key ringhttpd-test: NOTAUTH, TSIG BADSIG") in err, err[-3000:]
    time.sleep(3)
    err = srv.stderr_text()
    assert pb.orders() == 1 and err.count("refused the UPDATE") == 1, err[-3000:]
    assert kn.txt("_acme-challenge.example.test") == []
