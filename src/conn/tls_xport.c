/* The TLS transport; see xport.h. */
#include "conn/tls_xport.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "conn/conn.h"
#include "core/plan.h"
#include "core/rules.h"
#include "engine/caps.h"
#include "rt/stats.h"
#include "rt/runtime.h"
#include "tls/tls.h"

/* A wire chunk holds up to four full records: 64 KiB of plaintext per send. One record would
 * mean a send per 16 KiB; more than four buys little (the socket's not-sent mark is 128 KiB by
 * default) and costs memory per sending connection. OUT_SLACK more hold the small records
 * beside them: a response's header block, HTTP/2's frame headers. Without it the header
 * record took room from the file bytes of the first chunk and every file's last bytes went in
 * a read and a send of their own (HTTPS/1.1 1 MiB: 17 of each, the last ~1 KB; issue 41). */
#define OUT_RECORDS 4
#define OUT_SLACK 2048
#define OUT_CAP (OUT_RECORDS * (TLS_RECORD_PLAIN + TLS_RECORD_OVERHEAD) + OUT_SLACK)
#define PLAIN_CAP (OUT_RECORDS * TLS_RECORD_PLAIN) /* file bytes read per chunk */
/* A send buffer: the wire plan describing it, then OUT_CAP wire bytes, then PLAIN_CAP for file
 * reads. The plan lives here, not in the connection, so an idle connection does not keep its
 * 1.3 KB either. */
struct sendbuf {
    struct plan wire;
    char out[OUT_CAP];
    char plain[PLAIN_CAP];
};
#define FREE_KEEP 32 /* spare buffers a worker keeps after a burst */
/* Certificates on demand (issue 40, tls.h TLS_WAIT): a handshake waits this long for its
 * certificate (an ACME order takes seconds; browsers give up on a handshake after 30 or so),
 * tried again when a name is decided (tls_port_retry) and every second, then gets its alert. At
 * most port->park_max (TLS_PARK_MAX) wait per worker; past it a new one is answered at once (with
 * the certificate if there is one, else the alert). */
#define PARK_S 20

struct xconn {
    struct tls_conn t;
    struct conn_cert cert; /* over t: the 421 rule's questions and verdict (transport.h) */
    struct tls_port *port;
    struct plan *app;    /* the protocol's plan being sent, or NULL */
    struct sendbuf *buf; /* only while sending: its wire plan is what the engine sends */
    bool busy;           /* wire is with the engine */
    bool shut;           /* the protocol ended its stream: close_notify, then the write side */
    bool fatal;          /* send what is pending (an alert, the 400), then close */
    bool ended;          /* the peer's end (close_notify or EOF) was passed up */
    bool reading;        /* a file read into buf->plain is with the engine (conn_file_read) */
    uint32_t rd_pos;     /* buf->plain[rd_pos, rd_pos + rd_len) are the plan's next file */
    uint32_t rd_len;     /* bytes: read, not yet sealed */
    size_t olen;         /* sealed bytes in buf->out waiting for that read before they go */
    uint32_t chunk_file; /* file bytes sealed into the chunk being filled (at most PLAIN_CAP) */
    int64_t idle_at;     /* w->now when it came to have nothing to send (0: it has) */
    struct timer rest;   /* REST_S after idle_at: tls_conn_idle (rest_fired) */
    int64_t doze_from;   /* w->now when the current REST_S window of idle() frees began */
    uint8_t dozes;       /* idle() frees of the sealer's context in that window */
    bool parked;         /* the handshake waits for a certificate on demand (TLS_WAIT) */
    int64_t park_end;    /* w->now when that wait gives up */
    struct timer park;   /* a second from now: the handshake is tried again (park_fired) */
    struct conn *conn;   /* for park_fired */
    struct xconn *park_prev, *park_next; /* port->parked_list while parked */
};

/* An idle connection should not hold its sealer's cipher context (tls_conn_idle: 1.2 KB of
 * ~18 KB), but remaking it costs ~5,500 instructions, a third of a keep-alive request. So
 * idle() frees it at most DOZES times per REST_S seconds (a connection's first response
 * usually goes out after its ticket: two frees leave a connection that went quiet after one
 * request without it); past that budget the connection is busy and keeps it, and the rest
 * timer frees it once the connection has had nothing to send for REST_S seconds (as long as
 * TCP waits before restarting slow start here, see pump). Remaking costs a busy connection at
 * most DOZES x 5,500 instructions per REST_S. */
#define REST_S 2
#define DOZES 2

void tls_port_init(struct tls_port *port, struct tls_ctx *ctx)
{
    port->cur = ctx;
    atomic_init(&port->next, NULL);
    port->free_bufs = NULL;
    port->nfree = 0;
    port->parked = 0;
    port->park_max = TLS_PARK_MAX;
    port->parked_list = NULL;
}

void tls_port_publish(struct tls_port *port, struct tls_ctx *ctx)
{
    struct tls_ctx *old = atomic_exchange(&port->next, ctx);
    if (old)
        tls_ctx_put(old); /* never adopted: nothing else refers to it */
}

void tls_port_fini(struct tls_port *port)
{
    tls_ctx_put(atomic_exchange(&port->next, NULL));
    tls_ctx_put(port->cur);
    port->cur = NULL;
    while (port->free_bufs) {
        void *next = *(void **)port->free_bufs;
        free(port->free_bufs);
        port->free_bufs = next;
    }
    port->nfree = 0;
}

static struct conn_cert *tls_cert(struct conn *c)
{
    struct xconn *x = c->xstate;
    return tls_conn_established(&x->t) ? &x->cert : NULL;
}

static struct sendbuf *buf_get(struct tls_port *port)
{
    void *b = port->free_bufs;
    if (b) {
        port->free_bufs = *(void **)b;
        port->nfree--;
        return b;
    }
    return malloc(sizeof(struct sendbuf));
}

static void buf_put(struct tls_port *port, struct sendbuf *b)
{
    if (port->nfree >= FREE_KEEP) {
        free(b);
        return;
    }
    *(void **)b = port->free_bufs;
    port->free_bufs = b;
    port->nfree++;
}

/* The rest timer: the connection has had nothing to send for REST_S seconds (or it has sent
 * since, and its next idle() arms the timer again). */
static void rest_fired(struct runtime *w, struct timer *t)
{
    struct xconn *x = (struct xconn *)((char *)t - offsetof(struct xconn, rest));
    if (!x->idle_at)
        return;
    if (w->now - x->idle_at < REST_S)
        timer_set(&w->wheel, t, x->idle_at + REST_S + 1);
    else
        tls_conn_idle(&x->t);
}

static void park_fired(struct runtime *w, struct timer *t);

static int tls_open(struct runtime *w, struct conn *c, void *ctx)
{
    struct tls_port *port = ctx;
    /* A reload's contexts take over at the first accept after it: one load per accept. */
    if (atomic_load_explicit(&port->next, memory_order_relaxed)) {
        struct tls_ctx *n = atomic_exchange(&port->next, NULL);
        if (n) {
            tls_ctx_put(port->cur);
            port->cur = n;
        }
    }
    tls_ctx_set_time(port->cur, w->wall);
    struct xconn *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    if (tls_conn_init(&x->t, port->cur) != 0) {
        free(x);
        return -ENOMEM;
    }
    x->port = port;
    x->cert.ops = &cert_tls;
    x->cert.t = &x->t;
    x->rest.fire = rest_fired;
    x->park.fire = park_fired;
    x->conn = c;
    c->xstate = x;
    /* Kernel TLS: the ULP goes on now, while the socket is surely established (a client that
     * has closed its side by the switch would refuse it); where it cannot, this connection
     * encrypts in user space. */
    if (w->cfg->ktls && w->caps && w->caps->ktls_ciphers && conn_wire_ktls(w, c, NULL, 0) == 0)
        tls_conn_ktls_allow(&x->t, w->caps->ktls_ciphers);
    /* Otherwise (or for a cipher the kernel lacks) tls.c seals records itself, from the
     * plaintext where it lies: no copy into OpenSSL's write buffer and out of it again. */
    if (w->cfg->tls_seal)
        tls_conn_seal_allow(&x->t);
    return 0;
}

/* Bytes (plaintext) that fit in room bytes of wire as records: whole records, and a last one
 * when it is worth making (tls_conn_seal's rule). */
static size_t plain_room(size_t room)
{
    size_t full = room / (TLS_RECORD_PLAIN + TLS_RECORD_OVERHEAD);
    size_t rest = room % (TLS_RECORD_PLAIN + TLS_RECORD_OVERHEAD);
    return full * TLS_RECORD_PLAIN +
           (rest > TLS_RECORD_OVERHEAD + 2048 ? rest - TLS_RECORD_OVERHEAD : 0);
}

/* Starts the read of up to want of the file segment s's next bytes into plain. */
static void start_read(struct runtime *w, struct conn *c, struct xconn *x, const struct seg *s,
                       size_t want)
{
    if (want > s->len)
        want = (size_t)s->len;
    x->reading = true;
    conn_file_read(w, c, s->fd, x->buf->plain, (uint32_t)want, s->off);
}

/* Fills the wire chunk: first what TLS queued on its own (handshake, tickets, alerts), then
 * records of the protocol's plan; returns the bytes in it, -EINPROGRESS when they wait for a
 * file read (read_done pumps again), or -errno (a file read failed). File bytes are read
 * through the engine, never on the loop (issue 14): the read of the next chunk starts as soon
 * as the last read bytes are sealed, so it runs while the chunk before is being sent. */
static ssize_t fill(struct runtime *w, struct conn *c, struct xconn *x)
{
    size_t len = x->olen, pend;
    x->olen = 0;
    if (len == 0)
        x->chunk_file = 0; /* a new chunk */
    const void *p = tls_conn_peek(&x->t, &pend);
    if (pend && len < OUT_CAP) {
        size_t n = pend < OUT_CAP - len ? pend : OUT_CAP - len;
        memcpy(x->buf->out + len, p, n);
        tls_conn_consume(&x->t, n);
        len += n;
        if (len == OUT_CAP)
            return (ssize_t)len;
    }
    struct plan *app = x->app;
    while (app && !plan_done(app) && tls_conn_established(&x->t)) {
        size_t before = len;
        struct seg *s = plan_seg(app);
        ssize_t taken;
        if (s->mem) {
            struct iovec iov[PLAN_MAX_SEGS];
            int n = plan_iov(app, iov, PLAN_MAX_SEGS);
            taken = tls_conn_seal(&x->t, iov, n, x->buf->out, OUT_CAP, &len);
        } else if (x->rd_len == 0) {
            /* A full chunk goes now, the next chunk's bytes read meanwhile; one with room waits
             * for the read that fills it (one send per chunk, as with pread: HTTP/2 puts a
             * DATA frame's header between 16 KiB file pieces). */
            /* A chunk takes PLAIN_CAP file bytes at most (the slack is for the small records
             * beside them), and what its room holds as records. */
            size_t want = plain_room(OUT_CAP - len);
            if (want > PLAIN_CAP - x->chunk_file)
                want = PLAIN_CAP - x->chunk_file;
            bool full = want == 0;
            if (!x->reading)
                start_read(w, c, x, s, full ? PLAIN_CAP : want);
            if (full)
                break;
            x->olen = len;
            return -EINPROGRESS;
        } else {
            struct iovec iov = {x->buf->plain + x->rd_pos, x->rd_len};
            taken = tls_conn_seal(&x->t, &iov, 1, x->buf->out, OUT_CAP, &len);
            if (taken > 0) {
                x->rd_pos += (uint32_t)taken;
                x->rd_len -= (uint32_t)taken;
                x->chunk_file += (uint32_t)taken;
            }
        }
        if (taken == -ESHUTDOWN && len > 0) {
            /* the sealer stopped (a KeyUpdate request): close_notify goes, then the plan
             * fails at the next fill */
            x->fatal = true;
            break;
        }
        if (taken < 0)
            return taken;
        plan_advance(app, (uint64_t)taken);
        if (taken == 0 || len == before)
            break; /* no room for another record */
    }
    /* The response after which the connection closes ends the TLS stream too: close_notify
     * rides in the same chunk as the last record. */
    if (app && plan_done(app) && app->close)
        tls_conn_close_notify(&x->t);
    if (x->shut && !app)
        tls_conn_close_notify(&x->t);
    p = tls_conn_peek(&x->t, &pend);
    if (pend && len < OUT_CAP) {
        size_t n = pend < OUT_CAP - len ? pend : OUT_CAP - len;
        memcpy(x->buf->out + len, p, n);
        tls_conn_consume(&x->t, n);
        len += n;
    }
    return (ssize_t)len;
}

/* Idle: nothing to send and nothing being sent. Buffers go back; the write side ends when the
 * protocol asked; a fatal connection closes. */
static void idle(struct runtime *w, struct conn *c, struct xconn *x)
{
    if (!x->idle_at) {
        x->idle_at = w->now;
        /* Between keep-alive requests this only moves a deadline (the wheel re-links lazily). */
        timer_set(&w->wheel, &x->rest, w->now + REST_S + 1);
    }
    if (tls_conn_established(&x->t)) {
        if (w->now - x->doze_from >= REST_S) {
            x->doze_from = w->now;
            x->dozes = 0;
        }
        if (x->dozes < DOZES && tls_conn_idle(&x->t))
            x->dozes++;
    }
    if (x->buf && !x->reading && x->rd_len == 0) {
        buf_put(x->port, x->buf);
        x->buf = NULL;
    }
    tls_conn_trim(&x->t);
    if (x->fatal)
        conn_close(w, c);
    else if (x->shut && !x->app) {
        x->shut = false;
        conn_wire_shutdown(w, c);
    }
}

/* The protocol's plan cannot be sent (a file read failed, the socket did): report it, close. */
static void plan_failed(struct runtime *w, struct conn *c, struct xconn *x, int err)
{
    struct plan *app = x->app;
    x->app = NULL;
    x->fatal = true;
    if (app)
        conn_plan_sent(w, c, err);
    if (conn_open(c))
        conn_close(w, c);
}

static void kernel_pump(struct runtime *w, struct conn *c, struct xconn *x);

/* Sends the next chunk, if there is one and the wire is free. */
static void pump(struct runtime *w, struct conn *c, struct xconn *x)
{
    if (x->busy || !conn_open(c))
        return;
    if (tls_conn_ktls(&x->t) != TLS_KTLS_NO) {
        kernel_pump(w, c, x);
        return;
    }
    if (!x->buf && !(x->buf = buf_get(x->port))) {
        conn_close(w, c);
        return;
    }
    /* Rested for over a second (w->now counts seconds): TCP restarts slow start after an idle
     * period, so the records restart small (TLS_RECORD_SMALL). */
    if (x->idle_at && w->now - x->idle_at >= 2)
        tls_conn_rested(&x->t);
    ssize_t len = fill(w, c, x);
    if (len != 0)
        x->idle_at = 0; /* a pump that finds nothing to send does not restart the rest */
    if (len == -EINPROGRESS)
        return; /* read_done pumps */
    if (len < 0) {
        plan_failed(w, c, x, (int)len);
        return;
    }
    if (len == 0) {
        idle(w, c, x);
        return;
    }
    struct plan *wire = &x->buf->wire;
    plan_init(wire);
    plan_mem(wire, x->buf->out, (size_t)len);
    wire->fin_carries_tail = x->app && plan_done(x->app) && x->app->fin_carries_tail;
    x->busy = true;
    conn_wire_send(w, c, wire);
}

/* A fatal condition: what TLS queued (an alert) goes out, then the connection closes. */
static void fail(struct runtime *w, struct conn *c, struct xconn *x)
{
    x->fatal = true;
    if (!tls_conn_owes(&x->t) && !x->busy)
        conn_close(w, c);
    else
        pump(w, c, x);
}

/* Plain HTTP on the TLS port: a readable 400 in clear text, then close (nginx's answer). */
static void plain_http(struct runtime *w, struct conn *c, struct xconn *x)
{
    x->fatal = true;
    if (!(x->buf = buf_get(x->port))) {
        conn_close(w, c);
        return;
    }
    size_t len = rules_plain_http_on_tls(x->buf->out, OUT_CAP, w->date);
    plan_init(&x->buf->wire);
    plan_mem(&x->buf->wire, x->buf->out, len);
    x->busy = true;
    conn_wire_send(w, c, &x->buf->wire);
}

static void park_unlink(struct runtime *w, struct xconn *x)
{
    struct tls_port *port = x->port;
    if (x->park_prev)
        x->park_prev->park_next = x->park_next;
    else
        port->parked_list = x->park_next;
    if (x->park_next)
        x->park_next->park_prev = x->park_prev;
    x->park_prev = x->park_next = NULL;
    x->parked = false;
    port->parked--;
    stat_add(&w->stats.tls_parked, (uint64_t)-1);
}

static void unpark(struct runtime *w, struct conn *c, struct xconn *x)
{
    if (!x->parked)
        return;
    park_unlink(w, x);
    timer_cancel(&x->park);
    conn_arm(w, c, w->cfg->header_timeout); /* the protocol's wait for its first request */
    conn_recv(w, c, true);
}

/* The handshake with what was fed: true when it is done and the plaintext may be read; false
 * when it waits (more bytes, a certificate on demand) or the connection is failing. */
static bool handshake(struct runtime *w, struct conn *c, struct xconn *x)
{
    int rc = tls_conn_handshake(&x->t);
    if (rc == TLS_WAIT) {
        if (!x->parked && x->port->parked >= x->port->park_max) {
            tls_conn_give_up(&x->t); /* too many wait: answered now, certificate or alert */
            rc = tls_conn_handshake(&x->t);
        } else {
            if (!x->parked) {
                /* Nothing to read until the certificate is decided: receiving stops (a client
                 * sending on cannot grow the buffer), and the protocol's timer waits past ours. */
                x->parked = true;
                x->port->parked++;
                stat_add(&w->stats.tls_parked, 1);
                x->park_next = x->port->parked_list;
                if (x->park_next)
                    x->park_next->park_prev = x;
                x->port->parked_list = x;
                x->park_end = w->now + PARK_S;
                conn_recv(w, c, false);
                conn_arm(w, c, PARK_S + 2);
            }
            timer_set(&w->wheel, &x->park, w->now + 1);
            return false;
        }
    }
    unpark(w, c, x);
    if (rc == TLS_PLAIN_HTTP) {
        plain_http(w, c, x);
        return false;
    }
    if (rc != 1 && rc != TLS_AGAIN) {
        fail(w, c, x);
        return false;
    }
    if (rc == TLS_AGAIN) {
        pump(w, c, x); /* the server's flight */
        return false;
    }
    if (tls_conn_resumed(&x->t))
        stat_add(&w->stats.tls_resumed, 1);
    /* ALPN chose h2 and HTTP/2 is served: hand the connection over before any byte. */
    if (tls_conn_alpn(&x->t) == TLS_ALPN_H2 && w->h2 && conn_set_proto(w, c, w->h2, NULL, 0) < 0)
        return false;
    return true;
}

static void read_plain(struct runtime *w, struct conn *c, struct xconn *x)
{
    char plain[TLS_RECORD_PLAIN];
    while (conn_open(c)) {
        ssize_t got = tls_conn_read(&x->t, plain, sizeof(plain));
        if (got > 0) {
            conn_input(w, c, plain, got);
            continue;
        }
        if (got == TLS_AGAIN)
            break;
        if (got == 0) { /* close_notify: the client is done sending */
            x->ended = true;
            conn_input(w, c, NULL, 0);
            return;
        }
        fail(w, c, x); /* a bad record: OpenSSL queued an alert */
        return;
    }
    if (conn_open(c) && tls_conn_owes(&x->t))
        pump(w, c, x); /* tickets after the handshake, a KeyUpdate's answer */
}

/* A parked handshake's second: tried again (its certificate may be there now), for the last
 * time once its wait is over. */
static void park_fired(struct runtime *w, struct timer *t)
{
    struct xconn *x = (struct xconn *)((char *)t - offsetof(struct xconn, park));
    struct conn *c = x->conn;
    if (!x->parked || !conn_open(c))
        return;
    if (w->now >= x->park_end || w->draining)
        tls_conn_give_up(&x->t);
    if (handshake(w, c, x))
        read_plain(w, c, x);
}

void tls_port_retry(struct runtime *w, struct tls_port *port)
{
    /* A try unlinks (or closes) only its own connection; one still waiting keeps its place. */
    for (struct xconn *x = port->parked_list, *next; x; x = next) {
        next = x->park_next;
        park_fired(w, &x->park);
    }
}

static void tls_received(struct runtime *w, struct conn *c, const char *data, ssize_t n)
{
    struct xconn *x = c->xstate;
    if (x->fatal || x->ended) {
        if (n < 0 || (n == 0 && !x->busy))
            conn_close(w, c); /* after close_notify only the close matters */
        return;
    }
    if (n <= 0) { /* EOF without close_notify, or a failed socket */
        x->ended = true;
        conn_input(w, c, NULL, n);
        return;
    }
    if (tls_conn_lend(&x->t, data, (size_t)n) != 0) {
        conn_close(w, c);
        return;
    }
    /* A parked connection's bytes wait with its ClientHello (receiving is off). */
    if (!x->parked && (tls_conn_established(&x->t) || handshake(w, c, x)))
        read_plain(w, c, x);
    /* The engine reuses data after this: what OpenSSL did not read yet is copied (the
     * connection is released later, by conn_closed, even when it was closed above). */
    if (tls_conn_settle(&x->t) != 0)
        conn_close(w, c);
}

static void tls_send(struct runtime *w, struct conn *c, struct plan *p)
{
    struct xconn *x = c->xstate;
    x->app = p;
    pump(w, c, x);
}

static void tls_sent(struct runtime *w, struct conn *c, int err)
{
    struct xconn *x = c->xstate;
    x->busy = false;
    if (err) {
        plan_failed(w, c, x, err);
        return;
    }
    if (x->app && plan_done(x->app)) {
        x->app = NULL;
        conn_plan_sent(w, c, 0); /* may start the next response: pump below finds busy */
        if (!conn_open(c))
            return;
    }
    pump(w, c, x);
}

/* ---- kernel TLS: the send side after the switch (tls.h, "Kernel TLS") ------------------ */

/* Sends len bytes copied into the send buffer: ciphertext of the old keys (type 0) or one
 * record for the kernel to seal as content type `type`. */
static void send_copy(struct runtime *w, struct conn *c, struct xconn *x, const void *p, size_t len,
                      uint8_t type)
{
    struct plan *wire = &x->buf->wire;
    memcpy(x->buf->out, p, len);
    plan_init(wire);
    plan_mem(wire, x->buf->out, len);
    wire->tls_record = type;
    x->busy = true;
    conn_wire_send(w, c, wire);
}

/* The next send once OpenSSL has handed the keys over, in the order the peer must see: the
 * bytes sealed under the old keys (the handshake's last flight), then the keys go to the
 * socket (nothing is in flight: the last send has completed), then OpenSSL's own records
 * (tickets, alerts, close_notify), then the protocol's plan as it is (zero-copy files, as in
 * cleartext); close_notify after the last response. */
static void kernel_pump(struct runtime *w, struct conn *c, struct xconn *x)
{
    size_t len;
    uint8_t type = 0;
    const void *p = tls_conn_peek(&x->t, &len);
    if (!len)
        p = tls_conn_ktls_keys(&x->t, &len) ? NULL : tls_conn_record(&x->t, &type, &len);
    if (p) {
        if (!x->buf && !(x->buf = buf_get(x->port))) {
            conn_close(w, c);
            return;
        }
        if (len > OUT_CAP)
            len = OUT_CAP; /* only old ciphertext can be longer than a record */
        send_copy(w, c, x, p, len, type);
        if (type)
            tls_conn_record_sent(&x->t);
        else
            tls_conn_consume(&x->t, len);
        return;
    }
    const void *keys = tls_conn_ktls_keys(&x->t, &len);
    if (keys) {
        /* OpenSSL has stopped encrypting: without the keys in the kernel nothing correct can
         * be sent any more (ENOMEM, or a socket the peer has reset). */
        if (conn_wire_ktls(w, c, keys, len) < 0) {
            tls_conn_ktls_installed(&x->t); /* wipes them */
            plan_failed(w, c, x, -EPROTO);
            return;
        }
        tls_conn_ktls_installed(&x->t);
        stat_add(&w->stats.ktls_conns, 1);
        kernel_pump(w, c, x); /* a ticket may wait */
        return;
    }
    if (tls_conn_ktls(&x->t) == TLS_KTLS_BROKEN) {
        /* The peer asked for new keys, which the kernel cannot take: no more application data
         * (a response not started fails), close_notify (not application data: the current
         * keys may seal it before our KeyUpdate), then the close. */
        x->fatal = true;
        tls_conn_close_notify(&x->t); /* once: it is a no-op after */
        if (tls_conn_record(&x->t, &type, &len))
            kernel_pump(w, c, x);
        else
            plan_failed(w, c, x, -EPROTO);
        return;
    }
    if (x->app && !x->fatal) {
        /* The last record's tail cannot wait for the FIN: close_notify comes between. */
        x->app->fin_carries_tail = false;
        x->busy = true;
        conn_wire_send(w, c, x->app);
        return;
    }
    if (x->shut && !x->app) {
        tls_conn_close_notify(&x->t); /* once: it is a no-op after */
        if (tls_conn_owes(&x->t)) {
            kernel_pump(w, c, x);
            return;
        }
    }
    idle(w, c, x);
}

/* The file read fill started has ended: its bytes are sealed when the wire is free. */
static void tls_read_done(struct runtime *w, struct conn *c, int res)
{
    struct xconn *x = c->xstate;
    x->reading = false;
    if (res <= 0) { /* a read error, or the file shrank under us */
        plan_failed(w, c, x, res < 0 ? res : -EIO);
        return;
    }
    x->rd_pos = 0;
    x->rd_len = (uint32_t)res;
    pump(w, c, x);
}

static void tls_shutdown(struct runtime *w, struct conn *c)
{
    struct xconn *x = c->xstate;
    x->shut = true; /* close_notify goes out after the last record, then the write side */
    pump(w, c, x);
}

static void tls_release(struct runtime *w, struct conn *c)
{
    struct xconn *x = c->xstate;
    timer_cancel(&x->rest);
    timer_cancel(&x->park);
    if (x->parked)
        park_unlink(w, x);
    if (x->buf)
        buf_put(x->port, x->buf);
    tls_conn_fini(&x->t);
    free(x);
    c->xstate = NULL;
}

const struct transport_ops transport_tls = {
    .name = "tls",
    .secure = true,
    .open = tls_open,
    .received = tls_received,
    .send = tls_send,
    .sent = tls_sent,
    .shutdown = tls_shutdown,
    .release = tls_release,
    .read_done = tls_read_done,
    .cert = tls_cert,
};
