/* tls_xport: the TLS transport (transport.h) over the sans-I/O module in tls.h: ciphertext from the
 * engine is fed to a connection's TLS state and the plaintext goes up with conn_input; the
 * protocol's plan goes down as records sealed into a per-connection buffer (memory segments
 * sealed in place, file segments read into the buffer first by the engine, off the loop:
 * conn_file_read), one wire plan at a time, the next chunk made when the engine reports the
 * last one sent.
 * Must not: touch the socket (the engine does), hold a buffer while a connection is idle, or
 * share anything mutable between workers.
 * Ownership: one struct tls_port per worker and TLS listener (the listener's xport_ctx), made
 * by the main thread before the worker starts and used by that worker only; a reload hands it
 * new contexts through `next`, which the worker adopts at its next accept. */
#ifndef TLS_XPORT_H
#define TLS_XPORT_H

#include <stdatomic.h>

#include "conn/transport.h"

struct tls_ctx;

struct tls_port {
    struct tls_ctx *cur;            /* new connections start on this one */
    _Atomic(struct tls_ctx *) next; /* published by a reload, adopted by the worker */
    void *free_bufs;                /* the worker's spare send buffers (a free list) */
    unsigned nfree;
    unsigned parked;   /* handshakes waiting for a certificate on demand (TLS_WAIT) ... */
    unsigned park_max; /* ... at most (tls_port_init: TLS_PARK_MAX; the server may lower it) */
    void *parked_list; /* ... in a list (tls_xport.c's), for tls_port_retry */
};

extern const struct transport_ops transport_tls;

/* Certificates on demand: at most this many handshakes wait per port (a worker's), the bound
 * that keeps a flood of names from holding connections and memory (tls_xport.c PARK_S). */
#define TLS_PARK_MAX 256

/* A port starting on ctx (its reference moves into the port). */
void tls_port_init(struct tls_port *port, struct tls_ctx *ctx);

/* Hands the port a new context (main thread, on reload): the worker switches to it at its next
 * accept; connections already open keep theirs. A context published before and never adopted
 * is dropped here (no connection can hold it). */
void tls_port_publish(struct tls_port *port, struct tls_ctx *ctx);

/* The handshakes parked on port waiting for a certificate on demand are tried again now (a
 * name was decided or its certificate came: the thread deciding them woke the worker); each
 * is also tried once a second until its deadline. The worker's thread. */
void tls_port_retry(struct runtime *w, struct tls_port *port);

/* Drops the contexts and buffers once the worker and all its connections are gone. */
void tls_port_fini(struct tls_port *port);

#endif
