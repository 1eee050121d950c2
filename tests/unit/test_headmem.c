/* test_headmem: the --head-memory ledger's contract in rt/headmem.h: holders reclaimed oldest
 * first whatever installed them, never the one asking, and a refusal when the others are not
 * enough.
 * Must not: free anything (the holders are fakes that uncharge what they held).
 * Ownership: the ledger and its holders live on each test's stack. */
#include "unit.h"

#include <string.h>

#include "rt/headmem.h"

struct fake {
    struct headmem_holder hold; /* first: the reclaim finds its fake by the holder's address */
    struct headmem *m;
    size_t bytes;
    int reclaimed;
};

static void reclaim(void *ctx, struct headmem_holder *h)
{
    struct fake *f = (struct fake *)(void *)h;
    int *order = ctx;
    f->reclaimed = ++*order;
    headmem_unlist(f->m, h);
    headmem_uncharge(f->m, f->bytes);
    f->bytes = 0;
}

static void hold(struct headmem *m, struct fake *f, size_t n)
{
    f->m = m;
    f->bytes += n;
    headmem_charge(m, n);
    headmem_list(m, &f->hold, reclaim);
}

TEST(headmem_reclaims_oldest_first_and_never_the_asker)
{
    struct headmem m = {0};
    struct fake f[4];
    memset(f, 0, sizeof(f));
    int order = 0;
    for (int i = 0; i < 4; i++)
        hold(&m, &f[i], 100);
    CHECK(m.bytes == 400);
    /* f[0] asks for 150 more within 450: the oldest others go, f[1] then f[2] */
    CHECK(headmem_room(&m, &f[0].hold, 150, 450, &order, 0));
    CHECK_INT(f[0].reclaimed, 0);
    CHECK_INT(f[1].reclaimed, 1);
    CHECK_INT(f[2].reclaimed, 0);
    CHECK(m.bytes == 300);
    CHECK(headmem_room(&m, &f[0].hold, 200, 450, &order, 0));
    CHECK_INT(f[2].reclaimed, 2);
    CHECK(m.bytes == 200);
    /* only the asker and f[3] are left: more than both can give is refused */
    CHECK(!headmem_room(&m, &f[0].hold, 500, 450, &order, 0));
    CHECK_INT(f[3].reclaimed, 3);
    CHECK_INT(f[0].reclaimed, 0);
    CHECK(m.first == &f[0].hold && m.last == &f[0].hold);
}

TEST(headmem_list_is_idempotent_and_unlist_of_unlisted_is_a_no_op)
{
    struct headmem m = {0};
    struct fake a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    int order = 0;
    hold(&m, &a, 10);
    hold(&m, &b, 10);
    hold(&m, &a, 10); /* a stays first: the time it began to hold is what orders it */
    CHECK(m.first == &a.hold && m.last == &b.hold);
    headmem_unlist(&m, &b.hold);
    headmem_unlist(&m, &b.hold);
    CHECK(m.first == &a.hold && m.last == &a.hold && !headmem_listed(&m, &b.hold));
    /* NULL asker: anyone listed may go, but b's charge stays counted while it is unlisted */
    CHECK(!headmem_room(&m, NULL, 1, 10, &order, 0));
    CHECK_INT(a.reclaimed, 1);
    CHECK(m.first == NULL && m.bytes == 10);
    CHECK(headmem_room(&m, NULL, 0, 10, &order, 0));
}
