/* test_rulefile: _redirects, _headers and access lines against core/rulefile.h's contract:
 * the platforms' documented examples, bad lines reported once each with their line, and the
 * matcher's answers at 2,000 rules.
 * Must not: hand the parser a text that is not unit_guard()ed.
 * Ownership: each test's block is its own (malloc'd, freed at its end). */
#include "unit.h"

#include <stdlib.h>

#include "core/rulefile.h"

struct reports {
    int n;
    int lines[64];
};

static void note(void *arg, const char *name, int line, const char *why)
{
    struct reports *r = arg;
    (void)name;
    (void)why;
    if (r->n < 64)
        r->lines[r->n] = line;
    r->n++;
}

/* Compiles srcs as a caller does: size, allocate, fill (reports from the fill only). */
static const struct rulefile *compile(const struct rulefile_src *srcs, size_t n, void **mem,
                                      struct reports *r)
{
    const struct rulefile *rs;
    size_t need = rulefile_compile(srcs, n, NULL, 0, &rs, NULL, NULL);
    CHECK(rs == NULL);
    *mem = malloc(need);
    size_t got = rulefile_compile(srcs, n, *mem, need, &rs, note, r);
    CHECK_INT(got, need);
    CHECK(rs != NULL);
    return rs;
}

static const struct rulefile *one(enum rulefile_kind kind, const char *text, void **mem,
                                  struct reports *r)
{
    static struct rulefile_src src;
    src = (struct rulefile_src){kind, "_test", unit_guard_str(text), strlen(text), 1, false};
    return compile(&src, 1, mem, r);
}

/* The Location rule i gives for path?query, or "" when none matched. */
static const char *target(const struct rulefile *rs, const char *path, const char *query,
                          int *status)
{
    static char out[1024];
    struct rulefile_match m;
    const char *p = unit_guard_str(path + 1); /* as path_normalize leaves it: no leading '/' */
    int i = rulefile_redirect(rs, p, strlen(path) - 1, query, query ? strlen(query) : 0, &m);
    *status = i < 0 ? 0 : rs->redirects[i].status;
    if (i < 0)
        return "";
    size_t n =
        rulefile_target(&rs->redirects[i], &m, query, query ? strlen(query) : 0, out, sizeof(out));
    return n ? out : "(too long)";
}

TEST(rulefile_redirects_netlify_examples)
{
    void *mem;
    struct reports r = {0};
    const struct rulefile *rs =
        one(RULEFILE_REDIRECTS,
            "# Redirects from what the browser requests to what we serve\n"
            "/home              /\n"
            "/blog/my-post.php  /blog/my-post\n"
            "/news              /blog\n"
            "/cuties            https://www.petsofnetlify.com\n"
            "/news/*            /blog/:splat\n"
            "/news/:month/:date/:year/:slug  /blog/:year/:month/:date/:slug\n"
            "/store id=:id  /blog/:id  301\n"
            "/app/*  /app/index.html  200\n"
            "/ecommerce  /store-closed  404\n"
            "/gone  /  410\n"
            "/pagethatexists  /otherpage  301!\n"
            "/temp  /elsewhere  302  # a comment to the end\n",
            &mem, &r);
    int st;
    CHECK_INT(r.n, 0);
    CHECK_INT(rs->nredirects, 12);
    CHECK(strcmp(target(rs, "/temp", NULL, &st), "/elsewhere") == 0);
    CHECK_INT(st, 302);
    CHECK(strcmp(target(rs, "/home", NULL, &st), "/") == 0);
    CHECK_INT(st, 301);                                           /* Netlify's default */
    CHECK(strcmp(target(rs, "/home/", NULL, &st), "/") == 0);     /* a trailing slash is optional */
    CHECK(strcmp(target(rs, "/home", "a=1", &st), "/?a=1") == 0); /* the query goes along */
    CHECK(strcmp(target(rs, "/cuties", NULL, &st), "https://www.petsofnetlify.com") == 0);
    CHECK(strcmp(target(rs, "/news", NULL, &st), "/blog") == 0); /* the exact rule is first */
    CHECK(strcmp(target(rs, "/news/2004/02/12/my-story", NULL, &st), "/blog/2004/02/12/my-story") ==
          0); /* the splat comes first */
    CHECK(strcmp(target(rs, "/store", "id=42", &st), "/blog/42") == 0);
    CHECK(strcmp(target(rs, "/store", NULL, &st), "") == 0); /* no id: no match */
    CHECK(strcmp(target(rs, "/app/x/y", NULL, &st), "/app/index.html") == 0);
    CHECK_INT(st, 200);
    CHECK(strcmp(target(rs, "/ecommerce", NULL, &st), "/store-closed") == 0);
    CHECK_INT(st, 404);
    target(rs, "/gone", NULL, &st);
    CHECK_INT(st, 410);
    CHECK(rs->redirects[10].force);
    CHECK(!rs->redirects[0].force);
    CHECK(strcmp(target(rs, "/nothing", NULL, &st), "") == 0);
    free(mem);
}

TEST(rulefile_redirects_placeholders_and_cloudflare_examples)
{
    void *mem;
    struct reports r = {0};
    const struct rulefile *rs =
        one(RULEFILE_REDIRECTS,
            "/home301 / 301\n/home302 / 302\n/querystrings /?query=string 301\n"
            "/twitch https://twitch.tv\n/trailing /trailing/ 301\n/notrailing/ /nottrailing 301\n"
            "/blog/* https://blog.my.domain/:splat\n"
            "/products/:code/:name /products?code=:code&name=:name\n"
            "/movies/:title-:year /films/:year/:title 308\n",
            &mem, &r);
    int st;
    CHECK_INT(r.n, 0);
    CHECK(strcmp(target(rs, "/querystrings", "x=1", &st), "/?query=string") == 0);
    CHECK(strcmp(target(rs, "/blog/a/b c", NULL, &st), "https://blog.my.domain/a/b%20c") == 0);
    CHECK(strcmp(target(rs, "/products/12/a&b", NULL, &st), "/products?code=12&name=a%26b") == 0);
    CHECK(strcmp(target(rs, "/movies/up-2009", NULL, &st), "/films/2009/up") == 0);
    CHECK_INT(st, 308);
    CHECK(strcmp(target(rs, "/movies/a/b-1", NULL, &st), "") == 0); /* ':' stops at '/' */
    free(mem);
}

TEST(rulefile_bad_lines_reported_once_each_rest_apply)
{
    void *mem;
    struct reports r = {0};
    const struct rulefile *rs = one(RULEFILE_REDIRECTS,
                                    "/a /b\n"
                                    "nothing-slash /b\n"         /* 2 */
                                    "/c\n"                       /* 3 */
                                    "/d /e 999\n"                /* 4 */
                                    "/f https://x.example 200\n" /* 5: proxying */
                                    "/g /h 302 Country=au\n"     /* 6 */
                                    "\n# comment\n"
                                    "/i /j 307\n"
                                    "/k* /l* /m*\n", /* 10: 2 splats? no: status "/m*" is bad */
                                    &mem, &r);
    int st;
    CHECK_INT(r.n, 6);
    CHECK_INT(r.lines[0], 2);
    CHECK_INT(r.lines[1], 3);
    CHECK_INT(r.lines[2], 4);
    CHECK_INT(r.lines[3], 5);
    CHECK_INT(r.lines[4], 6);
    CHECK_INT(r.lines[5], 10);
    CHECK_INT(rs->nredirects, 2);
    CHECK(strcmp(target(rs, "/a", NULL, &st), "/b") == 0);
    CHECK(strcmp(target(rs, "/i", NULL, &st), "/j") == 0);
    CHECK_INT(st, 307);
    free(mem);
}

TEST(rulefile_two_thousand_redirects_first_wins)
{
    size_t cap = 2100 * 64, n = 0;
    char *text = malloc(cap);
    for (int i = 0; i < 2000; i++)
        n += (size_t)snprintf(text + n, cap - n, "/old/page-%d /new/page-%d 301\n", i, i);
    n += (size_t)snprintf(text + n, cap - n, "/old/* /fallback/:splat 302\n/old/page-7 /never\n");
    void *mem;
    struct reports r = {0};
    struct rulefile_src src = {RULEFILE_REDIRECTS, "_redirects", text, n, 1, false};
    const struct rulefile *rs = compile(&src, 1, &mem, &r);
    int st;
    CHECK_INT(r.n, 0);
    CHECK_INT(rs->nredirects, 2002);
    CHECK(strcmp(target(rs, "/old/page-1999", NULL, &st), "/new/page-1999") == 0);
    CHECK(strcmp(target(rs, "/old/page-7", NULL, &st), "/new/page-7") == 0);
    CHECK(strcmp(target(rs, "/old/page-2000", NULL, &st), "/fallback/page-2000") == 0);
    CHECK_INT(st, 302);
    CHECK(strcmp(target(rs, "/other", NULL, &st), "") == 0);
    free(mem);
    free(text);
}

static const char *headers(const struct rulefile *rs, const char *host, const char *path,
                           const char *base)
{
    static char out[4096];
    size_t n = rulefile_headers(rs, host, host ? strlen(host) : 0, unit_guard_str(path + 1),
                                strlen(path) - 1, "text/html", false, base, strlen(base), out,
                                sizeof(out) - 1);
    if (n == SIZE_MAX)
        return "(none)";
    out[n] = '\0';
    return out;
}

TEST(rulefile_headers_cloudflare_example)
{
    void *mem;
    struct reports r = {0};
    const struct rulefile *rs = one(RULEFILE_HEADERS,
                                    "# This is a comment\n"
                                    "/secure/page\n"
                                    "  X-Frame-Options: DENY\n"
                                    "  X-Content-Type-Options: nosniff\n"
                                    "  Referrer-Policy: no-referrer\n"
                                    "\n"
                                    "/static/*\n"
                                    "  Access-Control-Allow-Origin: *\n"
                                    "  X-Robots-Tag: nosnippet\n"
                                    "\n"
                                    "https://myproject.pages.dev/*\n"
                                    "  X-Robots-Tag: noindex\n"
                                    "/movies/:title\n"
                                    "  x-movie-name: You are watching :title\n"
                                    "/*\n"
                                    "  X-Site: on\n"
                                    "/nosite/*\n"
                                    "  ! X-Site\n"
                                    "  ! X-Base\n",
                                    &mem, &r);
    CHECK_INT(r.n, 0);
    CHECK_INT(rs->nheaders, 6);
    CHECK(strcmp(headers(rs, "custom.domain", "/secure/page", ""),
                 "X-Frame-Options: DENY\r\nX-Content-Type-Options: nosniff\r\n"
                 "Referrer-Policy: no-referrer\r\nX-Site: on\r\n") == 0);
    CHECK(strcmp(headers(rs, "myproject.pages.dev:443", "/static/styles.css", ""),
                 "Access-Control-Allow-Origin: *\r\nX-Robots-Tag: nosnippet, noindex\r\n"
                 "X-Site: on\r\n") == 0);
    CHECK(strcmp(headers(rs, "custom.domain", "/movies/Up", ""),
                 "x-movie-name: You are watching Up\r\nX-Site: on\r\n") == 0);
    CHECK(strcmp(headers(rs, "custom.domain", "/nosite/x", "X-Base: 1\r\nX-Keep: 2\r\n"),
                 "X-Keep: 2\r\n") == 0);
    /* a rule's field replaces the response's own of that name; two rules' join */
    CHECK(strcmp(headers(rs, "myproject.pages.dev", "/static/a.css",
                         "X-Robots-Tag: all\r\nX-Site: off\r\nX-Keep: 2\r\n"),
                 "X-Robots-Tag: nosnippet, noindex\r\nX-Site: on\r\nX-Keep: 2\r\n"
                 "Access-Control-Allow-Origin: *\r\n") == 0);
    free(mem);
}

TEST(rulefile_headers_bad_lines)
{
    void *mem;
    struct reports r = {0};
    const struct rulefile *rs = one(RULEFILE_HEADERS,
                                    "  X-Early: 1\n" /* 1: before any pattern */
                                    "/a\n"
                                    "  Content-Length: 5\n" /* 3: the server's */
                                    "  no colon here\n"     /* 4 */
                                    "  X-Ok: yes\n"
                                    "bad pattern\n"      /* 6 */
                                    "  X-Under-Bad: 1\n" /* under a bad pattern: silent */
                                    "/b\n"
                                    "  X-B: b\n",
                                    &mem, &r);
    CHECK_INT(r.n, 4);
    CHECK_INT(r.lines[0], 1);
    CHECK_INT(r.lines[1], 3);
    CHECK_INT(r.lines[2], 4);
    CHECK_INT(r.lines[3], 6);
    CHECK(strcmp(headers(rs, NULL, "/a", ""), "X-Ok: yes\r\n") == 0);
    CHECK(strcmp(headers(rs, NULL, "/b", ""), "X-B: b\r\n") == 0);
    CHECK(strcmp(headers(rs, NULL, "/c", ""), "(none)") == 0);
    free(mem);
}

TEST(rulefile_access_and_user_agents)
{
    void *mem;
    struct reports r = {0};
    const struct rulefile *rs = one(RULEFILE_ACCESS,
                                    "/admin/* allow 127.0.0.1,10.0.0.0/8\n"
                                    "/staging/* deny all close\n"
                                    "/x allow nonsense\n",
                                    &mem, &r);
    CHECK_INT(r.n, 1);
    uint8_t lo[16] = {127, 0, 0, 1}, other[16] = {192, 0, 2, 1};
    int i = rulefile_access_rule(rs, "admin/users", 11);
    CHECK_INT(i, 0);
    CHECK(!rulefile_refuses(&rs->access[i], 2 /* AF_INET */, lo));
    CHECK(rulefile_refuses(&rs->access[i], 2, other));
    i = rulefile_access_rule(rs, "staging", 7);
    CHECK_INT(i, 1);
    CHECK(rs->access[i].close);
    CHECK(rulefile_refuses(&rs->access[i], 2, lo));
    CHECK_INT(rulefile_access_rule(rs, "public", 6), -1);
    free(mem);
    const char *const pats[] = {"GPTBot", "claude*bot", "Bytespider"};
    const char *ua = "Mozilla/5.0 AppleWebKit/537.36 (compatible; ClaudeBot/1.0)";
    CHECK(rulefile_ua_denied(pats, 3, ua, strlen(ua)));
    ua = "Mozilla/5.0 (compatible; gptbot/1.2)";
    CHECK(rulefile_ua_denied(pats, 3, ua, strlen(ua)));
    ua = "curl/7.88.1";
    CHECK(!rulefile_ua_denied(pats, 3, ua, strlen(ua)));
}

TEST(rulefile_runaway_file_is_bounded)
{
    /* blank lines and comments cost nothing; rules past RULEFILE_MAX_RULES are reported */
    size_t cap = (RULEFILE_MAX_RULES + 10) * 12 + 200000, n = 0;
    char *text = malloc(cap);
    for (int i = 0; i < 100000; i++)
        text[n++] = '\n';
    n += (size_t)snprintf(text + n, cap - n, "# only a comment\n");
    for (int i = 0; i < RULEFILE_MAX_RULES + 3; i++)
        n += (size_t)snprintf(text + n, cap - n, "/a%d /b\n", i % 10);
    void *mem;
    struct reports r = {0};
    struct rulefile_src src = {RULEFILE_REDIRECTS, "_redirects", text, n, 1, false};
    const struct rulefile *rs = compile(&src, 1, &mem, &r);
    CHECK_INT(rs->nredirects, RULEFILE_MAX_RULES);
    CHECK_INT(r.n, 3);
    free(mem);
    free(text);
}
