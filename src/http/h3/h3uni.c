/* HTTP/3's unidirectional streams of the peer, part of h3 (see h3.h, h3int.h): their types
 * read before any slot is taken, the control stream's frames (SETTINGS, GOAWAY, MAX_PUSH_ID,
 * CANCEL_PUSH, PRIORITY_UPDATE), the QPACK encoder stream handed to qpack and the decoder
 * stream checked; every rule broken ends the connection with RFC 9114 8.1's code.
 * Must not: touch request streams but through their priority and unblocking (h3in.c).
 * Ownership: the slots are the connection's (struct h3conn). */
#include "http/h3/h3int.h"

/* ---- the peer's unidirectional streams ---- */

/* RFC 9114 7.2.4: the peer's SETTINGS. We use none of its values (our encoder refers to no
 * table, we push nothing, our sections are small), but check them. */
static int on_settings(struct h3conn *hc, const uint8_t *p, size_t n)
{
    unsigned seen = 0;
    while (n) {
        uint64_t id, v;
        size_t a = varint(p, n, &id), b = a ? varint(p + a, n - a, &v) : 0;
        if (!b)
            return h3_fatal(hc, H3_FRAME_ERROR);
        p += a + b, n -= a + b;
        if (id >= 0x2 && id <= 0x5) /* HTTP/2's settings (RFC 9114 7.2.4.1) */
            return h3_fatal(hc, H3_SETTINGS_ERROR);
        if (id < 16) {
            if (seen & 1u << id)
                return h3_fatal(hc, H3_SETTINGS_ERROR);
            seen |= 1u << id;
        }
    }
    return 0;
}

/* RFC 9218 7.1: urgency and incremental for request stream id, which the client may not have
 * opened yet (Chromium sends one before its first request): then kept for it. */
static int on_priority_update(struct h3conn *hc, const uint8_t *p, size_t n)
{
    uint64_t id;
    size_t a = varint(p, n, &id);
    if (!a)
        return h3_fatal(hc, H3_FRAME_ERROR);
    if ((id & 3) != 0 || id / 4 >= hc->max_bidi)
        return h3_fatal(hc, H3_ID_ERROR);
    struct h3stream *st = (int64_t)id < hc->next_bidi ? h3_stream_find(hc, (int64_t)id) : NULL;
    uint8_t urgency = PRIO_URGENCY_DEFAULT;
    bool inc = false;
    prio_parse((const char *)p + a, n - a, &urgency, &inc);
    if (st) {
        st->prio_set = true;
        prio_set(&hc->sched, &st->prio, urgency, inc);
    } else if ((int64_t)id >= hc->next_bidi) {
        unsigned i = 0;
        while (i < hc->nearly && hc->early[i].id != (int64_t)id)
            i++;
        if (i == H3_EARLY) /* full: the oldest kept goes */
            i = hc->early_next++ % H3_EARLY;
        else if (i == hc->nearly)
            hc->nearly++;
        hc->early[i].id = (int64_t)id;
        hc->early[i].urgency = urgency;
        hc->early[i].incremental = inc;
    } /* else a stream already closed */
    return 0;
}

/* One varint, the whole payload. */
static int one_varint(struct h3conn *hc, const uint8_t *p, size_t n, uint64_t *v)
{
    return varint(p, n, v) == n && n ? 0 : h3_fatal(hc, H3_FRAME_ERROR);
}

/* A control frame whole: 0 or fatal. */
static int ctrl_frame(struct h3conn *hc, struct h3uni *u)
{
    uint64_t v;
    int rv = 0;
    switch (u->rd.type) {
    case F_SETTINGS:
        return on_settings(hc, u->buf, u->blen);
    case F_GOAWAY: /* the client's: it takes no push past v (we push none) */
        return one_varint(hc, u->buf, u->blen, &v);
    case F_MAX_PUSH_ID:
        if ((rv = one_varint(hc, u->buf, u->blen, &v)) < 0)
            return rv;
        if (hc->have_max_push && v < hc->max_push) /* RFC 9114 7.2.7: it may not shrink */
            return h3_fatal(hc, H3_ID_ERROR);
        hc->max_push = v;
        hc->have_max_push = true;
        return 0;
    case F_CANCEL_PUSH: /* we never promised a push it could name */
        if ((rv = one_varint(hc, u->buf, u->blen, &v)) < 0)
            return rv;
        return h3_fatal(hc, H3_ID_ERROR);
    case F_PRIORITY_UPDATE:
        return on_priority_update(hc, u->buf, u->blen);
    case F_PRIORITY_UPDATE_PUSH: /* no push exists to name */
        return h3_fatal(hc, H3_ID_ERROR);
    }
    return 0;
}

/* Bytes of the peer's control stream: 0 or fatal. */
static int ctrl_input(struct h3conn *hc, struct h3uni *u, const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    while (p < end) {
        if (!u->rd.body) {
            if (!frame_head(&u->rd, &p, end))
                break;
            uint64_t t = u->rd.type;
            if (!u->settings && t != F_SETTINGS) /* RFC 9114 6.2.1 */
                return h3_fatal(hc, H3_MISSING_SETTINGS);
            if ((t == F_SETTINGS && u->settings) || t == F_DATA || t == F_HEADERS ||
                t == F_PUSH_PROMISE || h2_only(t))
                return h3_fatal(hc, H3_FRAME_UNEXPECTED);
            u->settings = true;
            u->blen = 0;
            bool parsed = t == F_SETTINGS || t == F_GOAWAY || t == F_MAX_PUSH_ID ||
                          t == F_CANCEL_PUSH || t == F_PRIORITY_UPDATE ||
                          t == F_PRIORITY_UPDATE_PUSH;
            if (!parsed)
                u->rd.type = UINT64_MAX; /* unknown or reserved: skipped */
            else if (u->rd.left > sizeof(u->buf))
                return h3_fatal(hc, H3_EXCESSIVE_LOAD);
        }
        size_t take = u->rd.left < (uint64_t)(end - p) ? (size_t)u->rd.left : (size_t)(end - p);
        if (u->rd.type != UINT64_MAX) {
            memcpy(u->buf + u->blen, p, take);
            u->blen = (uint16_t)(u->blen + take);
        }
        p += take;
        u->rd.left -= take;
        if (u->rd.left)
            break;
        u->rd.body = false;
        if (u->rd.type != UINT64_MAX) {
            int rv = ctrl_frame(hc, u);
            if (rv < 0)
                return rv;
        }
    }
    return 0;
}

/* Bytes of the peer's decoder stream (RFC 9204 4.4): our encoder refers to no table entry
 * and never blocks, so only Stream Cancellations may come; a Section Acknowledgment or an
 * Insert Count Increment is an error (4.4.1, 4.4.3). */
static int dec_input(struct h3conn *hc, struct h3uni *u, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t b = p[i];
        if (u->ins != 0xff) { /* an integer's continuation bytes */
            if (++u->ins > 9)
                return h3_fatal(hc, QPACK_DECODER_STREAM_ERROR);
            if (!(b & 0x80))
                u->ins = 0xff;
            continue;
        }
        if ((b & 0xc0) != 0x40)
            return h3_fatal(hc, QPACK_DECODER_STREAM_ERROR);
        if ((b & 0x3f) == 0x3f)
            u->ins = 0;
    }
    return 0;
}

static struct h3uni *uni_find(struct h3conn *hc, int64_t sid)
{
    for (unsigned i = 0; i < H3_UNI; i++)
        if (hc->uni[i].id == sid)
            return &hc->uni[i];
    return NULL;
}

/* Stream sid's type is known: its slot (NULL when it is of another type, refused), or fatal
 * in *rv. The types are read before any slot is taken, so that streams of other types, opened
 * first, cannot take the places of the three that must get through (issue 35.5: with three
 * such streams first, the QPACK encoder stream was refused and a request waited for ever). */
static struct h3uni *uni_typed(struct h3conn *hc, int64_t sid, uint64_t type, int *rv)
{
    int64_t *own = type == U_CONTROL   ? &hc->peer_ctrl
                   : type == U_ENCODER ? &hc->peer_enc
                   : type == U_DECODER ? &hc->peer_dec
                                       : NULL;
    *rv = 0;
    if (type == U_PUSH) { /* a client may not push (RFC 9114 6.2.2) */
        *rv = h3_fatal(hc, H3_STREAM_CREATION_ERROR);
        return NULL;
    }
    if (!own) {
        /* Unknown or reserved: refused (RFC 9114 6.2, STOP_SENDING), and its stream credit
         * given back, as ngtcp2 0.12 never closes a client's unidirectional stream: refused
         * streams never use the credit the critical ones need. Each is a stream ngtcp2 keeps
         * to the connection's end, so their number is bounded. */
        hc->uni_dropped |= 1u << (sid >> 2);
        quic_stream_abort(hc->qc, sid, H3_STREAM_CREATION_ERROR);
        if (++hc->nreserved > H3_RESERVED_MAX)
            *rv = h3_fatal(hc, H3_EXCESSIVE_LOAD);
        else
            quic_grant_uni(hc->qc);
        return NULL;
    }
    if (*own >= 0) { /* a second one (RFC 9114 6.2.1, RFC 9204 4.2) */
        *rv = h3_fatal(hc, H3_STREAM_CREATION_ERROR);
        return NULL;
    }
    struct h3uni *u = uni_find(hc, -1); /* one of three slots, each type once */
    if (!u) {
        *rv = h3_fatal(hc, H3_INTERNAL_ERROR);
        return NULL;
    }
    memset(u, 0, offsetof(struct h3uni, buf));
    u->id = *own = sid;
    u->type = (int)type;
    u->ins = 0xff;
    return u;
}

int h3_uni_recv(struct h3conn *hc, int64_t sid, const uint8_t *p, size_t n, bool fin)
{
    struct h3uni *u = uni_find(hc, sid);
    const uint8_t *end = p + n;
    int rv = 0;
    uint64_t idx = (uint64_t)sid >> 2;
    quic_consume(hc->qc, sid, n);
    if (!u && (idx >= H3_UNI_IDS || hc->uni_dropped & 1u << idx)) {
        if (idx >= H3_UNI_IDS) /* past any credit we give: cannot be, but is refused */
            quic_stream_abort(hc->qc, sid, H3_STREAM_CREATION_ERROR);
        return 0;
    }
    if (!u) {
        uint8_t h[8], *kept = hc->uni_h[idx];
        size_t old = hc->uni_hn[idx];
        size_t add = (size_t)(end - p) < 8 - old ? (size_t)(end - p) : 8 - old;
        uint64_t type;
        memcpy(h, kept, old);
        memcpy(h + old, p, add);
        size_t len = varint(h, old + add, &type);
        if (!len) {
            memcpy(kept + old, p, add);
            hc->uni_hn[idx] = (uint8_t)(old + add);
            return 0; /* (a stream that ends before its type is nothing at all) */
        }
        p += len - old;
        hc->uni_hn[idx] = 0;
        if (!(u = uni_typed(hc, sid, type, &rv)))
            return rv;
    }
    switch (u->type) {
    case U_CONTROL:
        rv = ctrl_input(hc, u, p, (size_t)(end - p));
        break;
    case U_ENCODER:
        if (p < end && (rv = qpack_dec_encoder(&hc->qd, p, (size_t)(end - p))) < 0)
            return h3_qpack_fatal(hc, rv);
        rv = h3_unblock(hc);
        break;
    case U_DECODER:
        rv = dec_input(hc, u, p, (size_t)(end - p));
        break;
    default:
        return 0;
    }
    if (rv == 0 && fin) /* RFC 9114 6.2.1, RFC 9204 4.2 */
        return h3_fatal(hc, H3_CLOSED_CRITICAL_STREAM);
    return rv;
}
