/* h3: HTTP/3 (RFC 9114) over a QUIC connection (quic/quic.h): its framing and stream rules,
 * with h3/qpack for field compression; each request stream's fields become a struct http_request
 * (core/http1.h's split entry, as HTTP/2's), are answered by serve as every other protocol's, and
 * the plan goes out as HEADERS and DATA, file ranges read in bounded chunks as the peer
 * acknowledges them. Must not: touch sockets or timers (quic does), decide HTTP semantics (serve
 * and core do). Ownership: the QUIC endpoint owns each connection's h3 state (through h3_app.free);
 * a stream holds its struct response from the worker's pool until the stream closes. */
#ifndef H3_H3_H
#define H3_H3_H

#include <stdbool.h>
#include <stdint.h>

struct quic_app;
struct worker_h3_ops;

/* The application table for quic_ep_new; its ctx is the struct runtime. */
extern const struct quic_app h3_app;

/* The worker loop's table (w->h3ops, rt/runtime.h), installed with the endpoint:
 * (A connection's parked requests are resumed through its conn slot: conn_resume.)
 * fini: the worker's HTTP/3 state, after quic_ep_free (every connection gone). */
extern const struct worker_h3_ops h3_worker_ops;

/* The Alt-Svc field line that advertises HTTP/3 on port ("Alt-Svc: h3=\":PORT\"; ma=86400\r\n")
 * into buf; its length, 0 when it does not fit. */
unsigned h3_alt_svc(char *buf, unsigned cap, unsigned port);

#endif
