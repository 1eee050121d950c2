/* File cache; see fcache.h. Entries are found by path through a chained hash table and evicted
 * least-recently-used first when the entry count or the bytes of cached contents pass their
 * bounds. */
#include "rt/fcache.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cond.h"
#include "core/static.h"
#include "rt/file.h"
#include "rt/offload.h"
#include "rt/probes.h"
#include "rt/stats.h"

#define BUCKETS 4096      /* power of two */
#define MAX_ENTRIES 2048  /* each may hold an fd: bounded well below RLIMIT_NOFILE */
#define MAX_VARIANTS 4096 /* no fd; bounded so "did not pay" records cannot grow without end */
/* Digests of file versions remembered, direct-mapped by version: an entry evicted or
 * revalidated away finds its digest again without reading the file. 56 bytes a slot. */
#define DIGEST_SLOTS 4096
/* A file in memory up to this size is digested on the loop when it is loaded (~35 us at the
 * development machine's 1.9 GB/s, the order of the read that brought it in); anything larger
 * off the loop, its first responses without an ETag (Last-Modified still validates). */
#define DIGEST_ON_LOOP (64u << 10)
#define DIGEST_JOBS 64 /* in flight; past it a file waits for its next revalidation */

/* A file version, as the cache tells versions apart (still_valid), and its digest. */
struct fdigest {
    uint64_t ino, dev, size;
    int64_t mtime_ns, ctime_ns;
    uint8_t d[COND_DIGEST_LEN];
    bool used;
};

/* A digest made off the loop: the entry (a reference) and what the thread read. */
struct djob {
    struct offload_job job; /* first: the offload thread runs it (run_digest) */
    struct fentry *e;
    const char *data; /* e's contents when in memory, else read from fd */
    int fd;
    uint64_t size;
    int err;
    uint8_t d[COND_DIGEST_LEN];
};

struct fcache {
    int root_fd;
    uint32_t root; /* the site root_fd belongs to (fcache_root) */
    const struct mime_table *mime;
    size_t max_bytes;
    size_t max_file;
    size_t bytes;
    unsigned entries;
    size_t max_vbytes;
    size_t vbytes;
    unsigned ventries;
    struct fentry lru;  /* LRU head: lru.lru_next is the oldest entry, lru.lru_prev the newest */
    struct fentry vlru; /* the variants' LRU, apart so files and variants have their own bounds */
    struct fentry *bucket[BUCKETS];
    struct stats *st;
    uint64_t generation; /* the last number given (a derived body's generation, fcache_id) */
    struct offload q;    /* the digest thread, started on first use; none when wake_fd < 0 */
    bool offload;
    struct fdigest digests[DIGEST_SLOTS];
};

static inline uint64_t load8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint64_t load4(const char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0xff51afd7ed558ccdu;
    return h ^ (h >> 32);
}

/* Eight bytes per step, the last step an overlapping load, and wyhash's three bytes or two
 * overlapping words for short keys: a few instructions for a typical path where a byte-wise
 * FNV-1a spent seven per byte (issue 15). Only this process compares the values. */
static inline uint32_t hash_path(const char *p, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15u ^ len;
    if (len >= 8) {
        size_t i = 0;
        for (; i + 8 < len; i += 8)
            h = mix(h, load8(p + i));
        h = mix(h, load8(p + len - 8));
    } else if (len >= 4) {
        h = mix(h, load4(p) << 32 | load4(p + len - 4));
    } else if (len) {
        h = mix(h, (uint64_t)(unsigned char)p[0] << 16 | (uint64_t)(unsigned char)p[len / 2] << 8 |
                       (unsigned char)p[len - 1]);
    }
    return (uint32_t)(h ^ (h >> 29));
}

/* a[0..n) == b[0..n), with the loads hash_path makes: no library call for a short path. */
static inline bool same_bytes(const char *a, const char *b, size_t n)
{
    if (n >= 8) {
        size_t i = 0;
        for (; i + 8 < n; i += 8)
            if (load8(a + i) != load8(b + i))
                return false;
        return load8(a + n - 8) == load8(b + n - 8);
    }
    if (n >= 4)
        return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
    return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

struct fcache *fcache_new(int root_fd, const struct mime_table *mime, size_t max_bytes,
                          size_t max_file, size_t max_variant_bytes, struct stats *st, int wake_fd)
{
    struct fcache *fc = calloc(1, sizeof(*fc));
    if (!fc)
        return NULL;
    if (wake_fd >= 0) {
        if (offload_init(&fc->q, 1, wake_fd) != 0) {
            free(fc);
            return NULL;
        }
        fc->offload = true;
    }
    fc->root_fd = root_fd;
    fc->st = st;
    fc->mime = mime;
    fc->max_bytes = max_bytes;
    fc->max_file = max_file < max_bytes ? max_file : max_bytes;
    fc->max_vbytes = max_variant_bytes;
    fc->lru.lru_next = fc->lru.lru_prev = &fc->lru;
    fc->vlru.lru_next = fc->vlru.lru_prev = &fc->vlru;
    return fc;
}

/* A derived body too large to keep (fcache_derive) is the response's alone: not counted. */
static bool counted(const struct fcache *fc, const struct fentry *e)
{
    return e->data && !e->is_variant && !(e->is_derived && e->size > fc->max_bytes / 8);
}

static void destroy(struct fcache *fc, struct fentry *e)
{
    for (int i = 0; i < FCACHE_DERIVED; i++)
        if (e->derived[i])
            fcache_put(fc, e->derived[i]);
    if (e->fd >= 0)
        close(e->fd);
    if (e->data && e->is_variant) {
        fc->vbytes -= e->size;
        stat_set(&fc->st->compress_cache_bytes, fc->vbytes);
    } else if (counted(fc, e)) {
        fc->bytes -= e->size;
        stat_set(&fc->st->cache_bytes, fc->bytes);
    }
    free(e->data);
    free(e->ok.data);
    for (int i = 0; i < FCACHE_WIRE_N; i++)
        free(e->wire_parts[i]);
    for (int i = 0; i < 2; i++) {
        if (e->block[i])
            fc->bytes -= e->block[i]->cap;
        free(e->block[i]);
    }
    free(e);
}

static void unlink_entry(struct fcache *fc, struct fentry *e)
{
    struct fentry **pp = &fc->bucket[e->hash & (BUCKETS - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    e->lru_next->lru_prev = e->lru_prev;
    e->lru_prev->lru_next = e->lru_next;
    if (e->is_variant)
        fc->ventries--;
    else
        fc->entries--;
    fcache_put(fc, e);
}

void fcache_put(struct fcache *fc, struct fentry *e)
{
    assert(e->refs > 0);
    if (--e->refs == 0)
        destroy(fc, e);
}

void fcache_free(struct fcache *fc)
{
    if (!fc)
        return;
    if (fc->offload) {
        offload_fini(&fc->q);
        struct offload_job *j;
        while ((j = offload_abandon(&fc->q))) {
            fcache_put(fc, ((struct djob *)j)->e);
            free(j);
        }
    }
    fcache_reset(fc, -1, NULL);
    /* Every reference was given back first (sends finished, compression jobs dropped): an
     * entry still held now would be destroyed later against a freed cache. */
    assert(fc->ventries == 0 && fc->bytes == 0 && fc->vbytes == 0);
    free(fc);
}

void fcache_reset(struct fcache *fc, int root_fd, const struct mime_table *mime)
{
    while (fc->lru.lru_prev != &fc->lru)
        unlink_entry(fc, fc->lru.lru_prev);
    while (fc->vlru.lru_prev != &fc->vlru)
        unlink_entry(fc, fc->vlru.lru_prev);
    assert(fc->entries == 0);
    fc->root_fd = root_fd;
    fc->root = 0;
    fc->mime = mime;
}

void fcache_root(struct fcache *fc, uint32_t id, int root_fd, const struct mime_table *mime)
{
    fc->root = id;
    fc->root_fd = root_fd;
    fc->mime = mime;
}

int fcache_root_fd(const struct fcache *fc)
{
    return fc->root_fd;
}

static void evict(struct fcache *fc, size_t want_bytes)
{
    while (fc->lru.lru_next != &fc->lru &&
           (fc->entries >= MAX_ENTRIES || fc->bytes + want_bytes > fc->max_bytes))
        unlink_entry(fc, fc->lru.lru_next);
}

/* The slot of e's version in the digest memo. */
static struct fdigest *digest_slot(struct fcache *fc, const struct fentry *e)
{
    uint64_t h = mix(mix(mix(e->ino, e->dev), e->size), (uint64_t)e->ctime_ns);
    return &fc->digests[mix(h, (uint64_t)e->mtime_ns) & (DIGEST_SLOTS - 1)];
}

static bool same_version(const struct fdigest *d, const struct fentry *e)
{
    return d->ino == e->ino && d->dev == e->dev && d->size == e->size &&
           d->mtime_ns == e->mtime_ns && d->ctime_ns == e->ctime_ns;
}

static void remember(struct fdigest *slot, const struct fentry *e)
{
    *slot = (struct fdigest){.ino = e->ino,
                             .dev = e->dev,
                             .size = e->size,
                             .mtime_ns = e->mtime_ns,
                             .ctime_ns = e->ctime_ns,
                             .used = true};
    memcpy(slot->d, e->digest, sizeof(slot->d));
}

static void set_validators(struct fentry *e);

/* Opens and describes path; a failure to open becomes a remembered miss. */
static struct fentry *load(struct fcache *fc, const char *path, size_t len, uint32_t hash,
                           int64_t now)
{
    struct fentry *e = calloc(1, sizeof(*e) + len + 1);
    if (!e)
        return NULL;
    memcpy(e->path, path, len);
    e->path_len = len;
    e->hash = hash;
    e->root = fc->root;
    e->fd = -1;
    e->checked = now;
    e->variants_checked = -1;
    e->compressible = -1;

    struct stat st;
    int fd = file_open_beneath(fc->root_fd, e->path, O_NONBLOCK);
    if (fd < 0) {
        e->err = fd;
        return e;
    }
    if (fstat(fd, &st) != 0) {
        e->err = -errno;
        close(fd);
        return e;
    }
    e->size = (uint64_t)st.st_size;
    e->ino = st.st_ino;
    e->dev = st.st_dev;
    e->mtime = st.st_mtim.tv_sec;
    e->mtime_ns = st.st_mtim.tv_sec * INT64_C(1000000000) + st.st_mtim.tv_nsec;
    e->ctime_ns = st.st_ctim.tv_sec * INT64_C(1000000000) + st.st_ctim.tv_nsec;
    e->mode = st.st_mode;
    if (S_ISDIR(st.st_mode)) {
        e->is_dir = true;
        close(fd);
        return e;
    }
    /* Devices, FIFOs and sockets are not ours to serve; nor is a file nobody may read (a root
     * server could open it anyway, but `chmod 000` is how an operator withdraws a file). */
    if (!S_ISREG(st.st_mode) || !(st.st_mode & 0444)) {
        e->err = -EACCES;
        close(fd);
        return e;
    }
    e->fd = fd;
    e->mime = mime_lookup(fc->mime, e->path, len);
    if (e->size <= fc->max_file) {
        evict(fc, e->size);
        e->data = malloc(e->size ? e->size : 1);
        if (e->data && file_read_all(fd, e->data, e->size) == 0) {
            fc->bytes += e->size;
        } else {
            free(e->data);
            e->data = NULL;
        }
    }
    struct fdigest *slot = digest_slot(fc, e);
    if (slot->used && same_version(slot, e)) {
        memcpy(e->digest, slot->d, sizeof(e->digest));
        e->digested = true;
    } else if ((e->data && e->size <= DIGEST_ON_LOOP) || !fc->offload) {
        if ((e->data ? (file_digest_mem(e->data, e->size, e->digest, sizeof(e->digest)), 0)
                     : file_digest_fd(fd, e->size, e->digest, sizeof(e->digest))) == 0) {
            e->digested = true;
            remember(slot, e);
        }
    }
    httpdate_format(e->mtime, e->last_modified);
    set_validators(e);
    return e;
}

/* The ETag (once the digest is known) and the representation's header lines made with it. */
static void set_validators(struct fentry *e)
{
    e->etag_len = e->digested ? cond_etag(e->etag, sizeof(e->etag), e->digest, NULL) : 0;
    struct static_file f = {.etag = e->etag,
                            .etag_len = e->etag_len,
                            .last_modified = e->last_modified,
                            .content_type = e->mime};
    e->rep_len = static_rep_headers(e->rep_headers, sizeof(e->rep_headers), &f);
}

/* True when the file at e's path is still the one e describes. ctime catches what the others
 * miss: a rewrite in place with size and mtime restored, and a chmod; no user can set it back. */
static bool still_valid(struct fcache *fc, const struct fentry *e)
{
    struct stat st;
    if (e->err)
        return false; /* misses are retried once per second */
    if (fstatat(fc->root_fd, e->path, &st, e->path_len ? 0 : AT_EMPTY_PATH) != 0)
        return false;
    return st.st_ino == e->ino && st.st_dev == e->dev && (uint64_t)st.st_size == e->size &&
           st.st_mtim.tv_sec * INT64_C(1000000000) + st.st_mtim.tv_nsec == e->mtime_ns &&
           st.st_ctim.tv_sec * INT64_C(1000000000) + st.st_ctim.tv_nsec == e->ctime_ns &&
           st.st_mode == e->mode;
}

static void run_digest(struct offload_job *oj)
{
    struct djob *j = (struct djob *)oj;
    if (j->data)
        file_digest_mem(j->data, j->size, j->d, sizeof(j->d));
    else
        j->err = file_digest_fd(j->fd, j->size, j->d, sizeof(j->d));
}

/* A regular file without its digest yet: a job for the digest thread, unless one is in flight
 * or too many are (then it waits for the next revalidation, a second later at most). */
static void digest_later(struct fcache *fc, struct fentry *e)
{
    if (e->digested || e->digesting || e->err || e->is_dir || !fc->offload ||
        fc->q.count >= DIGEST_JOBS)
        return;
    struct djob *j = calloc(1, sizeof(*j));
    if (!j)
        return;
    *j = (struct djob){.e = e, .data = e->data, .fd = e->fd, .size = e->size};
    j->job.run = run_digest;
    if (offload_submit(&fc->q, &j->job) != 0) {
        free(j);
        return;
    }
    e->digesting = true;
    e->refs++; /* the job's: the fd and the data stay while the thread reads them */
}

void fcache_collect(struct fcache *fc)
{
    if (!fc->offload || !fc->q.count)
        return;
    struct djob *done = (struct djob *)offload_done(&fc->q);
    while (done) {
        struct djob *j = done;
        done = (struct djob *)j->job.next;
        struct fentry *e = j->e;
        e->digesting = false;
        if (j->err == 0) {
            memcpy(e->digest, j->d, sizeof(e->digest));
            e->digested = true;
            remember(digest_slot(fc, e), e);
            /* The entry's kept lines (rep_headers, the protocols' encodings of them, the kept
             * answers) were made without an ETag: the current entry leaves the table, and the
             * next request loads the file again and finds its digest in the memo. Responses in
             * flight keep their reference and end as they began. */
            for (struct fentry *p = fc->bucket[e->hash & (BUCKETS - 1)]; p; p = p->hnext) {
                if (p == e) {
                    unlink_entry(fc, e);
                    break;
                }
            }
        }
        fcache_put(fc, e);
        free(j);
    }
}

/* fcache_get's miss: loads path and links it as the newest entry. Out of line, so that a hit
 * does not pay for this path's registers and frame. Returns NULL when memory runs out. */
__attribute__((noinline)) static struct fentry *miss(struct fcache *fc, const char *path,
                                                     size_t len, uint32_t hash, int64_t now)
{
    stat_add(&fc->st->cache_misses, 1);
    PROBE(cache_miss, path, len);
    evict(fc, 0);
    struct fentry *e = load(fc, path, len, hash, now);
    stat_set(&fc->st->cache_bytes, fc->bytes);
    if (!e)
        return NULL;
    e->refs = 1;
    e->hnext = fc->bucket[hash & (BUCKETS - 1)];
    fc->bucket[hash & (BUCKETS - 1)] = e;
    fc->entries++;
    digest_later(fc, e);
    return e;
}

struct fentry *fcache_get(struct fcache *fc, const char *path, size_t len, int64_t now)
{
    uint32_t hash = hash_path(path, len) ^ (fc->root * 0x9e3779b1u);
    struct fentry *e = fc->bucket[hash & (BUCKETS - 1)];
    while (e && !(e->hash == hash && e->root == fc->root && !e->is_variant && e->path_len == len &&
                  same_bytes(e->path, path, len)))
        e = e->hnext;

    if (e && e->checked != now) {
        if (still_valid(fc, e)) {
            e->checked = now;
            digest_later(fc, e); /* one that found the threads busy before */
        } else {
            unlink_entry(fc, e);
            e = NULL;
        }
    }
    if (e) { /* most recently used moves to the tail */
        stat_add(&fc->st->cache_hits, 1);
        PROBE(cache_hit, (const char *)e->path, len);
        if (fc->lru.lru_prev == e) { /* the tail already (the same file again): it stays */
            e->refs++;
            return e;
        }
        e->lru_next->lru_prev = e->lru_prev;
        e->lru_prev->lru_next = e->lru_next;
    } else if (!(e = miss(fc, path, len, hash, now))) {
        return NULL;
    }
    e->lru_prev = fc->lru.lru_prev;
    e->lru_next = &fc->lru;
    fc->lru.lru_prev->lru_next = e;
    fc->lru.lru_prev = e;
    e->refs++;
    return e;
}

bool fcache_same_version(const struct fentry *a, const struct fentry *b)
{
    return a == b || (!a->is_derived && !b->is_derived && a->root == b->root && a->ino == b->ino &&
                      a->dev == b->dev && a->size == b->size && a->mtime_ns == b->mtime_ns &&
                      a->ctime_ns == b->ctime_ns && a->path_len == b->path_len &&
                      memcmp(a->path, b->path, a->path_len) == 0);
}

/* A variant's key: the base's path, a NUL (no path holds one), the version fields, the tag. */
static size_t variant_key(char *key, size_t cap, const struct fentry *base, const char *tag,
                          size_t tag_len)
{
    uint64_t version[6] = {
        base->ino,       base->dev, base->size, (uint64_t)base->mtime_ns, (uint64_t)base->ctime_ns,
        base->generation};
    size_t n = base->path_len + 1 + sizeof(version) + tag_len;
    if (n > cap)
        return 0;
    memcpy(key, base->path, base->path_len);
    key[base->path_len] = '\0';
    memcpy(key + base->path_len + 1, version, sizeof(version));
    memcpy(key + base->path_len + 1 + sizeof(version), tag, tag_len);
    return n;
}

static struct fentry *find(struct fcache *fc, const char *key, size_t len, uint32_t hash)
{
    struct fentry *e = fc->bucket[hash & (BUCKETS - 1)];
    while (e && !(e->hash == hash && e->path_len == len && memcmp(e->path, key, len) == 0))
        e = e->hnext;
    return e;
}

static void lru_append(struct fentry *head, struct fentry *e)
{
    e->lru_prev = head->lru_prev;
    e->lru_next = head;
    head->lru_prev->lru_next = e;
    head->lru_prev = e;
}

/* The fields an entry made from base in memory (a variant, a derived body) shares with it. */
static void made_from(struct fentry *e, const struct fentry *base)
{
    e->fd = -1;
    e->variants_checked = -1;
    e->ino = base->ino;
    e->dev = base->dev;
    e->mtime = base->mtime;
    e->mtime_ns = base->mtime_ns;
    e->ctime_ns = base->ctime_ns;
}

struct fentry *fcache_variant_get(struct fcache *fc, const struct fentry *base, const char *tag,
                                  size_t tag_len)
{
    char key[PATH_MAX + 48 + FCACHE_TAG_MAX + 1];
    size_t len = variant_key(key, sizeof(key), base, tag, tag_len);
    if (!len)
        return NULL;
    struct fentry *e = find(fc, key, len, hash_path(key, len));
    if (!e)
        return NULL;
    e->lru_next->lru_prev = e->lru_prev;
    e->lru_prev->lru_next = e->lru_next;
    lru_append(&fc->vlru, e);
    e->refs++;
    return e;
}

int fcache_variant_add(struct fcache *fc, const struct fentry *base, const char *tag,
                       size_t tag_len, char *data, size_t len, const char *etag_suffix)
{
    char key[PATH_MAX + 48 + FCACHE_TAG_MAX + 1];
    size_t klen = variant_key(key, sizeof(key), base, tag, tag_len);
    if (!klen) {
        free(data);
        return -ENAMETOOLONG;
    }
    /* The base's digest, or its version's when the digest thread finished after the job that
     * made this variant started from an entry without one (the variant is keyed by the version,
     * so every entry of that version finds it). A variant of a file whose digest is still being
     * made is not kept (it would never get an ETag); the next request makes it again. */
    const uint8_t *digest = base->digested ? base->digest : NULL;
    const struct fdigest *known = digest_slot(fc, base);
    if (!digest && known->used && same_version(known, base))
        digest = known->d;
    if (data && !digest && !base->is_derived) {
        free(data);
        return -EAGAIN;
    }
    uint32_t hash = hash_path(key, klen);
    struct fentry *old = find(fc, key, klen, hash);
    if (old)
        unlink_entry(fc, old); /* a second worker job for the same variant: the newer wins */
    if (data && len > fc->max_vbytes) {
        free(data);
        data = NULL;
    }
    size_t want = data ? len : 0;
    while (fc->vlru.lru_next != &fc->vlru &&
           (fc->ventries >= MAX_VARIANTS || fc->vbytes + want > fc->max_vbytes))
        unlink_entry(fc, fc->vlru.lru_next);

    struct fentry *e = calloc(1, sizeof(*e) + klen + 1);
    if (!e) {
        free(data);
        return -ENOMEM;
    }
    memcpy(e->path, key, klen);
    e->path_len = klen;
    e->hash = hash;
    e->refs = 1;
    e->is_variant = true;
    made_from(e, base);
    e->checked = base->checked;
    e->mime = base->mime;
    memcpy(e->last_modified, base->last_modified, sizeof(e->last_modified));
    if (!data) {
        e->err = -ENODATA;
    } else {
        e->data = data;
        e->size = len;
        fc->vbytes += len;
        stat_set(&fc->st->compress_cache_bytes, fc->vbytes);
    }
    if (data && digest) {
        char etag[COND_ETAG_MAX];
        size_t n = cond_etag(etag, sizeof(etag), digest, etag_suffix);
        if (n >= sizeof(e->etag)) {
            e->err = -ENODATA; /* cannot name it: do not send it */
        } else {
            memcpy(e->etag, etag, n + 1);
            e->etag_len = n;
            struct static_file f = {.etag = e->etag,
                                    .etag_len = e->etag_len,
                                    .last_modified = e->last_modified,
                                    .content_type = e->mime};
            e->rep_len = static_rep_headers(e->rep_headers, sizeof(e->rep_headers), &f);
        }
    } else {
        e->rep_len = sizeof(e->rep_headers); /* no validators to prebuild with */
    }
    e->hnext = fc->bucket[hash & (BUCKETS - 1)];
    fc->bucket[hash & (BUCKETS - 1)] = e;
    fc->ventries++;
    lru_append(&fc->vlru, e);
    return 0;
}

size_t fcache_variant_bytes(const struct fcache *fc)
{
    return fc->vbytes;
}

struct fentry *fcache_derive(struct fcache *fc, struct fentry *e, int slot, char *data, size_t len,
                             const char *type, int64_t now)
{
    struct fentry *old = e->derived[slot];
    /* A listing re-rendered with nothing changed: its variants stay valid, and are not made
     * again (a large one costs the compressor thread a second every LISTING_TTL otherwise). */
    if (old && old->size == len && memcmp(old->data, data, len) == 0) {
        free(data);
        old->checked = now;
        old->refs++;
        return old;
    }
    struct fentry *d = calloc(1, sizeof(*d) + e->path_len + 2);
    if (!d) {
        free(data);
        return NULL;
    }
    /* "dir/": the URL path without its '/', as the compressor's log line shows it */
    memcpy(d->path, e->path, e->path_len);
    d->path_len = e->path_len;
    if (e->path_len)
        d->path[d->path_len++] = '/';
    d->refs = 1;
    d->root = e->root;
    d->is_derived = true;
    made_from(d, e);
    d->data = data;
    d->size = len;
    d->checked = now;
    d->generation = ++fc->generation;
    d->compressible = -1;
    d->mime = type;
    if (old) {
        e->derived[slot] = NULL;
        fcache_put(fc, old);
    }
    if (counted(fc, d)) {
        /* e may be evicted from the table here; the caller's reference keeps it, and the
         * body's bytes are given back when its last reference goes. */
        evict(fc, len);
        fc->bytes += len;
        stat_set(&fc->st->cache_bytes, fc->bytes);
        e->derived[slot] = d;
        d->refs++;
    }
    return d;
}

struct fblock *fcache_block(struct fcache *fc, struct fentry *e, int slot, size_t cap)
{
    struct fblock *b = e->block[slot];
    if (b && b->cap >= cap)
        return b;
    assert(!b || !b->users);
    if (b) {
        fc->bytes -= b->cap;
        free(b);
        e->block[slot] = NULL;
    }
    /* e may be evicted from the table here; the caller's reference keeps it, and the block's
     * bytes are given back when the last reference goes. */
    evict(fc, cap);
    if (!(b = malloc(sizeof(*b) + cap)))
        return NULL;
    *b = (struct fblock){.wall = INT64_MIN, .cap = cap};
    e->block[slot] = b;
    fc->bytes += cap;
    stat_set(&fc->st->cache_bytes, fc->bytes);
    return b;
}

uint64_t fcache_id(struct fcache *fc)
{
    return ++fc->generation;
}
