/* test_udp: the UDP port's receive (engine/udp.h): a GRO train split into its datagrams, each
 * read to its last byte before a guard page; and on the real kernel, a GSO send over loopback
 * read back by udp_port_read as one train (GRO on) or as datagrams (off), the same either way;
 * io_uring's sender (engine/uring_udp.h) sending from the buffer it lent.
 * Must not: leave a socket open.
 * Ownership: each test owns its port and sockets. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/udp.h"
#include "engine/uring_state.h"
#include "engine/uring_udp.h"
#include "rt/runtime.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

struct seen {
    size_t lens[64];
    unsigned n, flushes;
    unsigned sum; /* of every byte: each one is read */
};

static void on_recv(void *user, const struct udp_dgram *d)
{
    struct seen *s = user;
    if (s->n < 64)
        s->lens[s->n] = d->len;
    s->n++;
    for (size_t i = 0; i < d->len; i++)
        s->sum += d->data[i];
}

static void on_flush(void *user)
{
    ((struct seen *)user)->flushes++;
}

static const struct udp_upcall upcall = {on_recv, on_flush};

TEST(udp_deliver_splits_a_train_by_its_segment_size)
{
    struct udp_port p = {.up = &upcall};
    struct seen s = {0};
    p.user = &s;
    static uint8_t bytes[4000];
    unsigned want = 0;
    for (size_t i = 0; i < sizeof(bytes); i++)
        want += bytes[i] = (uint8_t)(i * 7);
    struct udp_dgram d = {
        (const uint8_t *)unit_guard(bytes, sizeof(bytes)), sizeof(bytes), NULL, 0, NULL, NULL, 0};
    udp_port_deliver(&p, &d, 1200); /* three full datagrams and a short last one */
    CHECK_INT(s.n, 4);
    CHECK_INT(s.lens[0], 1200);
    CHECK_INT(s.lens[2], 1200);
    CHECK_INT(s.lens[3], 400);
    CHECK_INT(s.sum, want);
    CHECK_INT(p.rx_dgrams, 4);
    CHECK_INT(p.rx_bytes, 4000);
    CHECK_INT(p.rx_gro_trains, 1);
    s = (struct seen){0};
    udp_port_deliver(&p, &d, 0); /* no GRO message: one datagram */
    udp_port_deliver(&p, &d, 4000);
    CHECK_INT(s.n, 2);
    CHECK_INT(s.lens[0], 4000);
    CHECK_INT(p.rx_gro_trains, 1);
}

static int bound(uint16_t *port)
{
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("test_udp: socket");
        exit(2);
    }
    *port = a.sin_port;
    return fd;
}

/* Five 1200-byte datagrams and one of 300 in one GSO send to a port read with gro. */
static void train_over_loopback(bool gro)
{
    uint16_t port, from;
    int rx = bound(&port), tx = bound(&from);
    struct udp_port p;
    struct seen s = {0};
    CHECK_INT(udp_port_init(&p, rx, true, gro, &upcall, &s), 0);
    static uint8_t data[6300];
    unsigned want = 0;
    for (size_t i = 0; i < sizeof(data); i++)
        want += data[i] = (uint8_t)(i * 13 + 1);
    struct sockaddr_in to = {
        .sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } ctl = {0};
    struct iovec iov = {data, sizeof(data)};
    struct msghdr m = {.msg_name = &to,
                       .msg_namelen = sizeof(to),
                       .msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = ctl.buf,
                       .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t seg = 1200;
    memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
    CHECK_INT(sendmsg(tx, &m, 0), (long long)sizeof(data));
    for (int tries = 0; s.n < 6 && tries < 1000; tries++) /* loopback: at once, or never */
        CHECK(udp_port_read(&p, 4) >= 0);
    CHECK_INT(s.n, 6);
    CHECK_INT(s.lens[0], 1200);
    CHECK_INT(s.lens[5], 300);
    CHECK_INT(s.sum, want);
    CHECK_INT(p.gro, gro);
    CHECK_INT(p.rx_gro_trains, gro ? 1 : 0); /* the kernel hands the send over as it was */
    udp_port_fini(&p);
    close(tx);
}

TEST(udp_read_gets_a_gso_send_whole_with_gro_and_without)
{
    train_over_loopback(true);
    train_over_loopback(false);
}

/* Issue 35.1: whatever the kernel says a train's segment size is (0, 1, odd, larger than the
 * buffer), each datagram handed up is 1..seg bytes long (never empty, which ngtcp2's decoder
 * asserts against) and together they are the buffer, every byte once, in order. */
struct walk {
    const uint8_t *next;
    size_t seg, got;
    unsigned n, empty, misplaced, oversize;
};

static void on_walk(void *user, const struct udp_dgram *d)
{
    struct walk *w = user;
    w->n++;
    w->empty += d->len == 0;
    w->oversize += w->seg && d->len > w->seg;
    w->misplaced += d->data != w->next;
    w->next = d->data + d->len;
    w->got += d->len;
}

static const struct udp_upcall walk_upcall = {on_walk, on_flush};

TEST(udp_deliver_never_yields_an_empty_datagram_whatever_the_segment_size)
{
    static uint8_t bytes[3001];
    static const size_t lens[] = {1, 2, 1199, 1200, 1201, 3001};
    static const size_t segs[] = {0, 1, 2, 3, 7, 1199, 1200, 1201, 3000, 3001, 3002, 65535};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        for (size_t k = 0; k < sizeof(segs) / sizeof(segs[0]); k++) {
            struct walk w = {.seg = segs[k]};
            struct udp_port p = {.up = &walk_upcall, .user = &w};
            const uint8_t *buf = (const uint8_t *)unit_guard(bytes, lens[i]);
            struct udp_dgram d = {buf, lens[i], NULL, 0, NULL, NULL, 0};
            w.next = buf;
            udp_port_deliver(&p, &d, segs[k]);
            CHECK_INT(w.empty, 0);
            CHECK_INT(w.oversize, 0);
            CHECK_INT(w.misplaced, 0);
            CHECK_INT(w.got, lens[i]);
            size_t want = segs[k] && lens[i] > segs[k] ? (lens[i] + segs[k] - 1) / segs[k] : 1;
            CHECK_INT(w.n, want);
        }
}

/* Reads one datagram from fd into buf (loopback: at once, or never): its length. */
static ssize_t recv_one(int fd, char *buf, size_t cap)
{
    for (int tries = 0; tries < 1000; tries++) {
        ssize_t n = recv(fd, buf, cap, 0);
        if (n >= 0)
            return n;
        usleep(1000);
    }
    return -1;
}

/* Submits what the sender prepared and completes n sends: how many completed. */
static unsigned sends_done(struct runtime *w, struct uring *u, unsigned n)
{
    sqe_flush(&u->ring, &u->spill);
    CHECK_INT(io_uring_submit_and_wait(&u->ring, n), (int)n);
    struct io_uring_cqe *cqe;
    unsigned head, done = 0;
    io_uring_for_each_cqe(&u->ring, head, cqe) {
        struct tag t = tag_decode(io_uring_cqe_get_data64(cqe));
        CHECK_INT(t.op, OP_UDP_SEND);
        uring_udp_sent(w, u, cqe, t.slot);
        done++;
    }
    io_uring_cq_advance(&u->ring, done);
    return done;
}

/* io_uring's sender lends a copy slot for QUIC to build its next batch in (no copy then); a
 * send of other bytes meanwhile (a CONNECTION_CLOSE from its own buffer) must take another
 * slot, not overwrite the batch being built: both datagrams arrive with their own bytes. */
TEST(udp_uring_send_built_in_a_lent_buffer_keeps_its_bytes_when_another_send_comes_first)
{
    uint16_t port, from;
    int rx = bound(&port), tx = bound(&from);
    struct udp_port p;
    struct seen s = {0};
    CHECK_INT(udp_port_init(&p, tx, false, false, &upcall, &s), 0);
    struct uring u = {0};
    if (io_uring_queue_init(16, &u.ring, 0) != 0) {
        fprintf(stderr, "  (no io_uring here: skipped)\n");
        udp_port_fini(&p);
        close(rx);
        return;
    }
    struct runtime w = {.udp = {&p}, .nudp = 1};
    CHECK_INT(uring_udp_tx_start(&w, &u), 0);
    struct sockaddr_in to = {
        .sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    uint8_t *lent = udp_port_buffer(&p);
    CHECK(lent != NULL);
    CHECK(udp_port_buffer(&p) == lent); /* lent until a send takes it */
    memcpy(lent, "built in place", 14);
    CHECK_INT(udp_port_send(&p, (struct sockaddr *)&to, sizeof(to), (const uint8_t *)"other", 5, 0),
              0);
    CHECK_INT(udp_port_send(&p, (struct sockaddr *)&to, sizeof(to), lent, 14, 0), 0);
    CHECK(udp_port_buffer(&p) != lent); /* it went with its send */
    CHECK_INT(p.tx_queued, 2);
    CHECK_INT(sends_done(&w, &u, 2), 2);
    CHECK_INT(p.tx_dgrams, 2);
    char got[64];
    CHECK_INT(recv_one(rx, got, sizeof(got)), 5);
    CHECK(memcmp(got, "other", 5) == 0);
    CHECK_INT(recv_one(rx, got, sizeof(got)), 14);
    CHECK(memcmp(got, "built in place", 14) == 0);
    io_uring_queue_exit(&u.ring);
    uring_udp_tx_stop(&w, &u);
    sqe_spill_free(&u.spill);
    udp_port_fini(&p);
    close(rx);
}

/* Whose socket a received datagram's source port names. */
static uint16_t recv_from(int fd, char *buf, size_t cap, ssize_t *n)
{
    struct sockaddr_in from = {0};
    socklen_t len = sizeof(from);
    for (int tries = 0; tries < 1000; tries++) {
        *n = recvfrom(fd, buf, cap, 0, (struct sockaddr *)&from, &len);
        if (*n >= 0)
            return from.sin_port;
        usleep(1000);
    }
    return 0;
}

/* Issue 38: a worker has a UDP port per TLS listener, and one io_uring sender serves them all:
 * each send leaves by the socket of the port it was given (the client sees that socket's
 * address, the one it sent to) and is counted there; and one buffer ring receives for every
 * port, each datagram handed to its own port's upcall with d->port naming it. */
TEST(udp_uring_two_ports_send_and_receive_each_by_its_own_socket)
{
    uint16_t client_port, pa, pb;
    int client = bound(&client_port), fa = bound(&pa), fb = bound(&pb);
    struct udp_port a, b;
    struct seen sa = {0}, sb = {0};
    CHECK_INT(udp_port_init(&a, fa, false, false, &upcall, &sa), 0);
    CHECK_INT(udp_port_init(&b, fb, false, false, &upcall, &sb), 0);
    struct uring u = {0};
    if (io_uring_queue_init(16, &u.ring, 0) != 0) {
        fprintf(stderr, "  (no io_uring here: skipped)\n");
        goto out;
    }
    struct runtime w = {.udp = {&a, &b}, .nudp = 2};
    CHECK_INT(uring_udp_tx_start(&w, &u), 0);
    CHECK(a.sender_ctx == b.sender_ctx && a.sender_ctx != NULL); /* one pool for both */
    struct sockaddr_in to = {
        .sin_family = AF_INET, .sin_port = client_port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_INT(udp_port_send(&b, (struct sockaddr *)&to, sizeof(to), (const uint8_t *)"bb", 2, 0),
              0);
    CHECK_INT(udp_port_send(&a, (struct sockaddr *)&to, sizeof(to), (const uint8_t *)"a", 1, 0), 0);
    CHECK_INT(sends_done(&w, &u, 2), 2);
    struct io_uring_cqe *cqe;
    unsigned head, done;
    CHECK_INT(a.tx_dgrams, 1);
    CHECK_INT(b.tx_dgrams, 1);
    char got[16];
    ssize_t n;
    for (int i = 0; i < 2; i++) {
        uint16_t src = recv_from(client, got, sizeof(got), &n);
        CHECK(n == 1 || n == 2);
        CHECK_INT(src, n == 1 ? pa : pb); /* "a" from a's socket, "bb" from b's */
    }
    /* The receive: one RECVMSG per port into the shared ring (a kernel before 6.0 refuses) */
    if (uring_udp_start(&w, &u) == 0) {
        struct sockaddr_in at = to;
        at.sin_port = pb;
        CHECK_INT(sendto(client, "bbb", 3, 0, (struct sockaddr *)&at, sizeof(at)), 3);
        at.sin_port = pa;
        CHECK_INT(sendto(client, "aaaa", 4, 0, (struct sockaddr *)&at, sizeof(at)), 4);
        bool refused = false;
        for (int turn = 0; turn < 50 && sa.n + sb.n < 2 && !refused; turn++) {
            sqe_flush(&u.ring, &u.spill);
            CHECK(io_uring_submit_and_wait(&u.ring, 1) >= 0);
            done = 0;
            io_uring_for_each_cqe(&u.ring, head, cqe) {
                struct tag t = tag_decode(io_uring_cqe_get_data64(cqe));
                CHECK_INT(t.op, OP_UDP_RECV);
                if (cqe->res == -EINVAL || cqe->res == -EOPNOTSUPP)
                    refused = true;
                else
                    uring_udp_complete(&w, &u, cqe, t.slot);
                done++;
            }
            io_uring_cq_advance(&u.ring, done);
            if (u.udp)
                uring_udp_flush(&w, &u);
        }
        if (refused) {
            fprintf(stderr, "  (no multishot RECVMSG here: receive skipped)\n");
        } else {
            CHECK_INT(sa.n, 1);
            CHECK_INT(sa.lens[0], 4);
            CHECK_INT(sb.n, 1);
            CHECK_INT(sb.lens[0], 3);
            CHECK(sa.flushes >= 1 && sb.flushes >= 1);
        }
    }
    io_uring_queue_exit(&u.ring);
    uring_udp_stop(&u);
    uring_udp_tx_stop(&w, &u);
    sqe_spill_free(&u.spill);
out:
    udp_port_fini(&a);
    udp_port_fini(&b);
    close(client);
}
