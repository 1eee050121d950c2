/* fuzz_h2: libFuzzer target for the HTTP/2 server session (framing, stream states, flow
 * control, HPACK, priorities): what a client sends after a valid connection preface, either
 * arbitrary bytes split into reads at points the input chooses, or (first byte 'F') frames
 * the input describes one by one (type, flags, a small stream id, a payload), so that the
 * fuzzer reaches stream states without having to find frame headers first. Every request is
 * answered, some with bodies larger than the windows, some from field lines with pre-encoded
 * fields (h2_respond_plan, as the server answers); every output plan is taken, some late.
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; the session is freed before returning. */
#include "http/h2/h2.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_h2: %s:%d: %s\n", __FILE__, __LINE__, #cond);                    \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define BODIES 256

struct ctx {
    struct h2_session *s;
    unsigned answered, done;
    struct plan body[BODIES];
    unsigned next;
    struct hpack_pre *pre; /* the "file's" fields, h2_pre_new */
};

/* Field lines as the core writes them: Server and Date (three seconds of them), then a file's. */
#define FILE_LINES "ETag: \"1-2\"\r\nContent-Type: text/plain\r\n"
static const char *const heads[] = {"Server: s\r\nDate: D0\r\n" FILE_LINES,
                                    "Server: s\r\nDate: D1\r\n" FILE_LINES,
                                    "Server: s\r\nDate: D2\r\nVary: x\r\n" FILE_LINES};

static void on_request(void *user, int32_t id, const struct http_request *req, int status)
{
    struct ctx *c = user;
    REQUIRE(id > 0 && (id & 1));
    REQUIRE(status == 0 || (status >= 400 && status < 600));
    REQUIRE(req->target.len <= HTTP1_MAX_HEAD && req->num_headers <= HTTP1_MAX_HEADERS);
    struct plan *b = &c->body[c->next++ % BODIES];
    plan_init(b);
    static const char text[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    static char large[70000]; /* past the client's default windows */
    if (id % 5 == 0)
        plan_mem(b, large, sizeof(large) - (unsigned)id % 100);
    else
        plan_mem(b, text, 16 + (unsigned)id % 7);
    if (id % 3 != 0 && !status) {
        const char *head = heads[(unsigned)id / 3 % 3];
        struct plan body = *b;
        plan_init(b);
        plan_mem(b, head, strlen(head));
        for (unsigned i = 0; i < body.nseg; i++)
            plan_mem(b, body.segs[i].mem, body.segs[i].len);
        b->head_len = strlen(head);
        b->status = 200;
        if (h2_respond_plan(c->s, id, b, id % 7 ? c->pre : NULL, b) == 0)
            c->answered++;
        return;
    }
    const struct h2_field f[] = {{"Content-Type", 12, "text/plain", 10}};
    if (h2_respond(c->s, id, status ? status : 200, f, 1, b, b) == 0)
        c->answered++;
}

static void on_done(void *user, void *token, int err)
{
    struct ctx *c = user;
    (void)token, (void)err;
    c->done++;
}

static void *on_buf_get(void *user)
{
    (void)user;
    return malloc(H2_BUF_SIZE);
}

static void on_buf_put(void *user, void *buf)
{
    (void)user;
    free(buf);
}

static const struct h2_hooks hooks = {on_request, on_done, on_buf_get, on_buf_put};

/* Takes (or, when `late`, leaves in flight) what the session has to send. */
static void drain(struct ctx *c, int64_t now, bool late)
{
    struct plan *o = h2_output(c->s);
    if (!o)
        return;
    REQUIRE(o->nseg > 0 && o->nseg <= PLAN_MAX_SEGS);
    for (unsigned i = 0; i < o->nseg; i++)
        REQUIRE(o->segs[i].mem && o->segs[i].len > 0);
    if (!late)
        h2_sent(c->s, now);
}

/* 'F' mode: each frame is a type byte (its low four bits a frame type, 10 PRIORITY_UPDATE,
 * 11-15 unknown types), a flags byte, a stream id byte, a length byte and that many bytes. */
static size_t frames(const uint8_t *data, size_t size, uint8_t *out)
{
    static const uint8_t types[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0x10, 0xa, 0xb, 0xf0, 1, 0};
    size_t n = 0;
    for (size_t at = 0; at + 4 <= size;) {
        uint8_t type = types[data[at] & 15], flags = data[at + 1], id = data[at + 2];
        size_t len = data[at + 3];
        at += 4;
        if (len > size - at)
            len = size - at;
        uint8_t h[9] = {0, 0, (uint8_t)len, type, flags, 0, 0, 0, id};
        memcpy(out + n, h, 9);
        memcpy(out + n + 9, data + at, len);
        n += 9 + len;
        at += len;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    static uint8_t framed[20000 / 4 * 13 + 64];
    struct ctx c = {0};
    const struct h2_opts opts = {.stall_ms = 1000, .body_ms = 200};
    REQUIRE(h2_new(&c.s, &opts, &hooks, &c) == 0);
    REQUIRE((c.pre = h2_pre_new(FILE_LINES, strlen(FILE_LINES), 1)) != NULL);
    int64_t now = 0;
    REQUIRE(h2_recv(c.s, preface, sizeof(preface) - 1, now) == 0);
    bool framed_mode = size > 0 && data[0] == 'F';
    if (framed_mode) {
        size_t n = frames(data + 1, size - 1, framed);
        /* the preface's SETTINGS, then the frames, in reads of 1000 bytes */
        static const uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
        h2_recv(c.s, settings, sizeof(settings), now);
        for (size_t at = 0; at < n; at += 1000) {
            int rc = h2_recv(c.s, framed + at, n - at < 1000 ? n - at : 1000, now);
            REQUIRE(rc == 0 || rc == -EPROTO);
            REQUIRE(h2_mem(c.s) <= H2_MEM_MAX);
            drain(&c, now, at % 3000 == 1000);
            now += 50;
            /* bodies past --body-timeout are answered 408 between reads, as the timer does */
            if (h2_deadline(c.s) <= now)
                h2_expire(c.s, now);
            REQUIRE(h2_unfinished(c.s) <= H2_MEM_MAX + H2_BUF_SIZE);
            if (rc < 0)
                break;
        }
    } else {
        /* Each chunk: one length byte, then that many bytes (or what is left). */
        for (size_t at = 0; at < size;) {
            size_t n = data[at++] * 8u + 1;
            if (n > size - at)
                n = size - at;
            int rc = h2_recv(c.s, data + at, n, now);
            REQUIRE(rc == 0 || rc == -EPROTO);
            REQUIRE(h2_mem(c.s) <= H2_MEM_MAX);
            at += n;
            now += 50;
            drain(&c, now, false);
            if (rc < 0)
                break;
        }
    }
    drain(&c, now, false);
    if (size > 1 && data[size - 1] & 1) /* the client shuts its side (or is reclaimed) */
        h2_peer_closed(c.s);
    else if (size > 1 && data[size - 1] & 2)
        h2_shed(c.s);
    drain(&c, now, false);
    if (h2_open_streams(c.s) == 0)
        h2_trim(c.s);
    h2_goaway(c.s);
    drain(&c, now, false);
    h2_check(c.s, now + 2000);
    for (int i = 0; i < 1000 && h2_output(c.s); i++)
        h2_sent(c.s, now);
    h2_free(c.s);
    free(c.pre);
    REQUIRE(c.done == c.answered);
    return 0;
}
