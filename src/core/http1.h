/* http1: parses one HTTP/1.x request head (request line and header fields, RFC 9112).
 * Must not: perform I/O, allocate, keep state between calls, or read past buf[len - 1].
 * Ownership: every pointer in struct http_request points into the caller's buffer and is valid
 * only while that buffer is unchanged; the struct itself is the caller's. */
#ifndef CORE_HTTP1_H
#define CORE_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP1_MAX_HEADERS 64  /* more header fields: 431 */
#define HTTP1_MAX_TARGET 8192 /* a longer request-target: 414 */
/* A head not complete within this many bytes: 431 (414 if the request line itself is not). */
#define HTTP1_MAX_HEAD 16384

#define HTTP1_ERROR (-1)   /* req->status holds the response status to send, then close */
#define HTTP1_PARTIAL (-2) /* the head is not complete yet: call again with more bytes */

enum http_method {
    HTTP_GET,
    HTTP_HEAD,
    HTTP_OPTIONS,
    HTTP_POST,
    HTTP_PUT,
    HTTP_DELETE,
    HTTP_PATCH,
    HTTP_CONNECT,
    HTTP_TRACE,
    HTTP_OTHER, /* any other valid token */
};

/* A byte string inside the parsed buffer; {NULL, 0} when absent. */
struct http_str {
    const char *p;
    size_t len;
};

struct http_header {
    struct http_str name;  /* as sent (case preserved) */
    struct http_str value; /* leading and trailing whitespace removed */
};

struct http_request {
    enum http_method method;
    struct http_str method_name;
    struct http_str target; /* the raw request-target */
    int minor;              /* 0 for HTTP/1.0, 1 for HTTP/1.1 (and for HTTP/1.2..1.9) */
    int status;             /* set with HTTP1_ERROR: 400, 414, 431, 501 or 505 */

    size_t num_headers;
    struct http_header headers[HTTP1_MAX_HEADERS];

    /* Fields http1_parse interprets. */
    struct http_str host;
    bool has_host;
    uint64_t content_length;
    bool has_content_length;
    bool has_transfer_encoding;
    bool keep_alive;      /* from the version and every Connection field's tokens */
    bool expect_continue; /* Expect: 100-continue */
    bool expect_other;    /* any other Expect value: answer 417 */

    /* Fields the core reads later; the last occurrence wins, {NULL, 0} when absent. Fields that
     * are comma-separated lists (If-None-Match, If-Match, Accept, Accept-Encoding) keep the first
     * occurrence only; sending them twice is rare enough not to merge. */
    struct http_str if_none_match;
    struct http_str if_match;
    struct http_str if_modified_since;
    struct http_str if_unmodified_since;
    struct http_str range;
    struct http_str if_range;
    struct http_str accept;
    struct http_str accept_encoding;
    struct http_str user_agent;
    struct http_str referer;
};

/*
 * Parses the request head at the start of buf[0..len).
 *
 * Returns the number of bytes the head occupies (through the blank line that ends it; leading
 * empty lines before the request line are skipped and counted), HTTP1_PARTIAL when buf holds a
 * valid but incomplete head, or HTTP1_ERROR with req->status set to:
 *   400  malformed request line or field; whitespace between field name and colon; obs-fold; a
 *        bare CR; control characters in a field value; missing Host in HTTP/1.1, or more than
 *        one Host; invalid Content-Length; two Content-Length fields that differ; Content-Length
 *        together with Transfer-Encoding;
 *   414  request-target longer than HTTP1_MAX_TARGET;
 *   431  more than HTTP1_MAX_HEADERS fields, or no complete head within HTTP1_MAX_HEAD bytes;
 *   501  a Transfer-Encoding other than "chunked" (the only coding this server understands);
 *   505  an HTTP major version other than 1.
 * Lines may end in CRLF or a bare LF. The body, if any, is not part of the head.
 */
int http1_parse(const char *buf, size_t len, struct http_request *req);

/* The state a head needs beyond struct http_request, decided when the last field is seen
 * (http1.c's; in this header for struct http1_split). */
struct http1_fields {
    bool conn_close;
    bool conn_keep_alive;
    bool te_chunked_seen;
    bool te_chunked_last; /* the final transfer coding seen so far is "chunked" */
};

/*
 * The structured entry, for a protocol whose framing delivers a request already split into
 * method, target and fields (HTTP/2): the verdicts and struct http_request that http1_parse
 * gives the HTTP/1.1 head "METHOD SP target SP HTTP/1.1 CRLF" followed by the line
 * "name: value CRLF" for each field in the same order, without that text being written and
 * scanned again. http1_split_start, http1_split_field per field, then http1_split_end; each
 * returns 0, or the status of the first error (also in req->status), after which later calls
 * only return it again. Pointers in req point to the caller's bytes, as with http1_parse.
 * The method and target are checked as the request line would be (400, 414). Names and values
 * are taken as they are: the caller guarantees what RFC 9113 8.2.1 requires of HTTP/2 fields
 * (nghttp2 drops any other before delivering it): a name of tchars, a value of no control byte
 * but HTAB, no DEL, and no leading or trailing SP or HTAB; for these, http1_parse's line rules
 * accept the line and change nothing.
 */
struct http1_split {
    struct http1_fields f;
    int status;
};
int http1_split_start(struct http_request *req, struct http1_split *sp, const char *method,
                      size_t method_len, const char *target, size_t target_len);
int http1_split_field(struct http_request *req, struct http1_split *sp, const char *name,
                      size_t name_len, const char *value, size_t value_len);
int http1_split_end(struct http_request *req, struct http1_split *sp);

/* The method named by the n bytes at m (case-sensitive, RFC 9110 9.1), HTTP_OTHER for any other. */
enum http_method http1_method(const char *m, size_t n);

/* Case-insensitive comparison of a parsed string with a NUL-terminated lower-case literal. */
bool http_str_ieq(struct http_str s, const char *lower);

#endif
