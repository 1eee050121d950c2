/* HTTP/3 over QUIC; see h3.h.
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
 * through H3_CHUNK-byte reads, at most H3_WINDOW bytes a stream not yet acknowledged by the
 * peer, so a slow reader holds a bounded amount. ngtcp2 keeps pointers to what it sent until
 * the peer acknowledges it: nothing handed over moves or is freed before (app_acked), or
 * before the stream closes. A chunk is read on the loop only when the page cache has it
 * (preadv2 RWF_NOWAIT); a cold one, or any on a file system without RWF_NOWAIT, is read by a
 * thread of the worker's (rt/offload.h) while its stream waits for h3_collect, as the epoll
 * engine reads TLS bodies.
 *
 * Streams with something to send are ordered by core/prio.h's scheduler, HTTP/2's too: the
 * lowest urgency first; in one, the non-incremental ones one after another in arrival order
 * (a stream that must wait, for an acknowledgement or a cold read, comes back to its place),
 * ahead of incremental ones that have had a turn, which take turns a write each. */
#include "http/h3/h3.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sys/uio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hfield.h"
#include "core/http1.h"
#include "core/logfmt.h"
#include "core/policy.h"
#include "core/prio.h"
#include "core/vhost.h"
#include "http/h3/h3req.h"
#include "http/h3/qpack.h"
#include "quic/quic.h"
#include "core/peer.h"
#include "rt/errlog.h"
#include "rt/fcache.h"
#include "rt/guard.h"
#include "rt/obs.h"
#include "rt/offload.h"
#include "rt/runtime.h"
#include "http/serve.h"

#define H3_CHUNK (32u << 10)
#define H3_WINDOW (256u << 10)
#define H3_RESP_FIELDS 48 /* response fields sent, as HTTP/2's */
#define H3_READERS 2      /* threads reading cold chunks, per worker */
#define H3_OUTV 16        /* byte ranges a stream has handed out and not yet seen written */
#define H3_BUCKETS 32     /* request streams by ID */
#define H3_UNI 3 /* the peer's unidirectional streams kept: control, QPACK encoder and decoder */
/* The peer's unidirectional streams whose type is read (by index, stream ID / 4): QUIC's
 * allowance (quic.c, 3 + 8) and one more for each reserved-type stream given back, at most
 * H3_RESERVED_MAX, fit. */
#define H3_UNI_IDS 32
#define H3_RESERVED_MAX                                                                            \
    16                  /* reserved-type streams a connection may open (more: EXCESSIVE_LOAD)      \
                         */
#define H3_CTRL_MAX 512 /* a control frame's payload, parsed whole (more: H3_EXCESSIVE_LOAD) */
#define H3_DEC_BUF 512  /* our decoder stream's bytes not yet acknowledged */
#define H3_EARLY 16     /* PRIORITY_UPDATEs kept for streams not yet opened */
#define H3_HELD_MAX (256u << 10) /* stream bytes kept behind a blocked section (its window) */
/* A field section: what h3req takes (HTTP1_MAX_HEAD of names and values, HTTP1_MAX_HEADERS
 * fields) counted as RFC 9114 4.2.2 counts (32 more a field). A HEADERS frame larger on the
 * wire is not read: no encoder needs more bytes than that for a section it may send. */
#define H3_LIST_MAX (HTTP1_MAX_HEAD + 32 * H3REQ_FIELDS)

/* Frame types (RFC 9114 7.2, RFC 9218 7), stream types (6.2), error codes (8.1). */
#define F_DATA 0x0
#define F_HEADERS 0x1
#define F_CANCEL_PUSH 0x3
#define F_SETTINGS 0x4
#define F_PUSH_PROMISE 0x5
#define F_GOAWAY 0x7
#define F_MAX_PUSH_ID 0xd
#define F_PRIORITY_UPDATE 0xf0700
#define F_PRIORITY_UPDATE_PUSH 0xf0701
#define U_CONTROL 0x0
#define U_PUSH 0x1
#define U_ENCODER 0x2
#define U_DECODER 0x3
#define H3_NO_ERROR 0x100
#define H3_INTERNAL_ERROR 0x102
#define H3_STREAM_CREATION_ERROR 0x103
#define H3_CLOSED_CRITICAL_STREAM 0x104
#define H3_FRAME_UNEXPECTED 0x105
#define H3_FRAME_ERROR 0x106
#define H3_EXCESSIVE_LOAD 0x107
#define H3_ID_ERROR 0x108
#define H3_SETTINGS_ERROR 0x109
#define H3_MISSING_SETTINGS 0x10a
#define H3_REQUEST_REJECTED 0x10b
#define H3_REQUEST_CANCELLED 0x10c
#define H3_REQUEST_INCOMPLETE 0x10d
#define H3_MESSAGE_ERROR 0x10e
/* Settings (RFC 9114 7.2.4.1, RFC 9204 5) */
#define SET_QPACK_MAX_TABLE_CAPACITY 0x1
#define SET_MAX_FIELD_SECTION_SIZE 0x6
#define SET_QPACK_BLOCKED_STREAMS 0x7
#define H3_TABLE 4096 /* the QPACK table a client may make us keep */
#define H3_BLOCKED 16 /* streams it may leave waiting for its encoder stream */

/* HTTP/2's frame types that HTTP/3 reserves (RFC 9114 7.2.8): PRIORITY, PING, WINDOW_UPDATE,
 * CONTINUATION. */
static bool h2_only(uint64_t type)
{
    return type == 0x2 || type == 0x6 || type == 0x8 || type == 0x9;
}

struct chunk {
    struct chunk *next;
    uint64_t end; /* the stream offset just past this chunk */
    uint8_t data[];
};

/* A cold chunk being read off the loop. */
struct h3read {
    struct offload_job job;
    struct h3stream *st; /* NULL once the stream is gone: then r is the job's to put back */
    struct response *r;  /* the orphaned stream's response (its file stays open meanwhile) */
    struct chunk *c;
    int fd;
    uint64_t off;
    size_t len;
    ssize_t got; /* the read's result, or -errno */
};

/* The worker's HTTP/3 state (w->h3): its connections, for h3_resume, and its cold readers. */
struct h3worker {
    struct h3conn *conns;
    struct offload readers;
    bool readers_on;
    struct http_request req; /* scratch for the request being parsed */
    struct h3pre *lead;      /* the last response's first H3_LEAD_LINES lines, encoded */
    /* Memory held for requests not yet answered (saved requests, field sections in parts or
     * blocked, bytes behind those): counted against --head-memory apart from HTTP/1's, by the
     * streams holding some, oldest first, which are reset to make room (issue 35.3). */
    struct h3stream *held_first, *held_last;
    size_t held_bytes;
    struct errlog_limit log_held;
    /* the field section being decoded: QPACK hands over every line in one call */
    struct h3req q;
    struct h3req_field fields[H3REQ_FIELDS];
    char head[HTTP1_MAX_HEAD];
};

/* Field lines QPACK-encoded once and kept with their text: with the static table and literals
 * only, the bytes depend on no connection, so any stream sends them as they are where its
 * response's lines hold that text. A cached file version's representation fields are kept so
 * with its entry (fcache's wire_parts), the worker's last Server and Date lines in h3worker
 * (made again each second). Huffman-coding a response's values cost ~3.8k instructions. */
struct h3pre {
    size_t key_len, enc_len;
    uint8_t *enc;
    char key[]; /* the lines' text, then enc's bytes */
};

#define H3_LEAD_LINES 2 /* Server and Date, first in the core's responses */

/* A frame being read: its head (type and length, each a QUIC varint, together at most 16
 * bytes) kept across reads until whole, then its payload counted down. */
struct frd {
    uint64_t type, left;
    bool body; /* in the payload */
    uint8_t hn;
    uint8_t h[16];
};

enum phase { P_HEADERS, P_BODY, P_TRAILERS };
enum pay { PAY_SKIP, PAY_SECTION };

struct h3stream {
    int64_t id;
    struct h3conn *hc;
    struct h3stream *prev, *next; /* the connection's streams */
    struct h3stream *hnext;       /* its bucket */
    struct prio_node prio;        /* its place in the send order (core/prio.h), while ready */
    /* reading */
    int64_t last_in; /* when its request last brought bytes (quic_now_s): the body deadline */
    struct h3stream *held_prev, *held_next; /* the worker's streams holding request memory */
    size_t held_mem;                        /* what it holds: q, sec, held */
    struct h3req *q;                        /* its request, saved (h3req_save) until answered */
    struct frd rd;
    uint8_t phase, pay;
    bool ignore;  /* reset, or refused: what comes is dropped */
    bool blocked; /* its section waits for the encoder stream (sec holds it) */
    bool fin_in;
    uint8_t *sec; /* a field section read in parts, or blocked */
    uint32_t sec_len, sec_cap;
    struct hfield_length cl; /* its content-length, against the DATA (RFC 9114 4.1.2) */
    uint8_t *held; /* stream bytes read behind a blocked section, and the FIN */
    size_t held_len;
    bool held_fin;
    /* answering */
    bool prio_set; /* a PRIORITY_UPDATE came: the field does not count */
    bool flow_blocked, shut, fin_offered, fin_sent;
    bool parked; /* its credentials are being verified off the loop: asked again on resume */
    bool answered;
    struct response *r;    /* from the answer to the stream's close */
    uint64_t given, acked; /* stream bytes handed out (end of out[]), and acknowledged */
    unsigned nout;
    struct quic_vec out[H3_OUTV]; /* handed out from the write offset on, not yet written */
    struct chunk *chunks, *last;
    struct h3read *reading; /* a cold chunk being read off the loop, at most one */
    struct chunk *ready;    /* what it read, to be handed out next */
    size_t ready_len;
    uint8_t *head; /* the response's frame heads and field section */
};

/* One of the peer's unidirectional streams. */
struct h3uni {
    int64_t id; /* -1: a free slot */
    int type;
    bool settings; /* control: SETTINGS came */
    uint8_t ins;   /* decoder: bytes of an instruction's integer still to come, 0xff none */
    uint16_t blen;
    struct frd rd;
    uint8_t buf[H3_CTRL_MAX];
};

struct h3conn {
    struct runtime *w;
    struct quic_conn *qc;
    struct h3conn *prev, *next; /* the worker's connections (h3worker), for h3_resume */
    struct h3stream *streams, *bucket[H3_BUCKETS];
    struct h3stream *cur; /* the stream last pulled: wrote's usually */
    unsigned nstreams, nparked, nblocked;
    struct prio_sched sched; /* request streams with something to send */
    struct qpack_dec qd;
    /* ours: the control stream's bytes never move (SETTINGS, then GOAWAY), the encoder
     * stream is its type alone, the decoder stream's buffer starts again once all of it is
     * acknowledged */
    int64_t ctrl_id, enc_id, dec_id;
    uint8_t ctrl_len, ctrl_sent;
    bool ctrl_stuck, enc_stuck, dec_stuck, enc_sent;
    uint8_t ctrl_buf[48];
    uint8_t enc_type;
    uint16_t dec_len, dec_sent, dec_acked;
    uint8_t dec_buf[H3_DEC_BUF];
    /* the peer's */
    int64_t peer_ctrl, peer_enc, peer_dec;
    struct h3uni uni[H3_UNI];
    uint32_t uni_dropped;         /* by index: streams of other types, refused */
    uint8_t uni_hn[H3_UNI_IDS];   /* by index: bytes of a stream's type read so far */
    uint8_t uni_h[H3_UNI_IDS][8]; /* and those bytes */
    unsigned nreserved;           /* streams of other types refused, in all */
    uint64_t max_bidi;            /* request streams the client may open, in all */
    int64_t next_bidi;            /* the lowest request stream ID not seen yet */
    int64_t goaway_id;            /* streams from here on are refused (INT64_MAX: no GOAWAY sent) */
    uint64_t max_push;            /* the client's MAX_PUSH_ID (we push nothing) */
    bool have_max_push;
    unsigned nearly, early_next;
    struct {
        int64_t id;
        uint8_t urgency;
        bool incremental;
    } early[H3_EARLY];
    int64_t wake_s;      /* the body deadline its wake was asked for (0: none) */
    uint32_t token;      /* its requests' resume token's generation (never 0: 0 cannot wait) */
    uint8_t ok_host_len; /* the last host found named by its certificate, or address (0: none) */
    char ok_host[47];
    struct obs_conn obs;
};

unsigned h3_alt_svc(char *buf, unsigned cap, unsigned port)
{
    int n = snprintf(buf, cap, "Alt-Svc: h3=\":%u\"; ma=86400\r\n", port);
    return n > 0 && (unsigned)n < cap ? (unsigned)n : 0;
}

/* ---- QUIC variable-length integers (RFC 9000 16) ---- */

/* The integer at p[0, n): its length, 0 when cut short. */
static size_t varint(const uint8_t *p, size_t n, uint64_t *v)
{
    if (n == 0)
        return 0;
    size_t len = (size_t)1 << (p[0] >> 6);
    if (n < len)
        return 0;
    uint64_t x = p[0] & 0x3f;
    for (size_t i = 1; i < len; i++)
        x = x << 8 | p[i];
    *v = x;
    return len;
}

static size_t varint_len(uint64_t v)
{
    return v < 64 ? 1 : v < 16384 ? 2 : v < (1u << 30) ? 4 : 8;
}

static size_t put_varint(uint8_t *o, uint64_t v)
{
    size_t len = varint_len(v);
    static const uint8_t tag[9] = {[1] = 0x00, [2] = 0x40, [4] = 0x80, [8] = 0xc0};
    for (size_t i = len; i-- > 0; v >>= 8)
        o[i] = (uint8_t)v;
    o[0] |= tag[len];
    return len;
}

/* Reads a frame's head from *p: true once whole (r->type, r->left set, *p past it), false
 * when all of [*p, end) was kept and more must come. */
static bool frame_head(struct frd *r, const uint8_t **p, const uint8_t *end)
{
    uint8_t h[16];
    size_t old = r->hn, add = (size_t)(end - *p);
    if (add > sizeof(h) - old)
        add = sizeof(h) - old;
    memcpy(h, r->h, old);
    memcpy(h + old, *p, add);
    size_t a = varint(h, old + add, &r->type), b = a ? varint(h + a, old + add - a, &r->left) : 0;
    if (!b) {
        memcpy(r->h + old, *p, add);
        r->hn = (uint8_t)(old + add);
        *p += add;
        return false;
    }
    *p += a + b - old;
    r->hn = 0;
    r->body = true;
    return true;
}

/* ---- streams ---- */

static struct h3stream *stream_find(struct h3conn *hc, int64_t sid)
{
    if (hc->cur && hc->cur->id == sid)
        return hc->cur;
    struct h3stream *st = hc->bucket[(sid >> 2) % H3_BUCKETS];
    while (st && st->id != sid)
        st = st->hnext;
    return st;
}

static bool sendable(const struct h3stream *st)
{
    return st->r && !st->fin_sent && !st->shut && !st->flow_blocked;
}

/* Into the send order at its place by arrival, when it has something it may send. */
static void enqueue(struct h3conn *hc, struct h3stream *st)
{
    if (sendable(st))
        prio_ready(&hc->sched, &st->prio);
}

static void dequeue(struct h3conn *hc, struct h3stream *st)
{
    (void)hc;
    prio_idle(&st->prio);
}

/* app_woken at second at (quic_now_s's clock) for the body deadline, unless asked already. */
static void deadline_arm(struct h3conn *hc, int64_t at)
{
    int64_t now = quic_now_s();
    if (hc->wake_s && hc->wake_s <= at)
        return;
    hc->wake_s = at;
    quic_wake_in(hc->qc, at > now ? (unsigned)(at - now) * 1000u : 0);
}

static struct h3stream *stream_new(struct h3conn *hc, int64_t sid)
{
    struct h3stream *st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    st->id = sid;
    st->last_in = quic_now_s();
    deadline_arm(hc, st->last_in + hc->w->cfg->body_timeout);
    st->hc = hc;
    prio_node_init(&st->prio, (uint64_t)sid);
    st->next = hc->streams;
    if (hc->streams)
        hc->streams->prev = st;
    hc->streams = st;
    struct h3stream **b = &hc->bucket[(sid >> 2) % H3_BUCKETS];
    st->hnext = *b;
    *b = st;
    hc->nstreams++;
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
static void held_less(struct h3worker *hw, struct h3stream *st, size_t n)
{
    hw->held_bytes -= n;
    st->held_mem -= n;
    if (st->held_mem || !(st->held_prev || hw->held_first == st))
        return;
    if (st->held_prev)
        st->held_prev->held_next = st->held_next;
    else
        hw->held_first = st->held_next;
    if (st->held_next)
        st->held_next->held_prev = st->held_prev;
    else
        hw->held_last = st->held_prev;
    st->held_prev = st->held_next = NULL;
}

static void sec_free(struct h3worker *hw, struct h3stream *st)
{
    if (st->sec)
        held_less(hw, st, st->sec_cap);
    free(st->sec);
    st->sec = NULL;
    st->sec_len = st->sec_cap = 0;
}

static void request_free(struct h3worker *hw, struct h3stream *st)
{
    if (st->q)
        held_less(hw, st, h3req_save_size(st->q));
    free(st->q);
    st->q = NULL;
}

static void stream_abort(struct h3conn *hc, struct h3stream *st, uint64_t code);

/* st's request goes unanswered (reset with code): what it holds is freed, the bytes held
 * behind a blocked section given back to flow control. */
static void stream_drop(struct h3stream *st, uint64_t code)
{
    struct h3conn *hc = st->hc;
    struct h3worker *hw = hc->w->h3;
    if (st->parked) {
        st->parked = false;
        hc->nparked--;
    }
    stream_abort(hc, st, code);
    if (st->held_len)
        quic_consume(hc->qc, st->id, st->held_len);
    held_less(hw, st, st->held_len);
    free(st->held);
    st->held = NULL;
    st->held_len = 0;
    st->held_fin = false;
    sec_free(hw, st);
    request_free(hw, st);
    quic_wake_in(hc->qc, 0); /* the reset goes out at the endpoint's timer run */
}

/* Counts n more bytes held for st's request against --head-memory, first resetting the
 * streams that have held some longest (other than st) as long as that is needed: false when
 * even that is not enough (st's request cannot be kept). As HTTP/1's partial heads (h1.c,
 * input_room): 100 streams a connection each keeping a 12 KB section cost ~1.9 MB a
 * connection for as long as the client sent PINGs. */
static bool held_room(struct h3conn *hc, struct h3stream *st, size_t n)
{
    struct h3worker *hw = hc->w->h3;
    size_t cap = hc->w->cfg->head_memory;
    while (hw->held_bytes + n > cap) {
        struct h3stream *old = hw->held_first == st ? st->held_next : hw->held_first;
        if (!old)
            return false;
        errlog_limited(&hw->log_held, ERRLOG_WARN,
                       "worker %d: unfinished HTTP/3 requests hold %zu bytes (--head-memory "
                       "%zu): resetting the oldest",
                       hc->w->id, hw->held_bytes, cap);
        stream_drop(old, H3_REQUEST_REJECTED);
    }
    if (!st->held_prev && hw->held_first != st) {
        st->held_prev = hw->held_last;
        if (hw->held_last)
            hw->held_last->held_next = st;
        else
            hw->held_first = st;
        hw->held_last = st;
    }
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
    dequeue(hc, st);
    if (hc->cur == st)
        hc->cur = NULL;
    while (st->chunks) {
        struct chunk *c = st->chunks;
        st->chunks = c->next;
        free(c);
    }
    free(st->ready);
    sec_free(hc->w->h3, st);
    request_free(hc->w->h3, st);
    held_less(hc->w->h3, st, st->held_len);
    free(st->held);
    free(st->head);
    if (st->r) {
        obs_request_done(hc->w, &hc->obs, &st->r->obs, &st->r->plan,
                         st->answered ? 0 : -ECONNRESET);
        if (st->reading) /* its file is being read: the response goes back with the job */
            st->reading->r = st->r;
        else
            serve_response_put(hc->w, st->r);
    }
    if (st->reading)
        st->reading->st = NULL;
    if (st->prev)
        st->prev->next = st->next;
    else
        hc->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    struct h3stream **b = &hc->bucket[(st->id >> 2) % H3_BUCKETS];
    while (*b != st)
        b = &(*b)->hnext;
    *b = st->hnext;
    hc->nstreams--;
    free(st);
}

/* The connection ends with code (RFC 9114 8.1): -EPROTO, for the callback to return. */
static int fatal(struct h3conn *hc, uint64_t code)
{
    quic_app_error(hc->qc, code);
    return -EPROTO;
}

/* A QPACK result (negative: its RFC 9204 6 code, or -errno) as the connection's end. */
static int qpack_fatal(struct h3conn *hc, int rv)
{
    return fatal(hc, (rv <= -QPACK_DECOMPRESSION_FAILED && rv >= -QPACK_DECODER_STREAM_ERROR) ||
                             rv == -QPACK_EXCESSIVE_LOAD
                         ? (uint64_t)-rv
                         : H3_INTERNAL_ERROR);
}

/* The stream ends both ways with code; what it still brings is dropped. */
static void stream_abort(struct h3conn *hc, struct h3stream *st, uint64_t code)
{
    quic_stream_abort(hc->qc, st->id, code);
    st->ignore = st->shut = true;
    dequeue(hc, st);
    if (st->blocked) {
        st->blocked = false;
        hc->nblocked--;
        qpack_dec_cancel(&hc->qd, st->id);
    }
}

/* ---- answering ---- */

static void read_chunk(struct offload_job *job)
{
    struct h3read *j = (struct h3read *)job;
    struct iovec iov = {j->c->data, j->len};
    j->got = preadv2(j->fd, &iov, 1, (off_t)j->off, 0);
    if (j->got < 0)
        j->got = -errno;
}

/* Hands the read of len bytes of fd at off into c to the worker's readers: 0 or -errno. */
static int read_off_loop(struct h3stream *st, struct chunk *c, int fd, uint64_t off, size_t len)
{
    struct h3worker *hw = st->hc->w->h3;
    if (!hw->readers_on) {
        if (offload_init(&hw->readers, H3_READERS, st->hc->w->wake_fd) != 0)
            return -ENOMEM;
        hw->readers_on = true;
    }
    struct h3read *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    *j = (struct h3read){.job.run = read_chunk, .st = st, .c = c, .fd = fd, .off = off, .len = len};
    if (offload_submit(&hw->readers, &j->job) != 0) {
        free(j);
        return -EAGAIN;
    }
    st->reading = j;
    return 0;
}

static void out_push(struct h3stream *st, uint8_t *base, size_t len)
{
    if (len == 0) /* an empty range would never be seen written */
        return;
    st->out[st->nout++] = (struct quic_vec){base, len};
    st->given += len;
}

/* Hands out what the plan has next, up to H3_OUTV ranges and H3_WINDOW bytes not yet
 * acknowledged: 0, or -EIO when the stream cannot go on (the file shrank, no memory). */
static int fill(struct h3stream *st)
{
    struct plan *p = &st->r->plan;
    while (st->nout < H3_OUTV && st->given - st->acked < H3_WINDOW) {
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
         * cache has it, else off the loop (the stream waits for h3_collect). */
        struct chunk *c = st->ready;
        ssize_t got = (ssize_t)st->ready_len;
        st->ready = NULL;
        if (!c && st->reading)
            break;
        if (!c) {
            size_t len = s->len < H3_CHUNK ? (size_t)s->len : H3_CHUNK;
            if (!(c = malloc(sizeof(*c) + len)))
                return -EIO;
            struct iovec iov = {c->data, len};
            got = preadv2(s->fd, &iov, 1, (off_t)s->off, RWF_NOWAIT);
            if (got < 0 && (errno == EAGAIN || errno == EOPNOTSUPP)) { /* cold, or no NOWAIT */
                if (read_off_loop(st, c, s->fd, s->off, len) != 0) {
                    free(c);
                    return -EIO;
                }
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
    if (l && p->head_len >= l->key_len && memcmp(p->segs[0].mem, l->key, l->key_len) == 0)
        return l; /* the key ends a line: a match is those very lines */
    free(hw->lead);
    hw->lead = NULL;
    size_t pos = 0, nl, vl;
    const char *name, *value;
    for (int i = 0; i < H3_LEAD_LINES; i++)
        if (!plan_field_next(p, &pos, &name, &nl, &value, &vl))
            return NULL;
    hw->lead = pre_new(p->segs[0].mem, pos);
    return hw->lead;
}

/* Whether p's field lines at pos begin with pre's text. */
static bool pre_at(const struct plan *p, size_t pos, const struct h3pre *pre)
{
    return p->head_len - pos >= pre->key_len && p->segs[0].mem[pos] == pre->key[0] &&
           memcmp(p->segs[0].mem + pos, pre->key, pre->key_len) == 0;
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
        if (run && pre_at(p, from, run) && run->enc_len <= cap - at) {
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
    enqueue(hc, st);
    return 0;
}

/* The 421 rule (RFC 9110 15.5.20) as the TLS port has it for a process-level certificate
 * among several (QUIC presents no other): the certificate must name the request's host. An
 * address never gets 421, as there (a load balancer's probe of https://ADDR/ is served); the
 * last host found named, or address, is remembered (so a client that names one host, or an
 * address, is not asked about again on every request: inet_pton alone cost ~200 instructions). */
static bool misdirected(struct h3conn *hc, const struct http_request *req)
{
    char key[VHOST_NAME_MAX + 1];
    size_t n = vhost_key(vhost_request_host(req), key);
    struct in_addr a4;
    if (n == 0 || key[0] == '[' || (n == hc->ok_host_len && memcmp(key, hc->ok_host, n) == 0))
        return false;
    if (inet_pton(AF_INET, key, &a4) != 1 && !quic_cert_covers(hc->qc, key, n))
        return true;
    if (n <= sizeof(hc->ok_host)) {
        memcpy(hc->ok_host, key, n);
        hc->ok_host_len = (uint8_t)n;
    }
    return false;
}

/* Parses st's request as HTTP/2 does and answers it through serve, or parks it while its
 * Basic credentials are verified off the loop; a malformed one is reset (RFC 9114 4.1.2). */
static void answer(struct h3conn *hc, struct h3stream *st)
{
    struct runtime *w = hc->w;
    struct http_request *req = &w->h3->req;
    int status = st->q ? h3req_parse(st->q, req) : -EPROTO;
    if (status < 0) {
        stream_abort(hc, st, H3_MESSAGE_ERROR);
        request_free(w->h3, st);
        return;
    }
    struct req_policy pol = policy_fields();
    if (!status) {
        pol.secure = true;
        pol.on_h3 = true;
        pol.peer = &hc->obs.peer;
        pol.misdirected = misdirected(hc, req);
        /* The token names the connection (h3_resume): its streams share one verification in
         * flight at a time, and each parked one asks again when it ends. */
        pol.resume = (struct resume_token){WORKER_RESUME_H3, hc->token};
    }
    struct response *r;
    if (serve_handoff(w, &hc->obs, req, status, &pol, LOGFMT_HTTP3, &r) == SERVE_PENDING) {
        st->parked = true;
        hc->nparked++;
        return;
    }
    if (!r) {
        stream_abort(hc, st, H3_INTERNAL_ERROR);
        request_free(w->h3, st);
        return;
    }
    st->r = r;
    if (respond(hc, st) < 0)
        stream_abort(hc, st, H3_INTERNAL_ERROR);
    request_free(w->h3, st); /* handed over: the response holds what it needs */
}

/* ---- request streams ---- */

static int on_field(void *arg, const struct qpack_field *f)
{
    struct h3stream *st = arg;
    struct h3req *q = &st->hc->w->h3->q;
    if (f->sidx < 0 && f->nlen == 8 && memcmp(f->name, "priority", 8) == 0 && !st->prio_set)
        prio_parse(f->value, f->vlen, &st->prio.urgency, &st->prio.incremental);
    else if (f->nlen == 14 && memcmp(f->name, "content-length", 14) == 0 &&
             !hfield_length_field(&st->cl, f->value, f->vlen))
        q->malformed = true; /* as HTTP/2 has it (RFC 9114 4.1.2) */
    h3req_field(q, f->name, f->nlen, f->value, f->vlen);
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
    bool room = held_room(hc, st, n);
    void *mem = room ? malloc(n) : NULL;
    if (!mem) {
        if (room) /* counted, not allocated */
            held_less(hw, st, n);
        stream_drop(st, H3_REQUEST_REJECTED);
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
        return qpack_fatal(hc, rv);
    st->phase = first ? P_BODY : P_TRAILERS;
    if (first && hw->q.malformed)
        stream_abort(hc, st, H3_MESSAGE_ERROR);
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
            return fatal(hc, H3_FRAME_UNEXPECTED);
    } else if (type == F_HEADERS) {
        if (st->phase == P_TRAILERS)
            return fatal(hc, H3_FRAME_UNEXPECTED);
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
            return fatal(hc, H3_FRAME_UNEXPECTED);
    }
    return 0;
}

/* Keeps p[0, n) (and the FIN) behind st's blocked section: 0 or fatal. */
static int hold(struct h3conn *hc, struct h3stream *st, const uint8_t *p, size_t n, bool fin)
{
    if (n) {
        if (st->held_len + n > H3_HELD_MAX)
            return fatal(hc, H3_EXCESSIVE_LOAD);
        if (!held_room(hc, st, n)) {
            stream_drop(st, H3_REQUEST_REJECTED); /* (n is the caller's to give back) */
            return 0;
        }
        uint8_t *b = realloc(st->held, st->held_len + n);
        if (!b)
            return fatal(hc, H3_INTERNAL_ERROR);
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
        if (!held_room(hc, st, n)) {
            qpack_dec_cancel(&hc->qd, st->id); /* it had blocked */
            stream_drop(st, H3_REQUEST_REJECTED);
            return 0;
        }
        if (!(st->sec = malloc(n ? n : 1)))
            return fatal(hc, H3_INTERNAL_ERROR);
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
    if (st->phase == P_HEADERS) /* no HEADERS: nothing to answer (RFC 9114 4.1) */
        stream_abort(hc, st, H3_REQUEST_INCOMPLETE);
    else if (!hfield_length_end(&st->cl)) /* DATA short of its content-length (4.1.2) */
        stream_drop(st, H3_MESSAGE_ERROR);
    else if (!st->r && !st->parked)
        answer(hc, st);
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
                    if (!held_room(hc, st, (size_t)st->rd.left)) {
                        stream_drop(st, H3_REQUEST_REJECTED);
                        break;
                    }
                    st->sec_cap = (uint32_t)st->rd.left;
                    if (!(st->sec = malloc(st->sec_cap ? st->sec_cap : 1)))
                        return fatal(hc, H3_INTERNAL_ERROR);
                }
                memcpy(st->sec + st->sec_len, p, take);
                st->sec_len += (uint32_t)take;
            }
        }
        p += take;
        st->rd.left -= take;
        if (st->rd.type == F_DATA && !hfield_length_data(&st->cl, take)) {
            stream_drop(st, H3_MESSAGE_ERROR); /* DATA past its content-length (4.1.2) */
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
        sec_free(hc->w->h3, st);
        if (rv < 0)
            return rv;
    }
    if (fin && !st->ignore) {
        /* RFC 9114 7.1: a frame cut short by the stream's end */
        if (st->rd.body || st->rd.hn)
            return fatal(hc, H3_FRAME_ERROR);
        request_end(hc, st);
    }
    return n;
}

/* Sections blocked on the encoder stream are tried again after its input. */
static int unblock(struct h3conn *hc)
{
    for (struct h3stream *st = hc->streams, *next; st && hc->nblocked; st = next) {
        next = st->next;
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
        sec_free(hc->w->h3, st);
        if (rv < 0)
            return rv;
        /* what came behind it, read now (and given back to flow control) */
        uint8_t *held = st->held;
        size_t len = st->held_len;
        bool fin = st->held_fin;
        held_less(hc->w->h3, st, len);
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

static int req_recv(struct h3conn *hc, int64_t sid, const uint8_t *data, size_t len, bool fin)
{
    struct h3stream *st = stream_find(hc, sid);
    if (!st) {
        if (sid >= hc->goaway_id) { /* after our GOAWAY (RFC 9114 5.2) */
            quic_stream_abort(hc->qc, sid, H3_REQUEST_REJECTED);
            quic_consume(hc->qc, sid, len);
            return 0;
        }
        if (sid >= hc->next_bidi)
            hc->next_bidi = sid + 4;
        if (!(st = stream_new(hc, sid)))
            return fatal(hc, H3_INTERNAL_ERROR);
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
            return fatal(hc, H3_FRAME_ERROR);
        p += a + b, n -= a + b;
        if (id >= 0x2 && id <= 0x5) /* HTTP/2's settings (RFC 9114 7.2.4.1) */
            return fatal(hc, H3_SETTINGS_ERROR);
        if (id < 16) {
            if (seen & 1u << id)
                return fatal(hc, H3_SETTINGS_ERROR);
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
        return fatal(hc, H3_FRAME_ERROR);
    if ((id & 3) != 0 || id / 4 >= hc->max_bidi)
        return fatal(hc, H3_ID_ERROR);
    struct h3stream *st = (int64_t)id < hc->next_bidi ? stream_find(hc, (int64_t)id) : NULL;
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
    return varint(p, n, v) == n && n ? 0 : fatal(hc, H3_FRAME_ERROR);
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
            return fatal(hc, H3_ID_ERROR);
        hc->max_push = v;
        hc->have_max_push = true;
        return 0;
    case F_CANCEL_PUSH: /* we never promised a push it could name */
        if ((rv = one_varint(hc, u->buf, u->blen, &v)) < 0)
            return rv;
        return fatal(hc, H3_ID_ERROR);
    case F_PRIORITY_UPDATE:
        return on_priority_update(hc, u->buf, u->blen);
    case F_PRIORITY_UPDATE_PUSH: /* no push exists to name */
        return fatal(hc, H3_ID_ERROR);
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
                return fatal(hc, H3_MISSING_SETTINGS);
            if ((t == F_SETTINGS && u->settings) || t == F_DATA || t == F_HEADERS ||
                t == F_PUSH_PROMISE || h2_only(t))
                return fatal(hc, H3_FRAME_UNEXPECTED);
            u->settings = true;
            u->blen = 0;
            bool parsed = t == F_SETTINGS || t == F_GOAWAY || t == F_MAX_PUSH_ID ||
                          t == F_CANCEL_PUSH || t == F_PRIORITY_UPDATE ||
                          t == F_PRIORITY_UPDATE_PUSH;
            if (!parsed)
                u->rd.type = UINT64_MAX; /* unknown or reserved: skipped */
            else if (u->rd.left > sizeof(u->buf))
                return fatal(hc, H3_EXCESSIVE_LOAD);
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
                return fatal(hc, QPACK_DECODER_STREAM_ERROR);
            if (!(b & 0x80))
                u->ins = 0xff;
            continue;
        }
        if ((b & 0xc0) != 0x40)
            return fatal(hc, QPACK_DECODER_STREAM_ERROR);
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
        *rv = fatal(hc, H3_STREAM_CREATION_ERROR);
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
            *rv = fatal(hc, H3_EXCESSIVE_LOAD);
        else
            quic_grant_uni(hc->qc);
        return NULL;
    }
    if (*own >= 0) { /* a second one (RFC 9114 6.2.1, RFC 9204 4.2) */
        *rv = fatal(hc, H3_STREAM_CREATION_ERROR);
        return NULL;
    }
    struct h3uni *u = uni_find(hc, -1); /* one of three slots, each type once */
    if (!u) {
        *rv = fatal(hc, H3_INTERNAL_ERROR);
        return NULL;
    }
    memset(u, 0, offsetof(struct h3uni, buf));
    u->id = *own = sid;
    u->type = (int)type;
    u->ins = 0xff;
    return u;
}

static int uni_recv(struct h3conn *hc, int64_t sid, const uint8_t *p, size_t n, bool fin)
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
            return qpack_fatal(hc, rv);
        rv = unblock(hc);
        break;
    case U_DECODER:
        rv = dec_input(hc, u, p, (size_t)(end - p));
        break;
    default:
        return 0;
    }
    if (rv == 0 && fin) /* RFC 9114 6.2.1, RFC 9204 4.2 */
        return fatal(hc, H3_CLOSED_CRITICAL_STREAM);
    return rv;
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

static void *app_open(void *ctx, struct quic_conn *qc)
{
    struct runtime *w = ctx;
    if (!w->h3 && !(w->h3 = calloc(1, sizeof(*w->h3))))
        return NULL;
    struct h3conn *hc = calloc(1, sizeof(*hc));
    if (!hc)
        return NULL;
    hc->w = w;
    hc->qc = qc;
    const uint8_t *addr;
    int family;
    const char *text = quic_peer(qc, &family, &addr);
    snprintf(hc->obs.peer.text, sizeof(hc->obs.peer.text), "%s", text);
    hc->obs.peer.family = (int8_t)family;
    memcpy(hc->obs.peer.addr, addr, sizeof(hc->obs.peer.addr));
    hc->obs.peer.known = true;
    hc->obs.slot = UINT32_MAX; /* no connection slot: the probes say so */
    hc->token = (uint32_t)((uintptr_t)hc >> 4) | 1;
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
    hc->next = w->h3->conns;
    if (hc->next)
        hc->next->prev = hc;
    w->h3->conns = hc;
    return hc;
}

static int app_recv(void *a, int64_t sid, const uint8_t *data, size_t len, bool fin)
{
    struct h3conn *hc = a;
    if (!data) /* a FIN alone: no pointer to count from */
        data = (const uint8_t *)"";
    if ((sid & 3) == 0)
        return req_recv(hc, sid, data, len, fin);
    if ((sid & 3) == 2)
        return uni_recv(hc, sid, data, len, fin);
    return 0; /* ours: QUIC lets nothing come on them */
}

/* Our decoder stream takes what QPACK has for it, starting its buffer again once the peer has
 * acknowledged all of it (ngtcp2 holds pointers into it until then). */
static void dec_refill(struct h3conn *hc)
{
    if (hc->dec_acked == hc->dec_len && hc->dec_sent == hc->dec_len)
        hc->dec_len = hc->dec_sent = hc->dec_acked = 0;
    hc->dec_len = (uint16_t)(hc->dec_len + qpack_dec_output(&hc->qd, hc->dec_buf + hc->dec_len,
                                                            sizeof(hc->dec_buf) - hc->dec_len));
}

static int app_pull(void *a, int64_t *sid, bool *fin, struct quic_vec *v, size_t cnt)
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
            stream_abort(hc, st, H3_INTERNAL_ERROR); /* the file shrank */
            continue;
        }
        bool done = plan_done(&st->r->plan);
        if (st->nout == 0 && !done) { /* waits for an acknowledgement, or a cold read */
            dequeue(hc, st);
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

static int app_wrote(void *a, int64_t sid, size_t n)
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
    struct h3stream *st = stream_find(hc, sid);
    if (!st)
        return 0;
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
        dequeue(hc, st);
    } else {
        prio_sent(&hc->sched, &st->prio); /* an incremental one: the next takes its turn */
    }
    return 0;
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
    struct h3stream *st = stream_find(hc, sid);
    if (!st)
        return;
    dequeue(hc, st);
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
    struct h3stream *st = stream_find(hc, sid);
    if (st) {
        st->flow_blocked = false;
        enqueue(hc, st);
    }
}

static int app_acked(void *a, int64_t sid, uint64_t n)
{
    struct h3conn *hc = a;
    if (sid == hc->dec_id) {
        hc->dec_acked = (uint16_t)(hc->dec_acked + n);
        return 0;
    }
    struct h3stream *st = stream_find(hc, sid);
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
    enqueue(hc, st); /* the window may have room again */
    return 0;
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
        return fatal(hc, H3_CLOSED_CRITICAL_STREAM);
    if ((sid & 3) == 2) {
        for (unsigned i = 0; i < H3_UNI; i++)
            if (hc->uni[i].id == sid)
                hc->uni[i].id = -1;
        return 0;
    }
    struct h3stream *st = stream_find(hc, sid);
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
        return fatal(hc, H3_CLOSED_CRITICAL_STREAM);
    if ((sid & 3) != 0)
        return 0;
    struct h3stream *st = stream_find(hc, sid);
    if (!st) { /* reset before it brought anything: it ends here too */
        quic_stream_abort(hc->qc, sid, H3_REQUEST_CANCELLED);
        return 0;
    }
    if (!st->fin_in && !st->ignore) /* the request will never be whole */
        stream_abort(hc, st, H3_REQUEST_CANCELLED);
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

static void h3_resume(struct runtime *w, uint32_t gen)
{
    for (struct h3conn *hc = w->h3 ? w->h3->conns : NULL; hc; hc = hc->next)
        if (hc->token == gen && hc->nparked)
            quic_wake_in(hc->qc, 0); /* app_woken, then the connection writes */
}

static void h3_collect(struct runtime *w)
{
    struct h3worker *hw = w->h3;
    if (!hw || !hw->readers_on || !hw->readers.count)
        return;
    struct h3read *done = (struct h3read *)offload_done(&hw->readers);
    while (done) {
        struct h3read *j = done;
        done = (struct h3read *)j->job.next;
        struct h3stream *st = j->st;
        if (!st) { /* its stream is gone */
            free(j->c);
            if (j->r)
                serve_response_put(w, j->r);
        } else if (j->got <= 0) {
            st->reading = NULL;
            free(j->c);
            stream_abort(st->hc, st, H3_INTERNAL_ERROR);
            quic_wake_in(st->hc->qc, 0);
        } else {
            st->reading = NULL;
            st->ready = j->c;
            st->ready_len = (size_t)j->got;
            enqueue(st->hc, st);
            quic_wake_in(st->hc->qc, 0); /* the endpoint's timer run writes it */
        }
        free(j);
    }
}

static void h3_worker_free(struct runtime *w)
{
    struct h3worker *hw = w->h3;
    if (!hw)
        return;
    if (hw->readers_on) { /* every stream is gone: each job's response is its own */
        offload_fini(&hw->readers);
        struct h3read *j;
        while ((j = (struct h3read *)offload_abandon(&hw->readers))) {
            free(j->c);
            if (j->r)
                serve_response_put(w, j->r);
            free(j);
        }
    }
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
    for (struct h3stream *st = hc->streams; st; st = st->next) {
        if (st->fin_in || st->ignore)
            continue;
        if (now - st->last_in >= t) {
            stream_drop(st, H3_REQUEST_CANCELLED);
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
    for (struct h3stream *st = hc->streams; st && hc->nparked; st = st->next) {
        if (!st->parked)
            continue;
        st->parked = false;
        hc->nparked--;
        answer(hc, st);
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
    while (hc->streams)
        stream_free(hc, hc->streams);
    if (hc->prev)
        hc->prev->next = hc->next;
    else
        hc->w->h3->conns = hc->next;
    if (hc->next)
        hc->next->prev = hc->prev;
    qpack_dec_fini(&hc->qd);
    free(hc);
}

const struct worker_h3_ops h3_worker_ops = {
    .resume = h3_resume,
    .collect = h3_collect,
    .fini = h3_worker_free,
};

const struct quic_app h3_app = {
    .admit = app_admit,
    .leave = app_leave,
    .open = app_open,
    .recv = app_recv,
    .pull = app_pull,
    .wrote = app_wrote,
    .blocked = app_blocked,
    .unblocked = app_unblocked,
    .acked = app_acked,
    .closed = app_closed,
    .reset = app_reset,
    .more_streams = app_more_streams,
    .drain = app_drain,
    .woken = app_woken,
    .idle = app_idle,
    .free = app_free,
};
