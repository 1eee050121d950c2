/* hfield: the field rules HTTP/2 and HTTP/3 share (RFC 9113 8.1-8.2, RFC 9114 4.1-4.2): the
 * connection-specific fields neither carries, a request's content-length against the DATA
 * that came, and field names lower-cased a word at a time for the encoders.
 * Must not: allocate, perform I/O, or decide a status (a broken rule makes the message
 * "malformed": the protocol resets the stream with its own code).
 * Ownership: pure functions over the caller's bytes; a struct hfield_length is the caller's
 * (one per request stream). */
#ifndef CORE_HFIELD_H
#define CORE_HFIELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Whether name[0, n) is lit[0, n) (a lower-case token) in any case. Case is folded with bit
 * 0x20, which is exact where lit has a letter, and for '-' lets only a CR by, which no field
 * name holds. */
static inline bool hfield_name_is(const char *name, const char *lit, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if ((name[j] | 0x20) != lit[j])
            return false;
    return true;
}

/* Whether the field is connection-specific (RFC 9113 8.2.2, RFC 9114 4.2): Connection,
 * Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade, and TE unless its value is
 * "trailers", the name in any case. A request that carries one is malformed; a response drops
 * them all (value NULL: TE whatever its value). Every response field passes here, so the
 * length decides first: the usual ones (content-type, etag, date...) have none of these. */
static inline bool hfield_connection_specific(const char *name, size_t n, const char *value,
                                              size_t value_len)
{
    switch (n) {
    case 2:
        return hfield_name_is(name, "te", 2) &&
               !(value && value_len == 8 && memcmp(value, "trailers", 8) == 0);
    case 7:
        return hfield_name_is(name, "upgrade", 7);
    case 10:
        return hfield_name_is(name, "connection", 10) || hfield_name_is(name, "keep-alive", 10);
    case 16:
        return hfield_name_is(name, "proxy-connection", 16);
    case 17:
        return hfield_name_is(name, "transfer-encoding", 17);
    }
    return false;
}

/* A request's pseudo-fields (RFC 9113 8.3.1, RFC 9114 4.3.1), as bits. */
#define HFIELD_METHOD 1
#define HFIELD_SCHEME 2
#define HFIELD_AUTHORITY 4
#define HFIELD_PATH 8

/* The bit of pseudo-field name[0, n) (":method"...), 0 for one a request may not carry
 * (:status, :protocol without extended CONNECT, an unknown one). */
static inline unsigned hfield_pseudo(const char *name, size_t n)
{
    switch (n) {
    case 5:
        return memcmp(name, ":path", 5) == 0 ? HFIELD_PATH : 0;
    case 7:
        return memcmp(name, ":method", 7) == 0   ? HFIELD_METHOD
               : memcmp(name, ":scheme", 7) == 0 ? HFIELD_SCHEME
                                                 : 0;
    case 10:
        return memcmp(name, ":authority", 10) == 0 ? HFIELD_AUTHORITY : 0;
    }
    return 0;
}

/* Whether the pseudo-fields seen (HFIELD_* bits) make a request: :method, :scheme and :path;
 * for CONNECT, :method and :authority only (RFC 9113 8.5, RFC 9114 4.4). */
static inline bool hfield_pseudo_complete(unsigned seen, bool connect)
{
    unsigned need =
        connect ? HFIELD_METHOD | HFIELD_AUTHORITY : HFIELD_METHOD | HFIELD_SCHEME | HFIELD_PATH;
    return (seen & need) == need && !(connect && seen & (HFIELD_SCHEME | HFIELD_PATH));
}

/* A request's content-length and the DATA counted against it (RFC 9113 8.1.1, RFC 9114
 * 4.1.2: a request whose DATA add up to another length is malformed). Zeroed: none seen. */
struct hfield_length {
    bool has;
    uint64_t length, received;
};

/* A content-length field's value: false when it is malformed (empty, not all digits, 20
 * digits or more, or another value than one before). */
bool hfield_length_field(struct hfield_length *cl, const char *v, size_t vl);

/* n more bytes of DATA: false once they pass the length. */
static inline bool hfield_length_data(struct hfield_length *cl, uint64_t n)
{
    cl->received += n;
    return !cl->has || cl->received <= cl->length;
}

/* At the request's end: false when the DATA fell short of (or passed) the length. */
static inline bool hfield_length_end(const struct hfield_length *cl)
{
    return !cl->has || cl->received == cl->length;
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

/* dst[0, n) = src[0, n) with 'A'-'Z' made 'a'-'z' (dst may be src), in words that may
 * overlap (n of 8 to 16, as most response field names are, is two; longer ones a word at a
 * time, shorter a byte at a time). Inline: it runs for every field an encoder writes. */
static inline void hfield_lower(char *dst, const char *src, size_t n)
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

#endif
