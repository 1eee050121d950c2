/* engine: the table of operations a worker's event loop offers to conn, the table of upcalls
 * it reports through, and its selection.
 * Must not: know HTTP; engines only move bytes, and report every operation's end upward
 * through w->up (struct engine_upcalls), never by name. Only engine files mention io_uring or
 * epoll.
 * Ownership: each worker owns one engine instance (w->engine_state); one thread uses it. */
#ifndef ENGINE_ENGINE_H
#define ENGINE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rt/runtime.h"

struct runtime;
struct plan;
struct config;
struct engine_caps;
struct peer;

/* A connection as the engines see it: the socket, the slot and generation its operations are
 * tagged with (engine/tag.h), the plan on the wire, and the engine's own bookkeeping. struct
 * conn embeds it (conn.eng) so that a completion, which touches the connection anyway, finds it
 * on the same cache lines rather than in a per-slot array of the engine's (fewer cache misses
 * per request at 1000 connections: bench/README.md, "Lab notes"); the engine is handed this
 * record, never the connection, and finds a completion's record by its slot (engine_conn_at).
 * fd, slot and gen are conn's: it sets them when it takes a slot (gen changes with every reuse)
 * and the engine only reads them. The rest is the engine's, zeroed by conn with the slot; each
 * engine says what its flags mean. */
struct engine_conn {
    int fd;            /* conn's: the accepted socket */
    uint32_t slot;     /* conn's: the index of the connection in its worker's slots */
    uint32_t gen;      /* conn's: changes on every reuse; completions for an older gen are stale */
    uint32_t inflight; /* operations submitted whose final completion has not arrived */
    uint32_t flags;
    int err;                  /* the result of a completion reported later */
    int32_t rres;             /* a file read's result reported later (engine_ops.read) */
    struct plan *out;         /* the plan engine_ops.send was given, until conn_sent */
    struct engine_conn *next; /* the engine's list of connections with a deferred completion */
};

/* The record of the connection in slot `slot` (a tag's slot field, below the slots' count). */
static inline struct engine_conn *engine_conn_at(const struct engine_slots *s, uint32_t slot)
{
    return (struct engine_conn *)(void *)(s->base + (size_t)slot * s->stride);
}

/*
 * Completion-based, like io_uring: an operation is started on a connection's record, and its
 * end is reported later through the upcalls (received / sent / closed). The epoll engine emulates
 * this by trying the non-blocking call at once and finishing it on readiness. Every callback runs
 * on the worker's thread, from inside run().
 */
struct engine_ops {
    const char *name;
    /* Sets up the worker's ring or epoll set and starts accepting on every w->listeners[]; -errno.
     */
    int (*init)(struct runtime *w);
    void (*fini)(struct runtime *w);
    /* Runs the loop until the tick upcall reports the worker has drained, then until every
     * file read in flight (engine_ops.read) has been reported, serving nothing else meanwhile:
     * a read of a connection with no socket (HTTP/3's attached slot) outlives the drain's
     * deadline, and its buffer must not be freed while the engine may still write it. 0 or
     * -errno (then reads may still be in flight). */
    int (*run)(struct runtime *w);
    /* Delivers the connection's bytes through conn_received while on; pauses when off (the
     * connection has more buffered than it wants). A connection starts with receiving on. */
    void (*recv)(struct runtime *w, struct engine_conn *c, bool on);
    /* Sends plan p from its current position to the end (advancing it as bytes go), then calls
     * the sent upcall. One at a time per connection; p stays valid until then. */
    void (*send)(struct runtime *w, struct engine_conn *c, struct plan *p);
    /* Shuts the socket's write side (the client sees the end of the responses) while receiving
     * goes on; failures are ignored (the lingering connection ends by its timer). */
    void (*shutdown)(struct runtime *w, struct engine_conn *c);
    /* Cancels the connection's operations, closes its socket, then calls conn_closed. */
    void (*close)(struct runtime *w, struct engine_conn *c);
    /* Stops accepting new connections (drain). */
    void (*stop_accept)(struct runtime *w);
    /* Reads up to len bytes of file fd at off into buf, then calls conn_read_done with the
     * bytes read or -errno, without the loop ever waiting for the disk (issue 14): io_uring a
     * READ operation; epoll preadv2(RWF_NOWAIT) at once (a page cache hit) and, when the file
     * is cold, a reader thread of the engine's. For a transport that must copy file bytes
     * (TLS), and for a connection with no socket (fd -1: an HTTP/3 connection's slot, whose
     * streams take turns); at most one per connection. buf and fd stay valid until the read
     * is reported, or, when the connection closes meanwhile, until conn_closed (which waits
     * for the read). */
    void (*read)(struct runtime *w, struct engine_conn *c, int fd, void *buf, uint32_t len,
                 uint64_t off);
    /* Fills *out with the connection's client address (a Unix socket's client has none):
     * false, *out unknown, when the socket has no peer any more (the client reset it while it
     * waited in the accept queue; its bytes may still be there to read). conn asks once per
     * connection; nobody else looks the address up. */
    bool (*peer)(struct runtime *w, struct engine_conn *c, struct peer *out);
    /* Kernel TLS on the connection's socket (engine/ktls.h), with nothing being sent: keys NULL
     * attaches the "tls" ULP; else installs the send keys (the kernel's crypto_info, len
     * bytes), after which the socket seals whatever is sent. 0 or -errno. */
    int (*ktls)(struct runtime *w, struct engine_conn *c, const void *keys, size_t len);
    /* Closes a socket accepted but never started (held for a slot that did not come). */
    void (*drop)(struct runtime *w, int fd);
};

/*
 * What an engine calls upward, all of it: the worker installs the table (w->up, worker.c)
 * before the engine starts, and the engines name nothing above them. conn's ends of the
 * operations (conn.h documents each), and the worker's loop hooks (rt/worker.c).
 */
struct engine_upcalls {
    /* conn: a connection's life */
    struct engine_conn *(*accepted)(struct runtime *w, int fd, unsigned lst, bool *held);
    int (*held_take)(struct runtime *w, unsigned *lst);
    void (*received)(struct runtime *w, struct engine_conn *c, const char *data, ssize_t n);
    void (*sent)(struct runtime *w, struct engine_conn *c, int err);
    void (*read_done)(struct runtime *w, struct engine_conn *c, int res);
    void (*close)(struct runtime *w, struct engine_conn *c);
    void (*closed)(struct runtime *w, struct engine_conn *c);
    /* the worker: its loop */
    bool (*tick)(struct runtime *w);
    int (*wait_ms)(const struct runtime *w);
    bool (*listening)(const struct runtime *w);
    void (*close_listener)(struct runtime *w, unsigned lst,
                           bool (*accept_one)(struct runtime *w, int fd, unsigned lst));
    bool (*accept_failed)(struct runtime *w, int err);
    bool (*accept_resume)(struct runtime *w);
    void (*loop_turn)(struct runtime *w, unsigned enters, unsigned completions);
};

extern const struct engine_ops engine_uring;
extern const struct engine_ops engine_epoll;

/*
 * Chooses the engine once per process: probes the kernel into *caps (engine/caps.h), then
 * io_uring when caps_decide says every feature the uring engine needs works, else epoll (for
 * ENGINE_AUTO), printing one line that says why. Returns NULL after printing why, when
 * ENGINE_URING was asked for and cannot be had. verbose prints *caps. Workers read *caps
 * (w->caps) and never probe again.
 */
const struct engine_ops *engine_choose(int kind, bool verbose, struct engine_caps *caps);

/* Fills caps with what io_uring offers here, trying for real what its opcode probe cannot tell
 * (uring_probe.c); never fails: caps_decide judges the result. */
void uring_probe(struct engine_caps *caps);

#endif
