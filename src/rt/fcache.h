/* fcache: a worker's cache of open files with their metadata, validators, MIME type and, for
 * small files, their contents; also remembers misses, and holds the compressed variants of file
 * versions (bounded by their own byte budget, --compress-cache). Revalidated by a stat at most
 * once per second per entry (inode, size, mtime, ctime and mode), so a changed file's old bytes,
 * or a file whose permissions were taken away, are served for at most that long. A file's ETag
 * is its bytes' SHA-256 (cond.h), made when it is loaded for files in memory up to 64 KiB and by
 * a digest thread of the cache's own for the rest, remembered per file version.
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

/* Bodies made from an entry (a directory's rendered listing, one per format) are entries of
 * their own (fcache_derive), so their compressed variants are keyed like a file's and a body
 * never changes while a response or a compression job holds it. */
#define FCACHE_DERIVED 2

/* serve's copy of the header lines a plain request for an entry is answered with
 * (static_ok_fields), and what they were made from: kept with the entry, so a new version of the
 * file (a new entry) or a reload (which empties the cache) starts over. */
struct fok {
    char *data; /* malloc'd, cap bytes; NULL: none yet */
    size_t cap;
    size_t len;
    const void *cfg;   /* made for this site's options, */
    const char *extra; /* these extra header lines, */
    size_t extra_len;
    uint8_t variants; /* and what negotiation saw: the precompressed siblings, */
    bool squeeze;     /* whether --compress applies */
};

/* serve's whole answer to a plain keep-alive HTTP/1.1 GET of a small entry, for one Date: the
 * status line and Date, the kept lines, the body (see serve_plan.c). A response whose plan points
 * into it counts itself in users and holds the entry too, so a block never outlives its entry;
 * one that no plan points into any more is rewritten for the next Date. */
struct fblock {
    uint32_t users;
    int64_t wall;    /* the Date it carries (UNIX seconds); INT64_MIN: out of date */
    const char *all; /* made with these lines for every response (HSTS), or NULL */
    size_t head_len; /* of the len bytes in data, the header block */
    size_t len;
    size_t cap;
    char data[];
};

/* The protocols that keep an encoding of an entry's representation fields (wire_parts). */
enum { FCACHE_WIRE_H2, FCACHE_WIRE_H3, FCACHE_WIRE_N };

struct fentry {
    struct fentry *hnext;               /* hash chain */
    struct fentry *lru_next, *lru_prev; /* LRU list, oldest first after the head */
    uint32_t hash;
    uint32_t refs;
    uint32_t root; /* the site (fcache_root) whose root path is relative to */
    bool is_dir;
    bool is_variant; /* a compressed variant: data holds it, fd is -1 */
    bool is_derived; /* a body made from a directory (fcache_derive): data holds it, fd is -1 */
    int err;         /* 0, or -errno for a remembered miss */
    int fd;          /* open for regular files, else -1 */
    uint64_t size;
    uint64_t ino;
    uint64_t dev;
    int64_t mtime;            /* seconds */
    int64_t mtime_ns;         /* full resolution, for change detection */
    int64_t ctime_ns;         /* change detection and the ETag: users cannot set it back */
    uint32_t mode;            /* st_mode: a chmod is seen at the next revalidation */
    int64_t checked;          /* monotonic second of the last validation (derived: made) */
    uint64_t generation;      /* a derived body's, unique in its cache; 0 for a file */
    int64_t variants_checked; /* when variants was last computed (-1: never) */
    uint8_t variants;         /* bit (1 << enc) for each precompressed sibling present */
    int8_t compressible;      /* serve's memo of --compress-types: -1 not yet known */
    const char *mime;
    char *data;                      /* contents when small enough, else NULL */
    uint8_t digest[COND_DIGEST_LEN]; /* of the bytes (a file's, a sibling's), when digested */
    bool digested;
    bool digesting;           /* a job of the digest thread holds a reference */
    char etag[COND_ETAG_MAX]; /* never truncated: see cond.h; empty until digested */
    size_t etag_len;
    char last_modified[HTTPDATE_LEN + 1];
    char rep_headers[224]; /* static_rep_headers(), when it fits (rep_len < sizeof) */
    size_t rep_len;
    struct fentry *derived[FCACHE_DERIVED]; /* a directory's kept bodies, a reference each */
    struct fok ok;
    struct fblock *block[2]; /* the current one, and the one before (maybe still sent from) */
    /* Each protocol's encoding of rep_headers, which never change for the entry (HTTP/2: its
     * HPACK literals, h2_pre_new; HTTP/3: its QPACK lines): one malloc'd block a protocol, made
     * by its first response over that protocol, freed with the entry. NULL: none yet. */
    void *wire_parts[FCACHE_WIRE_N];
    size_t path_len;
    char path[]; /* relative to the document root, NUL-terminated */
};

struct fcache;
struct stats;

/* Hits, misses and the bytes held are counted in *st (the owning worker's). */
/* wake_fd: the worker's eventfd, written when a digest made off the loop is ready (collect it
 * with fcache_collect); -1 digests every file on the caller's thread when it is loaded. */
struct fcache *fcache_new(int root_fd, const struct mime_table *mime, size_t max_bytes,
                          size_t max_file, size_t max_variant_bytes, struct stats *st, int wake_fd);
void fcache_free(struct fcache *fc);

/* Takes the digests the thread finished: each file's entry is replaced at its next request by
 * one whose ETag and kept lines carry it. On the worker's loop, as its tick runs. */
void fcache_collect(struct fcache *fc);

/* Forgets every entry (files and remembered misses) and looks files up beneath root_fd with
 * mime from now on: a reload or a moved document root. Entries still referenced by responses in
 * flight stay alive, with their open file, until fcache_put, so a response that started on the
 * old root ends on it. */
void fcache_reset(struct fcache *fc, int root_fd, const struct mime_table *mime);

/* Looks files up beneath root_fd, the root of site `id`, with the site's MIME table mime, from
 * now on (until the next call): entries of different sites are kept apart by id. A request's
 * routing calls it first. */
void fcache_root(struct fcache *fc, uint32_t id, int root_fd, const struct mime_table *mime);

/* The root fcache_root selected (a compression job's dictionary is looked up beneath it). */
int fcache_root_fd(const struct fcache *fc);

/* The entry for path (relative, normalised, "" for the root), validated against the disk if it
 * was last checked before `now`. A miss is an entry with err set (-ENOENT, -EACCES, ...).
 * Returns NULL only when memory runs out. The caller owns one reference. */
struct fentry *fcache_get(struct fcache *fc, const char *path, size_t len, int64_t now);

/* Whether a and b describe one version of one file (or are one derived body): a job made
 * from either serves both. */
bool fcache_same_version(const struct fentry *a, const struct fentry *b);

/* Takes one more reference to e (a job that outlives the request holding e). */
static inline void fcache_hold(struct fentry *e)
{
    e->refs++;
}

/* Drops a reference taken by fcache_get, fcache_variant_get or fcache_hold. */
void fcache_put(struct fcache *fc, struct fentry *e);

#define FCACHE_TAG_MAX 48 /* longest variant tag: "dcz" and a 32-byte dictionary hash */

/*
 * The variant `tag` (a coding name, or "dcz" followed by the dictionary's SHA-256) of the file
 * version or derived body `base` describes, or NULL. A variant is keyed by the base's path,
 * inode, device, size, mtime, ctime and generation, so one made from an older version of the
 * file, or an older body, is never found again (it ages out of the LRU). A variant with err ==
 * -ENODATA records "compressing did not pay": send identity. The caller owns one reference.
 */
struct fentry *fcache_variant_get(struct fcache *fc, const struct fentry *base, const char *tag,
                                  size_t tag_len);

/*
 * Stores a variant of base: `data` (malloc'd, len bytes; ownership passes to the cache, also on
 * failure) with Content-Encoding etag_suffix in its ETag (none when base has none: a derived
 * body), or data NULL for "did not pay".
 * Evicts the least recently used variants to stay within the variant byte budget; a variant
 * larger than the whole budget is recorded as "did not pay". A file's variant is not kept while
 * the file's digest is unknown (-EAGAIN: made again at a later request). Returns 0, -EAGAIN or
 * -ENOMEM.
 */
int fcache_variant_add(struct fcache *fc, const struct fentry *base, const char *tag,
                       size_t tag_len, char *data, size_t len, const char *etag_suffix);

/* e's block `slot` (0 or 1, not in use) with room for cap bytes: the one there when it is large
 * enough, else a new one (its bytes counted in the cache's, evicting older entries to make
 * room; the old one is freed). Returns NULL when memory runs out. */
struct fblock *fcache_block(struct fcache *fc, struct fentry *e, int slot, size_t cap);

/* A number this cache never gave before (the id of an entry's wire_parts). */
uint64_t fcache_id(struct fcache *fc);

/* Bytes of variants held (what --compress-cache bounds) and how many variants there are. */
size_t fcache_variant_bytes(const struct fcache *fc);

/*
 * Makes data (malloc'd, len bytes, of media type `type`; the cache owns it from now on, also on
 * failure) a body derived from e at `now`: an entry of its own, outside the table, with a
 * generation no other body of this cache has, so its variants (fcache_variant_get) are its own
 * and one made from an older body is never found again. Keeps it as e's body in slot (the old
 * one lives on while referenced), counted in the cache's bytes, unless len is over an eighth of
 * them (one body must not empty the cache): then only the caller holds it. When the bytes are
 * those of the body already in the slot, that entry stays, made anew at now, with its variants.
 * Returns the body with a reference for the caller, or NULL when memory runs out.
 */
struct fentry *fcache_derive(struct fcache *fc, struct fentry *e, int slot, char *data, size_t len,
                             const char *type, int64_t now);

#endif
