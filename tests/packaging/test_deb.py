"""The Debian package (issue 31), as an operator meets it: lintian finds no error in it; in a
fresh Debian 12 root booted under systemd-nspawn, `dpkg -i` installs it (units left disabled),
the service starts from its unit as the ringhttpd user and serves the default page on loopback,
takes an edited configuration file on reload (found failing: /bin/kill is procps's), reopens
its access log on SIGUSR1 (systemctl kill, and logrotate's postrotate), runs behind its socket
unit, stops cleanly, and the package removes and purges without leaving files behind."""
import re
import shutil
import subprocess
import time

import pytest

from conftest import Booted, debian_root, extract, needs_root_and

# What the test drives the container with, beside what the package's Depends pulls in.
TOOLS = ["systemd", "systemd-sysv", "curl", "logrotate"]


def depends_packages(deb):
    depends = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True,
                             text=True, check=True).stdout
    return [re.split(r"[\s(]", alt.strip())[0] for alt in depends.split(",")]


def test_lintian_reports_no_error(deb, capsys):
    needs_root_and("lintian")
    changes = next(deb.parent.glob("ringhttpd_*.changes"))
    p = subprocess.run(["lintian", "--display-level", ">=warning", "--fail-on", "error",
                        str(changes)], capture_output=True, text=True)
    tags = [ln for ln in p.stdout.splitlines() if re.match(r"[EWIPX]: ", ln)]
    with capsys.disabled():
        print(f"\nlintian: {len(tags)} error or warning tags" +
              "".join(f"\n  {t}" for t in tags))
    assert p.returncode == 0 and not [t for t in tags if t.startswith("E: ")], p.stdout + p.stderr


def test_package_holds_what_an_operator_expects(deb):
    files = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                           check=True).stdout
    for path in ("./usr/sbin/ringhttpd", "./usr/share/man/man8/ringhttpd.8.gz",
                 "./lib/systemd/system/ringhttpd.service", "./lib/systemd/system/ringhttpd.socket",
                 "./etc/ringhttpd/ringhttpd.yaml", "./etc/logrotate.d/ringhttpd",
                 "./var/log/ringhttpd/"):
        assert re.search(rf" {re.escape(path)}$", files, re.M), path
    assert "/usr/bin/" not in files
    conffiles = subprocess.run(f"dpkg-deb --ctrl-tarfile {deb} | tar -xOf - ./conffiles",
                               shell=True, capture_output=True, text=True, check=True).stdout
    assert "/etc/ringhttpd/ringhttpd.yaml" in conffiles.split()
    # ${shlibs:Depends}: the libraries the binary links, each with its version floor.
    deps = depends_packages(deb)
    for lib in ("libc6", "liburing2", "libssl3", "libyaml-0-2", "libngtcp2-9", "libcurl4",
                "libjansson4", "adduser", "procps"):
        assert lib in deps, deps
    # HTTP/2 and HTTP/3 are the server's own (issues 30, 29): libnghttp2 and libnghttp3 are test
    # oracles, not dependencies.
    assert not any(d.startswith(("libnghttp2", "libnghttp3")) for d in deps), deps


@pytest.fixture(scope="module")
def ct(deb, tmp_path_factory):
    needs_root_and("mmdebstrap", "systemd-nspawn", "nsenter")
    tarball = debian_root(TOOLS + depends_packages(deb))
    root = extract(tarball, tmp_path_factory.mktemp("deb") / "root")
    (root / "root" / deb.name).write_bytes(deb.read_bytes())
    booted = Booted(root, "ringhttpd-deb")
    booted.deb = f"/root/{deb.name}"
    yield booted
    booted.stop()
    shutil.rmtree(root)  # some 300 MB


def wait_for(ct, cmd, what, tries=100):
    for _ in range(tries):  # the access log is written at least once a second
        if ct.run(cmd).returncode == 0:
            return
        time.sleep(0.1)
    pytest.fail(f"{what}: `{cmd}` never succeeded")


def test_dpkg_installs_it_and_leaves_the_units_disabled(ct):
    ct.check(f"dpkg -i {ct.deb}")
    ct.check("test \"$(dpkg-query -W -f '${db:Status-Status}' ringhttpd)\" = installed")
    uid = int(ct.check("id -u ringhttpd"))
    assert 100 <= uid < 1000, uid  # a system user
    assert ct.check("getent passwd ringhttpd | cut -d: -f7").strip() in (
        "/usr/sbin/nologin", "/bin/false")
    assert ct.check("stat -c %U:%G:%a /var/log/ringhttpd").strip() == "ringhttpd:adm:750"
    assert ct.check("stat -c %U:%G:%a /var/log/ringhttpd/access.log").strip() == \
        "ringhttpd:adm:640"
    for unit in ("ringhttpd.service", "ringhttpd.socket"):
        assert ct.run(f"systemctl is-enabled {unit}").stdout.strip() == "disabled", unit
        assert ct.run(f"systemctl is-active {unit}").stdout.strip() == "inactive", unit
    ct.check("ringhttpd --check-config /etc/ringhttpd/ringhttpd.yaml")


def test_the_service_starts_from_its_unit_and_serves_the_default_page(ct):
    ct.check("systemctl enable --now ringhttpd.service")
    assert ct.check("systemctl is-active ringhttpd.service").strip() == "active"
    page = ct.check("curl -fsS http://127.0.0.1/")
    assert "Welcome to ringhttpd" in page
    assert page == ct.check("cat /usr/share/ringhttpd/html/index.html")
    pid = ct.check("systemctl show -p MainPID --value ringhttpd.service").strip()
    uid = ct.check(f"awk '/^Uid:/ {{print $2}}' /proc/{pid}/status").strip()
    assert uid == ct.check("id -u ringhttpd").strip()
    wait_for(ct, "grep -q '\"GET / HTTP/1.1\" 200' /var/log/ringhttpd/access.log",
             "the request logged in /var/log/ringhttpd/access.log")


def test_an_edited_configuration_takes_effect_on_reload(ct):
    ct.check("echo 'header: \"X-Reloaded: yes\"' >>/etc/ringhttpd/ringhttpd.yaml")
    ct.check("ringhttpd --check-config /etc/ringhttpd/ringhttpd.yaml")
    ct.check("systemctl reload ringhttpd.service")
    wait_for(ct, "curl -fsSI http://127.0.0.1/ | grep -qi '^X-Reloaded: yes'",
             "the edited file's header after systemctl reload")


def test_a_replaced_configuration_takes_effect_and_a_broken_one_fails_the_reload(ct):
    """Issue 36: sed -i writes a new file and renames it over the old one; under Landlock every
    reload after it failed ("Permission denied") while systemctl reload said nothing. Now it
    takes effect, and a file with an error fails `systemctl reload` (ExecReload checks it)."""
    ct.check("sed -i 's/X-Reloaded: yes/X-Reloaded: sed/' /etc/ringhttpd/ringhttpd.yaml")
    ct.check("systemctl reload ringhttpd.service")
    wait_for(ct, "curl -fsSI http://127.0.0.1/ | grep -qi '^X-Reloaded: sed'",
             "the file sed -i replaced, after systemctl reload")
    ct.check("cp /etc/ringhttpd/ringhttpd.yaml /tmp/good.yaml && "
             "echo 'no-such-key: 1' >>/etc/ringhttpd/ringhttpd.yaml")
    assert ct.run("systemctl reload ringhttpd.service").returncode != 0
    ct.check("mv /tmp/good.yaml /etc/ringhttpd/ringhttpd.yaml && systemctl reload ringhttpd")
    assert ct.check("systemctl is-active ringhttpd.service").strip() == "active"
    ct.check("curl -fsSI http://127.0.0.1/ | grep -qi '^X-Reloaded: sed'")


def test_usr1_from_systemctl_kill_reopens_the_access_log(ct):
    ct.check("mv /var/log/ringhttpd/access.log /var/log/ringhttpd/moved.log")
    ct.check("systemctl kill -s USR1 --kill-who=main ringhttpd.service")
    wait_for(ct, "journalctl -u ringhttpd --no-pager | grep -q 'reopening the access log'",
             "the reopen logged")
    ct.check("curl -fsS -o /dev/null 'http://127.0.0.1/?after-usr1'")
    wait_for(ct, "grep -q after-usr1 /var/log/ringhttpd/access.log", "a new access.log")
    assert ct.run("grep -q after-usr1 /var/log/ringhttpd/moved.log").returncode == 1
    ct.check("rm /var/log/ringhttpd/moved.log")


def test_logrotate_rotates_and_the_server_writes_the_new_file(ct):
    ct.check("logrotate -f /etc/logrotate.d/ringhttpd")
    ct.check("test -s /var/log/ringhttpd/access.log.1")
    ct.check("curl -fsS -o /dev/null 'http://127.0.0.1/?after-logrotate'")
    wait_for(ct, "grep -q after-logrotate /var/log/ringhttpd/access.log",
             "the line after logrotate in the new access.log")
    assert ct.run("grep -q after-logrotate /var/log/ringhttpd/access.log.1").returncode == 1
    assert ct.check("stat -c %U:%G:%a /var/log/ringhttpd/access.log").strip() == \
        "ringhttpd:adm:640"


def test_it_stops_cleanly(ct):
    ct.check("systemctl stop ringhttpd.service")
    assert ct.check("systemctl show -p Result --value ringhttpd.service").strip() == "success"
    assert ct.check("systemctl show -p ExecMainStatus --value ringhttpd.service").strip() == "0"
    ct.check("systemctl disable ringhttpd.service")


def test_the_socket_unit_starts_it_on_the_first_connection(ct):
    ct.check("systemctl start ringhttpd.socket")
    assert ct.run("systemctl is-active ringhttpd.service").stdout.strip() == "inactive"
    assert "Welcome to ringhttpd" in ct.check("curl -fsS http://127.0.0.1/")
    assert ct.check("systemctl is-active ringhttpd.service").strip() == "active"
    ct.check("journalctl -u ringhttpd --no-pager | grep -q 'on sockets from systemd'")
    ct.check("systemctl stop ringhttpd.socket ringhttpd.service")
    assert ct.check("systemctl show -p Result --value ringhttpd.service").strip() == "success"


def test_remove_then_purge_leave_nothing_behind(ct):
    ct.check("dpkg -r ringhttpd")
    ct.check("test ! -e /usr/sbin/ringhttpd && test ! -e /lib/systemd/system/ringhttpd.service")
    ct.check("test -e /etc/ringhttpd/ringhttpd.yaml")  # a conffile stays until the purge
    ct.check("dpkg -P ringhttpd")
    ct.check("test \"$(dpkg-query -W -f '${db:Status-Status}' ringhttpd 2>/dev/null)\" "
             "!= installed")
    left = ct.run("find /etc /lib /usr /var -name '*ringhttpd*' -not -path '/root/*' "
                  "-not -path '/var/log/journal/*'").stdout.split()
    assert not left, left
    ct.check("test ! -e /var/www/html/index.html")
    ct.check("systemctl daemon-reload && ! systemctl cat ringhttpd.service >/dev/null 2>&1")
