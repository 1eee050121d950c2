/* guard: the per-client limits of issue 28 applied in a worker: --limit-conn at accept and
 * close, --limit-req (and --limit-req-for) per request, on the worker's own tables
 * (core/limits.h). The listeners steer every connection of one client address to one worker
 * (steer.h), so these tables see all of a client and need no lock.
 * Must not: cost anything when no limit is configured (w->guard is NULL then, and serve only
 * calls guard_request for a site that limits requests), or block.
 * Ownership: the worker owns its struct guard (guard_new at start, guard_free at its end). */
#ifndef RT_GUARD_H
#define RT_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/http1.h"
#include "core/limits.h"

struct runtime;
struct config;
struct peer;

struct guard {
    struct limit_table conns; /* --limit-conn (slots NULL when off) */
    struct limit_table reqs;  /* --limit-req buckets (slots made at the first limited request) */
    uint64_t seed;
};

/* The worker's guard (w->guard), or NULL when no limit is configured anywhere; -ENOMEM. */
int guard_new(struct runtime *w, struct guard **out);
void guard_free(struct guard *g);

/* A connection from client p (conn_peer: the engine looked it up at the accept, w->want_peer)
 * was accepted: false when its client already has --limit-conn connections open (the caller
 * closes it at once; counted and logged here). *counted says whether it was counted, so that
 * its close calls guard_closed. */
bool guard_accept(struct runtime *w, const struct peer *p, bool *counted);

/* A connection of client p that guard_accept counted is closed: one fewer for its client. */
void guard_closed(struct runtime *w, const struct peer *p);

/* The client a request from peer p is counted for: the peer's key, or behind a --real-ip-from
 * proxy the forwarded address's (the access log's walk, core/logfmt.h). */
struct limit_key guard_client(const struct runtime *w, const struct peer *p,
                              const struct http_request *req);

/* --limit-req and the first matching --limit-req-for of the site with options cfg and index
 * site_id, for one request for path: 0 to answer it, else the Retry-After (seconds) of the 429
 * to answer instead (counted here). */
uint32_t guard_request(struct runtime *w, const struct config *cfg, uint32_t site_id,
                       struct limit_key client, const char *path, size_t len);

#endif
