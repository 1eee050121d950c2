/* The io_uring engine.
 *
 * Techniques (kernel >= 6.1, liburing >= 2.3): multishot accept; multishot recv into a
 * provided buffer ring, each buffer handed back as soon as conn has looked at it; one
 * io_uring_enter per loop turn (drain every completion, prepare what they cause, submit and
 * wait together); SINGLE_ISSUER | DEFER_TASKRUN where the kernel has them. Memory segments leave
 * with SEND or SENDMSG (MSG_MORE while more follows).
 *
 * What the kernel offers is probed once per process (uring_probe, at the end of this file) into
 * the struct engine_caps every worker reads as w->caps: the setup mode it accepts, its opcodes,
 * and each mode the engine relies on tried for real. Workers set up their rings in that mode and
 * never probe again. SQEs come from engine/sqe.h, which flushes a full SQ and keeps what the
 * kernel will not take in an ordered spill list: no caller ever sees a NULL SQE.
 *
 * File ranges (issue 5: zero-copy without blocking the loop), by --file-send:
 * - splice (default): IORING_OP_SPLICE file -> pipe linked (IOSQE_IO_LINK) to pipe -> socket,
 *   one pipe-full per step. io_uring runs splices in its io-wq workers, so a cold file is read
 *   from disk there while the loop keeps serving. Pipes come from a bounded per-worker pool
 *   (at most --splice-pipes, fewer or smaller as rt/pipesize reads the kernel's limits; made
 *   on first use, closed after PIPE_IDLE seconds unused): a pipe per connection would exhaust
 *   fs.pipe-user-pages-soft long before 1000 downloads. A short file splice breaks the link
 *   (the socket splice completes -ECANCELED); a short socket splice (the usual case under
 *   TCP_NOTSENT_LOWAT) leaves bytes in the pipe, flushed after POLLOUT by a non-blocking
 *   splice(2) from the loop before more is read. While it waits for POLLOUT the connection is
 *   "parked": its pipe may be taken by a connection that needs one (oldest parked first), its
 *   bytes dropped into /dev/null (they are still in the file: the plan's cursor counts only
 *   bytes the socket took), so clients that stop reading hold no pipe anyone else needs
 *   (issue 10 item 7). Only with every pipe in a splice does a connection wait, in a FIFO
 *   queue, never failing. A pipe goes back to the pool only empty; one left with bytes by an
 *   error or a close is closed.
 *   An interleaved plan (HTTP/2 DATA frames, multipart ranges: small memory segments between
 *   file segments) would cost a splice pair, and a loop turn, per 16 KiB frame. Instead its
 *   file run (segments that continue each other), as much as fits once composed, is read into
 *   the pipe by one splice alone (io-wq: a cold file still never blocks the loop); on its
 *   completion the loop composes the frames into the worker's scratch pipe (each header
 *   written, each payload's page references spliced from pipe to pipe), the two pipes trade
 *   places, and one splice sends the plan (walk_fill, walk_compose, walk_next; parking and
 *   taking pipes as above). Without a scratch pipe (--splice-pipes 1) the frames leave one by
 *   one from the filled pipe (sendplan_pipe: a header sendmsg, a payload splice).
 * - sendfile: sendplan (sendfile from the loop, zero-copy) and a POLL_ADD when the socket is
 *   full; it blocks the loop while a cold file is read.
 * A transport that must copy file bytes (TLS) reads them (uring_read) with preadv2(RWF_NOWAIT)
 * first, which a page cache hit completes at pread's cost, and on a miss with IORING_OP_READ,
 * which the kernel serves without the loop waiting through the file system's asynchronous
 * buffered reads (ext4, xfs, btrfs...). READ alone cost a loop turn per read: HTTP/2 over TLS
 * reads 16 KiB a DATA frame, and 1 MiB responses took 13% more CPU (bench/README.md, HTTPS).
 * A file system that reads ahead synchronously (FUSE without FUSE_ASYNC_READ) is read inline
 * even by READ, blocking the loop as pread did (seen with tests/integration/slowfs.py before it
 * asked for async reads).
 *
 * Every operation carries its connection's slot and generation in user_data; a connection's
 * slot is reused only after its last completion arrived, and a completion whose generation
 * does not match is dropped (nginx's "instance bit", widened). */
#include "engine/engine.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "engine/caps.h"
#include "engine/pipepool.h"
#include "engine/sendplan.h"
#include "engine/sqe.h"
#include "engine/tag.h"
#include "rt/errlog.h"
#include "rt/pipesize.h"
#include "rt/worker.h"

#define SQ_ENTRIES 1024
#define CQ_ENTRIES 16384
#define BUF_COUNT 1024 /* power of two */
#define BUF_SIZE 4096
#define BGID 0
#define PIPE_BYTES (1u << 20) /* asked of F_SETPIPE_SZ: one splice step moves at most this */
#define PIPE_IDLE 10          /* seconds a free pipe is kept before it is closed */
#define SEND_IOV 16           /* memory segments one SENDMSG takes */

enum op {
    OP_ACCEPT = 1,
    OP_RECV,
    OP_SEND,   /* SEND or SENDMSG of memory segments */
    OP_POLL,   /* POLLOUT wait for a sendplan that hit EAGAIN */
    OP_CANCEL, /* cancellation of a connection's operations */
    OP_CLOSE,
    OP_SHUTDOWN,   /* SHUT_WR before a lingering close */
    OP_WAKE,       /* read of the worker's eventfd */
    OP_TICK,       /* the worker's one-second timeout: the timer wheel's clock */
    OP_SPLICE_IN,  /* file -> pipe */
    OP_SPLICE_OUT, /* pipe -> socket, linked behind OP_SPLICE_IN or alone to flush */
    OP_IGNORE,
    OP_FREAD, /* a transport's file read (engine_ops.read) */
};

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

/* xfer flags */
#define X_IN 0x1   /* an OP_SPLICE_IN is in flight */
#define X_OUT 0x2  /* an OP_SPLICE_OUT is in flight */
#define X_FULL 0x8 /* the socket took less than offered: wait for POLLOUT before the next step */
#define X_SENDFILE 0x10 /* waited too long for a pipe: the rest of this response by sendfile */
#define X_WALK 0x20     /* the pipe holds file bytes of an interleaved plan: walk_next sends */
#define X_FITS 0x40     /* ... read by a fill sized to be composed into the scratch pipe */
#define X_COMPOSED 0x80 /* ... composed: the plan's bytes from the cursor, headers included */

/* A connection waits at most this long (seconds, give or take one) for a pipe before its
 * response goes by sendfile: clients that stop reading hold their pipes (with bytes in them)
 * until they read or time out, and must not stall everyone else's large files that long. */
#define PIPE_WAIT_MAX 2

/* A connection's splice steps, by slot (these pages are touched only by slots that send files);
 * its pipe, and its place among the waiting and parked, are the pool's (engine/pipepool.h). */
struct xfer {
    uint32_t want_in;  /* length of the OP_SPLICE_IN in flight */
    uint32_t want_out; /* length of the OP_SPLICE_OUT in flight */
    uint32_t flags;
    int err; /* first failure of the current step */
};

/* A connection's SENDMSG scratch, by slot: the kernel reads it until the send completes. */
struct usend {
    struct msghdr msg;
    struct iovec iov[SEND_IOV];
};

struct uring {
    struct io_uring ring;
    struct usend *sends;    /* max_conns slots, touched only by slots that send several segments */
    struct sqe_spill spill; /* SQEs the kernel would not take yet (engine/sqe.h) */
    struct io_uring_buf_ring *br;
    char *bufs;
    unsigned buf_returned;         /* buffers added since the last advance */
    bool accept_armed[LISTEN_MAX]; /* a multishot accept is armed on that listener */
    bool cqe_skip;                 /* IOSQE_CQE_SKIP_SUCCESS works (5.17) */
    uint64_t wake_val;
    struct __kernel_timespec tick; /* read by the kernel when the TIMEOUT is submitted */
    struct conn *ready;            /* connections with a completion to report from the loop */
    /* --file-send splice; xfers is NULL in sendfile mode */
    struct xfer *xfers;
    struct pipepool pool;  /* its pipes; pool.slots is NULL until set up */
    unsigned page;         /* bytes a pipe buffer holds (the page size) */
    unsigned short_logged; /* pool.short_pipes already warned about */
    struct errlog_limit log_pipe;
};

/* The engine's state of c (flags F_*, err for F_SENT, next on the ready list). */
static inline struct engine_conn *uc(struct uring *u, struct conn *c)
{
    (void)u;
    return &c->eng;
}

static inline struct pipepool_slot *ps(struct uring *u, const struct conn *c)
{
    return pipepool_slot(&u->pool, c->slot);
}

/* An operation's user_data (engine/tag.h): for c, or for the worker when c is NULL. */
static inline uint64_t ud(enum op op, const struct conn *c)
{
    return c ? tag_encode(op, c->gen, c->slot) : tag_encode(op, 0, 0);
}

static struct io_uring_sqe *get_sqe(struct uring *u)
{
    return sqe_get(&u->ring, &u->spill);
}

/* Every SQE prepared for a connection counts until its final CQE. */
static struct io_uring_sqe *conn_sqe(struct uring *u, struct conn *c, enum op op)
{
    struct io_uring_sqe *sqe = get_sqe(u);
    io_uring_sqe_set_data64(sqe, ud(op, c));
    uc(u, c)->inflight++;
    return sqe;
}

/* Setup flag sets, strongest first, and the CAPS_SETUP_* bit each stands for. */
static const struct {
    unsigned flags;
    unsigned caps;
} setup_modes[] = {
    {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL,
     CAPS_SETUP_SINGLE_ISSUER},
    {IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL, CAPS_SETUP_COOP_TASKRUN},
    {0, 0},
};

static unsigned setup_flags(unsigned caps_setup)
{
    for (size_t i = 0; i < sizeof(setup_modes) / sizeof(setup_modes[0]); i++)
        if (setup_modes[i].caps == caps_setup)
            return setup_modes[i].flags;
    return 0;
}

/* The mode the probe found the kernel accepts (caps.setup): workers do not step down again. */
static int setup_ring(struct uring *u, const struct engine_caps *caps)
{
    struct io_uring_params p = {
        .flags = setup_flags(caps->setup) | IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED,
        .cq_entries = CQ_ENTRIES,
    };
    return io_uring_queue_init_params(SQ_ENTRIES, &u->ring, &p);
}

static int setup_buffers(struct uring *u)
{
    size_t ring_size = BUF_COUNT * sizeof(struct io_uring_buf);
    void *mem = mmap(NULL, ring_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return -errno;
    u->br = mem;
    io_uring_buf_ring_init(u->br);
    struct io_uring_buf_reg reg = {
        .ring_addr = (unsigned long)mem, .ring_entries = BUF_COUNT, .bgid = BGID};
    int rc = io_uring_register_buf_ring(&u->ring, &reg, 0);
    if (rc < 0)
        return rc;
    u->bufs = malloc((size_t)BUF_COUNT * BUF_SIZE);
    if (!u->bufs)
        return -ENOMEM;
    for (unsigned i = 0; i < BUF_COUNT; i++)
        io_uring_buf_ring_add(u->br, u->bufs + (size_t)i * BUF_SIZE, BUF_SIZE, (unsigned short)i,
                              io_uring_buf_ring_mask(BUF_COUNT), (int)i);
    io_uring_buf_ring_advance(u->br, BUF_COUNT);
    return 0;
}

static void release_buffers(struct uring *u)
{
    if (u->br)
        munmap(u->br, BUF_COUNT * sizeof(struct io_uring_buf));
    free(u->bufs);
}

/* --file-send splice: the per-slot state and the pool's slots (pipes are made on first use).
 * A kernel without IORING_OP_SPLICE falls back to sendfile. */
static int setup_splice(struct worker *w, struct uring *u)
{
    const struct config *cfg = w->cfg;
    if (cfg->file_send != FILE_SEND_SPLICE)
        return 0;
    if (!caps_has_op(w->caps, CAPS_OP_SPLICE)) {
        if (w->id == 0)
            fprintf(stderr, "ringhttpd: io_uring has no SPLICE here; files go by sendfile\n");
        return 0;
    }
    struct pipe_limits lim;
    struct pipe_plan plan;
    pipesize_read(&lim);
    pipesize_plan(&lim, cfg->splice_pipes, PIPE_BYTES, (unsigned)cfg->threads, &plan);
    int rc = pipepool_init(&u->pool, cfg->max_conns, plan.count, plan.bytes);
    if (rc < 0)
        return rc;
    if (!(u->xfers = calloc(cfg->max_conns, sizeof(*u->xfers))))
        return -ENOMEM;
    long page = sysconf(_SC_PAGESIZE);
    u->page = page > 0 ? (unsigned)page : 4096;
    if ((cfg->verbose || plan.shrunk) && w->id == 0)
        fprintf(stderr,
                "ringhttpd: files by io_uring splice: up to %u pipes of %u KiB per worker (asked "
                "%u of %u KiB; fs.pipe-max-size %llu, fs.pipe-user-pages-soft %llu%s, "
                "RLIMIT_NOFILE %llu)\n",
                plan.count, plan.bytes >> 10, cfg->splice_pipes, PIPE_BYTES >> 10,
                (unsigned long long)lim.max_size, (unsigned long long)lim.soft_pages,
                lim.privileged ? " (not applied: privileged)" : "", (unsigned long long)lim.nofile);
    return 0;
}

static void release_splice(struct worker *w, struct uring *u)
{
    (void)w;
    if (u->pool.slots)
        pipepool_fini(&u->pool);
    free(u->xfers);
    u->xfers = NULL;
}

static int uring_init(struct worker *w)
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
    if (rc < 0 || (rc = setup_buffers(u)) < 0 || (rc = setup_splice(w, u)) < 0) {
        free(u->sends);
        release_splice(w, u);
        release_buffers(u);
        io_uring_queue_exit(&u->ring);
        free(u);
        return rc;
    }
    w->engine_state = u;
    return 0;
}

static void uring_fini(struct worker *w)
{
    struct uring *u = w->engine_state;
    if (!u)
        return;
    io_uring_queue_exit(&u->ring);
    sqe_spill_free(&u->spill);
    release_splice(w, u);
    release_buffers(u);
    free(u->sends);
    free(u);
    w->engine_state = NULL;
}

/* A listener's operations carry its index in the tag's slot field. */
static void arm_accept(struct worker *w, struct uring *u, unsigned lst)
{
    struct io_uring_sqe *sqe = get_sqe(u);
    io_uring_prep_multishot_accept(sqe, w->listeners[lst].fd, NULL, NULL,
                                   SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, tag_encode(OP_ACCEPT, 0, lst));
    u->accept_armed[lst] = true;
}

static void arm_wake(struct worker *w, struct uring *u)
{
    struct io_uring_sqe *sqe = get_sqe(u);
    io_uring_prep_read(sqe, w->wake_fd, &u->wake_val, sizeof(u->wake_val), 0);
    io_uring_sqe_set_data64(sqe, ud(OP_WAKE, NULL));
}

/* One TIMEOUT per worker, re-armed as it fires, wakes the loop for the timer wheel. Waiting
 * with a timeout argument instead (io_uring_submit_and_wait_timeout) made liburing 2.3 submit
 * without GETEVENTS whenever a completion was already there, and under DEFER_TASKRUN such an
 * enter runs no task work: waiting the ceiling server's way is cheaper per request (the
 * measurement is in bench/README.md, "Wait with io_uring_submit_and_wait"). */
static void arm_tick(struct worker *w, struct uring *u)
{
    int ms = worker_wait_ms(w);
    u->tick = (struct __kernel_timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    struct io_uring_sqe *sqe = get_sqe(u);
    io_uring_prep_timeout(sqe, &u->tick, 0, 0);
    io_uring_sqe_set_data64(sqe, ud(OP_TICK, NULL));
}

/* A new connection's first recv is single-shot: a client that sends one request with
 * Connection: close then needs no cancellation before its close. From the second recv on, the
 * connection has shown it stays, and its recv becomes multishot. */
static void arm_recv(struct uring *u, struct conn *c)
{
    struct io_uring_sqe *sqe = conn_sqe(u, c, OP_RECV);
    if (uc(u, c)->flags & F_MULTI)
        io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
    else
        io_uring_prep_recv(sqe, c->fd, NULL, BUF_SIZE, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BGID;
    uc(u, c)->flags |= F_RECV;
}

static void make_ready(struct uring *u, struct conn *c, uint32_t what)
{
    if (!(uc(u, c)->flags & F_READY)) {
        uc(u, c)->next = u->ready;
        u->ready = c;
    }
    uc(u, c)->flags |= F_READY | what;
}

/* --- file ranges by splice ------------------------------------------------------------- */

/* A pipe got less than PIPE_BYTES (another process of this user holds pipe pages). */
static void note_short_pipes(struct worker *w, struct uring *u)
{
    if (u->pool.short_pipes == u->short_logged)
        return;
    u->short_logged = u->pool.short_pipes;
    errlog_limited(&u->log_pipe, ERRLOG_WARN,
                   "worker %d: a splice pipe got less than the %u KiB asked (another process of "
                   "this user holds pipe pages: fs.pipe-user-pages-soft)",
                   w->id, u->pool.bytes >> 10);
}

static void splice_step(struct uring *u, struct conn *c);
static void uring_send(struct worker *w, struct conn *c);

/* Hands free (or newly made, or taken) pipes to waiting connections, oldest first. */
static void grant_waiters(struct worker *w, struct uring *u)
{
    int64_t slot;
    while ((slot = pipepool_grant(&u->pool)) >= 0) {
        stat_add(&w->stats.pipe_waits_done, 1);
        splice_step(u, &w->conns[slot]);
    }
    note_short_pipes(w, u);
}

static void wait_remove(struct worker *w, struct uring *u, struct conn *c)
{
    if (pipepool_unwait(&u->pool, c->slot))
        stat_add(&w->stats.pipe_waits_done, 1);
}

/* Drops c's claim on the pool: out of the wait queue, its pipe back to the pool when provably
 * empty, else closed (a dirty pipe would put another response's bytes on a socket). No splice
 * of c may be in flight. */
static void xfer_release(struct worker *w, struct uring *u, struct conn *c)
{
    if (!u->xfers)
        return;
    wait_remove(w, u, c);
    bool had_pipe = ps(u, c)->pipe != NULL;
    pipepool_release(&u->pool, c->slot, w->now);
    u->xfers[c->slot] = (struct xfer){0};
    if (had_pipe)
        grant_waiters(w, u);
}

/*
 * An interleaved plan (HTTP/2 DATA frames: 9 bytes of header, 16 KiB of file, ~19 times a
 * plan) read into the empty pipe: its file run (the file segments that continue each other),
 * up to what the worker's scratch pipe holds once the headers are put between the pieces
 * (sendplan_fill_len), by one splice alone: io-wq reads it, so a cold file never blocks the
 * loop. Its completion composes the frames into the scratch pipe from the loop and sends them
 * by one splice (walk_next), so a plan costs one io-wq round trip and one socket call, where a
 * header sendmsg and a payload splice per frame cost 98% of a core at 1.4 GB/s (bench/README.md,
 * "h2uring"). Without a scratch pipe the fill is the whole run and the frames go by
 * sendplan_pipe.
 */
static void walk_fill(struct uring *u, struct conn *c)
{
    struct xfer *x = &u->xfers[c->slot];
    struct pipepool_slot *ph = ps(u, c);
    int fd = -1;
    uint64_t off = 0, run = 0;
    struct pipepool_pipe *t = pipepool_scratch(&u->pool);
    x->flags &= ~(uint32_t)(X_FITS | X_COMPOSED);
    if (t) {
        unsigned cap = t->cap < ph->pipe->cap ? t->cap : ph->pipe->cap;
        run = sendplan_fill_len(c->out, cap / u->page, u->page, &fd, &off);
        x->flags |= run ? X_FITS : 0;
    }
    if (!run)
        run = sendplan_file_run(c->out, &fd, &off);
    assert(run > 0 && ph->in_pipe == 0);
    uint32_t len = run < ph->pipe->cap ? (uint32_t)run : ph->pipe->cap;
    struct io_uring_sqe *sqe = conn_sqe(u, c, OP_SPLICE_IN);
    io_uring_prep_splice(sqe, fd, (int64_t)off, ph->pipe->fd[1], -1, len, 0);
    x->want_in = len;
    x->flags |= X_IN | X_WALK;
}

/* One step with a pipe held and no splice in flight. An interleaved plan, or one whose cursor
 * is still at memory: walk_fill. A file segment: flush what the pipe holds, else read up to a
 * pipe-full and send it (two linked SQEs). */
static void splice_step(struct uring *u, struct conn *c)
{
    struct xfer *x = &u->xfers[c->slot];
    struct pipepool_slot *ph = ps(u, c);
    struct plan *p = c->out;
    struct seg *s = plan_seg(p);
    uint32_t len = ph->in_pipe;
    bool more = p->cur + 1 < p->nseg;
    struct io_uring_sqe *sqe;

    if (len == 0 && (s->mem || sendplan_interleaved(p))) {
        walk_fill(u, c);
        return;
    }
    /* A walk's bytes leave only by walk_next; X_WALK may outlive a pipe taken while parked. */
    assert(!s->mem && (len == 0 || !(x->flags & X_WALK)));
    x->flags &= ~(uint32_t)(X_WALK | X_FITS | X_COMPOSED);
    if (len == 0) {
        len = s->len < ph->pipe->cap ? (uint32_t)s->len : ph->pipe->cap;
        more = more || len < s->len;
        /* Both SQEs in one submission, or the link would end at the early submit. */
        sqe_reserve(&u->ring, &u->spill, 2);
        sqe = conn_sqe(u, c, OP_SPLICE_IN);
        io_uring_prep_splice(sqe, s->fd, (int64_t)s->off, ph->pipe->fd[1], -1, len, 0);
        sqe->flags |= IOSQE_IO_LINK;
        x->want_in = len;
        x->flags |= X_IN;
    } else {
        more = more || len < s->len;
        x->want_in = 0; /* a flush: no file splice in this step */
    }
    sqe = conn_sqe(u, c, OP_SPLICE_OUT);
    io_uring_prep_splice(sqe, ph->pipe->fd[0], -1, c->fd, -1, len,
                         SPLICE_F_NONBLOCK | (more ? SPLICE_F_MORE : 0));
    x->want_out = len;
    x->flags |= X_OUT;
}

/* The current segment is a file range: splice it, queueing for a pipe when none is free. */
static bool file_send(struct worker *w, struct uring *u, struct conn *c)
{
    uint32_t robbed;
    if (!ps(u, c)->pipe) {
        bool got = pipepool_acquire(&u->pool, c->slot, &robbed);
        note_short_pipes(w, u);
        if (!got) {
            if (pipepool_none_made(&u->pool))
                return false; /* no pipe at all (out of fds): sendfile instead */
            pipepool_wait(&u->pool, c->slot, w->now);
            stat_add(&w->stats.pipe_waits, 1);
            return true;
        }
    }
    splice_step(u, c);
    return true;
}

static void submit_close(struct worker *w, struct uring *u, struct conn *c)
{
    xfer_release(w, u, c); /* nothing is in flight: the pipe is c's to give back */
    uc(u, c)->flags |= F_CLOSE_SENT;
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
static void op_done(struct worker *w, struct uring *u, struct conn *c)
{
    assert(uc(u, c)->inflight > 0);
    uc(u, c)->inflight--;
    if ((uc(u, c)->flags & F_CLOSING) && uc(u, c)->inflight == 0) {
        if (!(uc(u, c)->flags & F_CLOSE_SENT))
            submit_close(w, u, c);
        else
            conn_closed(w, c);
    }
}

static void uring_recv(struct worker *w, struct conn *c, bool on)
{
    struct uring *u = w->engine_state;
    if (uc(u, c)->flags & F_CLOSING)
        return;
    if (on && !(uc(u, c)->flags & F_RECV)) {
        arm_recv(u, c);
    } else if (!on && (uc(u, c)->flags & (F_RECV | F_RECV_CANCEL)) == F_RECV) {
        struct io_uring_sqe *sqe = conn_sqe(u, c, OP_CANCEL);
        io_uring_prep_cancel64(sqe, ud(OP_RECV, c), 0);
        uc(u, c)->flags |= F_RECV_CANCEL;
    }
    /* on while a cancellation is pending: the recv's final completion re-arms (recv_on). */
}

static void uring_send(struct worker *w, struct conn *c)
{
    struct uring *u = w->engine_state;
    struct plan *p = c->out;

    bool splice_mode = u->xfers != NULL;
    /* The slot's splice state is read only when a file segment is next (or the plan is
     * interleaved): its page is cold for connections that send from memory. */
    const struct seg *s = plan_seg(p);
    bool splice_ok = splice_mode && s && (!s->mem || sendplan_interleaved(p)) &&
                     !(u->xfers[c->slot].flags & X_SENDFILE);
    enum sendplan_path path = sendplan_choose(p, splice_mode, splice_ok);
    if (path == SENDPLAN_SPLICE) {
        if (file_send(w, u, c))
            return;
        path = SENDPLAN_SENDFILE; /* no pipe at all (out of fds) */
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
        uc(u, c)->err = rc;
        make_ready(u, c, F_SENT);
        return;
    }
    /* One segment (the usual answer: headers and a small body in one buffer) needs no
     * scratch the kernel reads later; only a SENDMSG touches the slot's (cold) usend. */
    struct iovec iov[SEND_IOV];
    int n = plan_iov(p, iov, SEND_IOV);
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

static void uring_close(struct worker *w, struct conn *c)
{
    struct uring *u = w->engine_state;
    if (uc(u, c)->flags & F_CLOSING)
        return;
    uc(u, c)->flags |= F_CLOSING;
    if (u->xfers)
        wait_remove(w, u, c); /* no pipe may be granted to a closing connection */
    if (uc(u, c)->inflight == 0) {
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
    if (uc(u, c)->flags & F_FREAD) /* a file read too: its buffer lives until conn_closed */
        io_uring_prep_cancel64(conn_sqe(u, c, OP_CANCEL), ud(OP_FREAD, c), 0);
}

/* A transport's file read: at once from the page cache, reported from the loop (run_ready);
 * else one READ, reported by on_fread. */
static void uring_read(struct worker *w, struct conn *c, int fd, void *buf, uint32_t len,
                       uint64_t off)
{
    struct uring *u = w->engine_state;
    struct iovec iov = {buf, len};
    ssize_t n = preadv2(fd, &iov, 1, (off_t)off, RWF_NOWAIT);
    if (n >= 0 || (errno != EAGAIN && errno != EOPNOTSUPP)) {
        uc(u, c)->rres = n < 0 ? -errno : (int32_t)n;
        make_ready(u, c, F_FREAD_DONE);
        return;
    }
    io_uring_prep_read(conn_sqe(u, c, OP_FREAD), fd, buf, len, off);
    uc(u, c)->flags |= F_FREAD;
}

static void on_fread(struct worker *w, struct uring *u, struct conn *c, int res)
{
    uc(u, c)->flags &= ~(uint32_t)F_FREAD;
    if (uc(u, c)->flags & F_CLOSING) {
        op_done(w, u, c); /* may release the slot: c is not touched after */
        return;
    }
    op_done(w, u, c);
    conn_read_done(w, c, res);
}

static void uring_shutdown(struct worker *w, struct conn *c)
{
    struct uring *u = w->engine_state;
    if (!(uc(u, c)->flags & F_CLOSING))
        io_uring_prep_shutdown(conn_sqe(u, c, OP_SHUTDOWN), c->fd, SHUT_WR);
}

/* Takes one socket accepted outside the multishot accept (the drain empties the listener). */
/* Starts a connection on an accepted (or held, see conn_accepted) socket. */
static bool accept_one(struct worker *w, int fd, unsigned lst)
{
    bool held;
    struct conn *c = conn_accepted(w, fd, lst, &held);
    if (c) {
        struct uring *u = w->engine_state;
        *uc(u, c) = (struct engine_conn){0};
        arm_recv(u, c);
    } else if (!held)
        close(fd); /* full of busy connections */
    return true;
}

/* The listener is closed once the accept is cancelled: until then the ring holds the socket,
 * and connections queued behind the cancel would only be reset later. */
static void uring_stop_accept(struct worker *w)
{
    struct uring *u = w->engine_state;
    for (unsigned i = 0; i < w->nlisteners; i++) {
        if (!u->accept_armed[i]) {
            worker_close_listener(w, i, accept_one);
            continue;
        }
        struct io_uring_sqe *sqe = get_sqe(u);
        io_uring_prep_cancel64(sqe, tag_encode(OP_ACCEPT, 0, i), 0);
        io_uring_sqe_set_data64(sqe, ud(OP_IGNORE, NULL));
    }
}

static void on_accept(struct worker *w, struct uring *u, const struct io_uring_cqe *cqe,
                      unsigned lst)
{
    if (cqe->res >= 0)
        accept_one(w, cqe->res, lst);
    if (!(cqe->flags & IORING_CQE_F_MORE)) {
        u->accept_armed[lst] = false;
        if (w->draining && !w->accepting) {
            worker_close_listener(w, lst, accept_one);
            return;
        }
        /* Out of fds or memory: the multishot accept ended, and re-armed at once it would fail
         * at once, every loop turn (issue 10: 100% CPU). It stays off until a connection
         * closes or a second passes (worker_accept_resume). */
        if (cqe->res < 0 && worker_accept_failed(w, cqe->res))
            return;
        if (!w->accept_paused)
            arm_accept(w, u, lst);
    }
}

/* Once per loop turn: sockets held for reclaimed slots, and a paused accept. */
static void accept_more(struct worker *w, struct uring *u)
{
    int fd;
    unsigned lst;
    while ((fd = conn_held_take(w, &lst)) >= 0)
        accept_one(w, fd, lst);
    bool idle = false; /* a listener is open and its accept is not armed */
    for (unsigned i = 0; i < w->nlisteners; i++)
        idle = idle || (!u->accept_armed[i] && w->listeners[i].fd >= 0 && w->accepting);
    if (idle && worker_accept_resume(w)) {
        for (unsigned i = 0; i < w->nlisteners; i++)
            if (!u->accept_armed[i] && w->listeners[i].fd >= 0 && w->accepting)
                arm_accept(w, u, i);
    }
}

static void recycle(struct uring *u, unsigned bid)
{
    io_uring_buf_ring_add(u->br, u->bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, (unsigned short)bid,
                          io_uring_buf_ring_mask(BUF_COUNT), (int)u->buf_returned);
    u->buf_returned++;
}

static void on_recv(struct worker *w, struct uring *u, struct conn *c,
                    const struct io_uring_cqe *cqe)
{
    int res = cqe->res;
    bool more = cqe->flags & IORING_CQE_F_MORE;
    if (!more) /* before conn sees the data, so it does not cancel a finished recv */
        uc(u, c)->flags &= ~(uint32_t)(F_RECV | F_RECV_CANCEL);
    if (res > 0) {
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        if (!(uc(u, c)->flags & F_CLOSING))
            conn_received(w, c, u->bufs + (size_t)bid * BUF_SIZE, res);
        recycle(u, bid);
    } else if (res == 0 || (res < 0 && res != -ENOBUFS && res != -ECANCELED)) {
        if (!(uc(u, c)->flags & F_CLOSING))
            conn_received(w, c, NULL, res);
    }
    if (!more) {
        if (res > 0)
            uc(u, c)->flags |= F_MULTI;
        /* ENOBUFS, a cancellation we no longer want, or the kernel ending the multishot for
         * its own reasons: keep receiving if conn still wants to. */
        bool again = res > 0 || res == -ENOBUFS || res == -ECANCELED;
        if (again && c->recv_on && !c->eof && !(uc(u, c)->flags & (F_CLOSING | F_RECV)))
            arm_recv(u, c);
        op_done(w, u, c);
    }
}

static void on_send(struct worker *w, struct uring *u, struct conn *c, int res)
{
    if (uc(u, c)->flags & F_CLOSING) {
        op_done(w, u, c);
        return;
    }
    op_done(w, u, c);
    if (res <= 0) {
        conn_sent(w, c, res == 0 ? -EPIPE : res);
        return;
    }
    plan_advance(c->out, (uint64_t)res);
    if (plan_done(c->out))
        conn_sent(w, c, 0);
    else
        uring_send(w, c); /* short send: continue where it stopped */
}

/* c's pipe is empty and no splice of c is in flight: the pipe goes back to the pool (to a
 * waiter first), then c's plan is reported done or goes on through uring_send. */
static void pipe_put_go_on(struct worker *w, struct uring *u, struct conn *c)
{
    u->xfers[c->slot].flags = 0;
    pipepool_put(&u->pool, c->slot, w->now);
    grant_waiters(w, u);
    if (plan_done(c->out))
        conn_sent(w, c, 0);
    else
        uring_send(w, c);
}

/* The socket took less than offered: wait for POLLOUT, parked (whoever needs a pipe until
 * then may take c's: someone does now if anyone waits). */
static void park_until_writable(struct worker *w, struct uring *u, struct conn *c)
{
    io_uring_prep_poll_add(conn_sqe(u, c, OP_POLL), c->fd, POLLOUT);
    pipepool_park(&u->pool, c->slot);
    if (u->pool.wait_head)
        grant_waiters(w, u);
}

/* Both splices of a step have completed: report, continue, or wait for the socket. */
static void splice_next(struct worker *w, struct uring *u, struct conn *c)
{
    struct xfer *x = &u->xfers[c->slot];
    struct pipepool_slot *ph = ps(u, c);
    struct plan *p = c->out;
    if (x->err) {
        int err = x->err;
        x->err = 0;
        conn_sent(w, c, err); /* it closes; the pipe is released (or dropped) at the close */
        return;
    }
    struct seg *s = plan_seg(p);
    if (ph->in_pipe == 0 && (!s || s->mem)) {
        pipe_put_go_on(w, u, c); /* the file segment is done and the pipe empty */
        return;
    }
    if (x->flags & X_FULL) {
        x->flags &= ~(uint32_t)X_FULL;
        park_until_writable(w, u, c);
        return;
    }
    if (ph->in_pipe == 0 && u->pool.wait_head) {
        /* Others wait: pass the (empty) pipe on and queue behind them, a pipe-full a turn. */
        pipepool_put(&u->pool, c->slot, w->now);
        grant_waiters(w, u);
        if (!file_send(w, u, c))
            uring_send(w, c);
        return;
    }
    splice_step(u, c);
}

/* A fill sized for it (X_FITS) and the memory segments around it composed into the scratch
 * pipe, which becomes c's (the emptied pipe is the next scratch): the plan from its cursor in
 * order, for sendplan_drain. Page references move from pipe to pipe: no disk read, no copy.
 * False, c's pipe untouched, when there is no scratch pipe (its bytes go by sendplan_pipe). */
static bool walk_compose(struct worker *w, struct uring *u, struct conn *c, int *rc)
{
    struct pipepool_slot *ph = ps(u, c);
    struct pipepool_pipe *t = pipepool_scratch(&u->pool);
    if (!t)
        return false;
    uint32_t in = 0;
    *rc = sendplan_recompose(c->out, ph->pipe->fd[0], &ph->in_pipe, t->fd[1], t->cap, &in);
    if (*rc < 0) {
        /* Bytes may be left in both pipes: c's is closed at its close (in_pipe counts what it
         * still holds), the scratch now. -ENOSPC breaks sendplan_fill_len's promise. */
        pipepool_scratch_reset(&u->pool);
        *rc = *rc == -ENOSPC ? -EIO : *rc;
        return true;
    }
    pipepool_exchange(&u->pool, c->slot, w->now);
    ph->in_pipe = in;
    u->xfers[c->slot].flags |= X_COMPOSED;
    return true;
}

/* An interleaved plan's step after its fill (or POLLOUT): the pipe's bytes go out from the
 * loop (non-blocking, no disk read: the bytes are in the pipe), composed with their headers
 * (walk_compose, then sendplan_drain) or, raw, by sendplan_pipe; then the plan is done, waits
 * for the socket (parked, as a splice pair does), or has the emptied pipe filled again. */
static void walk_next(struct worker *w, struct uring *u, struct conn *c)
{
    struct xfer *x = &u->xfers[c->slot];
    struct pipepool_slot *ph = ps(u, c);
    struct plan *p = c->out;
    int rc = x->err;
    x->err = 0;
    bool composed = x->flags & X_COMPOSED;
    if (rc == 0 && !composed && (x->flags & X_FITS) && ph->in_pipe > 0)
        composed = walk_compose(w, u, c, &rc);
    if (rc == 0 && composed) {
        rc = sendplan_drain(c->fd, p, ph->pipe->fd[0], &ph->in_pipe);
        if (rc == 0) {
            x->flags &= ~(uint32_t)X_COMPOSED;
            rc = plan_done(p) ? 0 : -ENODATA;
        }
    } else if (rc == 0) {
        rc = sendplan_pipe(c->fd, p, ph->pipe->fd[0], &ph->in_pipe);
    }
    if (rc != 0 && rc != -EAGAIN && rc != -ENODATA) {
        conn_sent(w, c, rc); /* it closes; the pipe is released (or dropped) at the close */
        return;
    }
    assert(rc != 0 || ph->in_pipe == 0); /* a fill never takes more than the plan's file bytes */
    if (ph->in_pipe == 0 && (rc == 0 || !sendplan_has_file(p) || u->pool.wait_head)) {
        /* No file byte left (the rest, if any, is memory), or others wait for a pipe: this
         * one goes back (to them first) and the plan goes on through uring_send. */
        pipe_put_go_on(w, u, c);
        return;
    }
    if (rc == -EAGAIN) {
        park_until_writable(w, u, c);
        return;
    }
    walk_fill(u, c); /* -ENODATA: the pipe is empty and file bytes are next */
}

/* Once per loop turn: a connection that has waited PIPE_WAIT_MAX for a pipe goes on by
 * sendfile (blocking the loop on a cold file is better than stalling the download). */
static void unstall_waiters(struct worker *w, struct uring *u)
{
    int64_t slot;
    while ((slot = pipepool_stalled(&u->pool, w->now, PIPE_WAIT_MAX)) >= 0) {
        stat_add(&w->stats.pipe_waits_done, 1);
        u->xfers[slot].flags |= X_SENDFILE;
        uring_send(w, &w->conns[slot]);
    }
}

/* The pipe -> socket part of a step returned res. */
static void splice_out_done(struct xfer *x, struct pipepool_slot *ph, struct conn *c, int res)
{
    if (res > 0) {
        ph->in_pipe -= (uint32_t)res;
        plan_advance(c->out, (uint64_t)res);
        if ((uint32_t)res < x->want_out)
            x->flags |= X_FULL;
    } else if (res == -EAGAIN) {
        x->flags |= X_FULL;
    } else if (res == 0) {
        x->err = x->err ? x->err : -EPIPE;
    } else if (res != -ECANCELED || !(x->err || ph->in_pipe < x->want_in)) {
        /* -ECANCELED after a short file splice is the broken link, not a failure. */
        x->err = x->err ? x->err : res;
    }
}

/* After POLLOUT, what the pipe still holds goes out by one non-blocking splice(2) from the
 * loop. Those bytes are in memory already, so the io-wq round trip an IORING_OP_SPLICE always
 * takes (the kernel never issues one inline) buys nothing; with TCP_NOTSENT_LOWAT most of a
 * large file leaves by such flushes. False when c has no such bytes. */
static bool flush_now(struct worker *w, struct uring *u, struct conn *c)
{
    struct xfer *x = u->xfers ? &u->xfers[c->slot] : NULL;
    struct pipepool_slot *ph = x ? ps(u, c) : NULL;
    if (!x || !ph->pipe || (x->flags & (X_IN | X_OUT)))
        return false;
    if (x->flags & X_WALK) {
        walk_next(w, u, c);
        return true;
    }
    if (ph->in_pipe == 0)
        return false;
    struct plan *p = c->out;
    bool more = p->cur + 1 < p->nseg || ph->in_pipe < plan_seg(p)->len;
    x->want_in = 0;
    x->want_out = ph->in_pipe;
    ssize_t n = splice(ph->pipe->fd[0], NULL, c->fd, NULL, ph->in_pipe,
                       SPLICE_F_NONBLOCK | (more ? SPLICE_F_MORE : 0));
    splice_out_done(x, ph, c, n < 0 ? -errno : (int)n);
    splice_next(w, u, c);
    return true;
}

static void on_splice(struct worker *w, struct uring *u, struct conn *c, enum op op, int res)
{
    struct xfer *x = &u->xfers[c->slot];
    struct pipepool_slot *ph = ps(u, c);
    if (op == OP_SPLICE_IN) {
        x->flags &= ~(uint32_t)X_IN;
        if (res > 0)
            ph->in_pipe += (uint32_t)res;
        /* Short: the link broke and the socket splice ends -ECANCELED; the bytes that did
         * arrive are flushed by the next step. None at all: the file shrank under us. */
        if (res == 0)
            x->err = x->err ? x->err : -EIO;
        else if (res < 0)
            x->err = x->err ? x->err : res;
    } else {
        x->flags &= ~(uint32_t)X_OUT;
        splice_out_done(x, ph, c, res);
    }
    if (uc(u, c)->flags & F_CLOSING) {
        op_done(w, u, c); /* may release the slot: c is not touched after */
        return;
    }
    op_done(w, u, c);
    if (x->flags & (X_IN | X_OUT))
        return;
    if (x->flags & X_WALK)
        walk_next(w, u, c);
    else
        splice_next(w, u, c);
}

static void handle(struct worker *w, struct uring *u, const struct io_uring_cqe *cqe)
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
    case OP_IGNORE:
        return;
    default:
        break;
    }
    struct conn *c = t.slot < w->cfg->max_conns ? &w->conns[t.slot] : NULL;
    if (!c || c->state == CONN_FREE || !tag_is_current(t, c->gen)) {
        /* Stale: cannot happen while slots wait for their last completion, but a buffer it
         * carries must still go back. */
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
        if (uc(u, c)->flags & F_CLOSING)
            break;
        if (cqe->res < 0)
            conn_sent(w, c, cqe->res);
        else if (!flush_now(w, u, c))
            uring_send(w, c);
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

/* Reports synchronous sends that finished during this turn. */
static void run_ready(struct worker *w, struct uring *u)
{
    while (u->ready) {
        struct conn *c = u->ready;
        u->ready = uc(u, c)->next;
        uint32_t what = uc(u, c)->flags;
        uc(u, c)->flags &= ~(uint32_t)(F_READY | F_SENT | F_CLOSED | F_FREAD_DONE);
        if (what & F_CLOSED) {
            conn_closed(w, c);
            continue;
        }
        if ((what & F_SENT) && !(what & F_CLOSING))
            conn_sent(w, c, uc(u, c)->err);
        if ((what & F_FREAD_DONE) && !(uc(u, c)->flags & F_CLOSING))
            conn_read_done(w, c, uc(u, c)->rres);
    }
}

static int uring_run(struct worker *w)
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

    while (worker_tick(w)) {
        accept_more(w, u);
        sqe_flush(&u->ring, &u->spill);
        rc = io_uring_submit_and_wait(&u->ring, 1);
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
        obs_loop_turn(w, 1, count);
        if (u->buf_returned) {
            io_uring_buf_ring_advance(u->br, (int)u->buf_returned);
            u->buf_returned = 0;
        }
        if (u->pool.wait_head)
            unstall_waiters(w, u);
        if (u->pool.free || (u->xfers && u->pool.scratch.fd[0] >= 0))
            pipepool_trim(&u->pool, w->now, PIPE_IDLE);
        run_ready(w, u);
    }
    /* Drained: every connection has closed; let the last submissions (cancels) go. */
    sqe_flush(&u->ring, &u->spill);
    io_uring_submit(&u->ring);
    return 0;
}

/* --- the probe: once per process, before any worker; see caps.h ---------------------- */

static const int caps_opcodes[CAPS_OP_COUNT] = {
    [CAPS_OP_ACCEPT] = IORING_OP_ACCEPT,     [CAPS_OP_RECV] = IORING_OP_RECV,
    [CAPS_OP_SEND] = IORING_OP_SEND,         [CAPS_OP_SENDMSG] = IORING_OP_SENDMSG,
    [CAPS_OP_POLL_ADD] = IORING_OP_POLL_ADD, [CAPS_OP_ASYNC_CANCEL] = IORING_OP_ASYNC_CANCEL,
    [CAPS_OP_CLOSE] = IORING_OP_CLOSE,       [CAPS_OP_READ] = IORING_OP_READ,
    [CAPS_OP_TIMEOUT] = IORING_OP_TIMEOUT,   [CAPS_OP_SHUTDOWN] = IORING_OP_SHUTDOWN,
    [CAPS_OP_SPLICE] = IORING_OP_SPLICE,
};

#define PROBE_BUFS 8 /* power of two */
#define PROBE_BUF_SIZE 64
enum { PROBE_ACCEPT = 1, PROBE_RECV, PROBE_CANCEL };

/* The next completion with user data want (others are dropped), within a second. */
static int probe_wait(struct io_uring *ring, uint64_t want, struct io_uring_cqe *out)
{
    struct __kernel_timespec ts = {.tv_sec = 1};
    for (;;) {
        struct io_uring_cqe *cqe;
        int rc = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
        if (rc < 0)
            return rc;
        *out = *cqe;
        io_uring_cqe_seen(ring, cqe);
        if (out->user_data == want)
            return 0;
    }
}

static void try_set(struct caps_try *t, bool ok, int err)
{
    t->result = ok ? CAPS_OK : CAPS_FAILED;
    t->err = ok ? 0 : (err < 0 ? err : -EINVAL);
}

/* Submits one prepared SQE and waits for its completion into *cqe; -errno when neither came. */
static int probe_submit(struct io_uring *ring, uint64_t want, struct io_uring_cqe *cqe)
{
    int rc = io_uring_submit(ring);
    if (rc < 0)
        return rc;
    return probe_wait(ring, want, cqe);
}

/*
 * What the opcode probe cannot tell, tried for real on a ring set up as the workers' will be:
 * a provided buffer ring, a multishot accept on a listening (AF_UNIX) socket, a multishot recv
 * into that buffer ring with data waiting, and a cancellation of all of an fd's operations. An
 * opcode that exists can still refuse a mode (multishot recv came in 6.0, a kernel after the
 * buffer rings of 5.19), so each is judged by its completion: a result and IORING_CQE_F_MORE.
 * Stops at the first failure: the ones after it stay CAPS_UNTRIED.
 */
static void probe_tries(struct io_uring *ring, struct engine_caps *caps)
{
    struct io_uring_buf_ring *br = NULL;
    char bufs[PROBE_BUFS][PROBE_BUF_SIZE];
    int lfd = -1, cfd = -1, afd = -1, rc;
    struct io_uring_cqe cqe;
    struct io_uring_sqe *sqe;

    size_t br_size = PROBE_BUFS * sizeof(struct io_uring_buf);
    void *mem = mmap(NULL, br_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        try_set(&caps->buf_ring, false, -errno);
        return;
    }
    br = mem;
    io_uring_buf_ring_init(br);
    struct io_uring_buf_reg reg = {
        .ring_addr = (unsigned long)mem, .ring_entries = PROBE_BUFS, .bgid = BGID};
    rc = io_uring_register_buf_ring(ring, &reg, 0);
    try_set(&caps->buf_ring, rc == 0, rc);
    if (rc < 0)
        goto out_unmap;
    for (unsigned i = 0; i < PROBE_BUFS; i++)
        io_uring_buf_ring_add(br, bufs[i], PROBE_BUF_SIZE, (unsigned short)i,
                              io_uring_buf_ring_mask(PROBE_BUFS), (int)i);
    io_uring_buf_ring_advance(br, PROBE_BUFS);

    /* A listener with an autobound abstract name, and a client already in its backlog. */
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    socklen_t sun_len = sizeof(sa_family_t);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || cfd < 0 || bind(lfd, (struct sockaddr *)&sun, sun_len) != 0 ||
        listen(lfd, 4) != 0 ||
        (sun_len = sizeof(sun), getsockname(lfd, (struct sockaddr *)&sun, &sun_len)) != 0 ||
        connect(cfd, (struct sockaddr *)&sun, sun_len) != 0) {
        try_set(&caps->accept_ms, false, -errno);
        goto out_fds;
    }
    sqe = io_uring_get_sqe(ring);
    if (!sqe) { /* 8 entries, one in use at a time: cannot happen, never dereferenced */
        try_set(&caps->accept_ms, false, -EBUSY);
        goto out_fds;
    }
    io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, PROBE_ACCEPT);
    rc = probe_submit(ring, PROBE_ACCEPT, &cqe);
    afd = rc == 0 ? cqe.res : -1;
    try_set(&caps->accept_ms, rc == 0 && cqe.res >= 0 && (cqe.flags & IORING_CQE_F_MORE),
            rc < 0 ? rc : cqe.res);
    if (caps->accept_ms.result != CAPS_OK)
        goto out_fds;

    if (write(cfd, "probe", 5) != 5) {
        try_set(&caps->recv_ms, false, -errno);
        goto out_fds;
    }
    sqe = io_uring_get_sqe(ring);
    if (!sqe) { /* 8 entries, one in use at a time: cannot happen, never dereferenced */
        try_set(&caps->recv_ms, false, -EBUSY);
        goto out_fds;
    }
    io_uring_prep_recv_multishot(sqe, afd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BGID;
    io_uring_sqe_set_data64(sqe, PROBE_RECV);
    rc = probe_submit(ring, PROBE_RECV, &cqe);
    try_set(&caps->recv_ms,
            rc == 0 && cqe.res == 5 && (cqe.flags & IORING_CQE_F_BUFFER) &&
                (cqe.flags & IORING_CQE_F_MORE),
            rc < 0 ? rc : cqe.res);
    if (caps->recv_ms.result != CAPS_OK)
        goto out_fds;

    /* The recv is still armed: cancelling everything on its fd must find it. */
    sqe = io_uring_get_sqe(ring);
    if (!sqe) { /* 8 entries, one in use at a time: cannot happen, never dereferenced */
        try_set(&caps->cancel_all, false, -EBUSY);
        goto out_fds;
    }
    io_uring_prep_cancel_fd(sqe, afd, IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(sqe, PROBE_CANCEL);
    rc = probe_submit(ring, PROBE_CANCEL, &cqe);
    try_set(&caps->cancel_all, rc == 0 && cqe.res >= 1, rc < 0 ? rc : cqe.res);

out_fds:
    if (afd >= 0)
        close(afd);
    if (cfd >= 0)
        close(cfd);
    if (lfd >= 0)
        close(lfd);
    io_uring_unregister_buf_ring(ring, BGID);
out_unmap:
    munmap(mem, br_size);
}

void uring_probe(struct engine_caps *caps)
{
    struct io_uring ring;
    struct io_uring_params p;
    int rc = -EINVAL;

    caps->probed = true;
    /* The workers' setup exactly (CQSIZE, R_DISABLED), strongest mode first, each step
     * dropping what an older kernel refuses with EINVAL. */
    for (size_t i = 0; i < sizeof(setup_modes) / sizeof(setup_modes[0]); i++) {
        p = (struct io_uring_params){
            .flags = setup_modes[i].flags | IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED,
            .cq_entries = CQ_ENTRIES,
        };
        rc = io_uring_queue_init_params(SQ_ENTRIES, &ring, &p);
        if (rc == 0) {
            caps->setup = setup_modes[i].caps;
            caps->features = p.features;
            caps->cqe_skip = p.features & IORING_FEAT_CQE_SKIP;
            io_uring_queue_exit(&ring);
            break;
        }
        if (rc != -EINVAL)
            break;
    }
    try_set(&caps->ring, rc == 0, rc);
    if (rc < 0)
        return;

    /* A small ring in the same mode, enabled (this thread submits), for what needs trying. */
    p = (struct io_uring_params){.flags = setup_flags(caps->setup)};
    rc = io_uring_queue_init_params(8, &ring, &p);
    if (rc < 0) {
        try_set(&caps->ring, false, rc);
        return;
    }
    struct io_uring_probe *probe = io_uring_get_probe_ring(&ring);
    if (probe) {
        for (int op = 0; op < CAPS_OP_COUNT; op++)
            if (io_uring_opcode_supported(probe, caps_opcodes[op]))
                caps->ops |= 1u << op;
        io_uring_free_probe(probe);
    }
    if (caps->ops)
        probe_tries(&ring, caps);
    io_uring_queue_exit(&ring);
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
    .peer = engine_peer,
    .ktls = engine_ktls,
};
