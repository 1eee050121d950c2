/* timer: a per-worker hashed timer wheel with one-second slots and lazy re-arming.
 * Must not: read the clock (the loop passes `now`) or allocate; nodes live in their owners.
 * Ownership: one worker thread; a node is linked in at most one wheel, and carries the callback
 * its owner set (the wheel assumes nothing about what a timer belongs to). */
#ifndef RT_TIMER_H
#define RT_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#define TIMER_SLOTS 64

struct runtime;

struct timer {
    struct timer *next, *prev;
    /* Called by the worker for an expired timer (already unlinked); the owner finds itself
     * from t (container_of). */
    void (*fire)(struct runtime *w, struct timer *t);
    int64_t deadline; /* monotonic seconds; may be moved later without re-linking */
    int64_t linked;   /* the second whose slot holds it: the wheel looks at it then */
};

struct timer_wheel {
    struct timer slots[TIMER_SLOTS]; /* list heads */
    int64_t last;                    /* last second processed */
};

void timer_wheel_init(struct timer_wheel *tw, int64_t now);

/* Arms t to fire at deadline. A new deadline no earlier than the second the timer is linked for
 * is only stored: the wheel re-links it when that slot comes round. Only a deadline before it
 * re-links at once. So a keep-alive connection whose deadlines alternate between the send and
 * keep-alive timeouts pays no list operations per request (each one would touch two other
 * connections' timers, cold at a thousand connections). */
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
