/* redirect: the Location of --redirect-https: the https: URL of a request that arrived on the
 * cleartext port (same host and target, the port replaced by the TLS port unless it is 443).
 * Must not: perform I/O or allocate; it builds a string from the request and the TLS port.
 * Ownership: the caller's buffer. */
#ifndef CORE_REDIRECT_H
#define CORE_REDIRECT_H

#include <stddef.h>
#include <stdint.h>

/* Writes "https://HOST[:TLS_PORT]TARGET" into out: host is the request's Host field (a name,
 * an IPv4 address or a bracketed IPv6 literal, with an optional port, which is dropped), target
 * its request-target as received: origin-form (path and query), or absolute-form ("http://" or
 * "https://" + authority + path and query), whose authority then stands for the Host field
 * (RFC 9112 3.2.2) and whose empty path is "/". Returns the length, or 0 when the host is
 * missing or not a valid host, the target is neither form, or out is too small: the caller
 * answers 400 then (the redirect never serves in clear text). */
size_t redirect_https_location(const char *host, size_t host_len, const char *target,
                               size_t target_len, uint16_t tls_port, char *out, size_t cap);

#endif
