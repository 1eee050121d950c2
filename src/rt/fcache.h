/* fcache: a worker's cache of open files with their metadata, validators, MIME type and, for
 * small files, their contents; also remembers misses. Revalidated by a stat at most once per
 * second per entry (inode, size, mtime, ctime and mode), so a changed file's old bytes, or a file
 * whose permissions were taken away, are served for at most that long.
 * Must not: be shared between workers (no locks), or hand out an entry without a reference.
 * Ownership: entries are refcounted: the table holds one reference while an entry is current,
 * every fcache_get caller one more until fcache_put (a send in flight keeps its file open even
 * after the entry is replaced or evicted). */
#ifndef RT_FCACHE_H
#define RT_FCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cond.h"
#include "core/date.h"
#include "core/mime.h"

/* A body made from an entry and kept with it (a directory's rendered listing, one per format):
 * freed with the entry, so a directory that changes drops its listings at its next
 * revalidation, and counted in the cache's bytes. */
#define FCACHE_DERIVED 2
struct fderived {
    char *data; /* NULL: none */
    size_t len;
    int64_t made; /* monotonic second it was made, for the caller's own expiry */
};

struct fentry {
    struct fentry *hnext;          /* hash chain */
    struct fentry *lru_next, *lru_prev; /* LRU list, oldest first after the head */
    uint32_t hash;
    uint32_t refs;
    bool is_dir;
    int err;                       /* 0, or -errno for a remembered miss */
    int fd;                        /* open for regular files, else -1 */
    uint64_t size;
    uint64_t ino;
    uint64_t dev;
    int64_t mtime;                 /* seconds */
    int64_t mtime_ns;              /* full resolution, for change detection */
    int64_t ctime_ns;              /* change detection and the ETag: users cannot set it back */
    uint32_t mode;                 /* st_mode: a chmod is seen at the next revalidation */
    int64_t checked;               /* monotonic second of the last validation */
    int64_t variants_checked;      /* when variants was last computed (-1: never) */
    uint8_t variants;              /* bit (1 << enc) for each precompressed sibling present */
    const char *mime;
    char *data;                    /* contents when small enough, else NULL */
    char etag[COND_ETAG_MAX]; /* never truncated: see cond.h */
    size_t etag_len;
    char last_modified[HTTPDATE_LEN + 1];
    char rep_headers[224]; /* static_rep_headers(), when it fits (rep_len < sizeof) */
    size_t rep_len;
    struct fderived derived[FCACHE_DERIVED];
    size_t path_len;
    char path[];                   /* relative to the document root, NUL-terminated */
};

struct fcache;

struct fcache *fcache_new(int root_fd, const struct mime_table *mime, size_t max_bytes,
                          size_t max_file);
void fcache_free(struct fcache *fc);

/* The entry for path (relative, normalised, "" for the root), validated against the disk if it
 * was last checked before `now`. A miss is an entry with err set (-ENOENT, -EACCES, ...).
 * Returns NULL only when memory runs out. The caller owns one reference. */
struct fentry *fcache_get(struct fcache *fc, const char *path, size_t len, int64_t now);

/* Drops a reference taken by fcache_get. */
void fcache_put(struct fcache *fc, struct fentry *e);

/* Keeps data (malloc'ed, len bytes) as e's derived body in slot, replacing what was there, and
 * evicts older entries to make room; the cache then owns data. Keeps nothing when len is over
 * an eighth of the cache's bytes (one body must not empty the cache). Returns the slot's body,
 * or NULL when it was not kept: data then stays the caller's. */
const struct fderived *fcache_set_derived(struct fcache *fc, struct fentry *e, int slot,
                                          char *data, size_t len, int64_t now);

#endif
