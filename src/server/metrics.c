/* The metrics listener and the exposition text; see metrics.h. */
#include "server/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "core/http1.h"
#include "rt/accesslog.h"
#include "rt/errlog.h"
#include "rt/stats.h"
#include "server/worker.h"

struct metrics {
    int fd;
    int stop_fd; /* eventfd: written by metrics_stop */
    pthread_t thread;
    struct worker *const *workers;
    int nworkers;
    const char *engine;
    struct accesslog *al;
    double start_time;
    _Atomic(const struct metrics_source *) source; /* metrics_add's, or NULL */
    _Atomic(void *) source_arg;                    /* stored before source */
    /* the metrics thread only */
    struct errlog_limit accept_limit, full_limit;
    int64_t accept_rest_until; /* CLOCK_MONOTONIC ms: accept failed for want of fds */
    struct mconn *conns;       /* CONNS of them */
};

static const char *const method_names[STATS_METHODS] = {
    [HTTP_GET] = "GET",     [HTTP_HEAD] = "HEAD",       [HTTP_OPTIONS] = "OPTIONS",
    [HTTP_POST] = "POST",   [HTTP_PUT] = "PUT",         [HTTP_DELETE] = "DELETE",
    [HTTP_PATCH] = "PATCH", [HTTP_CONNECT] = "CONNECT", [HTTP_TRACE] = "TRACE",
    [HTTP_OTHER] = "other",
};

static const char *const reason_names[CLOSE_REASONS] = {
    [CLOSE_DONE] = "done",   [CLOSE_CLIENT] = "client", [CLOSE_TIMEOUT] = "timeout",
    [CLOSE_ERROR] = "error", [CLOSE_DRAIN] = "drain",
};

static void head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One series per worker: name{worker="i"} value. */
static void per_worker(FILE *f, const char *name, const char *type, const char *help,
                       struct worker *const *ws, int n, size_t offset)
{
    head(f, name, type, help);
    for (int i = 0; i < n; i++) {
        const stat_t *c = (const stat_t *)((const char *)&worker_runtime(ws[i])->stats + offset);
        fprintf(f, "%s{worker=\"%d\"} %llu\n", name, i, (unsigned long long)stat_get(c));
    }
}

#define PER_WORKER(f, name, type, help, ws, n, field)                                              \
    per_worker(f, name, type, help, ws, n, offsetof(struct stats, field))

static void compression(FILE *f, struct worker *const *ws, int n)
{
    PER_WORKER(f, "ringhttpd_compress_variants_made_total", "counter",
               "Compressed variants made (kept or not).", ws, n, compress_made);
    PER_WORKER(f, "ringhttpd_compress_variants_kept_total", "counter",
               "Compressed variants that saved enough to be kept.", ws, n, compress_kept);
    PER_WORKER(f, "ringhttpd_compress_variants_on_loop_total", "counter",
               "Compressed variants small enough to be made on the event loop.", ws, n,
               compress_on_loop);
    PER_WORKER(f, "ringhttpd_compress_skipped_total", "counter",
               "Variants not made because the compressor's queue was full.", ws, n,
               compress_skipped);
    PER_WORKER(f, "ringhttpd_compress_input_bytes_total", "counter",
               "Identity bytes of the kept variants.", ws, n, compress_in_bytes);
    PER_WORKER(f, "ringhttpd_compress_saved_bytes_total", "counter",
               "Bytes the kept variants saved over their identity bodies.", ws, n,
               compress_saved_bytes);
    head(f, "ringhttpd_compress_cpu_seconds_total", "counter", "CPU time spent compressing.");
    for (int i = 0; i < n; i++)
        fprintf(f, "ringhttpd_compress_cpu_seconds_total{worker=\"%d\"} %.6f\n", i,
                (double)stat_get(&worker_runtime(ws[i])->stats.compress_ns) / 1e9);
    PER_WORKER(f, "ringhttpd_compress_cache_bytes", "gauge",
               "Bytes of compressed variants the file cache holds.", ws, n, compress_cache_bytes);
}

static void requests(FILE *f, struct worker *const *ws, int n)
{
    head(f, "ringhttpd_requests_total", "counter", "Requests answered, by status code and method.");
    for (int i = 0; i < n; i++)
        for (int s = 0; s < STATS_STATUSES; s++)
            for (int m = 0; m < STATS_METHODS; m++) {
                uint64_t v = stat_get(&worker_runtime(ws[i])->stats.requests[s][m]);
                if (v)
                    fprintf(f,
                            "ringhttpd_requests_total{worker=\"%d\",code=\"%d\",method=\"%s\"} "
                            "%llu\n",
                            i, s + STATS_STATUS_MIN, method_names[m], (unsigned long long)v);
            }
}

static void durations(FILE *f, struct worker *const *ws, int n)
{
    const char *name = "ringhttpd_request_duration_seconds";
    head(f, name, "histogram",
         "Time from a request's parsed head to its response's last byte handed to the kernel.");
    for (int i = 0; i < n; i++) {
        uint64_t cum = 0;
        for (int b = 0; b <= STATS_BUCKETS; b++) {
            cum += stat_get(&worker_runtime(ws[i])->stats.duration_bucket[b]);
            if (b < STATS_BUCKETS)
                fprintf(f, "%s_bucket{worker=\"%d\",le=\"%g\"} %llu\n", name, i,
                        (double)stats_bucket_us[b] / 1e6, (unsigned long long)cum);
            else
                fprintf(f, "%s_bucket{worker=\"%d\",le=\"+Inf\"} %llu\n", name, i,
                        (unsigned long long)cum);
        }
        fprintf(f, "%s_sum{worker=\"%d\"} %.6f\n", name, i,
                (double)stat_get(&worker_runtime(ws[i])->stats.duration_us_sum) / 1e6);
        fprintf(f, "%s_count{worker=\"%d\"} %llu\n", name, i, (unsigned long long)cum);
    }
}

static void connections(FILE *f, struct worker *const *ws, int n)
{
    head(f, "ringhttpd_connections_closed_total", "counter", "Connections closed, by reason.");
    for (int i = 0; i < n; i++)
        for (int r = 0; r < CLOSE_REASONS; r++)
            fprintf(f, "ringhttpd_connections_closed_total{worker=\"%d\",reason=\"%s\"} %llu\n", i,
                    reason_names[r],
                    (unsigned long long)stat_get(&worker_runtime(ws[i])->stats.closed[r]));
    head(f, "ringhttpd_connections_open", "gauge", "Connections open now.");
    for (int i = 0; i < n; i++) {
        uint64_t closed = 0;
        for (int r = 0; r < CLOSE_REASONS; r++)
            closed += stat_get(&worker_runtime(ws[i])->stats.closed[r]);
        /* Read after the closes, so never below them. */
        uint64_t accepted = stat_get(&worker_runtime(ws[i])->stats.accepted);
        fprintf(f, "ringhttpd_connections_open{worker=\"%d\"} %llu\n", i,
                (unsigned long long)(accepted - closed));
    }
    PER_WORKER(f, "ringhttpd_connections_accepted_total", "counter", "Connections accepted.", ws, n,
               accepted);
}

static void gauge_diff(FILE *f, struct worker *const *ws, int n)
{
    head(f, "ringhttpd_pipe_waiting", "gauge", "Large-file sends waiting for a splice pipe now.");
    for (int i = 0; i < n; i++) {
        uint64_t done = stat_get(&worker_runtime(ws[i])->stats.pipe_waits_done);
        uint64_t all = stat_get(&worker_runtime(ws[i])->stats.pipe_waits);
        fprintf(f, "ringhttpd_pipe_waiting{worker=\"%d\"} %llu\n", i,
                (unsigned long long)(all - done));
    }
}

char *metrics_render(struct worker *const *ws, int n, const char *engine, struct accesslog *al,
                     double start_time, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f)
        return NULL;
    head(f, "ringhttpd_build_info", "gauge", "The running build; always 1.");
    fprintf(f, "ringhttpd_build_info{version=\"%s\",compiler=\"%s\"} 1\n", RINGHTTPD_VERSION,
            __VERSION__);
    head(f, "process_start_time_seconds", "gauge", "Start time of the process since the epoch.");
    fprintf(f, "process_start_time_seconds %.3f\n", start_time);
    head(f, "ringhttpd_engine_info", "gauge", "The event engine in use and its features found.");
    fprintf(f, "ringhttpd_engine_info{engine=\"%s\",features=\"%s\"} 1\n", engine,
            n > 0 ? worker_runtime(ws[0])->features : "");
    head(f, "ringhttpd_workers", "gauge", "Worker threads.");
    fprintf(f, "ringhttpd_workers %d\n", n);
    requests(f, ws, n);
    durations(f, ws, n);
    PER_WORKER(f, "ringhttpd_response_bytes_total", "counter",
               "Bytes of responses sent, header fields included.", ws, n, response_bytes);
    PER_WORKER(f, "ringhttpd_keepalive_requests_total", "counter",
               "Requests that reused a connection (not its first).", ws, n, reused);
    connections(f, ws, n);
    PER_WORKER(f, "ringhttpd_tls_kernel_connections_total", "counter",
               "TLS connections whose responses the kernel encrypted (kernel TLS).", ws, n,
               ktls_conns);
    PER_WORKER(f, "ringhttpd_tls_resumed_handshakes_total", "counter",
               "TLS handshakes that resumed a session from a ticket.", ws, n, tls_resumed);
    PER_WORKER(f, "ringhttpd_http3_connections", "gauge", "HTTP/3 (QUIC) connections open.", ws, n,
               h3_conns);
    PER_WORKER(f, "ringhttpd_http3_connections_accepted_total", "counter",
               "QUIC connections accepted.", ws, n, h3_accepted);
    PER_WORKER(f, "ringhttpd_http3_connections_refused_total", "counter",
               "QUIC connections refused (limit, drain, invalid token).", ws, n, h3_refused);
    PER_WORKER(f, "ringhttpd_http3_retries_total", "counter",
               "QUIC Retry packets sent (address validation under load).", ws, n, h3_retries);
    PER_WORKER(f, "ringhttpd_http3_stateless_resets_total", "counter",
               "QUIC stateless resets sent for unknown connections.", ws, n, h3_resets);
    PER_WORKER(f, "ringhttpd_http3_version_negotiations_total", "counter",
               "QUIC version negotiation packets sent.", ws, n, h3_vn);
    PER_WORKER(f, "ringhttpd_udp_datagrams_received_total", "counter",
               "UDP datagrams received on the HTTP/3 port.", ws, n, udp_in);
    PER_WORKER(f, "ringhttpd_udp_datagrams_sent_total", "counter",
               "UDP datagrams sent from the HTTP/3 port.", ws, n, udp_out);
    PER_WORKER(f, "ringhttpd_udp_datagrams_dropped_total", "counter",
               "UDP datagrams not sent (socket buffer full); QUIC retransmits them.", ws, n,
               udp_dropped);
    PER_WORKER(f, "ringhttpd_udp_gro_trains_total", "counter",
               "Receives that brought several datagrams of a client at once (UDP GRO).", ws, n,
               udp_gro_trains);
    PER_WORKER(f, "ringhttpd_udp_ring_sends_total", "counter",
               "Sends of the HTTP/3 port made as io_uring operations (the rest: sendmsg).", ws, n,
               udp_ring_sends);
    PER_WORKER(f, "ringhttpd_udp_sends_total", "counter",
               "Sends (sendmsg calls or io_uring SENDMSG operations) that carried the HTTP/3 "
               "port's datagrams; with GSO one carries several.",
               ws, n, udp_sends);
    PER_WORKER(f, "ringhttpd_limit_conn_refused_total", "counter",
               "Connections closed at accept: their client had --limit-conn open.", ws, n,
               limit_conn_refused);
    PER_WORKER(f, "ringhttpd_proxy_refused_total", "counter",
               "Connections from --proxy-protocol-from sources closed for their PROXY header "
               "(missing, malformed, too long or too slow).",
               ws, n, proxy_refused);
    PER_WORKER(f, "ringhttpd_limit_req_refused_total", "counter",
               "Requests answered 429: their client was past --limit-req.", ws, n,
               limit_req_refused);
    PER_WORKER(f, "ringhttpd_user_agent_refused_total", "counter",
               "Requests answered 403: their User-Agent matched a --deny-user-agent pattern.", ws,
               n, rules_ua_refused);
    PER_WORKER(f, "ringhttpd_access_refused_total", "counter",
               "Requests answered 403 (or closed) by an access rule of their site.", ws, n,
               rules_access_refused);
    PER_WORKER(f, "ringhttpd_limit_uncounted_total", "counter",
               "Clients a full limit table could not count (let through).", ws, n, limit_uncounted);
    PER_WORKER(f, "ringhttpd_file_cache_hits_total", "counter", "File-cache look-ups that hit.", ws,
               n, cache_hits);
    PER_WORKER(f, "ringhttpd_file_cache_misses_total", "counter",
               "File-cache look-ups that had to open or stat the file.", ws, n, cache_misses);
    PER_WORKER(f, "ringhttpd_file_cache_bytes", "gauge", "Bytes of file contents held in memory.",
               ws, n, cache_bytes);
    PER_WORKER(f, "ringhttpd_tls_handshakes_parked", "gauge",
               "TLS handshakes waiting for a certificate on demand now.", ws, n, tls_parked);
    PER_WORKER(f, "ringhttpd_pipe_waits_total", "counter",
               "Large-file sends that waited for a splice pipe.", ws, n, pipe_waits);
    gauge_diff(f, ws, n);
    PER_WORKER(f, "ringhttpd_engine_enters_total", "counter",
               "System calls that submitted work and waited for completions (one a loop turn).", ws,
               n, enters);
    PER_WORKER(f, "ringhttpd_engine_completions_total", "counter",
               "Completions (or readiness events) the event loop handled.", ws, n, completions);
    head(f, "ringhttpd_access_log_lines_total", "counter", "Access-log lines written.");
    fprintf(f, "ringhttpd_access_log_lines_total %llu\n",
            (unsigned long long)(al ? accesslog_written(al) : 0));
    PER_WORKER(f, "ringhttpd_access_log_dropped_lines_total", "counter",
               "Access-log lines dropped because the writer was stuck.", ws, n, log_dropped);
    compression(f, ws, n);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* ---- the listener: one poll loop on the metrics thread ----
 *
 * A scraper sends one small request and reads one answer; anything else (a client trickling
 * bytes, connections left open, garbage) must not keep the next scrape waiting. So every
 * connection is non-blocking and served side by side from one poll loop, a request head must
 * be complete within REQUEST_S of the accept whatever the client trickles, the answer must be
 * gone within ANSWER_S, and at most CONNS are open: a newcomer past the bound closes the oldest
 * connection still waiting for its request head (which is a scraper's first packet, so a real
 * scraper's is never the one waiting long), or is refused when every connection is being
 * answered. */

#define CONNS 16
#define REQUEST_MAX 4096 /* a scrape's head is ~200 bytes; a longer one gets 431 */
#define REQUEST_S 3
#define ANSWER_S 10
/* reading what a client still sends after its answer, so that the close sends no RST */
#define LINGER_MS 1000
#define FULL_PAUSE_MS 100 /* out of fds (or memory) at accept: the listener rests this long */

enum mstate { M_FREE, M_READ, M_WRITE, M_LINGER };

struct mconn {
    enum mstate state;
    int fd;
    int64_t deadline_ms; /* CLOCK_MONOTONIC */
    int64_t accepted_ms; /* the bound closes the oldest reader */
    size_t len;          /* request bytes in buf */
    char head[256];      /* the answer: head[0..head_len) then body[0..body_len) */
    size_t head_len;
    char *body; /* malloc'd, or NULL */
    size_t body_len;
    size_t sent; /* of head then body */
    char buf[REQUEST_MAX];
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void drop(struct mconn *c)
{
    close(c->fd);
    free(c->body);
    c->body = NULL;
    c->state = M_FREE;
}

/* Prepares the answer in c (status line and fields in head, body only if with_body). */
static void answer(struct mconn *c, int status, const char *reason, const char *type, char *body,
                   size_t len, bool with_body)
{
    int n = snprintf(c->head, sizeof(c->head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, reason, type, len);
    c->head_len = (size_t)n < sizeof(c->head) ? (size_t)n : sizeof(c->head) - 1;
    c->body = with_body ? body : NULL;
    c->body_len = with_body ? len : 0;
    if (!with_body)
        free(body);
    c->sent = 0;
    c->state = M_WRITE;
    c->deadline_ms = now_ms() + ANSWER_S * 1000;
}

static void answer_text(struct mconn *c, int status, const char *reason, const char *msg,
                        bool with_body)
{
    char *body = strdup(msg);
    answer(c, status, reason, "text/plain", body, body ? strlen(msg) : 0, with_body && body);
}

static const char *reason(int status)
{
    switch (status) {
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Bad Request";
    }
}

/* The answer to the head in c->buf, once it is complete (core/http1.h parses it as a worker
 * would: a malformed head gets the parser's 4xx/5xx, and the connection closes). */
static void respond(struct metrics *m, struct mconn *c)
{
    struct http_request req;
    int r = http1_parse(c->buf, c->len, &req);
    if (r == HTTP1_PARTIAL && c->len < sizeof(c->buf))
        return; /* more to come */
    if (r == HTTP1_PARTIAL) {
        answer_text(c, 431, "Request Header Fields Too Large", "a scrape's head is short\n", true);
        return;
    }
    if (r == HTTP1_ERROR) {
        answer_text(c, req.status, reason(req.status), "not a request this listener takes\n", true);
        return;
    }
    bool is_head = req.method == HTTP_HEAD;
    if (req.method != HTTP_GET && !is_head) {
        answer_text(c, 405, "Method Not Allowed", "only GET and HEAD\n", true);
        return;
    }
    struct http_str t = req.target;
    if (t.len < 8 || memcmp(t.p, "/metrics", 8) != 0 || (t.len > 8 && t.p[8] != '?')) {
        answer_text(c, 404, "Not Found", "metrics are at /metrics\n", !is_head);
        return;
    }
    size_t blen = 0;
    char *body = metrics_render(m->workers, m->nworkers, m->engine, m->al, m->start_time, &blen);
    const struct metrics_source *src = atomic_load(&m->source);
    if (body && src) { /* an upper layer's families (automatic HTTPS), after the workers' */
        char *more = NULL;
        size_t mlen = 0;
        FILE *f = open_memstream(&more, &mlen);
        if (f) {
            fwrite(body, 1, blen, f);
            src->write(atomic_load(&m->source_arg), f);
        }
        free(body);
        body = f && fclose(f) == 0 ? more : NULL;
        blen = mlen;
        if (!body)
            free(more);
    }
    if (!body)
        answer(c, 500, "Internal Server Error", "text/plain", NULL, 0, false);
    else
        answer(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", body, blen, !is_head);
}

/* Moves c along as far as its socket lets it, without blocking. */
static void step(struct metrics *m, struct mconn *c)
{
    if (c->state == M_READ) {
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            drop(c);
            return;
        }
        if (n < 0)
            return;
        c->len += (size_t)n;
        respond(m, c);
    }
    if (c->state == M_WRITE) {
        while (c->sent < c->head_len + c->body_len) {
            struct iovec iov[2];
            int k = 0;
            if (c->sent < c->head_len)
                iov[k++] = (struct iovec){c->head + c->sent, c->head_len - c->sent};
            size_t boff = c->sent > c->head_len ? c->sent - c->head_len : 0;
            if (c->body_len > boff)
                iov[k++] = (struct iovec){c->body + boff, c->body_len - boff};
            struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)k};
            ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
            if (n < 0) {
                drop(c);
                return;
            }
            c->sent += (size_t)n;
        }
        /* All sent: end our side, and read what the client may still send until it closes
         * (a close with unread bytes would reset the connection and could lose the answer). */
        shutdown(c->fd, SHUT_WR);
        free(c->body);
        c->body = NULL;
        c->state = M_LINGER;
        c->deadline_ms = now_ms() + LINGER_MS;
    }
    if (c->state == M_LINGER) {
        ssize_t n;
        while ((n = recv(c->fd, c->buf, sizeof(c->buf), 0)) > 0)
            ;
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            drop(c);
    }
}

/* A slot for a newcomer: a free one, else the oldest still reading its head (closed), else
 * NULL (every connection is being answered: the newcomer is refused). */
static struct mconn *slot_for_newcomer(struct metrics *m)
{
    struct mconn *oldest = NULL;
    for (int i = 0; i < CONNS; i++) {
        struct mconn *c = &m->conns[i];
        if (c->state == M_FREE)
            return c;
        if ((c->state == M_READ || c->state == M_LINGER) &&
            (!oldest || c->accepted_ms < oldest->accepted_ms))
            oldest = c;
    }
    if (oldest) {
        errlog_limited(&m->full_limit, ERRLOG_WARN,
                       "metrics: %d connections open: closed the oldest waiting one", CONNS);
        drop(oldest);
    }
    return oldest;
}

static void accept_all(struct metrics *m)
{
    for (;;) {
        int fd = accept4(m->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN) { /* EMFILE...: the listener stays readable, so it rests */
                errlog_limited(&m->accept_limit, ERRLOG_ERROR, "metrics: accept: %s",
                               strerror(errno));
                m->accept_rest_until = now_ms() + FULL_PAUSE_MS;
            }
            return;
        }
        struct mconn *c = slot_for_newcomer(m);
        if (!c) {
            errlog_limited(&m->full_limit, ERRLOG_WARN,
                           "metrics: %d connections being answered: refused one", CONNS);
            close(fd);
            continue;
        }
        int64_t t = now_ms();
        c->state = M_READ;
        c->fd = fd;
        c->len = 0;
        c->accepted_ms = t;
        c->deadline_ms = t + REQUEST_S * 1000;
        step(m, c); /* a scraper's request often came with its connection */
    }
}

void metrics_add(struct metrics *m, const struct metrics_source *src, void *arg)
{
    atomic_store(&m->source_arg, arg);
    atomic_store(&m->source, src);
}

static void *metrics_main(void *arg)
{
    struct metrics *m = arg;
    struct pollfd p[2 + CONNS];
    struct mconn *of[2 + CONNS];
    for (;;) {
        int64_t t = now_ms(), wake = -1;
        nfds_t n = 0;
        p[n++] = (struct pollfd){.fd = m->stop_fd, .events = POLLIN};
        p[n++] = (struct pollfd){.fd = m->fd, .events = t < m->accept_rest_until ? 0 : POLLIN};
        if (t < m->accept_rest_until)
            wake = m->accept_rest_until - t;
        for (int i = 0; i < CONNS; i++) {
            struct mconn *c = &m->conns[i];
            if (c->state == M_FREE)
                continue;
            if (c->deadline_ms <= t) { /* too slow, whatever it was doing */
                drop(c);
                continue;
            }
            wake = wake < 0 || c->deadline_ms - t < wake ? c->deadline_ms - t : wake;
            of[n] = c;
            p[n++] = (struct pollfd){.fd = c->fd, .events = c->state == M_WRITE ? POLLOUT : POLLIN};
        }
        if (poll(p, n, (int)wake) < 0) {
            if (errno == EINTR)
                continue;
            errlog(ERRLOG_ERROR, "metrics: poll: %s", strerror(errno));
            break;
        }
        if (p[0].revents)
            break;
        for (nfds_t i = 2; i < n; i++)
            if (p[i].revents)
                step(m, of[i]);
        if (p[1].revents & POLLIN)
            accept_all(m);
    }
    for (int i = 0; i < CONNS; i++)
        if (m->conns[i].state != M_FREE)
            drop(&m->conns[i]);
    return NULL;
}

static int listen_on(const char *host, uint16_t port, char *shown, size_t shown_len)
{
    struct sockaddr_storage ss = {0};
    socklen_t alen;
    char buf[INET6_ADDRSTRLEN + 2];
    size_t hlen = strlen(host);
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']' && hlen - 2 < sizeof(buf)) {
        memcpy(buf, host + 1, hlen - 2);
        buf[hlen - 2] = '\0';
        host = buf;
    }
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        alen = sizeof(*v4);
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        alen = sizeof(*v6);
    } else {
        /* a host name ("localhost:9100", issue 36), resolved once at start: its first address */
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG}, *res;
        if (getaddrinfo(host, NULL, &hints, &res) != 0)
            return -EADDRNOTAVAIL;
        memcpy(&ss, res->ai_addr, res->ai_addrlen);
        alen = res->ai_addrlen;
        freeaddrinfo(res);
        if (ss.ss_family == AF_INET6)
            v6->sin6_port = htons(port);
        else
            v4->sin_port = htons(port);
    }
    int one = 1, rc;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&ss, alen) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &alen) != 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    bool six = ss.ss_family == AF_INET6;
    char addr[INET6_ADDRSTRLEN];
    inet_ntop(ss.ss_family, six ? (void *)&v6->sin6_addr : (void *)&v4->sin_addr, addr,
              sizeof(addr));
    snprintf(shown, shown_len, "%s%s%s:%u", six ? "[" : "", addr, six ? "]" : "",
             ntohs(six ? v6->sin6_port : v4->sin_port));
    return fd;
}

int metrics_start(struct metrics **out, const struct config *cfg, struct worker *const *workers,
                  int nworkers, const char *engine, struct accesslog *al)
{
    char shown[INET6_ADDRSTRLEN + 16];
    struct metrics *m = calloc(1, sizeof(*m));
    int rc = -ENOMEM;
    if (!m)
        goto err;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    *m = (struct metrics){.workers = workers,
                          .nworkers = nworkers,
                          .engine = engine,
                          .al = al,
                          .start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9};
    if (!(m->conns = calloc(CONNS, sizeof(*m->conns))))
        goto err_free;
    if ((rc = m->fd = listen_on(cfg->metrics_bind, cfg->metrics_port, shown, sizeof(shown))) < 0)
        goto err_free;
    if ((m->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0) {
        rc = -errno;
        goto err_listen;
    }
    if ((rc = -pthread_create(&m->thread, NULL, metrics_main, m)) < 0)
        goto err_event;
    fprintf(stderr, "ringhttpd: metrics on http://%s/metrics\n", shown);
    *out = m;
    return 0;

err_event:
    close(m->stop_fd);
err_listen:
    close(m->fd);
err_free:
    free(m->conns);
    free(m);
err:
    fprintf(stderr, "ringhttpd: --metrics %s:%u: %s%s\n", cfg->metrics_bind, cfg->metrics_port,
            strerror(-rc),
            rc == -EADDRNOTAVAIL ? " (wants an address, or a host name this machine resolves, "
                                   "and a port: 127.0.0.1:9100, [::1]:9100, localhost:9100)"
                                 : "");
    return rc;
}

void metrics_stop(struct metrics *m)
{
    uint64_t one = 1;
    if (write(m->stop_fd, &one, sizeof(one)) != sizeof(one))
        errlog(ERRLOG_ERROR, "metrics: cannot stop the thread: %s", strerror(errno));
    pthread_join(m->thread, NULL);
    close(m->stop_fd);
    close(m->fd);
    free(m->conns);
    free(m);
}
