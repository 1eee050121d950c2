/* acme_int: what the certificate table and its renewal thread (acme.c) and the challenge answers
 * (answers.c: the token table, the shared answer files and the watcher that mirrors other
 * processes' files) share: a cert's and the state's layout. Private to src/server/acme/;
 * acme.h is the interface. Owns nothing: acme.c makes and frees a struct acme, answers.c fills
 * its token table and its shared[] (the watcher thread's alone). */
#ifndef SERVER_ACME_ACME_INT_H
#define SERVER_ACME_ACME_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <openssl/evp.h>

#include "server/acme/client.h"
#include "server/acme/jws.h"
#include "server/acme/store.h"

struct acme_tokens;
struct config;
struct dns01;

#define SHARED_MAX 64 /* challenge answers of other processes mirrored at once */
#define SHARED_SUFFIX ".challenge"
#define SHARED_AGE 3600 /* seconds: an older answer file is a crashed process's leftover */
#define SHARED_HEADSTART_NS (250 * 1000000L) /* see acme_answer_put */

/* One certificate: its names, its file, what is known of it, and when to look at it next. */
struct cert {
    const char **names; /* our own copies: a reload frees the config's */
    int n;
    bool wanted; /* named by the configuration now (else kept until it expires); under lock */
    char *file;  /* in the state directory: "NAME.pem" (chain, then key) */
    char *path;  /* the same, whole, for the TLS contexts */
    bool live;   /* a valid pair is on disk and handed to the TLS contexts; under lock */
    struct jws_cert_facts facts;
    int64_t renew_at;  /* 0 until known */
    int64_t ari_until; /* the ARI window is good until then (0: none asked) */
    int64_t next;      /* when the thread looks at it next */
    unsigned failures;
    bool ondemand;   /* issue 40: a name a handshake asked for (ondemand.h); kept across reloads */
    int64_t stalled; /* its last order failed: the next try's time, else 0; under lock */
};

struct acme {
    const struct config *cfg;
    struct acme_tokens *tokens;
    /* acme_new's struct acme_hooks, member by member: the struct is acme.h's, and this header
     * including acme.h would make acme.c and it a knot (make modgraph) */
    void (*changed)(void *arg);
    void *changed_arg;
    struct acme_store store;
    EVP_PKEY *account;
    char *ca_root; /* --acme-ca-root's PEM, read at start */
    size_t ca_root_len;
    unsigned kinds;
    struct dns01 *dns; /* DNS-01 (--acme-dns-hook or --acme-dns-update), or NULL: no wildcards */
    const char *ca;
    int64_t backoff_base; /* seconds: RINGHTTPD_ACME_BACKOFF (a test hook), else 60 */
    long timeout;         /* seconds per exchange: RINGHTTPD_ACME_TIMEOUT, else 30 */
    /* As many as the sites ask for (issue 40). The array grows under lock (acme_names), so the
     * thread reads a pointer of it under the lock; a cert never moves and is never removed. */
    struct cert **certs;
    int ncerts, cap;
    bool renamed; /* acme_names changed the set: every cert is looked at again; under lock */
    bool poked;   /* acme_ondemand_add: a new cert is to be looked at now; under lock */
    struct acme_client client;
    bool client_open;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    pthread_mutex_t lock; /* certs' live/facts (the main and metrics threads read them); wait */
    pthread_cond_t wake;
    uint64_t issued, failed; /* orders: read by the metrics thread under lock */
    /* The challenge answers of other processes sharing the directory, mirrored into our token
     * table by the watcher thread (its own; inotify on the directory, stop by the eventfd). */
    pthread_t watcher;
    bool watching;
    int watch, stopfd;
    struct shared {
        char file[300];
        char key_auth[256];
        bool seen;
    } shared[SHARED_MAX];
    int nshared;
};

/* The client's challenge hooks (struct acme_answer's put and drop, arg a struct acme): an answer
 * into the token table and, but for DNS-01, a shared file of the state directory; and out. */
int acme_answer_put(void *arg, enum acme_kind kind, const char *host, const char *token,
                    const char *key_auth);
void acme_answer_drop(void *arg, enum acme_kind kind, const char *host, const char *token);

/* The watcher thread's body (arg a struct acme whose watch and stopfd are open): mirrors the
 * other processes' answer files into the token table until stopfd is written. */
void *acme_watcher_main(void *arg);

#endif
