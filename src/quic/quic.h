/* quic: a worker's QUIC endpoint on its UDP ports (engine/udp.h; one per TLS listener): connections
 * by connection ID, the handshake (ngtcp2 with GnuTLS, the same certificate files as the TLS port,
 * chosen by SNI), Retry under load, stateless resets, version negotiation, timers, limits, drain.
 * Must not: know HTTP; stream bytes go to and come from the application's table (struct
 * quic_app, installed by h3), which is the only way up. No socket call but through udp_port.
 * Ownership: one endpoint per worker, used by its thread alone (but for quic_ep_publish, any
 * thread's); the endpoint owns its connections and each connection its application state
 * (freed through app->free). A certificate set is the endpoint's and every connection's made
 * with it, counted on the worker's thread. */
#ifndef QUIC_QUIC_H
#define QUIC_QUIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct udp_port;
struct quic_ep;
struct quic_conn;
struct quic_certs;
struct cid_layout;

/* One bytes range; layout-compatible with ngtcp2_vec (checked in quic.c). */
struct quic_vec {
    uint8_t *base;
    size_t len;
};

enum { QUIC_ADMIT, QUIC_REFUSE, QUIC_PROVE };

/* The application over QUIC (HTTP/3), called on the worker's thread. Negative returns are
 * fatal for the connection (closed with an internal error, or with the application's error
 * code given by quic_app_error first). */
struct quic_app {
    /* A new connection from peer (its first Initial's source address; proven: by our Retry
     * token) is about to open: QUIC_ADMIT, QUIC_REFUSE (CONNECTION_REFUSED: --limit-conn) or
     * QUIC_PROVE (a Retry first: an application that counts clients counts only addresses
     * proven to be theirs, so a spoofed Initial cannot take a victim's slot); *counted says
     * that the application counted it, and then leave(ctx, the same peer) runs when it ends.
     * NULL: every connection may open. */
    int (*admit)(void *ctx, const struct sockaddr *peer, socklen_t len, bool proven, bool *counted);
    void (*leave)(void *ctx, const struct sockaddr *peer, socklen_t len);
    /* The handshake finished: the application's state for qc, or NULL to close it. */
    void *(*open)(void *ctx, struct quic_conn *qc);
    /* Stream bytes in order (fin: the peer's last); consumed or not, flow control is the
     * application's to give back with quic_consume. */
    int (*recv)(void *a, int64_t sid, const uint8_t *data, size_t len, bool fin);
    /* Up to cnt ranges of the next stream with bytes to send: their count, *sid (-1: none),
     * *fin (the stream's last bytes). */
    int (*pull)(void *a, int64_t *sid, bool *fin, struct quic_vec *v, size_t cnt);
    /* n bytes of what pull gave for sid went into packets. */
    int (*wrote)(void *a, int64_t sid, size_t n);
    /* sid cannot take more now (flow control, or its write side shut). */
    void (*blocked)(void *a, int64_t sid, bool shut);
    /* The peer may take more on sid again. */
    void (*unblocked)(void *a, int64_t sid);
    /* The peer acknowledged n more bytes of sid. */
    int (*acked)(void *a, int64_t sid, uint64_t n);
    /* sid is closed (code: the application error, 0 for none); reset: the peer reset it or
     * asked us to stop sending. */
    int (*closed)(void *a, int64_t sid, uint64_t code);
    int (*reset)(void *a, int64_t sid, uint64_t code);
    /* The peer may open n more request streams (the limit grew). */
    void (*more_streams)(void *a, uint64_t max);
    /* The worker drains: announce the end (HTTP/3 GOAWAY), finish what is open. */
    void (*drain)(void *a);
    /* The time asked for with quic_wake_in has come. */
    void (*woken)(void *a);
    /* Whether the application has nothing in flight (a drain may close the connection). */
    bool (*idle)(void *a);
    void (*free)(void *a);
};

/* Retry-token and stateless-reset secrets (--quic-secret-file, issue 38): the first makes
 * Retry tokens and reset tokens; every one is tried on a token that comes back, so a fleet
 * rotates by putting a new secret first and keeping the old one second for a while. */
#define QUIC_SECRET_LEN 32
#define QUIC_SECRETS_MAX 4
struct quic_secrets {
    unsigned n; /* 1..QUIC_SECRETS_MAX */
    uint8_t key[QUIC_SECRETS_MAX][QUIC_SECRET_LEN];
};

/* The congestion controllers of ngtcp2 0.12 (issue 42); zero, as settings left unset, is
 * CUBIC (ngtcp2's default and ours). */
enum quic_cc { QUIC_CC_CUBIC, QUIC_CC_RENO, QUIC_CC_BBR, QUIC_CC_BBR2 };

/* Whose a certificate pair is (issue 37): the names of the site whose own pair it is (a site's
 * tls-cert/tls-key), which SNI matches before any certificate's own names, as the TLS port's
 * (tls/tls_ctx.h's struct tls_cert_files); NULL/0 for a process-level pair. */
struct quic_pair_site {
    const char *const *hosts;
    int num_hosts;
};

struct quic_settings {
    unsigned max_conns;       /* per worker; a new connection beyond is refused */
    unsigned max_streams;     /* concurrent request streams per connection */
    unsigned idle_timeout_s;  /* a connection silent this long goes */
    unsigned retry_above;     /* connections at which new clients must prove their address */
    const char *const *certs; /* certificate files, NULL-terminated, the first the default */
    const char *const *keys;  /* their keys */
    const struct quic_pair_site *sites; /* each pair's site, or NULL: every pair process-level */
    /* or certificates another endpoint read (quic_certs_dup'd for this one; NULL: read certs) */
    const struct quic_certs *shared;
    const struct quic_secrets *secrets; /* shared by every worker (and a fleet's instances) */
    unsigned worker, workers;     /* our IDs steer to socket `worker` of `workers` (steer.h) */
    const struct cid_layout *ids; /* our IDs' layout (quic/cid.h), NULL: no server ID */
    bool gso;
    enum quic_cc cc; /* every connection's controller; ngtcp2 paces them all */
    /* The clock (ns, monotonic), NULL for CLOCK_MONOTONIC: tests/fuzz/fuzz_quic.c moves its
     * own, so that timers run and a crash replays; the server leaves it NULL. */
    uint64_t (*now)(void);
};

/* cc's name as --quic-cc spells it ("bbr"). */
const char *quic_cc_name(enum quic_cc cc);

/* Counters a metrics scrape reads (plain integers: the worker writes, the scrape tolerates a
 * torn read as it does for every other counter). */
struct quic_stats {
    uint64_t accepted, refused, retries, resets_sent, vn_sent, closed, dropped;
    uint64_t open; /* connections now */
};

/* Makes the endpoint on port (whose upcall it installs) for app with ctx. 0 or -errno, with
 * a reason in why. */
int quic_ep_new(struct quic_ep **out, struct udp_port *port, const struct quic_settings *s,
                const struct quic_app *app, void *ctx, char *why, size_t why_len);
/* Another port of the worker's (another TLS listener's socket, issue 38), its upcall installed:
 * a connection is answered by the port its first datagram came in on, every datagram of the
 * endpoint's by the port it came in on. Before the worker runs; 0 or -ENOSPC. */
#define QUIC_PORTS_MAX 16
int quic_ep_add_port(struct quic_ep *ep, struct udp_port *port);
void quic_ep_free(struct quic_ep *ep);

/* A set of certificate pairs (files, NULL-terminated, the first the default; sites: each
 * one's site, NULL: none is a site's) read now, for one endpoint: 0, or -errno with the file
 * at fault in why. */
int quic_certs_new(struct quic_certs **out, const char *const *certs, const char *const *keys,
                   const struct quic_pair_site *sites, char *why, size_t why_len);
/* Another endpoint's set over the same credentials, read once (any thread; c stays the
 * caller's): 0 or -ENOMEM. Each set is counted by its own endpoint's thread only. */
int quic_certs_dup(const struct quic_certs *c, struct quic_certs **out);
/* Drops the caller's reference (NULL: nothing). */
void quic_certs_put(struct quic_certs *c);
/* The set ep gives new handshakes, for quic_certs_dup before ep's thread runs (at start). */
const struct quic_certs *quic_ep_certs(const struct quic_ep *ep);
/* A reload (any thread; c: the caller's reference, now the endpoint's): new connections get
 * c's certificates from the next one on; each connection keeps those its handshake had. */
void quic_ep_publish(struct quic_ep *ep, struct quic_certs *c);

/* A reload's secrets (any thread; copied): the endpoint adopts them at its next timer run, for
 * every token and ID it makes from then on; tokens and IDs made before keep what they were
 * made with (a Retry token made with a secret dropped here is refused). 0 or -ENOMEM. */
int quic_ep_set_secrets(struct quic_ep *ep, const struct quic_secrets *s);

/* Timers: runs every connection whose deadline passed (now: CLOCK_MONOTONIC ns), sends;
 * adopts secrets quic_ep_set_secrets gave. */
void quic_ep_tick(struct quic_ep *ep);
/* Milliseconds until the next deadline (at most max_ms). */
int quic_ep_wait_ms(const struct quic_ep *ep, int max_ms);
/* The worker drains: no new connections (one finishing its handshake is told app->drain), and
 * handshakes without an application close now; the worker drains the others (their slots). */
void quic_ep_drain(struct quic_ep *ep);
/* Connections still open (a drain waits for them, as for TCP connections). */
unsigned quic_ep_conns(const struct quic_ep *ep);
const struct quic_stats *quic_ep_stats(const struct quic_ep *ep);

/* For the application. */
int quic_open_uni(struct quic_conn *qc, int64_t *sid);
/* The application error code (RFC 9000 20.2; HTTP/3's, RFC 9114 8.1) the connection's
 * CONNECTION_CLOSE carries when the application's callback now returns a fatal error. */
void quic_app_error(struct quic_conn *qc, uint64_t code);
/* Ends qc now, as a drain ends an idle connection: what the application queued (a GOAWAY) is
 * written, then CONNECTION_CLOSE with H3_NO_ERROR; app->free follows after the closing
 * period. Not from inside one of qc's app callbacks. */
void quic_close(struct quic_conn *qc);
/* Calls app->woken in ms milliseconds (or sooner, with the connection's other timers, or as a
 * sooner call still pending asked). */
void quic_wake_in(struct quic_conn *qc, unsigned ms);
/* Gives n bytes of flow control back (stream sid and the connection). */
void quic_consume(struct quic_conn *qc, int64_t sid, size_t n);
/* Ends stream sid both ways with code (a refused or failed request). */
void quic_stream_abort(struct quic_conn *qc, int64_t sid, uint64_t code);
/* The clock quic_wake_in runs on, in seconds (a loop turn's cached time can be older: the
 * worker reads it only for timers that are due). */
int64_t quic_now_s(void);
/* Lets the client open one more unidirectional stream (HTTP/3 gives back the credit of each it
 * refused, as ngtcp2 0.12 never closes a client's unidirectional stream). */
void quic_grant_uni(struct quic_conn *qc);
/* The request streams the client may open at first (initial_max_streams_bidi). */
uint64_t quic_max_streams(const struct quic_conn *qc);
/* The handshake's address (the one app->admit was asked about and app->leave is told), for
 * the application's one copy of the peer (core/peer.h's struct peer, made from it once). */
const struct sockaddr *quic_peer(const struct quic_conn *qc, socklen_t *len);
/* The SNI the client sent, or "" */
const char *quic_sni(const struct quic_conn *qc);
/* Whether the process has one certificate (name set) only, and whether the certificate qc's
 * handshake presented names host[0..len) (a lower-case name without its port): the 421
 * rule's questions (conn/cert.c's cert_quic; the rule is site_misdirected's). */
bool quic_cert_only(const struct quic_conn *qc);
bool quic_cert_names(const struct quic_conn *qc, const char *host, size_t len);
/* And the rule's third (issue 37): the site qc's certificate was picked for, as the TLS
 * port's tls_conn_site_name answers (the SNI when it named a site's own pair, else the first
 * name of the site whose pair it is), or NULL for a process-level pair. */
const char *quic_cert_site_name(const struct quic_conn *qc);

#endif
