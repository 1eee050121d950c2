/* accept: content negotiation on Accept-Encoding (which precompressed or compressed variant to
 * send), Accept (HTML or JSON for a directory listing), RFC 9110 12.5.1 and 12.5.3, and the
 * request side of compression dictionary transport (Available-Dictionary, RFC 9842), plus the
 * two matching rules compression needs: media types against --compress-types, URL paths
 * against --dictionary patterns.
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
 * Invalid elements (as for Accept-Encoding, or a '*' type with a subtype that is not '*') are
 * ignored. {NULL, 0} (no Accept field) means every type is acceptable: 1000. A present field that
 * matches nothing gives 0.
 */
int accept_quality(struct http_str accept, const char *type);

/* True when Accept gives type a strictly higher quality than over, e.g. for a directory listing
 * accept_prefers(accept, "application/json", "text/html") chooses JSON; ties keep `over`. */
bool accept_prefers(struct http_str accept, const char *type, const char *over);

/* The quality (0..1000) Accept-Encoding gives the coding `name` (lower case) when it lists it
 * by name ("*" does not count: dictionary codings are only used when the client names them,
 * RFC 9842 6.1). 0 when absent, excluded or the field is missing. Same element rules as
 * accept_encodings. */
int accept_coding_q(struct http_str accept_encoding, const char *name);

#define ACCEPT_DICT_HASH 32 /* SHA-256 */

/*
 * Parses an Available-Dictionary value (RFC 9842 2.2): a Structured Field byte sequence
 * ":" base64 ":" (RFC 8941 3.3.5, padding required) with optional surrounding spaces, decoding
 * to exactly 32 bytes, written to hash. Returns 0, or -EINVAL for anything else (a list, a
 * parameter, a wrong length, bad base64): the caller then ignores the field.
 */
int accept_dictionary(struct http_str value, unsigned char hash[ACCEPT_DICT_HASH]);

/*
 * True when the media type `type` (parameters after ';' ignored) is listed in `list`, a
 * comma-separated list of "type/subtype", "type/" followed by '*' (any subtype), or "+suffix"
 * (any structured-syntax suffix, e.g. "+xml", "+json"); ASCII case-insensitive, spaces allowed
 * around elements.
 */
bool accept_type_listed(const char *type, const char *list);

/*
 * True when URL path `path` (decoded, starting with '/') matches `pattern`, where '*' matches
 * any run of bytes ('/' included, as in a URLPattern pathname wildcard) and every other byte
 * matches itself. This is the subset of RFC 9842's `match` the server emits and checks.
 */
bool accept_path_match(const char *pattern, const char *path, size_t len);

/*
 * Splits an option value "PATTERN REST" (--cors, --early-hints) in place: the run of spaces or
 * tabs after PATTERN becomes NULs and *rest points past it. PATTERN must be a URL path pattern
 * for accept_path_match: '/' first, visible ASCII but '"', '\\', '?' and '#'. REST must not be
 * empty. 0 or -EINVAL.
 */
int accept_pattern_split(char *arg, char **rest);

#endif
