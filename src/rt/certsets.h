/* certsets: which certificate pairs of a load are one name set (issue 37), for both secure
 * transports: two certificates whose subject and subjectAltName are the same bytes (an ECDSA
 * and an RSA pair of one host) are one set wherever they stand in the list, and sets are
 * numbered in the order their first pair comes. TLS's OpenSSL contexts and QUIC's GnuTLS
 * credentials are these sets, so the 421 rule's "only one certificate" and the pair a key
 * type gets are the same over HTTP/2 and HTTP/3.
 * Must not: read a certificate (each transport's library hands in the bytes it found).
 * Ownership: a struct certsets owns its index and its keys (certsets_free); one load's, on the
 * thread that loads. */
#ifndef RT_CERTSETS_H
#define RT_CERTSETS_H

#include <stddef.h>
#include <stdint.h>

#define CERTSET_KEY_LEN 32

struct certsets {
    uint32_t *at; /* open addressing: set + 1, 0 free */
    uint32_t mask;
    unsigned char (*keys)[CERTSET_KEY_LEN]; /* each set's */
    int num, cap;
};

/* The key of a certificate whose subject is the DER subject[0..subject_len) and whose
 * subjectAltName extension's value is san[0..san_len) (san_len 0: it has none). */
void certset_key(const void *subject, size_t subject_len, const void *san, size_t san_len,
                 unsigned char key[CERTSET_KEY_LEN]);

/* Room for the sets of up to pairs pairs: 0 or -ENOMEM. */
int certsets_init(struct certsets *s, int pairs);

/* The set of a certificate with key: the set of an earlier one with the same key, else a new
 * one, numbered s->num before the call. At most the pairs certsets_init was given. */
int certsets_add(struct certsets *s, const unsigned char key[CERTSET_KEY_LEN]);

void certsets_free(struct certsets *s);

#endif
