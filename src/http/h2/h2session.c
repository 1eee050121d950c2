/* HTTP/2 server session, framing and stream states of its own (RFC 9113); see h2.h. This
 * file is the session: its buffer, streams and public calls; h2in.c reads frames, h2req.c
 * turns header blocks into requests, h2out.c writes frames (h2int.h: what they share).
 *
 * Input: frames are taken straight from the bytes h2_recv is given; only a frame cut by the end
 * of a read is copied (into the buffer's frame area) to be completed by the next. Header blocks
 * are decoded as their fragments arrive (hpack.h), a field split across frames waiting in the
 * tail area, so CONTINUATION frames cost no reassembly.
 *
 * Requests: each header block stands for the HTTP/1.1 head "GET /x HTTP/1.1", host from
 * :authority, the fields; both protocols share one request parser and its limits and verdicts
 * (400, 431...), and nothing else in the server needs to know a request came over HTTP/2. The
 * fields are decoded straight into their place in that head ("name: value\r\n", the decoder
 * leaving the gap for ": ") and go to http1_split_* one by one; the text is kept for the rare
 * request that needs its head later (h2_hold, a request with a body), which http1_parse then
 * reads. Pseudo-header fields come first (RFC 9113 8.3): they wait in their own area, and the
 * fields are decoded behind the room the request line will take, which is known once they are.
 *
 * Output: h2_output writes, in this order, the control frames queued (ACKs, RST_STREAM,
 * WINDOW_UPDATE), the HEADERS of the responses given since (in the order given: HPACK's table
 * must see them in the order the client does), then DATA by RFC 9218 priority (core/prio.h's
 * scheduler, HTTP/3's too): the lowest urgency first; within one, the non-incremental responses in
 * stream-ID order, each to its end before the next, incremental ones a frame each in turn behind
 * them once they have sent. Memory bodies are copied beside their frame header, file bodies become
 * file segments of the plan (sendfile/splice, no copy through user space).
 *
 * Lifetimes: a stream's record (pooled) holds the caller's token until the stream closes and
 * the output that carried its last bytes is sent; only then is `done` called, so a file
 * segment never outlives the fd it borrows. */
#include "http/h2/h2int.h"

/* ---- the buffer: held only while in use ---- */

/* Gives the buffer back when nothing is in it. */
void h2_buf_give_back(struct h2_session *s)
{
    if (!s->buf || s->busy || s->ctl_len || s->frame_len || s->tail_len || s->blk_open || s->dlv)
        return;
    s->hooks->buf_put(s->user, s->buf);
    s->buf = NULL;
    s->req = NULL;
    s->plan = NULL;
}

/* ---- frames ---- */

/* Ends the session with GOAWAY(code); `why` is kept unless an earlier reason was. */
void h2_terminate(struct h2_session *s, enum h2_end why, uint32_t code)
{
    if (s->end == H2_END_NONE || s->end == H2_END_DONE) {
        s->end = why;
        s->goaway_code = code;
        s->goaway_due = true;
        s->goaway_sent = false;
    }
}

void h2_conn_error(struct h2_session *s, uint32_t code)
{
    h2_terminate(s, code == E_ENHANCE_YOUR_CALM ? H2_END_FLOOD : H2_END_PROTOCOL, code);
}

/* Queues a control frame (payload len bytes). A client that does not read what it asked for
 * (PING and SETTINGS ACKs piling up) is told to go away. */
void h2_ctl(struct h2_session *s, uint8_t type, uint8_t flags, uint32_t id, const void *payload,
            size_t len)
{
    if (!h2_buf_take(s) || s->ctl_len + HDR + len > H2_CTL_CAP) {
        h2_terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
        return;
    }
    uint8_t *h = (uint8_t *)ctl_area(s) + s->ctl_len;
    put_hdr(h, len, type, flags, id);
    if (len)
        memcpy(h + HDR, payload, len);
    s->ctl_len += HDR + len;
}

void h2_ctl32(struct h2_session *s, uint8_t type, uint32_t id, uint32_t v)
{
    uint8_t p[4];
    put32(p, v);
    h2_ctl(s, type, 0, id, p, 4);
}

/* ---- budgets ---- */

static bool over_budget(struct h2_session *s)
{
    if (s->now - s->window_start >= H2_WINDOW_MS) {
        s->window_start = s->now;
        s->resets = s->control = s->empty = s->refused = 0;
    }
    return s->resets > H2_MAX_RESETS || s->control > H2_MAX_CONTROL || s->empty > H2_MAX_EMPTY ||
           s->refused > H2_MAX_REFUSED;
}

void h2_check_budget(struct h2_session *s)
{
    if (over_budget(s))
        h2_terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
}

/* ---- streams ---- */

static void head_free(struct h2_session *s, struct stream *st)
{
    if (st->head)
        s->kept -= st->head_len;
    free(st->head);
    st->head = NULL;
    st->held = false;
}

static void stream_put(struct h2_session *s, struct stream *st)
{
    head_free(s, st);
    free(st->fields);
    st->fields = NULL;
    st->next = s->free_list;
    s->free_list = st;
    s->nfree++;
}

/* Frees stream records beyond keep. */
static void streams_trim(struct h2_session *s, unsigned keep)
{
    while (s->nfree > keep) {
        struct stream *st = s->free_list;
        s->free_list = st->next;
        s->nfree--;
        s->nrecords--;
        free(st);
    }
}

/* The stream is over (both ways, or reset): off the open list, onto the done list. */
void h2_stream_close(struct h2_session *s, struct stream *st)
{
    q_remove(st);
    st->closed = true;
    if (s->blk_st == st) {
        s->blk_st = NULL;
        s->blk_request = false;
    }
    s->open--;
    list_remove(&st->live);
    st->body = NULL;
    st->next = NULL;
    *s->done_tail = st;
    s->done_tail = &st->next;
}

/* Resets stream id (RST_STREAM code): a stream error, or the server giving up on it. */
void h2_stream_reset(struct h2_session *s, int32_t id, struct stream *st, uint32_t code)
{
    h2_ctl32(s, F_RST_STREAM, (uint32_t)id, code);
    if (st)
        h2_stream_close(s, st);
}

/* A stream error from the client's side: counted with invalid frames (a client making them
 * by the thousand is told to go away). */
void h2_stream_error(struct h2_session *s, int32_t id, uint32_t code)
{
    h2_stream_reset(s, id, h2_stream_find(s, id), code);
    s->refused++;
    h2_check_budget(s);
}

/* Calls `done` for every stream that closed before the output now sent, and frees them. */
void h2_release_done(struct h2_session *s)
{
    while (s->done_head) {
        struct stream *st = s->done_head;
        s->done_head = st->next;
        if (!s->done_head)
            s->done_tail = &s->done_head;
        if (st->answered)
            s->hooks->done(s->user, st->token, st->sent_all ? 0 : -ECONNRESET);
        stream_put(s, st);
    }
}

/* Whether stream id (odd, <= max_id) was opened, rather than skipped (RFC 9113 5.1.1). */
bool h2_was_opened(const struct h2_session *s, int32_t id)
{
    int32_t back = (s->max_id - id) / 2;
    return back >= 64 || (s->opened >> back & 1);
}

/* ---- public ---- */

int h2_new(struct h2_session **out, const struct h2_opts *opts, const struct h2_hooks *hooks,
           void *user)
{
    struct h2_session *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->hooks = hooks;
    s->user = user;
    s->opts = *opts;
    s->done_tail = &s->done_head;
    list_init(&s->live);
    list_init(&s->headers);
    prio_sched_init(&s->data);
    s->peer_frame = MAX_FRAME;
    s->peer_window = WINDOW;
    s->window = WINDOW;
    s->recv_window = WINDOW;
    hpack_dec_init(&s->dec, H2_HPACK_TABLE);
    hpack_enc_init(&s->enc);
    *out = s;
    return 0;
}

void h2_free(struct h2_session *s)
{
    if (!s)
        return;
    while (!list_empty(&s->live))
        h2_stream_close(s, LIST_ITEM(list_first(&s->live), struct stream, live));
    h2_release_done(s);
    streams_trim(s, 0);
    if (s->buf)
        s->hooks->buf_put(s->user, s->buf);
    hpack_dec_free(&s->dec);
    hpack_enc_free(&s->enc);
    free(s->lead);
    free(s);
}

int h2_recv(struct h2_session *s, const void *data, size_t len, int64_t now)
{
    const uint8_t *p = data;
    s->now = now;
    if (ended(s))
        return -EPROTO;
    if (s->preface < POLICY_H2_PREFACE_LEN) {
        size_t n = POLICY_H2_PREFACE_LEN - s->preface;
        if (n > len)
            n = len;
        if (memcmp(p, &POLICY_H2_PREFACE[s->preface], n) != 0) {
            h2_conn_error(s, E_PROTOCOL);
            return -EPROTO;
        }
        s->preface = (uint8_t)(s->preface + n);
        p += n, len -= n;
    }
    if (len)
        h2_frames_in(s, p, len);
    h2_buf_give_back(s);
    return ended(s) ? -EPROTO : 0;
}

int h2_respond(struct h2_session *s, int32_t id, int status, const struct h2_field *fields,
               size_t nfields, struct plan *body, void *token)
{
    struct stream *st = h2_stream_find(s, id);
    if (!st || st->answered || ended(s))
        return -ENOENT;
    /* The array and the names are copied (the values stay the caller's until done). */
    size_t names = 0;
    for (size_t i = 0; i < nfields; i++)
        names += fields[i].name_len;
    struct h2_field *copy = malloc(nfields * sizeof(*copy) + names + 1);
    if (!copy)
        return -ENOMEM;
    char *at = (char *)(copy + nfields);
    for (size_t i = 0; i < nfields; i++) {
        copy[i] = fields[i];
        memcpy(at, fields[i].name, fields[i].name_len);
        copy[i].name = at;
        at += fields[i].name_len;
    }
    st->fields = copy;
    st->nfields = nfields;
    st->status = status;
    st->body = body && plan_left(body) > 0 ? body : NULL;
    st->answered = true;
    st->token = token;
    list_push_back(&s->headers, &st->hlink);
    return 0;
}

int h2_respond_plan(struct h2_session *s, int32_t id, struct plan *p, const struct hpack_pre *pre,
                    void *token)
{
    struct stream *st = h2_stream_find(s, id);
    if (!st || st->answered || ended(s))
        return -ENOENT;
    /* The field lines stay where they are (the plan is the caller's until done): they are
     * encoded when the HEADERS frame is written. */
    st->fields_plan = p;
    st->pre = pre;
    st->status = p->status;
    plan_advance(p, p->head_len);
    st->body = plan_left(p) > 0 ? p : NULL;
    st->answered = true;
    st->token = token;
    list_push_back(&s->headers, &st->hlink);
    return 0;
}

int h2_interim(struct h2_session *s, int32_t id, int status, const char *lines, size_t len)
{
    struct stream *st = h2_stream_find(s, id);
    if (status < 100 || status > 199 || len == 0 || len > 4096)
        return -EINVAL;
    if (!st || st->answered || ended(s))
        return -ENOENT;
    st->interim = lines;
    st->interim_len = (uint16_t)len;
    st->interim_status = (uint16_t)status;
    return 0;
}

struct hpack_pre *h2_pre_new(const char *lines, size_t len, uint64_t id)
{
    if (len == 0)
        return NULL;
    struct plan p; /* read as a response's lines are: the same parse, the same fields */
    plan_init(&p);
    if (!plan_mem(&p, lines, len))
        return NULL;
    p.head_len = len;
    struct hpack_field f[16];
    size_t n = 0, pos = 0;
    while (n < 16 &&
           plan_field_next(&p, &pos, &f[n].name, &f[n].name_len, &f[n].value, &f[n].value_len)) {
        if (h1_only(f[n].name, f[n].name_len))
            return NULL;
        n++;
    }
    if (pos != len)
        return NULL;
    return hpack_pre_new(f, n, lines, len, id);
}

int h2_hold(struct h2_session *s, int32_t id)
{
    struct stream *st = s->dlv;
    if (!st || st->id != id)
        return -ENOENT;
    char *head = malloc(s->dlv_len);
    if (!head)
        return -ENOMEM;
    memcpy(head, s->dlv_head, s->dlv_len);
    head_free(s, st); /* NULL: deliver's caller took it */
    st->head = head;
    st->head_len = s->dlv_len;
    s->kept += s->dlv_len;
    st->held = true;
    return 0;
}

int h2_replay(struct h2_session *s, int32_t id)
{
    struct stream *st = h2_stream_find(s, id);
    if (!st || !st->held)
        return -ENOENT;
    char *head = st->head;
    size_t len = st->head_len;
    st->head = NULL;
    st->held = false;
    s->kept -= len;
    h2_deliver(s, st, head, len, 0);
    free(head);
    return 0;
}

void h2_reset(struct h2_session *s, int32_t id)
{
    struct stream *st = h2_stream_find(s, id);
    if (st && !st->answered)
        h2_stream_reset(s, id, st, E_REFUSED_STREAM);
}

void h2_sent(struct h2_session *s, int64_t now)
{
    s->busy = false;
    s->out_len = 0;
    if (s->plan)
        plan_init(s->plan);
    s->progress = now;
    h2_release_done(s);
    h2_buf_give_back(s);
}

void h2_trim(struct h2_session *s)
{
    if (s->open || s->done_head)
        return;
    streams_trim(s, STREAMS_IDLE_KEEP);
    hpack_enc_forget(&s->enc);
    free(s->lead);
    s->lead = NULL;
}

void h2_goaway(struct h2_session *s)
{
    if (s->end != H2_END_NONE)
        return;
    s->end = H2_END_DONE;
    s->goaway_code = E_NO_ERROR;
    s->goaway_last = s->max_id;
    s->goaway_due = true;
}

bool h2_check(struct h2_session *s, int64_t now)
{
    if (ended(s))
        return true;
    if (s->open == 0 && !s->busy)
        return false;
    if (now - s->progress < s->opts.stall_ms)
        return false;
    h2_terminate(s, H2_END_STALL, E_NO_ERROR);
    return true;
}

bool h2_finished(const struct h2_session *s)
{
    if (s->busy || s->ctl_len || s->goaway_due)
        return false;
    if (ended(s))
        return true;
    return s->end == H2_END_DONE && s->open == 0 && !s->done_head;
}

unsigned h2_open_streams(const struct h2_session *s)
{
    return s->open;
}

enum h2_end h2_end(const struct h2_session *s)
{
    return s->end;
}

void h2_shed(struct h2_session *s)
{
    LIVE_EACH(s, st)
    {
        if (st->head) {
            head_free(s, st);
            h2_stream_close(s, st);
        }
    }
}

void h2_peer_closed(struct h2_session *s)
{
    s->peer_goaway = true;
    if (s->end == H2_END_NONE)
        s->end = H2_END_DONE;
    LIVE_EACH(s, st)
    {
        if (!st->recv_done && !st->answered) /* its body can never come: nothing to answer */
            h2_stream_close(s, st);
    }
}

int64_t h2_deadline(const struct h2_session *s)
{
    int64_t due = INT64_MAX;
    if (s->kept == 0) /* no head kept: no body waited for (the usual case, without a walk) */
        return due;
    LIVE_EACH(s, st)
    if (st->head && !st->held && st->body_due < due)
        due = st->body_due;
    return due;
}

void h2_expire(struct h2_session *s, int64_t now)
{
    s->now = now;
    LIVE_EACH(s, st)
    { /* delivering may answer and close st */
        if (!st->head || st->held || st->body_due > now || st->answered)
            continue;
        /* The response can still be sent (the client's half is open, ours untouched): 408,
         * then RST_STREAM(NO_ERROR) as after any response sent before the request ended. */
        char *head = st->head;
        size_t len = st->head_len;
        st->head = NULL;
        s->kept -= len;
        h2_deliver(s, st, head, len, 408);
        free(head);
    }
}

size_t h2_unfinished(const struct h2_session *s)
{
    bool input = s->frame_len || s->tail_len || s->blk_open;
    return s->kept + (s->buf && input ? H2_BUF_SIZE : 0);
}

size_t h2_mem(const struct h2_session *s)
{
    return sizeof(*s) + s->nrecords * sizeof(struct stream) + s->kept + hpack_table_mem(&s->dec.t) +
           hpack_table_mem(&s->enc.t);
}
