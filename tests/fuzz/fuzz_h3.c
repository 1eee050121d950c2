/* fuzz_h3: libFuzzer target for src/h3's HTTP/3 layer (h3.c's framing and stream rules, h3req,
 * h3/qpack) driven through its struct quic_app table as quic.c drives it: after a valid start
 * (the client's control stream with an empty SETTINGS, its encoder and decoder stream types),
 * records of bytes go to request streams 0, 4, 8, 12 and to the control, encoder and decoder
 * streams, or reset one; after each, everything the layer has to send is pulled, written and
 * acknowledged, a bounded number of times. What it sends must be readable (ASan watches), and a
 * request stream's output, once its FIN goes, must be one HEADERS frame whose section decodes
 * to :status first, then the one DATA frame the plan's body length announced, exactly.
 * serve, the QUIC transport and conn's file read are stubs here: serve answers 200 with a
 * 5-byte body (serve_error: the status, no body).
 * Input: records of [selector][length][bytes]: selector & 3: 0 a request stream (4 * (s >> 2
 * & 3)), 1 control, 2 encoder, 3 decoder; & 0x10 FIN; & 0x20 a reset of that stream (no bytes).
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; the connection is made and freed per input. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "config/options.h"
#include "conn/conn.h"
#include "conn/transport.h"
#include "http/h3/h3.h"
#include "http/h3/qpack.h"
#include "quic/quic.h"
#include "rt/guard.h"
#include "rt/obs.h"
#include "rt/offload.h"
#include "rt/runtime.h"
#include "http/serve.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_h3: %s:%d: %s\n", __FILE__, __LINE__, #cond);                    \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define OUT_MAX 4096

/* The transport's side, and what each request stream sent. */
static struct fixture {
    int64_t next_uni;
    uint64_t app_error;
    struct {
        size_t len;
        bool fin, closed;
        uint8_t b[OUT_MAX];
    } out[4];
} fx;

static const char HEAD[] = "content-length: 5\r\ncontent-type: text/plain\r\n", BODY[] = "hello";

/* ---- stubs: the QUIC transport ---- */
int quic_open_uni(struct quic_conn *qc, int64_t *sid)
{
    (void)qc;
    *sid = fx.next_uni;
    fx.next_uni += 4;
    return 0;
}
void quic_app_error(struct quic_conn *qc, uint64_t code)
{
    (void)qc;
    fx.app_error = code;
}
void quic_wake_in(struct quic_conn *qc, unsigned ms)
{
    (void)qc, (void)ms;
}
void quic_consume(struct quic_conn *qc, int64_t sid, size_t n)
{
    (void)qc, (void)sid, (void)n;
}
void quic_stream_abort(struct quic_conn *qc, int64_t sid, uint64_t code)
{
    (void)qc, (void)sid, (void)code;
}
void quic_close(struct quic_conn *qc)
{
    (void)qc; /* conn's reclaim asks it: never here */
}
void quic_grant_uni(struct quic_conn *qc)
{
    (void)qc;
}
int64_t quic_now_s(void)
{
    return 1000; /* the body deadline never passes: woken is not driven */
}
uint64_t quic_max_streams(const struct quic_conn *qc)
{
    (void)qc;
    return 100;
}
const struct sockaddr *quic_peer(const struct quic_conn *qc, socklen_t *len)
{
    static struct sockaddr_in a;
    (void)qc;
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *len = sizeof(a);
    return (const struct sockaddr *)&a;
}
/* the 421 rule is serve's (a stub here): its questions are never asked */
const struct cert_ops cert_quic;

/* ---- stubs: conn's slot (conn_attach: an HTTP/3 connection's token and peer) ---- */
struct conn *conn_attach(struct runtime *w, const struct proto_ops *proto, void *pstate)
{
    (void)w;
    struct conn *c = calloc(1, sizeof(*c));
    if (c) {
        c->state = CONN_ATTACHED;
        c->proto = proto;
        c->pstate = pstate;
        c->eng.gen = 1;
    }
    return c;
}
void conn_detach(struct runtime *w, struct conn *c)
{
    conn_idle(w, c, false);
    free(c);
}

/* ---- stubs: serve, obs, conn's file read ---- */
struct response *serve_response_get(struct runtime *w)
{
    (void)w;
    return calloc(1, sizeof(struct response));
}
void serve_response_put(struct runtime *w, struct response *r)
{
    (void)w;
    free(r);
}
static void answer_with(struct response *r, int status, const char *head, const char *body)
{
    plan_init(&r->plan);
    r->plan.status = status;
    REQUIRE(plan_mem(&r->plan, head, strlen(head)));
    r->plan.head_len = strlen(head);
    if (*body)
        REQUIRE(plan_mem(&r->plan, body, strlen(body)));
}
enum serve_result serve_request(struct runtime *w, const struct http_request *req,
                                const struct req_policy *pol, struct response *r)
{
    (void)w, (void)req, (void)pol;
    answer_with(r, 200, HEAD, BODY);
    return SERVE_DONE;
}
void serve_error(struct runtime *w, int status, bool head, enum resp_syntax syntax,
                 struct response *r)
{
    (void)w, (void)head, (void)syntax;
    answer_with(r, status, "content-length: 0\r\n", "");
}
struct fentry *serve_rep_entry(const struct response *r)
{
    (void)r;
    return NULL; /* no file cache here: every field is encoded per response */
}
size_t serve_rep_lines(const struct fentry *e, char *lines)
{
    (void)e, (void)lines;
    return 0;
}
void obs_request(struct runtime *w, struct obs_conn *o, const struct http_request *req,
                 struct obs_req *q, const struct plan *plan, bool quiet)
{
    (void)w, (void)o, (void)req, (void)q, (void)plan, (void)quiet;
}
void obs_request_done(struct runtime *w, struct obs_conn *o, struct obs_req *q,
                      const struct plan *p, int err)
{
    (void)w, (void)o, (void)q, (void)p, (void)err;
}
/* conn's file read (the engine's, for a cold chunk): memory bodies only, no file is read */
void conn_file_read(struct runtime *w, struct conn *c, int fd, void *buf, uint32_t len,
                    uint64_t off)
{
    (void)w, (void)c, (void)fd, (void)buf, (void)len, (void)off;
    abort();
}

/* --limit-conn's table (rt/guard.h): the harness's worker has no guard (w->guard NULL), so
 * h3's admit never asks; these only satisfy the link. */
bool guard_accept(struct runtime *w, const struct peer *p, bool *counted)
{
    (void)w, (void)p;
    *counted = false;
    return true;
}

void guard_closed(struct runtime *w, const struct peer *p)
{
    (void)w, (void)p;
}

bool guard_limits_conns(const struct guard *g)
{
    (void)g;
    return false;
}

/* ---- the oracle ---- */
static size_t varint(const uint8_t *p, size_t n, uint64_t *v)
{
    if (n == 0 || n < (size_t)1 << (p[0] >> 6))
        return 0;
    size_t len = (size_t)1 << (p[0] >> 6);
    uint64_t x = p[0] & 0x3f;
    for (size_t i = 1; i < len; i++)
        x = x << 8 | p[i];
    *v = x;
    return len;
}

struct seen {
    unsigned n;
    bool status_first;
};

static int on_field(void *arg, const struct qpack_field *f)
{
    struct seen *s = arg;
    if (s->n++ == 0)
        s->status_first = f->nlen == 7 && memcmp(f->name, ":status", 7) == 0 && f->vlen == 3;
    return 0;
}

/* A request stream's whole output: HEADERS, then DATA of the announced length, nothing more. */
static void check_response(const uint8_t *p, size_t n)
{
    uint64_t type, len;
    size_t a = varint(p, n, &type), b = a ? varint(p + a, n - a, &len) : 0;
    REQUIRE(b && type == 0x1 && len <= n - a - b);
    static struct qpack_dec d;
    qpack_dec_init(&d, 0, 0);
    struct seen s = {0};
    REQUIRE(qpack_dec_section(&d, 0, p + a + b, (size_t)len, 1 << 20, on_field, &s) == 0);
    qpack_dec_fini(&d);
    REQUIRE(s.n >= 1 && s.status_first);
    p += a + b + len, n -= a + b + len;
    if (n == 0)
        return;
    a = varint(p, n, &type);
    b = a ? varint(p + a, n - a, &len) : 0;
    REQUIRE(b && type == 0x0 && len == n - a - b && len == sizeof(BODY) - 1);
    REQUIRE(memcmp(p + a + b, BODY, len) == 0);
}

/* Pulls, writes and acknowledges what the layer has to send, as quic.c's conn_write would. */
static int drive(void *a)
{
    for (int round = 0; round < 64; round++) {
        int64_t sid = -1;
        bool fin = false;
        struct quic_vec v[16];
        int nv = h3_app.pull(a, &sid, &fin, v, 16);
        REQUIRE(nv >= 0 && nv <= 16);
        if (sid < 0)
            return 0;
        size_t total = 0;
        volatile uint8_t sum = 0;
        for (int i = 0; i < nv; i++) {
            for (size_t k = 0; k < v[i].len; k++)
                sum += v[i].base[k]; /* ASan: every byte handed out is live */
            if ((sid & 3) == 0 && sid < 16) {
                size_t *len = &fx.out[sid / 4].len;
                size_t room = OUT_MAX - *len, c = v[i].len < room ? v[i].len : room;
                memcpy(fx.out[sid / 4].b + *len, v[i].base, c);
                *len += c;
            }
            total += v[i].len;
        }
        REQUIRE(nv > 0 || fin); /* a stream named with nothing to say */
        if (h3_app.wrote(a, sid, total) < 0 || h3_app.acked(a, sid, total) < 0)
            return -1;
        if (fin && (sid & 3) == 0 && sid < 16) {
            REQUIRE(!fx.out[sid / 4].fin);
            fx.out[sid / 4].fin = true;
            if (fx.out[sid / 4].len < OUT_MAX)
                check_response(fx.out[sid / 4].b, fx.out[sid / 4].len);
            fx.out[sid / 4].closed = true; /* QUIC delivers nothing more on it */
            if (h3_app.closed(a, sid, 0) < 0)
                return -1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct runtime w;
    /* a --head-memory smaller than the option allows, so that a few streams' unfinished
     * requests pass it and the oldest are reset */
    static const struct config cfg = {.head_memory = 8u << 10, .body_timeout = 60};
    memset(&fx, 0, sizeof(fx));
    w.cfg = &cfg;
    fx.next_uni = 3;
    w.h3 = NULL;
    w.wake_fd = -1;
    void *a = h3_app.open(&w, (struct quic_conn *)&fx);
    REQUIRE(a);
    static const uint8_t control[] = {0x00, 0x04, 0x00}, encoder[] = {0x02}, decoder[] = {0x03};
    REQUIRE(h3_app.recv(a, 2, control, sizeof(control), false) == 0);
    REQUIRE(h3_app.recv(a, 6, encoder, sizeof(encoder), false) == 0);
    REQUIRE(h3_app.recv(a, 10, decoder, sizeof(decoder), false) == 0);
    int rv = drive(a);
    for (unsigned records = 0; rv == 0 && size >= 2 && records < 256; records++) {
        uint8_t sel = data[0];
        size_t len = data[1] < size - 2 ? data[1] : size - 2;
        data += 2, size -= 2;
        int64_t sid = (sel & 3) == 0   ? 4 * (sel >> 2 & 3)
                      : (sel & 3) == 1 ? 2
                      : (sel & 3) == 2 ? 6
                                       : 10;
        if ((sel & 3) == 0 && fx.out[sid / 4].closed) {
            data += len, size -= len;
            continue;
        }
        if (sel & 0x20) {
            rv = h3_app.reset(a, sid, 0x10c);
        } else {
            rv = h3_app.recv(a, sid, data, len, sel & 0x10);
            data += len, size -= len;
        }
        REQUIRE(rv == 0 || fx.app_error != 0); /* a fatal verdict names its code */
        if (rv == 0)
            rv = drive(a);
    }
    h3_app.free(a);
    h3_worker_ops.fini(&w);
    return 0;
}
