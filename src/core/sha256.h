/* sha256: SHA-256 (FIPS 180-4), for the dictionary hashes of RFC 9842 (Available-Dictionary
 * names a dictionary by the SHA-256 of its bytes, and dcz's header repeats it).
 * Must not: perform I/O or allocate.
 * Ownership: the context is the caller's; inputs are only read during each call. */
#ifndef CORE_SHA256_H
#define CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32

struct sha256 {
    uint32_t h[8];
    uint64_t bytes;
    unsigned char block[64];
    size_t fill;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
void sha256_final(struct sha256 *s, unsigned char out[SHA256_LEN]);

/* The digest of data[0..len) in one call. */
void sha256(const void *data, size_t len, unsigned char out[SHA256_LEN]);

#endif
