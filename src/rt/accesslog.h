/* accesslog: the access log's buffers and its writer thread. Workers append whole lines to a
 * buffer of their own and hand a full (or second-old) buffer to one writer thread, which alone
 * touches the log's file descriptor: a slow disk or a stuck pipe blocks that thread, never an
 * event loop. Writes to a pipe or socket are whole lines of at most PIPE_BUF bytes, so lines
 * from different processes or threads sharing it never interleave inside a line.
 * Must not: block a worker: the hand-over takes a mutex held for a few pointer moves, once per
 * buffer (64 KiB of lines, or one second), and when the writer's backlog is full the buffer's
 * lines are dropped and counted instead.
 * Ownership: server opens one struct accesslog for the process and closes it after the workers
 * are joined; each worker owns its struct accesslog_buf; the writer thread owns the fd. */
#ifndef RT_ACCESSLOG_H
#define RT_ACCESSLOG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/logfmt.h"
#include "rt/errlog.h"
#include "rt/stats.h"

#define ACCESSLOG_CHUNK (64u << 10) /* a worker's buffer */
#define ACCESSLOG_BACKLOG 64        /* chunks waiting for the writer, over all workers */

struct accesslog;
struct logchunk;

/* A worker's side: its current buffer and what it has dropped. */
struct accesslog_buf {
    struct logchunk *cur;
    int64_t flushed; /* monotonic second of the last hand-over */
    struct logfmt_clock clock;
    struct errlog_limit dropped_limit;
};

/* Opens the log: path NULL or "-" is standard output. Starts the writer thread. 0 or -errno. */
int accesslog_open(struct accesslog **out, const char *path);

/* Asks the writer to reopen the file by its path (SIGUSR1; logrotate's postrotate): lines
 * handed over before go to the old file, the rest to the new one, none is lost or torn.
 * Standard output is not reopened. Safe from the main thread while workers run. */
void accesslog_reopen(struct accesslog *al);

/* Writes what the writer still holds, waits for it at most `wait_ms`, and frees the log. Lines
 * it could not write (a consumer that stays stuck) are reported on the error log. */
void accesslog_close(struct accesslog *al, int wait_ms);

/* Lines the writer has written so far (for the metrics scrape; any thread). */
uint64_t accesslog_written(const struct accesslog *al);

/* Room for one line (LOGFMT_LINE_MAX bytes) in the worker's buffer, handing the buffer over
 * first when it has less; NULL (the line is counted as dropped) when memory is short. The line
 * is formatted in place and counted by accesslog_commit. */
char *accesslog_reserve(struct accesslog *al, struct accesslog_buf *b, struct stats *st,
                        int64_t now);
void accesslog_commit(struct accesslog_buf *b, size_t len);

/* Hands the buffer over when it holds lines and `now` is past the last hand-over's second (the
 * once-a-second flush); force: whenever it holds lines (drain, exit). */
void accesslog_tick(struct accesslog *al, struct accesslog_buf *b, struct stats *st, int64_t now,
                    bool force);

/* Frees the worker's buffer (after a forced tick). */
void accesslog_buf_free(struct accesslog_buf *b);

#endif
