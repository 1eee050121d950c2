/* sendplan: the synchronous, non-blocking send loop both engines share: memory segments by
 * sendmsg (MSG_MORE while more follows, so headers and file share packets), file ranges by
 * sendfile, partial sends recorded with plan_advance.
 * Must not: block (the socket is non-blocking) or keep state: the plan's cursor is the state.
 * Ownership: the caller's plan and socket. */
#ifndef ENGINE_SENDPLAN_H
#define ENGINE_SENDPLAN_H

#include <sys/socket.h>

#include "core/plan.h"

/* Sends as much of p as the socket takes now. Returns 0 when the plan is done, -EAGAIN when
 * the socket is full (wait until writable and call again), or another -errno. */
int sendplan_now(int fd, struct plan *p);

/* Flags for sending the next n memory segments of p: MSG_NOSIGNAL, and MSG_MORE while more of
 * the plan follows (headers share packets with the file) or when the close is to carry the tail
 * (plan.fin_carries_tail). */
static inline int sendplan_flags(const struct plan *p, unsigned n)
{
    bool more = p->cur + n < p->nseg || p->fin_carries_tail;
    return MSG_NOSIGNAL | (more ? MSG_MORE : 0);
}

/* True when a segment from the cursor on is a file range. */
bool sendplan_has_file(const struct plan *p);

#endif
