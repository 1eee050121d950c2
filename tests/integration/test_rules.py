"""Rules by path pattern (issue 39): a site's _redirects and _headers files (Netlify's and
Cloudflare Pages' syntax, with --rules-files), the same rules as YAML lists (redirects, headers,
access) and --deny-user-agent, on both engines; over HTTP/1.1, HTTP/2 (curl) and HTTP/3
(aioquic) for a subset. Each platform example is a case with the answer its documentation
gives; where the two disagree the test says which one ringhttpd follows (README "Rules files").
"""

import os
import pathlib
import shutil
import socket
import subprocess
import threading

import pytest

from conftest import RINGHTTPD, Conn, fetch, raw, request, wait_for
from h3client import h3_get
from test_accesslog import scrape


def site(root, files):
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def get(srv, path, headers=(), host="localhost"):
    return fetch(srv, path, headers=headers, host=host)


# Netlify's _redirects documentation (docs.netlify.com/routing/redirects/), its examples as
# they appear there, and a file tree for them.
NETLIFY_REDIRECTS = """\
# Redirects from what the browser requests to what we serve
/home              /
/blog/my-post.php  /blog/my-post
/news              /blog
/cuties            https://www.petsofnetlify.com

# Splats and placeholders
/news/*            /blog/:splat
/news/:month/:date/:year/:slug  /blog/:year/:month/:date/:slug

# Query parameters
/store id=:id  /blog/:id  301
/articles id=:id tag=:tag /posts/:tag/:id 301

# Rewrites, custom 404s, gone
/app/*  /app/index.html  200
/ecommerce  /store-closed  404
/old-product  /  410

# Shadowing: the file wins unless the rule is forced
/exists.html  /elsewhere  301
/forced.html  /elsewhere  301!
"""

NETLIFY_TREE = {
    "index.html": "home\n",
    "app/index.html": "the app\n",
    "store-closed": "the store is closed\n",
    "exists.html": "exists\n",
    "forced.html": "forced\n",
}

NETLIFY_CASES = [
    # path, status, Location (or body for a rewrite / error page)
    ("/home", 301, "/"),
    ("/home?utm=1", 301, "/?utm=1"),  # the query goes along
    ("/home/", 301, "/"),  # a trailing slash is optional
    ("/blog/my-post.php", 301, "/blog/my-post"),
    ("/news", 301, "/blog"),  # the exact rule comes first
    ("/cuties", 301, "https://www.petsofnetlify.com"),
    ("/news/2004/02/12/my-story", 301, "/blog/2004/02/12/my-story"),  # first match: the splat
    ("/store?id=42", 301, "/blog/42"),
    ("/articles?id=7&tag=cats", 301, "/posts/cats/7"),
    ("/app/settings/profile", 200, "the app\n"),
    ("/ecommerce", 404, "the store is closed\n"),
    ("/exists.html", 200, "exists\n"),
    ("/forced.html", 301, "/elsewhere"),
]


def check_case(r, status, want):
    assert r.status == status, (r.status, r.headers)
    if 300 <= status < 400:
        assert r.header("location") == want, r.headers
    else:
        assert r.body.decode() == want


def test_netlify_redirects_examples(make_server, tmp_path):
    """Netlify's documented _redirects examples, each with the answer Netlify documents: default
    status 301, splats, placeholders, query conditions (a request without the parameter does not
    match), 200 rewrites, a 404 with the target's page, 410, shadowing and '!'."""
    root = site(tmp_path / "www", {"_redirects": NETLIFY_REDIRECTS, **NETLIFY_TREE})
    srv = make_server(root, args=["--rules-files"])
    for path, status, want in NETLIFY_CASES:
        check_case(get(srv, path), status, want)
    assert get(srv, "/store").status == 404  # no id: the rule does not match, no file either
    r = get(srv, "/old-product")
    assert r.status == 410
    assert "Gone" in r.reason
    assert "the line is ignored" not in srv.stderr_text()


# Cloudflare Pages' _redirects documentation (developers.cloudflare.com/pages/configuration/
# redirects/): its complete example.
CLOUDFLARE_REDIRECTS = """\
/home301 / 301
/home302 / 302
/querystrings /?query=string 301
/twitch https://twitch.tv
/trailing /trailing/ 301
/notrailing/ /nottrailing 301
/page/ /page2/#fragment 301
/blog/* https://blog.my.domain/:splat
/products/:code/:name /products?code=:code&name=:name
"""


def test_cloudflare_redirects_examples(make_server, tmp_path):
    """Cloudflare's example file. Where the platforms disagree ringhttpd follows Netlify: a rule
    without a status is 301 (Cloudflare: 302), so /twitch and /blog/* answer 301 here."""
    root = site(tmp_path / "www", {"_redirects": CLOUDFLARE_REDIRECTS, "index.html": "x\n"})
    srv = make_server(root, args=["--rules-files"])
    cases = [
        ("/home301", 301, "/"),
        ("/home302", 302, "/"),
        ("/querystrings", 301, "/?query=string"),
        ("/twitch", 301, "https://twitch.tv"),  # Cloudflare: 302 (see the docstring)
        ("/trailing", 301, "/trailing/"),
        ("/notrailing/", 301, "/nottrailing"),
        ("/page/", 301, "/page2/#fragment"),
        ("/blog/a/b", 301, "https://blog.my.domain/a/b"),
        ("/products/42/blue%20shoes", 301, "/products?code=42&name=blue%20shoes"),
    ]
    for path, status, want in cases:
        check_case(get(srv, path), status, want)


# Cloudflare Pages' _headers documentation: its example and the answers its table gives, plus
# placeholders and '! Name'.
CLOUDFLARE_HEADERS = """\
# This is a comment
/secure/page
  X-Frame-Options: DENY
  X-Content-Type-Options: nosniff
  Referrer-Policy: no-referrer

/static/*
  Access-Control-Allow-Origin: *
  X-Robots-Tag: nosnippet

https://myproject.pages.dev/*
  X-Robots-Tag: noindex

/movies/:title
  x-movie-name: You are watching :title

/public/*
  X-Shared: 1
/public/private/*
  ! X-Shared
"""


def test_cloudflare_headers_examples(make_server, tmp_path):
    """Every rule that matches applies; one field twice joins with ', ' (the table's
    /static/styles.css on myproject.pages.dev); a https://HOST/ rule only for that host;
    :placeholders in values; '! Name' takes off what an earlier rule set."""
    root = site(tmp_path / "www", {
        "_headers": CLOUDFLARE_HEADERS,
        "secure/page": "s\n", "static/image.jpg": "i\n", "static/styles.css": "c\n",
        "home": "h\n", "movies/Up": "m\n", "public/a.txt": "a\n", "public/private/b.txt": "b\n",
    })
    srv = make_server(root, args=["--rules-files"])
    r = get(srv, "/secure/page", host="custom.domain")
    assert (r.header("x-frame-options"), r.header("x-content-type-options"),
            r.header("referrer-policy")) == ("DENY", "nosniff", "no-referrer")
    assert r.header("x-robots-tag") is None
    r = get(srv, "/static/image.jpg", host="custom.domain")
    assert r.header("access-control-allow-origin") == "*"
    assert r.header("x-robots-tag") == "nosnippet"
    assert get(srv, "/home", host="myproject.pages.dev").header("x-robots-tag") == "noindex"
    r = get(srv, "/secure/page", host="myproject.pages.dev")
    assert r.header("x-frame-options") == "DENY" and r.header("x-robots-tag") == "noindex"
    r = get(srv, "/static/styles.css", host="myproject.pages.dev:443")
    assert r.header_all("x-robots-tag") == ["nosnippet, noindex"]
    assert get(srv, "/movies/Up").header("x-movie-name") == "You are watching Up"
    assert get(srv, "/public/a.txt").header("x-shared") == "1"
    assert get(srv, "/public/private/b.txt").header("x-shared") is None
    # the rules go on 200s of files, not on the 404 of a path no file has
    assert get(srv, "/static/none.css").header("access-control-allow-origin") is None


NETLIFY_HEADERS = """\
/templates/index.html
  # headers for that path:
  X-Frame-Options: DENY
  X-XSS-Protection: 1; mode=block
/templates/index2.html
  X-Frame-Options: SAMEORIGIN
/*
  Link: </style.css>; rel=preload; as=style
  Link: </script.js>; rel=preload; as=script
"""


def test_netlify_headers_examples(make_server, tmp_path):
    """Netlify's _headers examples: comments inside a block, a field given twice in a block is
    one field of both values (its multi-value form), --header lines stay unless a rule sets or
    removes their field, and a rule's Cache-Control replaces --cache-control's."""
    root = site(tmp_path / "www", {"_headers": NETLIFY_HEADERS + "/assets/*\n  Cache-Control: "
                                   "public, max-age=31536000, immutable\n",
                                   "templates/index.html": "1\n", "templates/index2.html": "2\n",
                                   "assets/app.js": "js\n"})
    srv = make_server(root, args=["--rules-files", "--header", "X-Site: on",
                                  "--cache-control", "no-cache"])
    r = get(srv, "/templates/index.html")
    assert r.header("x-frame-options") == "DENY"
    assert r.header("x-xss-protection") == "1; mode=block"
    assert r.header_all("link") == [
        "</style.css>; rel=preload; as=style, </script.js>; rel=preload; as=script"]
    assert r.header("x-site") == "on"
    assert get(srv, "/templates/index2.html").header("x-frame-options") == "SAMEORIGIN"
    # a rule's field replaces the site's own of that name (both platforms: _headers override
    # what is ordinarily sent), on 200 and 304 alike
    r = get(srv, "/assets/app.js")
    assert r.header_all("cache-control") == ["public, max-age=31536000, immutable"], r.headers
    r = get(srv, "/assets/app.js", headers=[("If-None-Match", r.header("etag"))])
    assert r.status == 304
    assert r.header_all("cache-control") == ["public, max-age=31536000, immutable"], r.headers
    assert get(srv, "/templates/index2.html").header_all("cache-control") == ["no-cache"]


def test_rules_files_are_not_served(make_server, tmp_path):
    """/_redirects and /_headers answer 404 with rules-files on (their rules still apply); off,
    they are files like any other and no rule applies."""
    root = site(tmp_path / "www", {"_redirects": "/a /b 302\n", "_headers": "/*\n  X-R: 1\n",
                                   "index.html": "x\n"})
    srv = make_server(root, args=["--rules-files"])
    assert get(srv, "/_redirects").status == 404
    assert get(srv, "/_headers").status == 404
    assert get(srv, "/a").status == 302
    assert get(srv, "/").header("x-r") == "1"
    srv.stop()
    plain = make_server(root)
    assert get(plain, "/_redirects").body == b"/a /b 302\n"
    assert get(plain, "/a").status == 404


def test_pages_reads_the_rules_files_unless_told_not_to(make_server, tmp_path):
    """--pages is Pages-style handling: the root's _redirects and _headers apply (and are not
    served) as with --rules-files; --pages with --rules-files off serves neither rule."""
    root = site(tmp_path / "www", {"_redirects": "/a /b 302\n", "_headers": "/*\n  X-R: 1\n",
                                   "index.html": "x\n"})
    srv = make_server(root, args=["--pages"])
    assert get(srv, "/a").status == 302
    assert get(srv, "/").header("x-r") == "1"
    assert get(srv, "/_redirects").status == 404
    srv.stop()
    conf = tmp_path / "off.yaml"
    conf.write_text(f"root: {root}\npages: true\nrules-files: false\n")
    off = make_server(None, args=["--config", str(conf)])
    assert get(off, "/a").status == 404
    assert get(off, "/").header("x-r") is None


def test_a_page_that_clean_urls_or_an_index_name_serve_shadows_a_rule(make_server, tmp_path):
    """Netlify's shadowing counts what the server would serve: with clean URLs /about is
    about.html, and with --index home.html the directory /docs serves docs/home.html, so an
    unforced rule for either does not apply; a forced one does."""
    root = site(tmp_path / "www", {"_redirects": "/about /elsewhere 302\n/docs /gone 302\n"
                                                 "/team /people 302!\n",
                                   "about.html": "about\n", "docs/home.html": "docs\n",
                                   "team.html": "team\n"})
    srv = make_server(root, args=["--pages", "--index", "home.html", "--trailing-slash",
                                  "never"])
    r = get(srv, "/about")
    assert (r.status, r.body) == (200, b"about\n")
    r = get(srv, "/docs")
    assert (r.status, r.body) == (200, b"docs\n")
    r = get(srv, "/team")
    assert (r.status, r.header("location")) == (302, "/people")


def test_bad_lines_reported_once_with_file_and_line_rest_apply(make_server, tmp_path):
    """Each line that cannot be used is logged once, FILE:LINE and why; every other rule
    applies. --check-config prints the same lines and exits 1."""
    root = site(tmp_path / "www", {
        "_redirects": "/a /b 302\nno-slash /x\n/c /d 999\n/e /f 302 Country=au\n"
                      "/p https://proxy.example/ 200\n/g /h 307\n",
        "_headers": "  X-Orphan: 1\n/*\n  X-Ok: 1\n  Content-Length: 3\n  Basic-Auth: u:p\n",
        "index.html": "x\n"})
    srv = make_server(root, args=["--rules-files"])
    assert get(srv, "/a").status == 302
    assert get(srv, "/g").status == 307
    r = get(srv, "/")
    assert r.header("x-ok") == "1" and r.header("basic-auth") is None
    log = srv.stderr_text()
    for where in ["_redirects:2:", "_redirects:3:", "_redirects:4:", "_redirects:5:",
                  "_headers:1:", "_headers:4:", "_headers:5:"]:
        assert log.count(str(root) + "/" + where) == 1, (where, log)
    assert "_redirects:1:" not in log and "_redirects:6:" not in log
    conf = tmp_path / "c.yaml"
    conf.write_text(f"root: {root}\nrules-files: true\n")
    p = subprocess.run([RINGHTTPD, "--check-config", str(conf)], capture_output=True, timeout=20)
    assert p.returncode == 1 and b"ok" not in p.stdout, p
    err = p.stderr.decode()
    assert f"{root}/_redirects:3:" in err and f"{root}/_headers:4:" in err, err
    (root / "_redirects").write_text("/a /b 302\n")
    (root / "_headers").write_text("/*\n  X-Ok: 1\n")
    p = subprocess.run([RINGHTTPD, "--check-config", str(conf)], capture_output=True, timeout=20)
    assert p.returncode == 0, p


def test_check_config_on_a_directory_reads_its_rules_files(tmp_path):
    """--check-config DIR checks a site's root before it is deployed: its _redirects and
    _headers are read as --rules-files reads them, each bad line said with FILE:LINE, exit 1;
    a clean tree says ok, exit 0. The build before read DIR as a YAML file ('read error')."""
    root = site(tmp_path / "www", {"_redirects": "/a /b 302\nnot-a-path /x\n",
                                   "_headers": "/*\n  X-Ok: 1\n", "index.html": "x\n"})
    p = subprocess.run([RINGHTTPD, "--check-config", str(root)], capture_output=True,
                       timeout=20, text=True)
    assert p.returncode == 1, p.stderr
    assert f"{root}/_redirects:2:" in p.stderr, p.stderr
    (root / "_redirects").write_text("/a /b 302\n")
    p = subprocess.run([RINGHTTPD, "--check-config", str(root)], capture_output=True,
                       timeout=20, text=True)
    assert p.returncode == 0, p.stderr
    assert "ok" in p.stdout


def test_two_thousand_redirects(make_server, tmp_path):
    """A migration's _redirects: 2,000 exact rules and a splat after them, first match wins;
    a path no rule names is served from its file."""
    lines = [f"/old/page-{i}.html /new/{i}/ 301" for i in range(2000)]
    lines += ["/old/* /archive/:splat 302", "/old/page-5.html /never 302"]
    root = site(tmp_path / "www", {"_redirects": "\n".join(lines) + "\n", "keep.txt": "kept\n"})
    srv = make_server(root, args=["--rules-files"])
    with Conn(srv) as c:
        for i in (0, 1, 5, 999, 1234, 1999):
            r = c.request("GET", f"/old/page-{i}.html")
            assert (r.status, r.header("location")) == (301, f"/new/{i}/")
        r = c.request("GET", "/old/page-2000.html")
        assert (r.status, r.header("location")) == (302, "/archive/page-2000.html")
        assert c.request("GET", "/keep.txt").body == b"kept\n"


def test_rules_over_http2(make_server, tmp_path):
    """The same answers over HTTP/2 (h2c prior knowledge, curl): a redirect, a rewrite, the
    header rules."""
    if not shutil.which("curl"):
        pytest.skip("curl not installed")
    root = site(tmp_path / "www", {"_redirects": NETLIFY_REDIRECTS, **NETLIFY_TREE,
                                   "_headers": "/app/*\n  X-App: 1\n"})
    srv = make_server(root, args=["--rules-files"])

    def h2(path):
        out = subprocess.run(["curl", "-sS", "-i", "--http2-prior-knowledge", srv.url(path)],
                             capture_output=True, timeout=20)
        head, _, body = out.stdout.replace(b"\r\n", b"\n").partition(b"\n\n")
        lines = head.decode().split("\n")
        assert lines[0].startswith("HTTP/2 "), lines
        fields = dict(ln.lower().split(": ", 1) for ln in lines[1:] if ": " in ln)
        return int(lines[0].split()[1]), fields, body

    status, fields, _ = h2("/news/2004/02/12/my-story")
    assert (status, fields["location"]) == (301, "/blog/2004/02/12/my-story")
    status, fields, body = h2("/app/x")
    assert (status, fields.get("x-app"), body) == (200, "1", b"the app\n")
    assert h2("/ecommerce")[0] == 404
    assert h2("/_redirects")[0] == 404


@pytest.mark.schemes("https")
def test_rules_over_http3(make_server, tmp_path, scheme):
    """The same answers over HTTP/3 (aioquic)."""
    root = site(tmp_path / "www", {"_redirects": NETLIFY_REDIRECTS, **NETLIFY_TREE,
                                   "_headers": "/app/*\n  X-App: 1\n"})
    srv = make_server(root, args=["--rules-files"])
    got = h3_get("127.0.0.1", srv.port, srv.ca,
                 [("GET", "/news/2004/02/12/my-story"), ("GET", "/app/x"), ("GET", "/ecommerce"),
                  ("GET", "/_headers")])
    assert (got[0].status, got[0].header("location")) == (301, "/blog/2004/02/12/my-story")
    assert (got[1].status, got[1].header("x-app"), bytes(got[1].body)) == (200, "1", b"the app\n")
    assert (got[2].status, bytes(got[2].body)) == (404, b"the store is closed\n")
    assert got[3].status == 404


def test_change_in_place_is_picked_up(make_server, tmp_path):
    """A _redirects or _headers written again is applied within seconds, as a changed file is
    served (no reload)."""
    root = site(tmp_path / "www", {"_redirects": "/go /one 302\n", "_headers": "/*\n  X-V: 1\n",
                                   "index.html": "x\n"})
    srv = make_server(root, args=["--rules-files"])
    assert get(srv, "/go").header("location") == "/one"
    tmp = root / "_redirects.tmp"
    tmp.write_text("/go /two 302\n")
    os.rename(tmp, root / "_redirects")
    (root / "_headers").write_text("/*\n  X-V: 2\n")
    wait_for(lambda: get(srv, "/go").header("location") == "/two"
             and get(srv, "/").header("x-v") == "2")


def version_tree(root, v):
    return site(root, {"_redirects": f"/go /v{v} 302\n",
                       "_headers": f"/*\n  X-Version: {v}\n",
                       "version.txt": f"{v}\n"})


def test_symlink_swap_switches_files_and_rules_together(make_server, tmp_path):
    """A deploy re-points the DOCROOT symlink at a new build under a bounded load: every
    response's rules (its X-Version field; /go's Location) are those of the build whose file
    it serves, and on each connection no response has the old rules after one served the new
    files."""
    builds = [version_tree(tmp_path / f"build{v}", v) for v in (1, 2, 3)]
    link = tmp_path / "current"
    link.symlink_to(builds[0])
    srv = make_server(link, args=["--rules-files"])
    errors, seen, stop = [], [], threading.Event()

    def client():
        try:
            with Conn(srv) as c:
                newest = 1
                for n in range(4000):
                    if stop.is_set():
                        break
                    r = c.request("GET", "/version.txt")
                    v = int(r.body)
                    if r.header("x-version") != str(v) or v < newest:
                        errors.append((v, newest, r.headers))
                        return
                    newest = v
                    g = c.request("GET", "/go")  # a swap may come between the two
                    lv = int(g.header("location")[2:])
                    if lv < v:
                        errors.append(("old rules after new files", v, g.headers))
                        return
                    newest = lv
                seen.append(newest)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=client) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for b in builds[1:]:
            tmp = tmp_path / "current.tmp"
            tmp.symlink_to(b)
            os.rename(tmp, link)  # atomic, as a deploy does it
            wait_for(lambda b=b: get(srv, "/version.txt").body == f"{b.name[-1]}\n".encode(),
                     timeout=15)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors, errors[:3]
    # every worker takes the last build at its next loop turn (a new connection may land on
    # one that has not turned yet)
    wait_for(lambda: get(srv, "/go").header("location") == "/v3")
    assert len(seen) == 3, seen


YAML_SITE = """\
sites:
  - hosts: [rules.test]
    root: {root}
    default: true
    redirects:
      - {{from: /old/*, to: "/new/:splat", status: 308}}
      - {{from: /store, query: {{id: ":id"}}, to: "/item/:id", status: 302}}
      - {{from: /forced.html, to: /x, force: true}}
      - "/line /from-a-line 307"
    headers:
      - {{path: "/*", type: text/html, set: {{X-Html: "1"}}}}
      - {{path: "/*", status: any, set: {{X-Any: "1"}}}}
      - {{path: "/docs/*", set: {{Cache-Control: "max-age=60", X-Docs: "1"}}, remove: [X-Any]}}
    access:
      - {{path: "/admin/*", deny: [127.0.0.0/8]}}
      - {{path: "/closed/*", allow: 10.0.0.0/8, action: close}}
      - {{path: "/open/*", allow: [127.0.0.1, "::1"]}}
    deny-user-agent: [GPTBot, "claude*bot"]
"""


def yaml_server(make_server, tmp_path, extra_args=()):
    root = site(tmp_path / "www", {"index.html": "<p>x</p>\n", "a.txt": "a\n",
                                   "forced.html": "f\n", "docs/d.txt": "d\n",
                                   "admin/a.txt": "secret\n", "closed/c.txt": "c\n",
                                   "open/o.txt": "o\n"})
    conf = tmp_path / "site.yaml"
    conf.write_text(YAML_SITE.format(root=root))
    return make_server(args=["--config", str(conf), *extra_args])


def test_yaml_redirects_and_headers(make_server, tmp_path):
    """redirects: {from, to, status, force, query} and headers: {path, type, status, set,
    remove} as the files' rules; a type match applies by the file's Content-Type, status: any
    also to errors."""
    srv = yaml_server(make_server, tmp_path)
    r = get(srv, "/old/a/b")
    assert (r.status, r.header("location")) == (308, "/new/a/b")
    r = get(srv, "/store?id=9")
    assert (r.status, r.header("location")) == (302, "/item/9")
    assert get(srv, "/forced.html").status == 301
    assert get(srv, "/line").header("location") == "/from-a-line"
    r = get(srv, "/")
    assert (r.header("x-html"), r.header("x-any")) == ("1", "1")
    r = get(srv, "/a.txt")
    assert (r.header("x-html"), r.header("x-any")) == (None, "1")
    r = get(srv, "/missing")
    assert r.status == 404 and r.header("x-any") == "1" and r.header("x-html") is None
    r = get(srv, "/docs/d.txt")
    assert (r.header("cache-control"), r.header("x-docs"), r.header("x-any")) == (
        "max-age=60", "1", None)


def test_yaml_access_rules_and_user_agents(make_server, tmp_path):
    """access: deny by CIDR (403), allow lists (403 for any other address, or a close with
    action: close), and deny-user-agent patterns (403 with a short body): both counted in the
    metrics."""
    srv = yaml_server(make_server, tmp_path, ["--metrics", "127.0.0.1:0"])
    assert get(srv, "/admin/a.txt").status == 403
    assert get(srv, "/open/o.txt").body == b"o\n"
    assert get(srv, "/a.txt").status == 200
    data = raw(srv, request("GET", "/closed/c.txt") + request("GET", "/a.txt"))
    assert data.startswith(b"HTTP/1.1 403") and data.count(b"HTTP/1.1") == 1, data
    for ua in ("Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)",
               "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0)"):
        r = get(srv, "/a.txt", headers=[("User-Agent", ua)])
        assert r.status == 403 and len(r.body) < 200
    assert get(srv, "/a.txt", headers=[("User-Agent", "curl/8.0")]).status == 200
    m = scrape(srv)
    assert sum(v for k, v in m.items() if k.startswith("ringhttpd_user_agent_refused_total")) == 2
    assert sum(v for k, v in m.items() if k.startswith("ringhttpd_access_refused_total")) == 2


@pytest.mark.parametrize("line, why", [
    ("redirects: '/a'", "wants FROM TO"),
    ("redirects: ['/a /b 999']", "status"),
    ("headers: ['/a Content-Length: 1']", "writes this field itself"),
    ("access: ['/a allow nonsense']", "not an address"),
])
def test_bad_yaml_rules_refused_with_their_line(tmp_path, line, why):
    """A configuration's own rule that cannot be used fails --check-config with its line."""
    conf = tmp_path / "c.yaml"
    conf.write_text(f"root: {tmp_path}\n{line}\n")
    p = subprocess.run([RINGHTTPD, "--check-config", str(conf)], capture_output=True, timeout=20)
    err = p.stderr.decode()
    assert p.returncode != 0 and f"{conf}:2:" in err and why in err, err
