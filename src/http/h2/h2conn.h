/* h2conn: HTTP/2 as the second protocol in the protocol slot (proto.h): a connection's h2
 * session (h2.h) fed by conn's input, its requests answered by serve in the field-line syntax
 * (one response per stream), its output sent through conn_send one plan at a time.
 * Must not: decide file semantics (serve and the core do, as for HTTP/1) or touch the socket.
 * Ownership: the per-connection state hangs off conn.pstate from open to release; each stream's
 * response comes from serve_response_get and goes back when the session says it is done. */
#ifndef H2_H2CONN_H
#define H2_H2CONN_H

#include "conn/proto.h"

/* The HTTP/2 protocol operations: the worker's w->h2 when --http2 is on. */
extern const struct proto_ops proto_h2;

#endif
