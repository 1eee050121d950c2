/* test_steer: the reuseport program of steer.h on the real kernel: listeners on a loopback
 * port, connections from two client addresses (127.0.0.1 and 127.0.0.2), each address always
 * queued on one listener, and the two addresses spread over the group by the seed; the QUIC
 * program on a UDP group: a datagram lands on the socket its connection ID was made for.
 * Must not: leave a socket open.
 * Ownership: each test owns its sockets. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/steer.h"

#define GROUP 4

/* Our IDs' layout without a server ID (quic/cid.h): the steering bytes first. */
static const struct cid_layout plain = {.len = CID_LEN_PLAIN};

static int listener(uint16_t *port)
{
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = *port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 512) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("test_steer: listener");
        exit(2);
    }
    *port = a.sin_port;
    return fd;
}

/* Connects `count` times from source address `from` (a 127/8 address), then returns the
 * listener that queued them when one did, -1 when they were spread, -2 when some got lost. */
static int land(uint16_t port, const int *fds, const char *from, int count)
{
    int clients[64], where = -3, seen = 0;
    struct sockaddr_in to = {
        .sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in src = {.sin_family = AF_INET};
    inet_pton(AF_INET, from, &src.sin_addr);
    for (int i = 0; i < count; i++) {
        clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (clients[i] < 0 || bind(clients[i], (struct sockaddr *)&src, sizeof(src)) != 0 ||
            connect(clients[i], (struct sockaddr *)&to, sizeof(to)) != 0) {
            perror("test_steer: connect");
            exit(2);
        }
    }
    for (int i = 0; i < GROUP; i++) {
        int c;
        while ((c = accept4(fds[i], NULL, NULL, SOCK_CLOEXEC)) >= 0) {
            where = where == -3 || where == i ? i : -1;
            seen++;
            close(c);
        }
    }
    for (int i = 0; i < count; i++)
        close(clients[i]);
    return seen == count ? where : -2;
}

TEST(steer_keeps_each_client_address_on_one_listener)
{
    uint16_t port = 0;
    int fds[GROUP];
    for (int i = 0; i < GROUP; i++)
        fds[i] = listener(&port);
    /* Without a program the kernel hashes the source port too: 32 connections of one address
     * spread (the chance that all land on one of 4 listeners is 4^-31). */
    CHECK_INT(land(port, fds, "127.0.0.1", 32), -1);

    bool apart = false;
    for (uint32_t seed = 0; seed < 16; seed++) {
        CHECK_INT(steer_attach(fds[0], GROUP, seed), 0);
        int one = land(port, fds, "127.0.0.1", 32), two = land(port, fds, "127.0.0.2", 32);
        CHECK(one >= 0 && two >= 0);
        CHECK_INT(land(port, fds, "127.0.0.1", 8), one); /* and again later */
        apart = apart || one != two;
    }
    CHECK(apart); /* the seed moves addresses: not everything on one listener */
    CHECK_INT(steer_attach(fds[0], 0, 1), -EINVAL);
    for (int i = 0; i < GROUP; i++)
        close(fds[i]);
}

static int udp_socket(uint16_t *port, bool reuse)
{
    int one = 1, fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = *port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || (reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("test_steer: udp socket");
        exit(2);
    }
    *port = a.sin_port;
    return fd;
}

/* Sends d from a new socket on from (a 127/8 address; a new source port: the kernel's own hash
 * would move it), then returns the group's socket that received it, or -1. */
static int udp_land_from(uint16_t port, const int *fds, const uint8_t *d, size_t len,
                         const char *from)
{
    int c = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in src = {.sin_family = AF_INET};
    inet_pton(AF_INET, from, &src.sin_addr);
    if (c < 0 || bind(c, (struct sockaddr *)&src, sizeof(src)) != 0) {
        perror("test_steer: udp client");
        exit(2);
    }
    struct sockaddr_in to = {
        .sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int where = -1;
    if (sendto(c, d, len, 0, (struct sockaddr *)&to, sizeof(to)) != (ssize_t)len) {
        perror("test_steer: sendto");
        exit(2);
    }
    for (int tries = 0; where < 0 && tries < 1000; tries++) /* loopback: at once, or never */
        for (int i = 0; i < GROUP; i++) {
            uint8_t buf[64];
            if (recv(fds[i], buf, sizeof(buf), 0) >= 0)
                where = i;
        }
    close(c);
    return where;
}

static int udp_land(uint16_t port, const int *fds, const uint8_t *d, size_t len)
{
    return udp_land_from(port, fds, d, len, "127.0.0.1");
}

enum qtype { Q_SHORT_HDR, Q_INITIAL = 0xc3, Q_ZERO_RTT = 0xd3, Q_HANDSHAKE = 0xe3 };

/* A QUIC short header (byte 0 without 0x80, the ID at 1) or long header of type t (a version,
 * the ID's length at 5, the ID at 6), padded to 40 bytes. */
static size_t quic_packet(uint8_t *d, enum qtype t, const uint8_t *cid, uint8_t cidlen)
{
    memset(d, 0xa5, 40);
    if (t == Q_SHORT_HDR) {
        d[0] = 0x41;
        memcpy(d + 1, cid, cidlen);
        return 40;
    }
    d[0] = (uint8_t)t;
    d[1] = 0, d[2] = 0, d[3] = 0, d[4] = 1;
    d[5] = cidlen;
    memcpy(d + 6, cid, cidlen);
    return 40;
}

TEST(steer_quic_sends_each_connection_id_to_the_worker_it_was_made_for)
{
    uint16_t port = 0;
    int fds[GROUP];
    for (int i = 0; i < GROUP; i++)
        fds[i] = udp_socket(&port, true);
    CHECK_INT(steer_quic_attach(fds[0], GROUP, NULL, 7, &plain), 0);
    uint8_t d[64];
    for (int round = 0; round < 16; round++) {
        for (uint32_t w = 0; w < GROUP; w++) {
            uint8_t cid[18];
            for (size_t k = 0; k < sizeof(cid); k++)
                cid[k] = (uint8_t)random();
            cid_steer_make(cid, w, GROUP);
            CHECK_INT(cid_steer_index(cid, GROUP), w);
            /* a made ID on the wire: short header and Handshake, from a new port each time */
            CHECK_INT(udp_land(port, fds, d, quic_packet(d, Q_SHORT_HDR, cid, sizeof(cid))),
                      (int)w);
            CHECK_INT(udp_land(port, fds, d, quic_packet(d, Q_HANDSHAKE, cid, sizeof(cid))),
                      (int)w);
        }
        /* A client's first flight (Initial, 0-RTT) lands by its address whatever its ID. */
        uint8_t mine[8];
        for (size_t k = 0; k < sizeof(mine); k++)
            mine[k] = (uint8_t)random();
        int first = udp_land(port, fds, d, quic_packet(d, Q_INITIAL, mine, sizeof(mine)));
        CHECK(first >= 0);
        mine[0] ^= 0x5a;
        CHECK_INT(udp_land(port, fds, d, quic_packet(d, Q_INITIAL, mine, sizeof(mine))), first);
        CHECK_INT(udp_land(port, fds, d, quic_packet(d, Q_ZERO_RTT, mine, sizeof(mine))), first);
    }
    /* Made IDs spread: index w made from random bytes is w for every n up to 64. */
    for (uint32_t n = 1; n <= 64; n++)
        for (uint32_t w = 0; w < n; w++) {
            uint8_t cid[4] = {(uint8_t)random(), (uint8_t)random(), 0xff, 0xff};
            cid_steer_make(cid, w, n);
            CHECK_INT(cid_steer_index(cid, n), w);
        }
    CHECK_INT(steer_quic_attach(fds[0], 0, NULL, 7, &plain), -EINVAL);
    for (int i = 0; i < GROUP; i++)
        close(fds[i]);
}

TEST(steer_quic_routes_ids_with_a_server_id_to_their_worker)
{
    /* --quic-server-id (issue 38): the ID opens with QUIC-LB's first octet and the server ID,
     * fixed for the host, so the worker's steering bytes move to the nonce; the program reads
     * them there. Server IDs of 1, 8 (AWS NLB's) and 15 bytes (QUIC-LB's longest). */
    static const uint8_t sid[CID_SID_MAX] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                                             0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xf0};
    static const size_t lens[] = {1, 8, 15};
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        struct cid_layout ids;
        CHECK_INT(cid_layout_init(&ids, sid, lens[k], 5), 0);
        CHECK(ids.len >= CID_LEN_PLAIN && ids.len <= CID_LEN_MAX);
        CHECK(ids.len >= 1 + lens[k] + CID_NONCE_MIN);
        uint16_t port = 0;
        int fds[GROUP];
        for (int i = 0; i < GROUP; i++)
            fds[i] = udp_socket(&port, true);
        CHECK_INT(steer_quic_attach(fds[0], GROUP, NULL, 7, &ids), 0);
        uint8_t d[64];
        for (int round = 0; round < 16; round++)
            for (uint32_t w = 0; w < GROUP; w++) {
                uint8_t cid[CID_LEN_MAX], got[CID_SID_MAX];
                for (size_t b = 0; b < ids.len; b++)
                    cid[b] = (uint8_t)random();
                cid_make(&ids, cid, w, GROUP);
                CHECK_INT(cid[0], 5 << 5 | (ids.len - 1)); /* rotation 5, the length after */
                CHECK(memcmp(cid + 1, sid, lens[k]) == 0);
                CHECK_INT((int)cid_server_id(&ids, cid, ids.len, got), (int)lens[k]);
                CHECK(memcmp(got, sid, lens[k]) == 0);
                CHECK_INT(udp_land(port, fds, d, quic_packet(d, Q_SHORT_HDR, cid, ids.len)),
                          (int)w);
                CHECK_INT(udp_land(port, fds, d, quic_packet(d, Q_HANDSHAKE, cid, ids.len)),
                          (int)w);
            }
        for (int i = 0; i < GROUP; i++)
            close(fds[i]);
    }
    struct cid_layout ids;
    CHECK_INT(cid_layout_init(&ids, sid, CID_SID_MAX + 1, 0), -EINVAL);
    CHECK_INT(cid_layout_init(&ids, sid, 8, 7), -EINVAL); /* 0b111: unroutable, not ours */
    CHECK_INT(cid_layout_init(&ids, NULL, 0, 0), 0);
    CHECK_INT(ids.len, CID_LEN_PLAIN);
    CHECK_INT(ids.steer_off, 0);
}

TEST(steer_quic_order_finds_each_socket_after_a_predecessors_left)
{
    /* A predecessor's three sockets, then ours: its closes move ours into its holes, last
     * first, so that socket i of ours is no longer at index i. */
    uint16_t port = 0;
    int theirs[3], fds[GROUP];
    for (int i = 0; i < 3; i++)
        theirs[i] = udp_socket(&port, true);
    for (int i = 0; i < GROUP; i++)
        fds[i] = udp_socket(&port, true);
    uint32_t order[GROUP];
    close(theirs[1]);
    close(theirs[0]); /* one of theirs still in the group: an index we probe is not ours */
    CHECK_INT(steer_quic_order(fds, GROUP, order), -EAGAIN);
    close(theirs[2]);
    CHECK_INT(steer_quic_order(fds, GROUP, order), 0);
    bool seen[GROUP] = {0}, in_order = true;
    for (int i = 0; i < GROUP; i++) {
        CHECK(order[i] < GROUP && !seen[order[i]]);
        seen[order[i] % GROUP] = true;
        in_order = in_order && order[i] == (uint32_t)i;
    }
    CHECK(!in_order); /* else the test proves nothing */
    /* The probe left nothing behind: a datagram of any shape reaches a worker. */
    uint8_t d[64] = {0};
    CHECK(udp_land(port, fds, d, 40) >= 0);
    CHECK_INT(steer_quic_attach(fds[0], GROUP, order, 7, &plain), 0);
    for (int round = 0; round < 16; round++)
        for (uint32_t w = 0; w < GROUP; w++) {
            uint8_t cid[8];
            for (size_t k = 0; k < sizeof(cid); k++)
                cid[k] = (uint8_t)random();
            cid_steer_make(cid, w, GROUP);
            CHECK_INT(udp_land(port, fds, d, quic_packet(d, Q_SHORT_HDR, cid, sizeof(cid))),
                      (int)w);
            CHECK_INT(udp_land(port, fds, d, quic_packet(d, Q_HANDSHAKE, cid, sizeof(cid))),
                      (int)w);
        }
    struct sock_filter code[STEER_QUIC_LEN + 2 * GROUP];
    CHECK_INT((int)steer_quic_len(GROUP, order), STEER_QUIC_LEN + 2 * GROUP);
    steer_quic_program(code, GROUP, order, 7, &plain);
    CHECK_INT(code[STEER_QUIC_LEN + 2 * GROUP - 1].code, BPF_RET | BPF_K);
    /* --threads' most (1024): the kernel takes the longest program too */
    static uint32_t reversed[1024];
    for (uint32_t w = 0; w < 1024; w++)
        reversed[w] = 1023 - w;
    CHECK_INT(steer_quic_attach(fds[0], 1024, reversed, 7, &plain), 0);
    for (int i = 0; i < GROUP; i++)
        close(fds[i]);
}

TEST(steer_quic_first_flight_lands_where_tcp_does)
{
    /* One client, one worker: a TCP group and a UDP group of GROUP sockets on one port, both
     * programs with one seed; from 16 client addresses, the listener that queues a client's
     * TCP connections is the index of the UDP socket its Initials and 0-RTT reach (issue 35:
     * --limit-conn counts a client's TCP and QUIC connections in one worker's table). */
    uint16_t port = 0;
    int tcp[GROUP], udp[GROUP];
    for (int i = 0; i < GROUP; i++)
        tcp[i] = listener(&port);
    for (int i = 0; i < GROUP; i++)
        udp[i] = udp_socket(&port, true);
    bool spread = false;
    for (uint32_t seed = 1; seed < 5; seed++) {
        CHECK_INT(steer_attach(tcp[0], GROUP, seed * 0x9e3779b9u), 0);
        CHECK_INT(steer_quic_attach(udp[0], GROUP, NULL, seed * 0x9e3779b9u, &plain), 0);
        int first = -1;
        for (int host = 1; host <= 16; host++) {
            char from[32];
            snprintf(from, sizeof(from), "127.0.%d.%d", host % 3, host);
            int at = land(port, tcp, from, 4);
            CHECK(at >= 0);
            uint8_t d[64], cid[8];
            for (size_t k = 0; k < sizeof(cid); k++)
                cid[k] = (uint8_t)random();
            CHECK_INT(udp_land_from(port, udp, d, quic_packet(d, Q_INITIAL, cid, 8), from), at);
            CHECK_INT(udp_land_from(port, udp, d, quic_packet(d, Q_ZERO_RTT, cid, 8), from), at);
            spread = spread || (first >= 0 && at != first);
            first = at;
        }
    }
    CHECK(spread); /* else the test proves nothing */
    for (int i = 0; i < GROUP; i++) {
        close(tcp[i]);
        close(udp[i]);
    }
}
