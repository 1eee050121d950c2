"""What an operator's first tries and mistakes meet (issue 36 item 4 and its "Silent or
misleading" config/CLI items, issue 35's duplicate YAML keys): --check-config names file, line
and key for every error the start would hit; a key given twice is refused; the file's relative
names are its directory's; every on/off key takes YAML's booleans; the command line's messages
say what is wrong and what to do; missing pages and a useless --http3 are warned about."""

import os
import pathlib
import shutil
import socket
import subprocess
import urllib.request

import pytest

from conftest import RINGHTTPD, _require_binary, fetch, wait_for


def run(*args, cwd=None, timeout=30, wrapper=()):
    _require_binary()
    return subprocess.run([*wrapper, RINGHTTPD, *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def check(conf, cwd=None):
    return run("--check-config", str(conf), cwd=cwd)


def line_of(text, needle, nth=1):
    """The 1-based line of the nth line of text that starts (after spaces) with needle."""
    seen = 0
    for i, ln in enumerate(text.splitlines(), 1):
        if ln.lstrip(" -").startswith(needle):
            seen += 1
            if seen == nth:
                return i
    raise AssertionError(f"{needle!r} not in {text!r}")


# a SHA-512 crypt line for u:secret (openssl passwd -6 -salt abcdefgh secret)
USERS = "u:$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG.\n"


@pytest.fixture
def pair(test_ca, tmp_path):
    """localhost.crt and localhost.key copied beside the configuration file."""
    _, crt, key = test_ca
    shutil.copy(crt, tmp_path / "site.crt")
    shutil.copy(key, tmp_path / "site.key")
    return "site.crt", "site.key"


# --------------------------------------------------------------------------- --check-config

# (the file, the key at fault, which of its lines (nth use), words of the reason). Each is an
# error the start meets too; before issue 36 they named the wrong line, or none.
START_ERRORS = [
    ("root: www\ntls-port: 0\ntls-cert: missing.crt\ntls-key: {key}\n",
     "tls-cert", 1, "missing.crt"),
    ("root: www\ntls-port: 0\ntls-cert: {crt}\ntls-key: missing.key\n",
     "tls-key", 1, "missing.key"),
    ("port: 0\nroot: nonexistent-dir\n", "root", 1, "cannot use document root"),
    ("root: www\ntls-cert: {crt}\ntls-key: {key}\n", "tls-cert", 1, "needs --tls-port"),
    ("root: www\ntls-port: 0\ntls-cert: {crt}\n", "tls-cert", 1, "no --tls-key"),
    ("root: www\nhsts: 600\n", "hsts", 1, "needs --tls-port"),
    ("root: www\nacme-email: me@example.org\n", "acme-email", 1, "needs --tls-port"),
    ("tls-port: 0\nsites:\n  - hosts: [a.test]\n    root: www\n", "tls-port", 1,
     "needs a --tls-cert"),
    ("root: www\naccess-log: no-such-dir/access.log\n", "access-log", 1,
     "No such file or directory"),
    ("root: www\nmime-types: missing.types\n", "mime-types", 1, "missing.types"),
    ("root: www\nbasic-auth:\n  - /a/=users\n  - /b/=missing.htpasswd\n", "/b/", 1,
     "missing.htpasswd"),
    ("sites:\n  - hosts: [a.test]\n    root: www\n    tls-cert: {crt}\n", "tls-cert", 1,
     "tls-key"),
]


@pytest.mark.parametrize("text, key, nth, words", START_ERRORS,
                         ids=[f"{k}-{w[:18]}" for _, k, _, w in START_ERRORS])
def test_check_config_names_file_line_and_key_of_what_the_start_refuses(tmp_path, pair, text,
                                                                        key, nth, words):
    (tmp_path / "www").mkdir()
    (tmp_path / "users").write_text(USERS)
    text = text.format(crt=pair[0], key=pair[1])
    conf = tmp_path / "bad.yaml"
    conf.write_text(text)
    line = line_of(text, key, nth)
    name = "basic-auth" if key.startswith("/") else key
    p = check(conf)
    assert p.returncode == 1, (text, p.stdout, p.stderr)
    assert f"{conf}:{line}: {name}: " in p.stderr and words in p.stderr, (text, p.stderr)
    # and the start refuses it with the same words (it would not, were --check-config wrong)
    s = run("--config", str(conf), "-p", "0", "-b", "127.0.0.1", timeout=30)
    assert s.returncode != 0 and words in s.stderr, (text, s.stderr)


# --------------------------------------------------------------------------- duplicate keys

@pytest.mark.parametrize("text, key, first, second", [
    ("port: 8080\nroot: www\nport: 8081\n", "port", 1, 3),
    ("sites:\n  - hosts: [a.test]\n    root: www\n    autoindex: true\n"
     "    root: /srv\n", "root", 3, 5),
    ("root: www\nredirect:\n  - from: /a\n    to: /b\n    from: /c\n", "redirect", 3, 5),
    ("root: www\nerror-page: {404: /a.html,\n  404: /b.html}\n", "error-page", 2, 3),
])
def test_a_key_given_twice_is_refused_with_both_lines(tmp_path, text, key, first, second):
    (tmp_path / "www").mkdir()
    conf = tmp_path / "dup.yaml"
    conf.write_text(text)
    p = check(conf)
    assert p.returncode == 1, (text, p.stdout)
    assert f"{conf}:{second}: {key}: " in p.stderr, p.stderr
    assert f"given twice (first on line {first})" in p.stderr, p.stderr


# --------------------------------------------------------------------------- relative names

def test_relative_names_in_the_file_are_the_files_directory(make_server, tmp_path, pair):
    """Run from '/', the file's root, htpasswd and TLS pair are still found beside it."""
    d = tmp_path / "conf"
    d.mkdir()
    (d / "www").mkdir()
    (d / "www" / "hello.txt").write_text("beside the file\n")
    for f in pair:
        shutil.move(tmp_path / f, d / f)
    (d / "types").write_text("text/x-ringtest ringtest\n")
    (d / "www" / "a.ringtest").write_text("typed\n")
    conf = d / "ringhttpd.yaml"
    conf.write_text(f"root: www\nmime-types: types\ntls-cert: {pair[0]}\ntls-key: {pair[1]}\n"
                    "tls-port: 0\n")
    p = check(conf, cwd="/")
    assert p.returncode == 0, p.stderr
    srv = make_server(args=["--config", str(conf), "--tls-port", "0"], cwd="/")
    r = fetch(srv, "/hello.txt")
    assert r.status == 200 and r.body == b"beside the file\n"
    assert fetch(srv, "/a.ringtest").header("content-type").startswith("text/x-ringtest")


def test_command_line_names_stay_the_working_directorys(make_server, tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "hello.txt").write_text("working directory\n")
    conf = tmp_path / "conf" / "c.yaml"
    conf.write_text("autoindex: true\n")
    srv = make_server(args=["--config", str(conf)], docroot="here", cwd=str(tmp_path))
    assert fetch(srv, "/hello.txt").body == b"working directory\n"


# --------------------------------------------------------------------------- booleans

@pytest.mark.parametrize("off", ["false", "no", "off", "False", "NO"])
def test_every_on_off_key_takes_yamls_booleans(make_server, tmp_path, docroot, off):
    conf = tmp_path / "b.yaml"
    conf.write_text(f"root: {docroot}\ncompress: {off}\nautoindex: on\nhttp2: yes\n")
    p = check(conf)
    assert p.returncode == 0, p.stderr
    srv = make_server(args=["--config", str(conf)])
    r = fetch(srv, "/index.html", headers=["Accept-Encoding: gzip, br"])
    assert r.status == 200 and r.header("content-encoding") is None
    listing = fetch(srv, "/noindex/")
    assert listing.status == 200 and b"a.txt" in listing.body


def test_on_off_options_take_booleans_on_the_command_line(make_server, docroot):
    srv = make_server(docroot, args=["--compress", "false"])
    r = fetch(srv, "/index.html", headers=["Accept-Encoding: gzip, br"])
    assert r.status == 200 and r.header("content-encoding") is None


# --------------------------------------------------------------------------- messages

@pytest.mark.parametrize("args, says", [
    (["--autoindex=true"], "--autoindex takes no value"),
    (["--autoindx"], "unknown option '--autoindx' (did you mean --autoindex?)"),
    (["--compres-types", "text/*"], "(did you mean --compress-types?)"),
    (["--tls-prot", "443"], "(did you mean --tls-port?)"),
    (["--cors", "/api/* https://app.example/"], "an origin has no path"),
])
def test_command_line_mistakes_are_explained(args, says, docroot):
    p = run(*args, str(docroot))
    assert p.returncode == 2, p
    assert says in p.stderr, p.stderr


def test_an_unknown_key_gets_a_did_you_mean(tmp_path):
    conf = tmp_path / "c.yaml"
    conf.write_text("root: /\nautoindx: true\n")
    p = check(conf)
    assert p.returncode == 1 and f"{conf}:2: autoindx: " in p.stderr
    assert "did you mean 'autoindex'" in p.stderr, p.stderr


def test_metrics_takes_a_host_name(make_server, docroot):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    srv = make_server(docroot, args=["--metrics", f"localhost:{port}"])
    assert wait_for(lambda: "metrics on http://" in srv.stderr_text()), srv.stderr_text()
    url = srv.stderr_text().split("metrics on ")[1].split()[0]
    with urllib.request.urlopen(url, timeout=5) as r:
        assert r.status == 200 and b"ringhttpd" in r.read()


def test_metrics_host_that_does_not_resolve_says_what_is_wanted(docroot):
    p = run("-p", "0", "-b", "127.0.0.1", "--metrics", "no-such-host.invalid:9100", str(docroot))
    assert p.returncode != 0
    assert "wants an address, or a host name" in p.stderr, p.stderr


def _nobody():
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all"]


def test_a_privileged_port_as_non_root_says_the_ways_out(engine):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root to become nobody")
    with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as f:
        if int(f.read()) <= 80:
            pytest.skip("this kernel lets anyone bind port 80")
    if subprocess.run([*_nobody(), "test", "-x", RINGHTTPD]).returncode != 0:
        pytest.skip("nobody cannot run the binary in this tree")
    # '/' as the root: nobody can open it, so the first thing refused is the port
    p = run("-p", "80", "-b", "127.0.0.1", "--engine", engine, "/", wrapper=_nobody())
    assert p.returncode == 1, p
    assert "Permission denied" in p.stderr and "--user" in p.stderr, p.stderr
    assert "CAP_NET_BIND_SERVICE" in p.stderr, p.stderr


def test_the_tls_port_in_use_says_it_is_the_tls_port(docroot, engine, test_ca):
    _, crt, key = test_ca
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        p = run("-p", "0", "-b", "127.0.0.1", "--engine", engine, "--tls-port", str(port),
                "--tls-cert", str(crt), "--tls-key", str(key), str(docroot))
        assert p.returncode == 1, p
        assert f"port {port} (--tls-port): Address already in use" in p.stderr, p.stderr
        assert "--reuse-port" in p.stderr, p.stderr
    finally:
        holder.close()


# --------------------------------------------------------------------------- warnings

def test_missing_error_page_and_fallback_and_a_useless_http3_are_warned(tmp_path, docroot):
    conf = tmp_path / "w.yaml"
    conf.write_text(f"root: {docroot}\nerror-page: {{404: /missing-404.html}}\n"
                    "fallback: /missing-app.html\nhttp3: on\n")
    p = check(conf)
    assert p.returncode == 0, p.stderr  # warnings, not errors
    assert f"{conf}:2: error-page: warning: " in p.stderr and "missing-404.html" in p.stderr
    assert f"{conf}:3: fallback: warning: " in p.stderr and "missing-app.html" in p.stderr
    assert f"{conf}:4: http3: warning: " in p.stderr and "--tls-port" in p.stderr, p.stderr
    good = tmp_path / "g.yaml"
    good.write_text(f"root: {docroot}\nerror-page: {{404: /hello.txt}}\n")
    p = check(good)
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr


def test_the_start_warns_too(make_server, docroot):
    srv = make_server(docroot, args=["--error-page", "404=/nope.html", "--http3", "on"])
    assert "warning: --error-page '/nope.html'" in srv.stderr_text(), srv.stderr_text()
    assert "warning: --http3 on needs --tls-port" in srv.stderr_text()


# --------------------------------------------------------------------------- stale text

def test_no_text_calls_it_an_http11_server():
    top = pathlib.Path(__file__).resolve().parents[2]
    man = (top / "doc" / "ringhttpd.8").read_text()
    name = man.split(".SH NAME\n")[1].split("\n")[0]
    assert "HTTP/1.1 server" not in name and "HTTP/2" in name, name
    first = run("--help").stdout.splitlines()[1:3]
    assert "HTTP/2" in " ".join(first), first
    page = (top / "www" / "index.html").read_text()
    assert "HTTP/1.1 server" not in page and "HTTP/3" in page


def test_the_man_page_lists_every_per_site_key():
    """Its CONFIGURATION FILE list against the option table (what a site may set)."""
    from optiontable import option_table
    top = pathlib.Path(__file__).resolve().parents[2]
    man = (top / "doc" / "ringhttpd.8").read_text().replace("\\-", "-")
    section = man[man.index("and the per-site options ("):]
    section = section[:section.index("any other option in a site")].replace(
        "compress-types/min/max", "compress-types compress-min compress-max")
    missing = [o.name for o in option_table().values()
               if o.scope == "site" and o.name != "root" and o.name not in section]
    assert not missing, f"the man page's per-site list lacks {missing}"


def test_the_systemd_drop_in_example_parses(tmp_path):
    top = pathlib.Path(__file__).resolve().parents[2]
    if not shutil.which("systemd-analyze"):
        pytest.skip("no systemd-analyze")
    unit = (top / "dist" / "ringhttpd.service").read_text().replace(
        "@BINDIR@", str(pathlib.Path(RINGHTTPD).resolve().parent))
    (tmp_path / "ringhttpd.service").write_text(unit)
    (tmp_path / "ringhttpd.service.d").mkdir()
    dropin = (top / "dist" / "ringhttpd-override.conf").read_text().replace(
        "/usr/local/bin/ringhttpd", str(pathlib.Path(RINGHTTPD).resolve()))
    (tmp_path / "ringhttpd.service.d" / "override.conf").write_text(dropin)
    p = subprocess.run(["systemd-analyze", "verify", "--man=no",
                        str(tmp_path / "ringhttpd.service")], capture_output=True, text=True,
                       env={**os.environ, "SYSTEMD_UNIT_PATH": f"{tmp_path}:"}, timeout=60)
    assert p.returncode == 0 and "override.conf" not in p.stderr, p.stderr
    # and a mistake in it would be seen: the same drop-in with an unknown key
    (tmp_path / "ringhttpd.service.d" / "override.conf").write_text(dropin + "Bogus=1\n")
    p = subprocess.run(["systemd-analyze", "verify", "--man=no",
                        str(tmp_path / "ringhttpd.service")], capture_output=True, text=True,
                       env={**os.environ, "SYSTEMD_UNIT_PATH": f"{tmp_path}:"}, timeout=60)
    assert "override.conf" in p.stderr and "Bogus" in p.stderr, p.stderr
