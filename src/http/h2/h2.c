/* HTTP/2 server session, framing and stream states of its own (RFC 9113); see h2.h.
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
 * must see them in the order the client does), then DATA by RFC 9218 priority: the lowest
 * urgency first; within one, a non-incremental response to its end before the next, incremental
 * ones a frame each in turn. Memory bodies are copied beside their frame header, file bodies
 * become file segments of the plan (sendfile/splice, no copy through user space).
 *
 * Lifetimes: a stream's record (pooled) holds the caller's token until the stream closes and
 * the output that carried its last bytes is sent; only then is `done` called, so a file
 * segment never outlives the fd it borrows. */
#include "http/h2/h2.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/hfield.h"
#include "core/policy.h"
#include "core/prio.h"
#include "http/h2/hpack.h"

/* frame types (RFC 9113 6, RFC 9218 7.1) */
enum {
    F_DATA,
    F_HEADERS,
    F_PRIORITY,
    F_RST_STREAM,
    F_SETTINGS,
    F_PUSH_PROMISE,
    F_PING,
    F_GOAWAY,
    F_WINDOW_UPDATE,
    F_CONTINUATION,
    F_PRIORITY_UPDATE = 0x10,
};
#define FL_END_STREAM 0x1
#define FL_ACK 0x1
#define FL_END_HEADERS 0x4
#define FL_PADDED 0x8
#define FL_PRIORITY 0x20

/* error codes (RFC 9113 7) */
enum {
    E_NO_ERROR,
    E_PROTOCOL,
    E_INTERNAL,
    E_FLOW_CONTROL,
    E_SETTINGS_TIMEOUT,
    E_STREAM_CLOSED,
    E_FRAME_SIZE,
    E_REFUSED_STREAM,
    E_CANCEL,
    E_COMPRESSION,
    E_CONNECT,
    E_ENHANCE_YOUR_CALM,
};

#define HDR 9           /* frame header */
#define MAX_FRAME 16384 /* our SETTINGS_MAX_FRAME_SIZE (the default) */
#define WINDOW 65535    /* our receive windows (the defaults) */
#define WINDOW_MAX 0x7fffffff
#define GOAWAY_LEN (HDR + 8)
#define STREAMS_IDLE_KEEP 0     /* stream records h2_trim keeps */
#define HEAD_CAP HTTP1_MAX_HEAD /* the request head; past it, 431 */
#define FIELD_GAP 2             /* ": " between a decoded name and its value */
#define H2_LEAD_LINES 2         /* leading response field lines kept pre-encoded (lead_of) */
#define H2_LEAD_ID (1ull << 55) /* the session's pre-encoded ids: above the file cache's */

/* write_output's SETTINGS spell these out byte by byte */
_Static_assert(H2_MAX_STREAMS < 256 && H2_MAX_HEADER_LIST % 256 == 0 &&
                   H2_MAX_HEADER_LIST < 65536 && H2_HPACK_TABLE == HPACK_TABLE_MAX,
               "SETTINGS values");

struct stream {
    int32_t id;
    bool answered;  /* h2_respond took a token */
    bool sent_all;  /* the frame carrying END_STREAM went out */
    bool recv_done; /* the client's END_STREAM came: half-closed (remote) */
    bool held;      /* head is h2_hold's: the request was delivered */
    bool closed;    /* on the done list */
    int status;
    int64_t window;      /* what the client lets us send */
    int32_t recv_window; /* what we let the client send */
    struct hfield_length cl; /* content-length, to check the DATA against (RFC 9113 8.1.1) */
    void *token;
    struct plan *body;
    const struct plan *fields_plan; /* the response's fields: from h2_respond_plan, */
    const struct hpack_pre *pre;    /* with a run of them pre-encoded (h2_respond_plan), */
    struct h2_field *fields;        /* or copied from h2_respond's array */
    size_t nfields;
    const char *interim; /* h2_interim's field lines (the caller's), sent before the fields */
    uint16_t interim_len, interim_status;
    char *head; /* the request's head, kept until its body ends (rare), or by h2_hold */
    size_t head_len;
    int64_t body_due; /* a kept head's body: its next DATA by then (ms), else 408 (h2_expire) */
    int req_status;
    struct stream *next;          /* free or done list */
    struct list live;       /* the session's open streams */
    struct list hlink;      /* the HEADERS to write, while its are */
    struct prio_node prio;  /* its place in the DATA order (core/prio.h), while it may send */
};

struct h2_session {
    const struct h2_hooks *hooks;
    void *user;
    struct h2_opts opts;
    enum h2_end end;

    struct hpack_dec dec;
    struct hpack_enc enc;

    /* the connection */
    uint8_t preface;   /* bytes of the client's preface seen */
    bool settings_in;  /* the client's first SETTINGS came */
    bool settings_out; /* ours went out */
    bool goaway_due;   /* our GOAWAY is to be written */
    bool goaway_sent;  /* ... and was */
    bool peer_goaway;  /* the client's came */
    bool responded;    /* a HEADERS frame went out */
    /* The leading field lines of the last response (Server, Date: the same for a second),
     * pre-encoded for the ones after it; its id is ours (H2_LEAD_ID | lead_n), apart from the
     * file cache's. NULL until a second response, and after h2_trim. */
    struct hpack_pre *lead;
    uint64_t lead_n;
    uint32_t goaway_code;
    int32_t goaway_last; /* streams above it are ignored once our GOAWAY is out */
    uint32_t peer_frame; /* the client's SETTINGS_MAX_FRAME_SIZE */
    int32_t peer_window; /* its SETTINGS_INITIAL_WINDOW_SIZE */
    int64_t window;      /* what the client lets us send on the connection */
    int32_t recv_window; /* what we let it send */

    /* the buffer (hooks.buf_get) while one is held, else NULL, and its areas */
    char *buf;
    uint32_t ctl_len;   /* control frames waiting */
    uint32_t frame_len; /* a frame read in part */
    uint32_t tail_len;  /* a header field's encoding read in part */

    /* output */
    bool busy; /* plan handed out, not yet sent */
    uint32_t out_len;
    struct plan *plan; /* in the buffer (an idle session holds none) */

    /* streams */
    unsigned open;
    struct list live; /* open streams */
    struct stream *free_list;
    unsigned nfree; /* records on free_list */
    unsigned nrecords;
    uint32_t kept; /* bytes of heads kept */
    struct stream *done_head, **done_tail;
    struct list headers;    /* responses whose HEADERS are to be written, in order */
    struct prio_sched data; /* responses with DATA to send and window to send it */
    int32_t max_id;               /* the newest stream the client opened */
    uint64_t opened;              /* bit i: stream max_id - 2i was opened (not skipped) */

    /* the header block being read */
    bool blk_open;       /* CONTINUATION expected */
    bool blk_end_stream; /* its HEADERS carried END_STREAM */
    bool blk_first;      /* no field decoded yet */
    bool blk_request;    /* a request's head (not trailers, nor one that is ignored) */
    bool blk_trailers;
    bool blk_line;      /* the request line is written */
    bool blk_regular;   /* a regular field came (pseudo-header fields may not follow) */
    bool blk_malformed; /* RFC 9113 8.1.1: the stream is reset, the request never delivered */
    int32_t blk_id;
    struct stream *blk_st;
    unsigned blk_cont;
    int blk_status; /* 0, or the error status the request gets */
    uint32_t blk_decoded;
    uint16_t method_len, authority_len, pseudo_len;
    uint16_t path_len;
    bool has_method, has_path, has_scheme, has_authority, has_host, is_connect;
    uint32_t head_len;
    struct http_request *req; /* in the buffer, behind head: the fields as they come */
    struct http1_split split;

    /* the request in hooks.request now (for h2_hold) */
    struct stream *dlv;
    const char *dlv_head;
    uint32_t dlv_len;

    /* flood budgets */
    int64_t now, window_start, progress;
    unsigned resets, control, empty, refused;
};

/* ---- the buffer: held only while in use ---- */

static char *out_area(struct h2_session *s)
{
    return s->buf + H2_PLAN_SIZE;
}
static char *ctl_area(struct h2_session *s)
{
    return s->buf + H2_OUT_CAP;
}
static char *frame_area(struct h2_session *s)
{
    return ctl_area(s) + H2_CTL_CAP;
}
static char *tail_area(struct h2_session *s)
{
    return frame_area(s) + H2_FRAME_CAP;
}
static char *pseudo_area(struct h2_session *s)
{
    return tail_area(s) + H2_TAIL_CAP;
}
static char *head_area(struct h2_session *s)
{
    return pseudo_area(s) + H2_PSEUDO_CAP;
}

static bool buf_take(struct h2_session *s)
{
    if (s->buf)
        return true;
    s->buf = s->hooks->buf_get(s->user);
    if (!s->buf)
        return false;
    s->req = (struct http_request *)(void *)(head_area(s) + H2_HEAD_CAP);
    s->plan = (struct plan *)(void *)s->buf;
    plan_init(s->plan);
    s->out_len = 0;
    return true;
}

/* Gives the buffer back when nothing is in it. */
static void buf_give_back(struct h2_session *s)
{
    if (!s->buf || s->busy || s->ctl_len || s->frame_len || s->tail_len || s->blk_open || s->dlv)
        return;
    s->hooks->buf_put(s->user, s->buf);
    s->buf = NULL;
    s->req = NULL;
    s->plan = NULL;
}

/* ---- frames ---- */

static void put_hdr(uint8_t *h, size_t len, uint8_t type, uint8_t flags, uint32_t id)
{
    h[0] = (uint8_t)(len >> 16), h[1] = (uint8_t)(len >> 8), h[2] = (uint8_t)len;
    h[3] = type, h[4] = flags;
    h[5] = (uint8_t)(id >> 24 & 0x7f), h[6] = (uint8_t)(id >> 16), h[7] = (uint8_t)(id >> 8);
    h[8] = (uint8_t)id;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Ends the session with GOAWAY(code); `why` is kept unless an earlier reason was. */
static void terminate(struct h2_session *s, enum h2_end why, uint32_t code)
{
    if (s->end == H2_END_NONE || s->end == H2_END_DONE) {
        s->end = why;
        s->goaway_code = code;
        s->goaway_due = true;
        s->goaway_sent = false;
    }
}

static bool ended(const struct h2_session *s)
{
    return s->end != H2_END_NONE && s->end != H2_END_DONE;
}

static void conn_error(struct h2_session *s, uint32_t code)
{
    terminate(s, code == E_ENHANCE_YOUR_CALM ? H2_END_FLOOD : H2_END_PROTOCOL, code);
}

/* Queues a control frame (payload len bytes). A client that does not read what it asked for
 * (PING and SETTINGS ACKs piling up) is told to go away. */
static void ctl(struct h2_session *s, uint8_t type, uint8_t flags, uint32_t id, const void *payload,
                size_t len)
{
    if (!buf_take(s) || s->ctl_len + HDR + len > H2_CTL_CAP) {
        terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
        return;
    }
    uint8_t *h = (uint8_t *)ctl_area(s) + s->ctl_len;
    put_hdr(h, len, type, flags, id);
    if (len)
        memcpy(h + HDR, payload, len);
    s->ctl_len += HDR + len;
}

static void ctl32(struct h2_session *s, uint8_t type, uint32_t id, uint32_t v)
{
    uint8_t p[4];
    put32(p, v);
    ctl(s, type, 0, id, p, 4);
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

static void check_budget(struct h2_session *s)
{
    if (over_budget(s))
        terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
}

/* ---- streams ---- */

static struct stream *stream_get(struct h2_session *s, int32_t id)
{
    struct stream *st = s->free_list;
    if (st) {
        s->free_list = st->next;
        s->nfree--;
    } else {
        st = malloc(sizeof(*st));
        if (!st)
            return NULL;
        s->nrecords++;
    }
    *st = (struct stream){.id = id, .window = s->peer_window, .recv_window = WINDOW};
    list_link_init(&st->hlink);
    prio_node_init(&st->prio, (uint64_t)id);
    list_push_front(&s->live, &st->live);
    s->open++;
    return st;
}

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

/* The open stream after st (the first for NULL), or NULL. */
static struct stream *live_next(const struct h2_session *s, const struct stream *st)
{
    const struct list *l = st ? list_after(&s->live, &st->live) : list_first(&s->live);
    return l ? LIST_ITEM(l, struct stream, live) : NULL;
}

/* Each open stream as st; st may close in the body (the next is taken before). */
#define LIVE_EACH(s, st)                                                                           \
    for (struct stream *st = live_next((s), NULL), *st##_next = st ? live_next((s), st) : NULL; st; \
         st = st##_next, st##_next = st ? live_next((s), st) : NULL)

static struct stream *stream_find(const struct h2_session *s, int32_t id)
{
    if (s->dlv && s->dlv->id == id)
        return s->dlv->closed ? NULL : s->dlv;
    LIVE_EACH(s, st)
        if (st->id == id)
            return st;
    return NULL;
}

/* Off the send queues: its HEADERS written, or no DATA it may send now. */
static void q_remove(struct stream *st)
{
    if (list_linked(&st->hlink))
        list_remove(&st->hlink);
    prio_idle(&st->prio);
}

static uint64_t plan_left(const struct plan *p)
{
    uint64_t n = 0;
    for (unsigned i = p->cur; i < p->nseg; i++)
        n += p->segs[i].len;
    return n;
}

/* Puts a stream whose HEADERS went out in the DATA order, at its place by arrival, if it has
 * DATA it may send. */
static void data_ready(struct h2_session *s, struct stream *st)
{
    if (!list_linked(&st->hlink) && st->body && st->window > 0)
        prio_ready(&s->data, &st->prio);
}

/* The stream is over (both ways, or reset): off the open list, onto the done list. */
static void stream_close(struct h2_session *s, struct stream *st)
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
static void stream_reset(struct h2_session *s, int32_t id, struct stream *st, uint32_t code)
{
    ctl32(s, F_RST_STREAM, (uint32_t)id, code);
    if (st)
        stream_close(s, st);
}

/* A stream error from the client's side: counted with invalid frames (a client making them
 * by the thousand is told to go away). */
static void stream_error(struct h2_session *s, int32_t id, uint32_t code)
{
    stream_reset(s, id, stream_find(s, id), code);
    s->refused++;
    check_budget(s);
}

/* Calls `done` for every stream that closed before the output now sent, and frees them. */
static void release_done(struct h2_session *s)
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
static bool was_opened(const struct h2_session *s, int32_t id)
{
    int32_t back = (s->max_id - id) / 2;
    return back >= 64 || (s->opened >> back & 1);
}

/* ---- requests ---- */

/* Hands the request on stream st, whose head is the text head[0..len), to the caller. */
static void deliver_req(struct h2_session *s, struct stream *st, struct http_request *req,
                        const char *head, size_t len, int status)
{
    if (status == 505 || status == 501)
        status = 400; /* the version line is ours; an h2 request cannot have a bad one */
    req->keep_alive = true;
    s->dlv = st;
    s->dlv_head = head;
    s->dlv_len = len;
    s->hooks->request(s->user, st->id, req, status);
    s->dlv = NULL;
}

/* Parses the head of stream st (kept with the stream, or cut short in the block buffer) and
 * hands the request to the caller. */
static void deliver(struct h2_session *s, struct stream *st, const char *head, size_t len,
                    int status)
{
    struct http_request req;
    int rc = http1_parse(head, len, &req);
    if (!status && rc < 0)
        status = rc == HTTP1_ERROR ? req.status : 400;
    deliver_req(s, st, &req, head, len, status);
}

/* The request on st ended (its END_STREAM): a head kept for its body is delivered now. */
static void request_ended(struct h2_session *s, struct stream *st)
{
    st->recv_done = true;
    if (!hfield_length_end(&st->cl)) {
        stream_error(s, st->id, E_PROTOCOL);
        return;
    }
    if (st->head && !st->held) {
        char *head = st->head;
        size_t len = st->head_len;
        st->head = NULL;
        s->kept -= len;
        deliver(s, st, head, len, st->req_status);
        free(head);
    }
}

static void blk_put(struct h2_session *s, const void *p, size_t n)
{
    if (s->head_len + n > HEAD_CAP) {
        s->blk_status = 431;
        return;
    }
    memcpy(head_area(s) + s->head_len, p, n);
    s->head_len += n;
}

#define BLK_LIT(s, lit) blk_put((s), (lit), sizeof(lit) - 1)

/* The request line and host field's length, as blk_request_line will write them. */
static size_t line_len(const struct h2_session *s)
{
    size_t n = s->method_len + 1 + (s->has_path ? s->path_len : 1) + 11;
    if (s->has_authority)
        n += 6 + s->authority_len + 2;
    return n;
}

/* Makes "METHOD target HTTP/1.1\r\nhost: authority\r\n" once the pseudo-header fields are in. */
static void blk_request_line(struct h2_session *s)
{
    if (s->blk_line)
        return;
    s->blk_line = true;
    const char *pseudo = pseudo_area(s);
    char *method = head_area(s) + s->head_len;
    blk_put(s, pseudo, s->method_len);
    BLK_LIT(s, " ");
    char *target = head_area(s) + s->head_len;
    if (s->has_path) /* CONNECT has no :path */
        blk_put(s, pseudo + s->method_len, s->path_len);
    else
        BLK_LIT(s, "*");
    size_t target_len = s->has_path ? s->path_len : 1;
    BLK_LIT(s, " HTTP/1.1\r\n");
    if (!s->blk_status) /* else cut short (431): end_headers parses what was written */
        http1_split_start(s->req, &s->split, method, s->method_len, target, target_len);
    if (s->has_authority) {
        BLK_LIT(s, "host: ");
        char *value = head_area(s) + s->head_len;
        blk_put(s, pseudo + s->method_len + s->path_len, s->authority_len);
        BLK_LIT(s, "\r\n");
        if (!s->blk_status)
            http1_split_field(s->req, &s->split, "host", 4, value, s->authority_len);
    }
}

static bool is(const char *p, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

/* Starts reading a header block on stream id (st NULL: one to read and ignore). */
static void blk_begin(struct h2_session *s, int32_t id, struct stream *st, bool trailers,
                      bool end_stream)
{
    s->blk_id = id;
    s->blk_st = st;
    s->blk_request = st && !trailers;
    s->blk_trailers = trailers;
    s->blk_end_stream = end_stream;
    s->blk_first = true;
    s->blk_line = s->blk_regular = s->blk_malformed = false;
    s->blk_cont = 0;
    s->blk_status = 0;
    s->blk_decoded = 0;
    s->method_len = s->path_len = s->authority_len = s->pseudo_len = 0;
    s->has_method = s->has_path = s->has_scheme = s->has_authority = s->has_host = false;
    s->is_connect = false;
    s->head_len = 0;
}

/* Keeps a pseudo-header field's value in the pseudo area (method, then path, then authority:
 * they may come in any order, so later ones move). */
static void pseudo_keep(struct h2_session *s, const struct hpack_field *f)
{
    const char *n = f->name;
    size_t nl = f->name_len;
    bool *seen;
    uint16_t *len;
    size_t at;
    /* By the name's static index when HPACK gave one (RFC 7541 Appendix A: 1 :authority, 2-3
     * :method, 4-5 :path, 6-7 :scheme), else by its text. */
    unsigned k = f->sidx;
    if (k == 0)
        k = is(n, nl, ":method")      ? 2
            : is(n, nl, ":path")      ? 4
            : is(n, nl, ":authority") ? 1
            : is(n, nl, ":scheme")    ? 6
                                      : 8;
    if (k == 2 || k == 3) {
        seen = &s->has_method, len = &s->method_len, at = 0;
        s->is_connect = is(f->value, f->value_len, "CONNECT");
    } else if (k == 4 || k == 5) {
        seen = &s->has_path, len = &s->path_len, at = s->method_len;
        if (f->value_len == 0)
            s->blk_malformed = true;
    } else if (k == 1) {
        seen = &s->has_authority, len = &s->authority_len, at = s->method_len + s->path_len;
    } else if (k == 6 || k == 7) {
        if (s->has_scheme)
            s->blk_malformed = true;
        s->has_scheme = true;
        return;
    } else {
        s->blk_malformed = true; /* :status, :protocol, or unknown */
        return;
    }
    if (*seen) {
        s->blk_malformed = true;
        return;
    }
    *seen = true;
    if (s->pseudo_len + f->value_len > H2_PSEUDO_CAP) {
        s->blk_status = 414;
        return;
    }
    char *area = pseudo_area(s);
    memmove(area + at + f->value_len, area + at, s->pseudo_len - at);
    memcpy(area + at, f->value, f->value_len);
    *len = (uint16_t)f->value_len;
    s->pseudo_len = (uint16_t)(s->pseudo_len + f->value_len);
}

/* One decoded field of the block being read. */
static void field_in(struct h2_session *s, const struct hpack_field *f)
{
    /* HPACK bomb: a few bytes on the wire can name a large table entry again and again. The
     * head is cut (431) at the limit (fields past it are not even copied); decoding far past
     * it ends the connection. */
    s->blk_decoded += f->name_len + f->value_len + 32;
    if (s->blk_decoded > 4 * H2_MAX_HEADER_LIST) {
        terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
        return;
    }
    if (!s->blk_request && !s->blk_trailers)
        return; /* a block read only for HPACK's sake */
    if (s->blk_decoded > H2_MAX_HEADER_LIST || !f->name)
        s->blk_status = 431;
    if (s->blk_malformed || !f->name)
        return;
    const char *n = f->name, *v = f->value;
    size_t nl = f->name_len, vl = f->value_len;
    if (nl && n[0] == ':') {
        if (s->blk_regular || s->blk_trailers || !(f->valid & TOKEN_NAME_OK))
            s->blk_malformed = true;
        else
            pseudo_keep(s, f);
        return;
    }
    if (f->valid != (TOKEN_NAME_OK | TOKEN_VALUE_OK)) {
        s->blk_malformed = true;
        return;
    }
    /* connection-specific fields make a request malformed (RFC 9113 8.2.2); of their names
     * the static table holds transfer-encoding only (57) */
    if (f->sidx ? f->sidx == 57 : hfield_connection_specific(n, nl, v, vl)) {
        s->blk_malformed = true;
        return;
    }
    if (s->blk_trailers)
        return;
    struct stream *st = s->blk_st;
    /* content-length (static index 28), host (38) and expect (35) by index when HPACK gave one */
    if (f->sidx ? f->sidx == 28 : nl == 14 && is(n, nl, "content-length")) {
        if (!hfield_length_field(&st->cl, v, vl)) {
            s->blk_malformed = true;
            return;
        }
    } else if (!f->sidx && nl == 8 && is(n, nl, "priority")) {
        prio_parse(v, vl, &st->prio.urgency, &st->prio.incremental);
    }
    s->blk_regular = true;
    blk_request_line(s);
    /* :authority stands in for host (RFC 9113 8.3.1); no interim 100 exists to send here. */
    if (f->sidx ? f->sidx == 38 : is(n, nl, "host")) {
        s->has_host = true;
        if (s->has_authority)
            return;
    }
    if ((f->sidx ? f->sidx == 35 : is(n, nl, "expect")) && is(v, vl, "100-continue"))
        return;
    if (s->blk_status)
        return;
    /* A literal was decoded in place: "name" gap "value"; make it the line "name: value\r\n".
     * An indexed field is the table's bytes (hpack copies no indexed field): copy it here. */
    char *line = head_area(s) + s->head_len;
    if (s->head_len + nl + vl + 4 > HEAD_CAP) {
        s->blk_status = 431;
        return;
    }
    if (n != line) {
        memmove(line, n, nl);
        memmove(line + nl + 2, v, vl);
    }
    line[nl] = ':', line[nl + 1] = ' ';
    line[nl + 2 + vl] = '\r', line[nl + 3 + vl] = '\n';
    s->head_len += nl + vl + 4;
    http1_split_field(s->req, &s->split, line, nl, line + nl + 2, vl);
}

/* Decodes the fields in p[0, len); returns the bytes used (the rest is a field cut short). */
static size_t blk_decode(struct h2_session *s, const uint8_t *p, size_t len)
{
    size_t pos = 0;
    while (pos < len && !ended(s)) {
        /* Where the next field goes: behind the head so far, and behind the room the request
         * line will take while it is not written. A block past its limit decodes each field
         * at the same place (the bound keeps room for one the table must keep). */
        size_t at = s->head_len + (s->blk_request && !s->blk_line ? line_len(s) : 0);
        if (at > HEAD_CAP)
            at = HEAD_CAP;
        if (!s->blk_request)
            at = 0;
        struct hpack_field f;
        int rc = hpack_decode(&s->dec, p, len, &pos, s->blk_first, head_area(s) + at,
                              H2_HEAD_CAP - at, FIELD_GAP, &f);
        if (rc == 0)
            break;
        if (rc < 0) {
            conn_error(s, rc == -ENOMEM ? E_ENHANCE_YOUR_CALM : E_COMPRESSION);
            break;
        }
        s->blk_first = false;
        field_in(s, &f);
    }
    return pos;
}

/* A fragment of the header block. */
static void blk_fragment(struct h2_session *s, const uint8_t *p, size_t len)
{
    if (s->tail_len == 0) {
        size_t used = blk_decode(s, p, len);
        p += used, len -= used;
    } else {
        if (s->tail_len + len > H2_TAIL_CAP) {
            terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
            return;
        }
        memcpy(tail_area(s) + s->tail_len, p, len);
        size_t all = s->tail_len + len;
        size_t used = blk_decode(s, (const uint8_t *)tail_area(s), all);
        p = (const uint8_t *)tail_area(s) + used, len = all - used;
        s->tail_len = 0;
    }
    if (len && !ended(s)) {
        if (len > H2_TAIL_CAP) {
            terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
            return;
        }
        memmove(tail_area(s), p, len);
        s->tail_len = len;
    }
}

/* The end of a header block (END_HEADERS). */
static void blk_end(struct h2_session *s)
{
    s->blk_open = false;
    if (s->tail_len) { /* the block ends inside a field */
        s->tail_len = 0;
        conn_error(s, E_COMPRESSION);
        return;
    }
    struct stream *st = s->blk_st;
    if (!st)
        return;
    if (s->blk_trailers) {
        if (s->blk_malformed)
            stream_error(s, st->id, E_PROTOCOL);
        else
            request_ended(s, st);
        return;
    }
    if (!s->has_method || (!s->is_connect && (!s->has_path || !s->has_scheme)) ||
        (s->is_connect && (s->has_path || s->has_scheme || !s->has_authority)) ||
        (!s->has_authority && !s->has_host))
        s->blk_malformed = true;
    if (s->blk_malformed) {
        stream_error(s, st->id, E_PROTOCOL);
        return;
    }
    blk_request_line(s);
    BLK_LIT(s, "\r\n");
    if (s->blk_end_stream) {
        st->recv_done = true;
        if (!hfield_length_end(&st->cl)) {
            stream_error(s, st->id, E_PROTOCOL);
            return;
        }
        /* The fields went to http1_split as they came, unless the block was cut short (431):
         * then the text written up to the cut is parsed, as for a kept head. */
        if (s->blk_status)
            deliver(s, st, head_area(s), s->head_len, s->blk_status);
        else
            deliver_req(s, st, s->req, head_area(s), s->head_len,
                        http1_split_end(s->req, &s->split));
        return;
    }
    /* A body follows: answer once it has ended (it is read and dropped), as a server answers
     * an HTTP/1.1 request after its body; keep the head until then. */
    st->head = malloc(s->head_len);
    if (!st->head) {
        stream_reset(s, st->id, st, E_INTERNAL);
        return;
    }
    memcpy(st->head, head_area(s), s->head_len);
    st->head_len = s->head_len;
    s->kept += s->head_len;
    st->req_status = s->blk_status;
    st->body_due = s->now + s->opts.body_ms;
}

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
        ctl32(s, F_WINDOW_UPDATE, 0, (uint32_t)(WINDOW - s->recv_window));
        s->recv_window = WINDOW;
    }
    if (st && !st->recv_done && st->recv_window < WINDOW / 2) {
        ctl32(s, F_WINDOW_UPDATE, (uint32_t)st->id, (uint32_t)(WINDOW - st->recv_window));
        st->recv_window = WINDOW;
    }
}

static void on_data(struct h2_session *s, uint8_t flags, int32_t id, const uint8_t *p, size_t len)
{
    if (id == 0 || id > s->max_id) { /* idle */
        conn_error(s, E_PROTOCOL);
        return;
    }
    if ((int64_t)len > s->recv_window) {
        conn_error(s, E_FLOW_CONTROL);
        return;
    }
    s->recv_window -= (int32_t)len;
    size_t flow = len;
    if (len == 0 && !(flags & FL_END_STREAM))
        s->empty++;
    if (!unpad(flags, &p, &len)) {
        conn_error(s, E_PROTOCOL);
        return;
    }
    struct stream *st = stream_find(s, id);
    if (!st || st->recv_done) {
        window_refill(s, NULL);
        stream_error(s, id, E_STREAM_CLOSED);
        return;
    }
    if ((int64_t)flow > st->recv_window) {
        window_refill(s, NULL);
        stream_error(s, id, E_FLOW_CONTROL);
        return;
    }
    st->recv_window -= (int32_t)flow;
    /* nginx's client_body_timeout: between two reads of this body, so that PINGs and other
     * streams' frames keep no body waiting */
    st->body_due = s->now + s->opts.body_ms;
    if (!hfield_length_data(&st->cl, len)) {
        window_refill(s, NULL);
        stream_error(s, id, E_PROTOCOL);
        return;
    }
    /* Request bodies are dropped; the windows open again as they are read. */
    window_refill(s, flags & FL_END_STREAM ? NULL : st);
    if (flags & FL_END_STREAM)
        request_ended(s, st);
    check_budget(s);
}

static void on_headers(struct h2_session *s, uint8_t flags, int32_t id, const uint8_t *p,
                       size_t len)
{
    if (id == 0 || !(id & 1)) {
        conn_error(s, E_PROTOCOL);
        return;
    }
    if (len == 0 && !(flags & FL_END_HEADERS))
        s->empty++;
    if (!unpad(flags, &p, &len)) {
        conn_error(s, E_PROTOCOL);
        return;
    }
    bool self_dependent = false;
    if (flags & FL_PRIORITY) { /* RFC 7540 priority: read and ignored */
        if (len < 5) {
            conn_error(s, E_FRAME_SIZE);
            return;
        }
        self_dependent = (int32_t)(get32(p) & 0x7fffffff) == id;
        p += 5, len -= 5;
    }
    bool end_stream = flags & FL_END_STREAM;
    struct stream *st = NULL;
    bool trailers = false;
    if (id <= s->max_id) {
        st = stream_find(s, id);
        if (!st) {
            conn_error(s, was_opened(s, id) ? E_STREAM_CLOSED : E_PROTOCOL);
            return;
        }
        if (st->recv_done) { /* half-closed (remote): the block is read for HPACK only */
            stream_error(s, id, E_STREAM_CLOSED);
            st = NULL;
        } else if (!end_stream) { /* trailers end the stream (RFC 9113 8.1) */
            stream_error(s, id, E_PROTOCOL);
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
            stream_error(s, id, E_PROTOCOL);
        } else if (s->open >= H2_MAX_STREAMS) {
            /* RFC 9113 5.1.2: over SETTINGS_MAX_CONCURRENT_STREAMS, the client may retry */
            stream_error(s, id, E_REFUSED_STREAM);
        } else if (!buf_take(s) || !(st = stream_get(s, id))) {
            stream_reset(s, id, NULL, E_REFUSED_STREAM);
        } else {
            s->progress = s->now; /* a new request: a stalled peer is no longer idle */
        }
    }
    if (self_dependent && st) {
        stream_error(s, id, E_PROTOCOL);
        st = NULL;
    }
    if (ended(s) || !buf_take(s)) {
        if (!ended(s))
            terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
        return;
    }
    blk_begin(s, id, st, trailers, end_stream);
    s->blk_open = !(flags & FL_END_HEADERS);
    blk_fragment(s, p, len);
    if (!s->blk_open && !ended(s))
        blk_end(s);
}

static void on_continuation(struct h2_session *s, uint8_t flags, int32_t id, const uint8_t *p,
                            size_t len)
{
    if (!s->blk_open || id != s->blk_id) {
        conn_error(s, E_PROTOCOL);
        return;
    }
    if (++s->blk_cont > H2_MAX_CONTINUATIONS) { /* the 2024 CONTINUATION flood */
        terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
        return;
    }
    if (len == 0 && !(flags & FL_END_HEADERS))
        s->empty++;
    blk_fragment(s, p, len);
    if ((flags & FL_END_HEADERS) && !ended(s))
        blk_end(s);
}

static void on_rst_stream(struct h2_session *s, int32_t id, size_t len)
{
    if (id == 0) {
        conn_error(s, E_PROTOCOL);
        return;
    }
    if (len != 4) {
        conn_error(s, E_FRAME_SIZE);
        return;
    }
    if (id > s->max_id) {
        conn_error(s, E_PROTOCOL);
        return;
    }
    /* Rapid reset (CVE-2023-44487) is resetting streams the server is working on; a reset of
     * a stream already closed costs nothing (a client that cancelled a download resets again
     * for each DATA frame still in flight, as Python's h2 does). */
    struct stream *st = stream_find(s, id);
    if (!st)
        return;
    s->resets++;
    stream_close(s, st);
    check_budget(s);
}

/* Applies a change of the client's SETTINGS_INITIAL_WINDOW_SIZE to every stream's window. */
static void initial_window(struct h2_session *s, uint32_t v)
{
    int64_t delta = (int64_t)v - s->peer_window;
    s->peer_window = (int32_t)v;
    LIVE_EACH(s, st) {
        st->window += delta;
        if (st->window > WINDOW_MAX) {
            conn_error(s, E_FLOW_CONTROL);
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
        conn_error(s, E_PROTOCOL);
        return;
    }
    if (flags & FL_ACK) {
        if (len != 0)
            conn_error(s, E_FRAME_SIZE);
        return;
    }
    if (len % 6) {
        conn_error(s, E_FRAME_SIZE);
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
                conn_error(s, E_PROTOCOL);
            break;
        case 4: /* INITIAL_WINDOW_SIZE */
            if (v > WINDOW_MAX)
                conn_error(s, E_FLOW_CONTROL);
            else
                initial_window(s, v);
            break;
        case 5: /* MAX_FRAME_SIZE */
            if (v < 16384 || v > 16777215)
                conn_error(s, E_PROTOCOL);
            else
                s->peer_frame = v;
            break;
        case 9: /* NO_RFC7540_PRIORITIES (RFC 9218 2.1) */
            if (v > 1)
                conn_error(s, E_PROTOCOL);
            break;
        }
        if (ended(s))
            return;
    }
    ctl(s, F_SETTINGS, FL_ACK, 0, NULL, 0);
    check_budget(s);
}

static void on_ping(struct h2_session *s, uint8_t flags, int32_t id, const uint8_t *p, size_t len)
{
    if (id != 0) {
        conn_error(s, E_PROTOCOL);
        return;
    }
    if (len != 8) {
        conn_error(s, E_FRAME_SIZE);
        return;
    }
    if (flags & FL_ACK)
        return;
    s->control++;
    ctl(s, F_PING, FL_ACK, 0, p, 8);
    check_budget(s);
}

static void on_window_update(struct h2_session *s, int32_t id, const uint8_t *p, size_t len)
{
    if (len != 4) {
        conn_error(s, E_FRAME_SIZE);
        return;
    }
    uint32_t inc = get32(p) & 0x7fffffff;
    if (id == 0) {
        if (inc == 0)
            conn_error(s, E_PROTOCOL);
        else if ((s->window += inc) > WINDOW_MAX)
            conn_error(s, E_FLOW_CONTROL);
        return;
    }
    if (id > s->max_id) {
        conn_error(s, E_PROTOCOL);
        return;
    }
    struct stream *st = stream_find(s, id);
    if (inc == 0) {
        stream_error(s, id, E_PROTOCOL);
        return;
    }
    if (!st)
        return;
    if ((st->window += inc) > WINDOW_MAX) {
        stream_error(s, id, E_FLOW_CONTROL);
        return;
    }
    data_ready(s, st);
}

static void on_priority(struct h2_session *s, int32_t id, const uint8_t *p, size_t len)
{
    if (id == 0) {
        conn_error(s, E_PROTOCOL);
        return;
    }
    if (len != 5) {
        stream_error(s, id, E_FRAME_SIZE);
        return;
    }
    s->control++;
    if ((int32_t)(get32(p) & 0x7fffffff) == id)
        stream_error(s, id, E_PROTOCOL);
    check_budget(s);
}

static void on_priority_update(struct h2_session *s, int32_t id, const uint8_t *p, size_t len)
{
    if (id != 0 || len < 4) {
        conn_error(s, id != 0 ? E_PROTOCOL : E_FRAME_SIZE);
        return;
    }
    int32_t prioritized = (int32_t)(get32(p) & 0x7fffffff);
    if (prioritized == 0) { /* RFC 9218 7.1 */
        conn_error(s, E_PROTOCOL);
        return;
    }
    s->control++;
    check_budget(s);
    struct stream *st = stream_find(s, prioritized);
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
        conn_error(s, E_PROTOCOL);
        return;
    }
    if (len < 8) {
        conn_error(s, E_FRAME_SIZE);
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
        conn_error(s, E_PROTOCOL);
        return;
    }
    if (!s->settings_in) { /* the preface's SETTINGS comes first (3.4) */
        if (type != F_SETTINGS || (flags & FL_ACK)) {
            conn_error(s, E_PROTOCOL);
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
        conn_error(s, E_PROTOCOL);
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
    check_budget(s);
}

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

/* True for an HTTP/1-only field (never sent over HTTP/2: core/hfield.h). */
static bool h1_only(const char *name, size_t n)
{
    return hfield_connection_specific(name, n, NULL, 0);
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
    const struct plan *p = st->fields_plan;
    return key_len && p->head_len - at >= key_len && p->segs[0].mem[at] == key[0] &&
           memcmp((const char *)p->segs[0].mem + at, key, key_len) == 0;
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
    if (key && p->head_len >= key_len && memcmp(p->segs[0].mem, key, key_len) == 0)
        return s->lead; /* the key ends a line: a match is those very lines */
    free(s->lead);
    s->lead = NULL;
    size_t pos = 0, nl, vl;
    const char *name, *value;
    for (int i = 0; i < H2_LEAD_LINES; i++)
        if (!plan_field_next(p, &pos, &name, &nl, &value, &vl))
            return NULL;
    s->lead = h2_pre_new(p->segs[0].mem, pos, H2_LEAD_ID | ++s->lead_n);
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
        ctl32(s, F_RST_STREAM, (uint32_t)st->id, E_NO_ERROR);
    stream_close(s, st);
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
            return;                              /* the next output */
        stream_reset(s, st->id, st, E_INTERNAL); /* a head that never fits */
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
        stream_close(s, LIST_ITEM(list_first(&s->live), struct stream, live));
    release_done(s);
    streams_trim(s, 0);
    if (s->buf)
        s->hooks->buf_put(s->user, s->buf);
    hpack_dec_free(&s->dec);
    hpack_enc_free(&s->enc);
    free(s->lead);
    free(s);
}

/* Takes the frames in data[0, len) (after any preface); a frame cut short waits in the frame
 * area. */
static void frames_in(struct h2_session *s, const uint8_t *data, size_t len)
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
                conn_error(s, E_FRAME_SIZE);
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
            conn_error(s, E_FRAME_SIZE);
            return;
        }
        if (len < HDR + flen)
            break;
        frame_in(s, data, data + HDR, flen);
        data += HDR + flen, len -= HDR + flen;
    }
    if (len && !ended(s)) {
        if (!buf_take(s)) {
            terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
            return;
        }
        memcpy(frame_area(s), data, len);
        s->frame_len = len;
        if (len >= HDR) {
            size_t flen = (size_t)data[0] << 16 | (size_t)data[1] << 8 | data[2];
            if (flen > MAX_FRAME) {
                s->frame_len = 0;
                conn_error(s, E_FRAME_SIZE);
            }
        }
    }
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
            conn_error(s, E_PROTOCOL);
            return -EPROTO;
        }
        s->preface = (uint8_t)(s->preface + n);
        p += n, len -= n;
    }
    if (len)
        frames_in(s, p, len);
    buf_give_back(s);
    return ended(s) ? -EPROTO : 0;
}

int h2_respond(struct h2_session *s, int32_t id, int status, const struct h2_field *fields,
               size_t nfields, struct plan *body, void *token)
{
    struct stream *st = stream_find(s, id);
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
    struct stream *st = stream_find(s, id);
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
    struct stream *st = stream_find(s, id);
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
    struct stream *st = stream_find(s, id);
    if (!st || !st->held)
        return -ENOENT;
    char *head = st->head;
    size_t len = st->head_len;
    st->head = NULL;
    st->held = false;
    s->kept -= len;
    deliver(s, st, head, len, 0);
    free(head);
    return 0;
}

void h2_reset(struct h2_session *s, int32_t id)
{
    struct stream *st = stream_find(s, id);
    if (st && !st->answered)
        stream_reset(s, id, st, E_REFUSED_STREAM);
}

struct plan *h2_output(struct h2_session *s)
{
    if (s->busy)
        return s->plan;
    release_done(s);
    if (!have_output(s) || !buf_take(s)) {
        buf_give_back(s);
        return NULL;
    }
    s->out_len = 0;
    plan_init(s->plan);
    write_output(s);
    if (s->plan->nseg == 0) {
        buf_give_back(s);
        return NULL;
    }
    s->busy = true;
    return s->plan;
}

void h2_sent(struct h2_session *s, int64_t now)
{
    s->busy = false;
    s->out_len = 0;
    if (s->plan)
        plan_init(s->plan);
    s->progress = now;
    release_done(s);
    buf_give_back(s);
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
    terminate(s, H2_END_STALL, E_NO_ERROR);
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
    LIVE_EACH(s, st) {
        if (st->head) {
            head_free(s, st);
            stream_close(s, st);
        }
    }
}

void h2_peer_closed(struct h2_session *s)
{
    s->peer_goaway = true;
    if (s->end == H2_END_NONE)
        s->end = H2_END_DONE;
    LIVE_EACH(s, st) {
        if (!st->recv_done && !st->answered) /* its body can never come: nothing to answer */
            stream_close(s, st);
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
    LIVE_EACH(s, st) { /* delivering may answer and close st */
        if (!st->head || st->held || st->body_due > now || st->answered)
            continue;
        /* The response can still be sent (the client's half is open, ours untouched): 408,
         * then RST_STREAM(NO_ERROR) as after any response sent before the request ended. */
        char *head = st->head;
        size_t len = st->head_len;
        st->head = NULL;
        s->kept -= len;
        deliver(s, st, head, len, 408);
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
