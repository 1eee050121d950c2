/* Unit tests for src/h3's sans-I/O parts: h3req (a field section into an http_request, :authority
 * as Host, the 431 limits, the rules that make a request malformed). */
#include <errno.h>

#include "http/h3/h3req.h"

#include "core/token.h"

#include "unit.h"

static void field(struct h3req *q, const char *n, const char *v)
{
    h3req_field(q, n, strlen(n), v, strlen(v), 0);
}

/* q emptied, its fields and bytes in static storage of the sizes h3.c gives. */
static void init(struct h3req *q)
{
    static struct h3req_field f[H3REQ_FIELDS];
    static char head[HTTP1_MAX_HEAD];
    h3req_init(q, f, H3REQ_FIELDS, head, sizeof(head));
}

/* A section begun with :method, :scheme and :path (the request's own text is in static
 * storage). */
static struct h3req *begin(const char *method, const char *path)
{
    static struct h3req q;
    init(&q);
    field(&q, ":method", method);
    field(&q, ":scheme", "https");
    field(&q, ":path", path);
    return &q;
}

TEST(h3req_authority_stands_in_for_host)
{
    static struct http_request req;
    struct h3req *q = begin("GET", "/x?y");
    field(q, ":authority", "a.test:443");
    field(q, "host", "other.test");
    field(q, "accept-encoding", "gzip");
    CHECK(h3req_parse(q, &req) == 0);
    CHECK(req.method == HTTP_GET && req.has_host && req.keep_alive);
    CHECK_MEM(req.host.p, req.host.len, "a.test:443");
    CHECK_MEM(req.target.p, req.target.len, "/x?y");
    CHECK_MEM(req.accept_encoding.p, req.accept_encoding.len, "gzip");

    q = begin("", "/"); /* an empty :method: 400, as HTTP/2 */
    CHECK(h3req_parse(q, &req) == 400);
}

/* A request kept until its stream ends is a copy sized to what was decoded (issue 35.3: each
 * stream embedded a 16 KiB buffer), and parses as the original, whatever reuses the buffers. */
TEST(h3req_saved_copy_is_compact_and_parses_alike)
{
    static struct http_request req;
    static _Alignas(max_align_t) char mem[1024];
    struct h3req *q = begin("GET", "/saved");
    field(q, ":authority", "a.test");
    field(q, "x-one", "1");
    size_t need = h3req_save_size(q);
    CHECK(need == sizeof(*q) + 4 * sizeof(q->f[0]) + q->head_len && need < sizeof(mem));
    struct h3req *s = h3req_save(q, mem);
    begin("PUT", "/other-text-over-the-buffers"); /* the worker's buffers, reused */
    CHECK(h3req_parse(s, &req) == 0);
    CHECK(req.method == HTTP_GET);
    CHECK_MEM(req.target.p, req.target.len, "/saved");
    CHECK_MEM(req.host.p, req.host.len, "a.test");
    CHECK(s->head >= mem && s->head + s->head_len <= mem + need);
}

TEST(h3req_too_many_or_too_large_is_431)
{
    static struct http_request req;
    struct h3req *q = begin("GET", "/");
    for (int i = 0; i < HTTP1_MAX_HEADERS; i++)
        field(q, "x-f", "v");
    CHECK(h3req_parse(q, &req) == 431);

    static char big[HTTP1_MAX_HEAD];
    memset(big, 'b', sizeof(big) - 1);
    q = begin("GET", "/");
    field(q, "x-big", big);
    CHECK(q->status == 431 && h3req_parse(q, &req) == 431);
}

/* RFC 9114 4.1.2, 4.2, 4.3: what makes a request malformed (the stream is reset, no answer). */
TEST(h3req_malformed_sections)
{
    static struct http_request req;
    static const struct {
        const char *name, *value;
    } bad[] = {
        {"Accept", "x"},         /* upper case */
        {"x y", "v"},            /* not a token */
        {"x-a", "a\r\nb: c"},    /* CR LF in a value */
        {"x-a", " lead"},        /* whitespace at an end */
        {":method", "GET"},      /* twice */
        {":status", "200"},      /* a response's */
        {":protocol", "x"},      /* extended CONNECT is not on */
        {"connection", "close"}, /* connection-specific */
        {"transfer-encoding", "chunked"},
        {"te", "gzip"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct h3req *q = begin("GET", "/");
        field(q, bad[i].name, bad[i].value);
        CHECK(q->malformed && h3req_parse(q, &req) == -EPROTO);
    }
    /* A name the static table gave is not scanned again, its literal value still is; and a
     * value known valid does not excuse the name. */
    static const char crlf[] = "a\r\nb: c";
    struct h3req *k = begin("GET", "/");
    h3req_field(k, "user-agent", 10, crlf, sizeof(crlf) - 1, TOKEN_NAME_OK);
    CHECK(k->malformed && h3req_parse(k, &req) == -EPROTO);
    k = begin("GET", "/");
    h3req_field(k, "Accept", 6, "*/*", 3, TOKEN_VALUE_OK);
    CHECK(k->malformed);
    k = begin("GET", "/");
    h3req_field(k, "accept", 6, "*/*", 3, TOKEN_NAME_OK | TOKEN_VALUE_OK);
    CHECK(!k->malformed);
    struct h3req *q = begin("GET", "/");
    field(q, ":authority", "a.test");
    field(q, "te", "trailers");
    field(q, "x-a", "v");
    CHECK(h3req_parse(q, &req) == 0);
    field(q, ":authority", "late"); /* a pseudo-field after a regular one */
    CHECK(h3req_parse(q, &req) == -EPROTO);

    static struct h3req r;
    init(&r); /* no :scheme */
    field(&r, ":method", "GET");
    field(&r, ":path", "/");
    CHECK(h3req_parse(&r, &req) == -EPROTO);
    init(&r); /* an empty :path */
    field(&r, ":method", "GET");
    field(&r, ":scheme", "https");
    field(&r, ":path", "");
    CHECK(h3req_parse(&r, &req) == -EPROTO);
    init(&r); /* CONNECT names an authority, no scheme or path */
    field(&r, ":method", "CONNECT");
    field(&r, ":authority", "a.test:443");
    CHECK(h3req_parse(&r, &req) != -EPROTO);
    field(&r, ":path", "/");
    CHECK(h3req_parse(&r, &req) == -EPROTO);
}
