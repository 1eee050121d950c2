/* fuzz_quic: libFuzzer target for src/quic's receive path (issue 35.1): a sequence of datagrams
 * from a few client addresses handed to the real entry point, udp_port_deliver on a real UDP
 * port whose upcall quic_ep_new installed, with a real ngtcp2 + GnuTLS server endpoint and a
 * certificate pair made at start (openssl, into a temporary directory removed at exit). Beside
 * the raw datagrams, a real ngtcp2 + GnuTLS client completes its handshake with the endpoint
 * and sends stream bytes from the input on request streams (which the application answers),
 * moves to another address (NAT rebinding) and has bytes of its datagrams flipped, so what
 * follows a handshake is reached too. The endpoint's clock is this target's: it moves with the
 * input, and quic_ep_tick runs timers (handshake and idle timeouts, loss recovery, closing
 * periods, the resets' allowance) between records. Sends are captured by the port's sender
 * table (the one io_uring installs), so nothing leaves the process. Checked: no datagram ends
 * the process (ASan, UBSan, ngtcp2's asserts), every send fits one udp_port_send, goes to an
 * address that sent, and to an address no finished handshake has used at most three times what
 * came from it (RFC 9000 8.1), and the application is never told more was written than it gave.
 * Randomness in the server (its connection IDs, TLS) is GnuTLS's, so a replay may differ in the
 * IDs and keys the server chooses; a client's Initials, the raw datagrams and the client's
 * choices replay exactly. FUZZ_QUIC_TRACE=1 prints how far the client got.
 * Input: [config][record]... config: & 3 retry_above {0, 1, 2, 1000}, >> 2 & 3 max_conns
 * {1, 2, 4, 64}, & 0x10 two workers (steering IDs), & 0x20 a 15-byte server ID (--quic-server-id:
 * 20-byte IDs, the steering bytes after it). Record: [op] [a if op & 0x10]
 * [s: 2 bytes if op & 4] [length: 2 bytes] [bytes]. op & 0x10: the clock moves a*a ms and the
 * timers run first; & 0x20: the endpoint drains first (once); the clock moves 1 ms a record.
 * A raw record (op & 0x40 clear): bytes are one datagram from address op & 3, or with op & 4 a
 * GRO train of s-byte datagrams; & 8 no flush after it. A client record (op & 0x40): the client
 * is made at address op & 3 (or moved there), sends bytes on a new request stream (op & 0x80:
 * then its FIN), with op & 4 byte s % length of each of its datagrams flipped, and exchanges
 * datagrams with the endpoint until both are quiet (bounded). tests/fuzz/quic_seeds.py writes
 * the seeds.
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; the endpoint and client are made and freed per input, the
 * port, the client's credentials and the certificate files once per process. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "engine/udp.h"
#include "quic/cid.h"
#include "quic/quic.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_quic: %s:%d: %s\n", __FILE__, __LINE__, #cond);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define PEERS 4
#define QUEUE 256 /* the server's datagrams kept for the client between two of its reads */
#define STREAMS 8 /* request streams the application answers at once */

/* A real ngtcp2 + GnuTLS client at one of the addresses: its handshake completes against the
 * endpoint, and stream bytes from the input go out in its packets. */
struct client {
    ngtcp2_conn *conn;
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    int home; /* the address it knows as its own */
    int peer; /* the one its datagrams come from: another after a NAT rebinding */
    bool dead;
    unsigned cids;
    const uint8_t *data; /* stream bytes still to send on sid, fin after them */
    size_t len;
    int64_t sid;
    bool fin;
};

static struct fixture {
    char dir[64], cert[96], key[96];
    struct udp_port port;
    struct sockaddr_in peers[PEERS];
    uint64_t in[PEERS], out[PEERS]; /* bytes from and to each address, this input */
    bool validated[PEERS];          /* a client's handshake completed from there */
    uint64_t now;                   /* the endpoint's clock, ns */
    struct {
        uint8_t b[1500];
        size_t len;
        int peer;
    } q[QUEUE];
    unsigned qn;
    struct client cl;
    struct quic_ep *ep; /* this input's */
    gnutls_certificate_credentials_t ccred;
    gnutls_priority_t cprio;
} fx;

static uint64_t fake_now(void)
{
    return fx.now;
}

/* ---- the port's sender: captures, checks, sends nothing ---- */
static int capture(void *ctx, struct udp_port *p, const struct sockaddr *from,
                   const struct sockaddr *to, socklen_t tolen, const uint8_t *buf, size_t len,
                   size_t seg, bool gso)
{
    (void)ctx, (void)gso, (void)from;
    REQUIRE(p == &fx.port); /* an answer leaves by the port its question came in on */
    REQUIRE(buf && len > 0 && len <= UDP_SEND_MAX && seg <= len);
    REQUIRE(tolen == sizeof(struct sockaddr_in) && to->sa_family == AF_INET);
    const struct sockaddr_in *sin = (const struct sockaddr_in *)to;
    int i = 0;
    while (i < PEERS && memcmp(&fx.peers[i], sin, sizeof(*sin)) != 0)
        i++;
    REQUIRE(i < PEERS); /* only ever to an address that sent */
    fx.out[i] += len;
    for (size_t off = 0; off < len && fx.qn < QUEUE; off += seg ? seg : len) {
        size_t n = seg && len - off > seg ? seg : len - off;
        REQUIRE(n <= sizeof(fx.q[0].b));
        memcpy(fx.q[fx.qn].b, buf + off, n);
        fx.q[fx.qn].len = n;
        fx.q[fx.qn++].peer = i;
    }
    if (!fx.validated[i] && fx.out[i] > 3 * fx.in[i]) {
        fprintf(stderr, "fuzz_quic: %zu bytes to peer %d: %llu sent for %llu received\n", len, i,
                (unsigned long long)fx.out[i], (unsigned long long)fx.in[i]);
        abort();
    }
    return 0;
}

static const struct udp_sender sender = {capture};

/* ---- the application: answers each request stream that ends with bytes of its own ---- */
struct app {
    struct quic_conn *qc;
    struct {
        int64_t sid; /* -1: a free slot */
        size_t got, left;
        bool blocked;
    } st[STREAMS];
};

static const uint8_t body[16384];

static int slot(struct app *a, int64_t sid, bool make)
{
    for (int i = 0; i < STREAMS; i++)
        if (a->st[i].sid == sid)
            return i;
    for (int i = 0; make && i < STREAMS; i++)
        if (a->st[i].sid < 0) {
            a->st[i].sid = sid;
            a->st[i].got = a->st[i].left = 0;
            a->st[i].blocked = false;
            return i;
        }
    return -1;
}

static void *app_open(void *ctx, struct quic_conn *qc)
{
    (void)ctx;
    struct app *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->qc = qc;
    for (int i = 0; i < STREAMS; i++)
        a->st[i].sid = -1;
    return a;
}
static int app_recv(void *p, int64_t sid, const uint8_t *data, size_t len, bool fin)
{
    struct app *a = p;
    (void)data;
    quic_consume(a->qc, sid, len);
    int i = (sid & 3) == 0 ? slot(a, sid, true) : -1; /* a client's request stream */
    if (i >= 0) {
        a->st[i].got += len;
        if (fin) /* four times what came and a little: up to ~1 MB */
            a->st[i].left = (a->st[i].got < 250000 ? a->st[i].got : 250000) * 4 + 100;
    }
    return 0;
}
static int app_pull(void *p, int64_t *sid, bool *fin, struct quic_vec *v, size_t cnt)
{
    struct app *a = p;
    *sid = -1;
    *fin = false;
    for (int i = 0; i < STREAMS; i++) {
        if (a->st[i].sid < 0 || !a->st[i].left || a->st[i].blocked)
            continue;
        size_t n = 0, left = a->st[i].left;
        while (n < cnt && left) {
            v[n].base = (uint8_t *)body;
            v[n].len = left < sizeof(body) ? left : sizeof(body);
            left -= v[n++].len;
        }
        *sid = a->st[i].sid;
        *fin = left == 0;
        return (int)n;
    }
    return 0;
}
static int app_wrote(void *p, int64_t sid, size_t n)
{
    struct app *a = p;
    int i = slot(a, sid, false);
    REQUIRE(i >= 0 && n <= a->st[i].left);
    a->st[i].left -= n;
    return 0;
}
static void app_blocked(void *p, int64_t sid, bool shut)
{
    struct app *a = p;
    int i = slot(a, sid, false);
    if (i >= 0) {
        a->st[i].blocked = true;
        if (shut)
            a->st[i].left = 0;
    }
}
static void app_unblocked(void *p, int64_t sid)
{
    struct app *a = p;
    int i = slot(a, sid, false);
    if (i >= 0)
        a->st[i].blocked = false;
}
static int app_acked(void *p, int64_t sid, uint64_t n)
{
    (void)p, (void)sid, (void)n;
    return 0;
}
static int app_closed(void *p, int64_t sid, uint64_t code)
{
    struct app *a = p;
    (void)code;
    int i = slot(a, sid, false);
    if (i >= 0)
        a->st[i].sid = -1;
    return 0;
}
static int app_reset(void *p, int64_t sid, uint64_t code)
{
    struct app *a = p;
    (void)code;
    int i = slot(a, sid, false);
    if (i >= 0)
        a->st[i].left = 0;
    return 0;
}
static void app_more(void *p, uint64_t max)
{
    (void)p, (void)max;
}
static void app_none(void *p)
{
    (void)p;
}
static bool app_idle(void *p)
{
    (void)p;
    return true;
}

static const struct quic_app app = {
    .open = app_open,
    .recv = app_recv,
    .pull = app_pull,
    .wrote = app_wrote,
    .blocked = app_blocked,
    .unblocked = app_unblocked,
    .acked = app_acked,
    .closed = app_closed,
    .reset = app_reset,
    .more_streams = app_more,
    .drain = app_none,
    .woken = app_none,
    .idle = app_idle,
    .free = free,
};

/* ---- the client ---- */
static ngtcp2_conn *client_conn(ngtcp2_crypto_conn_ref *ref)
{
    return ((struct client *)ref->user_data)->conn;
}

static void client_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    for (size_t i = 0; i < len; i++)
        dest[i] = (uint8_t)(i * 31 + 7);
}

static int client_new_cid(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t len,
                          void *user)
{
    struct client *c = user;
    (void)conn;
    memset(cid->data, 0, len);
    cid->data[0] = 0xc1;
    cid->data[1] = (uint8_t)++c->cids;
    cid->datalen = len;
    memset(token, c->cids, NGTCP2_STATELESS_RESET_TOKENLEN);
    return 0;
}

static int client_recv(ngtcp2_conn *conn, uint32_t flags, int64_t sid, uint64_t off,
                       const uint8_t *data, size_t len, void *user, void *sud)
{
    (void)flags, (void)off, (void)data, (void)user, (void)sud;
    ngtcp2_conn_extend_max_stream_offset(conn, sid, len);
    ngtcp2_conn_extend_max_offset(conn, len);
    return 0;
}

static const ngtcp2_callbacks client_callbacks = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_retry = ngtcp2_crypto_recv_retry_cb,
    .recv_stream_data = client_recv,
    .rand = client_rand,
    .get_new_connection_id = client_new_cid,
    .update_key = ngtcp2_crypto_update_key_cb,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
};

static ngtcp2_path client_path(struct client *c)
{
    return (ngtcp2_path){
        .local = {(ngtcp2_sockaddr *)&fx.peers[c->home], sizeof(fx.peers[c->home])},
        .remote = {(ngtcp2_sockaddr *)&fx.port.local, fx.port.local_len},
    };
}

static void client_free(struct client *c)
{
    if (c->conn)
        ngtcp2_conn_del(c->conn);
    if (c->tls)
        gnutls_deinit(c->tls);
    *c = (struct client){0};
}

/* A client at peer p (its first IDs from n): made, or false. */
static bool client_make(struct client *c, int p, uint8_t n)
{
    static const gnutls_datum_t alpn = {(unsigned char *)"h3", 2};
    *c = (struct client){.home = p, .peer = p, .sid = -1};
    ngtcp2_cid dcid = {.datalen = 8 + (n & 7)}, scid = {.datalen = n & 8 ? 0 : 8};
    memset(dcid.data, n, dcid.datalen);
    memset(scid.data, 0xcc, scid.datalen);
    ngtcp2_settings st;
    ngtcp2_settings_default(&st);
    st.initial_ts = fx.now;
    ngtcp2_transport_params tp;
    ngtcp2_transport_params_default(&tp);
    tp.initial_max_stream_data_bidi_local = tp.initial_max_stream_data_bidi_remote =
        tp.initial_max_stream_data_uni = 1u << 20;
    tp.initial_max_data = 4u << 20;
    tp.initial_max_streams_bidi = tp.initial_max_streams_uni = 16;
    tp.max_idle_timeout = 60 * NGTCP2_SECONDS;
    ngtcp2_path path = client_path(c);
    if (ngtcp2_conn_client_new(&c->conn, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1,
                               &client_callbacks, &st, &tp, NULL, c) != 0) {
        c->conn = NULL;
        return false;
    }
    if (gnutls_init(&c->tls, GNUTLS_CLIENT) != 0) {
        c->tls = NULL;
        client_free(c);
        return false;
    }
    c->ref = (ngtcp2_crypto_conn_ref){client_conn, c};
    gnutls_session_set_ptr(c->tls, &c->ref);
    if (gnutls_priority_set(c->tls, fx.cprio) != 0 ||
        ngtcp2_crypto_gnutls_configure_client_session(c->tls) != 0 ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, fx.ccred) != 0 ||
        gnutls_alpn_set_protocols(c->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) != 0 ||
        gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, "localhost", 9) != 0) {
        client_free(c);
        return false;
    }
    ngtcp2_conn_set_tls_native_handle(c->conn, c->tls);
    return true;
}

/* The client's packets to the endpoint (with its pending stream bytes), then the endpoint's
 * answers to the client, until neither has more (a bounded number of rounds). corrupt: one
 * byte of each client datagram is flipped at that offset (0: none). */
static void client_run(struct client *c, size_t corrupt)
{
    uint64_t step = 1000000; /* a fast link's round trip */
    for (int round = 0; round < 24 && !c->dead; round++) {
        bool moved = false;
        /* Time moves, and both sides' timers run as a server loop runs them: the endpoint's
         * (pacing holds its packets until then) and the client's (loss recovery). */
        fx.now += step;
        fx.qn = 0; /* what the endpoint sends from here (a Retry at once, the rest at the flush) */
        quic_ep_tick(fx.ep);
        if (ngtcp2_conn_get_expiry(c->conn) <= fx.now &&
            ngtcp2_conn_handle_expiry(c->conn, fx.now) != 0) {
            c->dead = true;
            break;
        }
        for (int k = 0; k < 32; k++) {
            uint8_t buf[1500];
            ngtcp2_path_storage ps;
            ngtcp2_path_storage_zero(&ps);
            ngtcp2_pkt_info pi;
            ngtcp2_ssize wlen = -1;
            ngtcp2_vec v = {(uint8_t *)c->data, c->len};
            uint32_t flags = c->fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0;
            ngtcp2_ssize n =
                ngtcp2_conn_writev_stream(c->conn, &ps.path, &pi, buf, 1200, &wlen, flags, c->sid,
                                          &v, c->sid >= 0 ? 1 : 0, fx.now);
            if (n < 0 && (n == NGTCP2_ERR_STREAM_DATA_BLOCKED || n == NGTCP2_ERR_STREAM_SHUT_WR ||
                          n == NGTCP2_ERR_STREAM_NOT_FOUND)) {
                c->sid = -1; /* the rest of this stream's bytes are not sent */
                continue;
            }
            if (n < 0) {
                c->dead = true;
                break;
            }
            if (wlen >= 0 && c->sid >= 0) {
                c->data += wlen;
                c->len -= (size_t)wlen;
                if (c->len == 0)
                    c->sid = -1;
            }
            if (n == 0)
                break;
            if (corrupt)
                buf[corrupt % (size_t)n] ^= 0x5a;
            fx.in[c->peer] += (size_t)n;
            struct udp_dgram d = {buf,
                                  (size_t)n,
                                  (const struct sockaddr *)&fx.peers[c->peer],
                                  sizeof(fx.peers[c->peer]),
                                  NULL,
                                  NULL,
                                  0};
            udp_port_deliver(&fx.port, &d, 0);
            moved = true;
        }
        udp_port_flush(&fx.port);
        ngtcp2_path path = client_path(c);
        unsigned qn = fx.qn;
        for (unsigned i = 0; i < qn && !c->dead; i++) {
            if (fx.q[i].peer != c->peer)
                continue;
            ngtcp2_pkt_info pi = {0};
            int rv = ngtcp2_conn_read_pkt(c->conn, &path, &pi, fx.q[i].b, fx.q[i].len, fx.now);
            if (rv != 0)
                c->dead = true; /* the endpoint closed it, or ended it with a reset */
            moved = true;
        }
        fx.qn = 0;
        if (ngtcp2_conn_get_handshake_completed(c->conn))
            fx.validated[c->peer] = true;
        step = 1000000;
        if (!moved) {
            /* Quiet: on to the earlier of the two sides' next timers, within 100 ms. */
            uint64_t server = (uint64_t)quic_ep_wait_ms(fx.ep, 100) * 1000000;
            uint64_t client = ngtcp2_conn_get_expiry(c->conn) - fx.now;
            step = server < client ? server : client;
            if (step >= 100 * 1000000ull)
                break;
            if (step < 1000000)
                step = 1000000;
        }
    }
    if (getenv("FUZZ_QUIC_TRACE")) /* for a replay: how far the client got */
        fprintf(
            stderr, "fuzz_quic: client at %d (home %d): handshake %s%s, %llu bytes in, %llu out\n",
            c->peer, c->home, ngtcp2_conn_get_handshake_completed(c->conn) ? "done" : "not done",
            c->dead ? ", closed" : "", (unsigned long long)fx.in[c->peer],
            (unsigned long long)fx.out[c->peer]);
}

static void cleanup(void)
{
    unlink(fx.cert);
    unlink(fx.key);
    rmdir(fx.dir);
    udp_port_fini(&fx.port);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(fx.dir, sizeof(fx.dir), "/tmp/fuzz_quic.XXXXXX");
    REQUIRE(mkdtemp(fx.dir));
    snprintf(fx.cert, sizeof(fx.cert), "%s/cert.pem", fx.dir);
    snprintf(fx.key, sizeof(fx.key), "%s/key.pem", fx.dir);
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 "
             "-subj /CN=localhost -addext subjectAltName=DNS:localhost -keyout %s -out %s "
             ">/dev/null 2>&1",
             fx.key, fx.cert);
    REQUIRE(system(cmd) == 0);
    struct sockaddr_in local = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = udp_socket_open((const struct sockaddr *)&local, sizeof(local), true);
    REQUIRE(fd >= 0);
    REQUIRE(udp_port_init(&fx.port, fd, false, false, NULL, NULL) == 0);
    fx.port.sender = &sender;
    static const char *const addrs[PEERS] = {"127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.3"};
    static const uint16_t ports[PEERS] = {40000, 40001, 40000, 50000};
    for (int i = 0; i < PEERS; i++) {
        fx.peers[i] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(ports[i])};
        inet_pton(AF_INET, addrs[i], &fx.peers[i].sin_addr);
    }
    REQUIRE(gnutls_certificate_allocate_credentials(&fx.ccred) == 0);
    REQUIRE(gnutls_priority_init2(&fx.cprio,
                                  "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3", NULL,
                                  0) == 0);
    atexit(cleanup);
    return 0;
}

/* A client record: the client made at (op & 3), or moved there (a NAT rebinding: it does not
 * know), bytes [b, b + len) sent on a new request stream (op & 0x80: with its FIN), a byte of
 * its datagrams flipped at corrupt (nonzero), then the exchange. */
static void client_op(uint8_t op, const uint8_t *b, size_t len, size_t corrupt)
{
    struct client *c = &fx.cl;
    int p = op & 3;
    if (!c->conn && !c->dead && !client_make(c, p, (uint8_t)len))
        c->dead = true;
    if (!c->conn || c->dead)
        return;
    c->peer = p;
    int64_t sid;
    if (len && c->sid < 0 && ngtcp2_conn_get_handshake_completed(c->conn) &&
        ngtcp2_conn_open_bidi_stream(c->conn, &sid, NULL) == 0) {
        c->sid = sid;
        c->data = b;
        c->len = len;
        c->fin = op & 0x80;
    }
    client_run(c, corrupt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const unsigned retry_above[] = {0, 1, 2, 1000}, max_conns[] = {1, 2, 4, 64};
    static const struct quic_secrets secrets = {.n = 2, .key = {{1, 2, 3}, {4, 5, 6}}};
    const char *const certs[] = {fx.cert, NULL}, *const keys[] = {fx.key, NULL};
    static const uint8_t sid[CID_SID_MAX] = {0x11, 0x22, 0x33, 0x44, 0x55};
    struct cid_layout ids;
    REQUIRE(cid_layout_init(&ids, sid, CID_SID_MAX, 6) == 0);
    struct quic_settings qs = {
        .max_conns = max_conns[data[0] >> 2 & 3],
        .max_streams = 100,
        .idle_timeout_s = 30,
        .retry_above = retry_above[data[0] & 3],
        .certs = certs,
        .keys = keys,
        .secrets = &secrets,
        .worker = 0,
        .workers = data[0] & 0x10 ? 2 : 1,
        .ids = data[0] & 0x20 ? &ids : NULL,
        .now = fake_now,
    };
    fx.now = 1000 * 1000000000ull;
    memset(fx.in, 0, sizeof(fx.in));
    memset(fx.out, 0, sizeof(fx.out));
    memset(fx.validated, 0, sizeof(fx.validated));
    fx.qn = 0;
    struct quic_ep *ep;
    char why[256];
    REQUIRE(quic_ep_new(&ep, &fx.port, &qs, &app, NULL, why, sizeof(why)) == 0);
    fx.ep = ep;
    bool drained = false;
    size_t i = 1;
    while (i < size) {
        uint8_t op = data[i++];
        fx.now += 1000000;
        if (op & 0x10) {
            uint64_t a = i < size ? data[i++] : 0;
            fx.now += a * a * 1000000;
            quic_ep_tick(ep);
        }
        if ((op & 0x20) && !drained) {
            drained = true;
            quic_ep_drain(ep);
        }
        size_t seg = 0;
        if (op & 4) {
            if (size - i < 2)
                break;
            seg = (size_t)data[i] << 8 | data[i + 1];
            i += 2;
        }
        if (size - i < 2)
            break;
        size_t len = (size_t)data[i] << 8 | data[i + 1];
        i += 2;
        if (len > size - i)
            len = size - i;
        if (op & 0x40) {
            client_op(op, data + i, len, seg);
            i += len;
            continue;
        }
        /* What the port's receive takes at most: a larger one is truncated and dropped there. */
        if (len > (seg ? UDP_GRO_RBUF : UDP_RBUF)) {
            i += len;
            continue;
        }
        /* A buffer of its own, exactly as long, so a read past the datagram is caught. */
        uint8_t *buf = malloc(len ? len : 1);
        REQUIRE(buf);
        memcpy(buf, data + i, len);
        i += len;
        int p = op & 3;
        fx.in[p] += len;
        struct udp_dgram d = {buf, len, (const struct sockaddr *)&fx.peers[p], sizeof(fx.peers[p]),
                              NULL};
        udp_port_deliver(&fx.port, &d, seg);
        if (!(op & 8))
            udp_port_flush(&fx.port);
        free(buf);
    }
    udp_port_flush(&fx.port);
    client_free(&fx.cl);
    fx.now += 60 * 1000000000ull; /* past every timeout: the closing and idle paths run */
    quic_ep_tick(ep);
    quic_ep_tick(ep);
    quic_ep_free(ep);
    return 0;
}
