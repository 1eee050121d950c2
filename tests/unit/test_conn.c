/* test_conn: conn's lifecycle rules driven through a fake engine table (no socket, no ring):
 * pipelined requests answered one at a time and in order, partial heads buffered, the close
 * rules (Connection: close, malformed requests, bodies too large to discard), and the same
 * through the copy transport (transport.h). HTTP/1 (http/h1.h) is every connection's protocol.
 * Must not: open sockets; the only I/O is the file cache reading a temporary document root.
 * Ownership: one worker per test, built on a real config, site and file cache. */
#include "unit.h"

#include <crypt.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "conn/conn.h"
#include "core/plan.h"
#include "engine/caps.h"
#include "engine/engine.h"
#include "http/h1.h"
#include "site/auth.h"
#include "site/site.h"
#include "server/worker.h"
#include "conn/transport.h"

/* What the fake engine saw. Sends are not completed until the test says so, as a real engine
 * completes them later from its loop. */
static struct {
    struct conn *sending; /* a send in flight */
    char out[1 << 16];    /* every byte sent so far */
    size_t out_len;
    int sends, closes, shutdowns, reads;
    bool recv_on;
    bool peer_gone; /* the engine's peer lookup fails (getpeername: ENOTCONN) */
    struct conn *closing;
} fake;

static int fake_init(struct runtime *w)
{
    (void)w;
    return 0;
}

static void fake_fini(struct runtime *w)
{
    (void)w;
}

static int fake_run(struct runtime *w)
{
    (void)w;
    return 0;
}

static void fake_recv(struct runtime *w, struct engine_conn *c, bool on)
{
    (void)w;
    (void)c;
    fake.recv_on = on;
}

/* Takes the whole wire plan at once (pread for file segments). */
static void fake_send(struct runtime *w, struct engine_conn *e, struct plan *p)
{
    struct conn *c = conn_of(e);
    (void)w;
    CHECK(fake.sending == NULL); /* one send at a time */
    while (!plan_done(p)) {
        struct seg *s = plan_seg(p);
        size_t n = (size_t)s->len;
        CHECK(fake.out_len + n <= sizeof(fake.out));
        if (s->mem)
            memcpy(fake.out + fake.out_len, s->mem + s->off, n);
        else
            CHECK(pread(s->fd, fake.out + fake.out_len, n, (off_t)s->off) == (ssize_t)n);
        fake.out_len += n;
        plan_advance(p, n);
    }
    fake.sends++;
    fake.sending = c;
}

/* A transport's file read, done at once and reported from inside the call (the copy transport
 * starts one as its last step, so that is safe here; a real engine reports it later). */
static void fake_read(struct runtime *w, struct engine_conn *c, int fd, void *buf, uint32_t len,
                      uint64_t off)
{
    ssize_t n = pread(fd, buf, len, (off_t)off);
    fake.reads++;
    conn_read_done(w, c, n < 0 ? -errno : (int)n);
}

static void fake_shutdown(struct runtime *w, struct engine_conn *c)
{
    (void)w;
    (void)c;
    fake.shutdowns++;
}

static void fake_close(struct runtime *w, struct engine_conn *e)
{
    struct conn *c = conn_of(e);
    (void)w;
    fake.closes++;
    fake.closing = c;
}

static void fake_stop_accept(struct runtime *w)
{
    (void)w;
}

static void fake_drop(struct runtime *w, int fd)
{
    (void)w;
    (void)fd; /* the fake's fds are made up */
}

static bool fake_peer(struct runtime *w, struct engine_conn *c, struct peer *out)
{
    (void)w;
    (void)c;
    peer_set(out, NULL, 0);
    return !fake.peer_gone;
}

static const struct engine_ops fake_engine = {
    .name = "fake",
    .init = fake_init,
    .fini = fake_fini,
    .run = fake_run,
    .recv = fake_recv,
    .send = fake_send,
    .shutdown = fake_shutdown,
    .close = fake_close,
    .stop_accept = fake_stop_accept,
    .read = fake_read,
    .peer = fake_peer,
    .drop = fake_drop,
};

struct fixture {
    char dir[64];
    struct config cfg;
    struct site_slot sites;
    struct worker *worker;
    struct runtime *w; /* the worker's, as the layers below see it */
};

static const char HELLO[] = "hello, world\n";

/* A worker on a document root holding hello.txt, with one more option when opt is not NULL. */
static void setup_args(struct fixture *f, const struct transport_ops *xport, const char *opt,
                       const char *val)
{
    memset(&fake, 0, sizeof(fake));
    strcpy(f->dir, "/tmp/test_conn.XXXXXX");
    CHECK(mkdtemp(f->dir) != NULL);
    char path[128];
    snprintf(path, sizeof(path), "%s/hello.txt", f->dir);
    FILE *fp = fopen(path, "w");
    fputs(HELLO, fp);
    fclose(fp);
    char *argv[] = {"ringhttpd", "-t", "1", "--max-conns", "8", f->dir, NULL, NULL, NULL};
    int argc = 6;
    if (opt) { /* before DOCROOT */
        argv[7] = f->dir;
        argv[5] = (char *)opt;
        argv[6] = (char *)val;
        argc = 8;
    }
    CHECK_INT(config_parse(&f->cfg, argc, argv, NULL), 0);
    site_slot_init(&f->sites, site_adopt(&f->cfg));
    static const struct engine_caps caps;
    struct listener ls = {.fd = -1, .xport = xport};
    const struct worker_parts parts = {
        .cfg = &f->cfg, .eng = &fake_engine, .caps = &caps, .ls = &ls, .n = 1, .sites = &f->sites};
    CHECK_INT(worker_new(&f->worker, 0, &parts), 0);
    f->w = worker_runtime(f->worker);
}

static void setup(struct fixture *f, const struct transport_ops *xport)
{
    setup_args(f, xport, NULL, NULL);
}

static void teardown(struct fixture *f)
{
    worker_free(f->worker);
    site_slot_fini(&f->sites);
    config_free(&f->cfg);
    char path[128];
    snprintf(path, sizeof(path), "%s/hello.txt", f->dir);
    unlink(path);
    rmdir(f->dir);
}

/* Completes the send in flight. */
static void complete(struct fixture *f)
{
    struct conn *c = fake.sending;
    CHECK(c != NULL);
    fake.sending = NULL;
    conn_sent(f->w, &c->eng, 0);
}

static int count(const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = fake.out;
         (p = memmem(p, fake.out_len - (size_t)(p - fake.out), needle, len)); p += len)
        n++;
    return n;
}

static struct conn *open_conn(struct fixture *f)
{
    bool held;
    struct engine_conn *e = conn_accepted(f->w, 100, 0, &held);
    CHECK(e != NULL && !held);
    fake.recv_on = true;
    return conn_of(e);
}

static void feed(struct fixture *f, struct conn *c, const char *s)
{
    conn_received(f->w, &c->eng, s, (ssize_t)strlen(s));
}

/* Finishes a close the connection started, as the engine would. */
static void closed(struct fixture *f, struct conn *c)
{
    CHECK(fake.closing == c && c->state == CONN_CLOSING);
    conn_closed(f->w, &c->eng);
    CHECK(c->state == CONN_FREE);
}

#define GET "GET /hello.txt HTTP/1.1\r\nHost: a\r\n\r\n"

static void pipelining(const struct transport_ops *xport)
{
    struct fixture f;
    setup(&f, xport);
    struct conn *c = open_conn(&f);
    feed(&f, c, GET GET "GET /missing HTTP/1.1\r\nHost: a\r\n\r\n");
    /* One response in flight; the others wait, unparsed, in the input buffer. */
    CHECK_INT(fake.sends, 1);
    CHECK_INT(count("HTTP/1.1 "), 1);
    CHECK(h1_of(c)->state == H1_SENDING && h1_of(c)->in != NULL);
    complete(&f);
    CHECK_INT(count("HTTP/1.1 200 OK"), 2);
    complete(&f);
    CHECK_INT(count("HTTP/1.1 404 "), 1);
    complete(&f);
    CHECK(fake.sending == NULL && h1_of(c)->state == H1_READING && h1_of(c)->in == NULL);
    CHECK_INT(count(HELLO), 2);
    CHECK(fake.recv_on && fake.closes == 0);
    CHECK_INT(f.w->outbufs.count, 0); /* every response back in the pool */
    conn_close(f.w, c);
    closed(&f, c);
    CHECK_INT(f.w->conns.active, 0);
    teardown(&f);
}

TEST(conn_pipelined_requests_in_order)
{
    pipelining(NULL);
}

TEST(conn_pipelined_requests_through_copy_transport)
{
    pipelining(&transport_copy);
}

/* A file segment through the copy transport is read by the engine (engine_ops.read, as TLS
 * reads it) and only then sent: the head goes first, the file's bytes after the read. */
TEST(conn_copy_transport_reads_file_segments_through_the_engine)
{
    struct fixture f;
    setup_args(&f, &transport_copy, "--cache-max-file", "0"); /* hello.txt stays a file */
    struct conn *c = open_conn(&f);
    feed(&f, c, GET);
    CHECK_INT(fake.sends, 1);
    CHECK_INT(count("HTTP/1.1 200 OK"), 1);
    CHECK_INT(fake.reads, 0);
    CHECK_INT(count(HELLO), 0);
    complete(&f);
    CHECK_INT(fake.reads, 1);
    CHECK_INT(fake.sends, 2);
    CHECK_INT(count(HELLO), 1);
    complete(&f);
    CHECK(fake.sending == NULL && h1_of(c)->state == H1_READING);
    conn_close(f.w, c);
    closed(&f, c);
    teardown(&f);
}

TEST(conn_partial_head_is_buffered_then_answered)
{
    struct fixture f;
    setup(&f, NULL);
    struct conn *c = open_conn(&f);
    feed(&f, c, "GET /hello.txt HT");
    CHECK_INT(fake.sends, 0);
    CHECK(h1_of(c)->in != NULL && h1_of(c)->in_len == 17 && h1_of(c)->in_request);
    feed(&f, c, "TP/1.1\r\nHost:");
    CHECK_INT(fake.sends, 0);
    feed(&f, c, " a\r\n\r\n");
    CHECK_INT(fake.sends, 1);
    complete(&f);
    CHECK_INT(count("HTTP/1.1 200 OK"), 1);
    CHECK(h1_of(c)->in == NULL && h1_of(c)->state == H1_READING);
    conn_close(f.w, c);
    closed(&f, c);
    teardown(&f);
}

TEST(conn_close_rules)
{
    struct fixture f;
    setup(&f, NULL);
    /* Connection: close, nothing behind it: answered, then closed at once (no linger). */
    struct conn *c = open_conn(&f);
    feed(&f, c, "GET /hello.txt HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    CHECK(!fake.recv_on); /* nothing after this request is read */
    complete(&f);
    CHECK_INT(count("Connection: close"), 1);
    CHECK_INT(fake.closes, 1);
    CHECK_INT(fake.shutdowns, 0);
    closed(&f, c);

    /* A malformed request: 400, then a lingering close (write side shut, input dropped). */
    c = open_conn(&f);
    feed(&f, c, "GET / HTTP/1.1\r\nbad header\r\n\r\n");
    complete(&f);
    CHECK_INT(count("HTTP/1.1 400 "), 1);
    CHECK_INT(fake.shutdowns, 1);
    CHECK(h1_of(c)->state == H1_LINGERING);
    feed(&f, c, "more junk");
    CHECK(h1_of(c)->state == H1_LINGERING);
    conn_received(f.w, &c->eng, NULL, 0); /* the client closes */
    closed(&f, c);

    /* A body past the discard limit: answered, then the connection ends. */
    c = open_conn(&f);
    feed(&f, c, "GET /hello.txt HTTP/1.1\r\nHost: a\r\nContent-Length: 9999999\r\n\r\nxx");
    CHECK(!h1_of(c)->keep_alive);
    complete(&f);
    CHECK(h1_of(c)->state == H1_LINGERING);
    conn_close(f.w, c);
    closed(&f, c);

    /* A small body is discarded and the connection stays. */
    c = open_conn(&f);
    feed(&f, c, "GET /hello.txt HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab");
    complete(&f);
    CHECK(h1_of(c)->state == H1_READING && h1_of(c)->discard == 3);
    feed(&f, c, "cde" GET);
    CHECK(h1_of(c)->discard == 0 && fake.sending == c);
    complete(&f);
    CHECK(h1_of(c)->state == H1_READING && h1_of(c)->keep_alive);
    conn_close(f.w, c);
    closed(&f, c);
    CHECK_INT(f.w->conns.active, 0);
    teardown(&f);
}

/* Over a transport the stream is ended by the transport first (TLS: close_notify), so even a
 * clean Connection: close goes through its shutdown and the lingering close. */
TEST(conn_close_over_transport_ends_the_stream_first)
{
    struct fixture f;
    setup(&f, &transport_copy);
    struct conn *c = open_conn(&f);
    feed(&f, c, "GET /hello.txt HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    complete(&f);
    CHECK_INT(count("Connection: close"), 1);
    CHECK_INT(fake.shutdowns, 1);
    CHECK_INT(fake.closes, 0);
    CHECK(h1_of(c)->state == H1_LINGERING);
    conn_received(f.w, &c->eng, NULL, 0); /* the client closes */
    closed(&f, c);
    /* The peer gone already: closed at once. */
    c = open_conn(&f);
    feed(&f, c, GET);
    conn_received(f.w, &c->eng, NULL, 0);
    complete(&f);
    CHECK_INT(fake.shutdowns, 1);
    closed(&f, c);
    teardown(&f);
}

static void resume_cb(void *arg, struct resume_token t)
{
    conn_resume(arg, t);
}

/* Waits (10 s at most) for the worker's verifier to finish and hands its tokens back, as
 * worker_tick does. */
static void collect_auth(struct fixture *f)
{
    struct pollfd p = {.fd = f->w->wake_fd, .events = POLLIN};
    CHECK_INT(poll(&p, 1, 10000), 1);
    uint64_t n;
    CHECK(read(f->w->wake_fd, &n, sizeof(n)) == (ssize_t)sizeof(n));
    auth_collect(f->w->auth, resume_cb, f->w);
}

/* Issue 26: a request whose password is being verified off the loop gets serve's
 * SERVE_PENDING; HTTP/1 parks it unparsed (nothing is sent, the bytes stay in its input) and
 * answers it when the verifier's resume token comes back through conn_resume. A token whose
 * connection has closed meanwhile is dropped. */
TEST(conn_request_waiting_for_a_password_is_parked_then_answered)
{
    char pw[] = "/tmp/test_conn_pw.XXXXXX";
    int fd = mkstemp(pw);
    CHECK(fd >= 0);
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    static struct crypt_data data; /* 32 KiB: not on the stack */
    CHECK(crypt_gensalt_rn("$2b$", 4, NULL, 0, salt, sizeof(salt)) != NULL);
    const char *hash = crypt_rn("wonder", salt, &data, sizeof(data));
    CHECK(hash && hash[0] == '$');
    CHECK(dprintf(fd, "alice:%s\n", hash) > 0);
    close(fd);
    char rule[64];
    snprintf(rule, sizeof(rule), "/=%s", pw);

    struct fixture f;
    setup_args(&f, NULL, "--basic-auth", rule);
    struct conn *c = open_conn(&f);
    /* "alice:wonder", then a second request pipelined behind it */
    feed(&f, c,
         "GET /hello.txt HTTP/1.1\r\nHost: a\r\nAuthorization: Basic YWxpY2U6d29uZGVy\r\n\r\n" GET);
    CHECK_INT(fake.sends, 0); /* parked: nothing answered yet */
    CHECK(h1_of(c)->state == H1_READING && h1_of(c)->in != NULL);
    collect_auth(&f);
    CHECK_INT(fake.sends, 1);
    CHECK_INT(count("HTTP/1.1 200 OK"), 1);
    complete(&f);
    CHECK_INT(count("HTTP/1.1 401 "), 1); /* the second had no credentials */
    complete(&f);
    CHECK(fake.sending == NULL && h1_of(c)->in == NULL);

    /* A wrong password: the connection closes before the verdict; its token is stale. */
    feed(&f, c, "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Basic YWxpY2U6bm8=\r\n\r\n");
    CHECK_INT(fake.sends, 2);
    conn_close(f.w, c);
    closed(&f, c);
    collect_auth(&f); /* conn_resume finds the slot free: nothing happens */
    CHECK_INT(fake.sends, 2);
    CHECK_INT(f.w->conns.active, 0);
    teardown(&f);
    unlink(pw);
}

/* What an attached connection's owner (HTTP/3's session) was asked. */
static struct {
    struct conn *resumed, *reclaimed;
    int resumes, reclaims;
} owner;

static void owner_resume(struct runtime *w, struct conn *c)
{
    (void)w;
    owner.resumed = c;
    owner.resumes++;
}

static void owner_reclaim(struct runtime *w, struct conn *c)
{
    (void)w;
    owner.reclaimed = c;
    owner.reclaims++;
}

/* A client reset while it waited to be accepted has no address to log or limit by: conn takes
 * no slot for it (the engine closes the socket unread), and the next client gets one. */
TEST(conn_a_client_gone_before_its_accept_takes_no_slot)
{
    struct fixture f;
    setup(&f, NULL); /* --max-conns 8 */
    f.w->want_peer = true;
    fake.peer_gone = true;
    bool held;
    CHECK(conn_accepted(f.w, 100, 0, &held) == NULL && !held);
    CHECK_INT(f.w->conns.active, 0);
    CHECK_INT(f.w->conns.num_free, 8);
    fake.peer_gone = false;
    struct conn *c = open_conn(&f);
    CHECK_INT(f.w->conns.active, 1);
    feed(&f, c, "GET /hello.txt HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    complete(&f);
    closed(&f, c);
    teardown(&f);
}

/* Issue 37: a connection without a socket (conn_attach: HTTP/3's) in a slot of its own: it
 * counts against --max-conns, its token resumes it (stale once detached), it is not conn_open
 * (no engine call for it), and idle it is reclaimed for a TCP newcomer, who is held until the
 * owner detaches it. */
TEST(conn_attached_slots_resume_and_reclaim)
{
    static const struct proto_ops ops = {
        .name = "owner", .resume = owner_resume, .reclaim = owner_reclaim};
    struct fixture f;
    setup(&f, NULL); /* --max-conns 8 */
    memset(&owner, 0, sizeof(owner));
    struct conn *c[8];
    int tag[8];
    for (int i = 0; i < 8; i++) {
        c[i] = conn_attach(f.w, &ops, &tag[i]);
        CHECK(c[i] != NULL && c[i]->pstate == &tag[i] && !conn_open(c[i]));
    }
    CHECK(conn_attach(f.w, &ops, NULL) == NULL); /* every slot taken */
    CHECK_INT(f.w->conns.attached, 8);
    CHECK_INT(f.w->conns.active, 0);

    struct resume_token t = conn_token(c[3]);
    conn_resume(f.w, t);
    CHECK(owner.resumes == 1 && owner.resumed == c[3]);

    /* Full, c[5] idle: a TCP newcomer is held and c[5] reclaimed for it. */
    conn_idle(f.w, c[5], true);
    bool held;
    CHECK(conn_accepted(f.w, 100, 0, &held) == NULL && held);
    CHECK(owner.reclaims == 1 && owner.reclaimed == c[5] && !c[5]->idle);
    unsigned lst;
    CHECK_INT(conn_held_take(f.w, &lst), -1); /* no slot until the owner ends it */
    conn_detach(f.w, c[5]);
    CHECK_INT(conn_held_take(f.w, &lst), 100);
    CHECK_INT(f.w->conns.reclaiming, 0);

    conn_detach(f.w, c[3]);
    conn_resume(f.w, t); /* stale: its slot is free */
    CHECK_INT(owner.resumes, 1);
    conn_idle(f.w, c[0], true); /* detached while idle: off the queue too */
    for (int i = 0; i < 8; i++)
        if (i != 3 && i != 5)
            conn_detach(f.w, c[i]);
    CHECK(f.w->conns.idle.first == NULL);
    CHECK_INT(f.w->conns.attached, 0);
    teardown(&f);
}
