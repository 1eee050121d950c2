/* The plan of the answer serve.c chose: a file's representation (the file itself, a
 * precompressed sibling or a compressed variant, with Vary and Use-As-Dictionary), the plain
 * GET's kept lines and prebuilt answer, the site's error page, and what a response holds
 * while its plan points into it; serve_rep_* for the protocols' field caches. See
 * serve_int.h. */
#include "http/serve.h"
#include "http/serve_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "core/accept.h"
#include "core/static.h"
#include "rt/compress.h"
#include "rt/fcache.h"
#include "rt/guard.h"
#include "site/site.h"
#include "rt/runtime.h"

/* The file name suffix of each precompressed sibling. */
static const char *const variant_suffix[ACCEPT_CODINGS] = {
    [ACCEPT_BR] = ".br",
    [ACCEPT_ZSTD] = ".zst",
    [ACCEPT_GZIP] = ".gz",
};

void job_hold(struct response *r, struct fentry *e)
{
    r->hold[r->hold[0] ? 1 : 0] = e;
}

static void release_holds(struct runtime *w, struct response *r)
{
    for (int i = 0; i < 2; i++) {
        if (r->hold[i])
            fcache_put(w->cache, r->hold[i]);
        r->hold[i] = NULL;
    }
}

struct response *serve_response_get(struct runtime *w)
{
    struct response *r = bufpool_get(&w->outbufs);
    if (r) {
        r->hold[0] = r->hold[1] = NULL;
        r->block = NULL;
        r->note.counted = 0;
        r->note.quiet = false; /* a response that never reaches init_job is logged (a 400, 444) */
    }
    return r;
}

void serve_response_put(struct runtime *w, struct response *r)
{
    if (__builtin_expect(r->note.counted, 0)) /* --limit-conn behind a proxy: one fewer */
        guard_request_done(w, r->note.counted);
    if (r->block) { /* before the holds: the entry owns the block */
        r->block->users--;
        r->block = NULL;
    }
    release_holds(w, r);
    bufpool_put(&w->outbufs, r);
}

static void describe(const struct fentry *e, const char *type, struct static_file *f)
{
    *f = (struct static_file){
        .size = e->size,
        .mtime = e->mtime,
        .etag = e->etag,
        .etag_len = e->etag_len,
        .last_modified = e->last_modified,
        .content_type = type ? type : e->mime,
        .data = e->data,
        .fd = e->fd,
    };
    if (!type && e->rep_len < sizeof(e->rep_headers)) {
        f->rep_headers = e->rep_headers;
        f->rep_len = e->rep_len;
    }
}

/* Whole-path lookup with a suffix appended ("dir/" + "index.html", "x.css" + ".br"). */
struct fentry *job_lookup(struct job *j, const char *path, size_t len, const char *suffix)
{
    char buf[PATH_MAX];
    size_t slen = strlen(suffix);
    if (len + slen >= sizeof(buf))
        return NULL;
    memcpy(buf, path, len);
    memcpy(buf + len, suffix, slen);
    buf[len + slen] = '\0';
    return fcache_get(j->w->cache, buf, len + slen, j->w->now);
}

static void negotiate(struct job *j, struct fentry *e, struct static_file *f);

/* Issue 39: the site's header rules for this response (its type, an error or not), over the
 * extra lines it had before any rule. */
static __attribute__((noinline)) void rule_headers(struct job *j, const char *type, bool err)
{
    j->ctx.extra_headers = j->base_extra;
    j->ctx.extra_len = j->base_len;
    j->ctx.extra_always = false;
    site_rule_headers(j->site, j->req, j->rule_path, j->rule_len, j->rule_slash, type, err,
                      j->base_extra, j->base_len, &j->ctx);
}

void job_error(struct job *j, int status, const char *extra)
{
    const struct config *cfg = j->cfg;
    /* The error replaces whatever plan was being built (one that did not fit the buffer):
     * the files that plan held are no longer needed, and the error page may need a slot. */
    release_holds(j->w, j->r);
    if (__builtin_expect(j->rule_path != NULL, 0))
        rule_headers(j, NULL, true);
    for (int i = 0; i < cfg->num_error_pages; i++) {
        if (cfg->error_pages[i].status != status)
            continue;
        const char *page = cfg->error_pages[i].path;
        struct fentry *e = fcache_get(j->w->cache, page, strlen(page), j->w->now);
        if (e && e->err == 0 && !e->is_dir) {
            struct static_file f;
            job_hold(j->r, e);
            negotiate(j, e, &f); /* a large error page goes compressed too */
            if (static_body_plan(status, &f, &j->ctx, &j->r->plan))
                return;
        } else if (e) {
            fcache_put(j->w->cache, e);
        }
        break;
    }
    if (!static_status_plan(status, extra, &j->ctx, &j->r->plan)) {
        j->ctx.used = 0;
        static_status_plan(500, NULL, &j->ctx, &j->r->plan);
    }
}

/* Bit (1 << enc) for each precompressed sibling of e, refreshed at most once per second. */
static unsigned variants_of(struct job *j, struct fentry *e)
{
    if (e->variants_checked == j->w->now)
        return e->variants;
    unsigned mask = 0;
    for (int i = 0; i < ACCEPT_CODINGS; i++) {
        struct fentry *v = job_lookup(j, e->path, e->path_len, variant_suffix[i]);
        if (v && v->err == 0 && !v->is_dir)
            mask |= 1u << i;
        if (v)
            fcache_put(j->w->cache, v);
    }
    e->variants = (uint8_t)mask;
    e->variants_checked = j->w->now;
    return mask;
}

/* True when e is a body --compress applies to (type, size); memoised in the entry. */
bool job_compressible(struct job *j, struct fentry *e)
{
    const struct config *cfg = j->cfg;
    if (!j->w->compress || !cfg->compress || e->size < cfg->compress_min ||
        e->size > cfg->compress_max)
        return false;
    if (e->compressible < 0)
        e->compressible = e->mime && accept_type_listed(e->mime, cfg->compress_types);
    return e->compressible;
}

/* The --dictionary pattern e's URL path matches, or NULL. */
static const char *dictionary_of(struct job *j, const struct fentry *e)
{
    const struct config *cfg = j->cfg;
    char url[PATH_MAX + 1];
    if (!cfg->num_dictionaries || e->path_len >= sizeof(url) - 1)
        return NULL;
    url[0] = '/';
    memcpy(url + 1, e->path, e->path_len);
    for (int i = 0; i < cfg->num_dictionaries; i++) {
        if (accept_path_match(cfg->dictionaries[i], url, e->path_len + 1))
            return cfg->dictionaries[i];
    }
    return NULL;
}

/* The cached variant `coding` of e when one exists and paid; else asks for it (made now when
 * cheap enough, else off the loop, only when `queue` says so) and returns what is there now. */
struct fentry *job_variant(struct job *j, struct fentry *e, int coding,
                           const unsigned char *dict_hash, const char *pattern, bool queue)
{
    char tag[FCACHE_TAG_MAX];
    size_t tag_len = compress_tag(tag, sizeof(tag), coding, dict_hash);
    struct fentry *v = fcache_variant_get(j->w->cache, e, tag, tag_len);
    if (!v &&
        (queue || (e->data && coding != COMPRESS_DCZ &&
                   compress_cost_ns(coding, e->size) <= COMPRESS_LOOP_NS)) &&
        compress_request(j->w, e, coding, dict_hash, pattern, j->cfg->compress_max) == 0)
        v = fcache_variant_get(j->w->cache, e, tag, tag_len);
    if (v && v->err) { /* compressing did not pay, or the dictionary is unknown */
        fcache_put(j->w->cache, v);
        v = NULL;
    }
    return v;
}

/* The dictionary hash of a usable Available-Dictionary field (RFC 9842 2.2), when the client
 * also accepts dcz; false otherwise (the ordinary codings apply, never an error). */
static bool wants_dcz(struct job *j, unsigned char hash[ACCEPT_DICT_HASH])
{
    const struct http_request *req = j->req;
    if (accept_coding_q(req->accept_encoding, "dcz") == 0)
        return false;
    for (size_t i = 0; i < req->num_headers; i++) {
        if (http_str_ieq(req->headers[i].name, "available-dictionary"))
            return accept_dictionary(req->headers[i].value, hash) == 0;
    }
    return false;
}

/* Describes into f the representation of e to send (already held by the job's response): e,
 * a precompressed sibling of it, or a compressed variant made from it (the sibling wins: the
 * site's author made it), with Vary and Use-As-Dictionary as they apply. */
static void negotiate(struct job *j, struct fentry *e, struct static_file *f)
{
    unsigned mask = variants_of(j, e);
    bool squeeze = job_compressible(j, e);
    const char *pattern = squeeze ? dictionary_of(j, e) : NULL;
    bool chosen = false;

    describe(e, NULL, f);
    if (j->req && (mask || squeeze) && j->req->accept_encoding.p) {
        enum accept_coding order[ACCEPT_CODINGS];
        size_t n = accept_encodings(j->req->accept_encoding, order);
        for (size_t i = 0; i < n && mask && !chosen; i++) {
            if (!(mask & (1u << order[i])))
                continue;
            struct fentry *v = job_lookup(j, e->path, e->path_len, variant_suffix[order[i]]);
            if (v && v->err == 0 && !v->is_dir) {
                describe(v, e->mime, f);
                f->encoding = accept_coding_name(order[i]);
                job_hold(j->r, v);
                chosen = true;
            } else if (v) {
                fcache_put(j->w->cache, v);
            }
        }
        unsigned char hash[ACCEPT_DICT_HASH];
        struct fentry *v = NULL;
        int coding = COMPRESS_DCZ;
        if (!chosen && squeeze && pattern && wants_dcz(j, hash))
            v = job_variant(j, e, COMPRESS_DCZ, hash, pattern, true);
        /* Only the client's first choice is queued; others are used if cached or cheap. */
        for (size_t i = 0; i < n && !chosen && squeeze && !v; i++)
            v = job_variant(j, e, coding = (int)order[i], NULL, NULL, i == 0);
        if (v) {
            describe(v, NULL, f);
            f->encoding = compress_coding_name(coding);
            job_hold(j->r, v);
        }
    }
    if (pattern) {
        f->vary = "Accept-Encoding, Available-Dictionary";
        snprintf(j->use_as_dict, sizeof(j->use_as_dict), "Use-As-Dictionary: match=\"%s\"\r\n",
                 pattern);
        f->more_headers = j->use_as_dict;
    } else {
        f->vary = mask || squeeze ? "Accept-Encoding" : NULL;
    }
}

/* e's prebuilt answer for this second (see struct fblock), made now if need be; NULL when both
 * of e's blocks are still being sent from (the caller then copies). The second block lets a new
 * Date begin while sends of the old one finish. */
static struct fblock *block_of(struct job *j, struct fentry *e, const struct fok *ok)
{
    struct fblock *b = e->block[0];
    if (b && b->wall == j->w->wall && b->all == j->ctx.all_headers)
        return b;
    int slot = !e->block[1] || !e->block[1]->users ? 1 : !b || !b->users ? 0 : -1;
    if (slot < 0)
        return NULL;
    size_t all_len = j->ctx.all_headers ? j->ctx.all_len : 0;
    size_t need = j->ctx.ok_head_len + all_len + ok->len + e->size;
    struct fblock *n = fcache_block(j->w->cache, e, slot, need);
    if (!n)
        return NULL;
    struct static_ctx ctx = j->ctx;
    ctx.buf = n->data;
    ctx.cap = n->cap;
    ctx.used = 0;
    ctx.head = false;
    struct plan p;
    n->wall = INT64_MIN;
    if (!static_ok_plan(ok->data, ok->len, e->data, e->fd, e->size, &ctx, &p) || p.nseg != 1)
        return NULL;
    n->wall = j->w->wall;
    n->all = j->ctx.all_headers;
    n->head_len = p.head_len;
    n->len = p.bytes;
    if (slot == 1) { /* the newer one first */
        e->block[1] = e->block[0];
        e->block[0] = n;
    }
    return n;
}

/* The most common request: a plain GET of a file whose representation does not depend on the
 * request (nothing to negotiate, or a client that accepts no coding). Its header lines come
 * from e->ok, made by static_ok_fields the first time and again when what they depend on
 * changed; static_ok_plan then copies them. Returns false, having done nothing, when the
 * general path must answer. Measured in bench/README.md ("What each optimisation bought"). */
static bool send_plain(struct job *j, struct fentry *e)
{
    if (!static_ok_applies(j->req, &j->ctx))
        return false;
    struct fok *ok = &e->ok;
    unsigned mask = variants_of(j, e);
    /* job_compressible() depends on the site's options and the entry alone: kept with the lines */
    bool squeeze = ok->cfg == j->cfg ? ok->squeeze : job_compressible(j, e);
    if ((mask || squeeze) && j->req->accept_encoding.p)
        return false;
    if (ok->cfg != j->cfg || ok->extra != j->ctx.extra_headers ||
        ok->extra_len != j->ctx.extra_len || ok->variants != mask || ok->squeeze != squeeze) {
        struct static_file f;
        char lines[1024];
        negotiate(j, e, &f); /* e itself: see above */
        size_t n = static_ok_fields(lines, sizeof(lines), &f, &j->ctx);
        if (n < sizeof(lines) && n > ok->cap) {
            char *data = malloc(n);
            if (!data)
                return false;
            free(ok->data);
            ok->data = data;
            ok->cap = n;
        }
        if (n <= ok->cap)
            memcpy(ok->data, lines, n);
        for (int i = 0; i < 2; i++) /* made from the old lines */
            if (e->block[i])
                e->block[i]->wall = INT64_MIN;
        *ok = (struct fok){.data = ok->data,
                           .cap = ok->cap,
                           .len = n < sizeof(lines) ? n : SIZE_MAX, /* SIZE_MAX: did not fit */
                           .cfg = j->cfg,
                           /* a response's own lines (ok_head NULL): never to be matched */
                           .extra = j->ctx.ok_head ? j->ctx.extra_headers : NULL,
                           .extra_len = j->ctx.extra_len,
                           .variants = (uint8_t)mask,
                           .squeeze = squeeze};
    }
    if (ok->len == SIZE_MAX)
        return false;
    job_hold(j->r, e);
    /* A small body, keep-alive HTTP/1.1: the plan points into the entry's answer for this
     * second, and nothing is copied (bench/README.md). */
    if (j->ctx.keep_alive && j->ctx.minor && j->ctx.ok_head && e->data &&
        e->size <= sizeof(j->r->buf)) {
        struct fblock *b = block_of(j, e, ok);
        if (b) {
            b->users++;
            j->r->block = b;
            static_ok_prebuilt(b->data, b->head_len, b->len, &j->ctx, &j->r->plan);
            return true;
        }
    }
    if (!static_ok_plan(ok->data, ok->len, e->data, e->fd, e->size, &j->ctx, &j->r->plan))
        job_error(j, 500, NULL);
    return true;
}

/* Sends file e (already held by the job's response) as negotiate() chooses. */
void job_send_file(struct job *j, struct fentry *e, int status)
{
    struct static_file f;
    if (__builtin_expect(j->rule_path != NULL, 0))
        rule_headers(j, e->mime, status >= 400);
    if (status == 200 && send_plain(j, e))
        return;
    job_hold(j->r, e);
    negotiate(j, e, &f);
    int rc = status == 200 ? static_file_plan(j->req, &f, &j->ctx, &j->r->plan)
                           : static_body_plan(status, &f, &j->ctx, &j->r->plan);
    if (!rc)
        job_error(j, 500, NULL);
}

struct fentry *serve_rep_entry(const struct response *r)
{
    struct fentry *e = r->hold[1] ? r->hold[1] : r->hold[0];
    return e && !e->err && e->rep_len < sizeof(e->rep_headers) ? e : NULL;
}

size_t serve_rep_lines(const struct fentry *e, char *lines)
{
    _Static_assert(SERVE_REP_LINES >= sizeof(e->rep_headers) + 48, "room for Content-Length");
    int n = snprintf(lines, SERVE_REP_LINES, "%.*s", (int)e->rep_len, e->rep_headers);
    /* A variant's Vary and Content-Encoding come between: its length is not kept. */
    if (!e->is_variant)
        n += snprintf(lines + n, SERVE_REP_LINES - (size_t)n, "Content-Length: %llu\r\n",
                      (unsigned long long)e->size);
    return (size_t)n;
}
