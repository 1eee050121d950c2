/* basic: the credentials of an HTTP Basic Authorization value (RFC 7617), decoded: "Basic",
 * spaces, then the base64 of "user:password" (padding optional).
 * Must not: allocate, verify anything (rt/auth.c does, off the loop), or keep the secret.
 * Ownership: a pure function over the caller's bytes and buffer. */
#ifndef CORE_BASIC_H
#define CORE_BASIC_H

#include <stddef.h>

#include "core/http1.h"

/* The decoded "user:password" of value into out, NUL-terminated: its length (not counting the
 * NUL), or 0 when value is not Basic, is malformed base64, has no ':', holds a NUL byte, or
 * does not fit cap - 1 bytes (cap >= 1). out's bytes are the caller's to wipe either way. */
size_t basic_credentials(struct http_str value, char *out, size_t cap);

#endif
