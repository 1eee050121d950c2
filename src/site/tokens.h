/* tokens: the ACME challenge answers the server gives while an order is pending, keyed by host
 * name: HTTP-01's key authorizations (host + token) and TLS-ALPN-01's certificates (host).
 * Published to the workers as immutable snapshots swapped by one atomic pointer; each worker
 * reads through its own hazard slot (store, re-check), so a request takes no lock and makes no
 * read-modify-write, and the writer frees an old snapshot only once no hazard names it.
 * Must not: be written by more than one thread at a time (the ACME thread; a mutex keeps
 * writers apart, never readers), or hand out an answer for another host than the one asked.
 * Ownership: struct acme_tokens is the server's, outliving the workers and the ACME thread;
 * reader i is worker i's alone; snapshots are the table's. */
#ifndef ACME_TOKENS_H
#define ACME_TOKENS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

struct evp_pkey_st;
struct x509_st;
struct tokens_snap;

struct tokens_reader {
    _Atomic(struct tokens_snap *) hazard; /* the snapshot this reader is looking at, or NULL */
    struct acme_tokens *table;            /* for tokens_alpn, whose only argument is the reader */
    char pad[64 - 2 * sizeof(void *)];    /* one cache line each: workers do not share them */
};

struct acme_tokens {
    _Atomic(struct tokens_snap *) cur;
    struct tokens_reader *readers;
    int nreaders;
    pthread_mutex_t write;
};

/* An empty table read by nreaders readers (one per worker): 0 or -ENOMEM. */
int tokens_init(struct acme_tokens *t, int nreaders);
/* After every reader and writer is gone. */
void tokens_fini(struct acme_tokens *t);

/* Reader i's slot, for worker i (and its TLS context) to pass to the calls below. */
struct tokens_reader *tokens_reader(struct acme_tokens *t, int i);

/* Writers. An HTTP-01 answer for host and token (key_auth: "token.thumbprint"); a TLS-ALPN-01
 * certificate for host (the table takes its own references); and their removal (token NULL:
 * host's TLS-ALPN-01 certificate). Host names compare without case. 0 or -errno. */
int tokens_add_http(struct acme_tokens *t, const char *host, const char *token,
                    const char *key_auth);
int tokens_add_alpn(struct acme_tokens *t, const char *host, struct x509_st *cert,
                    struct evp_pkey_st *key);
int tokens_remove(struct acme_tokens *t, const char *host, const char *token);

/* Readers (a worker's thread). The key authorization for token when host (a Host field's
 * value: ":port" and a final dot ignored) has one pending, copied into out: its length, or 0
 * when none (or out is too small). */
size_t tokens_http01(struct tokens_reader *r, const char *host, size_t host_len, const char *token,
                     size_t token_len, char *out, size_t cap);

/* The TLS-ALPN-01 certificate pending for name, with a reference each for the caller: 0, or
 * -ENOENT. Its signature fits a TLS context's challenge hook (tls.h). */
int tokens_alpn(void *reader, const char *name, struct x509_st **cert, struct evp_pkey_st **key);

#endif
