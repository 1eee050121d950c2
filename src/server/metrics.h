/* metrics: the --metrics listener: a thread of its own that answers GET /metrics with the
 * Prometheus text exposition format (version 0.0.4), summing nothing on the workers' side:
 * each scrape reads every worker's counters (stats.h) and writes them per worker.
 * Its connections are non-blocking, served side by side by one poll loop on that thread, the
 * request read by core/http1 with a deadline for the whole head; at most 16 are open.
 * Must not: run on a worker or the public port, write to anything a worker reads, or wait on
 * one client: each connection is closed after its answer (a scraper's habit anyway).
 * Ownership: server starts it after the workers and stops it before they are joined. */
#ifndef RT_METRICS_H
#define RT_METRICS_H

#include <stddef.h>
#include <stdio.h>

struct config;
struct worker;
struct accesslog;
struct metrics;

/* Opens cfg->metrics_bind:metrics_port, prints "ringhttpd: metrics on http://ADDR:PORT/metrics"
 * on stderr and starts the thread. 0 or -errno (after printing why). */
int metrics_start(struct metrics **out, const struct config *cfg, struct worker *const *workers,
                  int nworkers, const char *engine, struct accesslog *al);

void metrics_stop(struct metrics *m);

/* More metrics from an upper layer (automatic HTTPS's certificates and orders): write appends
 * its families to every scrape, on the metrics thread; it must take only its own locks. */
struct metrics_source {
    void (*write)(void *arg, FILE *f);
};
/* Adds src (one at most; it and arg outlive m) to m's scrapes, from any thread. */
void metrics_add(struct metrics *m, const struct metrics_source *src, void *arg);

/* Writes the exposition text of the workers' counters to a malloc'd string (*len bytes). */
char *metrics_render(struct worker *const *workers, int nworkers, const char *engine,
                     struct accesslog *al, double start_time, size_t *len);

#endif
