/* pace: see pace.h. */
#include "pace.h"

#include <errno.h>
#include <stdlib.h>

#include "conn.h"
#include "core/plan.h"
#include "engine/engine.h"
#include "rt/worker.h"

static void fired(struct worker *w, struct timer *t)
{
    struct pace *pc = (struct pace *)t; /* the timer is its first member */
    struct conn *c = pc->c;
    if (conn_open(c) && c->out && !pc->trimmed && !plan_done(c->out) && pace_window(w, c, c->out))
        w->eng->send(w, c);
}

int pace_start(struct worker *w, struct conn *c, uint64_t rate, uint64_t after)
{
    if (rate == 0) {
        pace_free(c);
        return 0;
    }
    struct pace *pc = c->pace;
    if (!pc) {
        pc = calloc(1, sizeof(*pc));
        if (!pc)
            return -ENOMEM;
        pc->timer.fire = fired;
        pc->c = c;
        c->pace = pc;
    }
    pc->rate = rate;
    pc->budget = after + rate; /* this second's share, and the bytes before limiting starts */
    pc->sec = w->now;
    return 0;
}

bool pace_window(struct worker *w, struct conn *c, struct plan *p)
{
    struct pace *pc = c->pace;
    if (w->now > pc->sec) { /* a new second: its share; an unused one is not saved up */
        pc->sec = w->now;
        if (pc->budget < pc->rate)
            pc->budget = pc->rate;
    }
    if (pc->budget == 0) {
        timer_set(&w->wheel, &pc->timer, w->now + 1);
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

bool pace_sent(struct worker *w, struct conn *c, int err)
{
    struct pace *pc = c->pace;
    struct plan *p = c->out;
    if (!pc->trimmed)
        return false;
    pc->trimmed = false;
    p->segs[pc->cut].len = pc->rest;
    p->nseg = pc->nseg;
    p->cur = pc->cut;
    p->fin_carries_tail = pc->fin;
    if (err)
        return false;
    if (pace_window(w, c, p))
        w->eng->send(w, c);
    return true;
}

void pace_free(struct conn *c)
{
    if (!c->pace)
        return;
    if (timer_armed(&c->pace->timer))
        timer_cancel(&c->pace->timer);
    free(c->pace);
    c->pace = NULL;
}
