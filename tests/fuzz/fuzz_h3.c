/* fuzz_h3: libFuzzer target for an HTTP/3 request's way into the core: the bytes a client
 * sends on its QPACK encoder stream and on request stream 0 go through nghttp3 (a server
 * connection, with the settings h3.c gives it: a 4 KiB QPACK table, 16 blocked streams,
 * HTTP1_MAX_HEAD of field section) into src/h3/h3req's field collection and its split into a
 * struct http_request, which must hold only what the section held.
 * Input: 2 bytes (big-endian) n, then n bytes for the encoder stream (after its type byte),
 * then the request stream's bytes (its end the stream's FIN).
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; the nghttp3 connection is made and freed per input. */
#include "h3/h3req.h"

#include <nghttp3/nghttp3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_h3: %s:%d: %s\n", __FILE__, __LINE__, #cond);                    \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

struct run {
    bool begun, ended;
    struct http_request req;
    struct h3req q;
};

static bool inside(const struct h3req *q, struct http_str s)
{
    return s.len == 0 || (s.p >= q->head && s.p + s.len <= q->head + q->head_len);
}

/* What a parsed request may hold: strings from the section (or h3req's own "*" and "host"). */
static void check(const struct h3req *q, const struct http_request *req, int status)
{
    REQUIRE(status == 0 || (status >= 400 && status <= 431));
    REQUIRE(q->head_len <= sizeof(q->head) && q->nf <= H3REQ_FIELDS);
    if (status)
        return;
    REQUIRE(q->method >= 0 && inside(q, req->method_name));
    REQUIRE(req->target.len > 0 && (inside(q, req->target) || q->path < 0));
    REQUIRE(req->num_headers <= q->nf);
    for (size_t i = 0; i < req->num_headers; i++) /* :authority's name is "host" */
        REQUIRE((inside(q, req->headers[i].name) || http_str_ieq(req->headers[i].name, "host")) &&
                inside(q, req->headers[i].value));
    REQUIRE(!req->has_host || inside(q, req->host));
    if (q->authority >= 0) {
        const struct h3req_field *a = &q->f[q->authority];
        REQUIRE(req->has_host && req->host.len == a->value_len &&
                memcmp(req->host.p, q->head + a->value, a->value_len) == 0);
    }
}

static int on_begin(nghttp3_conn *conn, int64_t sid, void *user, void *sud)
{
    struct run *r = user;
    (void)conn, (void)sid, (void)sud;
    REQUIRE(!r->begun);
    r->begun = true;
    h3req_init(&r->q);
    return 0;
}

static int on_header(nghttp3_conn *conn, int64_t sid, int32_t token, nghttp3_rcbuf *name,
                     nghttp3_rcbuf *value, uint8_t flags, void *user, void *sud)
{
    struct run *r = user;
    (void)conn, (void)sid, (void)token, (void)flags, (void)sud;
    nghttp3_vec n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
    h3req_field(&r->q, n.base, n.len, v.base, v.len);
    return 0;
}

static int on_end(nghttp3_conn *conn, int64_t sid, void *user, void *sud)
{
    struct run *r = user;
    (void)conn, (void)sid, (void)sud;
    if (!r->begun)
        return 0; /* a stream of no HEADERS: the server answers nothing */
    r->ended = true;
    check(&r->q, &r->req, h3req_parse(&r->q, &r->req));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t enc = (size_t)data[0] << 8 | data[1];
    data += 2, size -= 2;
    if (enc > size)
        enc = size;
    static struct run r;
    memset(&r, 0, offsetof(struct run, req));
    nghttp3_callbacks cb = {
        .begin_headers = on_begin, .recv_header = on_header, .end_stream = on_end};
    nghttp3_settings s;
    nghttp3_settings_default(&s);
    s.max_field_section_size = HTTP1_MAX_HEAD;
    s.qpack_max_dtable_capacity = 4096;
    s.qpack_blocked_streams = 16;
    nghttp3_conn *conn;
    REQUIRE(nghttp3_conn_server_new(&conn, &cb, &s, NULL, &r) == 0);
    nghttp3_conn_set_max_client_streams_bidi(conn, 100);
    /* The server's own streams (3, 7, 11), as h3.c binds them, so nghttp3 takes the client's. */
    REQUIRE(nghttp3_conn_bind_control_stream(conn, 3) == 0);
    REQUIRE(nghttp3_conn_bind_qpack_streams(conn, 7, 11) == 0);
    static const uint8_t encoder_type = 0x02;
    bool ok = nghttp3_conn_read_stream(conn, 2, &encoder_type, 1, 0) >= 0 &&
              (enc == 0 || nghttp3_conn_read_stream(conn, 2, data, enc, 0) >= 0);
    if (ok)
        (void)nghttp3_conn_read_stream(conn, 0, data + enc, size - enc, 1);
    nghttp3_conn_del(conn);
    return 0;
}
