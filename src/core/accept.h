/* accept: content negotiation on Accept-Encoding (which precompressed variant to send) and
 * Accept (HTML or JSON for a directory listing), RFC 9110 12.5.1 and 12.5.3.
 * Must not: perform I/O, allocate, or read outside the given field values.
 * Ownership: inputs are the caller's and only read during the call; results are plain values. */
#ifndef CORE_ACCEPT_H
#define CORE_ACCEPT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/http1.h"

/* The content codings this server can send from precompressed files. */
enum accept_coding {
    ACCEPT_BR,
    ACCEPT_ZSTD,
    ACCEPT_GZIP,
};
#define ACCEPT_CODINGS 3

/*
 * Reads Accept-Encoding and writes to out the codings the client accepts, best first; returns
 * how many (0..ACCEPT_CODINGS). The caller sends the first one it has a file for, else identity.
 *
 *   - {NULL, 0} (no Accept-Encoding) or an empty value: none. RFC 9110 would allow any coding
 *     without the field, but clients that send none (curl, scripts) expect identity, as nginx's
 *     gzip_static assumes.
 *   - A coding's weight is the q of its own element ("x-gzip" counts as "gzip"; the first
 *     element naming a coding wins), else the q of "*", else it is not acceptable. q=0 excludes.
 *   - Ties go br, then zstd, then gzip (smallest files first).
 *   - q must be "0", "1" or a decimal with up to three digits between them (RFC 9110 12.4.2),
 *     the parameter name "q" in any case. An element with an invalid q, any other parameter, or
 *     a malformed coding is ignored as a whole: not sending an encoding is always correct, so
 *     guessing q=1 for a garbled element would be the unsafe reading.
 * Names compare without regard to ASCII case; commas inside quoted strings do not split.
 */
size_t accept_encodings(struct http_str accept_encoding, enum accept_coding out[ACCEPT_CODINGS]);

/* The coding's name as sent in Content-Encoding and used in ETag suffixes: "br", "zstd",
 * "gzip". */
const char *accept_coding_name(enum accept_coding coding);

/*
 * Returns the quality, in thousandths (0..1000), that Accept gives the media type `type`
 * ("type/subtype", no parameters, e.g. "text/html"). The most specific matching range decides:
 * the exact type, then its type wildcard ("text/" followed by '*'), then the full wildcard
 * ('*', '/', '*'); among equally specific ones, the first. Ranges carrying parameters other than q
 * ("text/html;level=1") are more specific than a type without parameters and so never match it.
 * Invalid elements (as for Accept-Encoding, or a '*' type with a subtype that is not '*') are ignored.
 * {NULL, 0} (no Accept field) means every type is acceptable: 1000. A present field that
 * matches nothing gives 0.
 */
int accept_quality(struct http_str accept, const char *type);

/* True when Accept gives type a strictly higher quality than over, e.g. for a directory listing
 * accept_prefers(accept, "application/json", "text/html") chooses JSON; ties keep `over`. */
bool accept_prefers(struct http_str accept, const char *type, const char *over);

#endif
