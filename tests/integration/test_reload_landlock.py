"""Reloads under Landlock of files the configuration names that a deploy tool replaced rather
than edited (issue 36 item 1): `sed -i`, `mv`, `git checkout`, Ansible's `template` all write a
new file and rename it over the old one, and a Kubernetes ConfigMap update swaps a `..data`
symlink. Landlock's rules were on the files' inodes, so every reload after such an edit read the
new inode and failed with "Permission denied", as root and after --user. The layout is the
Debian package's: the configuration in its own directory (etc/ringhttpd), the root elsewhere
(var/www/html). Also the checks issue 36 asks for beside it: a reload that would need a tree
Landlock did not allow at start is refused and says so (it used to answer 403 to everything,
silently), a document root the serving user cannot read is named at start and reload, and
--user with an access log whose directory that user cannot write is warned about at start."""
import base64
import os
import pathlib
import pwd
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile

import pytest

from conftest import fetch, wait_for

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="--user needs the test to run as root")
USERS = [None, pytest.param("nobody", marks=as_root)]


def _landlock_applies(make_server, root):
    s = make_server(root, args=["-v"])
    text = s.stderr_text()
    s.stop()
    return "landlock: applied" in text


@pytest.fixture
def layout(make_server):
    """base/etc/ringhttpd (the configuration's directory) and base/var/www/html (the root), all
    readable by nobody (pytest's tmp dirs are private to root)."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="ringhttpd-reload-"))
    os.chmod(base, 0o755)
    etc, www = base / "etc" / "ringhttpd", base / "var" / "www" / "html"
    for d in (etc, www):
        d.mkdir(parents=True, mode=0o755)
        for p in (d.parent, d.parent.parent):
            os.chmod(p, 0o755)
    (www / "a.txt").write_bytes(b"a\n")
    (www / "private").mkdir(mode=0o755)
    (www / "private" / "x.txt").write_bytes(b"secret\n")
    for f in (www / "a.txt", www / "private" / "x.txt"):
        f.chmod(0o644)
    if not _landlock_applies(make_server, www):
        shutil.rmtree(base)
        pytest.skip("this kernel has no Landlock")
    yield base, etc, www
    shutil.rmtree(base)


def replace(path, text, mode=0o644):
    """What sed -i, Ansible and git checkout do: a new file renamed over the old one."""
    tmp = path.with_name("." + path.name + ".new")
    tmp.write_bytes(text if isinstance(text, bytes) else text.encode())
    tmp.chmod(mode)
    os.rename(tmp, path)


def hup(server, count):
    """SIGHUP, then wait for the reload's outcome (its count-th "reload (SIGHUP)" line)."""
    server.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: server.stderr_text().count("reload (SIGHUP)") >= count), \
        server.stderr_text()[-2000:]


def config(root, **keys):
    return "".join(f"{k}: {v}\n" for k, v in {"root": root, **keys}.items())


def user_args(user):
    return ["--user", user] if user else []


@pytest.mark.parametrize("user", USERS, ids=["root", "nobody"])
def test_config_replaced_by_rename_is_reloaded(make_server, layout, user):
    base, etc, www = layout
    cfg = etc / "ringhttpd.yaml"
    replace(cfg, config(www, **{"cache-control": "max-age=1"}))
    server = make_server(args=["--config", str(cfg), *user_args(user)])
    assert fetch(server, "/a.txt").header("cache-control") == "max-age=1"
    for n in (2, 3):  # sed -i twice: each edit is a new inode
        replace(cfg, config(www, **{"cache-control": f"max-age={n}"}))
        hup(server, n - 1)
        assert "failed" not in server.stderr_text(), server.stderr_text()[-2000:]
        assert fetch(server, "/a.txt").header("cache-control") == f"max-age={n}"


def test_configmap_symlink_swap_is_reloaded(make_server, layout):
    """Kubernetes mounts a ConfigMap as dir/file -> ..data/file, ..data -> ..TIMESTAMP, and
    updates it by writing ..TIMESTAMP2, renaming a new ..data link over the old, removing the
    old directory."""
    base, etc, www = layout
    mount = etc / "conf.d"
    mount.mkdir(mode=0o755)

    def publish(stamp, text):
        d = mount / f"..2026_01_01_00_00_0{stamp}"
        d.mkdir(mode=0o755)
        (d / "ringhttpd.yaml").write_text(text)
        (d / "ringhttpd.yaml").chmod(0o644)
        (mount / "..data_tmp").symlink_to(d.name)
        os.rename(mount / "..data_tmp", mount / "..data")
        return d

    old = publish(1, config(www, **{"cache-control": "max-age=1"}))
    (mount / "ringhttpd.yaml").symlink_to("..data/ringhttpd.yaml")
    server = make_server(args=["--config", str(mount / "ringhttpd.yaml")])
    assert fetch(server, "/a.txt").header("cache-control") == "max-age=1"
    publish(2, config(www, **{"cache-control": "max-age=2"}))
    shutil.rmtree(old)
    hup(server, 1)
    assert "failed" not in server.stderr_text(), server.stderr_text()[-2000:]
    assert fetch(server, "/a.txt").header("cache-control") == "max-age=2"


def _htpasswd(path, user, password):
    tmp = path.with_name(".htpasswd.tmp")
    subprocess.run(["htpasswd", "-c", "-b", "-B", "-C", "5", str(tmp), user, password],
                   check=True, capture_output=True)
    tmp.chmod(0o644)
    os.rename(tmp, path)


def _auth(user, password):
    return [("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())]


@pytest.mark.parametrize("user", USERS, ids=["root", "nobody"])
def test_htpasswd_replaced_by_rename_is_reloaded(make_server, layout, user):
    base, etc, www = layout
    pw = etc / "htpasswd"
    _htpasswd(pw, "alice", "one")
    server = make_server(www, args=["--basic-auth", f"/private/={pw}", *user_args(user)])
    assert fetch(server, "/private/x.txt", headers=_auth("alice", "one")).status == 200
    _htpasswd(pw, "bob", "two")  # htpasswd itself writes a new file and renames it
    hup(server, 1)
    assert "failed" not in server.stderr_text(), server.stderr_text()[-2000:]
    assert fetch(server, "/private/x.txt", headers=_auth("bob", "two")).status == 200
    assert fetch(server, "/private/x.txt", headers=_auth("alice", "one")).status == 401


def _openssl(*args):
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=60)


def _pair(d, name, cn):
    """A self-signed pair for CN cn, written to d/.name.* and renamed to d/name.crt/.key."""
    crt, key = d / f".{name}.crt.new", d / f".{name}.key.new"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", key, "-out", crt, "-subj", f"/CN={cn}", "-days", "2",
             "-addext", "subjectAltName=DNS:localhost")
    return crt, key


def _served_cn(server):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    port = int(re.search(r"listening on https://127\.0\.0\.1:(\d+)/", server.stderr_text())[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            der = s.getpeercert(binary_form=True)
    out = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-subject"],
                         input=der, capture_output=True, check=True, timeout=30).stdout
    return out.decode().strip().rsplit("=", 1)[-1].strip()


@pytest.mark.parametrize("user", USERS, ids=["root", "nobody"])
def test_certificate_pair_replaced_by_rename_is_reloaded(make_server, layout, user):
    base, etc, www = layout
    tls = etc / "tls"
    tls.mkdir(mode=0o755)
    owner = pwd.getpwnam(user) if user else None

    def install(cn):
        crt, key = _pair(tls, "site", cn)
        if owner:  # the key belongs to the serving user, as a deploy would leave it
            os.chown(key, owner.pw_uid, owner.pw_gid)
        crt.chmod(0o644)
        os.rename(crt, tls / "site.crt")
        os.rename(key, tls / "site.key")

    install("first.test")
    server = make_server(www, args=["--tls-port", "0", "--tls-cert", str(tls / "site.crt"),
                                    "--tls-key", str(tls / "site.key"), *user_args(user)])
    assert _served_cn(server) == "first.test"
    install("second.test")
    hup(server, 1)
    assert wait_for(lambda: "TLS certificates re-read" in server.stderr_text()
                    or "kept as they were" in server.stderr_text())
    assert "kept as they were" not in server.stderr_text(), server.stderr_text()[-2000:]
    assert _served_cn(server) == "second.test"


def test_reload_to_a_root_outside_landlocks_trees_is_refused_and_says_so(make_server, layout):
    """Landlock cannot be widened once applied: a reload naming a root elsewhere used to be
    taken and answer 403 to everything, with nothing logged."""
    base, etc, www = layout
    other = base / "srv" / "site"
    other.mkdir(parents=True)
    (other / "a.txt").write_bytes(b"other\n")
    cfg = etc / "ringhttpd.yaml"
    replace(cfg, config(www))
    server = make_server(args=["--config", str(cfg)])
    replace(cfg, config(other))
    hup(server, 1)
    text = server.stderr_text()
    assert "reload (SIGHUP) failed, still serving the previous configuration" in text, text
    assert "Landlock" in text and str(other) in text and "restart" in text, text[-2000:]
    assert fetch(server, "/a.txt").body == b"a\n"  # the previous root, not 403s


@as_root
def test_unreadable_docroot_is_named_at_start_with_the_user(make_server, layout):
    base, etc, www = layout
    os.chmod(www, 0o700)  # root's: nobody cannot list it nor open what is inside
    server = make_server(www, args=["--user", "nobody"], ready=False)
    assert server.proc.wait(timeout=10) == 1
    server.stop()
    text = server.stderr_text()
    assert str(www) in text and "nobody" in text and "cannot read" in text, text


@as_root
def test_reload_to_an_unreadable_docroot_is_refused_with_the_user(make_server, layout):
    base, etc, www = layout
    closed = www.parent / "closed"
    closed.mkdir(mode=0o700)
    (closed / "a.txt").write_bytes(b"closed\n")
    cfg = etc / "ringhttpd.yaml"
    replace(cfg, config(www))
    server = make_server(args=["--config", str(cfg), "--user", "nobody"])
    replace(cfg, config(closed))
    hup(server, 1)
    text = server.stderr_text()
    assert "reload (SIGHUP) failed" in text and str(closed) in text and "nobody" in text, text
    assert fetch(server, "/a.txt").body == b"a\n"


@as_root
def test_user_who_cannot_write_the_log_directory_is_warned_at_start(make_server, layout):
    base, etc, www = layout
    logs = base / "var" / "log"
    logs.mkdir(mode=0o755)  # root's: the log opens before the drop, a rotation's reopen cannot
    server = make_server(www, args=["--user", "nobody", "--access-log", str(logs / "a.log")])
    assert fetch(server, "/a.txt").status == 200
    text = server.stderr_text()
    assert str(logs) in text and "nobody" in text and "SIGUSR1" in text, text
    # Given to the user, no warning.
    os.chown(logs, pwd.getpwnam("nobody").pw_uid, -1)
    ok = make_server(www, args=["--user", "nobody", "--access-log", str(logs / "b.log")])
    assert "SIGUSR1" not in ok.stderr_text()


@pytest.mark.parametrize("user", USERS, ids=["root", "nobody"])
def test_mime_types_replaced_by_rename_is_reloaded(make_server, layout, user):
    base, etc, www = layout
    types = etc / "extra.types"
    replace(types, "application/x-first ringtest\n")
    (www / "f.ringtest").write_bytes(b"x")
    (www / "f.ringtest").chmod(0o644)
    server = make_server(www, args=["--mime-types", str(types), *user_args(user)])
    assert fetch(server, "/f.ringtest").header("content-type") == "application/x-first"
    replace(types, "application/x-second ringtest\n")
    hup(server, 1)
    assert "failed" not in server.stderr_text(), server.stderr_text()[-2000:]
    assert fetch(server, "/f.ringtest").header("content-type") == "application/x-second"


def test_reload_naming_a_file_outside_landlocks_trees_says_to_restart(make_server, layout):
    base, etc, www = layout
    elsewhere = base / "srv" / "auth"
    elsewhere.mkdir(parents=True)
    _htpasswd(elsewhere / "htpasswd", "alice", "one")
    cfg = etc / "ringhttpd.yaml"
    replace(cfg, config(www))
    server = make_server(args=["--config", str(cfg)])
    replace(cfg, config(www, **{"basic-auth": f"/private/={elsewhere / 'htpasswd'}"}))
    hup(server, 1)
    text = server.stderr_text()
    assert "reload (SIGHUP) failed" in text and "Landlock" in text and "restart" in text, text
    assert fetch(server, "/private/x.txt").body == b"secret\n"  # the previous configuration


def test_reload_adding_a_site_outside_landlocks_trees_is_refused_and_says_so(make_server, layout):
    """The issue's case: a site added by a reload with its root elsewhere answered 403 to all."""
    base, etc, www = layout
    other = base / "srv" / "b.test"
    other.mkdir(parents=True)
    (other / "a.txt").write_bytes(b"b\n")
    site_a = f"  - hosts: [a.test]\n    default: true\n    root: {www}\n"
    cfg = etc / "ringhttpd.yaml"
    replace(cfg, "sites:\n" + site_a)
    server = make_server(args=["--config", str(cfg)])
    replace(cfg, "sites:\n" + site_a + f"  - hosts: [b.test]\n    root: {other}\n")
    hup(server, 1)
    text = server.stderr_text()
    assert "reload (SIGHUP) failed" in text and "Landlock" in text and str(other) in text, text
    assert fetch(server, "/a.txt", host="b.test").body == b"a\n"  # the default site, as before


def test_verbose_lists_the_trees_landlock_allows(make_server, layout):
    """A directory rule grants its whole tree: -v says which, once each."""
    base, etc, www = layout
    cfg = etc / "ringhttpd.yaml"
    replace(cfg, config(www))
    _htpasswd(etc / "htpasswd", "alice", "one")
    server = make_server(args=["-v", "--config", str(cfg),
                               "--basic-auth", f"/private/={etc / 'htpasswd'}"])
    lines = [ln for ln in server.stderr_text().splitlines() if "landlock: may read beneath" in ln
             and not ln.endswith(" /proc")]  # the sanitizer build's runtime reads /proc at exit
    assert sorted(ln.rsplit(" ", 1)[1] for ln in lines) == sorted([str(etc), str(www.parent)]), \
        lines
