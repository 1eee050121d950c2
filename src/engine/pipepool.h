/* pipepool: an engine's bounded per-worker pool of splice pipes, and who holds, waits for or
 * may lose one: pipes made on first use up to a limit, a FIFO of connections waiting for one,
 * and the "parked" list of connections holding a pipe while they wait for their socket to
 * drain (their pipe may be taken by a waiter, oldest parked first). The io_uring engine uses
 * all of it; the epoll engine (HTTP/2 DATA through a pipe) only takes free pipes and puts
 * them back. A pipe's read end blocks, its write end does not. One more pipe,
 * the scratch, is the worker's for composing a slot's pipe into (io_uring, HTTP/2 DATA), and a
 * one-page one, the template, holds the frame header both engines tee into composed pipes.
 * Must not: touch io_uring or know connections beyond their slot numbers; its system calls
 * are pipe2/fcntl/close and the non-blocking splice that empties a taken pipe into /dev/null.
 * Ownership: one worker; slots are the worker's connection slots. A slot's pipe is the slot's
 * until pipepool_release (or until pipepool_take_parked takes it). */
#ifndef ENGINE_PIPEPOOL_H
#define ENGINE_PIPEPOOL_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/sendplan.h"

struct pipepool_pipe {
    int fd[2];                  /* -1 while the pool slot holds no pipe */
    unsigned cap;               /* bytes one step may put in it */
    struct pipepool_pipe *next; /* free list */
    int64_t freed_at;           /* when it went on the free list */
};

/* pipepool_slot.flags */
#define PIPEPOOL_WAITING 0x1 /* in the wait FIFO */
#define PIPEPOOL_PARKED 0x2  /* holds a pipe that pipepool_take_parked may take */

/* A connection slot's claim on the pool. */
struct pipepool_slot {
    struct pipepool_pipe *pipe;    /* held while a file segment is being spliced */
    uint32_t in_pipe;              /* bytes put in the pipe and not yet taken out of it */
    uint32_t wait_next;            /* next waiter's slot + 1, 0 at the tail */
    uint32_t park_prev, park_next; /* the parked list, slot + 1, 0 at the ends */
    uint32_t flags;
    int64_t wait_since; /* when it joined the wait FIFO */
};

struct pipepool {
    struct pipepool_pipe *pipes; /* max of them */
    struct pipepool_pipe *free;
    struct pipepool_slot *slots;   /* one per connection slot */
    unsigned max;                  /* pipes the pool may make */
    unsigned bytes;                /* F_SETPIPE_SZ asked for each */
    unsigned count;                /* pipes made and not closed */
    unsigned short_pipes;          /* pipes that got less than `bytes` (pipe-user-pages limit) */
    uint32_t wait_head, wait_tail; /* FIFO of waiting slots, slot + 1 */
    uint32_t park_head, park_tail; /* parked slots, oldest first, slot + 1 */
    int devnull;                   /* where a taken pipe's bytes are dropped */
    struct pipepool_pipe scratch;  /* empty between calls: see pipepool_scratch */
    struct sendplan_tmpl tmpl;     /* see pipepool_template */
    int64_t trimmed;               /* `now` of the last trim */
};

/* 0, or -errno (pool memory, /dev/null). fini closes every pipe. */
int pipepool_init(struct pipepool *pp, uint32_t nslots, unsigned max, unsigned bytes);
void pipepool_fini(struct pipepool *pp);

static inline struct pipepool_slot *pipepool_slot(struct pipepool *pp, uint32_t slot)
{
    return &pp->slots[slot];
}

/*
 * Gives `slot` (which holds no pipe) a pipe if one can be had without waiting: a free one, a
 * new one while the pool has room, or, when nobody waits already, the pipe of the connection
 * parked longest. Returns the parked slot that lost its pipe in *robbed (slot + 1, 0 if none):
 * it must take a pipe again before its next step. False when none can be had: the caller
 * queues the slot (pipepool_wait) or, when pipepool_none_made says no pipe exists at all,
 * falls back to sendfile.
 */
bool pipepool_acquire(struct pipepool *pp, uint32_t slot, uint32_t *robbed);

static inline bool pipepool_none_made(const struct pipepool *pp)
{
    return pp->count == 0;
}

/* Queues `slot` for a pipe, behind every earlier waiter. */
void pipepool_wait(struct pipepool *pp, uint32_t slot, int64_t now);

/* Takes `slot` out of the wait FIFO; true when it was in it. */
bool pipepool_unwait(struct pipepool *pp, uint32_t slot);

/* The oldest waiter, given a pipe now (free, new, or taken from the longest parked slot),
 * or -1 when none waits or no pipe can be had. The caller starts its splice step. */
int64_t pipepool_grant(struct pipepool *pp);

/* The oldest waiter if it has waited max_wait seconds or more, taken out of the FIFO (it goes
 * on without a pipe: sendfile), or -1. */
int64_t pipepool_stalled(struct pipepool *pp, int64_t now, int64_t max_wait);

/* `slot` holds a pipe and waits for its socket: its pipe may be taken until pipepool_unpark. */
void pipepool_park(struct pipepool *pp, uint32_t slot);
void pipepool_unpark(struct pipepool *pp, uint32_t slot);

/* `slot`'s pipe is empty (in_pipe == 0): back on the free list. */
void pipepool_put(struct pipepool *pp, uint32_t slot, int64_t now);

/* Drops every claim of `slot` (waiting, parked, its pipe): the pipe goes back to the pool only
 * when it is provably empty, else it is closed (a dirty pipe would put one response's bytes on
 * another's socket). No splice of the slot may be in flight. */
void pipepool_release(struct pipepool *pp, uint32_t slot, int64_t now);

/* The worker's scratch pipe, made on first use as the others are and counted among the `max`
 * (NULL when it cannot be made now): empty whenever the worker is between two steps, so a step
 * may fill it and hand it to a slot with pipepool_exchange. Closed by pipepool_trim once
 * unused for `idle` seconds. */
struct pipepool_pipe *pipepool_scratch(struct pipepool *pp);

/* `slot`'s pipe and the scratch change places (their fds and sizes): the slot gets what was
 * composed into the scratch, the scratch the slot's pipe, which must be empty now. */
void pipepool_exchange(struct pipepool *pp, uint32_t slot, int64_t now);

/* Closes the scratch (after a failed step that may have left bytes in it); the next
 * pipepool_scratch makes a new one. */
void pipepool_scratch_reset(struct pipepool *pp);

/* The worker's template pipe for the composing sends (sendplan_tmpl), made on first use (one
 * page; not counted among `max`: it holds 9 bytes and no file page, where the limit is for
 * pipes of file pages), kept until pipepool_fini; NULL when it cannot be made or broke. */
struct sendplan_tmpl *pipepool_template(struct pipepool *pp);

/* Closes pipes free (and a scratch unused) for idle seconds or more (at most once per `now`). */
void pipepool_trim(struct pipepool *pp, int64_t now, int64_t idle);

#endif
