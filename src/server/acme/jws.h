/* jws: the pure cryptography of ACME (RFC 8555, 7515, 7638, 8737, 9773) on OpenSSL 3: base64url,
 * the account key's JWK and thumbprint, ES256 signatures and flattened JWS objects, key
 * authorizations, the TLS-ALPN-01 digest, P-256 keys, CSRs, the facts read from a certificate
 * (its lifetime, names, ARI certificate ID) and the TLS-ALPN-01 challenge certificate.
 * Must not: do I/O beyond what the caller hands in (no files, no network, no clock: times are
 * passed), or keep state between calls.
 * Ownership: every returned string or object is the caller's (free(), EVP_PKEY_free,
 * X509_free); inputs are borrowed. */
#ifndef ACME_JWS_H
#define ACME_JWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evp_pkey_st;
struct x509_st;

/* base64url without padding (RFC 7515 2) of len bytes into out (cap >= jws_b64_len(len) + 1,
 * NUL-terminated): its length, or 0 when out is too small. */
size_t jws_b64(const void *data, size_t len, char *out, size_t cap);
#define jws_b64_len(n) (((n)*4 + 2) / 3)

/* The inverse; refuses padding and characters outside the alphabet: bytes written, or -EINVAL
 * (or -ENOSPC when cap is too small). */
long jws_unb64(const char *s, size_t len, void *out, size_t cap);

/* A new ECDSA P-256 key (the account key and every certificate key), or NULL. */
struct evp_pkey_st *jws_key_new(void);

/* PEM (PKCS#8) of key as a malloc'd string, or NULL; and a key from PEM text, or NULL. */
char *jws_key_pem(struct evp_pkey_st *key);
struct evp_pkey_st *jws_key_from_pem(const char *pem, size_t len);

/* The JWK of a P-256 public key with its members in the order RFC 7638 hashes them:
 * {"crv":"P-256","kty":"EC","x":"...","y":"..."}; 0 or -EINVAL. out needs 160 bytes. */
int jws_jwk(struct evp_pkey_st *key, char *out, size_t cap);

/* The JWK thumbprint (RFC 7638, SHA-256), base64url: 43 characters and a NUL into out[44]. */
int jws_thumbprint(struct evp_pkey_st *key, char out[44]);

/* The key authorization token "." thumbprint (RFC 8555 8.1) into out: its length, or 0 when
 * the token is not base64url (a CA's garbage must not reach a response) or out is too small. */
size_t jws_key_authorization(const char *token, const char *thumbprint, char *out, size_t cap);

/* SHA-256 of a key authorization: what the acmeIdentifier extension of a TLS-ALPN-01
 * certificate carries (RFC 8737 3). */
void jws_alpn_digest(const char *key_auth, size_t len, unsigned char out[32]);

/* A flattened JWS JSON (RFC 8555 6.2) signed with ES256: protected {"alg":"ES256","nonce",
 * "url", and "kid" when kid is not NULL, else "jwk"}, the payload as given ("" for a
 * POST-as-GET). A malloc'd string, or NULL. */
char *jws_sign(struct evp_pkey_st *key, const char *kid, const char *nonce, const char *url,
               const char *payload);

/* A CSR (DER, base64url as newOrder's finalize wants it) for names[0..n) in the subjectAltName
 * (the first also as the common name), signed with key: a malloc'd string, or NULL. */
char *jws_csr(struct evp_pkey_st *key, const char *const *names, int n);

/* What ringhttpd needs to know of an issued certificate. */
struct jws_cert_facts {
    int64_t not_before, not_after; /* UNIX seconds */
    char ari_id[160];              /* RFC 9773 4.1: base64url(AKI keyIdentifier) "." serial */
};

/* Reads the first certificate of a PEM text: 0 or -EINVAL. */
int jws_cert_facts(const char *pem, size_t len, struct jws_cert_facts *out);

/* Whether the first certificate of pem names every one of names[0..n) (exactly, as a DNS
 * subjectAltName) and its key matches a private key in the same text. */
bool jws_cert_covers(const char *pem, size_t len, const char *const *names, int n);

/* The RFC 8737 challenge certificate for name: self-signed with a new P-256 key, name as its
 * only subjectAltName, the critical acmeIdentifier extension holding digest; valid from now-1h
 * for a week (the validator ignores the dates). 0 with *cert and *key, or -ENOMEM/-EINVAL. */
int jws_alpn_cert(const char *name, const unsigned char digest[32], int64_t now,
                  struct x509_st **cert, struct evp_pkey_st **key);

#endif
