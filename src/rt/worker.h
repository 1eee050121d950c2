/* worker: one thread's share-nothing world: its listener, engine, connections, file cache,
 * timer wheel, buffers and clock. Everything on the request path is reached through it.
 * Must not: be touched by another thread, except w->stop (atomic) and w->wake_fd (written by
 * the main thread to stop it and by its compressor thread when a variant is ready).
 * Ownership: server creates and joins workers; a worker owns everything it points to. */
#ifndef RT_WORKER_H
#define RT_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/http1.h"
#include "rt/timer.h"

struct config;
struct engine_ops;
struct engine_caps;
struct conn;
struct fcache;
struct compressor;

/* Fixed-size buffers recycled through a free list, so steady-state requests allocate nothing. */
struct bufpool {
    void *free;
    size_t size;
    unsigned count; /* buffers handed out and not yet returned */
};

struct worker {
    int id;
    const struct config *cfg;
    const struct engine_ops *eng;
    const struct engine_caps *caps; /* what the kernel offers, probed once before the workers */
    void *engine_state;
    int listen_fd;
    int wake_fd; /* eventfd: stop requests, finished compression jobs */
    atomic_bool stop;
    bool draining;
    bool accepting;
    int64_t drain_deadline;

    int64_t now;       /* monotonic seconds, read once per loop turn */
    int64_t wall;      /* UNIX seconds of date[] */
    char date[32];     /* IMF-fixdate of wall, formatted at most once per second */
    char ok_head[96];  /* static_ok_head(date): "HTTP/1.1 200 OK", Server, Date lines */
    size_t ok_head_len;
    struct timer_wheel wheel;

    struct conn *conns; /* cfg->max_conns slots */
    uint32_t *free_slots;
    uint32_t num_free;
    uint32_t active;

    struct bufpool inbufs;  /* partial request heads */
    struct bufpool outbufs; /* response headers and plans */
    struct fcache *cache;
    struct compressor *compress; /* NULL with --compress off */

    struct http_request req; /* scratch for the request being parsed */
    pthread_t thread;
};

int worker_init(struct worker *w, int id, const struct config *cfg, const struct engine_ops *eng,
                const struct engine_caps *caps, int listen_fd);
void worker_fini(struct worker *w);
void *worker_main(void *arg);

/* Called by the engine once per loop turn: reads the clock, expires timers, drives the drain.
 * Returns false when the worker has drained and the loop should end. */
bool worker_tick(struct worker *w);

/* The longest the loop may sleep before the next tick is due, in milliseconds. */
int worker_wait_ms(const struct worker *w);

void *bufpool_get(struct bufpool *bp);
void bufpool_put(struct bufpool *bp, void *buf);

#endif
