/* h3: HTTP/3 (RFC 9114) over a QUIC connection (quic/quic.h), with nghttp3 for framing and
 * QPACK: each request stream's fields become a struct http_request (core/http1.h's split
 * entry, as HTTP/2's), are answered by serve as every other protocol's, and the plan goes out
 * as HEADERS and DATA, file ranges read in bounded chunks as the peer acknowledges them.
 * Must not: touch sockets or timers (quic does), decide HTTP semantics (serve and core do).
 * Ownership: the QUIC endpoint owns each connection's h3 state (through h3_app.free); a stream
 * holds its struct response from the worker's pool until the stream closes. */
#ifndef H3_H3_H
#define H3_H3_H

#include <stdbool.h>
#include <stdint.h>

struct quic_app;
struct worker;

/* The owner an HTTP/3 request's resume token names (serve's SERVE_PENDING): no connection
 * slot has it, so the worker hands such a token to h3_resume; its gen names the connection. */
#define H3_RESUME_OWNER UINT32_MAX

/* The application table for quic_ep_new; its ctx is the struct worker. */
extern const struct quic_app h3_app;

/* The verification the requests of connection gen waited for has ended: they are asked again
 * at the endpoint's next timer run (the same worker_tick), answered or parked anew. A gen no
 * connection has any more is ignored. */
void h3_resume(struct worker *w, uint32_t gen);

/* Cold file chunks read off the loop since the last call: their streams go on (at the
 * endpoint's next timer run, in the same worker_tick). */
void h3_collect(struct worker *w);

/* The worker's HTTP/3 state, after quic_ep_free (every connection gone). */
void h3_worker_free(struct worker *w);

/* The Alt-Svc field line that advertises HTTP/3 on port ("Alt-Svc: h3=\":PORT\"; ma=86400\r\n")
 * into buf; its length, 0 when it does not fit. */
unsigned h3_alt_svc(char *buf, unsigned cap, unsigned port);

#endif
