/* The state directory; see store.h. */
#include "server/acme/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* mkdir -p with 0700 for what it makes. */
static int make_dirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int store_open(struct acme_store *s, const char *path)
{
    int rc = make_dirs(path);
    if (rc)
        return rc;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    struct stat st;
    /* The account key and every certificate key live here: nobody else may list them. */
    if (fstat(fd, &st) != 0 || ((st.st_mode & 077) && fchmod(fd, 0700) != 0)) {
        rc = -errno;
        close(fd);
        return rc;
    }
    s->dir = fd;
    return 0;
}

void store_close(struct acme_store *s)
{
    if (s->dir >= 0)
        close(s->dir);
    s->dir = -1;
}

int store_chown(struct acme_store *s, uid_t uid, gid_t gid)
{
    if (fchown(s->dir, uid, gid) != 0)
        return -errno;
    int fd = openat(s->dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    int rc = 0;
    if (!d) {
        rc = -errno;
        if (fd >= 0)
            close(fd);
        return rc;
    }
    for (struct dirent *e; rc == 0 && (e = readdir(d));)
        if (e->d_type == DT_REG && fchownat(s->dir, e->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
            rc = -errno;
    closedir(d);
    return rc;
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int store_write(struct acme_store *s, const char *name, const void *data, size_t len, mode_t mode)
{
    char tmp[300];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (strchr(name, '/') || (size_t)snprintf(tmp, sizeof(tmp), ".%s.%ld.%ld.tmp", name,
                                              (long)getpid(), (long)ts.tv_nsec) >= sizeof(tmp))
        return -EINVAL;
    int fd = openat(s->dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    int rc = write_all(fd, data, len);
    if (rc == 0 && fchmod(fd, mode) != 0) /* the umask may have narrowed it further */
        rc = -errno;
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(s->dir, tmp, s->dir, name) != 0)
        rc = -errno;
    if (rc != 0)
        unlinkat(s->dir, tmp, 0);
    else if (fsync(s->dir) != 0) /* the rename itself survives a crash */
        rc = -errno;
    return rc;
}

/* fd's contents (closed here) into a malloc'd, NUL-terminated buffer of at most max bytes. */
static int read_fd(int fd, char **data, size_t *len, size_t max)
{
    struct stat st;
    char *buf = NULL;
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        goto out;
    }
    if ((size_t)st.st_size > max) {
        rc = -EFBIG;
        goto out;
    }
    if (!(buf = malloc((size_t)st.st_size + 1))) {
        rc = -ENOMEM;
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : -EIO;
            goto out;
        }
        got += (size_t)n;
    }
    buf[got] = '\0';
    *data = buf;
    *len = got;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}

int store_read(struct acme_store *s, const char *name, char **data, size_t *len, size_t max)
{
    int fd = openat(s->dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    return fd < 0 ? -errno : read_fd(fd, data, len, max);
}

int store_read_path(const char *path, char **data, size_t *len, size_t max)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : read_fd(fd, data, len, max);
}

int store_remove(struct acme_store *s, const char *name)
{
    if (strchr(name, '/'))
        return -EINVAL;
    return unlinkat(s->dir, name, 0) == 0 ? 0 : -errno;
}

int store_list(struct acme_store *s, const char *suffix, long max_age,
               void (*each)(void *arg, const char *name), void *arg)
{
    /* s->dir is O_PATH: a readable descriptor of its own for the listing */
    int fd = openat(s->dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int err = -errno;
        close(fd);
        return err;
    }
    size_t sl = strlen(suffix);
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t nl = strlen(e->d_name);
        struct stat st;
        if (e->d_name[0] == '.' || nl <= sl || strcmp(e->d_name + nl - sl, suffix) != 0 ||
            fstatat(s->dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            now - st.st_mtime > max_age)
            continue;
        each(arg, e->d_name);
    }
    closedir(d);
    return 0;
}

int store_lock(struct acme_store *s, const char *name, int wait_ms)
{
    char file[300];
    if (strchr(name, '/') || (size_t)snprintf(file, sizeof(file), "%s.lock", name) >= sizeof(file))
        return -EINVAL;
    int fd = openat(s->dir, file, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    /* flock, not fcntl locks: held by the open file, so two threads or processes exclude each
     * other alike, and released by the kernel when a holder dies. Polled, so a wait is bounded. */
    for (int waited = 0;; waited += 100) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        int err = errno;
        if (err != EWOULDBLOCK && err != EINTR) {
            close(fd);
            return -err;
        }
        if (waited >= wait_ms) {
            close(fd);
            return -EWOULDBLOCK;
        }
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

void store_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* closing the only fd of the open file releases the flock */
}
