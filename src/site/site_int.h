/* site_int: what a request's routing (route.c) and its site's rules (answer.c) share: site's
 * per-worker state. Private to src/site/; site.h is the interface (site.c, the sites' build
 * and publication, needs none of this). Owns nothing: route.c makes and frees a struct
 * site_worker (site_worker_new/_free), its worker's alone. */
#ifndef SITE_SITE_INT_H
#define SITE_SITE_INT_H

#include <limits.h>
#include <stdint.h>

struct host_root; /* route.c's */
struct http_request;

/* Site's per-worker state: the last Host routed and the site it named (a keep-alive client
 * names the same one request after request, and a match costs a memcmp instead of a lookup),
 * and the request site_pending found verified. */
struct site_worker {
    struct host_root *host_roots; /* HOST_ROOTS of them, made at the first {host} request */
    uint32_t next_id;
    struct {
        char host[64];
        uint8_t len;
        int32_t vh;
        unsigned gen; /* w->site_gen it was routed under; 0: none */
        /* site_pending found this request's credentials verified: serve's check is done */
        const struct http_request *granted;
    } route;
    char rewrite[PATH_MAX]; /* a rewrite's target (struct site_rewrite), its request's only */
};

#endif
