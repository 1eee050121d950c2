/* conn: a connection's lifecycle, gluing engine, transport and protocol (DESIGN.md): routes the
 * engine's bytes up through the connection's transport (none for cleartext) to its protocol,
 * and the protocol's plans down through the transport to the engine. HTTP/1.1 is the built-in
 * protocol: it feeds bytes to the parser, turns each request into a plan (through serve), hands
 * plans down in order, and owns keep-alive, pipelining, timeouts and close.
 * Must not: make socket calls (the engine does) or decide HTTP semantics (the core does:
 * core/policy.h says what a request does to the connection; conn executes it).
 * Ownership: connections live in their worker's slot array; a slot is reused only after the
 * engine reports conn_closed, and its generation number changes with every reuse. */
#ifndef CONN_H
#define CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/http1.h"
#include "engine/engine.h"
#include "rt/obs.h"
#include "rt/timer.h"

/* Size of a pooled input buffer: a whole request head and what pipelining sends behind it. */
#define CONN_INPUT_CAP (HTTP1_MAX_HEAD + 16384)

struct worker;
struct response;
struct plan;
struct transport_ops;
struct proto_ops;

enum conn_state {
    CONN_FREE,
    CONN_READING,   /* waiting for (the rest of) a request */
    CONN_SENDING,   /* a response is in flight; later requests wait in the input buffer */
    CONN_LINGERING, /* the last response is out and the write side shut; input is read and
                     * dropped until the client closes, so its unread bytes do not turn the
                     * close into a reset that could destroy that response */
    CONN_CLOSING,   /* engine close started; waiting for conn_closed */
};

/* Fields in the order a request touches them: the first two cache lines hold what every
 * completion reads (state, the engine's record, the layers' pointers, the plan on the wire). */
struct pace;

struct conn {
    struct timer timer; /* header, keep-alive or drain deadline */
    int fd;
    uint32_t slot;
    uint32_t gen; /* changes on every reuse: completions for an older gen are stale */
    enum conn_state state;
    bool keep_alive;
    bool recv_on;
    bool eof;               /* the peer shut down its side */
    bool in_request;        /* bytes of a request have arrived since the last response */
    bool served;            /* a response has been started on this connection */
    bool reclaimed;         /* closed to make room at --max-conns (counted in w->reclaiming) */
    bool limit_counted;     /* --limit-conn counts it for its client (rt/guard.h) */
    uint8_t lru;            /* which of the worker's lists c is on (conn.c's enum lru) */
    struct engine_conn eng; /* the engine's (engine/engine.h); conn never reads it */
    const struct transport_ops *xport; /* NULL: cleartext (transport.h) */
    const struct proto_ops *proto;     /* NULL: HTTP/1.1, built in (proto.h) */
    struct response *resp;             /* HTTP/1: the response in flight, or NULL */
    struct plan *out;                  /* the wire plan the engine is sending (conn_wire_send) */
    struct pace *pace;                 /* --limit-rate (pace.h), or NULL: at full speed */
    struct conn *lru_prev, *lru_next;  /* w->idle or w->heads: oldest first */
    uint64_t discard;                  /* body bytes of the current request still to skip */
    uint64_t send_left;                /* bytes the response had left at the last timeout check */
    int64_t linger_end; /* CONN_LINGERING: when to close even if the client still sends */
    char *in;           /* buffered unparsed input, or NULL */
    uint32_t in_len;
    uint32_t in_cap;     /* a pool buffer's size, or more for one grown on the heap */
    void *xstate;        /* the transport's, from open to release */
    void *pstate;        /* the protocol's, from conn_set_proto to release */
    struct obs_conn obs; /* request count, close reason, peer address (rt/obs.h) */
};

/* --limit-rate: paces c's wire at rate bytes a second after its next `after` bytes (rate 0:
 * at full speed again). 0 or -ENOMEM (unpaced then). */
int conn_pace(struct worker *w, struct conn *c, uint64_t rate, uint64_t after);

/* Whether c is open to the engine: its socket is in use and its events matter. */
static inline bool conn_open(const struct conn *c)
{
    return c->state == CONN_READING || c->state == CONN_SENDING || c->state == CONN_LINGERING;
}

/* The worker's connection slots (w->conns, cfg->max_conns of them): made at worker start,
 * freed at its end. Slots are taken only by conn_accepted and given back only by conn_closed.
 * 0 or -ENOMEM. */
int conn_pool_init(struct worker *w);
void conn_pool_fini(struct worker *w);

/* Engine callbacks. */

/* A new socket was accepted on listener `lst` (an index into w->listeners, whose transport the
 * connection gets). Returns its connection (receiving starts on), or NULL when the worker
 * cannot take it now. Then *held tells who owns fd: true when every slot is taken and the
 * oldest idle connection (keep-alive or lingering) is being closed to make room, as nginx's
 * ngx_drain_connections does: fd waits in w->held until conn_held_take hands it back; false
 * when the engine is to close it (full with nothing idle to reclaim, or full in a drain).
 * During a drain a connection it takes gets one answer. */
struct conn *conn_accepted(struct worker *w, int fd, unsigned lst, bool *held);

/* A held socket (see conn_accepted) for which a slot is free now, or -1 (*lst: its listener);
 * the engine starts it as it starts a newly accepted one. Called by the engine after each batch
 * of completions. */
int conn_held_take(struct worker *w, unsigned *lst);

/* Closes every held socket (drain, exit). */
void conn_held_close(struct worker *w);

/* n > 0: bytes arrived (data is valid only during the call); n == 0: the peer closed its
 * side; n < 0: -errno, the connection is dead. */
void conn_received(struct worker *w, struct conn *c, const char *data, ssize_t n);

/* The wire plan c->out finished sending (err == 0) or failed (-errno). */
void conn_sent(struct worker *w, struct conn *c, int err);

/* The file read the transport started with conn_file_read ended: res bytes (0: end of file)
 * or -errno. Not called once the connection is closing. */
void conn_read_done(struct worker *w, struct conn *c, int res);

/* The engine is done with the connection: no operation is in flight and its fd is closed. */
void conn_closed(struct worker *w, struct conn *c);

/* Worker hooks. */

/* The connection's timer expired. */
void conn_timeout(struct worker *w, struct conn *c);

/* A request that waited for work off the loop (site_defer) can be answered now. */
void conn_resume(struct worker *w, struct conn *c);

/* Starts closing c unless it is mid-response, in which case it closes when that ends. */
void conn_drain(struct worker *w, struct conn *c);

/* Begins an orderly close (engine cancel + close). Safe to call more than once. */
void conn_close(struct worker *w, struct conn *c);

/* Transport side (transport.h). After any of these calls the connection may have started
 * closing: a transport checks conn_open(c) before it goes on. */

/* Plaintext for the protocol: n > 0 bytes (valid only during the call), 0 the peer's orderly
 * end, n < 0 a failure (-errno). */
void conn_input(struct worker *w, struct conn *c, const char *data, ssize_t n);

/* The engine sends wire plan p (one at a time); its end comes back through conn_sent, which
 * hands it to the transport's sent. Cleartext: the protocol's plan itself. */
void conn_wire_send(struct worker *w, struct conn *c, struct plan *p);

/* The protocol's plan given to the transport's send is done (0) or failed (-errno). */
void conn_plan_sent(struct worker *w, struct conn *c, int err);

/* The engine shuts the socket's write side. */
void conn_wire_shutdown(struct worker *w, struct conn *c);

/* Kernel TLS (engine/ktls.h), with nothing being sent: keys NULL attaches the "tls" ULP to the
 * socket; else installs the send keys (the kernel's crypto_info, len bytes), after which the
 * socket seals whatever is sent. 0 or -errno. */
int conn_wire_ktls(struct worker *w, struct conn *c, const void *keys, size_t len);

/* The engine reads up to len bytes of file fd at off into buf (the transport's, valid until
 * the end), off the loop; the transport's read_done reports the end (engine_ops.read). */
void conn_file_read(struct worker *w, struct conn *c, int fd, void *buf, uint32_t len,
                    uint64_t off);

/* Protocol side (proto.h). */

/* Sends the protocol's plan p (non-empty, one at a time) through the transport; the protocol's
 * sent reports its end. p and what it points to stay valid until then. */
void conn_send(struct worker *w, struct conn *c, struct plan *p);

/* Turns receiving on or off (off: the protocol has more buffered than it wants). */
void conn_recv(struct worker *w, struct conn *c, bool on);

/* (Re)arms the connection's timer to fire in secs seconds (protocol's timeout). */
void conn_arm(struct worker *w, struct conn *c, unsigned secs);

/* Hands c over to protocol p (from HTTP/1, before any response was sent): p->open, then
 * p->input with data[0..len), the bytes already received for it (may be 0). -errno when open
 * failed (conn then closes c). */
int conn_set_proto(struct worker *w, struct conn *c, const struct proto_ops *p, const char *data,
                   size_t len);

#endif
