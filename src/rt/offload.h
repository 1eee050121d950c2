/* offload: work a worker hands to threads of its own because it must not run on the event loop
 * (compressing a large body, verifying a bcrypt password), and whose results the worker collects
 * on its loop: a thread that finishes a job writes to the worker's wake_fd, and worker_tick's
 * collectors (compress_collect, auth_collect) take the finished jobs.
 * Must not: let a job's run() touch the worker's state (a job carries copies of what it reads);
 * block the submitter (a submit takes the lock for a list push).
 * Ownership: the worker owns each struct offload; a job is its submitter's, lent to the threads
 * from offload_submit until it comes back from offload_done. Threads start on first use. */
#ifndef RT_OFFLOAD_H
#define RT_OFFLOAD_H

#include <pthread.h>
#include <stdbool.h>

#define OFFLOAD_MAX_THREADS 4

struct offload_job {
    struct offload_job *next;           /* the todo or done list (under the lock) */
    struct offload_job *inext;          /* the in-flight list (the worker's thread only) */
    void (*run)(struct offload_job *j); /* on an offload thread */
};

struct offload {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct offload_job *todo, **todo_tail, *done;
    bool stop;
    int threads, max_threads;
    pthread_t thread[OFFLOAD_MAX_THREADS];
    int wake_fd;
    /* The worker's thread only: every job submitted and not yet returned by offload_done, for
     * the submitter to search (a duplicate, a per-client bound) through inext. */
    struct offload_job *inflight;
    unsigned count;
};

/* 0 or -errno. max_threads (1..OFFLOAD_MAX_THREADS) start one by one as jobs wait. */
int offload_init(struct offload *o, int max_threads, int wake_fd);

/* Queues j and puts it on the in-flight list; 0, or -EAGAIN when no thread could be started
 * (j stays the caller's). Another thread starts while more jobs are in flight than threads. */
int offload_submit(struct offload *o, struct offload_job *j);

/* The jobs finished since the last call, as a list through next (most recent first), each
 * taken off the in-flight list. */
struct offload_job *offload_done(struct offload *o);

/* Stops and joins the threads. Jobs not yet run or not yet collected stay the caller's: take
 * them back one by one with offload_abandon. */
void offload_fini(struct offload *o);

/* After offload_fini: a job still in flight, taken off the list, or NULL when none is left. */
struct offload_job *offload_abandon(struct offload *o);

#endif
