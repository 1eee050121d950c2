/* test_pace: --limit-rate's windows (pace.h) on a plan of memory segments: a second's budget
 * trims the plan mid-segment, restoring it after the window leaves it where the window ended,
 * the next window waits for the next second (the wheel calls the owner back), an unused
 * second is not saved up, and --limit-rate-after's bytes go at once.
 * Must not: depend on more than pace, the plan and the timer wheel.
 * Ownership: each test owns its wheel, pace and plan. */
#include "unit.h"

#include "core/plan.h"
#include "conn/pace.h"

static char bytes[180];
static int resumed;

static void resume(struct runtime *w, void *owner)
{
    (void)w;
    CHECK(owner == bytes);
    resumed++;
}

static struct plan three_segments(void)
{
    struct plan p;
    plan_init(&p);
    for (int i = 0; i < 3; i++)
        CHECK(plan_mem(&p, bytes + 60 * i, 60));
    p.fin_carries_tail = true;
    return p;
}

TEST(pace_windows_trim_restore_and_wait_for_the_next_second)
{
    struct timer_wheel wheel;
    struct pace *pc = NULL;
    timer_wheel_init(&wheel, 10);
    struct plan p = three_segments();
    CHECK_INT(pace_start(&pc, 10, 100, 0, resume, bytes), 0);

    CHECK(pace_window(pc, &wheel, 10, &p)); /* 100 bytes: 60 of the first, 40 of the second */
    CHECK_INT(p.nseg, 2);
    CHECK_INT(p.segs[1].len, 40);
    CHECK(!p.fin_carries_tail); /* no MSG_MORE on a window */
    plan_advance(&p, 100);      /* what the engine does */
    CHECK(plan_done(&p));
    CHECK(pace_restore(pc, &p)); /* a window went: more is left */
    CHECK_INT(p.nseg, 3);
    CHECK_INT(p.cur, 1);
    CHECK_INT(p.segs[1].len, 20);
    CHECK(p.segs[1].mem + p.segs[1].off == bytes + 100); /* resumes where the window ended */
    CHECK(p.fin_carries_tail);
    CHECK(!pace_window(pc, &wheel, 10, &p)); /* the budget is spent: the next second's wheel */
    CHECK(timer_armed(&pc->timer));
    resumed = 0;
    struct timer *t;
    while ((t = timer_expired(&wheel, 11)) != NULL)
        t->fire(NULL, t);
    CHECK_INT(resumed, 1);

    CHECK(pace_window(pc, &wheel, 11, &p)); /* the whole rest (80) fits this second's 100 */
    CHECK_INT(p.nseg, 3);
    plan_advance(&p, 80);
    CHECK(!pace_restore(pc, &p)); /* nothing was trimmed: the plan went whole */

    struct plan q = three_segments(); /* 20 left at second 11, not 120 at second 20 */
    CHECK(pace_window(pc, &wheel, 20, &q));
    CHECK_INT(q.nseg, 2);
    CHECK(pace_restore(pc, &q)); /* as after a failed send: whole again */
    CHECK_INT(q.nseg, 3);
    CHECK_INT(q.segs[1].len, 60);
    pace_free(&pc);
    CHECK(pc == NULL);
}

TEST(pace_after_bytes_go_at_once_and_rate_zero_stops)
{
    struct timer_wheel wheel;
    struct pace *pc = NULL;
    timer_wheel_init(&wheel, 5);
    struct plan p = three_segments();
    CHECK_INT(pace_start(&pc, 5, 10, 170, resume, bytes), 0); /* 170 + this second's 10 */
    CHECK(pace_window(pc, &wheel, 5, &p));
    CHECK_INT(p.nseg, 3);
    CHECK_INT(p.segs[2].len, 60);
    CHECK_INT(pace_start(&pc, 5, 0, 0, resume, bytes), 0);
    CHECK(pc == NULL);
}
