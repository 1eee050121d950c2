/* tag: the one encoding of an operation's identity in its 64-bit user data (io_uring's
 * user_data, epoll's data.u64): which operation, and for which connection slot and generation.
 * Must not: hold state; encode and decode are pure and written only here.
 * Ownership: none; both engines use these helpers and nothing else to pack or unpack a tag. */
#ifndef ENGINE_TAG_H
#define ENGINE_TAG_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Layout, high bits first:  op (8) | generation (24) | slot (32).
 * A tag without a connection (a listener, a wake-up, a tick) has generation and slot 0. The
 * generation is the low 24 bits of conn->gen: a completion whose generation differs from its
 * slot's current one belongs to an earlier connection in that slot and is stale (nginx's
 * "instance bit", widened so that 16 million reuses of one slot pass before two can be confused).
 */
#define TAG_OP_SHIFT 56
#define TAG_GEN_SHIFT 32
#define TAG_GEN_MASK 0xffffffu

struct tag {
    unsigned op;   /* 0..255, the engine's own operation numbers */
    uint32_t gen;  /* low 24 bits of the connection's generation */
    uint32_t slot; /* the connection's slot in its worker */
};

static inline uint64_t tag_encode(unsigned op, uint32_t gen, uint32_t slot)
{
    return (uint64_t)(op & 0xffu) << TAG_OP_SHIFT |
           (uint64_t)(gen & TAG_GEN_MASK) << TAG_GEN_SHIFT | slot;
}

static inline struct tag tag_decode(uint64_t t)
{
    return (struct tag){
        .op = (unsigned)(t >> TAG_OP_SHIFT),
        .gen = (uint32_t)(t >> TAG_GEN_SHIFT) & TAG_GEN_MASK,
        .slot = (uint32_t)t,
    };
}

/* Whether a decoded tag names the connection generation gen (compared in the tag's 24 bits). */
static inline bool tag_is_current(struct tag t, uint32_t gen)
{
    return t.gen == (gen & TAG_GEN_MASK);
}

#endif
