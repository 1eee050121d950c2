/* dns01: answers ACME's DNS-01 challenge (RFC 8555 8.4, issue 40): the TXT record
 * _acme-challenge.NAME = base64url(SHA-256(key authorization)) is put in place by the
 * operator's hook (--acme-dns-hook CMD: `CMD present|cleanup FQDN VALUE`) or by an RFC 2136
 * UPDATE signed with TSIG (--acme-dns-update SERVER --acme-dns-tsig FILE), then looked for at
 * the resolvers (--acme-dns-resolver, else the UPDATE's server, else the system's) before the
 * CA is told to validate.
 * Must not: run on a worker's thread (every call blocks: a child process, the network), wait
 * unbounded (the hook has a deadline, each query a timeout, propagation a number of looks), or
 * retry a refusal on its own (the ACME thread's backoff decides when to try again).
 * Ownership: one struct dns01 per struct acme, made at start (the TSIG file is read while
 * readable, before --user and Landlock) and used by the ACME thread only. */
#ifndef ACME_DNS01_H
#define ACME_DNS01_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct config;
struct dns01;

#define DNS01_HOOK_TIMEOUT 120 /* seconds one run of the hook may take */
#define DNS01_HOOK_OUTPUT 4096 /* bytes of its output that reach the error log */

/* NULL in *out when cfg configures no DNS-01 (then wildcards are not ordered); 0, or -errno
 * with one line in why (the TSIG file unreadable or malformed, a server that does not parse or
 * resolve). stop: set, every wait gives up (-ECANCELED). */
int dns01_new(struct dns01 **out, const struct config *cfg, const atomic_bool *stop, char *why,
              size_t why_len);
void dns01_free(struct dns01 *d);

/* "hook CMD", "RFC 2136 to SERVER", for -v and the log. */
const char *dns01_describe(const struct dns01 *d);

/* The TXT record for the authorization of domain (the identifier, without "*.") with key_auth
 * published and seen by every resolver: 0, or -errno with one line in err. */
int dns01_present(struct dns01 *d, const char *domain, const char *key_auth, char *err,
                  size_t err_len);

/* The record withdrawn again; a failure is logged, nothing else. */
void dns01_cleanup(struct dns01 *d, const char *domain, const char *key_auth);

#endif
