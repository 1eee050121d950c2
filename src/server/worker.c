/* Worker setup, the per-turn tick (clock, timers, drain) and buffer pools; see worker.h. */
#include "server/worker.h"

#include "rt/errlog.h"
#include "rt/guard.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "conn/conn.h"
#include "conn/tls_xport.h"
#include "core/date.h"
#include "core/static.h"
#include "engine/engine.h"
#include "http/h2/h2.h"
#include "http/h2/h2conn.h"
#include "http/h3/h3.h"
#include "engine/udp.h"
#include "server/handover.h"
#include "quic/quic.h"
#include "http/h1.h"
#include "rt/compress.h"
#include "rt/fcache.h"
#include "rt/obs.h"
#include "site/auth.h"
#include "site/site.h"
#include "site/tokens.h"
#include "http/serve.h"

/* A worker: the runtime the layers below are handed, and what only the worker does with it.
 * Not to be copied once made: rt.listeners points into it. */
struct worker {
    struct runtime rt; /* what the layers below see; the upcalls find the worker from it */
    atomic_int stop;   /* enum worker_stop, written by the main thread (worker_stop) */
    atomic_bool done;  /* set as the worker's thread ends, for the main thread's wait */
    int delay_how;     /* --drain-delay: how the drain proper starts (enum worker_stop) ... */
    int64_t delay_end; /* ... and when */
    int64_t drain_deadline;
    int64_t listen_close_at; /* draining: when the listener closes (after handshakes finish) */
    int64_t accept_paused_at;
    int64_t trimmed_at; /* rt.now of the last pool trim */
    struct errlog_limit log_accept;
    struct listener listeners[LISTEN_MAX]; /* rt.listeners[0..rt.nlisteners) */
    struct site_slot *sites;               /* where reloads publish; read once per loop turn */
    /* HTTP/3: the QUIC endpoint on rt.udp, or NULL (worker_parts.h3). worker_tick runs its
     * timers and drain. */
    struct quic_ep *quic;
    const atomic_uint *ondemand_gen; /* worker_parts.ondemand_gen, or NULL */
    unsigned ondemand_seen;          /* its value when the parked handshakes were last tried */
    pthread_t thread;
};

/* The worker whose runtime the engine's upcall names (struct worker embeds it). */
static struct worker *worker_of(struct runtime *rt)
{
    return (struct worker *)((char *)rt - offsetof(struct worker, rt));
}

static const struct worker *worker_of_const(const struct runtime *rt)
{
    return (const struct worker *)((const char *)rt - offsetof(struct worker, rt));
}

/* Issue 10: 10 000 partial heads grew a worker by ~200 MB that stayed after they closed.
 * Once a second, buffers beyond the low-water mark are freed, and malloc is asked to hand the
 * heap's free pages back (free() alone keeps them: 32 KiB buffers come from the heap, not from
 * mmap, and one live chunk at the top pins everything below it). */
static void trim_pools(struct worker *w)
{
    if (w->trimmed_at == w->rt.now)
        return;
    w->trimmed_at = w->rt.now;
    size_t freed = bufpool_trim(&w->rt.inbufs, BUFPOOL_LOW_WATER) +
                   bufpool_trim(&w->rt.outbufs, BUFPOOL_LOW_WATER) +
                   bufpool_trim(&w->rt.h2bufs, BUFPOOL_LOW_WATER);
    if (freed >= (1u << 20))
        malloc_trim(0);
}

/* The engine's accept failed with err (-errno). For a shortage of fds or memory (EMFILE,
 * ENFILE, ENOBUFS, ENOMEM) this logs (rate-limited), sets rt->accept_paused and returns true:
 * the engine stops accepting until accept_resume says so, instead of retrying an accept that
 * fails at once, forever. Other errors return false (retry). */
static bool accept_failed(struct runtime *rt, int err)
{
    struct worker *w = worker_of(rt);
    if (err != -EMFILE && err != -ENFILE && err != -ENOBUFS && err != -ENOMEM)
        return false;
    w->rt.accept_paused = true;
    w->rt.conns.slot_freed = false;
    w->accept_paused_at = w->rt.now;
    errlog_limited(&w->log_accept, ERRLOG_ERROR,
                   "worker %d: accept: %s (%u connections open); not accepting until one "
                   "closes or a second passes",
                   w->rt.id, strerror(-err), w->rt.conns.active);
    return true;
}

/* True once accepting may resume after a pause: a connection has closed (an fd is back) or a
 * clock second has passed. Clears the pause when it says so. */
static bool accept_resume(struct runtime *rt)
{
    struct worker *w = worker_of(rt);
    if (!w->rt.accept_paused || !w->rt.accepting ||
        (!w->rt.conns.slot_freed && w->rt.now == w->accept_paused_at))
        return false;
    w->rt.accept_paused = false;
    return true;
}

static void read_clock(struct worker *w)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    w->rt.now = ts.tv_sec;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != w->rt.wall) {
        w->rt.wall = ts.tv_sec;
        httpdate_format(w->rt.wall, w->rt.date);
        w->rt.ok_head_len = static_ok_head(w->rt.ok_head, sizeof(w->rt.ok_head), w->rt.date);
    }
}

static void close_listeners(struct worker *w)
{
    for (unsigned i = 0; i < w->rt.nlisteners; i++) {
        if (w->listeners[i].fd >= 0)
            close(w->listeners[i].fd);
        w->listeners[i].fd = -1;
    }
}

static const struct engine_upcalls upcalls;

static int init(struct worker *w, int id, const struct worker_parts *p)
{
    const struct config *cfg = p->cfg;
    const struct engine_ops *eng = p->eng;
    const struct listener *ls = p->ls;
    unsigned n = p->n;
    int rc = -ENOMEM;
    assert(n >= 1 && n <= LISTEN_MAX);
    w->rt.id = id;
    w->rt.cfg = cfg;
    w->rt.eng = eng;
    w->rt.caps = p->caps;
    memcpy(w->listeners, ls, n * sizeof(*ls));
    w->rt.listeners = w->listeners;
    w->rt.nlisteners = n;
    w->rt.up = &upcalls;
    w->rt.h1 = &proto_h1;
    w->rt.h2 = p->proto ? p->proto : cfg->http2 ? &proto_h2 : NULL;
    w->rt.alog = p->alog;
    /* HTTP-01 answers, read through the worker's own slot of the table */
    w->rt.acme = p->tokens ? tokens_reader(p->tokens, id) : NULL;
    w->ondemand_gen = p->ondemand_gen;
    /* systemd's sockets and a balancer's connections are not steered: one client's
     * connections reach any worker, so the server has every worker count in one guard */
    w->rt.guard = p->guard;
    w->rt.wall = -1;
    w->rt.accepting = true;
    atomic_init(&w->stop, WORKER_RUN);
    atomic_init(&w->done, false);
    w->sites = p->sites;
    w->rt.site = site_acquire(p->sites, &w->rt.site_gen);
    read_clock(w);
    timer_wheel_init(&w->rt.wheel, w->rt.now);
    w->rt.inbufs.size = H1_INPUT_CAP;
    w->rt.outbufs.size = sizeof(struct response);
    w->rt.h2bufs.size = H2_BUF_SIZE;

    w->rt.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->rt.wake_fd < 0) {
        rc = -errno;
        site_put(w->rt.site);
        close_listeners(w);
        return rc;
    }
    if (conn_pool_init(&w->rt) < 0)
        goto err_mem;
    w->rt.cache = fcache_new(w->rt.site->root_fd, &w->rt.site->mime, cfg->cache_size,
                             cfg->cache_max_file, cfg->compress_cache, &w->rt.stats, w->rt.wake_fd);
    if (!w->rt.cache)
        goto err_mem;
    if (config_compresses(cfg) && !(w->rt.compress = compress_new())) /* some site compresses */
        goto err_cache;
    if (!(w->rt.auth = auth_state_new(w->rt.wake_fd)))
        goto err_compress;
    /* the modules' own per-worker state (runtime.h) */
    if (!(w->rt.h1w = h1_worker_new()) || !(w->rt.servew = serve_worker_new()) ||
        !(w->rt.sitew = site_worker_new()))
        goto err_compress;
    if ((rc = guard_configure(&w->rt, cfg)) < 0)
        goto err_compress;
    if ((rc = eng->init(&w->rt)) < 0)
        goto err_compress;
    return 0;

err_compress:
    site_worker_free(w->rt.sitew);
    serve_worker_free(w->rt.servew);
    h1_worker_free(w->rt.h1w);
    guard_free(w->rt.guard);
    auth_state_free(w->rt.auth);
    compress_free(&w->rt, w->rt.compress);
err_cache:
    fcache_free(w->rt.cache);
err_mem:
    conn_pool_fini(&w->rt);
    close(w->rt.wake_fd);
    site_put(w->rt.site);
    close_listeners(w);
    return rc;
}

#ifndef RINGHTTPD_NO_HTTP3
/* HTTP/3's part of the worker (worker_h3): its UDP sockets, the QUIC endpoint on them, each
 * port's Alt-Svc line and w->h3ops. 0 or -errno after saying why on stderr; what it made is
 * the worker's already, so worker_free takes it back on failure too. */
static int init_h3(struct worker *w, const struct worker_h3 *h3)
{
    struct runtime *rt = &w->rt;
    int rc = 0;
    _Static_assert(LISTEN_MAX <= QUIC_PORTS_MAX, "a port per listener");
    assert(h3->n >= 1 && h3->n <= LISTEN_MAX);
    for (unsigned i = 0; i < h3->n && rc == 0; i++) {
        const struct worker_udp *u = &h3->udp[i];
        int fd = udp_socket_open(u->addr, u->len, u->v6only);
        if (fd < 0) {
            fprintf(stderr, "ringhttpd: HTTP/3: cannot bind UDP %s: %s\n", u->url, strerror(-fd));
            return fd;
        }
        struct udp_port *port = calloc(1, sizeof(*port));
        if (!port) {
            close(fd);
            return -ENOMEM;
        }
        rt->udp[rt->nudp++] = port; /* the worker's now: worker_free closes it, even on failure */
        rc = udp_port_init(port, fd, rt->cfg->http3_gso, rt->cfg->http3_gro, NULL, NULL);
    }
    if (rc != 0)
        return rc;
    /* The server's settings with this worker's number: its connection IDs steer to it. */
    struct quic_settings qs = *h3->quic;
    qs.worker = (unsigned)rt->id;
    char why[512] = "";
    if ((rc = quic_ep_new(&w->quic, rt->udp[0], &qs, &h3_app, rt, why, sizeof(why))) != 0) {
        fprintf(stderr, "ringhttpd: %s\n", why);
        return rc;
    }
    for (unsigned i = 1; rc == 0 && i < rt->nudp; i++)
        rc = quic_ep_add_port(w->quic, rt->udp[i]);
    /* Each TLS listener's HTTPS answers name its own UDP port (issue 38: a client that follows
     * one entry's Alt-Svc finds HTTP/3 there, not on another entry's port). */
    for (unsigned i = 0; rc == 0 && i < h3->n; i++) {
        char alt[48];
        const struct worker_udp *u = &h3->udp[i];
        unsigned port = ntohs(((const struct sockaddr_in *)u->addr)->sin_port); /* as v6's */
        rc = serve_alt_svc(rt, u->listener, alt, h3_alt_svc(alt, sizeof(alt), port));
    }
    if (rc == 0)
        rt->h3ops = &h3_worker_ops;
    return rc;
}
#endif

int worker_new(struct worker **out, int id, const struct worker_parts *p)
{
    struct worker *w;
    int rc;
    /* Each on cache lines of its own: the workers' hot fields are never shared. */
    if (posix_memalign((void **)&w, 64, sizeof(*w)) != 0) {
        for (unsigned i = 0; i < p->n; i++)
            close(p->ls[i].fd);
        rc = -ENOMEM;
        goto err;
    }
    memset(w, 0, sizeof(*w));
    rc = init(w, id, p);
    if (rc < 0) {
        free(w);
        goto err;
    }
#ifndef RINGHTTPD_NO_HTTP3
    /* init_h3 says its own failures (which socket, which file), the rest are said below */
    if (p->h3 && (rc = init_h3(w, p->h3)) != 0) {
        worker_free(w); /* whole but for HTTP/3: freed as a joined worker is */
        return rc;
    }
#endif
    *out = w;
    return 0;

err:
    fprintf(stderr, "ringhttpd: starting worker %d (%s): %s\n", id, p->eng->name, strerror(-rc));
    return rc;
}

struct runtime *worker_runtime(struct worker *w)
{
    return &w->rt;
}

/* Certificates on demand: a name was decided, so the handshakes parked for one try again. */
static void retry_parked(struct worker *w)
{
    unsigned gen = atomic_load_explicit(w->ondemand_gen, memory_order_acquire);
    if (gen == w->ondemand_seen)
        return;
    w->ondemand_seen = gen;
    for (unsigned i = 0; i < w->rt.nlisteners; i++)
        if (w->listeners[i].xport == &transport_tls)
            tls_port_retry(&w->rt, w->listeners[i].xport_ctx);
}

struct quic_ep *worker_quic(const struct worker *w)
{
    return w->quic;
}

int worker_listener_fd(const struct worker *w, unsigned i)
{
    return i < w->rt.nlisteners ? w->listeners[i].fd : -1;
}

int worker_wake(struct worker *w)
{
    uint64_t one = 1;
    return write(w->rt.wake_fd, &one, sizeof(one)) < 0 ? -errno : 0;
}

void worker_stop(struct worker *w, enum worker_stop how)
{
    atomic_store(&w->stop, how);
    (void)worker_wake(w); /* an eventfd write fails only when its counter is full: awake */
}

bool worker_done(const struct worker *w)
{
    return atomic_load(&w->done);
}

void worker_free(struct worker *w)
{
    if (!w)
        return;
#ifndef RINGHTTPD_NO_HTTP3
    /* Before the cache (its streams' responses hold entries) and before the last log lines
     * go: a connection still open (--drain-timeout cut it) logs its requests as it goes. */
    if (w->quic)
        quic_ep_free(w->quic);
    w->quic = NULL;
    if (w->rt.h3ops)
        w->rt.h3ops->fini(&w->rt);
#endif
    obs_tick(&w->rt, true); /* the last lines go to the writer, which outlives the workers */
    accesslog_buf_free(&w->rt.logbuf);
    w->rt.eng->fini(&w->rt);
    for (unsigned i = 0; i < w->rt.nudp; i++) {
        udp_port_fini(w->rt.udp[i]);
        free(w->rt.udp[i]);
    }
    w->rt.nudp = 0;
    if (w->rt.compress && w->rt.cfg->verbose) {
        const struct stats *st = &w->rt.stats;
        errlog(ERRLOG_INFO,
               "worker %d: compression: %llu variants made (%llu kept, %llu on the loop), "
               "%llu bytes saved of %llu, %zu bytes cached, %.1f ms compressing",
               w->rt.id, (unsigned long long)stat_get(&st->compress_made),
               (unsigned long long)stat_get(&st->compress_kept),
               (unsigned long long)stat_get(&st->compress_on_loop),
               (unsigned long long)stat_get(&st->compress_saved_bytes),
               (unsigned long long)stat_get(&st->compress_in_bytes),
               fcache_variant_bytes(w->rt.cache), (double)stat_get(&st->compress_ns) / 1e6);
    }
    compress_free(&w->rt, w->rt.compress);
    auth_state_free(w->rt.auth);
    fcache_free(w->rt.cache);
    conn_held_close(&w->rt);
    guard_free(w->rt.guard); /* after the last conn_closed: connections counted in it are gone */
    site_worker_free(w->rt.sitew);
    serve_worker_free(w->rt.servew);
    h1_worker_free(w->rt.h1w);
    /* A worker that drained has every buffer back (one that stopped on an error may not). */
    assert(w->rt.conns.active != 0 ||
           (w->rt.inbufs.count == 0 && w->rt.outbufs.count == 0 && w->rt.h2bufs.count == 0));
    bufpool_trim(&w->rt.inbufs, 0);
    bufpool_trim(&w->rt.outbufs, 0);
    bufpool_trim(&w->rt.h2bufs, 0);
    conn_pool_fini(&w->rt);
    close(w->rt.wake_fd);
    close_listeners(w);
    site_put(w->rt.site);
    free(w);
}

/* The listener stays open for the first one to two seconds of a drain (the clock counts whole
 * seconds): connections already under way with it are served instead of being reset by the
 * close. With TCP_DEFER_ACCEPT a connected client stays in the listener's SYN queue until its
 * first bytes arrive, and a client can take a while between connect and send (a restart test's
 * Python clients, under load, lost a few to a grace of less than a second). In a zero-downtime
 * restart the server has steered new connections to the successor's listeners by then. */
static void start_drain(struct worker *w, int how)
{
    w->rt.delaying = false;
    w->rt.draining = true;
    w->drain_deadline = w->rt.now + w->rt.cfg->drain_timeout;
    /* Alone on the port, there is nobody to hand connections to: the listener closes at once
     * (after what is queued in it is accepted), so a plain stop takes milliseconds. */
    w->listen_close_at = w->rt.now + (how == WORKER_HANDOVER ? 2 : 0);
    conn_held_close(&w->rt); /* sockets that waited for a slot: no slot is coming */
#ifndef RINGHTTPD_NO_HTTP3
    if (w->quic)
        quic_ep_drain(w->quic); /* no new connections; handshakes without a slot close */
#endif
    /* Every connection the worker has, HTTP/3 ones (attached slots) included, through its
     * protocol's drain: GOAWAY, idle ones close, busy ones finish. */
    for (uint32_t i = 0; i < w->rt.cfg->max_conns; i++) {
        struct conn *c = &w->rt.conns.slot[i];
        if (conn_open(c) || c->state == CONN_ATTACHED)
            conn_drain(&w->rt, c);
    }
}

/* Whether any of the worker's listeners is still open. */
static bool listening(const struct runtime *rt)
{
    const struct worker *w = worker_of_const(rt);
    for (unsigned i = 0; i < w->rt.nlisteners; i++)
        if (w->listeners[i].fd >= 0)
            return true;
    return false;
}

/* Closes the worker's listener `lst` at the end of a drain's grace period, called by the engine
 * once it no longer accepts on it (io_uring: once the accept is cancelled). A listener the
 * worker owns is emptied first: the connections already queued in it are accepted through
 * accept_one (which returns false to stop) and served, never reset by the close. An inherited
 * one (systemd socket activation) is left with its queue for the next instance. */
static void close_listener(struct runtime *rt, unsigned lst,
                           bool (*accept_one)(struct runtime *rt, int fd, unsigned lst))
{
    struct worker *w = worker_of(rt);
    struct listener *l = &w->listeners[lst];
    if (l->fd < 0)
        return;
    /* Bounded: without a successor on the port, connections keep arriving while we empty it. */
    for (int i = 0; l->owned && i < 4096; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            break;
        if (!accept_one(rt, fd, lst))
            break;
    }
    /* Ours leaves the port's listeners now, even while an engine still holds a reference (a
     * cancelled io_uring accept). Each port's goes through its hand-over (handover.h), in
     * turn with our other workers' listeners of that port so that a successor's steering stays
     * exact (the HTTP port and the TLS port alike, issue 14). systemd's sockets are only
     * closed: shutting one down would reset its queue and leave the service manager a socket
     * that no longer listens. A Unix socket every worker shares is only closed too (a shutdown
     * would stop the other workers' accepts); the last close ends it. */
    if (l->owned && !l->shared)
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
    fcache_reset(w->rt.cache, s->root_fd, &s->mime);
    auth_forget(w->rt.auth); /* the htpasswd files may have changed */
    site_put(w->rt.site);
    w->rt.site = s;
    w->rt.site_gen = gen;
    /* s->owned: the configuration file re-read for s; without one, the start's options */
    const struct config *top = s->owned ? s->owned : w->rt.cfg;
    if (guard_configure(&w->rt, top) < 0) /* a limit added by the reload (issue 28) */
        errlog(ERRLOG_WARN, "worker %d: reload: no memory for the per-client limits' tables",
               w->rt.id);
    w->rt.want_peer =
        w->rt.alog || s->any_auth || guard_on(w->rt.guard) || w->rt.cfg->num_proxy_from;
    if (!w->rt.compress && config_compresses(top) && !(w->rt.compress = compress_new()))
        errlog(ERRLOG_WARN, "worker %d: reload: no memory for a compressor: not compressing",
               w->rt.id);
}

#ifndef RINGHTTPD_NO_HTTP3
/* The QUIC endpoint's counters into the ones a metrics scrape reads. */
static void publish_quic(struct worker *w)
{
    const struct quic_stats *q = quic_ep_stats(w->quic);
    struct stats *st = &w->rt.stats;
    stat_set(&st->h3_conns, q->open);
    stat_set(&st->h3_accepted, q->accepted);
    stat_set(&st->h3_refused, q->refused);
    stat_set(&st->h3_retries, q->retries);
    stat_set(&st->h3_resets, q->resets_sent);
    stat_set(&st->h3_vn, q->vn_sent);
    uint64_t in = 0, out = 0, dropped = 0, trains = 0, queued = 0, sends = 0;
    for (unsigned i = 0; i < w->rt.nudp; i++) { /* every TLS listener's socket */
        const struct udp_port *p = w->rt.udp[i];
        in += p->rx_dgrams;
        out += p->tx_dgrams;
        dropped += p->tx_dropped;
        trains += p->rx_gro_trains;
        queued += p->tx_queued;
        sends += p->tx_sends;
    }
    stat_set(&st->udp_in, in);
    stat_set(&st->udp_out, out);
    stat_set(&st->udp_dropped, dropped);
    stat_set(&st->udp_gro_trains, trains);
    stat_set(&st->udp_ring_sends, queued);
    stat_set(&st->udp_sends, sends);
}
#endif

/* A verification off the loop ended: the request waiting for it is asked again. */
static void resume(void *arg, struct resume_token t)
{
    conn_resume(arg, t); /* an HTTP/3 connection's too: its slot is conn's (conn_attach) */
}

bool worker_tick(struct worker *w)
{
    read_clock(w);
    obs_tick(&w->rt, false);
    fcache_collect(w->rt.cache);
    compress_collect(&w->rt);
    auth_collect(w->rt.auth, resume, &w->rt);
    if (w->ondemand_gen)
        retry_parked(w);
    if (atomic_load_explicit(&w->sites->gen, memory_order_relaxed) != w->rt.site_gen)
        switch_site(w);
    int stop = atomic_load_explicit(&w->stop, memory_order_relaxed);
    /* With --drain-delay the drain waits: only the health path says 503 meanwhile, so that a
     * load balancer stops sending before anything closes (issue 19); a second stop signal
     * (WORKER_SKIP_DELAY, WORKER_ABORT) or the end of the delay starts it. */
    if (!w->rt.draining && !w->rt.delaying && stop != WORKER_RUN && w->rt.cfg->drain_delay &&
        stop != WORKER_SKIP_DELAY && stop != WORKER_ABORT) {
        w->rt.delaying = true;
        w->delay_how = stop;
        w->delay_end = w->rt.now + w->rt.cfg->drain_delay;
    }
    if (!w->rt.draining && stop != WORKER_RUN &&
        (!w->rt.delaying || w->rt.now >= w->delay_end || stop == WORKER_SKIP_DELAY ||
         stop == WORKER_ABORT))
        start_drain(w, w->rt.delaying ? w->delay_how : stop);
    if (stop == WORKER_ABORT)
        w->drain_deadline = w->listen_close_at = w->rt.now;
    if (w->rt.draining && w->rt.accepting && w->rt.now >= w->listen_close_at) {
        w->rt.accepting = false;
        w->rt.eng->stop_accept(&w->rt); /* the engine calls close_listener when it may */
    }
    struct timer *t;
    while ((t = timer_expired(&w->rt.wheel, w->rt.now)))
        t->fire(&w->rt, t);
#ifndef RINGHTTPD_NO_HTTP3
    if (w->quic) {
        quic_ep_tick(w->quic);
        publish_quic(w);
    }
#endif
    if (w->rt.draining && w->rt.now >= w->drain_deadline) {
        for (uint32_t i = 0; i < w->rt.cfg->max_conns; i++)
            if (conn_open(&w->rt.conns.slot[i]))
                conn_close(&w->rt, &w->rt.conns.slot[i]);
    }
    trim_pools(w);
    /* QUIC connections are waited for as TCP ones are, up to the drain deadline. */
#ifndef RINGHTTPD_NO_HTTP3
    bool quic_busy = w->quic && quic_ep_conns(w->quic) > 0 && w->rt.now < w->drain_deadline;
#else
    bool quic_busy = false;
#endif
    return !(w->rt.draining && w->rt.conns.active == 0 && !quic_busy && !listening(&w->rt));
}

/* The longest the loop may sleep before the next tick is due, in milliseconds. */
static int wait_ms(const struct runtime *rt)
{
    const struct worker *w = worker_of_const(rt);
    /* The wheel's resolution; the stop request wakes us through wake_fd. QUIC's timers (ACK
     * delay, loss detection, idle) are milliseconds: the wait ends at the next one. Engines
     * ask again each turn (io_uring moves its armed tick up), so no shorter ceiling. */
#ifndef RINGHTTPD_NO_HTTP3
    if (w->quic && quic_ep_conns(w->quic) > 0)
        return quic_ep_wait_ms(w->quic, 1000);
#else
    (void)w;
#endif
    return 1000;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    /* w->rt.alog is set after worker_init */
    w->rt.want_peer =
        w->rt.alog || w->rt.site->any_auth || guard_on(w->rt.guard) || w->rt.cfg->num_proxy_from;
    int rc = w->rt.eng->run(&w->rt);
    if (rc < 0)
        errlog(ERRLOG_ERROR, "worker %d: %s", w->rt.id, strerror(-rc));
    atomic_store(&w->done, true);
    return (void *)(intptr_t)rc;
}

static bool tick(struct runtime *rt)
{
    return worker_tick(worker_of(rt));
}

int worker_start(struct worker *w)
{
    return -pthread_create(&w->thread, NULL, worker_main, w);
}

int worker_join(struct worker *w)
{
    void *res;
    pthread_join(w->thread, &res);
    return (int)(intptr_t)res;
}

/* The engine's upcalls: conn's ends of its operations, and this loop's hooks. */
static const struct engine_upcalls upcalls = {
    .accepted = conn_accepted,
    .held_take = conn_held_take,
    .received = conn_received,
    .sent = conn_sent,
    .read_done = conn_read_done,
    .close = conn_abort,
    .closed = conn_closed,
    .tick = tick,
    .wait_ms = wait_ms,
    .listening = listening,
    .close_listener = close_listener,
    .accept_failed = accept_failed,
    .accept_resume = accept_resume,
    .loop_turn = obs_loop_turn,
};
