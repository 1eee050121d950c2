/* The ledger of memory held for unfinished requests; see headmem.h. */
#include "rt/headmem.h"

void headmem_list(struct headmem *m, struct headmem_holder *h, headmem_reclaim_fn *reclaim)
{
    h->reclaim = reclaim;
    if (headmem_listed(m, h))
        return;
    h->next = NULL;
    h->prev = m->last;
    if (m->last)
        m->last->next = h;
    else
        m->first = h;
    m->last = h;
}

void headmem_unlist(struct headmem *m, struct headmem_holder *h)
{
    if (!headmem_listed(m, h))
        return;
    if (h->prev)
        h->prev->next = h->next;
    else
        m->first = h->next;
    if (h->next)
        h->next->prev = h->prev;
    else
        m->last = h->prev;
    h->prev = h->next = NULL;
}

bool headmem_room(struct headmem *m, const struct headmem_holder *self, size_t more, size_t max,
                  void *ctx, int id)
{
    while (m->bytes + more > max) {
        struct headmem_holder *old = self && m->first == self ? self->next : m->first;
        if (!old)
            return false;
        errlog_limited(&m->log, ERRLOG_WARN,
                       "worker %d: request heads hold %zu bytes (--head-memory %zu): closing "
                       "the oldest partial ones",
                       id, m->bytes, max);
        /* off the list first: nothing reads old after its reclaim, which may free it */
        headmem_unlist(m, old);
        old->reclaim(ctx, old);
    }
    return true;
}
