/* The splice pipe pool; see pipepool.h. Kept out of uring.c (issue 11 item 2) so its rules
 * (FIFO waiting, taking a stalled reader's pipe, only empty pipes reused) are unit-tested with
 * real pipes and no ring. */
#include "engine/pipepool.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

int pipepool_init(struct pipepool *pp, uint32_t nslots, unsigned max, unsigned bytes)
{
    *pp = (struct pipepool){.max = max, .bytes = bytes, .devnull = -1, .trimmed = -1};
    pp->slots = calloc(nslots, sizeof(*pp->slots));
    pp->pipes = calloc(max ? max : 1, sizeof(*pp->pipes));
    if (!pp->slots || !pp->pipes) {
        pipepool_fini(pp);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < max; i++)
        pp->pipes[i].fd[0] = pp->pipes[i].fd[1] = -1;
    pp->scratch.fd[0] = pp->scratch.fd[1] = -1;
    pp->tmpl.fd[0] = pp->tmpl.fd[1] = -1;
    pp->devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (pp->devnull < 0) {
        int err = -errno;
        pipepool_fini(pp);
        return err;
    }
    return 0;
}

static void destroy(struct pipepool *pp, struct pipepool_pipe *p)
{
    close(p->fd[0]);
    close(p->fd[1]);
    p->fd[0] = p->fd[1] = -1;
    assert(pp->count > 0);
    pp->count--;
}

void pipepool_fini(struct pipepool *pp)
{
    for (unsigned i = 0; pp->pipes && i < pp->max; i++)
        if (pp->pipes[i].fd[0] >= 0)
            destroy(pp, &pp->pipes[i]);
    pipepool_scratch_reset(pp);
    assert(pp->count == 0);
    if (pp->tmpl.fd[0] >= 0) {
        close(pp->tmpl.fd[0]);
        close(pp->tmpl.fd[1]);
        pp->tmpl.fd[0] = pp->tmpl.fd[1] = -1;
    }
    if (pp->devnull >= 0)
        close(pp->devnull);
    free(pp->pipes);
    free(pp->slots);
    pp->pipes = NULL;
    pp->slots = NULL;
    pp->devnull = -1;
}

/* A new pipe in p, sized as asked where the kernel allows. */
static bool make(struct pipepool *pp, struct pipepool_pipe *p)
{
    /* The read end blocks (the socket splice passes SPLICE_F_NONBLOCK); the write end does
     * not, so a header written from the loop (sendplan_recompose) never waits for room. A
     * file splice into it still reads the disk (io-wq's, or the epoll loop's): O_NONBLOCK
     * only keeps it from waiting for room, and fills start on an empty pipe. */
    if (pipe2(p->fd, O_CLOEXEC) < 0) {
        p->fd[0] = p->fd[1] = -1;
        return false;
    }
    if (fcntl(p->fd[1], F_SETFL, O_NONBLOCK) != 0) {
        close(p->fd[0]);
        close(p->fd[1]);
        p->fd[0] = p->fd[1] = -1;
        return false;
    }
    /* Past fs.pipe-user-pages-soft an unprivileged user is refused (EPERM): keep the
     * default size then, a smaller step but a working one. */
    int sz = fcntl(p->fd[0], F_SETPIPE_SZ, (int)pp->bytes);
    if (sz < 0) {
        sz = fcntl(p->fd[0], F_GETPIPE_SZ);
        pp->short_pipes++;
    }
    p->cap = sz > 0 ? (unsigned)sz : 4096;
    return true;
}

/* A free pipe, or a new one while the pool has room; NULL when none can be had now. */
static struct pipepool_pipe *get(struct pipepool *pp)
{
    struct pipepool_pipe *p = pp->free;
    if (p) {
        pp->free = p->next;
        return p;
    }
    if (pp->count == pp->max)
        return NULL;
    for (unsigned i = 0; i < pp->max; i++) {
        p = &pp->pipes[i];
        if (p->fd[0] >= 0)
            continue;
        if (!make(pp, p))
            return NULL;
        pp->count++;
        return p;
    }
    return NULL;
}

static void put(struct pipepool *pp, struct pipepool_pipe *p, int64_t now)
{
    p->freed_at = now;
    p->next = pp->free;
    pp->free = p;
}

/* Links `slot` at the tail of one of the pool's lists of slots (each end slot + 1, 0 when
 * empty); next_field is the offset of that list's link in struct pipepool_slot. The wait FIFO
 * and the parked list grow the same way. */
static void append(struct pipepool *pp, uint32_t *head, uint32_t *tail, size_t next_field,
                   uint32_t slot)
{
    if (*tail)
        *(uint32_t *)((char *)&pp->slots[*tail - 1] + next_field) = slot + 1;
    else
        *head = slot + 1;
    *tail = slot + 1;
}

void pipepool_park(struct pipepool *pp, uint32_t slot)
{
    struct pipepool_slot *s = &pp->slots[slot];
    assert(s->pipe && !(s->flags & PIPEPOOL_PARKED));
    s->flags |= PIPEPOOL_PARKED;
    s->park_next = 0;
    s->park_prev = pp->park_tail;
    append(pp, &pp->park_head, &pp->park_tail, offsetof(struct pipepool_slot, park_next), slot);
}

void pipepool_unpark(struct pipepool *pp, uint32_t slot)
{
    struct pipepool_slot *s = &pp->slots[slot];
    if (!(s->flags & PIPEPOOL_PARKED))
        return;
    if (s->park_prev)
        pp->slots[s->park_prev - 1].park_next = s->park_next;
    else
        pp->park_head = s->park_next;
    if (s->park_next)
        pp->slots[s->park_next - 1].park_prev = s->park_prev;
    else
        pp->park_tail = s->park_prev;
    s->park_prev = s->park_next = 0;
    s->flags &= ~(uint32_t)PIPEPOOL_PARKED;
}

/* The pipe of the slot parked longest (a client that stopped reading, most likely), emptied
 * into /dev/null; NULL when none is parked. Its owner takes a pipe again when its socket
 * drains, and re-reads the dropped bytes from the file: they were never counted as sent. A
 * pipe that cannot be emptied is closed and a new one made. */
static struct pipepool_pipe *take_parked(struct pipepool *pp, uint32_t *robbed)
{
    if (!pp->park_head)
        return NULL;
    uint32_t slot = pp->park_head - 1;
    struct pipepool_slot *s = &pp->slots[slot];
    struct pipepool_pipe *p = s->pipe;
    pipepool_unpark(pp, slot);
    *robbed = slot + 1;
    s->pipe = NULL;
    uint32_t left = s->in_pipe;
    s->in_pipe = 0;
    while (left > 0) {
        ssize_t n = splice(p->fd[0], NULL, pp->devnull, NULL, left, SPLICE_F_NONBLOCK);
        if (n <= 0)
            break;
        left -= (uint32_t)n;
    }
    if (left == 0)
        return p;
    destroy(pp, p);
    return get(pp);
}

bool pipepool_acquire(struct pipepool *pp, uint32_t slot, uint32_t *robbed)
{
    struct pipepool_slot *s = &pp->slots[slot];
    assert(!s->pipe && !(s->flags & PIPEPOOL_WAITING));
    *robbed = 0;
    s->pipe = get(pp);
    if (!s->pipe && !pp->wait_head) /* a waiter comes first: it would be next anyway */
        s->pipe = take_parked(pp, robbed);
    s->in_pipe = 0;
    return s->pipe != NULL;
}

void pipepool_wait(struct pipepool *pp, uint32_t slot, int64_t now)
{
    struct pipepool_slot *s = &pp->slots[slot];
    assert(!s->pipe && !(s->flags & PIPEPOOL_WAITING));
    s->flags |= PIPEPOOL_WAITING;
    s->wait_since = now;
    s->wait_next = 0;
    append(pp, &pp->wait_head, &pp->wait_tail, offsetof(struct pipepool_slot, wait_next), slot);
}

bool pipepool_unwait(struct pipepool *pp, uint32_t slot)
{
    struct pipepool_slot *s = &pp->slots[slot];
    if (!(s->flags & PIPEPOOL_WAITING))
        return false;
    uint32_t me = slot + 1, prev = 0;
    for (uint32_t s1 = pp->wait_head; s1; prev = s1, s1 = pp->slots[s1 - 1].wait_next) {
        if (s1 != me)
            continue;
        if (prev)
            pp->slots[prev - 1].wait_next = s->wait_next;
        else
            pp->wait_head = s->wait_next;
        if (pp->wait_tail == me)
            pp->wait_tail = prev;
        break;
    }
    s->wait_next = 0;
    s->flags &= ~(uint32_t)PIPEPOOL_WAITING;
    return true;
}

int64_t pipepool_grant(struct pipepool *pp)
{
    if (!pp->wait_head)
        return -1;
    uint32_t robbed = 0;
    struct pipepool_pipe *p = get(pp);
    if (!p && !(p = take_parked(pp, &robbed)))
        return -1;
    uint32_t slot = pp->wait_head - 1;
    pipepool_unwait(pp, slot);
    pp->slots[slot].pipe = p;
    pp->slots[slot].in_pipe = 0;
    return slot;
}

int64_t pipepool_stalled(struct pipepool *pp, int64_t now, int64_t max_wait)
{
    if (!pp->wait_head)
        return -1;
    uint32_t slot = pp->wait_head - 1;
    if (now - pp->slots[slot].wait_since < max_wait)
        return -1;
    pipepool_unwait(pp, slot);
    return slot;
}

void pipepool_put(struct pipepool *pp, uint32_t slot, int64_t now)
{
    struct pipepool_slot *s = &pp->slots[slot];
    assert(s->pipe && s->in_pipe == 0 && !(s->flags & PIPEPOOL_PARKED));
    put(pp, s->pipe, now);
    s->pipe = NULL;
}

void pipepool_release(struct pipepool *pp, uint32_t slot, int64_t now)
{
    struct pipepool_slot *s = &pp->slots[slot];
    pipepool_unwait(pp, slot);
    pipepool_unpark(pp, slot);
    struct pipepool_pipe *p = s->pipe;
    if (p) {
        int queued = -1;
        if (s->in_pipe == 0 && ioctl(p->fd[0], FIONREAD, &queued) == 0 && queued == 0)
            put(pp, p, now);
        else
            destroy(pp, p);
    }
    *s = (struct pipepool_slot){0};
}

void pipepool_trim(struct pipepool *pp, int64_t now, int64_t idle)
{
    if (pp->trimmed == now)
        return;
    pp->trimmed = now;
    if (pp->scratch.fd[0] >= 0 && now - pp->scratch.freed_at >= idle)
        pipepool_scratch_reset(pp);
    for (struct pipepool_pipe **link = &pp->free; *link;) {
        struct pipepool_pipe *p = *link;
        if (now - p->freed_at >= idle) {
            *link = p->next;
            destroy(pp, p);
        } else {
            link = &p->next;
        }
    }
}

struct pipepool_pipe *pipepool_scratch(struct pipepool *pp)
{
    if (pp->scratch.fd[0] < 0) {
        if (pp->count == pp->max || !make(pp, &pp->scratch))
            return NULL;
        pp->count++;
        pp->scratch.freed_at = pp->trimmed;
    }
    return &pp->scratch;
}

void pipepool_exchange(struct pipepool *pp, uint32_t slot, int64_t now)
{
    struct pipepool_pipe *p = pp->slots[slot].pipe, *t = &pp->scratch;
    assert(p && t->fd[0] >= 0);
    int fd0 = p->fd[0], fd1 = p->fd[1];
    unsigned cap = p->cap;
    p->fd[0] = t->fd[0];
    p->fd[1] = t->fd[1];
    p->cap = t->cap;
    t->fd[0] = fd0;
    t->fd[1] = fd1;
    t->cap = cap;
    t->freed_at = now;
}

void pipepool_scratch_reset(struct pipepool *pp)
{
    if (pp->scratch.fd[0] >= 0)
        destroy(pp, &pp->scratch);
}

struct sendplan_tmpl *pipepool_template(struct pipepool *pp)
{
    struct sendplan_tmpl *t = &pp->tmpl;
    if (t->fd[0] < 0 && !t->broken) {
        if (pipe2(t->fd, O_CLOEXEC | O_NONBLOCK) < 0) {
            t->fd[0] = t->fd[1] = -1;
            t->broken = true; /* not tried again: the composing sends write their headers */
            return NULL;
        }
        (void)fcntl(t->fd[0], F_SETPIPE_SZ, 4096); /* one page is all it holds */
        t->len = 0;
    }
    return t->broken ? NULL : t;
}
