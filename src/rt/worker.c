/* Worker setup, the per-turn tick (clock, timers, drain) and buffer pools; see worker.h. */
#include "rt/worker.h"

#include "rt/errlog.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "core/date.h"
#include "core/static.h"
#include "engine/engine.h"
#include "rt/fcache.h"
#include "serve.h"

void *bufpool_get(struct bufpool *bp)
{
    void *b = bp->free;
    if (b) {
        bp->free = *(void **)b;
        bp->nfree--;
    } else if (!(b = malloc(bp->size))) {
        return NULL;
    }
    bp->count++;
    return b;
}

void bufpool_put(struct bufpool *bp, void *buf)
{
    *(void **)buf = bp->free;
    bp->free = buf;
    bp->count--;
    bp->nfree++;
}

/* Frees what the free list holds beyond keep buffers; returns the bytes freed. */
static size_t bufpool_trim(struct bufpool *bp, unsigned keep)
{
    size_t freed = 0;
    while (bp->nfree > keep) {
        void *next = *(void **)bp->free;
        free(bp->free);
        bp->free = next;
        bp->nfree--;
        freed += bp->size;
    }
    return freed;
}

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
                   bufpool_trim(&w->outbufs, BUFPOOL_LOW_WATER);
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
    if (!w->accept_paused || w->draining || (!w->slot_freed && w->now == w->accept_paused_at))
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

int worker_init(struct worker *w, int id, const struct config *cfg, const struct engine_ops *eng,
                int listen_fd)
{
    int rc = -ENOMEM;
    memset(w, 0, sizeof(*w));
    w->id = id;
    w->cfg = cfg;
    w->eng = eng;
    w->listen_fd = listen_fd;
    w->wall = -1;
    atomic_init(&w->stop, false);
    read_clock(w);
    timer_wheel_init(&w->wheel, w->now);
    w->inbufs.size = CONN_INPUT_CAP;
    w->outbufs.size = sizeof(struct response);

    w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->wake_fd < 0)
        return -errno;
    /* calloc'd slots cost no memory until touched: idle capacity is free. */
    w->conns = calloc(cfg->max_conns, sizeof(*w->conns));
    w->free_slots = calloc(cfg->max_conns, sizeof(*w->free_slots));
    if (!w->conns || !w->free_slots)
        goto err_mem;
    for (uint32_t i = 0; i < cfg->max_conns; i++)
        w->free_slots[cfg->max_conns - 1 - i] = i; /* low slots first: fewer pages touched */
    w->num_free = cfg->max_conns;
    w->cache = fcache_new(cfg->docroot_fd, &cfg->mime_extra, cfg->cache_size, cfg->cache_max_file);
    if (!w->cache)
        goto err_mem;
    if ((rc = eng->init(w)) < 0)
        goto err_cache;
    return 0;

err_cache:
    fcache_free(w->cache);
err_mem:
    free(w->free_slots);
    free(w->conns);
    close(w->wake_fd);
    return rc;
}

void worker_fini(struct worker *w)
{
    w->eng->fini(w);
    fcache_free(w->cache);
    conn_held_close(w);
    bufpool_trim(&w->inbufs, 0);
    bufpool_trim(&w->outbufs, 0);
    free(w->free_slots);
    free(w->conns);
    close(w->wake_fd);
}

static void start_drain(struct worker *w)
{
    w->draining = true;
    w->drain_deadline = w->now + w->cfg->drain_timeout;
    w->eng->stop_accept(w);
    conn_held_close(w);
    for (uint32_t i = 0; i < w->cfg->max_conns; i++) {
        struct conn *c = &w->conns[i];
        if (conn_open(c))
            conn_drain(w, c);
    }
}

bool worker_tick(struct worker *w)
{
    read_clock(w);
    if (!w->draining && atomic_load_explicit(&w->stop, memory_order_relaxed))
        start_drain(w);
    struct timer *t;
    while ((t = timer_expired(&w->wheel, w->now)))
        conn_timeout(w, (struct conn *)((char *)t - offsetof(struct conn, timer)));
    if (w->draining && w->now >= w->drain_deadline) {
        for (uint32_t i = 0; i < w->cfg->max_conns; i++)
            if (conn_open(&w->conns[i]))
                conn_close(w, &w->conns[i]);
    }
    trim_pools(w);
    return !(w->draining && w->active == 0);
}

int worker_wait_ms(const struct worker *w)
{
    (void)w;
    return 1000; /* the wheel's resolution; the stop request wakes us through wake_fd */
}

void *worker_main(void *arg)
{
    struct worker *w = arg;
    int rc = w->eng->run(w);
    if (rc < 0)
        errlog(ERRLOG_ERROR, "worker %d: %s", w->id, strerror(-rc));
    return (void *)(intptr_t)rc;
}
