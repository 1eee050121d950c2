"""Install, documentation and packaging (issue 13): --help, README and ringhttpd(8) list the same
options, the man page lints clean, the systemd units verify, make install/uninstall honour PREFIX
and DESTDIR, make static links statically, and the build dependencies are one list (issue 31).
The .deb and the container image are built and run by tests/packaging (make test-packaging)."""
import os
import pathlib
import re
import shutil
import struct
import subprocess

import pytest

from conftest import RINGHTTPD
from optiontable import option_table

REPO = pathlib.Path(__file__).resolve().parents[2]
MAN = REPO / "doc" / "ringhttpd.8"


def help_options():
    out = subprocess.run([RINGHTTPD, "--help"], capture_output=True, text=True, check=True).stdout
    opts = set()
    for line in out.splitlines():
        m = re.match(r"\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", line)
        if m:
            opts.add(m.group(1))
    return opts


def readme_options():
    text = (REPO / "README.md").read_text()
    opts = set()
    for line in text.splitlines():
        if line.startswith("| `-"):
            first_cell = line.split("|")[1]
            opts.update(re.findall(r"--[a-z][a-z0-9-]*", first_cell))
    return opts


def man_options():
    lines = MAN.read_text().splitlines()
    start = lines.index(".SH OPTIONS")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(".SH "))
    opts = set()
    for i in range(start, end - 1):
        if lines[i] == ".TP":
            opts.update("--" + o.replace("\\-", "-")
                        for o in re.findall(r"\\-\\-([a-z][a-z0-9\\-]*)", lines[i + 1]))
    return opts


def test_help_readme_and_man_page_list_the_same_options():
    """All three list the option table's command-line options (--help is printed from it)."""
    h, r, m = help_options(), readme_options(), man_options()
    t = {"--" + o.name for o in option_table().values() if o.where != "file"}
    assert h == t, f"--help vs the table: only in --help {h - t}, only in the table {t - h}"
    assert h == r, f"--help vs README: only in --help {h - r}, only in README {r - h}"
    assert h == m, f"--help vs man page: only in --help {h - m}, only in ringhttpd.8 {m - h}"


def test_man_page_lints_clean():
    linted = False
    if shutil.which("mandoc"):
        p = subprocess.run(["mandoc", "-Tlint", "-Wwarning", str(MAN)], capture_output=True,
                           text=True)
        assert p.returncode == 0 and not p.stdout.strip(), p.stdout + p.stderr
        linted = True
    if shutil.which("groff"):
        p = subprocess.run(["groff", "-man", "-ww", "-z", str(MAN)], capture_output=True,
                           text=True)
        assert p.returncode == 0 and not p.stderr.strip(), p.stderr
        linted = True
    if not linted:
        pytest.skip("neither mandoc nor groff is installed (scripts/deps.sh test installs groff)")
    for section in ("SIGNALS", "EXIT STATUS", "FILES", "EXAMPLES", "ZERO-DOWNTIME RESTART"):
        assert f".SH {section}" in MAN.read_text() or f'.SH "{section}"' in MAN.read_text()


@pytest.mark.skipif(not shutil.which("systemd-analyze"),
                    reason="systemd-analyze missing (Debian package systemd)")
def test_systemd_units_verify(tmp_path):
    binary = pathlib.Path(RINGHTTPD).resolve()
    service = (REPO / "dist" / "ringhttpd.service").read_text()
    (tmp_path / "ringhttpd.service").write_text(service.replace("@BINDIR@", str(binary.parent)))
    shutil.copy(REPO / "dist" / "ringhttpd.socket", tmp_path / "ringhttpd.socket")
    p = subprocess.run(["systemd-analyze", "verify", "--man=no",
                        str(tmp_path / "ringhttpd.socket"), str(tmp_path / "ringhttpd.service")],
                       capture_output=True, text=True)
    ours = [ln for ln in (p.stdout + p.stderr).splitlines() if "ringhttpd" in ln]
    assert p.returncode == 0 and not ours, p.stdout + p.stderr
    for directive in ("User=", "ProtectSystem=strict", "ProtectHome=yes",
                      "NoNewPrivileges=yes", "PrivateTmp=yes", "RestrictAddressFamilies=",
                      "SystemCallFilter=", "io_uring_setup", "Type=notify"):
        assert directive in service, directive
    # Both make openat2 fail with ENOSYS (systemd's RestrictSUIDSGID filter), and ringhttpd then
    # refuses to start: found running the unit under a booted systemd 252 container.
    settings = [ln.strip() for ln in service.splitlines() if not ln.lstrip().startswith("#")]
    assert not any(ln.startswith(("DynamicUser=yes", "RestrictSUIDSGID=yes")) for ln in settings)


def test_make_install_and_uninstall_honour_prefix_and_destdir(tmp_path):
    dest = tmp_path / "dest"
    env = dict(os.environ, MAKEFLAGS="")
    subprocess.run(["make", "-s", "-C", str(REPO), "install", f"DESTDIR={dest}", "PREFIX=/opt/rh"],
                   check=True, env=env, capture_output=True)
    want = ["opt/rh/bin/ringhttpd", "opt/rh/share/man/man8/ringhttpd.8",
            "opt/rh/lib/systemd/system/ringhttpd.service",
            "opt/rh/lib/systemd/system/ringhttpd.socket"]
    for rel in want:
        assert (dest / rel).is_file(), rel
    assert os.access(dest / want[0], os.X_OK)
    unit = (dest / want[2]).read_text()
    assert "ExecStart=/opt/rh/bin/ringhttpd " in unit and "@BINDIR@" not in unit
    subprocess.run(["make", "-s", "-C", str(REPO), "uninstall", f"DESTDIR={dest}",
                    "PREFIX=/opt/rh"], check=True, env=env, capture_output=True)
    left = [p for p in dest.rglob("*") if p.is_file()]
    assert not left, left


def _is_static_elf(path):
    with open(path, "rb") as f:
        data = f.read(1 << 16)
    assert data[:4] == b"\x7fELF" and data[4] == 2, "not a 64-bit ELF"
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    types = [struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)]
    return 3 not in types and 2 not in types  # no PT_INTERP, no PT_DYNAMIC


@pytest.fixture(scope="module")
def static_binary():
    env = dict(os.environ, MAKEFLAGS="")
    subprocess.run(["make", "-s", "-C", str(REPO), "static"], check=True, env=env,
                   capture_output=True)
    return REPO / "build" / "static" / "ringhttpd"


@pytest.mark.slow
def test_make_static_builds_a_static_binary_that_serves(static_binary):
    assert _is_static_elf(static_binary)
    out = subprocess.run([str(static_binary), "--version"], capture_output=True, text=True,
                         check=True)
    assert out.stdout.startswith("ringhttpd ")


def _udp_ports():
    """The local port of every UDP socket on the machine (IPv4 and IPv6)."""
    ports = set()
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        with open(table) as f:
            ports |= {int(ln.split()[1].rsplit(":", 1)[1], 16) for ln in f.readlines()[1:]}
    return ports


@pytest.mark.slow
def test_make_static_says_what_it_left_out_and_never_claims_it(static_binary, make_server,
                                                               test_ca):
    """make static is the small variant without HTTP/3 and ACME (issue 36): --version names
    both as left out, a TLS port's start warns that HTTP/3 is not there, its listening line
    does not say "HTTP/3 on UDP" (the old one did, with no UDP socket open) and none is
    open, and --acme-email is refused with the reason."""
    out = subprocess.run([str(static_binary), "--version"], capture_output=True, text=True,
                         check=True).stdout
    built = next(ln for ln in out.splitlines() if ln.startswith("built with:"))
    assert "HTTP/3" not in built and "ACME" not in built, out
    assert "left out: HTTP/3 (HTTP3=no), ACME (ACME=no)" in out, out
    ca, crt, key = test_ca
    srv = make_server(REPO / "www", binary=str(static_binary),
                      args=["--tls-port", "0", "--tls-cert", str(crt), "--tls-key", str(key)])
    line = next(ln for ln in srv.stderr_text().splitlines() if "listening on https://" in ln)
    assert "HTTP/3" not in line, line
    assert "HTTP/3: not in this build" in srv.stderr_text()
    tls_port = int(re.search(r"https://127\.0\.0\.1:(\d+)/", line).group(1))
    assert tls_port not in _udp_ports()
    p = subprocess.run(["curl", "-sS", "--cacert", str(ca), f"https://127.0.0.1:{tls_port}/"],
                       capture_output=True, timeout=10)
    assert p.returncode == 0 and p.stdout == (REPO / "www" / "index.html").read_bytes()
    acme = make_server(REPO / "www", binary=str(static_binary), ready=False,
                       args=["--tls-port", "0", "--acme-email", "ops@example.org",
                             "--acme-domain", "a.test", "--acme-state", "/nonexistent/acme"])
    assert acme.proc.wait(timeout=10) != 0
    acme.stop()
    assert "this build has no ACME client (made with ACME=no" in acme.stderr_text()


def test_version_lists_the_build_s_features():
    """The binary a package or the image holds has everything (issue 36)."""
    out = subprocess.run([RINGHTTPD, "--version"], capture_output=True, text=True,
                         check=True).stdout
    built = next(ln for ln in out.splitlines() if ln.startswith("built with:"))
    for feature in ("HTTP/2", "TLS (OpenSSL 3", "kTLS", "HTTP/3 (ngtcp2 ", "ACME (libcurl ",
                    "io_uring", "epoll"):
        assert feature in built, out
    assert "left out: nothing" in out, out


def _build_depends():
    text = (REPO / "debian" / "control").read_text()
    field = re.search(r"^Build-Depends:(.*?)^\S", text, re.M | re.S).group(1)
    field = "\n".join(ln for ln in field.splitlines() if not ln.lstrip().startswith("#"))
    return {re.split(r"[\s(]", d.strip())[0] for d in field.split(",") if d.strip()}


def test_one_list_of_build_dependencies():
    """scripts/deps.sh's BUILD_DEPS is the list: the Containerfile's build stage installs what
    `deps.sh --list build` prints, and debian/control names the same packages (less
    build-essential's, which every Debian build has). The Containerfile and tests/packaging
    check that the list is enough (issue 31)."""
    listed = subprocess.run([str(REPO / "scripts" / "deps.sh"), "--list", "build"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert {"liburing-dev", "libssl-dev", "libnghttp2-dev", "gcc", "make"} <= set(listed)
    build_essential = {"gcc", "make", "libc6-dev"}
    assert _build_depends() - {"debhelper-compat"} == set(listed) - build_essential
    containerfile = (REPO / "Containerfile").read_text()
    build_stage = containerfile.split("\nFROM ")[1]
    assert "COPY scripts/deps.sh" in build_stage and "$(scripts/deps.sh --list build)" in \
        build_stage


def test_debian_changelog_names_the_binary_version():
    first = (REPO / "debian" / "changelog").read_text().splitlines()[0]
    version = re.match(r"ringhttpd \(([^)]+)\)", first).group(1)
    out = subprocess.run([RINGHTTPD, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.split()[1] == version, (first, out.stdout)
