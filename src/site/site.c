/* Document roots, MIME table and the configured sites as one reloadable unit; see site.h. */
#include "site/site.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
#include "site/htpasswd.h"
#include "rt/errlog.h"
#include "rt/fcache.h"
#include "rt/runtime.h"
#include "rt/file.h"
#include "conn/transport.h"

/* A file the configuration names below the root must be readable if it is there; one that is
 * missing was allowed at start too (the error page or fallback then is the built-in answer). */
static int check_file(int root_fd, const char *opt, const char *path, char *why, size_t why_len)
{
    int fd = file_open_beneath(root_fd, path, O_NONBLOCK);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (fd == -ENOENT || fd == -ENOTDIR)
        return 0;
    snprintf(why, why_len, "%s /%s: %s", opt, path, strerror(-fd));
    return fd;
}

/* The site's header lines without any Cache-Control, then "Cache-Control: value". */
static char *cache_block(const struct config *c, const char *value, size_t *len)
{
    size_t vl = strlen(value), cap = c->extra_headers_len + vl + sizeof("Cache-Control: \r\n");
    char *out = malloc(cap), *o = out;
    if (!out)
        return NULL;
    for (const char *p = c->extra_headers, *end = p + c->extra_headers_len; p && p < end;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        size_t n = eol ? (size_t)(eol - p) + 1 : (size_t)(end - p);
        if (strncasecmp(p, "cache-control:", 14) != 0) {
            memcpy(o, p, n);
            o += n;
        }
        p += n;
    }
    o += sprintf(o, "Cache-Control: %s\r\n", value);
    *len = (size_t)(o - out);
    return out;
}

/* ---- issue 39: rules files (on the thread that builds the site: never a worker's loop) ---- */

/* A _redirects or _headers file larger than this is not read (Cloudflare's 2,100 redirects of
 * 1,000 bytes each fit twice). */
#define RULES_FILE_MAX (4u << 20)

static const char *const rule_file[2] = {"_redirects", "_headers"};

struct rules_report {
    bool to_stderr; /* --check-config; else the error log */
    int count;
};

static void rules_bad(void *arg, const char *name, int line, const char *why)
{
    struct rules_report *r = arg;
    r->count++;
    if (r->to_stderr)
        fprintf(stderr, "ringhttpd: %s:%d: %s\n", name, line, why);
    else
        errlog(ERRLOG_WARN, "%s:%d: %s (the line is ignored, the others apply)", name, line, why);
}

static void stamp_of(int root_fd, const char *name, struct site_stamp *st)
{
    struct stat sb;
    *st = (struct site_stamp){0};
    if (fstatat(root_fd, name, &sb, 0) != 0)
        return;
    *st = (struct site_stamp){.present = true,
                              .dev = sb.st_dev,
                              .ino = sb.st_ino,
                              .mtime_ns = sb.st_mtim.tv_sec * 1000000000ll + sb.st_mtim.tv_nsec,
                              .size = sb.st_size};
}

/* The file name beneath root_fd, read whole into *text (NULL and 0 when there is none);
 * 0, or -errno with the reason reported. */
static int read_rule_file(int root_fd, const char *name, const char *shown, char **text,
                          size_t *len, struct rules_report *rep)
{
    struct stat st;
    *text = NULL;
    *len = 0;
    int fd = file_open_beneath(root_fd, name, O_NONBLOCK);
    if (fd == -ENOENT || fd == -ENOTDIR)
        return 0;
    int rc = fd < 0 ? fd : fstat(fd, &st) != 0 ? -errno : 0;
    if (rc == 0 && !S_ISREG(st.st_mode))
        rc = -EISDIR;
    if (rc == 0 && (uint64_t)st.st_size > RULES_FILE_MAX)
        rc = -EFBIG;
    if (rc == 0 && !(*text = malloc((size_t)st.st_size + 1)))
        rc = -ENOMEM;
    if (rc == 0 && (rc = file_read_all(fd, *text, (uint64_t)st.st_size)) == 0)
        *len = (size_t)st.st_size;
    if (fd >= 0)
        close(fd);
    if (rc != 0) {
        free(*text);
        *text = NULL;
        rules_bad(rep, shown, 0,
                  rc == -EFBIG    ? "larger than 4 MiB: not read"
                  : rc == -EISDIR ? "not a file"
                                  : strerror(-rc));
    }
    return rc;
}

/* Compiles c's rules (the files beneath root_fd when rules-files is on, then its own lines)
 * into *out (its block in *mem); both NULL when there are none. stamps, when given, get what
 * the files were. 0 or -ENOMEM. */
static int compile_rules(const struct config *c, int root_fd, const struct rulefile **out,
                         void **mem, struct site_stamp *stamps, struct rules_report *rep)
{
    static const char *const opt[3] = {"--redirects", "--headers", "--access"};
    char *text[2] = {NULL, NULL};
    char shown[2][PATH_MAX + 16];
    size_t n = 0, lines = 0;
    int rc = 0;
    *out = NULL;
    *mem = NULL;
    for (int k = 0; k < 3; k++)
        lines += (size_t)c->num_rule_lines[k];
    struct rulefile_src *srcs = calloc(lines + 2, sizeof(*srcs));
    if (!srcs)
        return -ENOMEM;
    for (int f = 0; f < 2 && c->rules_files; f++) {
        size_t len;
        if (stamps)
            stamp_of(root_fd, rule_file[f], &stamps[f]);
        snprintf(shown[f], sizeof(shown[f]), "%s/%s", c->docroot ? c->docroot : ".", rule_file[f]);
        if (read_rule_file(root_fd, rule_file[f], shown[f], &text[f], &len, rep) == -ENOMEM)
            rc = -ENOMEM;
        if (text[f])
            srcs[n++] =
                (struct rulefile_src){(enum rulefile_kind)f, shown[f], text[f], len, 1, false};
    }
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < c->num_rule_lines[k]; i++) {
            bool file = c->rule_at[k][i] > 0 && c->config_file;
            srcs[n++] = (struct rulefile_src){
                (enum rulefile_kind)k,       file ? c->config_file : opt[k], c->rule_lines[k][i],
                strlen(c->rule_lines[k][i]), file ? c->rule_at[k][i] : 1,    true};
        }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t need = 0;
    if (n && !rc) {
        need = rulefile_compile(srcs, n, NULL, 0, out, NULL, NULL);
        if (!(*mem = malloc(need)))
            rc = -ENOMEM;
        else if (rulefile_compile(srcs, n, *mem, need, out, rules_bad, rep) != need || !*out)
            rc = -ENOMEM; /* cannot happen: the same texts, the size they asked for */
        if (rc) {
            free(*mem);
            *mem = NULL;
            *out = NULL;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        /* the figures README's "Rules files" quotes (load time, memory per rule) */
        if (*out && !rep->to_stderr)
            errlog(ERRLOG_NOTICE,
                   "%s: rules: %u redirects, %u header rules, %u access rules, %u lines "
                   "ignored; compiled in %.2f ms into %zu KiB",
                   c->docroot ? c->docroot : ".", (*out)->nredirects, (*out)->nheaders,
                   (*out)->naccess, (*out)->nbad,
                   (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
                   need / 1024);
    }
    free(text[0]);
    free(text[1]);
    free(srcs);
    return rc;
}

int site_check_rules(const struct config *cfg)
{
    struct rules_report rep = {.to_stderr = true};
    int n = cfg->num_sites ? cfg->num_sites : 1;
    for (int i = 0; i < n; i++) {
        const struct config *c = cfg->num_sites ? &cfg->sites[i] : cfg;
        if (!c->rules_files)
            continue;
        int fd = open(c->docroot ? c->docroot : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, "ringhttpd: %s: %s (its rules files are not checked)\n", c->docroot,
                    strerror(errno));
            rep.count++;
            continue;
        }
        const struct rulefile *rs;
        void *mem;
        if (compile_rules(c, fd, &rs, &mem, NULL, &rep) != 0)
            rep.count++;
        free(mem);
        close(fd);
    }
    return rep.count;
}

/* Opens v's root (or takes fd >= 0) and what its options name. */
static int vhost_open(struct vhost *v, const struct config *c, int fd, uint32_t id, char *why,
                      size_t why_len)
{
    struct stat st;
    int rc = 0;
    v->cfg = c;
    v->id = id;
    v->root_fd = fd >= 0 ? fd : open(c->docroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (v->root_fd < 0) {
        rc = -errno;
        snprintf(why, why_len, "cannot use document root '%s': %s", c->docroot, strerror(-rc));
        return rc;
    }
    if (fstat(v->root_fd, &st) == 0) {
        v->dev = st.st_dev;
        v->ino = st.st_ino;
    }
    for (int i = 0; i < c->num_error_pages && !rc; i++)
        rc = check_file(v->root_fd, "--error-page", c->error_pages[i].path, why, why_len);
    for (int i = 0; i < c->num_fallbacks && !rc; i++)
        rc = check_file(v->root_fd, "--fallback", c->fallbacks[i].path, why, why_len);
    for (int i = 0; i < c->num_cache_rules && !rc; i++)
        if (!(v->cache_headers[i] = cache_block(c, c->cache_rules[i].value, &v->cache_len[i])))
            rc = -ENOMEM;
    for (int i = 0; i < c->num_auths && !rc; i++)
        rc = auth_file_load(c->auths[i].htpasswd, &v->auth[i], why, why_len);
    if (!rc && v->types == &v->own)
        rc = config_load_mime(c->mime_file, &v->own, why, why_len);
    if (!rc &&
        (c->rules_files || c->num_rule_lines[0] || c->num_rule_lines[1] || c->num_rule_lines[2])) {
        struct rules_report rep = {.to_stderr = false};
        rc = compile_rules(c, v->root_fd, &v->ruleset, &v->ruleset_mem, v->stamp, &rep);
    }
    v->ruled = v->ruleset || c->num_deny_ua || c->rules_files;
    v->limits = c->limit_req_on || c->num_limit_req_for;
    v->edge = c->num_cors || c->num_hints || c->limit_rate;
    v->classic = c->canonical_host || c->num_redirects || c->num_auths || c->num_cache_rules;
    v->rules = v->classic || v->limits || v->edge;
    snprintf(v->challenge, sizeof(v->challenge),
             "WWW-Authenticate: Basic realm=\"%.255s\", charset=\"UTF-8\"\r\n", c->auth_realm);
    if (rc == -ENOMEM)
        snprintf(why, why_len, "out of memory");
    return rc;
}

/* A root directory's fd, shared by the sites of successive reloads that name the same path
 * while it is the same directory (issue 40: 10,000 sites held 10,000 fds, and a reload 10,000
 * more while the old ones lived, beyond RLIMIT_NOFILE). */
struct root_dir {
    atomic_uint refs;
    int fd;
};

static void root_put(struct root_dir *r)
{
    if (r && atomic_fetch_sub(&r->refs, 1) == 1) {
        close(r->fd);
        free(r);
    }
}

static void vhost_close(struct vhost *v)
{
    if (v->dir)
        root_put(v->dir);
    else if (v->root_fd >= 0)
        close(v->root_fd);
    for (int i = 0; i < CONFIG_MAX_RULES; i++) {
        free(v->cache_headers[i]);
        auth_file_free(v->auth[i]);
    }
    free(v->ruleset_mem);
    mime_table_free(&v->own);
}

/* v's root: prev's vhost at the same place when it names the same path and that path is still
 * the same directory (its fd shared), else opened now. 0 or -errno with why. */
static int root_of(struct vhost *v, const struct config *c, const struct site *prev, int i,
                   char *why, size_t why_len)
{
    const struct vhost *p = prev && i < prev->nvh ? &prev->vh[i] : NULL;
    struct stat st;
    if (p && p->dir && strcmp(p->cfg->docroot, c->docroot) == 0 && stat(c->docroot, &st) == 0 &&
        st.st_dev == p->dev && st.st_ino == p->ino) {
        atomic_fetch_add(&p->dir->refs, 1);
        v->dir = p->dir;
        v->root_fd = p->dir->fd;
        return 0;
    }
    int fd = v->root_fd >= 0 ? v->root_fd : open(c->docroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int rc = -errno;
        snprintf(why, why_len, "cannot use document root '%s': %s", c->docroot, strerror(-rc));
        return rc;
    }
    v->root_fd = fd;
    if (!(v->dir = malloc(sizeof(*v->dir)))) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    atomic_init(&v->dir->refs, 1);
    v->dir->fd = fd;
    return 0;
}

/* A site for cfg (its sites, or itself as the one site); root_fd >= 0 is the top level's
 * already open root, taken over; prev (the site serving now, or NULL) lends its roots. */
static int build(const struct config *cfg, int root_fd, const struct site *prev, struct site **out,
                 char *why, size_t why_len)
{
    struct site *s = calloc(1, sizeof(*s));
    int n = cfg->num_sites ? cfg->num_sites : 1, names = 0, rc = -ENOMEM;
    if (!s || !(s->vh = calloc((size_t)n, sizeof(*s->vh)))) {
        free(s);
        if (root_fd >= 0)
            close(root_fd);
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    atomic_init(&s->refs, 1);
    for (int i = 0; i < n; i++)
        s->vh[i].root_fd = -1;
    if (cfg->num_sites && root_fd >= 0)
        close(root_fd); /* the top level's root is not served when sites are */
    else
        s->vh[0].root_fd = root_fd; /* closed with the site from here on */
    for (int i = 0; i < cfg->num_sites; i++) {
        names += cfg->sites[i].num_hosts;
        if (cfg->sites[i].is_default)
            s->dflt = i;
    }
    size_t nslots = vhost_slots_for((size_t)names);
    if (!(s->slots = calloc(nslots, sizeof(*s->slots)))) {
        snprintf(why, why_len, "out of memory");
        goto fail;
    }
    vhost_table_init(&s->hosts, s->slots, nslots);
    s->nvh = n;
    for (int i = 0; i < n; i++) {
        const struct config *c = cfg->num_sites ? &cfg->sites[i] : cfg;
        /* a site's --mime-types other than the top level's is its own table */
        bool own = c != cfg && c->mime_file &&
                   (!cfg->mime_file || strcmp(c->mime_file, cfg->mime_file) != 0);
        s->vh[i].types = own ? &s->vh[i].own : &s->mime;
        if ((rc = root_of(&s->vh[i], c, prev, i, why, why_len)) != 0 ||
            (rc = vhost_open(&s->vh[i], c, s->vh[i].root_fd, (uint32_t)i, why, why_len)) != 0)
            goto fail;
        /* --limit-conn and --real-ip-from are the process's: every site counts a proxy's
         * requests for their forwarded address */
        s->vh[i].proxied = cfg->limit_conn && cfg->num_real_ip;
        s->vh[i].rules |= s->vh[i].proxied;
        s->any_auth |= c->num_auths > 0;
        for (int h = 0; h < c->num_hosts; h++)
            if (vhost_table_add(&s->hosts, c->hosts[h], i) != 0) {
                snprintf(why, why_len, "host '%s' is named twice", c->hosts[h]);
                rc = -EINVAL;
                goto fail;
            }
    }
    s->health_len = cfg->health ? strlen(cfg->health) - 1 : 0;
    s->root_fd = s->vh[s->dflt].root_fd;
    s->dev = s->vh[s->dflt].dev;
    s->ino = s->vh[s->dflt].ino;
    *out = s;
    return 0;

fail:
    site_put(s);
    return rc;
}

struct site *site_adopt(struct config *cfg)
{
    struct site *s;
    char why[512] = "";
    int fd = cfg->docroot_fd;
    cfg->docroot_fd = -1;
    if (build(cfg, fd, NULL, &s, why, sizeof(why)) != 0) {
        fprintf(stderr, "ringhttpd: %s\n", why);
        return NULL;
    }
    s->mime = cfg->mime_extra;
    memset(&cfg->mime_extra, 0, sizeof(cfg->mime_extra));
    return s;
}

int site_open(const struct config *cfg, const struct site *prev, struct site **out, char *why,
              size_t why_len)
{
    struct config *fresh = NULL;
    struct site *s;
    int rc;

    if (cfg->config_file) { /* SIGHUP re-reads the file, the command line over it */
        char note[512] = "";
        if (config_reread(cfg, &fresh, note, sizeof(note)) != 0) {
            snprintf(why, why_len, "%s", note);
            return -EINVAL;
        }
        if (note[0])
            errlog(ERRLOG_WARN, "reload: %s", note);
    }
    if ((rc = build(fresh ? fresh : cfg, -1, prev, &s, why, why_len)) != 0) {
        config_destroy(fresh);
        return rc;
    }
    s->owned = fresh;
    if (cfg->mime_file && (rc = config_load_mime(cfg->mime_file, &s->mime, why, why_len)) != 0) {
        site_put(s);
        return rc;
    }
    *out = s;
    return 0;
}

int site_check_roots(const struct site *s, const char *who, char *why, size_t why_len)
{
    for (int i = 0; i < s->nvh; i++) {
        const char *root = s->vh[i].cfg->docroot;
        int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            continue;
        }
        int err = errno;
        /* A root the permissions let us read but whose open is refused lies outside what the
         * Landlock domain allows, and no process can widen its own domain. Either would serve
         * 403 to every request, with nothing logged. */
        if (err == EACCES && file_refused_by_policy(root, R_OK | X_OK))
            snprintf(why, why_len,
                     "document root '%s' is outside the directories Landlock let this process "
                     "read when it started (those holding the start's roots and files); "
                     "restart ringhttpd to serve it",
                     root);
        else if (err == EACCES)
            snprintf(why, why_len,
                     "document root '%s': %s cannot read it (Permission denied); give that user "
                     "read and search permission on it and the directories above it",
                     root, who);
        else
            snprintf(why, why_len, "cannot use document root '%s': %s", root, strerror(err));
        return -err;
    }
    return 0;
}

int site_moved(const struct config *cfg, const struct site *s)
{
    struct stat st;
    (void)cfg;
    for (int i = 0; i < s->nvh; i++) {
        if (stat(s->vh[i].cfg->docroot, &st) != 0)
            return -errno;
        if (st.st_dev != s->vh[i].dev || st.st_ino != s->vh[i].ino)
            return 1;
        /* a _redirects or _headers changed in place: the site is built again with them, as
         * for a moved root (its files and rules then switch together) */
        for (int f = 0; f < 2 && s->vh[i].cfg->rules_files; f++) {
            struct site_stamp now;
            stamp_of(s->vh[i].root_fd, rule_file[f], &now);
            if (memcmp(&now, &s->vh[i].stamp[f], sizeof(now)) != 0)
                return 1;
        }
    }
    return 0;
}

void site_put(struct site *s)
{
    if (!s)
        return;
    unsigned refs = atomic_fetch_sub(&s->refs, 1);
    assert(refs > 0);
    if (refs != 1)
        return;
    for (int i = 0; i < s->nvh; i++)
        vhost_close(&s->vh[i]);
    free(s->vh);
    free(s->slots);
    mime_table_free(&s->mime);
    config_destroy(s->owned);
    free(s);
}

/* ---- per request (worker thread) ---- */

/* {host} roots (issue 40): the directories of the hosts asked for lately, per worker, in a
 * direct-mapped table (a host evicts the one in its slot: bounded, and a flood of random names
 * costs a slot each, never memory). Each (host, directory) gets a cache id of its own, never
 * reused, so no host is ever served another's cached file. */
#define HOST_ROOTS 256
#define HOST_ROOT_ID0 0x80000000u /* above every vhost id (sites are counted below 2^23) */

struct host_root {
    const struct vhost *v; /* the {host} site it is for, under gen */
    unsigned gen;
    int64_t checked; /* w->now when it was opened or looked up (again each second) */
    int fd;          /* its directory, or -1: none there */
    uint32_t id;
    dev_t dev;
    ino_t ino;
    uint8_t len;
    char name[HOST_ROOT_NAME_MAX];
};

/* Site's per-worker state: the last Host routed and the site it named (a keep-alive client
 * names the same one request after request, and a match costs a memcmp instead of a lookup),
 * and the request site_pending found verified. */
struct site_worker {
    struct host_root *host_roots; /* HOST_ROOTS of them, made at the first {host} request */
    uint32_t next_id;
    struct {
        char host[64];
        uint8_t len;
        int32_t vh;
        unsigned gen; /* w->site_gen it was routed under; 0: none */
        /* site_pending found this request's credentials verified: serve's check is done */
        const struct http_request *granted;
    } route;
    char rewrite[PATH_MAX]; /* a rewrite's target (struct site_rewrite), its request's only */
};

struct site_worker *site_worker_new(void)
{
    return calloc(1, sizeof(struct site_worker));
}

void site_worker_free(struct site_worker *sw)
{
    for (int i = 0; sw && sw->host_roots && i < HOST_ROOTS; i++)
        if (sw->host_roots[i].fd >= 0)
            close(sw->host_roots[i].fd);
    if (sw)
        free(sw->host_roots);
    free(sw);
}

/* Whether key[0..n) (vhost_key's: lower case, no port, no trailing dot, only host bytes) may
 * name a directory: one path component, not hidden, not "." or "..", a DNS name's length. */
static bool host_component(const char *key, size_t n)
{
    return n > 0 && n < HOST_ROOT_NAME_MAX && key[0] != '.' && !memchr(key, '/', n);
}

int site_host_root(struct runtime *w, const struct vhost *v, const struct http_request *req)
{
    struct site_worker *sw = w->sitew;
    char key[VHOST_NAME_MAX + 1];
    struct http_str h = req ? vhost_request_host(req) : (struct http_str){NULL, 0};
    size_t n = h.p ? vhost_key(h, key) : 0;
    if (!host_component(key, n))
        return -EINVAL;
    if (!sw->host_roots) {
        if (!(sw->host_roots = calloc(HOST_ROOTS, sizeof(*sw->host_roots))))
            return -ENOMEM;
        for (int i = 0; i < HOST_ROOTS; i++)
            sw->host_roots[i].fd = -1;
        sw->next_id = HOST_ROOT_ID0;
    }
    uint32_t hash = 2166136261u;
    for (size_t i = 0; i < n; i++)
        hash = (hash ^ (unsigned char)key[i]) * 16777619u;
    struct host_root *r = &sw->host_roots[hash & (HOST_ROOTS - 1)];
    bool same = r->v == v && r->gen == w->site_gen && r->len == n && memcmp(r->name, key, n) == 0;
    /* Looked up again once a second: a host's directory made (or removed) since is seen then,
     * as the file cache sees its files change. */
    if (!same || r->checked != w->now) {
        char path[HOST_ROOT_NAME_MAX + PATH_MAX];
        int len = snprintf(path, sizeof(path), "%.*s%s", (int)n, key, v->cfg->host_root);
        int fd = len > 0 && (size_t)len < sizeof(path)
                     ? file_open_beneath(v->root_fd, path, O_DIRECTORY)
                     : -ENAMETOOLONG;
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) != 0) {
            close(fd);
            fd = -errno;
        }
        bool kept = same && r->fd >= 0 && fd >= 0 && st.st_dev == r->dev && st.st_ino == r->ino;
        if (r->fd >= 0)
            close(r->fd);
        *r = (struct host_root){.v = v,
                                .gen = w->site_gen,
                                .checked = w->now,
                                .fd = fd,
                                .id = kept ? r->id : sw->next_id++,
                                .len = (uint8_t)n};
        if (sw->next_id < HOST_ROOT_ID0) /* wrapped, after 2^31 directories: start again */
            sw->next_id = HOST_ROOT_ID0;
        memcpy(r->name, key, n);
        if (fd >= 0) {
            r->dev = st.st_dev;
            r->ino = st.st_ino;
        } else {
            r->fd = -1;
        }
    }
    if (r->fd < 0)
        return -ENOENT;
    fcache_root(w->cache, r->id, r->fd, v->types);
    return 0;
}

/* The vhost a request's Host names among several sites; out of line so that the one-site path's
 * frame has no Host key buffer to set up. */
__attribute__((noinline)) static const struct vhost *route_host(struct runtime *w,
                                                                const struct http_request *req)
{
    const struct site *s = w->site;
    struct site_worker *sw = w->sitew;
    const struct vhost *v = &s->vh[s->dflt];
    struct http_str h = vhost_request_host(req);
    if (h.p && h.len == sw->route.len && sw->route.gen == w->site_gen &&
        memcmp(h.p, sw->route.host, h.len) == 0) {
        v = &s->vh[sw->route.vh];
    } else {
        char key[VHOST_NAME_MAX + 1];
        size_t n = vhost_key(h, key);
        int i = n ? vhost_lookup(&s->hosts, key, n) : -1;
        if (i >= 0)
            v = &s->vh[i];
        if (h.p && h.len <= sizeof(sw->route.host)) {
            memcpy(sw->route.host, h.p, h.len);
            sw->route.len = (uint8_t)h.len;
            sw->route.vh = (int32_t)(v - s->vh);
            sw->route.gen = w->site_gen;
        }
    }
    return v;
}

const struct vhost *site_route(struct runtime *w, const struct http_request *req)
{
    const struct site *s = w->site;
    const struct vhost *v = req && s->nvh > 1 ? route_host(w, req) : &s->vh[s->dflt];
    fcache_root(w->cache, v->id, v->root_fd, v->types);
    return v;
}

/* Whether a process-level certificate x may answer for req's Host: none, an address (IPv6's
 * in brackets), the last host found named (inet_pton and the certificate's check cost ~200
 * instructions and more), or a name the certificate holds. */
static bool host_named(struct conn_cert *x, const struct http_request *req)
{
    char key[VHOST_NAME_MAX + 1];
    size_t n = vhost_key(vhost_request_host(req), key);
    if (n == 0 || key[0] == '[' || (n == x->ok_host_len && memcmp(key, x->ok_host, n) == 0))
        return true;
    struct in_addr a4;
    key[n] = '\0';
    if (inet_pton(AF_INET, key, &a4) != 1 && !x->ops->names(x->t, key, n))
        return false;
    if (n <= sizeof(x->ok_host)) {
        memcpy(x->ok_host, key, n);
        x->ok_host_len = (uint8_t)n;
    }
    return true;
}

/* A connection's first request to v (or any, with process-level pairs among several). Kept out
 * of line so that the fast path's frame has no Host key buffer to set up. */
__attribute__((noinline)) static bool misdirected(struct runtime *w, const struct vhost *v,
                                                  const struct http_request *req,
                                                  struct conn_cert *x)
{
    const struct site *s = w->site;
    const char *name = x->ops->site_name ? x->ops->site_name(x->t) : NULL;
    bool ok;
    if (name) { /* a site's own certificate: the request must be routed to that site */
        char key[VHOST_NAME_MAX + 1];
        size_t n = vhost_key((struct http_str){name, strlen(name)}, key);
        int i = n ? vhost_lookup(&s->hosts, key, n) : -1;
        ok = v == &s->vh[i >= 0 ? i : s->dflt];
    } else if (x->ops->only(x->t)) { /* no other certificate to be had: never 421 */
        ok = true;
    } else { /* a process-level certificate among several: it must name the Host */
        return !host_named(x, req); /* which caches its own verdict */
    }
    if (ok) {
        x->ok_site = v;
        x->ok_gen = w->site_gen;
    }
    return !ok;
}

bool site_misdirected(struct runtime *w, const struct vhost *v, const struct http_request *req,
                      struct conn_cert *x)
{
    if (v == x->ok_site && x->ok_gen == w->site_gen)
        return false; /* the connection's every request after its first */
    return misdirected(w, v, req, x);
}

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

void site_slot_init(struct site_slot *slot, struct site *first)
{
    pthread_mutex_init(&slot->lock, NULL);
    slot->cur = first;
    atomic_init(&slot->gen, 1);
}

void site_publish(struct site_slot *slot, struct site *s)
{
    pthread_mutex_lock(&slot->lock);
    struct site *old = slot->cur;
    slot->cur = s;
    atomic_fetch_add(&slot->gen, 1);
    pthread_mutex_unlock(&slot->lock);
    site_put(old);
}

struct site *site_acquire(struct site_slot *slot, unsigned *gen)
{
    pthread_mutex_lock(&slot->lock);
    struct site *s = slot->cur;
    atomic_fetch_add(&s->refs, 1);
    *gen = atomic_load(&slot->gen);
    pthread_mutex_unlock(&slot->lock);
    return s;
}

void site_slot_fini(struct site_slot *slot)
{
    site_put(slot->cur);
    slot->cur = NULL;
    pthread_mutex_destroy(&slot->lock);
}
