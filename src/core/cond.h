/* cond: builds strong ETags and evaluates conditional requests (RFC 9110 13.1, 13.2.2).
 * Must not: perform I/O, read the clock, allocate, or write at or past out[cap].
 * Ownership: every input points into the caller's buffers and is only read during the call. */
#ifndef CORE_COND_H
#define CORE_COND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"

/* The bytes of a representation's digest an ETag carries: the first 16 of its SHA-256. */
#define COND_DIGEST_LEN 16

/* Enough for any ETag cond_etag builds with an encoding name of up to 8 bytes, NUL included:
 * two quotes, 32 hex digits, a '-', 8 bytes and the NUL are 44. */
#define COND_ETAG_MAX 64

/*
 * Writes the strong ETag of a representation, quoted, as a field value:
 *   "DIGEST"            (identity: the file's own bytes)
 *   "DIGEST-ENCODING"   (a compressed variant made from those bytes: "br", "zstd", "gzip",
 *                        "dcz" and its dictionary)
 * DIGEST is digest[0..COND_DIGEST_LEN) in lower-case hexadecimal: the first 32 digits of the
 * bytes' SHA-256 (`sha256sum` prints them), so the tag depends on nothing but the bytes
 * served (issue 38): two machines serving copies of one tree (`cp -r`, new inodes and mtimes)
 * agree, and a reproducible build that keeps the size and an mtime of 0 still gets a new tag
 * when a byte changes. A variant made by compression names the identity's digest and its
 * encoding (the same compressor makes the same bytes from them); a precompressed sibling on
 * disk has its own bytes' digest. encoding must be a token (letters, digits, '-'), NULL for
 * identity.
 *
 * Returns the ETag's length without the NUL. When it is < cap, out holds the ETag and a NUL;
 * otherwise out holds a truncated prefix and nothing is written at or past out[cap].
 */
size_t cond_etag(char *out, size_t cap, const uint8_t digest[COND_DIGEST_LEN],
                 const char *encoding);

/* The outcome of the preconditions; the values are the HTTP status codes. */
enum cond_result {
    COND_PROCEED = 0,        /* go on: evaluate Range (see cond_if_range), send 200 or 206 */
    COND_NOT_MODIFIED = 304, /* send 304 with the ETag and Last-Modified, no body */
    COND_PRECONDITION = 412, /* send 412 Precondition Failed */
};

/*
 * Evaluates req's If-Match, If-Unmodified-Since, If-None-Match and If-Modified-Since against the
 * selected representation, in RFC 9110 13.2.2 order. Call it after the target has been found
 * (a missing file is a 404 before any precondition) and before Range.
 *
 * etag is the representation's current ETag as sent (from cond_etag, quotes included; {NULL, 0}
 * when it has none); mtime is its Last-Modified in whole seconds since the epoch, the value the
 * caller formats into Last-Modified.
 *
 *  1. If-Match present: true when it is "*" or lists a tag equal to etag by the strong
 *     comparison (both tags strong, same opaque-tag). False: 412.
 *  2. Else If-Unmodified-Since present and a valid HTTP-date: false when mtime > date: 412.
 *     An invalid date is ignored.
 *  3. If-None-Match present: false when it is "*" or lists a tag equal to etag by the weak
 *     comparison (W/ prefixes ignored). False: 304 for GET and HEAD, 412 for other methods.
 *  4. Else, for GET and HEAD only, If-Modified-Since present and a valid HTTP-date: false when
 *     mtime <= date: 304. An invalid date is ignored.
 *
 * A field whose value is empty (or only whitespace) counts as absent. A list is read up to its
 * first syntax error (an unquoted tag, a bad character, a missing comma): tags before it count,
 * the rest match nothing. So a malformed If-Match fails (412) and a malformed If-None-Match
 * does not stop the response, which are the safe readings.
 */
enum cond_result cond_evaluate(const struct http_request *req, struct http_str etag, int64_t mtime);

/*
 * If-Range (RFC 9110 13.1.5): returns true when the Range field should be honoured, false when
 * the whole representation must be sent instead (200). Call it only when Range is present.
 *   - if_range absent or empty: true;
 *   - an entity-tag (it starts with '"' or "W/"): true only when it is strong and exactly equal
 *     to etag, which must be strong too; weak tags never match;
 *   - otherwise an HTTP-date: true only when it is valid and equals mtime exactly (mtime as for
 *     cond_evaluate). Anything else: false.
 */
bool cond_if_range(struct http_str if_range, struct http_str etag, int64_t mtime);

#endif
