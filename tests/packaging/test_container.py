"""The Containerfile (issue 31) builds for real and its image serves as a non-root user from a
static binary, with nothing else in the image.

With podman where it can run containers here: the build stage starts from a Debian 12 image made
from an mmdebstrap tarball (`podman import`: no registry is reachable here), `podman build`, then
`podman run`. Where podman cannot run, the Containerfile's own instructions are carried out
instead: its build stage's COPY/WORKDIR/RUN in a fresh Debian 12 root (RUN under
systemd-nspawn), its final stage's COPYs into an empty root, and its USER and ENTRYPOINT/CMD run
there with only /proc and /dev mounted. Either way a build dependency missing from
`scripts/deps.sh --list build` fails the build. The test prints which of the two it ran;
RINGHTTPD_CONTAINER=root forces the second."""
import json
import os
import pathlib
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import REPO, debian_root, extract, needs_root_and

CONTAINERFILE = REPO / "Containerfile"
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


def get(port, tries=100):
    for _ in range(tries):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as r:
                return r.status, r.read()
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"nothing answered on 127.0.0.1:{port}")


def podman_works(base):
    if os.environ.get("RINGHTTPD_CONTAINER") == "root" or not shutil.which("podman"):
        return False
    p = subprocess.run(PODMAN + ["run", "--rm", *ULIMITS, base, "true"], capture_output=True,
                       text=True, timeout=120)
    if p.returncode:
        print(f"\npodman cannot run a container here: {p.stderr.strip()[-500:]}")
    return p.returncode == 0


def test_containerfile_builds_and_serves_as_non_root(tmp_path, capsys):
    needs_root_and("mmdebstrap")
    tarball = debian_root([])
    base = f"localhost/ringhttpd-build-base:{tarball.stem}-{int(tarball.stat().st_mtime)}"
    if shutil.which("podman") and subprocess.run(PODMAN + ["image", "exists", base]).returncode:
        old = subprocess.run(PODMAN + ["images", "-q", base.split(":")[0]], capture_output=True,
                             text=True).stdout.split()
        if old:  # made from an older tarball
            subprocess.run(PODMAN + ["rmi", *old], capture_output=True)
        subprocess.run(PODMAN + ["import", str(tarball), base], check=True, capture_output=True)
    with capsys.disabled():
        if podman_works(base):
            print("\ncontainer test: podman build and podman run (base image imported from an "
                  f"mmdebstrap tarball: {base})")
            run_with_podman(base, tmp_path)
        else:
            why = ("RINGHTTPD_CONTAINER=root" if os.environ.get("RINGHTTPD_CONTAINER") == "root"
                   else "podman cannot run here")
            print("\ncontainer test: the Containerfile's instructions in a fresh Debian 12 root "
                  f"({why})")
            run_in_roots(tarball, tmp_path)


def run_with_podman(base, tmp_path):
    tag = "localhost/ringhttpd-test:latest"
    p = subprocess.run(PODMAN + ["build", *ULIMITS, "--build-arg", f"BASE={base}", "-f",
                                 str(CONTAINERFILE), "-t", tag, str(REPO)],
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    user = subprocess.run(PODMAN + ["image", "inspect", "-f", "{{.Config.User}}", tag],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert user and user.split(":")[0] not in ("0", "root"), user
    size = int(subprocess.run(PODMAN + ["image", "inspect", "-f", "{{.Size}}", tag],
                              capture_output=True, text=True, check=True).stdout)
    print(f"image size: {size} bytes ({size / 1e6:.1f} MB)")
    assert size < 20_000_000, size  # a static binary and www/, nothing else
    port = free_port()
    cid = subprocess.run(PODMAN + ["run", "-d", "--rm", *ULIMITS, "-p", f"127.0.0.1:{port}:8080",
                                   tag], capture_output=True, text=True, check=True).stdout.strip()
    try:
        status, body = get(port)
        assert status == 200 and body == (REPO / "www" / "index.html").read_bytes()
        pid = subprocess.run(PODMAN + ["inspect", "-f", "{{.State.Pid}}", cid],
                             capture_output=True, text=True, check=True).stdout.strip()
        with open(f"/proc/{pid}/status") as f:
            uid = next(ln.split()[1] for ln in f if ln.startswith("Uid:"))
        assert uid == "65534", uid
        # Nothing in the image but the binary and the document root: no shared library to load.
        files = subprocess.run(f"{shlex.join(PODMAN)} export {cid} | tar -tf -", shell=True,
                               capture_output=True, text=True, check=True).stdout.split()
        assert "ringhttpd" in files and not [f for f in files if ".so" in f or "lib" in f], files
    finally:
        subprocess.run(PODMAN + ["stop", "-t", "5", cid], capture_output=True)
        # The image and its build stage's (some 600 MB, left untagged): not kept run after run.
        subprocess.run(PODMAN + ["rmi", tag], capture_output=True)
        subprocess.run(PODMAN + ["image", "prune", "-f"], capture_output=True)


def copy_in(src, dest):
    if src.is_dir():
        shutil.copytree(src, dest, dirs_exist_ok=True, symlinks=True)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


def run_in_roots(tarball, tmp_path):
    needs_root_and("systemd-nspawn", "unshare", "chroot")
    root = extract(tarball, tmp_path / "build")
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
                                "--keep-unit", f"--chdir={workdir}", *env, "/bin/sh", "-c", arg],
                               capture_output=True, text=True, timeout=1800)
            assert p.returncode == 0, f"RUN {arg}:\n{p.stdout[-3000:]}{p.stderr[-3000:]}"
    final = tmp_path / "final"
    (final / "proc").mkdir(parents=True)
    (final / "dev").mkdir()
    user, argv = None, []
    for kw, arg in instructions(lambda frm: frm.strip() == "scratch"):
        if kw == "COPY":
            parts = arg.split()
            src_root = root if parts[0] == "--from=build" else REPO
            src, dest = parts[-2:]
            copy_in(src_root / src.lstrip("/"), final / dest.lstrip("/"))
        elif kw == "USER":
            user = arg
        elif kw in ("ENTRYPOINT", "CMD"):
            argv += json.loads(arg)
    assert user and user.split(":")[0] not in ("0", "root"), user
    files = [str(p.relative_to(final)) for p in final.rglob("*")]
    assert not [f for f in files if ".so" in f], files
    port = free_port()
    argv = [argv[0], "--bind", "127.0.0.1", "--port", str(port)] + \
        [a for i, a in enumerate(argv[1:], 1) if a != "--port" and argv[i - 1] != "--port"]
    # A container's view: its own /proc, the host's /dev, the image's files and nothing else.
    script = (f"mount --rbind /dev {final}/dev && mount -t proc proc {final}/proc && "
              f"exec chroot --userspec={user} {final} {shlex.join(argv)}")
    srv = subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c",
                            script], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        status, body = get(port)
        assert status == 200 and body == (REPO / "www" / "index.html").read_bytes()
        server = int(subprocess.run(["pgrep", "-P", str(srv.pid)], capture_output=True,
                                    text=True).stdout.split()[0])
        with open(f"/proc/{server}/status") as f:
            uid = next(ln.split()[1] for ln in f if ln.startswith("Uid:"))
        assert uid == user.split(":")[0], uid
        os.kill(server, signal.SIGTERM)  # unshare ignores it, its child (PID 1 inside) drains
        assert srv.wait(timeout=30) == 0, srv.stderr.read()
    finally:
        if srv.poll() is None:
            srv.kill()  # --kill-child: the server goes with it
            srv.wait()
        shutil.rmtree(root)
