/* qpackshim: TEMPORARY. The QPACK interface agreed for src/h3/qpack.h (RFC 9204: decoder with
 * a dynamic table, encoder of static references and literals), put over nghttp3's public QPACK
 * decoder until branch h3qpack's own module lands; then this file and qpackshim.c go and h3.c
 * includes h3/qpack.h instead. Names and shapes are qpack.h's exactly.
 * Must not: outlive that merge; be used by anything but h3.c.
 * Ownership: the caller's struct qpack_dec, one per connection, on the worker's thread. */
#ifndef H3_QPACKSHIM_H
#define H3_QPACKSHIM_H

#include <stddef.h>
#include <stdint.h>

#define QPACK_DECOMPRESSION_FAILED 0x200
#define QPACK_ENCODER_STREAM_ERROR 0x201
#define QPACK_DECODER_STREAM_ERROR 0x202

struct qpack_field {
    const char *name, *value; /* valid until the next call on the decoder */
    uint32_t nlen, vlen;
    int16_t sidx; /* static-table index of the name, or -1 */
};
typedef int (*qpack_field_fn)(void *arg, const struct qpack_field *f); /* nonzero stops */

#define QPACK_SHIM_BLOCKED 16
struct nghttp3_qpack_decoder;
struct qpack_dec {
    struct nghttp3_qpack_decoder *dec;
    uint32_t max_blocked;
    unsigned nblocked;
    int64_t blocked[QPACK_SHIM_BLOCKED];
};
void qpack_dec_init(struct qpack_dec *d, uint32_t max_capacity, uint32_t max_blocked);
void qpack_dec_fini(struct qpack_dec *d);
int qpack_dec_encoder(struct qpack_dec *d, const uint8_t *p, size_t n);
int qpack_dec_section(struct qpack_dec *d, int64_t sid, const uint8_t *p, size_t n, size_t max_list,
                      qpack_field_fn fn, void *arg);
void qpack_dec_cancel(struct qpack_dec *d, int64_t sid);
size_t qpack_dec_output(struct qpack_dec *d, uint8_t *out, size_t cap);

size_t qpack_enc_prefix(uint8_t *out, size_t cap);
size_t qpack_enc_status(uint8_t *out, size_t cap, unsigned code);
size_t qpack_enc_field(uint8_t *out, size_t cap, const char *name, size_t nlen, const char *value,
                       size_t vlen);

#endif
