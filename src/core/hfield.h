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

/* dst[0, n) = src[0, n) with 'A'-'Z' made 'a'-'z' (dst may be src), a word at a time. */
void hfield_lower(char *dst, const char *src, size_t n);

#endif
