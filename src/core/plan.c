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

bool plan_field_next(const struct plan *p, size_t *pos, const char **name, size_t *name_len,
                     const char **value, size_t *value_len)
{
    assert(p->cur == 0 && (p->head_len == 0 || p->segs[0].off == 0));
    if (p->nseg == 0 || *pos >= p->head_len)
        return false;
    const char *line = p->segs[0].mem + *pos;
    const char *end = p->segs[0].mem + p->head_len;
    const char *colon = memchr(line, ':', (size_t)(end - line));
    const char *eol = colon ? memchr(colon, '\r', (size_t)(end - colon)) : NULL;
    if (!eol) /* not a field line: the section is HTTP/1's, or damaged; stop */
        return false;
    const char *v = colon + 1;
    while (v < eol && (*v == ' ' || *v == '\t'))
        v++;
    *name = line;
    *name_len = (size_t)(colon - line);
    *value = v;
    *value_len = (size_t)(eol - v);
    *pos = (size_t)(eol + 2 - p->segs[0].mem);
    return true;
}
