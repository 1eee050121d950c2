/* path: turns a request-target into a safe relative path below the document root.
 * Must not: touch the filesystem (openat2 with RESOLVE_BENEATH is the second line of defence,
 * done by the caller), allocate, or write past out[cap - 1].
 * Ownership: out is the caller's buffer; result->query points into the target. */
#ifndef CORE_PATH_H
#define CORE_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include "core/http1.h"

struct path_result {
    size_t len;            /* bytes written to out (no NUL is written) */
    bool trailing_slash;   /* the decoded path ended in '/' (or was "/") */
    bool asterisk;         /* the target was exactly "*" (OPTIONS *) */
    struct http_str query; /* after '?', without it; {NULL, 0} when there is none */
};

/*
 * Decodes and normalises target (origin-form "/a/b?q", absolute-form "http://host/a/b?q",
 * or "*") into out: percent-decoded, no leading or trailing '/', empty segments and "." removed,
 * ".." removing the previous segment and never climbing above the root ("/../a" gives "a").
 * The empty string names the root. Decoded "%2F" counts as a separator.
 *
 * Returns 0, or the HTTP status to answer with:
 *   400  not origin-, absolute- or asterisk-form; a bad percent escape; "%00"; a fragment;
 *   404  a segment starting with '.' (hidden files), except ".well-known" as the first segment;
 *   414  the decoded path does not fit in cap bytes.
 */
int path_normalize(struct http_str target, char *out, size_t cap, struct path_result *result);

/*
 * Writes the Location of a directory's slash form into out: "/" + path + "/", then "?" + query
 * when query.p is set. path is path_normalize's output (no leading or trailing '/', no empty
 * segment), never the raw target: every byte of it outside RFC 3986's pchar is percent-encoded,
 * and so is every byte of the query outside pchar, '/', '?' and '%'. The result is therefore
 * always an absolute path starting with exactly one '/' ("//host", "/\host", "%2f", "%5c" and
 * absolute-form targets can never make it a reference to another host), with no byte that
 * needs quoting in a header. Returns its length, or 0 when it does not fit in cap.
 */
size_t path_location(const char *path, size_t len, struct http_str query, char *out, size_t cap);

/* The same with the final '/' only when slash says so: "/" + path, the form of a page whose
 * canonical URL has no trailing slash (issue 39's clean URLs; "" still gives "/"). */
size_t path_location_as(const char *path, size_t len, bool slash, struct http_str query, char *out,
                        size_t cap);

#endif
