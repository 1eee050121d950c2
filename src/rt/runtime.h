/* runtime: what the layers below the worker (conn, the protocols, serve, site, obs, guard,
 * compress, the transports and the engines) take of one worker thread's share-nothing world:
 * its configuration, clock and cached date, timer wheel, buffer pools, file cache and the
 * handles of its off-loop work, connection slots and queues, counters, the engine's operations
 * and the upcall table the engine reports through, the site it serves from, and an opaque
 * pointer to each module's own per-worker state (HTTP/1's, serve's, site's, HTTP/3's).
 * Header only.
 * Must not: carry a fact a module owns (that goes in the module's per-worker state, which only
 * the module reads); carry what only the worker does with its world (its stop request, the
 * drain's and --drain-delay's deadlines, the site slot reloads publish into, its QUIC endpoint,
 * its thread: struct worker, private to rt/worker.c, which embeds this); be touched by another
 * thread, except wake_fd (written by the main thread to stop the worker or publish a site,
 * and by the compressor thread when a variant is ready); include any module above it.
 * Ownership: the worker (rt/worker.h) sets it up, ticks it and tears it down, and owns
 * everything it points to (a module's state is made and freed by that module's functions,
 * called by the worker); the layers below are handed it on each call and keep no copy of
 * anything in it beyond the call, except through the upcall table's callbacks. */
#ifndef RT_RUNTIME_H
#define RT_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/accesslog.h"
#include "rt/bufpool.h"
#include "rt/errlog.h"
#include "rt/headmem.h"
#include "rt/stats.h"
#include "rt/timer.h"

struct config;
struct engine_ops;
struct engine_upcalls;
struct engine_caps;
struct conn;
struct fcache;
struct compressor;
struct site;
struct handover;
struct transport_ops;
struct proto_ops;
struct tokens_reader;
struct guard;
struct runtime;
struct h3worker;
struct h1worker;
struct serve_worker;
struct site_worker;

/* Connections in the order they joined a list (oldest first), linked through the list's own
 * links (conn.idle_*, h1's head_*). */
struct conn_list {
    struct conn *first, *last;
};

/* Accepted sockets waiting for a slot that a reclaimed idle connection is about to free. */
#define HELD_MAX 64

/* A worker's connections (conn.h): the slots and their free list, the idle queue --max-conns
 * reclaims from, and the sockets held for a slot. conn.c writes it (and the worker clears
 * slot_freed as accepting pauses); the engines find a completion's connection in slot[], the
 * worker reads `active` in its drain. */
struct conn_table {
    struct conn *slot; /* cfg->max_conns of them */
    uint32_t *free_slots;
    uint32_t num_free;
    uint32_t active;
    uint32_t attached;          /* slots of connections without a socket (conn_attach: HTTP/3) */
    uint32_t reclaiming;        /* idle connections closed to make room, not yet closed */
    struct conn_list idle;      /* reclaimable at --max-conns: idle of any protocol (conn_idle) */
    bool slot_freed;            /* a connection closed since accepting paused (accept_paused) */
    int held[HELD_MAX];         /* FIFO ring of sockets accepted while full, see conn_accepted */
    uint8_t held_lst[HELD_MAX]; /* ... and the listener each came from */
    unsigned held_first, held_count;
    struct errlog_limit log_full;    /* "all --max-conns slots busy, none idle: refused" */
    struct errlog_limit log_reclaim; /* "... closing idle connections": its own, so a refusal
                                      * logged just before does not hide that reclaims began */
    struct errlog_limit log_proxy;   /* a PROXY header missing, malformed or too long */
};

/* Listening sockets per worker: each --bind entry's HTTP port and TLS port (issue 38). */
#define LISTEN_MAX 16

/* What the worker loop asks of HTTP/3 (h3.h's h3_worker_ops), which sits above it. */
struct worker_h3_ops {
    void (*fini)(struct runtime *w); /* after quic_ep_free */
};

/* One of a worker's listening sockets and the transport its connections get. */
struct listener {
    int fd;                            /* the worker's own fd (-1 once closed in a drain) */
    bool owned;                        /* ours to drain: opened here, not inherited from systemd */
    const struct transport_ops *xport; /* NULL: cleartext */
    void *xport_ctx;                   /* what xport->open is given (e.g. TLS certificates) */
    /* The server's hand-over of this listener's port to a successor (handover.h; one per port,
     * each port its own reuseport group), or NULL: an owned listener is only shut and closed. */
    struct handover *handover;
    /* --bind ... proxy: every connection opens with a PROXY header (nginx's proxy_protocol),
     * whoever sends it; --proxy-protocol-from asks it of its sources on every listener. */
    bool proxy;
    /* One socket every worker holds a dup of (a Unix socket: no SO_REUSEPORT there): a drain
     * only closes the worker's dup, since shutting it would stop every worker's accepts. */
    bool shared;
};

struct udp_port;

/* Where a worker's engine records (engine/engine.h's struct engine_conn) are: slot i's at
 * base + i * stride. conn embeds one in each of its slots and fills this with them
 * (conn_pool_init), so that an engine goes from a tag's slot to the record without knowing the
 * connection around it. */
struct engine_slots {
    unsigned char *base;
    size_t stride;
};

/* The layers below call theirs `w` (the worker's world, as they called the whole worker before
 * issue 26 narrowed what they see). */
struct runtime {
    int id;
    const struct config *cfg;
    const struct engine_ops *eng;
    const struct engine_upcalls *up; /* what the engine calls upward (worker.c installs it) */
    const struct engine_caps *caps;  /* what the kernel offers, probed once before the workers */
    void *engine_state;
    struct engine_slots eslots; /* conn's records for the engine (set with w->conns.slot) */
    /* The worker's listening sockets (struct worker owns them: it closes them in a drain and
     * hands them over): engines accept on each, their tags carry the index, and conn gives a
     * connection its listener's transport. Read-only here. */
    const struct listener *listeners;
    unsigned nlisteners;
    /* The protocol every connection starts with (proto.h): HTTP/1.1 (http/h1.h). */
    const struct proto_ops *h1;
    /* HTTP/2 when enabled (proto.h), or NULL: HTTP/1 only. A connection switches to it when
     * it opens with the HTTP/2 preface (h2c), or when its transport negotiated it (ALPN "h2":
     * the transport calls conn_set_proto(w, c, w->h2, NULL, 0)). Set before the engine starts. */
    const struct proto_ops *h2;
    /* HTTP/3 (--http3): the worker's UDP sockets, one on each TLS listener's address and port
     * (issue 38), nudp of them (0: none); the worker's one QUIC endpoint is on all of them.
     * Set by worker_new before the engine runs; the engine reads each when it is readable
     * (udp_port_read), its tags carrying the index. */
    struct udp_port *udp[LISTEN_MAX];
    unsigned nudp;
    /* HTTP/3's per-worker state (h3.c: its connections, its cold-file readers), or NULL, and
     * what the worker loop asks of it (installed by worker_new with the endpoint), or NULL. */
    struct h3worker *h3;
    const struct worker_h3_ops *h3ops;
    /* Automatic HTTPS (issue 27): this worker's reader of the HTTP-01 answers (acme/tokens.h),
     * or NULL without --acme-email. Set by the server before the engine starts. */
    struct tokens_reader *acme;
    int wake_fd; /* eventfd: stop, a new site, finished compression jobs */
    bool draining;
    /* --drain-delay (issue 19): stopping, but the drain has not begun. The health path answers
     * 503 while everything else is served as usual (keep-alive, HTTP/2 streams, new
     * connections) until the worker starts the drain proper. */
    bool delaying;
    bool accepting; /* false once a drain stopped accepting on the listener */

    struct site *site; /* the root and MIME table this worker serves from */
    unsigned site_gen;

    /* Accepting pauses when the process is out of fds (EMFILE, ENFILE) or memory, and resumes
     * when a connection closes or the clock second changes (the accept_resume upcall). */
    bool accept_paused;

    int64_t now;      /* monotonic seconds, read once per loop turn */
    int64_t wall;     /* UNIX seconds of date[] */
    char date[32];    /* IMF-fixdate of wall, formatted at most once per second */
    char ok_head[96]; /* static_ok_head(date): "HTTP/1.1 200 OK", Server, Date lines */
    size_t ok_head_len;
    struct timer_wheel wheel;

    struct conn_table conns; /* conn's */

    struct bufpool inbufs;  /* partial request heads */
    struct bufpool outbufs; /* response headers and plans */
    struct bufpool h2bufs;  /* HTTP/2 sessions' output and header-block buffers (h2.h) */
    /* What unfinished requests hold, whatever they speak (HTTP/1's input buffers, HTTP/2's
     * kept heads and half-read frames), bounded by --head-memory, oldest holder reclaimed
     * first (rt/headmem.h). */
    struct headmem heads;
    struct errlog_limit log_limit; /* guard's refusals (its guard may be the workers' one) */
    struct guard *guard; /* per-client limits (rt/guard.h), or NULL when none is configured */
    struct fcache *cache;
    struct compressor *compress; /* NULL with --compress off */
    struct authstate *auth;      /* --basic-auth verifications (rt/auth.h) */
    /* The modules' own per-worker state, each allocated, read and freed by its module alone
     * (opaque here; the worker makes them with the rest of its world): HTTP/1's scratch
     * request (http/h1.h; its partial heads are on w->heads, with HTTP/2's), serve's
     * per-site HSTS and Alt-Svc lines (serve.h), site's route cache (rt/site.h). */
    struct h1worker *h1w;
    struct serve_worker *servew;
    struct site_worker *sitew;
    /* Whether a new connection's client address is looked up (conn_peer): the access log, a
     * site's --basic-auth (its per-address bound) or the per-client limits (w->guard) will read
     * it. */
    bool want_peer;
    struct accesslog *alog; /* the process's access log, or NULL when off */
    struct accesslog_buf logbuf;
    char features[96];  /* the engine's features found, for the metrics' info line */
    struct stats stats; /* read by the metrics thread (stats.h) */
};

#endif
