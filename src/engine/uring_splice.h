/* uring_splice: the io_uring engine's splice walk, file ranges sent file -> pipe -> socket
 * through the worker's pipe pool (--file-send splice), parked, waiting and composed.
 * Must not: be used outside the io_uring engine; send memory or decide the send path (uring.c
 * chooses, and the rest of a plan goes on through engine_uring.send). Ownership: the per-slot
 * splice state (u->xfers) and the pool's pipes are one worker's, used by its thread. */
#ifndef ENGINE_URING_SPLICE_H
#define ENGINE_URING_SPLICE_H

#include <stdbool.h>

#include "engine/uring_state.h"

struct runtime;
struct engine_conn;

/* Sets up the per-slot state and the pool (pipes are made on first use) when --file-send
 * splice is on and the kernel has IORING_OP_SPLICE; u->xfers stays NULL otherwise. -errno. */
int uring_splice_setup(struct runtime *w, struct uring *u);
void uring_splice_release(struct runtime *w, struct uring *u);

/* c's current segment is a file range (or its plan is interleaved): splices it, queueing for a
 * pipe when none is free. False when no pipe could be made at all: send by sendfile instead. */
bool uring_splice_send(struct runtime *w, struct uring *u, struct engine_conn *c);

/* Takes c out of the queue of connections waiting for a pipe. */
void uring_splice_unwait(struct runtime *w, struct uring *u, struct engine_conn *c);

/* Drops c's claim on the pool (queue, pipe); no splice of c may be in flight. */
void uring_splice_drop(struct runtime *w, struct uring *u, struct engine_conn *c);

/* After POLLOUT: sends what c's pipe still holds from the loop and goes on. False when c has
 * no such bytes (the plan goes on through engine_uring.send). */
bool uring_splice_flush(struct runtime *w, struct uring *u, struct engine_conn *c);

/* Once per loop turn while connections wait: those that waited too long go by sendfile. */
void uring_splice_unstall(struct runtime *w, struct uring *u);

/* A splice of c's (OP_SPLICE_IN or OP_SPLICE_OUT) completed with res: recorded. */
void uring_splice_result(struct uring *u, struct engine_conn *c, enum op op, int res);

/* After uring_splice_result, c not closing: once both splices of the step are in, reports,
 * continues or waits for the socket. */
void uring_splice_continue(struct runtime *w, struct uring *u, struct engine_conn *c);

#endif
