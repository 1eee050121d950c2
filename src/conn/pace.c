/* pace: see pace.h. */
#include "conn/pace.h"

#include <errno.h>
#include <stdlib.h>

#include "core/plan.h"

static void fired(struct runtime *w, struct timer *t)
{
    struct pace *pc = (struct pace *)t; /* the timer is its first member */
    if (!pc->trimmed)
        pc->resume(w, pc->owner);
}

int pace_start(struct pace **slot, int64_t now, uint64_t rate, uint64_t after,
               pace_resume_fn resume, void *owner)
{
    if (rate == 0) {
        pace_free(slot);
        return 0;
    }
    struct pace *pc = *slot;
    if (!pc) {
        pc = calloc(1, sizeof(*pc));
        if (!pc)
            return -ENOMEM;
        pc->timer.fire = fired;
        *slot = pc;
    }
    pc->resume = resume;
    pc->owner = owner;
    pc->rate = rate;
    pc->budget = after + rate; /* this second's share, and the bytes before limiting starts */
    pc->sec = now;
    return 0;
}

bool pace_window(struct pace *pc, struct timer_wheel *wheel, int64_t now, struct plan *p)
{
    if (now > pc->sec) { /* a new second: its share; an unused one is not saved up */
        pc->sec = now;
        if (pc->budget < pc->rate)
            pc->budget = pc->rate;
    }
    if (pc->budget == 0) {
        timer_set(wheel, &pc->timer, now + 1);
        return false;
    }
    uint64_t left = pc->budget;
    for (unsigned i = p->cur; i < p->nseg; i++) {
        if (p->segs[i].len <= left) {
            left -= p->segs[i].len;
            continue;
        }
        /* The window ends inside segment i: hide the rest of it and what follows. */
        pc->trimmed = true;
        pc->cut = i;
        pc->nseg = p->nseg;
        pc->rest = p->segs[i].len - left;
        pc->fin = p->fin_carries_tail;
        p->segs[i].len = left;
        p->nseg = left ? i + 1 : i;
        p->fin_carries_tail = false; /* no MSG_MORE on a window's last bytes: a second follows */
        pc->budget = 0;
        return true;
    }
    pc->budget = left; /* the whole rest of the plan fits */
    return true;
}

bool pace_restore(struct pace *pc, struct plan *p)
{
    if (!pc->trimmed)
        return false;
    pc->trimmed = false;
    p->segs[pc->cut].len += pc->rest; /* what the window left of it (0 when it all went) too */
    p->nseg = pc->nseg;
    if (p->cur > pc->cut)
        p->cur = pc->cut;
    p->fin_carries_tail = pc->fin;
    return true;
}

void pace_free(struct pace **slot)
{
    struct pace *pc = *slot;
    if (!pc)
        return;
    if (timer_armed(&pc->timer))
        timer_cancel(&pc->timer);
    free(pc);
    *slot = NULL;
}
