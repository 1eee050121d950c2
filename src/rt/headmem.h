/* headmem: the worker's ledger of memory held for requests not yet complete (--head-memory):
 * HTTP/1's input buffers and HTTP/2's kept heads and half-read frames and header blocks, one
 * count that both protocols charge and one list of holders, oldest first, from which a charge
 * past the bound reclaims whatever the holder speaks (issue 10, issue 35 items 2 and 6).
 * Must not: free memory or end a connection itself (a holder's reclaim does, its protocol
 * deciding how), nor read a clock (the list's order is the order holders began to hold).
 * Ownership: one per worker (struct runtime: no lock); a holder is embedded in its protocol's
 * per-connection state and is listed from the moment it holds bytes a reclaim can free. */
#ifndef RT_HEADMEM_H
#define RT_HEADMEM_H

#include <stdbool.h>
#include <stddef.h>

#include "rt/errlog.h"

struct headmem_holder;
/* Gives back the holder's memory now (closes its connection, resets its streams) and
 * uncharges what it held; h is already off the list, and may be freed by the call. ctx is
 * headmem_room's. */
typedef void headmem_reclaim_fn(void *ctx, struct headmem_holder *h);

struct headmem_holder {
    struct headmem_holder *prev, *next;
    headmem_reclaim_fn *reclaim;
};

struct headmem {
    size_t bytes; /* charged by every protocol */
    struct headmem_holder *first, *last;
    struct errlog_limit log;
};

static inline void headmem_charge(struct headmem *m, size_t n)
{
    m->bytes += n;
}

static inline void headmem_uncharge(struct headmem *m, size_t n)
{
    m->bytes -= n;
}

static inline bool headmem_listed(const struct headmem *m, const struct headmem_holder *h)
{
    return h->prev || m->first == h;
}

/* Puts h last on the list (a no-op when it is on it already), reclaimed by `reclaim`. */
void headmem_list(struct headmem *m, struct headmem_holder *h, headmem_reclaim_fn *reclaim);
/* Takes h off the list (a no-op when it is not on it). */
void headmem_unlist(struct headmem *m, struct headmem_holder *h);

/* Makes room for `more` bytes within `max` by reclaiming the holders that have held longest,
 * other than self (NULL: any), logging it (rate-limited, naming worker `id`); false when the
 * others are not enough. Reclaims run inside the call, with ctx. */
bool headmem_room(struct headmem *m, const struct headmem_holder *self, size_t more, size_t max,
                  void *ctx, int id);

#endif
