/* The Huffman code of RFC 7541; see huff.h. Moved out of h2/hpack.c (issue 30's decoder) so that
 * QPACK (h3/qpack.c) decodes and encodes with the same code. */
#include "core/huff.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "core/huff_tables.h"

/* The code at the top of acc (have bits) longer than HUFF_FAST_BITS, by the canonical
 * code's first code per length: its symbol, *bits set; -EPROTO when the bits left end before
 * a code does (a truncated code, or padding longer than 7 bits) or the code is EOS. */
static int huff_long(uint64_t acc, unsigned have, unsigned *bits)
{
    for (unsigned n = HUFF_FAST_BITS + 1; n <= 30 && n <= have; n++) {
        uint32_t code = (uint32_t)(acc >> (64 - n));
        if (code - huff_first[n] < huff_count[n]) {
            unsigned sym = huff_sym[huff_base[n] + code - huff_first[n]];
            *bits = n;
            return sym == 256 ? -EPROTO : (int)sym;
        }
    }
    return -EPROTO;
}

/* The bytes p[0, r) (r >= 1; at most eight of them) at the top of a word, most significant
 * first, the rest zero: whole-word loads that overlap, never a byte past p[r - 1] (a string's
 * last bytes cost a loop of a load a byte before). */
static inline uint64_t load_be(const uint8_t *p, size_t r)
{
    uint64_t x;
    uint32_t a, b;
    uint16_t c, d;
    if (r >= 8) {
        memcpy(&x, p, 8);
        return __builtin_bswap64(x);
    }
    if (r >= 4) {
        memcpy(&a, p, 4), memcpy(&b, p + r - 4, 4);
        return (uint64_t)__builtin_bswap32(a) << 32 | (uint64_t)__builtin_bswap32(b)
                                                          << (64 - 8 * r);
    }
    if (r >= 2) {
        memcpy(&c, p, 2), memcpy(&d, p + r - 2, 2);
        return (uint64_t)__builtin_bswap16(c) << 48 | (uint64_t)__builtin_bswap16(d)
                                                          << (64 - 8 * r);
    }
    return (uint64_t)p[0] << 56;
}

/* Appends sym to out[0, cap) at *len (out NULL: only counts). 0 or -ENOSPC. */
static int huff_put(char *out, size_t cap, size_t *len, unsigned sym)
{
    if (out) {
        if (*len == cap)
            return -ENOSPC;
        out[*len] = (char)sym;
    }
    ++*len;
    return 0;
}

long huff_decode(const uint8_t *in, size_t n, char *out, size_t cap)
{
    /* The unread bits sit at the top of acc, most significant first, refilled a word at a
     * time: one look-up of the next HUFF_FAST_BITS gives the symbol (often two) they
     * begin with (issue 30: the nibble-a-step state machine cost ~50 instructions a byte). No
     * code is shorter than 5 bits, so n bytes make at most n * 8 / 5 symbols: with that much
     * room (and a byte to spare) both symbols of a step are stored unchecked. */
    bool room = out && cap > n * 8 / 5 + 1;
    uint64_t acc = 0;
    unsigned have = 0;
    size_t i = 0, len = 0;
    /* With room, a refill takes no branch per byte (acc then holds at least 56 real bits, or
     * every bit left; the bits below them are the bytes that follow, which a later refill ORs
     * in again at the same place, or zeros) and four steps of at most 11 bits follow it, each
     * taken only when all its bits are real. Padding (at most seven ones) never makes a code of
     * its own, as no code of seven bits or fewer is all ones. A long code, EOS or the string's
     * end are left to the loop after. */
    while (room) {
        if (i < n) {
            size_t take = (63 - have) >> 3;
            take = take < n - i ? take : n - i;
            acc |= load_be(in + i, n - i) >> have;
            i += take;
            have += 8 * (unsigned)take;
        }
        for (int step = 0; step < 4; step++) {
            const struct huff_fast *e = &huff_fast[acc >> (64 - HUFF_FAST_BITS)];
            if (e->bits > have) /* also a long code's: 255 */
                goto rest;
            out[len] = (char)e->sym[0];
            out[len + 1] = (char)e->sym[1];
            len += 1u + (e->bits != e->bits0);
            acc <<= e->bits;
            have -= e->bits;
        }
    }
rest:
    for (;;) {
        if (have <= 56 && i < n) {
            size_t take = (64 - have) / 8; /* whole bytes acc has room for */
            take = take < n - i ? take : n - i;
            acc |= load_be(in + i, n - i) >> have;
            i += take;
            have += 8 * (unsigned)take;
        }
        const struct huff_fast *e = &huff_fast[acc >> (64 - HUFF_FAST_BITS)];
        unsigned used = e->bits;
        if (used <= have && room) { /* the common step: every bit it reads is real */
            out[len] = (char)e->sym[0];
            out[len + 1] = (char)e->sym[1];
            len += 1u + (used != e->bits0);
        } else if (have == 0) {
            break;
        } else if (used <= have) {
            int rc = huff_put(out, cap, &len, e->sym[0]);
            if (rc == 0 && used != e->bits0)
                rc = huff_put(out, cap, &len, e->sym[1]);
            if (rc < 0)
                return rc;
        } else if (e->bits0 <= have) { /* the string ends inside the second code */
            used = e->bits0;
            if (huff_put(out, cap, &len, e->sym[0]) < 0)
                return -ENOSPC;
        } else if (have <= 7 && (acc >> (64 - have)) == (1u << have) - 1) {
            break; /* padding: the most significant bits of EOS, at most 7 (RFC 7541 5.2) */
        } else {
            int sym = huff_long(acc, have, &used);
            if (sym < 0)
                return sym;
            if (huff_put(out, cap, &len, (unsigned)sym) < 0)
                return -ENOSPC;
        }
        acc <<= used;
        have -= used;
    }
    return (long)len;
}

size_t huff_encoded_len(const char *s, size_t n)
{
    size_t bits = 0;
    for (size_t i = 0; i < n; i++)
        bits += huff_code[(uint8_t)s[i]].bits;
    return (bits + 7) / 8;
}

size_t huff_encode_short(uint8_t *out, const char *s, size_t n, size_t limit)
{
    /* Codes gather in acc and leave four bytes at a time (a byte at a time cost ~28
     * instructions a character): with fewer than 32 bits waiting, one more code (30 at most)
     * still fits in 64. */
    uint64_t acc = 0;
    unsigned bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const struct huff_code *c = &huff_code[(uint8_t)s[i]];
        acc = acc << c->bits | c->code;
        bits += c->bits;
        if (bits >= 32) {
            if (limit - o < 4)
                return 0;
            bits -= 32;
            uint32_t w = __builtin_bswap32((uint32_t)(acc >> bits));
            memcpy(out + o, &w, 4);
            o += 4;
        }
    }
    if (limit - o < (bits + 7) / 8)
        return 0;
    for (; bits >= 8; bits -= 8)
        out[o++] = (uint8_t)(acc >> (bits - 8));
    if (bits) /* pad with the most significant bits of EOS: ones */
        out[o++] = (uint8_t)(acc << (8 - bits) | (0xffu >> bits));
    return o;
}

size_t huff_encode(uint8_t *out, const char *s, size_t n)
{
    return huff_encode_short(out, s, n, SIZE_MAX);
}
