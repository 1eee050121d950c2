/* Unit tests for rt/timer: deadlines fire in the second they name, never earlier or later,
 * whatever order they were moved in; moving one costs list operations only when it must. */
#include "rt/timer.h"

#include "unit.h"

/* Steps the wheel to `now` and returns how many timers fired (each one is checked to be t). */
static int fired(struct timer_wheel *tw, int64_t now, const struct timer *t)
{
    int n = 0;
    struct timer *e;
    while ((e = timer_expired(tw, now))) {
        CHECK(e == t);
        n++;
    }
    return n;
}

TEST(timer_fires_at_its_second)
{
    struct timer_wheel tw;
    struct timer t = {0};
    timer_wheel_init(&tw, 100);
    timer_set(&tw, &t, 110);
    CHECK_INT(fired(&tw, 109, &t), 0);
    CHECK_INT(fired(&tw, 110, &t), 1);
    CHECK(!timer_armed(&t));
}

/* The pattern of a keep-alive connection: send deadline (later), keep-alive deadline (earlier
 * than that, later than where the timer is linked), again and again; then one earlier than the
 * linked slot. Each time the last deadline set is the one that fires. */
TEST(timer_moves_later_and_earlier)
{
    struct timer_wheel tw;
    struct timer t = {0};
    timer_wheel_init(&tw, 0);
    timer_set(&tw, &t, 11);
    for (int64_t now = 0; now < 40; now++) {
        CHECK_INT(fired(&tw, now, &t), 0);
        timer_set(&tw, &t, now + 61);
        timer_set(&tw, &t, now + 16);
    }
    CHECK_INT(fired(&tw, 39 + 15, &t), 0);
    CHECK_INT(fired(&tw, 39 + 16, &t), 1);

    timer_set(&tw, &t, 70);
    timer_set(&tw, &t, 60); /* before the slot it is linked in: re-linked at once */
    CHECK_INT(fired(&tw, 59, &t), 0);
    CHECK_INT(fired(&tw, 60, &t), 1);
}

/* A deadline moved back, but not before the second the timer is linked for, is only stored:
 * the timers around it in the wheel are not touched (at a thousand connections they are other
 * connections' memory, cold in the cache). */
TEST(timer_earlier_but_after_linked_does_not_relink)
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
    CHECK(timer_expired(&tw, 20) == &b);
    CHECK(timer_expired(&tw, 24) == NULL);
    CHECK(timer_expired(&tw, 25) == &a);
}

TEST(timer_later_laps_of_the_wheel)
{
    struct timer_wheel tw;
    struct timer t = {0};
    timer_wheel_init(&tw, 0);
    timer_set(&tw, &t, 3 * TIMER_SLOTS + 5); /* passes its slot twice before it is due */
    CHECK_INT(fired(&tw, 3 * TIMER_SLOTS + 4, &t), 0);
    CHECK_INT(fired(&tw, 3 * TIMER_SLOTS + 5, &t), 1);
    timer_set(&tw, &t, 3 * TIMER_SLOTS + 5 + TIMER_SLOTS); /* same slot, next lap */
    timer_set(&tw, &t, 3 * TIMER_SLOTS + 5 + 2 * TIMER_SLOTS + 1);
    CHECK_INT(fired(&tw, 3 * TIMER_SLOTS + 5 + 2 * TIMER_SLOTS, &t), 0);
    CHECK_INT(fired(&tw, 3 * TIMER_SLOTS + 5 + 2 * TIMER_SLOTS + 1, &t), 1);
}
