/* timer: a per-worker hashed timer wheel with one-second slots and lazy re-arming.
 * Must not: read the clock (the loop passes `now`) or allocate; nodes live in their owners.
 * Ownership: one worker thread; a node is linked in at most one wheel. */
#ifndef RT_TIMER_H
#define RT_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#define TIMER_SLOTS 64

struct timer {
    struct timer *next, *prev;
    int64_t deadline; /* monotonic seconds; may be moved later without re-linking */
};

struct timer_wheel {
    struct timer slots[TIMER_SLOTS]; /* list heads */
    int64_t last;                    /* last second processed */
};

void timer_wheel_init(struct timer_wheel *tw, int64_t now);

/* Arms t to fire at deadline. Moving a linked timer later only stores the new deadline: the
 * wheel re-links it when its old slot comes round, so a busy keep-alive connection pays no list
 * operations per request. Moving it earlier re-links at once. */
void timer_set(struct timer_wheel *tw, struct timer *t, int64_t deadline);
void timer_cancel(struct timer *t);
static inline bool timer_armed(const struct timer *t)
{
    return t->next != 0;
}

/* Unlinks and returns one timer whose deadline is <= now, or NULL when none is left; call it
 * in a loop after each clock step. */
struct timer *timer_expired(struct timer_wheel *tw, int64_t now);

#endif
