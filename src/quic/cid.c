/* cid: see cid.h.
 *
 * QUIC-LB's plaintext algorithm puts the server ID in the clear right after the first octet,
 * so any balancer that knows the ID's length routes on it with no key; the draft's encrypted
 * forms would hide it from observers but need the key in the balancer, and AWS NLB reads the
 * plain one. The nonce is random but for the steering bytes, whose hash is the worker: the
 * program in the kernel (classic BPF, no map) can only compute a function of the bytes. */
#include "quic/cid.h"

#include <errno.h>
#include <string.h>

/* The inverse of CID_STEER_MUL modulo 2^32: cid_steer_make goes from the wanted product back
 * to the bytes. */
#define CID_STEER_MUL_INV 0x0e8b2f51u
_Static_assert((uint32_t)(CID_STEER_MUL *CID_STEER_MUL_INV) == 1u,
               "CID_STEER_MUL_INV inverts CID_STEER_MUL");
_Static_assert(1 + CID_SID_MAX + CID_NONCE_MIN <= CID_LEN_MAX, "the longest server ID fits");
_Static_assert(CID_NONCE_MIN >= CID_STEER_BYTES, "the steering bytes fit in the nonce");

/* The nonce a server ID leaves room for, at least: 8 bytes keep IDs of one server as unlikely
 * to collide as the 64 bits ngtcp2's own examples draw, where the length allows. */
#define NONCE_WANTED 8

int cid_layout_init(struct cid_layout *l, const uint8_t *sid, size_t sid_len, unsigned rotation)
{
    if (sid_len > CID_SID_MAX || rotation > CID_ROTATION_MAX)
        return -EINVAL;
    memset(l, 0, sizeof(*l));
    if (sid_len == 0) {
        l->len = CID_LEN_PLAIN;
        return 0;
    }
    size_t len = 1 + sid_len + NONCE_WANTED;
    if (len < CID_LEN_PLAIN)
        len = CID_LEN_PLAIN;
    if (len > CID_LEN_MAX)
        len = CID_LEN_MAX;
    l->len = (uint8_t)len;
    l->sid_len = (uint8_t)sid_len;
    memcpy(l->sid, sid, sid_len);
    /* Config rotation in the top three bits, the length of what follows in the low five. */
    l->first = (uint8_t)(rotation << 5 | (len - 1));
    l->steer_off = (uint8_t)(1 + sid_len);
    return 0;
}

void cid_make(const struct cid_layout *l, uint8_t *cid, unsigned worker, unsigned workers)
{
    if (l->sid_len) {
        cid[0] = l->first;
        memcpy(cid + 1, l->sid, l->sid_len);
    }
    if (workers > 1)
        cid_steer_make(cid + l->steer_off, worker, workers);
}

/* BPF_W loads are big-endian. */
static uint32_t be32(const uint8_t p[4])
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

uint32_t cid_steer_index(const uint8_t p[CID_STEER_BYTES], uint32_t n)
{
    return ((be32(p) * CID_STEER_MUL) >> 16) % n;
}

void cid_steer_make(uint8_t p[CID_STEER_BYTES], uint32_t index, uint32_t n)
{
    /* The product's high half is moved to the nearest value that is index modulo n (its low
     * half and the rest of the ID stay random); multiplying by the inverse gives the bytes. */
    uint32_t product = be32(p) * CID_STEER_MUL;
    uint32_t high = product >> 16;
    high = high - high % n + index;
    if (high > 0xffffu)
        high -= n;
    uint32_t w = ((high << 16) | (product & 0xffffu)) * CID_STEER_MUL_INV;
    p[0] = (uint8_t)(w >> 24);
    p[1] = (uint8_t)(w >> 16);
    p[2] = (uint8_t)(w >> 8);
    p[3] = (uint8_t)w;
}

size_t cid_server_id(const struct cid_layout *l, const uint8_t *cid, size_t len, uint8_t *sid)
{
    if (!l->sid_len || len < (size_t)1 + l->sid_len + CID_NONCE_MIN ||
        (cid[0] >> 5) != (l->first >> 5))
        return 0;
    memcpy(sid, cid + 1, l->sid_len);
    return l->sid_len;
}
