/* h1: HTTP/1.1 in the protocol slot (proto.h), a peer of HTTP/2: a connection's bytes go to the
 * core's parser, each request is answered through serve, one response in flight at a time
 * (pipelined requests wait, unparsed, in the input buffer and are answered in order), and it
 * owns keep-alive, the header / keep-alive / send / linger deadlines and the lingering close.
 * Every connection starts here; one that opens with the HTTP/2 preface is handed to w->h2.
 * Must not: decide HTTP semantics (core/policy.h says what a request does to the connection,
 * serve answers it) or touch the socket (conn and the engine do).
 * Ownership: the per-connection state lives in the connection's slot (conn.proto_mem) from
 * open to release, so a connection costs no allocation; input buffers come from the worker's
 * pool (w->inbufs, bounded by --head-memory), responses from serve's. */
#ifndef HTTP_H1_H
#define HTTP_H1_H

#include <stdbool.h>
#include <stdint.h>

#include "conn/conn.h"
#include "core/http1.h"
#include "conn/proto.h"
#include "rt/headmem.h"

/* Size of a pooled input buffer: a whole request head and what pipelining sends behind it. */
#define H1_INPUT_CAP (HTTP1_MAX_HEAD + 16384)

enum h1_state {
    H1_READING,   /* waiting for (the rest of) a request */
    H1_SENDING,   /* a response is in flight; later requests wait in the input buffer */
    H1_LINGERING, /* the last response is out and the write side shut; input is read and
                   * dropped until the client closes, so its unread bytes do not turn the
                   * close into a reset that could destroy that response */
};

/* One connection's HTTP/1 state, in the order a request touches it. */
struct h1 {
    uint8_t state;   /* enum h1_state */
    bool keep_alive; /* the connection stays open after the response in flight */
    bool in_request; /* bytes of a request have arrived since the last response */
    bool served;     /* a response has been started on this connection */
    bool on_heads; /* on the worker's heads list: a partial head buffered (--head-memory evicts) */
    uint32_t in_len;
    uint32_t in_cap;            /* a pool buffer's size, or more for one grown on the heap */
    char *in;                   /* buffered unparsed input, or NULL */
    struct response *resp;      /* the response in flight, or NULL */
    uint64_t discard;           /* body bytes of the current request still to skip */
    uint64_t send_left;         /* bytes the response had left at the last timeout check */
    int64_t linger_end;         /* H1_LINGERING: when to close even if the client still sends */
    struct headmem_holder hold; /* on the worker's ledger while on_heads (rt/headmem.h) */
};

_Static_assert(sizeof(struct h1) <= CONN_PROTO_MEM, "HTTP/1's state must fit in the slot");

/* The HTTP/1.1 protocol operations: every connection's first (w->h1). */
extern const struct proto_ops proto_h1;

/* HTTP/1's per-worker state (the scratch request; its partial heads are on the worker's
 * ledger, w->heads, with HTTP/2's), reached through w->h1w: the worker makes it with its world and
 * frees it last. NULL when memory is short. */
struct h1worker *h1_worker_new(void);
void h1_worker_free(struct h1worker *hw);

/* c's HTTP/1 state (while c->proto is &proto_h1). */
static inline struct h1 *h1_of(struct conn *c)
{
    return (struct h1 *)(void *)c->proto_mem;
}

#endif
