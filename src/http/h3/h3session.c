/* HTTP/3 over QUIC; see h3.h. This file is the session: request streams' lifetime, the
 * quic_app table QUIC calls, the worker's ops; h3in.c reads request streams, h3uni.c the
 * peer's unidirectional ones, h3resp.c answers (h3int.h: what they share).
 *
 * Framing and stream rules are RFC 9114's, written here: each stream of the peer is read as it
 * comes (a frame's head may be split anywhere; a payload is buffered only where it must be
 * parsed whole: a field section, a control frame), and every rule a client can break ends the
 * connection or the stream with the code RFC 9114 8.1 names. QPACK is h3/qpack's.
 *
 * A request is answered at the end of its stream (a body, never wanted by a static server,
 * is read and dropped as it comes), as HTTP/2 answers after END_STREAM. The answer goes out as
 * one HEADERS frame and one DATA frame over the whole body (its length is the plan's), the
 * frame heads and the field section kept in the stream's own buffer, the body handed to ngtcp2
 * as it is: memory segments (the response holds them until the stream closes), file ranges
 * through H3_CHUNK-byte reads, at most H3_STAGED bytes a stream not yet written (so a slow
 * reader holds a bounded amount) and H3_INFLIGHT not yet acknowledged (the congestion window,
 * not this, sets the rate). ngtcp2 keeps pointers to what it sent until
 * the peer acknowledges it: nothing handed over moves or is freed before (app_acked), or
 * before the stream closes. A chunk is read on the loop only when the page cache has it
 * (preadv2 RWF_NOWAIT); a cold one, or any on a file system without RWF_NOWAIT, is read by the
 * engine on the connection's slot (conn_file_read, as TLS reads its bodies) while its stream
 * waits, the connection's streams one read at a time (h3resp.c).
 *
 * Streams with something to send are ordered by core/prio.h's scheduler, HTTP/2's too: the
 * lowest urgency first; in one, the non-incremental ones one after another in arrival order
 * (stream ID, whatever order they ended in; a stream that must wait, for an acknowledgement or a
 * cold read, comes back to its place), ahead of incremental ones that have had a turn, which
 * take turns a write each. */
#include "http/h3/h3int.h"

unsigned h3_alt_svc(char *buf, unsigned cap, unsigned port)
{
    int n = snprintf(buf, cap, "Alt-Svc: h3=\":%u\"; ma=86400\r\n", port);
    return n > 0 && (unsigned)n < cap ? (unsigned)n : 0;
}

/* ---- streams ---- */

/* app_woken at second at (quic_now_s's clock) for the body deadline, unless asked already. */
static void deadline_arm(struct h3conn *hc, int64_t at)
{
    int64_t now = quic_now_s();
    if (hc->wake_s && hc->wake_s <= at)
        return;
    hc->wake_s = at;
    quic_wake_in(hc->qc, at > now ? (unsigned)(at - now) * 1000u : 0);
}

struct h3stream *h3_stream_new(struct h3conn *hc, int64_t sid)
{
    struct h3stream *st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    st->id = sid;
    st->last_in = quic_now_s();
    deadline_arm(hc, st->last_in + hc->w->cfg->body_timeout);
    st->hc = hc;
    prio_node_init(&st->prio, (uint64_t)sid);
    list_link_init(&st->held_link);
    list_push_front(&hc->streams, &st->link);
    struct h3stream **b = &hc->bucket[(sid >> 2) % H3_BUCKETS];
    st->hnext = *b;
    *b = st;
    if (hc->nstreams++ == 0) /* busy: not to be reclaimed for a newcomer */
        conn_idle(hc->w, hc->c, false);
    for (unsigned i = 0; i < hc->nearly; i++) /* a PRIORITY_UPDATE that came first */
        if (hc->early[i].id == sid) {
            st->prio.urgency = hc->early[i].urgency;
            st->prio.incremental = hc->early[i].incremental;
            st->prio_set = true;
            hc->early[i] = hc->early[--hc->nearly];
            break;
        }
    return st;
}

/* n bytes st held for its request are no longer held. */
void h3_held_less(struct h3worker *hw, struct h3stream *st, size_t n)
{
    hw->held_bytes -= n;
    st->held_mem -= n;
    if (!st->held_mem && list_linked(&st->held_link))
        list_remove(&st->held_link);
}

void h3_sec_free(struct h3worker *hw, struct h3stream *st)
{
    if (st->sec)
        h3_held_less(hw, st, st->sec_cap);
    free(st->sec);
    st->sec = NULL;
    st->sec_len = st->sec_cap = 0;
}

void h3_request_free(struct h3worker *hw, struct h3stream *st)
{
    if (st->q)
        h3_held_less(hw, st, h3req_save_size(st->q));
    free(st->q);
    st->q = NULL;
}

void h3_stream_abort(struct h3conn *hc, struct h3stream *st, uint64_t code);

/* st's request goes unanswered (reset with code): what it holds is freed, the bytes held
 * behind a blocked section given back to flow control. */
void h3_stream_drop(struct h3stream *st, uint64_t code)
{
    struct h3conn *hc = st->hc;
    struct h3worker *hw = hc->w->h3;
    if (st->parked) {
        st->parked = false;
        hc->nparked--;
    }
    h3_stream_abort(hc, st, code);
    if (st->held_len)
        quic_consume(hc->qc, st->id, st->held_len);
    h3_held_less(hw, st, st->held_len);
    free(st->held);
    st->held = NULL;
    st->held_len = 0;
    st->held_fin = false;
    h3_sec_free(hw, st);
    h3_request_free(hw, st);
    quic_wake_in(hc->qc, 0); /* the reset goes out at the endpoint's timer run */
}

/* Counts n more bytes held for st's request against --head-memory, first resetting the
 * streams that have held some longest (other than st) as long as that is needed: false when
 * even that is not enough (st's request cannot be kept). As HTTP/1's partial heads (h1.c,
 * input_room): 100 streams a connection each keeping a 12 KB section cost ~1.9 MB a
 * connection for as long as the client sent PINGs. */
bool h3_held_room(struct h3conn *hc, struct h3stream *st, size_t n)
{
    struct h3worker *hw = hc->w->h3;
    size_t cap = hc->w->cfg->head_memory;
    while (hw->held_bytes + n > cap) {
        struct list *l = list_first(&hw->held);
        if (l == &st->held_link)
            l = list_after(&hw->held, l);
        if (!l)
            return false;
        struct h3stream *old = LIST_ITEM(l, struct h3stream, held_link);
        errlog_limited(&hw->log_held, ERRLOG_WARN,
                       "worker %d: unfinished HTTP/3 requests hold %zu bytes (--head-memory "
                       "%zu): resetting the oldest",
                       hc->w->id, hw->held_bytes, cap);
        h3_stream_drop(old, H3_REQUEST_REJECTED);
    }
    if (!list_linked(&st->held_link))
        list_push_back(&hw->held, &st->held_link);
    hw->held_bytes += n;
    st->held_mem += n;
    return true;
}

static void stream_free(struct h3conn *hc, struct h3stream *st)
{
    if (st->parked)
        hc->nparked--;
    if (st->blocked) {
        hc->nblocked--;
        qpack_dec_cancel(&hc->qd, st->id);
    }
    h3_dequeue(hc, st);
    if (hc->cur == st)
        hc->cur = NULL;
    while (st->chunks) {
        struct chunk *c = st->chunks;
        st->chunks = c->next;
        free(c);
    }
    free(st->ready);
    h3_sec_free(hc->w->h3, st);
    h3_request_free(hc->w->h3, st);
    h3_held_less(hc->w->h3, st, st->held_len);
    free(st->held);
    free(st->head);
    if (st->r) {
        obs_request_done(hc->w, &hc->c->obs, &st->r->obs, &st->r->plan,
                         st->answered ? 0 : -ECONNRESET);
        if (hc->rd_st != st) /* else its file is being read: it goes back at the read's end */
            serve_response_put(hc->w, st->r);
    }
    if (st->cold)
        h3_cold_drop(hc, st);
    list_remove(&st->link);
    struct h3stream **b = &hc->bucket[(st->id >> 2) % H3_BUCKETS];
    while (*b != st)
        b = &(*b)->hnext;
    *b = st->hnext;
    if (--hc->nstreams == 0) /* no request open: reclaimable at --max-conns (slot_reclaim) */
        conn_idle(hc->w, hc->c, true);
    free(st);
}

/* The connection ends with code (RFC 9114 8.1): -EPROTO, for the callback to return. */
int h3_fatal(struct h3conn *hc, uint64_t code)
{
    quic_app_error(hc->qc, code);
    return -EPROTO;
}

/* A QPACK result (negative: its RFC 9204 6 code, or -errno) as the connection's end. */
int h3_qpack_fatal(struct h3conn *hc, int rv)
{
    return h3_fatal(hc, (rv <= -QPACK_DECOMPRESSION_FAILED && rv >= -QPACK_DECODER_STREAM_ERROR) ||
                                rv == -QPACK_EXCESSIVE_LOAD
                            ? (uint64_t)-rv
                            : H3_INTERNAL_ERROR);
}

/* The stream ends both ways with code; what it still brings is dropped. */
void h3_stream_abort(struct h3conn *hc, struct h3stream *st, uint64_t code)
{
    quic_stream_abort(hc->qc, st->id, code);
    st->ignore = st->shut = true;
    h3_dequeue(hc, st);
    if (st->blocked) {
        st->blocked = false;
        hc->nblocked--;
        qpack_dec_cancel(&hc->qd, st->id);
    }
}

/* ---- the quic_app table ---- */

/* --limit-conn for a new QUIC connection, in the worker's table that its TCP connections use
 * (the port's program steers the client here, steer.h): refused past the limit, counted and
 * logged as TCP's (guard_accept). */
static int app_admit(void *ctx, const struct sockaddr *sa, socklen_t len, bool proven,
                     bool *counted)
{
    struct runtime *w = ctx;
    *counted = false;
    if (!w->guard || !guard_limits_conns(w->guard))
        return QUIC_ADMIT;
    /* Counted only once the address is the client's (a Retry's token proves it; a UDP source
     * can be forged, a TCP one cannot): a forged Initial would hold a victim's slot for the
     * handshake timeout. --limit-conn costs a new QUIC client one round trip. */
    if (!proven)
        return QUIC_PROVE;
    struct peer p;
    peer_set(&p, sa, (unsigned)len);
    return guard_accept(w, &p, counted) ? QUIC_ADMIT : QUIC_REFUSE;
}

static void app_leave(void *ctx, const struct sockaddr *sa, socklen_t len)
{
    struct runtime *w = ctx;
    struct peer p;
    peer_set(&p, sa, (unsigned)len);
    guard_closed(w, &p);
}

/* A verification its requests waited for ended (conn_resume, with its slot's token): they are
 * asked again at the endpoint's next timer run (app_woken, the same worker_tick), answered or
 * parked anew. */
static void slot_resume(struct runtime *w, struct conn *c)
{
    (void)w;
    struct h3conn *hc = c->pstate;
    if (hc->nparked)
        quic_wake_in(hc->qc, 0);
}

static void app_drain(void *a);

/* --max-conns needs the slot of this idle connection (no request stream open) for a newcomer:
 * GOAWAY, then CONNECTION_CLOSE; the slot is free once the endpoint has freed it (app_free,
 * after the closing period), and the newcomer waits for it as for a TCP one's. */
static void slot_reclaim(struct runtime *w, struct conn *c)
{
    (void)w;
    struct h3conn *hc = c->pstate;
    app_drain(hc);
    quic_close(hc->qc);
}

static bool app_idle(void *a);

/* The worker drains (conn_drain, as for its TCP connections): GOAWAY; an idle connection closes
 * now, a busy one is written at the endpoint's next timer run (the GOAWAY out) and closes there
 * once its streams are done (the endpoint is draining too, quic_ep_drain). */
static void slot_drain(struct runtime *w, struct conn *c)
{
    (void)w;
    struct h3conn *hc = c->pstate;
    if (hc->dead) /* gone, its slot kept for a read in flight only */
        return;
    app_drain(hc);
    if (app_idle(hc))
        quic_close(hc->qc);
    else
        quic_wake_in(hc->qc, 0);
}

/* What conn asks of an HTTP/3 connection's slot (conn_attach). */
static const struct proto_ops slot_ops = {.name = "h3",
                                          .resume = slot_resume,
                                          .reclaim = slot_reclaim,
                                          .drain = slot_drain,
                                          .read_done = h3_read_done};

static void *app_open(void *ctx, struct quic_conn *qc)
{
    struct runtime *w = ctx;
    if (!w->h3) {
        if (!(w->h3 = calloc(1, sizeof(*w->h3))))
            return NULL;
        list_init(&w->h3->held);
    }
    struct h3conn *hc = calloc(1, sizeof(*hc));
    if (!hc)
        return NULL;
    if (!(hc->c = conn_attach(w, &slot_ops, hc))) { /* every --max-conns slot is taken */
        free(hc);
        return NULL;
    }
    hc->w = w;
    list_init(&hc->streams);
    list_init(&hc->cold);
    hc->qc = qc;
    hc->cert.ops = &cert_quic;
    hc->cert.t = qc;
    socklen_t plen;
    const struct sockaddr *sa = quic_peer(qc, &plen);
    peer_set(&hc->c->obs.peer, sa, (unsigned)plen); /* the connection's one copy (conn_peer) */
    hc->peer_ctrl = hc->peer_enc = hc->peer_dec = -1;
    for (unsigned i = 0; i < H3_UNI; i++)
        hc->uni[i].id = -1;
    _Static_assert(H3_UNI_IDS <= 32, "uni_dropped has a bit for each");
    hc->goaway_id = INT64_MAX;
    prio_sched_init(&hc->sched);
    /* The streams the transport parameters allow: a PRIORITY_UPDATE may name any of them
     * before it opens. */
    hc->max_bidi = quic_max_streams(qc);
    if (quic_open_uni(qc, &hc->ctrl_id) != 0 || quic_open_uni(qc, &hc->enc_id) != 0 ||
        quic_open_uni(qc, &hc->dec_id) != 0) {
        conn_detach(w, hc->c);
        free(hc);
        return NULL;
    }
    qpack_dec_init(&hc->qd, H3_TABLE, H3_BLOCKED);
    /* Our control stream: its type, then SETTINGS (RFC 9114 6.2.1, 7.2.4). */
    uint8_t *c = hc->ctrl_buf, set[16];
    size_t n = 0, at = 0;
    n += put_varint(set + n, SET_QPACK_MAX_TABLE_CAPACITY);
    n += put_varint(set + n, H3_TABLE);
    n += put_varint(set + n, SET_MAX_FIELD_SECTION_SIZE);
    n += put_varint(set + n, HTTP1_MAX_HEAD);
    n += put_varint(set + n, SET_QPACK_BLOCKED_STREAMS);
    n += put_varint(set + n, H3_BLOCKED);
    c[at++] = U_CONTROL;
    c[at++] = F_SETTINGS;
    at += put_varint(c + at, n);
    memcpy(c + at, set, n);
    hc->ctrl_len = (uint8_t)(at + n);
    hc->enc_type = U_ENCODER;
    hc->dec_buf[0] = U_DECODER;
    hc->dec_len = 1;
    conn_idle(w, hc->c, true); /* no request yet */
    return hc;
}

static int app_recv(void *a, int64_t sid, const uint8_t *data, size_t len, bool fin)
{
    struct h3conn *hc = a;
    if (!data) /* a FIN alone: no pointer to count from */
        data = (const uint8_t *)"";
    if ((sid & 3) == 0)
        return h3_req_recv(hc, sid, data, len, fin);
    if ((sid & 3) == 2)
        return h3_uni_recv(hc, sid, data, len, fin);
    return 0; /* ours: QUIC lets nothing come on them */
}

static void app_blocked(void *a, int64_t sid, bool shut)
{
    struct h3conn *hc = a;
    if (sid == hc->ctrl_id || sid == hc->enc_id || sid == hc->dec_id) {
        bool *stuck = sid == hc->ctrl_id  ? &hc->ctrl_stuck
                      : sid == hc->enc_id ? &hc->enc_stuck
                                          : &hc->dec_stuck;
        *stuck = true; /* shut: the peer's STOP_SENDING, which ended the connection */
        return;
    }
    struct h3stream *st = h3_stream_find(hc, sid);
    if (!st)
        return;
    h3_dequeue(hc, st);
    if (shut)
        st->shut = true;
    else
        st->flow_blocked = true;
}

static void app_unblocked(void *a, int64_t sid)
{
    struct h3conn *hc = a;
    if (sid == hc->ctrl_id)
        hc->ctrl_stuck = false;
    else if (sid == hc->enc_id)
        hc->enc_stuck = false;
    else if (sid == hc->dec_id)
        hc->dec_stuck = false;
    struct h3stream *st = h3_stream_find(hc, sid);
    if (st) {
        st->flow_blocked = false;
        h3_enqueue(hc, st);
    }
}

static bool critical(const struct h3conn *hc, int64_t sid)
{
    return sid == hc->ctrl_id || sid == hc->enc_id || sid == hc->dec_id || sid == hc->peer_ctrl ||
           sid == hc->peer_enc || sid == hc->peer_dec;
}

static int app_closed(void *a, int64_t sid, uint64_t code)
{
    struct h3conn *hc = a;
    (void)code;
    if (critical(hc, sid))
        return h3_fatal(hc, H3_CLOSED_CRITICAL_STREAM);
    if ((sid & 3) == 2) {
        for (unsigned i = 0; i < H3_UNI; i++)
            if (hc->uni[i].id == sid)
                hc->uni[i].id = -1;
        return 0;
    }
    struct h3stream *st = h3_stream_find(hc, sid);
    if (st)
        stream_free(hc, st);
    return 0;
}

/* The peer reset sid, or asked us to stop sending on it (ngtcp2 then resets our side). */
static int app_reset(void *a, int64_t sid, uint64_t code)
{
    struct h3conn *hc = a;
    (void)code;
    if (critical(hc, sid))
        return h3_fatal(hc, H3_CLOSED_CRITICAL_STREAM);
    if ((sid & 3) != 0)
        return 0;
    struct h3stream *st = h3_stream_find(hc, sid);
    if (!st) { /* reset before it brought anything: it ends here too */
        quic_stream_abort(hc->qc, sid, H3_REQUEST_CANCELLED);
        return 0;
    }
    if (!st->fin_in && !st->ignore) /* the request will never be whole */
        h3_stream_abort(hc, st, H3_REQUEST_CANCELLED);
    return 0;
}

static void app_more_streams(void *a, uint64_t max)
{
    struct h3conn *hc = a;
    hc->max_bidi = max;
}

/* GOAWAY (RFC 9114 5.2) with the first request stream not seen: those seen are answered. */
static void app_drain(void *a)
{
    struct h3conn *hc = a;
    if (hc->goaway_id != INT64_MAX)
        return;
    hc->goaway_id = hc->next_bidi;
    uint8_t *c = hc->ctrl_buf + hc->ctrl_len;
    c[0] = F_GOAWAY;
    c[1] = (uint8_t)varint_len((uint64_t)hc->goaway_id);
    hc->ctrl_len = (uint8_t)(hc->ctrl_len + 2 + put_varint(c + 2, (uint64_t)hc->goaway_id));
}

static void h3_worker_free(struct runtime *w)
{
    struct h3worker *hw = w->h3;
    if (!hw)
        return;
    free(hw->lead);
    free(hw);
    w->h3 = NULL;
}

/* The body deadline (--body-timeout, nginx's client_body_timeout): a request stream not yet
 * whole that brought nothing for that long is reset (H3_REQUEST_CANCELLED). PINGs and other
 * streams' bytes keep the connection, not the stream (issue 35.3: the QUIC idle timeout was
 * the only one, and a PING every few seconds kept 100 unfinished streams a connection). */
static void deadlines(struct h3conn *hc)
{
    int64_t now = quic_now_s(), t = hc->w->cfg->body_timeout, next = 0;
    LIST_EACH(struct h3stream, st, &hc->streams, link) {
        if (st->fin_in || st->ignore)
            continue;
        if (now - st->last_in >= t) {
            h3_stream_drop(st, H3_REQUEST_CANCELLED);
            continue;
        }
        if (!next || st->last_in + t < next)
            next = st->last_in + t;
    }
    if (next)
        deadline_arm(hc, next);
}

/* Parked requests ask again: answered once their verification is done, else parked anew. */
static void app_woken(void *a)
{
    struct h3conn *hc = a;
    int64_t at = hc->wake_s;
    hc->wake_s = 0;
    if (at && at <= quic_now_s())
        deadlines(hc);
    else if (at) /* woken sooner for another reason: asked again */
        deadline_arm(hc, at);
    LIST_EACH(struct h3stream, st, &hc->streams, link) {
        if (!hc->nparked)
            break;
        if (!st->parked)
            continue;
        st->parked = false;
        hc->nparked--;
        h3_answer(hc, st);
    }
}

static bool app_idle(void *a)
{
    struct h3conn *hc = a;
    return hc->nstreams == 0;
}

static void app_free(void *a)
{
    struct h3conn *hc = a;
    LIST_EACH(struct h3stream, st, &hc->streams, link)
        stream_free(hc, st);
    qpack_dec_fini(&hc->qd);
    if (hc->rd_chunk) { /* a read in flight names the slot and fills the chunk: it ends hc */
        hc->dead = true;
        conn_idle(hc->w, hc->c, false); /* no newcomer waits for it (the read is not bounded) */
        return;
    }
    conn_detach(hc->w, hc->c);
    free(hc);
}

const struct worker_h3_ops h3_worker_ops = {
    .fini = h3_worker_free,
};

const struct quic_app h3_app = {
    .admit = app_admit,
    .leave = app_leave,
    .open = app_open,
    .recv = app_recv,
    .pull = h3_app_pull,
    .wrote = h3_app_wrote,
    .blocked = app_blocked,
    .unblocked = app_unblocked,
    .acked = h3_app_acked,
    .closed = app_closed,
    .reset = app_reset,
    .more_streams = app_more_streams,
    .drain = app_drain,
    .woken = app_woken,
    .idle = app_idle,
    .free = app_free,
};
