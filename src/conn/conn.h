/* conn: a connection's lifecycle, protocol-neutral (DESIGN.md): slots and generations, the
 * protocol's timer, held sockets, the idle queue --max-conns reclaims from, and the routing
 * between layers: the engine's bytes up through the connection's transport (none for
 * cleartext) to its protocol (HTTP/1 from the accept, http/h1.h; HTTP/2 once it takes over),
 * the protocol's plans down through the transport to the engine.
 * Must not: decide HTTP semantics (the protocols and the core do) or make socket calls (the
 * engine does: conn only asks it through w->eng).
 * Ownership: connections live in their worker's slot array; a slot is reused only after the
 * engine reports conn_closed, and its generation number changes with every reuse. */
#ifndef CONN_H
#define CONN_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/peer.h"
#include "core/plan.h"
#include "core/policy.h"
#include "engine/engine.h"
#include "rt/obs.h"
#include "rt/runtime.h"
#include "rt/timer.h"
#include "conn/transport.h"

struct runtime;
struct plan;
struct transport_ops;
struct proto_ops;
struct pace;

enum conn_state {
    CONN_FREE,
    CONN_OPEN,    /* its socket is in use and its events matter */
    CONN_CLOSING, /* engine close started; waiting for conn_closed */
    /* in a slot without a socket (conn_attach: an HTTP/3 connection, whose datagrams are the
     * QUIC endpoint's): no engine operation or timer; its owner ends it */
    CONN_ATTACHED,
};

/* Room for a protocol's per-connection state in the slot itself (HTTP/1's: a connection costs
 * no allocation); a protocol with more (HTTP/2) allocates it and keeps the pointer in pstate. */
#define CONN_PROTO_MEM 80

/* Fields in the order a request touches them: the first two cache lines hold what every
 * completion reads (state, the engine's record, the layers' pointers, the plan on the wire,
 * and the protocol's own state inline). */
struct conn {
    struct timer timer;     /* the protocol's deadline (conn_arm) */
    struct engine_conn eng; /* fd, slot, generation and the engine's state (engine/engine.h) */
    enum conn_state state;
    bool recv_on;       /* receiving asked on (conn_recv); the engine keeps its own copy */
    bool eof;           /* the peer shut down its side (a protocol saw its input end) */
    bool idle;          /* on the worker's idle queue (conn_idle) */
    bool reclaimed;     /* ended to make room at --max-conns (counted in w->conns.reclaiming) */
    bool limit_counted; /* --limit-conn counts it for its client (rt/guard.h) */
    uint8_t lst;        /* the listener it came in on (w->listeners' index): its Alt-Svc */
    const struct transport_ops *xport;  /* NULL: cleartext (transport.h) */
    const struct proto_ops *proto;      /* HTTP/1 from the accept, until conn_set_proto */
    struct pace *pace;                  /* --limit-rate (pace.h), or NULL: at full speed */
    void *xstate;                       /* the transport's, from open to release */
    void *pstate;                       /* the protocol's, from open to release */
    struct conn *idle_prev, *idle_next; /* w->conns.idle: oldest first */
    _Alignas(8) unsigned char proto_mem[CONN_PROTO_MEM]; /* pstate may point here */
    struct obs_conn obs; /* request count, close reason, the peer's address (rt/obs.h) */
};

/* The connection whose engine record e is (the engine hands conn nothing else). */
static inline struct conn *conn_of(struct engine_conn *e)
{
    return (struct conn *)(void *)((char *)e - offsetof(struct conn, eng));
}

/* --limit-rate: paces c's wire at rate bytes a second after its next `after` bytes (rate 0:
 * at full speed again), from now on (HTTP/2: its streams share the rate). 0 or -ENOMEM
 * (unpaced then). */
int conn_pace(struct runtime *w, struct conn *c, uint64_t rate, uint64_t after);

/* The same for the HTTP/1 response about to be sent only: its pacing ends when the bytes of a
 * later request's response go (obs.requests has moved on). */
int conn_pace_response(struct runtime *w, struct conn *c, uint64_t rate, uint64_t after);

/* Makes w send through the paced tables (w->eng's send and w->up's sent look at c->pace):
 * before the first connection is paced (conn_pace does it too), idempotent; the worker's
 * tables are its own again at conn_pool_fini. A worker with no --limit-rate never calls it
 * and pays nothing for pacing. 0 or -ENOMEM. */
int conn_pacing(struct runtime *w);

/* Whether c is open to the engine: its socket is in use and its events matter. */
static inline bool conn_open(const struct conn *c)
{
    return c->state == CONN_OPEN;
}

/* The worker's connection slots (w->conns.slot, cfg->max_conns of them): made at worker start,
 * freed at its end. Slots are taken only by conn_accepted and given back only by conn_closed.
 * 0 or -ENOMEM. */
int conn_pool_init(struct runtime *w);
void conn_pool_fini(struct runtime *w);

/* The connection's client address, one fact per connection: looked up once, by the engine, when
 * the connection is accepted and something will read it (the access log, --basic-auth's
 * per-address bound, the per-client limits of rt/guard); unknown (peer.known false, text "-")
 * otherwise. Nobody else looks it up. */
static inline const struct peer *conn_peer(const struct conn *c)
{
    return &c->obs.peer;
}

/* A connection that no engine operation serves (HTTP/3's: its datagrams are the QUIC
 * endpoint's) in a slot of its own, one of --max-conns' as a TCP connection's is: its
 * generation names it in resume tokens (conn_token; conn_resume wakes it through
 * proto->resume), its obs holds its peer (conn_peer) and request count, and it may join the
 * idle queue (conn_idle: reclaimed for a newcomer through proto->reclaim, which must end it;
 * the slot is free at conn_detach) and the worker's drain reaches it (conn_drain through
 * proto->drain, which announces the end and closes it once idle). Not conn_open: the drain's
 * deadline and the engine leave it to its owner. proto needs resume, reclaim and drain, and
 * read_done when it reads files through the engine (conn_file_read): the engine names the
 * slot and writes the buffer until the read is reported, so the owner detaches no slot with a
 * read in flight (the engine's run returns only once every read has been reported). NULL
 * when every slot is taken. */
struct conn *conn_attach(struct runtime *w, const struct proto_ops *proto, void *pstate);

/* Gives an attached connection's slot back: its owner has ended it. */
void conn_detach(struct runtime *w, struct conn *c);

/* The connection's certificate (transport.h) once a secure transport's handshake is done, for
 * the 421 rule (site_misdirected); NULL in cleartext. The one accessor every protocol reads it
 * through, whatever transport carries it. */
static inline struct conn_cert *conn_cert(struct conn *c)
{
    return c->xport && c->xport->cert ? c->xport->cert(c) : NULL;
}

/* Engine callbacks: the engine's upcalls (engine_upcalls, installed by the worker), each given
 * the connection's engine record. */

/* A new socket was accepted on listener `lst` (an index into w->listeners, whose transport the
 * connection gets). Returns its connection (receiving starts on), or NULL when the worker
 * cannot take it now. Then *held tells who owns fd: true when every slot is taken and the
 * oldest idle connection (keep-alive or lingering) is being closed to make room, as nginx's
 * ngx_drain_connections does: fd waits in w->conns.held until conn_held_take hands it back; false
 * when the engine is to close it (full with nothing idle to reclaim, or full in a drain).
 * During a drain a connection it takes gets one answer. */
struct engine_conn *conn_accepted(struct runtime *w, int fd, unsigned lst, bool *held);

/* A held socket (see conn_accepted) for which a slot is free now, or -1 (*lst: its listener);
 * the engine starts it as it starts a newly accepted one. Called by the engine after each batch
 * of completions. */
int conn_held_take(struct runtime *w, unsigned *lst);

/* Closes every held socket (drain, exit). */
void conn_held_close(struct runtime *w);

/* n > 0: bytes arrived (data is valid only during the call); n == 0: the peer closed its
 * side; n < 0: -errno, the connection is dead. */
void conn_received(struct runtime *w, struct engine_conn *e, const char *data, ssize_t n);

/* The wire plan given to the engine finished sending (err == 0) or failed (-errno). */
void conn_sent(struct runtime *w, struct engine_conn *e, int err);

/* The file read the transport (or an attached connection's protocol) started with
 * conn_file_read ended: res bytes (0: end of file) or -errno. Not called once the connection
 * is closing. */
void conn_read_done(struct runtime *w, struct engine_conn *e, int res);

/* The engine is done with the connection: no operation is in flight and its fd is closed. */
void conn_closed(struct runtime *w, struct engine_conn *e);

/* The engine gives up on a connection it could not start (conn_close, for the upcall). */
void conn_abort(struct runtime *w, struct engine_conn *e);

/* Worker hooks. */

/* The connection's timer expired. */
void conn_timeout(struct runtime *w, struct conn *c);

/* The token a request of c waits with (serve's SERVE_PENDING): c's slot and generation. */
static inline struct resume_token conn_token(const struct conn *c)
{
    return (struct resume_token){c->eng.slot, c->eng.gen};
}

/* A request that waited for work off the loop can be asked again: the protocol of the
 * connection t names resumes what it parked. A token whose connection has closed since (its
 * slot free or reused) is dropped. */
void conn_resume(struct runtime *w, struct resume_token t);

/* Starts closing c unless it is mid-response, in which case it closes when that ends. */
void conn_drain(struct runtime *w, struct conn *c);

/* Begins an orderly close (engine cancel + close). Safe to call more than once. */
void conn_close(struct runtime *w, struct conn *c);

/* Transport side (transport.h). After any of these calls the connection may have started
 * closing: a transport checks conn_open(c) before it goes on. */

/* Plaintext for the protocol: n > 0 bytes (valid only during the call), 0 the peer's orderly
 * end, n < 0 a failure (-errno). */
void conn_input(struct runtime *w, struct conn *c, const char *data, ssize_t n);

/* The engine sends wire plan p (one at a time); its end comes back through conn_sent, which
 * hands it to the transport's sent. Cleartext: the protocol's plan itself. */
static inline void conn_wire_send(struct runtime *w, struct conn *c, struct plan *p)
{
    assert(!plan_done(p));
    w->eng->send(w, &c->eng, p); /* --limit-rate: the paced tables' send (conn_pacing) */
}

/* The protocol's plan given to the transport's send is done (0) or failed (-errno). */
void conn_plan_sent(struct runtime *w, struct conn *c, int err);

/* The engine shuts the socket's write side. */
void conn_wire_shutdown(struct runtime *w, struct conn *c);

/* Kernel TLS (engine/ktls.h), with nothing being sent: keys NULL attaches the "tls" ULP to the
 * socket; else installs the send keys (the kernel's crypto_info, len bytes), after which the
 * socket seals whatever is sent. The engine's operation (engine_ops.ktls). 0 or -errno. */
int conn_wire_ktls(struct runtime *w, struct conn *c, const void *keys, size_t len);

/* The engine reads up to len bytes of file fd at off into buf (the transport's, valid until
 * the end), off the loop; the transport's read_done reports the end (engine_ops.read), or, on
 * a connection without a transport (conn_attach: HTTP/3's), the protocol's. One at a time per
 * connection. */
void conn_file_read(struct runtime *w, struct conn *c, int fd, void *buf, uint32_t len,
                    uint64_t off);

/* Protocol side (proto.h). */

/* Sends the protocol's plan p (non-empty, one at a time) through the transport; the protocol's
 * sent reports its end. p and what it points to stay valid until then. */
static inline void conn_send(struct runtime *w, struct conn *c, struct plan *p)
{
    if (c->xport)
        c->xport->send(w, c, p);
    else
        conn_wire_send(w, c, p);
}

/* Turns receiving on or off (off: the protocol has more buffered than it wants); nothing once
 * the peer has ended its side. */
void conn_recv_set(struct runtime *w, struct conn *c, bool on);
static inline void conn_recv(struct runtime *w, struct conn *c, bool on)
{
    if (c->recv_on != on && !c->eof)
        conn_recv_set(w, c, on);
}

/* The protocol has sent its last byte: the transport ends its stream (TLS: close_notify), then
 * the engine shuts the socket's write side; receiving goes on (a lingering close). */
void conn_shutdown(struct runtime *w, struct conn *c);

/* The protocol says whether c is idle: open, nothing in flight, waiting for its client (HTTP/1
 * between requests or lingering; HTTP/2 with no stream open and nothing to send). Idle
 * connections of every protocol wait on one queue, oldest first, for --max-conns to reclaim
 * (proto_ops.reclaim) when a new connection finds every slot taken. Joining keeps the place of
 * a connection already on it. */
static inline void conn_idle(struct runtime *w, struct conn *c, bool idle)
{
    struct conn_list *q = &w->conns.idle;
    if (idle == c->idle)
        return; /* joining keeps the place of a connection on the queue already */
    if (!idle) {
        if (c->idle_prev)
            c->idle_prev->idle_next = c->idle_next;
        else
            q->first = c->idle_next;
        if (c->idle_next)
            c->idle_next->idle_prev = c->idle_prev;
        else
            q->last = c->idle_prev;
        c->idle_prev = c->idle_next = NULL;
        c->idle = false;
        return;
    }
    if (c->reclaimed || (!conn_open(c) && c->state != CONN_ATTACHED))
        return; /* being closed: not to be picked again */
    c->idle = true;
    c->idle_prev = q->last;
    if (q->last)
        q->last->idle_next = c;
    else
        q->first = c;
    q->last = c;
}

/* (Re)arms the connection's timer to fire in secs seconds (protocol's timeout); a closing
 * connection's timer stays cancelled. The clock has one-second resolution: `now + secs` could
 * be reached after a few milliseconds, so a deadline is rounded up and fires between secs and
 * secs + 1 seconds from now. Inline, as conn_idle: HTTP/1 arms twice per request. */
static inline void conn_arm(struct runtime *w, struct conn *c, unsigned secs)
{
    if (conn_open(c))
        timer_set(&w->wheel, &c->timer, w->now + secs + 1);
}

/* The wait for a client's own close after ours (a lingering close, HTTP/2's GOAWAY): `normal`
 * seconds, or CONN_DRAIN_LINGER_S while the worker drains. The linger keeps a response from a
 * reset by bytes still coming; at a stop, nginx closes idle connections at once, and a
 * browser's pooled connection never reads our close_notify or GOAWAY until it reuses it, so
 * the full wait held every stop for it (a TLS socket a browser opened and never used: 2 s for a
 * first request, then 5 s of linger, past a 10 s stop in CI). */
#define CONN_DRAIN_LINGER_S 1
static inline unsigned conn_linger_s(const struct runtime *w, unsigned normal)
{
    return w->draining && normal > CONN_DRAIN_LINGER_S ? CONN_DRAIN_LINGER_S : normal;
}

/* Hands c over to protocol p (from HTTP/1, before any response was sent): p->open, then
 * p->input with data[0..len), the bytes already received for it (may be 0). -errno when open
 * failed (c stays with its protocol, which closes it). The protocol that gives c up releases
 * its own state itself: conn calls only the new one's release at the close. */
int conn_set_proto(struct runtime *w, struct conn *c, const struct proto_ops *p, const char *data,
                   size_t len);

#endif
