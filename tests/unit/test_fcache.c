/* test_fcache: the file cache's contract in rt/fcache.h against a real directory: references
 * (an entry held by a send outlives its eviction and replacement), remembered misses,
 * revalidation once per `now` second (size, mtime, ctime, mode), derived bodies and the bounds.
 * Must not: depend on the clock: `now` is passed in, and revalidation depends only on it.
 * Ownership: each test makes and removes its own directory under /tmp. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rt/fcache.h"
#include "rt/file.h"
#include "rt/stats.h"

struct fixture {
    char dir[64];
    int root;
    struct fcache *fc;
    struct stats *st; /* the counters the cache adds to (a worker's, in the server) */
};

static void setup(struct fixture *f, size_t max_bytes, size_t max_file)
{
    strcpy(f->dir, "/tmp/ringhttpd-fcache-XXXXXX");
    CHECK(mkdtemp(f->dir) != NULL);
    f->root = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(f->root >= 0);
    f->st = calloc(1, sizeof(*f->st));
    CHECK(f->st != NULL);
    f->fc = fcache_new(f->root, NULL, max_bytes, max_file, 4096, f->st, -1);
    CHECK(f->fc != NULL);
}

static void put_file(struct fixture *f, const char *name, const char *data)
{
    int fd = openat(f->root, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    CHECK_INT(write(fd, data, strlen(data)), strlen(data));
    close(fd);
}

/* put_file for a rewrite in place that the cache must see by its ctime: written again until
 * the ctime moves. Kernels before 6.13 (no multigrain timestamps; 6.1 in `make test-vm`) stamp
 * from a clock that ticks every few milliseconds, and two writes within one tick leave the same
 * ctime, which no stat can tell apart (the test failed that way there now and then). */
static void rewrite_file(struct fixture *f, const char *name, const char *data)
{
    struct stat before, after;
    CHECK_INT(fstatat(f->root, name, &before, 0), 0);
    for (int i = 0; i < 1000; i++) {
        put_file(f, name, data);
        CHECK_INT(fstatat(f->root, name, &after, 0), 0);
        if (after.st_ctim.tv_sec != before.st_ctim.tv_sec ||
            after.st_ctim.tv_nsec != before.st_ctim.tv_nsec)
            return;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    CHECK(!"the ctime never moved");
}

static void teardown(struct fixture *f)
{
    fcache_free(f->fc);
    free(f->st);
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    CHECK_INT(system(cmd), 0);
    close(f->root);
}

static struct fentry *get(struct fixture *f, const char *path, int64_t now)
{
    struct fentry *e = fcache_get(f->fc, path, strlen(path), now);
    CHECK(e != NULL);
    return e;
}

TEST(fcache_hit_shares_one_entry)
{
    struct fixture f;
    setup(&f, 1 << 20, 1 << 16);
    put_file(&f, "a.txt", "hello");
    struct fentry *e1 = get(&f, "a.txt", 1);
    CHECK_INT(e1->err, 0);
    CHECK_INT(e1->size, 5);
    CHECK(e1->data && memcmp(e1->data, "hello", 5) == 0);
    CHECK(e1->etag_len > 2 && e1->etag[0] == '"');
    CHECK_INT(e1->refs, 2); /* the table's and ours */
    struct fentry *e2 = get(&f, "a.txt", 1);
    CHECK(e1 == e2);
    CHECK_INT(e1->refs, 3);
    fcache_put(f.fc, e2);
    fcache_put(f.fc, e1);
    CHECK_INT(e1->refs, 1);
    teardown(&f);
}

TEST(fcache_miss_is_remembered_for_the_second)
{
    struct fixture f;
    setup(&f, 1 << 20, 1 << 16);
    struct fentry *e = get(&f, "late.txt", 1);
    CHECK_INT(e->err, -ENOENT);
    fcache_put(f.fc, e);
    put_file(&f, "late.txt", "now here");
    e = get(&f, "late.txt", 1); /* same second: the miss stands */
    CHECK_INT(e->err, -ENOENT);
    fcache_put(f.fc, e);
    e = get(&f, "late.txt", 2);
    CHECK_INT(e->err, 0);
    CHECK_INT(e->size, 8);
    fcache_put(f.fc, e);
    teardown(&f);
}

TEST(fcache_held_entry_outlives_replacement)
{
    struct fixture f;
    setup(&f, 1 << 20, 1 << 16);
    put_file(&f, "a.txt", "version one");
    struct fentry *old = get(&f, "a.txt", 1);
    put_file(&f, "a.txt", "v2");
    struct fentry *cur = get(&f, "a.txt", 2); /* revalidated: replaced */
    CHECK(cur != old);
    CHECK_INT(cur->size, 2);
    /* The held old entry is intact (ASan would report a use after free here). */
    CHECK_INT(old->refs, 1);
    CHECK(memcmp(old->data, "version one", 11) == 0);
    CHECK(old->fd >= 0);
    fcache_put(f.fc, old);
    fcache_put(f.fc, cur);
    teardown(&f);
}

TEST(fcache_eviction_while_held)
{
    struct fixture f;
    setup(&f, 16, 16); /* room for one 10-byte file */
    put_file(&f, "a.txt", "aaaaaaaaaa");
    put_file(&f, "b.txt", "bbbbbbbbbb");
    struct fentry *a = get(&f, "a.txt", 1);
    struct fentry *b = get(&f, "b.txt", 1); /* evicts a from the table */
    CHECK_INT(a->refs, 1);
    CHECK(memcmp(a->data, "aaaaaaaaaa", 10) == 0);
    struct fentry *a2 = get(&f, "a.txt", 1); /* loaded again: a new entry */
    CHECK(a2 != a);
    fcache_put(f.fc, a);
    fcache_put(f.fc, b);
    fcache_put(f.fc, a2);
    teardown(&f);
}

TEST(fcache_large_files_are_not_held_in_memory)
{
    struct fixture f;
    setup(&f, 1 << 20, 4);
    put_file(&f, "big.txt", "more than four");
    struct fentry *e = get(&f, "big.txt", 1);
    CHECK(e->data == NULL && e->fd >= 0);
    CHECK_INT(e->size, 14);
    fcache_put(f.fc, e);
    teardown(&f);
}

TEST(fcache_rewrite_with_size_and_mtime_restored)
{
    struct fixture f;
    setup(&f, 1 << 20, 1 << 16);
    put_file(&f, "a.txt", "AAAA");
    struct stat st;
    CHECK_INT(fstatat(f.root, "a.txt", &st, 0), 0);
    struct fentry *e = get(&f, "a.txt", 1);
    char etag[48];
    memcpy(etag, e->etag, sizeof(etag));
    fcache_put(f.fc, e);
    usleep(20000); /* so the ctime of the rewrite differs even on coarse-clock filesystems */
    int fd = openat(f.root, "a.txt", O_WRONLY | O_CLOEXEC);
    CHECK_INT(pwrite(fd, "BBBB", 4, 0), 4);
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    CHECK_INT(futimens(fd, times), 0);
    close(fd);
    e = get(&f, "a.txt", 2);
    CHECK(memcmp(e->data, "BBBB", 4) == 0);
    CHECK(strcmp(e->etag, etag) != 0);
    fcache_put(f.fc, e);
    teardown(&f);
}

/* Issue 38: the ETag is the bytes' digest, so two copies of a file (other inodes, other
 * mtimes) agree, and a rewrite that keeps the size and sets mtime to 0 (a reproducible build)
 * does not. */
TEST(fcache_etag_is_the_bytes_digest)
{
    struct fixture f;
    setup(&f, 1 << 20, 1 << 16);
    put_file(&f, "a.txt", "hello");
    put_file(&f, "b.txt", "hello");
    struct timespec zero[2] = {{0, 0}, {0, 0}};
    CHECK_INT(utimensat(f.root, "b.txt", zero, 0), 0);
    struct fentry *a = get(&f, "a.txt", 1), *b = get(&f, "b.txt", 1);
    CHECK_MEM(a->etag, a->etag_len, "\"2cf24dba5fb0a30e26e83b2ac5b9e29e\"");
    CHECK(a->etag_len == b->etag_len && memcmp(a->etag, b->etag, a->etag_len) == 0);
    fcache_put(f.fc, a);
    fcache_put(f.fc, b);
    put_file(&f, "b.txt", "hellp");
    CHECK_INT(utimensat(f.root, "b.txt", zero, 0), 0);
    b = get(&f, "b.txt", 2);
    CHECK_MEM(b->data, 5, "hellp");
    CHECK(b->etag_len == 34 && memcmp(b->etag, "\"2cf24dba", 9) != 0);
    fcache_put(f.fc, b);
    teardown(&f);
}

/* A file past the in-loop bound is digested by the cache's thread: served without an ETag
 * until then (no request waits for it), then the entry is replaced by one that carries it. */
TEST(fcache_large_file_digest_off_the_loop)
{
    struct fixture f;
    strcpy(f.dir, "/tmp/ringhttpd-fcache-XXXXXX");
    CHECK(mkdtemp(f.dir) != NULL);
    f.root = open(f.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    f.st = calloc(1, sizeof(*f.st));
    int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    CHECK(wake >= 0);
    f.fc = fcache_new(f.root, NULL, 1 << 20, 1 << 16, 4096, f.st, wake);
    CHECK(f.fc != NULL);
    size_t len = 300000;
    char *big = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        big[i] = (char)('a' + i % 23);
    big[len] = '\0';
    put_file(&f, "big.bin", big);
    struct fentry *e = get(&f, "big.bin", 1);
    CHECK(e->data == NULL && e->etag_len == 0);
    struct pollfd pfd = {.fd = wake, .events = POLLIN};
    CHECK_INT(poll(&pfd, 1, 10000), 1);
    fcache_collect(f.fc);
    struct fentry *again = get(&f, "big.bin", 1);
    CHECK(again != e && again->etag_len == 34);
    uint8_t want[COND_DIGEST_LEN];
    file_digest_mem(big, len, want, sizeof(want));
    char tag[COND_ETAG_MAX];
    cond_etag(tag, sizeof(tag), want, NULL);
    CHECK_MEM(again->etag, again->etag_len, tag);
    fcache_put(f.fc, e); /* the first entry lived on for its holder */
    fcache_put(f.fc, again);
    free(big);
    teardown(&f);
    close(wake);
}

TEST(fcache_chmod_000_is_eacces)
{
    struct fixture f;
    setup(&f, 1 << 20, 1 << 16);
    put_file(&f, "a.txt", "secret");
    struct fentry *e = get(&f, "a.txt", 1);
    CHECK_INT(e->err, 0);
    fcache_put(f.fc, e);
    CHECK_INT(fchmodat(f.root, "a.txt", 0, 0), 0);
    e = get(&f, "a.txt", 1); /* same second: still the old entry */
    CHECK_INT(e->err, 0);
    fcache_put(f.fc, e);
    e = get(&f, "a.txt", 2);
    CHECK_INT(e->err, -EACCES);
    fcache_put(f.fc, e);
    teardown(&f);
}

TEST(fcache_counts_hits_misses_and_bytes)
{
    struct fixture f;
    setup(&f, 1 << 20, 1 << 10);
    put_file(&f, "a.txt", "hello");
    struct fentry *e = fcache_get(f.fc, "a.txt", 5, 1);
    CHECK(e && e->err == 0);
    CHECK_INT(stat_get(&f.st->cache_misses), 1);
    CHECK_INT(stat_get(&f.st->cache_bytes), 5);
    fcache_put(f.fc, e);
    e = fcache_get(f.fc, "a.txt", 5, 1);
    CHECK_INT(stat_get(&f.st->cache_hits), 1);
    fcache_put(f.fc, e);
    e = fcache_get(f.fc, "missing", 7, 1);
    CHECK(e && e->err == -ENOENT);
    CHECK_INT(stat_get(&f.st->cache_misses), 2);
    fcache_put(f.fc, e);
    teardown(&f);
}

static char *dup_bytes(const char *s, size_t n)
{
    char *p = malloc(n);
    CHECK(p != NULL);
    memcpy(p, s, n);
    return p;
}

TEST(fcache_derived_bodies_live_and_die_with_their_entry)
{
    struct fixture f;
    setup(&f, 1 << 20, 1 << 16);
    CHECK_INT(mkdirat(f.root, "d", 0755), 0);
    struct fentry *d = get(&f, "d", 1);
    CHECK(d->is_dir);
    struct fentry *k = fcache_derive(f.fc, d, 0, dup_bytes("<html>one", 9), 9, "text/html", 1);
    CHECK(k && k == d->derived[0] && k->is_derived && k->size == 9 && k->checked == 1);
    CHECK(memcmp(k->data, "<html>one", 9) == 0 && strcmp(k->mime, "text/html") == 0);
    CHECK(k->path_len == 2 && memcmp(k->path, "d/", 2) == 0 && k->fd == -1);
    CHECK_INT(f.st->cache_bytes, 9);
    /* Its variants are its own. */
    CHECK_INT(fcache_variant_add(f.fc, k, "br", 2, dup_bytes("BR", 2), 2, "br"), 0);
    struct fentry *v = fcache_variant_get(f.fc, k, "br", 2);
    CHECK(v && v->err == 0 && v->etag_len == 0); /* a listing has no validators */
    fcache_put(f.fc, v);
    /* The same bytes made again: the same body, with its variants. */
    struct fentry *same = fcache_derive(f.fc, d, 0, dup_bytes("<html>one", 9), 9, "text/html", 6);
    CHECK(same == k && k->checked == 6 && d->derived[0] == k);
    fcache_put(f.fc, same);
    /* Other bytes: a new body, whose variants are not the old one's; the old body lives on
     * while the caller holds it, and the bytes count the new one only. */
    struct fentry *k2 = fcache_derive(f.fc, d, 0, dup_bytes("<html>two!", 10), 10, "text/html", 11);
    CHECK(k2 && k2 != k && d->derived[0] == k2 && k2->generation != k->generation);
    CHECK(fcache_variant_get(f.fc, k2, "br", 2) == NULL);
    CHECK(memcmp(k->data, "<html>one", 9) == 0);
    fcache_put(f.fc, k);
    CHECK_INT(f.st->cache_bytes, 10);
    /* Too large to keep (over an eighth of the cache): the caller's alone, not counted. */
    size_t big = (1 << 20) / 8 + 1;
    char *huge = malloc(big);
    CHECK(huge != NULL);
    memset(huge, 'x', big);
    struct fentry *h = fcache_derive(f.fc, d, 1, huge, big, "application/json", 11);
    CHECK(h && h->size == big && d->derived[1] == NULL);
    fcache_put(f.fc, h);
    CHECK_INT(f.st->cache_bytes, 10);
    fcache_put(f.fc, k2);
    fcache_put(f.fc, d);
    /* The directory changes: its entry, and the body with it, is replaced (ASan: no leak). */
    usleep(20000);
    CHECK_INT(mkdirat(f.root, "d/sub", 0755), 0);
    d = get(&f, "d", 12);
    CHECK(d->derived[0] == NULL);
    fcache_put(f.fc, d);
    teardown(&f);
}

TEST(fcache_variants_are_keyed_by_version_and_bounded)
{
    struct fixture f;
    setup(&f, 1 << 20, 1 << 16); /* variant budget 4096 bytes */
    put_file(&f, "v.js", "version one");
    struct fentry *base = get(&f, "v.js", 1);
    CHECK(fcache_variant_get(f.fc, base, "br", 2) == NULL);
    CHECK_INT(fcache_variant_add(f.fc, base, "br", 2, dup_bytes("BR1", 3), 3, "br"), 0);
    struct fentry *v = fcache_variant_get(f.fc, base, "br", 2);
    CHECK(v && v->is_variant && v->err == 0 && v->size == 3 && memcmp(v->data, "BR1", 3) == 0);
    CHECK(v->fd == -1);
    /* its own strong ETag: the base's with the coding appended */
    CHECK(v->etag_len == base->etag_len + 3);
    CHECK(memcmp(v->etag, base->etag, base->etag_len - 1) == 0);
    CHECK(memcmp(v->etag + base->etag_len - 1, "-br\"", 4) == 0);
    CHECK(fcache_variant_get(f.fc, base, "gzip", 4) == NULL);
    fcache_put(f.fc, v);

    /* "did not pay" is remembered, without bytes */
    CHECK_INT(fcache_variant_add(f.fc, base, "gzip", 4, NULL, 0, "gzip"), 0);
    v = fcache_variant_get(f.fc, base, "gzip", 4);
    CHECK(v && v->err == -ENODATA && !v->data);
    fcache_put(f.fc, v);

    /* a new version of the file (same size: ctime tells) never finds the old variant */
    rewrite_file(&f, "v.js", "version two");
    struct fentry *base2 = get(&f, "v.js", 2);
    CHECK(base2 != base);
    CHECK(fcache_variant_get(f.fc, base2, "br", 2) == NULL);

    /* the byte budget holds: the least recently used variant goes first */
    char *big = malloc(3000);
    CHECK(big != NULL);
    memset(big, 'x', 3000);
    CHECK_INT(fcache_variant_add(f.fc, base2, "zstd", 4, big, 3000, "zstd"), 0);
    CHECK_INT(fcache_variant_bytes(f.fc), 3003);
    CHECK_INT(fcache_variant_add(f.fc, base2, "br", 2, dup_bytes("0123456789", 10), 10, "br"), 0);
    CHECK(fcache_variant_bytes(f.fc) <= 4096);
    big = malloc(2000);
    CHECK(big != NULL);
    memset(big, 'y', 2000);
    CHECK_INT(fcache_variant_add(f.fc, base2, "gzip", 4, big, 2000, "gzip"), 0);
    CHECK(fcache_variant_bytes(f.fc) <= 4096);
    CHECK(fcache_variant_get(f.fc, base2, "zstd", 4) == NULL); /* evicted */
    /* larger than the whole budget: recorded as not paying */
    big = malloc(5000);
    CHECK(big != NULL);
    CHECK_INT(fcache_variant_add(f.fc, base2, "zstd", 4, big, 5000, "zstd"), 0);
    v = fcache_variant_get(f.fc, base2, "zstd", 4);
    CHECK(v && v->err == -ENODATA);
    fcache_put(f.fc, v);
    fcache_put(f.fc, base2);
    fcache_put(f.fc, base);

    teardown(&f);
}

/* Issue 19: two sites' roots in one cache. The same relative path is a different entry per
 * site (fcache_root's id), each revalidated beneath its own root, and a miss in one site is not
 * a miss in the other. */
TEST(fcache_sites_are_kept_apart)
{
    struct fixture a, b;
    setup(&a, 1 << 20, 1 << 16);
    setup(&b, 1 << 20, 1 << 16);
    put_file(&a, "index.html", "site A");
    put_file(&b, "index.html", "site B, longer");
    put_file(&b, "only-b.txt", "b");
    fcache_root(a.fc, 1, b.root, NULL);
    struct fentry *eb = get(&a, "index.html", 1);
    fcache_root(a.fc, 0, a.root, NULL);
    struct fentry *ea = get(&a, "index.html", 1);
    CHECK(ea != eb);
    CHECK_MEM(ea->data, ea->size, "site A");
    CHECK_MEM(eb->data, eb->size, "site B, longer");
    struct fentry *miss = get(&a, "only-b.txt", 1);
    CHECK_INT(miss->err, -ENOENT);
    fcache_root(a.fc, 1, b.root, NULL);
    struct fentry *hit = get(&a, "only-b.txt", 2);
    CHECK_INT(hit->err, 0);
    struct fentry *again = get(&a, "index.html", 2); /* revalidated beneath b's root */
    CHECK(again == eb);
    CHECK_INT(fcache_root_fd(a.fc), b.root);
    fcache_put(a.fc, again);
    fcache_put(a.fc, hit);
    fcache_put(a.fc, miss);
    fcache_put(a.fc, ea);
    fcache_put(a.fc, eb);
    teardown(&a);
    teardown(&b);
}

/* Issue 19: a site's own --mime-types table types its files; another site's do not get it. */
TEST(fcache_site_mime_table)
{
    struct fixture a, b;
    struct mime_table types = {0};
    size_t bad = 0;
    static const char text[] = "application/x-site-b foo\n";
    setup(&a, 1 << 20, 1 << 16);
    setup(&b, 1 << 20, 1 << 16);
    CHECK_INT(mime_table_parse(text, sizeof(text) - 1, &types, &bad), 0);
    put_file(&a, "x.foo", "a");
    put_file(&b, "x.foo", "b");
    fcache_root(a.fc, 1, b.root, &types);
    struct fentry *eb = get(&a, "x.foo", 1);
    fcache_root(a.fc, 0, a.root, NULL);
    struct fentry *ea = get(&a, "x.foo", 1);
    CHECK(eb->mime && strcmp(eb->mime, "application/x-site-b") == 0);
    CHECK(!ea->mime || strcmp(ea->mime, "application/x-site-b") != 0);
    fcache_put(a.fc, ea);
    fcache_put(a.fc, eb);
    teardown(&a);
    teardown(&b);
    mime_table_free(&types);
}

/* serve's prebuilt answers count in the cache's bytes, are reused while large enough, make
 * room by evicting older entries, and are given back with their entry (fcache_free asserts
 * that the bytes come back to zero). */
TEST(fcache_blocks_count_in_the_cache_bytes)
{
    struct fixture f;
    setup(&f, 1000, 1000);
    put_file(&f, "a.txt", "hello");
    put_file(&f, "b.txt", "world");
    struct fentry *b = get(&f, "b.txt", 1);
    fcache_put(f.fc, b); /* in the table only: the older entry, evictable */
    struct fentry *a = get(&f, "a.txt", 1);
    struct fblock *k = fcache_block(f.fc, a, 0, 100);
    CHECK(k && k->cap == 100 && k->users == 0 && k->wall == INT64_MIN && a->block[0] == k);
    CHECK_INT(stat_get(&f.st->cache_bytes), 5 + 5 + 100);
    CHECK(fcache_block(f.fc, a, 0, 60) == k); /* large enough: the same one */
    k = fcache_block(f.fc, a, 1, 893);        /* 1003 bytes wanted of 1000: b goes, not a */
    CHECK(k && a->block[1] == k);
    CHECK_INT(stat_get(&f.st->cache_bytes), 5 + 100 + 893);
    struct fentry *again = get(&f, "a.txt", 1);
    CHECK(again == a); /* still in the table */
    fcache_put(f.fc, again);
    CHECK_INT(stat_get(&f.st->cache_misses), 2);
    b = get(&f, "b.txt", 1);
    CHECK(b->err == 0);
    CHECK_INT(stat_get(&f.st->cache_misses), 3); /* loaded again: it was evicted */
    fcache_put(f.fc, b);
    k = fcache_block(f.fc, a, 0, 200); /* grows: the old one is freed, its bytes given back */
    CHECK(k && k->cap == 200);
    fcache_put(f.fc, a);
    teardown(&f);
}
