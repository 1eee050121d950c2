/* Response decisions and header writing for files, errors and redirects; see static.h.
 * Headers are written with memcpy and a hand-rolled integer formatter rather than snprintf:
 * this runs once per request and snprintf's format parsing showed up in profiles of the seeds. */
#include "core/static.h"

#include <string.h>

#include "core/cond.h"
#include "core/policy.h"
#include "core/range.h"
#include "core/wbuf.h"

const char *static_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 410:
        return "Gone";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 416:
        return "Range Not Satisfiable";
    case 417:
        return "Expectation Failed";
    case 421:
        return "Misdirected Request";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

static struct wbuf writer(struct static_ctx *ctx)
{
    return (struct wbuf){.p = ctx->buf + ctx->used, .cap = ctx->cap - ctx->used};
}

/* Status line and the headers every response carries. In RESP_FIELDS syntax only the fields:
 * the protocol writes the status its own way. */
static void put_head(struct wbuf *h, struct static_ctx *ctx, int status)
{
    if (ctx->syntax == RESP_FIELDS) {
        WBUF_LIT(h, "Server: " SERVER_NAME "\r\nDate: ");
        wbuf_str(h, ctx->date);
        WBUF_LIT(h, "\r\n");
        if (ctx->all_headers)
            wbuf_put(h, ctx->all_headers, ctx->all_len);
        return;
    }
    if (policy_status_closes(status))
        ctx->keep_alive = false;
    if (ctx->send_continue)
        WBUF_LIT(h, "HTTP/1.1 100 Continue\r\n\r\n");
    if (ctx->interim_len) {
        WBUF_LIT(h, "HTTP/1.1 103 Early Hints\r\n");
        wbuf_put(h, ctx->extra_headers + ctx->extra_len - ctx->interim_len, ctx->interim_len);
        WBUF_LIT(h, "\r\n");
    }
    if (status == 200 && ctx->ok_head) {
        wbuf_put(h, ctx->ok_head, ctx->ok_head_len);
    } else {
        WBUF_LIT(h, "HTTP/1.1 ");
        wbuf_u64(h, (uint64_t)status);
        wbuf_put(h, " ", 1);
        wbuf_str(h, static_reason(status));
        WBUF_LIT(h, "\r\nServer: " SERVER_NAME "\r\nDate: ");
        wbuf_str(h, ctx->date);
        WBUF_LIT(h, "\r\n");
    }
    if (ctx->all_headers)
        wbuf_put(h, ctx->all_headers, ctx->all_len);
}

/* HTTP/1 only (RFC 9113 8.2.2 forbids it in HTTP/2). */
static void put_connection(struct wbuf *h, const struct static_ctx *ctx)
{
    if (ctx->syntax == RESP_FIELDS)
        return;
    if (!ctx->keep_alive)
        WBUF_LIT(h, "Connection: close\r\n");
    else if (ctx->minor == 0)
        WBUF_LIT(h, "Connection: keep-alive\r\n");
}

static void put_header(struct wbuf *h, const char *name, const char *value, size_t len)
{
    wbuf_str(h, name);
    wbuf_put(h, value, len);
    WBUF_LIT(h, "\r\n");
}

/* Records what h holds as the plan's first segment: the header block (its first head_len
 * bytes), and any body written behind it. Returns status, or 0 when it did not fit. */
static int record(struct wbuf *h, struct static_ctx *ctx, struct plan *p, int status,
                  size_t head_len)
{
    if (wbuf_full(h))
        return 0;
    plan_init(p);
    p->status = status;
    p->head_len = head_len;
    p->close = !ctx->keep_alive;
    plan_mem(p, h->p, h->len);
    ctx->used += h->len;
    return status;
}

/* Ends the header block (HTTP/1: the blank line) and records it. */
static int finish(struct wbuf *h, struct static_ctx *ctx, struct plan *p, int status)
{
    if (ctx->syntax == RESP_H1)
        WBUF_LIT(h, "\r\n");
    return record(h, ctx, p, status, h->len);
}

static void put_validators(struct wbuf *h, const struct static_file *f)
{
    put_header(h, "Last-Modified: ", f->last_modified, strlen(f->last_modified));
    if (f->etag_len) /* none while a large file's digest is being made (rt/fcache.h) */
        put_header(h, "ETag: ", f->etag, f->etag_len);
}

static void put_vary(struct wbuf *h, const struct static_file *f)
{
    if (f->vary)
        put_header(h, "Vary: ", f->vary, strlen(f->vary));
    if (f->more_headers)
        wbuf_put(h, f->more_headers, strlen(f->more_headers));
}

/* A body from memory that fits in what is left of ctx->buf is copied behind the headers, so the
 * response is one contiguous buffer: the engine sends it with one SEND instead of a SENDMSG of
 * two iovecs, which costs the kernel less than the copy costs us (measured: bench/README.md). */
static void put_body(struct static_ctx *ctx, struct plan *p, const struct static_file *f,
                     uint64_t off, uint64_t len)
{
    struct seg *last = p->nseg ? &p->segs[p->nseg - 1] : NULL;
    if (f->data && last && last->mem + last->len == ctx->buf + ctx->used &&
        len <= ctx->cap - ctx->used) {
        memcpy(ctx->buf + ctx->used, f->data + off, len);
        ctx->used += len;
        last->len += len;
        p->bytes += len;
    } else if (f->data) {
        plan_mem(p, f->data + off, len);
    } else {
        plan_file(p, f->fd, off, len);
    }
}

/* The boundary only has to be absent from the part headers we write (RFC 2046 5.1.1); the file's
 * bytes are framed by Content-Length-like offsets, never searched for it. */
#define BOUNDARY "ringhttpd-byteranges-7d9c2f1a"

static int multipart(const struct static_file *f, const struct range_set *set, struct wbuf *h,
                     struct static_ctx *ctx, struct plan *p)
{
    uint64_t len = range_multipart_length(set, f->size, BOUNDARY, f->content_type);
    WBUF_LIT(h, "Content-Type: multipart/byteranges; boundary=" BOUNDARY "\r\nContent-Length: ");
    wbuf_u64(h, len);
    WBUF_LIT(h, "\r\n");
    put_connection(h, ctx);
    if (!finish(h, ctx, p, 206))
        return 0;
    if (ctx->head)
        return 206;
    for (size_t i = 0; i < set->count; i++) {
        char *part = ctx->buf + ctx->used;
        size_t n = range_part_header(part, ctx->cap - ctx->used, BOUNDARY, f->content_type,
                                     &set->span[i], f->size);
        if (n >= ctx->cap - ctx->used)
            return 0;
        ctx->used += n;
        plan_mem(p, part, n);
        put_body(ctx, p, f, set->span[i].first, set->span[i].last - set->span[i].first + 1);
    }
    char *end = ctx->buf + ctx->used;
    size_t n = range_multipart_end(end, ctx->cap - ctx->used, BOUNDARY);
    if (n >= ctx->cap - ctx->used)
        return 0;
    ctx->used += n;
    plan_mem(p, end, n);
    return 206;
}

/* The representation's fields of a 200 or a single-range 206, after put_head: validators,
 * Accept-Ranges, Vary, Content-Encoding and the extra headers. Returns whether f's prebuilt
 * lines (which include Content-Type) were used; multipart has a Content-Type of its own. */
static bool put_rep(struct wbuf *h, const struct static_ctx *ctx, const struct static_file *f,
                    bool multi)
{
    bool prebuilt = f->rep_headers && !multi;
    if (prebuilt) {
        wbuf_put(h, f->rep_headers, f->rep_len);
    } else {
        put_validators(h, f);
        WBUF_LIT(h, "Accept-Ranges: bytes\r\n");
    }
    put_vary(h, f);
    if (f->encoding)
        put_header(h, "Content-Encoding: ", f->encoding, strlen(f->encoding));
    wbuf_put(h, ctx->extra_headers, ctx->extra_len);
    return prebuilt;
}

/* Content-Type (unless put_rep wrote it) and Content-Length. */
static void put_length(struct wbuf *h, const struct static_file *f, bool prebuilt, uint64_t len)
{
    if (!prebuilt)
        put_header(h, "Content-Type: ", f->content_type, strlen(f->content_type));
    WBUF_LIT(h, "Content-Length: ");
    wbuf_u64(h, len);
    WBUF_LIT(h, "\r\n");
}

int static_file_plan(const struct http_request *req, const struct static_file *f,
                     struct static_ctx *ctx, struct plan *p)
{
    struct wbuf h = writer(ctx);
    struct range_set set;
    enum range_result rr = RANGE_FULL;
    struct http_str etag = {f->etag, f->etag_len};

    enum cond_result cr = cond_evaluate(req, etag, f->mtime);
    if (cr == COND_PRECONDITION)
        return static_status_plan(412, NULL, ctx, p);
    if (cr == COND_NOT_MODIFIED) {
        /* RFC 9110 15.4.5: the fields a 200 would carry that describe the representation. */
        put_head(&h, ctx, 304);
        put_validators(&h, f);
        put_vary(&h, f);
        wbuf_put(&h, ctx->extra_headers, ctx->extra_len);
        put_connection(&h, ctx);
        return finish(&h, ctx, p, 304);
    }
    if (req->range.p && req->method == HTTP_GET && cond_if_range(req->if_range, etag, f->mtime))
        rr = range_parse(req->range, f->size, &set);

    int status = rr == RANGE_UNSATISFIABLE ? 416 : (int)rr;
    put_head(&h, ctx, status);
    if (status == 416) {
        char crange[64];
        size_t n = range_content_range(crange, sizeof(crange), NULL, f->size);
        put_header(&h, "Content-Range: ", crange, n);
        WBUF_LIT(&h, "Content-Length: 0\r\n");
        put_connection(&h, ctx);
        return finish(&h, ctx, p, 416);
    }
    bool multi = rr == RANGE_PARTIAL && set.count > 1;
    bool prebuilt = put_rep(&h, ctx, f, multi);
    if (multi)
        return multipart(f, &set, &h, ctx, p);

    uint64_t off = 0, len = f->size;
    if (rr == RANGE_PARTIAL) {
        char crange[64];
        size_t n = range_content_range(crange, sizeof(crange), &set.span[0], f->size);
        put_header(&h, "Content-Range: ", crange, n);
        off = set.span[0].first;
        len = set.span[0].last - off + 1;
    }
    put_length(&h, f, prebuilt, len);
    put_connection(&h, ctx);
    if (!finish(&h, ctx, p, status))
        return 0;
    if (!ctx->head)
        put_body(ctx, p, f, off, len);
    return status;
}

size_t static_ok_fields(char *out, size_t cap, const struct static_file *f,
                        const struct static_ctx *ctx)
{
    struct wbuf h = {.p = out, .cap = cap};
    bool prebuilt = put_rep(&h, ctx, f, false);
    put_length(&h, f, prebuilt, f->size);
    WBUF_LIT(&h, "\r\n");
    return h.len;
}

/* static_file_plan's 200 with put_rep and put_length replaced by one copy of their output, and
 * the rest written straight into the buffer: the plan and the bytes are the same (the unit
 * test compares them), the per-field bookkeeping is gone. */
int static_ok_plan(const char *fields, size_t len, const char *data, int fd, uint64_t size,
                   struct static_ctx *ctx, struct plan *p)
{
    size_t lines = len - 2; /* without the blank line */
    if (!ctx->ok_head) {    /* the date line did not fit the worker's copy: the general writer */
        struct static_file f = {.size = size, .data = data, .fd = fd};
        struct wbuf h = writer(ctx);
        put_head(&h, ctx, 200);
        wbuf_put(&h, fields, lines);
        put_connection(&h, ctx);
        if (!finish(&h, ctx, p, 200))
            return 0;
        if (!ctx->head)
            put_body(ctx, p, &f, 0, size);
        return 200;
    }
    static const char close_line[] = "Connection: close\r\n\r\n";
    static const char ka_line[] = "Connection: keep-alive\r\n\r\n";
    const char *conn = NULL; /* HTTP/1.1 keep-alive: no Connection line, the blank line */
    size_t conn_len = 0;
    if (!ctx->keep_alive) {
        conn = close_line;
        conn_len = sizeof(close_line) - 1;
    } else if (ctx->minor == 0) {
        conn = ka_line;
        conn_len = sizeof(ka_line) - 1;
    }
    size_t all_len = ctx->all_headers ? ctx->all_len : 0;
    size_t head_len = ctx->ok_head_len + all_len + (conn ? lines + conn_len : len);
    size_t room = ctx->cap - ctx->used;
    if (head_len > room)
        return 0;
    char *start = ctx->buf + ctx->used, *b = start;
    memcpy(b, ctx->ok_head, ctx->ok_head_len);
    b += ctx->ok_head_len;
    if (all_len) {
        memcpy(b, ctx->all_headers, all_len);
        b += all_len;
    }
    if (conn) {
        memcpy(b, fields, lines);
        memcpy(b + lines, conn, conn_len);
    } else {
        memcpy(b, fields, len);
    }
    b = start + head_len;

    size_t n = head_len;
    bool inline_body = !ctx->head && data && size <= room - head_len;
    if (inline_body) {
        memcpy(b, data, size);
        n += size;
    }
    ctx->used += n;
    p->status = 200;
    p->close = !ctx->keep_alive;
    p->fin_carries_tail = false;
    p->tls_record = 0;
    p->head_len = head_len;
    p->bytes = n;
    p->nseg = 1;
    p->cur = 0;
    p->segs[0] = (struct seg){.mem = start, .fd = -1, .off = 0, .len = n};
    if (!ctx->head && !inline_body) {
        if (data)
            plan_mem(p, data, size);
        else
            plan_file(p, fd, 0, size);
    }
    return 200;
}

size_t static_ok_head(char *out, size_t cap, const char *date)
{
    struct wbuf h = {.p = out, .cap = cap};
    struct static_ctx ctx = {.date = date};
    put_head(&h, &ctx, 200);
    return h.len;
}

size_t static_rep_headers(char *out, size_t cap, const struct static_file *f)
{
    struct wbuf h = {.p = out, .cap = cap};
    put_validators(&h, f);
    WBUF_LIT(&h, "Accept-Ranges: bytes\r\n");
    put_header(&h, "Content-Type: ", f->content_type, strlen(f->content_type));
    return h.len;
}

int static_status_plan(int status, const char *extra, struct static_ctx *ctx, struct plan *p)
{
    struct wbuf h = writer(ctx);
    bool body = status != 204 && status != 304 && status >= 200;
    const char *reason = static_reason(status);
    /* "<!DOCTYPE html>...<title>404 Not Found</title>...<h1>404 Not Found</h1>..." */
    static const char pre[] = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>";
    static const char mid[] = "</title></head>\n<body><h1>";
    static const char post[] = "</h1><hr><p>" SERVER_NAME "</p></body></html>\n";
    size_t rlen = strlen(reason);
    size_t body_len = sizeof(pre) - 1 + 2 * (4 + rlen) + sizeof(mid) - 1 + sizeof(post) - 1;

    put_head(&h, ctx, status);
    if (extra)
        wbuf_str(&h, extra);
    if (ctx->extra_always)
        wbuf_put(&h, ctx->extra_headers, ctx->extra_len);
    if (body) {
        WBUF_LIT(&h, "Content-Type: text/html; charset=utf-8\r\nContent-Length: ");
        wbuf_u64(&h, body_len);
        WBUF_LIT(&h, "\r\n");
    } else if (status != 304 && status != 204) {
        WBUF_LIT(&h, "Content-Length: 0\r\n");
    }
    put_connection(&h, ctx);
    if (ctx->syntax == RESP_H1)
        WBUF_LIT(&h, "\r\n");
    size_t head_len = h.len;
    if (body && !ctx->head) {
        wbuf_put(&h, pre, sizeof(pre) - 1);
        for (int i = 0; i < 2; i++) {
            wbuf_u64(&h, (uint64_t)status);
            wbuf_put(&h, " ", 1);
            wbuf_put(&h, reason, rlen);
            if (i == 0)
                wbuf_put(&h, mid, sizeof(mid) - 1);
        }
        wbuf_put(&h, post, sizeof(post) - 1);
    }
    return record(&h, ctx, p, status, head_len);
}

int static_redirect_plan(int status, const char *location, size_t len, struct static_ctx *ctx,
                         struct plan *p)
{
    struct wbuf h = writer(ctx);
    put_head(&h, ctx, status);
    put_header(&h, "Location: ", location, len);
    WBUF_LIT(&h, "Content-Length: 0\r\n");
    put_connection(&h, ctx);
    return finish(&h, ctx, p, status);
}

int static_body_plan(int status, const struct static_file *f, struct static_ctx *ctx,
                     struct plan *p)
{
    struct wbuf h = writer(ctx);
    put_head(&h, ctx, status);
    if (status < 300 || ctx->extra_always)
        wbuf_put(&h, ctx->extra_headers, ctx->extra_len);
    put_vary(&h, f);
    if (f->encoding)
        put_header(&h, "Content-Encoding: ", f->encoding, strlen(f->encoding));
    put_header(&h, "Content-Type: ", f->content_type, strlen(f->content_type));
    WBUF_LIT(&h, "Content-Length: ");
    wbuf_u64(&h, f->size);
    WBUF_LIT(&h, "\r\n");
    put_connection(&h, ctx);
    if (!finish(&h, ctx, p, status))
        return 0;
    if (!ctx->head)
        put_body(ctx, p, f, 0, f->size);
    return status;
}
