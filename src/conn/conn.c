/* Connection lifecycle; see conn.h.
 *
 * Routing: engine -> conn_received -> transport (or, cleartext, directly) -> conn_input ->
 * protocol (c->proto: HTTP/1 from the accept); protocol -> conn_send -> transport (or directly)
 * -> conn_wire_send -> engine; the engine's conn_sent goes back the same way. Cleartext costs
 * one NULL test per crossing, a protocol one indirect call. */
#include "conn/conn.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "config/config.h"
#include "core/plan.h"
#include "core/proxy.h"
#include "engine/engine.h"
#include "conn/pace.h"
#include "conn/proto.h"
#include "rt/errlog.h"
#include "rt/guard.h"
#include "rt/runtime.h"
#include "rt/stats.h"
#include "conn/transport.h"

static void paced_tables_free(struct runtime *w);

static void idle_unlink(struct runtime *w, struct conn *c)
{
    conn_idle(w, c, false);
}

/* --max-conns needs c's slot: its protocol ends it at once (HTTP/2 with GOAWAY first, as
 * nginx's idle handler does; HTTP/1, between requests or lingering, by closing). */
static void reclaim(struct runtime *w, struct conn *c)
{
    c->reclaimed = true;
    w->conns.reclaiming++;
    idle_unlink(w, c);
    if (c->proto->reclaim)
        c->proto->reclaim(w, c);
    else
        conn_close(w, c);
}

/* Every slot is taken: hold fd for the slot the oldest idle connection frees as it closes.
 * Each held socket has one reclaimed connection closing for it. */
static bool hold(struct runtime *w, int fd, unsigned lst)
{
    if (w->conns.held_count == HELD_MAX)
        return false;
    if (w->conns.reclaiming <= w->conns.held_count) {
        struct conn *old = w->conns.idle.first;
        if (!old) {
            errlog_limited(&w->conns.log_full, ERRLOG_WARN,
                           "worker %d: --max-conns %u reached, none idle: refusing a connection",
                           w->id, w->cfg->max_conns);
            return false;
        }
        errlog_limited(&w->conns.log_reclaim, ERRLOG_WARN,
                       "worker %d: --max-conns %u reached: closing idle connections, oldest first",
                       w->id, w->cfg->max_conns);
        reclaim(w, old);
    }
    unsigned i = (w->conns.held_first + w->conns.held_count++) % HELD_MAX;
    w->conns.held[i] = fd;
    w->conns.held_lst[i] = (uint8_t)lst;
    return true;
}

int conn_held_take(struct runtime *w, unsigned *lst)
{
    if (w->conns.held_count == 0 || w->conns.num_free == 0 || w->draining)
        return -1;
    int fd = w->conns.held[w->conns.held_first];
    *lst = w->conns.held_lst[w->conns.held_first];
    w->conns.held_first = (w->conns.held_first + 1) % HELD_MAX;
    w->conns.held_count--;
    return fd;
}

void conn_held_close(struct runtime *w)
{
    while (w->conns.held_count) {
        w->eng->drop(w, w->conns.held[w->conns.held_first]);
        w->conns.held_first = (w->conns.held_first + 1) % HELD_MAX;
        w->conns.held_count--;
    }
}

static void timer_fired(struct runtime *w, struct timer *t)
{
    conn_timeout(w, (struct conn *)((char *)t - offsetof(struct conn, timer)));
}

int conn_pool_init(struct runtime *w)
{
    uint32_t n = w->cfg->max_conns;
    /* calloc'd slots cost no memory until touched: idle capacity is free. */
    w->conns.slot = calloc(n, sizeof(*w->conns.slot));
    w->conns.free_slots = calloc(n, sizeof(*w->conns.free_slots));
    if (!w->conns.slot || !w->conns.free_slots) {
        conn_pool_fini(w);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++)
        w->conns.free_slots[n - 1 - i] = i; /* low slots first: fewer pages touched */
    w->conns.num_free = n;
    w->eslots = (struct engine_slots){(unsigned char *)&w->conns.slot[0].eng, sizeof(struct conn)};
    return 0;
}

void conn_pool_fini(struct runtime *w)
{
    paced_tables_free(w);
    /* Every slot is free or still counted active (a worker stopped on an engine error). */
    assert(!w->conns.slot ||
           w->conns.num_free + w->conns.active + w->conns.attached == w->cfg->max_conns);
    free(w->conns.free_slots);
    free(w->conns.slot);
    w->conns.free_slots = NULL;
    w->conns.slot = NULL;
    w->eslots = (struct engine_slots){0};
}

/* Takes a free slot and starts a new generation of it. */
static struct conn *slot_take(struct runtime *w)
{
    uint32_t slot = w->conns.free_slots[--w->conns.num_free];
    struct conn *c = &w->conns.slot[slot];
    uint32_t gen = c->eng.gen + 1; /* a never-used slot is zeroed: generation 1 */
    memset(c, 0, sizeof(*c));      /* the engine's part of c->eng too (engine/engine.h) */
    c->eng.slot = slot;
    c->eng.gen = gen;
    return c;
}

/* Gives c's slot back; anything still naming its generation is stale from now on. */
static void slot_put(struct runtime *w, struct conn *c)
{
    assert(w->conns.num_free < w->cfg->max_conns);
    c->state = CONN_FREE;
    c->eng.gen++;
    w->conns.free_slots[w->conns.num_free++] = c->eng.slot;
}

/* What a connection from a --proxy-protocol-from source holds until its PROXY header is read
 * (issue 38): the listener it came from, and the header's first bytes when a read brought
 * only part of it. */
struct proxy_stage {
    unsigned lst;
    size_t len;
    uint8_t buf[16 + PROXY_V2_MAX_BODY];
};

static const struct transport_ops proxy_reader;
static const struct proto_ops proxy_waiter;

/* The connection's own layers, from its listener: --limit-conn (which closes the client's
 * connection past N here, before a handshake or a read spends anything on it; README: why not
 * a 503), the transport, HTTP/1. 0, or -1 with everything undone but the slot. */
static int conn_start(struct runtime *w, struct conn *c, unsigned lst)
{
    const struct listener *l = &w->listeners[lst];
    if (w->guard && !guard_accept(w, conn_peer(c), &c->limit_counted))
        return -1;
    if (l->xport && l->xport->open(w, c, l->xport_ctx) < 0)
        goto fail;
    c->xport = l->xport;
    c->lst = (uint8_t)lst; /* < LISTEN_MAX */
    c->proto = w->h1;
    if (c->proto->open(w, c) < 0) {
        if (c->xport)
            c->xport->release(w, c);
        c->xport = NULL;
        goto fail;
    }
    return 0;
fail:
    if (c->limit_counted)
        guard_closed(w, conn_peer(c));
    c->limit_counted = false;
    return -1;
}

/* Whether the socket's peer is a balancer that must open with a PROXY header. */
static bool proxied(const struct runtime *w, const struct conn *c)
{
    const struct peer *p = conn_peer(c);
    for (int i = 0; p->known && i < w->cfg->num_proxy_from; i++)
        if (cidr_match(&w->cfg->proxy_from[i], p->family, p->addr))
            return true;
    return false;
}

struct engine_conn *conn_accepted(struct runtime *w, int fd, unsigned lst, bool *held)
{
    *held = false;
    if (w->conns.num_free == 0) {
        *held = !w->draining && hold(w, fd, lst); /* a drain closes held sockets: hold none */
        return NULL;
    }
    struct conn *c = slot_take(w);
    c->timer.fire = timer_fired;
    c->eng.fd = fd;
    c->state = CONN_OPEN;
    c->recv_on = true;
    peer_set(&c->obs.peer, NULL, 0);
    /* A client gone before its accept is closed unread: whatever it sent, nothing can reach
     * it, and without an address a balancer's connection would pass for a direct client's,
     * its PROXY header read as a request line (and logged as a 444 from "-"). */
    if (w->want_peer && !w->eng->peer(w, &c->eng, &c->obs.peer)) {
        slot_put(w, c);
        return NULL; /* the engine closes fd */
    }
    if (w->listeners[lst].proxy || (w->cfg->num_proxy_from && proxied(w, c))) {
        /* Nothing of the connection's own until the header says whose it is. */
        struct proxy_stage *st = malloc(sizeof(*st));
        if (!st) {
            slot_put(w, c);
            return NULL;
        }
        st->lst = lst;
        st->len = 0;
        c->xstate = st;
        c->xport = &proxy_reader;
        c->proto = &proxy_waiter;
        conn_arm(w, c, w->cfg->header_timeout);
    } else if (conn_start(w, c, lst) != 0) {
        slot_put(w, c);
        return NULL; /* the engine closes fd */
    }
    w->conns.active++;
    c->obs.slot = c->eng.slot;
    obs_conn_accepted(w, &c->obs, fd);
    return &c->eng;
}

static void proxy_refuse(struct runtime *w, struct conn *c, const char *why)
{
    stat_add(&w->stats.proxy_refused, 1);
    const struct proxy_stage *st = c->xstate;
    errlog_limited(&w->conns.log_proxy, ERRLOG_WARN, "worker %d: %s from %s %s: closed", w->id, why,
                   st && w->listeners[st->lst].proxy ? "a client of a proxy listener"
                                                     : "--proxy-protocol-from source",
                   conn_peer(c)->text);
    conn_close(w, c);
}

/* The header's client becomes the connection's peer (a LOCAL header, a balancer's health
 * check, and v1's UNKNOWN keep the socket's). */
static void proxy_peer(struct conn *c, const struct proxy_info *pi)
{
    struct sockaddr_storage ss = {0};
    unsigned len = 0;
    if (pi->cmd != PROXY_FORWARDED || pi->family == AF_UNSPEC)
        return;
    if (pi->family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(pi->src_port);
        memcpy(&a->sin_addr, pi->src, 4);
        len = sizeof(*a);
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(pi->src_port);
        memcpy(&a->sin6_addr, pi->src, 16);
        len = sizeof(*a);
    }
    peer_set(&c->obs.peer, (const struct sockaddr *)&ss, len);
}

static void proxy_received(struct runtime *w, struct conn *c, const char *data, ssize_t n)
{
    struct proxy_stage *st = c->xstate;
    if (n <= 0) {
        proxy_refuse(w, c, n == 0 ? "closed before its PROXY header" : "failed before it");
        return;
    }
    /* The header is read in place when one read brings it whole, as it nearly always does;
     * else its pieces gather in the stage's buffer (at most the longest header). */
    const uint8_t *in = (const uint8_t *)data;
    size_t len = (size_t)n, took = 0;
    if (st->len) {
        size_t room = sizeof(st->buf) - st->len;
        took = len < room ? len : room;
        memcpy(st->buf + st->len, data, took);
        st->len += took;
        in = st->buf;
        len = st->len;
    }
    struct proxy_info pi;
    int rc = proxy_parse(in, len, &pi);
    if (rc == PROXY_PARTIAL) {
        if (!st->len) { /* shorter than the buffer: a partial header is shorter than any */
            memcpy(st->buf, data, (size_t)n);
            st->len = (size_t)n;
        }
        return; /* the buffer cannot fill with a partial: the parser says too long first */
    }
    if (rc < 0) {
        proxy_refuse(w, c, proxy_strerror(rc));
        return;
    }
    proxy_peer(c, &pi);
    timer_cancel(&c->timer);
    c->xport = NULL;
    c->xstate = NULL;
    if (conn_start(w, c, st->lst) != 0) {
        free(st);
        c->proto = &proxy_waiter; /* conn_closed calls its release */
        conn_close(w, c);
        return;
    }
    /* The bytes after the header are the connection's own: the rest of the read, or of the
     * buffer and then what of the read was not copied into it. */
    if (!st->len) {
        if ((size_t)rc < len)
            conn_received(w, &c->eng, data + rc, (ssize_t)(len - (size_t)rc));
    } else {
        if ((size_t)rc < st->len)
            conn_received(w, &c->eng, (const char *)st->buf + rc, (ssize_t)(st->len - (size_t)rc));
        if (took < (size_t)n && conn_open(c))
            conn_received(w, &c->eng, data + took, n - (ssize_t)took);
    }
    free(st);
}

static void proxy_release(struct runtime *w, struct conn *c)
{
    (void)w;
    free(c->xstate);
    c->xstate = NULL;
}

/* Never called before the header is read: no protocol has sent anything. */
static void proxy_send(struct runtime *w, struct conn *c, struct plan *p)
{
    (void)p;
    conn_close(w, c);
}

/* Nothing is sent before the header is read: neither the stage nor the waiter hears of it. */
static void sent_nothing(struct runtime *w, struct conn *c, int err)
{
    (void)w, (void)c, (void)err;
}

static void proxy_shutdown(struct runtime *w, struct conn *c)
{
    conn_close(w, c);
}

static const struct transport_ops proxy_reader = {
    .name = "proxy",
    .received = proxy_received,
    .send = proxy_send,
    .sent = sent_nothing,
    .shutdown = proxy_shutdown,
    .release = proxy_release,
};

static void waiter_input(struct runtime *w, struct conn *c, const char *data, ssize_t n)
{
    (void)data, (void)n;
    conn_close(w, c);
}

static void waiter_timeout(struct runtime *w, struct conn *c)
{
    proxy_refuse(w, c, "no PROXY header within --header-timeout");
}

static void waiter_nothing(struct runtime *w, struct conn *c)
{
    (void)w, (void)c;
}

/* The connection's protocol while its header is awaited: a timeout or a drain closes it. */
static const struct proto_ops proxy_waiter = {
    .name = "proxy",
    .input = waiter_input,
    .sent = sent_nothing,
    .timeout = waiter_timeout,
    .drain = conn_close,
    .release = waiter_nothing,
    .resume = waiter_nothing,
    .reclaim = conn_close,
};

void conn_close(struct runtime *w, struct conn *c)
{
    if (c->state != CONN_OPEN)
        return;
    c->state = CONN_CLOSING;
    idle_unlink(w, c);
    timer_cancel(&c->timer);
    w->eng->close(w, &c->eng);
}

void conn_abort(struct runtime *w, struct engine_conn *e)
{
    conn_close(w, conn_of(e));
}

void conn_closed(struct runtime *w, struct engine_conn *e)
{
    struct conn *c = conn_of(e);
    assert(c->state == CONN_CLOSING && !c->idle);
    if (c->proto->release)
        c->proto->release(w, c);
    obs_conn_closed(w, &c->obs);
    if (c->xport)
        c->xport->release(w, c);
    if (c->limit_counted)
        guard_closed(w, conn_peer(c));
    pace_free(&c->pace);
    assert(w->conns.active > 0 && !timer_armed(&c->timer));
    slot_put(w, c);
    w->conns.active--;
    if (c->reclaimed)
        w->conns.reclaiming--;
    w->conns.slot_freed = true; /* an fd is back: a paused accept may resume */
}

struct conn *conn_attach(struct runtime *w, const struct proto_ops *proto, void *pstate)
{
    if (w->conns.num_free == 0)
        return NULL;
    struct conn *c = slot_take(w);
    c->eng.fd = -1;
    c->state = CONN_ATTACHED;
    c->proto = proto;
    c->pstate = pstate;
    c->obs.slot = c->eng.slot;
    /* Not in active: a drain waits for the QUIC endpoint's connections on its own terms
     * (worker_tick), and a TCP accept's "connections open" are sockets. */
    w->conns.attached++;
    return c;
}

void conn_detach(struct runtime *w, struct conn *c)
{
    assert(c->state == CONN_ATTACHED && !timer_armed(&c->timer));
    assert(w->conns.attached > 0);
    idle_unlink(w, c); /* it may end idle (the QUIC idle timeout) */
    slot_put(w, c);
    w->conns.attached--;
    if (c->reclaimed)
        w->conns.reclaiming--;
    w->conns.slot_freed = true; /* a paused accept may resume */
}

void conn_recv_set(struct runtime *w, struct conn *c, bool on)
{
    c->recv_on = on;
    w->eng->recv(w, &c->eng, on);
}

void conn_received(struct runtime *w, struct engine_conn *e, const char *data, ssize_t n)
{
    struct conn *c = conn_of(e);
    if (c->xport)
        c->xport->received(w, c, data, n);
    else if (n > 0) /* cleartext bytes: straight up (a tail call) */
        c->proto->input(w, c, data, n);
    else
        conn_input(w, c, data, n);
}

/* Out of line: conn_received's fast path above stays a tail call with no frame of its own. */
__attribute__((noinline)) void conn_input(struct runtime *w, struct conn *c, const char *data,
                                          ssize_t n)
{
    if (n == 0) { /* the peer's orderly end: nothing more will arrive, nothing more read */
        if (c->recv_on)
            conn_recv_set(w, c, false);
        c->eof = true;
    }
    c->proto->input(w, c, data, n);
    if (n < 0)
        conn_close(w, c);
}

/* --limit-rate's tables: a worker with a paced site calls through copies of its engine's
 * operations and its upcalls whose send and sent look at c->pace (conn_pacing); a worker
 * without one calls the engine and conn_sent directly, so that an unpaced process pays
 * nothing for pacing on a request (issue 28: callgrind, README). */
struct paced_tables {
    struct engine_ops eng;
    struct engine_upcalls up;
    const struct engine_ops *eng_real; /* the engine's own table */
    const struct engine_upcalls *up_real;
};

static struct paced_tables *paced_tables_of(const struct runtime *w);

/* This second's window of the plan being paced (the wheel resumes what does not fit). */
static void paced_window(struct runtime *w, struct conn *c)
{
    if (pace_window(c->pace, &w->wheel, w->now, c->pace->plan))
        paced_tables_of(w)->eng_real->send(w, &c->eng, c->pace->plan);
}

/* The paced table's send: p as it is for a connection not paced, else its window. A pacing
 * for one HTTP/1 response (conn_pace_response) ends when the next request's bytes go. */
static void paced_send(struct runtime *w, struct engine_conn *e, struct plan *p)
{
    struct conn *c = conn_of(e);
    struct pace *pc = c->pace;
    if (pc && pc->once) {
        if (!pc->stamped) {
            pc->stamped = true;
            pc->stamp = c->obs.requests;
        } else if (pc->stamp != c->obs.requests) {
            pace_free(&c->pace);
        }
    }
    if (!c->pace) {
        paced_tables_of(w)->eng_real->send(w, e, p);
        return;
    }
    c->pace->plan = p;
    paced_window(w, c);
}

/* The paced table's sent: a window of the plan went; the rest follows (now or at the next
 * second), or the plan is all out and goes up as conn_sent does. */
static void paced_sent(struct runtime *w, struct engine_conn *e, int err)
{
    struct conn *c = conn_of(e);
    if (c->pace && c->pace->plan && pace_restore(c->pace, c->pace->plan) && !err) {
        paced_window(w, c);
        return;
    }
    conn_sent(w, e, err);
}

static struct paced_tables *paced_tables_of(const struct runtime *w)
{
    assert(w->eng->send == paced_send);
    return (struct paced_tables *)(uintptr_t)w->eng; /* eng is its first member */
}

int conn_pacing(struct runtime *w)
{
    if (w->eng->send == paced_send)
        return 0;
    struct paced_tables *t = malloc(sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->eng_real = w->eng;
    t->up_real = w->up;
    t->eng = *w->eng;
    t->eng.send = paced_send;
    t->up = *w->up;
    t->up.sent = paced_sent;
    w->eng = &t->eng;
    w->up = &t->up;
    return 0;
}

/* conn_pacing's tables go: the worker's own again (its end). */
static void paced_tables_free(struct runtime *w)
{
    if (!w->eng || w->eng->send != paced_send)
        return;
    struct paced_tables *t = paced_tables_of(w);
    w->eng = t->eng_real;
    w->up = t->up_real;
    free(t);
}

/* pace's call back (the wheel's next second): the next window of the plan in flight. */
static void pace_resume(struct runtime *w, void *owner)
{
    struct conn *c = owner;
    if (conn_open(c) && c->pace->plan && !plan_done(c->pace->plan))
        paced_window(w, c);
}

static int pace(struct runtime *w, struct conn *c, uint64_t rate, uint64_t after, bool once)
{
    int rc = rate ? conn_pacing(w) : 0;
    if (rc < 0)
        return rc;
    if ((rc = pace_start(&c->pace, w->now, rate, after, pace_resume, c)) < 0 || !c->pace)
        return rc;
    c->pace->once = once;
    c->pace->stamped = false;
    return 0;
}

int conn_pace(struct runtime *w, struct conn *c, uint64_t rate, uint64_t after)
{
    return pace(w, c, rate, after, false);
}

int conn_pace_response(struct runtime *w, struct conn *c, uint64_t rate, uint64_t after)
{
    return pace(w, c, rate, after, true);
}

void conn_sent(struct runtime *w, struct engine_conn *e, int err)
{
    struct conn *c = conn_of(e);
    if (c->xport)
        c->xport->sent(w, c, err);
    else
        c->proto->sent(w, c, err);
}

void conn_plan_sent(struct runtime *w, struct conn *c, int err)
{
    c->proto->sent(w, c, err);
}

void conn_shutdown(struct runtime *w, struct conn *c)
{
    if (c->xport)
        c->xport->shutdown(w, c);
    else
        w->eng->shutdown(w, &c->eng);
}

void conn_wire_shutdown(struct runtime *w, struct conn *c)
{
    w->eng->shutdown(w, &c->eng);
}

int conn_wire_ktls(struct runtime *w, struct conn *c, const void *keys, size_t len)
{
    assert(conn_open(c));
    return w->eng->ktls(w, &c->eng, keys, len);
}

void conn_file_read(struct runtime *w, struct conn *c, int fd, void *buf, uint32_t len,
                    uint64_t off)
{
    w->eng->read(w, &c->eng, fd, buf, len, off);
}

void conn_read_done(struct runtime *w, struct engine_conn *e, int res)
{
    struct conn *c = conn_of(e);
    /* Whoever asked: the transport (TLS seals file bytes), or, on a connection without one,
     * the protocol (HTTP/3 frames them itself; its transport, QUIC, is not conn's). */
    void (*done)(struct runtime *, struct conn *, int) =
        c->xport ? c->xport->read_done : c->proto->read_done;
    if (done)
        done(w, c, res);
}

int conn_set_proto(struct runtime *w, struct conn *c, const struct proto_ops *p, const char *data,
                   size_t len)
{
    const struct proto_ops *old = c->proto;
    idle_unlink(w, c);
    c->proto = p;
    int rc = p->open(w, c);
    if (rc < 0) {
        c->proto = old;
        return rc;
    }
    if (len)
        p->input(w, c, data, (ssize_t)len);
    return 0;
}

void conn_timeout(struct runtime *w, struct conn *c)
{
    c->proto->timeout(w, c);
}

void conn_resume(struct runtime *w, struct resume_token t)
{
    if (t.owner >= w->cfg->max_conns)
        return;
    struct conn *c = &w->conns.slot[t.owner];
    if (c->eng.gen != t.gen || (!conn_open(c) && c->state != CONN_ATTACHED))
        return; /* closed since: nobody waits */
    if (c->proto->resume)
        c->proto->resume(w, c);
}

void conn_drain(struct runtime *w, struct conn *c)
{
    c->proto->drain(w, c);
}
