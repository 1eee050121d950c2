/* pace: --limit-rate (issue 28, nginx's limit_rate and limit_rate_after): a connection's wire
 * bytes per second. Each second's budget goes to the engine as the plan trimmed to it; the rest
 * waits for the worker's one-second timer wheel (one timer per paced connection, re-armed once
 * a second, never one per packet), and TCP_NOTSENT_LOWAT keeps the kernel from queueing ahead.
 * Must not: cost an unpaced connection more than a NULL test in conn's send path, or call up
 * into a protocol (it only re-issues the engine's send of the same wire plan).
 * Ownership: conn owns c->pace (pace_start makes it, pace_free at the close frees it); the
 * plan stays conn's: pace trims it only while the engine sends a window and restores it when
 * the engine reports the window sent. */
#ifndef PACE_H
#define PACE_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/timer.h"

struct worker;
struct conn;
struct plan;

struct pace {
    struct timer timer; /* the next second's window */
    struct conn *c;
    uint64_t rate;   /* bytes a second */
    uint64_t budget; /* bytes this second may still send */
    int64_t sec;     /* the second the budget is for */
    /* The window the engine is sending: the plan's segment `cut` was shortened by `rest` bytes
     * and its segments after it hidden (nseg was `nseg`); fin_carries_tail held back. */
    bool trimmed, fin;
    unsigned cut, nseg;
    uint64_t rest;
};

/* Paces c's next response at rate bytes a second after its first `after` bytes (rate 0: no
 * pacing; a pace already on c then stops). 0 or -ENOMEM (then unpaced). */
int pace_start(struct worker *w, struct conn *c, uint64_t rate, uint64_t after);

/* conn_wire_send's hook, with c->out = p: trims p to what this second may send and returns
 * true to send that now, or returns false having armed the wheel for the next second. */
bool pace_window(struct worker *w, struct conn *c, struct plan *p);

/* conn_sent's hook: the engine sent the window (err 0) or failed. Restores the plan; returns
 * true when it took the completion (more of the plan to go: sent now or at the next second),
 * false to report it up as usual (the plan is done, or err). */
bool pace_sent(struct worker *w, struct conn *c, int err);

/* At the close: cancels the timer, frees c->pace. */
void pace_free(struct conn *c);

#endif
