/* HTTP/3 over QUIC; see h3.h.
 *
 * A request is answered at the end of its stream (a body, never wanted by a static server,
 * is read and dropped as it comes), as HTTP/2 answers after END_STREAM. The response body is
 * handed to nghttp3 by read_data: memory segments as they are (the response holds them until
 * the stream closes), file ranges through H3_CHUNK-byte reads, at most H3_WINDOW bytes a
 * stream not yet acknowledged by the peer, so a slow reader holds a bounded amount. A chunk
 * is read on the loop only when the page cache has it (preadv2 RWF_NOWAIT); a cold one, or
 * any on a file system without RWF_NOWAIT, is read by a thread of the worker's (rt/offload.h)
 * while its stream waits for h3_collect, as the epoll engine reads TLS bodies. */
#include "h3/h3.h"

#include <arpa/inet.h>
#include <errno.h>
#include <nghttp3/nghttp3.h>
#include <sys/uio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/http1.h"
#include "core/logfmt.h"
#include "core/policy.h"
#include "core/vhost.h"
#include "h3/h3mem.h"
#include "h3/h3req.h"
#include "quic/quic.h"
#include "rt/obs.h"
#include "rt/offload.h"
#include "rt/runtime.h"
#include "serve.h"

#define H3_CHUNK (32u << 10)
#define H3_WINDOW (256u << 10)
#define H3_RESP_FIELDS 48 /* response fields submitted, as HTTP/2's */
#define H3_READERS 2      /* threads reading cold chunks, per worker */

_Static_assert(sizeof(struct quic_vec) == sizeof(nghttp3_vec), "quic_vec is nghttp3_vec");

struct chunk {
    struct chunk *next;
    uint64_t end; /* the stream's body offset just past this chunk */
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
    struct h3mem mem; /* nghttp3's blocks, for every connection of the worker */
    struct offload readers;
    bool readers_on;
    struct http_request req; /* scratch for the request being parsed */
};

struct h3stream {
    int64_t id;
    struct h3conn *hc;
    struct h3stream *prev, *next;
    struct response *r;    /* from the answer to the stream's close */
    uint64_t given, acked; /* body bytes handed to nghttp3, and acknowledged */
    struct chunk *chunks, *last;
    struct h3read *reading; /* a cold chunk being read off the loop, at most one */
    struct chunk *ready;    /* what it read, to be handed out next */
    size_t ready_len;
    bool waiting; /* read_data said WOULDBLOCK: resume on the next acknowledgement */
    bool parked;  /* its credentials are being verified off the loop: asked again on resume */
    bool answered;
    char code[3];   /* the response's :status, which nghttp3 reads when it encodes */
    struct h3req q; /* the request; its head buffer then holds the response's names */
};

struct h3conn {
    struct runtime *w;
    struct quic_conn *qc;
    nghttp3_conn *h3;
    struct h3stream *streams;
    struct h3conn *prev, *next; /* the worker's connections (h3worker), for h3_resume */
    unsigned nstreams;
    unsigned nparked;
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

static void stream_free(struct h3conn *hc, struct h3stream *st)
{
    if (st->parked)
        hc->nparked--;
    while (st->chunks) {
        struct chunk *c = st->chunks;
        st->chunks = c->next;
        free(c);
    }
    free(st->ready);
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
    hc->nstreams--;
    free(st);
}

/* nghttp3's callbacks. */
static int on_begin_headers(nghttp3_conn *conn, int64_t sid, void *user, void *sud)
{
    struct h3conn *hc = user;
    (void)sud;
    struct h3stream *st = malloc(sizeof(*st));
    if (!st)
        return NGHTTP3_ERR_CALLBACK_FAILURE;
    memset(st, 0, offsetof(struct h3stream, q));
    h3req_init(&st->q);
    st->id = sid;
    st->hc = hc;
    st->next = hc->streams;
    if (hc->streams)
        hc->streams->prev = st;
    hc->streams = st;
    hc->nstreams++;
    nghttp3_conn_set_stream_user_data(conn, sid, st);
    return 0;
}

static int on_header(nghttp3_conn *conn, int64_t sid, int32_t token, nghttp3_rcbuf *name,
                     nghttp3_rcbuf *value, uint8_t flags, void *user, void *sud)
{
    struct h3stream *st = sud;
    (void)conn, (void)sid, (void)token, (void)flags, (void)user;
    if (!st)
        return 0;
    nghttp3_vec n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
    h3req_field(&st->q, n.base, n.len, v.base, v.len);
    return 0;
}

static int on_data(nghttp3_conn *conn, int64_t sid, const uint8_t *data, size_t len, void *user,
                   void *sud)
{
    struct h3conn *hc = user;
    (void)conn, (void)data, (void)sud;
    quic_consume(hc->qc, sid, len); /* request bodies are dropped: the window reopens at once */
    return 0;
}

static int on_deferred_consume(nghttp3_conn *conn, int64_t sid, size_t n, void *user, void *sud)
{
    struct h3conn *hc = user;
    (void)conn, (void)sud;
    quic_consume(hc->qc, sid, n);
    return 0;
}

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

static nghttp3_ssize read_data(nghttp3_conn *conn, int64_t sid, nghttp3_vec *vec, size_t cnt,
                               uint32_t *pflags, void *user, void *sud)
{
    struct h3stream *st = sud;
    (void)conn, (void)sid, (void)user;
    struct plan *p = &st->r->plan;
    size_t n = 0;
    while (n < cnt && st->given - st->acked < H3_WINDOW) {
        struct seg *s = plan_seg(p);
        if (!s)
            break;
        if (s->mem) {
            size_t len = (size_t)s->len;
            vec[n++] = (nghttp3_vec){(uint8_t *)(uintptr_t)(s->mem + s->off), len};
            plan_advance(p, len);
            st->given += len;
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
                return NGHTTP3_ERR_CALLBACK_FAILURE;
            struct iovec iov = {c->data, len};
            got = preadv2(s->fd, &iov, 1, (off_t)s->off, RWF_NOWAIT);
            if (got < 0 && (errno == EAGAIN || errno == EOPNOTSUPP)) { /* cold, or no NOWAIT */
                if (read_off_loop(st, c, s->fd, s->off, len) != 0) {
                    free(c);
                    return NGHTTP3_ERR_CALLBACK_FAILURE;
                }
                break;
            }
        }
        if (got <= 0) {
            free(c);
            return NGHTTP3_ERR_CALLBACK_FAILURE; /* the file shrank: the stream is reset */
        }
        st->given += (uint64_t)got;
        c->end = st->given;
        c->next = NULL;
        if (st->last)
            st->last->next = c;
        else
            st->chunks = c;
        st->last = c;
        vec[n++] = (nghttp3_vec){c->data, (size_t)got};
        plan_advance(p, (uint64_t)got);
    }
    if (plan_done(p)) {
        *pflags |= NGHTTP3_DATA_FLAG_EOF;
        st->answered = true;
    } else if (n == 0) {
        st->waiting = true;
        return NGHTTP3_ERR_WOULDBLOCK;
    }
    return (nghttp3_ssize)n;
}

static int on_acked(nghttp3_conn *conn, int64_t sid, uint64_t n, void *user, void *sud)
{
    struct h3stream *st = sud;
    (void)user;
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
    if (st->waiting) {
        st->waiting = false;
        nghttp3_conn_resume_stream(conn, sid);
    }
    return 0;
}

/* Eight bytes of a name with 'A'-'Z' made 'a'-'z', all at once (a byte at a time cost ~7
 * instructions a byte, ~700 a response): a byte is upper case when it is ASCII, its 7 bits
 * reach 'A' and do not pass 'Z' (each sum sets the byte's high bit, and cannot carry out). */
static inline uint64_t lower8(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101u, high = ones * 0x80;
    uint64_t low7 = x & ~high;
    uint64_t upper = (low7 + ones * (0x80 - 'A')) & ~(low7 + ones * (0x7f - 'Z')) & ~x & high;
    return x | upper >> 2;
}

/* dst[0, n) = src[0, n) in lower case, in two words that may overlap (n of 8 to 16, as most
 * response field names are; longer ones a word at a time, shorter a byte at a time). */
static void lower_name(char *dst, const char *src, size_t n)
{
    uint64_t x;
    size_t i = 0;
    if (n < 8) {
        for (; i < n; i++)
            dst[i] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] + 32 : src[i]);
        return;
    }
    for (; i + 8 < n; i += 8) {
        memcpy(&x, src + i, 8);
        x = lower8(x);
        memcpy(dst + i, &x, 8);
    }
    memcpy(&x, src + n - 8, 8); /* the last eight, overlapping what was done */
    x = lower8(x);
    memcpy(dst + n - 8, &x, 8);
}

/* The response's field lines as nghttp3 wants them: names in lower case (RFC 9114 4.2), kept
 * in the stream's head buffer (the request's text is no longer needed). Neither names nor
 * values are copied by nghttp3 (NO_COPY): they live in the stream and its response, which
 * last until the stream closes, past the encoding at the stream's first write. */
static int respond(struct h3conn *hc, struct h3stream *st)
{
    const uint8_t keep = NGHTTP3_NV_FLAG_NO_COPY_NAME | NGHTTP3_NV_FLAG_NO_COPY_VALUE;
    struct plan *p = &st->r->plan;
    nghttp3_nv nv[H3_RESP_FIELDS + 1];
    unsigned code = (unsigned)p->status % 1000;
    st->code[0] = (char)('0' + code / 100);
    st->code[1] = (char)('0' + code / 10 % 10);
    st->code[2] = (char)('0' + code % 10);
    nv[0] = (nghttp3_nv){(uint8_t *)":status", (uint8_t *)st->code, 7, 3, keep};
    size_t n = 1, pos = 0, name_len, value_len, used = 0;
    const char *name, *value;
    while (n < H3_RESP_FIELDS + 1 &&
           plan_field_next(p, &pos, &name, &name_len, &value, &value_len)) {
        if (used + name_len > sizeof(st->q.head))
            break;
        char *lower = st->q.head + used;
        lower_name(lower, name, name_len);
        used += name_len;
        nv[n++] =
            (nghttp3_nv){(uint8_t *)lower, (uint8_t *)(uintptr_t)value, name_len, value_len, keep};
    }
    plan_advance(p, p->head_len);
    nghttp3_data_reader dr = {read_data};
    bool body = !plan_done(p);
    if (!body)
        st->answered = true;
    return nghttp3_conn_submit_response(hc->h3, st->id, nv, n, body ? &dr : NULL);
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
 * Basic credentials are verified off the loop (0); a failed submission is negative. */
static int answer(struct h3conn *hc, struct h3stream *st)
{
    struct runtime *w = hc->w;
    struct http_request *req = &w->h3->req;
    int status = h3req_parse(&st->q, req);

    struct response *r = serve_response_get(w);
    if (!r) {
        quic_stream_abort(hc->qc, st->id, NGHTTP3_H3_INTERNAL_ERROR);
        return 0;
    }
    if (status) {
        serve_error(w, status, req->method == HTTP_HEAD, RESP_FIELDS, r);
    } else {
        struct req_policy pol = policy_fields();
        pol.secure = true;
        pol.on_h3 = true;
        pol.peer = &hc->obs.peer;
        pol.misdirected = misdirected(hc, req);
        /* The token names the connection (h3_resume): its streams share one verification in
         * flight at a time, and each parked one asks again when it ends. */
        pol.resume = (struct resume_token){WORKER_RESUME_H3, hc->token};
        if (serve_request(w, req, &pol, r) == SERVE_PENDING) {
            serve_response_put(w, r);
            st->parked = true;
            hc->nparked++;
            return 0;
        }
    }
    st->r = r;
    obs_request(w, &hc->obs, req, &r->obs, &r->plan, r->note.quiet);
    r->obs.cap.minor = LOGFMT_HTTP3;
    return respond(hc, st);
}

/* The request is complete. */
static int on_end_stream(nghttp3_conn *conn, int64_t sid, void *user, void *sud)
{
    struct h3stream *st = sud;
    (void)conn, (void)sid;
    if (!st || st->r || st->parked)
        return 0;
    return answer(user, st) == 0 ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE;
}

static int on_stream_close(nghttp3_conn *conn, int64_t sid, uint64_t code, void *user, void *sud)
{
    struct h3conn *hc = user;
    struct h3stream *st = sud;
    (void)conn, (void)sid, (void)code;
    if (st)
        stream_free(hc, st);
    return 0;
}

static int on_stop_sending(nghttp3_conn *conn, int64_t sid, uint64_t code, void *user, void *sud)
{
    struct h3conn *hc = user;
    (void)conn, (void)sud;
    quic_stream_abort(hc->qc, sid, code);
    return 0;
}

static const nghttp3_callbacks callbacks = {
    .acked_stream_data = on_acked,
    .stream_close = on_stream_close,
    .recv_data = on_data,
    .deferred_consume = on_deferred_consume,
    .begin_headers = on_begin_headers,
    .recv_header = on_header,
    .stop_sending = on_stop_sending,
    .end_stream = on_end_stream,
    .reset_stream = on_stop_sending,
};

/* The quic_app table. */
static void *app_open(void *ctx, struct quic_conn *qc)
{
    struct runtime *w = ctx;
    if (!w->h3) {
        if (!(w->h3 = calloc(1, sizeof(*w->h3))))
            return NULL;
        h3mem_init(&w->h3->mem);
    }
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
    nghttp3_settings s;
    nghttp3_settings_default(&s);
    s.max_field_section_size = HTTP1_MAX_HEAD;
    s.qpack_max_dtable_capacity = 4096; /* the QPACK table a client may make us keep */
    s.qpack_blocked_streams = 16;
    int64_t ctrl, qenc, qdec;
    if (nghttp3_conn_server_new(&hc->h3, &callbacks, &s, &w->h3->mem.mem, hc) != 0) {
        free(hc);
        return NULL;
    }
    if (quic_open_uni(qc, &ctrl) != 0 || quic_open_uni(qc, &qenc) != 0 ||
        quic_open_uni(qc, &qdec) != 0 || nghttp3_conn_bind_control_stream(hc->h3, ctrl) != 0 ||
        nghttp3_conn_bind_qpack_streams(hc->h3, qenc, qdec) != 0) {
        nghttp3_conn_del(hc->h3);
        free(hc);
        return NULL;
    }
    /* The streams the transport parameters allow, or nghttp3 takes a PRIORITY_UPDATE for a
     * stream not yet opened (Chromium sends one before its first request) as naming a
     * stream that cannot exist, and ends the connection (H3_ID_ERROR). */
    nghttp3_conn_set_max_client_streams_bidi(hc->h3, quic_max_streams(qc));
    hc->next = w->h3->conns;
    if (hc->next)
        hc->next->prev = hc;
    w->h3->conns = hc;
    return hc;
}

/* nghttp3's verdict on the peer (a QPACK or frame error, RFC 9114 8.1) or on us, as the
 * HTTP/3 error code the connection closes with; -EPROTO. */
static int fatal(struct h3conn *hc, int liberr)
{
    quic_app_error(hc->qc, nghttp3_err_infer_quic_app_error_code(liberr));
    return -EPROTO;
}

static int app_recv(void *a, int64_t sid, const uint8_t *data, size_t len, bool fin)
{
    struct h3conn *hc = a;
    nghttp3_ssize n = nghttp3_conn_read_stream(hc->h3, sid, data, len, fin);
    if (n < 0)
        return fatal(hc, (int)n);
    quic_consume(hc->qc, sid, (size_t)n);
    return 0;
}

static int app_pull(void *a, int64_t *sid, bool *fin, struct quic_vec *v, size_t cnt)
{
    struct h3conn *hc = a;
    int f = 0;
    nghttp3_ssize n = nghttp3_conn_writev_stream(hc->h3, sid, &f, (nghttp3_vec *)v, cnt);
    *fin = f != 0;
    return n < 0 ? fatal(hc, (int)n) : (int)n;
}

static int app_wrote(void *a, int64_t sid, size_t n)
{
    struct h3conn *hc = a;
    int rv = nghttp3_conn_add_write_offset(hc->h3, sid, n);
    return rv == 0 ? 0 : fatal(hc, rv);
}

static void app_blocked(void *a, int64_t sid, bool shut)
{
    struct h3conn *hc = a;
    if (shut)
        nghttp3_conn_shutdown_stream_write(hc->h3, sid);
    else
        nghttp3_conn_block_stream(hc->h3, sid);
}

static void app_unblocked(void *a, int64_t sid)
{
    struct h3conn *hc = a;
    nghttp3_conn_unblock_stream(hc->h3, sid);
}

static int app_acked(void *a, int64_t sid, uint64_t n)
{
    struct h3conn *hc = a;
    int rv = nghttp3_conn_add_ack_offset(hc->h3, sid, n);
    return rv == 0 ? 0 : fatal(hc, rv);
}

static int app_closed(void *a, int64_t sid, uint64_t code)
{
    struct h3conn *hc = a;
    int rv = nghttp3_conn_close_stream(hc->h3, sid, code ? code : NGHTTP3_H3_NO_ERROR);
    return rv == 0 || rv == NGHTTP3_ERR_STREAM_NOT_FOUND ? 0 : fatal(hc, rv);
}

static int app_reset(void *a, int64_t sid, uint64_t code)
{
    struct h3conn *hc = a;
    (void)code;
    int rv = nghttp3_conn_shutdown_stream_read(hc->h3, sid);
    return rv == 0 ? 0 : fatal(hc, rv);
}

static void app_more_streams(void *a, uint64_t max)
{
    struct h3conn *hc = a;
    nghttp3_conn_set_max_client_streams_bidi(hc->h3, max);
}

static void app_drain(void *a)
{
    struct h3conn *hc = a;
    nghttp3_conn_shutdown(hc->h3); /* GOAWAY: streams opened so far are answered */
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
            quic_stream_abort(st->hc->qc, st->id, NGHTTP3_H3_INTERNAL_ERROR);
            quic_wake_in(st->hc->qc, 0);
        } else {
            st->reading = NULL;
            st->ready = j->c;
            st->ready_len = (size_t)j->got;
            st->waiting = false;
            nghttp3_conn_resume_stream(st->hc->h3, st->id);
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
    h3mem_fini(&hw->mem);
    free(hw);
    w->h3 = NULL;
}

/* Parked requests ask again: answered once their verification is done, else parked anew. */
static void app_woken(void *a)
{
    struct h3conn *hc = a;
    for (struct h3stream *st = hc->streams; st && hc->nparked; st = st->next) {
        if (!st->parked)
            continue;
        st->parked = false;
        hc->nparked--;
        if (answer(hc, st) < 0)
            quic_stream_abort(hc->qc, st->id, NGHTTP3_H3_INTERNAL_ERROR);
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
    nghttp3_conn_del(hc->h3);
    free(hc);
}

const struct worker_h3_ops h3_worker_ops = {
    .resume = h3_resume,
    .collect = h3_collect,
    .fini = h3_worker_free,
};

const struct quic_app h3_app = {
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
