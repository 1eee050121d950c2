"""Validators that depend only on the bytes served (issue 38): two instances serving copies of
one tree made with `cp -r` (new inodes, new mtimes) agree on every ETag, so a revalidation that
a balancer sends to the other instance is a 304, for identity and for a compressed variant; a
reproducible build (same size, mtime 0, other bytes) gets a new ETag; the ETag is the first 32
hex digits of the file's SHA-256, as `sha256sum` prints them; a file too large to digest on the
loop is served at once, without an ETag, until its digest is made."""

import hashlib
import os
import random
import subprocess
import time

import pytest

from conftest import fetch

JS = "".join(f"function f{i}(a, b) {{ return a * {i} + b; }}\n" for i in range(2000)).encode()
LARGE = random.Random(38).randbytes(3 << 20)


def digest_tag(data, coding=None):
    tag = hashlib.sha256(data).hexdigest()[:32]
    return f'"{tag}-{coding}"' if coding else f'"{tag}"'


def until_etag(server, path, headers=(), want_coding=None, tries=400):
    """The first response to carry an ETag (and, with want_coding, that Content-Encoding)."""
    for _ in range(tries):
        r = fetch(server, path, headers=list(headers))
        assert r.status == 200, r
        if r.header("etag") and r.header("content-encoding") == want_coding:
            return r
        time.sleep(0.025)
    pytest.fail(f"{path} never came with an ETag{' as ' + want_coding if want_coding else ''}")


@pytest.fixture
def twin_trees(tmp_path):
    a = tmp_path / "a"
    (a / "assets").mkdir(parents=True)
    (a / "index.html").write_bytes(b"<!doctype html><title>twins</title>\n")
    (a / "assets" / "app.js").write_bytes(JS)
    (a / "large.bin").write_bytes(LARGE)
    time.sleep(0.05)  # other mtimes and ctimes for the copy
    b = tmp_path / "b"
    subprocess.run(["cp", "-r", str(a), str(b)], check=True)  # new inodes, mtimes of now
    assert os.stat(a / "assets" / "app.js").st_ino != os.stat(b / "assets" / "app.js").st_ino
    assert os.stat(a / "index.html").st_mtime_ns != os.stat(b / "index.html").st_mtime_ns
    return a, b


def test_copies_on_two_instances_agree(make_server, twin_trees):
    """An ETag from instance A gets 304 from instance B, which serves a `cp -r` copy: for a
    small file, a large one (digested off the loop) and a Brotli variant made on the fly."""
    a, b = twin_trees
    sa, sb = make_server(a, args=("-t", "1")), make_server(b, args=("-t", "1"))
    for path, data in (("/index.html", (a / "index.html").read_bytes()),
                       ("/large.bin", LARGE)):
        ra = until_etag(sa, path)
        assert ra.header("etag") == digest_tag(data)
        rb = fetch(sb, path, headers=[("If-None-Match", ra.header("etag"))])
        for _ in range(200):  # B's first answers to the large file may come before its digest
            if rb.status == 304 or path != "/large.bin":
                break
            time.sleep(0.025)
            rb = fetch(sb, path, headers=[("If-None-Match", ra.header("etag"))])
        assert rb.status == 304 and rb.header("etag") == ra.header("etag"), (path, rb)
    ae = [("Accept-Encoding", "br")]
    ra = until_etag(sa, "/assets/app.js", ae, want_coding="br")
    assert ra.header("etag") == digest_tag(JS, "br")
    until_etag(sb, "/assets/app.js", ae, want_coding="br")
    rb = fetch(sb, "/assets/app.js", headers=ae + [("If-None-Match", ra.header("etag"))])
    assert rb.status == 304 and rb.header("etag") == ra.header("etag"), rb
    # the identity's tag is not the variant's
    rb = fetch(sb, "/assets/app.js", headers=[("If-None-Match", ra.header("etag"))])
    assert rb.status == 200 and rb.body == JS


def test_reproducible_build_with_mtime_zero_gets_a_new_etag(make_server, tmp_path):
    """Same size, mtime 0 before and after, one byte changed (a new build swapped in by rename,
    as a deploy does): the new bytes come with a new ETag and the old one no longer gives 304."""
    root = tmp_path / "root"
    root.mkdir()
    f = root / "app.js"
    f.write_bytes(JS)
    os.utime(f, ns=(0, 0))
    s = make_server(root, args=("-t", "1"))
    old = until_etag(s, "/app.js").header("etag")
    new_bytes = JS[:-2] + b";\n"
    assert len(new_bytes) == len(JS)
    tmp = root / ".app.js.new"
    tmp.write_bytes(new_bytes)
    os.utime(tmp, ns=(0, 0))
    os.replace(tmp, f)
    for _ in range(200):  # the cache revalidates once a second
        r = fetch(s, "/app.js", headers=[("If-None-Match", old)])
        if r.status == 200 and r.body == new_bytes:
            break
        assert r.status == 304, r
        time.sleep(0.025)
    assert r.status == 200 and r.body == new_bytes
    r = until_etag(s, "/app.js")  # 90 KB: its digest is made off the loop
    assert r.body == new_bytes and r.header("etag") == digest_tag(new_bytes) != old
    assert fetch(s, "/app.js", headers=[("If-None-Match", old)]).status == 200
    assert r.header("last-modified") == "Thu, 01 Jan 1970 00:00:00 GMT"


def test_large_file_is_served_before_its_digest(make_server, tmp_path):
    """A 3 MiB file (past the 64 KiB digested on the loop): its first response comes whole,
    with Last-Modified, whether or not its ETag is there yet; the ETag follows and is the
    bytes' digest; a conditional request with it is then a 304."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "large.bin").write_bytes(LARGE)
    s = make_server(root, args=("-t", "1"))
    first = fetch(s, "/large.bin")
    assert first.status == 200 and first.body == LARGE and first.header("last-modified")
    tag = until_etag(s, "/large.bin").header("etag")
    assert tag == digest_tag(LARGE)
    r = fetch(s, "/large.bin", headers=[("If-None-Match", tag)])
    assert r.status == 304 and r.header("etag") == tag
