/* worker: the per-thread composition root: sets up one thread's world (rt/runtime.h: its
 * listeners, engine, connections, file cache, timer wheel, buffers and clock) from the layers
 * below it, installs the protocols, runs the engine's loop and ticks the world once per turn
 * (clock, timers, collected work off the loop, reloads, the drain).
 * Must not: be touched by another thread, except w->stop and w->done (atomics), w->wake_fd
 * (written by the main thread to stop it or publish a site, and by its compressor thread when
 * a variant is ready) and the shared site slot (under its lock).
 * Ownership: server creates and joins workers; a worker owns everything it points to. */
#ifndef RT_WORKER_H
#define RT_WORKER_H

#include <stdbool.h>

#include "rt/runtime.h"

/* Sets w up to serve on listeners ls[0..n) (n <= LISTEN_MAX; w owns their fds from here on,
 * closed on failure too). */
int worker_init(struct worker *w, int id, const struct config *cfg, const struct engine_ops *eng,
                const struct engine_caps *caps, const struct listener *ls, unsigned n,
                struct site_slot *sites);

/* Whether any of w's listeners is still open. */
bool worker_listening(const struct worker *w);
void worker_fini(struct worker *w);
void *worker_main(void *arg);

/* Called by the engine once per loop turn: reads the clock, expires timers, drives the drain.
 * Returns false when the worker has drained and the loop should end. */
bool worker_tick(struct worker *w);

/* The longest the loop may sleep before the next tick is due, in milliseconds. */
int worker_wait_ms(const struct worker *w);

/* Closes the worker's listener `lst` at the end of a drain's grace period, called by the engine
 * once it no longer accepts on it (io_uring: once the accept is cancelled). A listener the
 * worker owns is emptied first: the connections already queued in it are accepted through
 * accept_one (which returns false to stop) and served, never reset by the close. An inherited
 * one (systemd socket activation) is left with its queue for the next instance. */
void worker_close_listener(struct worker *w, unsigned lst,
                           bool (*accept_one)(struct worker *w, int fd, unsigned lst));

/* The engine's accept failed with err (-errno). For a shortage of fds or memory (EMFILE,
 * ENFILE, ENOBUFS, ENOMEM) this logs (rate-limited), sets w->accept_paused and returns true:
 * the engine stops accepting until worker_accept_resume says so, instead of retrying an accept
 * that fails at once, forever. Other errors return false (retry). */
bool worker_accept_failed(struct worker *w, int err);

/* True once accepting may resume after a pause: a connection has closed (an fd is back) or a
 * clock second has passed. Clears the pause when it says so. */
bool worker_accept_resume(struct worker *w);

#endif
