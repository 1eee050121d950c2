/* TEMPORARY QPACK over nghttp3's public decoder; see qpackshim.h. */
#include "h3/qpackshim.h"

#include <errno.h>
#include <stdbool.h>
#include <nghttp3/nghttp3.h>
#include <string.h>

void qpack_dec_init(struct qpack_dec *d, uint32_t max_capacity, uint32_t max_blocked)
{
    memset(d, 0, sizeof(*d));
    d->max_blocked = max_blocked < QPACK_SHIM_BLOCKED ? max_blocked : QPACK_SHIM_BLOCKED;
    if (nghttp3_qpack_decoder_new(&d->dec, max_capacity, max_blocked, nghttp3_mem_default()) != 0)
        d->dec = NULL;
}

void qpack_dec_fini(struct qpack_dec *d)
{
    if (d->dec)
        nghttp3_qpack_decoder_del(d->dec);
    d->dec = NULL;
}

int qpack_dec_encoder(struct qpack_dec *d, const uint8_t *p, size_t n)
{
    if (!d->dec)
        return -ENOMEM;
    nghttp3_ssize r = nghttp3_qpack_decoder_read_encoder(d->dec, p, n);
    return r < 0 ? -QPACK_ENCODER_STREAM_ERROR : 0;
}

static void unblock(struct qpack_dec *d, int64_t sid)
{
    for (unsigned i = 0; i < d->nblocked; i++)
        if (d->blocked[i] == sid) {
            d->blocked[i] = d->blocked[--d->nblocked];
            return;
        }
}

int qpack_dec_section(struct qpack_dec *d, int64_t sid, const uint8_t *p, size_t n, size_t max_list,
                      qpack_field_fn fn, void *arg)
{
    nghttp3_qpack_stream_context *sctx;
    if (!d->dec || nghttp3_qpack_stream_context_new(&sctx, sid, nghttp3_mem_default()) != 0)
        return -ENOMEM;
    size_t size = 0;
    int rv = 0;
    bool big = false;
    for (;;) {
        nghttp3_qpack_nv nv;
        uint8_t flags = 0;
        nghttp3_ssize r = nghttp3_qpack_decoder_read_request(d->dec, sctx, &nv, &flags, p, n, 1);
        if (r < 0) {
            rv = -QPACK_DECOMPRESSION_FAILED;
            break;
        }
        p += r, n -= (size_t)r;
        if (flags & NGHTTP3_QPACK_DECODE_FLAG_BLOCKED) {
            bool known = false;
            for (unsigned i = 0; i < d->nblocked; i++)
                known |= d->blocked[i] == sid;
            if (!known && d->nblocked == d->max_blocked) {
                rv = -QPACK_DECOMPRESSION_FAILED;
            } else {
                if (!known)
                    d->blocked[d->nblocked++] = sid;
                rv = -EAGAIN;
            }
            nghttp3_qpack_stream_context_del(sctx);
            return rv;
        }
        if (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) {
            nghttp3_vec nm = nghttp3_rcbuf_get_buf(nv.name), v = nghttp3_rcbuf_get_buf(nv.value);
            size += nm.len + v.len + 32;
            big |= size > max_list;
            if (!big && !rv) {
                struct qpack_field f = {(const char *)nm.base, (const char *)v.base,
                                        (uint32_t)nm.len, (uint32_t)v.len, -1};
                rv = fn(arg, &f);
            }
            nghttp3_rcbuf_decref(nv.name);
            nghttp3_rcbuf_decref(nv.value);
        }
        if (flags & NGHTTP3_QPACK_DECODE_FLAG_FINAL)
            break;
        if (r == 0 && !(flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT)) {
            rv = -QPACK_DECOMPRESSION_FAILED;
            break;
        }
    }
    unblock(d, sid);
    nghttp3_qpack_stream_context_del(sctx);
    if (rv == -QPACK_DECOMPRESSION_FAILED)
        return rv;
    return big ? -E2BIG : rv;
}

void qpack_dec_cancel(struct qpack_dec *d, int64_t sid)
{
    unblock(d, sid);
    if (d->dec)
        (void)nghttp3_qpack_decoder_cancel_stream(d->dec, sid);
}

size_t qpack_dec_output(struct qpack_dec *d, uint8_t *out, size_t cap)
{
    size_t len = d->dec ? nghttp3_qpack_decoder_get_decoder_streamlen(d->dec) : 0;
    if (len == 0 || len > cap)
        return 0;
    nghttp3_buf b = {out, out + cap, out, out};
    nghttp3_qpack_decoder_write_decoder(d->dec, &b);
    return (size_t)(b.last - out);
}

/* An integer with an n-bit prefix after the bits `first` (RFC 9204 4.1.1). */
static size_t put_int(uint8_t *out, size_t cap, unsigned n, uint8_t first, uint64_t v)
{
    uint64_t limit = (1u << n) - 1;
    size_t i = 0;
    if (cap == 0)
        return 0;
    if (v < limit) {
        out[i++] = (uint8_t)(first | v);
        return i;
    }
    out[i++] = (uint8_t)(first | limit);
    for (v -= limit; v >= 128; v >>= 7) {
        if (i == cap)
            return 0;
        out[i++] = (uint8_t)(v % 128 + 128);
    }
    if (i == cap)
        return 0;
    out[i++] = (uint8_t)v;
    return i;
}

size_t qpack_enc_prefix(uint8_t *out, size_t cap)
{
    if (cap < 2)
        return 0;
    out[0] = out[1] = 0;
    return 2;
}

size_t qpack_enc_status(uint8_t *out, size_t cap, unsigned code)
{
    static const struct {
        uint16_t code;
        uint8_t index;
    } known[] = {{103, 24}, {200, 25}, {304, 26}, {404, 27}, {503, 28}, {100, 63}, {204, 64},
                 {206, 65}, {302, 66}, {400, 67}, {403, 68}, {421, 69}, {425, 70}, {500, 71}};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (known[i].code == code)
            return put_int(out, cap, 6, 0xc0, known[i].index);
    size_t n = put_int(out, cap, 4, 0x50, 24); /* literal value, name :status (24) */
    if (!n || cap - n < 4)
        return 0;
    out[n++] = 3;
    out[n++] = (uint8_t)('0' + code / 100 % 10);
    out[n++] = (uint8_t)('0' + code / 10 % 10);
    out[n++] = (uint8_t)('0' + code % 10);
    return n;
}

size_t qpack_enc_field(uint8_t *out, size_t cap, const char *name, size_t nlen, const char *value,
                       size_t vlen)
{
    size_t n = put_int(out, cap, 3, 0x20, nlen), m;
    if (!n || cap - n < nlen)
        return 0;
    memcpy(out + n, name, nlen);
    n += nlen;
    if (!(m = put_int(out + n, cap - n, 7, 0, vlen)) || cap - n - m < vlen)
        return 0;
    n += m;
    memcpy(out + n, value, vlen);
    return n + vlen;
}
