/* test_http1: the request-head parser against its contract in core/http1.h.
 * Must not: hand the parser a buffer that is not unit_guard()ed: an over-read has to crash here.
 * Ownership: each test owns its struct http_request; guarded copies live until the runner exits. */
#include "unit.h"

#include "core/http1.h"

#include <stdint.h>
#include <stdlib.h>

/* Parses the n bytes of s from a guarded copy. */
static int parse_n(const char *s, size_t n, struct http_request *req)
{
    return http1_parse(unit_guard(s, n), n, req);
}

static int parse(const char *s, struct http_request *req)
{
    return parse_n(s, strlen(s), req);
}

/* The error status for s, 0 when it parses, or HTTP1_PARTIAL. */
static int status_of(const char *s)
{
    struct http_request req;
    int rc = parse(s, &req);
    if (rc == HTTP1_ERROR)
        return req.status;
    return rc == HTTP1_PARTIAL ? HTTP1_PARTIAL : 0;
}

/* Every proper prefix of head is a valid but incomplete head, and head followed by tail (bytes
 * of a body or of the next request) parses as exactly the head: the parser never errs on a prefix
 * and never claims a head early. */
static void check_prefixes(const char *head, const char *tail)
{
    size_t head_len = strlen(head), tail_len = strlen(tail);
    char *s = malloc(head_len + tail_len + 1);
    memcpy(s, head, head_len);
    memcpy(s + head_len, tail, tail_len + 1);
    struct http_request req;
    for (size_t i = 0; i < head_len; i++) {
        int rc = parse_n(s, i, &req);
        if (rc != HTTP1_PARTIAL)
            fprintf(stderr, "  prefix of %zu bytes of \"%s\"\n", i, head);
        CHECK_INT(rc, HTTP1_PARTIAL);
    }
    CHECK_INT(parse_n(s, head_len, &req), head_len);
    CHECK_INT(parse_n(s, head_len + tail_len, &req), head_len);
    free(s);
}

/* A field of the last parsed request, found by exact name. */
static const struct http_header *field(const struct http_request *req, const char *name)
{
    for (size_t i = 0; i < req->num_headers; i++)
        if (req->headers[i].name.len == strlen(name) &&
            memcmp(req->headers[i].name.p, name, req->headers[i].name.len) == 0)
            return &req->headers[i];
    return NULL;
}

/* Every string in req lies inside buf[0, len). */
static bool inside(struct http_str s, const char *buf, size_t len)
{
    return s.p == NULL ? s.len == 0 : s.p >= buf && s.p + s.len <= buf + len;
}

TEST(http1_simple_get)
{
    const char *s = "GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t/1\r\n\r\n";
    const char *g = unit_guard_str(s);
    struct http_request req;
    CHECK_INT(http1_parse(g, strlen(s), &req), strlen(s));
    CHECK_INT(req.method, HTTP_GET);
    CHECK_MEM(req.method_name.p, req.method_name.len, "GET");
    CHECK_MEM(req.target.p, req.target.len, "/index.html");
    CHECK_INT(req.minor, 1);
    CHECK_INT(req.num_headers, 2);
    CHECK_MEM(req.headers[0].name.p, req.headers[0].name.len, "Host");
    CHECK_MEM(req.headers[0].value.p, req.headers[0].value.len, "example.com");
    CHECK_MEM(req.headers[1].name.p, req.headers[1].name.len, "User-Agent");
    CHECK_MEM(req.headers[1].value.p, req.headers[1].value.len, "t/1");
    CHECK(req.has_host);
    CHECK_MEM(req.host.p, req.host.len, "example.com");
    CHECK_MEM(req.user_agent.p, req.user_agent.len, "t/1");
    CHECK(req.keep_alive);
    CHECK(!req.has_content_length);
    CHECK(!req.has_transfer_encoding);
    CHECK(!req.expect_continue && !req.expect_other);
    CHECK(req.range.p == NULL && req.if_none_match.p == NULL && req.referer.p == NULL);
    /* Pointers go into the caller's buffer, not into a copy. */
    CHECK(req.target.p == g + 4);
    CHECK(inside(req.host, g, strlen(s)));
}

TEST(http1_methods)
{
    static const struct {
        const char *name;
        enum http_method m;
    } cases[] = {
        {"GET", HTTP_GET},         {"HEAD", HTTP_HEAD},
        {"OPTIONS", HTTP_OPTIONS}, {"POST", HTTP_POST},
        {"PUT", HTTP_PUT},         {"DELETE", HTTP_DELETE},
        {"PATCH", HTTP_PATCH},     {"CONNECT", HTTP_CONNECT},
        {"TRACE", HTTP_TRACE},     {"get", HTTP_OTHER},
        {"Get", HTTP_OTHER},       {"PROPFIND", HTTP_OTHER},
        {"M-SEARCH", HTTP_OTHER},  {"GETS", HTTP_OTHER},
        {"GE", HTTP_OTHER},        {"!#$%&'*+-.^_`|~09azAZ", HTTP_OTHER},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%s / HTTP/1.1\r\nHost: h\r\n\r\n", cases[i].name);
        struct http_request req;
        CHECK_INT(parse(buf, &req), strlen(buf));
        CHECK_INT(req.method, cases[i].m);
        CHECK_MEM(req.method_name.p, req.method_name.len, cases[i].name);
    }
}

TEST(http1_versions)
{
    struct http_request req;
    CHECK_INT(parse("GET / HTTP/1.0\r\n\r\n", &req), 18);
    CHECK_INT(req.minor, 0);
    CHECK(!req.keep_alive);
    CHECK(!req.has_host);
    CHECK_INT(parse("GET / HTTP/1.2\r\nHost: h\r\n\r\n", &req), 27);
    CHECK_INT(req.minor, 1);
    CHECK(req.keep_alive);
    CHECK_INT(parse("GET / HTTP/1.9\r\nHost: h\r\n\r\n", &req), 27);
    CHECK_INT(req.minor, 1);

    CHECK_INT(status_of("GET / HTTP/2.0\r\n\r\n"), 505);
    CHECK_INT(status_of("GET / HTTP/0.9\r\n\r\n"), 505);
    CHECK_INT(status_of("GET / HTTP/3.1\r\nHost: h\r\n\r\n"), 505);
    /* 505 is decided at the end of the request line, without waiting for the fields. */
    CHECK_INT(status_of("GET / HTTP/2.0\r\n"), 505);
    CHECK_INT(status_of("GET / HTTP/9.9\n"), 505);

    static const char *const bad[] = {
        "GET / HTTP/1\r\n\r\n",     "GET / HTTP/1.\r\n\r\n",   "GET / HTTP/1.10\r\n\r\n",
        "GET / HTTP/11.1\r\n\r\n",  "GET / http/1.1\r\n\r\n",  "GET / HTTP/1.1x\r\n\r\n",
        "GET / HTTP/1.1 \r\n\r\n",  "GET / HTTP/a.1\r\n\r\n",  "GET / HTTP/1.a\r\n\r\n",
        "GET / HTTP/1,1\r\n\r\n",   "GET / HTTPS/1.1\r\n\r\n", "GET / HTTP/2.0x\r\n\r\n",
        "GET / HTTP/1.1\t\r\n\r\n", "GET / HTTP/\r\n\r\n",     "GET / HTTP 1.1\r\n\r\n",
        "GET / XTTP/1.1\r\n\r\n",   "GET / HTTP/-1.1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (status_of(bad[i]) != 400)
            fprintf(stderr, "  input \"%s\"\n", bad[i]);
        CHECK_INT(status_of(bad[i]), 400);
    }
}

TEST(http1_request_line_spacing)
{
    static const char *const bad[] = {
        "GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /  HTTP/1.1\r\nHost: h\r\n\r\n",
        " GET / HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /\tHTTP/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.1 \r\nHost: h\r\n\r\n",
        "GET /\r\nHost: h\r\n\r\n",
        "GET\r\nHost: h\r\n\r\n",
        "GET / \r\nHost: h\r\n\r\n",
        "GET HTTP/1.1\r\nHost: h\r\n\r\n",
        " / HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.1 extra\r\nHost: h\r\n\r\n",
        "GET /a b HTTP/1.1\r\nHost: h\r\n\r\n",
        "\tGET / HTTP/1.1\r\nHost: h\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (status_of(bad[i]) != 400)
            fprintf(stderr, "  input \"%s\"\n", bad[i]);
        CHECK_INT(status_of(bad[i]), 400);
    }
}

TEST(http1_method_bytes)
{
    /* An invalid byte in the method is an error at once, before the line is complete. */
    CHECK_INT(status_of("GE\x01"), 400);
    CHECK_INT(status_of("G("), 400);
    CHECK_INT(status_of("GET/"), 400);
    CHECK_INT(status_of("GE\"T"), 400);
    CHECK_INT(status_of("G\x80"), 400);
    CHECK_INT(status_of("GET:"), 400);
    CHECK_INT(status_of("GE\r\n"), 400);
    CHECK_INT(status_of("GET\n"), 400);
    CHECK_INT(status_of("G@T / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    struct http_request req;
    CHECK_INT(parse_n("GE\0T / HTTP/1.1\r\n", 17, &req), HTTP1_ERROR);
    CHECK_INT(req.status, 400);
    /* While every byte is a token byte, the parser waits. */
    CHECK_INT(status_of("GET"), HTTP1_PARTIAL);
    CHECK_INT(status_of("M-SEARCH"), HTTP1_PARTIAL);
}

TEST(http1_target_bytes)
{
    char buf[256];
    /* Every visible byte is a target byte. */
    char target[0x7f - 0x21 + 2];
    size_t n = 0;
    target[n++] = '/';
    for (int c = 0x21; c <= 0x7e; c++)
        target[n++] = (char)c;
    target[n] = '\0';
    snprintf(buf, sizeof(buf), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", target);
    struct http_request req;
    CHECK_INT(parse(buf, &req), strlen(buf));
    CHECK_MEM(req.target.p, req.target.len, target);

    /* No control byte, DEL or byte >= 0x80 in a target: 400 as soon as it is seen. */
    static const int bad[] = {0x00, 0x01, 0x09, 0x0b, 0x0c, 0x0d, 0x1f, 0x7f, 0x80, 0xc3, 0xff};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char line[] = "GET /aXb HTTP/1.1\r\nHost: h\r\n\r\n";
        line[6] = (char)bad[i];
        CHECK_INT(parse_n(line, strlen("GET /aXb HTTP/1.1\r\nHost: h\r\n\r\n"), &req), HTTP1_ERROR);
        CHECK_INT(req.status, 400);
        CHECK_INT(parse_n(line, 7, &req), HTTP1_ERROR);
        CHECK_INT(req.status, 400);
    }
    /* A long target crosses the sixteen-byte blocks: a bad byte at every offset is found. */
    for (size_t at = 4; at < 60; at++) {
        char line[128];
        memset(line, 'a', sizeof(line));
        memcpy(line, "GET /", 5);
        memcpy(line + 64, " HTTP/1.1\r\nHost: h\r\n\r\n", 22);
        line[at + 1] = '\x7f';
        CHECK_INT(parse_n(line, 86, &req), HTTP1_ERROR);
        CHECK_INT(req.status, 400);
        line[at + 1] = 'b';
        CHECK_INT(parse_n(line, 86, &req), 86);
        CHECK_INT(req.target.len, 60);
    }
}

TEST(http1_leading_empty_lines)
{
    struct http_request req;
    const char *s = "\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    CHECK_INT(parse(s, &req), strlen(s));
    CHECK_MEM(req.target.p, req.target.len, "/");
    s = "\n\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    CHECK_INT(parse(s, &req), strlen(s));
    s = "\r\n\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    CHECK_INT(parse(s, &req), strlen(s));
    CHECK_INT(status_of("\r\n"), HTTP1_PARTIAL);
    CHECK_INT(status_of("\r"), HTTP1_PARTIAL);
    CHECK_INT(status_of("\n\n\n"), HTTP1_PARTIAL);
    CHECK_INT(status_of(""), HTTP1_PARTIAL);
    CHECK_INT(status_of("\rX"), 400);
    CHECK_INT(status_of("\r\rGET / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    CHECK_INT(status_of("\r\n \r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    check_prefixes("\r\n\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", "");
}

TEST(http1_lf_only)
{
    struct http_request req;
    const char *s = "GET /a HTTP/1.1\nHost: h\nX-A: 1\n\n";
    CHECK_INT(parse(s, &req), strlen(s));
    CHECK_INT(req.num_headers, 2);
    CHECK_MEM(req.headers[1].value.p, req.headers[1].value.len, "1");
    s = "GET /a HTTP/1.1\r\nHost: h\nX-A: 1\r\n\n";
    CHECK_INT(parse(s, &req), strlen(s));
    s = "GET /a HTTP/1.1\nHost: h\n\r\n";
    CHECK_INT(parse(s, &req), strlen(s));
    check_prefixes("GET /a HTTP/1.1\nHost: h\nX-A: 1\n\n", "GET");
}

TEST(http1_bare_cr)
{
    CHECK_INT(status_of("GET / HTTP/1.1\rHost: h\r\n\r\n"), 400);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n"), 400);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n"), 400);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\r\n\r\n"), 400);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: h\r\n\rX"), 400);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: h\r\n\r\r\n"), 400);
    CHECK_INT(status_of("GET /\r HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    /* A CR as the last byte may still be followed by LF. */
    CHECK_INT(status_of("GET / HTTP/1.1\r"), HTTP1_PARTIAL);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: h\r"), HTTP1_PARTIAL);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: h\r\n\r"), HTTP1_PARTIAL);
}

TEST(http1_field_values)
{
    struct http_request req;
    const char *s = "GET / HTTP/1.1\r\n"
                    "Host:h\r\n"
                    "X-Pad: \t  padded \t \r\n"
                    "X-Empty:\r\n"
                    "X-Blank:   \t \r\n"
                    "X-Inner: a  b\tc\r\n"
                    "X-Obs: caf\xc3\xa9 \x80\xff\r\n"
                    "X-Visible: !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\r\n"
                    "x-CASE-kept: v\r\n"
                    "\r\n";
    const char *g = unit_guard_str(s);
    CHECK_INT(http1_parse(g, strlen(s), &req), strlen(s));
    CHECK_INT(req.num_headers, 8);
    CHECK_MEM(req.host.p, req.host.len, "h");
    const struct http_header *h = field(&req, "X-Pad");
    CHECK(h && h->value.len == 6 && memcmp(h->value.p, "padded", 6) == 0);
    h = field(&req, "X-Empty");
    CHECK(h && h->value.len == 0);
    h = field(&req, "X-Blank");
    CHECK(h && h->value.len == 0);
    h = field(&req, "X-Inner");
    CHECK(h && h->value.len == 6 && memcmp(h->value.p, "a  b\tc", 6) == 0);
    h = field(&req, "X-Obs");
    CHECK(h && h->value.len == 8 && memcmp(h->value.p, "caf\xc3\xa9 \x80\xff", 8) == 0);
    h = field(&req, "X-Visible");
    CHECK(h && h->value.len == 32);
    CHECK(field(&req, "x-CASE-kept") != NULL);
    for (size_t i = 0; i < req.num_headers; i++) {
        CHECK(inside(req.headers[i].name, g, strlen(s)));
        CHECK(inside(req.headers[i].value, g, strlen(s)));
    }
}

TEST(http1_field_value_controls)
{
    /* Every control byte but HTAB, and DEL, is refused in a value, at any offset from the
     * sixteen-byte blocks. */
    for (int c = 0; c <= 0x7f; c++) {
        if (c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c < 0x7f))
            continue;
        for (size_t at = 0; at < 40; at += 3) {
            char line[128];
            int n = snprintf(line, sizeof(line), "GET / HTTP/1.1\r\nHost: h\r\nX: ");
            memset(line + n, 'v', 40);
            line[n + (int)at] = (char)c;
            memcpy(line + n + 40, "\r\n\r\n", 4);
            struct http_request req;
            CHECK_INT(parse_n(line, (size_t)n + 44, &req), HTTP1_ERROR);
            CHECK_INT(req.status, 400);
            /* Decided as soon as the byte is in the buffer. */
            CHECK_INT(parse_n(line, (size_t)n + at + 1, &req), HTTP1_ERROR);
        }
    }
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: h\r\nX: a\x7f\r\n\r\n"), 400);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: h\x7f\r\n\r\n"), 400);
    struct http_request req;
    CHECK_INT(parse_n("GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n", 34, &req), HTTP1_ERROR);
    CHECK_INT(req.status, 400);
    /* A long value with tabs at every offset is fine. */
    char line[160];
    int n = snprintf(line, sizeof(line), "GET / HTTP/1.1\r\nHost: h\r\nX: v");
    for (int i = 0; i < 50; i++)
        line[n + i] = i % 7 == 0 ? '\t' : 'v';
    memcpy(line + n + 50, "z\r\n\r\n", 5);
    CHECK_INT(parse_n(line, (size_t)n + 55, &req), n + 55);
    CHECK_INT(req.headers[1].value.len, 52);
}

TEST(http1_field_name_errors)
{
    static const char *const bad[] = {
        "GET / HTTP/1.1\r\nHost : h\r\n\r\n",
        "GET / HTTP/1.1\r\nHost\t: h\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\n: empty\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\tfolded\r\n\r\n",
        "GET / HTTP/1.1\r\n Host: h\r\n\r\n",
        "GET / HTTP/1.1\r\n\tHost: h\r\n\r\n",
        "GET / HTTP/1.1\r\nHo st: h\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX(y): 1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX@Y: 1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX/Y: 1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX\x80: 1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX\x01: 1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (status_of(bad[i]) != 400)
            fprintf(stderr, "  input \"%s\"\n", bad[i]);
        CHECK_INT(status_of(bad[i]), 400);
    }
    /* Early: the byte after the name decides. */
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost "), 400);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: h\r\n "), 400);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost"), HTTP1_PARTIAL);
    /* Every tchar is a name byte. */
    struct http_request req;
    const char *s = "GET / HTTP/1.1\r\nHost: h\r\n!#$%&'*+-.^_`|~09azAZ: v\r\n\r\n";
    CHECK_INT(parse(s, &req), strlen(s));
    CHECK(field(&req, "!#$%&'*+-.^_`|~09azAZ") != NULL);
}

TEST(http1_pipelined)
{
    const char *a = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
    const char *b = "HEAD /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    char both[256];
    snprintf(both, sizeof(both), "%s%s", a, b);
    struct http_request req;
    const char *g = unit_guard_str(both);
    int n = http1_parse(g, strlen(both), &req);
    CHECK_INT(n, strlen(a));
    CHECK_MEM(req.target.p, req.target.len, "/a");
    CHECK(req.keep_alive);
    CHECK_INT(http1_parse(g + n, strlen(both) - (size_t)n, &req), strlen(b));
    CHECK_INT(req.method, HTTP_HEAD);
    CHECK_MEM(req.target.p, req.target.len, "/b");
    CHECK(!req.keep_alive);
    /* A partial second request, and a body, are not part of the head. */
    CHECK_INT(parse("GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HT", &req), strlen(a));
    CHECK_INT(parse("POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello", &req), 48);
    CHECK_INT(req.content_length, 5);
    /* Garbage after the head is the next request's problem. */
    CHECK_INT(parse("GET /a HTTP/1.1\r\nHost: h\r\n\r\n\x01\x02\x7f", &req), strlen(a));
}

TEST(http1_every_prefix)
{
    check_prefixes("GET /index.html HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n", "");
    check_prefixes("GET / HTTP/1.0\r\n\r\n", "\r\n");
    check_prefixes("GET / HTTP/1.0\n\n", "\x01");
    check_prefixes("POST /upload HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n"
                   "Connection: keep-alive, close\r\nExpect: 100-continue\r\n\r\n",
                   "5\r\nhello\r\n0\r\n\r\n");
    check_prefixes("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nX-Tabs:\t a\tb \t\r\n"
                   "X-Long: 0123456789abcdef0123456789abcdef0123456789\r\n\r\n",
                   "GET / HTTP/1.1");
    check_prefixes("\r\nOPTIONS * HTTP/1.1\nHost: h\r\nIf-None-Match: \"x\"\n"
                   "Range: bytes=0-\r\n\r\n",
                   "\r\n\r\n");
}

TEST(http1_host)
{
    struct http_request req;
    CHECK_INT(status_of("GET / HTTP/1.1\r\n\r\n"), 400);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nX: y\r\n\r\n"), 400);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), 400);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\nhOST: b\r\n\r\n"), 400);
    /* The second Host is refused as soon as it is complete. */
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n"), 400);
    CHECK_INT(status_of("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
    CHECK_INT(parse("GET / HTTP/1.0\r\n\r\n", &req), 18);
    CHECK(!req.has_host && req.host.p == NULL);
    CHECK_INT(parse("GET / HTTP/1.1\r\nHOST: Example.COM:8080\r\n\r\n", &req), 42);
    CHECK(req.has_host);
    CHECK_MEM(req.host.p, req.host.len, "Example.COM:8080");
    /* An empty Host is allowed (RFC 9112 3.2: a target without authority). */
    CHECK_INT(parse("GET / HTTP/1.1\r\nHost:\r\n\r\n", &req), 25);
    CHECK(req.has_host && req.host.len == 0);
    /* A field whose name only starts like Host is another field. */
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHosts: a\r\n\r\n"), 400);
    CHECK_INT(status_of("GET / HTTP/1.1\r\nHos: a\r\n\r\n"), 400);
}

TEST(http1_content_length)
{
    static const struct {
        const char *value;
        uint64_t want;
    } good[] = {
        {"0", 0},       {"5", 5},
        {"007", 7},     {"123456789", 123456789},
        {"  42\t", 42}, {"18446744073709551615", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char buf[128];
        snprintf(buf, sizeof(buf), "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: %s\r\n\r\n",
                 good[i].value);
        struct http_request req;
        CHECK_INT(parse(buf, &req), strlen(buf));
        CHECK(req.has_content_length);
        CHECK(req.content_length == good[i].want);
    }
    /* Lists of equal values too ("5, 5"): RFC 9110 allows them, intermediaries disagree
     * (smuggling). */
    static const char *const bad[] = {
        "",
        " ",
        "-1",
        "+1",
        "1.0",
        "1 2",
        "0x10",
        "5, 6",
        "5,",
        ",5",
        "5,,5",
        "5, 5",
        "5,5",
        "5 ,\t5 , 5",
        "0,0",
        "a",
        "5a",
        "1e3",
        "5;",
        "5 , ,5",
        "18446744073709551616",
        "99999999999999999999999",
        "\xd9\xa3",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char buf[128];
        snprintf(buf, sizeof(buf), "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: %s\r\n\r\n",
                 bad[i]);
        if (status_of(buf) != 400)
            fprintf(stderr, "  Content-Length: \"%s\"\n", bad[i]);
        CHECK_INT(status_of(buf), 400);
    }
    /* A repeated field is refused even with the same value, as nginx does. */
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\ncontent-length: 3\r\n"
                        "CONTENT-LENGTH: 3\r\n\r\n"),
              400);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
                        "Content-Length: 4\r\n\r\n"),
              400);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
                        "Content-Length: 3, 4\r\n\r\n"),
              400);
    CHECK_INT(status_of("POST / HTTP/1.0\r\nContent-Length: 3\r\nContent-Length: 03\r\n\r\n"), 400);
}

TEST(http1_transfer_encoding)
{
    struct http_request req;
    const char *s = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    CHECK_INT(parse(s, &req), strlen(s));
    CHECK(req.has_transfer_encoding);
    CHECK(!req.has_content_length);
    static const char *const good[] = {
        "chunked",      "Chunked",           "CHUNKED",   "gzip, chunked",
        "gzip,chunked", "x;q=1 ,\tchunked ", "\tchunked",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char buf[128];
        snprintf(buf, sizeof(buf), "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: %s\r\n\r\n",
                 good[i]);
        if (status_of(buf) != 0)
            fprintf(stderr, "  Transfer-Encoding: \"%s\"\n", good[i]);
        CHECK_INT(status_of(buf), 0);
    }
    static const struct {
        const char *value;
        int status;
    } bad[] = {
        {"gzip", 501},
        {"identity", 501},
        {"chunked, gzip", 501},
        {"xchunked", 501},
        {"chunked;x=1", 501},
        {"chunk", 501},
        {"chunked, chunked", 400},
        {"chunked,", 400},
        {", chunked", 400},
        {"gzip,,chunked", 400},
        {"", 400},
        {"chunked, gzip, chunked", 400},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char buf[128];
        snprintf(buf, sizeof(buf), "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: %s\r\n\r\n",
                 bad[i].value);
        if (status_of(buf) != bad[i].status)
            fprintf(stderr, "  Transfer-Encoding: \"%s\"\n", bad[i].value);
        CHECK_INT(status_of(buf), bad[i].status);
    }
    /* Several fields make one list; the last coding of the last field is the final one. */
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n"),
              0);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                        "transfer-encoding: gzip\r\n\r\n"),
              501);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n"),
              400);
}

TEST(http1_smuggling)
{
    /* Content-Length with Transfer-Encoding, either order, refused as soon as both are seen. */
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n"),
              400);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                        "Content-Length: 5\r\n"),
              400);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n"
                        "Transfer-Encoding: gzip\r\n\r\n"),
              400);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                        "Content-Length: 6\r\n\r\n"),
              400);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 6\r\n\r\n"), 400);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
              501);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n"), 400);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                        " chunked\r\n\r\n"),
              400);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\x0b"
                        "chunked\r\n\r\n"),
              400);
    CHECK_INT(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\rX: y\r\n\r\n"), 400);
    /* Chunked framing is HTTP/1.1: a 1.0 request that claims it is refused. */
    CHECK_INT(status_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
}

TEST(http1_connection)
{
    static const struct {
        const char *head;
        bool keep_alive;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: h\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: CLOSE\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: h\r\nconnection: keep-alive, close\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: close,keep-alive\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade ,  close \r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: x-close\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: clo se\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection:\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: ,,\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost: h\r\nX-Connection: close\r\n\r\n", true},
        {"GET / HTTP/1.0\r\n\r\n", false},
        {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
        {"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true},
        {"GET / HTTP/1.0\r\nConnection: TE, keep-alive\r\n\r\n", true},
        {"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", false},
        {"GET / HTTP/1.0\r\nConnection: keep-alived\r\n\r\n", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct http_request req;
        CHECK_INT(parse(cases[i].head, &req), strlen(cases[i].head));
        if (req.keep_alive != cases[i].keep_alive)
            fprintf(stderr, "  head \"%s\"\n", cases[i].head);
        CHECK(req.keep_alive == cases[i].keep_alive);
    }
}

TEST(http1_expect)
{
    struct http_request req;
    CHECK_INT(parse("PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n", &req), 49);
    CHECK(req.expect_continue && !req.expect_other);
    CHECK_INT(parse("PUT / HTTP/1.1\r\nHost: h\r\nexpect: 100-Continue\r\n\r\n", &req), 49);
    CHECK(req.expect_continue && !req.expect_other);
    CHECK_INT(parse("PUT / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\n\r\n", &req), 43);
    CHECK(!req.expect_continue && req.expect_other);
    CHECK_INT(parse("PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continued\r\n\r\n", &req), 50);
    CHECK(!req.expect_continue && req.expect_other);
    /* RFC 9110 10.1.1: a 100-continue from an HTTP/1.0 client is ignored. */
    CHECK_INT(parse("PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", &req), 40);
    CHECK(!req.expect_continue && !req.expect_other);
}

TEST(http1_interpreted_fields)
{
    const char *s = "GET / HTTP/1.1\r\n"
                    "host: h\r\n"
                    "IF-NONE-MATCH: \"a\"\r\n"
                    "If-None-Match: \"b\"\r\n"
                    "If-Match: \"c\"\r\n"
                    "if-match: \"d\"\r\n"
                    "If-Modified-Since: Sat, 29 Oct 1994 19:43:31 GMT\r\n"
                    "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                    "If-Unmodified-Since: x\r\n"
                    "if-unmodified-since: y\r\n"
                    "Range: bytes=0-1\r\n"
                    "RANGE: bytes=2-3\r\n"
                    "If-Range: \"e\"\r\n"
                    "If-Range: \"f\"\r\n"
                    "Accept: text/html\r\n"
                    "Accept: */*\r\n"
                    "Accept-Encoding: gzip\r\n"
                    "Accept-Encoding: br\r\n"
                    "User-Agent: one\r\n"
                    "user-agent: two\r\n"
                    "Referer: http://a/\r\n"
                    "Referer: http://b/\r\n"
                    "\r\n";
    struct http_request req;
    CHECK_INT(parse(s, &req), strlen(s));
    CHECK_INT(req.num_headers, 21);
    /* Lists keep the first occurrence; the rest keep the last. */
    CHECK_MEM(req.if_none_match.p, req.if_none_match.len, "\"a\"");
    CHECK_MEM(req.if_match.p, req.if_match.len, "\"c\"");
    CHECK_MEM(req.accept.p, req.accept.len, "text/html");
    CHECK_MEM(req.accept_encoding.p, req.accept_encoding.len, "gzip");
    CHECK_MEM(req.if_modified_since.p, req.if_modified_since.len, "Sun, 06 Nov 1994 08:49:37 GMT");
    CHECK_MEM(req.if_unmodified_since.p, req.if_unmodified_since.len, "y");
    CHECK_MEM(req.range.p, req.range.len, "bytes=2-3");
    CHECK_MEM(req.if_range.p, req.if_range.len, "\"f\"");
    CHECK_MEM(req.user_agent.p, req.user_agent.len, "two");
    CHECK_MEM(req.referer.p, req.referer.len, "http://b/");
    /* An empty list field still counts as present (its pointer is set). */
    CHECK_INT(parse("GET / HTTP/1.1\r\nHost: h\r\nAccept:\r\nAccept: b\r\n\r\n", &req), 47);
    CHECK(req.accept.p != NULL && req.accept.len == 0);

    /* A second parse into the same struct forgets the first request's fields. */
    CHECK_INT(parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", &req), 27);
    CHECK(req.if_none_match.p == NULL && req.if_match.p == NULL && req.range.p == NULL);
    CHECK(req.if_modified_since.p == NULL && req.if_unmodified_since.p == NULL);
    CHECK(req.if_range.p == NULL && req.accept.p == NULL && req.accept_encoding.p == NULL);
    CHECK(req.user_agent.p == NULL && req.referer.p == NULL);
    CHECK(!req.has_content_length && req.content_length == 0 && !req.has_transfer_encoding);
    CHECK(!req.expect_continue && !req.expect_other);
    CHECK_INT(req.num_headers, 1);
}

/* A head of exactly total bytes: "GET / HTTP/1.1", Host, then one X field padded to fit. */
static char *head_of_size(size_t total)
{
    static const char start[] = "GET / HTTP/1.1\r\nHost: h\r\nX: ";
    char *s = malloc(total + 1);
    size_t fixed = sizeof(start) - 1 + 4;
    memcpy(s, start, sizeof(start) - 1);
    memset(s + sizeof(start) - 1, 'x', total - fixed);
    memcpy(s + total - 4, "\r\n\r\n", 5);
    return s;
}

TEST(http1_limits_head)
{
    struct http_request req;
    char *s = head_of_size(HTTP1_MAX_HEAD);
    CHECK_INT(parse(s, &req), HTTP1_MAX_HEAD);
    free(s);
    s = head_of_size(HTTP1_MAX_HEAD + 1);
    CHECK_INT(parse(s, &req), HTTP1_ERROR);
    CHECK_INT(req.status, 431);
    /* Decided from the first HTTP1_MAX_HEAD bytes, not from all of them. */
    CHECK_INT(parse_n(s, HTTP1_MAX_HEAD, &req), HTTP1_ERROR);
    CHECK_INT(req.status, 431);
    CHECK_INT(parse_n(s, HTTP1_MAX_HEAD - 1, &req), HTTP1_PARTIAL);
    free(s);
    /* A head within the limit followed by more bytes than the limit is fine. */
    size_t big = HTTP1_MAX_HEAD * 2;
    s = malloc(big);
    memset(s, 'b', big);
    memcpy(s, "GET / HTTP/1.1\r\nHost: h\r\n\r\n", 27);
    CHECK_INT(parse_n(s, big, &req), 27);
    /* A request line that never ends: 414. */
    memset(s, 'A', big);
    CHECK_INT(parse_n(s, HTTP1_MAX_HEAD - 1, &req), HTTP1_PARTIAL);
    CHECK_INT(parse_n(s, HTTP1_MAX_HEAD, &req), HTTP1_ERROR);
    CHECK_INT(req.status, 414);
    memset(s, '\n', big);
    CHECK_INT(parse_n(s, HTTP1_MAX_HEAD - 1, &req), HTTP1_PARTIAL);
    CHECK_INT(parse_n(s, HTTP1_MAX_HEAD, &req), HTTP1_ERROR);
    CHECK_INT(req.status, 414);
    free(s);
}

TEST(http1_limits_target)
{
    struct http_request req;
    size_t n = HTTP1_MAX_TARGET + 64;
    char *s = malloc(n);
    memcpy(s, "GET /", 5);
    memset(s + 5, 'a', n - 5);
    /* A target of exactly HTTP1_MAX_TARGET bytes is fine. */
    memcpy(s + 4 + HTTP1_MAX_TARGET, " HTTP/1.1\r\nHost: h\r\n\r\n", 22);
    CHECK_INT(parse_n(s, 4 + HTTP1_MAX_TARGET + 22, &req), 4 + HTTP1_MAX_TARGET + 22);
    CHECK_INT(req.target.len, HTTP1_MAX_TARGET);
    /* One more byte is 414, known before the line ends. */
    memset(s + 5, 'a', n - 5);
    CHECK_INT(parse_n(s, 4 + HTTP1_MAX_TARGET, &req), HTTP1_PARTIAL);
    CHECK_INT(parse_n(s, 4 + HTTP1_MAX_TARGET + 1, &req), HTTP1_ERROR);
    CHECK_INT(req.status, 414);
    memcpy(s + 5 + HTTP1_MAX_TARGET, " HTTP/1.1\r\nHost: h\r\n\r\n", 22);
    CHECK_INT(parse_n(s, 5 + HTTP1_MAX_TARGET + 22, &req), HTTP1_ERROR);
    CHECK_INT(req.status, 414);
    free(s);
}

TEST(http1_limits_fields)
{
    char buf[2048];
    size_t n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 1; i < HTTP1_MAX_HEADERS; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X-%d: %d\r\n", i, i);
    size_t fields = n;
    n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n");
    struct http_request req;
    CHECK_INT(parse_n(buf, n, &req), n);
    CHECK_INT(req.num_headers, HTTP1_MAX_HEADERS);
    CHECK_MEM(req.headers[HTTP1_MAX_HEADERS - 1].value.p,
              req.headers[HTTP1_MAX_HEADERS - 1].value.len, "63");
    /* The 65th field: 431, as soon as it starts. */
    n = fields + (size_t)snprintf(buf + fields, sizeof(buf) - fields, "X-64: 64\r\n\r\n");
    CHECK_INT(parse_n(buf, n, &req), HTTP1_ERROR);
    CHECK_INT(req.status, 431);
    CHECK_INT(parse_n(buf, fields + 1, &req), HTTP1_ERROR);
    CHECK_INT(req.status, 431);
    CHECK_INT(parse_n(buf, fields, &req), HTTP1_PARTIAL);
}

TEST(http1_str_ieq)
{
    struct http_str s = {"Keep-Alive", 10};
    CHECK(http_str_ieq(s, "keep-alive"));
    CHECK(!http_str_ieq(s, "keep-aliv"));
    CHECK(!http_str_ieq(s, "keep-alive2"));
    CHECK(!http_str_ieq(s, "keep_alive"));
    struct http_str empty = {NULL, 0};
    CHECK(http_str_ieq(empty, ""));
    CHECK(!http_str_ieq(empty, "a"));
    struct http_str odd = {"@[`{", 4};
    CHECK(!http_str_ieq(odd, "`{@["));
    CHECK(http_str_ieq(odd, "@[`{"));
    struct http_str part = {"GZIPx", 4};
    CHECK(http_str_ieq(part, "gzip"));
}
