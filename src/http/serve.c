/* Request -> answer; see serve.h. The order of decisions follows nginx's static module:
 * method, path, file or directory (redirect, index, listing), then the file's plan, which
 * serve_plan.c writes (content negotiation, then the core's conditional and range logic), as
 * serve_listing.c writes a listing's; serve_int.h is what they share. */
#include "http/serve.h"
#include "http/serve_int.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "site/tokens.h"
#include "config/config.h"
#include "core/accept.h"
#include "core/path.h"
#include "core/rules.h"
#include "core/redirect.h"
#include "core/static.h"
#include "rt/fcache.h"
#include "site/site.h"
#include "rt/runtime.h"

#define INDEX "index.html"

static int status_of(const struct fentry *e)
{
    switch (e->err) {
    case 0:
        return 200;
    case -EACCES:
    case -EPERM:
        return 403;
    case -ENAMETOOLONG: /* a segment over NAME_MAX: no such file, and the URI is not long */
    case -ENOENT:
    case -ENOTDIR:
    case -EXDEV: /* RESOLVE_BENEATH: a link that leads out of the root; say nothing more */
    case -ELOOP:
        return 404;
    default:
        return 500;
    }
}

/* "/dir?q" -> "/dir/?q" (slash), or "/dir/?q" -> "/dir?q" (--trailing-slash never, a clean
 * URL), built from the normalised path, never from the raw target: a raw
 * "//evil.example/..%2fdir" would make the Location a reference to another host. */
static void redirect_page(struct job *j, const char *path, size_t len, bool slash)
{
    char loc[3 * PATH_MAX + 3 * HTTP1_MAX_TARGET];
    size_t n = path_location_as(path, len, slash, j->query, loc, sizeof(loc));
    if (n == 0 || !static_redirect_plan(301, loc, n, &j->ctx, &j->r->plan))
        job_error(j, 414, NULL);
}

/* The file the lookup of path + suffix found, or NULL (none, a directory, no memory). */
static struct fentry *file_at(struct job *j, const char *path, size_t len, const char *suffix)
{
    struct fentry *e = job_lookup(j, path, len, suffix);
    if (e && (e->err || e->is_dir)) {
        fcache_put(j->w->cache, e);
        e = NULL;
    }
    return e;
}

/* The first of the site's index files (--index; index.html) in directory path[0..len) ("" the
 * root), or NULL. */
static struct fentry *find_index(struct job *j, const char *path, size_t len)
{
    static const char *const dflt[] = {INDEX};
    const struct config *cfg = j->cfg;
    const char *const *names = cfg->num_index ? cfg->index_names : dflt;
    int n = cfg->num_index ? cfg->num_index : 1;
    for (int i = 0; i < n; i++) {
        char suffix[NAME_MAX + 2];
        snprintf(suffix, sizeof(suffix), "%s%s", len ? "/" : "", names[i]);
        struct fentry *e = file_at(j, path, len, suffix);
        if (e)
            return e;
    }
    return NULL;
}

static inline bool ends_html(const char *path, size_t len)
{
    if (len < 5)
        return false;
    const char *t = path + len - 5;
    return t[0] == '.' && t[1] == 'h' && t[2] == 't' && t[3] == 'm' && t[4] == 'l';
}

/* --clean-urls redirect: when file e at path[0..len) was asked for by a name other than its
 * canonical URL (x.html for /x, dir/index.html for /dir/) and that URL serves this same file,
 * answers with a 301 to it and takes e's reference; else false, having done nothing. Out of
 * line: a site without it pays one compare. */
static __attribute__((noinline)) bool canonical_redirect(struct job *j, struct fentry *e,
                                                         const char *path, size_t len)
{
    const struct config *cfg = j->cfg;
    const char *sep = memrchr(path, '/', len);
    size_t dir = sep ? (size_t)(sep - path) : 0, base = sep ? dir + 1 : 0;
    bool always = cfg->trailing_slash == SLASH_ALWAYS;
    bool html = len - base > 5 && memcmp(path + len - 5, ".html", 5) == 0;
    bool index = cfg->num_index == 0 && len - base == sizeof(INDEX) - 1 &&
                 memcmp(path + base, INDEX, sizeof(INDEX) - 1) == 0;
    for (int i = 0; i < cfg->num_index && !index; i++)
        index = strlen(cfg->index_names[i]) == len - base &&
                memcmp(path + base, cfg->index_names[i], len - base) == 0;
    if (!html && !index) /* names alone decide most requests: no lookup for them */
        return false;
    struct fentry *other = index ? find_index(j, path, dir) : NULL;
    bool bare = dir && cfg->trailing_slash == SLASH_NEVER;
    if (other == e && bare) { /* never: /dir serves dir.html first, when there is one */
        struct fentry *page = file_at(j, path, dir, ".html");
        if (page) {
            fcache_put(j->w->cache, page);
            fcache_put(j->w->cache, other);
            return false;
        }
    }
    if (other == e) { /* dir/index.html: dir's URL serves it */
        fcache_put(j->w->cache, other);
        fcache_put(j->w->cache, e);
        redirect_page(j, path, dir, !bare && dir);
        return true;
    }
    if (other)
        fcache_put(j->w->cache, other);
    if (!html)
        return false;
    size_t stem = len - 5;
    /* /x serves a file x before x.html; with --trailing-slash always, /x/ serves x's index
     * before x.html: either way the clean URL is not this file's then. */
    other = always ? find_index(j, path, stem) : file_at(j, path, stem, "");
    if (other) {
        fcache_put(j->w->cache, other);
        return false;
    }
    fcache_put(j->w->cache, e);
    redirect_page(j, path, stem, always);
    return true;
}

/* The --fallback for path[0..len): the longest prefix's that path is below (or is), when the
 * client accepts HTML; NULL for none. */
static const char *fallback_for(struct job *j, const char *path, size_t len)
{
    const struct config *cfg = j->cfg;
    int best = -1;
    for (int i = 0; i < cfg->num_fallbacks; i++) {
        const struct config_fallback *fb = &cfg->fallbacks[i];
        size_t pl = fb->prefix_len;
        if (pl <= len && memcmp(path, fb->prefix, pl) == 0 &&
            (pl == 0 || pl == len || path[pl] == '/') &&
            (best < 0 || pl > cfg->fallbacks[best].prefix_len))
            best = i;
    }
    if (best < 0 || (j->req->accept.p && accept_quality(j->req->accept, "text/html") == 0))
        return NULL;
    return cfg->fallbacks[best].path;
}

/* How far up the tree --pages looks for a 404.html: the directories of a request's first
 * NOT_FOUND_DEPTH segments (then the root), so a path of a thousand segments costs at most
 * that many lookups, not a thousand. Generators nest pages far less deeply. */
#define NOT_FOUND_DEPTH 16

/* A 404 for path[0..len) (slash: it named a directory): with --pages, the body is the nearest
 * 404.html up the tree from the path's directory (Cloudflare Pages; the root's alone is
 * GitHub Pages' rule); else, or without one, --error-page's or the built-in page. */
static void not_found(struct job *j, const char *path, size_t len, bool slash)
{
    if (j->cfg->pages) {
        const char *sep = slash ? NULL : memrchr(path, '/', len);
        size_t dir = slash ? len : sep ? (size_t)(sep - path) : 0;
        for (size_t i = 0, segs = 0; i < dir; i++) {
            if (path[i] == '/' && ++segs == NOT_FOUND_DEPTH) {
                dir = i;
                break;
            }
        }
        for (;;) {
            struct fentry *e = file_at(j, path, dir, dir ? "/404.html" : "404.html");
            if (e) {
                job_send_file(j, e, 404);
                return;
            }
            if (dir == 0)
                break;
            sep = memrchr(path, '/', dir);
            dir = sep ? (size_t)(sep - path) : 0;
        }
    }
    job_error(j, 404, NULL);
}

/* A directory (e, whose reference it takes) asked for as /dir (slash false) or /dir/: its
 * index, a clean URL's file, a redirect to the canonical form, a listing or 403. */
static void serve_dir(struct job *j, struct fentry *e, const char *path, size_t len, bool slash)
{
    const struct config *cfg = j->cfg;
    struct fcache *fc = j->w->cache;
    struct fentry *f;
    if (!slash && len) {
        /* /x: x.html before the directory x (Cloudflare's and Netlify's order) */
        if (cfg->clean_urls && (f = file_at(j, path, len, ".html"))) {
            fcache_put(fc, e);
            if (cfg->trailing_slash == SLASH_ALWAYS) {
                fcache_put(fc, f);
                redirect_page(j, path, len, true);
            } else {
                job_send_file(j, f, 200);
            }
            return;
        }
        /* never: /dir is the canonical URL of a directory with an index; one without stays
         * /dir/, where its listing's relative links resolve */
        if (cfg->trailing_slash == SLASH_NEVER && (f = find_index(j, path, len))) {
            fcache_put(fc, e);
            job_send_file(j, f, 200);
            return;
        }
        fcache_put(fc, e);
        redirect_page(j, path, len, true);
        return;
    }
    if ((f = find_index(j, path, len))) {
        fcache_put(fc, e);
        if (cfg->trailing_slash == SLASH_NEVER && len) {
            fcache_put(fc, f);
            redirect_page(j, path, len, false);
            return;
        }
        job_send_file(j, f, 200);
        return;
    }
    /* /x/ with no index in x but an x.html: that page's URL */
    if (len && cfg->clean_urls && (f = file_at(j, path, len, ".html"))) {
        fcache_put(fc, e);
        if (cfg->trailing_slash == SLASH_ALWAYS) {
            job_send_file(j, f, 200);
        } else {
            fcache_put(fc, f);
            redirect_page(j, path, len, false);
        }
        return;
    }
    if (cfg->autoindex) {
        job_listing(j, e, path, len); /* takes e's reference */
        return;
    }
    fcache_put(fc, e);
    job_error(j, 403, NULL);
}

/* Nothing at path[0..len): a clean URL's x.html, the --fallback, or a 404. */
static void serve_missing(struct job *j, const char *path, size_t len, bool slash)
{
    const struct config *cfg = j->cfg;
    struct fentry *f;
    if (len && cfg->clean_urls && (f = file_at(j, path, len, ".html"))) {
        /* the page's URL is /x (auto, never) or /x/ (always) */
        if (slash == (cfg->trailing_slash == SLASH_ALWAYS)) {
            job_send_file(j, f, 200);
        } else {
            fcache_put(j->w->cache, f);
            redirect_page(j, path, len, !slash);
        }
        return;
    }
    const char *fb = cfg->num_fallbacks ? fallback_for(j, path, len) : NULL;
    if (fb && (f = file_at(j, fb, strlen(fb), ""))) {
        job_send_file(j, f, 200);
        return;
    }
    not_found(j, path, len, slash);
}

/* Inlined (as answer_request): the common path calls no function of its own here, and a
 * SITE_NOTED answer has its own copy (serve_noted). */
static inline __attribute__((always_inline)) void serve_path(struct job *j, const char *path,
                                                             size_t len, bool slash)
{
    struct fentry *e = fcache_get(j->w->cache, path, len, j->w->now);
    if (!e) {
        job_error(j, 500, NULL);
        return;
    }
    if (e->err == 0 && !e->is_dir) {
        if (slash) { /* "/file.txt/" names no directory */
            fcache_put(j->w->cache, e);
            not_found(j, path, len, slash);
            return;
        }
        /* only a name ending in .html, or one of the site's own index names, can redirect:
         * the last bytes decide the rest, compared inline (callgrind, /1k.bin with --pages:
         * canonical_redirect for every file cost 56 Ir a request, a libc memcmp 28) */
        if (__builtin_expect(j->cfg->clean_urls == CLEAN_URLS_REDIRECT, 0) &&
            (ends_html(path, len) || j->cfg->num_index) && canonical_redirect(j, e, path, len))
            return;
        job_send_file(j, e, 200);
        return;
    }
    if (e->err == 0 && e->is_dir) {
        serve_dir(j, e, path, len, slash);
        return;
    }
    int status = status_of(e);
    fcache_put(j->w->cache, e);
    if (status == 404) {
        serve_missing(j, path, len, slash);
        return;
    }
    job_error(j, status, NULL);
}

/* Serve's per-worker state: the Alt-Svc lines with HTTP/3, one per HTTP/3 port (each TLS
 * listener advertises its own, issue 38), and each line after each site's HSTS line, composed
 * once per site (a distinct buffer per site, as the prebuilt answers key on its address), for
 * every site there is (issue 40: it was for 8, the others went without). */
struct serve_worker {
    struct alt_svc {
        char line[48]; /* "Alt-Svc: h3=\":PORT\"; ma=86400\r\n" */
        unsigned len;
    } alt[LISTEN_MAX];
    unsigned nalt;              /* distinct lines in alt[] */
    uint8_t alt_of[LISTEN_MAX]; /* by listener: its line's index + 1, or 0 for none */
    unsigned gen;               /* w->site_gen the array below is for */
    int num_secure;
    struct secure {
        unsigned len; /* 0: not composed yet */
        char lines[112];
    } * secure; /* by vhost id and line (id * nalt + line), made at a site's first answer */
};

struct serve_worker *serve_worker_new(void)
{
    return calloc(1, sizeof(struct serve_worker));
}

void serve_worker_free(struct serve_worker *sw)
{
    if (sw)
        free(sw->secure);
    free(sw);
}

int serve_alt_svc(struct runtime *w, unsigned listener, const char *line, size_t len)
{
    struct serve_worker *sw = w->servew;
    if (listener >= LISTEN_MAX || len > sizeof(sw->alt[0].line) || len == 0)
        return -EINVAL;
    unsigned a = 0;
    while (a < sw->nalt && (sw->alt[a].len != len || memcmp(sw->alt[a].line, line, len) != 0))
        a++;
    if (a == sw->nalt) { /* a port of its own (listeners of one port share a line) */
        memcpy(sw->alt[a].line, line, len);
        sw->alt[a].len = (unsigned)len;
        sw->nalt++;
    }
    sw->alt_of[listener] = (uint8_t)(a + 1);
    free(sw->secure); /* composed again, by the new count of lines */
    sw->secure = NULL;
    sw->num_secure = 0;
    return 0;
}

/* The lines every HTTPS response carries: the site's HSTS and, with HTTP/3, Alt-Svc (so a
 * browser learns of HTTP/3 from its HTTP/1.1 or HTTP/2 answers; not on HTTP/3's own, `on_h3`).
 * NULL for none. */
static const char *secure_lines(struct runtime *w, const struct vhost *v, bool on_h3,
                                unsigned listener, size_t *len)
{
    struct serve_worker *sw = w->servew;
    const struct config *cfg = v->cfg;
    *len = cfg->hsts_len;
    unsigned line = listener < LISTEN_MAX ? sw->alt_of[listener] : 0;
    if (!line || on_h3) /* a listener without HTTP/3 (a Unix socket's) advertises none */
        return cfg->hsts ? cfg->hsts_line : NULL;
    const struct alt_svc *alt = &sw->alt[line - 1];
    if (!cfg->hsts) { /* most sites: the listener's one line */
        *len = alt->len;
        return alt->line;
    }
    uint64_t at = (uint64_t)v->id * sw->nalt + (line - 1);
    if (sw->gen != w->site_gen || at >= (uint64_t)sw->num_secure) {
        /* a new set of sites: composed again as they are asked for (a few bytes per site) */
        int n = w->site->nvh * (int)sw->nalt;
        struct secure *a = calloc((size_t)n, sizeof(*a));
        if (!a) /* no memory: the HSTS line alone, as before HTTP/3 */
            return cfg->hsts_line;
        free(sw->secure);
        sw->secure = a;
        sw->num_secure = n;
        sw->gen = w->site_gen;
    }
    struct secure *x = &sw->secure[at];
    if (!x->len) {
        if (cfg->hsts_len + alt->len > sizeof(x->lines))
            return cfg->hsts_line;
        memcpy(x->lines, cfg->hsts_line, cfg->hsts_len);
        memcpy(x->lines + cfg->hsts_len, alt->line, alt->len);
        x->len = (unsigned)(cfg->hsts_len + alt->len);
    }
    *len = x->len;
    return x->lines;
}

/* Inlined: out of line it costs the request ~25 instructions of frame and spills, and GCC's
 * heuristic flips on small changes around it (callgrind: 1943 -> 1962 Ir a request). */
static inline __attribute__((always_inline)) void init_job(struct job *j, struct runtime *w,
                                                           const struct http_request *req,
                                                           const struct req_policy *pol,
                                                           struct response *r)
{
    bool h1 = pol->syntax == RESP_H1;
    j->w = w;
    j->site = site_route(w, req);
    j->cfg = j->site->cfg;
    j->req = req;
    j->r = r;
    r->note.edge = false;
    j->query = (struct http_str){NULL, 0};
    j->rule_path = NULL;
    /* Member by member: a compound literal is zeroed first ("rep stos"), then written. Every
     * member is set; the assertion below fails the build when one is added. */
    struct static_ctx *ctx = &j->ctx;
    ctx->syntax = pol->syntax;
    ctx->date = w->date;
    ctx->ok_head = h1 && w->ok_head_len < sizeof(w->ok_head) ? w->ok_head : NULL;
    ctx->ok_head_len = w->ok_head_len;
    ctx->extra_headers = j->cfg->extra_headers;
    ctx->extra_len = j->cfg->extra_headers_len;
    ctx->all_headers =
        pol->secure ? secure_lines(w, j->site, pol->on_h3, pol->listener, &ctx->all_len) : NULL;
    ctx->keep_alive = pol->keep_alive;
    ctx->head = req && req->method == HTTP_HEAD;
    ctx->send_continue = pol->send_continue;
    ctx->extra_always = false;
    ctx->interim_len = 0;
    ctx->minor = req ? req->minor : 1;
    ctx->buf = r->buf;
    ctx->cap = sizeof(r->buf);
    ctx->used = 0;
}
_Static_assert(offsetof(struct static_ctx, used) + sizeof(size_t) == sizeof(struct static_ctx),
               "init_job sets every member of struct static_ctx: set the new one too");

/* --redirect-https on the cleartext port: 308 to the same URL over https (400 without a Host
 * that can be written into a URL). */
static void redirect_https(struct job *j)
{
    char loc[8 + HTTP1_MAX_TARGET + 320];
    const struct http_request *req = j->req;
    size_t n =
        redirect_https_location(req->has_host ? req->host.p : NULL, req->host.len, req->target.p,
                                req->target.len, j->w->cfg->tls_port, loc, sizeof(loc));
    if (n == 0 || !static_redirect_plan(308, loc, n, &j->ctx, &j->r->plan))
        job_error(j, RULES_NO_LOCATION, NULL);
}

/* Automatic HTTPS (issue 27): answers the HTTP-01 challenge rules_acme_challenge found (its
 * token at req->target + plen) from the worker's view of the pending challenges, as
 * rules_acme_answer says. */
static void acme_challenge(struct job *j, size_t plen)
{
    const struct http_request *req = j->req;
    char ka[256];
    size_t n = tokens_http01(j->w->acme, req->has_host ? req->host.p : NULL, req->host.len,
                             req->target.p + plen, req->target.len - plen, ka, sizeof(ka));
    int status = rules_acme_answer(n != 0);
    if (status != 200) {
        job_error(j, status, NULL);
        return;
    }
    /* The body lives at the end of the response's buffer, the header section before it: the
     * plan points into it until the response is released. */
    char *body = j->r->buf + sizeof(j->r->buf) - n;
    memcpy(body, ka, n);
    j->ctx.cap = sizeof(j->r->buf) - n;
    struct static_file f = {
        .size = n, .content_type = "application/octet-stream", .data = body, .fd = -1};
    j->ctx.extra_len = 0; /* the key authorization alone: no site headers */
    if (!static_body_plan(status, &f, &j->ctx, &j->r->plan))
        job_error(j, 500, NULL);
}

/* A file served with issue 28's note (site_answer's SITE_NOTED): out of line, so that the
 * common path keeps its own serve_path and its frame. */
static __attribute__((noinline, cold)) enum serve_result
serve_noted(struct job *j, const char *path, size_t len, bool slash)
{
    serve_path(j, path, len, slash);
    return SERVE_NOTED;
}

/* Issue 39's rules (the site's _redirects, _headers, access and user-agent rules): refusals
 * and redirects answer here; a rewrite serves its target with its status (one rewrite: the
 * target's own rules are not looked at again); the header rules are kept for job_send_file
 * and job_error. Out of line: a site without rules never comes here. */
static __attribute__((noinline)) enum serve_result serve_ruled(struct job *j,
                                                               const struct req_policy *pol,
                                                               char *path, size_t len, bool slash,
                                                               enum site_answer a)
{
    struct site_rewrite rw;
    bool headers;
    enum site_rule r = site_rules_stage(j->w, j->site, j->req, pol, path, len, slash, j->query,
                                        &j->ctx, &j->r->plan, &rw, &headers);
    if (r == SITE_RULE_ANSWERED)
        return SERVE_DONE;
    if (headers) {
        j->rule_path = path;
        j->rule_len = len;
        j->rule_slash = slash;
        j->base_extra = j->ctx.extra_headers;
        j->base_len = j->ctx.extra_len;
    }
    if (r == SITE_RULE_NONE) {
        serve_path(j, path, len, slash);
    } else if (rw.status == 200) {
        serve_path(j, rw.path, rw.len, rw.slash);
    } else { /* 404 or 410 with the target's page, or the plain one */
        struct fentry *e = fcache_get(j->w->cache, rw.path, rw.len, j->w->now);
        if (e && e->err == 0 && !e->is_dir) {
            job_send_file(j, e, rw.status);
        } else {
            if (e)
                fcache_put(j->w->cache, e);
            job_error(j, rw.status, NULL);
        }
    }
    return a == SITE_NOTED ? SERVE_NOTED : SERVE_DONE;
}

/* Inlined into serve_request: it is the whole of it once the wait check says go. */
static inline __attribute__((always_inline)) enum serve_result
answer_request(struct runtime *w, const struct http_request *req, const struct req_policy *pol,
               struct response *r)
{
    struct job j;
    char path[PATH_MAX];
    struct path_result pr;

    init_job(&j, w, req, pol, r);
    size_t acme = rules_acme_challenge(req, w->acme != NULL, pol->secure);
    if (acme) {
        acme_challenge(&j, acme);
        return SERVE_DONE;
    }
    const struct rules_facts facts = {
        .misdirected = pol->cert && site_misdirected(w, j.site, req, pol->cert),
        .redirect_https = j.cfg->redirect_https && !pol->secure, /* a site's own, or the top's */
    };
    int status = rules_request(req, &facts);
    if (status) {
        if (status == 308) {
            redirect_https(&j);
            return SERVE_DONE;
        }
        if (status == 417)
            j.ctx.send_continue = false;
        job_error(&j, status, status == 405 ? RULES_ALLOW : NULL);
        return SERVE_DONE;
    }
    status = path_normalize(req->target, path, sizeof(path) - 1, &pr);
    if (status) {
        if (status == 404) /* a hidden name: the root's 404.html with --pages */
            not_found(&j, "", 0, true);
        else
            job_error(&j, status, NULL);
        return SERVE_DONE;
    }
    status = rules_target(req, pr.asterisk);
    if (status == 204) {
        if (j.site->edge &&
            site_preflight(j.site, req, path, pr.len, pr.trailing_slash, &j.ctx, &r->plan))
            return SERVE_DONE; /* --cors */
        static_status_plan(204, RULES_ALLOW, &j.ctx, &r->plan);
        return SERVE_DONE;
    }
    if (status) {
        job_error(&j, status, NULL);
        return SERVE_DONE;
    }
    path[pr.len] = '\0';
    j.query = pr.query;
    enum site_answer a = site_answer(w, j.site, req, pol, path, pr.len, pr.trailing_slash, pr.query,
                                     &j.ctx, &r->plan, &r->note);
    if (a == SITE_ANSWERED)
        return SERVE_DONE; /* health, --limit-req, redirect or basic auth */
    if (__builtin_expect(j.cfg->host_root != NULL, 0)) { /* {host} in the root: issue 40 */
        int rc = site_host_root(w, j.site, req);
        if (rc) { /* the site's own error pages answer, from its root directory */
            job_error(&j, rc == -EINVAL ? 400 : rc == -ENOENT ? 404 : 500, NULL);
            return SERVE_DONE;
        }
    }
    if (__builtin_expect(j.site->ruled, 0))
        return serve_ruled(&j, pol, path, pr.len, pr.trailing_slash, a);
    if (a)
        return serve_noted(&j, path, pr.len, pr.trailing_slash);
    serve_path(&j, path, pr.len, pr.trailing_slash);
    return SERVE_DONE;
}

enum serve_result serve_request(struct runtime *w, const struct http_request *req,
                                const struct req_policy *pol, struct response *r)
{
    /* site_pending's own first test, read here: no call for a process without --basic-auth */
    if (__builtin_expect(w->site->any_auth, 0) && site_pending(w, req, pol))
        return SERVE_PENDING;
    r->obs.secure = pol->secure; /* for the access log's port */
    return answer_request(w, req, pol, r);
}

void serve_error(struct runtime *w, int status, bool head, enum resp_syntax syntax,
                 struct response *r)
{
    struct job j;
    struct req_policy pol = {.syntax = syntax, .keep_alive = false};
    init_job(&j, w, NULL, &pol, r);
    r->obs.secure = false;
    j.ctx.head = head;
    job_error(&j, status, NULL);
}
