/* bufpool: fixed-size buffers recycled through a free list, so steady-state requests allocate
 * nothing; after a burst the worker gives what is free beyond BUFPOOL_LOW_WATER back.
 * Must not: be shared between threads (each worker has its own pools).
 * Ownership: a buffer belongs to whoever took it until it is put back; the pool owns the free
 * ones. */
#ifndef RT_BUFPOOL_H
#define RT_BUFPOOL_H

#include <stddef.h>

/* Fixed-size buffers recycled through a free list, so steady-state requests allocate nothing.
 * After a burst, worker_tick gives what is free beyond BUFPOOL_LOW_WATER back to the system. */
struct bufpool {
    void *free;
    size_t size;
    unsigned count; /* buffers handed out and not yet returned */
    unsigned nfree; /* buffers on the free list */
};

#define BUFPOOL_LOW_WATER 64 /* free buffers a pool keeps for the next burst */

/* A buffer of bp->size bytes, or NULL when memory is short. */
void *bufpool_get(struct bufpool *bp);
void bufpool_put(struct bufpool *bp, void *buf);

/* Frees what the free list holds beyond keep buffers; returns the bytes freed. */
size_t bufpool_trim(struct bufpool *bp, unsigned keep);

#endif
