/* The error log; see errlog.h. */
#include "rt/errlog.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = {
    [ERRLOG_ERROR] = "error",
    [ERRLOG_WARN] = "warn",
    [ERRLOG_NOTICE] = "notice",
    [ERRLOG_INFO] = "info",
};

static void vlog(enum errlog_level level, uint64_t suppressed, const char *fmt, va_list ap)
{
    char line[1024];
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n,
                          ".%03ldZ [%s] ringhttpd: ", ts.tv_nsec / 1000000, level_names[level]);
    /* Leave room for the suppression note and the newline, whatever the message's length. */
    size_t room = sizeof(line) - n - 48;
    int m = vsnprintf(line + n, room, fmt, ap);
    n += m < 0 ? 0 : ((size_t)m < room ? (size_t)m : room - 1);
    if (suppressed > 0)
        n += (size_t)snprintf(line + n, sizeof(line) - n, " (and %llu more like it)",
                              (unsigned long long)suppressed);
    line[n++] = '\n';
    /* One write: a line is never torn by another thread's. A failed write to stderr has nowhere
     * to be reported. */
    ssize_t rc = write(STDERR_FILENO, line, n);
    (void)rc;
}

void errlog(enum errlog_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, 0, fmt, ap);
    va_end(ap);
}

int errlog_limited(struct errlog_limit *lim, enum errlog_level level, const char *fmt, ...)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;

    if (lim->last_ns != 0 && now - lim->last_ns < ERRLOG_LIMIT_NS) {
        lim->suppressed++;
        return 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vlog(level, lim->suppressed, fmt, ap);
    va_end(ap);
    lim->last_ns = now;
    lim->suppressed = 0;
    return 1;
}
