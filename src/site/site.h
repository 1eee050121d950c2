/* site: what a reload may change under running workers: the document roots (opened from the
 * paths configured, so a re-pointed symlink or a recreated directory takes effect), the
 * --mime-types tables (the top level's, and a site's own) and, with --config, the sites the
 * file describes (issue 19): their options, host names and htpasswd files. A new site is published
 * as a whole; workers switch at their next tick, and a request is answered by the site it was
 * routed to. Must not: be changed once published (build a new one), or be freed while a worker
 * holds it. Ownership: refcounted. The publishing slot holds one reference to the current site,
 * each worker one to the site it serves from; the last site_put frees it (any thread may). */
#ifndef RT_SITE_H
#define RT_SITE_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"
#include "core/http1.h"
#include "core/mime.h"
#include "core/static.h"
#include "core/vhost.h"

struct auth_file;
struct rulefile;
struct conn_cert;
struct runtime;
struct plan;
struct req_policy;

/* What site_answer says about a response beyond its plan (struct response keeps one). */
struct site_note {
    bool quiet;           /* not logged (--health) */
    bool edge;            /* issue 28: the members below are set (else they are stale) */
    uint16_t interim_len; /* HTTP/2: field lines of a 103 to send first, at interim */
    /* --limit-conn behind --real-ip-from: the response counts for its forwarded client until
     * it is released (serve_response_put: guard_request_done(counted)); 0 from
     * serve_response_get on. In what was padding: the response is no larger (a larger one
     * cost a simulated D1 miss a request, callgrind) */
    uint32_t counted;
    const char *interim;
    uint64_t rate, after; /* --limit-rate, --limit-rate-after of the response (rate 0: none) */
};

/* One site of the configuration (or the only one, without a sites section). */
struct vhost {
    const struct config *cfg; /* its options */
    int root_fd;              /* O_PATH directory fd its files are opened beneath */
    struct root_dir *dir;     /* root_fd's owner, shared with a reload's site (site.c) */
    dev_t dev;                /* what its root path named when it was opened */
    ino_t ino;
    uint32_t id; /* its index: the file cache keeps its files apart by it */
    /* its MIME table: its own --mime-types file's (own), or the site's (the top level's) */
    const struct mime_table *types;
    struct mime_table own;
    /* per --cache-control-for rule: the site's header lines with that Cache-Control */
    char *cache_headers[CONFIG_MAX_RULES];
    size_t cache_len[CONFIG_MAX_RULES];
    struct auth_file *auth[CONFIG_MAX_RULES]; /* per --basic-auth rule */
    bool rules;                               /* any rule below to look at */
    bool classic; /* any canonical host, redirect, basic auth or cache rule */
    bool limits;  /* any --limit-req(-for) (issue 28) */
    bool proxied; /* --limit-conn behind --real-ip-from: a proxy's requests counted (issue 28) */
    bool edge;    /* any --limit-rate, --cors or --early-hints (issue 28) */
    char challenge[sizeof("WWW-Authenticate: Basic realm=\"\", charset=\"UTF-8\"\r\n") + 256];
    /* Issue 39: the root's _redirects and _headers (rules-files) and the configuration's
     * redirects, headers and access lines, compiled when the site is built (core/rulefile.h;
     * NULL: none), and what each file was then (site_moved compares) */
    const struct rulefile *ruleset;
    void *ruleset_mem;
    struct site_stamp {
        bool present;
        dev_t dev;
        ino_t ino;
        int64_t mtime_ns;
        int64_t size;
    } stamp[2];
    bool ruled; /* a ruleset or --deny-user-agent: serve asks site_rules_stage */
};

struct site {
    atomic_uint refs;
    int root_fd; /* the default vhost's root (not a separate fd) */
    dev_t dev;
    ino_t ino;
    struct mime_table mime;
    struct config *owned; /* a re-read configuration file, freed with the site */
    struct vhost *vh;
    int nvh;
    int dflt;          /* where a Host no site names goes */
    size_t health_len; /* of --health without its leading '/' */
    bool any_auth;     /* some site has --basic-auth (else site_pending has nothing to do) */
    struct vhost_table hosts;
    struct vhost_slot *slots;
};

/* Takes over cfg's document root fd and --mime-types table (startup opened and checked them);
 * cfg->docroot_fd becomes -1. Returns NULL when memory runs out. */
struct site *site_adopt(struct config *cfg);

/* Opens a new site from cfg's DOCROOT path and --mime-types file, and checks that every
 * --error-page and --fallback file that exists below the new root can be opened. A root of
 * prev (the site serving now, or NULL) at the same place, naming the same path that is still
 * the same directory, is shared rather than opened again (issue 40: a reload of 10,000 sites
 * needs no 10,000 more fds). 0 with *out, or -errno with a one-line reason in why. */
int site_open(const struct config *cfg, const struct site *prev, struct site **out, char *why,
              size_t why_len);

/* Whether the process, as it now is (its user, its Landlock domain), can list every root s
 * serves, through the root's path as a reload will look it up. 0, or -errno with a reason in
 * why that names the root and who, the serving user ("nobody (uid 65534)"): a root that user
 * may not read, or one outside the trees Landlock allowed at start (restart to serve it). */
int site_check_roots(const struct site *s, const char *who, char *why, size_t why_len);

/* 1 when cfg's DOCROOT path now names another directory than s's (re-pointed symlink, removed
 * and recreated), 0 when the same, -errno when it cannot be looked up (then keep serving s). */
int site_moved(const struct config *cfg, const struct site *s);

void site_put(struct site *s);

/* Site's per-worker state (the route cache), reached through w->sitew: the worker makes it
 * with its world and frees it last. NULL when memory is short. */
struct site_worker *site_worker_new(void);
void site_worker_free(struct site_worker *sw);

/* The site req names (the default one for NULL, or a Host no site names), with the worker's
 * file cache switched to its root. Over TLS, serve asks site_misdirected next (issue 19). */
const struct vhost *site_route(struct runtime *w, const struct http_request *req);

/* A {host} root's longest host name (253, DNS's), with room for its NUL. */
#define HOST_ROOT_NAME_MAX 254

/* For a site whose root names {host} (v->cfg->host_root, issue 40), after site_route: the
 * worker's file cache switched to the directory of req's host (lower case, one path component
 * beneath the site's root directory, opened beneath it, looked up again each second): 0;
 * -EINVAL when the Host cannot name a directory (none, "..", a leading dot, a '/' or a byte no
 * host name holds, too long), -ENOENT when its directory is not there (the cache stays on the
 * site's root directory, whose error pages answer), -ENOMEM. Bounded per worker: 256 hosts'
 * directories open at most. */
int site_host_root(struct runtime *w, const struct vhost *v, const struct http_request *req);

/* Whether a request over a secure connection whose certificate is x (conn/transport.h: TLS
 * and QUIC alike), routed to v, must be answered 421 Misdirected Request (RFC 9110 15.5.20):
 * v is not the site the connection's certificate belongs to (the site SNI picked a pair of),
 * or, when the certificate is a process-level pair among several, the certificate does not
 * name the request's Host (an address, or no Host, never gets 421: no browser coalesces by
 * address, and a load balancer's probe of https://ADDR/ must be answered). The rule's one
 * copy (issue 37). A verdict of "fine" is cached in x, so a connection's next requests to the
 * same site (or with the same Host) cost a compare. */
bool site_misdirected(struct runtime *w, const struct vhost *v, const struct http_request *req,
                      struct conn_cert *x);

/* What site_answer says. */
enum site_answer {
    SITE_SERVE,    /* serve the file */
    SITE_ANSWERED, /* the plan is written */
    SITE_NOTED,    /* serve the file; note has issue 28's members set (note->edge) */
};

/* What a site answers before looking for a file, in this order: --health, the canonical host,
 * --limit-req (a 429 with Retry-After past it; issue 28), --redirect rules, --basic-auth.
 * path[0..len) is the normalised path (no leading '/'), slash whether the target ended in '/',
 * pol the request's policy (whether it came over TLS: the scheme of a canonical-host redirect;
 * its connection: the client --limit-req counts). SITE_ANSWERED with r's plan written into ctx
 * when it answered; else the file is to be served, with ctx's extra headers replaced when a
 * --cache-control-for rule matches path, and for a site with edge rules (v->edge: SITE_NOTED)
 * the CORS fields and --early-hints Link lines of the site added (copied with the extra lines
 * to the end of ctx's buffer, which shrinks; ctx->ok_head NULL; the Link lines are ctx's interim
 * and, for HTTP/2, note's), and note's --limit-rate set. */
enum site_answer site_answer(struct runtime *w, const struct vhost *v,
                             const struct http_request *req, const struct req_policy *pol,
                             const char *path, size_t len, bool slash, struct http_str query,
                             struct static_ctx *ctx, struct plan *plan, struct site_note *note);

/* An OPTIONS request for a site with edge rules (v->edge): the 204 to an allowed CORS
 * preflight (issue 28), written into ctx; false when it is not one (the usual OPTIONS answer
 * applies). */
bool site_preflight(const struct vhost *v, const struct http_request *req, const char *path,
                    size_t len, bool slash, struct static_ctx *ctx, struct plan *plan);

/* Whether req must wait for work off the loop (a password being verified) before it can be
 * answered: serve's SERVE_PENDING. The check reports its end with pol->resume (rt/auth.h);
 * never true without a token. */
bool site_pending(struct runtime *w, const struct http_request *req, const struct req_policy *pol);

/* Issue 39's rules stage, after site_answer let the request through: a --deny-user-agent
 * match (403, counted), an access rule that refuses the client (403, or 403 and close), then
 * the first redirect that matches (a redirect's plan; a rule without '!' does not apply where
 * a file, or a directory with index.html, exists at the path). *headers: whether a header rule's
 * pattern matches the path (serve then asks site_rule_headers for the response). */
enum site_rule {
    SITE_RULE_NONE,     /* serve the path */
    SITE_RULE_ANSWERED, /* the plan is written */
    SITE_RULE_REWRITE,  /* serve rw's path instead, with rw's status (200, 404, 410) */
};

struct site_rewrite {
    const char *path; /* normalised as path_normalize leaves it, NUL-terminated; in the
                       * worker's site state, valid until its next request */
    size_t len;
    bool slash;
    int status;
};

enum site_rule site_rules_stage(struct runtime *w, const struct vhost *v,
                                const struct http_request *req, const struct req_policy *pol,
                                const char *path, size_t len, bool slash, struct http_str query,
                                struct static_ctx *ctx, struct plan *plan, struct site_rewrite *rw,
                                bool *headers);

/* The header rules of v that match the request's path (path[0..len), slash as for
 * site_answer) for a response of `type` (NULL: unknown), an error or not, applied over
 * base[0..base_len) (the lines the response had before): ctx's extra lines replaced by the
 * result (at the end of ctx's buffer, which shrinks; ctx->ok_head NULL), or left as they are
 * when no rule matched. For an error, only rules with status: any apply, over no base, and
 * ctx->extra_always is set when one did. */
void site_rule_headers(const struct vhost *v, const struct http_request *req, const char *path,
                       size_t len, bool slash, const char *type, bool error, const char *base,
                       size_t base_len, struct static_ctx *ctx);

/* --check-config: reads the _redirects and _headers of every site of cfg with rules-files and
 * prints each line that cannot be used (FILE:LINE: why) to stderr. The number of such lines
 * (files that cannot be read count one each). */
int site_check_rules(const struct config *cfg);

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
