/* The io_uring engine's splice walk: file ranges by --file-send splice, the default (issue 5:
 * zero-copy without blocking the loop).
 * - IORING_OP_SPLICE file -> pipe linked (IOSQE_IO_LINK) to pipe -> socket,
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
 *   one from the filled pipe (sendplan_pipe: a header sendmsg, a payload splice). */
#include "engine/uring_splice.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config/config.h"
#include "engine/caps.h"
#include "engine/engine.h"
#include "engine/sendplan.h"
#include "rt/pipesize.h"
#include "rt/runtime.h"

#define PIPE_BYTES (1u << 20) /* asked of F_SETPIPE_SZ: one splice step moves at most this */

/* A connection waits at most this long (seconds, give or take one) for a pipe before its
 * response goes by sendfile: clients that stop reading hold their pipes (with bytes in them)
 * until they read or time out, and must not stall everyone else's large files that long. */
#define PIPE_WAIT_MAX 2

/* --file-send splice: the per-slot state and the pool's slots (pipes are made on first use).
 * A kernel without IORING_OP_SPLICE falls back to sendfile. */
int uring_splice_setup(struct runtime *w, struct uring *u)
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

void uring_splice_release(struct runtime *w, struct uring *u)
{
    (void)w;
    if (u->pool.slots)
        pipepool_fini(&u->pool);
    free(u->xfers);
    u->xfers = NULL;
}

/* A pipe got less than PIPE_BYTES (another process of this user holds pipe pages). */
static void note_short_pipes(struct runtime *w, struct uring *u)
{
    if (u->pool.short_pipes == u->short_logged)
        return;
    u->short_logged = u->pool.short_pipes;
    errlog_limited(&u->log_pipe, ERRLOG_WARN,
                   "worker %d: a splice pipe got less than the %u KiB asked (another process of "
                   "this user holds pipe pages: fs.pipe-user-pages-soft)",
                   w->id, u->pool.bytes >> 10);
}

static void splice_step(struct uring *u, struct engine_conn *c);

/* Hands free (or newly made, or taken) pipes to waiting connections, oldest first. */
static void grant_waiters(struct runtime *w, struct uring *u)
{
    int64_t slot;
    while ((slot = pipepool_grant(&u->pool)) >= 0) {
        stat_add(&w->stats.pipe_waits_done, 1);
        splice_step(u, engine_conn_at(&w->eslots, slot));
    }
    note_short_pipes(w, u);
}

void uring_splice_unwait(struct runtime *w, struct uring *u, struct engine_conn *c)
{
    if (pipepool_unwait(&u->pool, c->slot))
        stat_add(&w->stats.pipe_waits_done, 1);
}

/* Drops c's claim on the pool: out of the wait queue, its pipe back to the pool when provably
 * empty, else closed (a dirty pipe would put another response's bytes on a socket). No splice
 * of c may be in flight. */
void uring_splice_drop(struct runtime *w, struct uring *u, struct engine_conn *c)
{
    if (!u->xfers)
        return;
    uring_splice_unwait(w, u, c);
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
static void walk_fill(struct uring *u, struct engine_conn *c)
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
static void splice_step(struct uring *u, struct engine_conn *c)
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
bool uring_splice_send(struct runtime *w, struct uring *u, struct engine_conn *c)
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

/* c's pipe is empty and no splice of c is in flight: the pipe goes back to the pool (to a
 * waiter first), then c's plan is reported done or goes on through uring_send. */
static void pipe_put_go_on(struct runtime *w, struct uring *u, struct engine_conn *c)
{
    u->xfers[c->slot].flags = 0;
    pipepool_put(&u->pool, c->slot, w->now);
    grant_waiters(w, u);
    if (plan_done(c->out))
        w->up->sent(w, c, 0);
    else
        engine_uring.send(w, c, c->out);
}

/* The socket took less than offered: wait for POLLOUT, parked (whoever needs a pipe until
 * then may take c's: someone does now if anyone waits). */
static void park_until_writable(struct runtime *w, struct uring *u, struct engine_conn *c)
{
    io_uring_prep_poll_add(conn_sqe(u, c, OP_POLL), c->fd, POLLOUT);
    pipepool_park(&u->pool, c->slot);
    if (u->pool.wait_head)
        grant_waiters(w, u);
}

/* Both splices of a step have completed: report, continue, or wait for the socket. */
static void splice_next(struct runtime *w, struct uring *u, struct engine_conn *c)
{
    struct xfer *x = &u->xfers[c->slot];
    struct pipepool_slot *ph = ps(u, c);
    struct plan *p = c->out;
    if (x->err) {
        int err = x->err;
        x->err = 0;
        w->up->sent(w, c, err); /* it closes; the pipe is released (or dropped) at the close */
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
        if (!uring_splice_send(w, u, c))
            engine_uring.send(w, c, c->out);
        return;
    }
    splice_step(u, c);
}

/* A fill sized for it (X_FITS) and the memory segments around it composed into the scratch
 * pipe, which becomes c's (the emptied pipe is the next scratch): the plan from its cursor in
 * order, for sendplan_drain. Page references move from pipe to pipe: no disk read, no copy.
 * False, c's pipe untouched, when there is no scratch pipe (its bytes go by sendplan_pipe). */
static bool walk_compose(struct runtime *w, struct uring *u, struct engine_conn *c, int *rc)
{
    struct pipepool_slot *ph = ps(u, c);
    struct pipepool_pipe *t = pipepool_scratch(&u->pool);
    if (!t)
        return false;
    uint32_t in = 0;
    *rc = sendplan_recompose(c->out, ph->pipe->fd[0], &ph->in_pipe, t->fd[1], t->cap, &in,
                             pipepool_template(&u->pool));
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
static void walk_next(struct runtime *w, struct uring *u, struct engine_conn *c)
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
        w->up->sent(w, c, rc); /* it closes; the pipe is released (or dropped) at the close */
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
void uring_splice_unstall(struct runtime *w, struct uring *u)
{
    int64_t slot;
    while ((slot = pipepool_stalled(&u->pool, w->now, PIPE_WAIT_MAX)) >= 0) {
        stat_add(&w->stats.pipe_waits_done, 1);
        u->xfers[slot].flags |= X_SENDFILE;
        struct engine_conn *c = engine_conn_at(&w->eslots, slot);
        engine_uring.send(w, c, c->out);
    }
}

/* The pipe -> socket part of a step returned res. */
static void splice_out_done(struct xfer *x, struct pipepool_slot *ph, struct engine_conn *c,
                            int res)
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
bool uring_splice_flush(struct runtime *w, struct uring *u, struct engine_conn *c)
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

void uring_splice_result(struct uring *u, struct engine_conn *c, enum op op, int res)
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
}

void uring_splice_continue(struct runtime *w, struct uring *u, struct engine_conn *c)
{
    struct xfer *x = &u->xfers[c->slot];
    if (x->flags & (X_IN | X_OUT))
        return;
    if (x->flags & X_WALK)
        walk_next(w, u, c);
    else
        splice_next(w, u, c);
}
