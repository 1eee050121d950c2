/* static: decides the response to a request for a file, or an error or redirect, and writes its
 * header block: request + file metadata + `now` in, a plan out.
 * Must not: make system calls, read the clock, or allocate: the caller passes the date string,
 * the file's metadata and open fd, and the buffer headers and small bodies are written into.
 * Ownership: the plan points into ctx->buf and into the file's data; the caller keeps both
 * alive until the plan is sent. */
#ifndef CORE_STATIC_H
#define CORE_STATIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"
#include "core/plan.h"
#include "core/policy.h"

#define SERVER_NAME "ringhttpd"

/* What the caller found on disk for the representation being served. */
struct static_file {
    uint64_t size;
    int64_t mtime; /* UNIX seconds */
    const char *etag;
    size_t etag_len;
    const char *last_modified; /* IMF-fixdate of mtime */
    const char *content_type;
    const char *encoding;     /* Content-Encoding of a precompressed sibling, or NULL */
    const char *vary;         /* Vary value ("Accept-Encoding" when siblings exist), or NULL */
    const char *more_headers; /* whole "Name: value\r\n" lines describing it, or NULL */
    const char *data;         /* the whole body in memory, or NULL to send from fd */
    int fd;
    /* static_rep_headers() of this file, built once by its owner, or NULL: saves formatting the
     * same four header lines for every request of a cached file */
    const char *rep_headers;
    size_t rep_len;
};

/* Per-response facts and the output buffer. */
struct static_ctx {
    enum resp_syntax syntax; /* HTTP/1 header block, or field lines only (core/policy.h) */
    const char *date;        /* IMF-fixdate of now */
    /* static_ok_head() for this date, or NULL (RESP_H1 only; NULL too for a response whose
     * extra_headers are its own, issue 28's CORS and Link lines: the general writer then, and
     * an owner keeps no 200 made from them) */
    const char *ok_head;
    size_t ok_head_len;
    const char *extra_headers; /* "Name: value\r\n" lines for successful responses */
    size_t extra_len;
    const char *all_headers; /* lines for every response (HSTS over TLS), or NULL */
    size_t all_len;
    bool keep_alive;    /* the connection stays open after this response; cleared for a status
                         * that closes (policy_status_closes), and the plan's close says so */
    bool head;          /* HEAD: headers as for GET, no body */
    bool send_continue; /* prefix "HTTP/1.1 100 Continue" (the client waits for it) */
    bool extra_always;  /* extra_headers go on error responses too (issue 39's status: any) */
    /* RESP_H1: the last interim_len bytes of extra_headers also go in a "103 Early Hints"
     * before the response (after any 100 Continue); RESP_FIELDS ignores it (HTTP/2 sends its
     * own HEADERS frame) */
    size_t interim_len;
    int minor; /* the request's HTTP minor version, for the Connection header */
    char *buf; /* header text (and small generated bodies) are written here */
    size_t cap;
    size_t used;
};

/*
 * The response to GET or HEAD of a file: 200, or 206 for ranges (multipart for several),
 * 304 or 412 from conditional fields, 416 for unsatisfiable ranges, with validators,
 * Content-Type, Accept-Ranges, Vary and the extra headers. Returns the status, or 0 when
 * ctx->buf is too small.
 */
int static_file_plan(const struct http_request *req, const struct static_file *f,
                     struct static_ctx *ctx, struct plan *p);

/*
 * The 200 to a plain request for a file, in two steps so that the first can be kept: most
 * requests for a file are answered with the same header lines, so their owner formats them once
 * per file version and site settings instead of once per request.
 *
 * static_ok_applies: req is answered by static_file_plan with a 200 whose header lines are
 * static_ok_fields' (HTTP/1 syntax, no 100 Continue, no conditional field, no Range).
 * static_ok_fields: writes into out[0..cap) the lines static_file_plan puts between the Date
 * (and ctx->all_headers) and the Connection line of such a 200 for f, then the blank line (what
 * follows them when there is no Connection line): they depend on f and on ctx->extra_headers
 * only. Returns their length; when that is >= cap, out must not be used.
 * static_ok_plan: the plan static_file_plan builds for such a request, given those lines and
 * f's body (data, or else fd) and size: the same bytes and segments. Returns 200, or 0 when
 * ctx->buf is too small.
 */
static inline bool static_ok_applies(const struct http_request *req, const struct static_ctx *ctx)
{
    return ctx->syntax == RESP_H1 && !ctx->send_continue && !req->if_match.p &&
           !req->if_none_match.p && !req->if_modified_since.p && !req->if_unmodified_since.p &&
           !req->range.p;
}
size_t static_ok_fields(char *out, size_t cap, const struct static_file *f,
                        const struct static_ctx *ctx);
int static_ok_plan(const char *fields, size_t len, const char *data, int fd, uint64_t size,
                   struct static_ctx *ctx, struct plan *p);
/* The plan of such a 200 whose bytes static_ok_plan already wrote, as one segment, at
 * mem[0..len) (head_len of them the header block), for a request with the same date, HSTS
 * lines, keep-alive and version: the whole of it, or the header block for HEAD. */
static inline void static_ok_prebuilt(const char *mem, size_t head_len, size_t len,
                                      const struct static_ctx *ctx, struct plan *p)
{
    p->status = 200;
    p->close = !ctx->keep_alive;
    p->fin_carries_tail = false;
    p->tls_record = 0;
    p->head_len = head_len;
    p->bytes = ctx->head ? head_len : len;
    p->nseg = 1;
    p->cur = 0;
    p->segs[0] = (struct seg){.mem = mem, .fd = -1, .off = 0, .len = p->bytes};
}

/*
 * An error or other body-less-by-default response: status line, Date, Server, Connection,
 * the `extra` header lines given (e.g. "Allow: GET, HEAD\r\n"; may be NULL), and a short HTML
 * body naming the status (none for 204, 304 and HEAD). Returns the status, or 0 when ctx->buf
 * is too small.
 */
int static_status_plan(int status, const char *extra, struct static_ctx *ctx, struct plan *p);

/* status (301, or 308 for --redirect-https) to `location`: a path already percent-encoded as it
 * arrived, plus '/' and the query; or an https: URL from core/redirect. */
int static_redirect_plan(int status, const char *location, size_t len, struct static_ctx *ctx,
                         struct plan *p);

/*
 * A response with `status` whose body is given (a generated listing, or an error page file):
 * `f` supplies type, length and the body (data or fd); validators are not sent for errors.
 * Returns the status, or 0 when ctx->buf is too small.
 */
int static_body_plan(int status, const struct static_file *f, struct static_ctx *ctx,
                     struct plan *p);

/* Writes the status line, Server and Date of a 200 response dated `date` into out[0..cap), for
 * static_ctx.ok_head: a worker formats it once per second instead of once per response. Returns
 * its length; when that is >= cap, out must not be used. */
size_t static_ok_head(char *out, size_t cap, const char *date);

/* Writes the header lines that describe f itself (Last-Modified, ETag, Accept-Ranges,
 * Content-Type) into out[0..cap), for static_file.rep_headers. Returns their length; when that is
 * >= cap, out holds a truncated prefix and must not be used. */
size_t static_rep_headers(char *out, size_t cap, const struct static_file *f);

/* The reason phrase of a status code ("Not Found"), or "Unknown". */
const char *static_reason(int status);

#endif
