/* obs: what conn and the protocols report at a connection's and a request's milestones, turned into
 * the three ways of seeing the server: an access-log line, the worker's counters (stats.h) and a
 * USDT probe (probes.h). One call per milestone keeps conn's hooks to a line each. Must not: block
 * or lock (the access log hands buffers over, see accesslog.h), or allocate per request; it reads
 * the client's address from conn (conn_peer), never looks it up. Ownership: struct obs_req lives in
 * its response (serve.h); counters in the worker. */
#ifndef RT_OBS_H
#define RT_OBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"
#include "core/logfmt.h"
#include "core/peer.h"

struct runtime;
struct plan;

/* What the end of a request needs from its start. */
struct obs_req {
    int64_t start_ns; /* CLOCK_MONOTONIC when its head was parsed */
    uint8_t method;   /* enum http_method */
    bool reused;
    bool captured; /* cap holds the line's fields (the access log is on) */
    bool secure;   /* it came over TLS: set by serve (the port a Host without one means) */
    bool file;     /* the plan sends part of a file (the file_send probes fire) */
    struct log_capture cap;
};

/* Per connection, kept in struct conn (conn.obs). */
struct obs_conn {
    uint32_t requests; /* requests answered or being answered */
    uint32_t slot;     /* the connection's, for the probes */
    uint8_t end;       /* enum close_reason, set where a close starts for a known reason */
    struct peer peer;  /* the client's address: set once at the accept, read via conn_peer */
};

void obs_conn_accepted(struct runtime *w, struct obs_conn *o, int fd);
void obs_conn_closed(struct runtime *w, struct obs_conn *o);

/* A request parsed and answered with plan (built; quiet: not to be logged), its milestones
 * kept in q (the response's); req is valid only during the call. */
void obs_request(struct runtime *w, struct obs_conn *o, const struct http_request *req,
                 struct obs_req *q, const struct plan *plan, bool quiet);

/* A request that did not parse was answered with plan; data[0..len) holds what was read. */
void obs_parse_failed(struct runtime *w, struct obs_conn *o, const char *data, size_t len,
                      struct obs_req *q, const struct plan *plan, bool quiet);

/* The send of the response q and p belong to finished (err 0) or failed (-errno): counts it,
 * logs its line, fires the probe. */
void obs_request_done(struct runtime *w, struct obs_conn *o, struct obs_req *q,
                      const struct plan *p, int err);

/* Once per loop turn; force on the worker's way out. */
void obs_tick(struct runtime *w, bool force);

/* A worker's engine finished a loop turn: `enters` kernel entries, `completions` handled. */
void obs_loop_turn(struct runtime *w, unsigned enters, unsigned completions);

#endif
