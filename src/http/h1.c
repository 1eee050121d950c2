/* HTTP/1.1 in the protocol slot; see h1.h.
 *
 * One response is in flight per connection at a time: pipelined requests wait, unparsed, in
 * the input buffer and are answered in order as each send completes. Bytes arriving while
 * nothing is buffered are parsed straight from the engine's buffer; only a partial request (or
 * one that must wait behind a response, or for serve's SERVE_PENDING) is copied out, so the
 * engine's buffer returns at once. */
#include "http/h1.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "core/policy.h"
#include "core/rules.h"
#include "rt/runtime.h"
#include "http/serve.h"
#include "conn/transport.h"

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

static void process(struct runtime *w, struct conn *c);

/* Whether c was handed to another protocol (the HTTP/2 preface) during the call that is
 * returning: its HTTP/1 state is then only to be given back. */
static inline bool switched(const struct conn *c)
{
    return c->proto != &proto_h1;
}

/* HTTP/1's per-worker state. */
struct h1worker {
    struct http_request req; /* scratch for the request being parsed */
};

struct h1worker *h1_worker_new(void)
{
    return calloc(1, sizeof(struct h1worker));
}

void h1_worker_free(struct h1worker *hw)
{
    free(hw);
}

/* The worker's ledger of unfinished requests (w->heads, rt/headmem.h): a connection with a
 * partial head buffered is on its list, from which --head-memory reclaims the oldest holder
 * whatever protocol it speaks; its input buffers are charged there whether or not it is. */
static void reclaim(void *ctx, struct headmem_holder *hold);

static void heads_unlink(struct runtime *w, struct conn *c)
{
    struct h1 *h = h1_of(c);
    if (!h->on_heads)
        return;
    headmem_unlist(&w->heads, &h->hold);
    h->on_heads = false;
}

static void heads_link(struct runtime *w, struct conn *c)
{
    struct h1 *h = h1_of(c);
    if (h->on_heads)
        return;
    h->on_heads = true;
    headmem_list(&w->heads, &h->hold, reclaim);
}

/* Puts c on the queue its state calls for: conn's idle queue (between requests, or lingering:
 * what --max-conns reclaims; conn keeps a closing connection off it) or the heads list (a
 * partial head buffered; a closing connection's input is released, which takes it off). Called
 * at the end of every entry point that can change the state. */
static void update_lists(struct runtime *w, struct conn *c)
{
    struct h1 *h = h1_of(c);
    bool idle = h->state == H1_LINGERING;
    bool heads = false;
    if (h->state == H1_READING) {
        idle = !h->in_request && h->in_len == 0 && h->discard == 0;
        heads = !idle && h->in;
    }
    conn_idle(w, c, idle);
    if (heads != h->on_heads) {
        if (heads)
            heads_link(w, c);
        else
            heads_unlink(w, c);
    }
}

/* Gives the input buffer's memory back (to the pool, or the heap for a grown one). */
static void free_input(struct runtime *w, struct h1 *h)
{
    if (h->in)
        headmem_uncharge(&w->heads, h->in_cap);
    if (h->in && h->in_cap > H1_INPUT_CAP)
        free(h->in);
    else if (h->in)
        bufpool_put(&w->inbufs, h->in);
    h->in = NULL;
    h->in_cap = 0;
    h->in_len = 0;
}

static void release_input(struct runtime *w, struct conn *c)
{
    heads_unlink(w, c);
    free_input(w, h1_of(c));
}

/* Closes c; nothing reads its input once closing, so that memory goes back now, not when the
 * engine reports the close. */
static void close_conn(struct runtime *w, struct conn *c)
{
    release_input(w, c);
    conn_close(w, c);
}

static void release_response(struct runtime *w, struct conn *c)
{
    struct h1 *h = h1_of(c);
    if (!h->resp)
        return;
    serve_response_put(w, h->resp);
    h->resp = NULL;
}

/* Whether more bytes are welcome: not once the connection is to close after its response, and
 * not while the input buffer holds more than a request head's worth. */
static bool wants_input(const struct h1 *h)
{
    return h->keep_alive && h->in_len < INPUT_PAUSE;
}

/* A response serve noted (SERVE_NOTED, issue 28): --limit-rate paces it (conn_pace_response:
 * this response only). Out of line, and reached only through serve's result: a response
 * without issue 28's options pays nothing here. */
__attribute__((cold, noinline)) static void noted(struct runtime *w, struct conn *c,
                                                  const struct response *r)
{
    if (r->note.rate)
        conn_pace_response(w, c, r->note.rate, r->note.after);
}

/* Hands a finished response down to the transport and engine. */
static void start_send(struct runtime *w, struct conn *c, struct response *r)
{
    struct h1 *h = h1_of(c);
    h->resp = r;
    h->served = true;
    h->state = H1_SENDING;
    h->in_request = false;
    if (r->plan.close)
        h->keep_alive = false;
    if (!h->keep_alive)
        conn_recv(w, c, false); /* nothing after this request will be read */
    conn_arm(w, c, SEND_TIMEOUT);
    conn_send(w, c, &r->plan);
}

/* Answers a request that cannot be parsed and closes afterwards; data[0..len) is what was read
 * of it, for the access log. */
static void fail(struct runtime *w, struct conn *c, int status, bool head, const char *data,
                 size_t len)
{
    struct response *r = serve_response_get(w);
    h1_of(c)->keep_alive = false;
    if (!r) {
        close_conn(w, c);
        return;
    }
    serve_error(w, status, head, RESP_H1, r);
    obs_parse_failed(w, &c->obs, data, len, &r->obs, &r->plan, r->note.quiet);
    start_send(w, c, r);
}

/* Closes a connection without an answer (rules_h1_refused), logging it with `status`
 * (RULES_UNANSWERED) as nginx logs a connection it closed without a response; data[0..len) is
 * what was read of it. */
static void refuse(struct runtime *w, struct conn *c, int status, const char *data, size_t len)
{
    struct response *r = serve_response_get(w);
    if (r) {
        r->plan = (struct plan){.status = (uint16_t)status};
        obs_parse_failed(w, &c->obs, data, len, &r->obs, &r->plan, r->note.quiet);
        obs_request_done(w, &c->obs, &r->obs, &r->plan, 0);
        serve_response_put(w, r);
    }
    close_conn(w, c);
}

/* Parses and answers requests from data; returns how many bytes were used. Stops after
 * starting a send (the rest waits for the send's end), at a request serve says must wait (it
 * stays unparsed until h1_resume), or when the connection switched to HTTP/2 (all used). */
static size_t consume(struct runtime *w, struct conn *c, const char *data, size_t len)
{
    struct h1 *h = h1_of(c);
    size_t used = 0;
    while (h->state == H1_READING && used < len) {
        if (h->discard) {
            size_t n = len - used < h->discard ? len - used : (size_t)h->discard;
            h->discard -= n;
            used += n;
            continue;
        }
        /* The header deadline runs from a request's first bytes; a request that arrives whole
         * goes straight to the send deadline, so only a partial one needs it armed. */
        bool first = !h->in_request;
        h->in_request = true;
        if (!h->served && w->h2) {
            /* Prior-knowledge HTTP/2 (RFC 9113 3.3): its preface opens the connection. Until
             * a response was sent, parsing starts at the connection's first byte. */
            int pre = policy_h2_preface(data + used, len - used);
            if (pre == 0) {
                conn_arm(w, c, w->cfg->header_timeout);
                break;
            }
            if (pre > 0) {
                if (conn_set_proto(w, c, w->h2, data + used, len - used) < 0)
                    close_conn(w, c);
                return len;
            }
        }
        struct http_request *req = &w->h1w->req;
        int n = http1_parse(data + used, len - used, req);
        if (n == HTTP1_PARTIAL) {
            if (first)
                conn_arm(w, c, w->cfg->header_timeout);
            break;
        }
        if (n == HTTP1_ERROR) {
            int status = rules_h1_refused(req->status, !h->served, data + used, len - used,
                                          w->h2 != NULL, c->xport && c->xport->secure);
            if (status == RULES_UNANSWERED)
                refuse(w, c, status, data + used, len - used);
            else
                fail(w, c, status, req->method == HTTP_HEAD && req->method_name.p, data + used,
                     len - used);
            return len;
        }
        struct req_policy pol =
            policy_h1(req, h->keep_alive && !w->draining, len - used - (size_t)n);
        pol.secure = c->xport && c->xport->secure;
        pol.listener = c->lst;
        pol.cert = conn_cert(c); /* a call only over a transport */
        pol.peer = conn_peer(c);
        pol.resume = conn_token(c);
        struct response *r;
        enum serve_result sr = serve_handoff(w, &c->obs, req, 0, &pol, 0, &r);
        if (__builtin_expect(sr != SERVE_DONE, 0)) {
            if (sr == SERVE_PENDING) /* parked unparsed in the input until h1_resume */
                break;
            noted(w, c, r);
        }
        if (!r) {
            close_conn(w, c);
            return len;
        }
        used += (size_t)n;
        h->keep_alive = pol.keep_alive;
        h->discard = pol.discard;
        r->plan.fin_carries_tail = pol.fin_carries_tail;
        start_send(w, c, r);
    }
    return used;
}

/* Makes room for more bytes of input buffers within --head-memory by closing the connections
 * that have waited longest with a partial head (other than c); false when that is not enough.
 * Issue 10: 10 000 clients holding 16 KB partial heads grew a worker by ~200 MB; bounded, a
 * flood of slow heads costs the slowest of them their connection, not the worker its memory. */
static bool input_room(struct runtime *w, struct conn *c, size_t more)
{
    return headmem_room(&w->heads, &h1_of(c)->hold, more, w->cfg->head_memory, w, w->id);
}

/* The ledger reclaims this connection: it closes (close_conn gives its input back at once). */
static void reclaim(void *ctx, struct headmem_holder *hold)
{
    struct h1 *h = (struct h1 *)(void *)((char *)hold - offsetof(struct h1, hold));
    struct conn *c = (struct conn *)(void *)((char *)h - offsetof(struct conn, proto_mem));
    close_conn(ctx, c);
}

/* Appends bytes to the input buffer; false when they do not fit. */
static bool buffer_input(struct runtime *w, struct conn *c, const char *data, size_t len)
{
    struct h1 *h = h1_of(c);
    if (len == 0)
        return true;
    if (!h->in) {
        if (!input_room(w, c, H1_INPUT_CAP) || !(h->in = bufpool_get(&w->inbufs)))
            return false;
        h->in_cap = H1_INPUT_CAP;
        headmem_charge(&w->heads, H1_INPUT_CAP);
    }
    if (len > h->in_cap - h->in_len) {
        size_t cap = h->in_cap;
        while (cap - h->in_len < len && cap < INPUT_MAX)
            cap *= 2;
        if (cap - h->in_len < len || !input_room(w, c, cap - h->in_cap))
            return false;
        char *bigger = malloc(cap);
        if (!bigger)
            return false;
        memcpy(bigger, h->in, h->in_len);
        uint32_t len_kept = h->in_len;
        free_input(w, h); /* c keeps its place on the heads list */
        h->in = bigger;
        h->in_cap = (uint32_t)cap;
        h->in_len = len_kept;
        headmem_charge(&w->heads, cap);
    }
    memcpy(h->in + h->in_len, data, len);
    h->in_len += (uint32_t)len;
    return true;
}

/* Answers what the input buffer holds, as far as the connection's state allows. */
static void process(struct runtime *w, struct conn *c)
{
    struct h1 *h = h1_of(c);
    if (h->state == H1_READING && h->in_len) {
        size_t used = consume(w, c, h->in, h->in_len);
        if (!conn_open(c) || switched(c)) {
            release_input(w, c);
            return;
        }
        h->in_len -= (uint32_t)used;
        if (h->in_len)
            memmove(h->in, h->in + used, h->in_len);
    }
    if (h->state == H1_READING) {
        if (h->in_len == 0)
            release_input(w, c);
        if (c->eof) {
            close_conn(w, c); /* nothing left to answer */
            return;
        }
    }
    conn_recv(w, c, wants_input(h));
}

static void received(struct runtime *w, struct conn *c, const char *data, ssize_t n)
{
    struct h1 *h = h1_of(c);
    if (!conn_open(c))
        return;
    if (h->state == H1_LINGERING) {
        if (n <= 0)
            close_conn(w, c); /* the client has closed (or reset): done */
        else if (w->now < h->linger_end)
            conn_arm(w, c, conn_linger_s(w, LINGER_IDLE));
        return; /* otherwise the timer closes it when it falls due */
    }
    if (n < 0) {
        c->obs.end = CLOSE_ERROR;
        close_conn(w, c);
        return;
    }
    if (n == 0) { /* conn has marked the end (c->eof) */
        c->obs.end = CLOSE_CLIENT;
        if (h->state == H1_READING)
            process(w, c);
        return;
    }
    bool direct = h->state == H1_READING && h->in_len == 0;
    if (direct) {
        size_t used = consume(w, c, data, (size_t)n);
        if (!conn_open(c) || switched(c)) {
            release_input(w, c);
            return;
        }
        data += used;
        n -= (ssize_t)used;
    }
    if (!buffer_input(w, c, data, (size_t)n)) {
        /* Only a client pipelining far ahead of its responses gets here. */
        h->keep_alive = false;
        int status = rules_h1_overflow(h->state == H1_READING);
        if (status)
            fail(w, c, status, false, h->in_len ? h->in : data, h->in_len ? h->in_len : (size_t)n);
        else
            close_conn(w, c);
        return;
    }
    if (!direct)
        process(w, c); /* the new bytes may complete the buffered request */
    else if (h->state == H1_READING && h->in_len == 0)
        release_input(w, c);
    if (!conn_open(c) || switched(c))
        return;
    /* A drain answers a request that arrived whole; it does not wait for the rest of one. */
    if (w->draining && h->state == H1_READING && (h->in_len || h->discard))
        close_conn(w, c);
    else if (direct)
        conn_recv(w, c, wants_input(h));
}

/* Closing after a response the client did not ask to be the last (an error, a body left
 * unread, a request pipelined behind "close"): bytes it sent may still be unread, and a close
 * with unread bytes sends a reset, which can reach the client before it has read the response
 * and destroy it. So the write side is shut first (the client sees the end of the response),
 * and what still arrives is read and dropped until the client closes or the linger runs out. */
static void linger(struct runtime *w, struct conn *c)
{
    struct h1 *h = h1_of(c);
    release_input(w, c);
    h->discard = 0;
    h->state = H1_LINGERING;
    h->linger_end = w->now + conn_linger_s(w, LINGER_MAX);
    conn_arm(w, c, conn_linger_s(w, LINGER_IDLE));
    conn_shutdown(w, c);
    conn_recv(w, c, true);
}

static void sent(struct runtime *w, struct conn *c, int err)
{
    struct h1 *h = h1_of(c);
    if (h->state != H1_SENDING || !conn_open(c))
        return;
    /* The client asked to close and sent nothing after: no bytes can be waiting (and the close
     * is what sends a held tail). Likewise after its own EOF, or when the worker drains. */
    bool clean = h->resp->plan.fin_carries_tail || c->eof || w->draining;
    /* A transport ends its stream first (TLS: close_notify) through the lingering path, unless
     * the peer has gone already. */
    if (c->xport && !c->eof)
        clean = false;
    obs_request_done(w, &c->obs, &h->resp->obs, &h->resp->plan, err);
    release_response(w, c);
    if (err)
        c->obs.end = CLOSE_ERROR;
    if (err || !h->keep_alive) {
        if (err || clean)
            close_conn(w, c);
        else
            linger(w, c);
        return;
    }
    h->state = H1_READING;
    conn_arm(w, c, w->cfg->keepalive_timeout);
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
static bool between_requests(const struct conn *c, const struct h1 *h)
{
    return h->state == H1_READING && h->served && !h->in_request && h->in_len == 0 &&
           h->discard == 0 && !c->eof;
}

/* A clean close of a connection between requests (its keep-alive timeout, a drain): a
 * transport ends its stream first (TLS: close_notify, RFC 8446 6.1, as nginx does) by the
 * lingering path; cleartext has nothing to end. */
static void close_between_requests(struct runtime *w, struct conn *c)
{
    if (c->xport)
        linger(w, c);
    else
        close_conn(w, c);
}

static void timeout(struct runtime *w, struct conn *c)
{
    struct h1 *h = h1_of(c);
    if (h->state == H1_SENDING && h->resp) {
        /* Still moving: give it another period. */
        uint64_t left = bytes_left(&h->resp->plan);
        if (left != h->send_left) {
            h->send_left = left;
            conn_arm(w, c, SEND_TIMEOUT);
            return;
        }
    }
    c->obs.end = CLOSE_TIMEOUT;
    if (between_requests(c, h))
        close_between_requests(w, c);
    else
        close_conn(w, c);
}

static void drain(struct runtime *w, struct conn *c)
{
    struct h1 *h = h1_of(c);
    /* Responses in flight are finished; an idle keep-alive connection or a request head still
     * arriving has none yet. A connection accepted but not yet read from is answered: its
     * request is most likely already in the socket (the listener defers accept until data).
     * Through a transport (TLS) the first bytes were a handshake, and a browser's spare
     * pre-connected socket may never send a request (it would hold the drain to its deadline),
     * while a client that sent its request just before the signal must still be answered (its
     * record may not have been read yet): such a connection gets DRAIN_FIRST_REQUEST_S. */
    h->keep_alive = false;
    if (between_requests(c, h))
        close_between_requests(w, c);
    else if (h->state == H1_LINGERING ||
             (h->state == H1_READING && (h->served || h->in_request || h->in_len)))
        close_conn(w, c);
    else if (h->state == H1_READING && c->xport && c->xport->secure)
        conn_arm(w, c, DRAIN_FIRST_REQUEST_S);
}

/* The protocol operations: each ends by putting c on the queue its new state calls for. */

static int h1_open(struct runtime *w, struct conn *c)
{
    struct h1 *h = h1_of(c);
    *h = (struct h1){.state = H1_READING, .keep_alive = true};
    c->pstate = h;
    conn_arm(w, c, w->cfg->header_timeout);
    update_lists(w, c);
    return 0;
}

static void h1_input(struct runtime *w, struct conn *c, const char *data, ssize_t n)
{
    received(w, c, data, n);
    if (!switched(c))
        update_lists(w, c);
}

static void h1_sent(struct runtime *w, struct conn *c, int err)
{
    sent(w, c, err);
    if (!switched(c))
        update_lists(w, c);
}

static void h1_timeout(struct runtime *w, struct conn *c)
{
    timeout(w, c);
    update_lists(w, c);
}

static void h1_drain(struct runtime *w, struct conn *c)
{
    drain(w, c);
    update_lists(w, c);
}

/* A check off the loop ended: the request parked in the input is parsed and asked again. */
static void h1_resume(struct runtime *w, struct conn *c)
{
    if (h1_of(c)->state == H1_READING)
        process(w, c);
    if (!switched(c))
        update_lists(w, c);
}

static void h1_release(struct runtime *w, struct conn *c)
{
    struct h1 *h = h1_of(c);
    if (h->resp) /* closed mid-response (timeout, drain deadline): logged with what was sent */
        obs_request_done(w, &c->obs, &h->resp->obs, &h->resp->plan, -ECANCELED);
    release_response(w, c);
    release_input(w, c);
    c->pstate = NULL;
}

const struct proto_ops proto_h1 = {
    .name = "http/1.1",
    .open = h1_open,
    .input = h1_input,
    .sent = h1_sent,
    .timeout = h1_timeout,
    .drain = h1_drain,
    .release = h1_release,
    .resume = h1_resume,
    .reclaim = close_conn,
};
