/* serve_int: what the request -> answer decision (serve.c), the plan of a chosen file or error
 * (serve_plan.c) and the directory listing (serve_listing.c) share: the job one request is, and
 * the calls between them. Private to src/http/serve*.c; serve.h is the interface.
 * Must not: include serve.h (serve.c includes both: a knot for make modgraph), so struct
 * response stays an incomplete type here. Owns nothing: a job lives on serve_request's stack,
 * and what it holds is its response's (serve_plan.c's job_hold). */
#ifndef HTTP_SERVE_INT_H
#define HTTP_SERVE_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/http1.h"
#include "core/static.h"

struct config;
struct fentry;
struct response;
struct runtime;
struct vhost;

struct job {
    struct runtime *w;
    const struct vhost *site; /* the site the request's Host picked (rt/site.h) */
    const struct config *cfg; /* its options */
    const struct http_request *req;
    struct response *r;
    struct static_ctx ctx;
    char use_as_dict[sizeof("Use-As-Dictionary: match=\"\"\r\n") + PATH_MAX];
    struct http_str query; /* after '?' in the target, still encoded; {NULL, 0} without one */
    /* issue 39: the request's path for its site's header rules (NULL: none to apply), and the
     * extra lines the response had before them */
    const char *rule_path;
    size_t rule_len;
    bool rule_slash;
    const char *base_extra;
    size_t base_len;
};

/* Makes r hold cache entry e (its first free slot of two) until serve_response_put. */
void job_hold(struct response *r, struct fentry *e);

/* Whole-path lookup of path[0..len) with suffix appended ("dir/" + "index.html", "x.css" +
 * ".br"): the file cache's entry, a reference the caller puts; NULL when too long. */
struct fentry *job_lookup(struct job *j, const char *path, size_t len, const char *suffix);

/* Makes j's plan the error `status` (extra: header lines of its own, or NULL): the site's
 * --error-page for it when there is one, else the built-in page; a 500 when neither fits. */
void job_error(struct job *j, int status, const char *extra);

/* Makes j's plan file e's (a reference it takes) with status (200: conditionals and ranges
 * apply; else a body under that status), in the representation the request negotiates. */
void job_send_file(struct job *j, struct fentry *e, int status);

/* True when e is a body --compress applies to (type, size); memoised in the entry. */
bool job_compressible(struct job *j, struct fentry *e);

/* The cached variant `coding` of e when one exists and paid, else NULL (a reference the
 * caller puts); asks for it first (made now when cheap enough, else off the loop, only when
 * `queue` says so). dict_hash and pattern: a dictionary's, for dcz; else NULL. */
struct fentry *job_variant(struct job *j, struct fentry *e, int coding,
                           const unsigned char *dict_hash, const char *pattern, bool queue);

/* --autoindex: makes j's plan dir's listing for path[0..len) ("" the root); takes the
 * caller's reference to dir. */
void job_listing(struct job *j, struct fentry *dir, const char *path, size_t len);

#endif
