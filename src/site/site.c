/* Document roots, MIME table and the configured sites as one reloadable unit; see site.h. Here
 * a site is built (its roots, the files its options name, its rules files compiled), checked,
 * refcounted and published; a request's routing is route.c's, what its rules answer
 * answer.c's. */
#include "site/site.h"

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
#include "core/rulefile.h"
#include "site/htpasswd.h"
#include "rt/errlog.h"
#include "rt/file.h"

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
