/* test_path: request-target normalisation against its contract in core/path.h.
 * Must not: hand path_normalize a target that is not unit_guard()ed: an over-read must crash.
 * Ownership: output buffers are each test's; guarded copies live until the runner exits. */
#include "unit.h"

#include "core/path.h"

#define OUT_CAP 256

struct norm {
    int rc;
    char out[OUT_CAP + 8];
    struct path_result res;
    const char *target; /* the guarded copy, for checking where query points */
};

/* Normalises s with an output capacity of cap, and checks nothing is written past cap. */
static struct norm norm_cap(const char *s, size_t cap)
{
    struct norm n;
    memset(n.out, '#', sizeof(n.out));
    n.target = unit_guard_str(s);
    n.rc = path_normalize((struct http_str){n.target, strlen(s)}, n.out, cap, &n.res);
    for (size_t i = cap; i < sizeof(n.out); i++)
        CHECK(n.out[i] == '#');
    return n;
}

static struct norm norm(const char *s)
{
    return norm_cap(s, OUT_CAP);
}

/* s normalises to want, with trailing_slash as given and no query. */
static void check_path(const char *s, const char *want, bool slash)
{
    struct norm n = norm(s);
    if (n.rc != 0 || n.res.len != strlen(want) || memcmp(n.out, want, n.res.len) != 0 ||
        n.res.trailing_slash != slash)
        fprintf(stderr, "  target \"%s\": rc %d, \"%.*s\", slash %d\n", s, n.rc,
                (int)(n.rc ? 0 : n.res.len), n.out, n.res.trailing_slash);
    CHECK_INT(n.rc, 0);
    CHECK_MEM(n.out, n.res.len, want);
    CHECK(n.res.trailing_slash == slash);
    CHECK(!n.res.asterisk);
}

static void check_status(const char *s, int status)
{
    struct norm n = norm(s);
    if (n.rc != status)
        fprintf(stderr, "  target \"%s\"\n", s);
    CHECK_INT(n.rc, status);
}

TEST(path_plain)
{
    check_path("/", "", true);
    check_path("/index.html", "index.html", false);
    check_path("/a/b/c.txt", "a/b/c.txt", false);
    check_path("/a/b/", "a/b", true);
    check_path("/a/b//", "a/b", true);
    check_path("/a-b_c~d!$&'()*+,;=:@/e", "a-b_c~d!$&'()*+,;=:@/e", false);
    check_path("/a..b/c..", "a..b/c..", false);
    check_path("/a./b", "a./b", false);
    check_path("/*", "*", false);
    struct norm n = norm("/x");
    CHECK(n.res.query.p == NULL && n.res.query.len == 0);
}

TEST(path_dot_segments)
{
    check_path("/./a/./b", "a/b", false);
    check_path("/a/.", "a", true);
    check_path("/.", "", true);
    check_path("/..", "", true);
    check_path("/a/..", "", true);
    check_path("/a/../", "", true);
    check_path("/a/../b", "b", false);
    check_path("/a/b/../c", "a/c", false);
    check_path("/a/b/../../c", "c", false);
    check_path("/a/b/c/../..", "a", true);
    check_path("/a/./../b/./c/.", "b/c", true);
    check_path("/a//b///c", "a/b/c", false);
    check_path("//a", "a", false);
    check_path("///", "", true);
    check_path("/a/b/..//c", "a/c", false);
}

TEST(path_traversal)
{
    /* Never above the root, however it is spelt. */
    check_path("/../etc/passwd", "etc/passwd", false);
    check_path("/../../../../etc/passwd", "etc/passwd", false);
    check_path("/a/../../etc/passwd", "etc/passwd", false);
    check_path("/a/b/../../../../c", "c", false);
    check_path("/%2e%2e/etc/passwd", "etc/passwd", false);
    check_path("/%2E%2E/%2e%2E/etc", "etc", false);
    check_path("/%2e./x", "x", false);
    check_path("/.%2e/x", "x", false);
    check_path("/..%2fetc%2fpasswd", "etc/passwd", false);
    check_path("/..%2Fetc", "etc", false);
    check_path("/a%2f..%2f..%2fb", "b", false);
    check_path("/%2e%2e%2f%2e%2e%2fetc", "etc", false);
    check_path("/a/b%2f..", "a", true);
    check_path("/%2f%2fa", "a", false);
    check_path("/a%2F", "a", true);
    check_path("/%2e/a/%2e", "a", true);
    check_path("/a/%2e%2e", "", true);
    check_path("/x/..%2f..%2f..%2fetc/shadow", "etc/shadow", false);
    /* A backslash is an ordinary byte here, not a separator. */
    check_path("/a\\b", "a\\b", false);
    check_path("/a\\..\\b", "a\\..\\b", false);
    check_path("/a%5c..%5cb", "a\\..\\b", false);
    check_status("/..\\etc", 404);
    /* Double encoding decodes once: "%252e" is the three bytes "%2e". */
    check_path("/%252e%252e/x", "%2e%2e/x", false);
}

TEST(path_percent)
{
    check_path("/a%20b", "a b", false);
    check_path("/%41%62%7a", "Abz", false);
    check_path("/%c3%A9t%C3%a9", "\xc3\xa9t\xc3\xa9", false);
    check_path("/%0a", "\n", false);
    check_path("/%25", "%", false);
    check_path("/%3f%23", "?#", false);
    check_path("/%ff", "\xff", false);
    check_status("/%", 400);
    check_status("/a%", 400);
    check_status("/%4", 400);
    check_status("/a%4", 400);
    check_status("/%zz", 400);
    check_status("/%g0", 400);
    check_status("/%0g", 400);
    check_status("/%-1", 400);
    check_status("/% 1", 400);
    check_status("/%%41", 400);
    check_status("/%00", 400);
    check_status("/a%00b", 400);
    check_status("/a%00/../b", 400);
    /* The escape may end where the path ends, before a query. */
    check_status("/a%4?x", 400);
    check_path("/a%41", "aA", false);
}

TEST(path_hidden)
{
    check_status("/.env", 404);
    check_status("/.git/config", 404);
    check_status("/a/.git/config", 404);
    check_status("/a/.htaccess", 404);
    check_status("/%2egit/config", 404);
    check_status("/%2Eenv", 404);
    check_status("/...", 404);
    check_status("/a/...", 404);
    check_status("/.well-known/../.env", 404);
    /* Judged when seen: a later ".." does not excuse a hidden segment. */
    check_status("/.git/../index.html", 404);
    check_path("/.well-known/acme-challenge/tok", ".well-known/acme-challenge/tok", false);
    check_path("/.well-known", ".well-known", false);
    check_path("/.well-known/", ".well-known", true);
    check_path("/%2ewell-known/x", ".well-known/x", false);
    check_path("/a/../.well-known/x", ".well-known/x", false);
    check_path("//.well-known", ".well-known", false);
    check_status("/a/.well-known", 404);
    check_status("/.well-known/.well-known", 404);
    check_status("/.Well-Known/x", 404);
    check_status("/.well-knownx", 404);
    check_status("/.well-know", 404);
}

TEST(path_query)
{
    struct norm n = norm("/a/b?x=1&y=2");
    CHECK_INT(n.rc, 0);
    CHECK_MEM(n.out, n.res.len, "a/b");
    CHECK_MEM(n.res.query.p, n.res.query.len, "x=1&y=2");
    CHECK(n.res.query.p == n.target + 5);
    CHECK(!n.res.trailing_slash);

    n = norm("/a?");
    CHECK_INT(n.rc, 0);
    CHECK_MEM(n.out, n.res.len, "a");
    CHECK(n.res.query.p == n.target + 3 && n.res.query.len == 0);

    n = norm("/?a?b/../c");
    CHECK_INT(n.rc, 0);
    CHECK_INT(n.res.len, 0);
    CHECK(n.res.trailing_slash);
    CHECK_MEM(n.res.query.p, n.res.query.len, "a?b/../c");

    /* The query is neither decoded nor judged. */
    n = norm("/a?%zz%00/../.git");
    CHECK_INT(n.rc, 0);
    CHECK_MEM(n.res.query.p, n.res.query.len, "%zz%00/../.git");

    /* An escaped '?' belongs to the path. */
    n = norm("/a%3Fb?c");
    CHECK_INT(n.rc, 0);
    CHECK_MEM(n.out, n.res.len, "a?b");
    CHECK_MEM(n.res.query.p, n.res.query.len, "c");

    check_status("/a#frag", 400);
    check_status("/a?b#frag", 400);
    check_status("/#", 400);
    check_status("?a", 400);
}

TEST(path_absolute_form)
{
    check_path("http://example.com/a/b", "a/b", false);
    check_path("HTTP://Example.COM:8080/a/", "a", true);
    check_path("https://h/x/../y", "y", false);
    check_path("HtTpS://h:443/", "", true);
    check_path("http://h", "", true);
    check_path("http://user@h/a", "a", false);
    check_path("http://h/../../etc/passwd", "etc/passwd", false);
    check_path("http://h//a", "a", false);
    struct norm n = norm("http://h?q=1");
    CHECK_INT(n.rc, 0);
    CHECK_INT(n.res.len, 0);
    CHECK(n.res.trailing_slash);
    CHECK_MEM(n.res.query.p, n.res.query.len, "q=1");
    n = norm("https://h/a?q");
    CHECK_INT(n.rc, 0);
    CHECK_MEM(n.out, n.res.len, "a");
    CHECK_MEM(n.res.query.p, n.res.query.len, "q");
    check_status("http:///a", 400);
    check_status("http://", 400);
    check_status("https://?x", 400);
    check_status("ftp://h/a", 400);
    check_status("http:/a", 400);
    check_status("http:a", 400);
    check_status("httpx://h/a", 400);
    check_status("http//h/a", 400);
    check_status("http://h/.git", 404);
    check_status("http://h/%", 400);
    check_status("http://h/a#b", 400);
}

TEST(path_asterisk_and_forms)
{
    struct norm n = norm("*");
    CHECK_INT(n.rc, 0);
    CHECK(n.res.asterisk);
    CHECK_INT(n.res.len, 0);
    CHECK(n.res.query.p == NULL);
    check_status("**", 400);
    check_status("*?", 400);
    check_status("*/a", 400);
    check_status("", 400);
    check_status("a/b", 400);
    check_status("index.html", 400);
    check_status("example.com:443", 400);
    check_status(".", 400);
    check_status("%2fa", 400);
    struct path_result res;
    char out[4];
    CHECK_INT(path_normalize((struct http_str){NULL, 0}, out, sizeof(out), &res), 400);
    /* Bytes the parser never passes are refused rather than trusted. */
    check_status("/a b", 400);
    check_status("/a\tb", 400);
    check_status("/a\x01", 400);
    check_status("/a\x7f", 400);
    struct norm z;
    z.target = unit_guard("/a\0b", 4);
    z.rc = path_normalize((struct http_str){z.target, 4}, z.out, OUT_CAP, &z.res);
    CHECK_INT(z.rc, 400);
}

TEST(path_capacity)
{
    struct norm n = norm_cap("/abc", 3);
    CHECK_INT(n.rc, 0);
    CHECK_MEM(n.out, n.res.len, "abc");
    CHECK_INT(norm_cap("/abcd", 3).rc, 414);
    n = norm_cap("/a/bc", 4);
    CHECK_INT(n.rc, 0);
    CHECK_MEM(n.out, n.res.len, "a/bc");
    CHECK_INT(norm_cap("/a/bc", 3).rc, 414);
    CHECK_INT(norm_cap("/a/b/", 2).rc, 414);
    CHECK_INT(norm_cap("/%41%42%43%44", 3).rc, 414);
    n = norm_cap("/%41%42%43", 3);
    CHECK_INT(n.rc, 0);
    CHECK_MEM(n.out, n.res.len, "ABC");
    /* The root and pure dot paths fit in nothing. */
    CHECK_INT(norm_cap("/", 0).rc, 0);
    CHECK_INT(norm_cap("/../././..", 0).rc, 0);
    CHECK_INT(norm_cap("*", 0).rc, 0);
    /* ".." needs no room: only kept segments count. */
    n = norm_cap("/ab/../cd", 2);
    CHECK_INT(n.rc, 0);
    CHECK_MEM(n.out, n.res.len, "cd");
    n = norm_cap("/a/..", 1);
    CHECK_INT(n.rc, 0);
    CHECK_INT(n.res.len, 0);
    /* Every kept segment has to fit when it is kept, even one a later ".." removes. */
    CHECK_INT(norm_cap("/abcd/..", 3).rc, 414);
    /* A long path with a long cap. */
    char big[OUT_CAP + 2];
    big[0] = '/';
    memset(big + 1, 'x', OUT_CAP);
    big[OUT_CAP + 1] = '\0';
    n = norm_cap(big, OUT_CAP);
    CHECK_INT(n.rc, 0);
    CHECK_INT(n.res.len, OUT_CAP);
    CHECK_INT(norm_cap(big, OUT_CAP - 1).rc, 414);
    /* A hidden segment that does not fit is still refused. */
    CHECK(norm_cap("/.envfile", 3).rc != 0);
    CHECK_INT(norm_cap("/.well-known", 10).rc, 414);
    CHECK_INT(norm_cap("/.well-known", 11).rc, 0);
}

/* Escaping a path byte other than '?', '#' and '%' (which delimit, not name) never changes its
 * normal form, and a '%' takes the general pass:
 * so every target, with its first path byte escaped, checks the plain-target shortcut against
 * the general pass. The targets are random strings over the bytes that matter to both ('.', '/',
 * '?', '#', '%' and letters), at capacities around their length. */
TEST(path_plain_shortcut_agrees_with_general_pass)
{
    static const char alphabet[] = "ab./?#~%";
    uint32_t seed = 12345;
    for (int t = 0; t < 6000; t++) { /* two guarded copies each, of 16384 */
        char s[16], e[24];
        size_t len = 2 + (size_t)(t % 11);
        s[0] = '/';
        for (size_t i = 1; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            s[i] = alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
        }
        s[len] = '\0';
        if (s[1] == '?' || s[1] == '#' || s[1] == '%')
            continue;
        snprintf(e, sizeof(e), "/%%%02X%s", (unsigned char)s[1], s + 2);
        size_t cap = (size_t)(t % 7) + (len > 4 ? len - 4 : 0);
        struct norm a = norm_cap(s, cap), b = norm_cap(e, cap);
        bool same = a.rc == b.rc;
        if (same && a.rc == 0)
            same = a.res.len == b.res.len && memcmp(a.out, b.out, a.res.len) == 0 &&
                   a.res.trailing_slash == b.res.trailing_slash &&
                   a.res.query.len == b.res.query.len &&
                   (a.res.query.len == 0 ||
                    memcmp(a.res.query.p, b.res.query.p, a.res.query.len) == 0);
        if (!same)
            fprintf(stderr, "  \"%s\" vs \"%s\" (cap %zu): rc %d / %d\n", s, e, cap, a.rc, b.rc);
        CHECK(same);
    }
}

/* The Location of target's slash form, as serve builds it: normalise, then path_location. */
static void check_location(const char *target, const char *want)
{
    struct norm n = norm(target);
    char loc[512];
    CHECK_INT(n.rc, 0);
    size_t len = path_location(n.out, n.res.len, n.res.query, loc, sizeof(loc));
    if (len != strlen(want) || memcmp(loc, want, len) != 0)
        fprintf(stderr, "  target \"%s\": Location \"%.*s\", want \"%s\"\n", target, (int)len, loc,
                want);
    CHECK_MEM(loc, len, want);
}

TEST(path_location_never_leaves_the_host)
{
    check_location("/dir", "/dir/");
    check_location("/dir?a=1&b=%20", "/dir/?a=1&b=%20");
    check_location("/dir?", "/dir/?");
    check_location("/a/b", "/a/b/");
    /* Open redirects: whatever climbs, doubles or hides a separator, one leading '/'. */
    check_location("//evil.example/..%2fdir", "/dir/");
    check_location("//evil.example", "/evil.example/");
    check_location("///evil.example", "/evil.example/");
    check_location("/%2fevil.example", "/evil.example/");
    check_location("/%2F%2Fevil.example", "/evil.example/");
    check_location("/\\evil.example", "/%5Cevil.example/");
    check_location("/%5cevil.example", "/%5Cevil.example/");
    check_location("/%5c%5cevil.example", "/%5C%5Cevil.example/");
    check_location("/\\\\evil.example/..%2f..%2fdir", "/dir/");
    check_location("http://evil.example//evil.example/..%2fdir", "/dir/");
    check_location("http://evil.example/dir", "/dir/");
    check_location("/../../../dir", "/dir/");
    check_location("/a/../../dir", "/dir/");
    /* Bytes that need encoding in a URL are encoded; pchar stays as it is. */
    check_location("/my%20dir", "/my%20dir/");
    check_location("/%C3%A9t%C3%A9", "/%C3%A9t%C3%A9/");
    check_location("/a%3Fb%23c%25d", "/a%3Fb%23c%25d/");
    check_location("/a:b@c!$&'()*+,;=-._~", "/a:b@c!$&'()*+,;=-._~/");
    check_location("/x\"<>^`{|}", "/x%22%3C%3E%5E%60%7B%7C%7D/");
    check_location("/d?q=\"<>\\", "/d/?q=%22%3C%3E%5C");
}

/* Issue 39: the slash-less form (a clean URL, --trailing-slash never) of the same paths. */
TEST(path_location_as_without_the_slash)
{
    char loc[64];
    struct http_str none = {NULL, 0}, q = {"a=1", 3};
    CHECK_MEM(loc, path_location_as("dir", 3, false, none, loc, sizeof(loc)), "/dir");
    CHECK_MEM(loc, path_location_as("a/b c", 5, false, q, loc, sizeof(loc)), "/a/b%20c?a=1");
    CHECK_MEM(loc, path_location_as("", 0, false, none, loc, sizeof(loc)), "/");
    CHECK_MEM(loc, path_location_as("a/b", 3, true, none, loc, sizeof(loc)), "/a/b/");
    CHECK_MEM(loc, path_location_as("%5c/x", 5, false, none, loc, sizeof(loc)), "/%255c/x");
    CHECK_INT(path_location_as("abcdef", 6, false, none, loc, 7), 7);
    CHECK_INT(path_location_as("abcdefg", 7, false, none, loc, 7), 0);
}

TEST(path_location_capacity)
{
    char loc[8];
    CHECK_INT(path_location("abcde", 5, (struct http_str){NULL, 0}, loc, sizeof(loc)), 7);
    CHECK_INT(path_location("abcdef", 6, (struct http_str){NULL, 0}, loc, sizeof(loc)), 8);
    CHECK_INT(path_location("abcdefg", 7, (struct http_str){NULL, 0}, loc, sizeof(loc)), 0);
    CHECK_INT(path_location("ab cd", 5, (struct http_str){NULL, 0}, loc, sizeof(loc)), 0);
    CHECK_INT(path_location("ab", 2, (struct http_str){"q", 1}, loc, sizeof(loc)), 6);
}
