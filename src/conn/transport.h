/* transport: the layer between engine and protocol (DESIGN.md): wire bytes from the engine go
 * up as the protocol's bytes; the protocol's plans go down as wire plans for the engine.
 * Cleartext is no transport at all (conn.xport == NULL): bytes pass straight through and a
 * plan's file segments reach the engine as they are, zero-copy. A transport that must encrypt
 * (TLS) implements these operations; it never touches the socket.
 * Must not: make system calls on the connection's socket (the engine does), or know HTTP; a
 * transport may read a plan's file segments into its own buffer (that is not the socket),
 * through the engine (conn_file_read) so that a cold file does not stall the loop.
 * Ownership: a transport's per-connection state hangs off conn.xstate, made by open and freed
 * by release (after the engine's last completion). A wire plan it gives conn_wire_send points
 * into that state and stays valid until its sent operation is called. The protocol's plan
 * passed to send stays valid, and untouched by anyone else, until the transport reports it
 * with conn_plan_sent (the transport advances its cursor as it consumes it). */
#ifndef TRANSPORT_H
#define TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct runtime;
struct conn;
struct plan;

/*
 * A secure connection's certificate, as the 421 rule (RFC 9110 15.5.20: site_misdirected in
 * site/site.h, the rule's one copy) asks about it, whatever carries the connection (issue 37):
 * TLS over TCP (cert_tls, over struct tls_conn) and QUIC (cert_quic, over struct quic_conn)
 * each answer the same questions about the certificate their handshake presented.
 */
struct cert_ops {
    /* The SNI the client sent, or "". */
    const char *(*sni)(const void *t);
    /* The site the certificate was picked for (the SNI when it named a site's own pair, else
     * the first name of the site whose pair it is), or NULL for a process-level pair. NULL
     * itself when every certificate of the transport is process-level. */
    const char *(*site_name)(const void *t);
    /* Whether the process has one certificate (name set) only: no other to be had. */
    bool (*only)(const void *t);
    /* Whether the certificate names host[0..len) (a vhost_key: lower case, no port, not an
     * address: the rule answers those itself). */
    bool (*names)(const void *t, const char *host, size_t len);
};

extern const struct cert_ops cert_tls, cert_quic;

/* One per secure connection, in its transport's state (TLS: conn/tls_xport.c's; QUIC: the
 * HTTP/3 session's), reached through conn_cert (conn.h) or the session. The verdict fields
 * are the rule's (site/route.c) alone: the last request's site found not misdirected, with the
 * sites' generation, and the last host found named. */
struct conn_cert {
    const struct cert_ops *ops;
    const void *t; /* the transport's connection the ops are asked about */
    const void *ok_site;
    unsigned ok_gen;
    uint8_t ok_host_len; /* 0: none */
    char ok_host[47];
};

/*
 * Every call runs on the worker's thread. The transport talks back through conn.h:
 *   conn_input(w, c, data, n)  plaintext for the protocol (n == 0: the peer's orderly end, e.g.
 *                              close_notify or EOF; n < 0: -errno, the connection is dead)
 *   conn_wire_send(w, c, p)    have the engine send wire plan p; at most one at a time; its end
 *                              comes back through .sent (bytes of its own: handshake, alerts,
 *                              close_notify, or records made from the protocol's plan)
 *   conn_plan_sent(w, c, err)  the protocol's plan given to .send is done (0) or failed
 *   conn_wire_shutdown(w, c)   the engine shuts the socket's write side
 *   conn_file_read(w, c, ...)  the engine reads file bytes into the transport's buffer, off the
 *                              loop; the end comes back through .read_done
 *   conn_close(w, c)           give up on the connection (bad records, handshake failure)
 */
struct transport_ops {
    const char *name;
    bool secure; /* it encrypts: requests over it are https (HSTS, redirect schemes) */
    /* A connection was accepted on a listener of this transport (ctx: the listener's
     * transport context, e.g. the TLS certificates). 0, or -errno to close it at once. */
    int (*open)(struct runtime *w, struct conn *c, void *ctx);
    /* Wire bytes arrived (n > 0, valid only during the call), the peer closed (0), or the
     * socket failed (n < 0). Decrypts what it can and passes it on with conn_input, in order;
     * may answer with bytes of its own (conn_wire_send). */
    void (*received)(struct runtime *w, struct conn *c, const char *data, ssize_t n);
    /* The protocol's plan p is to be sent. The transport turns it into wire plans a chunk at a
     * time (memory copied and encrypted; file segments read into its buffer with conn_file_read,
     * then encrypted), sending the next chunk when the engine reports the last one sent: a plan's
     * size never sets the transport's memory. conn_plan_sent once p is all on the wire. */
    void (*send)(struct runtime *w, struct conn *c, struct plan *p);
    /* The wire plan last given to conn_wire_send is sent (0) or failed (-errno). */
    void (*sent)(struct runtime *w, struct conn *c, int err);
    /* The protocol has sent its last byte: end the stream (TLS: close_notify), then
     * conn_wire_shutdown. Receiving goes on (a lingering close reads and drops). */
    void (*shutdown)(struct runtime *w, struct conn *c);
    /* The connection is closed and no operation is in flight: free xstate. */
    void (*release)(struct runtime *w, struct conn *c);
    /* The read started with conn_file_read ended: res bytes, 0 at the end of the file, or
     * -errno. Optional (a transport that never calls conn_file_read). */
    void (*read_done)(struct runtime *w, struct conn *c, int res);
    /* The connection's certificate once its handshake is done, else NULL (conn_cert).
     * Optional (a transport that presents none). */
    struct conn_cert *(*cert)(struct conn *c);
};

/*
 * A transport for tests of the seam (selected by RINGHTTPD_TEST_TRANSPORT=copy in the
 * environment): it behaves as TLS does about memory and sequencing (received bytes are copied
 * into its own buffer before the protocol sees them; a plan leaves as wire plans of at most
 * COPY_CHUNK bytes copied from memory or pread from files, one at a time) but sends the same
 * bytes, so every HTTP test can run through it. Not for production: it only costs copies.
 */
extern const struct transport_ops transport_copy;

/* The transport named by RINGHTTPD_TEST_TRANSPORT, or NULL (cleartext). */
const struct transport_ops *transport_test_hook(void);

#endif
