/* ktls: the two socket options that hand a connection's send side to kernel TLS (the kernel's
 * Documentation/networking/tls.rst): the "tls" upper-layer protocol, attached while the socket
 * is established and before anything depends on it, then the send keys. Synchronous and shared
 * by both engines (no io_uring operation sets socket options on 6.1).
 * Must not: know TLS beyond these options (the keys arrive as the kernel's struct, made by
 * tls/tls.c), or be called with a send in flight on the socket (conn_wire_ktls's rule).
 * Ownership: the caller's socket; nothing is kept. */
#ifndef ENGINE_KTLS_H
#define ENGINE_KTLS_H

#include <stddef.h>

/* Attaches the "tls" ULP: the socket still sends as before until keys are set. 0 or -errno
 * (-ENOENT: no tls module; -ENOTCONN: the socket is no longer established, e.g. the peer has
 * closed its side; -EEXIST: attached already). */
int ktls_attach(int fd);

/* Installs the send keys (struct tls12_crypto_info_*, len bytes, record sequence number
 * included): every byte sent from now on goes out in records the kernel seals. 0 or -errno. */
int ktls_send_keys(int fd, const void *keys, size_t len);

#endif
