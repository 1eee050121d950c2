/* rulefile_int: what the rules' compiler (rulefile.c) and their matcher (rulematch.c) share:
 * the hash a path's prefixes are walked with, the key of an exact path, the byte classes.
 * Private to src/core/rulefile*.c and rulematch.c; rulefile.h is the interface.
 * Owns nothing. */
#ifndef CORE_RULEFILE_INT_H
#define CORE_RULEFILE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Header rules beyond the first HEADER_BITS never match (rulefile_headers' matches are a
 * bitmap). */
#define HEADER_BITS 1024

/* FNV-1a, one byte at a time: the matcher hashes a path's prefixes as it walks it. */
#define HASH_INIT 2166136261u
static inline uint32_t hash_step(uint32_t h, unsigned char ch)
{
    return (h ^ ch) * 16777619u;
}

static inline bool name_char(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_';
}

static inline char lower(char ch)
{
    return ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
}

/* An exact path's key: without its trailing '/' (but "/" stays), as a request's is. */
static inline size_t exact_len(const char *s, size_t n)
{
    return n > 1 && s[n - 1] == '/' ? n - 1 : n;
}

#endif
