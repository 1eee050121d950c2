/* stats: a worker's counters for the metrics endpoint (requests, bytes, durations,
 * connections, file cache, pipes, engine turns, access-log lines).
 * Must not: cost the request path an atomic read-modify-write or a lock: each counter has one
 * writer (its worker), which adds with a relaxed load and a relaxed store (two plain moves on
 * x86-64 and arm64); a scrape from another thread reads them with relaxed loads and sums.
 * Ownership: embedded in struct runtime; the metrics thread only reads. */
#ifndef RT_STATS_H
#define RT_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/http1.h"

/* Why a connection ended. */
enum close_reason {
    CLOSE_DONE,    /* after its last response (Connection: close, an error, a flood) */
    CLOSE_CLIENT,  /* the client closed first */
    CLOSE_TIMEOUT, /* header, keep-alive, send or linger timeout */
    CLOSE_ERROR,   /* a receive or send failed (reset, broken pipe) */
    CLOSE_DRAIN,   /* the server was stopping */
    CLOSE_REASONS,
};

#define STATS_METHODS (HTTP_OTHER + 1)
#define STATS_STATUS_MIN 100
#define STATS_STATUSES 500 /* 100..599 */
/* Upper bounds of the request-duration histogram, in microseconds (le= in seconds). */
#define STATS_BUCKETS 14
static const uint64_t stats_bucket_us[STATS_BUCKETS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 5000000,
};

typedef _Atomic uint64_t stat_t;

struct stats {
    stat_t requests[STATS_STATUSES][STATS_METHODS];
    stat_t duration_bucket[STATS_BUCKETS + 1]; /* per bucket, not cumulative; last: +Inf */
    stat_t duration_us_sum;
    stat_t response_bytes; /* all bytes of responses sent, headers included */
    stat_t reused;         /* requests that were not their connection's first */
    stat_t accepted;
    stat_t closed[CLOSE_REASONS];
    stat_t cache_hits;
    stat_t cache_misses;
    stat_t cache_bytes; /* gauge: bytes of file contents the worker's cache holds */
    stat_t pipe_waits;  /* file sends that had to wait for a pipe */
    stat_t pipe_waits_done;
    stat_t enters;      /* system calls that submitted and waited (one per loop turn) */
    stat_t completions; /* operations completed (io_uring CQEs, epoll events) */
    stat_t log_dropped; /* access-log lines dropped because the writer was stuck */
    stat_t ktls_conns;  /* TLS connections whose send side went to kernel TLS */
    stat_t tls_resumed; /* TLS handshakes that resumed a session (a ticket) */
    stat_t tls_parked;  /* gauge: TLS handshakes waiting for a certificate on demand (issue 40) */
    /* Per-client limits (issue 28): connections closed at accept by --limit-conn, requests
     * answered 429 by --limit-req, and clients a full table could not count (let through). */
    stat_t limit_conn_refused;
    stat_t limit_req_refused;
    stat_t limit_uncounted;
    /* Issue 39: requests answered 403 for a --deny-user-agent pattern, and by an access rule. */
    stat_t rules_ua_refused;
    stat_t rules_access_refused;
    /* Connections from --proxy-protocol-from sources closed for their PROXY header (missing,
     * malformed, too long, too slow). */
    stat_t proxy_refused;
    /* Compression (rt/compress.c): variants made, kept (saved at least 5%), made on the loop,
     * requests not queued because the queue was full; identity bytes of the kept ones and what
     * they saved; CPU time compressing; gauge: bytes of variants the cache holds. */
    stat_t compress_made;
    stat_t compress_kept;
    stat_t compress_on_loop;
    stat_t compress_skipped;
    stat_t compress_in_bytes;
    stat_t compress_saved_bytes;
    stat_t compress_ns;
    stat_t compress_cache_bytes;
    /* HTTP/3 (quic/quic.h's counters, copied once per loop turn): connections open (gauge),
     * accepted, refused (limit, drain, bad token), Retry packets, stateless resets, version
     * negotiations sent; UDP datagrams in, out and dropped on send (socket buffer full). */
    stat_t h3_conns;
    stat_t h3_accepted;
    stat_t h3_refused;
    stat_t h3_retries;
    stat_t h3_resets;
    stat_t h3_vn;
    stat_t udp_in;
    stat_t udp_out;
    stat_t udp_dropped;
    stat_t udp_gro_trains; /* received buffers that held several datagrams (UDP GRO) */
    stat_t udp_ring_sends; /* sends handed to the engine's own sender (io_uring SENDMSG) */
    stat_t udp_sends;      /* send operations that carried datagrams (several each with GSO) */
};

static inline void stat_add(stat_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static inline void stat_set(stat_t *c, uint64_t v)
{
    atomic_store_explicit(c, v, memory_order_relaxed);
}

static inline uint64_t stat_get(const stat_t *c)
{
    return atomic_load_explicit((stat_t *)c, memory_order_relaxed);
}

#endif
