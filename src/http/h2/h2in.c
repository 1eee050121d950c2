/* HTTP/2's frames in, part of h2 (see h2.h, h2int.h): each frame type's rules (RFC 9113 6),
 * flow control of what the client sends and of what it lets us send, SETTINGS, PING, GOAWAY,
 * RST_STREAM and the flood budgets they count against, PRIORITY_UPDATE (RFC 9218) into the
 * scheduler (core/prio.h).
 * Must not: decode header blocks (h2req.c) or write frames but through the control queue.
 * Ownership: what it reads is the caller's (h2_recv); a frame cut short waits in the buffer. */
#include "http/h2/h2int.h"

/* ---- frames in ---- */

/* Strips the padding of a DATA or HEADERS frame; false when it is longer than the frame. */
static bool unpad(uint8_t flags, const uint8_t **p, size_t *len)
{
    if (!(flags & FL_PADDED))
        return true;
    if (*len < 1)
        return false;
    size_t pad = (*p)[0];
    if (pad >= *len)
        return false;
    *p += 1;
    *len -= 1 + pad;
    return true;
}

/* Gives back receive window once half of it is used. */
static void window_refill(struct h2_session *s, struct stream *st)
{
    if (s->recv_window < WINDOW / 2) {
        h2_ctl32(s, F_WINDOW_UPDATE, 0, (uint32_t)(WINDOW - s->recv_window));
        s->recv_window = WINDOW;
    }
    if (st && !st->recv_done && st->recv_window < WINDOW / 2) {
        h2_ctl32(s, F_WINDOW_UPDATE, (uint32_t)st->id, (uint32_t)(WINDOW - st->recv_window));
        st->recv_window = WINDOW;
    }
}

static void on_data(struct h2_session *s, uint8_t flags, int32_t id, const uint8_t *p, size_t len)
{
    if (id == 0 || id > s->max_id) { /* idle */
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    if ((int64_t)len > s->recv_window) {
        h2_conn_error(s, E_FLOW_CONTROL);
        return;
    }
    s->recv_window -= (int32_t)len;
    size_t flow = len;
    if (len == 0 && !(flags & FL_END_STREAM))
        s->empty++;
    if (!unpad(flags, &p, &len)) {
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    struct stream *st = h2_stream_find(s, id);
    if (!st || st->recv_done) {
        window_refill(s, NULL);
        h2_stream_error(s, id, E_STREAM_CLOSED);
        return;
    }
    if ((int64_t)flow > st->recv_window) {
        window_refill(s, NULL);
        h2_stream_error(s, id, E_FLOW_CONTROL);
        return;
    }
    st->recv_window -= (int32_t)flow;
    /* nginx's client_body_timeout: between two reads of this body, so that PINGs and other
     * streams' frames keep no body waiting */
    st->body_due = s->now + s->opts.body_ms;
    if (!hfield_length_data(&st->cl, len)) {
        window_refill(s, NULL);
        h2_stream_error(s, id, E_PROTOCOL);
        return;
    }
    /* Request bodies are dropped; the windows open again as they are read. */
    window_refill(s, flags & FL_END_STREAM ? NULL : st);
    if (flags & FL_END_STREAM)
        h2_request_ended(s, st);
    h2_check_budget(s);
}

static void on_headers(struct h2_session *s, uint8_t flags, int32_t id, const uint8_t *p,
                       size_t len)
{
    if (id == 0 || !(id & 1)) {
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    if (len == 0 && !(flags & FL_END_HEADERS))
        s->empty++;
    if (!unpad(flags, &p, &len)) {
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    bool self_dependent = false;
    if (flags & FL_PRIORITY) { /* RFC 7540 priority: read and ignored */
        if (len < 5) {
            h2_conn_error(s, E_FRAME_SIZE);
            return;
        }
        self_dependent = (int32_t)(get32(p) & 0x7fffffff) == id;
        p += 5, len -= 5;
    }
    bool end_stream = flags & FL_END_STREAM;
    struct stream *st = NULL;
    bool trailers = false;
    if (id <= s->max_id) {
        st = h2_stream_find(s, id);
        if (!st) {
            h2_conn_error(s, h2_was_opened(s, id) ? E_STREAM_CLOSED : E_PROTOCOL);
            return;
        }
        if (st->recv_done) { /* half-closed (remote): the block is read for HPACK only */
            h2_stream_error(s, id, E_STREAM_CLOSED);
            st = NULL;
        } else if (!end_stream) { /* trailers end the stream (RFC 9113 8.1) */
            h2_stream_error(s, id, E_PROTOCOL);
            st = NULL;
        } else {
            trailers = true;
        }
    } else {
        int32_t back = (id - s->max_id) / 2;
        s->opened = back >= 64 ? 1 : (s->opened << back) | 1;
        s->max_id = id;
        if (s->goaway_due || s->goaway_sent || s->end != H2_END_NONE) {
            /* after our GOAWAY: ignored (RFC 9113 6.8), its block read for HPACK only */
        } else if (self_dependent) {
            h2_stream_error(s, id, E_PROTOCOL);
        } else if (s->open >= H2_MAX_STREAMS) {
            /* RFC 9113 5.1.2: over SETTINGS_MAX_CONCURRENT_STREAMS, the client may retry */
            h2_stream_error(s, id, E_REFUSED_STREAM);
        } else if (!h2_buf_take(s) || !(st = h2_stream_get(s, id))) {
            h2_stream_reset(s, id, NULL, E_REFUSED_STREAM);
        } else {
            s->progress = s->now; /* a new request: a stalled peer is no longer idle */
        }
    }
    if (self_dependent && st) {
        h2_stream_error(s, id, E_PROTOCOL);
        st = NULL;
    }
    if (ended(s) || !h2_buf_take(s)) {
        if (!ended(s))
            h2_terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
        return;
    }
    h2_blk_begin(s, id, st, trailers, end_stream);
    s->blk_open = !(flags & FL_END_HEADERS);
    h2_blk_fragment(s, p, len);
    if (!s->blk_open && !ended(s))
        h2_blk_end(s);
}

static void on_continuation(struct h2_session *s, uint8_t flags, int32_t id, const uint8_t *p,
                            size_t len)
{
    if (!s->blk_open || id != s->blk_id) {
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    if (++s->blk_cont > H2_MAX_CONTINUATIONS) { /* the 2024 CONTINUATION flood */
        h2_terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
        return;
    }
    if (len == 0 && !(flags & FL_END_HEADERS))
        s->empty++;
    h2_blk_fragment(s, p, len);
    if ((flags & FL_END_HEADERS) && !ended(s))
        h2_blk_end(s);
}

static void on_rst_stream(struct h2_session *s, int32_t id, size_t len)
{
    if (id == 0) {
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    if (len != 4) {
        h2_conn_error(s, E_FRAME_SIZE);
        return;
    }
    if (id > s->max_id) {
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    /* Rapid reset (CVE-2023-44487) is resetting streams the server is working on; a reset of
     * a stream already closed costs nothing (a client that cancelled a download resets again
     * for each DATA frame still in flight, as Python's h2 does). */
    struct stream *st = h2_stream_find(s, id);
    if (!st)
        return;
    s->resets++;
    h2_stream_close(s, st);
    h2_check_budget(s);
}

/* Applies a change of the client's SETTINGS_INITIAL_WINDOW_SIZE to every stream's window. */
static void initial_window(struct h2_session *s, uint32_t v)
{
    int64_t delta = (int64_t)v - s->peer_window;
    s->peer_window = (int32_t)v;
    LIVE_EACH(s, st)
    {
        st->window += delta;
        if (st->window > WINDOW_MAX) {
            h2_conn_error(s, E_FLOW_CONTROL);
            return;
        }
        if (st->window <= 0)
            prio_idle(&st->prio);
        else
            data_ready(s, st);
    }
}

static void on_settings(struct h2_session *s, uint8_t flags, int32_t id, const uint8_t *p,
                        size_t len)
{
    if (id != 0) {
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    if (flags & FL_ACK) {
        if (len != 0)
            h2_conn_error(s, E_FRAME_SIZE);
        return;
    }
    if (len % 6) {
        h2_conn_error(s, E_FRAME_SIZE);
        return;
    }
    s->control++;
    for (size_t i = 0; i < len; i += 6) {
        uint16_t key = (uint16_t)(p[i] << 8 | p[i + 1]);
        uint32_t v = get32(p + i + 2);
        switch (key) {
        case 1: /* HEADER_TABLE_SIZE */
            hpack_enc_set_max(&s->enc, v);
            break;
        case 2: /* ENABLE_PUSH: we never push */
            if (v > 1)
                h2_conn_error(s, E_PROTOCOL);
            break;
        case 4: /* INITIAL_WINDOW_SIZE */
            if (v > WINDOW_MAX)
                h2_conn_error(s, E_FLOW_CONTROL);
            else
                initial_window(s, v);
            break;
        case 5: /* MAX_FRAME_SIZE */
            if (v < 16384 || v > 16777215)
                h2_conn_error(s, E_PROTOCOL);
            else
                s->peer_frame = v;
            break;
        case 9: /* NO_RFC7540_PRIORITIES (RFC 9218 2.1) */
            if (v > 1)
                h2_conn_error(s, E_PROTOCOL);
            break;
        }
        if (ended(s))
            return;
    }
    h2_ctl(s, F_SETTINGS, FL_ACK, 0, NULL, 0);
    h2_check_budget(s);
}

static void on_ping(struct h2_session *s, uint8_t flags, int32_t id, const uint8_t *p, size_t len)
{
    if (id != 0) {
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    if (len != 8) {
        h2_conn_error(s, E_FRAME_SIZE);
        return;
    }
    if (flags & FL_ACK)
        return;
    s->control++;
    h2_ctl(s, F_PING, FL_ACK, 0, p, 8);
    h2_check_budget(s);
}

static void on_window_update(struct h2_session *s, int32_t id, const uint8_t *p, size_t len)
{
    if (len != 4) {
        h2_conn_error(s, E_FRAME_SIZE);
        return;
    }
    uint32_t inc = get32(p) & 0x7fffffff;
    if (id == 0) {
        if (inc == 0)
            h2_conn_error(s, E_PROTOCOL);
        else if ((s->window += inc) > WINDOW_MAX)
            h2_conn_error(s, E_FLOW_CONTROL);
        return;
    }
    if (id > s->max_id) {
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    struct stream *st = h2_stream_find(s, id);
    if (inc == 0) {
        h2_stream_error(s, id, E_PROTOCOL);
        return;
    }
    if (!st)
        return;
    if ((st->window += inc) > WINDOW_MAX) {
        h2_stream_error(s, id, E_FLOW_CONTROL);
        return;
    }
    data_ready(s, st);
}

static void on_priority(struct h2_session *s, int32_t id, const uint8_t *p, size_t len)
{
    if (id == 0) {
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    if (len != 5) {
        h2_stream_error(s, id, E_FRAME_SIZE);
        return;
    }
    s->control++;
    if ((int32_t)(get32(p) & 0x7fffffff) == id)
        h2_stream_error(s, id, E_PROTOCOL);
    h2_check_budget(s);
}

static void on_priority_update(struct h2_session *s, int32_t id, const uint8_t *p, size_t len)
{
    if (id != 0 || len < 4) {
        h2_conn_error(s, id != 0 ? E_PROTOCOL : E_FRAME_SIZE);
        return;
    }
    int32_t prioritized = (int32_t)(get32(p) & 0x7fffffff);
    if (prioritized == 0) { /* RFC 9218 7.1 */
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    s->control++;
    h2_check_budget(s);
    struct stream *st = h2_stream_find(s, prioritized);
    if (!st)
        return; /* an idle stream's is not kept (RFC 9218 7.1 permits it) */
    uint8_t urgency = st->prio.urgency;
    bool inc = st->prio.incremental;
    prio_parse((const char *)p + 4, len - 4, &urgency, &inc);
    prio_set(&s->data, &st->prio, urgency, inc);
}

static void on_goaway(struct h2_session *s, int32_t id, size_t len)
{
    if (id != 0) {
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    if (len < 8) {
        h2_conn_error(s, E_FRAME_SIZE);
        return;
    }
    s->peer_goaway = true;
    if (s->end == H2_END_NONE)
        s->end = H2_END_DONE;
}

static void frame_in(struct h2_session *s, const uint8_t *h, const uint8_t *p, size_t len)
{
    uint8_t type = h[3], flags = h[4];
    int32_t id = (int32_t)(get32(h + 5) & 0x7fffffff);
    if (s->blk_open && type != F_CONTINUATION) { /* RFC 9113 6.10: nothing between */
        h2_conn_error(s, E_PROTOCOL);
        return;
    }
    if (!s->settings_in) { /* the preface's SETTINGS comes first (3.4) */
        if (type != F_SETTINGS || (flags & FL_ACK)) {
            h2_conn_error(s, E_PROTOCOL);
            return;
        }
        s->settings_in = true;
    }
    switch (type) {
    case F_DATA:
        on_data(s, flags, id, p, len);
        break;
    case F_HEADERS:
        on_headers(s, flags, id, p, len);
        break;
    case F_PRIORITY:
        on_priority(s, id, p, len);
        break;
    case F_RST_STREAM:
        on_rst_stream(s, id, len);
        break;
    case F_SETTINGS:
        on_settings(s, flags, id, p, len);
        break;
    case F_PUSH_PROMISE: /* a client never pushes */
        h2_conn_error(s, E_PROTOCOL);
        break;
    case F_PING:
        on_ping(s, flags, id, p, len);
        break;
    case F_GOAWAY:
        on_goaway(s, id, len);
        break;
    case F_WINDOW_UPDATE:
        on_window_update(s, id, p, len);
        break;
    case F_CONTINUATION:
        on_continuation(s, flags, id, p, len);
        break;
    case F_PRIORITY_UPDATE:
        on_priority_update(s, id, p, len);
        break;
    default: /* unknown types are ignored (RFC 9113 5.5) */
        break;
    }
    h2_check_budget(s);
}

/* Takes the frames in data[0, len) (after any preface); a frame cut short waits in the frame
 * area. */
void h2_frames_in(struct h2_session *s, const uint8_t *data, size_t len)
{
    if (s->frame_len) { /* complete the frame read in part */
        uint8_t *fa = (uint8_t *)frame_area(s);
        size_t need = HDR;
        if (s->frame_len >= HDR)
            need = HDR + ((size_t)fa[0] << 16 | (size_t)fa[1] << 8 | fa[2]);
        size_t take = need - s->frame_len < len ? need - s->frame_len : len;
        memcpy(fa + s->frame_len, data, take);
        s->frame_len += take;
        data += take, len -= take;
        if (s->frame_len == HDR) {
            size_t flen = (size_t)fa[0] << 16 | (size_t)fa[1] << 8 | fa[2];
            if (flen > MAX_FRAME) {
                s->frame_len = 0;
                h2_conn_error(s, E_FRAME_SIZE);
                return;
            }
            take = flen < len ? flen : len;
            memcpy(fa + HDR, data, take);
            s->frame_len += take;
            data += take, len -= take;
            need = HDR + flen;
        }
        if (s->frame_len < need)
            return;
        s->frame_len = 0;
        frame_in(s, fa, fa + HDR, need - HDR);
    }
    while (len >= HDR && !ended(s)) {
        size_t flen = (size_t)data[0] << 16 | (size_t)data[1] << 8 | data[2];
        if (flen > MAX_FRAME) {
            h2_conn_error(s, E_FRAME_SIZE);
            return;
        }
        if (len < HDR + flen)
            break;
        frame_in(s, data, data + HDR, flen);
        data += HDR + flen, len -= HDR + flen;
    }
    if (len && !ended(s)) {
        if (!h2_buf_take(s)) {
            h2_terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
            return;
        }
        memcpy(frame_area(s), data, len);
        s->frame_len = len;
        if (len >= HDR) {
            size_t flen = (size_t)data[0] << 16 | (size_t)data[1] << 8 | data[2];
            if (flen > MAX_FRAME) {
                s->frame_len = 0;
                h2_conn_error(s, E_FRAME_SIZE);
            }
        }
    }
}
