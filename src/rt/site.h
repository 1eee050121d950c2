/* site: what a reload may change under running workers: the document root (opened from the path
 * given on the command line, so a re-pointed symlink or a recreated directory takes effect) and
 * the --mime-types table. A new site is published as a whole; workers switch at their next tick.
 * Must not: be changed once published (build a new one), or be freed while a worker holds it.
 * Ownership: refcounted. The publishing slot holds one reference to the current site, each
 * worker one to the site it serves from; the last site_put frees it (any thread may). */
#ifndef RT_SITE_H
#define RT_SITE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/mime.h"

struct config;

struct site {
    atomic_uint refs;
    int root_fd; /* O_PATH directory fd every file is opened beneath */
    dev_t dev;   /* what the DOCROOT path named when the site was opened */
    ino_t ino;
    struct mime_table mime;
};

/* Takes over cfg's document root fd and --mime-types table (startup opened and checked them);
 * cfg->docroot_fd becomes -1. Returns NULL when memory runs out. */
struct site *site_adopt(struct config *cfg);

/* Opens a new site from cfg's DOCROOT path and --mime-types file, and checks that every
 * --error-page and --fallback file that exists below the new root can be opened. 0 with *out,
 * or -errno with a one-line reason in why. */
int site_open(const struct config *cfg, struct site **out, char *why, size_t why_len);

/* 1 when cfg's DOCROOT path now names another directory than s's (re-pointed symlink, removed
 * and recreated), 0 when the same, -errno when it cannot be looked up (then keep serving s). */
int site_moved(const struct config *cfg, const struct site *s);

void site_put(struct site *s);

/* Where the current site is published for the workers. */
struct site_slot {
    pthread_mutex_t lock; /* taken only to publish or to pick up a new site, never per request */
    struct site *cur;
    atomic_uint gen; /* bumped by every publish; workers compare it once per loop turn */
};

void site_slot_init(struct site_slot *slot, struct site *first);
/* Makes s (whose reference the slot takes over) current and drops the slot's old reference. */
void site_publish(struct site_slot *slot, struct site *s);
/* The current site with a reference for the caller, and the generation it was published as. */
struct site *site_acquire(struct site_slot *slot, unsigned *gen);
void site_slot_fini(struct site_slot *slot);

#endif
