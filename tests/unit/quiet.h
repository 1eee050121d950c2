/* quiet: a worker for unit tests that never runs it (test_site, test_serve): its engine table
 * only starts and stops, so the layers under test get a real runtime (configuration, site, file
 * cache, pools, the modules' per-worker state) without a socket or a ring.
 * Must not: be linked into the server, or be used where a test sends or receives (test_conn has
 * its fake engine for that).
 * Ownership: the caller's configuration outlives the worker; the site slot and the worker are
 * made by unit_quiet_worker and freed by unit_quiet_worker_free. */
#ifndef UNIT_QUIET_H
#define UNIT_QUIET_H

struct config;
struct site_slot;
struct worker;

/* Worker 0 on cfg (parsed; its site is adopted: site_adopt), serving from slot (initialised
 * here). */
struct worker *unit_quiet_worker(struct config *cfg, struct site_slot *slot);
void unit_quiet_worker_free(struct worker *w, struct site_slot *slot);

#endif
