/* tls: TLS 1.2 and 1.3 on OpenSSL 3, sans I/O. Ciphertext the engine received is fed in and
 * plaintext read out for the protocol; plaintext to send is sealed into records written straight
 * into the caller's send buffer; bytes TLS sends on its own (handshake flights, tickets, alerts,
 * close_notify) wait in a queue the caller drains. Also the "plain HTTP sent to the TLS port"
 * detector. This header is the whole interface: it includes tls_ctx.h (the per-worker context:
 * certificates chosen by SNI, Mozilla "intermediate" defaults or TLS 1.3 only, ALPN, session
 * tickets whose keys every worker derives alike) and tls_record.h (records, the sealer, kernel
 * TLS); tls.c keeps the connection's handshake, reading and what waits to be sent.
 * Must not: touch a socket or any fd after tls_ctx_new (OpenSSL sees only this module's BIO),
 * block, or read the clock for tickets (the worker passes its time); no logging on the request
 * path (start-up problems come back as text for the caller to print). With kernel TLS it hands
 * over keys and plaintext records; installing them on the socket is the caller's (the engine's).
 * Ownership: one struct tls_keys per process (the ticket secret: read-only once made, shared by
 * every worker); one struct tls_ctx per worker, touched by that worker's thread only once handed
 * over, counted by its connections so a reload can replace it while they live on; a struct
 * tls_conn per connection, embedded by its owner, which must not move while in use. */
#ifndef TLS_TLS_H
#define TLS_TLS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tls/tls_ctx.h"
#include "tls/tls_record.h"

/* Return values beside byte counts and -errno. */
#define TLS_AGAIN (-EAGAIN)          /* needs more ciphertext (send what is pending first) */
#define TLS_PLAIN_HTTP (-EPROTOTYPE) /* the first bytes are plain HTTP: core/rules.h */
/* The ClientHello waits for a certificate on demand (tls_ondemand): call tls_conn_handshake
 * again later (nothing was fed or sent); tls_conn_give_up first once the wait is over. */
#define TLS_WAIT (-EINPROGRESS)

enum tls_alpn { TLS_ALPN_NONE, TLS_ALPN_HTTP1, TLS_ALPN_H2 };

/* Frees what c holds (sends nothing: queue close_notify first for a clean close). */
void tls_conn_fini(struct tls_conn *c);

/* Hands received ciphertext to c (copied): 0 or -ENOMEM. */
int tls_conn_feed(struct tls_conn *c, const void *data, size_t len);

/* The same, but the bytes may be read where they lie (lent): the caller's buffer must stay as
 * it is until tls_conn_settle, which copies what is still unread (0 or -ENOMEM). Call it on
 * every path before that buffer is reused. */
int tls_conn_lend(struct tls_conn *c, const void *data, size_t len);
int tls_conn_settle(struct tls_conn *c);

/* Ciphertext fed and not yet decrypted (bound it: stop receiving while it is large). */
size_t tls_conn_buffered(const struct tls_conn *c);

/* Drives the handshake with what was fed: 1 once established, TLS_AGAIN, TLS_PLAIN_HTTP when the
 * first byte is an HTTP method's letter instead of a TLS record, TLS_WAIT, or -EPROTO (a bad hello,
 * a version or cipher we refuse, garbage; an alert may be pending). Either way, send what
 * tls_conn_pending holds. */
int tls_conn_handshake(struct tls_conn *c);

/* A handshake that returned TLS_WAIT: its next tls_conn_handshake ends the wait, with the
 * certificate if it is there by then, else with the unrecognized_name alert. */
void tls_conn_give_up(struct tls_conn *c);

/* Plaintext into buf (cap > 0), driving the handshake first when needed: bytes > 0, 0 when the
 * peer sent close_notify, TLS_AGAIN, TLS_PLAIN_HTTP, -EPROTO or -ENOMEM. */
ssize_t tls_conn_read(struct tls_conn *c, void *buf, size_t cap);

/* Ciphertext waiting to be sent outside a seal, and where: the pointer is valid until the next
 * call on c. tls_conn_consume(c, n) drops n of them once sent. */
size_t tls_conn_pending(const struct tls_conn *c);
const void *tls_conn_peek(const struct tls_conn *c, size_t *len);
void tls_conn_consume(struct tls_conn *c, size_t n);

/* Queues close_notify (once, and only after a completed handshake): send pending, then close. */
void tls_conn_close_notify(struct tls_conn *c);

/* Whether c has anything to do outside a seal: tls_conn_pending bytes, keys to install,
 * records for the kernel, or TLS_KTLS_BROKEN's close. */
bool tls_conn_owes(const struct tls_conn *c);

/* Frees c's empty buffers: called when the connection goes idle, so an idle keep-alive
 * connection holds no record buffers (OpenSSL's own are released as they empty). */
void tls_conn_trim(struct tls_conn *c);

bool tls_conn_established(const struct tls_conn *c);
bool tls_conn_resumed(const struct tls_conn *c);
enum tls_alpn tls_conn_alpn(const struct tls_conn *c);
const char *tls_conn_sni(const struct tls_conn *c);     /* the client's server name, or NULL */
const char *tls_conn_version(const struct tls_conn *c); /* "TLSv1.3"... */
const char *tls_conn_cipher(const struct tls_conn *c);

#endif
