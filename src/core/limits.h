/* limits: per-client limits as values and tables (issue 28): the client key (an IPv4 address,
 * or the /64 of an IPv6 one), nginx's limit_req leaky bucket (rate, burst, nodelay) and the
 * Retry-After a refusal implies, a count of open connections per key, and the parser of
 * --limit-req's value (RATE[/s|/m][,burst=B][,nodelay]).
 * Must not: perform I/O, read the clock (now is passed in), allocate (a table lives in memory
 * its caller gives) or lock.
 * Ownership: a table belongs to one worker. Limits stay exact across workers because the
 * listeners send every connection of one client address to the same worker (steer.h). */
#ifndef CORE_LIMITS_H
#define CORE_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A client as limits see it: an IPv4 address as its IPv4-mapped IPv6 form, an IPv6 address cut
 * to its /64 (one subscriber's prefix: a client that owns a /64 must not get 2^64 buckets). */
struct limit_key {
    uint8_t b[16];
};

/* The key of family's (AF_INET: 4 bytes, AF_INET6: 16) address; an IPv4-mapped IPv6 address
 * gives its IPv4 address's key. */
struct limit_key limit_key_of(int family, const uint8_t *addr);

/* A --limit-req value, in nginx's units. */
struct limit_rate {
    uint32_t rate;  /* milli-requests per second: 10r/s is 10000, 30r/m is 500 */
    uint32_t burst; /* requests past the rate let through before the 429s start */
    bool nodelay;   /* the burst is answered at once, not spaced at the rate */
};

/* Parses "RATE[r][/s|/m][,burst=B][,nodelay]" (nginx's "10r/s" and a bare "10/s" or "10" both):
 * RATE 1..1000000, at least 1 request an hour's worth after /m's rounding; B 0..100000; the
 * parameters in any order, each once, no spaces. 0 or -EINVAL. */
int limit_rate_parse(const char *s, struct limit_rate *out);

/* One bucket's state (nginx's limit_req node): the excess over the rate in milli-requests, as
 * of last_ms. A key without a bucket behaves as a bucket with no excess. */
struct limit_bucket {
    uint64_t last_ms;
    uint32_t excess;
};

enum limit_verdict {
    LIMIT_PASS,   /* answer now */
    LIMIT_DELAY,  /* inside the burst without nodelay: nginx would hold it delay_ms first */
    LIMIT_REJECT, /* past the burst: 429, Retry-After: retry_after */
};

struct limit_decision {
    enum limit_verdict verdict;
    uint32_t delay_ms;    /* LIMIT_DELAY: how long nginx would wait before answering */
    uint32_t retry_after; /* LIMIT_REJECT: seconds (at least 1) until the bucket lets one in */
};

/* One request against bucket b (fresh: a key seen for the first time) at now_ms, exactly as
 * nginx's limit_req: the excess drains at the rate and grows by one request per request; past
 * the burst the request is refused and the bucket is left as it was (refusals do not push the
 * client's wait further out). */
struct limit_decision limit_bucket_take(struct limit_bucket *b, bool fresh,
                                        const struct limit_rate *r, uint64_t now_ms);

/* A set-associative table of keys (a CPU cache's shape): a key's hash picks a set of
 * LIMIT_WAYS slots, a lookup reads that set only, and a full set gives up its least useful
 * slot. Bounded memory and time whatever clients do; the hash is keyed by a seed the caller
 * draws at random so that no one can aim many keys at one set. */
#define LIMIT_WAYS 8

struct limit_slot {
    struct limit_key key;
    uint64_t free_ms; /* from then on the slot holds nothing worth keeping (0: empty) */
    struct limit_bucket bucket;
    uint32_t rule;  /* which limit (a table may hold several); the key is (rule, address) */
    uint32_t count; /* the connection table's open connections */
};

struct limit_table {
    struct limit_slot *slots;
    uint32_t set_mask; /* sets - 1; sets is a power of two */
    uint64_t seed;
};

/* The slot count to allocate for at least `want` keys: a power of two of sets times the ways. */
size_t limit_table_size(size_t want);

/* Makes a table over slots[0..n) (n from limit_table_size, zeroed by the caller). */
void limit_table_init(struct limit_table *t, struct limit_slot *slots, size_t n, uint64_t seed);

/* --limit-req: takes one request for (rule, key) at now_ms. *evicted is set when a full set
 * had to give up a bucket that still held an excess (the table is too small for the clients in
 * that set; that client is forgiven). */
struct limit_decision limit_req_take(struct limit_table *t, uint32_t rule, struct limit_key key,
                                     const struct limit_rate *r, uint64_t now_ms, bool *evicted);

/* --limit-conn: counts a new connection of key if it has fewer than max open. 0; -EBUSY when
 * it has max already (refuse it); -ENOSPC when its set is full of other clients' open
 * connections (a table sized for the worker's connections makes that an attack on a seed it
 * cannot know; the caller lets the connection in uncounted rather than refuse a stranger). */
int limit_conn_acquire(struct limit_table *t, struct limit_key key, uint32_t max);

/* limit_conn_acquire that also says, on success, where key's count lives (*at: a slot index,
 * the same for as long as key has a count), for limit_conn_release_at. */
int limit_conn_acquire_at(struct limit_table *t, struct limit_key key, uint32_t max, uint32_t *at);

/* Forgets one connection of key that limit_conn_acquire counted. */
void limit_conn_release(struct limit_table *t, struct limit_key key);

/* The same for the count at slot `at` (limit_conn_acquire_at's): no key to keep or look up. */
void limit_conn_release_at(struct limit_table *t, uint32_t at);

/* The open connections counted for key (0 when none). */
uint32_t limit_conn_count(const struct limit_table *t, struct limit_key key);

#endif
