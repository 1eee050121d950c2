"""Issue 40, step 2, on both engines: mass virtual hosting. A root that names {host}
(`ringhttpd '/srv/sites/{host}'`, or a site's `root: /srv/sites/{host}/public`) serves the
directory of the request's host name: lower-cased, without port or trailing dot, one path
component beneath the directory before {host} (no "..", no "/", no leading dot, at most 253
bytes). A Host that cannot name a directory gets 400, a host without a directory 404 (with the
site's error page from that directory), and nothing is ever served from the directory before
{host} itself, nor one host's cached file for another. A directory made later is served within
a second or two. HTTP/1.1 and HTTP/2 (h2c, :authority)."""
import subprocess

import pytest

from conftest import RINGHTTPD, Conn, fetch, request, wait_for


@pytest.fixture
def tree(tmp_path):
    """sites/{a.test,b.test}: index.html and same.txt of their own; sites/secret.txt and
    sites/.hidden/index.html that no Host may reach; sites/404.html, the site's error page."""
    sites = tmp_path / "sites"
    for name in ("a.test", "b.test"):
        (sites / name).mkdir(parents=True)
        (sites / name / "index.html").write_text(f"home of {name}\n")
        (sites / name / "same.txt").write_text(f"same path, {name}\n")
    (sites / "secret.txt").write_text("SECRET of the sites directory\n")
    (sites / ".hidden").mkdir()
    (sites / ".hidden" / "index.html").write_text("SECRET hidden site\n")
    (sites / "404.html").write_text("no such site here\n")
    return tmp_path


def test_each_host_gets_its_own_directory(make_server, tree):
    srv = make_server(tree / "sites" / "{host}")
    with Conn(srv) as c:  # one keep-alive connection: the per-host cache, both ways
        for _ in range(3):
            for name in ("a.test", "b.test"):
                c.send(request("GET", "/same.txt", host=name))
                r = c.read()
                assert r.status == 200 and r.body == f"same path, {name}\n".encode(), r
    for host, who in [("A.TEST", "a.test"), ("a.test.", "a.test"), ("b.test:8080", "b.test"),
                      ("B.Test.:1", "b.test")]:
        r = fetch(srv, "/", host=host)
        assert r.status == 200 and r.body == f"home of {who}\n".encode(), (host, r)


@pytest.mark.parametrize("host", [
    "..", ".", "...", "%2e%2e", "%2E%2E", "a/b", "../b.test", "..%2fb.test", ".hidden",
    ".HIDDEN", "a.test/../b.test", "a" * 300, "x" * 254, "[::1]", "a b", "a\\b",
])
def test_hostile_hosts_reach_no_directory(make_server, tree, host):
    srv = make_server(tree / "sites" / "{host}")
    for path in ("/", "/secret.txt", "/index.html", "/../secret.txt"):
        r = fetch(srv, path, host=host)
        assert r.status in (400, 404), (host, path, r)
        assert b"SECRET" not in r.body and b"home of" not in r.body, (host, path, r)
    assert srv.alive()


def test_unknown_hosts_get_the_sites_404_and_never_its_directory(make_server, tree):
    srv = make_server(tree / "sites" / "{host}", args=["--error-page", "404=/404.html"])
    r = fetch(srv, "/secret.txt", host="nobody.test")
    assert r.status == 404 and r.body == b"no such site here\n", r
    r = fetch(srv, "/", host="nobody.test")
    assert r.status == 404 and r.body == b"no such site here\n", r
    # a known host's missing file: its own error page is looked for in its own directory
    r = fetch(srv, "/missing", host="a.test")
    assert r.status == 404 and b"no such site" not in r.body, r
    (tree / "sites" / "a.test" / "404.html").write_text("a.test has no such page\n")
    r = wait_for(lambda: (lambda x: x if x.body.startswith(b"a.test") else None)(
        fetch(srv, "/missing", host="a.test")), 5)
    assert r and r.status == 404, r
    # a Host that cannot name a directory: 400, the page from the sites directory too
    r = fetch(srv, "/", host="..")
    assert r.status == 400 and b"SECRET" not in r.body, r


def test_a_directory_made_later_is_served(make_server, tree):
    srv = make_server(tree / "sites" / "{host}")
    assert fetch(srv, "/", host="c.test").status == 404
    (tree / "sites" / "c.test").mkdir()
    (tree / "sites" / "c.test" / "index.html").write_text("home of c.test\n")
    r = wait_for(lambda: (lambda x: x if x.status == 200 else None)(
        fetch(srv, "/", host="c.test")), 5)
    assert r and r.body == b"home of c.test\n", r
    # and one removed is gone
    (tree / "sites" / "c.test" / "index.html").unlink()
    (tree / "sites" / "c.test").rmdir()
    assert wait_for(lambda: fetch(srv, "/", host="c.test").status == 404, 5)


def test_a_site_of_a_file_with_a_host_root_and_a_subdirectory(make_server, tree, tmp_path):
    for name in ("a.test", "b.test"):
        (tree / "sites" / name / "public").mkdir()
        (tree / "sites" / name / "public" / "index.html").write_text(f"public {name}\n")
    (tmp_path / "fixed").mkdir()
    (tmp_path / "fixed" / "index.html").write_text("the fixed site\n")
    conf = tmp_path / "sites.yaml"
    conf.write_text(f"""sites:
  - hosts: [fixed.test]
    root: {tmp_path}/fixed
  - default: true
    root: "{tree}/sites/{{host}}/public"
""")
    srv = make_server(args=["--config", str(conf)])
    assert fetch(srv, "/", host="fixed.test").body == b"the fixed site\n"
    for name in ("a.test", "b.test"):
        r = fetch(srv, "/", host=name)
        assert r.status == 200 and r.body == f"public {name}\n".encode(), (name, r)
    assert fetch(srv, "/index.html", host="a.test/..").status in (400, 404)
    # HTTP/2 (h2c): the :authority names the directory
    p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--resolve",
                        f"b.test:{srv.port}:127.0.0.1", "-w", "\n%{http_version}",
                        f"http://b.test:{srv.port}/"], capture_output=True, timeout=20)
    assert p.returncode == 0 and p.stdout == b"public b.test\n\n2", (p.stdout, p.stderr)


@pytest.mark.parametrize("root", ["sites{host}", "sites/{host}x", "sites/x{host}",
                                  "sites/{host}/{host}", "{host}"])
def test_host_not_one_whole_directory_name_is_refused(tmp_path, root):
    (tmp_path / "sites").mkdir()
    p = subprocess.run([RINGHTTPD, "-p", "0", str(tmp_path / root) if root != "{host}" else root],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and "{host} must be one whole directory name" in p.stderr, p.stderr
