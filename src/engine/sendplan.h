/* sendplan: the synchronous, non-blocking send loop both engines share: memory segments by
 * sendmsg (MSG_MORE while more follows, so headers and file share packets), file ranges by
 * sendfile, partial sends recorded with plan_advance; a kernel TLS control record (plan.tls_record)
 * by sendmsg with its content type in a TLS_SET_RECORD_TYPE cmsg.
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

/* How the next part of a plan leaves. */
enum sendplan_path {
    SENDPLAN_MEMORY,   /* the memory segments from the cursor: one SEND or SENDMSG */
    SENDPLAN_SPLICE,   /* the file segment at the cursor: spliced through a pipe */
    SENDPLAN_SENDFILE, /* the rest of the plan by sendplan_now (sendmsg + sendfile); also a
                        * kernel TLS control record (rare: a ticket, an alert, close_notify) */
};

/*
 * The engine's choice for p (not done). splice_mode: files go by splice in this worker (the
 * io_uring engine with --file-send splice); splice_ok: this response may still use a pipe (it
 * has not waited too long for one). The epoll engine passes false, false: everything by
 * sendplan_now. In splice mode memory before a file segment leaves on its own (MSG_MORE keeps
 * it in the same packets); without it, a plan holding a file goes whole by sendplan_now.
 */
enum sendplan_path sendplan_choose(const struct plan *p, bool splice_mode, bool splice_ok);

#endif
