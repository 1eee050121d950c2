/* tls_int: what the certificates (tls_certs.c: pairs read, grouped by name set, indexed) and
 * the contexts (tls_ctx.c: OpenSSL contexts, SNI, tickets, ALPN) share: a set's layout and its
 * sum index. Private to src/tls/; tls_ctx.h is the interface.
 * Owns nothing: tls_certs.c makes and frees a set, tls_ctx.c reads it. */
#ifndef TLS_TLS_INT_H
#define TLS_TLS_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "rt/names.h"

struct tls_settings;

/* A file as stat(2) saw it: a key whose file is the same is not read again (a reload running
 * as --user may not read a key only root can; the one loaded at start is still good). */
struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
};

/* One pair loaded: kept by the set, so the next load reuses what has not changed. */
struct pair {
    char *cert_path, *key_path;
    unsigned char cert_sum[32]; /* SHA-256 of the certificate file's bytes */
    struct file_id key_id;
    X509 *leaf;
    STACK_OF(X509) * chain;
    EVP_PKEY *key;
    unsigned char names[32]; /* its name set's key (rt/certsets.h) */
    int group;
};

/* One OpenSSL context: the pairs that share a name set (at most one per key type). */
struct tls_group {
    SSL_CTX *ssl;
    X509 *leaf;            /* its first certificate, which SNI names are matched against */
    char *site_name;       /* the first name of the first site whose pair it holds, or NULL */
    unsigned char sum[32]; /* over its pairs' files and contents: what a reload reuses it by */
};

/* A hash index of 32-byte sums to array positions (open addressing, position + 1; 0 free). */
struct sum_index {
    uint32_t *at;
    uint32_t mask;
};

/* Every worker's certificates (issue 40): loaded once per start or reload, read by every
 * worker's context; immutable once made, freed by the last tls_certs_put (any thread). */
struct tls_certs {
    atomic_uint refs;
    struct tls_group *groups;
    int num_groups;
    bool certless; /* group 0 has no certificate and only refuses */
    struct pair *pairs;
    int num_pairs;
    struct sum_index pair_sums, group_sums; /* by pair.cert_sum and tls_group.sum: reuse */
    int reused;                             /* groups taken over from the previous set */
    /* the sites' names (issue 19), each naming the group of its site's pair: SNI looks here
     * first, exact then wildcard, as a Host is routed */
    struct names sites;
    /* the certificates' own names (subjectAltName DNS, else the CN): then here, the group
     * found confirmed by X509_check_host (a wildcard covers one label) */
    struct names leaves;
    char warnings[1024];
};

/* tls_ctx.c: an OpenSSL context for every worker, its callbacks finding the worker's context
 * through the connection; groups is what tls_default_groups said, asked once per load. NULL
 * without memory. */
SSL_CTX *tls_ssl_ctx_make(const struct tls_settings *s, const char *groups);

#endif
