/* Document root and MIME table as one reloadable unit; see site.h. */
#include "rt/site.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "rt/file.h"

static struct site *site_new(int root_fd)
{
    struct stat st;
    struct site *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    s->root_fd = root_fd;
    if (fstat(root_fd, &st) == 0) {
        s->dev = st.st_dev;
        s->ino = st.st_ino;
    }
    return s;
}

struct site *site_adopt(struct config *cfg)
{
    struct site *s = site_new(cfg->docroot_fd);
    if (!s)
        return NULL;
    s->mime = cfg->mime_extra;
    memset(&cfg->mime_extra, 0, sizeof(cfg->mime_extra));
    cfg->docroot_fd = -1;
    return s;
}

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

int site_open(const struct config *cfg, struct site **out, char *why, size_t why_len)
{
    int rc, fd = open(cfg->docroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct site *s;

    if (fd < 0) {
        rc = -errno;
        snprintf(why, why_len, "cannot use document root '%s': %s", cfg->docroot, strerror(-rc));
        return rc;
    }
    if (!(s = site_new(fd))) {
        close(fd);
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    if (cfg->mime_file && (rc = config_load_mime(cfg->mime_file, &s->mime, why, why_len)) != 0)
        goto fail;
    for (int i = 0; i < cfg->num_error_pages; i++)
        if ((rc = check_file(fd, "--error-page", cfg->error_pages[i].path, why, why_len)) != 0)
            goto fail;
    if (cfg->fallback && (rc = check_file(fd, "--fallback", cfg->fallback, why, why_len)) != 0)
        goto fail;
    *out = s;
    return 0;

fail:
    site_put(s);
    return rc;
}

int site_moved(const struct config *cfg, const struct site *s)
{
    struct stat st;
    if (stat(cfg->docroot, &st) != 0)
        return -errno;
    return st.st_dev != s->dev || st.st_ino != s->ino;
}

void site_put(struct site *s)
{
    if (!s)
        return;
    unsigned refs = atomic_fetch_sub(&s->refs, 1);
    assert(refs > 0);
    if (refs != 1)
        return;
    if (s->root_fd >= 0)
        close(s->root_fd);
    mime_table_free(&s->mime);
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
