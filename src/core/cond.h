/* cond: builds strong ETags and evaluates conditional requests (RFC 9110 13.1, 13.2.2).
 * Must not: perform I/O, read the clock, allocate, or write at or past out[cap].
 * Ownership: every input points into the caller's buffers and is only read during the call. */
#ifndef CORE_COND_H
#define CORE_COND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"

/* Enough for any ETag cond_etag builds with an encoding name of up to 8 bytes, NUL included:
 * two quotes, three fields of at most 16 hex digits, three '-', 8 bytes and the NUL are 62. */
#define COND_ETAG_MAX 64

/*
 * Writes the strong ETag of a file version, quoted, as a field value:
 *   "INODE-SIZE-CHANGE"            (identity)
 *   "INODE-SIZE-CHANGE-ENCODING"   (a precompressed variant: encoding "br", "zstd", "gzip")
 * with INODE, SIZE and CHANGE (nanoseconds since the epoch, two's complement when negative) in
 * lower-case hexadecimal without leading zeros. CHANGE is the file's status-change time (ctime):
 * unlike mtime no user can set it back, so a rewrite that restores size and mtime still gets a
 * new tag. Pass the metadata of the file actually sent (for a variant, the .br/.zst/.gz file's
 * own inode, size and ctime) and encoding NULL for identity.
 * The tag depends only on those values, so it is stable across restarts and workers, and the
 * suffix keeps variants distinct even if their metadata coincided. encoding must be a token
 * (letters, digits, '-').
 *
 * Returns the ETag's length without the NUL. When it is < cap, out holds the ETag and a NUL;
 * otherwise out holds a truncated prefix and nothing is written at or past out[cap].
 */
size_t cond_etag(char *out, size_t cap, uint64_t ino, uint64_t size, int64_t change_ns,
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
