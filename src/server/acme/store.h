/* store: the ACME state directory (--acme-state): created 0700, files written atomically (a
 * temporary file, fsync, rename, fsync of the directory) with the mode asked for, read whole,
 * and per-certificate locks (flock on a file of their own) so several processes sharing the
 * directory order each certificate once.
 * Must not: follow anything outside the directory it was opened on (every path is relative to
 * its fd), or be used on a worker's thread (it blocks on the disk and on other processes).
 * Ownership: struct acme_store owns its directory fd; a lock is an fd its holder closes. */
#ifndef ACME_STORE_H
#define ACME_STORE_H

#include <stddef.h>
#include <sys/types.h>

struct acme_store {
    int dir; /* O_PATH|O_DIRECTORY of the state directory */
};

/* Creates path (and its parents, 0700 each one made) when missing, and opens it; a directory
 * that exists with group or other permissions is narrowed to 0700. 0 or -errno. */
int store_open(struct acme_store *s, const char *path);
void store_close(struct acme_store *s);

/* Hands the directory and every file in it to uid:gid (started as root, serving as --user):
 * 0 or -errno. */
int store_chown(struct acme_store *s, uid_t uid, gid_t gid);

/* Writes len bytes as name (a plain file name, no '/') with mode, atomically: 0 or -errno. */
int store_write(struct acme_store *s, const char *name, const void *data, size_t len, mode_t mode);

/* name's contents into a malloc'd, NUL-terminated buffer (*len bytes), at most max bytes:
 * 0, -ENOENT when it does not exist, -EFBIG, or -errno. */
int store_read(struct acme_store *s, const char *name, char **data, size_t *len, size_t max);

/* The same for a file anywhere (symbolic links followed): --acme-ca-root, read at start. */
int store_read_path(const char *path, char **data, size_t *len, size_t max);

/* Removes name (a plain file name): 0, or -errno (-ENOENT when it was not there). */
int store_remove(struct acme_store *s, const char *name);

/* Calls each(arg, name) for every file of the directory whose name ends in suffix and whose
 * last change is at most max_age seconds old (a dot file, a write in progress, is skipped):
 * 0 or -errno. */
int store_list(struct acme_store *s, const char *suffix, long max_age,
               void (*each)(void *arg, const char *name), void *arg);

/* Takes the lock named name (the file name.lock, made on first use), waiting for another
 * process that holds it for at most wait_ms (0: do not wait): the lock's fd, -EWOULDBLOCK when
 * it is still held, or -errno. store_unlock releases it. */
int store_lock(struct acme_store *s, const char *name, int wait_ms);
void store_unlock(int fd);

#endif
