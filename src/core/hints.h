/* hints: 103 Early Hints (RFC 8297; issue 28, --early-hints 'PATTERN LINK'): which Link fields
 * a GET for a path gets, written once as field lines for the interim response and again for
 * the final one (core/static writes the HTTP/1.1 interim response around them).
 * Must not: perform I/O or allocate; a LINK is checked once, when the option is parsed.
 * Ownership: rules and buffers are the caller's. */
#ifndef CORE_HINTS_H
#define CORE_HINTS_H

#include <stddef.h>

#include "core/http1.h"

/* One --early-hints rule: a GET for a path matching pattern ('*' wildcards) gets "Link: link". */
struct hints_rule {
    const char *pattern;
    const char *link;
};

/* Splits "PATTERN LINK" in place (accept_pattern_split) into rule. LINK: visible ASCII and
 * spaces, at most 1024 bytes, starting with '<' and holding its '>' (RFC 8288's
 * "<uri-reference>; params"; nothing a field value may not carry). 0 or -EINVAL. */
int hints_rule_parse(char *arg, struct hints_rule *rule);

/* Writes "Link: ...\r\n" for every rule whose pattern matches the path of a GET (other methods
 * get none: a HEAD or an error has nothing to preload for). Returns the length (0: no rule
 * matches, or the lines do not fit in cap). */
size_t hints_fields(const struct hints_rule *rules, size_t n, enum http_method method,
                    const char *path, size_t path_len, char *out, size_t cap);

#endif
