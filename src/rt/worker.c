/* Worker setup, the per-turn tick (clock, timers, drain) and buffer pools; see worker.h. */
#include "rt/worker.h"

#include "rt/errlog.h"
#include "rt/guard.h"

#include <assert.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "conn.h"
#include "core/date.h"
#include "core/static.h"
#include "engine/engine.h"
#include "h2/h2.h"
#include "h2/h2conn.h"
#include "engine/udp.h"
#include "handover.h"
#include "quic/quic.h"
#include "http/h1.h"
#include "rt/compress.h"
#include "rt/fcache.h"
#include "rt/obs.h"
#include "rt/auth.h"
#include "rt/site.h"
#include "serve.h"

#define QUIC_TICK_MS 10

/* Issue 10: 10 000 partial heads grew a worker by ~200 MB that stayed after they closed.
 * Once a second, buffers beyond the low-water mark are freed, and malloc is asked to hand the
 * heap's free pages back (free() alone keeps them: 32 KiB buffers come from the heap, not from
 * mmap, and one live chunk at the top pins everything below it). */
static void trim_pools(struct worker *w)
{
    if (w->trimmed_at == w->now)
        return;
    w->trimmed_at = w->now;
    size_t freed = bufpool_trim(&w->inbufs, BUFPOOL_LOW_WATER) +
                   bufpool_trim(&w->outbufs, BUFPOOL_LOW_WATER) +
                   bufpool_trim(&w->h2bufs, BUFPOOL_LOW_WATER);
    if (freed >= (1u << 20))
        malloc_trim(0);
}

bool worker_accept_failed(struct worker *w, int err)
{
    if (err != -EMFILE && err != -ENFILE && err != -ENOBUFS && err != -ENOMEM)
        return false;
    w->accept_paused = true;
    w->slot_freed = false;
    w->accept_paused_at = w->now;
    errlog_limited(&w->log_accept, ERRLOG_ERROR,
                   "worker %d: accept: %s (%u connections open); not accepting until one "
                   "closes or a second passes",
                   w->id, strerror(-err), w->active);
    return true;
}

bool worker_accept_resume(struct worker *w)
{
    if (!w->accept_paused || !w->accepting || (!w->slot_freed && w->now == w->accept_paused_at))
        return false;
    w->accept_paused = false;
    return true;
}

static void read_clock(struct worker *w)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    w->now = ts.tv_sec;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != w->wall) {
        w->wall = ts.tv_sec;
        httpdate_format(w->wall, w->date);
        w->ok_head_len = static_ok_head(w->ok_head, sizeof(w->ok_head), w->date);
    }
}

static void close_listeners(struct worker *w)
{
    for (unsigned i = 0; i < w->nlisteners; i++) {
        if (w->listeners[i].fd >= 0)
            close(w->listeners[i].fd);
        w->listeners[i].fd = -1;
    }
}

static const struct engine_upcalls upcalls;

int worker_init(struct worker *w, int id, const struct config *cfg, const struct engine_ops *eng,
                const struct engine_caps *caps, const struct listener *ls, unsigned n,
                struct site_slot *sites)
{
    int rc = -ENOMEM;
    assert(n >= 1 && n <= LISTEN_MAX);
    memset(w, 0, sizeof(*w));
    w->id = id;
    w->cfg = cfg;
    w->eng = eng;
    w->caps = caps;
    memcpy(w->listeners, ls, n * sizeof(*ls));
    w->nlisteners = n;
    w->up = &upcalls;
    w->h1 = &proto_h1;
    w->h2 = cfg->http2 ? &proto_h2 : NULL;
    w->wall = -1;
    w->accepting = true;
    atomic_init(&w->stop, WORKER_RUN);
    atomic_init(&w->done, false);
    w->sites = sites;
    w->site = site_acquire(sites, &w->site_gen);
    read_clock(w);
    timer_wheel_init(&w->wheel, w->now);
    w->inbufs.size = H1_INPUT_CAP;
    w->outbufs.size = sizeof(struct response);
    w->h2bufs.size = H2_BUF_SIZE;

    w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->wake_fd < 0) {
        rc = -errno;
        site_put(w->site);
        close_listeners(w);
        return rc;
    }
    if (conn_pool_init(w) < 0)
        goto err_mem;
    w->cache = fcache_new(w->site->root_fd, &w->site->mime, cfg->cache_size, cfg->cache_max_file,
                          cfg->compress_cache, &w->stats);
    if (!w->cache)
        goto err_mem;
    if (config_compresses(cfg) && !(w->compress = compress_new())) /* some site compresses */
        goto err_cache;
    if (!(w->auth = auth_state_new(w->wake_fd)))
        goto err_compress;
    if ((rc = guard_new(w, &w->guard)) < 0)
        goto err_compress;
    if ((rc = eng->init(w)) < 0)
        goto err_compress;
    return 0;

err_compress:
    guard_free(w->guard);
    auth_state_free(w->auth);
    compress_free(w, w->compress);
err_cache:
    fcache_free(w->cache);
err_mem:
    conn_pool_fini(w);
    close(w->wake_fd);
    site_put(w->site);
    close_listeners(w);
    return rc;
}

void worker_fini(struct worker *w)
{
    obs_tick(w, true); /* the last lines go to the writer, which outlives the workers */
    accesslog_buf_free(&w->logbuf);
    w->eng->fini(w);
#ifndef RINGHTTPD_NO_HTTP3
    if (w->quic) /* before the cache: its streams' responses hold entries */
        quic_ep_free(w->quic);
#endif
    if (w->udp)
        udp_port_fini(w->udp);
    free(w->udp);
    if (w->compress && w->cfg->verbose) {
        const struct stats *st = &w->stats;
        errlog(ERRLOG_INFO,
               "worker %d: compression: %llu variants made (%llu kept, %llu on the loop), "
               "%llu bytes saved of %llu, %zu bytes cached, %.1f ms compressing",
               w->id, (unsigned long long)stat_get(&st->compress_made),
               (unsigned long long)stat_get(&st->compress_kept),
               (unsigned long long)stat_get(&st->compress_on_loop),
               (unsigned long long)stat_get(&st->compress_saved_bytes),
               (unsigned long long)stat_get(&st->compress_in_bytes), fcache_variant_bytes(w->cache),
               (double)stat_get(&st->compress_ns) / 1e6);
    }
    compress_free(w, w->compress);
    auth_state_free(w->auth);
    fcache_free(w->cache);
    conn_held_close(w);
    guard_free(w->guard); /* after the last conn_closed: connections counted in it are gone */
    /* A worker that drained has every buffer back (one that stopped on an error may not). */
    assert(w->active != 0 ||
           (w->inbufs.count == 0 && w->outbufs.count == 0 && w->h2bufs.count == 0));
    bufpool_trim(&w->inbufs, 0);
    bufpool_trim(&w->outbufs, 0);
    bufpool_trim(&w->h2bufs, 0);
    conn_pool_fini(w);
    close(w->wake_fd);
    close_listeners(w);
    site_put(w->site);
}

/* The listener stays open for the first one to two seconds of a drain (the clock counts whole
 * seconds): connections already under way with it are served instead of being reset by the
 * close. With TCP_DEFER_ACCEPT a connected client stays in the listener's SYN queue until its
 * first bytes arrive, and a client can take a while between connect and send (a restart test's
 * Python clients, under load, lost a few to a grace of less than a second). In a zero-downtime
 * restart the server has steered new connections to the successor's listeners by then. */
static void start_drain(struct worker *w, int how)
{
    w->delaying = false;
    w->draining = true;
    w->drain_deadline = w->now + w->cfg->drain_timeout;
    /* Alone on the port, there is nobody to hand connections to: the listener closes at once
     * (after what is queued in it is accepted), so a plain stop takes milliseconds. */
    w->listen_close_at = w->now + (how == WORKER_HANDOVER ? 2 : 0);
    conn_held_close(w); /* sockets that waited for a slot: no slot is coming */
#ifndef RINGHTTPD_NO_HTTP3
    if (w->quic)
        quic_ep_drain(w->quic); /* GOAWAY; idle connections close, busy ones finish */
#endif
    for (uint32_t i = 0; i < w->cfg->max_conns; i++) {
        struct conn *c = &w->conns[i];
        if (conn_open(c))
            conn_drain(w, c);
    }
}

bool worker_listening(const struct worker *w)
{
    for (unsigned i = 0; i < w->nlisteners; i++)
        if (w->listeners[i].fd >= 0)
            return true;
    return false;
}

void worker_close_listener(struct worker *w, unsigned lst,
                           bool (*accept_one)(struct worker *w, int fd, unsigned lst))
{
    struct listener *l = &w->listeners[lst];
    if (l->fd < 0)
        return;
    /* Bounded: without a successor on the port, connections keep arriving while we empty it. */
    for (int i = 0; l->owned && i < 4096; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            break;
        if (!accept_one(w, fd, lst))
            break;
    }
    /* Ours leaves the port's listeners now, even while an engine still holds a reference (a
     * cancelled io_uring accept). Each port's goes through its hand-over (handover.h), in
     * turn with our other workers' listeners of that port so that a successor's steering stays
     * exact (the HTTP port and the TLS port alike, issue 14). systemd's sockets are only
     * closed: shutting one down would reset its queue and leave the service manager a socket
     * that no longer listens. */
    if (l->owned)
        handover_release(l->handover, l->fd);
    else
        close(l->fd);
    l->fd = -1;
}

/* A reload or a moved document root published a new site: serve from it from now on.
 * A reload may turn compression on where no site compressed before: the compressor is made
 * here, on the worker's own thread, as worker_init would have (no thread starts until a job
 * needs one). One turning it off keeps the compressor, idle, for a later reload: freeing it
 * would join a thread that may be compressing for seconds, on the loop. The variants already
 * made go with every other entry in fcache_reset, and --compress-cache bounds the variants
 * from the start either way (the cache is made with it whether or not anything compresses). */
static void switch_site(struct worker *w)
{
    unsigned gen;
    struct site *s = site_acquire(w->sites, &gen);
    fcache_reset(w->cache, s->root_fd, &s->mime);
    auth_forget(w->auth); /* the htpasswd files may have changed */
    site_put(w->site);
    w->site = s;
    w->site_gen = gen;
    w->want_peer = w->alog || s->any_auth || w->guard;
    /* s->owned: the configuration file re-read for s; without one, the start's options */
    if (!w->compress && config_compresses(s->owned ? s->owned : w->cfg) &&
        !(w->compress = compress_new()))
        errlog(ERRLOG_WARN, "worker %d: reload: no memory for a compressor: not compressing",
               w->id);
}

#ifndef RINGHTTPD_NO_HTTP3
/* The QUIC endpoint's counters into the ones a metrics scrape reads. */
static void publish_quic(struct worker *w)
{
    const struct quic_stats *q = quic_ep_stats(w->quic);
    struct stats *st = &w->stats;
    stat_set(&st->h3_conns, q->open);
    stat_set(&st->h3_accepted, q->accepted);
    stat_set(&st->h3_refused, q->refused);
    stat_set(&st->h3_retries, q->retries);
    stat_set(&st->h3_resets, q->resets_sent);
    stat_set(&st->h3_vn, q->vn_sent);
    stat_set(&st->udp_in, w->udp->rx_dgrams);
    stat_set(&st->udp_out, w->udp->tx_dgrams);
    stat_set(&st->udp_dropped, w->udp->tx_dropped);
}
#endif

/* A verification off the loop ended: the request waiting for it is asked again. */
static void resume(void *arg, struct resume_token t)
{
    conn_resume(arg, t);
}

bool worker_tick(struct worker *w)
{
    read_clock(w);
    obs_tick(w, false);
    compress_collect(w);
    auth_collect(w->auth, resume, w);
    if (atomic_load_explicit(&w->sites->gen, memory_order_relaxed) != w->site_gen)
        switch_site(w);
    int stop = atomic_load_explicit(&w->stop, memory_order_relaxed);
    /* With --drain-delay the drain waits: only the health path says 503 meanwhile, so that a
     * load balancer stops sending before anything closes (issue 19); a second stop signal
     * (WORKER_SKIP_DELAY, WORKER_ABORT) or the end of the delay starts it. */
    if (!w->draining && !w->delaying && stop != WORKER_RUN && w->cfg->drain_delay &&
        stop != WORKER_SKIP_DELAY && stop != WORKER_ABORT) {
        w->delaying = true;
        w->delay_how = stop;
        w->delay_end = w->now + w->cfg->drain_delay;
    }
    if (!w->draining && stop != WORKER_RUN &&
        (!w->delaying || w->now >= w->delay_end || stop == WORKER_SKIP_DELAY ||
         stop == WORKER_ABORT))
        start_drain(w, w->delaying ? w->delay_how : stop);
    if (stop == WORKER_ABORT)
        w->drain_deadline = w->listen_close_at = w->now;
    if (w->draining && w->accepting && w->now >= w->listen_close_at) {
        w->accepting = false;
        w->eng->stop_accept(w); /* the engine calls worker_close_listener when it may */
    }
    struct timer *t;
    while ((t = timer_expired(&w->wheel, w->now)))
        t->fire(w, t);
#ifndef RINGHTTPD_NO_HTTP3
    if (w->quic) {
        quic_ep_tick(w->quic);
        publish_quic(w);
    }
#endif
    if (w->draining && w->now >= w->drain_deadline) {
        for (uint32_t i = 0; i < w->cfg->max_conns; i++)
            if (conn_open(&w->conns[i]))
                conn_close(w, &w->conns[i]);
    }
    trim_pools(w);
    /* QUIC connections are waited for as TCP ones are, up to the drain deadline. */
#ifndef RINGHTTPD_NO_HTTP3
    bool quic_busy = w->quic && quic_ep_conns(w->quic) > 0 && w->now < w->drain_deadline;
#else
    bool quic_busy = false;
#endif
    return !(w->draining && w->active == 0 && !quic_busy && !worker_listening(w));
}

int worker_wait_ms(const struct worker *w)
{
    /* The wheel's resolution; the stop request wakes us through wake_fd. QUIC's timers (ACK
     * delay, loss detection) are milliseconds: with connections open the wait is at most
     * QUIC_TICK_MS, since io_uring's tick is armed once per expiry, not per loop turn. */
#ifndef RINGHTTPD_NO_HTTP3
    if (w->quic && quic_ep_conns(w->quic) > 0)
        return quic_ep_wait_ms(w->quic, QUIC_TICK_MS);
#else
    (void)w;
#endif
    return 1000;
}

void *worker_main(void *arg)
{
    struct worker *w = arg;
    /* w->alog is set after worker_init */
    w->want_peer = w->alog || w->site->any_auth || w->guard;
    int rc = w->eng->run(w);
    if (rc < 0)
        errlog(ERRLOG_ERROR, "worker %d: %s", w->id, strerror(-rc));
    atomic_store(&w->done, true);
    return (void *)(intptr_t)rc;
}

/* The engine's upcalls: conn's ends of its operations, and this loop's hooks. */
static const struct engine_upcalls upcalls = {
    .accepted = conn_accepted,
    .held_take = conn_held_take,
    .received = conn_received,
    .sent = conn_sent,
    .read_done = conn_read_done,
    .close = conn_close,
    .closed = conn_closed,
    .tick = worker_tick,
    .wait_ms = worker_wait_ms,
    .listening = worker_listening,
    .close_listener = worker_close_listener,
    .accept_failed = worker_accept_failed,
    .accept_resume = worker_accept_resume,
    .loop_turn = obs_loop_turn,
};
