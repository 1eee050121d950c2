"""README.md cannot drift from the program (issue 36): its fenced blocks are run by their tag.

- ```sh run: line by line, in order, in one temporary directory shared by every such block (the
  first makes the `site` folder the others serve). A `build/ringhttpd` line is started against
  the real binary (on 127.0.0.1 and the engine fixture's engine, ports 8080/8443 replaced by free
  ones), waited for, and kept until the next such line (the reader's Ctrl-C);
  `$(pidof ringhttpd)` becomes its PID. Every other line must exit 0 (curl with -sSf, retried
  until it answers as shown); a trailing `# -> TEXT` must appear in the line's output. `make`
  and `scripts/deps.sh` lines are skipped (the binary under test is $RINGHTTPD).
- ```sh acme: the automatic-HTTPS line against Pebble as test_acme.py runs it (ports 80/443
  replaced by free ones, --acme-ca/--acme-ca-root/--acme-state added), then its curl line with
  Pebble's root.
- ```yaml check and ```yaml file=NAME: through `ringhttpd --check-config`, absolute paths moved
  into the temporary directory and the roots, certificate pairs, htpasswd files and log
  directories they name made there; file=NAME blocks are also written as NAME for the run blocks.
- ```sh not-run and ```text: not run (systemctl, apt, make, sample output); like every
  `ringhttpd ...` line and inline command of README, their options must exist in --help.
Besides: every `make X` names a Makefile rule (the Usage table against --help is
test_packaging's),
the .deb README installs is debian/changelog's version, and the package's configuration file
and the units' ExecStart lines (what *Installing* starts) check out.
"""
import fnmatch
import pathlib
import re
import shlex
import shutil
import subprocess

import pytest

from conftest import RINGHTTPD, REPO, Server, free_port, wait_for

README = REPO / "README.md"
TAGS = {("sh", "run"), ("sh", "acme"), ("sh", "not-run"), ("yaml", "check"), ("text", None)}


def blocks():
    """[(line number, language, tag, body lines)] of README's fenced blocks."""
    out, cur = [], None
    for n, line in enumerate(README.read_text().split("\n"), 1):
        if line.startswith("```"):
            if cur is None:
                info = line[3:].split()
                cur = (n, info[0] if info else None, info[1] if len(info) > 1 else None, [])
            else:
                out.append(cur)
                cur = None
        elif cur is not None:
            cur[3].append(line)
    assert cur is None, f"README.md:{cur[0]}: block never closed"
    return out


def logical_lines(body):
    """Lines with their backslash continuations joined, comments-only and blank lines dropped."""
    out, acc = [], ""
    for line in body:
        if line.endswith("\\"):
            acc += line[:-1] + " "
            continue
        acc += line
        if acc.strip() and not acc.lstrip().startswith("#"):
            out.append(acc.strip())
        acc = ""
    return out


def split_expect(line):
    """('cmd', 'TEXT' or None) from 'cmd   # -> TEXT'."""
    m = re.match(r"(.*?)\s+#\s*->\s*(.*)$", line)
    if m:
        return m.group(1), m.group(2).strip()
    return re.sub(r"\s+#.*$", "", line), None


def help_options():
    out = subprocess.run([RINGHTTPD, "--help"], capture_output=True, text=True, timeout=10)
    return set(re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", out.stdout + out.stderr))


def ringhttpd_commands():
    """Every ringhttpd command line README shows: in blocks and in inline code spans."""
    text = README.read_text()
    cmds = [(n, ln) for n, _, _, body in blocks() for ln in logical_lines(body)
            if re.match(r"(sudo\s+)?(build/)?ringhttpd\s", ln)]
    for m in re.finditer(r"`((?:build/)?ringhttpd\s[^`]*)`", text):
        cmds.append((text.count("\n", 0, m.start()) + 1, m.group(1)))
    return cmds


def test_first_screen_says_what_it_is_and_shows_make_run_and_make_check():
    head = README.read_text().split("\n")[:40]
    assert head[0] == "# ringhttpd"
    assert any("static files" in ln for ln in head[:6])
    joined = "\n".join(head)
    assert "make run" in joined and "make check" in joined
    lines = README.read_text().split("\n")
    quick = lines.index("## Quick start")
    contents = lines.index("## Contents")
    assert quick < 40 and quick < contents < lines.index("## Installing")


def test_every_block_is_tagged_with_what_the_test_does_with_it():
    for n, lang, tag, _ in blocks():
        if lang == "yaml" and tag and tag.startswith("file="):
            continue
        assert (lang, tag) in TAGS, f"README.md:{n}: ```{lang} {tag or ''}: tag it (see this file)"


def test_contents_links_every_section_and_every_link_lands():
    text = README.read_text()
    heads = re.findall(r"^## (.+)$", text, re.M)

    def anchor(h):
        return re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
    anchors = {anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    links = re.findall(r"\]\(#([^)]+)\)", text)
    for a in links:
        assert a in anchors, f"#{a} names no heading"
    for h in heads:
        if h not in ("Quick start", "Contents"):
            assert anchor(h) in links, f"Contents lacks '{h}'"
    for page in re.findall(r"\]\(((?:doc|bench)/[^)#]+)\)", text):
        assert (REPO / page).is_file(), page


def test_every_option_readme_names_exists():
    have = help_options()
    assert "--tls-port" in have and "--config" in have
    for n, cmd in ringhttpd_commands():
        for opt in re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", cmd):
            assert opt in have, f"README.md:{n}: {opt} is not in ringhttpd --help: {cmd}"
    # The Usage table against --help and the man page: test_packaging's.


def stop_clean(srv):
    """SIGTERM: exit 0 and no sanitizer report (make check runs this file on the ASan build)."""
    rc = srv.stop()
    assert rc == 0 and not srv.sanitizer_reports(), srv.stderr_text()[-4000:]


def _openssl_pair(crt, key, name="localhost"):
    crt.parent.mkdir(parents=True, exist_ok=True)
    key.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", f"/CN={name}",
                    "-keyout", str(key), "-out", str(crt)], check=True, capture_output=True)


def materialise(yaml_text, tmp):
    """YAML with absolute paths moved under tmp, and what they name made there."""
    text = re.sub(r"(?<![\w.])/(etc|srv|var)/", lambda m: f"{tmp}/{m.group(1)}/", yaml_text)
    crts = re.findall(r"tls-cert:\s*(\S+)", text)
    keys = re.findall(r"tls-key:\s*(\S+)", text)
    assert len(crts) == len(keys)
    for crt, key in zip(crts, keys):
        _openssl_pair(pathlib.Path(crt), pathlib.Path(key))
    for root in re.findall(r"root:\s*([^\s#]+)", text):
        p = pathlib.Path(root) if root.startswith("/") else tmp / root
        p.mkdir(parents=True, exist_ok=True)
    for ht in re.findall(r"htpasswd:\s*([^\s,}]+)", text):
        pathlib.Path(ht).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["htpasswd", "-Bbc", ht, "staging", "pw"], check=True, capture_output=True)
    for log in re.findall(r"access-log:\s*(/\S+)", text):
        pathlib.Path(log).parent.mkdir(parents=True, exist_ok=True)
    return text


@pytest.mark.skipif(not shutil.which("htpasswd"), reason="htpasswd (apache2-utils) missing")
def test_every_yaml_example_passes_check_config(tmp_path):
    seen = 0
    for n, lang, tag, body in blocks():
        if lang != "yaml":
            continue
        d = tmp_path / f"b{n}"
        d.mkdir()
        cfg = d / "config.yaml"
        cfg.write_text(materialise("\n".join(body) + "\n", d))
        out = subprocess.run([RINGHTTPD, "--check-config", str(cfg)], capture_output=True,
                             text=True, cwd=d, timeout=30)
        assert out.returncode == 0, f"README.md:{n}: {out.stdout}{out.stderr}"
        seen += 1
    assert seen >= 2


def test_quick_start_commands_serve_as_written(tmp_path, engine):
    ports = {"8080": str(free_port()), "8443": str(free_port())}

    def ported(s):
        return re.sub(r"\b(8080|8443)\b", lambda m: ports[m.group(1)], s)
    servers = []
    ran = 0
    try:
        for n, lang, tag, body in blocks():
            if lang == "yaml" and tag and tag.startswith("file="):
                (tmp_path / tag[5:]).write_text(ported("\n".join(body) + "\n"))
                continue
            if (lang, tag) != ("sh", "run"):
                continue
            for line in logical_lines(body):
                cmd, want = split_expect(ported(line))
                if servers:  # the server the reader started, never another ringhttpd
                    cmd = cmd.replace("$(pidof ringhttpd)", str(servers[-1].proc.pid))
                argv = shlex.split(cmd)
                if argv[0] in ("make", "scripts/deps.sh"):
                    continue
                if argv[0] == "build/ringhttpd" and "--check-config" not in argv:
                    for srv in servers:  # the reader's Ctrl-C before the next server
                        stop_clean(srv)
                    servers.clear()
                    srv = Server([RINGHTTPD, "-b", "127.0.0.1", "--engine", engine, *argv[1:]],
                                 cwd=tmp_path)
                    srv.wait_ready()
                    servers.append(srv)
                    continue
                if argv[0] == "curl":
                    argv[1:1] = ["-sSf", "--max-time", "10"]
                    outs = []

                    def ok():
                        p = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path)
                        outs[:] = [p]  # until it answers as shown: a reload is applied
                        return p.returncode == 0 and (not want or want in p.stdout + p.stderr)
                    assert wait_for(ok, 10, 0.2), f"README.md:{n}: {cmd}: {outs[0]}"
                    p = outs[0]
                else:  # a shell line; --check-config lines too (they may chain a kill)
                    assert "pidof" not in cmd, f"README.md:{n}: no server to signal: {cmd}"
                    cmd = re.sub(r"(?<![\w/])build/ringhttpd\b", shlex.quote(RINGHTTPD), cmd)
                    p = subprocess.run(["bash", "-ec", cmd], capture_output=True, text=True,
                                       cwd=tmp_path, timeout=30)
                assert p.returncode == 0, f"README.md:{n}: {cmd}: {p.stdout}{p.stderr}"
                if want:
                    assert want in p.stdout + p.stderr, f"README.md:{n}: {cmd}: {p.stdout}"
                ran += 1
        for srv in servers:
            stop_clean(srv)
        servers.clear()
    finally:
        for srv in servers:
            srv.stop()
    assert ran >= 6


def test_automatic_https_line_gets_a_certificate_from_pebble(tmp_path, engine, test_ca):
    test_acme = pytest.importorskip("test_acme")
    if not test_acme.PEBBLE or not test_acme.CHALLTESTSRV:
        pytest.skip("pebble not installed (scripts/deps.sh test)")
    (body,) = [b for _, lang, tag, b in blocks() if (lang, tag) == ("sh", "acme")]
    lines = logical_lines(body)
    server_line = shlex.split(split_expect(lines[0])[0])
    curl_line, want = split_expect(lines[1])
    assert server_line[0] == "build/ringhttpd" and curl_line.startswith("curl https://")
    name = server_line[server_line.index("--acme-domain") + 1]
    http_port, tls_port = free_port(), free_port()
    argv = [{"80": str(http_port), "443": str(tls_port)}.get(a, a) for a in server_line[1:]]
    assert str(http_port) in argv and str(tls_port) in argv
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("hello\n")  # what the first block made
    pb = test_acme.Pebble(tmp_path, test_ca, http_port, tls_port)
    srv = None
    try:
        srv = Server([RINGHTTPD, "-b", "127.0.0.1", "--engine", engine, *argv,
                      "--acme-ca", pb.directory, "--acme-ca-root", str(pb.ca),
                      "--acme-state", str(tmp_path / "state")], cwd=tmp_path)
        srv.wait_ready()
        test_acme.wait_issued(srv, name)
        root = pb.root(tmp_path)
        test_acme.wait_https(name, tls_port, root, want=want.encode())
        stop_clean(srv)
    finally:
        if srv is not None:
            srv.stop()
        pb.stop()


def test_every_make_target_readme_and_its_pages_name_exists():
    rules = (REPO / "Makefile").read_text().replace("$(BUILD)/", "build/")
    targets = set()
    for m in re.finditer(r"^([\w./%-]+(?:[ \t]+[\w./%-]+)*)[ \t]*:(?!=)", rules, re.M):
        targets.update(m.group(1).split())
    named = 0
    for page in (README, REPO / "doc" / "development.md"):
        text = page.read_text()
        spans = re.findall(r"`make ([a-z][\w/.-]*)", text)
        spans += re.findall(r"^make ([a-z][\w/.-]*)", text, re.M)  # block lines
        for t in spans:
            known = t in targets or any(  # a pattern rule: fuzz-run-% for fuzz-run-fuzz_NAME
                fnmatch.fnmatchcase(t, r.replace("%", "*")) for r in targets if "%" in r)
            assert known, f"{page.name}: make {t}: no such Makefile target"
            named += 1
    assert named >= 10


def test_the_package_file_readme_installs_is_the_version_debian_builds():
    version = re.match(r"ringhttpd \(([^)]+)\)", (REPO / "debian" / "changelog").read_text())
    named = re.findall(r"ringhttpd_([^_\s`]+)_amd64\.deb", README.read_text())
    assert version and named, "README names no .deb, or debian/changelog no version"
    assert set(named) == {version.group(1)}, (named, version.group(1))


def test_the_files_installing_names_check_out(tmp_path):
    """The package's /etc/ringhttpd/ringhttpd.yaml passes --check-config, and the units'
    command lines (README's *Installing* starts them with systemctl) name only real options."""
    cfg = tmp_path / "ringhttpd.yaml"
    cfg.write_text(materialise((REPO / "debian" / "ringhttpd.yaml").read_text(), tmp_path))
    out = subprocess.run([RINGHTTPD, "--check-config", str(cfg)], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    have = help_options()
    lines = 0
    for unit in (REPO / "dist" / "ringhttpd.service", REPO / "debian" / "debian.conf"):
        for cmd in re.findall(r"ExecStart=(\S*ringhttpd .*)$", unit.read_text(), re.M):
            for opt in re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", cmd):
                assert opt in have, f"{unit.name}: {opt}: {cmd}"
            lines += 1
    assert lines >= 3
