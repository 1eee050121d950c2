/* obs: what conn reports at a connection's and a request's milestones, turned into the three
 * ways of seeing the server: an access-log line, the worker's counters (stats.h) and a USDT
 * probe (probes.h). One call per milestone keeps conn's hooks to a line each.
 * Must not: block or lock (the access log hands buffers over, see accesslog.h), or allocate per
 * request; its one system call is a getpeername per logged connection.
 * Ownership: struct obs_req lives in its response (serve.h); counters in the worker. */
#ifndef RT_OBS_H
#define RT_OBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"
#include "core/logfmt.h"

struct worker;
struct conn;
struct response;

/* What the end of a request needs from its start. */
struct obs_req {
    int64_t start_ns; /* CLOCK_MONOTONIC when its head was parsed */
    uint8_t method;   /* enum http_method */
    bool reused;
    bool captured; /* cap holds the line's fields (the access log is on) */
    bool file;     /* the plan sends part of a file (the file_send probes fire) */
    struct log_capture cap;
};

/* Per connection, kept in struct conn. */
struct obs_conn {
    uint32_t requests;  /* requests answered or being answered */
    uint8_t end;        /* enum close_reason, set where a close starts for a known reason */
    uint8_t peer_known; /* 0 not looked up, 1 known, 2 unknown (getpeername failed) */
    int8_t peer_family;
    uint8_t peer_addr[16];
    char peer[LOGFMT_ADDR_MAX];
};

void obs_conn_accepted(struct worker *w, struct conn *c);

/* c's peer address, looked up (getpeername) the first time something needs it: a logged
 * request, a per-client limit. peer_known says whether it could be. */
const struct obs_conn *obs_peer(struct conn *c);
void obs_conn_closed(struct worker *w, struct conn *c);

/* A request parsed and answered with r (its plan built); req is valid only during the call. */
void obs_request(struct worker *w, struct conn *c, const struct http_request *req,
                 struct response *r);

/* A request that did not parse was answered with r; data[0..len) holds what was read of it. */
void obs_parse_failed(struct worker *w, struct conn *c, const char *data, size_t len,
                      struct response *r);

/* r's send finished (err 0) or failed (-errno): counts it, logs its line, fires the probe. */
void obs_request_done(struct worker *w, struct conn *c, struct response *r, int err);

/* Once per loop turn; force on the worker's way out. */
void obs_tick(struct worker *w, bool force);

/* A worker's engine finished a loop turn: `enters` kernel entries, `completions` handled. */
void obs_loop_turn(struct worker *w, unsigned enters, unsigned completions);

#endif
