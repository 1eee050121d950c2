/* Unit tests for core/logfmt: the three line formats, nginx escaping, JSON validity for any
 * bytes, field and line bounds, CIDRs and the X-Forwarded-For walk of --real-ip-from. */
#include "core/logfmt.h"

#include <arpa/inet.h>

#include "unit.h"

static size_t parse_head(const char *text, struct http_request *req)
{
    int n = http1_parse(text, strlen(text), req);
    CHECK(n > 0);
    return (size_t)n;
}

static const struct log_end END_200 = {
    .wall_ms = 784111777123, /* Sun, 06 Nov 1994 08:49:37.123 GMT */
    .status = 200,
    .body_bytes = 1024,
    .duration_us = 42,
    .reused = true,
};

/* One captured request and the line buffer the tests format it into. */
struct logged {
    struct http_request req;
    struct log_capture cap;
    struct logfmt_clock clk;
    char line[LOGFMT_LINE_MAX];
};

static struct logged *capture(struct logged *l, const char *head, const char *addr)
{
    memset(&l->clk, 0, sizeof(l->clk));
    parse_head(head, &l->req);
    logfmt_capture(&l->cap, addr, strlen(addr), &l->req, false);
    return l;
}

static struct logged *capture_raw(struct logged *l, const char *data, size_t len)
{
    memset(&l->clk, 0, sizeof(l->clk));
    logfmt_capture_raw(&l->cap, "-", 1, data, len);
    return l;
}

static size_t line_of(struct logged *l, enum log_format fmt, const struct log_end *end)
{
    return logfmt_line(fmt, &l->cap, end, &l->clk, l->line);
}

static bool line_has(struct logged *l, size_t n, const char *want)
{
    return memmem(l->line, n, want, strlen(want)) != NULL;
}

/* Whole lines: the formats, absent fields, nginx's escaping. */
TEST(logfmt_exact_lines)
{
    static const struct {
        const char *head, *addr;
        enum log_format fmt;
        const char *want;
    } cases[] = {
        {"GET /a?b=1 HTTP/1.1\r\nHost: x\r\nReferer: http://r/\r\nUser-Agent: ua/1\r\n\r\n",
         "192.0.2.1", LOG_COMBINED,
         "192.0.2.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /a?b=1 HTTP/1.1\" 200 1024 "
         "\"http://r/\" \"ua/1\"\n"},
        {"GET /a?b=1 HTTP/1.1\r\nHost: x\r\nReferer: http://r/\r\nUser-Agent: ua/1\r\n\r\n",
         "192.0.2.1", LOG_COMMON,
         "192.0.2.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /a?b=1 HTTP/1.1\" 200 1024\n"},
        {"HEAD / HTTP/1.0\r\n\r\n", "::1", LOG_COMBINED,
         "::1 - - [06/Nov/1994:08:49:37 +0000] \"HEAD / HTTP/1.0\" 200 1024 \"-\" \"-\"\n"},
        {"HEAD / HTTP/1.0\r\n\r\n", "::1", LOG_JSON,
         "{\"time\":\"1994-11-06T08:49:37.123Z\",\"remote_addr\":\"::1\",\"host\":null,"
         "\"method\":\"HEAD\","
         "\"target\":\"/\",\"protocol\":\"HTTP/1.0\",\"status\":200,\"body_bytes_sent\":1024,"
         "\"referer\":null,\"user_agent\":null,\"request_time_us\":42,"
         "\"connection_reused\":true}\n"},
        /* issue 39: Apache's vhost_combined, the Host lower case without its port, the port
         * the Host names or else the scheme's; "-" without a Host */
        {"GET /a HTTP/1.1\r\nHost: WWW.Example.org:8080\r\nUser-Agent: ua/1\r\n\r\n", "192.0.2.1",
         LOG_VCOMBINED,
         "www.example.org:8080 192.0.2.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /a HTTP/1.1\" "
         "200 1024 \"-\" \"ua/1\"\n"},
        {"GET /a HTTP/1.1\r\nHost: [::1]\r\n\r\n", "::1", LOG_VCOMBINED,
         "[::1]:80 ::1 - - [06/Nov/1994:08:49:37 +0000] \"GET /a HTTP/1.1\" 200 1024 \"-\" "
         "\"-\"\n"},
        {"HEAD / HTTP/1.0\r\n\r\n", "::1", LOG_VCOMBINED,
         "-:80 ::1 - - [06/Nov/1994:08:49:37 +0000] \"HEAD / HTTP/1.0\" 200 1024 \"-\" \"-\"\n"},
        {"GET / HTTP/1.1\r\nHost: A.test:443\r\n\r\n", "::1", LOG_JSON,
         "{\"time\":\"1994-11-06T08:49:37.123Z\",\"remote_addr\":\"::1\",\"host\":\"a.test\","
         "\"method\":\"GET\",\"target\":\"/\",\"protocol\":\"HTTP/1.1\",\"status\":200,"
         "\"body_bytes_sent\":1024,\"referer\":null,\"user_agent\":null,\"request_time_us\":42,"
         "\"connection_reused\":true}\n"},
        {"GET /q\"\\ HTTP/1.1\r\nHost: x\r\nUser-Agent: a\"b\\c\x80\xff\tz\r\n\r\n", "1.2.3.4",
         LOG_COMBINED,
         "1.2.3.4 - - [06/Nov/1994:08:49:37 +0000] \"GET /q\\x22\\x5C HTTP/1.1\" 200 "
         "1024 \"-\" \"a\\x22b\\x5Cc\\x80\\xFF\\x09z\"\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct logged l;
        size_t n = line_of(capture(&l, cases[i].head, cases[i].addr), cases[i].fmt, &END_200);
        CHECK_MEM(l.line, n, cases[i].want);
    }
}

TEST(logfmt_json_keeps_utf8_and_escapes_the_rest)
{
    struct logged l;
    /* A request line that did not parse: valid UTF-8 (é, €), an invalid byte, controls. */
    static const char raw[] = "\r\nGE\x01T /\xc3\xa9\xe2\x82\xac\xff\"\\\x7f x\r\nHost: y\r\n";
    capture_raw(&l, raw, sizeof(raw) - 1);
    struct log_end end = END_200;
    end.status = 400;
    size_t n = line_of(&l, LOG_JSON, &end);
    CHECK(line_has(&l, n,
                   "\"request\":\"GE\\u0001T /\xc3\xa9\xe2\x82\xac\\u00FF\\\"\\\\\\u007F x\""));
    CHECK(line_has(&l, n, "\"method\":null"));
    n = line_of(&l, LOG_COMBINED, &end);
    CHECK(line_has(&l, n, "\"GE\\x01T /\\xC3\\xA9\\xE2\\x82\\xAC\\xFF\\x22\\x5C\\x7F x\" 400"));
}

TEST(logfmt_utf8_validation)
{
    struct logged l;
    /* overlong, surrogate, past U+10FFFF, truncated: each byte escaped */
    static const char raw[] = "\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80\xe2\x82";
    capture_raw(&l, raw, sizeof(raw) - 1);
    size_t n = line_of(&l, LOG_JSON, &END_200);
    CHECK(line_has(&l, n,
                   "\\u00C0\\u00AF\\u00ED\\u00A0\\u0080\\u00F4\\u0090\\u0080\\u0080\\u00E2"
                   "\\u0082\""));
}

TEST(logfmt_line_bounded_whatever_the_input)
{
    static char head[16000];
    struct http_request req;
    struct log_capture cap;
    char line[LOGFMT_LINE_MAX];
    struct logfmt_clock clk = {0};
    size_t len = 0;
    len += (size_t)sprintf(head, "GET /");
    memset(head + len, '"', 8000); /* quotes escape to 4 (clf) or 2 (json) */
    len += 8000;
    len += (size_t)sprintf(head + len, " HTTP/1.1\r\nHost: ");
    memset(head + len, 0xff, 1000); /* issue 39's host field: cut at its own budget too */
    len += 1000;
    len += (size_t)sprintf(head + len, "\r\nUser-Agent: ");
    memset(head + len, 0xff, 3000); /* each byte 4 (clf) or 6 (json) */
    len += 3000;
    len += (size_t)sprintf(head + len, "\r\nReferer: ");
    memset(head + len, 0x80, 3000);
    len += 3000;
    len += (size_t)sprintf(head + len, "\r\n\r\n");
    CHECK(http1_parse(head, len, &req) > 0);
    logfmt_capture(&cap, "2001:db8:ffff:ffff:ffff:ffff:255.255.255.255", 44, &req, false);
    CHECK(cap.host_len == LOGFMT_HOST_MAX);
    for (int fmt = LOG_COMBINED; fmt <= LOG_VCOMBINED; fmt++) {
        size_t n = logfmt_line((enum log_format)fmt, &cap, &END_200, &clk, line);
        CHECK(n <= LOGFMT_LINE_MAX);
        CHECK(line[n - 1] == '\n');
        CHECK(memchr(line, '\n', n - 1) == NULL);
        if (fmt != LOG_COMMON) /* cut fields, whole line: its last field is closed */
            CHECK(line[n - 2] == (fmt == LOG_JSON ? '}' : '"'));
    }
}

TEST(logfmt_cidr)
{
    struct cidr c;
    uint8_t a[16];
    CHECK_INT(cidr_parse("10.0.0.0/8", &c), 0);
    CHECK(inet_pton(AF_INET, "10.200.3.4", a) == 1 && cidr_match(&c, AF_INET, a));
    CHECK(inet_pton(AF_INET, "11.0.0.1", a) == 1 && !cidr_match(&c, AF_INET, a));
    CHECK(inet_pton(AF_INET6, "::ffff:10.1.1.1", a) == 1 && cidr_match(&c, AF_INET6, a));
    CHECK_INT(cidr_parse("192.168.1.7", &c), 0);
    CHECK_INT(c.bits, 32);
    CHECK_INT(cidr_parse("2001:db8::/33", &c), 0);
    CHECK(inet_pton(AF_INET6, "2001:db8:7fff::1", a) == 1 && cidr_match(&c, AF_INET6, a));
    CHECK(inet_pton(AF_INET6, "2001:db8:8000::1", a) == 1 && !cidr_match(&c, AF_INET6, a));
    CHECK_INT(cidr_parse("0.0.0.0/0", &c), 0);
    CHECK(inet_pton(AF_INET, "1.2.3.4", a) == 1 && cidr_match(&c, AF_INET, a));
    CHECK(cidr_parse("10.0.0.0/33", &c) != 0);
    CHECK(cidr_parse("10.0.0.0/", &c) != 0);
    CHECK(cidr_parse("nonsense", &c) != 0);
    CHECK(cidr_parse("/8", &c) != 0);
}

static const char *real_ip(const char *head, const char *const *trusted, int n, char *out)
{
    struct cidr list[8];
    struct http_request req;
    uint8_t peer[16];
    for (int i = 0; i < n; i++)
        CHECK_INT(cidr_parse(trusted[i], &list[i]), 0);
    parse_head(head, &req);
    inet_pton(AF_INET, "127.0.0.1", peer);
    logfmt_real_ip(list, n, AF_INET, peer, "127.0.0.1", &req, out);
    return out;
}

TEST(logfmt_real_ip_recursive)
{
    char out[LOGFMT_ADDR_MAX];
    const char *lo[] = {"127.0.0.1"};
    const char *lo_ten[] = {"127.0.0.1", "10.0.0.0/8"};
    const char *h1 = "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.1, 10.0.0.2\r\n\r\n";
    CHECK(strcmp(real_ip(h1, lo, 0, out), "127.0.0.1") == 0);
    CHECK(strcmp(real_ip(h1, lo, 1, out), "10.0.0.2") == 0);
    CHECK(strcmp(real_ip(h1, lo_ten, 2, out), "203.0.113.1") == 0);
    /* Two fields are one list, the later field's addresses the nearer hops. */
    const char *h2 = "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.9\r\n"
                     "x-forwarded-for: 10.9.9.9 ,, 10.0.0.1\r\n\r\n";
    CHECK(strcmp(real_ip(h2, lo_ten, 2, out), "198.51.100.9") == 0);
    const char *h3 = "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 10.0.0.5, 10.0.0.6\r\n\r\n";
    CHECK(strcmp(real_ip(h3, lo_ten, 2, out), "10.0.0.5") == 0); /* all trusted: leftmost */
    const char *h4 =
        "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 1.1.1.1, junk, 10.0.0.6\r\n\r\n";
    CHECK(strcmp(real_ip(h4, lo_ten, 2, out), "10.0.0.6") == 0); /* garbage ends the walk */
    const char *h5 = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(strcmp(real_ip(h5, lo_ten, 2, out), "127.0.0.1") == 0);
}

TEST(logfmt_clock_follows_the_second)
{
    struct logged l;
    capture(&l, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "1.2.3.4");
    struct log_end end = END_200;
    CHECK(line_has(&l, line_of(&l, LOG_COMBINED, &end), "[06/Nov/1994:08:49:37 +0000]"));
    end.wall_ms += 999 - 123; /* same second */
    CHECK(line_has(&l, line_of(&l, LOG_JSON, &end), "\"1994-11-06T08:49:37.999Z\""));
    end.wall_ms += 1; /* the next one */
    CHECK(line_has(&l, line_of(&l, LOG_COMBINED, &end), "[06/Nov/1994:08:49:38 +0000]"));
    CHECK(line_has(&l, line_of(&l, LOG_JSON, &end), "\"1994-11-06T08:49:38.000Z\""));
}
