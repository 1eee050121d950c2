/* The copy transport: the seam's test double for TLS; see transport.h.
 *
 * It does what a TLS transport must do about buffers and sequencing, minus the cipher: received
 * bytes are copied into its own buffer before the protocol sees them (as decrypted records
 * would be); a plan leaves as wire plans of at most COPY_CHUNK bytes in its own buffer, memory
 * copied and file ranges read by the engine into it (conn_file_read, as TLS reads them: a chunk
 * holds memory or file bytes, not both), the next chunk made only when the engine reports the
 * last one sent (backpressure: a plan's size never sets the memory used); its own bytes (as a
 * handshake's or an alert's would be) wait for the wire to be free. Nothing here is on the
 * production path: the transport is chosen only by RINGHTTPD_TEST_TRANSPORT=copy. */
#include "conn/transport.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn/conn.h"
#include "core/plan.h"

#define COPY_CHUNK 16384

struct copy_conn {
    struct plan *app; /* the protocol's plan being sent, or NULL */
    struct plan wire; /* what the engine is sending: one segment of out[] */
    bool busy;        /* wire (or a file read into out[]) is with the engine */
    bool shut;        /* the protocol asked for the write side's end */
    char out[COPY_CHUNK];
    char in[COPY_CHUNK];
};

static int copy_open(struct runtime *w, struct conn *c, void *ctx)
{
    (void)w;
    (void)ctx;
    struct copy_conn *x = malloc(sizeof(*x));
    if (!x)
        return -ENOMEM;
    x->app = NULL;
    x->busy = false;
    x->shut = false;
    c->xstate = x;
    return 0;
}

static void copy_received(struct runtime *w, struct conn *c, const char *data, ssize_t n)
{
    struct copy_conn *x = c->xstate;
    if (n <= 0) {
        conn_input(w, c, NULL, n);
        return;
    }
    /* One "record" at a time, the protocol seeing only the transport's buffer. */
    while (n > 0 && conn_open(c)) {
        size_t len = (size_t)n < sizeof(x->in) ? (size_t)n : sizeof(x->in);
        memcpy(x->in, data, len);
        data += len;
        n -= (ssize_t)len;
        conn_input(w, c, x->in, (ssize_t)len);
    }
}

static void send_chunk(struct runtime *w, struct conn *c, struct copy_conn *x, size_t len)
{
    struct plan *p = x->app;
    plan_init(&x->wire);
    plan_mem(&x->wire, x->out, len);
    x->wire.fin_carries_tail = p->fin_carries_tail && plan_done(p);
    x->busy = true;
    conn_wire_send(w, c, &x->wire);
}

/* Fills the wire buffer from the protocol's plan and hands it to the engine; a file segment
 * first goes through a read of the engine's into the buffer (copy_read_done sends it). */
static void pump(struct runtime *w, struct conn *c, struct copy_conn *x)
{
    struct plan *p = x->app;
    size_t len = 0;
    while (len < sizeof(x->out) && !plan_done(p)) {
        struct seg *s = plan_seg(p);
        size_t room = sizeof(x->out) - len;
        size_t n = s->len < room ? (size_t)s->len : room;
        if (!s->mem) {
            if (len)
                break; /* what is copied goes first */
            x->busy = true;
            conn_file_read(w, c, s->fd, x->out, (uint32_t)n, s->off);
            return;
        }
        memcpy(x->out + len, s->mem + s->off, n);
        plan_advance(p, n);
        len += n;
    }
    send_chunk(w, c, x, len);
}

static void copy_read_done(struct runtime *w, struct conn *c, int res)
{
    struct copy_conn *x = c->xstate;
    x->busy = false;
    if (res <= 0) { /* a read error, or the file shrank under us */
        x->app = NULL;
        conn_plan_sent(w, c, res < 0 ? res : -EIO);
        return;
    }
    plan_advance(x->app, (uint64_t)res);
    send_chunk(w, c, x, (size_t)res);
}

static void copy_send(struct runtime *w, struct conn *c, struct plan *p)
{
    struct copy_conn *x = c->xstate;
    x->app = p;
    if (!x->busy)
        pump(w, c, x);
}

static void copy_sent(struct runtime *w, struct conn *c, int err)
{
    struct copy_conn *x = c->xstate;
    x->busy = false;
    if (x->app && (err || plan_done(x->app))) {
        x->app = NULL;
        conn_plan_sent(w, c, err);
    } else if (x->app) {
        pump(w, c, x);
    }
    if (conn_open(c) && !x->busy && x->shut && !x->app) {
        x->shut = false;
        conn_wire_shutdown(w, c);
    }
}

static void copy_shutdown(struct runtime *w, struct conn *c)
{
    struct copy_conn *x = c->xstate;
    if (x->busy || x->app) {
        x->shut = true; /* after the last chunk (TLS: after close_notify) */
        return;
    }
    conn_wire_shutdown(w, c);
}

static void copy_release(struct runtime *w, struct conn *c)
{
    (void)w;
    free(c->xstate);
    c->xstate = NULL;
}

const struct transport_ops transport_copy = {
    .name = "copy",
    .open = copy_open,
    .received = copy_received,
    .send = copy_send,
    .sent = copy_sent,
    .shutdown = copy_shutdown,
    .release = copy_release,
    .read_done = copy_read_done,
};

const struct transport_ops *transport_test_hook(void)
{
    const char *name = getenv("RINGHTTPD_TEST_TRANSPORT");
    return name && strcmp(name, "copy") == 0 ? &transport_copy : NULL;
}
