/* pipesize: how many splice pipes a worker may make, and how big, from the limits the kernel
 * actually grants (fs.pipe-max-size, fs.pipe-user-pages-soft, RLIMIT_NOFILE).
 * Must not: make pipes or keep state; pipesize_plan is pure, pipesize_read only reads limits.
 * Ownership: the caller's structs; called once per worker at engine setup. */
#ifndef RT_PIPESIZE_H
#define RT_PIPESIZE_H

#include <stdbool.h>
#include <stdint.h>

struct pipe_limits {
    uint64_t max_size;   /* fs.pipe-max-size, bytes */
    uint64_t soft_pages; /* fs.pipe-user-pages-soft; 0 = no limit */
    uint64_t nofile;     /* RLIMIT_NOFILE soft limit */
    unsigned page_size;
    bool privileged; /* the soft limit does not apply (CAP_SYS_RESOURCE / root) */
};

struct pipe_plan {
    unsigned count; /* pipes per worker, at least 1 */
    unsigned bytes; /* F_SETPIPE_SZ asked for each, a power of two */
    bool shrunk;    /* fewer or smaller than asked, because of a limit */
};

/* Fills *lim from /proc/sys/fs and getrlimit; values it cannot read keep the kernel defaults
 * (1 MiB, 16384 pages). */
void pipesize_read(struct pipe_limits *lim);

/*
 * want pipes of want_bytes per worker, threads workers. Rules (issue 10 item 7):
 * - no pipe above fs.pipe-max-size;
 * - unprivileged, all workers' pipes stay within half of fs.pipe-user-pages-soft (the other
 *   half is left to the user's other processes): past it, the kernel gives new pipes two pages
 *   and refuses F_SETPIPE_SZ, which costs ~7x the CPU per byte. Pipes shrink (down to 64 KiB)
 *   before their number does;
 * - all workers' pipes use at most a quarter of RLIMIT_NOFILE (two fds each): fds are for
 *   connections first.
 */
void pipesize_plan(const struct pipe_limits *lim, unsigned want, unsigned want_bytes,
                   unsigned threads, struct pipe_plan *out);

#endif
