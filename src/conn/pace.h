/* pace: --limit-rate (issue 28, nginx's limit_rate and limit_rate_after): a connection's wire
 * bytes per second. Each second's budget goes to the engine as the plan trimmed to it; the rest
 * waits for the worker's one-second timer wheel (one timer per paced connection, re-armed once
 * a second, never one per packet), and TCP_NOTSENT_LOWAT keeps the kernel from queueing ahead.
 * Must not: know connections or engines: its owner (conn) sends each window, and is called
 * back through the resume function it installed when the next second's window is due.
 * Ownership: the owner holds the struct pace (pace_start makes it, pace_free frees it); the
 * plan stays the owner's: pace trims it only while a window is being sent and restores it when
 * the owner says the window went (pace_restore). */
#ifndef PACE_H
#define PACE_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/timer.h"

struct runtime;
struct plan;

/* The owner's: the wheel's next second came and a window may go (pace_window). */
typedef void (*pace_resume_fn)(struct runtime *w, void *owner);

struct pace {
    struct timer timer; /* the next second's window */
    pace_resume_fn resume;
    void *owner;
    uint64_t rate;   /* bytes a second */
    uint64_t budget; /* bytes this second may still send */
    int64_t sec;     /* the second the budget is for */
    /* The window being sent: the plan's segment `cut` was shortened by `rest` bytes and its
     * segments after it hidden (nseg was `nseg`); fin_carries_tail held back. */
    bool trimmed, fin;
    unsigned cut, nseg;
    uint64_t rest;
    /* The owner's: pacing for one response only, and what tells that response from the next
     * (conn: HTTP/1's request count, stamped at the response's first send). */
    bool once, stamped;
    uint32_t stamp;
    struct plan *plan; /* the owner's: the plan the windows are cut from (conn's wire plan) */
};

/* Paces *slot's owner from second `now` at rate bytes a second after its first `after` bytes
 * (made on first use; rate 0 frees it: no pacing). 0 or -ENOMEM (then unpaced). */
int pace_start(struct pace **slot, int64_t now, uint64_t rate, uint64_t after,
               pace_resume_fn resume, void *owner);

/* Trims p (not done) to what second `now` may still send and returns true to send that now,
 * or returns false having armed wheel for the next second (resume is called then). */
bool pace_window(struct pace *pc, struct timer_wheel *wheel, int64_t now, struct plan *p);

/* The window on p went (or its send failed): restores p. Returns whether a window had been
 * trimmed from it (then more of p is left); false: p was sent whole. */
bool pace_restore(struct pace *pc, struct plan *p);

/* Cancels the timer and frees *slot (NULL: nothing). */
void pace_free(struct pace **slot);

#endif
