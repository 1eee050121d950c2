/* peer: a connection's client address as every layer reads it: its family, its binary form
 * (the key --real-ip-from's CIDRs and auth's per-address bound compare) and its text (what the
 * access log prints), made from a socket address in one place.
 * Must not: look the address up (no system call: the engine does, once per connection).
 * Ownership: a struct peer lives in its connection (conn.h), set once by the engine and read
 * through conn_peer; everything else gets a const pointer. */
#ifndef CORE_PEER_H
#define CORE_PEER_H

#include <stdbool.h>
#include <stdint.h>

#define PEER_TEXT_MAX 48 /* INET6_ADDRSTRLEN, rounded up (as LOGFMT_ADDR_MAX) */

struct sockaddr;

struct peer {
    bool known;    /* the address below is the connection's (else text is "-") */
    int8_t family; /* AF_INET or AF_INET6; 0 when unknown */
    uint8_t addr[16];
    char text[PEER_TEXT_MAX];
};

/* Sets p from the socket address sa (len bytes, as getpeername gave it), or to unknown when sa
 * is NULL or neither IPv4 nor IPv6 (a Unix socket's client: unknown, its text "unix:" as
 * nginx logs it). An IPv4-mapped IPv6 address (a dual-stack socket's IPv4
 * client) is set as the IPv4 address it carries. */
void peer_set(struct peer *p, const struct sockaddr *sa, unsigned len);

#endif
