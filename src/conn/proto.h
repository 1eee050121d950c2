/* proto: the protocol slot above the transport. HTTP/1.1 (http/h1.h) and HTTP/2 (h2/h2conn.h)
 * are peers behind these operations: every connection starts with HTTP/1.1 (w->h1), and another
 * protocol takes it over, from its first bytes (the h2c preface) or from the transport's choice
 * (ALPN), with conn_set_proto. A request that must wait for work off the loop gets serve's
 * SERVE_PENDING; every protocol parks it and asks again when resume is called.
 * Must not: decide file semantics (serve and the core answer every protocol's requests) or
 * touch the socket; its output goes down with conn_send, one plan at a time.
 * Ownership: a protocol's per-connection state hangs off conn.pstate, made when it takes the
 * connection and freed by release. Responses come from serve_response_get, one per request in
 * flight, and go back with serve_response_put after their bytes have been sent. */
#ifndef PROTO_H
#define PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct runtime;
struct conn;

struct proto_ops {
    const char *name;
    /* Takes the connection over: set pstate (allocated, or in conn.proto_mem). 0, or -errno
     * (conn closes). */
    int (*open)(struct runtime *w, struct conn *c);
    /* The protocol's bytes (plaintext) arrived: n > 0 bytes at data, valid only during the
     * call (copy what must be kept); n == 0: the peer ended its side (conn.eof is set); n < 0:
     * -errno, the connection is dead (conn closes it after the call). */
    void (*input)(struct runtime *w, struct conn *c, const char *data, ssize_t n);
    /* The plan last given to conn_send is on the wire (0) or failed (-errno). */
    void (*sent)(struct runtime *w, struct conn *c, int err);
    /* The connection's timer (conn_arm) expired. */
    void (*timeout)(struct runtime *w, struct conn *c);
    /* The worker drains: finish (HTTP/2: GOAWAY, let streams in flight end), then close. */
    void (*drain)(struct runtime *w, struct conn *c);
    /* The connection has closed and no operation is in flight: release pstate and every
     * response still held. */
    void (*release)(struct runtime *w, struct conn *c);
    /* Requests the protocol parked on serve's SERVE_PENDING (a password being verified off
     * the loop) may be asked again (conn_resume with the connection's token). */
    void (*resume)(struct runtime *w, struct conn *c);
    /* --max-conns needs the slot of this idle connection (conn_idle): end it at once, politely
     * (HTTP/2: GOAWAY, then conn_close as soon as it is sent). Optional: conn_close. */
    void (*reclaim)(struct runtime *w, struct conn *c);
    /* The file read it started with conn_file_read ended: res bytes (0: end of file) or
     * -errno. Only a connection without a transport reads so (an attached one, HTTP/3's,
     * whose transport is QUIC's and not conn's); a transport's reads end in its own
     * read_done. Optional: for protocols that read no file. */
    void (*read_done)(struct runtime *w, struct conn *c, int res);
};

/* A protocol for tests of the seam (RINGHTTPD_TEST_PROTO=lines in the environment), selected by
 * the HTTP/2 preface as HTTP/2 would be: one request per line, several served at once. NULL
 * when not asked for. */
const struct proto_ops *proto_test_hook(void);

/* The HTTP/2 preface test that switches a cleartext connection is policy_h2_preface
 * (core/policy.h), applied by conn to a connection's first bytes when w->h2 is set. */

#endif
