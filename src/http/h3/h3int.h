/* h3int: the private header of src/http/h3 (h2o's http3 internals, nginx's ngx_http_v3.h): the
 * session's structs (worker, connection, stream, the peer's unidirectional streams), the
 * constants of RFC 9114 the files share, QUIC's variable-length integers, and the functions one
 * file of the protocol calls in another. Included by the files of src/http/h3 only.
 * Must not: be included outside the protocol; h3.h is the protocol's interface.
 * Ownership: as h3.h says: the QUIC endpoint owns each connection's state (h3_app.free), a
 * stream its response from the worker's pool until the stream closes. */
#ifndef H3_H3INT_H
#define H3_H3INT_H

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
#include "conn/conn.h"
#include "conn/proto.h"
#include "conn/transport.h"
#include "http/h3/h3req.h"
#include "http/h3/qpack.h"
#include "quic/quic.h"
#include "core/peer.h"
#include "rt/errlog.h"
#include "rt/fcache.h"
#include "rt/guard.h"
#include "rt/obs.h"
#include "rt/runtime.h"
#include "http/serve.h"

#define H3_CHUNK (32u << 10)
/* What a stream may hold, in two parts (issue 42). H3_STAGED: handed to ngtcp2 and not yet
 * written into a packet, the part a slow reader (its flow control shut) can hold. H3_INFLIGHT:
 * written and not yet acknowledged; the congestion window keeps it near one bandwidth-delay
 * product, this only bounds memory whatever the window does. One 256 KiB bound over both, as
 * before, capped a single stream at 256 KiB a round trip: 48 Mbit/s at 40 ms, whatever the
 * path or the congestion controller (bench/pageload/flows.py). */
#define H3_STAGED (256u << 10)
#define H3_INFLIGHT (16u << 20)
#define H3_RESP_FIELDS 48 /* response fields sent, as HTTP/2's */
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
static inline bool h2_only(uint64_t type)
{
    return type == 0x2 || type == 0x6 || type == 0x8 || type == 0x9;
}

struct chunk {
    struct chunk *next;
    uint64_t end; /* the stream offset just past this chunk */
    uint8_t data[];
};

/* The worker's HTTP/3 state (w->h3): what its requests share. */
struct h3worker {
    struct http_request req; /* scratch for the request being parsed */
    struct h3pre *lead;      /* the last response's first H3_LEAD_LINES lines, encoded */
    /* Memory held for requests not yet answered (saved requests, field sections in parts or
     * blocked, bytes behind those): counted against --head-memory apart from HTTP/1's, by the
     * streams holding some, oldest first, which are reset to make room (issue 35.3). */
    struct list held; /* streams holding some (h3stream.held_link), oldest first */
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
    struct list link;       /* the connection's streams */
    struct h3stream *hnext; /* its bucket */
    struct prio_node prio;  /* its place in the send order (core/prio.h), while ready */
    /* reading */
    int64_t last_in;       /* when its request last brought bytes (quic_now_s): the body deadline */
    struct list held_link; /* on the worker's list of streams holding request memory */
    size_t held_mem;       /* what it holds: q, sec, held */
    struct h3req *q;       /* its request, saved (h3req_save) until answered */
    struct frd rd;
    uint8_t phase, pay;
    bool ignore;  /* reset, or refused: what comes is dropped */
    bool blocked; /* its section waits for the encoder stream (sec holds it) */
    bool fin_in;
    uint8_t *sec; /* a field section read in parts, or blocked */
    uint32_t sec_len, sec_cap;
    struct hfield_length cl; /* its content-length, against the DATA (RFC 9114 4.1.2) */
    uint8_t *held;           /* stream bytes read behind a blocked section, and the FIN */
    size_t held_len;
    bool held_fin;
    /* answering */
    bool prio_set; /* a PRIORITY_UPDATE came: the field does not count */
    bool flow_blocked, shut, fin_offered, fin_sent;
    bool parked; /* its credentials are being verified off the loop: asked again on resume */
    bool answered;
    struct response *r;             /* from the answer to the stream's close */
    uint64_t given, written, acked; /* stream bytes handed out (end of out[]), written into
                                     * packets, and acknowledged */
    unsigned nout;
    struct quic_vec out[H3_OUTV]; /* handed out from the write offset on, not yet written */
    struct chunk *chunks, *last;
    struct chunk *cold;    /* its cold chunk being read: queued on hc->cold, or hc->rd_st */
    size_t cold_len;       /* the bytes asked of it */
    struct list cold_link; /* on hc->cold while it waits its turn */
    struct chunk *ready;   /* what it read, to be handed out next */
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
    /* its slot (conn_attach): the resume token its requests wait with, its peer and counts */
    struct conn *c;
    struct list streams;
    struct h3stream *bucket[H3_BUCKETS];
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
    int64_t wake_s; /* the body deadline its wake was asked for (0: none) */
    /* Cold chunks are read by the engine on the connection's slot (conn_file_read), as TLS
     * reads its bodies: one read at a time, the streams waiting for theirs queued, first come
     * first read. The read's buffer, the slot and the file stay until the engine reports it:
     * a stream that closes meanwhile leaves its response here (its file open), and a
     * connection freed meanwhile (app_free) is dead and ends at the report (h3_read_done). */
    struct list cold;       /* streams waiting for their cold read (h3stream.cold_link) */
    struct h3stream *rd_st; /* the stream whose read is with the engine; NULL: gone, none */
    struct chunk *rd_chunk; /* the read's buffer, NULL when no read is in flight */
    struct response *rd_r;  /* a gone stream's response, put back at the read's end */
    bool dead;              /* freed by the endpoint: its qc and streams are gone */
    struct conn_cert cert;  /* over qc: the 421 rule's questions and verdict (transport.h) */
};

/* ---- QUIC variable-length integers (RFC 9000 16) ---- */

/* The integer at p[0, n): its length, 0 when cut short. */
static inline size_t varint(const uint8_t *p, size_t n, uint64_t *v)
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

static inline size_t varint_len(uint64_t v)
{
    return v < 64 ? 1 : v < 16384 ? 2 : v < (1u << 30) ? 4 : 8;
}

static inline size_t put_varint(uint8_t *o, uint64_t v)
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
static inline bool frame_head(struct frd *r, const uint8_t **p, const uint8_t *end)
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

/* ---- streams and the send order: every packet asks (inline) ---- */

/* Request stream sid of hc, or NULL (the stream last pulled first: wrote's usually). */
static inline struct h3stream *h3_stream_find(struct h3conn *hc, int64_t sid)
{
    if (hc->cur && hc->cur->id == sid)
        return hc->cur;
    struct h3stream *st = hc->bucket[(sid >> 2) % H3_BUCKETS];
    while (st && st->id != sid)
        st = st->hnext;
    return st;
}

/* Whether st has an answer it may send (not ended, reset or blocked by flow control). */
static inline bool h3_sendable(const struct h3stream *st)
{
    return st->r && !st->fin_sent && !st->shut && !st->flow_blocked;
}

/* Into the send order at its place by arrival, when it has something it may send. */
static inline void h3_enqueue(struct h3conn *hc, struct h3stream *st)
{
    if (h3_sendable(st))
        prio_ready(&hc->sched, &st->prio);
}

/* Out of the send order (it waits, or is done). */
static inline void h3_dequeue(struct h3conn *hc, struct h3stream *st)
{
    (void)hc;
    prio_idle(&st->prio);
}

/* ---- across the protocol's files ---- */

/* The quic_app table's send side (h3resp.c): the next bytes to send, what of them was written,
 * what the peer acknowledged; as quic.h's pull, wrote and acked. */
int h3_app_pull(void *a, int64_t *sid, bool *fin, struct quic_vec *v, size_t cnt);
int h3_app_wrote(void *a, int64_t sid, size_t n);
int h3_app_acked(void *a, int64_t sid, uint64_t n);

/* Parses st's request as HTTP/2 does and answers it through serve, or parks it while its
 * Basic credentials are verified off the loop; a malformed one is reset (RFC 9114 4.1.2). */
void h3_answer(struct h3conn *hc, struct h3stream *st);

/* The engine's report of the connection's cold read (proto_ops.read_done on its slot): the
 * stream's chunk goes out next, and the next stream waiting is read; a dead connection is
 * freed (h3resp.c). */
void h3_read_done(struct runtime *w, struct conn *c, int res);

/* st, which has a cold read (st->cold), closes: the read is taken off the queue, or, with
 * the engine, left to end on its connection with the stream's response (h3resp.c). */
void h3_cold_drop(struct h3conn *hc, struct h3stream *st);

/* The connection ends with code (RFC 9114 8.1): -EPROTO, for the callback to return. */
int h3_fatal(struct h3conn *hc, uint64_t code);

/* n bytes st held for its request are no longer held. */
void h3_held_less(struct h3worker *hw, struct h3stream *st, size_t n);

/* Counts n more bytes held for st's request against --head-memory, first resetting the
 * streams that have held some longest (other than st) as long as that is needed: false when
 * even that is not enough (st's request cannot be kept). As HTTP/1's partial heads (h1.c,
 * input_room): 100 streams a connection each keeping a 12 KB section cost ~1.9 MB a
 * connection for as long as the client sent PINGs. */
bool h3_held_room(struct h3conn *hc, struct h3stream *st, size_t n);

/* A QPACK result (negative: its RFC 9204 6 code, or -errno) as the connection's end. */
int h3_qpack_fatal(struct h3conn *hc, int rv);

/* Bytes of request stream sid (h3in.c): 0, or fatal. */
int h3_req_recv(struct h3conn *hc, int64_t sid, const uint8_t *data, size_t len, bool fin);

/* Frees st's saved request (h3req_save), counted out of --head-memory. */
void h3_request_free(struct h3worker *hw, struct h3stream *st);

/* Frees st's field section read in parts (or blocked), counted out of --head-memory. */
void h3_sec_free(struct h3worker *hw, struct h3stream *st);

/* The stream ends both ways with code; what it still brings is dropped. */
void h3_stream_abort(struct h3conn *hc, struct h3stream *st, uint64_t code);

/* st's request goes unanswered (reset with code): what it holds is freed, the bytes held
 * behind a blocked section given back to flow control. */
void h3_stream_drop(struct h3stream *st, uint64_t code);

/* A new request stream sid (its first bytes came), with a PRIORITY_UPDATE that came before it;
 * NULL when memory is short. */
struct h3stream *h3_stream_new(struct h3conn *hc, int64_t sid);

/* Sections blocked on the encoder stream are tried again after its input. */
int h3_unblock(struct h3conn *hc);

/* Bytes of the peer's unidirectional stream sid (h3uni.c): 0, or fatal. */
int h3_uni_recv(struct h3conn *hc, int64_t sid, const uint8_t *p, size_t n, bool fin);

#endif
