/* server: opens the listeners, starts one worker per thread, waits for SIGINT/SIGTERM and
 * drains: stop accepting, finish responses in flight within the drain timeout, exit.
 * Must not: touch requests or connections (workers own those).
 * Ownership: the main thread owns the workers' array and joins every worker before freeing. */
#ifndef SERVER_H
#define SERVER_H

struct config;

/* Runs until a stop signal; returns the process exit status (0 after a clean drain). */
int server_run(struct config *cfg);

#endif
