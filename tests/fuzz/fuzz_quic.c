/* fuzz_quic: libFuzzer target for src/quic's receive path (issue 35.1): a sequence of datagrams
 * from a few client addresses handed to the real entry point, udp_port_deliver on a real UDP
 * port whose upcall quic_ep_new installed, with a real ngtcp2 + GnuTLS server endpoint and a
 * certificate pair made at start (openssl, into a temporary directory removed at exit). The
 * endpoint's clock is this target's: it moves with the input, and quic_ep_tick runs timers
 * (handshake and idle timeouts, closing periods, the resets' allowance) between datagrams.
 * Sends are captured by the port's sender table (the one io_uring installs), so nothing leaves
 * the process. Checked: no datagram ends the process (ASan, UBSan, ngtcp2's asserts), every
 * send fits one udp_port_send, and no address is sent more than three times what came from it
 * (RFC 9000 8.1: no handshake completes here, so no address is ever validated).
 * The application (struct quic_app) is a minimal recorder: without the server's random a
 * handshake cannot finish, so it is rarely if ever opened. Randomness (connection IDs, TLS) is
 * GnuTLS's, so a replay differs in the IDs the server chooses; what a client's Initial makes
 * (keys from its own DCID, the ClientHello, CRYPTO frames, ACKs) replays exactly.
 * Input: [config][record]... config: & 3 retry_above {0, 1, 2, 1000}, >> 2 & 3 max_conns
 * {1, 2, 4, 64}, & 0x10 two workers (steering IDs). Record: [op] [a if op & 0x10]
 * [seg: 2 bytes if op & 4] [length: 2 bytes] [bytes]; op & 3 the client address, & 4 a GRO
 * train of seg-byte datagrams, & 8 no flush after it, & 0x10 the clock moves a*a ms and the
 * timers run first, & 0x20 the endpoint drains first (once). The clock moves 1 ms a record.
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; the endpoint is made and freed per input, the port and the
 * certificate files once per process. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/udp.h"
#include "quic/quic.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_quic: %s:%d: %s\n", __FILE__, __LINE__, #cond);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define PEERS 4

static struct fixture {
    char dir[64], cert[96], key[96];
    struct udp_port port;
    struct sockaddr_in peers[PEERS];
    uint64_t in[PEERS], out[PEERS]; /* bytes from and to each address, this input */
    uint64_t now;                   /* the endpoint's clock, ns */
} fx;

static uint64_t fake_now(void)
{
    return fx.now;
}

/* ---- the port's sender: captures, checks, sends nothing ---- */
static int capture(void *ctx, const struct sockaddr *to, socklen_t tolen, const uint8_t *buf,
                   size_t len, size_t seg, bool gso)
{
    (void)ctx, (void)gso;
    REQUIRE(buf && len > 0 && len <= UDP_SEND_MAX && seg <= len);
    REQUIRE(tolen == sizeof(struct sockaddr_in) && to->sa_family == AF_INET);
    const struct sockaddr_in *sin = (const struct sockaddr_in *)to;
    int i = 0;
    while (i < PEERS && memcmp(&fx.peers[i], sin, sizeof(*sin)) != 0)
        i++;
    REQUIRE(i < PEERS); /* only ever to an address that sent */
    fx.out[i] += len;
    if (fx.out[i] > 3 * fx.in[i]) {
        fprintf(stderr, "fuzz_quic: %zu bytes to peer %d: %llu sent for %llu received\n", len, i,
                (unsigned long long)fx.out[i], (unsigned long long)fx.in[i]);
        abort();
    }
    return 0;
}

static const struct udp_sender sender = {capture};

/* ---- the application: a recorder ---- */
struct app {
    struct quic_conn *qc;
};

static void *app_open(void *ctx, struct quic_conn *qc)
{
    (void)ctx;
    struct app *a = calloc(1, sizeof(*a));
    if (a)
        a->qc = qc;
    return a;
}
static int app_recv(void *p, int64_t sid, const uint8_t *data, size_t len, bool fin)
{
    struct app *a = p;
    (void)data, (void)fin;
    quic_consume(a->qc, sid, len);
    return 0;
}
static int app_pull(void *p, int64_t *sid, bool *fin, struct quic_vec *v, size_t cnt)
{
    (void)p, (void)v, (void)cnt;
    *sid = -1;
    *fin = false;
    return 0;
}
static int app_wrote(void *p, int64_t sid, size_t n)
{
    (void)p, (void)sid, (void)n;
    return 0;
}
static void app_blocked(void *p, int64_t sid, bool shut)
{
    (void)p, (void)sid, (void)shut;
}
static void app_unblocked(void *p, int64_t sid)
{
    (void)p, (void)sid;
}
static int app_acked(void *p, int64_t sid, uint64_t n)
{
    (void)p, (void)sid, (void)n;
    return 0;
}
static int app_closed(void *p, int64_t sid, uint64_t code)
{
    (void)p, (void)sid, (void)code;
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
    .reset = app_closed,
    .more_streams = app_more,
    .drain = app_none,
    .woken = app_none,
    .idle = app_idle,
    .free = free,
};

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
    int fd = udp_socket_open((const struct sockaddr *)&local, sizeof(local));
    REQUIRE(fd >= 0);
    REQUIRE(udp_port_init(&fx.port, fd, false, false, NULL, NULL) == 0);
    fx.port.sender = &sender;
    static const char *const addrs[PEERS] = {"127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.3"};
    static const uint16_t ports[PEERS] = {40000, 40001, 40000, 50000};
    for (int i = 0; i < PEERS; i++) {
        fx.peers[i] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(ports[i])};
        inet_pton(AF_INET, addrs[i], &fx.peers[i].sin_addr);
    }
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const unsigned retry_above[] = {0, 1, 2, 1000}, max_conns[] = {1, 2, 4, 64};
    static const uint8_t secret[32] = {1, 2, 3};
    const char *const certs[] = {fx.cert, NULL}, *const keys[] = {fx.key, NULL};
    struct quic_settings qs = {
        .max_conns = max_conns[data[0] >> 2 & 3],
        .max_streams = 100,
        .idle_timeout_s = 30,
        .retry_above = retry_above[data[0] & 3],
        .certs = certs,
        .keys = keys,
        .secret = secret,
        .worker = 0,
        .workers = data[0] & 0x10 ? 2 : 1,
        .now = fake_now,
    };
    fx.now = 1000 * 1000000000ull;
    memset(fx.in, 0, sizeof(fx.in));
    memset(fx.out, 0, sizeof(fx.out));
    struct quic_ep *ep;
    char why[256];
    REQUIRE(quic_ep_new(&ep, &fx.port, &qs, &app, NULL, why, sizeof(why)) == 0);
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
        struct udp_dgram d = {buf, len, (const struct sockaddr *)&fx.peers[p], sizeof(fx.peers[p])};
        udp_port_deliver(&fx.port, &d, seg);
        if (!(op & 8))
            udp_port_flush(&fx.port);
        free(buf);
    }
    udp_port_flush(&fx.port);
    fx.now += 60 * 1000000000ull; /* past every timeout: the closing and idle paths run */
    quic_ep_tick(ep);
    quic_ep_tick(ep);
    quic_ep_free(ep);
    return 0;
}
