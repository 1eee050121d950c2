/* HTTP/3 over QUIC; see h3.h.
 *
 * A request is answered at the end of its stream (a body, never wanted by a static server,
 * is read and dropped as it comes), as HTTP/2 answers after END_STREAM. The response body is
 * handed to nghttp3 by read_data: memory segments as they are (the response holds them until
 * the stream closes), file ranges through H3_CHUNK-byte reads, at most H3_WINDOW bytes a
 * stream not yet acknowledged by the peer, so a slow reader holds a bounded amount. */
#include "h3/h3.h"

#include <errno.h>
#include <nghttp3/nghttp3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/http1.h"
#include "core/logfmt.h"
#include "core/policy.h"
#include "quic/quic.h"
#include "rt/obs.h"
#include "rt/runtime.h"
#include "serve.h"

#define H3_CHUNK (32u << 10)
#define H3_WINDOW (256u << 10)
#define H3_FIELDS (HTTP1_MAX_HEADERS + 1) /* one more: the 431 of a head with too many */
#define H3_RESP_FIELDS 48                 /* response fields submitted, as HTTP/2's */
#define H3_AUTH_POLL_MS 5 /* a parked request asks again whether its password is verified */

_Static_assert(sizeof(struct quic_vec) == sizeof(nghttp3_vec), "quic_vec is nghttp3_vec");

struct chunk {
    struct chunk *next;
    uint64_t end; /* the stream's body offset just past this chunk */
    uint8_t data[];
};

struct field {
    uint32_t name, value; /* offsets in head */
    uint16_t name_len, value_len;
};

struct h3stream {
    int64_t id;
    struct h3conn *hc;
    struct h3stream *prev, *next;
    struct response *r;              /* from the answer to the stream's close */
    int status;                      /* a verdict before serve: 431 for a head too large */
    int32_t method, path, authority; /* field indexes, -1 absent */
    unsigned nf;
    size_t head_len;
    uint64_t given, acked; /* body bytes handed to nghttp3, and acknowledged */
    struct chunk *chunks, *last;
    bool waiting; /* read_data said WOULDBLOCK: resume on the next acknowledgement */
    bool parked;  /* its credentials are being verified off the loop: asked again later */
    bool answered;
    struct field f[H3_FIELDS + 3];
    char head[HTTP1_MAX_HEAD];
};

struct h3conn {
    struct runtime *w;
    struct quic_conn *qc;
    nghttp3_conn *h3;
    struct h3stream *streams;
    unsigned nstreams;
    unsigned nparked;
    uint32_t token; /* its requests' resume token's generation (never 0: 0 cannot wait) */
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
    if (st->r) {
        obs_request_done(hc->w, &hc->obs, &st->r->obs, &st->r->plan,
                         st->answered ? 0 : -ECONNRESET);
        serve_response_put(hc->w, st->r);
    }
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
    memset(st, 0, offsetof(struct h3stream, f));
    st->id = sid;
    st->hc = hc;
    st->method = st->path = st->authority = -1;
    st->next = hc->streams;
    if (hc->streams)
        hc->streams->prev = st;
    hc->streams = st;
    hc->nstreams++;
    nghttp3_conn_set_stream_user_data(conn, sid, st);
    return 0;
}

static bool put(struct h3stream *st, nghttp3_vec v, uint32_t *off)
{
    if (sizeof(st->head) - st->head_len < v.len + 1)
        return false;
    *off = (uint32_t)st->head_len;
    memcpy(st->head + st->head_len, v.base, v.len);
    st->head_len += v.len;
    return true;
}

static int on_header(nghttp3_conn *conn, int64_t sid, int32_t token, nghttp3_rcbuf *name,
                     nghttp3_rcbuf *value, uint8_t flags, void *user, void *sud)
{
    struct h3stream *st = sud;
    (void)conn, (void)sid, (void)flags, (void)user;
    if (!st || st->status)
        return 0;
    nghttp3_vec n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
    int32_t *pseudo = token == NGHTTP3_QPACK_TOKEN__METHOD      ? &st->method
                      : token == NGHTTP3_QPACK_TOKEN__PATH      ? &st->path
                      : token == NGHTTP3_QPACK_TOKEN__AUTHORITY ? &st->authority
                                                                : NULL;
    if (n.len && n.base[0] == ':' && !pseudo)
        return 0; /* :scheme; nghttp3 has checked the set */
    if (st->nf == H3_FIELDS) {
        st->status = 431;
        return 0;
    }
    struct field *f = &st->f[st->nf];
    if (!put(st, n, &f->name) || !put(st, v, &f->value)) {
        st->status = 431; /* as HTTP/1's head past HTTP1_MAX_HEAD */
        return 0;
    }
    f->name_len = (uint16_t)n.len;
    f->value_len = (uint16_t)v.len;
    if (pseudo)
        *pseudo = (int32_t)st->nf;
    st->nf++;
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
        /* A file range: a chunk at a time, kept until acknowledged. The read is a page cache
         * hit for a file the cache just opened and sized, but may wait on a cold disk (the
         * TLS transport's engine read is not used here: README, "HTTP/3"). */
        size_t len = s->len < H3_CHUNK ? (size_t)s->len : H3_CHUNK;
        struct chunk *c = malloc(sizeof(*c) + len);
        if (!c)
            return NGHTTP3_ERR_CALLBACK_FAILURE;
        ssize_t got = pread(s->fd, c->data, len, (off_t)s->off);
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

/* The response's field lines as nghttp3 wants them: names in lower case (RFC 9114 4.2), kept
 * in the stream's head buffer (the request's text is no longer needed). */
static int respond(struct h3conn *hc, struct h3stream *st)
{
    struct plan *p = &st->r->plan;
    nghttp3_nv nv[H3_RESP_FIELDS + 1];
    unsigned code = (unsigned)p->status % 1000;
    char status[3] = {(char)('0' + code / 100), (char)('0' + code / 10 % 10),
                      (char)('0' + code % 10)};
    nv[0] = (nghttp3_nv){(uint8_t *)":status", (uint8_t *)status, 7, 3, NGHTTP3_NV_FLAG_NONE};
    size_t n = 1, pos = 0, name_len, value_len, used = 0;
    const char *name, *value;
    while (n < H3_RESP_FIELDS + 1 &&
           plan_field_next(p, &pos, &name, &name_len, &value, &value_len)) {
        if (used + name_len > sizeof(st->head))
            break;
        char *lower = st->head + used;
        for (size_t i = 0; i < name_len; i++)
            lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
        used += name_len;
        nv[n++] = (nghttp3_nv){(uint8_t *)lower, (uint8_t *)(uintptr_t)value, name_len, value_len,
                               NGHTTP3_NV_FLAG_NONE};
    }
    plan_advance(p, p->head_len);
    nghttp3_data_reader dr = {read_data};
    bool body = !plan_done(p);
    if (!body)
        st->answered = true;
    return nghttp3_conn_submit_response(hc->h3, st->id, nv, n, body ? &dr : NULL);
}

static const char *at(const struct h3stream *st, int32_t i, bool value, size_t *len)
{
    const struct field *f = &st->f[i];
    *len = value ? f->value_len : f->name_len;
    return st->head + (value ? f->value : f->name);
}

/* Parses st's request as HTTP/2 does and answers it through serve, or parks it while its
 * Basic credentials are verified off the loop (0); a failed submission is negative. */
static int answer(struct h3conn *hc, struct h3stream *st)
{
    struct runtime *w = hc->w;
    struct http_request *req = &w->req;
    struct http1_split sp;
    size_t ml = 0, pl = 1, al;
    const char *m = st->method >= 0 ? at(st, st->method, true, &ml) : "";
    const char *path = st->path >= 0 ? at(st, st->path, true, &pl) : "*";
    int status = http1_split_start(req, &sp, m, ml, path, pl);
    if (!status && st->authority >= 0) {
        const char *a = at(st, st->authority, true, &al);
        status = http1_split_field(req, &sp, "host", 4, a, al);
    }
    for (unsigned i = 0; i < st->nf && !status; i++) {
        if ((int32_t)i == st->method || (int32_t)i == st->path || (int32_t)i == st->authority)
            continue;
        size_t nl, vl;
        const char *name = at(st, (int32_t)i, false, &nl), *value = at(st, (int32_t)i, true, &vl);
        /* :authority stands in for host (RFC 9114 4.3.1) */
        if (nl == 4 && memcmp(name, "host", 4) == 0 && st->authority >= 0)
            continue;
        status = http1_split_field(req, &sp, name, nl, value, vl);
    }
    if (!status)
        status = http1_split_end(req, &sp);
    if (st->status)
        status = st->status;
    if (status == 505 || status == 501)
        status = 400; /* the version line is ours, as in HTTP/2 */
    req->keep_alive = true;

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
        pol.peer = &hc->obs.peer;
        /* No connection slot resumes it (conn_resume ignores an owner past the slots): a
         * request waiting for its password asks again every H3_AUTH_POLL_MS, and the
         * connection's streams share one verification in flight at a time. */
        pol.resume = (struct resume_token){UINT32_MAX, hc->token};
        if (serve_request(w, req, &pol, r) == SERVE_PENDING) {
            serve_response_put(w, r);
            st->parked = true;
            hc->nparked++;
            quic_wake_in(hc->qc, H3_AUTH_POLL_MS);
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
    if (nghttp3_conn_server_new(&hc->h3, &callbacks, &s, NULL, hc) != 0) {
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
    return hc;
}

static int app_recv(void *a, int64_t sid, const uint8_t *data, size_t len, bool fin)
{
    struct h3conn *hc = a;
    nghttp3_ssize n = nghttp3_conn_read_stream(hc->h3, sid, data, len, fin);
    if (n < 0)
        return -EPROTO;
    quic_consume(hc->qc, sid, (size_t)n);
    return 0;
}

static int app_pull(void *a, int64_t *sid, bool *fin, struct quic_vec *v, size_t cnt)
{
    struct h3conn *hc = a;
    int f = 0;
    nghttp3_ssize n = nghttp3_conn_writev_stream(hc->h3, sid, &f, (nghttp3_vec *)v, cnt);
    *fin = f != 0;
    return n < 0 ? -EPROTO : (int)n;
}

static int app_wrote(void *a, int64_t sid, size_t n)
{
    struct h3conn *hc = a;
    return nghttp3_conn_add_write_offset(hc->h3, sid, n) == 0 ? 0 : -EPROTO;
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
    return nghttp3_conn_add_ack_offset(hc->h3, sid, n) == 0 ? 0 : -EPROTO;
}

static int app_closed(void *a, int64_t sid, uint64_t code)
{
    struct h3conn *hc = a;
    int rv = nghttp3_conn_close_stream(hc->h3, sid, code ? code : NGHTTP3_H3_NO_ERROR);
    return rv == 0 || rv == NGHTTP3_ERR_STREAM_NOT_FOUND ? 0 : -EPROTO;
}

static int app_reset(void *a, int64_t sid, uint64_t code)
{
    struct h3conn *hc = a;
    (void)code;
    return nghttp3_conn_shutdown_stream_read(hc->h3, sid) == 0 ? 0 : -EPROTO;
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
    nghttp3_conn_del(hc->h3);
    free(hc);
}

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
