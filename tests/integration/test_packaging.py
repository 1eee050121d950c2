"""Install, documentation and packaging (issue 13): --help, README and ringhttpd(8) list the same
options, the man page lints clean, the systemd units verify, make install/uninstall honour PREFIX
and DESTDIR, make static links statically, and the container recipe builds and serves where a
container engine can run."""
import os
import pathlib
import re
import shutil
import socket
import struct
import subprocess
import time

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


@pytest.mark.slow
def test_make_static_builds_a_static_binary_that_serves(tmp_path):
    env = dict(os.environ, MAKEFLAGS="")
    subprocess.run(["make", "-s", "-C", str(REPO), "static"], check=True, env=env,
                   capture_output=True)
    binary = REPO / "build" / "static" / "ringhttpd"
    assert _is_static_elf(binary)
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("ringhttpd ")


def _container_engine():
    for tool in ("podman", "docker"):
        if shutil.which(tool):
            try:
                p = subprocess.run([tool, "info"], capture_output=True, timeout=20)
            except subprocess.TimeoutExpired:
                continue
            if p.returncode == 0:
                return tool
    return None


@pytest.mark.slow
def test_container_builds_and_serves_as_non_root():
    tool = _container_engine()
    if not tool:
        pytest.skip("no container engine can run containers here (podman/docker info fails)")
    tag = "ringhttpd-test:latest"
    subprocess.run([tool, "build", "-f", str(REPO / "Containerfile"), "-t", tag, str(REPO)],
                   check=True, capture_output=True, timeout=900)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cid = subprocess.run([tool, "run", "-d", "--rm", "-p", f"127.0.0.1:{port}:8080", tag],
                         check=True, capture_output=True, text=True).stdout.strip()
    try:
        user = subprocess.run([tool, "inspect", "-f", "{{.Config.User}}", tag],
                              capture_output=True, text=True).stdout.strip()
        assert user and not user.startswith("0"), user
        for _ in range(100):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as c:
                    c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    if c.recv(12).startswith(b"HTTP/1.1 200"):
                        break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            pytest.fail("the container did not answer")
    finally:
        subprocess.run([tool, "stop", "-t", "5", cid], capture_output=True)
