/* fuzz_qpack_diff: libFuzzer target that feeds the same encoder-stream bytes and field sections
 * to our QPACK decoder (h3/qpack.c) and to libnghttp3's (the oracle, linked here only), and
 * aborts when one accepts what the other rejects, they decode different field lists, their
 * decoder streams differ by a byte, or their insert counts differ; and that decodes our
 * encoder's output with both and aborts unless each gives back the fields encoded.
 *
 * The input is a configuration byte (our SETTINGS_QPACK_MAX_TABLE_CAPACITY: 0, 64, 220 or 4096)
 * and then operations, each a byte and a two-byte length: encoder-stream bytes; a field section
 * on the next request stream (one at a time: a blocked one is cancelled when the next comes,
 * and retried after each encoder-stream chunk); a list of fields to encode. Documented
 * differences end the comparison instead of failing it: our -E2BIG (a list past 1 MiB, a line
 * past QPACK_FIELD_MAX) and -QPACK_EXCESSIVE_LOAD (copies from the table past their allowance),
 * nghttp3's HEADER_TOO_LARGE (its 256-byte names, 64 KiB values); and we
 * refuse an encoder instruction as soon as its string's length shows its entry cannot fit, and
 * nghttp3 as soon as a Huffman string streams a bad code, where the other waits for the rest:
 * then the other must refuse once it comes (zeros are fed).
 * Must not: be linked into the server.
 * Ownership: libFuzzer owns data; both decoders are freed before returning. */
#include <errno.h>
#include <nghttp3/nghttp3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/h3/qpack.h"
#include "http/h3/qpack_tables.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_qpack_diff: %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_LIST (1u << 20)
#define MAX_FIELDS 512

/* A decoded field list, copied (fn's pointers live only during its call). */
struct list {
    size_t n, used;
    bool full; /* more than fits here: compared no further */
    uint32_t off[MAX_FIELDS], nlen[MAX_FIELDS], vlen[MAX_FIELDS];
    char bytes[1 << 18];
};

static void list_add(struct list *l, const void *name, size_t nlen, const void *value, size_t vlen)
{
    if (l->full || l->n == MAX_FIELDS || l->used + nlen + vlen > sizeof(l->bytes)) {
        l->full = true;
        return;
    }
    l->off[l->n] = (uint32_t)l->used, l->nlen[l->n] = (uint32_t)nlen,
    l->vlen[l->n] = (uint32_t)vlen;
    memcpy(l->bytes + l->used, name, nlen);
    memcpy(l->bytes + l->used + nlen, value, vlen);
    l->used += nlen + vlen;
    l->n++;
}

static bool list_eq(const struct list *a, const struct list *b)
{
    if (a->full || b->full)
        return true;
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->nlen[i] != b->nlen[i] || a->vlen[i] != b->vlen[i] ||
            memcmp(a->bytes + a->off[i], b->bytes + b->off[i], a->nlen[i] + a->vlen[i]) != 0)
            return false;
    return true;
}

/* Our fn: keeps the field, and checks sidx against the static table. */
static int keep(void *arg, const struct qpack_field *f)
{
    int first = -1;
    for (int i = 0; i < QPACK_STATIC_N && first < 0; i++)
        if (qpack_static[i].name_len == f->nlen &&
            memcmp(qpack_static[i].name, f->name, f->nlen) == 0)
            first = i;
    REQUIRE(f->sidx == first);
    list_add(arg, f->name, f->nlen, f->value, f->vlen);
    return 0;
}

enum outcome { DONE, BLOCKED, TOO_LARGE, FAILED };

struct run {
    struct qpack_dec ours;
    nghttp3_qpack_decoder *theirs;
    nghttp3_qpack_stream_context *sctx; /* the pending (blocked) section's, or NULL */
    int64_t sid;
    const uint8_t *sec;    /* the pending section */
    size_t sec_len, taken; /* bytes of it nghttp3 has read */
    struct list a, b;
};

static enum outcome ours_section(struct run *r, const uint8_t *p, size_t n)
{
    r->a = (struct list){0};
    int rc = qpack_dec_section(&r->ours, r->sid, p, n, MAX_LIST, keep, &r->a);
    return rc == 0 ? DONE : rc == -EAGAIN ? BLOCKED : rc == -E2BIG ? TOO_LARGE : FAILED;
}

static enum outcome their_section(struct run *r)
{
    const nghttp3_mem *mem = nghttp3_mem_default();
    if (!r->sctx)
        REQUIRE(nghttp3_qpack_stream_context_new(&r->sctx, r->sid, mem) == 0);
    r->b = (struct list){0};
    for (;;) {
        nghttp3_qpack_nv nv;
        uint8_t flags = 0;
        nghttp3_ssize k = nghttp3_qpack_decoder_read_request(
            r->theirs, r->sctx, &nv, &flags, r->sec + r->taken, r->sec_len - r->taken, 1);
        if (k < 0)
            return k == NGHTTP3_ERR_QPACK_HEADER_TOO_LARGE ? TOO_LARGE : FAILED;
        r->taken += (size_t)k;
        if (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) {
            nghttp3_vec name = nghttp3_rcbuf_get_buf(nv.name),
                        value = nghttp3_rcbuf_get_buf(nv.value);
            list_add(&r->b, name.base, name.len, value.base, value.len);
            nghttp3_rcbuf_decref(nv.name);
            nghttp3_rcbuf_decref(nv.value);
        }
        if (flags & NGHTTP3_QPACK_DECODE_FLAG_BLOCKED)
            return BLOCKED;
        if (flags & NGHTTP3_QPACK_DECODE_FLAG_FINAL)
            return DONE;
    }
}

static void drop_pending(struct run *r)
{
    nghttp3_qpack_stream_context_del(r->sctx);
    r->sctx = NULL;
    r->sec = NULL;
}

/* Both decoder streams owe the same bytes; both tables hold as many inserts. */
static void same_state(struct run *r)
{
    uint8_t a[QPACK_OUT_MAX], b[4096];
    size_t na = qpack_dec_output(&r->ours, a, sizeof(a));
    nghttp3_buf buf = {.begin = b, .end = b + sizeof(b), .pos = b, .last = b};
    REQUIRE(nghttp3_qpack_decoder_get_decoder_streamlen(r->theirs) <= sizeof(b));
    nghttp3_qpack_decoder_write_decoder(r->theirs, &buf);
    size_t nb = (size_t)(buf.last - buf.pos);
    if (na != nb || memcmp(a, b, na) != 0) {
        fprintf(stderr, "decoder streams: ours %zu bytes, nghttp3 %zu\n", na, nb);
        abort();
    }
    REQUIRE(r->ours.ins == nghttp3_qpack_decoder_get_icnt(r->theirs));
}

/* The pending section on both: false when the comparison ends. */
static bool section(struct run *r)
{
    enum outcome a = ours_section(r, r->sec, r->sec_len), b = their_section(r);
    if (a == TOO_LARGE || b == TOO_LARGE)
        return false;
    if (b == BLOCKED && r->taken == r->sec_len)
        return false; /* a prefix alone: nghttp3 cannot finish it once unblocked (its limit) */
    if (a != b) {
        fprintf(stderr, "section of %zu bytes on stream %lld: ours %d, nghttp3 %d\n", r->sec_len,
                (long long)r->sid, a, b);
        abort();
    }
    if (a == FAILED)
        return false;
    if (a == DONE) {
        REQUIRE(list_eq(&r->a, &r->b));
        drop_pending(r);
    }
    same_state(r);
    return true;
}

/* Encoder-stream bytes to both: false when the comparison ends. */
static bool encoder(struct run *r, const uint8_t *p, size_t n)
{
    int a = qpack_dec_encoder(&r->ours, p, n);
    nghttp3_ssize b = nghttp3_qpack_decoder_read_encoder(r->theirs, p, n);
    if (b == NGHTTP3_ERR_QPACK_HEADER_TOO_LARGE || a == -QPACK_EXCESSIVE_LOAD)
        return false; /* limits of one only (ours: copies from the table, qpack.h) */
    /* One refused an instruction before its end (we by a string's length, nghttp3 by a
     * Huffman string's bad code as it streams): the other must refuse once the rest comes. */
    static const uint8_t zeros[4096];
    for (int i = 0; i < 20 && a < 0 && b >= 0; i++)
        b = nghttp3_qpack_decoder_read_encoder(r->theirs, zeros, sizeof(zeros));
    for (int i = 0; i < 20 && a == 0 && b < 0; i++)
        a = qpack_dec_encoder(&r->ours, zeros, sizeof(zeros));
    if ((a < 0) != (b < 0)) {
        fprintf(stderr, "encoder stream of %zu bytes: ours %d, nghttp3 %zd\n", n, a, b);
        abort();
    }
    if (a < 0)
        return false;
    same_state(r);
    return r->sec == NULL || section(r); /* a blocked section may go on now */
}

/* Fields from p[0, n) encoded by ours, decoded by both: each must give them back. */
static void encode(const uint8_t *p, size_t n)
{
    static struct list in, out;
    static uint8_t enc[1 << 19];
    size_t o = qpack_enc_prefix(enc, sizeof(enc)), i = 0;
    in = (struct list){0};
    if (n && p[0] & 1) {
        unsigned code = 100 + (unsigned)(p[0] >> 1) * 4 % 900;
        char digits[4];
        snprintf(digits, sizeof(digits), "%u", code);
        o += qpack_enc_status(enc + o, sizeof(enc) - o, code);
        list_add(&in, ":status", 7, digits, 3);
        i = 1;
    }
    while (i + 2 <= n && in.n < 64) {
        uint8_t kind = p[i++], len = p[i++];
        const char *name, *value;
        size_t nlen, vlen;
        if (kind & 0x80) { /* a static entry's name, and its value or another */
            const struct qpack_static *s = &qpack_static[kind % QPACK_STATIC_N];
            name = s->name, nlen = s->name_len;
            value = s->value, vlen = s->value_len;
            if (kind & 0x40) {
                vlen = len < n - i ? len : n - i;
                value = (const char *)p + i, i += vlen;
            }
        } else { /* a name and a value from the input */
            nlen = len < n - i ? len : n - i;
            name = (const char *)p + i, i += nlen;
            vlen = kind < n - i ? kind : n - i;
            value = (const char *)p + i, i += vlen;
        }
        size_t k = qpack_enc_field(enc + o, sizeof(enc) - o, name, nlen, value, vlen);
        REQUIRE(k > 0);
        /* one byte less is refused; elsewhere: a refused field may have written into out */
        static uint8_t scratch[sizeof(enc)];
        REQUIRE(qpack_enc_field(scratch, k - 1, name, nlen, value, vlen) == 0);
        o += k;
        list_add(&in, name, nlen, value, vlen);
    }

    nghttp3_qpack_decoder *dec;
    nghttp3_qpack_stream_context *sctx;
    const nghttp3_mem *mem = nghttp3_mem_default();
    REQUIRE(nghttp3_qpack_decoder_new(&dec, 0, 0, mem) == 0);
    REQUIRE(nghttp3_qpack_stream_context_new(&sctx, 0, mem) == 0);
    out = (struct list){0};
    for (size_t at = 0;;) {
        nghttp3_qpack_nv nv;
        uint8_t flags = 0;
        nghttp3_ssize k =
            nghttp3_qpack_decoder_read_request(dec, sctx, &nv, &flags, enc + at, o - at, 1);
        if (k == NGHTTP3_ERR_QPACK_HEADER_TOO_LARGE)
            break; /* its limits, not our bytes: ours still decodes them below */
        if (k < 0) {
            fprintf(stderr, "nghttp3 refuses our encoding (%zd) at byte %zu of %zu:", k, at, o);
            for (size_t b = at > 24 ? at - 24 : 0; b < o && b < at + 24; b++)
                fprintf(stderr, " %02x", enc[b]);
            fprintf(stderr, "\n");
        }
        REQUIRE(k >= 0);
        at += (size_t)k;
        if (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) {
            nghttp3_vec name = nghttp3_rcbuf_get_buf(nv.name),
                        value = nghttp3_rcbuf_get_buf(nv.value);
            list_add(&out, name.base, name.len, value.base, value.len);
            nghttp3_rcbuf_decref(nv.name);
            nghttp3_rcbuf_decref(nv.value);
        }
        if (flags & NGHTTP3_QPACK_DECODE_FLAG_FINAL) {
            REQUIRE(list_eq(&in, &out));
            break;
        }
    }
    nghttp3_qpack_stream_context_del(sctx);
    nghttp3_qpack_decoder_del(dec);

    struct qpack_dec d;
    qpack_dec_init(&d, 0, 0);
    out = (struct list){0};
    int rc = qpack_dec_section(&d, 0, enc, o, SIZE_MAX, keep, &out);
    REQUIRE(rc == 0 || rc == -E2BIG);
    if (rc == 0)
        REQUIRE(list_eq(&in, &out));
    qpack_dec_fini(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t caps[] = {0, 64, 220, 4096};
    static struct run r;
    if (size < 1)
        return 0;
    r = (struct run){.sid = -4};
    qpack_dec_init(&r.ours, caps[data[0] & 3], 1);
    REQUIRE(nghttp3_qpack_decoder_new(&r.theirs, caps[data[0] & 3], 1, nghttp3_mem_default()) == 0);
    for (size_t at = 1; at + 3 <= size;) {
        uint8_t op = data[at];
        size_t n = (size_t)data[at + 1] << 8 | data[at + 2];
        at += 3;
        n = n < size - at ? n : size - at;
        const uint8_t *p = data + at;
        at += n;
        bool go = true;
        if (op % 3 == 0) {
            go = encoder(&r, p, n);
        } else if (op % 3 == 1) {
            if (r.sec) { /* the one blocked before is abandoned */
                qpack_dec_cancel(&r.ours, r.sid);
                REQUIRE(nghttp3_qpack_decoder_cancel_stream(r.theirs, r.sid) == 0);
                drop_pending(&r);
            }
            r.sid += 4, r.sec = p, r.sec_len = n, r.taken = 0;
            go = section(&r);
        } else {
            encode(p, n);
        }
        if (!go)
            break;
    }
    drop_pending(&r);
    nghttp3_qpack_decoder_del(r.theirs);
    qpack_dec_fini(&r.ours);
    return 0;
}
