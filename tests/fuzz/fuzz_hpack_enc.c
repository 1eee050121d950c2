/* fuzz_hpack_enc: libFuzzer target that encodes random header lists with our HPACK encoder (on
 * one connection's table, the peer's table size changing between blocks) and decodes every
 * block with libnghttp2's inflater (the oracle, linked here only) and with our decoder: both
 * must accept it and give back the list, names in lower case.
 * Input: a series of records; each: a flags byte (bits 0-1 the representation, bit 2 no Huffman,
 * bit 3 force Huffman, bit 4 end the block here, bit 5 then set the peer's table size from the
 * next byte * 32, bit 6 send it pre-encoded (hpack_enc_pre, the same pre-encoded field each time it
 * recurs, as a file's fields are), bit 7 forget the table first (hpack_enc_forget, idle), a name
 * length byte, the name, a value length byte, the value.
 * Must not: be linked into the server.
 * Ownership: libFuzzer owns data; everything is freed before returning. */
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/h2/hpack.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_hpack_enc: %s:%d: %s\n", __FILE__, __LINE__, #cond);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_FIELDS 256
#define MAX_PRE 16

/* The pre-encoded fields made so far: one per distinct field, each with an id of its own. */
struct pres {
    struct hpack_pre *p[MAX_PRE];
    const uint8_t *name[MAX_PRE], *value[MAX_PRE];
    size_t name_len[MAX_PRE], value_len[MAX_PRE], n;
};

static struct hpack_pre *pre_for(struct pres *ps, const uint8_t *name, size_t name_len,
                                 const uint8_t *value, size_t value_len)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->name_len[i] == name_len && ps->value_len[i] == value_len &&
            !memcmp(ps->name[i], name, name_len) && !memcmp(ps->value[i], value, value_len))
            return ps->p[i];
    if (ps->n == MAX_PRE)
        return NULL;
    struct hpack_field hf = {.name = (const char *)name,
                             .name_len = name_len,
                             .value = (const char *)value,
                             .value_len = value_len};
    struct hpack_pre *p = hpack_pre_new(&hf, 1, "", 0, ps->n + 1);
    if (!p)
        return NULL;
    size_t i = ps->n++;
    ps->p[i] = p, ps->name[i] = name, ps->value[i] = value;
    ps->name_len[i] = name_len, ps->value_len[i] = value_len;
    return p;
}

struct field {
    const uint8_t *name, *value;
    size_t name_len, value_len;
};

static bool name_eq_lower(const uint8_t *lower, const uint8_t *name, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = name[i] >= 'A' && name[i] <= 'Z' ? name[i] | 0x20 : name[i];
        if (lower[i] != c)
            return false;
    }
    return true;
}

static void check_block(nghttp2_hd_inflater *inf, struct hpack_dec *d, const uint8_t *blk,
                        size_t len, const struct field *f, size_t n)
{
    static char out[1 << 17];
    size_t i = 0;
    const uint8_t *in = blk;
    size_t left = len;
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t rv = nghttp2_hd_inflate_hd2(inf, &nv, &flags, in, left, 1);
        REQUIRE(rv >= 0);
        in += rv, left -= (size_t)rv;
        if (flags & NGHTTP2_HD_INFLATE_EMIT) {
            REQUIRE(i < n && nv.namelen == f[i].name_len && nv.valuelen == f[i].value_len);
            REQUIRE(name_eq_lower(nv.name, f[i].name, nv.namelen));
            REQUIRE(memcmp(nv.value, f[i].value, nv.valuelen) == 0);
            i++;
        }
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(inf);
            break;
        }
        REQUIRE(rv > 0 || left > 0);
    }
    REQUIRE(i == n);
    size_t pos = 0;
    for (i = 0; pos < len; i++) {
        struct hpack_field hf;
        REQUIRE(hpack_decode(d, blk, len, &pos, i == 0, out, sizeof(out), 0, &hf) == 1);
        REQUIRE(i < n && hf.name_len == f[i].name_len && hf.value_len == f[i].value_len);
        REQUIRE(name_eq_lower((const uint8_t *)hf.name, f[i].name, hf.name_len));
        REQUIRE(memcmp(hf.value, f[i].value, hf.value_len) == 0);
    }
    REQUIRE(i == n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t blk[MAX_FIELDS * (255 + 255 + 12) + HPACK_UPDATE_BOUND];
    static struct field f[MAX_FIELDS];
    struct hpack_enc e;
    struct hpack_dec d;
    nghttp2_hd_inflater *inf;
    struct pres ps = {.n = 0};
    hpack_enc_init(&e);
    hpack_dec_init(&d, HPACK_TABLE_MAX);
    REQUIRE(nghttp2_hd_inflate_new(&inf) == 0);
    size_t at = 0, n = 0, len = hpack_enc_begin(&e, blk);
    while (at < size) {
        uint8_t flags = data[at++];
        struct field *x = &f[n];
        x->name_len = at < size ? data[at++] : 0;
        if (x->name_len > size - at)
            x->name_len = size - at;
        x->name = data + at;
        at += x->name_len;
        x->value_len = at < size ? data[at++] : 0;
        if (x->value_len > size - at)
            x->value_len = size - at;
        x->value = data + at;
        at += x->value_len;
        struct hpack_pre *pre =
            flags & 64 ? pre_for(&ps, x->name, x->name_len, x->value, x->value_len) : NULL;
        if ((flags & 128) && n == 0 && len == 0) {
            hpack_enc_forget(&e);
            len = hpack_enc_begin(&e, blk);
        }
        if (pre)
            len += hpack_enc_pre(&e, blk + len, pre, flags & 1);
        else
            len += hpack_enc_field(&e, blk + len, (const char *)x->name, x->name_len,
                                   (const char *)x->value, x->value_len, flags & 15);
        n++;
        if ((flags & 16) || n == MAX_FIELDS || at >= size) {
            check_block(inf, &d, blk, len, f, n);
            REQUIRE(e.t.size == nghttp2_hd_inflate_get_dynamic_table_size(inf));
            REQUIRE(e.t.size == d.t.size);
            if ((flags & 32) && at < size)
                hpack_enc_set_max(&e, data[at++] * 32u);
            n = 0;
            len = hpack_enc_begin(&e, blk);
        }
    }
    nghttp2_hd_inflate_del(inf);
    hpack_dec_free(&d);
    hpack_enc_free(&e);
    for (size_t i = 0; i < ps.n; i++)
        free(ps.p[i]);
    return 0;
}
