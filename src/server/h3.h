/* h3 (server side): what of HTTP/3 spans the workers: the Retry/reset secrets, the
 * connection-ID layout, the certificate files every worker's endpoint is made with (and the
 * first one's credentials the others share), the certificates a reload publishes to them, and
 * the program that routes datagrams to workers by connection ID. Must not: run QUIC or HTTP/3
 * (src/quic, src/http/h3 do), or make a worker's UDP sockets and endpoint (worker_new does,
 * from h3_prepare's worker_h3); a build with HTTP3=no has stubs. Ownership: the main thread;
 * each endpoint is its worker's. */
#ifndef SERVER_H3_H
#define SERVER_H3_H

#include <stddef.h>

#include "quic/quic.h"
#include "rt/runtime.h"
#include "server/worker.h"

struct config;
struct server;
struct worker;

/* HTTP/3's part of every worker, as h3_prepare makes it for worker_parts.h3. */
struct h3_parts {
    struct worker_h3 h3;
    struct worker_udp udp[LISTEN_MAX]; /* h3.udp: each h3_plan group's address */
    struct quic_settings quic;         /* h3.quic: .shared is the first worker's once made */
    const char **certs;                /* the settings' files, one allocation (h3_files) */
};

/* The secrets from --quic-secret-file's files (SHA-256 of each), or 32 random bytes without
 * one. 0, or -1 with the file at fault in why. */
int h3_secrets_read(const struct config *cfg, struct quic_secrets *out, char *why, size_t why_len);

/* Numbers the groups that get a UDP socket on every worker (each TLS IP group: HTTP/3 on every
 * TLS listener, issue 38; lgroup.udp, -1 for the others): how many. Before h3_prepare. */
int h3_plan(struct server *sv);

/* Before the first worker is made, when h3_plan found groups: lays out sv->cids, finds for
 * each group whether its UDP port is ours alone (before any of ours binds) and fills *p with
 * what every worker's HTTP/3 is made from (one UDP socket per h3_plan group, the endpoint's
 * settings with secrets, which must outlive the workers' making). *h3 is &p->h3, or NULL in a
 * build without HTTP/3. 0, or -errno after saying why on stderr; h3_parts_free either way. */
int h3_prepare(struct server *sv, const struct quic_secrets *secrets, struct h3_parts *p,
               const struct worker_h3 **h3);

/* After worker wk was made from p: the first's credentials are kept for the next reload and
 * shared with the workers after it; the last attaches each port's routing program. */
void h3_made(struct server *sv, struct h3_parts *p, struct worker *wk);

/* What h3_prepare allocated (a zeroed p: nothing). */
void h3_parts_free(struct h3_parts *p);

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
