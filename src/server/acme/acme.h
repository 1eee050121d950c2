/* acme: automatic HTTPS (README "Automatic HTTPS"). A thread of its own keeps one certificate
 * per set of names valid: it finds it in the state directory (--acme-state) or orders it
 * (client.c), answers the challenges through the token table the workers read (tokens.h),
 * writes the chain and its key atomically, tells the server to make it live (the hook below:
 * the reload path's new TLS contexts), and renews it (ARI, else two thirds of its lifetime)
 * with backoff after failures. Several processes sharing the directory order once (a lock per
 * certificate; the others read the result from disk), and every process answers every
 * challenge: each answer is also a file of the directory that the others mirror.
 * Must not: run on a worker's thread or hold anything a worker waits for; drop a certificate
 * that is still valid because a renewal failed.
 * Ownership: the server makes one struct acme after the configuration and before the TLS
 * contexts, starts its thread after the workers, and stops it before freeing the token table. */
#ifndef ACME_ACME_H
#define ACME_ACME_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tls/tls.h"

struct config;
struct acme;
struct acme_tokens;

#define ACME_DEFAULT_CA "https://acme-v02.api.letsencrypt.org/directory"
#define ACME_DEFAULT_STATE "/var/lib/ringhttpd/acme"

/* What the server installs: called on the ACME thread once a certificate on disk is new (issued,
 * renewed, or written by another process), so the server builds new TLS contexts with
 * acme_pairs and publishes them as a reload does. Must not block. */
struct acme_hooks {
    void (*changed)(void *arg);
    void *arg;
};

/* Reads what the ACME options of cfg ask for (names from --acme-domain, or every host of every
 * site without a pair of its own or "acme: off"; wildcards only with DNS-01), opens the state
 * directory and makes or reads the account key. 0 with *out; -errno with one line in why. tls_port:
 * whether a TLS listener is there to answer TLS-ALPN-01 (the cleartext port always answers
 * HTTP-01). */
int acme_new(struct acme **out, const struct config *cfg, struct acme_tokens *tokens,
             const struct acme_hooks *hooks, char *why, size_t why_len);

/* The pairs of the certificates valid on disk now, for new TLS contexts, appended to *out
 * (*n of *cap used; grown by realloc as needed): each names its certificate's names as its
 * hosts, strings that live as long as a. 0 or -ENOMEM. Any thread but a worker's. */
int acme_pairs(struct acme *a, struct tls_cert_files **out, int *n, int *cap);

/* A reload's configuration (main thread): the certificates cfg asks for (as acme_new reads
 * them) become the wanted set; the ACME thread orders those without a valid certificate at
 * once, and keeps serving the certificates of names that left until they expire (their files
 * stay). Takes only a's lock, never waits for the thread's exchanges. 0, or -errno with one
 * line in why (too many certificates: the others are still wanted). */
int acme_names(struct acme *a, const struct config *cfg, char *why, size_t why_len);

/* Starts the thread and the watcher that mirrors other processes' challenge answers from the
 * state directory into the token table: 0 or -errno. */
int acme_start(struct acme *a);

/* Stops the thread (an exchange in progress is abandoned) and frees a. */
void acme_free(struct acme *a);

/* -v: one line per certificate: its names, and valid until when or awaited. */
void acme_describe(struct acme *a, FILE *f);

/* Certificates on demand (issue 40, ondemand.h). Whether cfg has a site (or the default one)
 * with "acme: on-demand". */
bool acme_ondemand_wanted(const struct config *cfg);

/* name (approved) is wanted from now on, a certificate of its own, ordered at once by the
 * thread and renewed as the others; remembered in the state directory (NAME.ondemand), so a
 * restart serves it without asking. Returns its handle for acme_ondemand_status, or NULL
 * (out of memory). Not on a worker's thread (it writes to the state directory). */
void *acme_ondemand_add(struct acme *a, const char *name);

/* Where cert (acme_ondemand_add's) is: 1 live (its file's path, chain then key, in path),
 * 0 being ordered, -EAGAIN when its last order failed (the next try at *retry_at). */
int acme_ondemand_status(struct acme *a, void *cert, char *path, size_t cap, int64_t *retry_at);

/* The metrics: the earliest expiry, certificates by state and by days left, with
 * --metrics-per-cert ringhttpd_tls_certificate_expiry_timestamp_seconds{name}, and
 * ringhttpd_acme_orders_total{outcome}. Its signature fits the metrics hook. */
void acme_metrics(void *a, FILE *f);

#endif
