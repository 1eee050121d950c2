/* range: parses a Range header (RFC 9110 14.2) and frames multipart/byteranges bodies.
 * Must not: perform I/O, allocate, or write at or past out[cap] in any formatter.
 * Ownership: struct range_set and every output buffer are the caller's; nothing is kept. */
#ifndef CORE_RANGE_H
#define CORE_RANGE_H

#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"

/* More range-specs than this (satisfiable or not) and the header is ignored: a full 200 costs
 * the server less than hundreds of tiny parts (the nginx/Apache defence against range abuse). */
#define RANGE_MAX 16

/* What to answer; the values are the HTTP status codes. */
enum range_result {
    RANGE_FULL = 200,          /* ignore the header: send the whole representation */
    RANGE_PARTIAL = 206,       /* send set->span[0..count) */
    RANGE_UNSATISFIABLE = 416, /* send 416 with Content-Range "bytes *" "/size" */
};

/* An inclusive byte range, first <= last < size of the representation. */
struct range_span {
    uint64_t first;
    uint64_t last;
};

struct range_set {
    size_t count; /* 1: a single-part 206; 2..RANGE_MAX: multipart/byteranges */
    struct range_span span[RANGE_MAX];
};

/*
 * Evaluates the Range field value hdr for a representation of size bytes. The caller decides
 * whether Range applies at all (GET only, If-Range true: see cond_if_range) and passes the
 * value with surrounding whitespace removed; {NULL, 0} means no Range field.
 *
 * Grammar: "bytes" (any case) "=" then a comma-separated list of "first-last", "first-" and
 * "-suffix" specs, optional whitespace around the commas and empty list elements allowed.
 * Numbers too large for 64 bits saturate (they are still syntactically valid).
 *
 * Returns
 *   RANGE_FULL           no header, another unit, a syntax error (including last < first), or
 *                        more than RANGE_MAX specs;
 *   RANGE_UNSATISFIABLE  every spec is unsatisfiable: first >= size, or a suffix of 0, or any
 *                        spec when size is 0;
 *   RANGE_PARTIAL        set holds the satisfiable specs, last clamped to size - 1, a suffix
 *                        longer than the file meaning the whole file, sorted by first and with
 *                        overlapping or adjacent spans merged. count == 1 means a single-part
 *                        response even when the client asked for several ranges.
 * set is written only for RANGE_PARTIAL.
 */
enum range_result range_parse(struct http_str hdr, uint64_t size, struct range_set *set);

/*
 * The formatters below write into out[0..cap) and return the length of the complete output
 * (without a NUL). When that length is < cap the output is complete and NUL-terminated;
 * otherwise out holds a truncated prefix (never anything at or past out[cap]) and the caller
 * retries with a buffer of at least length + 1 bytes.
 */

/* The Content-Range field value "bytes FIRST-LAST/SIZE" for span, or "bytes *" "/SIZE" (for a
 * 416) when span is NULL. */
size_t range_content_range(char *out, size_t cap, const struct range_span *span, uint64_t size);

/* The part header that precedes each part of a multipart/byteranges body:
 * "\r\n--BOUNDARY\r\nContent-Type: TYPE\r\nContent-Range: bytes FIRST-LAST/SIZE\r\n\r\n".
 * boundary (1-70 characters, RFC 2046) is the caller's, as is type (the representation's
 * Content-Type, e.g. from mime_lookup). The first part starts with CRLF too: that is an empty
 * preamble, which multipart allows. */
size_t range_part_header(char *out, size_t cap, const char *boundary, const char *type,
                         const struct range_span *span, uint64_t size);

/* The close delimiter that ends the body: "\r\n--BOUNDARY--\r\n". */
size_t range_multipart_end(char *out, size_t cap, const char *boundary);

/* The exact length of the multipart/byteranges body for set (every part header, every span's
 * bytes and the close delimiter), to send as Content-Length before the body. The response's
 * Content-Type is "multipart/byteranges; boundary=BOUNDARY". */
uint64_t range_multipart_length(const struct range_set *set, uint64_t size, const char *boundary,
                                const char *type);

#endif
