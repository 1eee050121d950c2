/* sqe: the io_uring engine's source of submission queue entries, which never hands out NULL:
 * a full SQ is flushed and asked again, and what the kernel will not take waits, in order, in a
 * spill list copied into the ring at the next loop turn.
 * Must not: reorder SQEs or split a linked chain across submissions; touch CQEs.
 * Ownership: one struct sqe_spill per ring, used by the thread that submits to that ring. */
#ifndef ENGINE_SQE_H
#define ENGINE_SQE_H

#include <liburing.h>
#include <stdbool.h>

/* An SQE prepared while the ring had no room for it. */
struct sqe_spilled {
    struct sqe_spilled *next;
    struct io_uring_sqe sqe;
};

/* Zero-initialised before use. */
struct sqe_spill {
    struct sqe_spilled *head, *tail; /* waiting for room, oldest first */
    struct sqe_spilled *free;        /* nodes to reuse */
    bool spilling; /* every SQE spills until sqe_flush empties the list (keeps their order) */
};

struct io_uring_sqe *sqe_get_slow(struct io_uring *ring, struct sqe_spill *s);

/*
 * The SQE for the next operation; never NULL. A full SQ is flushed (submitted early) and asked
 * again. When the kernel still takes nothing (-EBUSY while its CQ overflows, -EAGAIN or -ENOMEM
 * for its request memory), the SQE is a spill node's, copied into the ring by sqe_flush; from
 * the first spill until then every SQE spills, so the kernel sees them in the order they were
 * prepared. Ends the process only when the allocator also refuses a 64-byte node.
 */
static inline struct io_uring_sqe *sqe_get(struct io_uring *ring, struct sqe_spill *s)
{
    struct io_uring_sqe *sqe;
    if (!s->spilling && (sqe = io_uring_get_sqe(ring)))
        return sqe;
    return sqe_get_slow(ring, s);
}

/* Before n sqe_get calls whose SQEs must reach the kernel in one submission (a linked chain):
 * flushes the SQ when it has less room, and spills the chain whole when the kernel refuses. */
void sqe_reserve(struct io_uring *ring, struct sqe_spill *s, unsigned n);

/* Copies spilled SQEs into the ring, oldest first, submitting as it fills (a linked SQE only
 * with its successor); what the kernel still refuses stays spilled. Call once per loop turn
 * before submitting. */
void sqe_flush(struct io_uring *ring, struct sqe_spill *s);

/* Frees every node (spilled SQEs are dropped: the ring is being torn down). */
void sqe_spill_free(struct sqe_spill *s);

#endif
