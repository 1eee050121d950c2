/* prio: RFC 9218 for HTTP/2 and HTTP/3: the Priority field value (and PRIORITY_UPDATE's), a
 * Structured Fields dictionary of which "u" (urgency 0-7) and "i" (incremental) count; and the
 * one send scheduler both protocols use (which stream's response goes out next).
 * Must not: allocate, reject a value (unknown members and bad values are ignored, 4), or know
 * what a stream is beyond its node (flow control, reads and frames are the protocol's).
 * Ownership: prio_parse is a pure function over the caller's bytes; a scheduler and its nodes
 * are the protocol's (the session's, each stream's), the scheduler only links them. */
#ifndef CORE_PRIO_H
#define CORE_PRIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/list.h"

#define PRIO_URGENCY_DEFAULT 3
#define PRIO_URGENCIES 8

/* Sets *urgency and *incremental from what p[0, n) names; leaves the others as they are. */
void prio_parse(const char *p, size_t n, uint8_t *urgency, bool *incremental);

/* The send order (RFC 9218 10, as h2o schedules HTTP/3): the lowest urgency first; within one,
 * the non-incremental streams one after another in arrival order, each until it ends, and
 * with them (in arrival order too) the incremental ones that have not sent yet; behind those,
 * the incremental ones that have sent, a turn each (round robin). A stream with nothing it may
 * send now (flow control, an acknowledgement, a cold read) leaves the order (prio_idle) and
 * comes back to its place by arrival (prio_ready): it holds no one while it waits, and loses
 * nothing by it. A priority change takes effect at once (prio_set). */
struct prio_node {
    struct list link; /* in its urgency's lists while ready */
    uint64_t seq;     /* arrival order (the stream's ID) */
    uint8_t urgency;
    bool incremental;
    bool had_turn; /* incremental and has sent: it round-robins behind the others */
};

struct prio_sched {
    struct list first[PRIO_URGENCIES]; /* non-incremental, and incremental before a turn */
    struct list turns[PRIO_URGENCIES]; /* incremental after a turn: round robin */
};

void prio_sched_init(struct prio_sched *s);

/* The calls below are inline: each runs for every response, frame or packet sent. */

/* A new stream's node: seq, the default urgency, not incremental, not ready. */
static inline void prio_node_init(struct prio_node *n, uint64_t seq)
{
    *n = (struct prio_node){.seq = seq, .urgency = PRIO_URGENCY_DEFAULT};
    list_link_init(&n->link);
}

static inline bool prio_is_ready(const struct prio_node *n)
{
    return list_linked(&n->link);
}

/* n has something it may send: into the order at its place (nothing if it is there). */
static inline void prio_ready(struct prio_sched *s, struct prio_node *n)
{
    if (prio_is_ready(n))
        return;
    if (n->had_turn) {
        list_push_back(&s->turns[n->urgency], &n->link);
        return;
    }
    /* By arrival: from the back, as a new stream is the newest and one coming back from a
     * wait usually has few behind it. */
    struct list *head = &s->first[n->urgency], *pos = head;
    while (pos->prev != head && LIST_ITEM(pos->prev, struct prio_node, link)->seq > n->seq)
        pos = pos->prev;
    list_insert_before(pos, &n->link);
}

/* n has nothing it may send now, or is done: out of the order (nothing if it is out). */
static inline void prio_idle(struct prio_node *n)
{
    if (prio_is_ready(n))
        list_remove(&n->link);
}

/* The node to send from next, or NULL when none is ready. */
static inline struct prio_node *prio_next(const struct prio_sched *s)
{
    for (unsigned u = 0; u < PRIO_URGENCIES; u++) {
        struct list *l = list_first(&s->first[u]);
        if (!l)
            l = list_first(&s->turns[u]);
        if (l)
            return LIST_ITEM(l, struct prio_node, link);
    }
    return NULL;
}

/* n (ready) sent some and still has more: an incremental one goes to the back of its
 * urgency's turns; a non-incremental one keeps its place. */
static inline void prio_sent(struct prio_sched *s, struct prio_node *n)
{
    if (!n->incremental || !prio_is_ready(n))
        return;
    list_remove(&n->link);
    n->had_turn = true;
    list_push_back(&s->turns[n->urgency], &n->link);
}

/* New urgency and incremental for n (a PRIORITY_UPDATE, a field read late): a ready n moves. */
void prio_set(struct prio_sched *s, struct prio_node *n, uint8_t urgency, bool incremental);

#endif
