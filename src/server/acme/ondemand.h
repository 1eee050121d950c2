/* ondemand: certificates on demand (issue 40, README "Many sites"). A TLS handshake whose SNI
 * name no loaded certificate covers, and which falls to a site with "acme: on-demand", asks
 * here: the name is approved by the site's own names (a "*.example.com" host), by a {host}
 * root that has the name's directory, or by --acme-ask (URL?domain=NAME answering 2xx), on this
 * module's thread; an approved name's certificate is ordered by the ACME thread (acme.h) and
 * handed to the handshakes waiting for it, which meanwhile park (tls.h TLS_WAIT).
 * Must not: block a worker (the TLS hook takes one mutex for a table look-up, nothing else),
 * order for a name nobody approved, or grow past its bounds (ONDEMAND_NAMES names known at
 * once; ONDEMAND_ORDERS_PER_MIN new orders a minute): a flood of random names costs the ask
 * endpoint one question each and the CA nothing.
 * Ownership: the server makes one struct ondemand after struct acme (which must outlive it)
 * when a site has acme: on-demand, or when a --config file's reload may give one a site,
 * with a reader per worker (the TLS contexts' hook argument; the server points each at its
 * worker's runtime before the workers start), starts its thread with the ACME one and frees it
 * before the ACME state. */
#ifndef ACME_ONDEMAND_H
#define ACME_ONDEMAND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct acme;
struct config;
struct runtime;
struct ondemand;
struct x509_st;
struct evp_pkey_st;
struct stack_st_X509;

#define ONDEMAND_NAMES 1024        /* names asked about, approved or refused, known at once */
#define ONDEMAND_ORDERS_PER_MIN 20 /* new on-demand orders a minute, whatever the names */
#define ONDEMAND_REFUSED_S 600     /* a refusal is believed this long (the flood's repeats) */
#define ONDEMAND_UNANSWERED_S 60   /* no answer from --acme-ask (down, slow): asked again after */
#define ONDEMAND_ASK_TIMEOUT_S 5   /* one question to --acme-ask */

struct ondemand_reader {
    struct ondemand *od;
    struct runtime *rt; /* the worker's: its sites route the name */
};

/* For cfg's on-demand sites, certificates ordered through a, readers for nreaders workers: 0
 * with *out, or -errno with one line in why. */
int ondemand_new(struct ondemand **out, const struct config *cfg, struct acme *a, int nreaders,
                 char *why, size_t why_len);

/* Worker i's reader, to point at its runtime and install as its TLS contexts' hook argument. */
struct ondemand_reader *ondemand_reader(struct ondemand *od, int i);

/* Bumped, and every reader's worker woken, when names were decided or got their certificate
 * (at most every WAKE_MS): the workers try their parked handshakes again (worker.h). */
const atomic_uint *ondemand_gen(const struct ondemand *od);

/* A certificate went live (the ACME hook, any thread): the thread looks at the names waiting
 * now rather than at its next second. */
void ondemand_poke(struct ondemand *od);

/* Starts the thread (before the process is confined: it asks over the network). 0 or -errno. */
int ondemand_start(struct ondemand *od);

/* Stops the thread (before the ACME state goes; NULL: nothing). The hook still answers from
 * the table, and names still to be decided wait until their handshakes give up. */
void ondemand_stop(struct ondemand *od);

/* Stops the thread and frees od, after the workers (NULL: nothing). */
void ondemand_free(struct ondemand *od);

/* The TLS contexts' hook (tls_ctx.h struct tls_ondemand; arg: a reader): on a worker's thread. */
int ondemand_cert(void *arg, const char *name, bool late, struct x509_st **cert,
                  struct stack_st_X509 **chain, struct evp_pkey_st **key);

/* ringhttpd_acme_ondemand_total{outcome}: approved, refused, issued, failed, rate_limited (no
 * series per name). Its signature fits the metrics hook. */
void ondemand_metrics(void *od, FILE *f);

#endif
