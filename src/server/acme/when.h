/* when: the ACME client's clock arithmetic, pure: when to renew a certificate (the CA's ACME
 * Renewal Information window, RFC 9773, else two thirds of its lifetime less a jitter) and how
 * long to wait after a failure (exponential backoff that honours Retry-After).
 * Must not: read the clock or a random source (the caller passes now and a number in [0, 1)),
 * or do I/O.
 * Ownership: nothing is kept. */
#ifndef ACME_WHEN_H
#define ACME_WHEN_H

#include <stddef.h>
#include <stdint.h>

/* The most a failed order waits before the next try, whatever the count of failures. */
#define WHEN_BACKOFF_MAX (24 * 3600)

/* When to renew a certificate valid [not_before, not_after) (UNIX seconds). With an ARI window
 * (ari_start < ari_end) a time drawn uniformly inside it (RFC 9773 4.2); without, two thirds of
 * the lifetime less up to a thirtieth of it (rnd in [0, 1) draws how much), so instances that
 * got their certificates together do not all come back at once. Never after not_after. */
int64_t when_renew(int64_t not_before, int64_t not_after, int64_t ari_start, int64_t ari_end,
                   double rnd);

/* Seconds to wait before the next try after the failures-th failure in a row (1, 2, ...):
 * base doubled per earlier failure, at most WHEN_BACKOFF_MAX, with up to a tenth added by rnd;
 * never less than retry_after (the CA's Retry-After in seconds, 0 when it sent none): a CA
 * that asks for a week gets its week. */
int64_t when_backoff(unsigned failures, int64_t base, int64_t retry_after, double rnd);

/* A Retry-After value (RFC 9110 10.2.3: delta-seconds or an HTTP-date) as seconds from now,
 * or 0 when absent or unreadable. */
int64_t when_retry_after(const char *value, size_t len, int64_t now);

#endif
