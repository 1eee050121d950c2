/* h2int: the private header of src/http/h2 (h2o's http2_internal.h): the session's and the
 * stream's structs, the frame and error codes of RFC 9113, the buffer's areas, and the
 * functions one file of the protocol calls in another (h2session.c the session and its streams,
 * h2in.c frames in, h2req.c header blocks into requests, h2out.c frames out).
 * Must not: be included outside the protocol; h2.h is the protocol's interface.
 * Ownership: as h2.h says: a session belongs to one connection (one worker thread). */
#ifndef H2_H2INT_H
#define H2_H2INT_H

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
    int64_t window;          /* what the client lets us send */
    int32_t recv_window;     /* what we let the client send */
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
    struct stream *next;   /* free or done list */
    struct list live;      /* the session's open streams */
    struct list hlink;     /* the HEADERS to write, while its are */
    struct prio_node prio; /* its place in the DATA order (core/prio.h), while it may send */
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
    int32_t max_id;         /* the newest stream the client opened */
    uint64_t opened;        /* bit i: stream max_id - 2i was opened (not skipped) */

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

/* ---- small helpers every file uses ---- */

static inline char *out_area(struct h2_session *s)
{
    return s->buf + H2_PLAN_SIZE;
}

static inline char *ctl_area(struct h2_session *s)
{
    return s->buf + H2_OUT_CAP;
}

static inline char *frame_area(struct h2_session *s)
{
    return ctl_area(s) + H2_CTL_CAP;
}

static inline char *tail_area(struct h2_session *s)
{
    return frame_area(s) + H2_FRAME_CAP;
}

static inline char *pseudo_area(struct h2_session *s)
{
    return tail_area(s) + H2_TAIL_CAP;
}

static inline char *head_area(struct h2_session *s)
{
    return pseudo_area(s) + H2_PSEUDO_CAP;
}

static inline void put_hdr(uint8_t *h, size_t len, uint8_t type, uint8_t flags, uint32_t id)
{
    h[0] = (uint8_t)(len >> 16), h[1] = (uint8_t)(len >> 8), h[2] = (uint8_t)len;
    h[3] = type, h[4] = flags;
    h[5] = (uint8_t)(id >> 24 & 0x7f), h[6] = (uint8_t)(id >> 16), h[7] = (uint8_t)(id >> 8);
    h[8] = (uint8_t)id;
}

static inline void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline bool ended(const struct h2_session *s)
{
    return s->end != H2_END_NONE && s->end != H2_END_DONE;
}

static inline uint64_t plan_left(const struct plan *p)
{
    uint64_t n = 0;
    for (unsigned i = p->cur; i < p->nseg; i++)
        n += p->segs[i].len;
    return n;
}

/* Each open stream as st; st may close in the body (the next is taken before). */
#define LIVE_EACH(s, st) LIST_EACH(struct stream, st, &(s)->live, live)

/* Off the send queues: its HEADERS written, or no DATA it may send now. */
static inline void q_remove(struct stream *st)
{
    if (list_linked(&st->hlink))
        list_remove(&st->hlink);
    prio_idle(&st->prio);
}

/* Puts a stream whose HEADERS went out in the DATA order, at its place by arrival, if it has
 * DATA it may send. */
static inline void data_ready(struct h2_session *s, struct stream *st)
{
    if (!list_linked(&st->hlink) && st->body && st->window > 0)
        prio_ready(&s->data, &st->prio);
}

/* True for an HTTP/1-only field (never sent over HTTP/2: core/hfield.h). */
static inline bool h1_only(const char *name, size_t n)
{
    return hfield_connection_specific(name, n, NULL, 0);
}

/* A new open stream id (a record from the pool, or a new one); NULL when memory is short.
 * Inline: its one caller (HEADERS, h2in.c) runs it for every request. */
static inline struct stream *h2_stream_get(struct h2_session *s, int32_t id)
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

/* The session's buffer (hooks.buf_get), taken when it holds none: false when none can be had. */
static inline bool h2_buf_take(struct h2_session *s)
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

/* Open stream id, or NULL. */
static inline struct stream *h2_stream_find(const struct h2_session *s, int32_t id)
{
    if (s->dlv && s->dlv->id == id)
        return s->dlv->closed ? NULL : s->dlv;
    LIVE_EACH(s, st)
    if (st->id == id)
        return st;
    return NULL;
}

/* Starts reading a header block on stream id (st NULL: one to read and ignore). */
static inline void h2_blk_begin(struct h2_session *s, int32_t id, struct stream *st, bool trailers,
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

/* ---- across the protocol's files ---- */

/* The end of a header block (END_HEADERS). */
void h2_blk_end(struct h2_session *s);

/* A fragment of the header block. */
void h2_blk_fragment(struct h2_session *s, const uint8_t *p, size_t len);

/* Ends the session (GOAWAY ENHANCE_YOUR_CALM) when a flood budget is exceeded. */
void h2_check_budget(struct h2_session *s);

/* A connection error (RFC 9113 5.4.1): GOAWAY with code, the session ends. */
void h2_conn_error(struct h2_session *s, uint32_t code);

/* Queues a control frame (payload len bytes). A client that does not read what it asked for
 * (PING and SETTINGS ACKs piling up) is told to go away. */
void h2_ctl(struct h2_session *s, uint8_t type, uint8_t flags, uint32_t id, const void *payload,
            size_t len);

/* A control frame whose payload is one 32-bit value (WINDOW_UPDATE, RST_STREAM). */
void h2_ctl32(struct h2_session *s, uint8_t type, uint32_t id, uint32_t v);

/* Parses the head of stream st (kept with the stream, or cut short in the block buffer) and
 * hands the request to the caller. */
void h2_deliver(struct h2_session *s, struct stream *st, const char *head, size_t len, int status);

/* The frames in data[0, len) (after any preface), each by its type's rules; a frame cut short
 * waits in the frame area (h2in.c). */
void h2_frames_in(struct h2_session *s, const uint8_t *data, size_t len);

/* Calls `done` for every stream that closed before the output now sent, and frees them. */
void h2_release_done(struct h2_session *s);

/* Gives the buffer back when nothing is in it. */
void h2_buf_give_back(struct h2_session *s);

/* The request on st ended (its END_STREAM): a head kept for its body is delivered now. */
void h2_request_ended(struct h2_session *s, struct stream *st);

/* The stream is over (both ways, or reset): off the open list, onto the done list. */
void h2_stream_close(struct h2_session *s, struct stream *st);

/* A stream error from the client's side: counted with invalid frames (a client making them
 * by the thousand is told to go away). */
void h2_stream_error(struct h2_session *s, int32_t id, uint32_t code);

/* Resets stream id (RST_STREAM code): a stream error, or the server giving up on it. */
void h2_stream_reset(struct h2_session *s, int32_t id, struct stream *st, uint32_t code);

/* Ends the session with GOAWAY(code); `why` is kept unless an earlier reason was. */
void h2_terminate(struct h2_session *s, enum h2_end why, uint32_t code);

/* Whether stream id (odd, <= max_id) was opened, rather than skipped (RFC 9113 5.1.1). */
bool h2_was_opened(const struct h2_session *s, int32_t id);

#endif
