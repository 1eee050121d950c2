/* The field rules HTTP/2 and HTTP/3 share; see hfield.h. */
#include "core/hfield.h"

bool hfield_length_field(struct hfield_length *cl, const char *v, size_t vl)
{
    uint64_t x = 0;
    bool ok = vl > 0 && vl < 20;
    for (size_t i = 0; ok && i < vl; i++) {
        ok = v[i] >= '0' && v[i] <= '9';
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    if (!ok || (cl->has && cl->length != x))
        return false;
    cl->has = true;
    cl->length = x;
    return true;
}

/* Eight bytes of a name with 'A'-'Z' made 'a'-'z', all at once (a byte at a time cost ~7
 * instructions a byte, ~700 a response): a byte is upper case when it is ASCII, its 7 bits
 * reach 'A' and do not pass 'Z' (each sum sets the byte's high bit, and cannot carry out). */
static inline uint64_t lower8(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101u, high = ones * 0x80;
    uint64_t low7 = x & ~high;
    uint64_t upper = (low7 + ones * (0x80 - 'A')) & ~(low7 + ones * (0x7f - 'Z')) & ~x & high;
    return x | upper >> 2;
}

/* In words that may overlap (n of 8 to 16, as most response field names are, is two; longer
 * ones a word at a time, shorter a byte at a time). */
void hfield_lower(char *dst, const char *src, size_t n)
{
    uint64_t x;
    size_t i = 0;
    if (n < 8) {
        for (; i < n; i++)
            dst[i] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] + 32 : src[i]);
        return;
    }
    for (; i + 8 < n; i += 8) {
        memcpy(&x, src + i, 8);
        x = lower8(x);
        memcpy(dst + i, &x, 8);
    }
    memcpy(&x, src + n - 8, 8); /* the last eight, overlapping what was done */
    x = lower8(x);
    memcpy(dst + n - 8, &x, 8);
}
