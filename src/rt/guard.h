/* guard: the per-client limits of issue 28 applied in a worker: --limit-conn at accept and
 * close, --limit-req (and --limit-req-for) per request, on the worker's own tables
 * (core/limits.h). The listeners steer every connection of one client address to one worker
 * (steer.h), so these tables see all of a client and need no lock. Under systemd socket
 * activation nothing steers (every worker accepts from systemd's sockets): the workers share
 * one guard there (guard_shared_new), its tables behind one mutex taken at accept, at close
 * and for a request of a site that limits requests, never otherwise.
 * Must not: cost anything when no limit is configured (guard_on is false then, and serve only
 * calls guard_request for a site that limits requests), or block but on the shared mutex.
 * Ownership: the worker owns its struct guard (guard_configure makes it, guard_free at its
 * end); a shared one is the server's (guard_shared_new, guard_shared_free after the
 * workers). */
#ifndef RT_GUARD_H
#define RT_GUARD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/http1.h"
#include "core/limits.h"

struct runtime;
struct config;
struct peer;

struct guard {
    unsigned limit_conn;      /* --limit-conn of the configuration in force (0: off) */
    struct limit_table conns; /* --limit-conn (slots NULL until it is first on) */
    struct limit_table reqs;  /* --limit-req buckets (slots made at the first limited request) */
    uint64_t seed;
    /* a limit in force: the workers look each client's address up (w->want_peer); atomic
     * for the shared guard, which every worker configures */
    atomic_bool on;
    bool shared; /* the workers' one guard, its members behind lock */
    pthread_mutex_t lock;
};

/* Whether the worker's guard g has a limit in force (g may be NULL). */
static inline bool guard_on(const struct guard *g)
{
    return g && atomic_load_explicit(&g->on, memory_order_relaxed);
}

/* The workers' one guard under socket activation (no limit in force yet); NULL without
 * memory. A worker is made with it in w->guard (server/worker.h's worker_parts), which
 * guard_configure then configures for the worker's configuration, as a guard of its own. */
struct guard *guard_shared_new(void);
void guard_shared_free(struct guard *g);

/* The worker's guard for the configuration cfg comes into force (the start's, or a reload's
 * top level): w->guard made when cfg limits clients and the worker has none yet (a reload can
 * add a limit to a process started without one), its --limit-conn table made at the first
 * configuration that sets one, and the limit taken from cfg. A guard, once made, stays (NULL
 * while nothing ever limited). 0 or -ENOMEM (the previous state kept). */
int guard_configure(struct runtime *w, const struct config *cfg);
void guard_free(struct guard *g);

/* A connection from client p (conn_peer: the engine looked it up at the accept, w->want_peer)
 * was accepted: false when its client already has --limit-conn connections open (the caller
 * closes it at once; counted and logged here). *counted says whether it was counted, so that
 * its close calls guard_closed. */
bool guard_accept(struct runtime *w, const struct peer *p, bool *counted);

/* Whether --limit-conn is in force (guard_accept may refuse). */
bool guard_limits_conns(const struct guard *g);

/* A connection of client p that guard_accept counted is closed: one fewer for its client. */
void guard_closed(struct runtime *w, const struct peer *p);

/* --limit-conn behind --real-ip-from (nginx's limit_conn with realip): a request from a
 * trusted proxy (peer p; its connections are not counted at accept) is counted for its
 * forwarded address while it is answered, once its head is read. 1 with *ticket (nonzero)
 * for guard_request_done when its response is released, -EBUSY when the client has
 * --limit-conn requests in flight already (the 503; counted and logged here), 0 when p is not
 * a trusted proxy, no limit is in force, or the table is full. */
int guard_proxied(struct runtime *w, const struct peer *p, const struct http_request *req,
                  uint32_t *ticket);
void guard_request_done(struct runtime *w, uint32_t ticket);

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
