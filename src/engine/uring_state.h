/* uring_state: the io_uring engine's per-worker state and the helpers its loop (uring.c) and its
 * splice walk (uring_splice.c) share: the operations a tag names, the ring, the SQE helpers.
 * Must not: be included outside the io_uring engine's files; hold functions with a body of more
 * than a few lines. Ownership: struct uring is one worker's (w->engine_state), used by its thread.
 */
#ifndef ENGINE_URING_STATE_H
#define ENGINE_URING_STATE_H

#include <errno.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#include "engine/engine.h"
#include "engine/pipepool.h"
#include "engine/sqe.h"
#include "engine/tag.h"
#include "rt/errlog.h"
#include "rt/runtime.h"

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
    OP_FREAD,    /* a transport's file read (engine_ops.read) */
    OP_UDP,      /* multishot POLLIN on a UDP socket of the worker's (HTTP/3; the tag's slot is its
                  * index in w->udp[]), where RECVMSG fails */
    OP_UDP_RECV, /* multishot RECVMSG on one into provided buffers (engine/uring_udp.h) */
    OP_UDP_SEND, /* SENDMSG of a copy of datagrams; the tag's slot names the copy */
};

/* xfer flags */
#define X_IN 0x1   /* an OP_SPLICE_IN is in flight */
#define X_OUT 0x2  /* an OP_SPLICE_OUT is in flight */
#define X_FULL 0x8 /* the socket took less than offered: wait for POLLOUT before the next step */
#define X_SENDFILE 0x10 /* waited too long for a pipe: the rest of this response by sendfile */
#define X_WALK 0x20     /* the pipe holds file bytes of an interleaved plan: walk_next sends */
#define X_FITS 0x40     /* ... read by a fill sized to be composed into the scratch pipe */
#define X_COMPOSED 0x80 /* ... composed: the plan's bytes from the cursor, headers included */

/* A connection's splice steps, by slot (these pages are touched only by slots that send files);
 * its pipe, and its place among the waiting and parked, are the pool's (engine/pipepool.h). */
struct xfer {
    uint32_t want_in;  /* length of the OP_SPLICE_IN in flight */
    uint32_t want_out; /* length of the OP_SPLICE_OUT in flight */
    uint32_t flags;
    int err; /* first failure of the current step */
};

struct usend;
struct uring_udp;
struct uring_udp_tx;

struct uring {
    struct io_uring ring;
    struct usend *sends;    /* max_conns slots, touched only by slots that send several segments */
    struct sqe_spill spill; /* SQEs the kernel would not take yet (engine/sqe.h) */
    struct io_uring_buf_ring *br;
    char *bufs;
    bool accept_armed[LISTEN_MAX]; /* a multishot accept is armed on that listener */
    bool cqe_skip;                 /* IOSQE_CQE_SKIP_SUCCESS works (5.17) */
    uint64_t wake_val;
    struct __kernel_timespec tick; /* read by the kernel when the TIMEOUT is submitted */
    uint64_t tick_due;             /* when the armed TIMEOUT fires (CLOCK_MONOTONIC, ns) */
    int tick_ms;                   /* and the wait it was armed with */
    struct engine_conn *ready;     /* connections with a completion to report from the loop */
    unsigned freads;               /* OP_FREADs in flight: run waits for them before it ends */
    size_t now_left;               /* bytes send_out may still send at once this turn */
    /* --file-send splice; xfers is NULL in sendfile mode */
    struct xfer *xfers;
    struct pipepool pool;  /* its pipes; pool.slots is NULL until set up */
    unsigned page;         /* bytes a pipe buffer holds (the page size) */
    unsigned short_logged; /* pool.short_pipes already warned about */
    struct errlog_limit log_pipe;
    struct uring_udp *udp;       /* HTTP/3's receive (engine/uring_udp.h), or NULL */
    struct uring_udp_tx *udp_tx; /* HTTP/3's sends (engine/uring_udp.h), or NULL */
};

/* A ring of count provided buffers of size bytes each, bufs[i * size], registered as group
 * bgid and all given to the kernel: 0 with *out (munmap it, count entries, when done), or
 * -errno. The TCP receive's and HTTP/3's UDP receive's. */
static inline int buf_ring_setup(struct io_uring *ring, unsigned bgid, unsigned count, char *bufs,
                                 size_t size, struct io_uring_buf_ring **out)
{
    size_t ring_size = count * sizeof(struct io_uring_buf);
    void *mem = mmap(NULL, ring_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return -errno;
    struct io_uring_buf_ring *br = mem;
    io_uring_buf_ring_init(br);
    struct io_uring_buf_reg reg = {
        .ring_addr = (unsigned long)mem, .ring_entries = count, .bgid = (uint16_t)bgid};
    int rc = io_uring_register_buf_ring(ring, &reg, 0);
    if (rc < 0) {
        munmap(mem, ring_size);
        return rc;
    }
    for (unsigned i = 0; i < count; i++)
        io_uring_buf_ring_add(br, bufs + (size_t)i * size, (unsigned)size, (unsigned short)i,
                              io_uring_buf_ring_mask(count), (int)i);
    io_uring_buf_ring_advance(br, (int)count);
    *out = br;
    return 0;
}

static inline struct pipepool_slot *ps(struct uring *u, const struct engine_conn *c)
{
    return pipepool_slot(&u->pool, c->slot);
}

/* An operation's user_data (engine/tag.h): for c, or for the worker when c is NULL. */
static inline uint64_t ud(enum op op, const struct engine_conn *c)
{
    return c ? tag_encode(op, c->gen, c->slot) : tag_encode(op, 0, 0);
}

static inline struct io_uring_sqe *get_sqe(struct uring *u)
{
    return sqe_get(&u->ring, &u->spill);
}

/* Every SQE prepared for a connection counts until its final CQE. */
static inline struct io_uring_sqe *conn_sqe(struct uring *u, struct engine_conn *c, enum op op)
{
    struct io_uring_sqe *sqe = get_sqe(u);
    io_uring_sqe_set_data64(sqe, ud(op, c));
    c->inflight++;
    return sqe;
}

#endif
