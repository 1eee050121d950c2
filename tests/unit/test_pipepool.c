/* test_pipepool: the splice pipe pool's rules (engine/pipepool.h) with real pipes, no ring:
 * the pool's bound, FIFO waiting, taking the pipe of the slot parked longest (emptied), only
 * empty pipes reused, stalled waiters, idle trimming.
 * Must not: leave pipes open (fini closes them; the pool asserts its count).
 * Ownership: each test owns its pool. */
#include "unit.h"

#include "engine/pipepool.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

static int queued(const struct pipepool_pipe *p)
{
    int n = -1;
    ioctl(p->fd[0], FIONREAD, &n);
    return n;
}

/* Puts n bytes in slot's pipe, as a file splice would. */
static void fill(struct pipepool *pp, uint32_t slot, uint32_t n)
{
    char buf[256] = {0};
    struct pipepool_slot *s = pipepool_slot(pp, slot);
    CHECK(n <= sizeof(buf) && write(s->pipe->fd[1], buf, n) == (ssize_t)n);
    s->in_pipe += n;
}

TEST(pipepool_bounded_then_fifo)
{
    struct pipepool pp;
    uint32_t robbed;
    CHECK_INT(pipepool_init(&pp, 8, 2, 65536), 0);
    CHECK(pipepool_none_made(&pp));
    CHECK(pipepool_acquire(&pp, 0, &robbed) && robbed == 0);
    CHECK(pipepool_acquire(&pp, 1, &robbed) && robbed == 0);
    CHECK_INT(pp.count, 2);
    CHECK(pipepool_slot(&pp, 0)->pipe->cap >= 4096);
    /* Full, nobody parked: 2, 3 and 4 wait, in that order. */
    CHECK(!pipepool_acquire(&pp, 2, &robbed));
    pipepool_wait(&pp, 2, 100);
    CHECK(!pipepool_acquire(&pp, 3, &robbed));
    pipepool_wait(&pp, 3, 101);
    pipepool_wait(&pp, 4, 102);
    CHECK_INT(pipepool_grant(&pp), -1); /* nothing free */
    CHECK(pipepool_unwait(&pp, 3));     /* 3 leaves the queue (closed) */
    CHECK(!pipepool_unwait(&pp, 3));
    pipepool_put(&pp, 0, 103); /* an empty pipe back: the oldest waiter gets it */
    CHECK_INT(pipepool_grant(&pp), 2);
    CHECK(pipepool_slot(&pp, 2)->pipe != NULL);
    CHECK_INT(pipepool_grant(&pp), -1);
    pipepool_release(&pp, 1, 104); /* empty: reused */
    CHECK_INT(pipepool_grant(&pp), 4);
    CHECK_INT(pp.count, 2);
    CHECK_INT(pp.wait_head, 0);
    pipepool_release(&pp, 2, 105);
    pipepool_release(&pp, 4, 105);
    pipepool_fini(&pp);
}

TEST(pipepool_dirty_pipe_is_closed_not_reused)
{
    struct pipepool pp;
    uint32_t robbed;
    CHECK_INT(pipepool_init(&pp, 4, 1, 65536), 0);
    CHECK(pipepool_acquire(&pp, 0, &robbed));
    struct pipepool_pipe *first = pipepool_slot(&pp, 0)->pipe;
    fill(&pp, 0, 100);
    pipepool_wait(&pp, 1, 0);
    pipepool_release(&pp, 0, 1); /* a reset with bytes in the pipe */
    CHECK_INT(pp.count, 0);
    CHECK(pp.free == NULL);
    CHECK_INT(pipepool_grant(&pp), 1); /* a fresh pipe, made for the waiter */
    CHECK(queued(pipepool_slot(&pp, 1)->pipe) == 0);
    (void)first;
    /* in_pipe says empty but bytes are there (a splice the count missed): closed too. */
    char b = 'x';
    CHECK(write(pipepool_slot(&pp, 1)->pipe->fd[1], &b, 1) == 1);
    pipepool_release(&pp, 1, 2);
    CHECK_INT(pp.count, 0);
    pipepool_fini(&pp);
}

TEST(pipepool_parked_pipe_taken_oldest_first_and_emptied)
{
    struct pipepool pp;
    uint32_t robbed;
    CHECK_INT(pipepool_init(&pp, 8, 2, 65536), 0);
    CHECK(pipepool_acquire(&pp, 0, &robbed));
    CHECK(pipepool_acquire(&pp, 1, &robbed));
    fill(&pp, 0, 50);
    fill(&pp, 1, 70);
    pipepool_park(&pp, 1); /* 1 stalled first, then 0 */
    pipepool_park(&pp, 0);
    struct pipepool_pipe *p1 = pipepool_slot(&pp, 1)->pipe;
    CHECK(pipepool_acquire(&pp, 5, &robbed)); /* nobody waits: takes the oldest parked */
    CHECK_INT(robbed, 2);                     /* slot 1, + 1 */
    CHECK(pipepool_slot(&pp, 5)->pipe == p1);
    CHECK_INT(queued(p1), 0); /* its bytes went to /dev/null */
    CHECK(pipepool_slot(&pp, 1)->pipe == NULL && pipepool_slot(&pp, 1)->in_pipe == 0);
    CHECK(!(pipepool_slot(&pp, 1)->flags & PIPEPOOL_PARKED));
    /* A waiter is served from the parked too (grant), here slot 0's pipe. */
    pipepool_wait(&pp, 6, 0);
    CHECK_INT(pipepool_grant(&pp), 6);
    CHECK_INT(pp.park_head, 0);
    /* Unparked (its POLLOUT came) before anyone needed it: nothing taken. */
    CHECK(pipepool_acquire(&pp, 1, &robbed) == false); /* all held, nobody parked */
    for (uint32_t s = 0; s < 8; s++)
        pipepool_release(&pp, s, 1);
    pipepool_fini(&pp);
}

TEST(pipepool_waiter_before_newcomer)
{
    struct pipepool pp;
    uint32_t robbed;
    CHECK_INT(pipepool_init(&pp, 8, 1, 65536), 0);
    CHECK(pipepool_acquire(&pp, 0, &robbed));
    pipepool_park(&pp, 0);
    pipepool_wait(&pp, 1, 0);
    /* A newcomer does not jump the queue by taking the parked pipe. */
    CHECK(!pipepool_acquire(&pp, 2, &robbed) && robbed == 0);
    CHECK_INT(pipepool_grant(&pp), 1);
    pipepool_release(&pp, 0, 1);
    pipepool_release(&pp, 1, 1);
    pipepool_fini(&pp);
}

TEST(pipepool_stalled_waiters_and_trim)
{
    struct pipepool pp;
    uint32_t robbed;
    CHECK_INT(pipepool_init(&pp, 8, 1, 65536), 0);
    CHECK(pipepool_acquire(&pp, 0, &robbed));
    pipepool_wait(&pp, 1, 10);
    pipepool_wait(&pp, 2, 11);
    CHECK_INT(pipepool_stalled(&pp, 11, 2), -1);
    CHECK_INT(pipepool_stalled(&pp, 12, 2), 1); /* waited 2 s: goes on by sendfile */
    CHECK_INT(pipepool_stalled(&pp, 12, 2), -1);
    CHECK_INT(pipepool_stalled(&pp, 13, 2), 2);
    CHECK_INT(pp.wait_head, 0);
    pipepool_put(&pp, 0, 20);
    pipepool_trim(&pp, 25, 10);
    CHECK_INT(pp.count, 1);
    pipepool_trim(&pp, 30, 10);
    CHECK_INT(pp.count, 0);
    CHECK(pp.free == NULL);
    pipepool_fini(&pp);
}

/* The scratch pipe (HTTP/2 DATA composed on io_uring) counts among the pool's pipes, trades
 * places with a slot's, and is closed when unused. */
TEST(pipepool_scratch_counts_exchanges_and_trims)
{
    struct pipepool pp;
    uint32_t robbed;
    CHECK_INT(pipepool_init(&pp, 4, 2, 65536), 0);
    CHECK(pipepool_acquire(&pp, 0, &robbed));
    struct pipepool_pipe *t = pipepool_scratch(&pp);
    CHECK(t != NULL && t->cap >= 4096);
    CHECK(fcntl(t->fd[1], F_GETFL) & O_NONBLOCK); /* a header written from the loop never waits */
    CHECK_INT(pp.count, 2);
    CHECK(!pipepool_acquire(&pp, 1, &robbed)); /* the bound holds the scratch too */
    CHECK(pipepool_scratch(&pp) == t);
    int slot_rd = pipepool_slot(&pp, 0)->pipe->fd[0], scratch_rd = t->fd[0];
    CHECK(write(t->fd[1], "composed", 8) == 8);
    pipepool_exchange(&pp, 0, 50);
    CHECK_INT(pipepool_slot(&pp, 0)->pipe->fd[0], scratch_rd);
    CHECK_INT(t->fd[0], slot_rd);
    CHECK_INT(queued(pipepool_slot(&pp, 0)->pipe), 8);
    CHECK_INT(queued(t), 0);
    pipepool_trim(&pp, 55, 10); /* used 5 s ago: kept */
    CHECK(t->fd[0] >= 0);
    pipepool_trim(&pp, 61, 10);
    CHECK(t->fd[0] < 0);
    CHECK_INT(pp.count, 1);
    pipepool_scratch_reset(&pp); /* none: nothing to do */
    pipepool_slot(&pp, 0)->in_pipe = 8;
    pipepool_release(&pp, 0, 62); /* holds bytes: closed */
    CHECK_INT(pp.count, 0);
    pipepool_fini(&pp);
}
