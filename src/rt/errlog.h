/* errlog: the error log, one line per event on standard error with a UTC timestamp and a level.
 * It must not be used on a request's happy path, and it never blocks beyond one write(2) to fd 2.
 * Any thread may call errlog(); a struct errlog_limit belongs to one thread (a worker's own). */
#ifndef RINGHTTPD_RT_ERRLOG_H
#define RINGHTTPD_RT_ERRLOG_H

#include <stdint.h>

enum errlog_level {
    ERRLOG_ERROR,
    ERRLOG_WARN,
    ERRLOG_NOTICE,
    ERRLOG_INFO,
};

/* Writes "2026-11-23T11:40:00.123Z [error] ringhttpd: MESSAGE\n" in one write(2), so lines from
 * several threads never interleave. A message longer than about 900 bytes is cut. */
void errlog(enum errlog_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Rate limiting for events that can repeat thousands of times a second (EMFILE at accept, a
 * full log pipe): at most one line per interval per limiter; the next line that goes out says
 * how many were suppressed since the last one ("(and 1234 more like it)"). Zero-initialise. */
struct errlog_limit {
    int64_t last_ns;     /* CLOCK_MONOTONIC of the last line written, 0 = never */
    uint64_t suppressed; /* events dropped since then */
};

#define ERRLOG_LIMIT_NS 1000000000LL /* one line per second per limiter */

/* Returns 1 if a line was written, 0 if it was suppressed. */
int errlog_limited(struct errlog_limit *lim, enum errlog_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
