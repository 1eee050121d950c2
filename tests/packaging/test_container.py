"""The Containerfile (issues 31, 36) builds for real, and its image is the package's binary with
every feature (HTTP/3, ACME) and exactly the shared libraries it loads, served as a non-root
user; contrib/kubernetes's Deployment starts from it as written.

With podman where it can run containers here: the build stage starts from a Debian 12 image made
from an mmdebstrap tarball (`podman import`: no registry is reachable here), `podman build`, then
`podman run`. Where podman cannot run, the Containerfile's own instructions are carried out
instead: its build stage's COPY/WORKDIR/RUN in a fresh Debian 12 root (RUN under
systemd-nspawn), its final stage's COPYs into an empty root, and its USER and ENTRYPOINT/CMD run
there with only /proc, /dev and the test's mounts. Either way a build dependency missing from
`scripts/deps.sh --list build` fails the build, and the image is built once for the module. The
tests print which of the two ran; RINGHTTPD_CONTAINER=root forces the second.

Against the image: its files and size (printed), --version, serving www/ as 65534, HTTP/3 with
aioquic (.venv), automatic HTTPS against Debian's Pebble on loopback (the container shares the
host's network), and the Kubernetes Deployment's command line, user, mounts and probes."""
import json
import os
import pathlib
import shlex
import shutil
import signal
import socket
import subprocess
import time
import sys
import urllib.request

import pytest

from conftest import REPO, debian_root, extract, needs_root_and, tls_pair  # noqa: F401

sys.path.insert(0, str(REPO / "tests" / "integration"))
from h3client import h3_get  # noqa: E402 (aioquic, as test_h3 uses it)

CONTAINERFILE = REPO / "Containerfile"
DEPLOYMENT = REPO / "contrib" / "kubernetes" / "ringhttpd.yaml"
# podman's defaults do not fit this kind of machine: crun refuses its hybrid cgroup hierarchy
# (runc does not), and a container's rlimits may not exceed the caller's (20000 open files).
PODMAN = ["podman", "--cgroup-manager", "cgroupfs"] + (["--runtime", "runc"]
                                                       if shutil.which("runc") else [])
ULIMITS = ["--ulimit", "nofile=%d:%d" % ((min(os.sysconf("SC_OPEN_MAX"), 65536),) * 2),
           "--ulimit", "nproc=4096:4096"]


def instructions(stage_from):
    """[(KEYWORD, argument)] of the Containerfile stage that starts at the FROM matching
    `stage_from` (continuation lines joined, comments dropped)."""
    lines, cur = [], ""
    for raw in CONTAINERFILE.read_text().splitlines():
        if raw.lstrip().startswith("#") and not cur:
            continue
        cur += raw.rstrip("\\").strip() + " " if raw.endswith("\\") else raw.strip()
        if not raw.endswith("\\"):
            if cur:
                lines.append(cur)
            cur = ""
    stages, stage = [], None
    for ln in lines:
        kw, _, arg = ln.partition(" ")
        if kw.upper() == "FROM":
            stage = []
            stages.append((arg, stage))
        elif stage is not None:
            stage.append((kw.upper(), arg.strip()))
    return next(st for frm, st in stages if stage_from(frm))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def podman_works(base):
    if os.environ.get("RINGHTTPD_CONTAINER") == "root" or not shutil.which("podman"):
        return False
    p = subprocess.run(PODMAN + ["run", "--rm", *ULIMITS, base, "true"], capture_output=True,
                       text=True, timeout=120)
    if p.returncode:
        print(f"\npodman cannot run a container here: {p.stderr.strip()[-500:]}")
    return p.returncode == 0


def copy_in(src, dest):
    if src.is_dir():
        shutil.copytree(src, dest, dirs_exist_ok=True, symlinks=True)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


class Running:
    """One container: .url(container_port, path) reaches it from here, .output() is what it
    wrote (stdout and stderr), .uid() its process's real uid, .stop() ends it (exit status)."""

    def __init__(self, image, handle, ports, netns):
        self.image, self.handle, self.ports, self.netns = image, handle, ports, netns

    def get(self, cport, path, tries=100):
        """(status, body) of GET path on the container's TCP port cport, waiting for it."""
        for _ in range(tries):
            if self.image.podman:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.ports[cport]}{path}",
                                                timeout=2) as r:
                        return r.status, r.read()
                except urllib.error.HTTPError as e:
                    return e.code, e.read()
                except OSError:
                    pass
            else:  # its own network namespace: ask from inside it
                p = subprocess.run(["nsenter", "-t", str(self.pid()), "-n", "curl", "-sS",
                                    "--max-time", "2", "-w", "\n%{http_code}",
                                    f"http://127.0.0.1:{cport}{path}"], capture_output=True)
                if p.returncode == 0:
                    body, _, code = p.stdout.rpartition(b"\n")
                    return int(code), body
            if not self.alive():
                pytest.fail("the container exited:\n" + self.output()[-3000:])
            time.sleep(0.1)
        pytest.fail(f"nothing answered on the container's port {cport}:\n" + self.output())

    def pid(self):
        if self.image.podman:
            return int(subprocess.run(PODMAN + ["inspect", "-f", "{{.State.Pid}}", self.handle],
                                      capture_output=True, text=True, check=True).stdout)
        return int(subprocess.run(["pgrep", "-P", str(self.handle.pid)], capture_output=True,
                                  text=True).stdout.split()[0])

    def uid(self):
        with open(f"/proc/{self.pid()}/status") as f:
            return next(ln.split()[1] for ln in f if ln.startswith("Uid:"))

    def alive(self):
        if self.image.podman:
            return subprocess.run(PODMAN + ["inspect", "-f", "{{.State.Running}}", self.handle],
                                  capture_output=True, text=True).stdout.strip() == "true"
        return self.handle.poll() is None

    def output(self):
        if self.image.podman:
            p = subprocess.run(PODMAN + ["logs", self.handle], capture_output=True, text=True)
            return p.stdout + p.stderr
        with open(self.handle.logname, errors="replace") as f:
            return f.read()

    def wait_output(self, text, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if text in self.output():
                return
            if not self.alive():
                break
            time.sleep(0.2)
        pytest.fail(f"no {text!r} from the container:\n" + self.output()[-4000:])

    def stop(self):
        if self.image.podman:
            subprocess.run(PODMAN + ["stop", "-t", "10", self.handle], capture_output=True)
            subprocess.run(PODMAN + ["rm", "-f", self.handle], capture_output=True)
            return
        if self.handle.poll() is None:
            try:
                os.kill(self.pid(), signal.SIGTERM)  # PID 1 inside drains; unshare follows
                self.handle.wait(timeout=30)
            except (IndexError, ProcessLookupError, subprocess.TimeoutExpired):
                self.handle.kill()  # --kill-child: the server goes with it
                self.handle.wait()


class Image:
    """The Containerfile's image, built once: with podman (.podman true, .tag), or as a root
    directory (.root) made by carrying out its instructions. .entrypoint/.cmd/.user are the
    final stage's; .files() lists what the image holds."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.started = []
        tarball = debian_root([])
        base = f"localhost/ringhttpd-build-base:{tarball.stem}-{int(tarball.stat().st_mtime)}"
        if shutil.which("podman") and subprocess.run(PODMAN + ["image", "exists", base]).returncode:
            old = subprocess.run(PODMAN + ["images", "-q", base.split(":")[0]],
                                 capture_output=True, text=True).stdout.split()
            if old:  # made from an older tarball
                subprocess.run(PODMAN + ["rmi", *old], capture_output=True)
            subprocess.run(PODMAN + ["import", str(tarball), base], check=True,
                           capture_output=True)
        self.podman = podman_works(base)
        if self.podman:
            self.mode = ("podman build and podman run (base image imported from an mmdebstrap "
                         f"tarball: {base})")
            self.build_with_podman(base)
        else:
            why = ("RINGHTTPD_CONTAINER=root" if os.environ.get("RINGHTTPD_CONTAINER") == "root"
                   else "podman cannot run here")
            self.mode = f"the Containerfile's instructions in a fresh Debian 12 root ({why})"
            self.build_in_roots(tarball)

    def build_with_podman(self, base):
        self.tag = "localhost/ringhttpd-test:latest"
        p = subprocess.run(PODMAN + ["build", *ULIMITS, "--build-arg", f"BASE={base}", "-f",
                                     str(CONTAINERFILE), "-t", self.tag, str(REPO)],
                           capture_output=True, text=True, timeout=1800)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        conf = json.loads(subprocess.run(PODMAN + ["image", "inspect", "-f", "{{json .Config}}",
                                                   self.tag], capture_output=True, text=True,
                                         check=True).stdout)
        self.entrypoint, self.cmd, self.user = conf["Entrypoint"], conf["Cmd"], conf["User"]
        self.size = int(subprocess.run(PODMAN + ["image", "inspect", "-f", "{{.Size}}", self.tag],
                                       capture_output=True, text=True, check=True).stdout)

    def build_in_roots(self, tarball):
        needs_root_and("systemd-nspawn", "unshare", "chroot", "nsenter")
        root = extract(tarball, self.tmp / "build")
        workdir, env = "/", []
        for kw, arg in instructions(lambda frm: frm.endswith(" AS build")):
            if kw == "WORKDIR":
                workdir = arg
            elif kw == "ENV":
                env += ["-E", arg.replace(" ", "=", 1) if "=" not in arg else arg]
            elif kw == "COPY":
                src, dest = arg.split()
                target = root / pathlib.Path(workdir, dest).relative_to("/")
                if dest.endswith("/"):
                    target = target / pathlib.Path(src).name
                copy_in(REPO / src, target)
            elif kw == "RUN":
                p = subprocess.run(["systemd-nspawn", "-q", "-D", str(root), "--register=no",
                                    "--keep-unit", f"--chdir={workdir}", *env, "/bin/sh", "-c",
                                    arg], capture_output=True, text=True, timeout=1800)
                assert p.returncode == 0, f"RUN {arg}:\n{p.stdout[-3000:]}{p.stderr[-3000:]}"
        self.root = self.tmp / "final"
        self.root.mkdir()
        self.entrypoint, self.cmd, self.user = [], [], ""
        for kw, arg in instructions(lambda frm: frm.strip() == "scratch"):
            if kw == "COPY":
                parts = arg.split()
                src_root = root if "--from=build" in parts else REPO
                src, dest = parts[-2:]
                copy_in(src_root / src.lstrip("/"), self.root / dest.lstrip("/"))
                chown = [o.split("=", 1)[1] for o in parts if o.startswith("--chown=")]
                if chown:
                    subprocess.run(["chown", "-R", chown[0], self.root / dest.lstrip("/")],
                                   check=True)
            elif kw == "USER":
                self.user = arg
            elif kw == "ENTRYPOINT":
                self.entrypoint = json.loads(arg)
            elif kw == "CMD":
                self.cmd = json.loads(arg)
        (self.root / "proc").mkdir(exist_ok=True)
        (self.root / "dev").mkdir(exist_ok=True)
        shutil.rmtree(root)
        self.size = int(subprocess.run(["du", "-sb", str(self.root)], capture_output=True,
                                       text=True, check=True).stdout.split()[0])

    def files(self):
        """Every path in the image, relative, without a leading slash."""
        if not self.podman:
            return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*")
                          if p.name not in ("proc", "dev") or p.parent != self.root)
        cid = subprocess.run(PODMAN + ["create", self.tag], capture_output=True, text=True,
                             check=True).stdout.strip()
        try:
            out = subprocess.run(f"{shlex.join(PODMAN)} export {cid} | tar -tf -", shell=True,
                                 capture_output=True, text=True, check=True).stdout
        finally:
            subprocess.run(PODMAN + ["rm", cid], capture_output=True)
        return sorted({f.strip("/") for f in out.split() if f.strip("/")})

    def run(self, args=None, entrypoint=None, user=None, mounts=(), own_net=False, publish=(),
            podman_opts=()):
        """Starts the image as a container: entrypoint and args replace ENTRYPOINT and CMD
        (Kubernetes' command and args); user replaces USER; mounts are (host path, path
        inside), read-only. own_net gives it a network namespace of its own (its TCP ports in
        publish reachable through .get); else it shares the host's loopback."""
        entry = self.entrypoint if entrypoint is None else entrypoint
        argv = self.cmd if args is None else args
        user = user or self.user
        if self.podman:
            cmd = PODMAN + ["run", "-d", *ULIMITS, "--user", user, *podman_opts]
            ports = {}
            if own_net:
                for cport in publish:
                    ports[cport] = free_port()
                    cmd += ["-p", f"127.0.0.1:{ports[cport]}:{cport}"]
            else:
                cmd += ["--network", "host"]
            for src, dst in mounts:
                cmd += ["-v", f"{src}:{dst}:ro"]
            cmd += ["--entrypoint", json.dumps(entry), self.tag, *argv]
            p = subprocess.run(cmd, capture_output=True, text=True)
            assert p.returncode == 0, p.stderr
            c = Running(self, p.stdout.strip(), ports, own_net)
        else:
            # A container's view: its own /proc, the host's /dev, the image's files, the mounts.
            binds = "".join(f"mkdir -p {self.root}{dst} && mount --bind {src} {self.root}{dst} "
                            f"&& mount -o remount,bind,ro {self.root}{dst} && "
                            for src, dst in mounts)
            script = (f"mount --rbind /dev {self.root}/dev && mount -t proc proc "
                      f"{self.root}/proc && {binds}" + ("ip link set lo up && " if own_net else "")
                      + f"exec chroot --userspec={user} {self.root} {shlex.join(entry + argv)}")
            log = self.tmp / f"container-{len(self.started)}.log"
            with open(log, "wb") as f:
                handle = subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "--kill-child",
                                           *(["--net"] if own_net else []), "sh", "-c", script],
                                          stdout=f, stderr=subprocess.STDOUT)
            handle.logname = log
            for _ in range(100):  # until sh has exec'd the server (inside: PID 1)
                kids = subprocess.run(["pgrep", "-P", str(handle.pid)], capture_output=True,
                                      text=True).stdout.split()
                try:
                    if kids and os.readlink(f"/proc/{kids[0]}/exe").endswith("ringhttpd"):
                        break
                except OSError:  # between fork and exec, or gone
                    pass
                if handle.poll() is not None:
                    break
                time.sleep(0.05)
            c = Running(self, handle, {}, own_net)
        self.started.append(c)
        return c

    def remove(self):
        for c in self.started:
            c.stop()
        if self.podman:
            # The image and its build stage's (some 600 MB, left untagged): not kept run after run.
            subprocess.run(PODMAN + ["rmi", self.tag], capture_output=True)
            subprocess.run(PODMAN + ["image", "prune", "-f"], capture_output=True)


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    needs_root_and("mmdebstrap")
    tmp = tmp_path_factory.mktemp("image")
    tmp.chmod(0o755)
    img = Image(tmp)
    yield img
    img.remove()


@pytest.fixture
def started(image):
    """Stops the containers a test started, at its end."""
    mark = len(image.started)
    yield
    for c in image.started[mark:]:
        c.stop()


def public_dir(tmp_path, name):
    """A directory 65534 can read (pytest's tmp_path is root's alone)."""
    base = pathlib.Path(tmp_path)
    for p in [base, *base.parents]:
        if p == pathlib.Path("/tmp"):
            break
        p.chmod(p.stat().st_mode | 0o755)
    d = base / name
    d.mkdir(mode=0o755)
    return d


def version_lines(image):
    """What the image's binary says to --version, run as the image's user."""
    if image.podman:
        cmd = PODMAN + ["run", "--rm", *ULIMITS, "--entrypoint", '["/ringhttpd"]', image.tag,
                        "--version"]
    else:
        cmd = ["chroot", f"--userspec={image.user}", str(image.root), "/ringhttpd", "--version"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_image_is_the_binary_with_its_libraries_as_non_root(image, started, capsys):
    assert image.user and image.user.split(":")[0] not in ("0", "root"), image.user
    with capsys.disabled():
        print(f"\ncontainer tests: {image.mode}\nimage size: {image.size} bytes "
              f"({image.size / 1e6:.1f} MB)")
    # The dynamic binary and the libraries it loads, nothing else: no shell, no package manager.
    assert image.size < 40_000_000, image.size
    files = image.files()
    assert "ringhttpd" in files and "www/index.html" in files, files
    assert not [f for f in files if f.startswith(("bin/", "sbin/", "usr/bin", "usr/sbin",
                                                  "var/lib/dpkg", "var/lib/apt"))], files
    assert "etc/ssl/certs/ca-certificates.crt" in files  # the ACME client's HTTPS trust
    assert any(f.startswith("usr/lib/x86_64-linux-gnu/libngtcp2") for f in files) or \
        os.uname().machine != "x86_64", files
    # --version lists what the build has; the image leaves nothing out.
    out = version_lines(image)
    assert "HTTP/3" in out.split("built with:")[1].split("\n")[0], out
    assert "ACME" in out.split("built with:")[1].split("\n")[0], out
    assert "left out: nothing" in out, out
    c = image.run(own_net=True, publish=[8080])  # as it is: ENTRYPOINT's --port 8080, CMD
    status, body = c.get(8080, "/")
    assert status == 200 and body == (REPO / "www" / "index.html").read_bytes()
    assert c.uid() == image.user.split(":")[0]


def test_image_answers_http3(image, started, tls_pair, tmp_path):
    """The old image (make static, HTTP3=no) said "HTTP/3 on UDP" and opened no UDP socket."""
    ca, crt, key = tls_pair
    www = public_dir(tmp_path, "www")
    (www / "index.html").write_bytes(b"over HTTP/3\n")
    http_port, tls_port = free_port(), free_port()
    c = image.run(args=["--bind", "127.0.0.1", "--port", str(http_port), "--tls-port",
                        str(tls_port), "--tls-cert", "/tls/localhost.crt", "--tls-key",
                        "/tls/localhost.key", "/srv"],
                  mounts=[(crt.parent, "/tls"), (www, "/srv")])
    c.wait_output(f"listening on https://127.0.0.1:{tls_port}/ (TLS; HTTP/3 on UDP)")
    [r] = h3_get("127.0.0.1", tls_port, ca, [("GET", "/")])
    assert r.status == 200 and r.body == b"over HTTP/3\n", (r.status, r.body)
    assert "HTTP/3: not in this build" not in c.output()


class Pebble:
    """Debian's pebble with pebble-challtestsrv as its DNS (every name is 127.0.0.1), on
    loopback, validating HTTP-01 on http_port (as tests/integration/test_acme.py runs it)."""

    def __init__(self, tmp, tls_pair, http_port, tls_port):
        ca, crt, key = tls_pair
        self.dns_port, self.acme_port, self.mgmt_port, chall = (free_port() for _ in range(4))
        conf = tmp / "pebble.json"
        conf.write_text(json.dumps({"pebble": {
            "listenAddress": f"127.0.0.1:{self.acme_port}",
            "managementListenAddress": f"127.0.0.1:{self.mgmt_port}",
            "certificate": str(crt), "privateKey": str(key), "httpPort": http_port,
            "tlsPort": tls_port, "ocspResponderURL": "", "externalAccountBindingRequired": False}}))
        self.log = open(tmp / "pebble.log", "wb")
        self.procs = [subprocess.Popen(
            ["pebble-challtestsrv", "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "", "-dns01",
             f"127.0.0.1:{self.dns_port}", "-http01", "", "-https01", "", "-tlsalpn01", "",
             "-management", f"127.0.0.1:{chall}"], stdout=self.log, stderr=subprocess.STDOUT)]
        self.procs.append(subprocess.Popen(
            ["pebble", "-config", str(conf), "-dnsserver", f"127.0.0.1:{self.dns_port}",
             "-strict=false"], stdout=self.log, stderr=subprocess.STDOUT,
            env=dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT="0")))
        for port in (chall, self.acme_port, self.mgmt_port):
            for _ in range(200):
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert all(p.poll() is None for p in self.procs), "pebble exited"
                time.sleep(0.05)
        self.directory = f"https://127.0.0.1:{self.acme_port}/dir"

    def stop(self):
        for p in self.procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.log.close()


def test_image_gets_a_certificate_by_acme(image, started, tls_pair, tmp_path):
    """--acme-email against Pebble, with the image's own state directory (owned by 65534): the
    old image exited "this build (make static) has no ACME client"."""
    if not (shutil.which("pebble") and shutil.which("pebble-challtestsrv")):
        pytest.skip("pebble not installed (scripts/deps.sh test)")
    ca, crt, key = tls_pair
    http_port, tls_port = free_port(), free_port()
    pb = Pebble(tmp_path, tls_pair, http_port, tls_port)
    try:
        c = image.run(args=["--bind", "127.0.0.1", "--port", str(http_port), "--tls-port",
                            str(tls_port), "--acme-email", "ops@example.org", "--acme-domain",
                            "a.test", "--acme-ca", pb.directory, "--acme-ca-root",
                            "/tls/ca.crt", "--acme-challenge", "http-01", "/www"],
                      mounts=[(crt.parent, "/tls")])
        c.wait_output("certificate for a.test")
        c.wait_output("issued", timeout=90)
        with urllib.request.urlopen(f"https://127.0.0.1:{pb.mgmt_port}/roots/0", timeout=10,
                                    context=__import__("ssl").create_default_context(
                                        cafile=str(ca))) as r:
            (tmp_path / "root.pem").write_bytes(r.read())
        for _ in range(100):  # new contexts are adopted at the next accept
            p = subprocess.run(["curl", "-sS", "--max-time", "5", "--cacert",
                                str(tmp_path / "root.pem"), "--resolve",
                                f"a.test:{tls_port}:127.0.0.1", f"https://a.test:{tls_port}/"],
                               capture_output=True)
            if p.returncode == 0:
                break
            time.sleep(0.2)
        assert p.returncode == 0 and p.stdout == (REPO / "www" / "index.html").read_bytes(), \
            p.stderr
    finally:
        pb.stop()


def manifests():
    """contrib/kubernetes/ringhttpd.yaml's documents, read by Debian's python3-yaml (the
    virtualenv has no YAML parser)."""
    p = subprocess.run(["/usr/bin/python3", "-c", "import json, sys, yaml; print(json.dumps("
                        "list(yaml.safe_load_all(open(sys.argv[1])))))", str(DEPLOYMENT)],
                       capture_output=True, text=True)
    if p.returncode:
        pytest.skip(f"python3-yaml (scripts/deps.sh packaging): {p.stderr.strip()[-200:]}")
    return json.loads(p.stdout)


def test_kubernetes_deployment_starts_as_written(image, started, tmp_path):
    """The Deployment's container as the kubelet would run it from the image: its command/args,
    its securityContext's user, its ConfigMap mounted the kubelet's way (..data symlinks), a
    document root, a network namespace of its own; each probe's path must answer 2xx/3xx on
    its port, and a preStop exec must name a program the image has. The old manifest said
    --user nobody to a process already running as 65534 (exit 1) and preStop /bin/sleep (no
    shell tools in the image)."""
    docs = manifests()
    dep = next(d for d in docs if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    [ctr] = pod["containers"]
    sc = {**pod.get("securityContext", {}), **ctr.get("securityContext", {})}
    user = sc.get("runAsUser")
    if user is not None:
        user = f"{user}:{sc.get('runAsGroup', user)}"
    assert sc.get("runAsNonRoot") in (None, True)
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = []
    for vm in ctr.get("volumeMounts", []):
        vol, src = volumes[vm["name"]], public_dir(tmp_path, vm["name"])
        if "configMap" in vol:
            cm = next(d for d in docs if d["kind"] == "ConfigMap" and
                      d["metadata"]["name"] == vol["configMap"]["name"])
            stamp = src / "..2026_01_01_00_00_00.000000001"
            stamp.mkdir(mode=0o755)
            for name, text in cm["data"].items():
                (stamp / name).write_text(text)
                (stamp / name).chmod(0o644)
                (src / name).symlink_to(f"..data/{name}")
            (src / "..data").symlink_to(stamp.name)
        else:  # a persistent volume: the site's files
            (src / "index.html").write_text("the site\n")
            (src / "index.html").chmod(0o644)
        mounts.append((src, vm["mountPath"]))
    ports = {p["name"]: p["containerPort"] for p in ctr.get("ports", []) if "name" in p}
    probes = [ctr[k]["httpGet"] for k in ("startupProbe", "readinessProbe", "livenessProbe")
              if k in ctr and "httpGet" in ctr[k]]
    assert probes, "no HTTP probe to check"
    pre = ctr.get("lifecycle", {}).get("preStop", {})
    if "exec" in pre:
        assert pre["exec"]["command"][0].lstrip("/") in image.files(), pre
    opts = []
    if sc.get("readOnlyRootFilesystem"):
        opts.append("--read-only")
    if "drop" in sc.get("capabilities", {}):
        opts += [f"--cap-drop={c}" for c in sc["capabilities"]["drop"]]
    if sc.get("allowPrivilegeEscalation") is False:
        opts += ["--security-opt", "no-new-privileges"]
    c = image.run(args=ctr.get("args"), entrypoint=ctr.get("command"), user=user, mounts=mounts,
                  own_net=True, publish=sorted({ports.get(p["port"], p["port"]) for p in probes}),
                  podman_opts=opts)
    for probe in probes:
        status, _ = c.get(ports.get(probe["port"], probe["port"]), probe["path"])
        assert 200 <= status < 400, (probe, status, c.output())
    assert "only a process started as root" not in c.output()
    assert c.uid() == (user or image.user).split(":")[0]
