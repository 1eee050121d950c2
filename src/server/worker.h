/* worker: the per-thread composition root: sets up one thread's world from the layers below
 * it (struct runtime, rt/runtime.h: listeners, engine, connections, file cache, timer wheel,
 * buffers and clock, which is all those layers see), installs the protocols and the engine's
 * upcalls, runs the engine's loop and ticks the world once per turn (clock, timers, collected
 * work off the loop, reloads, the drain). Its own state (the stop request, the drain's
 * deadlines, its listeners, the site slot reloads publish into, the QUIC endpoint, the
 * thread) is private to worker.c.
 * Must not: be included below the server (the layers below take struct runtime); be touched by
 * another thread, except through worker_stop, worker_wake and worker_done, and the runtime's
 * counters (read by the metrics thread) and wake_fd (written by its compressor thread).
 * Ownership: server creates and joins workers; a worker owns everything it points to. */
#ifndef RT_WORKER_H
#define RT_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "rt/runtime.h"

struct acme_tokens;
struct accesslog;
struct config;
struct engine_caps;
struct engine_ops;
struct guard;
struct proto_ops;
struct quic_ep;
struct quic_settings;
struct site_slot;

/* What the main thread asks a worker to do (worker_stop). */
enum worker_stop {
    WORKER_RUN,
    WORKER_DRAIN,      /* finish responses in flight within the drain timeout, then end */
    WORKER_HANDOVER,   /* the same, keeping the listener open 1-2 s for a successor's hand-over */
    WORKER_SKIP_DELAY, /* a second stop signal during --drain-delay: the drain proper, now */
    WORKER_ABORT,      /* a second stop signal (a third with --drain-delay): close everything now */
};

struct worker; /* worker.c's own */

/* One of a worker's HTTP/3 UDP sockets (issue 38: one on each TLS listener's address and port). */
struct worker_udp {
    const struct sockaddr *addr; /* bound with SO_REUSEPORT, beside the other workers' */
    socklen_t len;
    bool v6only;       /* an IPv6 address that takes no IPv4 */
    unsigned listener; /* the TLS listener (ls[] index) whose Alt-Svc names this port */
    const char *url;   /* the listener's, for the message when the bind fails */
};

/* A worker's HTTP/3 (worker_parts.h3): worker_new binds udp[0..n) (n <= LISTEN_MAX, at those
 * indices in rt.udp[], with --http3-gso and --http3-gro), makes the one QUIC endpoint on them
 * with quic (its .worker set to the worker's id), names each port in its listener's Alt-Svc
 * and installs HTTP/3 (rt.h3ops). What spans the workers is the server's (server/h3.c) and
 * handed in through quic: the connection-ID layout (ids), the secrets, the certificate files
 * and, after the first worker, that endpoint's certificates to share (shared). Each port's
 * steering stays the server's too: probed before the first worker binds, attached after the
 * last is made. */
struct worker_h3 {
    const struct worker_udp *udp;
    unsigned n;
    const struct quic_settings *quic;
};

/* What a worker is assembled from (worker_new): the process's facts and the pieces the server
 * owns and shares among its workers. worker_new alone installs each into the worker (issue 37:
 * the composition root in one place); the server only says what there is. */
struct worker_parts {
    const struct config *cfg;
    const struct engine_ops *eng;
    const struct engine_caps *caps;
    const struct listener *ls; /* ls[0..n): n <= LISTEN_MAX; the worker owns their fds */
    unsigned n;
    struct site_slot *sites;       /* the slot reloads publish into */
    struct accesslog *alog;        /* the process's access log, or NULL when off */
    struct guard *guard;           /* the workers' one per-client guard, or NULL: each its own */
    struct acme_tokens *tokens;    /* ACME's challenge answers (HTTP-01), or NULL without ACME */
    const struct proto_ops *proto; /* a test protocol that stands in for HTTP/2, or NULL */
    /* certificates on demand (issue 40): bumped (and the worker woken) when a name its parked
     * TLS handshakes may wait for was decided; its next tick tries them again
     * (tls_port_retry). NULL: none. */
    const atomic_uint *ondemand_gen;
    const struct worker_h3 *h3; /* --http3 on some TLS listener, or NULL: no UDP, no HTTP/3 */
};

/* Makes worker `id` from p (the listeners' fds are the worker's from here on, closed on
 * failure too). 0, or -errno after saying why on stderr. */
int worker_new(struct worker **out, int id, const struct worker_parts *p);

/* Frees a worker whose thread never started or has been joined; NULL is nothing. */
void worker_free(struct worker *w);

/* What the layers below see of w: for the server's HTTP/3 steering (the UDP sockets' fds),
 * an on-demand reader's routing, and the metrics thread's counters. */
struct runtime *worker_runtime(struct worker *w);

/* HTTP/3: the worker's QUIC endpoint (NULL without HTTP/3), which it ticks, drains and frees:
 * the next worker shares its certificates, a reload publishes new ones to it. */
struct quic_ep *worker_quic(const struct worker *w);

/* Starts w's thread: 0 or -errno. */
int worker_start(struct worker *w);

/* Waits for w's thread to end: 0, or -errno when its engine's loop failed. */
int worker_join(struct worker *w);

/* From any thread: asks w to stop as `how` says (a later call may escalate it), and wakes it. */
void worker_stop(struct worker *w, enum worker_stop how);

/* From any thread: wakes w to look for a site a reload published. 0 or -errno. */
int worker_wake(struct worker *w);

/* From any thread: whether w's thread has ended. */
bool worker_done(const struct worker *w);

/* The fd of w's listener i (-1 once a drain closed it), for the server's steering. */
int worker_listener_fd(const struct worker *w, unsigned i);

/* Called by the engine once per loop turn (its tick upcall): reads the clock, expires timers,
 * drives the drain. Returns false when the worker has drained and the loop should end. */
bool worker_tick(struct worker *w);

#endif
