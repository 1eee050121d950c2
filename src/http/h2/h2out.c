/* HTTP/2's frames out, part of h2 (see h2.h, h2int.h): the output plan in its order
 * (control frames, the HEADERS of the responses given since, then DATA in the order of
 * core/prio.h's scheduler), the response fields HPACK-encoded (pre-encoded runs where the
 * plan's lines hold them), DATA payloads copied (memory) or planned as file segments.
 * Must not: read input or decide which stream may send beyond the scheduler and the windows.
 * Ownership: the plan and its frames are in the session's buffer until h2_sent. */
#include "http/h2/h2int.h"

/* ---- output ---- */

/* Takes the n bytes written at the end of the output buffer into the plan, extending the last
 * memory segment when it ends there. */
static void out_grow(struct h2_session *s, size_t n)
{
    char *at = out_area(s) + s->out_len;
    struct plan *o = s->plan;
    s->out_len += n;
    if (n == 0)
        return;
    struct seg *last = o->nseg ? &o->segs[o->nseg - 1] : NULL;
    if (last && last->mem && last->mem + last->off + last->len == at) {
        last->len += n;
        o->bytes += n;
    } else {
        plan_mem(o, at, n);
    }
}

static void out_put(struct h2_session *s, const void *p, size_t n)
{
    memcpy(out_area(s) + s->out_len, p, n);
    out_grow(s, n);
}

/* The room left for frames, keeping a GOAWAY's. */
static size_t out_room(const struct h2_session *s)
{
    return H2_OUT_CAP - GOAWAY_LEN - s->out_len;
}

/* Walks the response's fields: from the plan's field lines or the copied array. */
static bool field_next(const struct stream *st, size_t *pos, const char **name, size_t *name_len,
                       const char **value, size_t *value_len)
{
    if (st->fields_plan)
        return plan_field_next(st->fields_plan, pos, name, name_len, value, value_len);
    if (*pos >= st->nfields)
        return false;
    const struct h2_field *f = &st->fields[(*pos)++];
    *name = f->name, *name_len = f->name_len, *value = f->value, *value_len = f->value_len;
    return true;
}

/* Whether the field lines at `at` of the stream's plan begin with its pre-encoded run's text
 * (only then is that run sent pre-encoded: any other response keeps its own fields). */
static bool pre_at(const struct stream *st, size_t at)
{
    size_t key_len;
    const char *key = hpack_pre_key(st->pre, &key_len);
    return plan_fields_at(st->fields_plan, at, key, key_len);
}

/* The session's pre-encoded first H2_LEAD_LINES field lines of st's response (Server and
 * Date for the core's responses), made again when they differ from the last response's (a new
 * second). NULL when the response has fewer lines or they cannot be kept. */
static const struct hpack_pre *lead_of(struct h2_session *s, const struct stream *st)
{
    const struct plan *p = st->fields_plan;
    if (!p || p->nseg == 0)
        return NULL;
    size_t key_len = 0;
    const char *key = s->lead ? hpack_pre_key(s->lead, &key_len) : NULL;
    if (key && plan_fields_at(p, 0, key, key_len))
        return s->lead; /* the key ends a line: a match is those very lines */
    free(s->lead);
    size_t n = plan_fields_lead(p, H2_LEAD_LINES);
    s->lead = n ? h2_pre_new(p->segs[0].mem, n, H2_LEAD_ID | ++s->lead_n) : NULL;
    return s->lead;
}

/* The most bytes the stream's header block (and its frames) can take. */
static size_t block_bound(const struct h2_session *s, const struct stream *st)
{
    size_t n = HPACK_UPDATE_BOUND + HPACK_FIELD_BOUND(7, 3);
    if (st->fields_plan) {
        n += 3 * st->fields_plan->head_len; /* a field line is at least 4 bytes */
        if (st->pre)
            n += hpack_pre_bound(st->pre);
    } else {
        for (size_t i = 0; i < st->nfields; i++)
            n += HPACK_FIELD_BOUND(st->fields[i].name_len, st->fields[i].value_len);
    }
    if (st->interim_len) /* its own block and frame, before */
        n += HDR + HPACK_UPDATE_BOUND + HPACK_FIELD_BOUND(7, 3) + 3 * (size_t)st->interim_len;
    return HDR + n + (n / s->peer_frame + 1) * HDR;
}

/* h2_interim's HEADERS frame (no END_STREAM) at h, in the order of the header blocks on the
 * wire, so that HPACK's state stays in step; its fields are not indexed. Returns its bytes, 0
 * when it does not fit one frame (then it is left out: the final response carries the same
 * fields). */
static size_t write_interim(struct h2_session *s, struct stream *st, uint8_t *h)
{
    uint8_t *b = h + HDR;
    struct plan lines;
    plan_init(&lines);
    plan_mem(&lines, st->interim, st->interim_len);
    lines.head_len = st->interim_len;
    char code[3] = {(char)('0' + st->interim_status / 100 % 10),
                    (char)('0' + st->interim_status / 10 % 10),
                    (char)('0' + st->interim_status % 10)};
    size_t n = hpack_enc_begin(&s->enc, b), pos = 0, name_len, value_len;
    n += hpack_enc_field(&s->enc, b + n, ":status", 7, code, 3, HPACK_NO_INDEX);
    const char *name, *value;
    while (plan_field_next(&lines, &pos, &name, &name_len, &value, &value_len))
        if (!h1_only(name, name_len))
            n += hpack_enc_field(&s->enc, b + n, name, name_len, value, value_len, HPACK_NO_INDEX);
    st->interim_len = 0;
    if (n > s->peer_frame)
        return 0;
    put_hdr(h, n, F_HEADERS, FL_END_HEADERS, (uint32_t)st->id);
    return HDR + n;
}

/* After the stream's last frame: closes it, or (its request still coming) resets it so the
 * client stops sending (RFC 9113 8.1). */
static void send_ended(struct h2_session *s, struct stream *st)
{
    st->sent_all = true;
    if (!st->recv_done)
        h2_ctl32(s, F_RST_STREAM, (uint32_t)st->id, E_NO_ERROR);
    h2_stream_close(s, st);
}

/* The static table's index of ":status: status" (RFC 7541 Appendix A), or 0: the usual
 * statuses without a look-up. */
static uint8_t status_index(int status)
{
    switch (status) {
    case 200:
        return 8;
    case 204:
        return 9;
    case 206:
        return 10;
    case 304:
        return 11;
    case 400:
        return 12;
    case 404:
        return 13;
    case 500:
        return 14;
    default:
        return 0;
    }
}

/* Writes the stream's HEADERS (and CONTINUATION) frames. False when they do not fit now. */
static bool write_headers(struct h2_session *s, struct stream *st)
{
    size_t bound = block_bound(s, st);
    if (bound > out_room(s))
        return false;
    q_remove(st);
    uint8_t *h = (uint8_t *)out_area(s) + s->out_len;
    if (st->interim_len) {
        size_t i = write_interim(s, st, h);
        out_grow(s, i);
        h += i;
    }
    uint8_t *b = h + HDR;
    size_t n = hpack_enc_begin(&s->enc, b);
    char code[3] = {(char)('0' + st->status / 100 % 10), (char)('0' + st->status / 10 % 10),
                    (char)('0' + st->status % 10)};
    /* The first response's fields are not indexed: a table is worth its memory once a second
     * response can use it, and a connection that asks one thing then idles holds none. */
    unsigned index = s->responded ? HPACK_INDEX : HPACK_NO_INDEX;
    s->responded = true;
    uint8_t sidx = status_index(st->status);
    if (sidx)
        b[n++] = (uint8_t)(0x80 | sidx);
    else
        n += hpack_enc_field(&s->enc, b + n, ":status", 7, code, 3, index);
    size_t pos = 0, name_len, value_len;
    const char *name, *value;
    const struct hpack_pre *lead = index == HPACK_INDEX ? lead_of(s, st) : NULL;
    if (lead) {
        hpack_pre_key(lead, &pos);
        n += hpack_enc_pre(&s->enc, b + n, lead, index);
    }
    for (size_t at = pos; field_next(st, &pos, &name, &name_len, &value, &value_len); at = pos) {
        if (st->pre && pre_at(st, at)) { /* the pre-encoded run starts here */
            size_t key_len;
            hpack_pre_key(st->pre, &key_len);
            n += hpack_enc_pre(&s->enc, b + n, st->pre, index);
            pos = at + key_len;
            st->pre = NULL;
        } else if (!h1_only(name, name_len)) {
            n += hpack_enc_field(&s->enc, b + n, name, name_len, value, value_len, index);
        }
    }
    bool end_stream = !st->body;
    /* Split into frames of the client's maximum size: each later part moves up to make room
     * for a CONTINUATION header before it (rare: response heads are small). */
    size_t first = n < s->peer_frame ? n : s->peer_frame, total = HDR + n;
    put_hdr(h, first, F_HEADERS,
            (uint8_t)((first == n ? FL_END_HEADERS : 0) | (end_stream ? FL_END_STREAM : 0)),
            (uint32_t)st->id);
    for (size_t done = first; done < n;) {
        size_t part = n - done < s->peer_frame ? n - done : s->peer_frame;
        uint8_t *at = h + total - (n - done);
        memmove(at + HDR, at, n - done);
        put_hdr(at, part, F_CONTINUATION, done + part == n ? FL_END_HEADERS : 0, (uint32_t)st->id);
        total += HDR;
        done += part;
    }
    out_grow(s, total);
    free(st->fields);
    st->fields = NULL;
    st->fields_plan = NULL;
    st->pre = NULL;
    if (end_stream)
        send_ended(s, st);
    else
        data_ready(s, st);
    return true;
}

/* Writes one DATA frame of st. False when nothing more fits this output. */
static bool write_data(struct h2_session *s, struct stream *st)
{
    struct plan *b = st->body;
    uint64_t left = plan_left(b), want = left;
    if (want > (uint64_t)st->window)
        want = st->window > 0 ? (uint64_t)st->window : 0;
    if (want > (uint64_t)s->window)
        want = (uint64_t)s->window;
    if (want > s->peer_frame)
        want = s->peer_frame;
    if (want == 0 && left > 0) { /* its window closed (SETTINGS): it waits for an update */
        prio_idle(&st->prio);
        return true;
    }
    /* What fits: memory payload beside the header in the buffer, and for each file piece a
     * segment (and one for the memory after it) in the plan. */
    size_t room = out_room(s);
    unsigned nseg = s->plan->nseg + 1;
    if (room <= HDR || nseg > PLAN_MAX_SEGS)
        return false;
    uint64_t n = 0, mem = 0;
    for (unsigned i = b->cur; n < want && i < b->nseg; i++) {
        uint64_t take = b->segs[i].len < want - n ? b->segs[i].len : want - n;
        if (b->segs[i].mem) {
            bool cut = HDR + mem + take > room;
            if (cut)
                take = room - HDR - mem;
            mem += take;
            n += take;
            if (cut)
                break;
        } else {
            if (nseg + 2 > PLAN_MAX_SEGS)
                break;
            nseg += 2;
            n += take;
        }
    }
    if (n == 0 && left > 0)
        return false;
    bool end = n == left;
    uint8_t h[HDR];
    put_hdr(h, (size_t)n, F_DATA, end ? FL_END_STREAM : 0, (uint32_t)st->id);
    out_put(s, h, HDR);
    for (uint64_t rem = n; rem;) {
        struct seg *g = plan_seg(b);
        uint64_t take = g->len < rem ? g->len : rem;
        if (g->mem)
            out_put(s, g->mem + g->off, (size_t)take);
        else
            plan_file(s->plan, g->fd, g->off, take);
        plan_advance(b, take);
        rem -= take;
    }
    st->window -= (int64_t)n;
    s->window -= (int64_t)n;
    if (end) {
        send_ended(s, st);
    } else if (st->window <= 0) {
        prio_idle(&st->prio); /* back at its place when the window opens */
    } else {
        prio_sent(&s->data, &st->prio); /* an incremental one: the next takes its turn */
    }
    return true;
}

static void write_goaway(struct h2_session *s)
{
    uint8_t g[GOAWAY_LEN];
    put_hdr(g, 8, F_GOAWAY, 0, 0);
    put32(g + HDR, (uint32_t)s->goaway_last);
    put32(g + HDR + 4, s->goaway_code);
    out_put(s, g, sizeof(g));
    s->goaway_due = false;
    s->goaway_sent = true;
}

static bool have_output(const struct h2_session *s)
{
    if (!s->settings_out || s->ctl_len || s->goaway_due)
        return true;
    if (ended(s))
        return false;
    if (!list_empty(&s->headers))
        return true;
    return s->window > 0 && prio_next(&s->data);
}

static void write_output(struct h2_session *s)
{
    if (!s->settings_out) {
        /* MAX_CONCURRENT_STREAMS, MAX_HEADER_LIST_SIZE, ENABLE_PUSH 0,
         * NO_RFC7540_PRIORITIES 1 (RFC 9218 2.1) */
        static const uint8_t settings[] = {
            0,
            3,
            0,
            0,
            0,
            H2_MAX_STREAMS,
            0,
            6,
            0,
            0,
            H2_MAX_HEADER_LIST >> 8,
            0,
            0,
            2,
            0,
            0,
            0,
            0,
            0,
            9,
            0,
            0,
            0,
            1,
        };
        uint8_t h[HDR];
        put_hdr(h, sizeof(settings), F_SETTINGS, 0, 0);
        out_put(s, h, HDR);
        out_put(s, settings, sizeof(settings));
        s->settings_out = true;
    }
    if (s->ctl_len) {
        out_put(s, ctl_area(s), s->ctl_len);
        s->ctl_len = 0;
    }
    if (s->goaway_due) {
        if (s->goaway_last == 0 || ended(s))
            s->goaway_last = s->max_id;
        write_goaway(s);
    }
    if (ended(s))
        return;
    /* in the order given: HPACK's table sees them in the order the client does */
    struct list *l;
    while ((l = list_first(&s->headers))) {
        struct stream *st = LIST_ITEM(l, struct stream, hlink);
        if (write_headers(s, st))
            continue;
        if (s->out_len > 0)
            return;                                 /* the next output */
        h2_stream_reset(s, st->id, st, E_INTERNAL); /* a head that never fits */
    }
    struct prio_node *next;
    while (s->window > 0 && (next = prio_next(&s->data)))
        if (!write_data(s, LIST_ITEM(next, struct stream, prio)))
            break;
    /* the RST_STREAMs ending streams just sent, when the buffer and the plan have room (a
     * plan full of file pieces leaves them to the next output) */
    if (s->ctl_len && s->ctl_len <= H2_OUT_CAP - s->out_len && s->plan->nseg < PLAN_MAX_SEGS) {
        out_put(s, ctl_area(s), s->ctl_len);
        s->ctl_len = 0;
    }
}

struct plan *h2_output(struct h2_session *s)
{
    if (s->busy)
        return s->plan;
    h2_release_done(s);
    if (!have_output(s) || !h2_buf_take(s)) {
        h2_buf_give_back(s);
        return NULL;
    }
    s->out_len = 0;
    plan_init(s->plan);
    write_output(s);
    if (s->plan->nseg == 0) {
        h2_buf_give_back(s);
        return NULL;
    }
    s->busy = true;
    return s->plan;
}
