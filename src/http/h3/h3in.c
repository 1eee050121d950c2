/* HTTP/3's request streams, part of h3 (see h3.h, h3int.h): their frames read as they come,
 * field sections decoded (QPACK) and kept, or held while blocked on the encoder stream, with
 * the bytes behind them counted against --head-memory; DATA counted against content-length and
 * dropped; the request answered (h3resp.c) at the stream's end.
 * Must not: write frames of its own (a reset goes through quic) or decide a status (h3req, serve).
 * Ownership: what a stream holds of its request is the stream's, freed with it or when answered. */
#include "http/h3/h3int.h"

#include "core/token.h"

/* ---- request streams ---- */

static int on_field(void *arg, const struct qpack_field *f)
{
    struct h3stream *st = arg;
    struct h3req *q = &st->hc->w->h3->q;
    if (f->sidx < 0 && f->nlen == 8 && memcmp(f->name, "priority", 8) == 0 && !st->prio_set)
        prio_parse(f->value, f->vlen, &st->prio.urgency, &st->prio.incremental);
    else if ((f->sidx >= 0 ? f->sidx == 4 /* RFC 9204 A */
                           : f->nlen == 14 && memcmp(f->name, "content-length", 14) == 0) &&
             !hfield_length_field(&st->cl, f->value, f->vlen))
        q->malformed = true; /* as HTTP/2 has it (RFC 9114 4.1.2) */
    /* A name with a static index is byte for byte one of the table's, every one of them valid;
     * so is a static line's value. */
    h3req_field(q, f->name, f->nlen, f->value, f->vlen,
                (f->sidx >= 0 ? TOKEN_NAME_OK : 0) | (f->static_value ? TOKEN_VALUE_OK : 0));
    return 0;
}

static int on_trailer(void *arg, const struct qpack_field *f)
{
    (void)arg, (void)f; /* trailers are decoded for QPACK's sake only */
    return 0;
}

/* The request just decoded (the worker's hw->q) kept with st until its stream ends, in memory
 * sized to it and counted (held_room); when it cannot be, st is reset (H3_REQUEST_REJECTED:
 * not processed, the client may try again). */
static void save_request(struct h3conn *hc, struct h3stream *st)
{
    struct h3worker *hw = hc->w->h3;
    size_t n = h3req_save_size(&hw->q);
    bool room = h3_held_room(hc, st, n);
    void *mem = room ? malloc(n) : NULL;
    if (!mem) {
        if (room) /* counted, not allocated */
            h3_held_less(hw, st, n);
        h3_stream_drop(st, H3_REQUEST_REJECTED);
        return;
    }
    st->q = h3req_save(&hw->q, mem);
}

/* Decodes the field section p[0, n) of st: 0, -EAGAIN (blocked), or fatal. */
static int section(struct h3conn *hc, struct h3stream *st, const uint8_t *p, size_t n)
{
    bool first = st->phase == P_HEADERS;
    struct h3worker *hw = hc->w->h3;
    if (first)
        h3req_init(&hw->q, hw->fields, H3REQ_FIELDS, hw->head, sizeof(hw->head));
    int rv =
        qpack_dec_section(&hc->qd, st->id, p, n, H3_LIST_MAX, first ? on_field : on_trailer, st);
    if (rv == -EAGAIN)
        return rv;
    if (rv == -E2BIG && first)
        hw->q.status = 431; /* as HTTP/1's head past HTTP1_MAX_HEAD; the connection stays */
    else if (rv < 0 && rv != -E2BIG)
        return h3_qpack_fatal(hc, rv);
    st->phase = first ? P_BODY : P_TRAILERS;
    if (first && hw->q.malformed)
        h3_stream_abort(hc, st, H3_MESSAGE_ERROR);
    else if (first)
        save_request(hc, st);
    return 0;
}

/* A frame's head was read on st: what its payload is for, or fatal. */
static int req_frame(struct h3conn *hc, struct h3stream *st)
{
    uint64_t type = st->rd.type;
    st->pay = PAY_SKIP;
    if (type == F_DATA) {
        if (st->phase != P_BODY)
            return h3_fatal(hc, H3_FRAME_UNEXPECTED);
    } else if (type == F_HEADERS) {
        if (st->phase == P_TRAILERS)
            return h3_fatal(hc, H3_FRAME_UNEXPECTED);
        if (st->rd.left > H3_LIST_MAX) { /* not read: the request is answered 431 */
            if (st->phase == P_HEADERS) {
                struct h3worker *hw = hc->w->h3;
                h3req_init(&hw->q, hw->fields, H3REQ_FIELDS, hw->head, sizeof(hw->head));
                hw->q.status = 431;
                save_request(hc, st);
            }
            st->phase = st->phase == P_HEADERS ? P_BODY : P_TRAILERS;
            qpack_dec_cancel(&hc->qd, st->id);
        } else {
            st->pay = PAY_SECTION;
        }
    } else if (type <= F_MAX_PUSH_ID || type == F_PRIORITY_UPDATE ||
               type == F_PRIORITY_UPDATE_PUSH) {
        /* CANCEL_PUSH, SETTINGS, PUSH_PROMISE (a client's), GOAWAY, MAX_PUSH_ID, the
         * control stream's; HTTP/2's; and 0xa-0xc, unassigned but below MAX_PUSH_ID: those
         * are unknown types, skipped */
        if (type == F_CANCEL_PUSH || type == F_SETTINGS || type == F_PUSH_PROMISE ||
            type == F_GOAWAY || type == F_MAX_PUSH_ID || type >= F_PRIORITY_UPDATE || h2_only(type))
            return h3_fatal(hc, H3_FRAME_UNEXPECTED);
    }
    return 0;
}

/* Keeps p[0, n) (and the FIN) behind st's blocked section: 0 or fatal. */
static int hold(struct h3conn *hc, struct h3stream *st, const uint8_t *p, size_t n, bool fin)
{
    if (n) {
        if (st->held_len + n > H3_HELD_MAX)
            return h3_fatal(hc, H3_EXCESSIVE_LOAD);
        if (!h3_held_room(hc, st, n)) {
            h3_stream_drop(st, H3_REQUEST_REJECTED); /* (n is the caller's to give back) */
            return 0;
        }
        uint8_t *b = realloc(st->held, st->held_len + n);
        if (!b)
            return h3_fatal(hc, H3_INTERNAL_ERROR);
        memcpy(b + st->held_len, p, n);
        st->held = b;
        st->held_len += n;
    }
    st->held_fin |= fin;
    return 0;
}

static int block(struct h3conn *hc, struct h3stream *st, const uint8_t *p, size_t n)
{
    if (!st->sec) {
        if (!h3_held_room(hc, st, n)) {
            qpack_dec_cancel(&hc->qd, st->id); /* it had blocked */
            h3_stream_drop(st, H3_REQUEST_REJECTED);
            return 0;
        }
        if (!(st->sec = malloc(n ? n : 1)))
            return h3_fatal(hc, H3_INTERNAL_ERROR);
        memcpy(st->sec, p, n);
        st->sec_len = st->sec_cap = (uint32_t)n;
    }
    st->blocked = true;
    hc->nblocked++;
    return 0;
}

/* The request's end. */
static void request_end(struct h3conn *hc, struct h3stream *st)
{
    st->fin_in = true;
    if (st->phase == P_HEADERS) /* no HEADERS: nothing to h3_answer (RFC 9114 4.1) */
        h3_stream_abort(hc, st, H3_REQUEST_INCOMPLETE);
    else if (!hfield_length_end(&st->cl)) /* DATA short of its content-length (4.1.2) */
        h3_stream_drop(st, H3_MESSAGE_ERROR);
    else if (!st->r && !st->parked)
        h3_answer(hc, st);
}

/* Bytes of request stream st, in order: how many were read (the rest is held behind a
 * section that waits for the encoder stream, and given back to flow control when read), or
 * fatal. */
static ssize_t req_input(struct h3conn *hc, struct h3stream *st, const uint8_t *p, size_t n,
                         bool fin)
{
    const uint8_t *start = p, *end = p + n;
    if (st->blocked) {
        int rv = hold(hc, st, p, n, fin);
        return rv < 0 ? rv : st->ignore ? (ssize_t)n : 0; /* dropped: all of it is read */
    }
    while (p < end && !st->ignore) {
        if (!st->rd.body) {
            if (!frame_head(&st->rd, &p, end))
                break;
            int rv = req_frame(hc, st);
            if (rv < 0)
                return rv;
        }
        size_t take = st->rd.left < (uint64_t)(end - p) ? (size_t)st->rd.left : (size_t)(end - p);
        const uint8_t *whole = NULL; /* the section, where it came in one piece */
        if (st->pay == PAY_SECTION) {
            if (!st->sec && take == st->rd.left) {
                whole = p;
            } else {
                if (!st->sec) {
                    if (!h3_held_room(hc, st, (size_t)st->rd.left)) {
                        h3_stream_drop(st, H3_REQUEST_REJECTED);
                        break;
                    }
                    st->sec_cap = (uint32_t)st->rd.left;
                    if (!(st->sec = malloc(st->sec_cap ? st->sec_cap : 1)))
                        return h3_fatal(hc, H3_INTERNAL_ERROR);
                }
                memcpy(st->sec + st->sec_len, p, take);
                st->sec_len += (uint32_t)take;
            }
        }
        p += take;
        st->rd.left -= take;
        if (st->rd.type == F_DATA && !hfield_length_data(&st->cl, take)) {
            h3_stream_drop(st, H3_MESSAGE_ERROR); /* DATA past its content-length (4.1.2) */
            break;
        }
        if (st->rd.left)
            break;
        st->rd.body = false;
        if (st->pay != PAY_SECTION)
            continue;
        const uint8_t *sp = whole ? whole : st->sec;
        size_t sn = whole ? take : st->sec_len;
        int rv = section(hc, st, sp, sn);
        if (rv == -EAGAIN) {
            if ((rv = block(hc, st, sp, sn)) < 0 ||
                (!st->ignore && (rv = hold(hc, st, p, (size_t)(end - p), fin))))
                return rv;
            return st->ignore ? (ssize_t)n : p - start;
        }
        h3_sec_free(hc->w->h3, st);
        if (rv < 0)
            return rv;
    }
    if (fin && !st->ignore) {
        /* RFC 9114 7.1: a frame cut short by the stream's end */
        if (st->rd.body || st->rd.hn)
            return h3_fatal(hc, H3_FRAME_ERROR);
        request_end(hc, st);
    }
    return n;
}

/* Sections blocked on the encoder stream are tried again after its input. */
int h3_unblock(struct h3conn *hc)
{
    LIST_EACH(struct h3stream, st, &hc->streams, link) {
        if (!hc->nblocked)
            break;
        if (!st->blocked)
            continue;
        /* no longer blocked while it is decoded: a reset meanwhile (a malformed section, no
         * room to keep it) must not count it out a second time */
        st->blocked = false;
        hc->nblocked--;
        int rv = section(hc, st, st->sec, st->sec_len);
        if (rv == -EAGAIN) {
            st->blocked = true;
            hc->nblocked++;
            continue;
        }
        h3_sec_free(hc->w->h3, st);
        if (rv < 0)
            return rv;
        /* what came behind it, read now (and given back to flow control) */
        uint8_t *held = st->held;
        size_t len = st->held_len;
        bool fin = st->held_fin;
        h3_held_less(hc->w->h3, st, len);
        st->held = NULL;
        st->held_len = 0;
        st->held_fin = false;
        ssize_t got = req_input(hc, st, held ? held : (const uint8_t *)"", len, fin);
        free(held);
        if (got < 0)
            return (int)got;
        quic_consume(hc->qc, st->id, (size_t)got);
    }
    return 0;
}

int h3_req_recv(struct h3conn *hc, int64_t sid, const uint8_t *data, size_t len, bool fin)
{
    struct h3stream *st = h3_stream_find(hc, sid);
    if (!st) {
        if (sid >= hc->goaway_id) { /* after our GOAWAY (RFC 9114 5.2) */
            quic_stream_abort(hc->qc, sid, H3_REQUEST_REJECTED);
            quic_consume(hc->qc, sid, len);
            return 0;
        }
        if (sid >= hc->next_bidi)
            hc->next_bidi = sid + 4;
        if (!(st = h3_stream_new(hc, sid)))
            return h3_fatal(hc, H3_INTERNAL_ERROR);
    }
    if (st->ignore) {
        quic_consume(hc->qc, sid, len);
        return 0;
    }
    st->last_in = quic_now_s(); /* its own bytes only: PINGs and other streams do not count */
    ssize_t got = req_input(hc, st, data, len, fin);
    if (got < 0)
        return (int)got;
    quic_consume(hc->qc, sid, (size_t)got);
    return 0;
}
