/* HTTP/2 in the protocol slot; see h2conn.h.
 *
 * Timers: while a stream is open or output is in flight the connection's timer is the stall
 * deadline (H2_STALL_S without a send completing or a request arriving: the client stopped
 * reading, or keeps its window shut); idle, it is --keepalive-timeout. Either ends with GOAWAY
 * and, H2_BYE_S later if the client has not gone, the close. The idle one comes in two parts:
 * after H2_TRIM_S the session gives back what its last burst of streams left (h2_trim), then
 * the rest of the keep-alive time runs. A request whose body is still coming has a deadline of
 * its own besides (--body-timeout, h2_deadline): the timer is whichever falls due first.
 *
 * Memory: what the session holds for unfinished requests (h2_unfinished: heads kept for their
 * body, its buffer while a frame or header block is half read) is charged to the worker's
 * ledger (w->heads, rt/headmem.h) with HTTP/1's partial heads, under one --head-memory: a
 * flood of either protocol costs the oldest holders of both their connection, not the worker
 * its memory. The holder is the connection, not the stream: a reclaim must give the bytes back
 * at once, and closing the connection is what does that for every kind of bytes it holds (a
 * half-read frame belongs to no stream); the connection holding longest goes first. */
#include "http/h2/h2conn.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "conn/conn.h"
#include "core/logfmt.h"
#include "core/policy.h"
#include "http/h2/h2.h"
#include "rt/fcache.h"
#include "rt/headmem.h"
#include "rt/obs.h"
#include "rt/runtime.h"
#include "http/serve.h"
#include "conn/transport.h"

#define H2_STALL_S 60  /* as HTTP/1's send timeout */
#define H2_BYE_S 5     /* after our GOAWAY, the client's time to finish and close */
#define H2_DEFERRED 16 /* streams waiting for a password check at once; more are refused */
#define H2_TRIM_S 2    /* idle this long, h2_trim (not at once: load comes in bursts) */

struct h2conn {
    struct h2_session *s;
    struct runtime *w;
    struct conn *c;
    bool sending;     /* a plan from h2_output is with conn_send */
    bool progress;    /* a send completed or a request arrived since the timer was armed */
    bool busy;        /* the timer is the stall deadline (else the idle one) */
    bool bye;         /* our GOAWAY is out: the next timeout closes */
    bool closing;     /* finished, write side shut: input is dropped until the client closes */
    bool trim;        /* the idle timer is H2_TRIM_S, for h2_trim; the keep-alive rest follows */
    bool reclaim;     /* --max-conns took the connection: close once our GOAWAY is sent */
    bool evicted;     /* the ledger (--head-memory) took it: closed, nothing more is charged */
    int64_t stall_at; /* busy: the stall deadline (w->now seconds) */
    size_t charged;   /* bytes of h2_unfinished on the worker's ledger */
    struct headmem_holder hold;
    unsigned ndeferred;
    int32_t deferred[H2_DEFERRED]; /* parked streams, whose request h2_hold keeps (SERVE_PENDING) */
};

static int64_t now_ms(const struct runtime *w)
{
    return w->now * 1000;
}

/* serve said the request must wait (SERVE_PENDING): the stream is parked (as an HTTP/1
 * request waits, unparsed, in its connection's input) until conn_resume calls h2c_resume, or
 * refused when too many wait already. */
static void park(struct h2conn *h, int32_t id)
{
    if (h->ndeferred == H2_DEFERRED || h2_hold(h->s, id) < 0) {
        h2_reset(h->s, id);
        return;
    }
    h->deferred[h->ndeferred++] = id;
    h->progress = true;
}

/* The pre-encoded representation fields of the entry r sends (serve_rep_entry), made by its
 * first HTTP/2 response and kept with it, so that later responses on any connection do not
 * encode them again. h2 sends them so only where r's field lines hold them verbatim. */
static const struct hpack_pre *pre_of(struct runtime *w, const struct response *r)
{
    struct fentry *e = serve_rep_entry(r);
    if (!e)
        return NULL;
    if (!e->wire_parts[FCACHE_WIRE_H2]) {
        char lines[SERVE_REP_LINES];
        e->wire_parts[FCACHE_WIRE_H2] =
            h2_pre_new(lines, serve_rep_lines(e, lines), fcache_id(w->cache));
    }
    return e->wire_parts[FCACHE_WIRE_H2];
}

static void on_request(void *user, int32_t id, const struct http_request *req, int status)
{
    struct h2conn *h = user;
    struct runtime *w = h->w;
    struct conn *c = h->c;
    struct req_policy pol = policy_fields();
    pol.secure = c->xport && c->xport->secure; /* an error's access-log line too (its port) */
    pol.listener = c->lst;
    if (!status) {
        pol.cert = conn_cert(c);
        pol.peer = conn_peer(c);
        pol.resume = conn_token(c);
    }
    struct response *r;
    if (serve_handoff(w, &c->obs, req, status, &pol, LOGFMT_HTTP2, &r) == SERVE_PENDING) {
        park(h, id);
        return;
    }
    if (!r) {
        h2_reset(h->s, id);
        return;
    }
    h->progress = true;
    if (r->note.edge) {
        if (r->note.interim_len) /* --early-hints: best effort (the 200 has them too) */
            (void)h2_interim(h->s, id, 103, r->note.interim, r->note.interim_len);
        /* --limit-rate: the connection's wire, once, at the first paced response's rate (its
         * streams share it; nginx paces each request). */
        if (r->note.rate && !c->pace)
            (void)conn_pace(w, c, r->note.rate, r->note.after);
    }
    int rc = h2_respond_plan(h->s, id, &r->plan, pre_of(w, r), r);
    if (rc < 0) {
        obs_request_done(w, &c->obs, &r->obs, &r->plan, rc);
        serve_response_put(w, r);
    }
}

static void on_done(void *user, void *token, int err)
{
    struct h2conn *h = user;
    struct response *r = token;
    obs_request_done(h->w, &h->c->obs, &r->obs, &r->plan, err);
    serve_response_put(h->w, r);
}

static void *on_buf_get(void *user)
{
    struct h2conn *h = user;
    return bufpool_get(&h->w->h2bufs);
}

static void on_buf_put(void *user, void *buf)
{
    struct h2conn *h = user;
    bufpool_put(&h->w->h2bufs, buf);
}

static const struct h2_hooks hooks = {on_request, on_done, on_buf_get, on_buf_put};

/* The ledger takes this connection back for --head-memory: closed at once, as an HTTP/1
 * connection with a partial head is; its charge goes now (the session follows at release). */
static void reclaimed(void *ctx, struct headmem_holder *hold)
{
    struct runtime *w = ctx;
    struct h2conn *h = (struct h2conn *)(void *)((char *)hold - offsetof(struct h2conn, hold));
    headmem_unlist(&w->heads, &h->hold);
    headmem_uncharge(&w->heads, h->charged);
    h->charged = 0;
    h->evicted = true;
    h2_shed(h->s); /* now, not at release: the next holder's bytes are on their way */
    conn_close(w, h->c);
}

/* Brings the ledger to what the session holds now: room is made for more by reclaiming the
 * oldest other holders, and a connection that alone holds more than --head-memory goes. */
static void account(struct runtime *w, struct h2conn *h)
{
    size_t now = h->evicted || !conn_open(h->c) ? 0 : h2_unfinished(h->s);
    if (now > h->charged &&
        !headmem_room(&w->heads, &h->hold, now - h->charged, w->cfg->head_memory, w, w->id)) {
        reclaimed(w, &h->hold);
        return;
    }
    headmem_uncharge(&w->heads, h->charged);
    headmem_charge(&w->heads, now);
    h->charged = now;
    if (now)
        headmem_list(&w->heads, &h->hold, reclaimed);
    else
        headmem_unlist(&w->heads, &h->hold);
}

/* Arms the stall deadline (renewed by progress) or a body's, whichever is first. */
static void arm_busy(struct runtime *w, struct conn *c, struct h2conn *h)
{
    if (h->progress || !h->busy)
        h->stall_at = w->now + H2_STALL_S;
    int64_t at = h->stall_at;
    int64_t body = h2_deadline(h->s);
    if (body != INT64_MAX && (body + 999) / 1000 < at)
        at = (body + 999) / 1000;
    conn_arm(w, c, at > w->now ? (unsigned)(at - w->now) : 1);
}

/* Sends what the session has, closes when it is finished, and keeps the timer right. */
static void after(struct runtime *w, struct conn *c, struct h2conn *h)
{
    /* A body overdue: its timer may have been pushed by the client's traffic (every input
     * re-arms it), so the deadline is checked here as well as when the timer fires. */
    if (!h->bye && !h->closing && h2_deadline(h->s) <= now_ms(w))
        h2_expire(h->s, now_ms(w));
    if (!h->sending) {
        struct plan *p = h2_output(h->s);
        if (p) {
            h->sending = true;
            conn_send(w, c, p);
            if (!conn_open(c))
                return;
        }
    }
    if (c->eof && !h->sending && h->ndeferred == 0) {
        /* The client shut its side and nothing is left to send now: what remains waits for
         * a WINDOW_UPDATE or a request body that cannot come any more. */
        conn_close(w, c);
        return;
    }
    account(w, h);
    if (!conn_open(c))
        return;
    if (!h->sending && h2_finished(h->s)) {
        /* As HTTP/1's lingering close: the client may still be sending (a PING behind its
         * GOAWAY), and closing with unread bytes would reset the connection under our last
         * frames. Shut the write side, drop what arrives, close at its end or H2_BYE_S. */
        h->closing = true;
        conn_shutdown(w, c);
        if (conn_open(c)) {
            conn_arm(w, c, conn_linger_s(w, H2_BYE_S));
            conn_idle(w, c, true); /* as a lingering HTTP/1 connection: reclaimable */
        }
        return;
    }
    bool busy = h->sending || h2_open_streams(h->s) > 0;
    conn_idle(w, c, !busy && h->ndeferred == 0);
    if (h->bye)
        return;
    unsigned keepalive = w->cfg->keepalive_timeout;
    if (busy)
        arm_busy(w, c, h);
    else
        conn_arm(w, c, keepalive > H2_TRIM_S ? H2_TRIM_S : keepalive);
    h->trim = !busy && keepalive > H2_TRIM_S;
    h->busy = busy;
    h->progress = false;
}

static int h2c_open(struct runtime *w, struct conn *c)
{
    struct h2conn *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    const struct h2_opts opts = {.stall_ms = H2_STALL_S * 1000,
                                 .body_ms = (int)w->cfg->body_timeout * 1000};
    h->w = w;
    h->c = c;
    int rc = h2_new(&h->s, &opts, &hooks, h);
    if (rc < 0) {
        free(h);
        return rc;
    }
    c->pstate = h;
    return 0;
}

static void h2c_input(struct runtime *w, struct conn *c, const char *data, ssize_t n)
{
    struct h2conn *h = c->pstate;
    if (n < 0)
        return; /* conn closes the connection */
    if (n == 0 && !h->closing && !h->reclaim && h2_open_streams(h->s)) {
        /* The client shut its side (after its GOAWAY, often): the requests it sent whole are
         * still answered, as after its GOAWAY alone (RFC 9113 6.8); those still waiting for
         * input never get it. */
        h2_peer_closed(h->s);
        after(w, c, h);
        return;
    }
    if (n == 0 || h->closing || h->reclaim) { /* the client is gone, or we are */
        if (n == 0)
            conn_close(w, c);
        return;
    }
    h2_recv(h->s, data, (size_t)n, now_ms(w));
    after(w, c, h);
}

static void h2c_sent(struct runtime *w, struct conn *c, int err)
{
    struct h2conn *h = c->pstate;
    h->sending = false;
    if (err || h->reclaim) {
        conn_close(w, c);
        return;
    }
    h2_sent(h->s, now_ms(w));
    h->progress = true;
    after(w, c, h);
}

/* Ends the session with GOAWAY (a graceful one when idle or draining, a stall's otherwise) and
 * gives the client H2_BYE_S to go. */
static void bye(struct runtime *w, struct conn *c, struct h2conn *h, bool stalled)
{
    if (stalled)
        h2_check(h->s, INT64_MAX / 2);
    else
        h2_goaway(h->s);
    after(w, c, h);
    if (!conn_open(c))
        return;
    h->bye = true;
    conn_arm(w, c, conn_linger_s(w, H2_BYE_S));
}

static void h2c_timeout(struct runtime *w, struct conn *c)
{
    struct h2conn *h = c->pstate;
    if (h->bye || h->closing || h->reclaim) {
        conn_close(w, c);
        return;
    }
    if (h->trim) {
        h->trim = false;
        h2_trim(h->s);
        conn_arm(w, c, w->cfg->keepalive_timeout - H2_TRIM_S);
        return;
    }
    if (h->busy && w->now < h->stall_at) { /* a body's deadline came first */
        h2_expire(h->s, now_ms(w));
        after(w, c, h);
        return;
    }
    bye(w, c, h, h->busy);
}

static void h2c_drain(struct runtime *w, struct conn *c)
{
    struct h2conn *h = c->pstate;
    /* Streams in flight finish (the worker's drain deadline bounds them); new ones are refused. */
    h2_goaway(h->s);
    after(w, c, h);
    if (conn_open(c) && (h->bye || h->closing))
        conn_arm(w, c, conn_linger_s(w, H2_BYE_S)); /* already waiting for the client: less */
}

/* Checks off the loop ended: each waiting stream's request is parsed and answered again (or
 * put aside again while its own check is still running); h2_free releases what a close leaves. */
static void h2c_resume(struct runtime *w, struct conn *c)
{
    struct h2conn *h = c->pstate;
    int32_t waiting[H2_DEFERRED];
    unsigned n = h->ndeferred;
    memcpy(waiting, h->deferred, n * sizeof(waiting[0]));
    h->ndeferred = 0;
    for (unsigned i = 0; i < n && conn_open(c); i++)
        h2_replay(h->s, waiting[i]);
    if (conn_open(c))
        after(w, c, h);
}

/* --max-conns needs this idle connection's slot: GOAWAY (NO_ERROR, naming the last stream
 * taken, so the client knows nothing was lost) and close as soon as it is on the wire, as
 * nginx's idle handler does; no lingering, a new client waits for the slot. */
static void h2c_reclaim(struct runtime *w, struct conn *c)
{
    struct h2conn *h = c->pstate;
    h->reclaim = true;
    struct plan *p = NULL;
    if (!h->closing && !h->sending) {
        h2_goaway(h->s);
        p = h2_output(h->s);
    }
    if (!p) {
        conn_close(w, c);
        return;
    }
    h->sending = true;
    conn_send(w, c, p);
    if (conn_open(c))
        conn_arm(w, c, H2_BYE_S); /* a client that does not read: the timer closes it */
}

static void h2c_release(struct runtime *w, struct conn *c)
{
    struct h2conn *h = c->pstate;
    headmem_unlist(&w->heads, &h->hold);
    headmem_uncharge(&w->heads, h->charged);
    h2_free(h->s); /* every response still held comes back through on_done */
    free(h);
    c->pstate = NULL;
}

const struct proto_ops proto_h2 = {
    .name = "h2",
    .open = h2c_open,
    .input = h2c_input,
    .sent = h2c_sent,
    .timeout = h2c_timeout,
    .drain = h2c_drain,
    .release = h2c_release,
    .resume = h2c_resume,
    .reclaim = h2c_reclaim,
};
