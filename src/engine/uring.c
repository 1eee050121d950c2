/* The io_uring engine.
 *
 * Techniques (kernel >= 6.1, liburing >= 2.3): multishot accept; multishot recv into a
 * provided buffer ring, each buffer handed back as soon as conn has looked at it; one
 * io_uring_enter per loop turn (drain every completion, prepare what they cause, submit and
 * wait together); SINGLE_ISSUER | DEFER_TASKRUN where the kernel has them. Memory segments leave
 * with SEND or SENDMSG (MSG_MORE while more follows); 16 KiB or more by sendmsg at once
 * (send_out says why).
 *
 * What the kernel offers is probed once per process (uring_probe, engine/uring_probe.c) into
 * the struct engine_caps every worker reads as w->caps: the setup mode it accepts, its opcodes,
 * and each mode the engine relies on tried for real. Workers set up their rings in that mode and
 * never probe again. SQEs come from engine/sqe.h, which flushes a full SQ and keeps what the
 * kernel will not take in an ordered spill list: no caller ever sees a NULL SQE.
 *
 * File ranges (issue 5: zero-copy without blocking the loop), by --file-send:
 * - splice (default): the splice walk, engine/uring_splice.c.
 * - sendfile: sendplan (sendfile from the loop, zero-copy) and a POLL_ADD when the socket is
 *   full; it blocks the loop while a cold file is read.
 * A transport that must copy file bytes (TLS), and HTTP/3 through its connection's slot (no
 * socket), read them (uring_read) with preadv2(RWF_NOWAIT) first, which a page cache hit completes
 * at pread's cost, and on a miss with IORING_OP_READ, which the kernel serves without the loop
 * waiting through the file system's asynchronous buffered reads (ext4, xfs, btrfs...). READ alone
 * cost a loop turn per read: HTTP/2 over TLS reads 16 KiB a DATA frame, and 1 MiB responses took
 * 13% more CPU (bench/README.md, HTTPS). A file system that reads ahead synchronously (FUSE without
 * FUSE_ASYNC_READ) is read inline even by READ, blocking the loop as pread did (seen with
 * tests/integration/slowfs.py before it asked for async reads).
 *
 * Every operation carries its connection's slot and generation in user_data; a connection's
 * slot is reused only after its last completion arrived, and a completion whose generation
 * does not match is dropped (nginx's "instance bit", widened). */

#include "engine/engine.h"

#include <assert.h>
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "config/config.h"
#include "engine/caps.h"
#include "engine/sendplan.h"
#include "engine/sockops.h"
#include "engine/sqe.h"
#include "engine/uring_probe.h"
#include "engine/uring_splice.h"
#include "engine/uring_state.h"
#include "engine/udp.h"
#include "engine/uring_udp.h"
#include "rt/errlog.h"
#include "rt/runtime.h"

#define BUF_COUNT 1024 /* power of two */
#define BUF_SIZE 4096
#define BGID 0
#define PIPE_IDLE 10              /* seconds a free pipe is kept before it is closed */
#define SEND_IOV 16               /* memory segments one SENDMSG takes */
#define SEND_NOW_MIN (16u << 10)  /* memory bytes sent by sendmsg at once (send_out) */
#define SEND_NOW_TURN (16u << 20) /* ... and at most these a loop turn (4 MiB: 0.36 CPU-s/GB) */

/* uconn.flags bits */
#define F_RECV 0x1        /* a multishot recv is armed */
#define F_RECV_CANCEL 0x2 /* ... and its cancellation was requested */
#define F_CLOSING 0x4     /* close() was called: cancel, then IORING_OP_CLOSE */
#define F_CLOSE_SENT 0x8
#define F_READY 0x10       /* on the ready list */
#define F_SENT 0x20        /* ... to report conn_sent (sendplan finished synchronously) */
#define F_CLOSED 0x40      /* ... to report conn_closed (closed without a completion to wait for) */
#define F_MULTI 0x80       /* the connection has had a request: its recvs are multishot */
#define F_FREAD 0x100      /* an OP_FREAD is in flight */
#define F_FREAD_DONE 0x200 /* ready list: report a file read that finished at once (rres) */
#define F_RECV_OFF 0x400   /* conn asked receiving off (engine_ops.recv): re-arm nothing */

/* A connection's SENDMSG scratch, by slot: the kernel reads it until the send completes. */
struct usend {
    struct msghdr msg;
    struct iovec iov[SEND_IOV];
};

/* The mode the probe found the kernel accepts (caps.setup): workers do not step down again. */
static int setup_ring(struct uring *u, const struct engine_caps *caps)
{
    struct io_uring_params p = {
        .flags = uring_setup_flags(caps->setup) | IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED,
        .cq_entries = CQ_ENTRIES,
    };
    return io_uring_queue_init_params(SQ_ENTRIES, &u->ring, &p);
}

static int setup_buffers(struct uring *u)
{
    u->bufs = malloc((size_t)BUF_COUNT * BUF_SIZE);
    if (!u->bufs)
        return -ENOMEM;
    return buf_ring_setup(&u->ring, BGID, BUF_COUNT, u->bufs, BUF_SIZE, &u->br);
}

static void release_buffers(struct uring *u)
{
    if (u->br)
        munmap(u->br, BUF_COUNT * sizeof(struct io_uring_buf));
    free(u->bufs);
}

static int uring_init(struct runtime *w)
{
    struct uring *u = calloc(1, sizeof(*u));
    if (!u)
        return -ENOMEM;
    int rc = setup_ring(u, w->caps);
    if (rc < 0) {
        free(u);
        return rc;
    }
    u->cqe_skip = w->caps->cqe_skip;
    unsigned f = u->ring.features, fl = u->ring.flags;
    snprintf(w->features, sizeof(w->features), "%s%s%s%s%s%s",
             fl & IORING_SETUP_SINGLE_ISSUER ? "single_issuer," : "",
             fl & IORING_SETUP_DEFER_TASKRUN ? "defer_taskrun," : "",
             fl & IORING_SETUP_COOP_TASKRUN ? "coop_taskrun," : "",
             f & IORING_FEAT_FAST_POLL ? "fast_poll," : "", f & IORING_FEAT_NODROP ? "nodrop," : "",
             u->cqe_skip ? "cqe_skip," : "");
    size_t flen = strlen(w->features);
    if (flen)
        w->features[flen - 1] = '\0';
    u->sends = calloc(w->cfg->max_conns, sizeof(*u->sends));
    if (!u->sends)
        rc = -ENOMEM;
    if (rc < 0 || (rc = setup_buffers(u)) < 0 || (rc = uring_splice_setup(w, u)) < 0) {
        free(u->sends);
        uring_splice_release(w, u);
        release_buffers(u);
        io_uring_queue_exit(&u->ring);
        free(u);
        return rc;
    }
    w->engine_state = u;
    return 0;
}

static void uring_fini(struct runtime *w)
{
    struct uring *u = w->engine_state;
    if (!u)
        return;
    io_uring_queue_exit(&u->ring);
    uring_udp_stop(u);       /* its buffers, now that no operation can write them */
    uring_udp_tx_stop(w, u); /* and the sends' copies, none of which is in flight now */
    sqe_spill_free(&u->spill);
    uring_splice_release(w, u);
    release_buffers(u);
    free(u->sends);
    free(u);
    w->engine_state = NULL;
}

/* A listener's operations carry its index in the tag's slot field. */
static void arm_accept(struct runtime *w, struct uring *u, unsigned lst)
{
    struct io_uring_sqe *sqe = get_sqe(u);
    io_uring_prep_multishot_accept(sqe, w->listeners[lst].fd, NULL, NULL,
                                   SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, tag_encode(OP_ACCEPT, 0, lst));
    u->accept_armed[lst] = true;
}

static void arm_wake(struct runtime *w, struct uring *u)
{
    struct io_uring_sqe *sqe = get_sqe(u);
    io_uring_prep_read(sqe, w->wake_fd, &u->wake_val, sizeof(u->wake_val), 0);
    io_uring_sqe_set_data64(sqe, ud(OP_WAKE, NULL));
}

/* HTTP/3's UDP socket: a multishot poll whose completions say "readable"; the datagrams are
 * then read in batches (udp_port_read, recvmmsg), not by a recvmsg operation per datagram. */
static void arm_udp(struct runtime *w, struct uring *u, unsigned i)
{
    struct io_uring_sqe *sqe = get_sqe(u);
    io_uring_prep_poll_multishot(sqe, w->udp[i]->fd, POLLIN);
    io_uring_sqe_set_data64(sqe, tag_encode(OP_UDP, 0, i)); /* the port's index, as a listener's */
}

/* One TIMEOUT per worker, re-armed as it fires, wakes the loop for the timer wheel. Waiting
 * with a timeout argument instead (io_uring_submit_and_wait_timeout) made liburing 2.3 submit
 * without GETEVENTS whenever a completion was already there, and under DEFER_TASKRUN such an
 * enter runs no task work: waiting the ceiling server's way is cheaper per request (the
 * measurement is in bench/README.md, "Wait with io_uring_submit_and_wait"). */
static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void set_tick(struct uring *u, int ms)
{
    u->tick = (struct __kernel_timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    u->tick_due = mono_ns() + (uint64_t)ms * 1000000u;
    u->tick_ms = ms;
}

static void arm_tick(struct runtime *w, struct uring *u)
{
    set_tick(u, w->up->wait_ms(w));
    struct io_uring_sqe *sqe = get_sqe(u);
    io_uring_prep_timeout(sqe, &u->tick, 0, 0);
    io_uring_sqe_set_data64(sqe, ud(OP_TICK, NULL));
}

/* HTTP/3's timers move within a turn (a datagram asks for an acknowledgement within 25 ms):
 * when the next one now falls before the armed tick, the tick is moved up (TIMEOUT_UPDATE),
 * so the wait needs no ceiling shorter than the wheel's and an idle connection wakes nobody.
 * Asked only while the worker has a UDP port: TCP's timers live on the one-second wheel. */
static void retick(struct runtime *w, struct uring *u)
{
    int ms = w->up->wait_ms(w);
    if (ms >= u->tick_ms) /* not before the armed tick, which waits at most that long */
        return;
    if (mono_ns() + (uint64_t)ms * 1000000u + 1000000u >= u->tick_due)
        return;
    set_tick(u, ms);
    struct io_uring_sqe *sqe = get_sqe(u);
    io_uring_prep_timeout_update(sqe, &u->tick, ud(OP_TICK, NULL), 0);
    io_uring_sqe_set_data64(sqe, ud(OP_IGNORE, NULL)); /* -ENOENT: it fired meanwhile */
    if (u->cqe_skip)
        sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

/* A new connection's first recv is single-shot: a client that sends one request with
 * Connection: close then needs no cancellation before its close. From the second recv on, the
 * connection has shown it stays, and its recv becomes multishot. */
static void arm_recv(struct uring *u, struct engine_conn *c)
{
    struct io_uring_sqe *sqe = conn_sqe(u, c, OP_RECV);
    if (c->flags & F_MULTI)
        io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
    else
        io_uring_prep_recv(sqe, c->fd, NULL, BUF_SIZE, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BGID;
    c->flags |= F_RECV;
}

static void make_ready(struct uring *u, struct engine_conn *c, uint32_t what)
{
    if (!(c->flags & F_READY)) {
        c->next = u->ready;
        u->ready = c;
    }
    c->flags |= F_READY | what;
}

static void submit_close(struct runtime *w, struct uring *u, struct engine_conn *c)
{
    uring_splice_drop(w, u, c); /* nothing is in flight: the pipe is c's to give back */
    c->flags |= F_CLOSE_SENT;
    if (u->cqe_skip) {
        /* Nothing else is in flight, so the slot is free once the close is queued; only a
         * failed close posts a completion, and its generation is stale by then. */
        struct io_uring_sqe *sqe = get_sqe(u);
        io_uring_prep_close(sqe, c->fd);
        io_uring_sqe_set_data64(sqe, ud(OP_CLOSE, c));
        sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
        make_ready(u, c, F_CLOSED);
        return;
    }
    io_uring_prep_close(conn_sqe(u, c, OP_CLOSE), c->fd);
}

/* A completion for c arrived; when it was the last one of a closing connection, close. */
static void op_done(struct runtime *w, struct uring *u, struct engine_conn *c)
{
    assert(c->inflight > 0);
    c->inflight--;
    if ((c->flags & F_CLOSING) && c->inflight == 0) {
        if (!(c->flags & F_CLOSE_SENT))
            submit_close(w, u, c);
        else
            w->up->closed(w, c);
    }
}

static void uring_recv(struct runtime *w, struct engine_conn *c, bool on)
{
    struct uring *u = w->engine_state;
    if (on)
        c->flags &= ~(uint32_t)F_RECV_OFF;
    else
        c->flags |= F_RECV_OFF;
    if (c->flags & F_CLOSING)
        return;
    if (on && !(c->flags & F_RECV)) {
        arm_recv(u, c);
    } else if (!on && (c->flags & (F_RECV | F_RECV_CANCEL)) == F_RECV) {
        struct io_uring_sqe *sqe = conn_sqe(u, c, OP_CANCEL);
        io_uring_prep_cancel64(sqe, ud(OP_RECV, c), 0);
        c->flags |= F_RECV_CANCEL;
    }
    /* on while a cancellation is pending: the recv's final completion re-arms (no F_RECV_OFF). */
}

static size_t iov_bytes(const struct iovec *iov, int n)
{
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += iov[i].iov_len;
    return len;
}

/* Sends (the rest of) c->out: at its start, after a short send, once the socket is writable.
 * Memory of SEND_NOW_MIN bytes or more (TLS's 64 KiB chunks, HTTP/2's batches of frames) goes
 * by sendmsg at once, as epoll sends it, not as a SEND for the turn's one submission: the
 * completion is then reported from this turn's ready list (LIFO), so the connection seals and
 * sends its next chunk while its bytes are still in the cache, and the peer reads one socket
 * busy rather than many in a burst. Batched, the kernel copied each chunk after the turn had
 * sealed the other connections' (16 x 64 KiB), from beyond L2, and the client, drained between
 * bursts, was woken from sleep 0.9 times per MiB instead of 0.2: HTTPS 1 MiB c16 cost 0.40-0.45
 * CPU-s per GB against epoll's 0.34; sent so, 0.35 (issue 41; bench/README.md). h2c's
 * batches of 100 small responses are ~27 KB: at 32 KiB they still waited for the submission;
 * at 16 KiB each request costs 4.4% less (h2load -c4 -m100, 1 KiB; HTTP/1.1's 16 KiB
 * responses, sent so now too, cost 1.5% more, within the pairs' noise; 8 KiB ones would have
 * cost 1.6%). At most SEND_NOW_TURN bytes a loop turn go so: a client that reads as fast as
 * we seal would otherwise keep one connection on the ready list, and the ring, its timers and
 * the other connections waiting, for as long as its response lasts; past it, sends wait for
 * the turn's submission again. */
static void send_out(struct runtime *w, struct uring *u, struct engine_conn *c)
{
    struct plan *p = c->out;

    bool splice_mode = u->xfers != NULL;
    /* The slot's splice state is read only when a file segment is next (or the plan is
     * interleaved): its page is cold for connections that send from memory. */
    const struct seg *s = plan_seg(p);
    bool splice_ok = splice_mode && s && (!s->mem || sendplan_interleaved(p)) &&
                     !(u->xfers[c->slot].flags & X_SENDFILE);
    enum sendplan_path path = sendplan_choose(p, splice_mode, splice_ok);
    if (path == SENDPLAN_SPLICE) {
        if (uring_splice_send(w, u, c))
            return;
        path = SENDPLAN_SENDFILE; /* no pipe at all (out of fds) */
    }
    struct iovec iov[SEND_IOV];
    int n = 0;
    if (path == SENDPLAN_MEMORY) {
        n = plan_iov(p, iov, SEND_IOV);
        size_t len = iov_bytes(iov, n);
        /* Only a plan of memory alone: sendplan_now would send a file behind it by sendfile
         * from the loop, where the splice walk reads a cold file off it. */
        if (len >= SEND_NOW_MIN && u->now_left >= len && !sendplan_has_file(p)) {
            u->now_left -= len;
            path = SENDPLAN_SENDFILE;
        }
    }
    if (path == SENDPLAN_SENDFILE) {
        int rc = sendplan_now(c->fd, p);
        if (rc == -EAGAIN) {
            io_uring_prep_poll_add(conn_sqe(u, c, OP_POLL), c->fd, POLLOUT);
            return;
        }
        /* Finished (or failed) synchronously: report from the loop, not from inside conn. */
        if (u->xfers)
            u->xfers[c->slot].flags &= ~(uint32_t)X_SENDFILE;
        c->err = rc;
        make_ready(u, c, F_SENT);
        return;
    }
    /* One segment (the usual answer: headers and a small body in one buffer) needs no
     * scratch the kernel reads later; only a SENDMSG touches the slot's (cold) usend. */
    int flags = sendplan_flags(p, (unsigned)n);
    struct io_uring_sqe *sqe = conn_sqe(u, c, OP_SEND);
    if (n == 1) {
        io_uring_prep_send(sqe, c->fd, iov[0].iov_base, iov[0].iov_len, flags);
    } else {
        struct usend *us = &u->sends[c->slot];
        memcpy(us->iov, iov, (size_t)n * sizeof(iov[0]));
        us->msg = (struct msghdr){.msg_iov = us->iov, .msg_iovlen = (size_t)n};
        io_uring_prep_sendmsg(sqe, c->fd, &us->msg, (unsigned)flags);
    }
}

static void uring_send(struct runtime *w, struct engine_conn *c, struct plan *p)
{
    c->out = p;
    send_out(w, w->engine_state, c);
}

static void uring_close(struct runtime *w, struct engine_conn *c)
{
    struct uring *u = w->engine_state;
    if (c->flags & F_CLOSING)
        return;
    c->flags |= F_CLOSING;
    if (u->xfers)
        uring_splice_unwait(w, u, c); /* no pipe may be granted to a closing connection */
    if (c->inflight == 0) {
        submit_close(w, u, c);
        return;
    }
    struct io_uring_sqe *sqe = conn_sqe(u, c, OP_CANCEL);
    io_uring_prep_cancel_fd(sqe, c->fd, IORING_ASYNC_CANCEL_ALL);
    /* The file splice's fd is the pipe, not the socket: cancel it by name. A linked socket
     * splice behind it then completes -ECANCELED, or runs and ends (SPLICE_F_NONBLOCK). */
    if (u->xfers && (u->xfers[c->slot].flags & X_IN)) {
        sqe = conn_sqe(u, c, OP_CANCEL);
        io_uring_prep_cancel64(sqe, ud(OP_SPLICE_IN, c), 0);
    }
    if (c->flags & F_FREAD) /* a file read too: its buffer lives until conn_closed */
        io_uring_prep_cancel64(conn_sqe(u, c, OP_CANCEL), ud(OP_FREAD, c), 0);
}

/* A transport's file read: at once from the page cache, reported from the loop (run_ready);
 * else one READ, reported by on_fread. */
static void uring_read(struct runtime *w, struct engine_conn *c, int fd, void *buf, uint32_t len,
                       uint64_t off)
{
    struct uring *u = w->engine_state;
    struct iovec iov = {buf, len};
    ssize_t n = preadv2(fd, &iov, 1, (off_t)off, RWF_NOWAIT);
    if (n >= 0 || (errno != EAGAIN && errno != EOPNOTSUPP)) {
        c->rres = n < 0 ? -errno : (int32_t)n;
        make_ready(u, c, F_FREAD_DONE);
        return;
    }
    io_uring_prep_read(conn_sqe(u, c, OP_FREAD), fd, buf, len, off);
    c->flags |= F_FREAD;
    u->freads++;
}

static void on_fread(struct runtime *w, struct uring *u, struct engine_conn *c, int res)
{
    c->flags &= ~(uint32_t)F_FREAD;
    u->freads--;
    if (c->flags & F_CLOSING) {
        op_done(w, u, c); /* may release the slot: c is not touched after */
        return;
    }
    op_done(w, u, c);
    w->up->read_done(w, c, res);
}

static void uring_shutdown(struct runtime *w, struct engine_conn *c)
{
    struct uring *u = w->engine_state;
    if (!(c->flags & F_CLOSING))
        io_uring_prep_shutdown(conn_sqe(u, c, OP_SHUTDOWN), c->fd, SHUT_WR);
}

/* Takes one socket accepted outside the multishot accept (the drain empties the listener). */
/* Starts a connection on an accepted (or held, see conn_accepted) socket. */
static bool accept_one(struct runtime *w, int fd, unsigned lst)
{
    bool held;
    struct engine_conn *c = w->up->accepted(w, fd, lst, &held);
    if (c) {
        arm_recv(w->engine_state, c); /* conn zeroed the engine's part of c with the slot */
    } else if (!held)
        close(fd); /* full of busy connections */
    return true;
}

/* The listener is closed once the accept is cancelled: until then the ring holds the socket,
 * and connections queued behind the cancel would only be reset later. */
static void uring_stop_accept(struct runtime *w)
{
    struct uring *u = w->engine_state;
    for (unsigned i = 0; i < w->nlisteners; i++) {
        if (!u->accept_armed[i]) {
            w->up->close_listener(w, i, accept_one);
            continue;
        }
        struct io_uring_sqe *sqe = get_sqe(u);
        io_uring_prep_cancel64(sqe, tag_encode(OP_ACCEPT, 0, i), 0);
        io_uring_sqe_set_data64(sqe, ud(OP_IGNORE, NULL));
    }
}

static void on_accept(struct runtime *w, struct uring *u, const struct io_uring_cqe *cqe,
                      unsigned lst)
{
    if (cqe->res >= 0)
        accept_one(w, cqe->res, lst);
    if (!(cqe->flags & IORING_CQE_F_MORE)) {
        u->accept_armed[lst] = false;
        if (w->draining && !w->accepting) {
            w->up->close_listener(w, lst, accept_one);
            return;
        }
        /* Out of fds or memory: the multishot accept ended, and re-armed at once it would fail
         * at once, every loop turn (issue 10: 100% CPU). It stays off until a connection
         * closes or a second passes (the accept_resume upcall). */
        if (cqe->res < 0 && w->up->accept_failed(w, cqe->res))
            return;
        if (!w->accept_paused)
            arm_accept(w, u, lst);
    }
}

/* Once per loop turn: sockets held for reclaimed slots, and a paused accept. */
static void accept_more(struct runtime *w, struct uring *u)
{
    int fd;
    unsigned lst;
    while ((fd = w->up->held_take(w, &lst)) >= 0)
        accept_one(w, fd, lst);
    bool idle = false; /* a listener is open and its accept is not armed */
    for (unsigned i = 0; i < w->nlisteners; i++)
        idle = idle || (!u->accept_armed[i] && w->listeners[i].fd >= 0 && w->accepting);
    if (idle && w->up->accept_resume(w)) {
        for (unsigned i = 0; i < w->nlisteners; i++)
            if (!u->accept_armed[i] && w->listeners[i].fd >= 0 && w->accepting)
                arm_accept(w, u, i);
    }
}

/* A receive buffer goes back to the kernel at once, not at the end of the turn: a turn that
 * fills the SQ submits early (engine/sqe.h), and receives submitted then to a ring the turn had
 * emptied ended in ENOBUFS and waited a turn while those submitted last read first. A burst of
 * slow heads was so read newest first, and --head-memory closed the newest as the oldest. */
static void recycle(struct uring *u, unsigned bid)
{
    io_uring_buf_ring_add(u->br, u->bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, (unsigned short)bid,
                          io_uring_buf_ring_mask(BUF_COUNT), 0);
    io_uring_buf_ring_advance(u->br, 1);
}

static void on_recv(struct runtime *w, struct uring *u, struct engine_conn *c,
                    const struct io_uring_cqe *cqe)
{
    int res = cqe->res;
    bool more = cqe->flags & IORING_CQE_F_MORE;
    if (!more) /* before conn sees the data, so it does not cancel a finished recv */
        c->flags &= ~(uint32_t)(F_RECV | F_RECV_CANCEL);
    if (res > 0) {
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        if (!(c->flags & F_CLOSING))
            w->up->received(w, c, u->bufs + (size_t)bid * BUF_SIZE, res);
        recycle(u, bid);
    } else if (res == 0 || (res < 0 && res != -ENOBUFS && res != -ECANCELED)) {
        if (!(c->flags & F_CLOSING))
            w->up->received(w, c, NULL, res);
    }
    if (!more) {
        if (res > 0)
            c->flags |= F_MULTI;
        /* ENOBUFS, a cancellation we no longer want, or the kernel ending the multishot for
         * its own reasons: keep receiving if conn still wants to. */
        bool again = res > 0 || res == -ENOBUFS || res == -ECANCELED;
        if (again && !(c->flags & (F_CLOSING | F_RECV | F_RECV_OFF)))
            arm_recv(u, c);
        op_done(w, u, c);
    }
}

static void on_send(struct runtime *w, struct uring *u, struct engine_conn *c, int res)
{
    if (c->flags & F_CLOSING) {
        op_done(w, u, c);
        return;
    }
    op_done(w, u, c);
    if (res <= 0) {
        w->up->sent(w, c, res == 0 ? -EPIPE : res);
        return;
    }
    plan_advance(c->out, (uint64_t)res);
    if (plan_done(c->out))
        w->up->sent(w, c, 0);
    else
        send_out(w, u, c); /* short send: continue where it stopped */
}

/* A splice of c's completed: the walk records it, and goes on once the step is complete. */
static void on_splice(struct runtime *w, struct uring *u, struct engine_conn *c, enum op op,
                      int res)
{
    uring_splice_result(u, c, op, res);
    if (c->flags & F_CLOSING) {
        op_done(w, u, c); /* may release the slot: c is not touched after */
        return;
    }
    op_done(w, u, c);
    uring_splice_continue(w, u, c);
}

static void handle(struct runtime *w, struct uring *u, const struct io_uring_cqe *cqe)
{
    struct tag t = tag_decode(io_uring_cqe_get_data64(cqe));
    enum op op = (enum op)t.op;

    switch (op) {
    case OP_ACCEPT:
        if (t.slot < w->nlisteners)
            on_accept(w, u, cqe, t.slot);
        return;
    case OP_TICK:
        arm_tick(w, u);
        return;
    case OP_WAKE:
        arm_wake(w, u); /* wakes come again: stop, reload, finished compression jobs */
        return;         /* the tick reads the stop flag and the site, and collects the jobs */
    case OP_UDP:
        /* Read until the socket is empty (a multishot poll fires on new arrivals only). */
        if (t.slot >= w->nudp)
            return;
        (void)udp_port_read(w->udp[t.slot], UDP_DRAIN_BATCHES);
        if (!(cqe->flags & IORING_CQE_F_MORE))
            arm_udp(w, u, t.slot);
        return;
    case OP_UDP_RECV:
        if (t.slot >= w->nudp)
            return;
        if (cqe->res == -EINVAL || cqe->res == -EOPNOTSUPP) { /* no multishot RECVMSG here */
            uring_udp_refused(u, t.slot);
            arm_udp(w, u, t.slot);
            return;
        }
        uring_udp_complete(w, u, cqe, t.slot);
        return;
    case OP_UDP_SEND:
        uring_udp_sent(w, u, cqe, t.slot);
        return;
    case OP_IGNORE:
        return;
    default:
        break;
    }
    struct engine_conn *c = t.slot < w->cfg->max_conns ? engine_conn_at(&w->eslots, t.slot) : NULL;
    if (!c || !tag_is_current(t, c->gen)) {
        /* Stale: cannot happen while slots wait for their last completion, but a buffer it
         * carries must still go back. A free slot's generation has moved on (conn changes it
         * as the slot is given back), so its tags are stale too. */
        if (cqe->flags & IORING_CQE_F_BUFFER)
            recycle(u, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
        return;
    }
    switch (op) {
    case OP_RECV:
        on_recv(w, u, c, cqe);
        break;
    case OP_SEND:
        on_send(w, u, c, cqe->res);
        break;
    case OP_POLL:
        if (u->xfers)
            pipepool_unpark(&u->pool, c->slot); /* before op_done, which may free the slot */
        op_done(w, u, c);
        if (c->flags & F_CLOSING)
            break;
        if (cqe->res < 0)
            w->up->sent(w, c, cqe->res);
        else if (!uring_splice_flush(w, u, c))
            send_out(w, u, c);
        break;
    case OP_SPLICE_IN:
    case OP_SPLICE_OUT:
        on_splice(w, u, c, op, cqe->res);
        break;
    case OP_FREAD:
        on_fread(w, u, c, cqe->res);
        break;
    case OP_CANCEL:
    case OP_CLOSE:
    case OP_SHUTDOWN:
        op_done(w, u, c);
        break;
    default:
        break;
    }
}

/* The drain's last file reads (uring_run): a READ completion is reported as handle() reports
 * it, any other is dropped. Apart from handle, so that handle keeps its one call site in the
 * loop and stays inlined there (a second one cost HTTP/1 30 instructions a request). */
static void handle_fread_only(struct runtime *w, struct uring *u, const struct io_uring_cqe *cqe)
{
    struct tag t = tag_decode(io_uring_cqe_get_data64(cqe));
    if (t.op != OP_FREAD)
        return;
    struct engine_conn *c = t.slot < w->cfg->max_conns ? engine_conn_at(&w->eslots, t.slot) : NULL;
    if (c && tag_is_current(t, c->gen))
        on_fread(w, u, c, cqe->res);
}

/* Reports synchronous sends that finished during this turn. */
static void run_ready(struct runtime *w, struct uring *u)
{
    while (u->ready) {
        struct engine_conn *c = u->ready;
        u->ready = c->next;
        uint32_t what = c->flags;
        c->flags &= ~(uint32_t)(F_READY | F_SENT | F_CLOSED | F_FREAD_DONE);
        if (what & F_CLOSED) {
            w->up->closed(w, c);
            continue;
        }
        if ((what & F_SENT) && !(what & F_CLOSING))
            w->up->sent(w, c, c->err);
        if ((what & F_FREAD_DONE) && !(c->flags & F_CLOSING))
            w->up->read_done(w, c, c->rres);
    }
}

static int uring_run(struct runtime *w)
{
    struct uring *u = w->engine_state;
    /* Enabling the ring from this thread makes it the single issuer. liburing 2.3 declares
     * io_uring_enable_rings but does not export it, hence the raw system call. */
    int rc = (int)syscall(__NR_io_uring_register, u->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS,
                          NULL, 0);
    if (rc < 0)
        return -errno;
    arm_wake(w, u);
    arm_tick(w, u);
    for (unsigned i = 0; i < w->nlisteners; i++)
        arm_accept(w, u, i);
    /* HTTP/3: a multishot RECVMSG into provided buffers; a kernel without it (before 6.0)
     * refuses the buffer ring or the operation, and the socket is polled instead. */
    if (w->nudp && uring_udp_start(w, u) != 0)
        for (unsigned i = 0; i < w->nudp; i++)
            arm_udp(w, u, i);
    if (w->nudp && w->id == 0) {
        int err = uring_udp_tx_start(w, u);
        if (err != 0)
            errlog(ERRLOG_WARN, "HTTP/3: datagrams sent by sendmsg: %s", strerror(-err));
        else if (w->cfg->verbose)
            fprintf(stderr, "ringhttpd: HTTP/3: datagrams sent by io_uring (SENDMSG, one "
                            "submission a loop turn)\n");
    } else if (w->nudp) {
        (void)uring_udp_tx_start(w, u); /* worker 0 says whether it could */
    }

    while (w->up->tick(w)) {
        accept_more(w, u);
        if (w->nudp)
            retick(w, u);
        sqe_flush(&u->ring, &u->spill);
        rc = io_uring_submit_and_wait(&u->ring, 1);
        u->now_left = SEND_NOW_TURN;
        if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EBUSY && rc != -EAGAIN)
            return rc;

        /* The tail read once (io_uring_for_each_cqe reloads it and recomputes the index's
         * shift per CQE): a completion posted meanwhile waits for the next turn, whose wait
         * then returns at once. The rings have 16-byte CQEs (no IORING_SETUP_CQE32). */
        struct io_uring_cq *cq = &u->ring.cq;
        unsigned head = *cq->khead, tail = io_uring_smp_load_acquire(cq->ktail);
        unsigned count = tail - head;
        for (; head != tail; head++)
            handle(w, u, &cq->cqes[head & cq->ring_mask]);
        io_uring_cq_advance(&u->ring, count);
        w->up->loop_turn(w, 1, count);
        if (u->udp)
            uring_udp_flush(w, u);
        if (u->pool.wait_head)
            uring_splice_unstall(w, u);
        if (u->pool.free || (u->xfers && u->pool.scratch.fd[0] >= 0))
            pipepool_trim(&u->pool, w->now, PIPE_IDLE);
        run_ready(w, u);
    }
    /* Drained: every connection has closed; let the last submissions (cancels) go. A READ
     * still in flight is an attached connection's (a TCP one's close waited for it): the
     * kernel writes its owner's buffer until it completes (closing the ring does not wait),
     * so it is waited for and reported here. Nothing else is served meanwhile: other
     * completions are dropped (a datagram read would start more work). */
    while (u->freads || u->ready) {
        sqe_flush(&u->ring, &u->spill);
        rc = u->freads ? io_uring_submit_and_wait(&u->ring, 1) : io_uring_submit(&u->ring);
        if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EBUSY && rc != -EAGAIN)
            return rc;
        struct io_uring_cqe *cqe;
        unsigned head, count = 0;
        io_uring_for_each_cqe(&u->ring, head, cqe) {
            count++;
            handle_fread_only(w, u, cqe);
        }
        io_uring_cq_advance(&u->ring, count);
        run_ready(w, u);
    }
    sqe_flush(&u->ring, &u->spill);
    io_uring_submit(&u->ring);
    return 0;
}

const struct engine_ops engine_uring = {
    .name = "uring",
    .init = uring_init,
    .fini = uring_fini,
    .run = uring_run,
    .recv = uring_recv,
    .send = uring_send,
    .shutdown = uring_shutdown,
    .close = uring_close,
    .stop_accept = uring_stop_accept,
    .read = uring_read,
    .peer = sockops_peer,
    .ktls = sockops_ktls,
    .drop = sockops_drop,
};
