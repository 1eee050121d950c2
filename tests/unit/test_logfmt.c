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

TEST(logfmt_combined_line)
{
    struct http_request req;
    struct log_capture cap;
    char line[LOGFMT_LINE_MAX];
    struct logfmt_clock clk = {0};
    parse_head("GET /a?b=1 HTTP/1.1\r\nHost: x\r\nReferer: http://r/\r\nUser-Agent: ua/1\r\n\r\n",
               &req);
    logfmt_capture(&cap, "192.0.2.1", 9, &req);
    size_t n = logfmt_line(LOG_COMBINED, &cap, &END_200, &clk, line);
    CHECK_MEM(line, n,
              "192.0.2.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /a?b=1 HTTP/1.1\" 200 1024 "
              "\"http://r/\" \"ua/1\"\n");
    n = logfmt_line(LOG_COMMON, &cap, &END_200, &clk, line);
    CHECK_MEM(line, n,
              "192.0.2.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /a?b=1 HTTP/1.1\" 200 1024\n");
}

TEST(logfmt_absent_fields_are_dashes_or_null)
{
    struct http_request req;
    struct log_capture cap;
    char line[LOGFMT_LINE_MAX];
    struct logfmt_clock clk = {0};
    parse_head("HEAD / HTTP/1.0\r\n\r\n", &req);
    logfmt_capture(&cap, "::1", 3, &req);
    size_t n = logfmt_line(LOG_COMBINED, &cap, &END_200, &clk, line);
    CHECK_MEM(line, n,
              "::1 - - [06/Nov/1994:08:49:37 +0000] \"HEAD / HTTP/1.0\" 200 1024 \"-\" "
              "\"-\"\n");
    n = logfmt_line(LOG_JSON, &cap, &END_200, &clk, line);
    CHECK_MEM(line, n,
              "{\"time\":\"1994-11-06T08:49:37.123Z\",\"remote_addr\":\"::1\",\"method\":\"HEAD\","
              "\"target\":\"/\",\"protocol\":\"HTTP/1.0\",\"status\":200,\"body_bytes_sent\":1024,"
              "\"referer\":null,\"user_agent\":null,\"request_time_us\":42,"
              "\"connection_reused\":true}\n");
}

TEST(logfmt_escapes_like_nginx)
{
    struct http_request req;
    struct log_capture cap;
    char line[LOGFMT_LINE_MAX];
    struct logfmt_clock clk = {0};
    parse_head("GET /q\"\\ HTTP/1.1\r\nHost: x\r\nUser-Agent: a\"b\\c\x80\xff\tz\r\n\r\n", &req);
    logfmt_capture(&cap, "1.2.3.4", 7, &req);
    size_t n = logfmt_line(LOG_COMBINED, &cap, &END_200, &clk, line);
    CHECK_MEM(line, n,
              "1.2.3.4 - - [06/Nov/1994:08:49:37 +0000] \"GET /q\\x22\\x5C HTTP/1.1\" 200 "
              "1024 \"-\" \"a\\x22b\\x5Cc\\x80\\xFF\\x09z\"\n");
}

TEST(logfmt_json_keeps_utf8_and_escapes_the_rest)
{
    struct log_capture cap;
    char line[LOGFMT_LINE_MAX];
    struct logfmt_clock clk = {0};
    /* A request line that did not parse: valid UTF-8 (é, €), an invalid byte, controls. */
    static const char raw[] = "\r\nGE\x01T /\xc3\xa9\xe2\x82\xac\xff\"\\\x7f x\r\nHost: y\r\n";
    logfmt_capture_raw(&cap, "-", 1, raw, sizeof(raw) - 1);
    struct log_end end = END_200;
    end.status = 400;
    size_t n = logfmt_line(LOG_JSON, &cap, &end, &clk, line);
    const char *want = "\"request\":\"GE\\u0001T /\xc3\xa9\xe2\x82\xac\\u00FF\\\"\\\\\\u007F x\"";
    CHECK(memmem(line, n, want, strlen(want)) != NULL);
    CHECK(memmem(line, n, "\"method\":null", 13) != NULL);
    n = logfmt_line(LOG_COMBINED, &cap, &end, &clk, line);
    want = "\"GE\\x01T /\\xC3\\xA9\\xE2\\x82\\xAC\\xFF\\x22\\x5C\\x7F x\" 400";
    CHECK(memmem(line, n, want, strlen(want)) != NULL);
}

TEST(logfmt_utf8_validation)
{
    struct log_capture cap;
    char line[LOGFMT_LINE_MAX];
    struct logfmt_clock clk = {0};
    /* overlong, surrogate, past U+10FFFF, truncated: each byte escaped */
    static const char raw[] = "\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80\xe2\x82";
    logfmt_capture_raw(&cap, "-", 1, raw, sizeof(raw) - 1);
    size_t n = logfmt_line(LOG_JSON, &cap, &END_200, &clk, line);
    const char *want = "\\u00C0\\u00AF\\u00ED\\u00A0\\u0080\\u00F4\\u0090\\u0080\\u0080\\u00E2"
                       "\\u0082\"";
    CHECK(memmem(line, n, want, strlen(want)) != NULL);
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
    len += (size_t)sprintf(head + len, " HTTP/1.1\r\nHost: x\r\nUser-Agent: ");
    memset(head + len, 0xff, 3000); /* each byte 4 (clf) or 6 (json) */
    len += 3000;
    len += (size_t)sprintf(head + len, "\r\nReferer: ");
    memset(head + len, 0x80, 3000);
    len += 3000;
    len += (size_t)sprintf(head + len, "\r\n\r\n");
    CHECK(http1_parse(head, len, &req) > 0);
    logfmt_capture(&cap, "2001:db8:ffff:ffff:ffff:ffff:255.255.255.255", 44, &req);
    for (int fmt = LOG_COMBINED; fmt <= LOG_JSON; fmt++) {
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
    struct http_request req;
    struct log_capture cap;
    char line[LOGFMT_LINE_MAX];
    struct logfmt_clock clk = {0};
    parse_head("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &req);
    logfmt_capture(&cap, "1.2.3.4", 7, &req);
    struct log_end end = END_200;
    size_t n = logfmt_line(LOG_COMBINED, &cap, &end, &clk, line);
    CHECK(memmem(line, n, "[06/Nov/1994:08:49:37 +0000]", 28) != NULL);
    end.wall_ms += 999 - 123; /* same second */
    n = logfmt_line(LOG_JSON, &cap, &end, &clk, line);
    CHECK(memmem(line, n, "\"1994-11-06T08:49:37.999Z\"", 26) != NULL);
    end.wall_ms += 1; /* the next one */
    n = logfmt_line(LOG_COMBINED, &cap, &end, &clk, line);
    CHECK(memmem(line, n, "[06/Nov/1994:08:49:38 +0000]", 28) != NULL);
    n = logfmt_line(LOG_JSON, &cap, &end, &clk, line);
    CHECK(memmem(line, n, "\"1994-11-06T08:49:38.000Z\"", 26) != NULL);
}
