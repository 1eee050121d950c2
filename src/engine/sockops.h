/* sockops: the engine operations both engines implement the same way, on the connection's
 * socket: its peer's address (engine_ops.peer), kernel TLS's keys (engine_ops.ktls), and the
 * close of a held socket given up (engine_ops.drop).
 * Must not: be called but through the engine table (conn asks w->eng).
 * Ownership: none; each call works on the connection's fd alone. */
#ifndef ENGINE_SOCKOPS_H
#define ENGINE_SOCKOPS_H

#include <stdbool.h>
#include <stddef.h>

struct runtime;
struct engine_conn;
struct peer;

/* getpeername on c's socket into *out: false, *out unknown, when it fails (engine_ops.peer). */
bool sockops_peer(struct runtime *w, struct engine_conn *c, struct peer *out);

/* Kernel TLS on c's socket (engine/ktls.h): keys NULL attaches the ULP, else installs the send
 * keys. 0 or -errno. */
int sockops_ktls(struct runtime *w, struct engine_conn *c, const void *keys, size_t len);

/* close(fd): a socket accepted and given up before it became a connection. */
void sockops_drop(struct runtime *w, int fd);

#endif
