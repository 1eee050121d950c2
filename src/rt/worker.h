/* worker: the per-thread composition root: sets up one thread's world from the layers below
 * it (struct runtime, rt/runtime.h: listeners, engine, connections, file cache, timer wheel,
 * buffers and clock, which is all those layers see), installs the protocols and the engine's
 * upcalls, runs the engine's loop and ticks the world once per turn (clock, timers, collected
 * work off the loop, reloads, the drain). Its own state (the stop request, the drain's
 * deadlines, the site slot reloads publish into, the QUIC endpoint, the thread) is here.
 * Must not: be included below the server (the layers below take struct runtime); be touched by
 * another thread, except stop and done (atomics), rt.wake_fd (written by the main thread to
 * stop it or publish a site, and by its compressor thread when a variant is ready) and the
 * shared site slot (under its lock).
 * Ownership: server creates and joins workers; a worker owns everything it points to. */
#ifndef RT_WORKER_H
#define RT_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "rt/runtime.h"

struct quic_ep;
struct site_slot;

/* stop, set by the main thread: what the worker is asked to do. */
enum worker_stop {
    WORKER_RUN,
    WORKER_DRAIN,      /* finish responses in flight within the drain timeout, then end */
    WORKER_HANDOVER,   /* the same, keeping the listener open 1-2 s for a successor's hand-over */
    WORKER_SKIP_DELAY, /* a second stop signal during --drain-delay: the drain proper, now */
    WORKER_ABORT,      /* a second stop signal (a third with --drain-delay): close everything now */
};

/* Not to be copied once worker_init ran: rt.listeners points into it. */
struct worker {
    struct runtime rt; /* what the layers below see; the upcalls find the worker from it */
    atomic_int stop;   /* enum worker_stop */
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
    /* HTTP/3: the QUIC endpoint on rt.udp, or NULL. Set by the server before the engine runs;
     * worker_tick runs its timers and drain. */
    struct quic_ep *quic;
    pthread_t thread;
};

/* Sets w up to serve on listeners ls[0..n) (n <= LISTEN_MAX; w owns their fds from here on,
 * closed on failure too). */
int worker_init(struct worker *w, int id, const struct config *cfg, const struct engine_ops *eng,
                const struct engine_caps *caps, const struct listener *ls, unsigned n,
                struct site_slot *sites);

void worker_fini(struct worker *w);
void *worker_main(void *arg);

/* Called by the engine once per loop turn (its tick upcall): reads the clock, expires timers,
 * drives the drain. Returns false when the worker has drained and the loop should end. */
bool worker_tick(struct worker *w);

#endif
