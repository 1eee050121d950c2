/* cors: the CORS decision for a static server (issue 28, --cors 'PATTERN ORIGIN|*'; the Fetch
 * standard's CORS protocol): which rules cover a path, whether the request's Origin is one they
 * allow, the answer to a preflight OPTIONS, and the fields a GET or HEAD response carries.
 * Must not: perform I/O, allocate, or echo a byte of a request's Origin that a rule did not
 * name (the echoed value is always the rule's own, checked when the option was parsed).
 * Ownership: rules and the request are the caller's; an answer points into the rules. */
#ifndef CORE_CORS_H
#define CORE_CORS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/http1.h"

/* An Origin field longer than this is no origin (a scheme, a 253-byte host and a port fit). */
#define CORS_ORIGIN_MAX 320

/* One --cors rule: URL paths matching pattern ('*' wildcards, accept_path_match) may be read by
 * scripts of origin, a serialized origin in lower case ("https://app.example:8443") or "*". */
struct cors_rule {
    const char *pattern;
    const char *origin;
    size_t origin_len;
};

/* Splits a --cors value "PATTERN ORIGIN|*" in place (the space run becomes NUL; the origin's
 * scheme and host are lower-cased, as browsers serialize them) into rule. PATTERN: '/' first,
 * visible ASCII but '"', '\\', '?', '#'; ORIGIN: "*", or "scheme://host[:port]" with a scheme
 * of letters, digits, '+', '-', '.', a host of letters, digits, '-', '.', '_' or a bracketed
 * IPv6 address, a port of 1-5 digits. 0 or -EINVAL. */
int cors_rule_parse(char *arg, struct cors_rule *rule);

/* What the rules say about one request. */
struct cors_answer {
    bool covered;   /* some rule's pattern matches the path: the response varies by Origin */
    bool allowed;   /* the Origin is allowed: allow_origin is set */
    bool preflight; /* an allowed preflight: answer 204 with cors_preflight_fields */
    struct http_str allow_origin; /* "*" or the rule's origin (equal to the request's) */
};

/*
 * The answer for a request with method, URL path (decoded, '/' first) and its Origin and
 * Access-Control-Request-Method fields ({NULL, 0} when absent). Rules for the path that name
 * "*" allow every request ("*", no Vary needed); otherwise the request's Origin must equal one
 * of their origins byte for byte (a browser's serialization; garbage or a huge value never
 * does). A preflight is OPTIONS with an Origin and Access-Control-Request-Method GET or HEAD;
 * any other OPTIONS, or one for a disallowed origin, is not a preflight (it keeps its 405).
 */
struct cors_answer cors_decide(const struct cors_rule *rules, size_t n, enum http_method method,
                               const char *path, size_t path_len, struct http_str origin,
                               struct http_str request_method);

/* Writes the CORS field lines ("Name: value\r\n") a GET/HEAD response carries for answer a:
 * Access-Control-Allow-Origin when allowed, "Vary: Origin" when covered by origin-specific
 * rules (so that a cache never serves one origin's answer to another). Returns the length, or
 * 0 when nothing is to be added or it does not fit in cap. */
size_t cors_fields(const struct cors_answer *a, char *out, size_t cap);

/* The same for a 204 answer to an allowed preflight: the above plus Access-Control-Allow-
 * Methods (GET, HEAD), -Allow-Headers (the request fields this server reads) and -Max-Age. */
size_t cors_preflight_fields(const struct cors_answer *a, char *out, size_t cap);

#endif
