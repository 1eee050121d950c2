/* tls_ctx: the certificates (struct tls_certs: loaded once for every worker, grouped by the
 * names they share, chosen by SNI in O(1) through hashes of the sites' names and the
 * certificates' own; a reload reuses what did not change) and the per-worker TLS context over
 * them: Mozilla "intermediate" defaults or TLS 1.3 only, ALPN, and session tickets whose keys
 * every worker derives alike; a connection started on it.
 * Must not: touch a socket or any fd after tls_ctx_new; read the clock (the worker passes its
 * time); log (start-up problems come back as text). Ownership: one struct tls_keys per process
 * (read-only once made); one struct tls_certs per load, immutable, counted (atomically) by the
 * contexts made on it; one struct tls_ctx per worker, counted by its connections (see tls.h). */
#ifndef TLS_TLS_CTX_H
#define TLS_TLS_CTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tls/tls_record.h"

struct x509_st;
struct evp_pkey_st;

/* Without --ticket-key-file, ticket keys change every 12 hours; a ticket made with the previous
 * key is still accepted (then replaced by a fresh one), so a ticket lives 12 to 24 hours. */
#define TLS_TICKET_ROTATE (12 * 3600)

struct tls_cert_files {
    const char *cert; /* PEM: the certificate, then its chain */
    const char *key;  /* PEM: its private key (ECDSA, RSA, Ed25519...) */
    /* A site's own pair (issue 19): the site's names ("example.org", "*.example.org"), which
     * SNI matches before any certificate's own names; NULL/0 for a process-level pair. */
    const char *const *hosts;
    int num_hosts;
};

/* Automatic HTTPS's hook (issue 27), installed by the server: the TLS-ALPN-01 challenge
 * certificate pending for SNI name name (RFC 8737), with a reference each for the caller; 0,
 * or -ENOENT when there is none. */
struct tls_challenge {
    int (*cert)(void *arg, const char *name, struct x509_st **cert, struct evp_pkey_st **key);
    void *arg; /* per context: the worker's reader of the challenge table */
};

/* Certificates on demand (issue 40), installed by the server: asked for a ClientHello whose
 * SNI name no certificate of the set covers. 1: not an on-demand name (the handshake goes on
 * as before: the default pair, or unrecognized_name when certless); 0 with a reference each
 * to the name's certificate, its chain (may be NULL) and key; -EINPROGRESS: being decided or
 * issued, ask again later (the handshake parks: TLS_WAIT); another -errno: refused (the
 * unrecognized_name alert). late: the caller's deadline passed, so "ask again" is refused too.
 * Runs on the worker's thread: must not block. */
struct stack_st_X509;
struct tls_ondemand {
    int (*cert)(void *arg, const char *name, bool late, struct x509_st **cert,
                struct stack_st_X509 **chain, struct evp_pkey_st **key);
    void *arg; /* per context: the worker's reader */
};

struct tls_certs;

struct tls_settings {
    const struct tls_cert_files *certs; /* the first pair is the default (no or unknown SNI) */
    int num_certs;                      /* 1 or more (0 or more when certless) */
    /* tls_ctx_new's certificates: a set tls_certs_new made of certs for every worker; NULL:
     * tls_ctx_new makes one of its own */
    struct tls_certs *shared;
    /* No default pair (automatic HTTPS with no --tls-cert): a name no pair covers (one still
     * waiting for its certificate), or no SNI, gets the unrecognized_name alert. */
    bool certless;
    /* A ClientHello offering ALPN "acme-tls/1" is answered with challenge's certificate for its
     * SNI name and nothing else: such a connection carries no data (tls_conn_read refuses). */
    struct tls_challenge challenge; /* .cert NULL: none */
    struct tls_ondemand ondemand;   /* .cert NULL: none (no site has acme: on-demand) */
    int min_version;        /* 12: TLS 1.2 and 1.3, Mozilla "intermediate"; 13: TLS 1.3 only */
    bool alpn_h2;           /* the protocol layer serves HTTP/2: ALPN offers h2 before http/1.1 */
    unsigned ticket_rotate; /* seconds per ticket key; 0 means TLS_TICKET_ROTATE */
    /* --ticket-key-file (issue 38): files of 48 or 80 bytes, nginx's ssl_session_ticket_key
     * format (a 16-byte name, then for 80 bytes a 32-byte HMAC-SHA256 key and an AES-256-CBC
     * key, for 48 bytes an AES-128-CBC key then a 16-byte HMAC key), read with the pairs. The
     * first encrypts every ticket; the others still decrypt (a ticket under one of them is
     * replaced by one under the first), so a fleet rotates by adding a new first file
     * everywhere, then dropping the last. None: keys derived from the process's secret. */
    const char *const *ticket_key_files;
    int num_ticket_key_files;
    const char *kx_groups; /* --tls-groups, OpenSSL's list syntax; NULL: tls_default_groups() */
};

/* The key exchange groups offered without --tls-groups: X25519MLKEM768 first where the linked
 * OpenSSL has it, then X25519, P-256, P-384. */
const char *tls_default_groups(void);
/* 0 when the linked OpenSSL takes list, else -EINVAL with one line in why. */
int tls_groups_check(const char *list, char *why, size_t why_len);

struct tls_keys;

/* The process's ticket secret, from the system's random source: 0 or -errno. */
int tls_keys_new(struct tls_keys **out);
void tls_keys_free(struct tls_keys *keys);

/* Reads every pair of s, checks that each key matches its certificate, and groups pairs with
 * the same names (one ECDSA and one RSA certificate for a host) into one OpenSSL context, for
 * every worker's context to share. With prev (the set serving now), a pair whose files are the
 * same (paths, the certificate's bytes, the key file's inode and times) is taken over without
 * reading its key, and a group whose pairs all are keeps its OpenSSL context: a reload of
 * thousands of sites costs what changed. 0 with *out, or -errno with one line in why naming
 * the file at fault (and, unless bad is NULL, the index of its pair in *bad, else -1). A
 * certificate that has expired or is not valid yet is not an error:
 * tls_certs_warnings says so. Any thread; the result may be used by every thread. */
int tls_certs_new(const struct tls_settings *s, const struct tls_certs *prev,
                  struct tls_certs **out, int *bad, char *why, size_t why_len);
/* Drops a reference (the caller's, or a context's); the last one frees the set. Any thread. */
void tls_certs_put(struct tls_certs *c);
/* Lines ("--tls-cert 'FILE' expired on ...\n") about what loaded but looks wrong, or "". */
const char *tls_certs_warnings(const struct tls_certs *c);
/* Certificate groups in c (names with their own certificate), and in *reused (unless NULL)
 * how many of them tls_certs_new took over from prev. */
int tls_certs_count(const struct tls_certs *c, int *reused);

/* Builds a worker's context on s->shared (a reference of its own), or on a set made of s's
 * pairs for it alone. 0 with *out, or -errno with one line in why. keys must outlive it. */
int tls_ctx_new(const struct tls_settings *s, const struct tls_keys *keys, struct tls_ctx **out,
                char *why, size_t why_len);

/* tls_certs_warnings of ctx's certificates. */
const char *tls_ctx_warnings(const struct tls_ctx *ctx);

/* The wall clock (UNIX seconds) that picks the ticket key; the worker calls it once a second.
 * Every context given the same keys and time encrypts and accepts the same tickets (with
 * ticket key files, the files' keys whatever the time). */
void tls_ctx_set_time(struct tls_ctx *ctx, int64_t wall);

/* Drops the owner's reference; the context goes when its last connection is finished too. */
void tls_ctx_put(struct tls_ctx *ctx);

/* Starts the server side of a connection on ctx: 0 or -ENOMEM. */
int tls_conn_init(struct tls_conn *c, struct tls_ctx *ctx);

/* Which site the connection's certificate belongs to (issue 19): the SNI name when it picked
 * a site's own pair, else the first name of the site whose pair was chosen, or NULL when the
 * certificate is a process-level pair (then ask tls_conn_names). */
const char *tls_conn_site_name(const struct tls_conn *c);

/* Whether the process has one certificate group only (no other certificate to be had). */
bool tls_conn_only_cert(const struct tls_conn *c);

/* Whether the connection's certificate names host[0..len) (lower case, no port: a vhost_key;
 * X509_check_host, a wildcard covering one label). The 421 rule's question (conn/cert.c's
 * cert_tls); the rule itself, with its verdict cache, is site_misdirected's. */
bool tls_conn_names(const struct tls_conn *c, const char *host, size_t len);

/* Checks one pair as tls_ctx_new would (files read, key matches the certificate): 0, or -errno
 * with one line in why naming the file at fault. For --check-config. */
int tls_pair_check(const struct tls_cert_files *f, char *why, size_t why_len);

#endif
