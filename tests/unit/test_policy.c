/* test_policy: the core's request result (core/policy.h) and the structured response both
 * protocols serialise (core/static.h in RESP_H1 and RESP_FIELDS syntax, plan_field_next).
 * Must not: depend on anything but the core.
 * Ownership: each test owns its buffers. */
#include "unit.h"

#include "core/plan.h"
#include "core/policy.h"
#include "core/static.h"

static struct req_policy h1(const char *head, bool conn_keep, size_t more)
{
    struct http_request req;
    int n = http1_parse(unit_guard_str(head), strlen(head), &req);
    CHECK(n > 0);
    return policy_h1(&req, conn_keep, more);
}

TEST(policy_h1_keep_alive_and_close)
{
    struct req_policy p = h1("GET / HTTP/1.1\r\nHost: a\r\n\r\n", true, 0);
    CHECK(p.syntax == RESP_H1 && p.keep_alive && !p.fin_carries_tail && p.discard == 0);
    p = h1("GET / HTTP/1.1\r\nHost: a\r\n\r\n", false, 0); /* draining, or told to close */
    CHECK(!p.keep_alive && !p.fin_carries_tail);
    p = h1("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", true, 0);
    CHECK(!p.keep_alive && p.fin_carries_tail);
    p = h1("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", true, 5); /* bytes follow */
    CHECK(!p.keep_alive && !p.fin_carries_tail);
    p = h1("GET / HTTP/1.0\r\n\r\n", true, 0);
    CHECK(!p.keep_alive && p.fin_carries_tail);
    p = h1("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true, 0);
    CHECK(p.keep_alive);
}

TEST(policy_h1_bodies)
{
    struct req_policy p = h1("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n", true, 0);
    CHECK(p.keep_alive && p.discard == 10 && !p.send_continue);
    p = h1("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n", true, 0);
    CHECK(!p.keep_alive && p.discard == 0); /* past POLICY_DISCARD_MAX: close, read nothing */
    p = h1("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", true, 0);
    CHECK(!p.keep_alive && p.discard == 0 && !p.fin_carries_tail);
    p = h1("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n", true,
           0);
    CHECK(p.send_continue && p.discard == 4);
    p = h1("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n", false,
           0);
    CHECK(!p.send_continue); /* closing anyway: the body is not wanted */
    p = h1("POST / HTTP/1.0\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n", true, 0);
    CHECK(!p.send_continue);
    p = h1("POST / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 3\r\n\r\n", true, 0);
    CHECK(!p.fin_carries_tail); /* a body may still be arriving */
}

TEST(policy_status_closes_only_malformed)
{
    CHECK(policy_status_closes(400) && policy_status_closes(414) && policy_status_closes(431));
    CHECK(!policy_status_closes(404) && !policy_status_closes(405) && !policy_status_closes(500));
    CHECK(policy_fields().syntax == RESP_FIELDS);
}

TEST(policy_h2_preface_detection)
{
    CHECK_INT(policy_h2_preface(POLICY_H2_PREFACE, POLICY_H2_PREFACE_LEN), 1);
    CHECK_INT(policy_h2_preface(POLICY_H2_PREFACE "\0\0\0\4", POLICY_H2_PREFACE_LEN + 4), 1);
    CHECK_INT(policy_h2_preface(unit_guard_str("PRI * HTTP/2"), 12), 0);
    CHECK_INT(policy_h2_preface(unit_guard_str("P"), 1), 0);
    CHECK_INT(policy_h2_preface(unit_guard_str("GET / HTTP/1.1\r\n"), 16), -1);
    CHECK_INT(policy_h2_preface(unit_guard_str("PRI * HTTP/1.1\r\n\r\n"), 18), -1);
}

/* What the cleartext port, shared by HTTP/1 and h2c, closes without HTTP/1's 400. */
static bool not_http1(const char *s, size_t n)
{
    struct http_request req;
    const char *buf = unit_guard(s, n);
    CHECK_INT(http1_parse(buf, n, &req), HTTP1_ERROR);
    return policy_not_http1(buf, n);
}
#define NOT_HTTP1(lit) not_http1((lit), sizeof(lit) - 1)

TEST(policy_not_http1_only_for_other_protocols)
{
    CHECK(NOT_HTTP1("INVALID CONNECTION PREFACE\r\n\r\n")); /* h2spec 3.5/2 */
    CHECK(NOT_HTTP1("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"));
    CHECK(NOT_HTTP1("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\x00"));
    CHECK(NOT_HTTP1("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")); /* a TLS ClientHello */
    /* HTTP/1 garbage keeps its 400 (or 505) */
    CHECK(!NOT_HTTP1("GET /hello.txt HTTX/1.1\r\nHost: x\r\n\r\n"));
    CHECK(!NOT_HTTP1("GET /hello.txt http/1.1\r\nHost: x\r\n\r\n"));
    CHECK(!NOT_HTTP1("FOO /hello.txt http/1.1\r\nHost: x\r\n\r\n"));
    CHECK(!NOT_HTTP1("FOO /hello.txt HTTP/1.x\r\nHost: x\r\n\r\n"));
    CHECK(!NOT_HTTP1("GET\r\nHost: x\r\n\r\n"));
    CHECK(!NOT_HTTP1("G\x01T /hello.txt HTTP/1.1\r\n\r\n"));
    CHECK(!NOT_HTTP1("GET / HTTP/2.0\r\n\r\n"));
    CHECK(!NOT_HTTP1("PRI / HTTP/2.0\r\n\r\n"));
    CHECK(!NOT_HTTP1("PRI * HTTP/1.1 x\r\n\r\n"));
}

static struct static_ctx ctx_for(enum resp_syntax syntax, char *buf, size_t cap, bool keep)
{
    return (struct static_ctx){.syntax = syntax,
                               .date = "Mon, 23 Nov 2026 15:00:00 GMT",
                               .keep_alive = keep,
                               .minor = 1,
                               .buf = buf,
                               .cap = cap};
}

static const struct static_file hello = {
    .size = 5,
    .mtime = 1,
    .etag = "\"e\"",
    .etag_len = 3,
    .last_modified = "Thu, 01 Jan 1970 00:00:01 GMT",
    .content_type = "text/plain",
    .data = "hello",
    .fd = -1,
};

/* Concatenates the memory segments of p from its cursor. */
static size_t flatten(const struct plan *p, char *out, size_t cap)
{
    size_t n = 0;
    for (unsigned i = p->cur; i < p->nseg; i++) {
        CHECK(p->segs[i].mem != NULL && n + p->segs[i].len <= cap);
        memcpy(out + n, p->segs[i].mem + p->segs[i].off, p->segs[i].len);
        n += p->segs[i].len;
    }
    return n;
}

TEST(static_fields_syntax_has_no_http1_framing)
{
    char buf[1024], out[1024];
    struct http_request req;
    const char *get = "GET /h HTTP/1.1\r\nHost: a\r\n\r\n";
    CHECK(http1_parse(unit_guard_str(get), strlen(get), &req) > 0);

    struct static_ctx ctx = ctx_for(RESP_FIELDS, buf, sizeof(buf), false);
    struct plan p;
    CHECK_INT(static_file_plan(&req, &hello, &ctx, &p), 200);
    CHECK_INT(p.status, 200);
    const char *head = p.segs[0].mem;
    CHECK(strncmp(head, "Server: ", 8) == 0); /* no status line */
    CHECK(memmem(head, p.head_len, "Connection", 10) == NULL);
    CHECK(memmem(head, p.head_len, "\r\n\r\n", 4) == NULL);

    /* The fields, in order, then the body alone once the header section is skipped. */
    size_t pos = 0, nl, vl, count = 0;
    const char *name, *value;
    bool saw_length = false, saw_type = false;
    while (plan_field_next(&p, &pos, &name, &nl, &value, &vl)) {
        count++;
        CHECK(nl > 0 && memchr(name, ':', nl) == NULL && memchr(value, '\r', vl) == NULL);
        if (nl == 14 && memcmp(name, "Content-Length", 14) == 0)
            saw_length = vl == 1 && value[0] == '5';
        if (nl == 12 && memcmp(name, "Content-Type", 12) == 0)
            saw_type = vl == 10 && memcmp(value, "text/plain", 10) == 0;
    }
    CHECK(count >= 6 && saw_length && saw_type);
    CHECK_INT(pos, p.head_len);
    plan_advance(&p, p.head_len);
    size_t n = flatten(&p, out, sizeof(out));
    CHECK_MEM(out, n, "hello");

    /* The same answer in HTTP/1: status line, Connection, blank line, then the body. */
    ctx = ctx_for(RESP_H1, buf, sizeof(buf), false);
    CHECK_INT(static_file_plan(&req, &hello, &ctx, &p), 200);
    n = flatten(&p, out, sizeof(out));
    CHECK(n > p.head_len && strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
    CHECK(memmem(out, p.head_len, "Connection: close\r\n\r\n", 21) != NULL);
    CHECK_MEM(out + p.head_len, n - p.head_len, "hello");
}

TEST(static_malformed_request_status_closes)
{
    char buf[1024];
    struct plan p;
    struct static_ctx ctx = ctx_for(RESP_H1, buf, sizeof(buf), true);
    CHECK_INT(static_status_plan(404, NULL, &ctx, &p), 404);
    CHECK(!p.close);
    ctx = ctx_for(RESP_H1, buf, sizeof(buf), true);
    CHECK_INT(static_status_plan(400, NULL, &ctx, &p), 400);
    CHECK(p.close && memmem(p.segs[0].mem, p.head_len, "Connection: close", 17) != NULL);
    ctx = ctx_for(RESP_H1, buf, sizeof(buf), true);
    CHECK_INT(static_body_plan(431, &hello, &ctx, &p), 431); /* an error page file */
    CHECK(p.close);
    /* Fields syntax: an error's fields and body, no framing; the stream, not the connection. */
    ctx = ctx_for(RESP_FIELDS, buf, sizeof(buf), true);
    CHECK_INT(static_status_plan(404, NULL, &ctx, &p), 404);
    CHECK(strncmp(p.segs[0].mem, "Server: ", 8) == 0);
    CHECK(p.bytes > p.head_len); /* the HTML body follows the fields */
}
