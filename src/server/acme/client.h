/* client: the ACME protocol (RFC 8555) over libcurl and jansson: the directory, nonces, the
 * account (found or made with the account key), an order for a set of names with its
 * authorizations and challenges (HTTP-01, TLS-ALPN-01 or DNS-01, answered through hooks), the CSR,
 * finalization and the certificate chain; ACME Renewal Information (RFC 9773) when offered.
 * Must not: run on a worker's thread (every call blocks on the network, bounded by timeouts and
 * by the stop flag), or trust what the server sends (sizes bounded, content types checked,
 * every member's type checked; a CA's answer never reaches a response unchecked).
 * Ownership: one struct acme_client per ACME thread; the account key is the caller's. */
#ifndef ACME_CLIENT_H
#define ACME_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evp_pkey_st;

enum acme_kind { ACME_HTTP01 = 1, ACME_ALPN01 = 2, ACME_DNS01 = 4 };

/* What answers the challenges: the upper layer installs these (acme.c: the token table). */
struct acme_answer {
    /* Publish (put) and withdraw (drop) the answer for host: for ACME_HTTP01 the key
     * authorization for token, for ACME_ALPN01 the certificate made from its digest, for
     * ACME_DNS01 the TXT record of its digest (host: the identifier, "*." left off). put
     * returns once the answer can be checked (DNS-01: seen at the resolvers). */
    int (*put)(void *arg, enum acme_kind kind, const char *host, const char *token,
               const char *key_auth);
    void (*drop)(void *arg, enum acme_kind kind, const char *host, const char *token);
    void *arg;
    unsigned kinds; /* the enum acme_kind bits the listeners can answer, preferred in that order */
};

struct acme_client_cfg {
    const char *directory; /* the directory URL */
    /* PEM certificates to trust for the server's HTTPS (--acme-ca-root, read at start while
     * the file is readable: before --user and Landlock), or NULL: the system's */
    const char *ca_root_pem;
    size_t ca_root_len;
    const char *email;       /* the account's contact, or NULL */
    long timeout;            /* seconds one exchange may take */
    const atomic_bool *stop; /* set: every transfer and wait gives up at once (-ECANCELED) */
};

struct acme_client {
    struct acme_client_cfg cfg;
    void *curl;
    void *dir; /* json_t: the directory */
    struct evp_pkey_st *account;
    char thumbprint[44];
    char kid[1024];      /* the account URL, once known */
    char nonce[256];     /* the next Replay-Nonce, or "" */
    char error[768];     /* the last failure, one line (with the CA's problem document) */
    int64_t retry_after; /* seconds, from the last answer that had one (0: none) */
};

/* Fetches the directory and finds (or makes) the account of key: 0 or -errno with c->error.
 * client_close frees what it holds, whatever the outcome. */
int client_open(struct acme_client *c, const struct acme_client_cfg *cfg,
                struct evp_pkey_st *account);
void client_close(struct acme_client *c);

/* Orders a certificate for names[0..n) with key (the certificate's key, made by the caller):
 * *pem gets the chain (malloc'd PEM) on 0; -errno with c->error otherwise. Every answer put
 * through ans is dropped again before it returns. */
int client_order(struct acme_client *c, const char *const *names, int n,
                 const struct acme_answer *ans, struct evp_pkey_st *key, char **pem);

/* RFC 9773: the suggested renewal window of the certificate with ARI ID id. 0 with the window,
 * -ENOTSUP when the CA offers no renewalInfo, or -errno with c->error. */
int client_ari(struct acme_client *c, const char *id, int64_t *start, int64_t *end);

#endif
