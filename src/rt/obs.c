/* Milestone hooks: counters, access-log lines, probes; see obs.h. */
#include "rt/obs.h"

#include <string.h>
#include <time.h>

#include "config/config.h"
#include "rt/accesslog.h"
#include "rt/errlog.h"
#include "rt/probes.h"
#include "rt/stats.h"
#include "rt/runtime.h"
#include "core/plan.h"

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void obs_conn_accepted(struct runtime *w, struct obs_conn *o, int fd)
{
    stat_add(&w->stats.accepted, 1);
    PROBE(conn_accepted, w->id, o->slot, fd);
}

void obs_conn_closed(struct runtime *w, struct obs_conn *o)
{
    unsigned reason = o->end;
    if (reason == CLOSE_DONE && w->draining)
        reason = CLOSE_DRAIN;
    stat_add(&w->stats.closed[reason], 1);
    PROBE(conn_closed, w->id, o->slot, reason);
}

static bool has_file(const struct plan *p)
{
    for (unsigned i = 0; i < p->nseg; i++)
        if (!p->segs[i].mem)
            return true;
    return false;
}

/* Marks the start of a request answered with plan p; returns whether its line is to be
 * captured. */
static inline bool start(struct runtime *w, struct obs_conn *o, struct obs_req *q,
                         const struct plan *p, bool quiet, uint8_t method)
{
    q->start_ns = mono_ns();
    q->method = method;
    q->file = has_file(p); /* the plan is built: its segments' kinds stay as they are */
    q->reused = o->requests++ > 0;
    q->captured = w->alog != NULL && !quiet;
    return q->captured;
}

void obs_request(struct runtime *w, struct obs_conn *o, const struct http_request *req,
                 struct obs_req *q, const struct plan *plan, bool quiet)
{
    if (start(w, o, q, plan, quiet, (uint8_t)req->method)) {
        const struct config *cfg = w->cfg;
        const struct peer *p = &o->peer;
        if (cfg->num_real_ip > 0 && p->known) {
            char addr[LOGFMT_ADDR_MAX];
            size_t n = logfmt_real_ip(cfg->real_ip_from, cfg->num_real_ip, p->family, p->addr,
                                      p->text, req, addr);
            logfmt_capture(&q->cap, addr, n, req, q->secure);
        } else {
            logfmt_capture(&q->cap, p->text, strlen(p->text), req, q->secure);
        }
    }
    PROBE(request_start, w->id, o->slot, req->method_name.p, req->method_name.len, req->target.p,
          req->target.len);
    if (q->file)
        PROBE(file_send_start, w->id, o->slot, plan->bytes);
}

void obs_parse_failed(struct runtime *w, struct obs_conn *o, const char *data, size_t len,
                      struct obs_req *q, const struct plan *plan, bool quiet)
{
    if (start(w, o, q, plan, quiet, HTTP_OTHER))
        logfmt_capture_raw(&q->cap, o->peer.text, strlen(o->peer.text), data, len);
    PROBE(request_start, w->id, o->slot, data, (size_t)0, data, (size_t)0);
}

static uint64_t bytes_sent(const struct plan *p)
{
    uint64_t left = 0;
    for (unsigned i = p->cur; i < p->nseg; i++)
        left += p->segs[i].len;
    return p->bytes - left;
}

void obs_request_done(struct runtime *w, struct obs_conn *o, struct obs_req *q,
                      const struct plan *p, int err)
{
    struct stats *st = &w->stats;
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
        PROBE(file_send_done, w->id, o->slot, err);
    PROBE(request_done, w->id, o->slot, status, sent, us, q->method);

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

void obs_tick(struct runtime *w, bool force)
{
    if (w->alog)
        accesslog_tick(w->alog, &w->logbuf, &w->stats, w->now, force);
}

void obs_loop_turn(struct runtime *w, unsigned enters, unsigned completions)
{
    stat_add(&w->stats.enters, enters);
    stat_add(&w->stats.completions, completions);
    PROBE(loop_turn, w->id, completions, enters);
}
