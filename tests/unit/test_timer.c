/* test_timer: the timer wheel's contract in rt/timer.h: firing at the deadline and not before,
 * lazy moves later, eager moves earlier, laps beyond the wheel, clock jumps, cancel.
 * Must not: read a clock; `now` is whatever each test says.
 * Ownership: timers live on each test's stack. */
#include "unit.h"

#include "rt/timer.h"

/* Steps the wheel to now and returns how many timers fired; each fired timer must be due. */
static int fire(struct timer_wheel *tw, int64_t now, struct timer **first)
{
    int n = 0;
    struct timer *t;
    while ((t = timer_expired(tw, now))) {
        CHECK(t->deadline <= now);
        CHECK(!timer_armed(t));
        if (first && n == 0)
            *first = t;
        n++;
    }
    return n;
}

/* The second at which t fires, stepping one second at a time from `from` (at most `limit`). */
static int64_t fires_at(struct timer_wheel *tw, struct timer *t, int64_t from, int64_t limit)
{
    for (int64_t now = from; now <= limit; now++) {
        struct timer *got = NULL;
        int n = fire(tw, now, &got);
        if (n) {
            CHECK_INT(n, 1);
            CHECK(got == t);
            return now;
        }
    }
    return -1;
}

TEST(timer_fires_at_its_deadline)
{
    struct timer_wheel tw;
    struct timer t = {0};
    timer_wheel_init(&tw, 1000);
    timer_set(&tw, &t, 1005);
    CHECK(timer_armed(&t));
    CHECK_INT(fires_at(&tw, &t, 1001, 1100), 1005);
    CHECK_INT(fire(&tw, 1200, NULL), 0);
}

TEST(timer_moved_later_is_not_relinked_but_fires_late)
{
    struct timer_wheel tw;
    struct timer t = {0};
    timer_wheel_init(&tw, 0);
    timer_set(&tw, &t, 5);
    struct timer *next = t.next;
    timer_set(&tw, &t, 10); /* lazy: stays in slot 5's list */
    CHECK(t.next == next);
    CHECK_INT(t.deadline, 10);
    CHECK_INT(fires_at(&tw, &t, 1, 100), 10);
}

TEST(timer_moved_earlier_fires_early)
{
    struct timer_wheel tw;
    struct timer t = {0};
    timer_wheel_init(&tw, 0);
    timer_set(&tw, &t, 50);
    timer_set(&tw, &t, 3);
    CHECK_INT(fires_at(&tw, &t, 1, 100), 3);
}

TEST(timer_laps_beyond_the_wheel)
{
    /* A deadline more than TIMER_SLOTS seconds away shares a slot with nearer seconds; it must
     * fire on its own lap, not the first time its slot comes round. */
    struct timer_wheel tw;
    struct timer t = {0}, near = {0};
    timer_wheel_init(&tw, 7);
    timer_set(&tw, &t, 7 + 3 * TIMER_SLOTS + 2);
    timer_set(&tw, &near, 9); /* same slot, first lap */
    struct timer *got = NULL;
    for (int64_t now = 8; now <= 9; now++)
        CHECK_INT(fire(&tw, now, &got), now == 9 ? 1 : 0);
    CHECK(got == &near);
    CHECK_INT(fires_at(&tw, &t, 10, 1000), 7 + 3 * TIMER_SLOTS + 2);
}

TEST(timer_moved_later_across_laps)
{
    struct timer_wheel tw;
    struct timer t = {0};
    timer_wheel_init(&tw, 0);
    timer_set(&tw, &t, 2);
    timer_set(&tw, &t, 2 + TIMER_SLOTS); /* same slot, one lap later */
    CHECK_INT(fires_at(&tw, &t, 1, 1000), 2 + TIMER_SLOTS);
    timer_set(&tw, &t, 2 + TIMER_SLOTS + 1);
    timer_set(&tw, &t, 2 + 5 * TIMER_SLOTS + 17); /* another slot, later laps */
    CHECK_INT(fires_at(&tw, &t, 2 + TIMER_SLOTS + 1, 10000), 2 + 5 * TIMER_SLOTS + 17);
}

TEST(timer_clock_jump_fires_everything_due)
{
    struct timer_wheel tw;
    struct timer t[200] = {{0}};
    timer_wheel_init(&tw, 100);
    for (int i = 0; i < 200; i++)
        timer_set(&tw, &t[i], 101 + i * 3);     /* spread over several laps */
    CHECK_INT(fire(&tw, 100 + 300, NULL), 100); /* deadlines 101..398 */
    CHECK_INT(fire(&tw, 100 + 1000, NULL), 100);
    for (int i = 0; i < 200; i++)
        CHECK(!timer_armed(&t[i]));
}

TEST(timer_past_deadline_is_next_second)
{
    struct timer_wheel tw;
    struct timer t = {0};
    timer_wheel_init(&tw, 50);
    timer_set(&tw, &t, 10);
    CHECK_INT(t.deadline, 51);
    CHECK_INT(fires_at(&tw, &t, 50, 60), 51);
}

TEST(timer_cancel_unlinks)
{
    struct timer_wheel tw;
    struct timer a = {0}, b = {0}, c = {0};
    timer_wheel_init(&tw, 0);
    timer_set(&tw, &a, 4);
    timer_set(&tw, &b, 4);
    timer_set(&tw, &c, 4);
    timer_cancel(&b);
    CHECK(!timer_armed(&b));
    timer_cancel(&b); /* twice is harmless */
    CHECK_INT(fire(&tw, 10, NULL), 2);
    timer_cancel(&a); /* already fired: harmless */
    CHECK(tw.slots[4].next == &tw.slots[4] && tw.slots[4].prev == &tw.slots[4]);
}

TEST(timer_moved_later_by_one_second)
{
    /* Left in slot 5 with deadline 6: the wheel must carry it over, not fire it a second early. */
    struct timer_wheel tw;
    struct timer t = {0};
    timer_wheel_init(&tw, 0);
    timer_set(&tw, &t, 5);
    timer_set(&tw, &t, 6);
    CHECK_INT(fires_at(&tw, &t, 1, 100), 6);
}

/* The pattern of a keep-alive connection: send deadline (later), keep-alive deadline (earlier
 * than that, but not before the second the timer is linked for), again and again; then one
 * before the linked second. Each time the last deadline set is the one that fires. */
TEST(timer_keepalive_pattern_fires_at_the_last_deadline)
{
    struct timer_wheel tw;
    struct timer t = {0};
    timer_wheel_init(&tw, 0);
    timer_set(&tw, &t, 11);
    for (int64_t now = 1; now < 40; now++) {
        CHECK_INT(fire(&tw, now, NULL), 0);
        timer_set(&tw, &t, now + 61);
        timer_set(&tw, &t, now + 16);
    }
    CHECK_INT(fires_at(&tw, &t, 40, 200), 39 + 16);
    timer_set(&tw, &t, 70);
    timer_set(&tw, &t, 60); /* before the second it is linked for: re-linked at once */
    CHECK_INT(fires_at(&tw, &t, 56, 200), 60);
}

/* Moved earlier, but not before the second it is linked for: only stored, so the timers around it
 * in the wheel (at a thousand connections, other connections' memory) are not touched. */
TEST(timer_moved_earlier_but_not_before_its_slot_is_not_relinked)
{
    struct timer_wheel tw;
    struct timer a = {0}, b = {0};
    timer_wheel_init(&tw, 0);
    timer_set(&tw, &a, 20);
    timer_set(&tw, &b, 20); /* linked in front of a */
    timer_set(&tw, &a, 60);
    timer_set(&tw, &a, 25);
    CHECK(a.prev == &b);
    CHECK(b.next == &a);
    struct timer *got = NULL;
    CHECK_INT(fire(&tw, 20, &got), 1);
    CHECK(got == &b);
    CHECK_INT(fires_at(&tw, &a, 21, 100), 25);
}
