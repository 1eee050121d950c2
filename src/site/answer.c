/* What a site's own rules answer before serve looks for a file, per request on its worker:
 * --health, --limit-req and --limit-conn behind a proxy, the CORS fields and Link lines,
 * canonical host, redirects, basic auth (and site_pending's wait for its verdict) and cache
 * rules; then issue 39's rules stage (_redirects and _headers, access and user-agent rules)
 * and its header rules. See site.h. */
#include "site/site.h"
#include "site/site_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/config.h"
#include "core/accept.h"
#include "core/cors.h"
#include "core/hints.h"
#include "core/path.h"
#include "core/peer.h"
#include "core/policy.h"
#include "core/rulefile.h"
#include "core/rules.h"
#include "site/auth.h"
#include "rt/guard.h"
#include "rt/fcache.h"
#include "rt/runtime.h"

/* "/" + path (+ "/" for a directory's slash form) into buf; its length, 0 when too long. */
static size_t url_path(char *buf, size_t cap, const char *path, size_t len, bool slash)
{
    if (len + 3 > cap)
        return 0;
    buf[0] = '/';
    memcpy(buf + 1, path, len);
    size_t n = len + 1;
    if (slash && len)
        buf[n++] = '/';
    buf[n] = '\0';
    return n;
}

static bool redirect_to(const char *loc, size_t n, int status, struct static_ctx *ctx,
                        struct plan *plan)
{
    char line[sizeof("Location: \r\n") + 3 * PATH_MAX + 3 * HTTP1_MAX_TARGET];
    if (n == 0 || n + sizeof("Location: \r\n") > sizeof(line))
        return static_status_plan(414, NULL, ctx, plan) != 0;
    memcpy(line, "Location: ", 10);
    memcpy(line + 10, loc, n);
    memcpy(line + 10 + n, "\r\n", 3);
    return static_status_plan(status, line, ctx, plan) != 0;
}

/* A request field by name (lower case), {NULL, 0} when absent: the edge rules read fields the
 * parser does not keep, only for a site that has such rules. */
static struct http_str field_of(const struct http_request *req, const char *lower)
{
    for (size_t i = 0; i < req->num_headers; i++)
        if (http_str_ieq(req->headers[i].name, lower))
            return req->headers[i].value;
    return (struct http_str){NULL, 0};
}

static struct cors_answer cors_of(const struct vhost *v, const struct http_request *req,
                                  const char *url, size_t ul)
{
    const struct config *c = v->cfg;
    if (!c->num_cors)
        return (struct cors_answer){0};
    return cors_decide(c->cors, (size_t)c->num_cors, req->method, url, ul, field_of(req, "origin"),
                       field_of(req, "access-control-request-method"));
}

/* --limit-req: the 429 for client peer past it, or false. */
static bool limited(struct runtime *w, const struct vhost *v, const struct http_request *req,
                    const struct peer *peer, const char *url, size_t ul, struct static_ctx *ctx,
                    struct plan *plan)
{
    uint32_t retry = guard_request(w, v->cfg, v->id, guard_client(w, peer, req), url, ul);
    int status = rules_limit_req(retry);
    if (!status)
        return false;
    char line[48];
    snprintf(line, sizeof(line), "Retry-After: %u\r\n", retry);
    return static_status_plan(status, line, ctx, plan) != 0;
}

/* The CORS fields and Link lines of a response to be served from a file, after ctx's extra
 * lines (see site_answer); --limit-rate into note. */
static void edge_fields(const struct vhost *v, const struct http_request *req, const char *url,
                        size_t ul, struct static_ctx *ctx, struct site_note *note)
{
    const struct config *c = v->cfg;
    char lines[2048];
    note->edge = true;
    note->interim_len = 0;
    note->rate = c->limit_rate;
    note->after = c->limit_rate_after;
    struct cors_answer a = cors_of(v, req, url, ul);
    size_t nc = cors_fields(&a, lines, sizeof(lines));
    size_t nh = c->num_hints ? hints_fields(c->hints, (size_t)c->num_hints, req->method, url, ul,
                                            lines + nc, sizeof(lines) - nc)
                             : 0;
    size_t add = nc + nh, total = ctx->extra_len + add;
    /* Half the buffer at most: the rest is for the response's own header lines. */
    if (add == 0 || total > ctx->cap / 2)
        return;
    char *at = ctx->buf + ctx->cap - total;
    if (ctx->extra_len)
        memcpy(at, ctx->extra_headers, ctx->extra_len);
    memcpy(at + ctx->extra_len, lines, add);
    ctx->extra_headers = at;
    ctx->extra_len = total;
    ctx->cap -= total;
    ctx->ok_head = NULL; /* lines of its own: the general writer, nothing kept (core/static.h) */
    if (!nh)
        return;
    bool fields = ctx->syntax == RESP_FIELDS;
    bool navigate = !fields && http_str_ieq(field_of(req, "sec-fetch-mode"), "navigate");
    if (rules_early_hints(fields, ctx->minor, navigate) != 103)
        return;
    if (fields) { /* HTTP/2 sends the 103 as a HEADERS block of its own (h2_interim) */
        note->interim = at + total - nh;
        note->interim_len = (uint16_t)nh;
    } else {
        ctx->interim_len = nh; /* the last nh bytes of the extra lines (core/static) */
    }
}

bool site_preflight(const struct vhost *v, const struct http_request *req, const char *path,
                    size_t len, bool slash, struct static_ctx *ctx, struct plan *plan)
{
    char url[PATH_MAX + 4], lines[1024];
    size_t ul = url_path(url, sizeof(url), path, len, slash);
    if (!ul)
        return false;
    struct cors_answer a = cors_of(v, req, url, ul);
    int status = rules_preflight(a.preflight);
    if (!status)
        return false;
    size_t n = cors_preflight_fields(&a, lines, sizeof(lines));
    return n && static_status_plan(status, lines, ctx, plan) != 0;
}

/* A site's canonical host, redirects, basic auth and cache rules. Apart from site_answer so
 * that its Location buffers (tens of KB of stack, probed page by page) cost nothing to a site
 * that has none of them. */
static __attribute__((noinline)) bool site_rules(struct runtime *w, const struct vhost *v,
                                                 const struct http_request *req,
                                                 const struct req_policy *pol, const char *path,
                                                 size_t len, bool slash, struct http_str query,
                                                 struct static_ctx *ctx, struct plan *plan)
{
    bool secure = pol->secure;
    const struct config *c = v->cfg;
    char url[PATH_MAX + 4];
    char loc[3 * PATH_MAX + 3 * HTTP1_MAX_TARGET + VHOST_NAME_MAX + 16];
    bool granted = w->sitew->route.granted == req; /* site_pending verified this very request */
    w->sitew->route.granted = NULL;

    if (c->canonical_host) {
        char key[VHOST_NAME_MAX + 1];
        size_t n = vhost_key(vhost_request_host(req), key);
        if (n != strlen(c->canonical_host) || strncasecmp(key, c->canonical_host, n) != 0) {
            size_t pl = url_path(url, sizeof(url), path, len, slash);
            const char *scheme = secure ? "https" : "http";
            return redirect_to(loc,
                               pl ? vhost_canonical(scheme, c->canonical_host, url + 1, pl - 1,
                                                    query, loc, sizeof(loc))
                                  : 0,
                               rules_canonical_host(), ctx, plan);
        }
    }
    size_t ul = url_path(url, sizeof(url), path, len, slash);
    for (int i = 0; i < c->num_redirects && ul; i++) {
        struct http_str rest;
        if (vhost_from_matches(c->redirects[i].from, url, ul, &rest))
            return redirect_to(loc,
                               vhost_location(c->redirects[i].to, rest, query, loc, sizeof(loc)),
                               c->redirects[i].status, ctx, plan);
    }
    for (int i = 0; i < c->num_auths && ul; i++) {
        size_t pl = strlen(c->auths[i].prefix);
        if (ul < pl || memcmp(url, c->auths[i].prefix, pl) != 0)
            continue;
        enum auth_verdict a =
            granted ? AUTH_GRANTED : auth_check(w->auth, v->auth[i], req, NULL, NULL);
        int status = rules_auth(a == AUTH_GRANTED ? RULES_AUTH_GRANTED
                                : a == AUTH_BUSY  ? RULES_AUTH_BUSY
                                                  : RULES_AUTH_DENIED);
        if (status)
            return static_status_plan(status, status == 429 ? RULES_RETRY_AFTER : v->challenge, ctx,
                                      plan) != 0;
        break; /* the first prefix that matches decides */
    }
    for (int i = 0; i < c->num_cache_rules && ul; i++) {
        if (accept_path_match(c->cache_rules[i].pattern, url, ul)) {
            ctx->extra_headers = v->cache_headers[i];
            ctx->extra_len = v->cache_len[i];
            break;
        }
    }
    return false;
}

/* ---- issue 39: the rules stage (worker thread) ---- */

/* Whether a file (or a directory with index.html) is at path: a rule without '!' then does
 * not apply (Netlify's shadowing). */
/* Whether the file cache has a regular file at path (relative to the root). */
static bool regular(struct runtime *w, const char *path, size_t len, bool *dir)
{
    struct fentry *e = fcache_get(w->cache, path, len, w->now);
    bool file = e && e->err == 0 && !e->is_dir;
    if (dir)
        *dir = e && e->err == 0 && e->is_dir;
    if (e)
        fcache_put(w->cache, e);
    return file;
}

/* Netlify's shadowing: a redirect without '!' does not apply where the path serves content:
 * a file, a directory with one of the site's index names, or (clean URLs on) path + ".html",
 * as serve would find them. */
static bool shadowed(struct runtime *w, const struct config *c, const char *path, size_t len)
{
    bool dir;
    char alt[PATH_MAX];
    if (regular(w, path, len, &dir))
        return true;
    for (int i = 0; dir && i < (c->num_index ? c->num_index : 1); i++) {
        const char *name = c->num_index ? c->index_names[i] : "index.html";
        int n = snprintf(alt, sizeof(alt), "%.*s%s%s", (int)len, path, len ? "/" : "", name);
        if (n > 0 && (size_t)n < sizeof(alt) && regular(w, alt, (size_t)n, NULL))
            return true;
    }
    if (c->clean_urls == CLEAN_URLS_OFF || !len)
        return false;
    int n = snprintf(alt, sizeof(alt), "%.*s.html", (int)len, path);
    return n > 0 && (size_t)n < sizeof(alt) && regular(w, alt, (size_t)n, NULL);
}

static bool refuse(stat_t *counter, bool close, struct static_ctx *ctx, struct plan *plan)
{
    stat_add(counter, 1);
    if (!static_status_plan(403, NULL, ctx, plan))
        return false;
    plan->close |= close;
    return true;
}

/* The redirect rule r matched with captures m: its 3xx, or the rewrite's target into rw. Apart
 * from site_rules_stage: its Location buffer (tens of KB of stack, probed page by page) costs
 * nothing to the requests no redirect matches. */
static __attribute__((noinline)) enum site_rule
apply_redirect(struct runtime *w, const struct rulefile_redirect *r, const struct rulefile_match *m,
               struct http_str query, struct static_ctx *ctx, struct plan *plan,
               struct site_rewrite *rw)
{
    char *to = w->sitew->rewrite;
    char loc[3 * PATH_MAX + 3 * HTTP1_MAX_TARGET];
    size_t n = rulefile_target(r, m, query.p, query.len, loc, sizeof(loc));
    if (r->status >= 300 && r->status < 400)
        return redirect_to(loc, n, r->status, ctx, plan) ? SITE_RULE_ANSWERED : SITE_RULE_NONE;
    struct path_result pr;
    int st = n ? path_normalize((struct http_str){loc, n}, to, PATH_MAX - 1, &pr) : 414;
    if (st)
        return static_status_plan(st == 400 ? 500 : st, NULL, ctx, plan) ? SITE_RULE_ANSWERED
                                                                         : SITE_RULE_NONE;
    to[pr.len] = '\0';
    rw->path = to;
    rw->len = pr.len;
    rw->slash = pr.trailing_slash;
    rw->status = r->status;
    return SITE_RULE_REWRITE;
}

enum site_rule site_rules_stage(struct runtime *w, const struct vhost *v,
                                const struct http_request *req, const struct req_policy *pol,
                                const char *path, size_t len, bool slash, struct http_str query,
                                struct static_ctx *ctx, struct plan *plan, struct site_rewrite *rw,
                                bool *headers)
{
    const struct config *c = v->cfg;
    const struct rulefile *rs = v->ruleset;
    *headers = false;
    /* the files themselves are the server's, never the site's content */
    if (c->rules_files && !slash &&
        ((len == 10 && memcmp(path, "_redirects", 10) == 0) ||
         (len == 8 && memcmp(path, "_headers", 8) == 0)))
        return static_status_plan(404, NULL, ctx, plan) ? SITE_RULE_ANSWERED : SITE_RULE_NONE;
    if (c->num_deny_ua) {
        struct http_str ua = field_of(req, "user-agent");
        if (ua.p && rulefile_ua_denied(c->deny_ua, c->num_deny_ua, ua.p, ua.len))
            return refuse(&w->stats.rules_ua_refused, false, ctx, plan) ? SITE_RULE_ANSWERED
                                                                        : SITE_RULE_NONE;
    }
    if (!rs)
        return SITE_RULE_NONE;
    struct rulefile_found f;
    rulefile_find(rs, path, len, query.p, query.len, &f);
    *headers = f.headers;
    if (f.access >= 0) {
        const struct peer *p = pol->peer;
        bool known = p && p->known;
        if (rulefile_refuses(&rs->access[f.access], known ? p->family : 0, known ? p->addr : NULL))
            return refuse(&w->stats.rules_access_refused, rs->access[f.access].close, ctx, plan)
                       ? SITE_RULE_ANSWERED
                       : SITE_RULE_NONE;
    }
    if (f.redirect < 0)
        return SITE_RULE_NONE;
    const struct rulefile_redirect *r = &rs->redirects[f.redirect];
    if (!r->force && shadowed(w, c, path, len))
        return SITE_RULE_NONE;
    return apply_redirect(w, r, &f.m, query, ctx, plan, rw);
}

void site_rule_headers(const struct vhost *v, const struct http_request *req, const char *path,
                       size_t len, bool slash, const char *type, bool error, const char *base,
                       size_t base_len, struct static_ctx *ctx)
{
    const struct rulefile *rs = v->ruleset;
    char lines[4096];
    (void)slash; /* a trailing '/' is optional in every pattern */
    if (!rs || !rs->nheaders || (error && !rs->any_errors))
        return;
    /* issue 28's Link lines stay the last ones (the 103's: core/static.h's interim_len) */
    size_t keep = error ? 0 : ctx->interim_len, own = error ? 0 : base_len - keep;
    struct http_str host = req && rs->any_host ? vhost_request_host(req) : (struct http_str){0};
    size_t n = rulefile_headers(rs, host.p, host.len, path, len, type, error, base, own, lines,
                                sizeof(lines));
    if (n == SIZE_MAX || n + keep > ctx->cap / 2)
        return;
    char *at = ctx->buf + ctx->cap - n - keep;
    memcpy(at, lines, n);
    if (keep)
        memmove(at + n, base + own, keep);
    ctx->extra_headers = at;
    ctx->extra_len = n + keep;
    ctx->cap -= n + keep;
    ctx->ok_head = NULL; /* lines of its own: the general writer (as edge_fields) */
    ctx->extra_always = error;
}

/* Issue 28's rules around site_rules: --limit-req first (a 429 before a redirect or a password
 * check spends anything), the CORS fields and Link lines last (after a cache rule chose the
 * extra lines they join). Apart from site_rules: its Location buffers are not probed here. */
static __attribute__((noinline)) enum site_answer
edge_rules(struct runtime *w, const struct vhost *v, const struct http_request *req,
           const struct req_policy *pol, const char *path, size_t len, bool slash,
           struct http_str query, struct static_ctx *ctx, struct plan *plan, struct site_note *note)
{
    char url[PATH_MAX + 4];
    size_t ul = url_path(url, sizeof(url), path, len, slash);
    /* An unknown peer: its connection was accepted before a reload added the limit, when
     * nothing looked its address up (conn_peer): not counted, rather than one key for all */
    bool peer = pol->peer && pol->peer->known;
    if (v->limits && peer && ul && limited(w, v, req, pol->peer, url, ul, ctx, plan))
        return SITE_ANSWERED;
    if (v->proxied && peer) {
        uint32_t ticket = 0;
        int rc = guard_proxied(w, pol->peer, req, &ticket);
        int status = rules_limit_conn(rc == -EBUSY);
        if (status)
            return static_status_plan(status, RULES_RETRY_AFTER, ctx, plan) ? SITE_ANSWERED
                                                                            : SITE_SERVE;
        note->counted = rc > 0 ? ticket : 0;
    }
    if (v->classic && site_rules(w, v, req, pol, path, len, slash, query, ctx, plan))
        return SITE_ANSWERED;
    if (!v->edge || !ul)
        return SITE_SERVE;
    edge_fields(v, req, url, ul, ctx, note);
    return SITE_NOTED;
}

/* --health's answer; out of line, as site_pending's check below, so that the common path's frame
 * sets up nothing. */
__attribute__((noinline)) static bool answer_health(struct runtime *w, struct static_ctx *ctx,
                                                    struct plan *plan, bool *quiet)
{
    static const char ok[] = "ok\n";
    struct static_file f = {.size = 2 + 1, .content_type = "text/plain", .data = ok, .fd = -1};
    *quiet = true; /* a probe every few seconds is not worth a log line */
    ctx->extra_headers = "Cache-Control: no-store\r\n";
    ctx->extra_len = strlen(ctx->extra_headers);
    int status = rules_health(w->draining || w->delaying);
    if (status != 200)
        return static_status_plan(status, NULL, ctx, plan) != 0;
    return static_body_plan(status, &f, ctx, plan) != 0;
}

__attribute__((noinline)) static enum site_answer
answer(struct runtime *w, const struct vhost *v, const struct http_request *req,
       const struct req_policy *pol, const char *path, size_t len, bool slash,
       struct http_str query, struct static_ctx *ctx, struct plan *plan, struct site_note *note)
{
    const char *health = w->cfg->health; /* "/healthz": compared without its '/' */
    if (health && len == w->site->health_len && !slash && memcmp(health + 1, path, len) == 0)
        return answer_health(w, ctx, plan, &note->quiet) ? SITE_ANSWERED : SITE_SERVE;
    if (!v->rules)
        return SITE_SERVE;
    if (v->limits || v->edge || v->proxied)
        return edge_rules(w, v, req, pol, path, len, slash, query, ctx, plan, note);
    return site_rules(w, v, req, pol, path, len, slash, query, ctx, plan) ? SITE_ANSWERED
                                                                          : SITE_SERVE;
}

enum site_answer site_answer(struct runtime *w, const struct vhost *v,
                             const struct http_request *req, const struct req_policy *pol,
                             const char *path, size_t len, bool slash, struct http_str query,
                             struct static_ctx *ctx, struct plan *plan, struct site_note *note)
{
    if (!w->cfg->health && !v->rules)
        return SITE_SERVE; /* the common case: no --health, no site rules */
    return answer(w, v, req, pol, path, len, slash, query, ctx, plan, note);
}

__attribute__((noinline)) static bool
pending_auth(struct runtime *w, const struct http_request *req, const struct req_policy *pol)
{
    const struct vhost *v = site_route(w, req);
    const struct config *cfg = v->cfg;
    if (!cfg->num_auths)
        return false; /* the common case: one branch */
    char path[PATH_MAX], url[PATH_MAX + 4];
    struct path_result pr;
    if (path_normalize(req->target, path, sizeof(path) - 1, &pr) != 0)
        return false;
    size_t ul = url_path(url, sizeof(url), path, pr.len, pr.trailing_slash);
    for (int i = 0; i < cfg->num_auths && ul; i++) {
        size_t pl = strlen(cfg->auths[i].prefix);
        if (ul >= pl && memcmp(url, cfg->auths[i].prefix, pl) == 0) {
            enum auth_verdict verdict = auth_check(w->auth, v->auth[i], req, pol->peer,
                                                   pol->resume.gen ? &pol->resume : NULL);
            /* serve_request answers this very request next: it need not hash it again */
            w->sitew->route.granted = verdict == AUTH_GRANTED ? req : NULL;
            return verdict == AUTH_WAIT;
        }
    }
    return false;
}

bool site_pending(struct runtime *w, const struct http_request *req, const struct req_policy *pol)
{
    w->sitew->route.granted = NULL;
    if (!w->site->any_auth)
        return false; /* the common case: no site has --basic-auth, nothing to route here */
    return pending_auth(w, req, pol);
}
