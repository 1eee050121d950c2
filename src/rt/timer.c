/* A wheel of one-second slots; see timer.h. Timeouts here are seconds long (keep-alive, header,
 * drain), so one-second resolution is what nginx and h2o offer too. */
#include "rt/timer.h"

#include <stddef.h>

static void link_slot(struct timer_wheel *tw, struct timer *t)
{
    struct timer *head = &tw->slots[t->deadline & (TIMER_SLOTS - 1)];
    t->linked = t->deadline;
    t->next = head->next;
    t->prev = head;
    head->next->prev = t;
    head->next = t;
}

void timer_wheel_init(struct timer_wheel *tw, int64_t now)
{
    for (int i = 0; i < TIMER_SLOTS; i++)
        tw->slots[i].next = tw->slots[i].prev = &tw->slots[i];
    tw->last = now;
}

void timer_cancel(struct timer *t)
{
    if (!t->next)
        return;
    t->prev->next = t->next;
    t->next->prev = t->prev;
    t->next = t->prev = NULL;
}

void timer_set(struct timer_wheel *tw, struct timer *t, int64_t deadline)
{
    if (deadline <= tw->last)
        deadline = tw->last + 1;
    if (t->next && deadline >= t->linked) {
        t->deadline = deadline;
        return;
    }
    timer_cancel(t);
    t->deadline = deadline;
    link_slot(tw, t);
}

struct timer *timer_expired(struct timer_wheel *tw, int64_t now)
{
    while (tw->last < now) {
        int64_t sec = tw->last + 1;
        struct timer *head = &tw->slots[sec & (TIMER_SLOTS - 1)];
        struct timer *t = head->next;
        while (t != head) {
            struct timer *next = t->next;
            if (t->deadline <= sec) {
                timer_cancel(t);
                return t;
            }
            /* Not due: pushed later since it was linked, or a later lap of the wheel. */
            if ((t->deadline & (TIMER_SLOTS - 1)) != (sec & (TIMER_SLOTS - 1))) {
                timer_cancel(t);
                link_slot(tw, t);
            } else {
                t->linked = t->deadline; /* stays: its slot comes round again at deadline */
            }
            t = next;
        }
        tw->last = sec;
    }
    return NULL;
}
