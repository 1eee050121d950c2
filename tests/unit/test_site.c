/* test_site: sites (rt/site.h) on a real configuration file and real document roots: Host
 * routing (exact, wildcard, the default, the worker's route cache) and publishing (the slot's and
 * the workers' references, a worker that keeps its site until its next tick, and publishers and
 * readers on several threads, leak- and use-after-free-checked under ASan).
 * Must not: serve a request; the worker's engine is a table that only starts and stops.
 * Ownership: one worker, configuration and directory per test. */
#include "unit.h"
#include "quiet.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "site/site.h"
#include "server/worker.h"

struct fixture {
    char dir[64], conf[96];
    char *argv[8]; /* the configuration keeps them, to read the file again on a reload */
    struct config cfg;
    struct site_slot slot;
    struct worker *worker;
    struct runtime *w; /* the worker's, as the layers below see it */
};

/* Two sites: "a" (a.test, *.a.test, the default) and "b" (b.test, www.b.test), or with swap
 * the names the other way round. */
static void write_conf(struct fixture *f, bool swap)
{
    FILE *fp = fopen(f->conf, "w");
    CHECK(fp != NULL);
    fprintf(fp,
            "sites:\n"
            "  - hosts: [%s]\n    default: true\n    root: %s/a\n"
            "  - hosts: [%s]\n    root: %s/b\n",
            swap ? "b.test, www.b.test" : "a.test, \"*.a.test\"", f->dir,
            swap ? "a.test, \"*.a.test\"" : "b.test, www.b.test", f->dir);
    fclose(fp);
}

static void setup(struct fixture *f)
{
    strcpy(f->dir, "/tmp/test_site.XXXXXX");
    CHECK(mkdtemp(f->dir) != NULL);
    char path[128];
    for (const char *s = "ab"; *s; s++) {
        snprintf(path, sizeof(path), "%s/%c", f->dir, *s);
        CHECK_INT(mkdir(path, 0755), 0);
    }
    snprintf(f->conf, sizeof(f->conf), "%s/sites.yaml", f->dir);
    write_conf(f, false);
    char *argv[] = {"ringhttpd", "-t", "1", "--max-conns", "8", "--config", f->conf, NULL};
    memcpy(f->argv, argv, sizeof(argv));
    CHECK_INT(config_parse(&f->cfg, 7, f->argv, NULL), 0);
    f->worker = unit_quiet_worker(&f->cfg, &f->slot);
    f->w = worker_runtime(f->worker);
}

static void teardown(struct fixture *f)
{
    unit_quiet_worker_free(f->worker, &f->slot);
    config_free(&f->cfg);
    char path[128];
    for (const char *s = "ab"; *s; s++) {
        snprintf(path, sizeof(path), "%s/%c", f->dir, *s);
        rmdir(path);
    }
    unlink(f->conf);
    rmdir(f->dir);
}

/* The index of the site a request with Host host (none when NULL) is routed to. */
static int route(struct fixture *f, const char *host)
{
    struct http_request req;
    memset(&req, 0, sizeof(req));
    req.target = (struct http_str){"/", 1};
    if (host) {
        req.host = (struct http_str){unit_guard_str(host), strlen(host)};
        req.has_host = true;
    }
    const struct vhost *v = site_route(f->w, &req);
    CHECK(v >= f->w->site->vh && v < f->w->site->vh + f->w->site->nvh);
    return (int)(v - f->w->site->vh);
}

static unsigned refs(const struct site *s)
{
    return atomic_load(&s->refs);
}

TEST(site_routes_by_host_exact_wildcard_then_default)
{
    struct fixture f;
    setup(&f);
    CHECK_INT(f.w->site->nvh, 2);
    CHECK_INT(route(&f, "a.test"), 0);
    CHECK_INT(route(&f, "x.a.test"), 0);
    CHECK_INT(route(&f, "deep.x.a.test"), 0);
    CHECK_INT(route(&f, "b.test"), 1);
    CHECK_INT(route(&f, "WWW.B.Test.:8080"), 1);
    CHECK_INT(route(&f, "b.test"), 1);  /* again, from the worker's route cache */
    CHECK_INT(route(&f, "xb.test"), 0); /* a name is matched whole: the default */
    CHECK_INT(route(&f, "unknown.example"), 0);
    CHECK_INT(route(&f, "[::1]:80"), 0);
    CHECK_INT(route(&f, NULL), 0);  /* HTTP/1.0 without Host */
    CHECK_INT(route(&f, "a b"), 0); /* not a host name */
    CHECK(site_route(f.w, NULL) == &f.w->site->vh[f.w->site->dflt]);
    teardown(&f);
}

TEST(site_publish_hands_over_references_and_the_worker_switches_at_its_tick)
{
    struct fixture f;
    setup(&f);
    struct site *old = f.w->site;
    CHECK_INT(refs(old), 2); /* the slot's and the worker's */
    CHECK_INT(route(&f, "b.test"), 1);

    /* A reload: the names now go the other way round. */
    write_conf(&f, true);
    struct site *s;
    char why[256] = "";
    CHECK_INT(site_open(&f.cfg, NULL, &s, why, sizeof(why)), 0);
    CHECK_INT(refs(s), 1);
    unsigned gen;
    struct site *held = site_acquire(&f.slot, &gen);
    CHECK(held == old);
    site_publish(&f.slot, s);
    CHECK_INT(refs(old), 2); /* the worker's and held: the slot let go */
    CHECK_INT(refs(s), 1);   /* the slot's */
    CHECK(atomic_load(&f.slot.gen) == gen + 1);

    /* Until its tick the worker answers from the site it holds, its route cache included. */
    CHECK(f.w->site == old);
    CHECK_INT(route(&f, "b.test"), 1);
    CHECK(worker_tick(f.worker));
    CHECK(f.w->site == s && f.w->site_gen == gen + 1);
    CHECK_INT(refs(s), 2);
    CHECK_INT(refs(old), 1);           /* held only */
    CHECK_INT(route(&f, "b.test"), 0); /* the cached route of the old site is not used */
    CHECK_INT(route(&f, "a.test"), 1);
    CHECK_INT(route(&f, "unknown.example"), 0); /* the new default */
    site_put(held); /* the last reference: freed here (ASan checks nothing touches it) */
    teardown(&f);
}

/* Readers on threads acquire and release while the main thread publishes: every site read is
 * alive, and at the end only the slot and the worker hold the current one. */
#define READERS 3
#define PUBLISHES 20

struct reader {
    struct site_slot *slot;
    atomic_bool *stop;
    unsigned reads, bad;
};

static void *read_sites(void *arg)
{
    struct reader *r = arg;
    while (!atomic_load(r->stop) || r->reads == 0) {
        unsigned gen;
        struct site *s = site_acquire(r->slot, &gen);
        r->bad += s->nvh != 2 || s->vh[s->dflt].root_fd < 0; /* freed: ASan says so first */
        r->reads++;
        site_put(s);
    }
    return NULL;
}

TEST(site_publish_under_concurrent_readers)
{
    struct fixture f;
    setup(&f);
    atomic_bool stop;
    atomic_init(&stop, false);
    struct reader r[READERS];
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++) {
        r[i] = (struct reader){.slot = &f.slot, .stop = &stop};
        CHECK_INT(pthread_create(&t[i], NULL, read_sites, &r[i]), 0);
    }
    for (int i = 0; i < PUBLISHES; i++) {
        struct site *s;
        char why[256] = "";
        write_conf(&f, i % 2 == 0);
        CHECK_INT(site_open(&f.cfg, NULL, &s, why, sizeof(why)), 0);
        site_publish(&f.slot, s);
        CHECK(worker_tick(f.worker)); /* the worker follows, dropping its old site */
    }
    atomic_store(&stop, true);
    for (int i = 0; i < READERS; i++) {
        CHECK_INT(pthread_join(t[i], NULL), 0);
        CHECK(r[i].reads > 0);
        CHECK_INT(r[i].bad, 0);
    }
    CHECK(f.w->site == f.slot.cur);
    CHECK_INT(refs(f.slot.cur), 2);
    CHECK_INT(route(&f, "b.test"), 1); /* the last publish (i = 19) has the names as at first */
    teardown(&f);
}
