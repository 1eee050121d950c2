/* Milestone hooks: counters, access-log lines, probes; see obs.h. */
#include "rt/obs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "config.h"
#include "conn.h"
#include "rt/accesslog.h"
#include "rt/errlog.h"
#include "rt/probes.h"
#include "rt/stats.h"
#include "rt/worker.h"
#include "serve.h"

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void obs_conn_accepted(struct worker *w, struct conn *c)
{
    stat_add(&w->stats.accepted, 1);
    PROBE(conn_accepted, w->id, c->slot, c->fd);
}

void obs_conn_closed(struct worker *w, struct conn *c)
{
    unsigned reason = c->obs.end;
    if (reason == CLOSE_DONE && w->draining)
        reason = CLOSE_DRAIN;
    stat_add(&w->stats.closed[reason], 1);
    PROBE(conn_closed, w->id, c->slot, reason);
}

/* The peer's address, looked up once per connection, and only when a line needs it. */
__attribute__((noinline, cold)) static void peer_of(struct conn *c)
{
    struct obs_conn *o = &c->obs;
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    o->peer_known = 2;
    memcpy(o->peer, "-", 2);
    if (getpeername(c->fd, (struct sockaddr *)&ss, &len) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)&ss;
        memcpy(o->peer_addr, &v4->sin_addr, 4);
        inet_ntop(AF_INET, &v4->sin_addr, o->peer, sizeof(o->peer));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&ss;
        memcpy(o->peer_addr, &v6->sin6_addr, 16);
        inet_ntop(AF_INET6, &v6->sin6_addr, o->peer, sizeof(o->peer));
    } else {
        return;
    }
    o->peer_family = (int8_t)ss.ss_family;
    o->peer_known = 1;
}

const struct obs_conn *obs_peer(struct conn *c)
{
    if (!c->obs.peer_known)
        peer_of(c);
    return &c->obs;
}

static bool has_file(const struct plan *p)
{
    for (unsigned i = 0; i < p->nseg; i++)
        if (!p->segs[i].mem)
            return true;
    return false;
}

/* Marks the start of a request on r; returns whether its line is to be captured. */
static inline bool start(struct worker *w, struct conn *c, struct response *r, uint8_t method)
{
    struct obs_req *q = &r->obs;
    q->start_ns = mono_ns();
    q->method = method;
    q->file = has_file(&r->plan); /* the plan is built: its segments' kinds stay as they are */
    q->reused = c->obs.requests++ > 0;
    q->captured = w->alog != NULL && !r->note.quiet;
    if (q->captured && !c->obs.peer_known)
        peer_of(c);
    return q->captured;
}

void obs_request(struct worker *w, struct conn *c, const struct http_request *req,
                 struct response *r)
{
    if (start(w, c, r, (uint8_t)req->method)) {
        const struct config *cfg = w->cfg;
        struct obs_conn *o = &c->obs;
        if (cfg->num_real_ip > 0 && o->peer_known == 1) {
            char addr[LOGFMT_ADDR_MAX];
            size_t n = logfmt_real_ip(cfg->real_ip_from, cfg->num_real_ip, o->peer_family,
                                      o->peer_addr, o->peer, req, addr);
            logfmt_capture(&r->obs.cap, addr, n, req);
        } else {
            logfmt_capture(&r->obs.cap, o->peer, strlen(o->peer), req);
        }
    }
    PROBE(request_start, w->id, c->slot, req->method_name.p, req->method_name.len, req->target.p,
          req->target.len);
    if (r->obs.file)
        PROBE(file_send_start, w->id, c->slot, r->plan.bytes);
}

void obs_parse_failed(struct worker *w, struct conn *c, const char *data, size_t len,
                      struct response *r)
{
    if (start(w, c, r, HTTP_OTHER))
        logfmt_capture_raw(&r->obs.cap, c->obs.peer, strlen(c->obs.peer), data, len);
    PROBE(request_start, w->id, c->slot, data, (size_t)0, data, (size_t)0);
}

static uint64_t bytes_sent(const struct plan *p)
{
    uint64_t left = 0;
    for (unsigned i = p->cur; i < p->nseg; i++)
        left += p->segs[i].len;
    return p->bytes - left;
}

void obs_request_done(struct worker *w, struct conn *c, struct response *r, int err)
{
    struct obs_req *q = &r->obs;
    struct stats *st = &w->stats;
    const struct plan *p = &r->plan;
    uint64_t sent = bytes_sent(p);
    uint64_t us = (uint64_t)(mono_ns() - q->start_ns) / 1000;
    int status = p->status;

    if (status >= STATS_STATUS_MIN && status < STATS_STATUS_MIN + STATS_STATUSES)
        stat_add(&st->requests[status - STATS_STATUS_MIN][q->method], 1);
    stat_add(&st->response_bytes, sent);
    stat_add(&st->duration_us_sum, us);
    unsigned b = 0;
    while (b < STATS_BUCKETS && us > stats_bucket_us[b])
        b++;
    stat_add(&st->duration_bucket[b], 1);
    if (q->reused)
        stat_add(&st->reused, 1);
    if (q->file)
        PROBE(file_send_done, w->id, c->slot, err);
    PROBE(request_done, w->id, c->slot, status, sent, us, q->method);

    if (!q->captured)
        return;
    char *line = accesslog_reserve(w->alog, &w->logbuf, st, w->now);
    if (!line)
        return;
    struct log_end end = {
        .wall_ms = w->wall * 1000,
        .status = status,
        .body_bytes = sent > p->head_len ? sent - p->head_len : 0,
        .duration_us = us,
        .reused = q->reused,
    };
    if (w->cfg->log_format == LOG_JSON) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts); /* JSON's time has milliseconds */
        end.wall_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    }
    accesslog_commit(&w->logbuf,
                     logfmt_line(w->cfg->log_format, &q->cap, &end, &w->logbuf.clock, line));
}

void obs_tick(struct worker *w, bool force)
{
    if (w->alog)
        accesslog_tick(w->alog, &w->logbuf, &w->stats, w->now, force);
}

void obs_loop_turn(struct worker *w, unsigned enters, unsigned completions)
{
    stat_add(&w->stats.enters, enters);
    stat_add(&w->stats.completions, completions);
    PROBE(loop_turn, w->id, completions, enters);
}
