"""Helpers for the packaging tests (make test-packaging; root, minutes, not in make check).

debian_root(includes) -> path of a Debian 12 root tarball made by mmdebstrap (minbase variant
    plus `includes`), cached in .cache/packaging under a name that hashes the variant and the
    package list, made anew after a week or with PACKAGING_FRESH=1 (and those a week old
    removed). mmdebstrap downloads Debian packages; nothing else here uses the network.
deb (session fixture) -> pathlib.Path of build/deb/ringhttpd_*_ARCH.deb, built by `make deb`
    unless make test-packaging already did.
Booted(root, name): a systemd-nspawn container booted (-b) from the extracted root `root` with a
    private network (loopback only), as scripts/systemd-container.sh boots one. .run(cmd) runs a
    shell command inside it (nsenter into all its namespaces) and returns the CompletedProcess;
    .check(cmd) fails the test when it exits non-zero; .stop() powers it off.
"""
import hashlib
import os
import pathlib
import shutil
import subprocess
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "packaging"
SUITE = "bookworm"
MAX_AGE = 7 * 24 * 3600


def needs_root_and(*tools):
    if os.geteuid() != 0:
        pytest.skip("needs root (scripts/deps.sh packaging, make test-packaging)")
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.skip(f"missing {missing}: scripts/deps.sh packaging installs them")


def debian_root(includes):
    includes = sorted(set(includes))
    key = hashlib.sha256(" ".join([SUITE, "minbase", *includes]).encode()).hexdigest()[:16]
    tarball = CACHE / f"{SUITE}-minbase-{key}.tar"
    fresh = (tarball.exists() and time.time() - tarball.stat().st_mtime < MAX_AGE
             and os.environ.get("PACKAGING_FRESH") != "1")
    if not fresh:
        CACHE.mkdir(parents=True, exist_ok=True)
        part = tarball.with_suffix(".part.tar")
        cmd = ["mmdebstrap", "--quiet", "--variant=minbase",
               *(["--include=" + ",".join(includes)] if includes else []), SUITE, str(part)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
        assert p.returncode == 0, f"{' '.join(cmd)}:\n{p.stdout}{p.stderr}"
        part.rename(tarball)
        for old in CACHE.glob("*.tar"):  # roots no test asked for in a week
            if time.time() - old.stat().st_mtime > MAX_AGE:
                old.unlink()
        print(f"\nmade {tarball.name} with mmdebstrap ({len(includes)} packages included)")
    return tarball


def extract(tarball, dest):
    dest.mkdir(parents=True)
    subprocess.run(["tar", "-C", str(dest), "--numeric-owner", "-xf", str(tarball)], check=True)
    return dest


@pytest.fixture(scope="session")
def deb():
    found = sorted((REPO / "build" / "deb").glob("ringhttpd_*.deb"))
    if not found:
        subprocess.run(["make", "-s", "-C", str(REPO), "deb"], check=True,
                       env=dict(os.environ, MAKEFLAGS=""), timeout=1800)
        found = sorted((REPO / "build" / "deb").glob("ringhttpd_*.deb"))
    assert len(found) == 1, found
    return found[0]


class Booted:
    def __init__(self, root, name):
        self.root = pathlib.Path(root)
        self.log = open(self.root.parent / "boot.log", "wb")
        # nspawn 252's own seccomp filter does not know the Landlock calls (see
        # scripts/systemd-container.sh); ringhttpd uses them.
        self.nspawn = subprocess.Popen(
            ["systemd-nspawn", "-q", "-D", str(self.root), "-b", "--register=no", "--keep-unit",
             "--private-network", "-M", name,
             "--system-call-filter=landlock_create_ruleset landlock_add_rule "
             "landlock_restrict_self"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        self.init = None
        for _ in range(200):
            if self.nspawn.poll() is not None:
                break
            p = subprocess.run(["pgrep", "-P", str(self.nspawn.pid), "-x", "systemd"],
                               capture_output=True, text=True)
            if p.stdout.strip():
                self.init = p.stdout.split()[0]
                state = self.run("systemctl is-system-running").stdout.strip()
                if state in ("running", "degraded"):
                    return
            time.sleep(0.3)
        self.stop()
        pytest.fail("the container did not boot:\n" +
                    (self.root.parent / "boot.log").read_text(errors="replace")[-3000:])

    def run(self, cmd, timeout=300):
        return subprocess.run(["nsenter", "-t", self.init, "-a", "sh", "-c", cmd],
                              capture_output=True, text=True, timeout=timeout)

    def check(self, cmd, timeout=300):
        p = self.run(cmd, timeout)
        assert p.returncode == 0, f"{cmd}: exit {p.returncode}\n{p.stdout}{p.stderr}"
        return p.stdout

    def stop(self):
        if self.nspawn.poll() is None:
            if self.init:
                self.run("systemctl poweroff --no-block", timeout=30)
            try:
                self.nspawn.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.nspawn.kill()
                self.nspawn.wait()
        self.log.close()


@pytest.fixture(scope="session")
def tls_pair(tmp_path_factory):
    """(ca.crt, localhost.crt, localhost.key) in a directory anyone may read (a container's
    unprivileged user reads them): a CA made for this session and a P-256 leaf it signed for
    localhost and 127.0.0.1."""
    d = tmp_path_factory.mktemp("tls")
    d.chmod(0o755)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run = lambda *a: subprocess.run(["openssl", *map(str, a)], check=True, capture_output=True)
    run("req", "-x509", *ec, "-keyout", d / "ca.key", "-out", d / "ca.crt", "-subj",
        "/CN=ringhttpd packaging test CA", "-days", "2")
    run("req", "-new", *ec, "-keyout", d / "localhost.key", "-out", d / "localhost.csr",
        "-subj", "/CN=localhost")
    (d / "ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                           "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", d / "localhost.csr", "-CA", d / "ca.crt", "-CAkey", d / "ca.key",
        "-CAcreateserial", "-days", "1", "-extfile", d / "ext", "-out", d / "localhost.crt")
    for f in d.iterdir():
        f.chmod(0o644)
    return d / "ca.crt", d / "localhost.crt", d / "localhost.key"
