/* The metrics listener and the exposition text; see metrics.h. */
#include "rt/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "rt/accesslog.h"
#include "rt/errlog.h"
#include "rt/stats.h"
#include "rt/worker.h"

#define REQUEST_MAX 4096
#define IO_TIMEOUT_S 5 /* a scraper that stalls mid-request or mid-response is dropped */

struct metrics {
    int fd;
    int stop_fd; /* eventfd: written by metrics_stop */
    pthread_t thread;
    struct worker *workers;
    int nworkers;
    const char *engine;
    struct accesslog *al;
    double start_time;
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
                       struct worker *ws, int n, size_t offset)
{
    head(f, name, type, help);
    for (int i = 0; i < n; i++) {
        const stat_t *c = (const stat_t *)((const char *)&ws[i].stats + offset);
        fprintf(f, "%s{worker=\"%d\"} %llu\n", name, i, (unsigned long long)stat_get(c));
    }
}

#define PER_WORKER(f, name, type, help, ws, n, field)                                              \
    per_worker(f, name, type, help, ws, n, offsetof(struct stats, field))

static void compression(FILE *f, struct worker *ws, int n)
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
                (double)stat_get(&ws[i].stats.compress_ns) / 1e9);
    PER_WORKER(f, "ringhttpd_compress_cache_bytes", "gauge",
               "Bytes of compressed variants the file cache holds.", ws, n, compress_cache_bytes);
}

static void requests(FILE *f, struct worker *ws, int n)
{
    head(f, "ringhttpd_requests_total", "counter", "Requests answered, by status code and method.");
    for (int i = 0; i < n; i++)
        for (int s = 0; s < STATS_STATUSES; s++)
            for (int m = 0; m < STATS_METHODS; m++) {
                uint64_t v = stat_get(&ws[i].stats.requests[s][m]);
                if (v)
                    fprintf(f,
                            "ringhttpd_requests_total{worker=\"%d\",code=\"%d\",method=\"%s\"} "
                            "%llu\n",
                            i, s + STATS_STATUS_MIN, method_names[m], (unsigned long long)v);
            }
}

static void durations(FILE *f, struct worker *ws, int n)
{
    const char *name = "ringhttpd_request_duration_seconds";
    head(f, name, "histogram",
         "Time from a request's parsed head to its response's last byte handed to the kernel.");
    for (int i = 0; i < n; i++) {
        uint64_t cum = 0;
        for (int b = 0; b <= STATS_BUCKETS; b++) {
            cum += stat_get(&ws[i].stats.duration_bucket[b]);
            if (b < STATS_BUCKETS)
                fprintf(f, "%s_bucket{worker=\"%d\",le=\"%g\"} %llu\n", name, i,
                        (double)stats_bucket_us[b] / 1e6, (unsigned long long)cum);
            else
                fprintf(f, "%s_bucket{worker=\"%d\",le=\"+Inf\"} %llu\n", name, i,
                        (unsigned long long)cum);
        }
        fprintf(f, "%s_sum{worker=\"%d\"} %.6f\n", name, i,
                (double)stat_get(&ws[i].stats.duration_us_sum) / 1e6);
        fprintf(f, "%s_count{worker=\"%d\"} %llu\n", name, i, (unsigned long long)cum);
    }
}

static void connections(FILE *f, struct worker *ws, int n)
{
    head(f, "ringhttpd_connections_closed_total", "counter", "Connections closed, by reason.");
    for (int i = 0; i < n; i++)
        for (int r = 0; r < CLOSE_REASONS; r++)
            fprintf(f, "ringhttpd_connections_closed_total{worker=\"%d\",reason=\"%s\"} %llu\n", i,
                    reason_names[r], (unsigned long long)stat_get(&ws[i].stats.closed[r]));
    head(f, "ringhttpd_connections_open", "gauge", "Connections open now.");
    for (int i = 0; i < n; i++) {
        uint64_t closed = 0;
        for (int r = 0; r < CLOSE_REASONS; r++)
            closed += stat_get(&ws[i].stats.closed[r]);
        /* Read after the closes, so never below them. */
        uint64_t accepted = stat_get(&ws[i].stats.accepted);
        fprintf(f, "ringhttpd_connections_open{worker=\"%d\"} %llu\n", i,
                (unsigned long long)(accepted - closed));
    }
    PER_WORKER(f, "ringhttpd_connections_accepted_total", "counter", "Connections accepted.", ws, n,
               accepted);
}

static void gauge_diff(FILE *f, struct worker *ws, int n)
{
    head(f, "ringhttpd_pipe_waiting", "gauge", "Large-file sends waiting for a splice pipe now.");
    for (int i = 0; i < n; i++) {
        uint64_t done = stat_get(&ws[i].stats.pipe_waits_done);
        uint64_t all = stat_get(&ws[i].stats.pipe_waits);
        fprintf(f, "ringhttpd_pipe_waiting{worker=\"%d\"} %llu\n", i,
                (unsigned long long)(all - done));
    }
}

char *metrics_render(struct worker *ws, int n, const char *engine, struct accesslog *al,
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
            n > 0 ? ws[0].features : "");
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
    PER_WORKER(f, "ringhttpd_limit_conn_refused_total", "counter",
               "Connections closed at accept: their client had --limit-conn open.", ws, n,
               limit_conn_refused);
    PER_WORKER(f, "ringhttpd_limit_req_refused_total", "counter",
               "Requests answered 429: their client was past --limit-req.", ws, n,
               limit_req_refused);
    PER_WORKER(f, "ringhttpd_limit_uncounted_total", "counter",
               "Clients a full limit table could not count (let through).", ws, n, limit_uncounted);
    PER_WORKER(f, "ringhttpd_file_cache_hits_total", "counter", "File-cache look-ups that hit.", ws,
               n, cache_hits);
    PER_WORKER(f, "ringhttpd_file_cache_misses_total", "counter",
               "File-cache look-ups that had to open or stat the file.", ws, n, cache_misses);
    PER_WORKER(f, "ringhttpd_file_cache_bytes", "gauge", "Bytes of file contents held in memory.",
               ws, n, cache_bytes);
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

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void answer(int fd, int status, const char *reason, const char *type, const char *body,
                   size_t len, bool with_body)
{
    char hdr[256];
    int n = snprintf(hdr, sizeof(hdr),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, reason, type, len);
    if (write_all(fd, hdr, (size_t)n) == 0 && with_body)
        write_all(fd, body, len);
}

static void serve_one(struct metrics *m, int fd)
{
    char req[REQUEST_MAX + 1];
    size_t len = 0;
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    while (len < REQUEST_MAX) {
        ssize_t n = recv(fd, req + len, REQUEST_MAX - len, 0);
        if (n <= 0)
            return;
        len += (size_t)n;
        req[len] = '\0';
        if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
            break;
    }
    bool get = strncmp(req, "GET ", 4) == 0, is_head = strncmp(req, "HEAD ", 5) == 0;
    const char *target = get ? req + 4 : is_head ? req + 5 : NULL;
    if (!target) {
        static const char msg[] = "only GET and HEAD\n";
        answer(fd, 405, "Method Not Allowed", "text/plain", msg, sizeof(msg) - 1, true);
        return;
    }
    if (strncmp(target, "/metrics", 8) != 0 || (target[8] != ' ' && target[8] != '?')) {
        static const char msg[] = "metrics are at /metrics\n";
        answer(fd, 404, "Not Found", "text/plain", msg, sizeof(msg) - 1, !is_head);
        return;
    }
    size_t blen = 0;
    char *body = metrics_render(m->workers, m->nworkers, m->engine, m->al, m->start_time, &blen);
    if (!body) {
        answer(fd, 500, "Internal Server Error", "text/plain", "", 0, false);
        return;
    }
    answer(fd, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", body, blen, !is_head);
    free(body);
}

static void *metrics_main(void *arg)
{
    struct metrics *m = arg;
    struct errlog_limit accept_limit = {0};
    struct pollfd p[2] = {{.fd = m->fd, .events = POLLIN}, {.fd = m->stop_fd, .events = POLLIN}};
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            errlog(ERRLOG_ERROR, "metrics: poll: %s", strerror(errno));
            break;
        }
        if (p[1].revents)
            break;
        int fd = accept4(m->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                errlog_limited(&accept_limit, ERRLOG_ERROR, "metrics: accept: %s", strerror(errno));
            continue;
        }
        serve_one(m, fd);
        close(fd);
    }
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
        return -EINVAL;
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

int metrics_start(struct metrics **out, const struct config *cfg, struct worker *workers,
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
    free(m);
err:
    fprintf(stderr, "ringhttpd: --metrics %s:%u: %s\n", cfg->metrics_bind, cfg->metrics_port,
            strerror(-rc));
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
    free(m);
}
