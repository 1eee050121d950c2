/* quicint: what the QUIC endpoint (endpoint.c) and its handshake side (handshake.c) share: a
 * connection, the endpoint, their limits. Private to src/quic/.
 * Must not: be included outside src/quic/ (quic.h is the interface).
 * Owns nothing: endpoint.c makes and frees both structs, handshake.c reads them. */
#ifndef RINGHTTPD_QUIC_QUICINT_H
#define RINGHTTPD_QUIC_QUICINT_H

#include "quic/quic.h"

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <stdatomic.h>

#include "engine/udp.h"
#include "quic/cid.h"

#define MAX_CIDS 10      /* ours (active_connection_id_limit 8) and the client's first */
#define CID_BUCKETS 4096 /* power of two */
#define MTU_MAX 1500

enum qstate { Q_OPEN, Q_CLOSING, Q_DRAINING };

struct cid_ent {
    ngtcp2_cid cid;
    struct quic_conn *qc;
    struct cid_ent *next;
};

struct quic_conn {
    struct quic_ep *ep;
    /* The socket its first Initial came in on (issue 38: one per TLS listener): where its
     * packets leave, unless a migration's path names another port's address (path_port). */
    struct udp_port *port;
    ngtcp2_conn *conn;
    gnutls_session_t tls;
    struct quic_certs *certs; /* what its handshake was given: a reload does not change it */
    ngtcp2_crypto_conn_ref ref;
    struct sockaddr_storage peer;
    socklen_t peer_len;
    ngtcp2_cid cids[MAX_CIDS];
    unsigned ncids;
    void *app;
    ngtcp2_tstamp deadline;
    ngtcp2_tstamp wake_at; /* quic_wake_in's, or 0 */
    enum qstate state;
    bool dirty; /* read something this batch: write at the flush */
    bool drain_told;
    bool counted;       /* app->admit counted it: app->leave at its end */
    uint8_t *close_pkt; /* our CONNECTION_CLOSE, sent again when the peer keeps sending */
    size_t close_len;
    unsigned close_recv, close_sent;
    char sni[256];
    unsigned cred;      /* the set of certs its handshake was given (0: the default) */
    bool by_site;       /* SNI named a site whose own pair it was given (issue 37) */
    uint64_t app_error; /* quic_app_error's code for the close, or 0 (none: HTTP/3 has no 0) */
    struct quic_conn *prev, *next;
};

struct quic_ep {
    struct udp_port *ports[QUIC_PORTS_MAX]; /* the worker's UDP sockets, each a TLS listener's */
    unsigned nports;
    struct quic_settings set;
    struct cid_layout ids;                  /* of every ID we issue */
    struct quic_secrets keys;               /* the first makes tokens, all check them */
    struct quic_secrets *_Atomic next_keys; /* a reload's, adopted at the next tick */
    const struct quic_app *app;
    void *ctx;
    struct quic_certs *certs;              /* for new handshakes */
    struct quic_certs *_Atomic next_certs; /* a reload's, adopted at the next new connection */
    gnutls_priority_t prio;
    struct cid_ent *buckets[CID_BUCKETS];
    struct quic_conn *conns; /* every connection, newest first */
    unsigned nconns;
    unsigned resets_left;
    bool draining;
    ngtcp2_tstamp next; /* the earliest deadline, or UINT64_MAX */
    struct quic_stats stats;
    uint8_t out[UDP_GSO_MAX * MTU_MAX];
};

/* handshake.c: a new connection's GnuTLS session (ALPN h3, the SNI remembered, the
 * certificate picked by name from ep's current set, which qc holds a reference to): 0 or
 * -errno (qc->tls may be set: conn_free deinits it). */
int quic_tls_setup(struct quic_ep *ep, struct quic_conn *qc);

#endif
