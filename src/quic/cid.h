/* cid: the layout of every connection ID this server issues, the one fact that the QUIC
 * endpoint (which makes the IDs) and the port's reuseport program (server/steer.h, which reads
 * them to find the worker) both follow. Without a server ID an ID is random but for the
 * steering bytes at its start (issue 29). With one (--quic-server-id, issue 38) it is
 * QUIC-LB's plaintext encoding (draft-ietf-quic-load-balancers: a first octet of config
 * rotation bits and the ID's self-encoded length, the server ID, then the nonce), which is
 * also AWS NLB's QUIC pass-through layout for its 8-byte server IDs; the steering bytes are
 * then the nonce's first four, so an L4 balancer routes to the host and the host to the worker.
 * Must not: draw random bytes (the caller fills an ID with them first), or know ngtcp2.
 * Ownership: a layout is plain data, made once at start and copied by whoever reads it. */
#ifndef QUIC_CID_H
#define QUIC_CID_H

#include <stddef.h>
#include <stdint.h>

/* RFC 9000 17.2: a version 1 connection ID has at most 20 bytes. */
#define CID_LEN_MAX 20
/* QUIC-LB: a server ID of 1 to 15 bytes, and a nonce of at least 4 after it. */
#define CID_SID_MAX 15
#define CID_NONCE_MIN 4
/* Config rotation codepoints 0 to 6 (7, 0b111, marks an ID no balancer can route). */
#define CID_ROTATION_MAX 6
/* The bytes the reuseport program reads to pick the worker (a BPF word). */
#define CID_STEER_BYTES 4
/* The length of our IDs without a server ID (and the least with one). */
#define CID_LEN_PLAIN 18

struct cid_layout {
    uint8_t len;       /* every ID we issue has this many bytes */
    uint8_t steer_off; /* where its CID_STEER_BYTES steering bytes begin */
    uint8_t sid_len;   /* 0: no server ID */
    uint8_t first;     /* QUIC-LB's first octet, when sid_len */
    uint8_t sid[CID_SID_MAX];
};

/* A layout for server ID sid (sid_len bytes, 0 for none) with config rotation codepoint
 * rotation: 0, or -EINVAL when sid_len or rotation is out of QUIC-LB's range. With a server ID,
 * the ID is long enough for a nonce of 8 bytes or more (at most CID_LEN_MAX in all). */
int cid_layout_init(struct cid_layout *l, const uint8_t *sid, size_t sid_len, unsigned rotation);

/* Makes cid (l->len bytes, random on entry) an ID of layout l for worker `worker` of
 * `workers`: the first octet and server ID written, the steering bytes made so that
 * cid_worker gives worker (when workers > 1); the rest stays random. Pure. */
void cid_make(const struct cid_layout *l, uint8_t *cid, unsigned worker, unsigned workers);

/* The multiplier of the steering hash, which the reuseport program computes too. */
#define CID_STEER_MUL 0x9e3779b1u

/* The worker, of n, that the steering bytes at p (an ID's, from l->steer_off) name: the
 * hash's high half modulo n. Pure; n >= 1. */
uint32_t cid_steer_index(const uint8_t p[CID_STEER_BYTES], uint32_t n);

/* Rewrites the CID_STEER_BYTES bytes at p (random on entry, still unpredictable on return) so
 * that cid_steer_index(p, n) == index. Pure; index < n. */
void cid_steer_make(uint8_t p[CID_STEER_BYTES], uint32_t index, uint32_t n);

/* The server ID an ID of layout l carries, into sid (at least l->sid_len bytes): its length,
 * or 0 when l has none or the ID cannot be one of ours (too short, another first octet's
 * rotation bits). Pure. */
size_t cid_server_id(const struct cid_layout *l, const uint8_t *cid, size_t len, uint8_t *sid);

#endif
