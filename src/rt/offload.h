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
};

/* 0 or -errno. max_threads (1..OFFLOAD_MAX_THREADS) start one by one as jobs wait. */
int offload_init(struct offload *o, int max_threads, int wake_fd);

/* Queues j; 0, or -EAGAIN when no thread could be started. busy is how many jobs the caller
 * has in flight (including j): another thread starts while there are more than threads. */
int offload_submit(struct offload *o, struct offload_job *j, unsigned busy);

/* The jobs finished since the last call, as a list through next (most recent first). */
struct offload_job *offload_done(struct offload *o);

/* Stops and joins the threads. Jobs not yet run or not yet collected stay the caller's. */
void offload_fini(struct offload *o);

#endif
