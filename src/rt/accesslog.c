/* The access log's buffers and writer thread; see accesslog.h.
 *
 * Why a thread and not non-blocking writes from the loop: a regular file is never "not ready"
 * to epoll or poll, so a slow disk blocks a write(2) whatever O_NONBLOCK says; and an io_uring
 * write would need the epoll engine to do the same another way. One writer thread does both
 * for every engine, and the backlog bound turns a stuck consumer into counted drops. */
#include "rt/accesslog.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct logchunk {
    struct logchunk *next;
    size_t len;
    uint32_t lines;
    char data[ACCESSLOG_CHUNK];
};

struct accesslog {
    const char *path; /* NULL: standard output */
    int fd;           /* the writer's; replaced only by the writer */
    bool whole_lines; /* a pipe or socket: writes of whole lines, PIPE_BUF at most */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;          /* the writer waits for work */
    pthread_cond_t idle;          /* close waits for the writer to finish */
    struct logchunk *head, *tail; /* handed over, not yet written */
    struct logchunk *spare;       /* written, for reuse */
    unsigned queued;
    bool reopen, stop, done;
    atomic_uint_fast64_t written;
    struct errlog_limit write_limit;
};

static void set_mode(struct accesslog *al)
{
    struct stat st;
    al->whole_lines = fstat(al->fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

static int open_path(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    return fd < 0 ? -errno : fd;
}

/* Writes buf[0..len) whole, retrying short writes. 0 or -errno. */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* One chunk: in one write to a file, in whole-line pieces of at most PIPE_BUF to a pipe (a
 * write of at most PIPE_BUF to a pipe is atomic, POSIX; longer ones may interleave). */
static int write_chunk(struct accesslog *al, const struct logchunk *ch)
{
    if (!al->whole_lines)
        return write_all(al->fd, ch->data, ch->len);
    size_t off = 0;
    while (off < ch->len) {
        size_t end = off, next;
        /* Take lines while they fit in PIPE_BUF; a line is never longer (LOGFMT_LINE_MAX). */
        while (end < ch->len) {
            const char *nl = memchr(ch->data + end, '\n', ch->len - end);
            next = (size_t)(nl - ch->data) + 1;
            if (next - off > PIPE_BUF)
                break;
            end = next;
        }
        int rc = write_all(al->fd, ch->data + off, end - off);
        if (rc < 0)
            return rc;
        off = end;
    }
    return 0;
}

static void do_reopen(struct accesslog *al)
{
    if (!al->path)
        return;
    int fd = open_path(al->path);
    if (fd < 0) {
        errlog(ERRLOG_ERROR, "access log: cannot reopen '%s': %s; still writing the old file",
               al->path, strerror(-fd));
        return;
    }
    close(al->fd);
    al->fd = fd;
    set_mode(al);
    errlog(ERRLOG_NOTICE, "access log: reopened '%s'", al->path);
}

static void *writer_main(void *arg)
{
    struct accesslog *al = arg;
    pthread_mutex_lock(&al->mu);
    for (;;) {
        while (!al->head && !al->reopen && !al->stop)
            pthread_cond_wait(&al->cond, &al->mu);
        if (al->reopen) {
            al->reopen = false;
            pthread_mutex_unlock(&al->mu);
            do_reopen(al);
            pthread_mutex_lock(&al->mu);
            continue;
        }
        struct logchunk *ch = al->head;
        if (!ch)
            break; /* stop, and nothing left */
        al->head = ch->next;
        if (!al->head)
            al->tail = NULL;
        al->queued--;
        pthread_mutex_unlock(&al->mu);

        int rc = write_chunk(al, ch);
        if (rc < 0) {
            errlog_limited(&al->write_limit, ERRLOG_ERROR, "access log: write: %s; %u lines lost",
                           strerror(-rc), ch->lines);
        } else {
            atomic_fetch_add_explicit(&al->written, ch->lines, memory_order_relaxed);
        }

        pthread_mutex_lock(&al->mu);
        ch->next = al->spare;
        al->spare = ch;
    }
    al->done = true;
    pthread_cond_broadcast(&al->idle);
    pthread_mutex_unlock(&al->mu);
    return NULL;
}

int accesslog_open(struct accesslog **out, const char *path)
{
    struct accesslog *al = calloc(1, sizeof(*al));
    int rc = -ENOMEM;
    if (!al)
        return rc;
    if (path && strcmp(path, "-") != 0) {
        al->path = path;
        if ((rc = al->fd = open_path(path)) < 0)
            goto err_free;
    } else {
        al->fd = STDOUT_FILENO;
    }
    set_mode(al);
    pthread_mutex_init(&al->mu, NULL);
    pthread_cond_init(&al->cond, NULL);
    pthread_cond_init(&al->idle, NULL);
    if ((rc = -pthread_create(&al->thread, NULL, writer_main, al)) < 0)
        goto err_sync;
    *out = al;
    return 0;

err_sync:
    pthread_cond_destroy(&al->idle);
    pthread_cond_destroy(&al->cond);
    pthread_mutex_destroy(&al->mu);
    if (al->path)
        close(al->fd);
err_free:
    free(al);
    return rc;
}

void accesslog_reopen(struct accesslog *al)
{
    pthread_mutex_lock(&al->mu);
    al->reopen = true;
    pthread_cond_signal(&al->cond);
    pthread_mutex_unlock(&al->mu);
}

uint64_t accesslog_written(const struct accesslog *al)
{
    return atomic_load_explicit(&al->written, memory_order_relaxed);
}

static void free_list(struct logchunk *ch)
{
    while (ch) {
        struct logchunk *next = ch->next;
        free(ch);
        ch = next;
    }
}

void accesslog_close(struct accesslog *al, int wait_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += wait_ms / 1000;
    until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&al->mu);
    al->stop = true;
    pthread_cond_signal(&al->cond);
    while (!al->done)
        if (pthread_cond_timedwait(&al->idle, &al->mu, &until) == ETIMEDOUT)
            break;
    bool done = al->done;
    uint64_t unwritten = 0;
    for (struct logchunk *ch = al->head; ch; ch = ch->next)
        unwritten += ch->lines;
    pthread_mutex_unlock(&al->mu);
    if (!done) {
        /* The consumer is stuck (a pipe nobody reads): the writer cannot be stopped inside its
         * write(2), and the process is exiting; leave it and say what is lost. */
        errlog(ERRLOG_WARN, "access log: the writer is stuck; %llu lines not written at exit",
               (unsigned long long)unwritten);
        pthread_detach(al->thread);
        return;
    }
    pthread_join(al->thread, NULL);
    assert(!al->head && al->queued == 0); /* the writer stops only when it has written all */
    free_list(al->spare);
    if (al->path)
        close(al->fd);
    pthread_cond_destroy(&al->idle);
    pthread_cond_destroy(&al->cond);
    pthread_mutex_destroy(&al->mu);
    free(al);
}

/* Hands b's chunk to the writer, or drops its lines when the backlog is full; b gets an empty
 * chunk (a spare, or a new one), or none when memory is short. */
static void hand_over(struct accesslog *al, struct accesslog_buf *b, struct stats *st, int64_t now)
{
    struct logchunk *ch = b->cur;
    b->flushed = now;
    if (!ch || ch->lines == 0)
        return;
    pthread_mutex_lock(&al->mu);
    bool full = al->queued >= ACCESSLOG_BACKLOG;
    if (!full) {
        ch->next = NULL;
        if (al->tail)
            al->tail->next = ch;
        else
            al->head = ch;
        al->tail = ch;
        al->queued++;
        pthread_cond_signal(&al->cond);
        b->cur = al->spare;
        if (b->cur)
            al->spare = b->cur->next;
    }
    pthread_mutex_unlock(&al->mu);
    if (full) {
        stat_add(&st->log_dropped, ch->lines);
        errlog_limited(&b->dropped_limit, ERRLOG_WARN,
                       "access log: the writer is behind (a full pipe or a slow disk); %u lines "
                       "dropped",
                       ch->lines);
        ch->len = 0;
        ch->lines = 0;
        return;
    }
    if (!b->cur)
        b->cur = malloc(sizeof(*b->cur)); /* at most BACKLOG + workers chunks ever exist */
    if (b->cur) {
        b->cur->len = 0;
        b->cur->lines = 0;
    }
}

char *accesslog_reserve(struct accesslog *al, struct accesslog_buf *b, struct stats *st,
                        int64_t now)
{
    if (b->cur && ACCESSLOG_CHUNK - b->cur->len < LOGFMT_LINE_MAX)
        hand_over(al, b, st, now);
    if (!b->cur) {
        if (!(b->cur = malloc(sizeof(*b->cur)))) {
            stat_add(&st->log_dropped, 1);
            return NULL;
        }
        b->cur->len = 0;
        b->cur->lines = 0;
        b->flushed = now;
    }
    return b->cur->data + b->cur->len;
}

void accesslog_commit(struct accesslog_buf *b, size_t len)
{
    b->cur->len += len;
    b->cur->lines++;
}

void accesslog_tick(struct accesslog *al, struct accesslog_buf *b, struct stats *st, int64_t now,
                    bool force)
{
    if (b->cur && b->cur->lines && (force || now != b->flushed))
        hand_over(al, b, st, now);
}

void accesslog_buf_free(struct accesslog_buf *b)
{
    free(b->cur);
    b->cur = NULL;
}
