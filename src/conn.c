/* Connection lifecycle; see conn.h.
 *
 * Routing: engine -> conn_received -> transport (or, cleartext, directly) -> conn_input ->
 * protocol (HTTP/1 below, or c->proto); protocol -> conn_send -> transport (or directly) ->
 * conn_wire_send -> engine; the engine's conn_sent goes back the same way. Cleartext costs one
 * NULL test per crossing.
 *
 * One response is in flight per connection at a time: pipelined requests wait, unparsed, in
 * the input buffer and are answered in order as each send completes. Bytes arriving while
 * nothing is buffered are parsed straight from the engine's buffer; only a partial request (or
 * one that must wait behind a response) is copied out, so the engine's buffer returns at once. */
#include "conn.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "core/policy.h"
#include "engine/engine.h"
#include "engine/ktls.h"
#include "proto.h"
#include "rt/errlog.h"
#include "pace.h"
#include "rt/guard.h"
#include "rt/site.h"
#include "rt/stats.h"
#include "rt/worker.h"
#include "serve.h"
#include "tls/xport.h"
#include "transport.h"

/* The input buffer (from the worker's pool) holds a full request head plus what pipelining
 * clients send behind it. When more than INPUT_PAUSE bytes wait, receiving pauses until responses
 * drain them. A pause may take effect late (an engine can have received more already, into
 * buffers it filled ahead), so a deep pipeline may still overflow the pool buffer: it then moves
 * to the heap, doubling up to INPUT_MAX, past which the client is not pipelining but flooding. */
#define INPUT_PAUSE (HTTP1_MAX_HEAD)
#define INPUT_MAX (1u << 20)
/* A response that makes no progress for this long is abandoned (a client that stopped reading). */
#define SEND_TIMEOUT 60
/* Lingering close (nginx's lingering_timeout and lingering_time): input is dropped for up to
 * LINGER_IDLE seconds between reads and LINGER_MAX in all, then the connection closes anyway. */
#define LINGER_IDLE 5
#define LINGER_MAX 30
/* A drain gives a TLS connection that has sent nothing yet this long for its first request (the
 * wheel ticks whole seconds: 1-2 s). */
#define DRAIN_FIRST_REQUEST_S 2

static void process(struct worker *w, struct conn *c);

/* The worker's lists a connection can be on (c->lru), each in the order connections joined it:
 * idle ones are what --max-conns reclaims, oldest first; heads are what --head-memory evicts,
 * oldest first. The two are exclusive: an idle connection has nothing buffered. */
enum lru { LRU_NONE, LRU_IDLE, LRU_HEADS };

static struct conn_list *lru_list(struct worker *w, unsigned which)
{
    return which == LRU_IDLE ? &w->idle : &w->heads;
}

static void lru_unlink(struct worker *w, struct conn *c)
{
    if (c->lru == LRU_NONE)
        return;
    struct conn_list *l = lru_list(w, c->lru);
    if (c->lru_prev)
        c->lru_prev->lru_next = c->lru_next;
    else
        l->first = c->lru_next;
    if (c->lru_next)
        c->lru_next->lru_prev = c->lru_prev;
    else
        l->last = c->lru_prev;
    c->lru_prev = c->lru_next = NULL;
    c->lru = LRU_NONE;
}

/* Puts c on the list its state calls for, keeping its place if it is on it already. Called at
 * the end of every entry point that can change the state. */
static void lru_update(struct worker *w, struct conn *c)
{
    unsigned want = LRU_NONE;
    if (c->proto) /* another protocol's connection: its idleness is not HTTP/1's */
        want = LRU_NONE;
    else if (c->state == CONN_LINGERING ||
             (c->state == CONN_READING && !c->in_request && c->in_len == 0 && c->discard == 0))
        want = LRU_IDLE;
    else if (c->state == CONN_READING && c->in)
        want = LRU_HEADS;
    if (want == c->lru)
        return;
    lru_unlink(w, c);
    if (want == LRU_NONE)
        return;
    struct conn_list *l = lru_list(w, want);
    c->lru = (uint8_t)want;
    c->lru_prev = l->last;
    if (l->last)
        l->last->lru_next = c;
    else
        l->first = c;
    l->last = c;
}

/* Every slot is taken: hold fd for the slot the oldest idle connection frees as it closes.
 * Each held socket has one reclaimed connection closing for it. */
static bool hold(struct worker *w, int fd, unsigned lst)
{
    if (w->held_count == HELD_MAX)
        return false;
    if (w->reclaiming <= w->held_count) {
        struct conn *old = w->idle.first;
        if (!old) {
            errlog_limited(&w->log_full, ERRLOG_WARN,
                           "worker %d: --max-conns %u reached, none idle: refusing a connection",
                           w->id, w->cfg->max_conns);
            return false;
        }
        errlog_limited(&w->log_full, ERRLOG_WARN,
                       "worker %d: --max-conns %u reached: closing idle connections, oldest first",
                       w->id, w->cfg->max_conns);
        old->reclaimed = true;
        w->reclaiming++;
        conn_close(w, old);
    }
    unsigned i = (w->held_first + w->held_count++) % HELD_MAX;
    w->held[i] = fd;
    w->held_lst[i] = (uint8_t)lst;
    return true;
}

int conn_held_take(struct worker *w, unsigned *lst)
{
    if (w->held_count == 0 || w->num_free == 0 || w->draining)
        return -1;
    int fd = w->held[w->held_first];
    *lst = w->held_lst[w->held_first];
    w->held_first = (w->held_first + 1) % HELD_MAX;
    w->held_count--;
    return fd;
}

void conn_held_close(struct worker *w)
{
    while (w->held_count) {
        close(w->held[w->held_first]);
        w->held_first = (w->held_first + 1) % HELD_MAX;
        w->held_count--;
    }
}

/* The clock has one-second resolution: `now + secs` could be reached after a few milliseconds,
 * so a deadline is rounded up and fires between secs and secs + 1 seconds from now. */
static void arm(struct worker *w, struct conn *c, unsigned secs)
{
    timer_set(&w->wheel, &c->timer, w->now + secs + 1);
}

void conn_arm(struct worker *w, struct conn *c, unsigned secs)
{
    if (conn_open(c)) /* a closing connection's timer stays cancelled */
        arm(w, c, secs);
}

static void timer_fired(struct worker *w, struct timer *t)
{
    conn_timeout(w, (struct conn *)((char *)t - offsetof(struct conn, timer)));
}

int conn_pool_init(struct worker *w)
{
    uint32_t n = w->cfg->max_conns;
    /* calloc'd slots cost no memory until touched: idle capacity is free. */
    w->conns = calloc(n, sizeof(*w->conns));
    w->free_slots = calloc(n, sizeof(*w->free_slots));
    if (!w->conns || !w->free_slots) {
        conn_pool_fini(w);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++)
        w->free_slots[n - 1 - i] = i; /* low slots first: fewer pages touched */
    w->num_free = n;
    return 0;
}

void conn_pool_fini(struct worker *w)
{
    /* Every slot is free or still counted active (a worker stopped on an engine error). */
    assert(!w->conns || w->num_free + w->active == w->cfg->max_conns);
    free(w->free_slots);
    free(w->conns);
    w->free_slots = NULL;
    w->conns = NULL;
}

/* Takes a free slot and starts a new generation of it. */
static struct conn *slot_take(struct worker *w)
{
    uint32_t slot = w->free_slots[--w->num_free];
    struct conn *c = &w->conns[slot];
    uint32_t gen = c->gen + 1; /* a never-used slot is zeroed: generation 1 */
    memset(c, 0, sizeof(*c));
    c->slot = slot;
    c->gen = gen;
    return c;
}

/* Gives c's slot back; anything still naming its generation is stale from now on. */
static void slot_put(struct worker *w, struct conn *c)
{
    assert(w->num_free < w->cfg->max_conns);
    c->state = CONN_FREE;
    c->gen++;
    w->free_slots[w->num_free++] = c->slot;
}

struct conn *conn_accepted(struct worker *w, int fd, unsigned lst, bool *held)
{
    *held = false;
    if (w->num_free == 0) {
        *held = !w->draining && hold(w, fd, lst); /* a drain closes held sockets: hold none */
        return NULL;
    }
    const struct listener *l = &w->listeners[lst];
    struct conn *c = slot_take(w);
    c->timer.fire = timer_fired;
    c->fd = fd;
    c->state = CONN_READING;
    c->keep_alive = true;
    c->recv_on = true;
    /* --limit-conn closes the client's connection past N here, before a handshake or a read
     * spends anything on it (README: why not a 503). */
    if (w->guard && !guard_accept(w, c)) {
        slot_put(w, c);
        return NULL; /* the engine closes fd */
    }
    if (l->xport && l->xport->open(w, c, l->xport_ctx) < 0) {
        if (c->limit_counted)
            guard_closed(w, c);
        slot_put(w, c);
        return NULL; /* the engine closes fd */
    }
    c->xport = l->xport;
    w->active++;
    arm(w, c, w->cfg->header_timeout);
    obs_conn_accepted(w, c);
    lru_update(w, c);
    return c;
}

static void release_input(struct worker *w, struct conn *c);

void conn_close(struct worker *w, struct conn *c)
{
    if (c->state == CONN_CLOSING || c->state == CONN_FREE)
        return;
    c->state = CONN_CLOSING;
    lru_unlink(w, c);
    /* Nothing reads the input once closing: give its memory back now, not at conn_closed. */
    release_input(w, c);
    timer_cancel(&c->timer);
    w->eng->close(w, c);
}

static void release_response(struct worker *w, struct conn *c)
{
    if (!c->resp)
        return;
    serve_response_put(w, c->resp);
    c->resp = NULL;
}

static void release_input(struct worker *w, struct conn *c)
{
    if (c->in)
        w->in_bytes -= c->in_cap;
    if (c->in && c->in_cap > CONN_INPUT_CAP)
        free(c->in);
    else if (c->in)
        bufpool_put(&w->inbufs, c->in);
    c->in = NULL;
    c->in_cap = 0;
    c->in_len = 0;
}

void conn_closed(struct worker *w, struct conn *c)
{
    assert(c->state == CONN_CLOSING && c->lru == LRU_NONE);
    if (c->resp) /* closed mid-response (timeout, drain deadline): logged with what was sent */
        obs_request_done(w, c, c->resp, -ECANCELED);
    obs_conn_closed(w, c);
    release_response(w, c);
    release_input(w, c);
    if (c->proto && c->proto->release)
        c->proto->release(w, c);
    if (c->xport)
        c->xport->release(w, c);
    if (c->limit_counted)
        guard_closed(w, c);
    pace_free(&c->pace);
    assert(w->active > 0 && !c->resp && !c->in && !timer_armed(&c->timer));
    slot_put(w, c);
    w->active--;
    if (c->reclaimed)
        w->reclaiming--;
    w->slot_freed = true; /* an fd is back: a paused accept may resume */
}

/* Whether more bytes are welcome: not once the connection is to close after its response, and
 * not while the input buffer holds more than a request head's worth. */
static bool wants_input(const struct conn *c)
{
    return c->keep_alive && c->in_len < INPUT_PAUSE;
}

static void set_recv(struct worker *w, struct conn *c, bool on)
{
    if (c->recv_on != on && !c->eof) {
        c->recv_on = on;
        w->eng->recv(w, c, on);
    }
}

/* Hands a finished response down to the transport and engine. */
static void start_send(struct worker *w, struct conn *c, struct response *r)
{
    c->resp = r;
    c->served = true;
    c->state = CONN_SENDING;
    c->in_request = false;
    if (r->plan.close)
        c->keep_alive = false;
    if (!c->keep_alive)
        set_recv(w, c, false); /* nothing after this request will be read */
    arm(w, c, SEND_TIMEOUT);
    if (r->note.edge || c->pace) /* --limit-rate: this response's site's, or none after one */
        conn_pace(w, c, r->note.edge ? r->note.rate : 0, r->note.edge ? r->note.after : 0);
    conn_send(w, c, &r->plan);
}

/* Answers a request that cannot be parsed and closes afterwards; data[0..len) is what was read
 * of it, for the access log. */
static void fail(struct worker *w, struct conn *c, int status, bool head, const char *data,
                 size_t len)
{
    struct response *r = serve_response_get(w);
    c->keep_alive = false;
    if (!r) {
        conn_close(w, c);
        return;
    }
    serve_error(w, status, head, RESP_H1, r);
    obs_parse_failed(w, c, data, len, r);
    start_send(w, c, r);
}

/* Closes, unanswered, a first line that cannot be HTTP/1 on a cleartext port shared with h2c
 * (its peer would not read an HTTP/1 answer: h2spec 3.5/2), logging it with status 444 as nginx
 * logs a connection it closed without a response; data[0..len) is what was read of it. */
static void refuse(struct worker *w, struct conn *c, const char *data, size_t len)
{
    struct response *r = serve_response_get(w);
    if (r) {
        r->plan = (struct plan){.status = 444};
        obs_parse_failed(w, c, data, len, r);
        obs_request_done(w, c, r, 0);
        serve_response_put(w, r);
    }
    conn_close(w, c);
}

/* Parses and answers requests from data; returns how many bytes were used. Stops after
 * starting a send: the rest waits for conn_sent. */
static size_t consume(struct worker *w, struct conn *c, const char *data, size_t len)
{
    size_t used = 0;
    while (c->state == CONN_READING && used < len) {
        if (c->discard) {
            size_t n = len - used < c->discard ? len - used : (size_t)c->discard;
            c->discard -= n;
            used += n;
            continue;
        }
        /* The header deadline runs from a request's first bytes; a request that arrives whole
         * goes straight to the send deadline, so only a partial one needs it armed. */
        bool first = !c->in_request;
        c->in_request = true;
        if (!c->served && w->h2) {
            /* Prior-knowledge HTTP/2 (RFC 9113 3.3): its preface opens the connection. Until
             * a response was sent, parsing starts at the connection's first byte. */
            int pre = policy_h2_preface(data + used, len - used);
            if (pre == 0) {
                arm(w, c, w->cfg->header_timeout);
                break;
            }
            if (pre > 0) {
                if (conn_set_proto(w, c, w->h2, data + used, len - used) < 0)
                    conn_close(w, c);
                return len;
            }
        }
        struct http_request *req = &w->req;
        int n = http1_parse(data + used, len - used, req);
        if (n == HTTP1_PARTIAL) {
            if (first)
                arm(w, c, w->cfg->header_timeout);
            break;
        }
        if (n == HTTP1_ERROR) {
            if (!c->served && policy_close_unanswered(data + used, len - used, w->h2 != NULL,
                                                      c->xport && c->xport->secure)) {
                refuse(w, c, data + used, len - used);
                return len;
            }
            fail(w, c, req->status, req->method == HTTP_HEAD && req->method_name.p, data + used,
                 len - used);
            return len;
        }
        if (site_defer(w, c, req))
            break; /* answered once a check off the loop ends: conn_resume parses it again */
        used += (size_t)n;

        struct req_policy pol = policy_h1(req, c->keep_alive && !w->draining, len - used);
        pol.secure = c->xport && c->xport->secure;
        pol.tls = c->xport ? tls_xport_conn(c) : NULL; /* a call only over a transport */
        pol.conn = c;
        c->keep_alive = pol.keep_alive;
        c->discard = pol.discard;
        struct response *r = serve_response_get(w);
        if (!r) {
            conn_close(w, c);
            return len;
        }
        serve_request(w, req, &pol, r);
        obs_request(w, c, req, r);
        r->plan.fin_carries_tail = pol.fin_carries_tail;
        start_send(w, c, r);
    }
    return used;
}

/* Makes room for more bytes of input buffers within --head-memory by closing the connections
 * that have waited longest with a partial head (other than c); false when that is not enough.
 * Issue 10: 10 000 clients holding 16 KB partial heads grew a worker by ~200 MB; bounded, a
 * flood of slow heads costs the slowest of them their connection, not the worker its memory. */
static bool input_room(struct worker *w, struct conn *c, size_t more)
{
    while (w->in_bytes + more > w->cfg->head_memory) {
        struct conn *old = w->heads.first == c ? c->lru_next : w->heads.first;
        if (!old)
            return false;
        errlog_limited(&w->log_heads, ERRLOG_WARN,
                       "worker %d: request heads hold %zu bytes (--head-memory %zu): closing "
                       "the oldest partial ones",
                       w->id, w->in_bytes, w->cfg->head_memory);
        conn_close(w, old);
    }
    return true;
}

/* Appends bytes to the input buffer; false when they do not fit. */
static bool buffer_input(struct worker *w, struct conn *c, const char *data, size_t len)
{
    if (len == 0)
        return true;
    if (!c->in) {
        if (!input_room(w, c, CONN_INPUT_CAP) || !(c->in = bufpool_get(&w->inbufs)))
            return false;
        c->in_cap = CONN_INPUT_CAP;
        w->in_bytes += CONN_INPUT_CAP;
    }
    if (len > c->in_cap - c->in_len) {
        size_t cap = c->in_cap;
        while (cap - c->in_len < len && cap < INPUT_MAX)
            cap *= 2;
        if (cap - c->in_len < len || !input_room(w, c, cap - c->in_cap))
            return false;
        char *bigger = malloc(cap);
        if (!bigger)
            return false;
        memcpy(bigger, c->in, c->in_len);
        uint32_t len_kept = c->in_len;
        release_input(w, c);
        c->in = bigger;
        c->in_cap = (uint32_t)cap;
        c->in_len = len_kept;
        w->in_bytes += cap;
    }
    memcpy(c->in + c->in_len, data, len);
    c->in_len += (uint32_t)len;
    return true;
}

/* Answers what the input buffer holds, as far as the connection's state allows. */
static void process(struct worker *w, struct conn *c)
{
    if (c->state == CONN_READING && c->in_len) {
        size_t used = consume(w, c, c->in, c->in_len);
        if (c->state == CONN_CLOSING)
            return;
        c->in_len -= (uint32_t)used;
        if (c->in_len)
            memmove(c->in, c->in + used, c->in_len);
    }
    if (c->state == CONN_READING) {
        if (c->in_len == 0)
            release_input(w, c);
        if (c->eof) {
            conn_close(w, c); /* nothing left to answer */
            return;
        }
    }
    set_recv(w, c, wants_input(c));
}

static void received(struct worker *w, struct conn *c, const char *data, ssize_t n)
{
    if (c->state == CONN_LINGERING) {
        if (n <= 0)
            conn_close(w, c); /* the client has closed (or reset): done */
        else if (w->now < c->linger_end)
            arm(w, c, LINGER_IDLE);
        return; /* otherwise the timer closes it when it falls due */
    }
    if (c->state != CONN_READING && c->state != CONN_SENDING)
        return;
    if (n < 0) {
        c->obs.end = CLOSE_ERROR;
        conn_close(w, c);
        return;
    }
    if (n == 0) {
        c->obs.end = CLOSE_CLIENT;
        c->eof = true;
        c->recv_on = false;
        if (c->state == CONN_READING)
            process(w, c);
        return;
    }
    bool direct = c->state == CONN_READING && c->in_len == 0;
    if (direct) {
        size_t used = consume(w, c, data, (size_t)n);
        if (c->state == CONN_CLOSING)
            return;
        data += used;
        n -= (ssize_t)used;
    }
    if (!buffer_input(w, c, data, (size_t)n)) {
        /* Only a client pipelining far ahead of its responses gets here. */
        c->keep_alive = false;
        if (c->state == CONN_READING)
            fail(w, c, 431, false, c->in_len ? c->in : data, c->in_len ? c->in_len : (size_t)n);
        else
            conn_close(w, c);
        return;
    }
    if (!direct)
        process(w, c); /* the new bytes may complete the buffered request */
    else if (c->state == CONN_READING && c->in_len == 0)
        release_input(w, c);
    /* A drain answers a request that arrived whole; it does not wait for the rest of one. */
    if (w->draining && c->state == CONN_READING && (c->in_len || c->discard))
        conn_close(w, c);
    else if (direct)
        set_recv(w, c, wants_input(c));
}

/* Closing after a response the client did not ask to be the last (an error, a body left
 * unread, a request pipelined behind "close"): bytes it sent may still be unread, and a close
 * with unread bytes sends a reset, which can reach the client before it has read the response
 * and destroy it. So the write side is shut first (the client sees the end of the response),
 * and what still arrives is read and dropped until the client closes or the linger runs out. */
static void linger(struct worker *w, struct conn *c)
{
    release_input(w, c);
    c->discard = 0;
    c->state = CONN_LINGERING;
    c->linger_end = w->now + LINGER_MAX;
    arm(w, c, LINGER_IDLE);
    if (c->xport)
        c->xport->shutdown(w, c);
    else
        w->eng->shutdown(w, c);
    set_recv(w, c, true);
}

static void sent(struct worker *w, struct conn *c, int err)
{
    if (c->state != CONN_SENDING)
        return;
    /* The client asked to close and sent nothing after: no bytes can be waiting (and the close
     * is what sends a held tail). Likewise after its own EOF, or when the worker drains. */
    bool clean = c->resp->plan.fin_carries_tail || c->eof || w->draining;
    /* A transport ends its stream first (TLS: close_notify) through the lingering path, unless
     * the peer has gone already. */
    if (c->xport && !c->eof)
        clean = false;
    obs_request_done(w, c, c->resp, err);
    release_response(w, c);
    if (err)
        c->obs.end = CLOSE_ERROR;
    if (err || !c->keep_alive) {
        if (err || clean)
            conn_close(w, c);
        else
            linger(w, c);
        return;
    }
    c->state = CONN_READING;
    arm(w, c, w->cfg->keepalive_timeout);
    process(w, c);
}

static uint64_t bytes_left(const struct plan *p)
{
    uint64_t left = 0;
    for (unsigned i = p->cur; i < p->nseg; i++)
        left += p->segs[i].len;
    return left;
}

/* Waiting for a request after a response (keep-alive), nothing of the next one arrived. */
static bool between_requests(const struct conn *c)
{
    return c->state == CONN_READING && c->served && !c->in_request && c->in_len == 0 &&
           c->discard == 0 && !c->eof;
}

/* A clean close of a connection between requests (its keep-alive timeout, a drain): a
 * transport ends its stream first (TLS: close_notify, RFC 8446 6.1, as nginx does) by the
 * lingering path; cleartext has nothing to end. */
static void close_between_requests(struct worker *w, struct conn *c)
{
    if (c->xport)
        linger(w, c);
    else
        conn_close(w, c);
}

static void timeout(struct worker *w, struct conn *c)
{
    if (c->state == CONN_SENDING && c->resp) {
        /* Still moving: give it another period. */
        uint64_t left = bytes_left(&c->resp->plan);
        if (left != c->send_left) {
            c->send_left = left;
            arm(w, c, SEND_TIMEOUT);
            return;
        }
    }
    c->obs.end = CLOSE_TIMEOUT;
    if (between_requests(c))
        close_between_requests(w, c);
    else
        conn_close(w, c);
}

static void drain(struct worker *w, struct conn *c)
{
    /* Responses in flight are finished; an idle keep-alive connection or a request head still
     * arriving has none yet. A connection accepted but not yet read from is answered: its
     * request is most likely already in the socket (the listener defers accept until data).
     * Through a transport (TLS) the first bytes were a handshake, and a browser's spare
     * pre-connected socket may never send a request (it would hold the drain to its deadline),
     * while a client that sent its request just before the signal must still be answered (its
     * record may not have been read yet): such a connection gets DRAIN_FIRST_REQUEST_S. */
    c->keep_alive = false;
    if (between_requests(c))
        close_between_requests(w, c);
    else if (c->state == CONN_LINGERING ||
             (c->state == CONN_READING && (c->served || c->in_request || c->in_len)))
        conn_close(w, c);
    else if (c->state == CONN_READING && c->xport && c->xport->secure)
        arm(w, c, DRAIN_FIRST_REQUEST_S);
}

/* The entry points: each ends by putting c on the list its new state calls for. */

void conn_received(struct worker *w, struct conn *c, const char *data, ssize_t n)
{
    if (c->xport)
        c->xport->received(w, c, data, n);
    else
        conn_input(w, c, data, n);
}

void conn_input(struct worker *w, struct conn *c, const char *data, ssize_t n)
{
    if (c->proto) {
        c->proto->input(w, c, data, n);
        if (n < 0)
            conn_close(w, c);
        return;
    }
    received(w, c, data, n);
    lru_update(w, c);
}

/* --limit-rate's side of conn_sent and conn_wire_send: out of line, so that an unpaced
 * connection pays one test and tail calls (callgrind: no frame, nothing inlined differently). */
__attribute__((cold, noinline)) static void paced_send(struct worker *w, struct conn *c,
                                                       struct plan *p)
{
    if (pace_window(c->pace, &w->wheel, w->now, p))
        w->eng->send(w, c); /* else this second's bytes are out: the wheel resumes it */
}

__attribute__((cold, noinline)) static void paced_sent(struct worker *w, struct conn *c, int err)
{
    if (pace_restore(c->pace, c->out) && !err) {
        paced_send(w, c, c->out); /* a window went: the rest, now or at the next second */
        return;
    }
    if (c->xport)
        c->xport->sent(w, c, err);
    else
        conn_plan_sent(w, c, err);
}

/* pace's call back (the wheel's next second): the next window of the plan in flight. */
static void pace_resume(struct worker *w, void *owner)
{
    struct conn *c = owner;
    if (conn_open(c) && c->out && !plan_done(c->out))
        paced_send(w, c, c->out);
}

int conn_pace(struct worker *w, struct conn *c, uint64_t rate, uint64_t after)
{
    return pace_start(&c->pace, w->now, rate, after, pace_resume, c);
}

void conn_sent(struct worker *w, struct conn *c, int err)
{
    if (__builtin_expect(c->pace != NULL, 0)) {
        paced_sent(w, c, err);
        return;
    }
    if (c->xport)
        c->xport->sent(w, c, err);
    else
        conn_plan_sent(w, c, err);
}

void conn_plan_sent(struct worker *w, struct conn *c, int err)
{
    if (c->proto) {
        c->proto->sent(w, c, err);
        return;
    }
    sent(w, c, err);
    lru_update(w, c);
}

void conn_send(struct worker *w, struct conn *c, struct plan *p)
{
    if (c->xport)
        c->xport->send(w, c, p);
    else
        conn_wire_send(w, c, p);
}

void conn_wire_send(struct worker *w, struct conn *c, struct plan *p)
{
    assert(!plan_done(p));
    c->out = p;
    if (__builtin_expect(c->pace != NULL, 0)) {
        paced_send(w, c, p);
        return;
    }
    w->eng->send(w, c);
}

void conn_wire_shutdown(struct worker *w, struct conn *c)
{
    w->eng->shutdown(w, c);
}

int conn_wire_ktls(struct worker *w, struct conn *c, const void *keys, size_t len)
{
    (void)w;
    assert(conn_open(c));
    return keys ? ktls_send_keys(c->fd, keys, len) : ktls_attach(c->fd);
}

void conn_file_read(struct worker *w, struct conn *c, int fd, void *buf, uint32_t len, uint64_t off)
{
    w->eng->read(w, c, fd, buf, len, off);
}

void conn_read_done(struct worker *w, struct conn *c, int res)
{
    if (c->xport && c->xport->read_done)
        c->xport->read_done(w, c, res);
}

void conn_recv(struct worker *w, struct conn *c, bool on)
{
    set_recv(w, c, on);
}

int conn_set_proto(struct worker *w, struct conn *c, const struct proto_ops *p, const char *data,
                   size_t len)
{
    assert(!c->served && !c->proto);
    lru_unlink(w, c);
    c->proto = p;
    int rc = p->open(w, c);
    if (rc < 0) {
        c->proto = NULL; /* nothing to release */
        return rc;
    }
    c->discard = 0;
    c->keep_alive = true;
    if (len)
        p->input(w, c, data, (ssize_t)len);
    return 0;
}

void conn_timeout(struct worker *w, struct conn *c)
{
    if (c->proto) {
        c->proto->timeout(w, c);
        return;
    }
    timeout(w, c);
    lru_update(w, c);
}

void conn_resume(struct worker *w, struct conn *c)
{
    if (c->proto) {
        if (c->proto->resume && conn_open(c))
            c->proto->resume(w, c);
        return;
    }
    if (c->state == CONN_READING)
        process(w, c);
    lru_update(w, c);
}

void conn_drain(struct worker *w, struct conn *c)
{
    if (c->proto) {
        c->proto->drain(w, c);
        return;
    }
    drain(w, c);
    lru_update(w, c);
}
