/* Compression; see compress.h. The levels and the cost model come from measuring jquery.js
 * with bench/levels.c; the figures are in bench/README.md, "Compression".
 * A variant is made once per file version, so the highest levels pay for themselves on small
 * and medium bodies; above 256 KiB they would cost seconds, so large bodies get the level where
 * the curve flattens. Brotli 11 costs milliseconds even for 1 KiB, so it never runs on the loop;
 * small gzip and zstd bodies do. */
#include "rt/compress.h"

#include <brotli/encode.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "config/config.h"
#include "core/sha256.h"
#include "rt/errlog.h"
#include "rt/fcache.h"
#include "rt/file.h"
#include "rt/offload.h"
#include "rt/runtime.h"

#define LARGE (256u << 10) /* bodies above this get the faster levels */
#define MAX_JOBS 64        /* per worker, in flight; more requests get what exists */
#define DCZ_WINDOW_LOG 23  /* 8 MiB: what RFC 9842 lets a dcz decoder insist on */

struct cjob {
    struct offload_job job; /* first: the offload threads run it (run_job) */
    struct fentry *base;
    int coding;
    int level;
    unsigned char dict_hash[ACCEPT_DICT_HASH];
    /* Copies the thread reads; the base's reference keeps data and fd alive. */
    const char *data;
    int fd;
    uint64_t size;
    const char *path; /* base->path: immutable while the reference is held */
    const char *pattern;
    int root_fd; /* a dup of the site's root for dcz (a reload may close the site's), else -1 */
    size_t max_dict;
    /* Results, written by the thread before it queues the job as done. */
    char *out;
    size_t out_len;
    int err;
    uint64_t ns;
};

struct compressor {
    struct offload q; /* the compressor thread: one, started on first use */
};

const char *compress_coding_name(int coding)
{
    return coding == COMPRESS_DCZ ? "dcz" : accept_coding_name((enum accept_coding)coding);
}

int compress_level(int coding, uint64_t size)
{
    bool large = size > LARGE;
    switch (coding) {
    case ACCEPT_BR:
        return large ? 5 : 11;
    case ACCEPT_GZIP:
        return large ? 9 : 12;
    default:
        return large ? 9 : 19; /* zstd and dcz */
    }
}

uint64_t compress_cost_ns(int coding, uint64_t size)
{
    bool large = size > LARGE;
    uint64_t per_byte; /* ns, rounded up from bench/README.md's "Compression" */
    switch (coding) {
    case ACCEPT_BR:
        per_byte = large ? 30 : 1800;
        break;
    case ACCEPT_GZIP:
        per_byte = large ? 30 : 120;
        break;
    default:
        per_byte = large ? 30 : 300;
        break;
    }
    return size * per_byte;
}

size_t compress_tag(char *tag, size_t cap, int coding, const unsigned char *dict_hash)
{
    const char *name = compress_coding_name(coding);
    size_t n = strlen(name);
    size_t need = n + (coding == COMPRESS_DCZ ? ACCEPT_DICT_HASH : 0);
    if (need > cap)
        return 0;
    memcpy(tag, name, n);
    if (coding == COMPRESS_DCZ)
        memcpy(tag + n, dict_hash, ACCEPT_DICT_HASH);
    return need;
}

static int encode_zstd(int level, const void *in, size_t len, const void *dict, size_t dict_len,
                       char *out, size_t cap, size_t *out_len)
{
    ZSTD_CCtx *z = ZSTD_createCCtx();
    if (!z)
        return -ENOMEM;
    int rc = -EIO;
    if (ZSTD_isError(ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, level)))
        goto out;
    if (dict) {
        /* A raw-content prefix: the decoder needs the same bytes and nothing else. */
        if (ZSTD_isError(ZSTD_CCtx_setParameter(z, ZSTD_c_windowLog, DCZ_WINDOW_LOG)) ||
            ZSTD_isError(ZSTD_CCtx_refPrefix(z, dict, dict_len)))
            goto out;
    }
    size_t n = ZSTD_compress2(z, out, cap, in, len);
    if (!ZSTD_isError(n)) {
        *out_len = n;
        rc = 0;
    }
out:
    ZSTD_freeCCtx(z);
    return rc;
}

int compress_encode(int coding, int level, const void *in, size_t len, const void *dict,
                    size_t dict_len, const unsigned char *dict_hash, char **out, size_t *out_len)
{
    static const unsigned char dcz_magic[8] = {0x5e, 0x2a, 0x4d, 0x18, 0x20, 0x00, 0x00, 0x00};
    size_t cap, n = 0;
    int rc = -EIO;

    switch (coding) {
    case ACCEPT_BR:
        cap = BrotliEncoderMaxCompressedSize(len);
        break;
    case ACCEPT_GZIP:
        cap = libdeflate_gzip_compress_bound(NULL, len);
        break;
    case ACCEPT_ZSTD:
        cap = ZSTD_compressBound(len);
        break;
    case COMPRESS_DCZ:
        cap = DCZ_HEADER_LEN + ZSTD_compressBound(len);
        break;
    default:
        return -EINVAL;
    }
    if (cap == 0) /* Brotli's bound overflowed */
        return -EFBIG;
    char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    switch (coding) {
    case ACCEPT_BR:
        n = cap;
        if (BrotliEncoderCompress(level, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC, len, in, &n,
                                  (uint8_t *)buf))
            rc = 0;
        break;
    case ACCEPT_GZIP: {
        struct libdeflate_compressor *d = libdeflate_alloc_compressor(level);
        if (!d) {
            rc = -ENOMEM;
            break;
        }
        n = libdeflate_gzip_compress(d, in, len, buf, cap);
        rc = n ? 0 : -EIO;
        libdeflate_free_compressor(d);
        break;
    }
    case ACCEPT_ZSTD:
        rc = encode_zstd(level, in, len, NULL, 0, buf, cap, &n);
        break;
    case COMPRESS_DCZ:
        memcpy(buf, dcz_magic, sizeof(dcz_magic));
        memcpy(buf + sizeof(dcz_magic), dict_hash, ACCEPT_DICT_HASH);
        rc = encode_zstd(level, in, len, dict, dict_len, buf + DCZ_HEADER_LEN, cap - DCZ_HEADER_LEN,
                         &n);
        n += DCZ_HEADER_LEN;
        break;
    }
    if (rc) {
        free(buf);
        return rc;
    }
    /* The bound is a little above the input; a variant kept in the cache holds only its own
     * bytes (--compress-cache counts n: without this the memory held was up to three times it). */
    char *fit = n < cap ? realloc(buf, n ? n : 1) : NULL;
    *out = fit ? fit : buf;
    *out_len = n;
    return 0;
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The first size bytes of fd in a new heap buffer (*out, to free). */
static int read_fd(int fd, uint64_t size, char **out)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return -ENOMEM;
    int rc = file_read_all(fd, buf, size);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    return 0;
}

/* Finds, among the files the job's pattern matches in its directory, the one whose SHA-256 is
 * the job's dict_hash; *dict gets its bytes. -ENOENT when none has it. */
static void job_free(struct cjob *j)
{
    if (j->root_fd >= 0)
        close(j->root_fd);
    free(j);
}

static int find_dictionary(const struct cjob *j, char **dict, size_t *dict_len)
{
    const char *slash = strrchr(j->pattern, '/');
    char dir[PATH_MAX], url[PATH_MAX];
    size_t dlen = (size_t)(slash - j->pattern); /* "/assets" for the pattern "/assets/NAME" */
    if (dlen >= sizeof(dir))
        return -ENAMETOOLONG;
    memcpy(dir, j->pattern + 1, dlen ? dlen - 1 : 0);
    dir[dlen ? dlen - 1 : 0] = '\0';
    int dfd = file_open_beneath(j->root_fd, dir, O_DIRECTORY);
    if (dfd < 0)
        return dfd;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return -errno;
    }
    int rc = -ENOENT;
    struct dirent *de;
    while (rc == -ENOENT && (de = readdir(d))) {
        int n = snprintf(url, sizeof(url), "%.*s/%s", (int)dlen, j->pattern, de->d_name);
        if (de->d_name[0] == '.' || n < 0 || (size_t)n >= sizeof(url) ||
            !accept_path_match(j->pattern, url, (size_t)n))
            continue;
        int fd = file_open_beneath(dirfd(d), de->d_name, O_NONBLOCK);
        struct stat st;
        if (fd < 0)
            continue;
        char *buf = NULL;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= j->max_dict &&
            read_fd(fd, (uint64_t)st.st_size, &buf) == 0) {
            unsigned char h[SHA256_LEN];
            sha256(buf, (size_t)st.st_size, h);
            if (memcmp(h, j->dict_hash, SHA256_LEN) == 0) {
                *dict = buf;
                *dict_len = (size_t)st.st_size;
                buf = NULL;
                rc = 0;
            }
        }
        free(buf);
        close(fd);
    }
    closedir(d);
    return rc;
}

static void run_job(struct cjob *j)
{
    uint64_t t0 = cpu_ns();
    char *body = NULL, *dict = NULL;
    size_t dict_len = 0;
    const char *in = j->data;
    if (!in) {
        if ((j->err = read_fd(j->fd, j->size, &body)) != 0)
            goto out;
        in = body;
    }
    if (j->coding == COMPRESS_DCZ && (j->err = find_dictionary(j, &dict, &dict_len)) != 0)
        goto out;
    j->err = compress_encode(j->coding, j->level, in, j->size, dict, dict_len, j->dict_hash,
                             &j->out, &j->out_len);
out:
    free(dict);
    free(body);
    j->ns = cpu_ns() - t0;
}

static void run_offloaded(struct offload_job *oj)
{
    run_job((struct cjob *)oj);
}

struct compressor *compress_new(void)
{
    struct compressor *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    if (offload_init(&c->q, 1, -1) != 0) { /* the wake fd is the worker's, at first use */
        free(c);
        return NULL;
    }
    return c;
}

void compress_free(struct runtime *w, struct compressor *c)
{
    if (!c)
        return;
    offload_fini(&c->q);
    struct cjob *j;
    while ((j = (struct cjob *)offload_abandon(&c->q))) {
        fcache_put(w->cache, j->base);
        free(j->out);
        job_free(j);
    }
    free(c);
}

/* Keeps the result if it saves at least 5% (and for dcz, if the dictionary was found). */
static void finish(struct runtime *w, struct cjob *j)
{
    char tag[FCACHE_TAG_MAX];
    size_t tag_len = compress_tag(tag, sizeof(tag), j->coding, j->dict_hash);
    const char *name = compress_coding_name(j->coding);
    bool pays = j->err == 0 && j->out_len <= j->size - j->size / 20;

    stat_add(&w->stats.compress_made, 1);
    stat_add(&w->stats.compress_ns, j->ns);
    if (pays) {
        stat_add(&w->stats.compress_kept, 1);
        stat_add(&w->stats.compress_in_bytes, j->size);
        stat_add(&w->stats.compress_saved_bytes, j->size - j->out_len);
    }
    if (w->cfg->verbose)
        errlog(ERRLOG_INFO, "worker %d: %s /%s: %llu -> %llu bytes in %.2f ms%s%s", w->id, name,
               j->path, (unsigned long long)j->size, (unsigned long long)(j->err ? 0 : j->out_len),
               (double)j->ns / 1e6, j->err ? ", failed: " : (pays ? "" : ", not kept"),
               j->err ? strerror(-j->err) : "");
    char *data = pays ? j->out : NULL;
    if (!pays)
        free(j->out);
    j->out = NULL;
    /* A delta's ETag names its dictionary too (6 hex digits of its hash): two deltas of one
     * file version against different dictionaries are different bytes. */
    char suffix[16];
    if (j->coding == COMPRESS_DCZ)
        snprintf(suffix, sizeof(suffix), "dcz%02x%02x%02x", j->dict_hash[0], j->dict_hash[1],
                 j->dict_hash[2]);
    /* data passes to the cache; a failure to record the variant only means it is made again */
    (void)fcache_variant_add(w->cache, j->base, tag, tag_len, data, pays ? j->out_len : 0,
                             j->coding == COMPRESS_DCZ ? suffix : name);
}

void compress_collect(struct runtime *w)
{
    struct compressor *c = w->compress;
    if (!c || !c->q.count)
        return;
    struct cjob *done = (struct cjob *)offload_done(&c->q);
    while (done) {
        struct cjob *j = done;
        done = (struct cjob *)j->job.next;
        finish(w, j);
        fcache_put(w->cache, j->base);
        job_free(j);
    }
}

int compress_request(struct runtime *w, struct fentry *base, int coding,
                     const unsigned char *dict_hash, const char *pattern, size_t max_dict)
{
    struct compressor *c = w->compress;
    if (!c)
        return -ENOSYS;
    /* A variant's ETag names its file's digest (rt/fcache.h): until the digest thread has it
     * (a hundredth of a compression's time), identity is sent and nothing is compressed. */
    if (!base->digested && !base->is_derived)
        return -EINPROGRESS;
    for (const struct offload_job *q = c->q.inflight; q; q = q->inext) {
        const struct cjob *j = (const struct cjob *)q;
        /* By version, not entry: an entry replaced when its digest came (rt/fcache.h) is
         * compressed by the job its predecessor started. */
        if (fcache_same_version(j->base, base) && j->coding == coding &&
            (coding != COMPRESS_DCZ || memcmp(j->dict_hash, dict_hash, ACCEPT_DICT_HASH) == 0))
            return -EINPROGRESS;
    }
    struct cjob *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    *j = (struct cjob){
        .base = base,
        .coding = coding,
        .level = compress_level(coding, base->size),
        .data = base->data,
        .fd = base->fd,
        .size = base->size,
        .path = base->path,
        .pattern = pattern,
        .root_fd = -1,
        .max_dict = max_dict,
    };
    if (coding == COMPRESS_DCZ) {
        memcpy(j->dict_hash, dict_hash, ACCEPT_DICT_HASH);
        if ((j->root_fd = fcntl(fcache_root_fd(w->cache), F_DUPFD_CLOEXEC, 0)) < 0) {
            free(j);
            return -errno;
        }
    }

    /* Cheap enough for the loop: make it now, and this very response can carry it. */
    if (coding != COMPRESS_DCZ && base->data &&
        compress_cost_ns(coding, base->size) <= COMPRESS_LOOP_NS) {
        run_job(j);
        stat_add(&w->stats.compress_on_loop, 1);
        finish(w, j);
        job_free(j);
        return 0;
    }
    if (c->q.count >= MAX_JOBS) {
        stat_add(&w->stats.compress_skipped, 1);
        job_free(j);
        return -EAGAIN;
    }
    c->q.wake_fd = w->wake_fd;
    j->job.run = run_offloaded;
    if (offload_submit(&c->q, &j->job) != 0) {
        job_free(j);
        return -EAGAIN;
    }
    fcache_hold(base); /* the job's reference, dropped in compress_collect */
    return -EINPROGRESS;
}
