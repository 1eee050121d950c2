/* auth: HTTP Basic authentication (RFC 7617) against htpasswd files: bcrypt ($2y$, $2b$, $2a$)
 * and SHA-crypt ($5$, $6$) through libcrypt; plain-text and MD5 ($apr1$) entries are refused
 * when the file is loaded. A verification (tens of milliseconds for bcrypt) never runs on an
 * event loop: it goes to the worker's verifier thread (rt/offload.h, the mechanism compression
 * uses), and the request waits, unparsed, until the result is collected. Successful ones are
 * remembered per worker, keyed by a SHA-256 of the file and the credentials (bounded, dropped
 * with the site on a reload), so an authenticated keep-alive client costs a hash and a lookup.
 * Must not: compare secrets other than in constant time, keep a password, let one client
 * address have more than AUTH_PER_ADDR verifications in flight, or know connections: a waiting
 * request is named by its resume token, handed back when its verification ends.
 * Ownership: struct authstate belongs to its worker; the files (rt/htpasswd.h) to their site. */
#ifndef RT_AUTH_H
#define RT_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"
#include "core/policy.h"

#define AUTH_PER_ADDR 2 /* verifications in flight per client address, per worker */
#define AUTH_CACHE 1024 /* successful verifications a worker remembers */

struct auth_file;
struct authstate;
struct peer;

enum auth_verdict {
    AUTH_GRANTED,
    AUTH_DENIED, /* 401 */
    AUTH_WAIT,   /* being verified off the loop: ask again once auth_collect hands `resume` back */
    AUTH_BUSY,   /* this client address has too many verifications in flight: 429 */
};

/* The verdict on req's Authorization for file f (a NULL: no --basic-auth state, denied). With a
 * resume token, a verdict not known yet is reached off the loop: AUTH_WAIT, and auth_collect
 * hands the token back when it is (peer: the client, for the per-address bound). Without one
 * (the check that answers the request) only what is known counts: a verified pair is granted,
 * anything else denied, or AUTH_BUSY when the last check with a token hit the bound. */
enum auth_verdict auth_check(struct authstate *a, const struct auth_file *f,
                             const struct http_request *req, const struct peer *peer,
                             const struct resume_token *resume);

/* Per worker. */
struct authstate;
struct authstate *auth_state_new(int wake_fd);
void auth_state_free(struct authstate *a);
/* Moves finished verifications into the cache and hands each one's resume token to
 * resume(arg, token) (worker_tick wakes the request's connection with it). */
void auth_collect(struct authstate *a, void (*resume)(void *arg, struct resume_token t), void *arg);
/* Forgets every remembered verification (a reload: the files may have changed). */
void auth_forget(struct authstate *a);

#endif
