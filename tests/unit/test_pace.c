/* test_pace: --limit-rate's windows (pace.h) on a plan of memory segments: a second's budget
 * trims the plan mid-segment, the engine's report restores it where the window ended, the next
 * window waits for the next second (the wheel), and a failed send is reported up restored.
 * Must not: send anything (no engine is called on these paths).
 * Ownership: each test owns its worker, connection and plan. */
#include "unit.h"

#include <errno.h>
#include <stdlib.h>

#include "conn.h"
#include "core/plan.h"
#include "pace.h"
#include "rt/worker.h"

static char bytes[180];

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
    struct worker *w = calloc(1, sizeof(*w));
    struct conn *c = calloc(1, sizeof(*c));
    timer_wheel_init(&w->wheel, 10);
    w->now = 10;
    c->state = CONN_SENDING;
    struct plan p = three_segments();
    c->out = &p;
    CHECK_INT(pace_start(w, c, 100, 0), 0);

    CHECK(pace_window(w, c, &p)); /* 100 bytes: the first segment and 40 of the second */
    CHECK_INT(p.nseg, 2);
    CHECK_INT(p.segs[1].len, 40);
    CHECK(!p.fin_carries_tail); /* no MSG_MORE on a window */
    plan_advance(&p, 100);      /* what the engine does */
    CHECK(plan_done(&p));
    CHECK(pace_sent(w, c, 0)); /* taken: the rest waits */
    CHECK_INT(p.nseg, 3);
    CHECK_INT(p.cur, 1);
    CHECK_INT(p.segs[1].len, 20);
    CHECK(p.segs[1].mem + p.segs[1].off == bytes + 100); /* resumes where the window ended */
    CHECK(p.fin_carries_tail);
    CHECK(timer_armed(&c->pace->timer)); /* the budget is spent: the next second's wheel */

    w->now = 11;
    CHECK(pace_window(w, c, &p)); /* the whole rest (80) fits this second's 100 */
    CHECK_INT(p.nseg, 3);
    plan_advance(&p, 80);
    CHECK(!pace_sent(w, c, 0)); /* nothing was trimmed: the plan is done, reported up */

    struct plan q = three_segments(); /* an unused second is not saved up */
    c->out = &q;
    w->now = 20;
    CHECK(pace_window(w, c, &q));
    CHECK_INT(q.nseg, 2);
    CHECK(!pace_sent(w, c, -EPIPE)); /* a failed send goes up, the plan whole again */
    CHECK_INT(q.nseg, 3);
    pace_free(c);
    CHECK(c->pace == NULL);
    free(c);
    free(w);
}

TEST(pace_after_bytes_go_at_once_and_rate_zero_stops)
{
    struct worker *w = calloc(1, sizeof(*w));
    struct conn *c = calloc(1, sizeof(*c));
    timer_wheel_init(&w->wheel, 5);
    w->now = 5;
    struct plan p = three_segments();
    c->out = &p;
    CHECK_INT(pace_start(w, c, 10, 170), 0); /* 170 + this second's 10: all of it */
    CHECK(pace_window(w, c, &p));
    CHECK_INT(p.nseg, 3);
    CHECK_INT(p.segs[2].len, 60);
    CHECK_INT(pace_start(w, c, 0, 0), 0);
    CHECK(c->pace == NULL);
    free(c);
    free(w);
}
