/* The epoll engine: edge-triggered, non-blocking, for kernels or sandboxes without io_uring
 * (Docker's default seccomp profile, kernel.io_uring_disabled).
 *
 * It offers the same completion-style operations as the io_uring engine by trying each call at
 * once and finishing it on readiness. Completions are never reported from inside the call that
 * started them: they go on a ready list the loop drains after each batch of events, so a
 * pipelined burst cannot recurse through conn and the engine. Each worker has its own
 * SO_REUSEPORT listener and epoll set, so no two workers wake for one connection.
 *
 * A file read (ep_read: TLS's, and HTTP/3's on its connection's slot, which has no socket)
 * first tries preadv2(RWF_NOWAIT), which succeeds at
 * once when the bytes are in the page cache (a hot file costs what pread cost). A cold file
 * (EAGAIN, or a file system without RWF_NOWAIT) is read by one of the worker's reader threads
 * (rt/offload.h) while the loop goes on; the thread wakes the loop (wake_fd), which collects
 * the finished reads and reports them. A connection closed while its read is with a thread gets
 * conn_closed only after the read ended, so the buffer stays valid and the slot is not reused;
 * a read still with a thread when the worker has drained is waited for before run returns.
 * epoll cannot do this in the kernel as io_uring does: Linux has no readiness for regular
 * files, and POSIX AIO is glibc's own threads with a lock per call.
 *
 * Files go by sendfile from the loop (a cold file blocks it). An interleaved plan (HTTP/2 DATA
 * frames: a 9-byte header per 16 KiB of file) would take a sendfile and a sendmsg per frame;
 * while a pipe of the worker's pool (engine/pipepool.h, sized as the io_uring engine's) is
 * free, its headers and file ranges are put into the pipe in order and leave by one splice per
 * pipe-full (sendplan_composed). A connection keeps its pipe only while bytes wait in it; none
 * is waited for or taken: without one, the plan goes corked by sendplan_now. */
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "config/config.h"
#include "engine/pipepool.h"
#include "engine/sendplan.h"
#include "engine/sockops.h"
#include "engine/tag.h"
#include "engine/udp.h"
#include "rt/offload.h"
#include "rt/pipesize.h"
#include "rt/runtime.h"

#define MAX_EVENTS 512
#define ACCEPT_BATCH 64 /* per readiness event: the listener is level-triggered */
#define RECV_BUF 16384
#define READERS 4 /* reader threads per worker at most, started one by one as cold reads wait */
#define PIPE_BYTES (1u << 20) /* asked of F_SETPIPE_SZ, as the io_uring engine does */
#define PIPE_IDLE 10          /* seconds a free pipe is kept before it is closed */

enum kind { K_LISTEN = 1, K_WAKE, K_CONN, K_UDP };

/* econn.flags bits */
#define F_READABLE 0x1     /* an edge arrived and recv has not yet seen EAGAIN */
#define F_WANT_OUT 0x2     /* a send waits for EPOLLOUT */
#define F_SENT 0x4         /* ready list: report conn_sent */
#define F_READ 0x8         /* ready list: read what is pending */
#define F_CLOSED 0x10      /* ready list: report conn_closed */
#define F_QUEUED 0x20      /* on the ready list */
#define F_HUP 0x40         /* the peer's FIN (or an error) has been signalled: read to the end */
#define F_READ_DONE 0x80   /* ready list: report conn_read_done (rres) */
#define F_READ_WAIT 0x100  /* a reader thread reads for it */
#define F_CLOSE_WAIT 0x200 /* closed while a thread reads for it: conn_closed after the read */
#define F_RECV_OFF 0x400   /* conn asked receiving off (engine_ops.recv): read nothing */
#define F_CLOSING 0x800    /* close() was called: its events no longer matter */

/* A cold file read handed to a reader thread; one per slot (a connection has one at most). */
struct rjob {
    struct offload_job job; /* first: the threads run it (read_job) */
    int fd;
    void *buf;
    uint32_t len;
    uint64_t off;
    int res; /* bytes read or -errno, written by the thread */
    uint32_t slot;
};

struct ep {
    int epfd;
    struct engine_conn *ready;
    struct offload readers; /* threads for cold file reads, started on first use */
    struct rjob *jobs;      /* max_conns slots, made at the first cold read */
    struct pipepool pool;   /* pipes for interleaved plans; pool.slots NULL when there are none */
    char buf[RECV_BUF];
};

/* Whether c's socket is in use and its events matter: close() has not been called. */
static inline bool live(const struct engine_conn *c)
{
    return !(c->flags & F_CLOSING);
}

/* An fd's epoll data (engine/tag.h): for c, or for the worker when c is NULL. */
static uint64_t tag(enum kind k, const struct engine_conn *c)
{
    return c ? tag_encode(k, c->gen, c->slot) : tag_encode(k, 0, 0);
}

/* A listener's: its index in the slot field. */
static uint64_t listen_tag(unsigned lst)
{
    return tag_encode(K_LISTEN, 0, lst);
}

static int listen_add(struct ep *e, struct runtime *w, unsigned lst)
{
    struct epoll_event lev = {.events = EPOLLIN, .data.u64 = listen_tag(lst)};
    return epoll_ctl(e->epfd, EPOLL_CTL_ADD, w->listeners[lst].fd, &lev);
}

static void queue(struct ep *e, struct engine_conn *c, uint32_t what)
{
    c->flags |= what;
    if (!(c->flags & F_QUEUED)) {
        c->flags |= F_QUEUED;
        c->next = e->ready;
        e->ready = c;
    }
}

/* The worker's pipes for interleaved plans (made on first use). Without them (no memory),
 * every plan goes by sendplan_now. */
static void setup_pipes(struct runtime *w, struct ep *e)
{
    struct pipe_limits lim;
    struct pipe_plan plan;
    pipesize_read(&lim);
    pipesize_plan(&lim, w->cfg->splice_pipes, PIPE_BYTES, (unsigned)w->cfg->threads, &plan);
    if (pipepool_init(&e->pool, w->cfg->max_conns, plan.count, plan.bytes) < 0)
        e->pool.slots = NULL;
}

static int ep_init(struct runtime *w)
{
    struct ep *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    if (offload_init(&e->readers, READERS, w->wake_fd) != 0) {
        free(e);
        return -ENOMEM;
    }
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event wev = {.events = EPOLLIN, .data.u64 = tag(K_WAKE, NULL)};
    bool ok = e->epfd >= 0 && epoll_ctl(e->epfd, EPOLL_CTL_ADD, w->wake_fd, &wev) == 0;
    for (unsigned i = 0; ok && i < w->nlisteners; i++)
        ok = listen_add(e, w, i) == 0;
    if (!ok) {
        int err = -errno;
        if (e->epfd >= 0)
            close(e->epfd);
        offload_fini(&e->readers);
        free(e);
        return err;
    }
    setup_pipes(w, e);
    w->engine_state = e;
    return 0;
}

static void ep_fini(struct runtime *w)
{
    struct ep *e = w->engine_state;
    if (!e)
        return;
    close(e->epfd);
    offload_fini(&e->readers); /* every read was collected: its connection had to close */
    free(e->jobs);
    if (e->pool.slots)
        pipepool_fini(&e->pool);
    free(e);
    w->engine_state = NULL;
}

static void ep_recv(struct runtime *w, struct engine_conn *c, bool on)
{
    /* Off: we simply stop reading. On again: read what the last edge left. */
    struct ep *e = w->engine_state;
    if (!on) {
        c->flags |= F_RECV_OFF;
        return;
    }
    c->flags &= ~(uint32_t)F_RECV_OFF;
    if (c->flags & F_READABLE)
        queue(e, c, F_READ);
}

/* c's plan, its file bytes through a pipe (see the top of this file) when it is interleaved
 * and a pipe is free, or already holds some of them. */
static int pipe_send(struct runtime *w, struct ep *e, struct engine_conn *c)
{
    struct plan *p = c->out;
    struct pipepool_slot *ph = pipepool_slot(&e->pool, c->slot);
    uint32_t robbed; /* never set: this engine parks no pipe */
    if (!ph->pipe && (!sendplan_interleaved(p) || !pipepool_acquire(&e->pool, c->slot, &robbed)))
        return sendplan_now(c->fd, p);
    /* The pool made the write end non-blocking: a full pipe ends the fill, not the loop. */
    int rc = sendplan_composed(c->fd, p, ph->pipe->fd, ph->pipe->cap, &ph->in_pipe,
                               pipepool_template(&e->pool));
    if (ph->in_pipe == 0)
        pipepool_put(&e->pool, c->slot, w->now); /* kept only while bytes wait in it */
    if (rc == -ENODATA)
        rc = sendplan_now(c->fd, p);
    return rc;
}

/* Sends (the rest of) c->out; EPOLLOUT's edge calls it again. */
static void send_out(struct runtime *w, struct ep *e, struct engine_conn *c)
{
    int rc = e->pool.slots ? pipe_send(w, e, c) : sendplan_now(c->fd, c->out);
    if (rc == -EAGAIN) {
        c->flags |= F_WANT_OUT; /* EPOLLOUT's next edge resumes it */
        return;
    }
    c->err = rc;
    queue(e, c, F_SENT);
}

static void ep_send(struct runtime *w, struct engine_conn *c, struct plan *p)
{
    c->out = p;
    send_out(w, w->engine_state, c);
}

static void ep_shutdown(struct runtime *w, struct engine_conn *c)
{
    (void)w;
    shutdown(c->fd, SHUT_WR);
}

static void ep_close(struct runtime *w, struct engine_conn *c)
{
    /* close() drops the fd from the epoll set; events already fetched for it are recognised
     * by F_CLOSING now and by the generation once the slot is reused. */
    struct ep *e = w->engine_state;
    close(c->fd);
    if (e->pool.slots)
        pipepool_release(&e->pool, c->slot, w->now); /* a pipe with bytes in it is closed */
    c->flags &= ~(uint32_t)(F_WANT_OUT | F_READABLE);
    c->flags |= F_CLOSING;
    if (c->flags & F_READ_WAIT)
        c->flags |= F_CLOSE_WAIT; /* a thread still writes into the transport's buffer */
    else
        queue(e, c, F_CLOSED);
}

static void read_job(struct offload_job *oj)
{
    struct rjob *j = (struct rjob *)oj;
    ssize_t n = pread(j->fd, j->buf, j->len, (off_t)j->off);
    j->res = n < 0 ? -errno : (int)n;
}

/* Hands a cold read to a reader thread: 0, or -errno when none can take it. */
static int read_offload(struct runtime *w, struct ep *e, struct engine_conn *c, int fd, void *buf,
                        uint32_t len, uint64_t off)
{
    if (!e->jobs && !(e->jobs = calloc(w->cfg->max_conns, sizeof(*e->jobs))))
        return -ENOMEM;
    struct rjob *j = &e->jobs[c->slot];
    *j = (struct rjob){
        .job.run = read_job, .fd = fd, .buf = buf, .len = len, .off = off, .slot = c->slot};
    int rc = offload_submit(&e->readers, &j->job);
    if (rc < 0)
        return rc;
    c->flags |= F_READ_WAIT;
    return 0;
}

static void ep_read(struct runtime *w, struct engine_conn *c, int fd, void *buf, uint32_t len,
                    uint64_t off)
{
    struct ep *e = w->engine_state;
    struct iovec iov = {buf, len};
    ssize_t n = preadv2(fd, &iov, 1, (off_t)off, RWF_NOWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EOPNOTSUPP)) {
        if (read_offload(w, e, c, fd, buf, len, off) == 0)
            return;
        n = pread(fd, buf, len, (off_t)off); /* no thread to be had: on the loop, as before */
    }
    c->rres = n < 0 ? -errno : (int32_t)n;
    queue(e, c, F_READ_DONE);
}

/* Once per loop turn while reads are with the threads: report the finished ones. */
static void collect_reads(struct runtime *w, struct ep *e)
{
    struct offload_job *done = offload_done(&e->readers);
    while (done) {
        struct rjob *j = (struct rjob *)done;
        done = done->next;
        struct engine_conn *c = engine_conn_at(&w->eslots, j->slot);
        c->flags &= ~(uint32_t)F_READ_WAIT;
        if (c->flags & F_CLOSE_WAIT) {
            c->flags &= ~(uint32_t)F_CLOSE_WAIT;
            queue(e, c, F_CLOSED);
            continue;
        }
        c->rres = j->res;
        queue(e, c, F_READ_DONE);
    }
}

/* Takes one accepted (or held, see conn_accepted) socket: a connection in the epoll set, held
 * for a slot being reclaimed, or closed when none can be had. */
static bool accept_one(struct runtime *w, int fd, unsigned lst)
{
    struct ep *e = w->engine_state;
    bool held;
    struct engine_conn *c = w->up->accepted(w, fd, lst, &held);
    if (!c) {
        if (!held)
            close(fd);
        return true;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                             .data.u64 = tag(K_CONN, c)};
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
        w->up->close(w, c);
    return true;
}

static void ep_stop_accept(struct runtime *w)
{
    struct ep *e = w->engine_state;
    for (unsigned i = 0; i < w->nlisteners; i++) {
        if (w->listeners[i].fd >= 0)
            epoll_ctl(e->epfd, EPOLL_CTL_DEL, w->listeners[i].fd, NULL);
        w->up->close_listener(w, i, accept_one);
    }
}

/* The listener is level-triggered: a pending connection that accept4 cannot take (EMFILE) is
 * reported again at once, forever (issue 10: 100% CPU). So on a shortage the listener leaves
 * the epoll set until the accept_resume upcall lets it back. */
static void do_accept(struct runtime *w, struct ep *e, unsigned lst)
{
    int lfd = w->listeners[lst].fd;
    for (int i = 0; i < ACCEPT_BATCH && lfd >= 0 && !w->accept_paused; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && w->up->accept_failed(w, -errno)) {
                for (unsigned j = 0; j < w->nlisteners; j++)
                    if (w->listeners[j].fd >= 0)
                        epoll_ctl(e->epfd, EPOLL_CTL_DEL, w->listeners[j].fd, NULL);
            }
            return;
        }
        accept_one(w, fd, lst);
    }
}

/* Once per loop turn: sockets held for reclaimed slots, and a paused listener. */
static void accept_more(struct runtime *w, struct ep *e)
{
    int fd;
    unsigned lst;
    while ((fd = w->up->held_take(w, &lst)) >= 0)
        accept_one(w, fd, lst);
    if (w->accept_paused && w->up->listening(w) && w->up->accept_resume(w)) {
        for (unsigned i = 0; i < w->nlisteners; i++)
            if (w->listeners[i].fd >= 0)
                listen_add(e, w, i);
    }
}

static void do_read(struct runtime *w, struct ep *e, struct engine_conn *c)
{
    while (!(c->flags & (F_RECV_OFF | F_CLOSING))) {
        ssize_t n = recv(c->fd, e->buf, sizeof(e->buf), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            c->flags &= ~(uint32_t)F_READABLE;
            return;
        }
        w->up->received(w, c, e->buf, n < 0 ? -errno : n);
        if (n <= 0)
            return;
        /* A short read emptied the receive queue: bytes that arrive later raise a new edge, so
         * the recv that would only say EAGAIN is skipped (one system call in three per
         * keep-alive request). Not once the FIN has been signalled: its edge has passed, and
         * only reading on finds the end of the stream. */
        if ((size_t)n < sizeof(e->buf) && !(c->flags & F_HUP)) {
            c->flags &= ~(uint32_t)F_READABLE;
            return;
        }
    }
}

static void on_conn(struct runtime *w, struct ep *e, struct engine_conn *c, uint32_t events)
{
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        c->flags |= F_READABLE;
        if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            c->flags |= F_HUP;
        do_read(w, e, c);
    }
    if ((events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) && (c->flags & F_WANT_OUT) && live(c)) {
        c->flags &= ~(uint32_t)F_WANT_OUT;
        send_out(w, e, c);
    }
}

static void run_ready(struct runtime *w, struct ep *e)
{
    while (e->ready) {
        struct engine_conn *c = e->ready;
        e->ready = c->next;
        uint32_t what = c->flags;
        c->flags &= ~(uint32_t)(F_QUEUED | F_SENT | F_READ | F_CLOSED | F_READ_DONE);
        if (what & F_CLOSED) {
            c->flags = 0;
            w->up->closed(w, c);
            continue;
        }
        if ((what & F_SENT) && live(c))
            w->up->sent(w, c, c->err);
        if ((what & F_READ_DONE) && live(c))
            w->up->read_done(w, c, c->rres);
        if ((what & F_READ) && (c->flags & F_READABLE))
            do_read(w, e, c);
    }
}

static int ep_run(struct runtime *w)
{
    struct ep *e = w->engine_state;
    struct epoll_event events[MAX_EVENTS];

    /* Level-triggered: what one read leaves wakes the next turn. Each port's index in the
     * slot field, as a listener's. */
    for (unsigned i = 0; i < w->nudp; i++) {
        struct epoll_event uev = {.events = EPOLLIN, .data.u64 = tag_encode(K_UDP, 0, i)};
        if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, w->udp[i]->fd, &uev) != 0)
            return -errno;
    }
    while (w->up->tick(w)) {
        accept_more(w, e);
        int n = epoll_wait(e->epfd, events, MAX_EVENTS, e->ready ? 0 : w->up->wait_ms(w));
        if (n < 0 && errno != EINTR)
            return -errno;
        w->up->loop_turn(w, 1, n > 0 ? (unsigned)n : 0);
        for (int i = 0; i < n; i++) {
            struct tag t = tag_decode(events[i].data.u64);
            enum kind k = (enum kind)t.op;
            if (k == K_LISTEN) {
                if (t.slot < w->nlisteners)
                    do_accept(w, e, t.slot);
            } else if (k == K_UDP) {
                if (t.slot < w->nudp)
                    (void)udp_port_read(w->udp[t.slot], UDP_TURN_BATCHES);
            } else if (k == K_WAKE) {
                uint64_t v;
                if (read(w->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                    return -errno;
            } else {
                struct engine_conn *c = engine_conn_at(&w->eslots, t.slot);
                if (tag_is_current(t, c->gen) && live(c))
                    on_conn(w, e, c, events[i].events);
            }
        }
        if (e->readers.count) /* reads with the threads: collected each loop turn */
            collect_reads(w, e);
        run_ready(w, e);
        if (e->pool.slots)
            pipepool_trim(&e->pool, w->now, PIPE_IDLE);
    }
    /* Drained; a read with a thread is an attached connection's (a TCP one's close waited
     * for it): its owner frees the buffer once it is reported, so it is waited for here,
     * on the wake its thread writes, and nothing else is served meanwhile. */
    while (e->readers.count || e->ready) {
        struct pollfd pfd = {.fd = w->wake_fd, .events = POLLIN};
        uint64_t v;
        if (!e->ready && poll(&pfd, 1, -1) > 0 && read(w->wake_fd, &v, sizeof(v)) < 0 &&
            errno != EAGAIN)
            return -errno;
        if (e->readers.count)
            collect_reads(w, e);
        run_ready(w, e);
    }
    return 0;
}

const struct engine_ops engine_epoll = {
    .name = "epoll",
    .init = ep_init,
    .fini = ep_fini,
    .run = ep_run,
    .recv = ep_recv,
    .send = ep_send,
    .shutdown = ep_shutdown,
    .close = ep_close,
    .stop_accept = ep_stop_accept,
    .read = ep_read,
    .peer = sockops_peer,
    .ktls = sockops_ktls,
    .drop = sockops_drop,
};
