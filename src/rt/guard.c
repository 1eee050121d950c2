/* guard: see guard.h. */
#include "rt/guard.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "config/config.h"
#include "core/accept.h"
#include "core/logfmt.h"
#include "core/peer.h"
#include "rt/errlog.h"
#include "rt/runtime.h"

/* Buckets a worker keeps: a client's bucket matters only until it drains ((burst + 1) / rate
 * seconds), and a full set gives up the one that drains first, so this bounds memory (48 bytes
 * a slot: 3 MiB), not correctness for clients seen within that window. */
#define GUARD_BUCKETS 65536

static void lock(struct guard *g)
{
    if (g->shared)
        pthread_mutex_lock(&g->lock);
}

static void unlock(struct guard *g)
{
    if (g->shared)
        pthread_mutex_unlock(&g->lock);
}

static struct guard *guard_make(void)
{
    struct guard *g = calloc(1, sizeof(*g));
    if (g && getrandom(&g->seed, sizeof(g->seed), 0) != (ssize_t)sizeof(g->seed)) {
        free(g);
        return NULL;
    }
    return g;
}

/* guard_configure's part under the lock. */
static int configure(struct guard *g, const struct config *cfg, size_t max_conns)
{
    if (cfg->limit_conn && !g->conns.slots) {
        /* Each open connection holds at most one slot: twice the slots keeps sets sparse. */
        size_t n = limit_table_size(max_conns * 2);
        struct limit_slot *s = calloc(n, sizeof(*s));
        if (!s)
            return -ENOMEM;
        limit_table_init(&g->conns, s, n, g->seed);
    }
    g->limit_conn = cfg->limit_conn;
    atomic_store_explicit(&g->on, config_limits_clients(cfg), memory_order_relaxed);
    return 0;
}

int guard_configure(struct runtime *w, const struct config *cfg)
{
    if (!w->guard && !config_limits_clients(cfg))
        return 0;
    if (!w->guard && !(w->guard = guard_make()))
        return -ENOMEM;
    struct guard *g = w->guard;
    /* shared: every worker's connections, each worker's max_conns of them */
    size_t max = (size_t)w->cfg->max_conns * (g->shared ? (size_t)w->cfg->threads : 1);
    lock(g);
    int rc = configure(g, cfg, max);
    unlock(g);
    return rc;
}

struct guard *guard_shared_new(void)
{
    struct guard *g = guard_make();
    if (!g)
        return NULL;
    g->shared = true;
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

static void tables_free(struct guard *g)
{
    free(g->conns.slots);
    free(g->reqs.slots);
    free(g);
}

void guard_free(struct guard *g)
{
    if (g && !g->shared)
        tables_free(g);
}

void guard_shared_free(struct guard *g)
{
    if (!g)
        return;
    pthread_mutex_destroy(&g->lock);
    tables_free(g);
}

static struct limit_key peer_key(const struct peer *p)
{
    if (!p->known) /* not an IP socket: everyone such shares one key */
        return (struct limit_key){{0}};
    return limit_key_of(p->family, p->addr);
}

static bool trusted_proxy(const struct runtime *w, const struct peer *p)
{
    for (int i = 0; p->known && i < w->cfg->num_real_ip; i++)
        if (cidr_match(&w->cfg->real_ip_from[i], p->family, p->addr))
            return true;
    return false;
}

/* One more connection (or proxied request) of client key: 0 (*at: where it is counted),
 * -EBUSY past --limit-conn (counted and logged, who naming the client), -ENOENT without the
 * limit, -ENOSPC a full set. */
static int acquire(struct runtime *w, struct limit_key key, const char *who, uint32_t *at)
{
    struct guard *g = w->guard;
    lock(g);
    unsigned limit = g->limit_conn;
    int rc = limit ? limit_conn_acquire_at(&g->conns, key, limit, at) : -ENOENT;
    unlock(g);
    if (rc == -EBUSY) {
        stat_add(&w->stats.limit_conn_refused, 1);
        errlog_limited(&w->log_limit, ERRLOG_NOTICE,
                       "limit-conn: %s has %u connections open: refusing another", who, limit);
    }
    if (rc == -ENOSPC)
        stat_add(&w->stats.limit_uncounted, 1);
    return rc;
}

bool guard_accept(struct runtime *w, const struct peer *p, bool *counted)
{
    struct guard *g = w->guard;
    *counted = false;
    if (!guard_on(g))
        return true;
    /* A trusted proxy's connections carry many clients: they are not one client's (nginx
     * counts limit_conn on the real address per request: guard_proxied). */
    if (trusted_proxy(w, p))
        return true;
    uint32_t at;
    int rc = acquire(w, peer_key(p), p->text, &at);
    if (rc == -EBUSY)
        return false;
    *counted = rc == 0;
    return true;
}

void guard_closed(struct runtime *w, const struct peer *p)
{
    struct guard *g = w->guard;
    lock(g);
    limit_conn_release(&g->conns, peer_key(p));
    unlock(g);
}

int guard_proxied(struct runtime *w, const struct peer *p, const struct http_request *req,
                  uint32_t *ticket)
{
    if (!w->guard || !trusted_proxy(w, p))
        return 0;
    uint32_t at;
    int rc = acquire(w, guard_client(w, p, req), "a client behind a proxy", &at);
    if (rc == -EBUSY)
        return -EBUSY;
    *ticket = at + 1; /* 0 is "not counted" */
    return rc == 0;
}

void guard_request_done(struct runtime *w, uint32_t ticket)
{
    struct guard *g = w->guard;
    lock(g);
    limit_conn_release_at(&g->conns, ticket - 1);
    unlock(g);
}

struct limit_key guard_client(const struct runtime *w, const struct peer *p,
                              const struct http_request *req)
{
    if (!p->known)
        return (struct limit_key){{0}};
    if (!w->cfg->num_real_ip)
        return limit_key_of(p->family, p->addr);
    int family = p->family;
    uint8_t addr[16];
    memcpy(addr, p->addr, 16);
    logfmt_real_addr(w->cfg->real_ip_from, w->cfg->num_real_ip, req, &family, addr);
    return limit_key_of(family, addr);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* a few ms of grain: nginx's is the loop's */
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One bucket: 0, or the Retry-After of a refusal. */
static uint32_t take(struct runtime *w, uint32_t rule, struct limit_key client,
                     const struct limit_rate *r, uint64_t now)
{
    bool evicted;
    struct limit_decision d = limit_req_take(&w->guard->reqs, rule, client, r, now, &evicted);
    if (evicted)
        stat_add(&w->stats.limit_uncounted, 1);
    /* Without nodelay nginx would hold the request delay_ms; ringhttpd never queues a request
     * (it would hold the connection's memory), so the burst is answered at once. */
    return d.verdict == LIMIT_REJECT ? d.retry_after : 0;
}

uint32_t guard_request(struct runtime *w, const struct config *cfg, uint32_t site_id,
                       struct limit_key client, const char *path, size_t len)
{
    struct guard *g = w->guard;
    if (!g)
        return 0; /* not yet in force in this worker (guard_configure) */
    lock(g);
    if (!g->reqs.slots) {
        size_t n = limit_table_size(GUARD_BUCKETS);
        struct limit_slot *s = calloc(n, sizeof(*s));
        if (!s) {
            unlock(g);
            return 0; /* without memory, serve rather than refuse */
        }
        limit_table_init(&g->reqs, s, n, g->seed);
    }
    uint64_t now = now_ms();
    /* Rules are told apart by site and position: site id × (rules + 1), 0 for --limit-req. */
    uint32_t base = site_id * (CONFIG_MAX_RULES + 1), retry = 0;
    for (int i = 0; i < cfg->num_limit_req_for; i++) {
        if (accept_path_match(cfg->limit_req_for[i].pattern, path, len)) {
            retry = take(w, base + 1 + (uint32_t)i, client, &cfg->limit_req_for[i].rate, now);
            break;
        }
    }
    if (!retry && cfg->limit_req_on)
        retry = take(w, base, client, &cfg->limit_req, now);
    unlock(g);
    if (retry) {
        stat_add(&w->stats.limit_req_refused, 1);
        errlog_limited(&w->log_limit, ERRLOG_NOTICE,
                       "limit-req: a client past its rate: 429, Retry-After %u", retry);
    }
    return retry;
}

bool guard_limits_conns(const struct guard *g)
{
    return g->limit_conn > 0;
}
