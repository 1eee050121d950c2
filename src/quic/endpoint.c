/* A worker's QUIC endpoint: datagrams in, connections found and made, ngtcp2 driven, packets
 * out; see quic.h (handshake.c has its TLS side, quicint.h what they share).
 *
 * Connections are found by the connection ID the client sends to (ours, of the layout
 * quic/cid.h owns, or its own first one while its Initials still carry it) in a chained hash
 * table. Our IDs are made (cid_make) so that the port's reuseport program brings every
 * datagram sent to them to this worker, from whatever address: a client that moved is found
 * here; with a server ID, an L4 balancer in front brings them to this host first.
 * Timers are ngtcp2's per-connection expiry, kept in qc->deadline; the endpoint remembers the
 * earliest, so a loop turn with nothing due costs one comparison. Sends go out as the
 * connection writes them, a batch of equal-size datagrams per sendmsg (GSO). */
#include "quic/quicint.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <stdio.h>
#include <string.h>

#define RETRY_TOKEN_TTL (10 * NGTCP2_SECONDS)
#define RESETS_PER_TICK 64 /* stateless resets sent between two timer runs at most */
#define CLOSE_RESEND_MAX 16
#define WRITE_MAX 64 /* packets one connection writes per turn */
/* Unidirectional streams a client may open beyond HTTP/3's three: streams of types HTTP/3
 * refuses (RFC 9114 6.2.3: reserved types exercise that they are). ngtcp2 0.12 keeps a
 * client's unidirectional stream until the connection ends (1.x closes it at its FIN), so this
 * is an allowance per connection, not a number open at once; the application gives a refused
 * stream's credit back (quic_grant_uni) and bounds how often. */
#define QUIC_EXTRA_UNI 8

_Static_assert(sizeof(struct quic_vec) == sizeof(ngtcp2_vec), "quic_vec is ngtcp2_vec");
_Static_assert(UDP_GSO_MAX *MTU_MAX <= UDP_SEND_MAX, "a batch fits one udp_port_send");

static ngtcp2_tstamp now_ns(const struct quic_ep *ep)
{
    if (ep->set.now)
        return ep->set.now();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (ngtcp2_tstamp)ts.tv_sec * NGTCP2_SECONDS + (ngtcp2_tstamp)ts.tv_nsec;
}

static void rand_bytes(uint8_t *p, size_t n)
{
    if (gnutls_rnd(GNUTLS_RND_NONCE, p, n) != 0)
        memset(p, 0, n); /* never: GnuTLS aborts when its generator fails */
}

static void on_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    rand_bytes(dest, len);
}

/* A new connection ID of ours: random, with the server ID and made to steer to this worker.
 * len is ngtcp2's, the length of the connection's first ID: always the layout's. */
static void make_cid(const struct quic_ep *ep, ngtcp2_cid *cid, size_t len)
{
    rand_bytes(cid->data, len);
    cid->datalen = len;
    if (len == ep->ids.len)
        cid_make(&ep->ids, cid->data, ep->set.worker, ep->set.workers);
}

/* The connection ID table. */
static unsigned cid_hash(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h & (CID_BUCKETS - 1);
}

static struct quic_conn *cid_find(struct quic_ep *ep, const uint8_t *p, size_t n)
{
    for (struct cid_ent *e = ep->buckets[cid_hash(p, n)]; e; e = e->next)
        if (e->cid.datalen == n && memcmp(e->cid.data, p, n) == 0)
            return e->qc;
    return NULL;
}

static int cid_add(struct quic_ep *ep, struct quic_conn *qc, const ngtcp2_cid *cid)
{
    if (qc->ncids == MAX_CIDS)
        return -ENOSPC;
    struct cid_ent *e = malloc(sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->cid = *cid;
    e->qc = qc;
    unsigned b = cid_hash(cid->data, cid->datalen);
    e->next = ep->buckets[b];
    ep->buckets[b] = e;
    qc->cids[qc->ncids++] = *cid;
    return 0;
}

static void cid_del(struct quic_ep *ep, struct quic_conn *qc, const ngtcp2_cid *cid)
{
    for (struct cid_ent **pp = &ep->buckets[cid_hash(cid->data, cid->datalen)]; *pp;
         pp = &(*pp)->next) {
        struct cid_ent *e = *pp;
        if (e->qc == qc && ngtcp2_cid_eq(&e->cid, cid)) {
            *pp = e->next;
            free(e);
            break;
        }
    }
    for (unsigned i = 0; i < qc->ncids; i++)
        if (ngtcp2_cid_eq(&qc->cids[i], cid)) {
            qc->cids[i] = qc->cids[--qc->ncids];
            break;
        }
}

static void set_deadline(struct quic_ep *ep, struct quic_conn *qc, ngtcp2_tstamp t)
{
    qc->deadline = t;
    if (t < ep->next)
        ep->next = t;
}

static void conn_free(struct quic_ep *ep, struct quic_conn *qc)
{
    if (qc->app)
        ep->app->free(qc->app);
    if (qc->counted) /* qc->peer is the handshake's address, the one admit counted */
        ep->app->leave(ep->ctx, (const struct sockaddr *)&qc->peer, qc->peer_len);
    while (qc->ncids)
        cid_del(ep, qc, &qc->cids[qc->ncids - 1]);
    if (qc->conn)
        ngtcp2_conn_del(qc->conn);
    if (qc->tls)
        gnutls_deinit(qc->tls);
    if (qc->certs)
        quic_certs_put(qc->certs);
    free(qc->close_pkt);
    if (qc->prev)
        qc->prev->next = qc->next;
    else
        ep->conns = qc->next;
    if (qc->next)
        qc->next->prev = qc->prev;
    ep->nconns--;
    ep->stats.open = ep->nconns;
    ep->stats.closed++;
    free(qc);
}

/* from: the address the peer sent to (a path's local one; a wildcard port sends from it). */
static void send_to(struct udp_port *port, const ngtcp2_sockaddr *from, const struct sockaddr *to,
                    socklen_t tolen, const uint8_t *buf, size_t len, size_t seg)
{
    (void)udp_port_send_from(port, (const struct sockaddr *)from, to, tolen, buf, len, seg);
}

/* The port a datagram came in on: its answer leaves by that socket, from the address the
 * client sent to (NULL only from a caller that bypassed udp_port_deliver: the first port). */
static struct udp_port *dgram_port(const struct quic_ep *ep, const struct udp_dgram *d)
{
    return d->port ? d->port : ep->ports[0];
}

/* Whether a path's local address is port's: its own, or with a wildcard port one of the host's
 * on the port's number and family (what the datagram's IP_PKTINFO said). */
static bool port_has(const struct udp_port *port, const ngtcp2_addr *local)
{
    if (local->addrlen == port->local_len && memcmp(local->addr, &port->local, local->addrlen) == 0)
        return true;
    return port->pktinfo && local->addrlen == port->local_len &&
           local->addr->sa_family == port->local.ss_family &&
           ((const struct sockaddr_in *)local->addr)->sin_port == /* same offset in v6 */
               ((const struct sockaddr_in *)&port->local)->sin_port;
}

/* The port whose address is a packet's path's local one (ngtcp2 copies what path_to gave it):
 * qc's own, or after a migration to another of our addresses that one's. */
static struct udp_port *path_port(const struct quic_ep *ep, const struct quic_conn *qc,
                                  const ngtcp2_addr *local)
{
    if (port_has(qc->port, local))
        return qc->port;
    for (unsigned i = 0; i < ep->nports; i++)
        if (port_has(ep->ports[i], local))
            return ep->ports[i];
    return qc->port;
}

/* Ends qc with ccerr: CONNECTION_CLOSE out, then the closing period (3 PTO) before the free. */
static void start_close(struct quic_ep *ep, struct quic_conn *qc,
                        const ngtcp2_connection_close_error *ccerr)
{
    if (qc->state != Q_OPEN)
        return;
    ngtcp2_tstamp now = now_ns(ep);
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    uint8_t buf[MTU_MAX];
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(
        qc->conn, &ps.path, &pi, buf, sizeof(buf) < 1452 ? sizeof(buf) : 1452, ccerr, now);
    qc->state = Q_CLOSING;
    set_deadline(ep, qc, now + 3 * ngtcp2_conn_get_pto(qc->conn));
    if (n <= 0)
        return; /* nothing to say (no keys yet): the closing period only */
    qc->close_pkt = malloc((size_t)n);
    if (qc->close_pkt) {
        memcpy(qc->close_pkt, buf, (size_t)n);
        qc->close_len = (size_t)n;
    }
    send_to(path_port(ep, qc, &ps.path.local), ps.path.local.addr,
            (struct sockaddr *)ps.path.remote.addr, ps.path.remote.addrlen, buf, (size_t)n, 0);
}

/* The end of a connection the application has nothing more for (idle in a drain, or given up
 * with quic_close): CONNECTION_CLOSE with H3_NO_ERROR (0x100, RFC 9114 8.1). */
static void close_done(struct quic_ep *ep, struct quic_conn *qc)
{
    ngtcp2_connection_close_error ccerr;
    ngtcp2_connection_close_error_default(&ccerr);
    ngtcp2_connection_close_error_set_application_error(&ccerr, 0x100, NULL, 0);
    start_close(ep, qc, &ccerr);
}

static void close_liberr(struct quic_ep *ep, struct quic_conn *qc, int liberr)
{
    ngtcp2_connection_close_error ccerr;
    ngtcp2_connection_close_error_default(&ccerr);
    if (qc->app_error)
        ngtcp2_connection_close_error_set_application_error(&ccerr, qc->app_error, NULL, 0);
    else if (liberr == NGTCP2_ERR_CRYPTO)
        ngtcp2_connection_close_error_set_transport_error_tls_alert(
            &ccerr, ngtcp2_conn_get_tls_alert(qc->conn), NULL, 0);
    else
        ngtcp2_connection_close_error_set_transport_error_liberr(&ccerr, liberr, NULL, 0);
    start_close(ep, qc, &ccerr);
}

/* The path of a datagram between our port (at local, the address the peer sent to, when the
 * port is a wildcard and said it; else the port's own) and peer. */
static ngtcp2_path path_to(struct udp_port *port, const struct sockaddr *local, socklen_t local_len,
                           const struct sockaddr *peer, socklen_t len)
{
    if (!local) {
        local = (const struct sockaddr *)&port->local;
        local_len = port->local_len;
    }
    return (ngtcp2_path){
        .local = {(ngtcp2_sockaddr *)local, local_len},
        .remote = {(ngtcp2_sockaddr *)peer, len},
    };
}

/* Where conn_write builds a batch: in the engine's own send buffer when the port lends one
 * (io_uring then sends it without a copy), else in the endpoint's. */
static uint8_t *batch_buf(struct quic_ep *ep, struct quic_conn *qc)
{
    uint8_t *b = udp_port_buffer(qc->port); /* the engine's sender is every port's */
    return b ? b : ep->out;
}

/* Sends the batch [buf, end) to where its packets go. */
static void send_batch(struct quic_ep *ep, struct quic_conn *qc, const ngtcp2_path *to,
                       const uint8_t *buf, const uint8_t *end, size_t mtu)
{
    if (end != buf)
        send_to(path_port(ep, qc, &to->local), to->local.addr,
                (const struct sockaddr *)to->remote.addr, to->remote.addrlen, buf,
                (size_t)(end - buf), mtu);
}

/* A burst of qc's packets went out: ngtcp2 spaces the next from it by the pacing rate. Whether
 * it follows in this turn is ngtcp2's to say (the next write returns 0 until it is due); at
 * WRITE_MAX packets a turn ends anyway (the timer or the next ACK brings the rest, and other
 * connections get their turn). */
static bool burst_again(struct quic_conn *qc, ngtcp2_tstamp now, size_t total)
{
    ngtcp2_conn_update_pkt_tx_time(qc->conn, now);
    return total < WRITE_MAX;
}

/* Writes what qc has to send, in GSO batches: equal-size datagrams to one address each (a
 * migration's path validation sends to the old address and the new one in turn). */
static void conn_write(struct quic_ep *ep, struct quic_conn *qc)
{
    if (qc->state != Q_OPEN)
        return;
    ngtcp2_tstamp now = now_ns(ep);
    ngtcp2_path_storage ps, batch_ps; /* the last packet's path; the batch's */
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_path_storage_zero(&batch_ps);
    ngtcp2_pkt_info pi;
    /* Packets are the path's size (1200 until Path MTU Discovery proves more), but the buffer
     * offered is the largest we may send: ngtcp2 writes a PMTUD probe only where it fits, and
     * with the path's size alone it never did, every packet staying at 1200 bytes. */
    size_t mtu = ngtcp2_conn_get_path_max_tx_udp_payload_size(qc->conn);
    size_t cap = ngtcp2_conn_get_max_tx_udp_payload_size(qc->conn);
    if (mtu > MTU_MAX)
        mtu = MTU_MAX;
    if (cap > MTU_MAX)
        cap = MTU_MAX;
    if (cap < mtu)
        cap = mtu;
    /* Pacing (issue 42): packets leave in bursts of at most the controller's send quantum
     * (BBR's is its rate times the minimum RTT, CUBIC's and Reno's 64 KiB; 64 KiB at most,
     * 10 packets at least), a GSO batch never spanning two. After each burst
     * ngtcp2_conn_update_pkt_tx_time sets when the next may go from the pacing rate; ngtcp2
     * writes nothing before that, less its 1 ms allowance for an event loop's timers (ours are
     * whole milliseconds too), and ngtcp2_conn_get_expiry brings us back then. A burst due
     * within that allowance follows in this turn: ending the turn at every quantum made a
     * 64 MiB loopback download slower (1.03 against 1.34 Gbit/s, medians of 3), a turn whose
     * next burst was due in microseconds waiting a whole millisecond. Before, a turn was up to
     * 64 packets with no quantum, ten to a GSO batch, and ngtcp2 spaced only the turns. */
    size_t burst = ngtcp2_conn_get_send_quantum(qc->conn) / mtu;
    if (burst == 0)
        burst = 1;
    uint8_t *buf = batch_buf(ep, qc), *p = buf;
    size_t npkts = 0, total = 0, inburst = 0;
    for (;;) {
        int64_t sid = -1;
        bool fin = false;
        struct quic_vec vec[16];
        int nvec = 0;
        if (qc->app) {
            nvec = ep->app->pull(qc->app, &sid, &fin, vec, 16);
            if (nvec < 0) {
                close_liberr(ep, qc, NGTCP2_ERR_INTERNAL);
                return;
            }
        }
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
        ngtcp2_ssize ndatalen = -1;
        ngtcp2_ssize n =
            ngtcp2_conn_writev_stream(qc->conn, &ps.path, &pi, p, cap, &ndatalen, flags, sid,
                                      (const ngtcp2_vec *)vec, (size_t)nvec, now);
        if (n < 0) {
            if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED || n == NGTCP2_ERR_STREAM_SHUT_WR) {
                ep->app->blocked(qc->app, sid, n == NGTCP2_ERR_STREAM_SHUT_WR);
                continue;
            }
            /* WRITE_MORE leaves a packet open: ngtcp2_conn_read_pkt and handle_expiry assert
             * that none is (NGTCP2_CONN_FLAG_PPE_PENDING), so this loop goes on until a write
             * returns n >= 0 (which closes it) or the connection closes (and reads no more). */
            if (n == NGTCP2_ERR_WRITE_MORE) {
                if (ep->app->wrote(qc->app, sid, (size_t)ndatalen) < 0) {
                    close_liberr(ep, qc, NGTCP2_ERR_INTERNAL);
                    return;
                }
                continue;
            }
            close_liberr(ep, qc, (int)n);
            return;
        }
        if (ndatalen >= 0 && sid >= 0 && ep->app->wrote(qc->app, sid, (size_t)ndatalen) < 0) {
            close_liberr(ep, qc, NGTCP2_ERR_INTERNAL);
            return;
        }
        if (n == 0) {
            send_batch(ep, qc, &batch_ps.path, buf, p, mtu);
            ngtcp2_conn_update_pkt_tx_time(qc->conn, now);
            break;
        }
        if ((size_t)n > mtu) { /* a probe: after what is batched, alone (GSO wants mtu) */
            send_batch(ep, qc, &batch_ps.path, buf, p, mtu);
            send_to(path_port(ep, qc, &ps.path.local), ps.path.local.addr,
                    (const struct sockaddr *)ps.path.remote.addr, ps.path.remote.addrlen, p,
                    (size_t)n, 0);
            p = buf = batch_buf(ep, qc); /* a lent buffer went with the batch */
            npkts = 0;
            total++;
            if (total == WRITE_MAX || ++inburst == burst) {
                if (!burst_again(qc, now, total))
                    break;
                inburst = 0;
            }
            continue;
        }
        if (p == buf) {
            ngtcp2_path_copy(&batch_ps.path, &ps.path);
        } else if (!ngtcp2_path_eq(&batch_ps.path, &ps.path)) {
            /* Another address: what is batched goes first, the new packet opens a batch. */
            send_batch(ep, qc, &batch_ps.path, buf, p, mtu);
            uint8_t *next = batch_buf(ep, qc); /* buf itself, unless it was lent and went */
            memmove(next, p, (size_t)n);
            p = buf = next;
            npkts = 0;
            ngtcp2_path_copy(&batch_ps.path, &ps.path);
        }
        p += n;
        npkts++;
        total++;
        inburst++;
        /* GSO: every datagram but the last of a batch is mtu long; a short one ends it. */
        if ((size_t)n < mtu || npkts == UDP_GSO_MAX || inburst == burst || total == WRITE_MAX) {
            send_batch(ep, qc, &batch_ps.path, buf, p, mtu);
            p = buf = batch_buf(ep, qc);
            npkts = 0;
            if (inburst == burst || total == WRITE_MAX) {
                if (!burst_again(qc, now, total))
                    break;
                inburst = 0;
            }
        }
    }
    ngtcp2_tstamp t = ngtcp2_conn_get_expiry(qc->conn);
    set_deadline(ep, qc, qc->wake_at && qc->wake_at < t ? qc->wake_at : t);
}

static ngtcp2_cc_algo cc_algo(enum quic_cc cc)
{
    switch (cc) {
    case QUIC_CC_RENO:
        return NGTCP2_CC_ALGO_RENO;
    case QUIC_CC_BBR:
        return NGTCP2_CC_ALGO_BBR;
    case QUIC_CC_BBR2:
        return NGTCP2_CC_ALGO_BBR2;
    case QUIC_CC_CUBIC:
        break;
    }
    return NGTCP2_CC_ALGO_CUBIC;
}

const char *quic_cc_name(enum quic_cc cc)
{
    static const char *const names[] = {[QUIC_CC_RENO] = "reno",
                                        [QUIC_CC_CUBIC] = "cubic",
                                        [QUIC_CC_BBR] = "bbr",
                                        [QUIC_CC_BBR2] = "bbr2"};
    return (unsigned)cc < sizeof(names) / sizeof(names[0]) ? names[cc] : "cubic";
}

static int on_handshake_completed(ngtcp2_conn *conn, void *user)
{
    struct quic_conn *qc = user;
    (void)conn;
    gnutls_datum_t alpn;
    if (gnutls_alpn_get_selected_protocol(qc->tls, &alpn) != 0 || alpn.size != 2 ||
        memcmp(alpn.data, "h3", 2) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    qc->app = qc->ep->app->open(qc->ep->ctx, qc);
    if (!qc->app)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    if (qc->ep->draining) {
        qc->drain_told = true;
        qc->ep->app->drain(qc->app);
    }
    return 0;
}

static int on_recv_stream_data(ngtcp2_conn *conn, uint32_t flags, int64_t sid, uint64_t off,
                               const uint8_t *data, size_t len, void *user, void *sud)
{
    struct quic_conn *qc = user;
    (void)conn, (void)off, (void)sud;
    if (!qc->app)
        return NGTCP2_ERR_CALLBACK_FAILURE; /* 0-RTT is off: no stream before the handshake */
    return qc->ep->app->recv(qc->app, sid, data, len, flags & NGTCP2_STREAM_DATA_FLAG_FIN) < 0
               ? NGTCP2_ERR_CALLBACK_FAILURE
               : 0;
}

static int on_acked(ngtcp2_conn *conn, int64_t sid, uint64_t off, uint64_t len, void *user,
                    void *sud)
{
    struct quic_conn *qc = user;
    (void)conn, (void)off, (void)sud;
    if (!qc->app)
        return 0;
    return qc->ep->app->acked(qc->app, sid, len) < 0 ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_stream_close(ngtcp2_conn *conn, uint32_t flags, int64_t sid, uint64_t code,
                           void *user, void *sud)
{
    struct quic_conn *qc = user;
    (void)sud;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
        code = 0;
    /* A closed request stream frees its place: the client may open another. (A client's
     * unidirectional stream is never closed by ngtcp2 0.12, which waits for an acknowledged
     * FIN it will never send: see initial_max_streams_uni.) */
    if (ngtcp2_is_bidi_stream(sid) && !ngtcp2_conn_is_local_stream(conn, sid))
        ngtcp2_conn_extend_max_streams_bidi(conn, 1);
    if (!qc->app)
        return 0;
    return qc->ep->app->closed(qc->app, sid, code) < 0 ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_stream_reset(ngtcp2_conn *conn, int64_t sid, uint64_t final_size, uint64_t code,
                           void *user, void *sud)
{
    struct quic_conn *qc = user;
    (void)conn, (void)final_size, (void)sud;
    if (!qc->app)
        return 0;
    return qc->ep->app->reset(qc->app, sid, code) < 0 ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_stop_sending(ngtcp2_conn *conn, int64_t sid, uint64_t code, void *user, void *sud)
{
    return on_stream_reset(conn, sid, 0, code, user, sud);
}

static int on_more_streams(ngtcp2_conn *conn, uint64_t max, void *user)
{
    struct quic_conn *qc = user;
    (void)conn;
    if (qc->app)
        qc->ep->app->more_streams(qc->app, max);
    return 0;
}

static int on_max_stream_data(ngtcp2_conn *conn, int64_t sid, uint64_t max, void *user, void *sud)
{
    struct quic_conn *qc = user;
    (void)conn, (void)max, (void)sud;
    if (qc->app)
        qc->ep->app->unblocked(qc->app, sid);
    return 0;
}

static int on_new_cid(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t len, void *user)
{
    struct quic_conn *qc = user;
    (void)conn;
    make_cid(qc->ep, cid, len);
    if (ngtcp2_crypto_generate_stateless_reset_token(token, qc->ep->keys.key[0], QUIC_SECRET_LEN,
                                                     cid) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return cid_add(qc->ep, qc, cid) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int on_remove_cid(ngtcp2_conn *conn, const ngtcp2_cid *cid, void *user)
{
    struct quic_conn *qc = user;
    (void)conn;
    cid_del(qc->ep, qc, cid);
    return 0;
}

static const ngtcp2_callbacks callbacks = {
    .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = on_handshake_completed,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = on_recv_stream_data,
    .acked_stream_data_offset = on_acked,
    .stream_close = on_stream_close,
    .rand = on_rand,
    .get_new_connection_id = on_new_cid,
    .remove_connection_id = on_remove_cid,
    .update_key = ngtcp2_crypto_update_key_cb,
    .stream_reset = on_stream_reset,
    .extend_max_remote_streams_bidi = on_more_streams,
    .extend_max_stream_data = on_max_stream_data,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .stream_stop_sending = on_stop_sending,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
};

/* A new connection from a client Initial hd (odcid: the client's first DCID when it came back
 * with our Retry token, the address then proven). */
static struct quic_conn *conn_new(struct quic_ep *ep, const ngtcp2_pkt_hd *hd,
                                  const struct udp_dgram *d, const ngtcp2_cid *odcid)
{
    struct quic_conn *qc = calloc(1, sizeof(*qc));
    if (!qc)
        return NULL;
    qc->ep = ep;
    qc->port = dgram_port(ep, d);
    memcpy(&qc->peer, d->peer, d->peer_len);
    qc->peer_len = d->peer_len;
    qc->deadline = UINT64_MAX;
    qc->next = ep->conns;
    if (ep->conns)
        ep->conns->prev = qc;
    ep->conns = qc;
    ep->nconns++;
    ep->stats.open = ep->nconns;

    ngtcp2_tstamp now = now_ns(ep);
    ngtcp2_cid scid;
    make_cid(ep, &scid, ep->ids.len);
    ngtcp2_settings st;
    ngtcp2_settings_default(&st);
    st.initial_ts = now;
    st.max_window = 6u << 20;
    st.max_stream_window = 6u << 20;
    st.handshake_timeout = 10 * NGTCP2_SECONDS; /* a client that never finishes goes */
    st.cc_algo = cc_algo(ep->set.cc);
    ngtcp2_transport_params tp;
    ngtcp2_transport_params_default(&tp);
    tp.initial_max_stream_data_bidi_local = 256u << 10;
    tp.initial_max_stream_data_bidi_remote = 64u << 10; /* request bodies are dropped anyway */
    tp.initial_max_stream_data_uni = 256u << 10;
    tp.initial_max_data = 1u << 20;
    tp.initial_max_streams_bidi = ep->set.max_streams;
    /* The client's control and QPACK streams, and QUIC_EXTRA_UNI more. */
    tp.initial_max_streams_uni = 3 + QUIC_EXTRA_UNI;
    tp.max_idle_timeout = (ngtcp2_duration)ep->set.idle_timeout_s * NGTCP2_SECONDS;
    tp.active_connection_id_limit = 7;
    tp.stateless_reset_token_present = 1;
    if (odcid) {
        tp.original_dcid = *odcid;
        tp.retry_scid = hd->dcid;
        tp.retry_scid_present = 1;
        st.token = hd->token; /* validated: no amplification limit from here */
    } else {
        tp.original_dcid = hd->dcid;
    }
    ngtcp2_path path =
        path_to(qc->port, d->local, d->local_len, (struct sockaddr *)&qc->peer, qc->peer_len);
    if (ngtcp2_crypto_generate_stateless_reset_token(tp.stateless_reset_token, ep->keys.key[0],
                                                     QUIC_SECRET_LEN, &scid) != 0 ||
        ngtcp2_conn_server_new(&qc->conn, &hd->scid, &scid, &path, hd->version, &callbacks, &st,
                               &tp, NULL, qc) != 0) {
        qc->conn = NULL;
        goto fail;
    }
    if (quic_tls_setup(ep, qc) != 0 || cid_add(ep, qc, &scid) != 0 ||
        cid_add(ep, qc, &hd->dcid) != 0)
        goto fail;
    ep->stats.accepted++;
    return qc;
fail:
    conn_free(ep, qc);
    ep->stats.closed--; /* never opened */
    return NULL;
}

/* Feeds one datagram to qc. */
static void conn_read(struct quic_ep *ep, struct quic_conn *qc, const struct udp_dgram *d)
{
    if (qc->state == Q_DRAINING)
        return;
    if (qc->state == Q_CLOSING) {
        /* RFC 9000 10.2.1: answer with the close again, less and less often. */
        qc->close_recv++;
        if (qc->close_pkt && qc->close_sent < CLOSE_RESEND_MAX &&
            (qc->close_recv & (qc->close_recv - 1)) == 0) {
            qc->close_sent++;
            send_to(dgram_port(ep, d), (const ngtcp2_sockaddr *)d->local, d->peer, d->peer_len,
                    qc->close_pkt, qc->close_len, 0);
        }
        return;
    }
    ngtcp2_path path = path_to(dgram_port(ep, d), d->local, d->local_len, d->peer, d->peer_len);
    ngtcp2_pkt_info pi = {0};
    ngtcp2_tstamp now = now_ns(ep);
    int rv = ngtcp2_conn_read_pkt(qc->conn, &path, &pi, d->data, d->len, now);
    if (rv == 0) {
        /* A client that moved (NAT rebinding, migration) is answered where ngtcp2 says,
         * each packet's path from its write: the new address once validated. The access
         * log keeps the handshake's address (h3 reads it once, as TCP's is read once). */
        qc->dirty = true;
        return;
    }
    if (rv == NGTCP2_ERR_DRAINING) {
        qc->state = Q_DRAINING;
        set_deadline(ep, qc, now + 3 * ngtcp2_conn_get_pto(qc->conn));
        return;
    }
    if (rv == NGTCP2_ERR_DROP_CONN) {
        qc->state = Q_DRAINING;
        set_deadline(ep, qc, now);
        return;
    }
    close_liberr(ep, qc, rv);
}

static void send_vn(struct quic_ep *ep, const ngtcp2_version_cid *vc, const struct udp_dgram *d)
{
    /* Only to a datagram as large as a client's first (1200 bytes): a small forged one must
     * not make us answer at all (RFC 9000 6.1, amplification). */
    if (d->len < 1200)
        return;
    static const uint32_t versions[] = {NGTCP2_PROTO_VER_V1};
    /* An unknown version's IDs may be 255 bytes each (RFC 9000 17.2.1; ngtcp2 bounds them to
     * 20 only for the versions it knows): room for both, so such a client is answered too. */
    uint8_t buf[1 + 4 + 1 + 255 + 1 + 255 + 4 * 1], r;
    rand_bytes(&r, 1);
    ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(
        buf, sizeof(buf), r, vc->scid, vc->scidlen, vc->dcid, vc->dcidlen, versions, 1);
    if (n > 0) {
        ep->stats.vn_sent++;
        send_to(dgram_port(ep, d), (const ngtcp2_sockaddr *)d->local, d->peer, d->peer_len, buf,
                (size_t)n, 0);
    }
}

/* A short-header packet for no connection of ours: a client whose state we lost (a restart,
 * a connection closed) learns it at once (RFC 9000 10.3) rather than by its idle timer. */
static void send_reset(struct quic_ep *ep, const ngtcp2_version_cid *vc, const struct udp_dgram *d)
{
    /* Smaller than what came, so that two endpoints cannot ping-pong resets forever; at least
     * the 21 bytes a reset needs to look like a packet; bounded per timer run. */
    if (d->len < 43 || ep->resets_left == 0 || vc->dcidlen == 0)
        return;
    ep->resets_left--;
    ngtcp2_cid cid;
    ngtcp2_cid_init(&cid, vc->dcid, vc->dcidlen);
    uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN], rnd[64], buf[128];
    size_t randlen = d->len - 1 - NGTCP2_STATELESS_RESET_TOKENLEN - 1;
    if (randlen > sizeof(rnd))
        randlen = sizeof(rnd);
    rand_bytes(rnd, randlen);
    /* The first secret's token: after a rotation, a connection whose ID an older secret's
     * token went with learns of the loss by its idle timer instead (one reset per secret
     * would multiply what a forged packet gets back). */
    if (ngtcp2_crypto_generate_stateless_reset_token(token, ep->keys.key[0], QUIC_SECRET_LEN,
                                                     &cid) != 0)
        return;
    ngtcp2_ssize n = ngtcp2_pkt_write_stateless_reset(buf, sizeof(buf), token, rnd, randlen);
    if (n > 0) {
        ep->stats.resets_sent++;
        send_to(dgram_port(ep, d), (const ngtcp2_sockaddr *)d->local, d->peer, d->peer_len, buf,
                (size_t)n, 0);
    }
}

static void send_retry(struct quic_ep *ep, const ngtcp2_pkt_hd *hd, const struct udp_dgram *d)
{
    ngtcp2_cid scid;
    make_cid(ep, &scid, ep->ids.len); /* the client's next Initial comes back here */
    /* ngtcp2_pkt_write_retry asserts that the new ID is not the client's (scid != odcid) and
     * that the token is not empty (tokenlen > 0): the client chose its ID, so it is compared
     * here rather than trusted to randomness. */
    if (ngtcp2_cid_eq(&scid, &hd->dcid))
        return;
    uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN], buf[MTU_MAX];
    ngtcp2_ssize tlen = ngtcp2_crypto_generate_retry_token(
        token, ep->keys.key[0], QUIC_SECRET_LEN, hd->version, (const ngtcp2_sockaddr *)d->peer,
        d->peer_len, &scid, &hd->dcid, now_ns(ep));
    if (tlen <= 0)
        return;
    ngtcp2_ssize n = ngtcp2_crypto_write_retry(buf, sizeof(buf), hd->version, &hd->scid, &scid,
                                               &hd->dcid, token, (size_t)tlen);
    if (n > 0) {
        ep->stats.retries++;
        send_to(dgram_port(ep, d), (const ngtcp2_sockaddr *)d->local, d->peer, d->peer_len, buf,
                (size_t)n, 0);
    }
}

static void send_refusal(struct quic_ep *ep, const ngtcp2_pkt_hd *hd, const struct udp_dgram *d,
                         uint64_t code)
{
    uint8_t buf[MTU_MAX];
    ngtcp2_ssize n = ngtcp2_crypto_write_connection_close(buf, sizeof(buf), hd->version, &hd->scid,
                                                          &hd->dcid, code, NULL, 0);
    ep->stats.refused++;
    if (n > 0 && (size_t)n <= 3 * d->len)
        send_to(dgram_port(ep, d), (const ngtcp2_sockaddr *)d->local, d->peer, d->peer_len, buf,
                (size_t)n, 0);
}

/* Whether hd's Retry token was made by us or a fleet's sibling with any of the secrets (the
 * first, or one a rotation moved down), for hd's DCID and d's source, within its lifetime:
 * then *odcid is the client's first DCID. An AEAD open per secret tried, for a token only. */
static bool retry_token_ok(struct quic_ep *ep, ngtcp2_cid *odcid, const ngtcp2_pkt_hd *hd,
                           const struct udp_dgram *d)
{
    ngtcp2_tstamp now = now_ns(ep);
    for (unsigned i = 0; i < ep->keys.n; i++)
        if (ngtcp2_crypto_verify_retry_token(odcid, hd->token.base, hd->token.len, ep->keys.key[i],
                                             QUIC_SECRET_LEN, hd->version,
                                             (const ngtcp2_sockaddr *)d->peer, d->peer_len,
                                             &hd->dcid, RETRY_TOKEN_TTL, now) == 0)
            return true;
    return false;
}

/* Whether d's source is an address ngtcp2 can hold: ngtcp2_addr_copy copies addrlen bytes
 * into an ngtcp2_sockaddr_union (28 bytes) unchecked, and the Retry token's AAD and conn_new
 * copy it into a sockaddr_storage. An AF_INET or AF_INET6 socket gets nothing else from the
 * kernel, but io_uring's name buffer is 32 bytes: checked here, whatever an engine hands up. */
static bool peer_ok(const struct udp_dgram *d)
{
    return d->peer &&
           ((d->peer_len == sizeof(struct sockaddr_in) && d->peer->sa_family == AF_INET) ||
            (d->peer_len == sizeof(struct sockaddr_in6) && d->peer->sa_family == AF_INET6));
}

/* Every datagram from the port, whatever its length and content: each ngtcp2 call below is
 * given only what its asserts in 0.12.1 require (an assert there aborts the whole process,
 * every worker with it). tests/fuzz/fuzz_quic.c drives this with datagram sequences. */
static void on_datagram(void *user, const struct udp_dgram *d)
{
    struct quic_ep *ep = user;
    /* ngtcp2 0.12 asserts a datagram's length (ngtcp2_pkt_decode_version_cid: datalen != 0,
     * an abort of the whole process): no QUIC packet is empty, so an empty datagram, which
     * anyone can send from any address, is dropped here before any ngtcp2 call. */
    if (d->len == 0 || !peer_ok(d)) {
        ep->stats.dropped++;
        return;
    }
    ngtcp2_version_cid vc;
    int rv = ngtcp2_pkt_decode_version_cid(&vc, d->data, d->len, ep->ids.len);
    if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
        send_vn(ep, &vc, d);
        return;
    }
    if (rv != 0) {
        ep->stats.dropped++;
        return;
    }
    struct quic_conn *qc = cid_find(ep, vc.dcid, vc.dcidlen);
    if (qc) {
        conn_read(ep, qc, d);
        return;
    }
    if (!(d->data[0] & 0x80)) {
        send_reset(ep, &vc, d);
        return;
    }
    ngtcp2_pkt_hd hd;
    /* ngtcp2_conn_server_new asserts that the client's version is not a reserved one
     * (!ngtcp2_is_reserved_version): ngtcp2_pkt_decode_version_cid sent those to version
     * negotiation above, and the check is repeated so that no reordering here can reach it. */
    if (ngtcp2_accept(&hd, d->data, d->len) != 0 || hd.type != NGTCP2_PKT_INITIAL ||
        !ngtcp2_is_supported_version(hd.version)) {
        ep->stats.dropped++; /* 0-RTT, or not a valid first packet */
        return;
    }
    if (ep->draining || ep->nconns >= ep->set.max_conns) {
        send_refusal(ep, &hd, d, NGTCP2_CONNECTION_REFUSED);
        return;
    }
    ngtcp2_cid odcid;
    const ngtcp2_cid *validated = NULL;
    if (hd.token.len && hd.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
        if (!retry_token_ok(ep, &odcid, &hd, d)) {
            send_refusal(ep, &hd, d, NGTCP2_INVALID_TOKEN);
            return;
        }
        validated = &odcid;
    } else if (hd.dcid.datalen < NGTCP2_MIN_INITIAL_DCIDLEN) {
        /* A token that is not our Retry's counts as none (RFC 9000 8.1.3: we issue no
         * NEW_TOKEN), so the first Initial's rule holds: an ID of 8 bytes or more (7.2).
         * ngtcp2_accept checks it only when there is no token at all; past it, a client could
         * have a connection filed under an empty ID (every other long header with an empty ID
         * would then be read as its), and a Retry for it fails (ngtcp2_pkt_write_retry wants
         * an odcid of 8 bytes). */
        ep->stats.dropped++;
        return;
    } else if (ep->nconns >= ep->set.retry_above) {
        send_retry(ep, &hd, d); /* under load: the client proves its address first */
        return;
    }
    /* A reload's certificates: one load per new connection, nothing per packet. */
    if (atomic_load_explicit(&ep->next_certs, memory_order_relaxed)) {
        quic_certs_put(ep->certs);
        ep->certs = atomic_exchange(&ep->next_certs, NULL);
    }
    /* --limit-conn (the application's): this worker sees every new connection of the client,
     * whose first flight the port's program steers by address as TCP's (steer.h), so the
     * count is exact and shared with the client's TCP connections. */
    bool counted = false;
    int admit = ep->app->admit
                    ? ep->app->admit(ep->ctx, d->peer, d->peer_len, validated != NULL, &counted)
                    : QUIC_ADMIT;
    if (admit == QUIC_PROVE) {
        send_retry(ep, &hd, d);
        return;
    }
    if (admit == QUIC_REFUSE) {
        send_refusal(ep, &hd, d, NGTCP2_CONNECTION_REFUSED);
        return;
    }
    qc = conn_new(ep, &hd, d, validated);
    if (!qc) {
        if (counted)
            ep->app->leave(ep->ctx, d->peer, d->peer_len);
        ep->stats.dropped++;
        return;
    }
    qc->counted = counted;
    conn_read(ep, qc, d);
}

static void on_flush(void *user)
{
    struct quic_ep *ep = user;
    for (struct quic_conn *qc = ep->conns, *next; qc; qc = next) {
        next = qc->next;
        if (qc->dirty) {
            qc->dirty = false;
            conn_write(ep, qc);
        }
    }
}

static const struct udp_upcall upcall = {on_datagram, on_flush};

void quic_ep_tick(struct quic_ep *ep)
{
    ep->resets_left = RESETS_PER_TICK;
    /* A reload's secrets: one relaxed load a tick, nothing per packet. */
    if (atomic_load_explicit(&ep->next_keys, memory_order_relaxed)) {
        struct quic_secrets *k = atomic_exchange(&ep->next_keys, NULL);
        ep->keys = *k;
        explicit_bzero(k, sizeof(*k));
        free(k);
    }
    ngtcp2_tstamp now = now_ns(ep);
    if (now < ep->next)
        return;
    ep->next = UINT64_MAX;
    for (struct quic_conn *qc = ep->conns, *next; qc; qc = next) {
        next = qc->next;
        /* Stopping: a connection that has said its CONNECTION_CLOSE does not hold the exit
         * for its closing period; the client's next packet finds nobody, as after a restart. */
        if (ep->draining && qc->state != Q_OPEN)
            qc->deadline = now;
        if (qc->deadline > now) {
            if (qc->deadline < ep->next)
                ep->next = qc->deadline;
            continue;
        }
        if (qc->state != Q_OPEN) {
            conn_free(ep, qc);
            continue;
        }
        if (qc->wake_at && qc->wake_at <= now) {
            qc->wake_at = 0;
            if (qc->app)
                ep->app->woken(qc->app);
        }
        int rv = ngtcp2_conn_handle_expiry(qc->conn, now);
        if (rv == NGTCP2_ERR_IDLE_CLOSE) {
            conn_free(ep, qc); /* idle: silently (RFC 9000 10.1) */
            continue;
        }
        if (rv != 0) {
            close_liberr(ep, qc, rv);
            continue;
        }
        conn_write(ep, qc);
        if (ep->draining && qc->app && ep->app->idle(qc->app))
            close_done(ep, qc);
    }
}

int quic_ep_wait_ms(const struct quic_ep *ep, int max_ms)
{
    if (ep->next == UINT64_MAX)
        return max_ms;
    ngtcp2_tstamp now = now_ns(ep);
    if (ep->next <= now)
        return 0;
    uint64_t ms = (ep->next - now + NGTCP2_MILLISECONDS - 1) / NGTCP2_MILLISECONDS;
    return ms < (uint64_t)max_ms ? (int)ms : max_ms;
}

void quic_ep_drain(struct quic_ep *ep)
{
    /* What only the endpoint knows: no new connections from now on (one that completes its
     * handshake is told at once, on_handshake_completed; the timer run closes those gone idle),
     * and a handshake without an application (no slot) yet ends now. The worker drains the ones
     * with a slot through conn_drain (the application's slot ops). */
    ep->draining = true;
    for (struct quic_conn *qc = ep->conns, *next; qc; qc = next) {
        next = qc->next;
        if (qc->state != Q_OPEN || qc->app)
            continue;
        close_done(ep, qc);
    }
    ep->next = 0; /* the next tick frees what closed */
}

unsigned quic_ep_conns(const struct quic_ep *ep)
{
    return ep->nconns;
}

const struct quic_stats *quic_ep_stats(const struct quic_ep *ep)
{
    return &ep->stats;
}

int quic_open_uni(struct quic_conn *qc, int64_t *sid)
{
    return ngtcp2_conn_open_uni_stream(qc->conn, sid, NULL) == 0 ? 0 : -EAGAIN;
}

void quic_wake_in(struct quic_conn *qc, unsigned ms)
{
    ngtcp2_tstamp at = now_ns(qc->ep) + (ngtcp2_tstamp)ms * NGTCP2_MILLISECONDS;
    if (qc->wake_at && qc->wake_at <= at) /* a sooner call stands: it must not be lost */
        return;
    qc->wake_at = at;
    if (qc->wake_at < qc->deadline)
        set_deadline(qc->ep, qc, qc->wake_at);
}

void quic_consume(struct quic_conn *qc, int64_t sid, size_t n)
{
    ngtcp2_conn_extend_max_stream_offset(qc->conn, sid, n);
    ngtcp2_conn_extend_max_offset(qc->conn, n);
}

void quic_app_error(struct quic_conn *qc, uint64_t code)
{
    qc->app_error = code;
}

void quic_close(struct quic_conn *qc)
{
    if (qc->state != Q_OPEN)
        return;
    conn_write(qc->ep, qc); /* what the application queued (its GOAWAY) first */
    close_done(qc->ep, qc);
    qc->ep->next = 0; /* the next tick frees it when its closing period ends */
}

void quic_stream_abort(struct quic_conn *qc, int64_t sid, uint64_t code)
{
    ngtcp2_conn_shutdown_stream(qc->conn, sid, code);
}

int64_t quic_now_s(void)
{
    /* The real clock, as an endpoint without a test clock (quic_settings.now) reads it. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec;
}

void quic_grant_uni(struct quic_conn *qc)
{
    ngtcp2_conn_extend_max_streams_uni(qc->conn, 1);
}

uint64_t quic_max_streams(const struct quic_conn *qc)
{
    return qc->ep->set.max_streams;
}

const struct sockaddr *quic_peer(const struct quic_conn *qc, socklen_t *len)
{
    *len = qc->peer_len;
    return (const struct sockaddr *)&qc->peer;
}

int quic_ep_new(struct quic_ep **out, struct udp_port *port, const struct quic_settings *s,
                const struct quic_app *app, void *ctx, char *why, size_t why_len)
{
    struct quic_ep *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return -ENOMEM;
    ep->ports[0] = port;
    ep->nports = 1;
    ep->set = *s;
    ep->app = app;
    ep->ctx = ctx;
    ep->next = UINT64_MAX;
    ep->resets_left = RESETS_PER_TICK;
    if (!s->secrets || s->secrets->n == 0 || s->secrets->n > QUIC_SECRETS_MAX) {
        free(ep);
        snprintf(why, why_len, "HTTP/3: no secret for Retry tokens and resets");
        return -EINVAL;
    }
    ep->keys = *s->secrets;
    ep->set.secrets = NULL; /* the caller's, valid only during this call: ep->keys is the copy */
    if (s->ids)
        ep->ids = *s->ids;
    else
        (void)cid_layout_init(&ep->ids, NULL, 0, 0);
    ep->set.ids = NULL; /* the caller's, valid only during this call: ep->ids is the copy */
    int rc = s->shared ? quic_certs_dup(s->shared, &ep->certs)
                       : quic_certs_new(&ep->certs, s->certs, s->keys, s->sites, why, why_len);
    if (rc != 0 && s->shared)
        snprintf(why, why_len, "HTTP/3: out of memory");
    if (rc != 0)
        goto fail;
    ep->set.certs = ep->set.keys = NULL; /* the caller's arrays, valid only during this call */
    ep->set.sites = NULL;
    ep->set.shared = NULL;
    /* TLS 1.3 only (RFC 9001 4.2); no middlebox compatibility mode (RFC 9001 8.4). */
    rc = gnutls_priority_init2(&ep->prio,
                               "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:"
                               "-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"
                               "+AES-128-CCM",
                               NULL, 0);
    if (rc != 0) {
        ep->prio = NULL;
        snprintf(why, why_len, "HTTP/3: priority: %s", gnutls_strerror(rc));
        goto fail;
    }
    port->up = &upcall;
    port->user = ep;
    *out = ep;
    return 0;
fail:
    quic_ep_free(ep);
    return -EINVAL;
}

int quic_ep_add_port(struct quic_ep *ep, struct udp_port *port)
{
    if (ep->nports == QUIC_PORTS_MAX)
        return -ENOSPC;
    port->up = &upcall;
    port->user = ep;
    ep->ports[ep->nports++] = port;
    return 0;
}

void quic_ep_free(struct quic_ep *ep)
{
    if (!ep)
        return;
    while (ep->conns)
        conn_free(ep, ep->conns);
    if (ep->prio)
        gnutls_priority_deinit(ep->prio);
    if (ep->certs)
        quic_certs_put(ep->certs);
    quic_certs_put(atomic_exchange(&ep->next_certs, NULL));
    free(atomic_exchange(&ep->next_keys, NULL));
    explicit_bzero(&ep->keys, sizeof(ep->keys));
    free(ep);
}

int quic_ep_set_secrets(struct quic_ep *ep, const struct quic_secrets *s)
{
    if (s->n == 0 || s->n > QUIC_SECRETS_MAX)
        return -EINVAL;
    struct quic_secrets *k = malloc(sizeof(*k));
    if (!k)
        return -ENOMEM;
    *k = *s;
    /* Never adopted: nothing else refers to the one replaced. */
    struct quic_secrets *old = atomic_exchange(&ep->next_keys, k);
    if (old) {
        explicit_bzero(old, sizeof(*old));
        free(old);
    }
    return 0;
}
