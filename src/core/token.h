/* token: the RFC 9110 lexical pieces every parser here shares: tchar, OWS, ASCII case folding
 * and caseless compares, written once.
 * Must not: allocate, or know any field's grammar (that is each parser's own).
 * Ownership: pure functions over the caller's bytes; token_tchar is a const table. */
#ifndef CORE_TOKEN_H
#define CORE_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

/* RFC 9110 5.6.2 tchar: 1 for the bytes of a token (a method, a field name, a coding, a media
 * type's parts), 0 for every other byte, including all of 0x80..0xff. */
extern const unsigned char token_tchar[256];

static inline bool token_is_tchar(unsigned char c)
{
    return token_tchar[c];
}

/* OWS (RFC 9110 5.6.3): space or horizontal tab. */
static inline bool token_is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* ASCII lower case; every other byte as it is (no locale). */
static inline unsigned char token_lower(unsigned char c)
{
    return (unsigned char)(c - 'A') < 26 ? c | 0x20 : c;
}

/* p[0..n) equals lit[0..lit_len) ignoring ASCII case on both sides. */
static inline bool token_ieq(const char *p, size_t n, const char *lit, size_t lit_len)
{
    if (n != lit_len)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (token_lower((unsigned char)p[i]) != token_lower((unsigned char)lit[i]))
            return false;
    }
    return true;
}

/* The value 0..63 of a base64 digit (RFC 4648 4: A-Z, a-z, 0-9, '+', '/'), or -1 for any
 * other byte ('=' included). Shared by the dictionary hash (accept.c) and Basic credentials
 * (rt/auth.c). */
int token_b64(char c);

#endif
