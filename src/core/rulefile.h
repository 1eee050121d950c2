/* rulefile: a site's rules by path pattern (issue 39), compiled once per rule-set version into
 * one read-only block: redirects and rewrites (Netlify's and Cloudflare Pages' `_redirects`
 * syntax), response header rules (their `_headers` syntax), and access rules by CIDR (the
 * YAML `access:` list, in a line form of its own). The parser reads text, reports each line it
 * cannot use once (file:line and why) and compiles the rest; the matcher answers a path with
 * the first redirect, every header rule and the first access rule that match it, at a cost
 * that grows with the path's length (one hash probe per '/'), not with the number of rules.
 * Must not: do I/O or allocate: the caller sizes the block (rulefile_compile with cap 0) and
 * gives it memory; matching writes only into the caller's struct rulefile_match.
 * Ownership: the caller owns the block and the texts it was compiled from (the rules point
 * into the block only: the texts may be freed after compiling). A compiled set is immutable:
 * share it between threads freely. */
#ifndef CORE_RULEFILE_H
#define CORE_RULEFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/logfmt.h"

#define RULEFILE_MAX_LINE 2000      /* Cloudflare Pages' per-line limit; a longer line is bad */
#define RULEFILE_MAX_CAPTURES 8     /* placeholders (and a splat) in one pattern */
#define RULEFILE_MAX_QUERY 4        /* query conditions of one redirect */
#define RULEFILE_MAX_CIDRS 16       /* allow (and deny) addresses of one access rule */
#define RULEFILE_MAX_RULES 100000   /* of each kind in one set: the rest are reported, ignored */
#define RULEFILE_DEFAULT_STATUS 301 /* Netlify's (Cloudflare's is 302): README says why */

enum rulefile_kind {
    RULEFILE_REDIRECTS, /* "FROM [name=value...] TO [STATUS[!]]" lines */
    RULEFILE_HEADERS,   /* "PATTERN" lines, each followed by indented "Name: value", "! Name" */
    RULEFILE_ACCESS,    /* "PATTERN allow|deny CIDR... [close]" lines (YAML access:) */
};

/* One text to compile: a file's (name "_redirects", or "FILE" of a YAML list) or a list's. */
struct rulefile_src {
    enum rulefile_kind kind;
    const char *name; /* for the reports */
    const char *text;
    size_t len;
    int first_line; /* the number of text's first line (1 for a file) */
    bool one_line;  /* every line of text is reported as first_line (a configuration's own
                     * line, whose header pattern may add type=TYPE and status=any) */
};

/* A line that was not used: called once per line, in the order of the texts. */
typedef void rulefile_report_fn(void *arg, const char *name, int line, const char *why);

/* A path pattern: a literal path, or one with `:name` placeholders (one or more bytes other
 * than '/') and a `*` splat (any bytes); with a host (Cloudflare's https://HOST/path form,
 * _headers only) it applies to requests for that host alone. */
struct rulefile_pat {
    const char *text;
    const char *host; /* lower case, or NULL */
    uint16_t len, host_len;
    uint16_t lit; /* the literal prefix the index keys on (through its last '/') */
    bool exact;   /* no wildcard: the whole path, a trailing '/' optional */
};

struct rulefile_query {
    const char *name, *value; /* value: ":name" captures the parameter's value */
    uint16_t name_len, value_len;
};

struct rulefile_redirect {
    struct rulefile_pat from;
    const char *to; /* a path (rewrite, 404/410 page, or a local redirect) or an http(s) URL */
    uint16_t to_len;
    uint16_t status; /* 200 (rewrite), 301, 302, 303, 307, 308, 404, 410 */
    bool force;      /* '!': applies even where a file exists at the path */
    uint8_t nquery;
    struct rulefile_query query[RULEFILE_MAX_QUERY];
};

struct rulefile_header {
    struct rulefile_pat path;
    const char *set;    /* "Name: value\r\n" lines (values may name the pattern's captures) */
    const char *remove; /* "name\n" lines (lower case): fields taken off the response */
    uint32_t set_len, remove_len;
    const char *type; /* YAML's content-type match (a prefix of the type), or NULL: any */
    uint16_t type_len;
    bool errors; /* YAML's status: applies to error responses too (else 200/206/304 only) */
    bool expand; /* set names a capture (":name"): substituted per request */
};

struct rulefile_access {
    struct rulefile_pat path;
    struct cidr allow[RULEFILE_MAX_CIDRS], deny[RULEFILE_MAX_CIDRS];
    uint8_t nallow, ndeny;
    bool close; /* refuse by closing the connection (after a 403), not by a 403 alone */
};

/* The compiled set. The index maps a key (a literal prefix, or an exact path) to its rules;
 * nslots is a power of two. */
struct rulefile_slot {
    uint32_t hash;
    uint32_t rule; /* index in its kind's array */
    uint32_t next; /* the next entry of the bucket + 1, or 0 */
    uint8_t kind;
    uint8_t exact;
};

struct rulefile {
    const struct rulefile_redirect *redirects;
    const struct rulefile_header *headers;
    const struct rulefile_access *access;
    uint32_t nredirects, nheaders, naccess;
    uint32_t nbad;          /* lines reported */
    uint32_t nbuckets;      /* a power of two */
    const uint32_t *bucket; /* entry index + 1, or 0 */
    const struct rulefile_slot *entry;
    uint32_t nentries;
    bool any_host;   /* some header rule names a host */
    bool any_expand; /* some header rule substitutes captures */
    bool any_type;   /* some header rule matches a content type */
    bool any_errors; /* some header rule applies to error responses */
};

/* Parses and compiles srcs[0..n) into mem[0..cap). Returns the bytes the block needs: when that
 * is more than cap, nothing usable was written (call again with that much; report NULL for the
 * sizing call, so each bad line is reported once). *out points into mem when it fit. */
size_t rulefile_compile(const struct rulefile_src *srcs, size_t n, void *mem, size_t cap,
                        const struct rulefile **out, rulefile_report_fn *report, void *arg);

/* What a pattern captured of a path: splat under the name "splat". Valid while the path is. */
struct rulefile_match {
    uint8_t n;
    struct {
        const char *name, *value;
        uint16_t name_len, value_len;
    } cap[RULEFILE_MAX_CAPTURES + RULEFILE_MAX_QUERY];
};

/* One walk over path's keys for everything the rules stage asks: the first redirect (as
 * rulefile_redirect; -1 for none) with its captures, the first access rule (-1 for none), and
 * whether any header rule's pattern matches (its host, type and status not looked at). */
struct rulefile_found {
    int redirect, access;
    bool headers;
    struct rulefile_match m;
};
void rulefile_find(const struct rulefile *rs, const char *path, size_t len, const char *query,
                   size_t qlen, struct rulefile_found *f);

/* Paths: every function below takes a request's path as path_normalize leaves it (decoded,
 * normalised, without its leading '/': "" for the root), and matches patterns against "/" +
 * path; a trailing '/' is optional on both sides.
 *
 * The first redirect (in the order of the texts) whose pattern matches path[0..len) and
 * whose query conditions query[0..qlen)
 * (the raw query, without '?') meets; its index, or -1. m gets its captures. */
int rulefile_redirect(const struct rulefile *rs, const char *path, size_t len, const char *query,
                      size_t qlen, struct rulefile_match *m);

/* r's target with the captures substituted (each percent-encoded where a URL needs it) and,
 * unless the target has a query of its own or r has query conditions, the request's query
 * appended: into out (NUL-terminated). Its length, 0 when it does not fit. */
size_t rulefile_target(const struct rulefile_redirect *r, const struct rulefile_match *m,
                       const char *query, size_t qlen, char *out, size_t cap);

/* The first access rule whose pattern matches path; its index, or -1. */
int rulefile_access_rule(const struct rulefile *rs, const char *path, size_t len);

/* Whether a's lists refuse the address (family AF_INET/AF_INET6, or 0 when unknown): on a deny
 * list, or not on a non-empty allow list. An unknown address is refused by an allow list. */
bool rulefile_refuses(const struct rulefile_access *a, int family, const uint8_t *addr);

/* The header lines of the rules matching path (for host[0..host_len) when any rule names a
 * host; of type `type` when any matches types; `error`: the response is an error), applied over
 * base[0..base_len) (the site's own extra lines) in rule order: a rule's fields join the ones
 * before them of the same name (", "), its removals take earlier ones (the site's included)
 * off. Writes the result into out; its length, or SIZE_MAX when nothing matched (base stands),
 * or when out is too small (the caller keeps base). */
size_t rulefile_headers(const struct rulefile *rs, const char *host, size_t host_len,
                        const char *path, size_t len, const char *type, bool error,
                        const char *base, size_t base_len, char *out, size_t cap);

/* Whether ua[0..len) matches one of the patterns (each a case-insensitive glob: '*' any run,
 * matched anywhere in the field). */
bool rulefile_ua_denied(const char *const *patterns, int n, const char *ua, size_t len);

#endif
