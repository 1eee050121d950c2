/* token: the RFC 9110 lexical pieces every parser here shares: tchar, OWS, ASCII case folding
 * and caseless compares, and the field-line rules HTTP/2 and HTTP/3 share, written once.
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

/* The rules every field line of HTTP/2 and HTTP/3 must pass (RFC 9113 8.2.1, 8.2.2; RFC 9114
 * 4.2: their framing carries names and values as bytes, unchecked), for their decoders and
 * request checks alike: TOKEN_NAME_OK for a name of lower-case tchars (a pseudo-header's after
 * its ':'), TOKEN_VALUE_OK for a value with no NUL, CR or LF and no space or tab at either end.
 * A table, not a search: token_field_name_char is token_tchar without the capitals. */
#define TOKEN_NAME_OK 1
#define TOKEN_VALUE_OK 2
extern const bool token_field_name_char[256];

static inline unsigned token_field_name_ok(const char *name, size_t name_len)
{
    size_t i = name_len && name[0] == ':';
    bool ok = name_len > i;
    for (; i < name_len; i++)
        ok &= token_field_name_char[(unsigned char)name[i]];
    return ok ? TOKEN_NAME_OK : 0;
}

static inline unsigned token_field_value_ok(const char *v, size_t n)
{
    if (n && (v[0] == ' ' || v[0] == '\t' || v[n - 1] == ' ' || v[n - 1] == '\t'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] == '\0' || v[i] == '\r' || v[i] == '\n')
            return 0;
    return TOKEN_VALUE_OK;
}

/* TOKEN_NAME_OK | TOKEN_VALUE_OK for a field line that passes both. */
static inline unsigned token_field_check(const char *name, size_t name_len, const char *value,
                                         size_t value_len)
{
    return token_field_name_ok(name, name_len) | token_field_value_ok(value, value_len);
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
