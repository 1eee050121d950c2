/* prefint: the prefixed integers of HPACK (RFC 7541 5.1) and QPACK (RFC 9204 4.1.1), as an
 * encoder writes them: a value in the low nbits of a first byte, and the rest 7 bits a byte.
 * Must not: write more than prefint_len(nbits, v) bytes (at most 10), or allocate.
 * Ownership: none; inline functions over the caller's buffer. Reading stays with each decoder:
 * their limits differ (HPACK's 2^28, QPACK's 2^62). */
#ifndef CORE_PREFINT_H
#define CORE_PREFINT_H

#include <stddef.h>
#include <stdint.h>

/* The bytes prefint_write writes for v. */
static inline size_t prefint_len(unsigned nbits, uint64_t v)
{
    uint64_t max = (UINT64_C(1) << nbits) - 1;
    size_t n = 1;
    if (v < max)
        return n;
    for (v -= max; v >= 128; v >>= 7)
        n++;
    return n + 1;
}

/* Writes v with an nbits prefix (1..8) whose first byte's other bits are `first`: the count. */
static inline size_t prefint_write(uint8_t *out, uint8_t first, unsigned nbits, uint64_t v)
{
    uint64_t max = (UINT64_C(1) << nbits) - 1;
    size_t i = 0;
    if (v < max) {
        out[i++] = (uint8_t)(first | v);
        return i;
    }
    out[i++] = (uint8_t)(first | max);
    for (v -= max; v >= 128; v >>= 7)
        out[i++] = (uint8_t)(0x80 | (v & 0x7f));
    out[i++] = (uint8_t)v;
    return i;
}

#endif
