"""Directory listings: off by default; with --autoindex an escaped, sorted HTML page or JSON,
never showing hidden files or a filesystem path (issue 4)."""

import html
import json
import os
import re
import time
import urllib.parse

import pytest

from conftest import INDEX_HTML, SUB_INDEX_HTML, Conn, fetch, request

NASTY = '<img src=x onerror=alert(1)>&"q\'.txt'
FILES = {
    "b-file.txt": b"b" * 1234,
    "a-file.txt": b"a",
    "m file with spaces.txt": b"spaces",
    "\u00fcnicode-\u00e9.txt": b"unicode",
    NASTY: b"nasty",
    "percent%20name.txt": b"percent",
    "hash#name.txt": b"hash",
    "question?name.txt": b"question",
}
DIRS = ["d-dir", "c-dir"]
HIDDEN = [".hidden-file", ".hidden-dir"]
VISIBLE = sorted(FILES) + DIRS


@pytest.fixture
def listing_root(docroot):
    d = docroot / "listing"
    d.mkdir()
    for name, data in FILES.items():
        (d / name).write_bytes(data)
    for name in DIRS:
        (d / name).mkdir()
        (d / name / "inside.txt").write_bytes(b"inside " + name.encode())
    (d / ".hidden-file").write_bytes(b"hidden")
    (d / ".hidden-dir").mkdir()
    os.utime(d / "b-file.txt", (1600000000, 1600000000))
    return docroot


@pytest.fixture
def ai_server(make_server, listing_root):
    return make_server(listing_root, args=["--autoindex"])


def hrefs(body):
    text = body.decode("utf-8")
    return [html.unescape(h) for h in re.findall(r'href="([^"]*)"', text)]


def entries(body, base="/listing/"):
    """The listing's links as decoded names relative to the directory (parent link dropped);
    relative ("name", "./name") and absolute ("/listing/name") hrefs are both understood."""
    out = []
    for h in hrefs(body):
        if h.startswith(base):
            h = h[len(base):]
        elif h.startswith("./"):
            h = h[2:]
        elif h.startswith(("/", "../", "?", "#")) or h in ("..", "") or "://" in h:
            continue
        if not h:
            continue
        out.append(urllib.parse.unquote(h))
    return out


def test_off_by_default(server):
    for target in ("/noindex/", "/noindex/cdir/"):
        r = fetch(server, target)
        assert r.status == 403, target
        assert b"a.txt" not in r.body and b"c.txt" not in r.body


def test_html_listing(ai_server, listing_root):
    r = fetch(ai_server, "/listing/")
    assert r.status == 200
    assert r.header("content-type").lower().replace(" ", "").startswith("text/html")
    assert "charset=utf-8" in r.header("content-type").lower().replace(" ", "")
    names = entries(r.body)
    # Every visible entry exactly once; directories marked with a trailing slash.
    plain = [n.rstrip("/") for n in names]
    assert sorted(plain) == sorted(VISIBLE), names
    for d in DIRS:
        assert d + "/" in names, f"directory {d} should link as {d}/"


def test_listing_is_escaped(ai_server):
    body = fetch(ai_server, "/listing/").body
    assert b"<img" not in body
    assert b"&lt;img src=x onerror=alert(1)&gt;" in body, "the name should be shown, escaped"


def test_dirs_first_then_sorted(ai_server):
    names = entries(fetch(ai_server, "/listing/").body)
    dir_idx = [i for i, n in enumerate(names) if n.endswith("/")]
    file_idx = [i for i, n in enumerate(names) if not n.endswith("/")]
    assert max(dir_idx) < min(file_idx), f"directories must come first: {names}"
    assert [names[i] for i in dir_idx] == ["c-dir/", "d-dir/"]
    files = [names[i] for i in file_idx]
    ascii_names = [n for n in files if n.isascii() and n[0].isalnum()]
    assert ascii_names == sorted(ascii_names), files
    assert files.index("a-file.txt") < files.index("b-file.txt") < \
        files.index("m file with spaces.txt")


def test_links_are_percent_encoded_and_work(ai_server):
    r = fetch(ai_server, "/listing/")
    raw_hrefs = re.findall(rb'href="([^"]*)"', r.body)
    for h in raw_hrefs:
        h = html.unescape(h.decode())
        assert not set(h) & set(' #?"<>'), f"href {h!r} is not percent-encoded"
    for name in entries(r.body):
        target = "/listing/" + urllib.parse.quote(name)
        got = fetch(ai_server, target)
        assert got.status == 200, (name, got.status)
        if not name.endswith("/"):
            assert got.body == FILES[name]


def test_hidden_entries_not_listed(ai_server):
    body = fetch(ai_server, "/listing/").body
    for name in HIDDEN:
        assert name.encode() not in body
    assert fetch(ai_server, "/listing/.hidden-dir/").status == 404


def test_no_filesystem_path_leaked(ai_server, listing_root):
    for target in ("/listing/", "/listing/c-dir/", "/noindex/"):
        for accept in ("text/html", "application/json"):
            r = fetch(ai_server, target, headers=[("Accept", accept)])
            assert r.status == 200
            for leak in (str(listing_root), str(listing_root.parent), "/tmp/"):
                assert leak.encode() not in r.body, f"{target} shows {leak}"


def test_sizes_shown(ai_server):
    body = fetch(ai_server, "/listing/").body.decode()
    # b-file.txt is 1234 bytes: shown exactly or rounded as 1.2K / 1.2 KiB.
    assert re.search(r"1234|1\.2\s?K", body), "no size shown for b-file.txt"


def test_index_html_wins_over_listing(ai_server):
    assert fetch(ai_server, "/").body == INDEX_HTML
    assert fetch(ai_server, "/sub/").body == SUB_INDEX_HTML


def test_directory_without_slash_still_redirects(ai_server):
    r = fetch(ai_server, "/listing")
    assert r.status == 301
    assert urllib.parse.urlsplit(r.header("location")).path == "/listing/"


def find_entries(doc):
    if isinstance(doc, list):
        return doc
    assert isinstance(doc, dict), doc
    for v in doc.values():
        if isinstance(v, list) and all(isinstance(e, dict) for e in v):
            return v
    pytest.fail(f"no list of entries in {doc!r}")


def test_json_listing(ai_server):
    r = fetch(ai_server, "/listing/", headers=[("Accept", "application/json")])
    assert r.status == 200
    assert r.header("content-type").split(";")[0].strip().lower() == "application/json"
    doc = json.loads(r.body)
    items = find_entries(doc)
    by_name = {}
    for e in items:
        assert "name" in e, e
        by_name[e["name"].rstrip("/")] = e
    assert sorted(by_name) == sorted(VISIBLE)
    for name in HIDDEN:
        assert name not in by_name
    for name, data in FILES.items():
        e = by_name[name]
        size = e.get("size", e.get("bytes", e.get("length")))
        assert size == len(data), e
    for d in DIRS:
        e = by_name[d]
        flags = json.dumps(e).lower()
        assert e["name"].endswith("/") or "dir" in flags, f"{d} not marked as a directory: {e}"
    # Same order as the HTML listing: directories first.
    assert [e["name"].rstrip("/") for e in items[:len(DIRS)]] == sorted(DIRS)


def test_listing_varies_on_accept(ai_server):
    # The same URL answers HTML or JSON by Accept, so caches must be told (RFC 9110 12.5.5).
    for accept in ("text/html", "application/json"):
        r = fetch(ai_server, "/listing/", headers=[("Accept", accept)])
        assert "accept" in r.tokens("vary"), r.headers


def test_html_and_json_differ_only_by_accept(ai_server):
    with Conn(ai_server) as c:
        c.send(request("GET", "/listing/", headers=[("Accept", "text/html")]) +
               request("GET", "/listing/", headers=[("Accept", "application/json")]) +
               request("HEAD", "/listing/"))
        h, j, hd = c.read_many(["GET", "GET", "HEAD"])
    assert h.header("content-type").startswith("text/html")
    assert j.header("content-type").startswith("application/json")
    json.loads(j.body)
    assert hd.status == 200 and hd.body == b""
    assert hd.header("content-length") == h.header("content-length")


def test_empty_directory_listing(make_server, docroot):
    (docroot / "emptydir").mkdir()
    server = make_server(docroot, args=["--autoindex"])
    r = fetch(server, "/emptydir/")
    assert r.status == 200
    assert entries(r.body) == []
    j = fetch(server, "/emptydir/", headers=[("Accept", "application/json")])
    assert find_entries(json.loads(j.body)) == []


# Big directories (issue 10, item 11): a listing shows at most --autoindex-limit entries (in
# listing order: directories first, then names) with a note counting the rest, stats only
# what it shows, and is rendered once and kept while the directory is unchanged.
def make_big_dir(docroot, files, dirs=0):
    d = docroot / "big"
    d.mkdir()
    for i in range(files):
        (d / f"f{i:05d}.txt").write_bytes(b"x" * (i % 7))
    for i in range(dirs):
        (d / f"z-dir{i}").mkdir()
    return d


def test_listing_is_capped_with_a_note(make_server, docroot):
    make_big_dir(docroot, 300, dirs=3)
    server = make_server(docroot, args=["--autoindex", "--autoindex-limit", "100"])
    r = fetch(server, "/big/")
    assert r.status == 200
    names = entries(r.body, base="/big/")
    assert names == [f"z-dir{i}/" for i in range(3)] + [f"f{i:05d}.txt" for i in range(97)]
    assert b"<p>203 more entries not shown.</p>" in r.body
    j = fetch(server, "/big/", headers=[("Accept", "application/json")])
    doc = json.loads(j.body)
    assert doc["omitted"] == 203 and len(doc["entries"]) == 100
    assert doc["entries"][3] == {"name": "f00000.txt", "href": "f00000.txt", "type": "file",
                                 "size": 0, "mtime": doc["entries"][3]["mtime"]}
    # Under the limit: everything, and no note.
    small = fetch(server, "/noindex/")
    assert b"not shown" not in small.body


def test_default_limit_on_a_directory_of_20000(make_server, docroot):
    make_big_dir(docroot, 20000)
    server = make_server(docroot, args=["--autoindex"])
    with Conn(server, timeout=30) as c:
        for _ in range(3):  # the second and third come from the kept listing: the same bytes
            r = c.request("GET", "/big/")
            assert r.status == 200
            assert b"<p>10000 more entries not shown.</p>" in r.body
            assert r.body.count(b"<tr><td><a href=\"f") == 10000
        assert c.request("GET", "/hello.txt").status == 200


def test_kept_listing_follows_the_directory(make_server, docroot):
    """An entry added or removed shows within the revalidation window; a file that changes
    size in place (the directory itself unchanged) within the listing's reuse time (5 s)."""
    d = make_big_dir(docroot, 5)
    server = make_server(docroot, args=["--autoindex"])
    assert "new.txt" not in entries(fetch(server, "/big/").body, base="/big/")
    (d / "new.txt").write_bytes(b"n")
    deadline = time.monotonic() + 5
    while "new.txt" not in entries(fetch(server, "/big/").body, base="/big/"):
        assert time.monotonic() < deadline, "added file not listed"
        time.sleep(0.1)
    (d / "f00001.txt").write_bytes(b"y" * 5000)
    deadline = time.monotonic() + 10
    while b"4.9 KiB" not in fetch(server, "/big/").body:
        assert time.monotonic() < deadline, "size change not listed"
        time.sleep(0.2)
