/* auth: HTTP Basic authentication (RFC 7617) against htpasswd files: bcrypt ($2y$, $2b$, $2a$)
 * and SHA-crypt ($5$, $6$) through libcrypt; plain-text and MD5 ($apr1$) entries are refused
 * when the file is loaded. A verification (tens of milliseconds for bcrypt) never runs on an
 * event loop: it goes to the worker's verifier thread (rt/offload.h, the mechanism compression
 * uses), and the request waits, unparsed, until the result is collected. Successful ones are
 * remembered per worker, keyed by a SHA-256 of the file and the credentials (bounded, dropped
 * with the site on a reload), so an authenticated keep-alive client costs a hash and a lookup.
 * Must not: compare secrets other than in constant time, keep a password, or let one client
 * address have more than AUTH_PER_ADDR verifications in flight.
 * Ownership: struct authstate belongs to its worker; the files (rt/htpasswd.h) to their site. */
#ifndef RT_AUTH_H
#define RT_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"

#define AUTH_PER_ADDR 2 /* verifications in flight per client address, per worker */
#define AUTH_CACHE 1024 /* successful verifications a worker remembers */

struct auth_file;
struct worker;
struct conn;

enum auth_verdict {
    AUTH_GRANTED,
    AUTH_DENIED, /* 401 */
    AUTH_WAIT,   /* being verified off the loop: answer later (conn_resume) */
    AUTH_BUSY,   /* this client address has too many verifications in flight: 429 */
};

/* The verdict on req's Authorization for file f; AUTH_WAIT queues the verification for c. */
enum auth_verdict auth_check(struct worker *w, struct conn *c, const struct auth_file *f,
                             const struct http_request *req);

struct obs_conn;
/* The same for a request on no struct conn (HTTP/3), from the client whose address peer
 * holds: AUTH_WAIT queues the verification (once per credentials) and resumes nobody; the
 * caller asks again later, and the answer comes from the cache once it is done. */
enum auth_verdict auth_check_peer(struct worker *w, const struct obs_conn *peer,
                                  const struct auth_file *f, const struct http_request *req);

/* Per worker. */
struct authstate;
struct authstate *auth_state_new(int wake_fd);
void auth_state_free(struct authstate *a);
/* Moves finished verifications into the cache and resumes their connections (worker_tick). */
void auth_collect(struct worker *w);
/* Forgets every remembered verification (a reload: the files may have changed). */
void auth_forget(struct authstate *a);

#endif
