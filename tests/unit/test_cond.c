/* Unit tests for core/cond: ETag construction, RFC 9110 13.2.2 precondition order, the 8.8.3.2
 * comparison table, the 13.1 field examples, and If-Range. */
#include "core/cond.h"

#include "unit.h"

#define T784 784111777 /* Sun, 06 Nov 1994 08:49:37 GMT */

static struct http_str g(const char *s)
{
    return (struct http_str){unit_guard_str(s), strlen(s)};
}

static struct http_request req_for(enum http_method m)
{
    struct http_request r;
    memset(&r, 0, sizeof(r));
    r.method = m;
    return r;
}

/* Evaluates one field against etag "xyzzy" and mtime T784 for a GET. */
static enum cond_result one(const char *field, const char *value, enum http_method m)
{
    struct http_request r = req_for(m);
    struct http_str v = g(value);
    if (!strcmp(field, "im"))
        r.if_match = v;
    else if (!strcmp(field, "inm"))
        r.if_none_match = v;
    else if (!strcmp(field, "ims"))
        r.if_modified_since = v;
    else
        r.if_unmodified_since = v;
    return cond_evaluate(&r, g("\"xyzzy\""), T784);
}

/* The digests of the tests: the first 16 bytes of SHA-256("") and of "hello". */
static const uint8_t D_EMPTY[COND_DIGEST_LEN] = {0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14,
                                                 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24};
static const uint8_t D_HELLO[COND_DIGEST_LEN] = {0x2c, 0xf2, 0x4d, 0xba, 0x5f, 0xb0, 0xa3, 0x0e,
                                                 0x26, 0xe8, 0x3b, 0x2a, 0xc5, 0xb9, 0xe2, 0x9e};

TEST(cond_etag_format)
{
    char buf[COND_ETAG_MAX];
    size_t n = cond_etag(buf, sizeof(buf), D_EMPTY, NULL);
    CHECK_MEM(buf, n, "\"e3b0c44298fc1c149afbf4c8996fb924\""); /* sha256sum's first 32 */
    CHECK(buf[n] == '\0');
    n = cond_etag(buf, sizeof(buf), D_HELLO, "br");
    CHECK_MEM(buf, n, "\"2cf24dba5fb0a30e26e83b2ac5b9e29e-br\"");
    n = cond_etag(buf, sizeof(buf), D_HELLO, "dcz0a0b0c");
    CHECK_MEM(buf, n, "\"2cf24dba5fb0a30e26e83b2ac5b9e29e-dcz0a0b0c\"");
    CHECK(n + 1 <= COND_ETAG_MAX);
}

TEST(cond_etag_truncation)
{
    char buf[48];
    memset(buf, 'x', sizeof(buf));
    CHECK_INT(cond_etag(buf, 8, D_HELLO, "br"), 37);
    CHECK_MEM(buf, 8, "\"2cf24db");
    CHECK(buf[8] == 'x');
    memset(buf, 'x', sizeof(buf));
    CHECK_INT(cond_etag(buf, 37, D_HELLO, "br"), 37);
    CHECK_MEM(buf, 37, "\"2cf24dba5fb0a30e26e83b2ac5b9e29e-br\"");
    CHECK(buf[37] == 'x');
    CHECK_INT(cond_etag(buf, 38, D_HELLO, "br"), 37);
    CHECK(buf[37] == '\0');
    CHECK_INT(cond_etag(NULL, 0, D_HELLO, "br"), 37);
}

TEST(cond_etag_distinct)
{
    char a[COND_ETAG_MAX], b[COND_ETAG_MAX];
    cond_etag(a, sizeof(a), D_HELLO, NULL);
    cond_etag(b, sizeof(b), D_HELLO, "br");
    CHECK(strcmp(a, b) != 0);
    cond_etag(a, sizeof(a), D_HELLO, "gzip");
    CHECK(strcmp(a, b) != 0);
    cond_etag(a, sizeof(a), D_EMPTY, NULL);
    cond_etag(b, sizeof(b), D_HELLO, NULL);
    CHECK(strcmp(a, b) != 0);
}

TEST(cond_no_preconditions)
{
    struct http_request r = req_for(HTTP_GET);
    CHECK_INT(cond_evaluate(&r, g("\"xyzzy\""), T784), COND_PROCEED);
    r.if_match = (struct http_str){"", 0};
    r.if_none_match = g("  ");
    CHECK_INT(cond_evaluate(&r, g("\"xyzzy\""), T784), COND_PROCEED);
}

TEST(cond_if_match_rfc_examples)
{
    CHECK_INT(one("im", "\"xyzzy\"", HTTP_GET), COND_PROCEED);
    CHECK_INT(one("im", "\"xyzzy\", \"r2d2xxxx\", \"c3piozzzz\"", HTTP_GET), COND_PROCEED);
    CHECK_INT(one("im", "\"r2d2xxxx\", \"c3piozzzz\", \"xyzzy\"", HTTP_PUT), COND_PROCEED);
    CHECK_INT(one("im", "*", HTTP_GET), COND_PROCEED);
    CHECK_INT(one("im", "\"r2d2xxxx\", \"c3piozzzz\"", HTTP_GET), COND_PRECONDITION);
    CHECK_INT(one("im", "\"xyzz\"", HTTP_GET), COND_PRECONDITION);
    CHECK_INT(one("im", "\"xyzzy \"", HTTP_GET), COND_PRECONDITION);
    /* Strong comparison: weak tags never match. */
    CHECK_INT(one("im", "W/\"xyzzy\"", HTTP_GET), COND_PRECONDITION);
    CHECK_INT(one("im", "W/\"xyzzy\", \"xyzzy\"", HTTP_GET), COND_PROCEED);
    /* Malformed: an unquoted tag, a missing comma, an unterminated quote. */
    CHECK_INT(one("im", "xyzzy", HTTP_GET), COND_PRECONDITION);
    CHECK_INT(one("im", "\"a\" \"xyzzy\"", HTTP_GET), COND_PRECONDITION);
    CHECK_INT(one("im", "\"xyzzy", HTTP_GET), COND_PRECONDITION);
    CHECK_INT(one("im", "*, \"xyzzy\"", HTTP_GET), COND_PRECONDITION);
    /* Tags before a syntax error still count. */
    CHECK_INT(one("im", "\"xyzzy\", junk", HTTP_GET), COND_PROCEED);
    CHECK_INT(one("im", ",,\"xyzzy\",,", HTTP_GET), COND_PROCEED);
}

TEST(cond_if_match_against_weak_or_missing_etag)
{
    struct http_request r = req_for(HTTP_GET);
    r.if_match = g("W/\"1\"");
    CHECK_INT(cond_evaluate(&r, g("W/\"1\""), T784), COND_PRECONDITION);
    r.if_match = g("\"1\"");
    CHECK_INT(cond_evaluate(&r, g("W/\"1\""), T784), COND_PRECONDITION);
    r.if_match = g("*");
    CHECK_INT(cond_evaluate(&r, (struct http_str){NULL, 0}, T784), COND_PROCEED);
    r.if_match = g("\"1\"");
    CHECK_INT(cond_evaluate(&r, (struct http_str){NULL, 0}, T784), COND_PRECONDITION);
}

TEST(cond_comparison_table_rfc9110_8_8_3_2)
{
    /* ETag 1 / ETag 2 / strong / weak */
    static const struct {
        const char *a, *b;
        bool strong, weak;
    } rows[] = {
        {"W/\"1\"", "W/\"1\"", false, true},
        {"W/\"1\"", "W/\"2\"", false, false},
        {"W/\"1\"", "\"1\"", false, true},
        {"\"1\"", "\"1\"", true, true},
    };
    for (size_t i = 0; i < 4; i++) {
        for (int swap = 0; swap < 2; swap++) {
            const char *list = swap ? rows[i].b : rows[i].a;
            const char *own = swap ? rows[i].a : rows[i].b;
            struct http_request r = req_for(HTTP_GET);
            r.if_match = g(list);
            CHECK_INT(cond_evaluate(&r, g(own), T784),
                      rows[i].strong ? COND_PROCEED : COND_PRECONDITION);
            r = req_for(HTTP_GET);
            r.if_none_match = g(list);
            CHECK_INT(cond_evaluate(&r, g(own), T784),
                      rows[i].weak ? COND_NOT_MODIFIED : COND_PROCEED);
        }
    }
}

TEST(cond_if_none_match_rfc_examples)
{
    CHECK_INT(one("inm", "\"xyzzy\"", HTTP_GET), COND_NOT_MODIFIED);
    CHECK_INT(one("inm", "W/\"xyzzy\"", HTTP_GET), COND_NOT_MODIFIED);
    CHECK_INT(one("inm", "\"xyzzy\", \"r2d2xxxx\", \"c3piozzzz\"", HTTP_GET), COND_NOT_MODIFIED);
    CHECK_INT(one("inm", "W/\"xyzzy\", W/\"r2d2xxxx\", W/\"c3piozzzz\"", HTTP_HEAD),
              COND_NOT_MODIFIED);
    CHECK_INT(one("inm", "W/\"r2d2xxxx\",W/\"xyzzy\"", HTTP_GET), COND_NOT_MODIFIED);
    CHECK_INT(one("inm", "*", HTTP_GET), COND_NOT_MODIFIED);
    CHECK_INT(one("inm", "\"r2d2xxxx\", \"c3piozzzz\"", HTTP_GET), COND_PROCEED);
    /* Other methods get 412 instead of 304. */
    CHECK_INT(one("inm", "\"xyzzy\"", HTTP_POST), COND_PRECONDITION);
    CHECK_INT(one("inm", "*", HTTP_PUT), COND_PRECONDITION);
    CHECK_INT(one("inm", "\"nope\"", HTTP_DELETE), COND_PROCEED);
    /* Malformed lists stop at the error; the response goes on. */
    CHECK_INT(one("inm", "xyzzy", HTTP_GET), COND_PROCEED);
    CHECK_INT(one("inm", "w/\"xyzzy\"", HTTP_GET), COND_PROCEED);
    CHECK_INT(one("inm", "\"a\";\"xyzzy\"", HTTP_GET), COND_PROCEED);
    CHECK_INT(one("inm", "\"a b\", \"xyzzy\"", HTTP_GET), COND_PROCEED);
    CHECK_INT(one("inm", "\"xyzzy\"x", HTTP_GET), COND_NOT_MODIFIED);
}

TEST(cond_dates)
{
    /* mtime is T784. */
    CHECK_INT(one("ims", "Sun, 06 Nov 1994 08:49:37 GMT", HTTP_GET), COND_NOT_MODIFIED);
    CHECK_INT(one("ims", "Sunday, 06-Nov-94 08:49:37 GMT", HTTP_HEAD), COND_NOT_MODIFIED);
    CHECK_INT(one("ims", "Sun Nov  6 08:49:37 1994", HTTP_GET), COND_NOT_MODIFIED);
    CHECK_INT(one("ims", "Sun, 06 Nov 1994 08:49:38 GMT", HTTP_GET), COND_NOT_MODIFIED);
    CHECK_INT(one("ims", "Sun, 06 Nov 1994 08:49:36 GMT", HTTP_GET), COND_PROCEED);
    CHECK_INT(one("ims", "Sun, 06 Nov 1994 08:49:37 GMT", HTTP_POST), COND_PROCEED);
    CHECK_INT(one("ims", "Sun, 06 Nov 1994 08:49:37 GMT; length=3", HTTP_GET), COND_PROCEED);
    CHECK_INT(one("ims", "yesterday", HTTP_GET), COND_PROCEED);
    CHECK_INT(one("ims", "Tue, 19 Jan 2038 03:14:08 GMT", HTTP_GET), COND_NOT_MODIFIED);

    CHECK_INT(one("ius", "Sun, 06 Nov 1994 08:49:37 GMT", HTTP_GET), COND_PROCEED);
    CHECK_INT(one("ius", "Sun, 06 Nov 1994 08:49:38 GMT", HTTP_PUT), COND_PROCEED);
    CHECK_INT(one("ius", "Sun, 06 Nov 1994 08:49:36 GMT", HTTP_GET), COND_PRECONDITION);
    CHECK_INT(one("ius", "Sun, 06 Nov 1994 08:49:36 GMT", HTTP_PUT), COND_PRECONDITION);
    CHECK_INT(one("ius", "Sun, 06 Nov 1994 08:49:36 GMX", HTTP_GET), COND_PROCEED);
}

TEST(cond_precedence_rfc9110_13_2_2)
{
    struct http_str etag = g("\"xyzzy\"");
    struct http_request r = req_for(HTTP_GET);

    /* If-Match decides; If-Unmodified-Since is not even looked at. */
    r.if_match = g("\"xyzzy\"");
    r.if_unmodified_since = g("Sun, 06 Nov 1994 08:49:36 GMT");
    CHECK_INT(cond_evaluate(&r, etag, T784), COND_PROCEED);
    r.if_match = g("\"other\"");
    r.if_unmodified_since = g("Sun, 06 Nov 1994 08:49:38 GMT");
    CHECK_INT(cond_evaluate(&r, etag, T784), COND_PRECONDITION);

    /* A failed If-Match wins over a matching If-None-Match. */
    r = req_for(HTTP_GET);
    r.if_match = g("\"other\"");
    r.if_none_match = g("\"xyzzy\"");
    CHECK_INT(cond_evaluate(&r, etag, T784), COND_PRECONDITION);
    r.if_match = g("\"xyzzy\"");
    CHECK_INT(cond_evaluate(&r, etag, T784), COND_NOT_MODIFIED);

    /* If-None-Match present: If-Modified-Since is ignored, both ways. */
    r = req_for(HTTP_GET);
    r.if_none_match = g("\"other\"");
    r.if_modified_since = g("Sun, 06 Nov 1994 08:49:37 GMT");
    CHECK_INT(cond_evaluate(&r, etag, T784), COND_PROCEED);
    r.if_none_match = g("\"xyzzy\"");
    r.if_modified_since = g("Sun, 06 Nov 1994 08:49:36 GMT");
    CHECK_INT(cond_evaluate(&r, etag, T784), COND_NOT_MODIFIED);

    /* A failing If-Unmodified-Since beats a matching If-None-Match. */
    r = req_for(HTTP_HEAD);
    r.if_unmodified_since = g("Sun, 06 Nov 1994 08:49:36 GMT");
    r.if_none_match = g("*");
    CHECK_INT(cond_evaluate(&r, etag, T784), COND_PRECONDITION);
    /* ...and a passing one lets If-Modified-Since answer. */
    r = req_for(HTTP_GET);
    r.if_unmodified_since = g("Sun, 06 Nov 1994 08:49:37 GMT");
    r.if_modified_since = g("Sun, 06 Nov 1994 08:49:37 GMT");
    CHECK_INT(cond_evaluate(&r, etag, T784), COND_NOT_MODIFIED);
}

TEST(cond_if_range_cases)
{
    struct http_str etag = g("\"xyzzy\"");
    struct http_str none = {NULL, 0};
    CHECK(cond_if_range(none, etag, T784));
    CHECK(cond_if_range(g("\"xyzzy\""), etag, T784));
    CHECK(!cond_if_range(g("\"xyzz\""), etag, T784));
    CHECK(!cond_if_range(g("W/\"xyzzy\""), etag, T784));
    CHECK(!cond_if_range(g("\"xyzzy\""), g("W/\"xyzzy\""), T784));
    CHECK(!cond_if_range(g("\"xyzzy\""), none, T784));
    CHECK(!cond_if_range(g("\"xyzzy\", \"a\""), etag, T784)); /* one tag, not a list */
    CHECK(!cond_if_range(g("\"xyzzy"), etag, T784));
    CHECK(!cond_if_range(g("xyzzy"), etag, T784));
    CHECK(cond_if_range(g("Sun, 06 Nov 1994 08:49:37 GMT"), etag, T784));
    CHECK(cond_if_range(g("Sun Nov  6 08:49:37 1994"), etag, T784));
    CHECK(!cond_if_range(g("Sun, 06 Nov 1994 08:49:38 GMT"), etag, T784)); /* exact only */
    CHECK(!cond_if_range(g("Sun, 06 Nov 1994 08:49:36 GMT"), etag, T784));
    CHECK(!cond_if_range(g("Sun, 06 Nov 1994 08:49:37 GMT x"), etag, T784));
}

TEST(cond_prefixes_stay_in_bounds)
{
    static const char list[] = "W/\"a\", \"b\" ,\"xyzzy\"";
    for (size_t i = 0; i <= sizeof(list) - 1; i++) {
        struct http_request r = req_for(HTTP_GET);
        r.if_none_match = (struct http_str){unit_guard(list, i), i};
        r.if_match = r.if_none_match;
        enum cond_result c = cond_evaluate(&r, g("\"xyzzy\""), T784);
        CHECK_INT(c, i == 0                  ? COND_PROCEED
                     : i == sizeof(list) - 1 ? COND_NOT_MODIFIED
                                             : COND_PRECONDITION);
        cond_if_range(r.if_match, g("\"xyzzy\""), T784);
        cond_if_range(g("\"xyzzy\""), (struct http_str){unit_guard(list, i), i}, T784);
    }
}

TEST(cond_etag_worst_case_fits_cond_etag_max)
{
    char out[COND_ETAG_MAX];
    size_t n = cond_etag(out, sizeof(out), D_HELLO, "12345678");
    CHECK_INT(n, 43);
    CHECK(n < COND_ETAG_MAX && out[n] == '\0');
}
