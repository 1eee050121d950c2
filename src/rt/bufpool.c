/* Buffer pools; see bufpool.h. */
#include "rt/bufpool.h"

#include <stdlib.h>

void *bufpool_get(struct bufpool *bp)
{
    void *b = bp->free;
    if (b) {
        bp->free = *(void **)b;
        bp->nfree--;
    } else if (!(b = malloc(bp->size))) {
        return NULL;
    }
    bp->count++;
    return b;
}

void bufpool_put(struct bufpool *bp, void *buf)
{
    *(void **)buf = bp->free;
    bp->free = buf;
    bp->count--;
    bp->nfree++;
}

size_t bufpool_trim(struct bufpool *bp, unsigned keep)
{
    size_t freed = 0;
    while (bp->nfree > keep) {
        void *next = *(void **)bp->free;
        free(bp->free);
        bp->free = next;
        bp->nfree--;
        freed += bp->size;
    }
    return freed;
}
