/* qpack_cost: what one QPACK field section costs, ours (src/h3/qpack.c) beside libnghttp3's,
 * for `valgrind --tool=callgrind` to count (bench/qpack_cost.sh runs it and prints the table).
 * `qpack_cost MODE N` does MODE's work N times; the instructions of N = 0 (setting up: the
 * sections are made by nghttp3's encoder as a browser's would be) are subtracted by the script.
 * Modes: dec-cold-ours/-ng (a Chromium navigation request as nghttp3's encoder makes it with no
 * table acknowledged yet: literals and static names, Huffman; quic-go's encoder, which h3load
 * uses, never indexes, so every request of the bench looks like this), dec-nghttp3-ours/-ng (the
 * same request again from nghttp3's encoder, which indexes only some fields), dec-warm-ours/-ng
 * (the same request again as Chromium's encoder sends it once every field but :path is in the
 * dynamic table: indexed lines), enc-ours, enc-ng (a 1 KiB file's response, as ringhttpd
 * sends it, encoded without a dynamic table), enc-ng-dyn (nghttp3's encoder with a 4096-byte
 * table the peer allows, after a first response). Built by `make build/qpack-cost`; not part
 * of the server or of make check.
 * Ownership: single-threaded; everything lives until exit. */
#include <nghttp3/nghttp3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/huff.h"
#include "core/prefint.h"
#include "http/h3/qpack.h"
#include "http/h3/qpack_tables.h"

#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, 0                            \
    }

static const nghttp3_nv request[] = {
    NV(":method", "GET"),
    NV(":authority", "localhost:8443"),
    NV(":scheme", "https"),
    NV(":path", "/index.html"),
    NV("sec-ch-ua", "\"Chromium\";v=\"120\", \"Not?A_Brand\";v=\"24\""),
    NV("sec-ch-ua-mobile", "?0"),
    NV("sec-ch-ua-platform", "\"Linux\""),
    NV("upgrade-insecure-requests", "1"),
    NV("user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
                     "HeadlessChrome/120.0.6099.224 Safari/537.36"),
    NV("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
                 "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"),
    NV("sec-fetch-site", "none"),
    NV("sec-fetch-mode", "navigate"),
    NV("sec-fetch-user", "?1"),
    NV("sec-fetch-dest", "document"),
    NV("accept-encoding", "gzip, deflate, br"),
    NV("accept-language", "en-US,en;q=0.9"),
    NV("priority", "u=0, i"),
};

static const nghttp3_nv response[] = {
    NV(":status", "200"),
    NV("server", "ringhttpd"),
    NV("date", "Thu, 26 Nov 2026 19:02:52 GMT"),
    NV("last-modified", "Thu, 26 Nov 2026 19:02:51 GMT"),
    NV("etag", "\"996572-400-18ebad9e263e911c\""),
    NV("accept-ranges", "bytes"),
    NV("content-type", "text/html; charset=utf-8"),
    NV("vary", "Accept-Encoding"),
    NV("content-length", "1024"),
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void need(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "qpack_cost: %s failed\n", what);
        exit(1);
    }
}

/* A request section as a browser's encoder makes it: returns the section (prefix and lines) in
 * sec, the encoder stream so far in es. */
static void browser_sections(uint8_t *cold, size_t *cold_len, uint8_t *warm, size_t *warm_len,
                             uint8_t *es, size_t *es_len)
{
    const nghttp3_mem *mem = nghttp3_mem_default();
    nghttp3_qpack_encoder *enc;
    need(nghttp3_qpack_encoder_new(&enc, 4096, mem) == 0, "encoder_new");
    nghttp3_qpack_encoder_set_max_dtable_capacity(enc, 4096);
    nghttp3_qpack_encoder_set_max_blocked_streams(enc, 0); /* references only what is acked */
    *es_len = 0;
    for (int i = 0; i < 2; i++) {
        nghttp3_buf pb, rb, eb;
        nghttp3_buf_init(&pb), nghttp3_buf_init(&rb), nghttp3_buf_init(&eb);
        need(nghttp3_qpack_encoder_encode(enc, &pb, &rb, &eb, 4 * i, request, COUNT(request)) == 0,
             "encode");
        uint8_t *sec = i ? warm : cold;
        size_t *len = i ? warm_len : cold_len;
        memcpy(sec, pb.pos, nghttp3_buf_len(&pb));
        memcpy(sec + nghttp3_buf_len(&pb), rb.pos, nghttp3_buf_len(&rb));
        *len = nghttp3_buf_len(&pb) + nghttp3_buf_len(&rb);
        memcpy(es + *es_len, eb.pos, nghttp3_buf_len(&eb));
        *es_len += nghttp3_buf_len(&eb);
        nghttp3_buf_free(&pb, mem), nghttp3_buf_free(&rb, mem), nghttp3_buf_free(&eb, mem);
        nghttp3_qpack_encoder_ack_everything(enc);
    }
    nghttp3_qpack_encoder_del(enc);
}

/* String literal with an nbits prefix, Huffman where shorter (as Chromium's encoder). */
static size_t put_str(uint8_t *out, uint8_t first, unsigned nbits, const uint8_t *s, size_t n)
{
    size_t h = huff_encoded_len((const char *)s, n);
    if (h < n) {
        size_t k = prefint_write(out, (uint8_t)(first | 1u << nbits), nbits, h);
        return k + huff_encode(out + k, (const char *)s, n);
    }
    size_t k = prefint_write(out, first, nbits, n);
    memcpy(out + k, s, n);
    return k + n;
}

/* The request as Chromium's encoder (quiche) sends it once its fields are in the dynamic table:
 * each field not in the static table whole, and not :path, inserted (by static name reference
 * where there is one) on the encoder stream es, then named by one indexed line; :path as a
 * literal with a static name. */
static void chromium_warm(uint8_t *sec, size_t *sec_len, uint8_t *es, size_t *es_len)
{
    uint8_t lines[1024];
    size_t o = 0, e = prefint_write(es, 0x20, 5, 4096), abs[COUNT(request)], ins = 0;
    int whole[COUNT(request)];
    for (size_t i = 0; i < COUNT(request); i++) {
        const nghttp3_nv *f = &request[i];
        int name = -1;
        whole[i] = -1;
        for (int k = 0; k < QPACK_STATIC_N; k++) {
            const struct qpack_static *st = &qpack_static[k];
            if (st->name_len == f->namelen && memcmp(st->name, f->name, f->namelen) == 0) {
                name = name < 0 ? k : name;
                if (st->value_len == f->valuelen && memcmp(st->value, f->value, f->valuelen) == 0)
                    whole[i] = k;
            }
        }
        if (whole[i] >= 0 || strcmp((const char *)f->name, ":path") == 0)
            continue;
        if (name >= 0) { /* Insert with Name Reference, static */
            e += prefint_write(es + e, 0xc0, 6, (unsigned)name);
        } else { /* Insert with Literal Name */
            e += put_str(es + e, 0x40, 5, f->name, f->namelen);
        }
        e += put_str(es + e, 0, 7, f->value, f->valuelen);
        abs[i] = ins++;
    }
    for (size_t i = 0; i < COUNT(request); i++) {
        const nghttp3_nv *f = &request[i];
        if (whole[i] >= 0)
            o += prefint_write(lines + o, 0xc0, 6, (unsigned)whole[i]);
        else if (strcmp((const char *)f->name, ":path") == 0)
            o += prefint_write(lines + o, 0x50, 4, 1),
                o += put_str(lines + o, 0, 7, f->value, f->valuelen);
        else /* relative to Base = the Required Insert Count */
            o += prefint_write(lines + o, 0x80, 6, ins - 1 - abs[i]);
    }
    size_t p = prefint_write(sec, 0, 8, ins % (2 * (4096 / 32)) + 1);
    p += prefint_write(sec + p, 0, 7, 0);
    memcpy(sec + p, lines, o);
    *sec_len = p + o;
    *es_len = e;
}

static int count(void *arg, const struct qpack_field *f)
{
    *(size_t *)arg += f->nlen + f->vlen;
    return 0;
}

static size_t dec_ours(struct qpack_dec *d, const uint8_t *sec, size_t len, long n)
{
    size_t total = 0;
    uint8_t out[64];
    for (long i = 0; i < n; i++) {
        need(qpack_dec_section(d, 4 * i, sec, len, 65536, count, &total) == 0, "qpack_dec_section");
        qpack_dec_output(d, out, sizeof(out));
    }
    return total;
}

static size_t dec_ng(nghttp3_qpack_decoder *d, const uint8_t *sec, size_t len, long n)
{
    const nghttp3_mem *mem = nghttp3_mem_default();
    size_t total = 0;
    uint8_t out[64];
    for (long i = 0; i < n; i++) {
        nghttp3_qpack_stream_context *sctx;
        need(nghttp3_qpack_stream_context_new(&sctx, 4 * i, mem) == 0, "stream_context_new");
        for (size_t at = 0;;) {
            nghttp3_qpack_nv nv;
            uint8_t flags = 0;
            nghttp3_ssize k =
                nghttp3_qpack_decoder_read_request(d, sctx, &nv, &flags, sec + at, len - at, 1);
            need(k >= 0, "read_request");
            at += (size_t)k;
            if (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) {
                total += nghttp3_rcbuf_get_buf(nv.name).len + nghttp3_rcbuf_get_buf(nv.value).len;
                nghttp3_rcbuf_decref(nv.name);
                nghttp3_rcbuf_decref(nv.value);
            }
            if (flags & NGHTTP3_QPACK_DECODE_FLAG_FINAL)
                break;
        }
        nghttp3_qpack_stream_context_del(sctx);
        nghttp3_buf b = {out, out + sizeof(out), out, out};
        nghttp3_qpack_decoder_write_decoder(d, &b);
    }
    return total;
}

static size_t enc_ours(long n)
{
    uint8_t out[512];
    size_t total = 0;
    for (long i = 0; i < n; i++) {
        size_t o = qpack_enc_prefix(out, sizeof(out));
        o += qpack_enc_status(out + o, sizeof(out) - o, 200);
        for (size_t k = 1; k < COUNT(response); k++)
            o += qpack_enc_field(out + o, sizeof(out) - o, (const char *)response[k].name,
                                 response[k].namelen, (const char *)response[k].value,
                                 response[k].valuelen);
        total += o;
    }
    return total;
}

static size_t enc_ng(long n, size_t capacity)
{
    const nghttp3_mem *mem = nghttp3_mem_default();
    nghttp3_qpack_encoder *enc;
    nghttp3_buf pb, rb, eb;
    size_t total = 0;
    need(nghttp3_qpack_encoder_new(&enc, capacity, mem) == 0, "encoder_new");
    nghttp3_qpack_encoder_set_max_dtable_capacity(enc, capacity);
    nghttp3_buf_init(&pb), nghttp3_buf_init(&rb), nghttp3_buf_init(&eb);
    for (long i = -1; i < n; i++) { /* one response first: buffers and table as in steady state */
        nghttp3_buf_reset(&pb), nghttp3_buf_reset(&rb), nghttp3_buf_reset(&eb);
        need(nghttp3_qpack_encoder_encode(enc, &pb, &rb, &eb, 4 * (i + 1), response,
                                          COUNT(response)) == 0,
             "encode");
        nghttp3_qpack_encoder_ack_everything(enc);
        total += nghttp3_buf_len(&pb) + nghttp3_buf_len(&rb);
    }
    nghttp3_buf_free(&pb, mem), nghttp3_buf_free(&rb, mem), nghttp3_buf_free(&eb, mem);
    nghttp3_qpack_encoder_del(enc);
    return total;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr,
                "usage: qpack_cost dec-cold-ours|dec-cold-ng|dec-nghttp3-ours|"
                "dec-nghttp3-ng|dec-warm-ours|dec-warm-ng|enc-ours|enc-ng|enc-ng-dyn|hex N\n");
        return 2;
    }
    const char *mode = argv[1];
    long n = atol(argv[2]);
    static uint8_t cold[4096], ngwarm[4096], warm[4096], es[8192], ces[8192];
    size_t cold_len, ngwarm_len, warm_len, es_len, ces_len, total = 0;
    browser_sections(cold, &cold_len, ngwarm, &ngwarm_len, es, &es_len);
    chromium_warm(warm, &warm_len, ces, &ces_len);
    bool chromium = strncmp(mode, "dec-warm", 8) == 0;
    const uint8_t *ins = chromium ? ces : es;
    size_t ins_len = chromium ? ces_len : es_len;

    struct qpack_dec ours;
    qpack_dec_init(&ours, 4096, 16);
    need(qpack_dec_encoder(&ours, ins, ins_len) == 0, "qpack_dec_encoder");
    nghttp3_qpack_decoder *ng;
    need(nghttp3_qpack_decoder_new(&ng, 4096, 16, nghttp3_mem_default()) == 0, "decoder_new");
    need(nghttp3_qpack_decoder_read_encoder(ng, ins, ins_len) == (nghttp3_ssize)ins_len,
         "read_encoder");

    if (strcmp(mode, "dec-cold-ours") == 0)
        total = dec_ours(&ours, cold, cold_len, n);
    else if (strcmp(mode, "dec-cold-ng") == 0)
        total = dec_ng(ng, cold, cold_len, n);
    else if (strcmp(mode, "dec-nghttp3-ours") == 0)
        total = dec_ours(&ours, ngwarm, ngwarm_len, n);
    else if (strcmp(mode, "dec-nghttp3-ng") == 0)
        total = dec_ng(ng, ngwarm, ngwarm_len, n);
    else if (strcmp(mode, "dec-warm-ours") == 0)
        total = dec_ours(&ours, warm, warm_len, n);
    else if (strcmp(mode, "dec-warm-ng") == 0)
        total = dec_ng(ng, warm, warm_len, n);
    else if (strcmp(mode, "enc-ours") == 0)
        total = enc_ours(n);
    else if (strcmp(mode, "enc-ng") == 0)
        total = enc_ng(n, 0);
    else if (strcmp(mode, "enc-ng-dyn") == 0)
        total = enc_ng(n, 4096);
    else if (strcmp(mode, "hex") == 0) /* the inputs, for fuzz_qpack_diff's seeds */
        for (int k = 0; k < 5; k++) {
            const uint8_t *b[] = {es, cold, ngwarm, ces, warm};
            size_t len[] = {es_len, cold_len, ngwarm_len, ces_len, warm_len};
            for (size_t i = 0; i < len[k]; i++)
                printf("%02x", b[k][i]);
            printf("\n");
        }
    else
        need(0, "mode");
    printf("%s: sections of %zu (cold), %zu (nghttp3's second), %zu (Chromium's warm) bytes; "
           "encoder streams %zu, %zu; %zu bytes decoded or encoded\n",
           mode, cold_len, ngwarm_len, warm_len, es_len, ces_len, total);
    nghttp3_qpack_decoder_del(ng);
    qpack_dec_fini(&ours);
    return 0;
}
