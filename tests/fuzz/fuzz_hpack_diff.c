/* fuzz_hpack_diff: libFuzzer target that feeds the same header blocks to our HPACK decoder and
 * to libnghttp2's inflater (the oracle, linked here only) and aborts when one accepts what the
 * other rejects or they decode different field lists. The input is a series of blocks, each a
 * length byte and that many bytes, decoded on one connection's table (4096 bytes).
 * Must not: be linked into the server.
 * Ownership: libFuzzer owns data; both decoders are freed before returning. */
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/h2/hpack.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_hpack_diff: %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_FIELDS 4096

static char out[1 << 16];

struct got {
    size_t n;
    size_t name_off[MAX_FIELDS], name_len[MAX_FIELDS], value_off[MAX_FIELDS], value_len[MAX_FIELDS];
};

/* Ours: 1 accepted (fields in g, bytes in out), 0 rejected, -1 too large to compare. */
static int ours(struct hpack_dec *d, const uint8_t *in, size_t len, struct got *g)
{
    size_t pos = 0, used = 0;
    g->n = 0;
    while (pos < len) {
        struct hpack_field f;
        int rc = hpack_decode(d, in, len, &pos, g->n == 0, out + used, sizeof(out) - used, 0, &f);
        if (rc < 0 || (rc == 0 && pos < len)) /* an error, or the block ends inside one */
            return 0;
        if (rc == 0) /* size updates only */
            break;
        REQUIRE(f.name);
        /* A literal is in out already; an indexed field points into the table: keep a copy.
         * One-byte references to a 4 KiB entry outgrow any buffer (a bomb, which h2 bounds
         * by its header list): then this input is compared no further (-1). */
        if (f.name != out + used) {
            if (used + f.name_len + f.value_len > sizeof(out))
                return -1;
            memmove(out + used, f.name, f.name_len);
            memmove(out + used + f.name_len, f.value, f.value_len);
        }
        g->name_off[g->n] = used, g->name_len[g->n] = f.name_len;
        g->value_off[g->n] = used + f.name_len, g->value_len[g->n] = f.value_len;
        used += f.name_len + f.value_len;
        if (++g->n == MAX_FIELDS)
            return 1;
    }
    return 1;
}

/* libnghttp2's, compared field by field with ours: 1 accepted, 0 rejected. */
static int theirs(nghttp2_hd_inflater *inf, const uint8_t *in, size_t len, const struct got *g,
                  int our_rc)
{
    size_t i = 0;
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t rv = nghttp2_hd_inflate_hd2(inf, &nv, &flags, in, len, 1);
        if (rv < 0)
            return 0;
        in += rv, len -= (size_t)rv;
        if (flags & NGHTTP2_HD_INFLATE_EMIT) {
            if (our_rc == 1 && i < g->n) {
                REQUIRE(nv.namelen == g->name_len[i] && nv.valuelen == g->value_len[i]);
                REQUIRE(memcmp(nv.name, out + g->name_off[i], nv.namelen) == 0);
                REQUIRE(memcmp(nv.value, out + g->value_off[i], nv.valuelen) == 0);
            }
            i++;
        }
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(inf);
            break;
        }
        if (rv == 0 && len == 0)
            return 0;
    }
    if (our_rc == 1 && g->n < MAX_FIELDS)
        REQUIRE(i == g->n);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct got g;
    struct hpack_dec d;
    nghttp2_hd_inflater *inf;
    hpack_dec_init(&d, 4096);
    REQUIRE(nghttp2_hd_inflate_new(&inf) == 0);
    size_t at = 0;
    while (at < size) {
        size_t n = data[at++] * 16u;
        if (n > size - at)
            n = size - at;
        int a = ours(&d, data + at, n, &g);
        if (a < 0)
            break;
        int b = theirs(inf, data + at, n, &g, a);
        if (a != b) {
            fprintf(stderr, "ours %d, libnghttp2 %d on a block of %zu bytes at %zu\n", a, b, n, at);
            abort();
        }
        if (!a)
            break;
        REQUIRE(d.t.size == nghttp2_hd_inflate_get_dynamic_table_size(inf));
        at += n;
    }
    nghttp2_hd_inflate_del(inf);
    hpack_dec_free(&d);
    return 0;
}
