/* test_policy: the core's request result (core/policy.h) and the structured response both
 * protocols serialise (core/static.h in RESP_H1 and RESP_FIELDS syntax, plan_field_next), and
 * the 200 to a plain request built from kept header lines (static_ok_fields + static_ok_plan),
 * which must be the plan static_file_plan builds, byte for byte and segment for segment.
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

/* Issue 25: over TLS the protocol was settled by the handshake: 400, never closed unanswered. */
TEST(policy_close_unanswered_only_on_cleartext_h2c)
{
    static const char k[] = "k\r\n";
    struct http_request req;
    const char *buf = unit_guard(k, sizeof(k) - 1);
    CHECK_INT(http1_parse(buf, sizeof(k) - 1, &req), HTTP1_ERROR);
    CHECK(policy_close_unanswered(buf, sizeof(k) - 1, true, false));
    CHECK(!policy_close_unanswered(buf, sizeof(k) - 1, true, true));
    CHECK(!policy_close_unanswered(buf, sizeof(k) - 1, false, false));
    static const char get[] = "GET / HTTX/1.1\r\n\r\n";
    CHECK(!policy_close_unanswered(get, sizeof(get) - 1, true, false));
}

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

/* ---- static_ok_*: kept header lines ---- */

#define DATE "Mon, 23 Nov 2026 15:00:00 GMT"

static char body_1k[1024];

/* Two plans are the same when every field is, and every segment is: memory inside their own
 * buffers at the same offset with the same bytes, or the same memory or file range elsewhere. */
static void check_same(const struct plan *a, const char *abuf, const struct plan *b,
                       const char *bbuf, size_t cap)
{
    CHECK_INT(a->status, b->status);
    CHECK(a->close == b->close && a->fin_carries_tail == b->fin_carries_tail);
    CHECK_INT(a->bytes, b->bytes);
    CHECK_INT(a->head_len, b->head_len);
    CHECK_INT(a->nseg, b->nseg);
    CHECK_INT(a->cur, b->cur);
    for (unsigned i = 0; i < a->nseg && i < b->nseg; i++) {
        const struct seg *x = &a->segs[i], *y = &b->segs[i];
        CHECK_INT(x->fd, y->fd);
        CHECK_INT(x->off, y->off);
        CHECK_INT(x->len, y->len);
        bool x_in = x->mem >= abuf && x->mem < abuf + cap;
        bool y_in = y->mem >= bbuf && y->mem < bbuf + cap;
        CHECK(x_in == y_in);
        if (x_in && y_in) {
            CHECK_INT(x->mem - abuf, y->mem - bbuf);
            CHECK(memcmp(x->mem, y->mem, x->len) == 0);
        } else {
            CHECK(x->mem == y->mem);
        }
    }
}

TEST(static_ok_plan_is_static_file_plan)
{
    static char abuf[4608], bbuf[4608];
    char ok_head[96], lines[1024];
    size_t ok_len = static_ok_head(ok_head, sizeof(ok_head), DATE);
    memset(body_1k, 'x', sizeof(body_1k));
    const char *get = "GET /f HTTP/1.1\r\nHost: a\r\n\r\n";
    const char *get10 = "GET /f HTTP/1.0\r\n\r\n";
    struct http_request req11, req10;
    CHECK(http1_parse(unit_guard_str(get), strlen(get), &req11) > 0);
    CHECK(http1_parse(unit_guard_str(get10), strlen(get10), &req10) > 0);

    const struct static_file base = hello;
    char rep[224];
    size_t rep_len = static_rep_headers(rep, sizeof(rep), &base);
    size_t caps[] = {sizeof(abuf), 600, 300, 40};
    unsigned cases = 0;

    for (unsigned bits = 0; bits < 256; bits++) {
        struct static_file f = base;
        switch (bits & 3) {
        case 1: /* a body in memory that may not fit behind the headers */
            f.data = body_1k;
            f.size = sizeof(body_1k);
            break;
        case 2: /* sent from the file */
            f.data = NULL;
            f.fd = 7;
            f.size = 100000;
            break;
        case 3: /* empty */
            f.data = "";
            f.size = 0;
            break;
        }
        if (bits & 4) {
            f.rep_headers = rep;
            f.rep_len = rep_len;
        }
        if (bits & 8) {
            f.vary = "Accept-Encoding";
            f.more_headers = "Use-As-Dictionary: match=\"/app*.js\"\r\n";
        }
        bool keep = bits & 16, head = bits & 32, secure = bits & 64, v10 = bits & 128;
        for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
            for (int with_ok = 0; with_ok < 2; with_ok++) {
                struct static_ctx ctx = {
                    .syntax = RESP_H1,
                    .date = DATE,
                    .ok_head = with_ok ? ok_head : NULL,
                    .ok_head_len = ok_len,
                    .extra_headers = c & 1 ? "Cache-Control: max-age=60\r\nX-A: b\r\n" : "",
                    .all_headers = secure ? "Strict-Transport-Security: max-age=9\r\n" : NULL,
                    .all_len = secure ? 38 : 0,
                    .keep_alive = keep,
                    .head = head,
                    .minor = v10 ? 0 : 1,
                    .cap = caps[c],
                };
                ctx.extra_len = strlen(ctx.extra_headers);
                const struct http_request *req = v10 ? &req10 : &req11;
                CHECK(static_ok_applies(req, &ctx));
                size_t n = static_ok_fields(lines, sizeof(lines), &f, &ctx);
                CHECK(n < sizeof(lines));

                struct static_ctx a = ctx, b = ctx;
                struct plan pa, pb;
                a.buf = abuf;
                b.buf = bbuf;
                memset(abuf, 0, sizeof(abuf));
                memset(bbuf, 1, sizeof(bbuf));
                int ra = static_file_plan(req, &f, &a, &pa);
                int rb = static_ok_plan(lines, n, f.data, f.fd, f.size, &b, &pb);
                CHECK_INT(rb, ra);
                if (ra && rb) {
                    CHECK_INT(b.used, a.used);
                    check_same(&pa, abuf, &pb, bbuf, sizeof(abuf));
                    cases++;
                }
            }
        }
    }
    CHECK(cases > 1000); /* most combinations fit; the 40-byte buffer fits none */
}

TEST(static_ok_applies_only_to_plain_requests)
{
    char buf[64];
    struct static_ctx ctx = {.syntax = RESP_H1, .buf = buf, .cap = sizeof(buf), .minor = 1};
    const char *plain = "GET /f HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip\r\n\r\n";
    const char *not_plain[] = {
        "GET /f HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"e\"\r\n\r\n",
        "GET /f HTTP/1.1\r\nHost: a\r\nIf-Modified-Since: " DATE "\r\n\r\n",
        "GET /f HTTP/1.1\r\nHost: a\r\nIf-Match: \"e\"\r\n\r\n",
        "GET /f HTTP/1.1\r\nHost: a\r\nIf-Unmodified-Since: " DATE "\r\n\r\n",
        "GET /f HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\n\r\n",
        "HEAD /f HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\n\r\n",
    };
    struct http_request req;
    CHECK(http1_parse(unit_guard_str(plain), strlen(plain), &req) > 0);
    CHECK(static_ok_applies(&req, &ctx));
    ctx.send_continue = true;
    CHECK(!static_ok_applies(&req, &ctx));
    ctx.send_continue = false;
    ctx.syntax = RESP_FIELDS; /* HTTP/2 serialises the fields itself */
    CHECK(!static_ok_applies(&req, &ctx));
    ctx.syntax = RESP_H1;
    for (size_t i = 0; i < sizeof(not_plain) / sizeof(not_plain[0]); i++) {
        CHECK(http1_parse(unit_guard_str(not_plain[i]), strlen(not_plain[i]), &req) > 0);
        CHECK(!static_ok_applies(&req, &ctx));
    }
}

/* A whole 200 written once (static_ok_plan into a buffer of its own) and then answered from
 * (static_ok_prebuilt) is the same response as static_file_plan's, for GET and for HEAD. */
TEST(static_ok_prebuilt_is_static_file_plan)
{
    char ok_head[96], lines[512], block[2048], buf[4096], a[4096], b[4096];
    size_t ok_len = static_ok_head(ok_head, sizeof(ok_head), DATE);
    const char *get = "GET /f HTTP/1.1\r\nHost: a\r\n\r\n";
    struct http_request req;
    CHECK(http1_parse(unit_guard_str(get), strlen(get), &req) > 0);
    for (int secure = 0; secure < 2; secure++) {
        struct static_ctx ctx = {
            .syntax = RESP_H1,
            .date = DATE,
            .ok_head = ok_head,
            .ok_head_len = ok_len,
            .extra_headers = "X-A: b\r\n",
            .extra_len = 8,
            .all_headers = secure ? "Strict-Transport-Security: max-age=9\r\n" : NULL,
            .all_len = secure ? 38 : 0,
            .keep_alive = true,
            .minor = 1,
        };
        size_t n = static_ok_fields(lines, sizeof(lines), &hello, &ctx);
        struct static_ctx w = ctx;
        struct plan made, p, want;
        w.buf = block;
        w.cap = sizeof(block);
        CHECK_INT(static_ok_plan(lines, n, hello.data, hello.fd, hello.size, &w, &made), 200);
        CHECK_INT(made.nseg, 1);
        for (int head = 0; head < 2; head++) {
            struct static_ctx c = ctx;
            c.head = head;
            static_ok_prebuilt(block, made.head_len, made.bytes, &c, &p);
            c.buf = buf;
            c.cap = sizeof(buf);
            CHECK_INT(static_file_plan(&req, &hello, &c, &want), 200);
            CHECK(p.status == want.status && p.close == want.close && !p.fin_carries_tail);
            CHECK_INT(p.head_len, want.head_len);
            CHECK_INT(p.bytes, want.bytes);
            size_t la = flatten(&p, a, sizeof(a)), lb = flatten(&want, b, sizeof(b));
            CHECK(la == lb && memcmp(a, b, la) == 0);
        }
    }
}
