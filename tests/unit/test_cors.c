/* test_cors: core/cors.h and core/hints.h: the --cors and --early-hints values, the CORS
 * decision (preflight, actual, Vary, a disallowed, garbage or huge Origin) and the Link lines.
 * Must not: depend on anything but the core.
 * Ownership: each test owns its buffers. */
#include "unit.h"

#include <errno.h>

#include "core/cors.h"
#include "core/hints.h"

static char args[8][128];

static struct cors_rule rule(int i, const char *arg)
{
    struct cors_rule r;
    snprintf(args[i], sizeof(args[i]), "%s", arg);
    CHECK_INT(cors_rule_parse(args[i], &r), 0);
    return r;
}

static struct http_str str(const char *s)
{
    return (struct http_str){s, s ? strlen(s) : 0};
}

static struct cors_answer decide(const struct cors_rule *rules, size_t n, enum http_method m,
                                 const char *path, const char *origin, const char *acrm)
{
    return cors_decide(rules, n, m, path, strlen(path), str(origin), str(acrm));
}

TEST(cors_rule_parse_values)
{
    struct cors_rule r;
    char a[] = "/api/*   HTTPS://App.Example:8443";
    CHECK_INT(cors_rule_parse(a, &r), 0);
    CHECK(strcmp(r.pattern, "/api/*") == 0 && strcmp(r.origin, "https://app.example:8443") == 0);
    CHECK_INT(r.origin_len, 24);
    char b[] = "/* *";
    CHECK_INT(cors_rule_parse(b, &r), 0);
    CHECK(strcmp(r.origin, "*") == 0);
    char c[] = "/x http://[2001:DB8::1]:80";
    CHECK_INT(cors_rule_parse(c, &r), 0);
    CHECK(strcmp(r.origin, "http://[2001:db8::1]:80") == 0);
    const char *bad[] = {"",
                         "/x",
                         "/x ",
                         "x *",
                         "/x https://",
                         "/x https://a:",
                         "/x a.b",
                         "/x https://a/b",
                         "/x https://a, https://b",
                         "/x https://a:123456",
                         "/x? *",
                         "/x https://[zz]",
                         "/x https://a b",
                         "/x ://a",
                         "/x -a://b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%s", bad[i]);
        CHECK_INT(cors_rule_parse(buf, &r), -EINVAL);
    }
}

TEST(cors_actual_and_preflight)
{
    struct cors_rule rules[2] = {rule(0, "/api/* https://a.example"),
                                 rule(1, "/api/* https://b.example")};
    char out[512];
    struct cors_answer a = decide(rules, 2, HTTP_GET, "/api/x.json", "https://b.example", NULL);
    CHECK(a.allowed && a.covered && !a.preflight);
    size_t n = cors_fields(&a, out, sizeof(out));
    CHECK_MEM(out, n, "Access-Control-Allow-Origin: https://b.example\r\nVary: Origin\r\n");
    CHECK_INT(cors_preflight_fields(&a, out, sizeof(out)), 0); /* not a preflight */

    /* a disallowed origin: no CORS field, but the Vary a cache needs */
    a = decide(rules, 2, HTTP_GET, "/api/x.json", "https://evil.example", NULL);
    CHECK(!a.allowed && a.covered);
    n = cors_fields(&a, out, sizeof(out));
    CHECK_MEM(out, n, "Vary: Origin\r\n");
    /* no rule for the path: nothing at all */
    a = decide(rules, 2, HTTP_GET, "/index.html", "https://a.example", NULL);
    CHECK(!a.allowed && !a.covered);
    CHECK_INT(cors_fields(&a, out, sizeof(out)), 0);

    a = decide(rules, 2, HTTP_OPTIONS, "/api/x", "https://a.example", "GET");
    CHECK(a.preflight && a.allowed);
    n = cors_preflight_fields(&a, out, sizeof(out));
    CHECK(n > 0 && strstr(out, "Access-Control-Allow-Methods: GET, HEAD\r\n") &&
          strstr(out, "Access-Control-Max-Age: 86400\r\n") &&
          strncmp(out, "Access-Control-Allow-Origin: https://a.example\r\n", 48) == 0);
    CHECK(!decide(rules, 2, HTTP_OPTIONS, "/api/x", "https://a.example", "PUT").preflight);
    CHECK(!decide(rules, 2, HTTP_OPTIONS, "/api/x", "https://a.example", "get").preflight);
    CHECK(!decide(rules, 2, HTTP_OPTIONS, "/api/x", "https://a.example", NULL).preflight);
    CHECK(!decide(rules, 2, HTTP_OPTIONS, "/api/x", "https://c.example", "GET").preflight);
    CHECK(!decide(rules, 2, HTTP_POST, "/api/x", "https://a.example", NULL).allowed);
}

TEST(cors_star_garbage_and_huge_origins)
{
    struct cors_rule rules[2] = {rule(2, "/fonts/* *"), rule(3, "/api/* https://a.example")};
    char out[512];
    struct cors_answer a = decide(rules, 2, HTTP_HEAD, "/fonts/x.woff2", "\x01\xff garbage", NULL);
    size_t n = cors_fields(&a, out, sizeof(out));
    CHECK_MEM(out, n, "Access-Control-Allow-Origin: *\r\n"); /* "*": no echo, no Vary */
    a = decide(rules, 2, HTTP_GET, "/fonts/x.woff2", NULL, NULL);
    CHECK(a.allowed && !a.covered);

    static char huge[CORS_ORIGIN_MAX * 4];
    memset(huge, 'a', sizeof(huge) - 1);
    memcpy(huge, "https://", 8);
    a = decide(rules, 2, HTTP_GET, "/api/x", huge, NULL);
    CHECK(!a.allowed && a.covered);
    a = decide(rules, 2, HTTP_GET, "/api/x", "https://a.example\r\nX: y", NULL);
    CHECK(!a.allowed);
    a = decide(rules, 2, HTTP_GET, "/api/x", "https://A.example", NULL); /* not a browser's */
    CHECK(!a.allowed);
    /* a small buffer: nothing rather than half a field */
    a = decide(rules, 2, HTTP_GET, "/api/x", "https://a.example", NULL);
    CHECK_INT(cors_fields(&a, out, 20), 0);
}

TEST(hints_rules_and_fields)
{
    struct hints_rule r[3];
    char a[] = "/ </style.css>; rel=preload; as=style  ";
    char b[] = "/*.html\t</app.js>; rel=preload; as=script";
    char c[] = "/docs/* <https://cdn.example/>; rel=preconnect";
    CHECK_INT(hints_rule_parse(a, &r[0]), 0);
    CHECK_INT(hints_rule_parse(b, &r[1]), 0);
    CHECK_INT(hints_rule_parse(c, &r[2]), 0);
    CHECK(strcmp(r[0].link, "</style.css>; rel=preload; as=style") == 0);
    const char *bad[] = {"/ style.css", "/ <x", "/", "/ ", "x <a>", "/ <a>\x7f", "/ <a>\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char buf[64];
        struct hints_rule x;
        snprintf(buf, sizeof(buf), "%s", bad[i]);
        CHECK_INT(hints_rule_parse(buf, &x), -EINVAL);
    }
    char out[256];
    size_t n = hints_fields(r, 3, HTTP_GET, "/", 1, out, sizeof(out));
    CHECK_MEM(out, n, "Link: </style.css>; rel=preload; as=style\r\n");
    n = hints_fields(r, 3, HTTP_GET, "/docs/a.html", 12, out, sizeof(out));
    CHECK_MEM(out, n,
              "Link: </app.js>; rel=preload; as=script\r\n"
              "Link: <https://cdn.example/>; rel=preconnect\r\n");
    CHECK_INT(hints_fields(r, 3, HTTP_HEAD, "/", 1, out, sizeof(out)), 0);
    CHECK_INT(hints_fields(r, 3, HTTP_GET, "/docs/a.html", 12, out, 50), 0);
}
