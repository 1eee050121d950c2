/* HTTP/3's answering, part of h3 (see h3.h, h3int.h): a request stream's request handed to
 * serve (serve_handoff, as HTTP/1 and HTTP/2 hand theirs), the 421 rule, and the response
 * filter that turns the plan into a HEADERS frame (QPACK with the pre-encoded runs kept per file
 * and per second) and one DATA frame, its file ranges read in chunks, on the loop when the page
 * cache has them and off it when not; and the send side of the quic_app table (pull, wrote,
 * acked), the next stream's bytes in core/prio.h's order.
 * Must not: read the request stream's frames (h3in.c) or choose which stream sends (core/prio.h
 * through h3session.c). Ownership: the stream's response, chunks and frame heads are the stream's.
 */
#include "http/h3/h3int.h"

/* ---- answering ---- */

/* The engine reads the next waiting stream's cold chunk, its plan's file range as it stands
 * (the plan waits with it), unless a read is in flight or none waits. The engine reports it
 * from its loop, never from inside the call (h3_read_done). */
static void cold_next(struct h3conn *hc)
{
    struct list *l = hc->rd_chunk ? NULL : list_first(&hc->cold);
    if (!l)
        return;
    struct h3stream *st = LIST_ITEM(l, struct h3stream, cold_link);
    list_remove(l);
    const struct seg *s = plan_seg(&st->r->plan);
    hc->rd_st = st;
    hc->rd_chunk = st->cold;
    conn_file_read(hc->w, hc->c, s->fd, st->cold->data, (uint32_t)st->cold_len, s->off);
}

void h3_read_done(struct runtime *w, struct conn *c, int res)
{
    struct h3conn *hc = c->pstate;
    struct h3stream *st = hc->rd_st;
    struct chunk *ch = hc->rd_chunk;
    hc->rd_st = NULL;
    hc->rd_chunk = NULL;
    if (!st) { /* its stream is gone: what it left for the read goes now */
        free(ch);
        if (hc->rd_r)
            serve_response_put(w, hc->rd_r);
        hc->rd_r = NULL;
        if (hc->dead) { /* and its connection (app_free): its slot is free at last */
            conn_detach(w, c);
            free(hc);
            return;
        }
    } else {
        st->cold = NULL;
        if (res > 0) {
            st->ready = ch;
            st->ready_len = (size_t)res;
            h3_enqueue(hc, st);
        } else {
            free(ch);
            h3_stream_abort(hc, st, H3_INTERNAL_ERROR); /* the file shrank, or failed */
        }
        quic_wake_in(hc->qc, 0); /* the endpoint's timer run writes it */
    }
    cold_next(hc);
}

void h3_cold_drop(struct h3conn *hc, struct h3stream *st)
{
    if (hc->rd_st == st) { /* with the engine: the chunk and the file stay until it ends */
        hc->rd_st = NULL;
        hc->rd_r = st->r;
    } else {
        list_remove(&st->cold_link);
        free(st->cold);
    }
    st->cold = NULL;
}

static void out_push(struct h3stream *st, uint8_t *base, size_t len)
{
    if (len == 0) /* an empty range would never be seen written */
        return;
    st->out[st->nout++] = (struct quic_vec){base, len};
    st->given += len;
}

/* Hands out what the plan has next, up to H3_OUTV ranges, H3_STAGED bytes not yet written and
 * H3_INFLIGHT not yet acknowledged: 0, or -EIO when the stream cannot go on (the file shrank, no
 * memory). */
static int fill(struct h3stream *st)
{
    struct plan *p = &st->r->plan;
    while (st->nout < H3_OUTV && st->given - st->written < H3_STAGED &&
           st->given - st->acked < H3_INFLIGHT) {
        struct seg *s = plan_seg(p);
        if (!s)
            break;
        if (s->mem) {
            size_t len = (size_t)s->len;
            out_push(st, (uint8_t *)(uintptr_t)(s->mem + s->off), len);
            plan_advance(p, len);
            continue;
        }
        /* A file range: a chunk at a time, kept until acknowledged; read here when the page
         * cache has it, else by the engine off the loop (the stream waits for h3_read_done). */
        struct chunk *c = st->ready;
        ssize_t got = (ssize_t)st->ready_len;
        st->ready = NULL;
        if (!c && st->cold)
            break;
        if (!c) {
            size_t len = s->len < H3_CHUNK ? (size_t)s->len : H3_CHUNK;
            if (!(c = malloc(sizeof(*c) + len)))
                return -EIO;
            struct iovec iov = {c->data, len};
            got = preadv2(s->fd, &iov, 1, (off_t)s->off, RWF_NOWAIT);
            if (got < 0 && (errno == EAGAIN || errno == EOPNOTSUPP)) { /* cold, or no NOWAIT */
                st->cold = c;
                st->cold_len = len;
                list_push_back(&st->hc->cold, &st->cold_link);
                cold_next(st->hc);
                break;
            }
        }
        if (got <= 0) {
            free(c);
            return -EIO; /* the file shrank: the stream is reset */
        }
        out_push(st, c->data, (size_t)got);
        c->end = st->given;
        c->next = NULL;
        if (st->last)
            st->last->next = c;
        else
            st->chunks = c;
        st->last = c;
        plan_advance(p, (uint64_t)got);
    }
    return 0;
}

/* One field line (its name lower-cased, RFC 9114 4.2) into out[cap]: the bytes written, 0
 * when it does not fit; a name longer than any the core writes is left out (SIZE_MAX). */
static size_t enc_line(uint8_t *out, size_t cap, const char *name, size_t name_len,
                       const char *value, size_t value_len)
{
    char lower[64];
    if (name_len > sizeof(lower))
        return SIZE_MAX;
    hfield_lower(lower, name, name_len);
    return qpack_enc_field(out, cap, lower, name_len, value, value_len);
}

/* lines[0, len) (field lines, each ending in CRLF) encoded and kept with their text; NULL when
 * memory is short or they are not all field lines. */
static struct h3pre *pre_new(const char *lines, size_t len)
{
    struct plan p; /* read as a response's lines are: the same parse, the same fields */
    plan_init(&p);
    if (len == 0 || !plan_mem(&p, lines, len))
        return NULL;
    p.head_len = len;
    size_t cap = len + 64, pos = 0, at = 0, name_len, value_len; /* prefixes and lengths */
    const char *name, *value;
    struct h3pre *pre = malloc(sizeof(*pre) + len + cap);
    if (!pre)
        return NULL;
    memcpy(pre->key, lines, len);
    pre->key_len = len;
    pre->enc = (uint8_t *)pre->key + len;
    while (plan_field_next(&p, &pos, &name, &name_len, &value, &value_len)) {
        size_t k = enc_line(pre->enc + at, cap - at, name, name_len, value, value_len);
        if (k == 0 || k == SIZE_MAX)
            break;
        at += k;
    }
    if (pos != len) {
        free(pre);
        return NULL;
    }
    pre->enc_len = at;
    return pre;
}

/* The encoded representation fields of the entry r sends (serve_rep_entry), made by its first
 * HTTP/3 response and kept with it. */
static const struct h3pre *pre_of(const struct response *r)
{
    struct fentry *e = serve_rep_entry(r);
    if (!e)
        return NULL;
    if (!e->wire_parts[FCACHE_WIRE_H3]) {
        char lines[SERVE_REP_LINES];
        e->wire_parts[FCACHE_WIRE_H3] = pre_new(lines, serve_rep_lines(e, lines));
    }
    return e->wire_parts[FCACHE_WIRE_H3];
}

/* The worker's encoded first H3_LEAD_LINES lines of p, made again when p's differ from the
 * last response's (a new second's Date). NULL when p has fewer lines or memory is short. */
static const struct h3pre *lead_of(struct h3worker *hw, const struct plan *p)
{
    const struct h3pre *l = hw->lead;
    if (p->nseg == 0)
        return NULL;
    if (l && plan_fields_at(p, 0, l->key, l->key_len))
        return l; /* the key ends a line: a match is those very lines */
    free(hw->lead);
    size_t n = plan_fields_lead(p, H3_LEAD_LINES);
    hw->lead = n ? pre_new(p->segs[0].mem, n) : NULL;
    return hw->lead;
}

/* The response's HEADERS frame (:status, then the plan's fields, the kept runs as they were
 * encoded) and the head of its one DATA frame, in a buffer of the stream's sized to the
 * plan's lines (a field line QPACK-encoded is at most two bytes longer than "name: value\r\n"),
 * handed out first; the body follows. 0, or -ENOMEM. */
static int respond(struct h3conn *hc, struct h3stream *st)
{
    struct plan *p = &st->r->plan;
    const size_t reserve = 9, data_head = 9; /* the frame heads' room: type + length */
    size_t cap = p->head_len + 2 * H3_RESP_FIELDS + 16 + reserve, at = reserve, pos = 0, n = 1;
    size_t name_len, value_len;
    uint8_t *buf = st->head = malloc(cap + data_head);
    if (!buf)
        return -ENOMEM;
    const char *name, *value;
    at += qpack_enc_prefix(buf + at, cap - at);
    at += qpack_enc_status(buf + at, cap - at, (unsigned)p->status % 1000);
    const struct h3pre *lead = lead_of(hc->w->h3, p), *run = pre_of(st->r);
    if (lead && lead->enc_len <= cap - at) {
        memcpy(buf + at, lead->enc, lead->enc_len);
        at += lead->enc_len;
        pos = lead->key_len;
    }
    for (size_t from = pos;
         n++ < H3_RESP_FIELDS + 1 && plan_field_next(p, &pos, &name, &name_len, &value, &value_len);
         from = pos) {
        if (run && plan_fields_at(p, from, run->key, run->key_len) && run->enc_len <= cap - at) {
            memcpy(buf + at, run->enc, run->enc_len); /* the file's fields, encoded once */
            at += run->enc_len;
            pos = from + run->key_len;
            run = NULL;
            continue;
        }
        size_t k = enc_line(buf + at, cap - at, name, name_len, value, value_len);
        if (k == SIZE_MAX)
            continue;
        if (!k)
            break;
        at += k;
    }
    plan_advance(p, p->head_len);
    size_t section = at - reserve, start = reserve - 1 - varint_len(section);
    buf[start] = F_HEADERS;
    put_varint(buf + start + 1, section);
    uint64_t body = p->bytes - p->head_len;
    if (body) {
        buf[at++] = F_DATA;
        at += put_varint(buf + at, body);
    }
    out_push(st, buf + start, at - start);
    h3_enqueue(hc, st);
    return 0;
}

/* Parses st's request as HTTP/2 does and answers it through serve, or parks it while its
 * Basic credentials are verified off the loop; a malformed one is reset (RFC 9114 4.1.2). */
void h3_answer(struct h3conn *hc, struct h3stream *st)
{
    struct runtime *w = hc->w;
    struct http_request *req = &w->h3->req;
    int status = st->q ? h3req_parse(st->q, req) : -EPROTO;
    if (status < 0) {
        h3_stream_abort(hc, st, H3_MESSAGE_ERROR);
        h3_request_free(w->h3, st);
        return;
    }
    struct req_policy pol = policy_fields();
    pol.secure = true; /* an error's access-log line too: the Host's port defaults to 443 */
    if (!status) {
        pol.on_h3 = true;
        pol.peer = conn_peer(hc->c);
        pol.cert = &hc->cert; /* the 421 rule's (site_misdirected) */
        /* The token names the connection's slot (slot_resume): its streams share one
         * verification in flight at a time, and each parked one asks again when it ends. */
        pol.resume = conn_token(hc->c);
    }
    struct response *r;
    if (serve_handoff(w, &hc->c->obs, req, status, &pol, LOGFMT_HTTP3, &r) == SERVE_PENDING) {
        st->parked = true;
        hc->nparked++;
        return;
    }
    if (!r) {
        h3_stream_abort(hc, st, H3_INTERNAL_ERROR);
        h3_request_free(w->h3, st);
        return;
    }
    st->r = r;
    if (respond(hc, st) < 0)
        h3_stream_abort(hc, st, H3_INTERNAL_ERROR);
    h3_request_free(w->h3, st); /* handed over: the response holds what it needs */
}

/* ---- sending ---- */

/* Our decoder stream takes what QPACK has for it, starting its buffer again once the peer has
 * acknowledged all of it (ngtcp2 holds pointers into it until then). */
static void dec_refill(struct h3conn *hc)
{
    if (hc->dec_acked == hc->dec_len && hc->dec_sent == hc->dec_len)
        hc->dec_len = hc->dec_sent = hc->dec_acked = 0;
    hc->dec_len = (uint16_t)(hc->dec_len + qpack_dec_output(&hc->qd, hc->dec_buf + hc->dec_len,
                                                            sizeof(hc->dec_buf) - hc->dec_len));
}

int h3_app_pull(void *a, int64_t *sid, bool *fin, struct quic_vec *v, size_t cnt)
{
    struct h3conn *hc = a;
    *fin = false;
    *sid = -1;
    if (hc->ctrl_sent < hc->ctrl_len && !hc->ctrl_stuck) {
        *sid = hc->ctrl_id;
        v[0] = (struct quic_vec){hc->ctrl_buf + hc->ctrl_sent, hc->ctrl_len - hc->ctrl_sent};
        return 1;
    }
    if (!hc->enc_sent && !hc->enc_stuck) {
        *sid = hc->enc_id;
        v[0] = (struct quic_vec){&hc->enc_type, 1};
        return 1;
    }
    dec_refill(hc);
    if (hc->dec_sent < hc->dec_len && !hc->dec_stuck) {
        *sid = hc->dec_id;
        v[0] = (struct quic_vec){hc->dec_buf + hc->dec_sent, hc->dec_len - hc->dec_sent};
        return 1;
    }
    struct prio_node *next;
    while ((next = prio_next(&hc->sched))) {
        struct h3stream *st = LIST_ITEM(next, struct h3stream, prio);
        if (fill(st) < 0) {
            h3_stream_abort(hc, st, H3_INTERNAL_ERROR); /* the file shrank */
            continue;
        }
        bool done = plan_done(&st->r->plan);
        if (st->nout == 0 && !done) { /* waits for an acknowledgement, or a cold read */
            h3_dequeue(hc, st);
            continue;
        }
        size_t n = st->nout < cnt ? st->nout : cnt;
        memcpy(v, st->out, n * sizeof(*v));
        st->fin_offered = *fin = done && n == st->nout;
        *sid = st->id;
        hc->cur = st;
        return (int)n;
    }
    return 0;
}

int h3_app_wrote(void *a, int64_t sid, size_t n)
{
    struct h3conn *hc = a;
    if (sid == hc->ctrl_id) {
        hc->ctrl_sent = (uint8_t)(hc->ctrl_sent + n);
        return 0;
    }
    if (sid == hc->enc_id) {
        hc->enc_sent |= n > 0;
        return 0;
    }
    if (sid == hc->dec_id) {
        hc->dec_sent = (uint16_t)(hc->dec_sent + n);
        return 0;
    }
    struct h3stream *st = h3_stream_find(hc, sid);
    if (!st)
        return 0;
    st->written += n;
    unsigned i = 0;
    while (n && i < st->nout) {
        struct quic_vec *o = &st->out[i];
        size_t k = n < o->len ? n : o->len;
        o->base += k;
        o->len -= k;
        n -= k;
        i += o->len == 0;
    }
    if (i) {
        st->nout -= i;
        memmove(st->out, st->out + i, st->nout * sizeof(st->out[0]));
    }
    if (st->fin_offered && st->nout == 0) {
        st->fin_sent = st->answered = true;
        h3_dequeue(hc, st);
    } else {
        prio_sent(&hc->sched, &st->prio); /* an incremental one: the next takes its turn */
    }
    return 0;
}

int h3_app_acked(void *a, int64_t sid, uint64_t n)
{
    struct h3conn *hc = a;
    if (sid == hc->dec_id) {
        hc->dec_acked = (uint16_t)(hc->dec_acked + n);
        return 0;
    }
    struct h3stream *st = h3_stream_find(hc, sid);
    if (!st)
        return 0;
    st->acked += n;
    while (st->chunks && st->chunks->end <= st->acked) {
        struct chunk *c = st->chunks;
        st->chunks = c->next;
        if (!st->chunks)
            st->last = NULL;
        free(c);
    }
    h3_enqueue(hc, st); /* the window may have room again */
    return 0;
}
