/* Segment bookkeeping for responses; see plan.h. */
#include "core/plan.h"

#include <assert.h>
#include <string.h>

void plan_init(struct plan *p)
{
    p->status = 0;
    p->close = false;
    p->fin_carries_tail = false;
    p->tls_record = 0;
    p->bytes = 0;
    p->head_len = 0;
    p->nseg = 0;
    p->cur = 0;
}

static bool add(struct plan *p, const char *mem, int fd, uint64_t off, uint64_t len)
{
    if (len == 0)
        return true;
    if (p->nseg == PLAN_MAX_SEGS)
        return false;
    p->segs[p->nseg++] = (struct seg){.mem = mem, .fd = fd, .off = off, .len = len};
    p->bytes += len;
    return true;
}

bool plan_mem(struct plan *p, const void *mem, size_t len)
{
    return add(p, mem, -1, 0, len);
}

bool plan_file(struct plan *p, int fd, uint64_t off, uint64_t len)
{
    return add(p, NULL, fd, off, len);
}

int plan_iov(const struct plan *p, struct iovec *iov, int max)
{
    int n = 0;
    for (unsigned i = p->cur; i < p->nseg && n < max && p->segs[i].mem; i++, n++) {
        iov[n].iov_base = (void *)(p->segs[i].mem + p->segs[i].off);
        iov[n].iov_len = p->segs[i].len;
    }
    return n;
}

void plan_advance(struct plan *p, uint64_t n)
{
    while (n > 0) {
        assert(p->cur < p->nseg);
        struct seg *s = &p->segs[p->cur];
        uint64_t step = n < s->len ? n : s->len;
        s->off += step;
        s->len -= step;
        n -= step;
        if (s->len == 0)
            p->cur++;
    }
}
