/* vhost: which site a request is for, from its Host (RFC 9110 7.2): exact names first, then
 * "*.example.org" wildcards from the longest suffix; case-insensitive, the port and a trailing
 * dot ignored. Also the Location of a site's redirect rules, built so that nothing the client
 * sent can make it name another host.
 * Must not: allocate (the caller passes the table's slots), make system calls, or keep state.
 * Ownership: a table points at the caller's names and slots, which must outlive it. */
#ifndef CORE_VHOST_H
#define CORE_VHOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"

#define VHOST_NAME_MAX 255

struct vhost_slot {
    const char *name; /* lower case; a wildcard is stored as its suffix ".example.org" */
    uint32_t hash;
    uint32_t len : 8;     /* at most VHOST_NAME_MAX */
    signed int site : 24; /* -1: empty slot; sites (or certificates) up to 8 million (issue 40) */
};

#define VHOST_MAX_SITE ((1 << 23) - 1)

struct vhost_table {
    struct vhost_slot *slots;
    uint32_t mask; /* slots - 1, a power of two minus one */
    uint32_t used; /* slots taken */
};

/* Slots a table of n names needs (a power of two, at least 2n). */
size_t vhost_slots_for(size_t n);

/* Empties t over slots[0..nslots), nslots from vhost_slots_for. */
void vhost_table_init(struct vhost_table *t, struct vhost_slot *slots, size_t nslots);

/* Adds name ("example.org" or "*.example.org", already lower case) for site (0..VHOST_MAX_SITE).
 * -EEXIST when the name is there already, -ENOSPC when the table is full, -EINVAL for an empty
 * name or a site beyond VHOST_MAX_SITE. O(1). */
int vhost_table_add(struct vhost_table *t, const char *name, int site);

/* The lookup key of a Host value (or an absolute-form target's authority): lower-cased into
 * out[0..VHOST_NAME_MAX], without ":port", "[v6]" brackets kept, one trailing dot removed.
 * Returns its length; 0 when host is empty or not a valid host. */
size_t vhost_key(struct http_str host, char *out);

/* The site whose name matches key (exact, else the longest wildcard suffix), or -1. */
int vhost_lookup(const struct vhost_table *t, const char *key, size_t len);

/* The Host a request names: its absolute-form target's authority when it has one (RFC 9112
 * 3.2.2), else its Host field; {NULL, 0} without either (HTTP/1.0). */
struct http_str vhost_request_host(const struct http_request *req);

/* True when path ("/a/b", decoded) matches a redirect's FROM: equal, or FROM ending in '*'
 * and path starting with what precedes it; *rest gets what the '*' matched. */
bool vhost_from_matches(const char *from, const char *path, size_t len, struct http_str *rest);

/*
 * Writes a redirect's Location into out[0..cap): to, with its final '*' (if any) replaced by
 * rest percent-encoded as path segments and followed by "?" + query when query.p is set (a TO
 * without '*' carries nothing). rest is a normalised path's tail (no empty segment), so with
 * TO's '*' right after a '/', the result never begins "//" and never changes TO's host.
 * Returns the length, or 0 when it does not fit.
 */
size_t vhost_location(const char *to, struct http_str rest, struct http_str query, char *out,
                      size_t cap);

/* "http://" + host + "/" + path + ("?" + query), path and query encoded as vhost_location does:
 * a canonical-host redirect. Returns the length, or 0 when it does not fit. */
size_t vhost_canonical(const char *scheme, const char *host, const char *path, size_t len,
                       struct http_str query, char *out, size_t cap);

#endif
