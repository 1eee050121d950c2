/* serve: answers one parsed request: normalises the path, finds the file (or index, sibling,
 * error page, fallback, listing) through the worker's file cache, and has core/static write the
 * response.
 * Must not: touch sockets or connection state; its only I/O is the file cache and, for
 * --autoindex, reading a directory.
 * Ownership: a struct response comes from the worker's pool and holds what its plan points to
 * (cache references, a generated body) until response_release. */
#ifndef SERVE_H
#define SERVE_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "core/http1.h"
#include "core/plan.h"
#include "rt/obs.h"

struct worker;
struct fentry;

#define RESPONSE_BUF 4096 /* header block, multipart part headers, small error bodies */
#define RESPONSE_IOV 16

struct response {
    struct plan plan;
    struct obs_req obs; /* the request's start and, with the access log on, its line's fields */
    struct fentry *hold[2]; /* cache entries the plan reads from */
    char *heap;             /* a generated body (directory listing), freed on release */
    bool quiet;             /* not logged (--health) */
    struct msghdr msg;      /* the engine's send scratch: alive until the send ends */
    struct iovec iov[RESPONSE_IOV];
    char buf[RESPONSE_BUF];
};

/* Fills r with the answer to req. keep_alive says whether the connection may stay open;
 * r->plan.close is set when it must not. */
void serve_request(struct worker *w, const struct http_request *req, bool keep_alive,
                   struct response *r);

/* Fills r with an error response for a request that could not be parsed (head: it was a HEAD
 * request, so no body); the connection closes after it. */
void serve_error(struct worker *w, int status, bool head, struct response *r);

/* Drops what r holds; r itself goes back to the pool by the caller. */
void response_release(struct worker *w, struct response *r);

#endif
