/* fuzz_h2: libFuzzer target for the HTTP/2 server session: arbitrary bytes as what a client
 * sends (after the connection preface, unless the first byte says to leave it out), split into
 * reads at points the input chooses; every request is answered, every output plan taken.
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; the session is freed before returning. */
#include "h2/h2.h"

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
};

static void on_request(void *user, int32_t id, const struct http_request *req, int status)
{
    struct ctx *c = user;
    REQUIRE(id > 0 && (id & 1));
    REQUIRE(status == 0 || (status >= 400 && status < 600));
    REQUIRE(req->target.len <= HTTP1_MAX_HEAD && req->num_headers <= HTTP1_MAX_HEADERS);
    struct plan *b = &c->body[c->next++ % BODIES];
    plan_init(b);
    static const char text[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    plan_mem(b, text, 16 + (unsigned)id % 7);
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    struct ctx c = {0};
    const struct h2_opts opts = {.stall_ms = 1000};
    REQUIRE(h2_new(&c.s, &opts, &hooks, &c) == 0);
    int64_t now = 0;
    bool with_preface = size == 0 || data[0] != 'P';
    if (with_preface)
        h2_recv(c.s, preface, sizeof(preface) - 1, now);
    /* Each chunk: one length byte, then that many bytes (or what is left). */
    size_t at = with_preface ? 0 : 1;
    while (at < size) {
        size_t n = data[at++] * 8u + 1;
        if (n > size - at)
            n = size - at;
        int rc = h2_recv(c.s, data + at, n, now);
        REQUIRE(rc == 0 || rc == -EPROTO);
        REQUIRE(h2_mem(c.s) <= H2_MEM_MAX);
        at += n;
        now += 50;
        struct plan *o = h2_output(c.s);
        if (o) {
            REQUIRE(o->nseg > 0 && o->nseg <= PLAN_MAX_SEGS);
            for (unsigned i = 0; i < o->nseg; i++)
                REQUIRE(o->segs[i].mem && o->segs[i].len > 0);
            h2_sent(c.s, now);
        }
        if (rc < 0)
            break;
    }
    h2_check(c.s, now + 2000);
    while (h2_output(c.s))
        h2_sent(c.s, now);
    h2_free(c.s);
    REQUIRE(c.done == c.answered);
    return 0;
}
