/* h3 (server side): HTTP/3's endpoints as the server sets them up: the Retry/reset secrets,
 * each worker's UDP socket on every TLS listener's port and its one QUIC endpoint on them, the
 * certificates a reload publishes to them, and the program that routes datagrams to workers by
 * connection ID. Must not: run QUIC or HTTP/3 (src/quic, src/http/h3 do); a build with HTTP3=no has
 * stubs. Ownership: the main thread; each endpoint is its worker's once made. */
#ifndef SERVER_H3_H
#define SERVER_H3_H

#include <stddef.h>

struct config;
struct quic_secrets;
struct server;
struct worker;

/* The secrets from --quic-secret-file's files (SHA-256 of each), or 32 random bytes without
 * one. 0, or -1 with the file at fault in why. */
int h3_secrets_read(const struct config *cfg, struct quic_secrets *out, char *why, size_t why_len);

/* Numbers the groups that get a UDP socket on every worker (each TLS IP group: HTTP/3 on every
 * TLS listener, issue 38; lgroup.udp, -1 for the others): how many. Before h3_start. */
int h3_plan(struct server *sv);

/* Worker wk's UDP sockets (one per h3_plan group) and its QUIC endpoint on them, each TLS
 * listener's Alt-Svc line (the last worker's also attaches each port's routing program): 0,
 * or -errno after saying why on stderr. */
int h3_start(struct server *sv, struct worker *wk, const struct quic_secrets *secrets);

/* A reload's (or ACME's) certificates of pairs for every worker's endpoint. */
void h3_publish(struct server *sv, const struct config *pairs, const char *what);

/* SIGHUP: --quic-secret-file's files read again for every endpoint. */
void h3_secrets_reload(struct server *sv, const char *what);

/* Once a second: the routing program put on once the UDP port is ours alone. */
void h3_route(struct server *sv);

/* After the workers are joined, before they are freed: the routing program taken off. */
void h3_unroute(struct server *sv);

/* At the end: the credentials kept for the next reload released. */
void h3_forget(struct server *sv);

#endif
