/* HTTP/2 server session on libnghttp2; see h2.h.
 *
 * Requests: each header block stands for the HTTP/1.1 head "GET /x HTTP/1.1", host from
 * :authority, the fields; both protocols share one request parser and its limits and verdicts
 * (400, 431...), and nothing else in the server needs to know a request came over HTTP/2. The
 * fields go to http1_split_* one by one as they are decoded (the verdicts http1_parse gives that
 * head's text, without scanning it again); the text is written too, into the session's buffer
 * where the fields' bytes are kept anyway, for the rare request that needs its head later
 * (h2_hold, a request with a body), which http1_parse then reads. Pseudo-header fields come
 * before regular ones (nghttp2 enforces it), so the request line is made when the first
 * regular field or the end of the block arrives.
 *
 * Output: every DATA frame is made with NGHTTP2_DATA_FLAG_NO_COPY, so its payload is placed by
 * our send_data callback: memory bodies are copied beside the frame header, file bodies become
 * file segments of the output plan (sendfile/splice, no copy through user space). A frame that
 * does not fit the output buffer or plan waits for the next h2_output (NGHTTP2_ERR_WOULDBLOCK).
 *
 * Lifetimes: a stream's record (pooled) holds the caller's token until the stream closes and
 * the output that carried its last bytes is sent; only then is `done` called, so a file
 * segment never outlives the fd it borrows. */
#include "h2/h2.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

#define HEAD_CAP                                                                                   \
    HTTP1_MAX_HEAD     /* the synthesized HTTP/1.1 head, behind the output in the buffer           \
                        */
#define RESP_FIELDS 48 /* response header fields submitted */
#define MEM_CLASS 64   /* nghttp2 blocks recycled per session: size classes of 64 B, */
#define MEM_CLASSES 16 /* up to 1 KiB, */
#if defined(__SANITIZE_ADDRESS__)
#define H2_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define H2_ASAN 1
#endif
#endif
#ifdef H2_ASAN
#define MEM_CACHE_MAX 0 /* the sanitizer sees every block nghttp2 frees (use after free) */
#else
#define MEM_CACHE_MAX 65536 /* at most this many bytes of them kept */
#endif
/* What h2_trim keeps: about one stream's worth, so that a client asking one thing at a time
 * allocates nothing per request, while the blocks and records a burst of streams left go back
 * to the worker's heap (idle_rss --streams 40: 63.6 KB per idle connection when they stayed). */
#define MEM_IDLE_KEEP 4096
#define STREAMS_IDLE_KEEP 2

struct stream {
    int32_t id;
    bool answered; /* h2_respond took a token */
    bool sent_all; /* the frame carrying END_STREAM went out */
    void *token;
    struct plan *body;
    char *head; /* the request's head, kept until its body ends (rare), or by h2_hold */
    size_t head_len;
    bool held; /* head is h2_hold's: the request was delivered */
    int req_status;
    struct stream *next;          /* free or done list */
    struct stream *lprev, *lnext; /* the session's open streams */
};

struct h2_session {
    nghttp2_session *ng;
    const struct h2_hooks *hooks;
    void *user;
    struct h2_opts opts;
    enum h2_end end;

    /* nghttp2's memory, counted */
    size_t mem;
    bool mem_refused;
    struct mem_hdr *cache[MEM_CLASSES]; /* freed blocks by size class, see mem_alloc */
    size_t cached;                      /* bytes in them */

    /* output */
    bool busy; /* plan handed out, not yet sent */
    size_t out_len;
    struct plan plan;
    char *out; /* the buffer (hooks.buf_get) while one is held, else NULL */

    /* streams */
    unsigned open;
    struct stream *live; /* open streams, for h2_free: nghttp2 frees its own without a word */
    struct stream *free_list;
    unsigned nfree; /* records on free_list */
    struct stream *done_head, **done_tail;

    int32_t max_id; /* the newest stream the client opened */

    /* the header block being read */
    int32_t blk_id;
    struct stream *blk_st; /* its stream's record (blocks never interleave: RFC 9113 6.10) */
    bool blk_request;      /* a request's head (not trailers) */
    bool blk_line;         /* the request line is written */
    int blk_status;        /* 0, or the error status the request gets */
    size_t blk_decoded;
    unsigned blk_cont;
    nghttp2_rcbuf *method, *path, *authority;
    size_t head_len;
    char *head;
    struct http_request *req; /* in the buffer, behind head: the fields as they come */
    struct http1_split split;

    /* the request in hooks.request now (for h2_hold) */
    struct stream *dlv;
    const char *dlv_head;
    size_t dlv_len;

    /* input: the frame headers nghttp2 is fed between (see ng_recv) */
    uint32_t in_left; /* bytes to pass before the next frame header: magic, then payloads */
    uint8_t in_hd[9]; /* a frame header cut by the end of a read, */
    uint8_t in_held;  /* its bytes so far (held back from nghttp2) */

    /* flood budgets */
    int64_t now, window_start, progress;
    unsigned resets, control, empty, refused;
};

/* ---- memory: nghttp2 allocates through these, counted against H2_MEM_MAX ----
 *
 * nghttp2 makes about five small allocations per stream (the stream, its outbound item, the
 * copied response fields, HPACK strings) and frees them when it closes: freed blocks of up to
 * MEM_CLASSES * MEM_CLASS bytes go to per-session free lists by size class (up to
 * MEM_CACHE_MAX bytes of them) and the next stream takes them back without malloc. */

struct mem_hdr {
    size_t size; /* asked for (what H2_MEM_MAX counts) */
    size_t cap;  /* usable: a class size, or size past the classes; keeps payload 16-aligned */
};

static void *mem_alloc(size_t size, void *ud)
{
    struct h2_session *s = ud;
    if (s->mem + size > H2_MEM_MAX) {
        s->mem_refused = true;
        return NULL;
    }
    size_t cls = size ? (size - 1) / MEM_CLASS : 0;
    size_t cap = cls < MEM_CLASSES ? (cls + 1) * MEM_CLASS : size;
    struct mem_hdr *h = cls < MEM_CLASSES ? s->cache[cls] : NULL;
    if (h) {
        s->cache[cls] = *(struct mem_hdr **)(h + 1);
        s->cached -= cap;
    } else if (!(h = malloc(sizeof(*h) + cap))) {
        return NULL;
    }
    h->size = size;
    h->cap = cap;
    s->mem += size;
    return h + 1;
}

static void mem_free(void *ptr, void *ud)
{
    struct h2_session *s = ud;
    if (!ptr)
        return;
    struct mem_hdr *h = (struct mem_hdr *)ptr - 1;
    s->mem -= h->size;
    if (h->cap <= MEM_CLASSES * MEM_CLASS && s->cached + h->cap <= MEM_CACHE_MAX) {
        size_t cls = h->cap / MEM_CLASS - 1;
        *(struct mem_hdr **)(h + 1) = s->cache[cls];
        s->cache[cls] = h;
        s->cached += h->cap;
        return;
    }
    free(h);
}

/* Frees the blocks kept for reuse, the largest first, until at most keep bytes of them are
 * left (0: the session's end). */
static void mem_trim(struct h2_session *s, size_t keep)
{
    for (size_t i = MEM_CLASSES; i-- > 0 && s->cached > keep;) {
        while (s->cache[i] && s->cached > keep) {
            struct mem_hdr *h = s->cache[i];
            s->cache[i] = *(struct mem_hdr **)(h + 1);
            s->cached -= h->cap;
            free(h);
        }
    }
}

static void *mem_calloc(size_t n, size_t size, void *ud)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = mem_alloc(n * size, ud);
    if (p)
        memset(p, 0, n * size);
    return p;
}

static void *mem_realloc(void *ptr, size_t size, void *ud)
{
    struct h2_session *s = ud;
    if (!ptr)
        return mem_alloc(size, ud);
    struct mem_hdr *h = (struct mem_hdr *)ptr - 1;
    size_t old = h->size;
    if (size > old && s->mem + (size - old) > H2_MEM_MAX) {
        s->mem_refused = true;
        return NULL;
    }
    if (size <= h->cap) {
        h->size = size;
        s->mem = s->mem - old + size;
        return ptr;
    }
    s->mem -= old; /* the bound is checked above as for an in-place growth */
    void *n = mem_alloc(size, ud);
    s->mem += old;
    if (!n)
        return NULL;
    memcpy(n, ptr, old);
    mem_free(ptr, ud);
    return n;
}

/* ---- the buffer: held only while in use ---- */

static bool buf_take(struct h2_session *s)
{
    if (s->out)
        return true;
    s->out = s->hooks->buf_get(s->user);
    if (!s->out)
        return false;
    s->head = s->out + H2_OUT_CAP;
    s->req = (struct http_request *)(void *)(s->head + HEAD_CAP);
    return true;
}

/* Gives the buffer back when nothing is in it: no output in flight, no header block open. */
static void buf_give_back(struct h2_session *s)
{
    if (!s->out || s->busy || s->blk_request)
        return;
    s->hooks->buf_put(s->user, s->out);
    s->out = s->head = NULL;
    s->req = NULL;
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
    }
    *st = (struct stream){.id = id, .lnext = s->live};
    if (s->live)
        s->live->lprev = st;
    s->live = st;
    s->open++;
    return st;
}

static void stream_put(struct h2_session *s, struct stream *st)
{
    free(st->head);
    st->head = NULL;
    st->held = false;
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
        free(st);
    }
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

/* ---- budgets ---- */

/* Ends the session with GOAWAY(code); `why` is kept unless an earlier reason was. */
static void terminate(struct h2_session *s, enum h2_end why, uint32_t code)
{
    if (s->end == H2_END_NONE || s->end == H2_END_DONE)
        s->end = why;
    nghttp2_session_terminate_session(s->ng, code);
}

static bool over_budget(struct h2_session *s)
{
    if (s->now - s->window_start >= H2_WINDOW_MS) {
        s->window_start = s->now;
        s->resets = s->control = s->empty = s->refused = 0;
    }
    return s->resets > H2_MAX_RESETS || s->control > H2_MAX_CONTROL || s->empty > H2_MAX_EMPTY ||
           s->refused > H2_MAX_REFUSED;
}

static int flood(struct h2_session *s)
{
    terminate(s, H2_END_FLOOD, NGHTTP2_ENHANCE_YOUR_CALM);
    return NGHTTP2_ERR_CALLBACK_FAILURE;
}

/* ---- receiving ---- */

static int on_begin_frame(nghttp2_session *ng, const nghttp2_frame_hd *hd, void *ud)
{
    struct h2_session *s = ud;
    switch (hd->type) {
    case NGHTTP2_DATA:
        if (hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_STREAM))
            s->empty++;
        break;
    case NGHTTP2_HEADERS:
        s->blk_cont = 0;
        /* A client stream below the newest one that nghttp2 no longer knows was never opened
         * (RFC 9113 5.1.1: a smaller identifier is a connection error); nghttp2 would take it
         * for a closed one and drop it quietly. */
        if ((hd->stream_id & 1) && hd->stream_id < s->max_id &&
            !nghttp2_session_find_stream(ng, hd->stream_id)) {
            terminate(s, H2_END_PROTOCOL, NGHTTP2_PROTOCOL_ERROR);
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        if (hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_HEADERS))
            s->empty++;
        break;
    case NGHTTP2_CONTINUATION:
        if (++s->blk_cont > H2_MAX_CONTINUATIONS)
            return flood(s);
        if (hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_HEADERS))
            s->empty++;
        break;
    case NGHTTP2_SETTINGS:
    case NGHTTP2_PING:
    case NGHTTP2_PRIORITY:
        if (!(hd->flags & NGHTTP2_FLAG_ACK))
            s->control++;
        break;
    case NGHTTP2_RST_STREAM:
        /* Rapid reset (CVE-2023-44487) is resetting streams the server is working on; a reset
         * of a stream already closed costs nothing (a client that cancelled a download resets
         * again for each DATA frame still in flight, as Python's h2 does). */
        if (nghttp2_session_get_stream_user_data(ng, hd->stream_id))
            s->resets++;
        break;
    }
    return over_budget(s) ? flood(s) : 0;
}

static int on_invalid_frame(nghttp2_session *ng, const nghttp2_frame *frame, int err, void *ud)
{
    struct h2_session *s = ud;
    (void)ng, (void)frame, (void)err;
    s->refused++;
    return over_budget(s) ? flood(s) : 0;
}

static void blk_put(struct h2_session *s, const void *p, size_t n)
{
    if (s->head_len + n > HEAD_CAP) {
        s->blk_status = 431;
        return;
    }
    memcpy(s->head + s->head_len, p, n);
    s->head_len += n;
}

#define BLK_LIT(s, lit) blk_put((s), (lit), sizeof(lit) - 1)

/* Writes the field line "name: value\r\n" with one bound check (each request's fields come
 * here one by one: the separators as stores, not copies). */
static void blk_field(struct h2_session *s, nghttp2_vec n, nghttp2_vec v)
{
    if (s->head_len + n.len + v.len + 4 > HEAD_CAP) {
        s->blk_status = 431;
        return;
    }
    char *name = s->head + s->head_len, *value = name + n.len + 2;
    memcpy(name, n.base, n.len);
    name[n.len] = ':', name[n.len + 1] = ' ';
    memcpy(value, v.base, v.len);
    value[v.len] = '\r', value[v.len + 1] = '\n';
    s->head_len = (size_t)(value + v.len + 2 - s->head);
    http1_split_field(s->req, &s->split, name, n.len, value, v.len);
}

/* Writes the bytes of rc, returning where they went (the bound is blk_put's). */
static const char *put_rcbuf(struct h2_session *s, nghttp2_rcbuf *rc, size_t *len)
{
    nghttp2_vec v = nghttp2_rcbuf_get_buf(rc);
    const char *at = s->head + s->head_len;
    blk_put(s, v.base, v.len);
    *len = v.len;
    return at;
}

/* Makes "METHOD target HTTP/1.1\r\nhost: authority\r\n" once the pseudo-header fields are in. */
static void blk_request_line(struct h2_session *s)
{
    if (s->blk_line)
        return;
    s->blk_line = true;
    const char *method = "", *target = "*"; /* CONNECT has no :path */
    size_t method_len = 0, target_len = 1;
    if (s->method)
        method = put_rcbuf(s, s->method, &method_len);
    BLK_LIT(s, " ");
    if (s->path)
        target = put_rcbuf(s, s->path, &target_len);
    else
        BLK_LIT(s, "*");
    BLK_LIT(s, " HTTP/1.1\r\n");
    if (!s->blk_status) /* else cut short (431): end_headers parses what was written */
        http1_split_start(s->req, &s->split, method, method_len, target, target_len);
    if (s->authority) {
        BLK_LIT(s, "host: ");
        size_t len;
        const char *value = put_rcbuf(s, s->authority, &len);
        BLK_LIT(s, "\r\n");
        if (!s->blk_status)
            http1_split_field(s->req, &s->split, "host", 4, value, len);
    }
}

static void blk_clear(struct h2_session *s)
{
    nghttp2_rcbuf **pseudo[] = {&s->method, &s->path, &s->authority};
    for (size_t i = 0; i < sizeof(pseudo) / sizeof(pseudo[0]); i++) {
        if (*pseudo[i])
            nghttp2_rcbuf_decref(*pseudo[i]);
        *pseudo[i] = NULL;
    }
    s->blk_id = 0;
    s->blk_request = false;
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    struct h2_session *s = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (frame->hd.stream_id > s->max_id)
        s->max_id = frame->hd.stream_id;
    if (!buf_take(s))
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    struct stream *st = stream_get(s, frame->hd.stream_id);
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    nghttp2_session_set_stream_user_data(ng, st->id, st);
    blk_clear(s);
    s->blk_id = st->id;
    s->blk_st = st;
    s->blk_request = true;
    s->blk_line = false;
    s->blk_status = 0;
    s->blk_decoded = 0;
    s->head_len = 0;
    s->progress = s->now; /* a new request: a stalled peer is no longer idle */
    return 0;
}

static bool is(nghttp2_vec v, const char *lit)
{
    size_t n = strlen(lit);
    return v.len == n && memcmp(v.base, lit, n) == 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, nghttp2_rcbuf *name,
                     nghttp2_rcbuf *value, uint8_t flags, void *ud)
{
    struct h2_session *s = ud;
    (void)ng, (void)flags;
    if (!s->blk_request || frame->hd.stream_id != s->blk_id)
        return 0; /* trailers: read and dropped */
    nghttp2_vec n = nghttp2_rcbuf_get_buf(name), v = nghttp2_rcbuf_get_buf(value);

    /* HPACK bomb: a few bytes on the wire can name a large table entry again and again. The
     * head is cut (431) at the limit; decoding far past it ends the connection. */
    s->blk_decoded += n.len + v.len + 32;
    if (s->blk_decoded > 4 * H2_MAX_HEADER_LIST)
        return flood(s);
    if (s->blk_decoded > H2_MAX_HEADER_LIST)
        s->blk_status = 431;
    if (s->blk_status)
        return 0;

    if (n.len && n.base[0] == ':') {
        nghttp2_rcbuf **slot = n.len == 5 && memcmp(n.base, ":path", 5) == 0     ? &s->path
                               : n.len == 7 && memcmp(n.base, ":method", 7) == 0 ? &s->method
                               : n.len == 10 && memcmp(n.base, ":authority", 10) == 0
                                   ? &s->authority
                                   : NULL;
        if (slot && !*slot) {
            nghttp2_rcbuf_incref(value);
            *slot = value;
        }
        return 0;
    }
    blk_request_line(s);
    /* :authority stands in for host (RFC 9113 8.3.1); no interim 100 exists to send here. */
    if ((is(n, "host") && s->authority) || (is(n, "expect") && is(v, "100-continue")))
        return 0;
    blk_field(s, n, v);
    return 0;
}

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

/* The end of a request header block. */
static int end_headers(struct h2_session *s, const nghttp2_frame *frame)
{
    /* A block still open is its stream's: on_stream_close ends the block with the stream. */
    if (!s->blk_request || s->blk_id != frame->hd.stream_id)
        return 0;
    struct stream *st = s->blk_st;
    blk_request_line(s);
    BLK_LIT(s, "\r\n");
    blk_clear(s);
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
        /* The fields went to http1_split as they came, unless the block was cut short (431):
         * then the text written up to the cut is parsed, as for a kept head. */
        if (s->blk_status)
            deliver(s, st, s->head, s->head_len, s->blk_status);
        else
            deliver_req(s, st, s->req, s->head, s->head_len, http1_split_end(s->req, &s->split));
        return 0;
    }
    /* A body follows: answer once it has ended (it is read and dropped), as a server answers
     * an HTTP/1.1 request after its body; keep the head until then. */
    st->head = malloc(s->head_len);
    if (!st->head)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    memcpy(st->head, s->head, s->head_len);
    st->head_len = s->head_len;
    st->req_status = s->blk_status;
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    struct h2_session *s = ud;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
        return end_headers(s, frame);
    if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        struct stream *st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
        if (st && st->head && !st->held) {
            char *head = st->head;
            st->head = NULL;
            deliver(s, st, head, st->head_len, st->req_status);
            free(head);
        }
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    /* Request bodies are dropped; nghttp2 reopens the window by itself. */
    (void)ng, (void)flags, (void)id, (void)data, (void)len, (void)ud;
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    struct h2_session *s = ud;
    struct stream *st = nghttp2_session_get_stream_user_data(ng, id);
    (void)code;
    if (!st)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    if (s->blk_id == id)
        blk_clear(s);
    s->open--;
    if (st->lprev)
        st->lprev->lnext = st->lnext;
    else
        s->live = st->lnext;
    if (st->lnext)
        st->lnext->lprev = st->lprev;
    st->body = NULL;
    st->next = NULL;
    *s->done_tail = st;
    s->done_tail = &st->next;
    return 0;
}

/* ---- sending ---- */

/* Takes the n bytes written at the end of the output buffer into the plan, extending the last
 * memory segment when it ends there. */
static void out_grow(struct h2_session *s, size_t n)
{
    char *at = s->out + s->out_len;
    struct plan *o = &s->plan;
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
    memcpy(s->out + s->out_len, p, n);
    out_grow(s, n);
}

static ssize_t on_send(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *ud)
{
    struct h2_session *s = ud;
    (void)ng, (void)flags;
    size_t room = H2_OUT_CAP - s->out_len;
    if (room == 0 || s->plan.nseg == PLAN_MAX_SEGS)
        return NGHTTP2_ERR_WOULDBLOCK;
    if (len > room)
        len = room;
    out_put(s, data, len);
    return (ssize_t)len;
}

static uint64_t plan_left(const struct plan *p)
{
    uint64_t n = 0;
    for (unsigned i = p->cur; i < p->nseg; i++)
        n += p->segs[i].len;
    return n;
}

static ssize_t on_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                       uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    struct stream *st = src->ptr;
    (void)ng, (void)id, (void)buf, (void)ud;
    uint64_t left = st->body ? plan_left(st->body) : 0;
    size_t n = left < length ? (size_t)left : length;
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (n == left)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int on_send_data(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *src, void *ud)
{
    struct h2_session *s = ud;
    struct stream *st = src->ptr;
    struct plan *b = st->body;
    size_t pad = frame->data.padlen; /* the Pad Length byte and the padding */
    (void)ng;
    /* nghttp2 drops a waiting frame whose stream closed (test h2_reset_while_frame_waits); were
     * it ever to come back for one, the body is gone: end the connection rather than read it. */
    if (!b || st->id != frame->hd.stream_id)
        return NGHTTP2_ERR_CALLBACK_FAILURE;

    /* What the frame needs: memory for the header, padding and memory payload, and plan
     * segments for each file piece and the memory around it. */
    size_t mem = 9 + pad, files = 0;
    uint64_t rem = length;
    for (unsigned i = b->cur; rem && i < b->nseg; i++) {
        uint64_t take = b->segs[i].len < rem ? b->segs[i].len : rem;
        if (b->segs[i].mem)
            mem += take;
        else
            files++;
        rem -= take;
    }
    if (s->out_len + mem > H2_OUT_CAP || s->plan.nseg + 2 * files + 2 > PLAN_MAX_SEGS)
        return s->plan.nseg ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;

    out_put(s, framehd, 9);
    if (pad) {
        uint8_t padlen = (uint8_t)(pad - 1);
        out_put(s, &padlen, 1);
    }
    rem = length;
    while (rem) {
        struct seg *g = plan_seg(b);
        uint64_t take = g->len < rem ? g->len : rem;
        if (g->mem)
            out_put(s, g->mem + g->off, take);
        else
            plan_file(&s->plan, g->fd, g->off, take);
        plan_advance(b, take);
        rem -= take;
    }
    if (pad > 1) {
        memset(s->out + s->out_len, 0, pad - 1);
        out_grow(s, pad - 1);
    }
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
        st->sent_all = true;
    return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    struct h2_session *s = ud;
    if (frame->hd.type == NGHTTP2_GOAWAY && s->end == H2_END_NONE)
        s->end = frame->goaway.error_code == NGHTTP2_NO_ERROR ? H2_END_DONE : H2_END_PROTOCOL;
    /* (a DATA frame's END_STREAM is seen in on_send_data, which knows its stream) */
    if (frame->hd.type == NGHTTP2_HEADERS && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        struct stream *st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
        if (st)
            st->sent_all = true;
    }
    return 0;
}

/* ---- public ---- */

int h2_new(struct h2_session **out, const struct h2_opts *opts, const struct h2_hooks *hooks,
           void *user)
{
    int rc = -ENOMEM;
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    struct h2_session *s = calloc(1, sizeof(*s));
    if (!s)
        goto fail_session;
    s->hooks = hooks;
    s->user = user;
    s->opts = *opts;
    s->done_tail = &s->done_head;
    s->in_left = NGHTTP2_CLIENT_MAGIC_LEN; /* nghttp2 checks it */
    plan_init(&s->plan);

    if (nghttp2_session_callbacks_new(&cb) != 0)
        goto fail_callbacks;
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_send_data_callback(cb, on_send_data);
    nghttp2_session_callbacks_set_on_begin_frame_callback(cb, on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback2(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, on_invalid_frame);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);

    if (nghttp2_option_new(&opt) != 0)
        goto fail_option;
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, H2_HPACK_TABLE);
    nghttp2_option_set_max_continuations(opt, H2_MAX_CONTINUATIONS);
    nghttp2_option_set_max_outbound_ack(opt, 4 * H2_MAX_CONTROL);

    nghttp2_mem mem = {s, mem_alloc, mem_free, mem_calloc, mem_realloc};
    if (nghttp2_session_server_new3(&s->ng, cb, s, opt, &mem) != 0)
        goto fail_ng;

    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, H2_MAX_STREAMS},
        {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, H2_HPACK_TABLE},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, H2_MAX_HEADER_LIST},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    };
    if (nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, settings,
                                sizeof(settings) / sizeof(settings[0])) != 0)
        goto fail_settings;
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    *out = s;
    return 0;

fail_settings:
    nghttp2_session_del(s->ng);
fail_ng:
    nghttp2_option_del(opt);
fail_option:
    nghttp2_session_callbacks_del(cb);
fail_callbacks:
    mem_trim(s, 0);
    free(s);
fail_session:
    return rc;
}

void h2_free(struct h2_session *s)
{
    if (!s)
        return;
    blk_clear(s);
    nghttp2_session_del(s->ng);
    s->ng = NULL;
    while (s->live) {
        struct stream *st = s->live;
        s->live = st->lnext;
        st->next = NULL;
        *s->done_tail = st;
        s->done_tail = &st->next;
    }
    release_done(s);
    streams_trim(s, 0);
    if (s->out)
        s->hooks->buf_put(s->user, s->out);
    mem_trim(s, 0);
    free(s);
}

/* ---- input: streams past the limit refused, not the connection ----
 *
 * README and RFC 9113 5.1.2: a stream past SETTINGS_MAX_CONCURRENT_STREAMS gets
 * RST_STREAM(REFUSED_STREAM), which the client may retry. nghttp2 does that only while our
 * SETTINGS are unacknowledged; once the client's ACK applies them it ends the whole
 * connection with GOAWAY(PROTOCOL_ERROR) instead (by design, nghttp2 issue 687). So the
 * client's SETTINGS ACKs (empty, stream 0) are not fed to nghttp2: our settings stay pending
 * for it, its limit is the refusing one, and it keeps as many closed streams (priorities) as
 * before. The settings nghttp2 would apply on the ACK change nothing else: MAX_HEADER_LIST_SIZE
 * and ENABLE_PUSH are not enforced by it on a server, and HEADER_TABLE_SIZE is its default. */
_Static_assert(H2_HPACK_TABLE == NGHTTP2_DEFAULT_HEADER_TABLE_SIZE,
               "nghttp2 never applies our HEADER_TABLE_SIZE (see ng_recv)");

static ssize_t feed(struct h2_session *s, const uint8_t *p, size_t n)
{
    return n ? nghttp2_session_mem_recv(s->ng, p, n) : 0;
}

/* Feeds p[0..len) to nghttp2 in as few spans as the ACKs in it allow; <0 on nghttp2's error. */
static ssize_t ng_recv(struct h2_session *s, const uint8_t *p, size_t len)
{
    size_t from = 0, i = 0; /* p[from..i) is passed, not fed yet */
    ssize_t rv = 0;
    while (i < len && rv >= 0) {
        if (s->in_left) {
            size_t n = len - i < s->in_left ? len - i : s->in_left;
            s->in_left -= (uint32_t)n;
            i += n;
            continue;
        }
        size_t held = s->in_held, n = len - i < 9 - held ? len - i : 9 - held;
        memcpy(s->in_hd + held, p + i, n);
        if (held + n < 9) { /* the read ends inside a header: held until it is whole */
            s->in_held = (uint8_t)(held + n);
            return feed(s, p + from, i - from);
        }
        s->in_held = 0;
        const uint8_t *h = s->in_hd;
        uint32_t flen = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
        if (h[3] == NGHTTP2_SETTINGS && (h[4] & NGHTTP2_FLAG_ACK) && flen == 0 && !(h[5] & 0x7f) &&
            !h[6] && !h[7] && !h[8]) {
            rv = feed(s, p + from, i - from); /* up to it; a held part was never fed */
            from = i += n;
            continue;
        }
        if (held) /* only ever at the start of a read: from == i == 0 */
            rv = feed(s, h, held);
        i += n;
        s->in_left = flen;
    }
    return rv < 0 ? rv : feed(s, p + from, len - from);
}

int h2_recv(struct h2_session *s, const void *data, size_t len, int64_t now)
{
    s->now = now;
    if (s->end != H2_END_NONE && s->end != H2_END_DONE)
        return -EPROTO;
    ssize_t rv = ng_recv(s, data, len);
    buf_give_back(s);
    if (rv >= 0 && !s->mem_refused)
        return 0;
    if (s->mem_refused || rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS)
        terminate(s, H2_END_FLOOD, NGHTTP2_ENHANCE_YOUR_CALM);
    else
        terminate(s, H2_END_PROTOCOL, NGHTTP2_PROTOCOL_ERROR);
    return -EPROTO;
}

/* Whether name[0..n) equals lit, a lower-case token, in any case (0x20 folds letters; '-'
 * and the letters of these names are the only bytes). */
static bool name_is(const char *name, const char *lit, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if ((name[j] | 0x20) != lit[j])
            return false;
    return true;
}

/* True for an HTTP/1-only field. Every response field passes here, so the length decides
 * first: the usual ones (content-type, etag, date...) have none of these lengths. */
static bool h1_only(const char *name, size_t n)
{
    switch (n) {
    case 2:
        return name_is(name, "te", 2);
    case 7:
        return name_is(name, "upgrade", 7);
    case 10:
        return name_is(name, "connection", 10) || name_is(name, "keep-alive", 10);
    case 16:
        return name_is(name, "proxy-connection", 16);
    case 17:
        return name_is(name, "transfer-encoding", 17);
    default:
        return false;
    }
}

/* Whether the n >= 4 bytes at name are lit (lower-case letters and '-') in any case: setting
 * 0x20 folds the letters, and names are tchars, of which it folds no other onto these bytes.
 * Eight or four bytes at a time, the tail by an overlapping load. */
static bool name_folds_to(const char *name, const char *lit, size_t n)
{
    uint64_t a, b;
    uint32_t c, d;
    if (n < 8) {
        memcpy(&c, name, 4), memcpy(&d, lit, 4);
        bool head = (c | 0x20202020u) == d;
        memcpy(&c, name + n - 4, 4), memcpy(&d, lit + n - 4, 4);
        return head && (c | 0x20202020u) == d;
    }
    for (size_t i = 0;; i += 8) {
        size_t at = i + 8 <= n ? i : n - 8;
        memcpy(&a, name + at, 8), memcpy(&b, lit + at, 8);
        if ((a | 0x2020202020202020u) != b)
            return false;
        if (at + 8 == n)
            return true;
    }
}

/* The lower-case spelling of the field names every response has, so that nghttp2 need not
 * copy and lower-case them (NGHTTP2_NV_FLAG_NO_COPY_NAME); NULL for the others. */
static const char *known_name(const char *name, size_t n)
{
    char first = (char)(name[0] | 0x20);
    const char *lit;
    switch (n) {
    case 4:
        lit = first == 'd' ? "date" : first == 'e' ? "etag" : "vary";
        break;
    case 6:
        lit = "server";
        break;
    case 12:
        lit = "content-type";
        break;
    case 13:
        lit = first == 'l' ? "last-modified" : first == 'a' ? "accept-ranges" : "cache-control";
        break;
    case 14:
        lit = "content-length";
        break;
    default:
        return NULL;
    }
    return name_folds_to(name, lit, n) ? lit : NULL;
}

/* Appends the field name: value to nv[*n] unless it is HTTP/1-only. Values stay the caller's
 * until `done`, which comes after the stream closed, so after its HEADERS frame was written (or
 * dropped unwritten with the stream): nghttp2 need not copy them. Names every response has go as
 * lower-case literals, not copied either; others nghttp2 copies and lower-cases
 * (nghttp2_nv_array_copy). */
static inline void nv_add(nghttp2_nv *nv, size_t *n, const char *name, size_t name_len,
                          const char *value, size_t value_len)
{
    const char *known = known_name(name, name_len);
    if (!known && h1_only(name, name_len))
        return;
    nv[(*n)++] =
        (nghttp2_nv){(uint8_t *)(known ? known : name), (uint8_t *)value, name_len, value_len,
                     NGHTTP2_NV_FLAG_NO_COPY_VALUE | (known ? NGHTTP2_NV_FLAG_NO_COPY_NAME : 0)};
}

/* nv[0] is left for :status, which respond fills. */
static int respond(struct h2_session *s, int32_t id, int status, nghttp2_nv *nv, size_t n,
                   struct plan *body, void *token)
{
    /* Most responses are made inside hooks.request, for the stream being delivered. */
    struct stream *st =
        s->dlv && s->dlv->id == id ? s->dlv : nghttp2_session_get_stream_user_data(s->ng, id);
    if (!st || st->answered)
        return -ENOENT;
    char code[3] = {(char)('0' + status / 100 % 10), (char)('0' + status / 10 % 10),
                    (char)('0' + status % 10)};
    nv[0] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)code, 7, 3, NGHTTP2_NV_FLAG_NONE};
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = on_read};
    bool has_body = body && plan_left(body) > 0;
    st->body = has_body ? body : NULL;
    int rv = nghttp2_submit_response(s->ng, id, nv, n, has_body ? &prd : NULL);
    if (rv != 0) {
        st->body = NULL;
        return rv == NGHTTP2_ERR_NOMEM ? -ENOMEM : -ENOENT;
    }
    st->answered = true;
    st->token = token;
    return 0;
}

int h2_respond(struct h2_session *s, int32_t id, int status, const struct h2_field *fields,
               size_t nfields, struct plan *body, void *token)
{
    nghttp2_nv nv[RESP_FIELDS + 1];
    size_t n = 1;
    for (size_t i = 0; i < nfields && n < RESP_FIELDS + 1; i++)
        nv_add(nv, &n, fields[i].name, fields[i].name_len, fields[i].value, fields[i].value_len);
    return respond(s, id, status, nv, n, body, token);
}

int h2_respond_plan(struct h2_session *s, int32_t id, struct plan *p, void *token)
{
    /* The field lines go straight into nv (no h2_field array between). */
    nghttp2_nv nv[RESP_FIELDS + 1];
    size_t n = 1, pos = 0, name_len, value_len;
    const char *name, *value;
    while (n < RESP_FIELDS + 1 && plan_field_next(p, &pos, &name, &name_len, &value, &value_len))
        nv_add(nv, &n, name, name_len, value, value_len);
    plan_advance(p, p->head_len);
    return respond(s, id, p->status, nv, n, p, token);
}

int h2_interim(struct h2_session *s, int32_t id, int status, const char *lines, size_t len)
{
    struct stream *st =
        s->dlv && s->dlv->id == id ? s->dlv : nghttp2_session_get_stream_user_data(s->ng, id);
    if (status < 100 || status > 199)
        return -EINVAL;
    if (!st || st->answered)
        return -ENOENT;
    struct plan p;
    plan_init(&p);
    if (!plan_mem(&p, lines, len))
        return -EINVAL;
    p.head_len = len;
    nghttp2_nv nv[RESP_FIELDS + 1];
    size_t n = 1, pos = 0, name_len, value_len;
    const char *name, *value;
    while (n < RESP_FIELDS + 1 && plan_field_next(&p, &pos, &name, &name_len, &value, &value_len))
        nv_add(nv, &n, name, name_len, value, value_len);
    /* The lines are the caller's only during the call: nghttp2 copies names and values. */
    for (size_t i = 1; i < n; i++)
        nv[i].flags = NGHTTP2_NV_FLAG_NONE;
    char code[3] = {(char)('0' + status / 100 % 10), (char)('0' + status / 10 % 10),
                    (char)('0' + status % 10)};
    nv[0] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)code, 7, 3, NGHTTP2_NV_FLAG_NONE};
    int rv = nghttp2_submit_headers(s->ng, NGHTTP2_FLAG_NONE, id, NULL, nv, n, NULL);
    if (rv < 0)
        return rv == NGHTTP2_ERR_NOMEM ? -ENOMEM : -ENOENT;
    return 0;
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
    free(st->head); /* NULL: deliver's caller took it */
    st->head = head;
    st->head_len = s->dlv_len;
    st->held = true;
    return 0;
}

int h2_replay(struct h2_session *s, int32_t id)
{
    struct stream *st = nghttp2_session_get_stream_user_data(s->ng, id);
    if (!st || !st->held)
        return -ENOENT;
    char *head = st->head;
    st->head = NULL;
    st->held = false;
    deliver(s, st, head, st->head_len, 0);
    free(head);
    return 0;
}

void h2_reset(struct h2_session *s, int32_t id)
{
    nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
}

struct plan *h2_output(struct h2_session *s)
{
    if (s->busy)
        return &s->plan;
    release_done(s);
    s->out_len = 0;
    plan_init(&s->plan);
    if (!nghttp2_session_want_write(s->ng) || !buf_take(s)) {
        buf_give_back(s);
        return NULL;
    }
    int rv = nghttp2_session_send(s->ng);
    if (rv != 0 && s->end == H2_END_NONE)
        s->end =
            rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_NOMEM ? H2_END_FLOOD : H2_END_PROTOCOL;
    if (s->plan.nseg == 0) {
        buf_give_back(s);
        return NULL;
    }
    s->busy = true;
    return &s->plan;
}

void h2_sent(struct h2_session *s, int64_t now)
{
    s->busy = false;
    s->out_len = 0;
    plan_init(&s->plan);
    s->progress = now;
    release_done(s);
}

void h2_trim(struct h2_session *s)
{
    if (s->open || s->done_head)
        return;
    mem_trim(s, MEM_IDLE_KEEP);
    streams_trim(s, STREAMS_IDLE_KEEP);
}

void h2_goaway(struct h2_session *s)
{
    if (s->end != H2_END_NONE)
        return;
    s->end = H2_END_DONE;
    nghttp2_submit_goaway(s->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(s->ng),
                          NGHTTP2_NO_ERROR, NULL, 0);
}

bool h2_check(struct h2_session *s, int64_t now)
{
    if (s->end == H2_END_STALL || s->end == H2_END_FLOOD || s->end == H2_END_PROTOCOL)
        return true;
    if (s->open == 0 && !s->busy)
        return false;
    if (now - s->progress < s->opts.stall_ms)
        return false;
    terminate(s, H2_END_STALL, NGHTTP2_NO_ERROR);
    s->end = H2_END_STALL;
    return true;
}

bool h2_finished(const struct h2_session *s)
{
    if (s->busy)
        return false;
    if (s->end == H2_END_FLOOD || s->end == H2_END_PROTOCOL || s->end == H2_END_STALL)
        return !nghttp2_session_want_write(s->ng);
    return !nghttp2_session_want_read(s->ng) && !nghttp2_session_want_write(s->ng);
}

unsigned h2_open_streams(const struct h2_session *s)
{
    return s->open;
}

enum h2_end h2_end(const struct h2_session *s)
{
    return s->end;
}

size_t h2_mem(const struct h2_session *s)
{
    return s->mem;
}
