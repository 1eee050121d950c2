/* Jobs off the loop; see offload.h. */
#include "rt/offload.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

int offload_init(struct offload *o, int max_threads, int wake_fd)
{
    *o = (struct offload){.max_threads = max_threads, .wake_fd = wake_fd};
    o->todo_tail = &o->todo;
    if (pthread_mutex_init(&o->mu, NULL) != 0)
        return -ENOMEM;
    if (pthread_cond_init(&o->cv, NULL) != 0) {
        pthread_mutex_destroy(&o->mu);
        return -ENOMEM;
    }
    return 0;
}

static void *thread_main(void *arg)
{
    struct offload *o = arg;
    pthread_mutex_lock(&o->mu);
    for (;;) {
        while (!o->stop && !o->todo)
            pthread_cond_wait(&o->cv, &o->mu);
        if (o->stop)
            break;
        struct offload_job *j = o->todo;
        if (!(o->todo = j->next))
            o->todo_tail = &o->todo;
        pthread_mutex_unlock(&o->mu);
        j->run(j);
        pthread_mutex_lock(&o->mu);
        j->next = o->done;
        o->done = j;
        uint64_t one = 1;
        if (write(o->wake_fd, &one, sizeof(one)) < 0) {
            /* EAGAIN: the counter is full, so the loop is woken anyway */
        }
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

int offload_submit(struct offload *o, struct offload_job *j)
{
    if (o->threads < o->max_threads && o->count + 1 > (unsigned)o->threads &&
        pthread_create(&o->thread[o->threads], NULL, thread_main, o) == 0)
        o->threads++;
    if (o->threads == 0)
        return -EAGAIN;
    pthread_mutex_lock(&o->mu);
    j->next = NULL;
    *o->todo_tail = j;
    o->todo_tail = &j->next;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
    j->inext = o->inflight;
    o->inflight = j;
    o->count++;
    return 0;
}

static void unlink_inflight(struct offload *o, struct offload_job *j)
{
    struct offload_job **pp = &o->inflight;
    while (*pp != j)
        pp = &(*pp)->inext;
    *pp = j->inext;
    o->count--;
}

struct offload_job *offload_done(struct offload *o)
{
    pthread_mutex_lock(&o->mu);
    struct offload_job *done = o->done;
    o->done = NULL;
    pthread_mutex_unlock(&o->mu);
    for (struct offload_job *j = done; j; j = j->next)
        unlink_inflight(o, j);
    return done;
}

void offload_fini(struct offload *o)
{
    pthread_mutex_lock(&o->mu);
    o->stop = true;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    for (int i = 0; i < o->threads; i++)
        pthread_join(o->thread[i], NULL);
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
}

struct offload_job *offload_abandon(struct offload *o)
{
    struct offload_job *j = o->inflight;
    if (j)
        unlink_inflight(o, j);
    return j;
}
