/* --autoindex: a directory's listing as an answer (HTML, or JSON for Accept:
 * application/json): read and rendered off the file cache's entry for the directory, kept with
 * it as a derived entry and compressed through its variants as a file is. See serve_int.h. */
#include "http/serve.h"
#include "http/serve_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "core/accept.h"
#include "core/autoindex.h"
#include "core/static.h"
#include "rt/fcache.h"
#include "rt/file.h"
#include "site/site.h"
#include "rt/runtime.h"

/* A rendered listing is reused for this long while its directory is unchanged. Entries added,
 * removed or renamed change the directory, whose cache entry (and so its listings) is then
 * replaced at its next revalidation, within a second; a file that changes size in place is
 * seen within LISTING_TTL. Without the reuse a huge directory costs a stat per entry and a
 * rendering per request on the worker's loop, stalling its other clients (the figure is in
 * bench/README.md, "Lab notes from code comments"). */
#define LISTING_TTL 5

static void free_entries(struct autoindex_entry *ents, size_t from, size_t n)
{
    for (size_t i = from; i < n; i++)
        free((char *)ents[i].name);
}

/* Reads the directory at path and renders its listing into a new heap buffer (*body, *len).
 * Only the first autoindex_limit entries in listing order are shown, and only they are
 * stat()ed: the names and d_type order the listing, so a huge directory costs a readdir and a
 * sort, not a stat per entry. Returns 0, or the HTTP status of the failure. */
static int render_listing(struct job *j, const char *path, size_t len, enum autoindex_format fmt,
                          const char *url, char **body, size_t *body_len)
{
    int fd = file_open_beneath(j->site->root_fd, len ? path : "", O_DIRECTORY);
    if (fd < 0)
        return fd == -EACCES ? 403 : 404;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return 500;
    }
    struct autoindex_entry *ents = NULL;
    size_t n = 0, cap = 0;
    size_t shown = 0, rest = 0; /* ents[0, shown) are listed; ents[rest, n) are not looked at */
    int status = 500;
    struct dirent *de;
    struct stat st;

    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        struct autoindex_entry e = {.mtime = INT64_MIN}; /* INT64_MIN: not stat()ed yet */
        if (de->d_type == DT_DIR || de->d_type == DT_REG) {
            e.is_dir = de->d_type == DT_DIR;
        } else { /* a link or an unknown type: what it leads to decides its place */
            if (fstatat(dirfd(d), de->d_name, &st, 0) != 0)
                continue; /* vanished, or a dangling link: not listed */
            e = (struct autoindex_entry){.is_dir = S_ISDIR(st.st_mode),
                                         .size = (uint64_t)st.st_size,
                                         .mtime = st.st_mtim.tv_sec};
        }
        if (n == cap) {
            struct autoindex_entry *p = realloc(ents, (cap = cap ? 2 * cap : 64) * sizeof(*p));
            if (!p)
                goto out;
            ents = p;
        }
        e.name_len = strlen(de->d_name);
        char *name = malloc(e.name_len + 1);
        if (!name)
            goto out;
        memcpy(name, de->d_name, e.name_len + 1);
        e.name = name;
        ents[n++] = e;
    }
    autoindex_sort(ents, n);
    size_t limit = j->cfg->autoindex_limit;
    for (; rest < n && shown < limit; rest++) {
        struct autoindex_entry *e = &ents[rest];
        if (e->mtime == INT64_MIN) {
            if (fstatat(dirfd(d), e->name, &st, 0) != 0) {
                free((char *)e->name); /* vanished since readdir */
                continue;
            }
            e->size = (uint64_t)st.st_size;
            e->mtime = st.st_mtim.tv_sec;
        }
        ents[shown++] = *e;
    }
    struct http_str url_path = {url, strlen(url)};
    size_t need = autoindex_render(NULL, 0, fmt, url_path, ents, shown, n - rest);
    if (!(*body = malloc(need ? need : 1)))
        goto out;
    autoindex_render(*body, need, fmt, url_path, ents, shown, n - rest);
    *body_len = need;
    status = 0;
out:
    free_entries(ents, 0, shown);
    free_entries(ents, rest, n);
    free(ents);
    closedir(d);
    return status;
}
/* --autoindex: answers with dir's listing (HTML, or JSON for Accept: application/json), kept
 * with dir in the file cache and compressed through its variants as a file is (the first
 * request for a coding may get identity while the variant is made off the loop). Takes the
 * caller's reference to dir. */
void job_listing(struct job *j, struct fentry *dir, const char *path, size_t len)
{
    enum autoindex_format fmt = accept_prefers(j->req->accept, "application/json", "text/html")
                                    ? AUTOINDEX_JSON
                                    : AUTOINDEX_HTML;
    struct fentry *le = dir->derived[fmt];
    if (le && j->w->now - le->checked < LISTING_TTL) {
        fcache_hold(le);
    } else {
        char url[PATH_MAX + 2];
        url[0] = '/';
        memcpy(url + 1, path, len);
        url[len + 1] = len ? '/' : '\0';
        url[len + 2] = '\0';
        char *body;
        size_t body_len;
        int status = render_listing(j, path, len, fmt, url, &body, &body_len);
        le = status ? NULL
                    : fcache_derive(j->w->cache, dir, fmt, body, body_len,
                                    fmt == AUTOINDEX_JSON ? "application/json"
                                                          : "text/html; charset=utf-8",
                                    j->w->now);
        if (!le) {
            fcache_put(j->w->cache, dir);
            job_error(j, status ? status : 500, NULL);
            return;
        }
    }
    /* One too large to keep is rendered for each request: a variant of it would not be found
     * again, so none is made. */
    bool kept = dir->derived[fmt] == le;
    fcache_put(j->w->cache, dir);
    job_hold(j->r, le);
    struct static_file f = {
        .size = le->size,
        .content_type = le->mime,
        .data = le->data,
        .fd = -1,
        .vary = "Accept", /* HTML or JSON */
    };
    if (kept && job_compressible(j, le)) {
        enum accept_coding order[ACCEPT_CODINGS];
        size_t n = accept_encodings(j->req->accept_encoding, order);
        struct fentry *v = NULL;
        size_t i = 0;
        /* Only the client's first choice is queued, as in negotiate(). */
        for (; i < n && !v; i++)
            v = job_variant(j, le, (int)order[i], NULL, NULL, i == 0);
        if (v) {
            job_hold(j->r, v);
            f.size = v->size;
            f.data = v->data;
            f.encoding = accept_coding_name(order[i - 1]);
        }
        f.vary = "Accept, Accept-Encoding";
    }
    if (!static_body_plan(200, &f, &j->ctx, &j->r->plan))
        job_error(j, 500, NULL);
}
