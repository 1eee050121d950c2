"""Static sites as generators build them (issue 39): --pages, --clean-urls, --index,
--trailing-slash, the nearest 404.html, --fallback per prefix, and the host in the access log.

Each generator's output is laid out here as that generator writes it (file names, where its
assets go, how its pages link: absolute, relative, with or without the slash), small and made
by the test; a crawler then follows every href and src from / over HTTP/1.1, HTTP/2 and HTTP/3
and must meet only 200s whose bodies are the files the generator meant for those URLs.
The precedence tables are Cloudflare's html_handling ones (auto-trailing-slash,
force-trailing-slash, drop-trailing-slash), with 301 where Cloudflare answers 307."""

import html.parser
import json
import pathlib
import re
import shutil
import subprocess
import urllib.parse

import pytest

from conftest import OUTSIDE_CONTENT, Conn, fetch, raw, request
from h3client import h3_get

pytestmark = pytest.mark.schemes("http", "https")


def page(name, *links, scripts=(), styles=(), images=()):
    """An HTML page whose body names it, linking to each of links."""
    head = "".join(f'<link rel="stylesheet" href="{s}">' for s in styles)
    head += "".join(f'<script type="module" src="{s}"></script>' for s in scripts)
    body = "".join(f'<a href="{h}">{h}</a>\n' for h in links)
    body += "".join(f'<img src="{i}" alt="">' for i in images)
    return (f"<!doctype html>\n<html><head><title>{name}</title>{head}</head>\n"
            f"<body data-page=\"{name}\">\n{body}</body></html>\n").encode()


# Each generator: (files: {path: bytes}, routes: {URL a link names: the file it must serve}).

def nextjs():
    """Next.js `output: 'export'` (trailingSlash false): app/about/page.tsx -> about.html, its
    assets under _next/static, links to /about without .html."""
    css, js = "/_next/static/css/6a1f9c2e.css", "/_next/static/chunks/main-9b1c4d.js"
    nav = ("/", "/about", "/blog", "/blog/hello-world", "/docs/getting-started")
    common = dict(scripts=(js,), styles=(css,))
    files = {
        "index.html": page("home", *nav, "/favicon.ico", images=("/_next/static/media/logo.5d1e.svg",),
                           **common),
        "about.html": page("about", *nav, **common),
        "blog.html": page("blog", *nav, "/blog/hello-world", "/blog/second", **common),
        "blog/hello-world.html": page("hello-world", "/blog", "/", **common),
        "blog/second.html": page("second", "/blog/hello-world", **common),
        "docs/getting-started.html": page("getting-started", "/docs/install", **common),
        "docs/install.html": page("install", "/docs/getting-started", **common),
        "404.html": page("next-404", "/", **common),
        "_next/static/css/6a1f9c2e.css": b"body{margin:0}\n",
        "_next/static/chunks/main-9b1c4d.js": b"console.log('next')\n",
        "_next/static/media/logo.5d1e.svg": b"<svg xmlns='http://www.w3.org/2000/svg'/>\n",
        "favicon.ico": b"\x00\x00\x01\x00",
        "index.txt": b"0:[\"$\",\"html\"]\n",  # the RSC payload export writes beside each page
    }
    routes = {"/": "index.html", "/about": "about.html", "/blog": "blog.html",
              "/blog/hello-world": "blog/hello-world.html", "/blog/second": "blog/second.html",
              "/docs/getting-started": "docs/getting-started.html",
              "/docs/install": "docs/install.html"}
    return files, routes


def astro():
    """Astro `build.format: 'file'`: src/pages/about.astro -> about.html, assets in _astro/,
    links without the slash (trailingSlash 'never'), a relative link among posts."""
    css, js = "/_astro/index.B1a2c3.css", "/_astro/hoisted.C3d4e5.js"
    common = dict(scripts=(js,), styles=(css,))
    files = {
        "index.html": page("home", "/about", "/blog", "/blog/first-post", images=("/favicon.svg",),
                           **common),
        "about.html": page("about", "/", **common),
        "blog.html": page("blog", "/blog/first-post", "/blog/second-post", **common),
        "blog/first-post.html": page("first-post", "second-post", "/blog", **common),
        "blog/second-post.html": page("second-post", "first-post", **common),
        "404.html": page("astro-404", "/", **common),
        "_astro/index.B1a2c3.css": b"h1{color:navy}\n",
        "_astro/hoisted.C3d4e5.js": b"export {}\n",
        "favicon.svg": b"<svg xmlns='http://www.w3.org/2000/svg'/>\n",
    }
    routes = {"/": "index.html", "/about": "about.html", "/blog": "blog.html",
              "/blog/first-post": "blog/first-post.html",
              "/blog/second-post": "blog/second-post.html"}
    return files, routes


def sveltekit():
    """SvelteKit adapter-static (prerendered, trailingSlash 'never', paths.relative): about.html,
    blog/hello.html; assets under _app/immutable, linked relatively (./_app from /, ../_app from
    /blog/hello), which only resolves when the page is served at its slash-less URL."""
    def svelte(name, depth, *links):
        up = "./" if depth == 0 else "../" * depth
        return page(name, *links, scripts=(f"{up}_app/immutable/entry/start.Dx1y2z.js",),
                    styles=(f"{up}_app/immutable/assets/0.Ab2Cd3.css",))
    files = {
        "index.html": svelte("home", 0, "/about", "/blog", "/blog/hello"),
        "about.html": svelte("about", 0, "/"),
        "blog.html": svelte("blog", 0, "/blog/hello", "/blog/world"),
        "blog/hello.html": svelte("hello", 1, "/blog", "world"),
        "blog/world.html": svelte("world", 1, "hello"),
        "404.html": svelte("svelte-404", 0, "/"),
        "_app/immutable/entry/start.Dx1y2z.js": b"export const start = 1;\n",
        "_app/immutable/assets/0.Ab2Cd3.css": b"main{display:grid}\n",
        "_app/version.json": b'{"version":"1700000000000"}\n',
        "favicon.png": b"\x89PNG\r\n\x1a\n",
    }
    routes = {"/": "index.html", "/about": "about.html", "/blog": "blog.html",
              "/blog/hello": "blog/hello.html", "/blog/world": "blog/world.html"}
    return files, routes


def hugo():
    """Hugo (pretty URLs, its default): about/index.html, posts/first-post/index.html, linked
    with the trailing slash; a relative ../ link; sitemap and RSS beside the pages."""
    css = "/css/main.min.1a2b3c.css"
    common = dict(styles=(css,))
    files = {
        "index.html": page("home", "/about/", "/posts/", "/posts/first-post/", "/tags/go/",
                           "/index.xml", "/sitemap.xml", **common),
        "about/index.html": page("about", "/", **common),
        "posts/index.html": page("posts", "first-post/", "second-post/", **common),
        "posts/first-post/index.html": page("first-post", "../second-post/", "/tags/go/",
                                            **common),
        "posts/second-post/index.html": page("second-post", "../first-post/", **common),
        "tags/go/index.html": page("tag-go", "/posts/first-post/", **common),
        "404.html": page("hugo-404", "/", **common),
        "css/main.min.1a2b3c.css": b"body{font:16px sans-serif}\n",
        "index.xml": b"<?xml version=\"1.0\"?><rss/>\n",
        "sitemap.xml": b"<?xml version=\"1.0\"?><urlset/>\n",
    }
    routes = {"/": "index.html", "/about/": "about/index.html", "/posts/": "posts/index.html",
              "/posts/first-post/": "posts/first-post/index.html",
              "/posts/second-post/": "posts/second-post/index.html",
              "/tags/go/": "tags/go/index.html"}
    return files, routes


GENERATORS = {"nextjs": nextjs, "astro": astro, "sveltekit": sveltekit, "hugo": hugo}


def build(root, files):
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.found = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.found.append(value)


def links_of(url_path, body):
    """The same-site paths body links to, resolved against url_path as a browser does."""
    parser = Links()
    parser.feed(body.decode("utf-8", "replace"))
    out = []
    for link in parser.found:
        u = urllib.parse.urlsplit(urllib.parse.urljoin("http://site" + url_path, link))
        if u.netloc == "site" and u.scheme == "http":
            out.append(u.path + (f"?{u.query}" if u.query else ""))
    return out


# Fetchers: a list of paths in, [(status, headers {lower name: value}, body)] out, each on one
# connection of its protocol.

def fetch_h1(srv, paths):
    out = []
    with Conn(srv) as c:
        for p in paths:
            r = c.request("GET", p)
            out.append((r.status, dict(r.headers), r.body))
    return out


def fetch_h2(srv, paths):
    """curl over HTTP/2: h2c prior knowledge in clear text, ALPN h2 over TLS."""
    out = []
    mode = "--http2-prior-knowledge" if srv.scheme == "http" else "--http2"
    for p in paths:  # one curl a path: its output is one response
        cmd = ["curl", "-sS", mode, "-D", "-", "-o", "-", srv.url(p)]
        if srv.scheme == "https":
            cmd[1:1] = ["--cacert", str(srv.ca)]
        data = subprocess.run(cmd, capture_output=True, timeout=30, check=True).stdout
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        assert lines[0].startswith("HTTP/2 "), lines[0]
        hdrs = dict((n.strip().lower(), v.strip()) for n, _, v in
                    (ln.partition(":") for ln in lines[1:]))
        out.append((int(lines[0].split()[1]), hdrs, body))
    return out


def fetch_h3(srv, paths):
    rs = h3_get("127.0.0.1", srv.port, srv.ca, [("GET", p) for p in paths])
    return [(r.status, dict(r.headers), bytes(r.body)) for r in rs]


FETCHERS = {"h1": fetch_h1, "h2": fetch_h2, "h3": fetch_h3}


def need_protocol(srv, protocol):
    if protocol == "h3" and srv.scheme != "https":
        pytest.skip("HTTP/3 runs over TLS only: the https case covers it")
    if protocol == "h2" and not shutil.which("curl"):
        pytest.fail("curl is missing: scripts/deps.sh test installs it")


def crawl(srv, protocol, start="/", limit=200):
    """Breadth first from start, one level per connection: {path: (status, headers, body)}."""
    seen, level = {}, [start]
    while level and len(seen) < limit:
        answers = FETCHERS[protocol](srv, level)
        nxt = []
        for p, (status, hdrs, body) in zip(level, answers):
            seen[p] = (status, hdrs, body)
            if status == 200 and hdrs.get("content-type", "").startswith("text/html"):
                for link in links_of(p, body):
                    if link not in seen and link not in nxt and link not in level:
                        nxt.append(link)
        level = nxt
    return seen


@pytest.mark.parametrize("protocol", ["h1", "h2", "h3"])
@pytest.mark.parametrize("generator", sorted(GENERATORS))
def test_every_link_of_a_generated_site_is_served(make_server, tmp_path, generator, protocol):
    files, routes = GENERATORS[generator]()
    root = build(tmp_path / "site", files)
    srv = make_server(root, args=["--pages"])
    need_protocol(srv, protocol)
    seen = crawl(srv, protocol)
    bad = {p: s for p, (s, _, _) in seen.items() if s != 200}
    assert not bad, f"{generator} over {protocol}: not 200: {bad}"
    assert set(routes) <= set(seen), f"pages the crawl never reached: {set(routes) - set(seen)}"
    for p, (_, _, body) in seen.items():
        want = routes.get(p.split("?")[0], p.lstrip("/"))
        assert body == files[want], f"{p} did not serve {want}"


def test_without_clean_urls_the_same_links_404(make_server, tmp_path):
    """The crawler can fail: the Next.js tree without --pages is today's 404s."""
    files, _ = nextjs()
    srv = make_server(build(tmp_path / "site", files))
    seen = crawl(srv, "h1")
    assert {p for p, (s, _, _) in seen.items() if s == 404} >= {"/about", "/blog/hello-world"}


# ---- precedence: Cloudflare's html_handling tables, each mode ----

TREE = {
    "file.html": b"file.html\n",
    "folder/index.html": b"folder/index.html\n",
    "both.html": b"both.html\n",
    "both/index.html": b"both/index.html\n",
    "plain": b"plain\n",  # a file without an extension: served as given, always
    "plain.html": b"plain.html\n",
    "index.html": b"root index\n",
    "noindex/other.txt": b"other\n",
}

# (request, status, body for 200 or Location for 301): auto is Cloudflare's auto-trailing-slash
AUTO = [
    ("/file", 200, b"file.html\n"),
    ("/file.html", 301, "/file"),
    ("/file/", 301, "/file"),
    ("/folder", 301, "/folder/"),
    ("/folder/", 200, b"folder/index.html\n"),
    ("/folder/index.html", 301, "/folder/"),
    ("/both", 200, b"both.html\n"),
    ("/both/", 200, b"both/index.html\n"),
    ("/plain", 200, b"plain\n"),
    ("/plain.html", 200, b"plain.html\n"),  # /plain is another file: no redirect
    ("/", 200, b"root index\n"),
    ("/index.html", 301, "/"),
    ("/file.html?a=1&b", 301, "/file?a=1&b"),
    ("/folder?x=%41", 301, "/folder/?x=%41"),
    ("/noindex", 301, "/noindex/"),
    ("/noindex/", 403, None),
]
# force-trailing-slash
ALWAYS = [
    ("/file", 301, "/file/"),
    ("/file.html", 301, "/file/"),
    ("/file/", 200, b"file.html\n"),
    ("/folder", 301, "/folder/"),
    ("/folder/", 200, b"folder/index.html\n"),
    ("/folder/index.html", 301, "/folder/"),
    ("/both", 301, "/both/"),
    ("/both/", 200, b"both/index.html\n"),
    ("/both.html", 200, b"both.html\n"),  # /both/ is the directory's: not this file's URL
    ("/plain", 200, b"plain\n"),
    ("/index.html", 301, "/"),
]
# drop-trailing-slash
NEVER = [
    ("/file", 200, b"file.html\n"),
    ("/file.html", 301, "/file"),
    ("/file/", 301, "/file"),
    ("/folder", 200, b"folder/index.html\n"),
    ("/folder/", 301, "/folder"),
    ("/folder/index.html", 301, "/folder"),
    ("/folder/?q=1", 301, "/folder?q=1"),
    ("/both", 200, b"both.html\n"),
    ("/both/", 301, "/both"),
    ("/both/index.html", 200, b"both/index.html\n"),  # /both serves both.html: no redirect
    ("/", 200, b"root index\n"),
    ("/index.html", 301, "/"),
    ("/noindex", 301, "/noindex/"),  # no index: it keeps the slash its listing needs
]
# clean-urls on: no redirects of .html names; today's directory handling
ON = [
    ("/file", 200, b"file.html\n"),
    ("/file.html", 200, b"file.html\n"),
    ("/folder/index.html", 200, b"folder/index.html\n"),
    ("/folder", 301, "/folder/"),
    ("/file/", 301, "/file"),
]
# nothing given: as before issue 39
OFF = [
    ("/file", 404, None),
    ("/file.html", 200, b"file.html\n"),
    ("/folder", 301, "/folder/"),
    ("/folder/index.html", 200, b"folder/index.html\n"),
    ("/both", 301, "/both/"),
]

MODES = {
    "auto": (["--clean-urls", "redirect"], AUTO),
    "pages": (["--pages"], AUTO),
    "always": (["--clean-urls", "redirect", "--trailing-slash", "always"], ALWAYS),
    "never": (["--clean-urls", "redirect", "--trailing-slash", "never"], NEVER),
    "on": (["--clean-urls", "on"], ON),
    "off": ([], OFF),
}


def check_table(srv, table, fetcher=None):
    answers = (fetcher or fetch_h1)(srv, [row[0] for row in table])
    for (target, status, want), (got, hdrs, body) in zip(table, answers):
        assert got == status, f"{target}: {got}, expected {status}"
        if status == 301:
            assert hdrs.get("location") == want, f"{target}: Location {hdrs.get('location')}"
        elif status == 200:
            assert body == want, f"{target}: {body!r}"


@pytest.mark.parametrize("mode", sorted(MODES))
def test_precedence_table(make_server, tmp_path, mode):
    args, table = MODES[mode]
    srv = make_server(build(tmp_path / "site", TREE), args=args)
    check_table(srv, table)


@pytest.mark.parametrize("protocol", ["h2", "h3"])
def test_precedence_over_h2_and_h3(make_server, tmp_path, protocol):
    srv = make_server(build(tmp_path / "site", TREE), args=["--pages"])
    need_protocol(srv, protocol)
    check_table(srv, AUTO, FETCHERS[protocol])
    srv2 = make_server(build(tmp_path / "site2", TREE),
                       args=["--clean-urls", "redirect", "--trailing-slash", "never"])
    check_table(srv2, NEVER, FETCHERS[protocol])


def test_head_of_a_clean_url_has_the_files_headers_and_no_body(make_server, tmp_path):
    srv = make_server(build(tmp_path / "site", TREE), args=["--pages"])
    get, head = fetch(srv, "/file"), fetch(srv, "/file", method="HEAD")
    assert get.status == head.status == 200 and head.body == b""
    assert head.header("content-type") == get.header("content-type")
    assert head.header("etag") == get.header("etag") is not None


# ---- --index ----

def test_index_names_in_order(make_server, tmp_path):
    root = build(tmp_path / "site", {"a/index.htm": b"a htm\n", "b/index.htm": b"b htm\n",
                                     "b/default.html": b"b default\n", "c/index.html": b"c\n"})
    srv = make_server(root, args=["--index", "index.htm", "--index", "default.html"])
    check_table(srv, [("/a/", 200, b"a htm\n"), ("/b/", 200, b"b htm\n"), ("/c/", 403, None)])
    srv2 = make_server(root, args=["--index", "default.html index.htm", "--clean-urls",
                                   "redirect"])
    check_table(srv2, [("/b/", 200, b"b default\n"), ("/a/", 200, b"a htm\n"),
                       ("/b/default.html", 301, "/b/"), ("/a/index.htm", 301, "/a/"),
                       ("/b/index.htm", 200, b"b htm\n")])  # not what /b/ serves: no redirect


@pytest.mark.parametrize("bad", ["../index.html", ".hidden", "a/index.html", ""])
def test_index_refuses_names_that_are_not_one_file_name(bad, tmp_path):
    from conftest import RINGHTTPD
    p = subprocess.run([RINGHTTPD, "--index", bad, str(tmp_path)], capture_output=True,
                       timeout=10)
    assert p.returncode == 2
    assert re.match(rb"ringhttpd: --index( wants file names|: invalid name)", p.stderr), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


# ---- the nearest 404.html ----

NOT_FOUND_TREE = {
    "index.html": b"home\n",
    "404.html": b"root 404\n",
    "blog/404.html": b"blog 404\n",
    "blog/post.html": b"post\n",
    "docs/guide/page.html": b"page\n",
    "custom.html": b"custom\n",
}


def test_nearest_404_up_the_tree(make_server, tmp_path):
    srv = make_server(build(tmp_path / "site", NOT_FOUND_TREE), args=["--pages"])
    for target, body in [("/blog/missing", b"blog 404\n"), ("/blog/a/b/c/missing", b"blog 404\n"),
                         ("/blog/missing/", b"blog 404\n"), ("/missing", b"root 404\n"),
                         ("/docs/guide/missing", b"root 404\n"), ("/.env", b"root 404\n"),
                         ("/blog/.git/config", b"root 404\n"),
                         ("/blog/post.html/", b"blog 404\n"),
                         ("/" + "a/" * 1000 + "x", b"root 404\n")]:
        r = fetch(srv, target)
        assert (r.status, r.body) == (404, body), target
        assert r.header("content-type") == "text/html; charset=utf-8"
    h = fetch(srv, "/blog/missing", method="HEAD")
    assert h.status == 404 and h.body == b""
    # the page itself is a page like any other (clean URL and all)
    assert fetch(srv, "/404.html").header("location") == "/404"
    assert (fetch(srv, "/404").status, fetch(srv, "/404").body) == (200, b"root 404\n")


def test_nearest_404_before_error_page_and_only_with_pages(make_server, tmp_path):
    root = build(tmp_path / "site", NOT_FOUND_TREE)
    srv = make_server(root, args=["--pages", "--error-page", "404=/custom.html"])
    assert fetch(srv, "/blog/x").body == b"blog 404\n"
    (root / "404.html").unlink()
    (root / "blog" / "404.html").unlink()
    srv2 = make_server(root, args=["--pages", "--error-page", "404=/custom.html"])
    assert (fetch(srv2, "/blog/x").status, fetch(srv2, "/blog/x").body) == (404, b"custom\n")
    srv3 = make_server(build(tmp_path / "plain", NOT_FOUND_TREE))
    r = fetch(srv3, "/blog/x")
    assert r.status == 404 and b"blog 404" not in r.body and b"root 404" not in r.body


def test_nearest_404_over_h2_and_h3(make_server, tmp_path):
    srv = make_server(build(tmp_path / "site", NOT_FOUND_TREE), args=["--pages"])
    for protocol in ("h2", "h3"):
        if protocol == "h3" and srv.scheme != "https":
            continue
        got = FETCHERS[protocol](srv, ["/blog/x", "/x"])
        assert [(s, b) for s, _, b in got] == [(404, b"blog 404\n"), (404, b"root 404\n")]


# ---- --fallback per prefix ----

def test_fallback_per_prefix_longest_first(make_server, tmp_path):
    root = build(tmp_path / "site", {"index.html": b"home\n", "app/index.html": b"app shell\n",
                                     "app/admin/index.html": b"admin shell\n",
                                     "app/logo.svg": b"<svg/>\n"})
    srv = make_server(root, args=["--fallback", "/app/=/app/index.html",
                                  "--fallback", "/app/admin=/app/admin/index.html"])
    html = [("Accept", "text/html")]
    for target, status, body in [("/app/users/7", 200, b"app shell\n"),
                                 ("/app", 200, None), ("/app/admin/x/y", 200, b"admin shell\n"),
                                 ("/app/logo.svg", 200, b"<svg/>\n"), ("/apple", 404, None),
                                 ("/other", 404, None)]:
        r = fetch(srv, target, headers=html)
        assert r.status in (status, 301), (target, r.status)
        if body:
            assert r.body == body, target
    assert fetch(srv, "/app/x.png", headers=[("Accept", "image/png")]).status == 404
    # a whole-site one beside the prefixes: the longest prefix still wins
    srv2 = make_server(root, args=["--fallback", "/index.html",
                                   "--fallback", "/app=/app/index.html"])
    assert fetch(srv2, "/app/x", headers=html).body == b"app shell\n"
    assert fetch(srv2, "/elsewhere", headers=html).body == b"home\n"


@pytest.mark.no_tls("the sites' names are not the test certificate's")
def test_yaml_sites_each_their_own(make_server, tmp_path):
    a = build(tmp_path / "a", TREE)
    b = build(tmp_path / "b", TREE)
    conf = tmp_path / "site.yaml"
    conf.write_text(f"""sites:
  - hosts: [a.test]
    root: {a}
    pages: true
    trailing-slash: never
    index: [index.htm, index.html]
    fallback:
      - /app/=/index.html
  - hosts: [b.test]
    root: {b}
    default: true
""")
    from conftest import RINGHTTPD
    p = subprocess.run([RINGHTTPD, "--check-config", str(conf)], capture_output=True, timeout=10)
    assert p.returncode == 0, p.stderr
    srv = make_server(args=["--config", str(conf)])
    with Conn(srv) as c:
        c.send(request("GET", "/folder", host="a.test"))
        assert c.read().body == b"folder/index.html\n"
        c.send(request("GET", "/folder", host="b.test"))
        assert c.read().header("location") == "/folder/"
        c.send(request("GET", "/file", host="b.test"))
        assert c.read().status == 404
        c.send(request("GET", "/app/x", host="a.test", headers=[("Accept", "text/html")]))
        assert c.read().body == b"root index\n"


@pytest.mark.no_tls("the sites' names are not the test certificate's")
def test_a_reload_turns_pages_on_and_off(make_server, tmp_path):
    """SIGHUP applies a site's new pages/trailing-slash (per-site options, reload: true)."""
    import signal
    from conftest import wait_for
    root = build(tmp_path / "site", TREE)
    conf = tmp_path / "site.yaml"
    conf.write_text(f"sites:\n  - hosts: [a.test]\n    root: {root}\n    default: true\n")
    srv = make_server(args=["--config", str(conf)])
    assert fetch(srv, "/file").status == 404
    conf.write_text(f"sites:\n  - hosts: [a.test]\n    root: {root}\n    default: true\n"
                    "    pages: true\n    trailing-slash: never\n")
    srv.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: fetch(srv, "/file").status == 200), srv.stderr_text()
    assert fetch(srv, "/folder").body == b"folder/index.html\n"
    conf.write_text(f"sites:\n  - hosts: [a.test]\n    root: {root}\n    default: true\n")
    srv.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: fetch(srv, "/file").status == 404), srv.stderr_text()
    assert fetch(srv, "/folder").header("location") == "/folder/"


# ---- what a client controls: the same answers with clean URLs as without ----

HOSTILE = [
    # (target, status with --pages; None: the same as without)
    ("/file.html/..", None),
    ("/file.html/../", None),
    ("/%2e%2e/%2e%2e/outside", None),
    ("/%2e%2e%2foutside.txt", None),
    ("/..%2f..%2foutside", 404),
    ("/file%00", None),
    ("/file%00.html", None),
    ("/file.html%00", None),
    ("//evil.example/file", None),
    ("/%2f%2fevil.example/file.html", None),
    ("//evil.example/../file.html", 301),
    ("/%2f%2fevil.example/%2e%2e/file.html", 301),
    ("/%5cevil.example/file.html", None),
    ("/file%2ehtml", 301),
    ("/escape", 404),
    ("/escape.html", None),
    ("/outdir/secret", 404),
    ("/.well-known/../file", 200),
    ("/file.html" + "/x" * 600, None),
]


def test_hostile_paths_stay_inside_and_locations_stay_on_the_host(make_server, docroot):
    build(docroot, TREE)
    (docroot / "escape.html").symlink_to("../outside.txt")
    plain = make_server(docroot)
    pages = make_server(docroot, args=["--pages"])
    for target, status in HOSTILE:
        before = fetch(plain, target)
        after = fetch(pages, target)
        assert OUTSIDE_CONTENT not in after.body, target
        want = before.status if status is None else status
        assert after.status == want, (target, before.status, after.status)
        loc = after.header("location")
        if loc is not None:
            assert loc.startswith("/") and not loc.startswith("//") and "\\" not in loc, loc
            assert re.fullmatch(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]*", loc), loc
    # a NUL byte raw in the request line: a 400 from the parser, as before
    assert raw(pages, b"GET /file\x00 HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 400")


# ---- the host in the access log ----

APACHE_VHOST_COMBINED = re.compile(
    r'^(?P<vhost>\S+):(?P<port>\d+|-) (?P<addr>\S+) - - \[\d{2}/\w{3}/\d{4}:\d{2}:\d{2}:\d{2} '
    r'\+0000\] "(?P<request>[^"]*)" (?P<status>\d{3}) (?P<bytes>\d+) "(?P<referer>[^"]*)" '
    r'"(?P<agent>[^"]*)"$')


def test_vcombined_is_what_goaccess_reads(make_server, tmp_path):
    log = tmp_path / "access.log"
    srv = make_server(build(tmp_path / "site", TREE),
                      args=["--access-log", str(log), "--log-format", "vcombined"])
    sent = [("a.test", "/file"), ("B.Test:8443", "/missing"), ("a.test", "/folder/")]
    with Conn(srv) as c:
        for host, path in sent:
            c.send(request("GET", path, host=host, headers=[("User-Agent", "crawler/1")]))
            c.read()
    srv.stop()
    lines = log.read_text().splitlines()  # one connection, one worker: in order
    assert len(lines) == len(sent), lines
    default_port = "443" if srv.scheme == "https" else "80"
    got = [APACHE_VHOST_COMBINED.match(ln) for ln in lines]
    assert all(got), lines
    assert [(m["vhost"], m["port"]) for m in got] == [
        ("a.test", default_port), ("b.test", "8443"), ("a.test", default_port)]
    assert [m["request"] for m in got] == [f"GET {p} HTTP/1.1" for _, p in sent]
    if not shutil.which("goaccess"):
        pytest.fail("goaccess is missing: scripts/deps.sh test installs it")
    report = tmp_path / "report.json"
    subprocess.run(["goaccess", str(log), "--log-format=VCOMBINED", "--no-global-config",
                    "-o", str(report)], check=True, capture_output=True, timeout=60)
    data = json.loads(report.read_text())
    assert data["general"]["valid_requests"] == len(sent)
    assert data["general"]["failed_requests"] == 0
    vhosts = {v["data"]: v["hits"]["count"] for v in data["vhosts"]["data"]}
    assert vhosts == {"a.test": 2, "b.test": 1}, vhosts


@pytest.mark.schemes("https")
def test_vcombined_port_of_an_error_over_http2_is_the_tls_one(make_server, tmp_path, scheme):
    """A request HTTP/2 refuses before serve (a 414 for a 9,000-byte path) is logged with the
    port its scheme implies, 443 over TLS, as every served request is; the build before said
    80 for such errors (their policy was the cleartext default)."""
    log = tmp_path / "access.log"
    srv = make_server(build(tmp_path / "site", TREE),
                      args=["--access-log", str(log), "--log-format", "vcombined"])
    url = f"https://localhost:{srv.port}/" + "a" * 9000
    subprocess.run(["nghttp", "-n", url], capture_output=True, timeout=30)
    srv.stop()
    lines = [ln for ln in log.read_text().splitlines() if '" 414 ' in ln]
    assert lines, log.read_text()
    assert all(ln.split(" ", 1)[0].endswith(":443") for ln in lines), lines


def test_json_log_has_the_host_over_every_protocol(make_server, tmp_path):
    log = tmp_path / "access.log"
    srv = make_server(build(tmp_path / "site", TREE),
                      args=["--access-log", str(log), "--log-format", "json"])
    with Conn(srv) as c:
        c.send(request("GET", "/file", host="Example.ORG:8080"))
        c.read()
        c.send(request("GET", "/file", version="1.0", host=None))
        c.read_or_close()
    fetch_h2(srv, ["/file"])
    if srv.scheme == "https":
        fetch_h3(srv, ["/file"])
    srv.stop()
    entries = [json.loads(ln) for ln in log.read_text().splitlines()]
    # each worker hands its own buffer over: lines of different connections in any order
    hosts = sorted(((e["protocol"], e["host"]) for e in entries), key=str)
    want = [("HTTP/1.1", "example.org"), ("HTTP/1.0", None), ("HTTP/2.0", "127.0.0.1")]
    if srv.scheme == "https":
        want.append(("HTTP/3.0", "localhost"))
    assert hosts == sorted(want, key=str), hosts
