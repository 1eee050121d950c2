/* Tests for h2: the server session driven by an nghttp2 client session in memory (both in this
 * process), and by hand-made frames for the attacks a real client library would not send. */
#include "http/h2/h2.h"
#include "unit.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define CSTREAMS 512

struct cstream {
    int status;
    char fields[1024]; /* "name: value\n" as received */
    size_t fields_len;
    unsigned char *body;
    size_t body_len, body_cap;
    bool closed;
    uint32_t code;
};

/* A server session, a client session and what passed between them. */
struct pair {
    struct h2_session *srv;
    nghttp2_session *cl;
    int64_t now;
    /* server side */
    int requests;
    int dones, done_errs;
    int last_status; /* status given to the request hook */
    char last_req[256];
    char last_more[256]; /* more of it: the fields the core reads */
    bool answer;         /* the hook answers at once */
    bool hold;           /* ... or keeps the request with h2_hold */
    int bufs;            /* buffers the session holds (hooks.buf_get) */
    int held_rc;
    struct plan bodies[CSTREAMS];
    const char *mem_body;
    int file_fd;
    uint64_t file_len;
    unsigned file_segs; /* file segments seen in the output */
    /* client side */
    struct cstream cs[CSTREAMS];
    bool goaway;
    uint32_t goaway_code;
    int32_t goaway_last;
};

static struct cstream *cstream(struct pair *p, int32_t id)
{
    return id > 0 && (id - 1) / 2 < CSTREAMS ? &p->cs[(id - 1) / 2] : NULL;
}

/* ---- server hooks ---- */

static void srv_request(void *user, int32_t id, const struct http_request *req, int status)
{
    struct pair *p = user;
    p->requests++;
    p->last_status = status;
    snprintf(p->last_req, sizeof(p->last_req), "%.*s %.*s host=%.*s ims=%.*s",
             (int)req->method_name.len, req->method_name.p ? req->method_name.p : "",
             (int)req->target.len, req->target.p ? req->target.p : "", (int)req->host.len,
             req->host.p ? req->host.p : "", (int)req->if_modified_since.len,
             req->if_modified_since.p ? req->if_modified_since.p : "");
    snprintf(p->last_more, sizeof(p->last_more), "n=%zu range=%.*s ae=%.*s ua=%.*s exp=%d/%d",
             req->num_headers, (int)req->range.len, req->range.p ? req->range.p : "",
             (int)req->accept_encoding.len, req->accept_encoding.p ? req->accept_encoding.p : "",
             (int)req->user_agent.len, req->user_agent.p ? req->user_agent.p : "",
             req->expect_continue, req->expect_other);
    if (p->hold) {
        p->held_rc = h2_hold(p->srv, id);
        return;
    }
    if (!p->answer)
        return;
    struct plan *b = &p->bodies[((id - 1) / 2) % CSTREAMS];
    plan_init(b);
    if (p->mem_body)
        plan_mem(b, p->mem_body, strlen(p->mem_body));
    else if (p->file_fd >= 0)
        plan_file(b, p->file_fd, 0, p->file_len);
    const struct h2_field f[] = {
        {"Content-Type", 12, "text/plain", 10},
        {"Connection", 10, "keep-alive", 10},
        {"Keep-Alive", 10, "timeout=5", 9},
        {"X-Extra", 7, "1", 1},
    };
    int rc = h2_respond(p->srv, id, status ? status : 200, f, 4, b, b);
    CHECK_INT(rc, 0);
}

static void srv_done(void *user, void *token, int err)
{
    struct pair *p = user;
    (void)token;
    p->dones++;
    if (err)
        p->done_errs++;
}

static void *srv_buf_get(void *user)
{
    struct pair *p = user;
    p->bufs++;
    return malloc(H2_BUF_SIZE);
}

static void srv_buf_put(void *user, void *buf)
{
    struct pair *p = user;
    p->bufs--;
    free(buf);
}

static const struct h2_hooks hooks = {srv_request, srv_done, srv_buf_get, srv_buf_put};

/* ---- client callbacks ---- */

static int cl_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    struct cstream *c = cstream(ud, frame->hd.stream_id);
    (void)ng, (void)flags;
    if (!c)
        return 0;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        c->status = atoi((const char *)value);
        return 0;
    }
    int n = snprintf(c->fields + c->fields_len, sizeof(c->fields) - c->fields_len, "%.*s: %.*s\n",
                     (int)namelen, name, (int)valuelen, value);
    if (n > 0 && c->fields_len + (size_t)n < sizeof(c->fields))
        c->fields_len += (size_t)n;
    return 0;
}

static int cl_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *ud)
{
    struct cstream *c = cstream(ud, id);
    (void)ng, (void)flags;
    if (!c)
        return 0;
    if (c->body_len + len > c->body_cap) {
        c->body_cap = (c->body_len + len) * 2;
        c->body = realloc(c->body, c->body_cap);
    }
    memcpy(c->body + c->body_len, data, len);
    c->body_len += len;
    return 0;
}

static int cl_frame(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    struct pair *p = ud;
    (void)ng;
    if (frame->hd.type == NGHTTP2_GOAWAY) {
        p->goaway = true;
        p->goaway_code = frame->goaway.error_code;
        p->goaway_last = frame->goaway.last_stream_id;
    }
    return 0;
}

static int cl_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    struct cstream *c = cstream(ud, id);
    (void)ng;
    if (c) {
        c->closed = true;
        c->code = code;
    }
    return 0;
}

static void pair_init(struct pair *p, const nghttp2_settings_entry *settings, size_t nsettings)
{
    memset(p, 0, sizeof(*p));
    p->answer = true;
    p->file_fd = -1;
    p->now = 1000000;
    const struct h2_opts opts = {.stall_ms = 5000};
    CHECK_INT(h2_new(&p->srv, &opts, &hooks, p), 0);
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, cl_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, cl_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, cl_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, cl_close);
    nghttp2_session_client_new(&p->cl, cb, p);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(p->cl, NGHTTP2_FLAG_NONE, settings, nsettings);
}

static void pair_free(struct pair *p)
{
    h2_free(p->srv);
    CHECK_INT(p->bufs, 0);
    nghttp2_session_del(p->cl);
    for (int i = 0; i < CSTREAMS; i++)
        free(p->cs[i].body);
}

/* Hands one output plan of the server to the client, reading file segments as an engine
 * would send them. */
static bool deliver_output(struct pair *p)
{
    struct plan *o = h2_output(p->srv);
    if (!o)
        return false;
    for (unsigned i = o->cur; i < o->nseg; i++) {
        const struct seg *g = &o->segs[i];
        if (g->mem) {
            nghttp2_session_mem_recv(p->cl, (const uint8_t *)g->mem + g->off, g->len);
            continue;
        }
        p->file_segs++;
        char buf[16384];
        for (uint64_t done = 0; done < g->len;) {
            size_t want = g->len - done < sizeof(buf) ? g->len - done : sizeof(buf);
            ssize_t n = pread(g->fd, buf, want, (off_t)(g->off + done));
            CHECK(n > 0);
            if (n <= 0)
                break;
            nghttp2_session_mem_recv(p->cl, (const uint8_t *)buf, (size_t)n);
            done += (uint64_t)n;
        }
    }
    h2_sent(p->srv, p->now);
    return true;
}

static void pump(struct pair *p)
{
    for (int round = 0; round < 100000; round++) {
        bool moved = false;
        const uint8_t *d;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(p->cl, &d)) > 0) {
            h2_recv(p->srv, d, (size_t)n, p->now);
            moved = true;
        }
        if (deliver_output(p))
            moved = true;
        if (!moved)
            return;
    }
    CHECK(!"pump did not settle");
}

static int32_t get(struct pair *p, const char *path, const nghttp2_nv *extra, size_t nextra)
{
    nghttp2_nv nv[16] = {
        {(uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
        {(uint8_t *)":authority", (uint8_t *)"example.test", 10, 12, 0},
        {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
    };
    for (size_t i = 0; i < nextra && i < 12; i++)
        nv[4 + i] = extra[i];
    return nghttp2_submit_request(p->cl, NULL, nv, 4 + nextra, NULL, NULL);
}

static bool has_field(const struct cstream *c, const char *line)
{
    return memmem(c->fields, c->fields_len, line, strlen(line)) != NULL;
}

TEST(h2_get_memory_body)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    p.mem_body = "hello";
    const nghttp2_nv ims = {(uint8_t *)"if-modified-since", (uint8_t *)"x", 17, 1, 0};
    int32_t id = get(&p, "/a?b", &ims, 1);
    pump(&p);
    struct cstream *c = cstream(&p, id);
    CHECK_INT(p.requests, 1);
    CHECK_INT(p.last_status, 0);
    CHECK(strcmp(p.last_req, "GET /a?b host=example.test ims=x") == 0);
    CHECK_INT(c->status, 200);
    CHECK_MEM(c->body, c->body_len, "hello");
    CHECK(c->closed && c->code == 0);
    CHECK(has_field(c, "content-type: text/plain\n"));
    CHECK(has_field(c, "x-extra: 1\n"));
    /* HTTP/1-only fields never go out over h2 */
    CHECK(!has_field(c, "connection"));
    CHECK(!has_field(c, "keep-alive"));
    CHECK_INT(p.dones, 1);
    CHECK_INT(p.done_errs, 0);
    CHECK_INT(h2_open_streams(p.srv), 0);
    CHECK(!h2_finished(p.srv));
    CHECK_INT(p.bufs, 0); /* idle: the buffer went back */
    pair_free(&p);
}

/* The server's SETTINGS: RFC 9218 priorities (SETTINGS_NO_RFC7540_PRIORITIES), no push, the
 * stream and header list limits. */
TEST(h2_settings_announced)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    p.mem_body = "x";
    get(&p, "/", NULL, 0);
    pump(&p);
    CHECK_INT(nghttp2_session_get_remote_settings(p.cl, NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES), 1);
    CHECK_INT(nghttp2_session_get_remote_settings(p.cl, NGHTTP2_SETTINGS_ENABLE_PUSH), 0);
    CHECK_INT(nghttp2_session_get_remote_settings(p.cl, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS),
              H2_MAX_STREAMS);
    CHECK_INT(nghttp2_session_get_remote_settings(p.cl, NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE),
              H2_MAX_HEADER_LIST);
    pair_free(&p);
}

/* A request's `priority` field orders DATA (RFC 9218): three bodies larger than one output,
 * asked for at urgencies 5, 3 and 0 in that order, end in the reverse order. */
TEST(h2_priority_field_orders_data)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    static char body[50000];
    memset(body, 'p', sizeof(body) - 1);
    p.mem_body = body;
    const nghttp2_nv u5 = {(uint8_t *)"priority", (uint8_t *)"u=5", 8, 3, 0};
    const nghttp2_nv u3 = {(uint8_t *)"priority", (uint8_t *)"u=3, i", 8, 6, 0};
    const nghttp2_nv u0 = {(uint8_t *)"priority", (uint8_t *)"u=0", 8, 3, 0};
    int32_t a = get(&p, "/5", &u5, 1), b = get(&p, "/3", &u3, 1), c = get(&p, "/0", &u0, 1);
    const uint8_t *d;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(p.cl, &d)) > 0)
        h2_recv(p.srv, d, (size_t)n, p.now);
    CHECK_INT(p.requests, 3);
    /* the first output: all of u=0 fits in 64 KiB windows over two outputs, before the rest */
    deliver_output(&p);
    CHECK(!cstream(&p, a)->closed && !cstream(&p, b)->closed);
    CHECK_INT(cstream(&p, a)->body_len, 0);
    CHECK_INT(cstream(&p, b)->body_len, 0);
    pump(&p);
    CHECK_INT(cstream(&p, c)->body_len, sizeof(body) - 1);
    CHECK_INT(cstream(&p, b)->body_len, sizeof(body) - 1);
    CHECK_INT(cstream(&p, a)->body_len, sizeof(body) - 1);
    pair_free(&p);
}

TEST(h2_many_streams_one_connection)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    p.mem_body = "0123456789";
    int32_t ids[100];
    for (int i = 0; i < 100; i++) {
        char path[16];
        snprintf(path, sizeof(path), "/f%d", i);
        ids[i] = get(&p, path, NULL, 0);
    }
    pump(&p);
    CHECK_INT(p.requests, 100);
    for (int i = 0; i < 100; i++) {
        struct cstream *c = cstream(&p, ids[i]);
        CHECK_INT(c->status, 200);
        CHECK_MEM(c->body, c->body_len, "0123456789");
    }
    CHECK_INT(p.dones, 100);
    pair_free(&p);
}

/* An idle session gives back what a burst left (h2_trim) and serves the next burst as well;
 * with streams open it keeps everything. */
TEST(h2_trim_between_bursts)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    p.mem_body = "burst";
    for (int round = 0; round < 3; round++) {
        int32_t ids[60];
        for (int i = 0; i < 60; i++)
            ids[i] = get(&p, "/b", NULL, 0);
        h2_trim(p.srv); /* requests not even read yet: nothing open, nothing to give */
        pump(&p);
        for (int i = 0; i < 60; i++)
            CHECK_MEM(cstream(&p, ids[i])->body, cstream(&p, ids[i])->body_len, "burst");
        h2_trim(p.srv);
    }
    CHECK_INT(p.dones, 180);
    CHECK_INT(p.done_errs, 0);
    pair_free(&p);
}

/* Stream records are pooled and the HPACK tables bounded: once the tables are full, each round
 * of streams leaves the session's memory where the previous one left it. */
TEST(h2_memory_recycled_between_rounds)
{
    size_t after[6];
    struct pair p;
    pair_init(&p, NULL, 0);
    p.mem_body = "0123456789";
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < 50; i++)
            get(&p, "/same", NULL, 0);
        pump(&p); /* the client reads everything: all 50 streams close */
        after[round] = h2_mem(p.srv);
    }
    CHECK_INT(p.requests, 300);
    CHECK_INT(p.dones, 300);
    /* the first rounds grow the HPACK tables to what the fields need; from then on every
     * stream record freed is taken again */
    CHECK(after[4] == after[3]);
    CHECK(after[5] == after[3]);
    pair_free(&p);
}

/* 3 MiB from a file through the client's default 64 KiB windows: flow control, WINDOW_UPDATE,
 * and file bodies leaving as file segments (zero-copy), byte-exact. */
TEST(h2_file_body_flow_control)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    char tmpl[] = "/tmp/h2testXXXXXX";
    int fd = mkstemp(tmpl);
    CHECK(fd >= 0);
    unlink(tmpl);
    size_t len = 3u << 20;
    unsigned char *data = malloc(len);
    uint32_t x = 12345;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245 + 12345;
        data[i] = (unsigned char)(x >> 16);
    }
    CHECK(write(fd, data, len) == (ssize_t)len);
    p.file_fd = fd;
    p.file_len = len;
    int32_t id = get(&p, "/big", NULL, 0);
    pump(&p);
    struct cstream *c = cstream(&p, id);
    CHECK_INT(c->status, 200);
    CHECK_INT(c->body_len, len);
    CHECK(c->body_len == len && memcmp(c->body, data, len) == 0);
    CHECK(p.file_segs >= len / 16384);
    CHECK_INT(p.dones, 1);
    CHECK_INT(p.done_errs, 0);
    free(data);
    close(fd);
    pair_free(&p);
}

/* A request the hook leaves unanswered, and a plan of field lines `head` and the body "abc" with
 * `status`, to answer it later. */
static int32_t unanswered(struct pair *p, const char *path, struct plan *plan, const char *head,
                          int status)
{
    pair_init(p, NULL, 0);
    p->answer = false;
    int32_t id = get(p, path, NULL, 0);
    pump(p);
    CHECK_INT(p->requests, 1);
    plan_init(plan);
    plan_mem(plan, head, strlen(head));
    plan_mem(plan, "abc", 3);
    plan->head_len = strlen(head);
    plan->status = status;
    return id;
}

TEST(h2_respond_fields_plan)
{
    struct pair p;
    struct plan plan;
    int32_t id = unanswered(&p, "/missing", &plan,
                            "Server: ringhttpd\r\nContent-Type: text/html\r\n"
                            "Content-Length: 3\r\n",
                            404);
    CHECK_INT(h2_respond_plan(p.srv, id, &plan, NULL, &plan), 0);
    pump(&p);
    struct cstream *c = cstream(&p, id);
    CHECK_INT(c->status, 404);
    CHECK(has_field(c, "server: ringhttpd\n"));
    CHECK(has_field(c, "content-type: text/html\n"));
    CHECK(has_field(c, "content-length: 3\n"));
    CHECK_MEM(c->body, c->body_len, "abc");
    CHECK_INT(p.dones, 1);
    /* a stream already answered, or never opened, cannot be answered */
    CHECK_INT(h2_respond(p.srv, id, 200, NULL, 0, NULL, NULL), -ENOENT);
    CHECK_INT(h2_respond(p.srv, 99, 200, NULL, 0, NULL, NULL), -ENOENT);
    pair_free(&p);
}

/* A 103 before the response (issue 28): its own HEADERS block, read by nghttp2's client as an
 * interim response (the final status wins, both blocks' fields arrive); refused for a status
 * that is not 1xx, and once the stream is answered. */
TEST(h2_interim_before_the_response)
{
    struct pair p;
    struct plan plan;
    int32_t id = unanswered(&p, "/", &plan,
                            "Content-Type: text/html\r\nLink: </a.css>; rel=preload\r\n", 200);
    static const char hint[] = "Link: </a.css>; rel=preload\r\n";
    CHECK_INT(h2_interim(p.srv, id, 200, hint, sizeof(hint) - 1), -EINVAL);
    CHECK_INT(h2_interim(p.srv, id, 103, hint, sizeof(hint) - 1), 0);
    CHECK_INT(h2_respond_plan(p.srv, id, &plan, NULL, &plan), 0);
    CHECK_INT(h2_interim(p.srv, id, 103, hint, sizeof(hint) - 1), -ENOENT);
    pump(&p);
    struct cstream *c = cstream(&p, id);
    CHECK_INT(c->status, 200);
    CHECK_MEM(c->fields, c->fields_len,
              "link: </a.css>; rel=preload\ncontent-type: text/html\n"
              "link: </a.css>; rel=preload\n");
    CHECK_MEM(c->body, c->body_len, "abc");
    CHECK_INT(p.dones, 1);
    pair_free(&p);
}

/* Fields kept pre-encoded (a cached file's, h2_pre_new; the session's own Server and Date
 * lines) go out as the plan's lines say on every response of a connection: as literals the
 * first time, as indexes after, again as literals when the Date changes, and not at all where
 * the plan does not hold their text (another file's ETag): libnghttp2's inflater decodes each. */
TEST(h2_respond_plan_pre_encoded)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    p.answer = false;
    static const char rep[] = "Last-Modified: Thu, 26 Nov 2026 14:05:10 GMT\r\nETag: \"1-2-3\"\r\n"
                              "Accept-Ranges: bytes\r\nContent-Type: text/css\r\n"
                              "Content-Length: 3\r\n";
    static const char other[] =
        "Last-Modified: Thu, 26 Nov 2026 14:05:10 GMT\r\nETag: \"1-2-4\"\r\n"
        "Accept-Ranges: bytes\r\nContent-Type: text/css\r\n"
        "Content-Length: 3\r\n";
    struct hpack_pre *pre = h2_pre_new(rep, sizeof(rep) - 1, 1);
    struct hpack_pre *pre2 = h2_pre_new(other, sizeof(other) - 1, 2);
    CHECK(pre && pre2);
    CHECK(!h2_pre_new("Connection: close\r\n", 19, 3)); /* HTTP/1-only: never kept */
    CHECK(!h2_pre_new("no field line", 13, 3));
    static const int second[] = {0, 0, 0, 1, 1, 2, 2, 2, 3, 3};
    for (int k = 0; k < 10; k++) {
        int32_t id = get(&p, "/a.css", NULL, 0);
        pump(&p);
        char head[512];
        /* k 6: the other file's ETag in the plan, this file's pre given: not sent */
        int n = snprintf(head, sizeof(head), "Server: ringhttpd\r\nDate: D%d\r\n%sX-After: a\r\n",
                         second[k], k == 6 ? other : rep);
        struct plan plan;
        plan_init(&plan);
        plan_mem(&plan, head, (size_t)n);
        plan_mem(&plan, "abc", 3);
        plan.head_len = (size_t)n;
        plan.status = 200;
        CHECK_INT(h2_respond_plan(p.srv, id, &plan, k == 7 ? pre2 : pre, &plan), 0);
        pump(&p);
        struct cstream *c = cstream(&p, id);
        CHECK_INT(c->status, 200);
        char want[512];
        snprintf(want, sizeof(want),
                 "server: ringhttpd\ndate: D%d\nlast-modified: Thu, 26 Nov 2026 14:05:10 GMT\n"
                 "etag: \"1-2-%d\"\naccept-ranges: bytes\ncontent-type: text/css\n"
                 "content-length: 3\nx-after: a\n",
                 second[k], k == 6 ? 4 : 3);
        CHECK_MEM(c->fields, c->fields_len, want);
        CHECK_MEM(c->body, c->body_len, "abc");
    }
    CHECK_INT(p.dones, 10);
    pair_free(&p);
    free(pre);
    free(pre2);
}

/* Names go out in lower case whatever their spelling, those h2.c knows (not copied) and the
 * others (copied by nghttp2) alike; a name that is only like a known one stays itself. */
TEST(h2_field_names_lower_cased)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    p.answer = false;
    int32_t id = get(&p, "/", NULL, 0);
    pump(&p);
    const struct h2_field f[] = {
        {"ETag", 4, "\"x\"", 3},
        {"DATE", 4, "d", 1},
        {"Vary", 4, "Accept", 6},
        {"SeRvEr", 6, "s", 1},
        {"Last-Modified", 13, "lm", 2},
        {"ACCEPT-RANGES", 13, "bytes", 5},
        {"Cache-Control", 13, "cc", 2},
        {"Content-Length", 14, "0", 1},
        {"Content-Typf", 12, "t", 1},
        {"X-Thing-Nine", 12, "9", 1},
        {"Etah", 4, "e", 1},
        {"Last_Modified", 13, "u", 1},
    };
    CHECK_INT(h2_respond(p.srv, id, 200, f, sizeof(f) / sizeof(f[0]), NULL, NULL), 0);
    pump(&p);
    struct cstream *c = cstream(&p, id);
    CHECK_INT(c->status, 200);
    CHECK_MEM(c->fields, c->fields_len,
              "etag: \"x\"\ndate: d\nvary: Accept\nserver: s\nlast-modified: lm\n"
              "accept-ranges: bytes\ncache-control: cc\ncontent-length: 0\ncontent-typf: t\n"
              "x-thing-nine: 9\netah: e\nlast_modified: u\n");
    pair_free(&p);
}

TEST(h2_refused_stream)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    p.answer = false;
    int32_t id = get(&p, "/", NULL, 0);
    pump(&p);
    h2_reset(p.srv, id);
    pump(&p);
    CHECK(cstream(&p, id)->closed);
    CHECK_INT(cstream(&p, id)->code, NGHTTP2_REFUSED_STREAM);
    CHECK_INT(h2_open_streams(p.srv), 0);
    CHECK_INT(p.dones, 0);
    pair_free(&p);
}

/* Bodies larger than one output: a client resetting their streams while an output is in
 * flight releases the responses only once that output was sent (it still reads the bodies),
 * and what follows never reads the released bodies. */
TEST(h2_reset_while_frame_waits)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    static char body[40001]; /* more than one output holds */
    memset(body, 'x', sizeof(body) - 1);
    p.mem_body = body;
    int32_t ids[3];
    for (int i = 0; i < 3; i++)
        ids[i] = get(&p, "/", NULL, 0);
    const uint8_t *d;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(p.cl, &d)) > 0)
        h2_recv(p.srv, d, (size_t)n, p.now);
    CHECK_INT(p.requests, 3);
    struct plan *o = h2_output(p.srv); /* full: the rest waits */
    CHECK(o != NULL);
    for (int i = 0; i < 3; i++)
        nghttp2_submit_rst_stream(p.cl, NGHTTP2_FLAG_NONE, ids[i], NGHTTP2_CANCEL);
    while ((n = nghttp2_session_mem_send(p.cl, &d)) > 0)
        h2_recv(p.srv, d, (size_t)n, p.now);
    CHECK_INT(p.dones, 0); /* the output in flight still reads the bodies */
    deliver_output(&p);    /* the same plan, now sent */
    CHECK_INT(p.dones, 3);
    pump(&p); /* the released bodies are not read */
    CHECK_INT(p.done_errs, 3);
    CHECK_INT(h2_open_streams(p.srv), 0);
    /* the connection goes on */
    p.mem_body = "after";
    int32_t id = get(&p, "/", NULL, 0);
    pump(&p);
    CHECK_MEM(cstream(&p, id)->body, cstream(&p, id)->body_len, "after");
    pair_free(&p);
}

/* A request put aside (a password check off the loop) is kept by the session and delivered
 * again, parsed as the first time; a stream reset meanwhile takes its head with it. */
TEST(h2_hold_and_replay)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    p.mem_body = "later";
    p.hold = true;
    const nghttp2_nv ims = {(uint8_t *)"if-modified-since", (uint8_t *)"y", 17, 1, 0};
    int32_t a = get(&p, "/held?q", &ims, 1), b = get(&p, "/gone", NULL, 0);
    pump(&p);
    CHECK_INT(p.requests, 2);
    CHECK_INT(p.held_rc, 0);
    CHECK_INT(h2_open_streams(p.srv), 2);
    CHECK_INT(h2_hold(p.srv, a), -ENOENT); /* only from inside the request hook */
    nghttp2_submit_rst_stream(p.cl, NGHTTP2_FLAG_NONE, b, NGHTTP2_CANCEL);
    pump(&p);
    p.hold = false;
    p.last_req[0] = '\0';
    CHECK_INT(h2_replay(p.srv, b), -ENOENT);
    CHECK_INT(h2_replay(p.srv, a), 0);
    CHECK_INT(p.requests, 3);
    CHECK(strcmp(p.last_req, "GET /held?q host=example.test ims=y") == 0);
    CHECK_INT(h2_replay(p.srv, a), -ENOENT); /* delivered: nothing held any more */
    pump(&p);
    CHECK_INT(cstream(&p, a)->status, 200);
    CHECK_MEM(cstream(&p, a)->body, cstream(&p, a)->body_len, "later");
    CHECK_INT(cstream(&p, b)->status, 0);
    CHECK_INT(p.dones, 1);
    /* held again at the end of the session: h2_free releases it */
    p.hold = true;
    get(&p, "/left", NULL, 0);
    pump(&p);
    CHECK_INT(p.held_rc, 0);
    pair_free(&p);
}

/* A request with a body is answered when its body has ended, the body dropped. */
static ssize_t post_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)ng, (void)id, (void)ud;
    size_t *left = src->ptr;
    size_t n = *left < length ? *left : length;
    memset(buf, 'x', n);
    *left -= n;
    if (*left == 0)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

TEST(h2_request_with_body)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    size_t left = 200000; /* past the server's 64 KiB receive windows */
    nghttp2_nv nv[] = {
        {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
        {(uint8_t *)":authority", (uint8_t *)"h", 10, 1, 0},
        {(uint8_t *)":path", (uint8_t *)"/form", 5, 5, 0},
    };
    nghttp2_data_provider prd = {.source.ptr = &left, .read_callback = post_read};
    int32_t id = nghttp2_submit_request(p.cl, NULL, nv, 4, &prd, NULL);
    pump(&p);
    CHECK_INT(left, 0);
    CHECK_INT(p.requests, 1);
    CHECK(strncmp(p.last_req, "POST /form host=h", 17) == 0);
    CHECK_INT(cstream(&p, id)->status, 200);
    CHECK(cstream(&p, id)->closed);
    pair_free(&p);
}

/* The fields reach the core as the HTTP/1.1 head they stand for would (http1_split): host from
 * :authority (a host field beside it dropped), Expect: 100-continue dropped, the core's verdicts
 * on the target (414, 400 for a byte a request line cannot carry) and on other Expect values. */
TEST(h2_request_fields_reach_the_core)
{
    struct pair p;
    pair_init(&p, NULL, 0);
#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, 0                            \
    }
    const nghttp2_nv extra[] = {
        NV("range", "bytes=0-1"),     NV("host", "other.test"), NV("accept-encoding", "br, gzip"),
        NV("expect", "100-continue"), NV("user-agent", "t/1"),  NV("x-foo", ""),
    };
    int32_t id = get(&p, "/f?x=1", extra, sizeof(extra) / sizeof(extra[0]));
    pump(&p);
    CHECK_INT(p.last_status, 0);
    CHECK(strcmp(p.last_req, "GET /f?x=1 host=example.test ims=") == 0);
    CHECK(strcmp(p.last_more, "n=5 range=bytes=0-1 ae=br, gzip ua=t/1 exp=0/0") == 0);
    CHECK_INT(cstream(&p, id)->status, 200);

    const nghttp2_nv expect[] = {NV("expect", "nope")};
    get(&p, "/e", expect, 1);
    pump(&p);
    CHECK_INT(p.last_status, 0);
    CHECK(strcmp(p.last_more, "n=2 range= ae= ua= exp=0/1") == 0);
#undef NV

    static char long_path[HTTP1_MAX_TARGET + 2];
    memset(long_path, 'a', sizeof(long_path) - 1);
    long_path[0] = '/';
    id = get(&p, long_path, NULL, 0);
    pump(&p);
    CHECK_INT(p.last_status, 414);
    CHECK_INT(cstream(&p, id)->status, 414);

    id = get(&p, "/caf\xc3\xa9", NULL, 0); /* nghttp2 lets obs-text through; a target is ASCII */
    pump(&p);
    CHECK_INT(p.last_status, 400);
    CHECK_INT(cstream(&p, id)->status, 400);

    id = get(&p, "/after", NULL, 0);
    pump(&p);
    CHECK_INT(p.last_status, 0);
    CHECK_INT(cstream(&p, id)->status, 200);
    pair_free(&p);
}

TEST(h2_oversized_head_is_431)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    static char big[12000];
    memset(big, 'a', sizeof(big));
    nghttp2_nv nv[2] = {
        {(uint8_t *)"x-a", (uint8_t *)big, 3, sizeof(big), 0},
        {(uint8_t *)"x-b", (uint8_t *)big, 3, sizeof(big), 0},
    };
    int32_t id = get(&p, "/", nv, 2);
    pump(&p);
    CHECK_INT(p.requests, 1);
    CHECK_INT(p.last_status, 431);
    CHECK_INT(cstream(&p, id)->status, 431);
    /* the connection goes on */
    int32_t id2 = get(&p, "/next", NULL, 0);
    pump(&p);
    CHECK_INT(cstream(&p, id2)->status, 200);
    CHECK_INT(p.last_status, 0);
    pair_free(&p);
}

TEST(h2_missing_authority_reset)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    nghttp2_nv nv[] = {
        {(uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
        {(uint8_t *)":path", (uint8_t *)"/", 5, 1, 0},
    };
    int32_t id = nghttp2_submit_request(p.cl, NULL, nv, 3, NULL, NULL);
    pump(&p);
    /* nghttp2 finds it malformed (RFC 9113 8.3.1 wants :authority or host): the stream is
     * reset, the request never reaches the server */
    CHECK_INT(p.requests, 0);
    CHECK(cstream(&p, id)->closed);
    CHECK_INT(cstream(&p, id)->code, NGHTTP2_PROTOCOL_ERROR);
    pair_free(&p);
}

TEST(h2_graceful_goaway_finishes_streams)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    p.answer = false;
    int32_t id = get(&p, "/slow", NULL, 0);
    pump(&p);
    h2_goaway(p.srv);
    pump(&p);
    CHECK(p.goaway);
    CHECK_INT(p.goaway_code, NGHTTP2_NO_ERROR);
    CHECK_INT(p.goaway_last, id);
    CHECK(!h2_finished(p.srv)); /* the stream in flight is still to be answered */
    struct plan b;
    plan_init(&b);
    plan_mem(&b, "late", 4);
    CHECK_INT(h2_respond(p.srv, id, 200, NULL, 0, &b, &b), 0);
    pump(&p);
    CHECK_MEM(cstream(&p, id)->body, cstream(&p, id)->body_len, "late");
    CHECK(h2_finished(p.srv));
    CHECK_INT(h2_end(p.srv), H2_END_DONE);
    pair_free(&p);
}

/* A client that opens its window to nothing: the response holds its body until the stall time
 * has passed, then the session ends with GOAWAY and the body is released. */
TEST(h2_zero_window_stall_ends)
{
    const nghttp2_settings_entry zero[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0}};
    struct pair p;
    pair_init(&p, zero, 1);
    p.mem_body = "never sent";
    int32_t id = get(&p, "/", NULL, 0);
    pump(&p);
    CHECK_INT(cstream(&p, id)->status, 200);
    CHECK_INT(cstream(&p, id)->body_len, 0);
    CHECK_INT(h2_open_streams(p.srv), 1);
    CHECK(!h2_check(p.srv, p.now + 1000));
    CHECK(h2_check(p.srv, p.now + 6000));
    CHECK_INT(h2_end(p.srv), H2_END_STALL);
    pump(&p);
    CHECK(p.goaway);
    CHECK(h2_finished(p.srv));
    CHECK_INT(p.dones, 0);
    h2_free(p.srv);
    p.srv = NULL;
    CHECK_INT(p.dones, 1);
    CHECK_INT(p.done_errs, 1);
    pair_free(&p);
}

/* ---- attacks, as raw frames ---- */

struct raw {
    uint8_t b[300000];
    size_t len;
};

static void frame(struct raw *r, uint8_t type, uint8_t flags, uint32_t id, const void *payload,
                  size_t len)
{
    uint8_t *h = r->b + r->len;
    h[0] = (uint8_t)(len >> 16), h[1] = (uint8_t)(len >> 8), h[2] = (uint8_t)len;
    h[3] = type, h[4] = flags;
    h[5] = (uint8_t)(id >> 24), h[6] = (uint8_t)(id >> 16), h[7] = (uint8_t)(id >> 8);
    h[8] = (uint8_t)id;
    if (len)
        memcpy(h + 9, payload, len);
    r->len += 9 + len;
}

static void raw_start(struct raw *r)
{
    r->len = 0;
    memcpy(r->b, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    r->len = 24;
    frame(r, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
}

/* A minimal request header block: GET / on authority "a" (HPACK static table entries). */
static const uint8_t get_block[] = {0x82, 0x86, 0x84, 0x41, 0x01, 'a'};

/* Feeds r to a fresh session (in chunks, as a socket would) and returns how it ended, with
 * the GOAWAY code the server sent (or -1). */
static enum h2_end attack(struct raw *r, uint32_t *goaway, size_t *mem_peak)
{
    struct pair p;
    pair_init(&p, NULL, 0);
    *mem_peak = 0;
    for (size_t at = 0; at < r->len;) {
        size_t n = r->len - at < 4096 ? r->len - at : 4096;
        int rc = h2_recv(p.srv, r->b + at, n, p.now);
        if (h2_mem(p.srv) > *mem_peak)
            *mem_peak = h2_mem(p.srv);
        at += n;
        /* a client that does not read what the server sends (the ACKs pile up) */
        if (rc < 0)
            break;
    }
    /* What the server sends now ends with its GOAWAY. */
    *goaway = (uint32_t)-1;
    struct plan *o;
    while ((o = h2_output(p.srv))) {
        for (unsigned i = 0; i < o->nseg; i++) {
            const uint8_t *m = (const uint8_t *)o->segs[i].mem;
            if (!m)
                continue;
            for (size_t at = 0; at + 9 <= o->segs[i].len;) {
                size_t flen = (size_t)m[at] << 16 | (size_t)m[at + 1] << 8 | m[at + 2];
                if (m[at + 3] == NGHTTP2_GOAWAY && at + 17 <= o->segs[i].len)
                    *goaway = (uint32_t)m[at + 13] << 24 | (uint32_t)m[at + 14] << 16 |
                              (uint32_t)m[at + 15] << 8 | m[at + 16];
                at += 9 + flen;
            }
        }
        h2_sent(p.srv, p.now);
    }
    CHECK(h2_finished(p.srv));
    enum h2_end end = h2_end(p.srv);
    pair_free(&p);
    return end;
}

static struct raw r;

TEST(h2_rapid_reset_goaway)
{
    raw_start(&r);
    static const uint8_t cancel[4] = {0, 0, 0, 8};
    for (uint32_t id = 1; id < 2 * 300; id += 2) {
        frame(&r, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, id,
              get_block, sizeof(get_block));
        frame(&r, NGHTTP2_RST_STREAM, 0, id, cancel, 4);
    }
    uint32_t code;
    size_t peak;
    CHECK_INT(attack(&r, &code, &peak), H2_END_FLOOD);
    CHECK_INT(code, NGHTTP2_ENHANCE_YOUR_CALM);
}

/* Resets of a stream already closed are not the attack (a cancelling client resets again for
 * every DATA frame still in flight): they must not end the connection. */
TEST(h2_resets_of_a_closed_stream_not_counted)
{
    raw_start(&r);
    static const uint8_t cancel[4] = {0, 0, 0, 8};
    frame(&r, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 1, get_block,
          sizeof(get_block));
    for (int i = 0; i < 300; i++)
        frame(&r, NGHTTP2_RST_STREAM, 0, 1, cancel, 4);
    struct pair p;
    pair_init(&p, NULL, 0);
    CHECK_INT(h2_recv(p.srv, r.b, r.len, p.now), 0);
    CHECK(!h2_finished(p.srv));
    CHECK_INT(h2_end(p.srv), H2_END_NONE);
    pair_free(&p);
}

TEST(h2_continuation_flood_goaway)
{
    raw_start(&r);
    frame(&r, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_STREAM, 1, get_block, sizeof(get_block));
    static const uint8_t lit[] = {0x40, 0x01, 'x', 0x01, 'y'}; /* x: y, indexed */
    for (int i = 0; i < 2000; i++)
        frame(&r, NGHTTP2_CONTINUATION, 0, 1, lit, sizeof(lit));
    uint32_t code;
    size_t peak;
    enum h2_end e = attack(&r, &code, &peak);
    CHECK_INT(e, H2_END_FLOOD);
    CHECK_INT(code, NGHTTP2_ENHANCE_YOUR_CALM);
    CHECK(peak < 256 * 1024);
}

TEST(h2_settings_and_ping_floods_goaway)
{
    raw_start(&r);
    for (int i = 0; i < 1000; i++)
        frame(&r, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
    uint32_t code;
    size_t peak;
    CHECK_INT(attack(&r, &code, &peak), H2_END_FLOOD);
    CHECK_INT(code, NGHTTP2_ENHANCE_YOUR_CALM);

    raw_start(&r);
    static const uint8_t opaque[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int i = 0; i < 1000; i++)
        frame(&r, NGHTTP2_PING, 0, 0, opaque, 8);
    CHECK_INT(attack(&r, &code, &peak), H2_END_FLOOD);
    CHECK_INT(code, NGHTTP2_ENHANCE_YOUR_CALM);
    CHECK(peak < 256 * 1024);
}

TEST(h2_empty_data_flood_goaway)
{
    raw_start(&r);
    static const uint8_t post[] = {0x83, 0x86, 0x84, 0x41, 0x01, 'a'}; /* POST / */
    frame(&r, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, post, sizeof(post));
    for (int i = 0; i < 1000; i++)
        frame(&r, NGHTTP2_DATA, 0, 1, NULL, 0);
    uint32_t code;
    size_t peak;
    CHECK_INT(attack(&r, &code, &peak), H2_END_FLOOD);
    CHECK_INT(code, NGHTTP2_ENHANCE_YOUR_CALM);
}

/* HPACK bomb: one 4 KiB field put into the dynamic table, then named again with one byte each
 * time: a 16 KiB frame would decode to 64 MiB. */
TEST(h2_hpack_bomb_goaway)
{
    raw_start(&r);
    static uint8_t blk[16384];
    size_t n = 0;
    memcpy(blk, get_block, sizeof(get_block));
    n += sizeof(get_block);
    blk[n++] = 0x40; /* literal with incremental indexing, new name */
    blk[n++] = 0x01;
    blk[n++] = 'x';
    blk[n++] = 0x7f; /* value length 4000: 127 + 3873 in 7-bit prefix integer encoding */
    blk[n++] = (uint8_t)(0x80 | ((4000 - 127) & 0x7f));
    blk[n++] = (uint8_t)((4000 - 127) >> 7);
    memset(blk + n, 'b', 4000);
    n += 4000;
    while (n < sizeof(blk))
        blk[n++] = 0xbe; /* indexed: dynamic entry 62 */
    frame(&r, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 1, blk, n);
    uint32_t code;
    size_t peak;
    CHECK_INT(attack(&r, &code, &peak), H2_END_FLOOD);
    CHECK_INT(code, NGHTTP2_ENHANCE_YOUR_CALM);
}

/* Streams over SETTINGS_MAX_CONCURRENT_STREAMS are refused one by one; a client that keeps
 * opening them is told to go away. */
TEST(h2_too_many_streams_goaway)
{
    raw_start(&r);
    for (uint32_t id = 1; id < 2 * 400; id += 2) /* END_STREAM-less: they stay open */
        frame(&r, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, id, get_block, sizeof(get_block));
    uint32_t code;
    size_t peak;
    CHECK_INT(attack(&r, &code, &peak), H2_END_FLOOD);
    CHECK_INT(code, NGHTTP2_ENHANCE_YOUR_CALM);
}

/* Issue 25, RFC 9113 5.1.2: after the client's SETTINGS ACK, streams past the limit are still
 * refused one by one (nghttp2 alone ends the connection with PROTOCOL_ERROR then), however the
 * reads cut the frames, the ACK included (h2.c ng_recv holds a cut frame header back). */
TEST(h2_streams_past_the_limit_refused_after_the_ack)
{
    static const size_t cuts[] = {4096, 7, 1};
    for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
        raw_start(&r);
        frame(&r, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, NULL, 0);
        for (uint32_t id = 1; id < 2 * (H2_MAX_STREAMS + 3); id += 2)
            frame(&r, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, id, get_block, sizeof(get_block));
        frame(&r, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, NULL, 0); /* one too many: ignored */
        struct pair p;
        pair_init(&p, NULL, 0);
        for (size_t at = 0; at < r.len; at += cuts[k])
            CHECK_INT(h2_recv(p.srv, r.b + at, r.len - at < cuts[k] ? r.len - at : cuts[k], p.now),
                      0);
        unsigned refused = 0, goaways = 0;
        uint32_t first = 0;
        struct plan *o;
        while ((o = h2_output(p.srv))) {
            for (unsigned i = 0; i < o->nseg; i++) {
                const uint8_t *m = (const uint8_t *)o->segs[i].mem;
                for (size_t at = 0; m && at + 9 <= o->segs[i].len;) {
                    size_t flen = (size_t)m[at] << 16 | (size_t)m[at + 1] << 8 | m[at + 2];
                    uint32_t id = (uint32_t)m[at + 7] << 8 | m[at + 8];
                    if (m[at + 3] == NGHTTP2_RST_STREAM && m[at + 12] == NGHTTP2_REFUSED_STREAM) {
                        first = refused++ ? first : id;
                    }
                    goaways += m[at + 3] == NGHTTP2_GOAWAY;
                    at += 9 + flen;
                }
            }
            h2_sent(p.srv, p.now);
        }
        CHECK_INT(refused, 3);
        CHECK_INT(first, 2 * H2_MAX_STREAMS + 1);
        CHECK_INT(goaways, 0);
        CHECK_INT(h2_end(p.srv), H2_END_NONE);
        pair_free(&p);
    }
}

TEST(h2_bad_preface_ends)
{
    r.len = 0;
    memcpy(r.b, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 27);
    r.len = 27;
    uint32_t code;
    size_t peak;
    CHECK_INT(attack(&r, &code, &peak), H2_END_PROTOCOL);
}
