/* test_steer: the reuseport program of steer.h on the real kernel: listeners on a loopback
 * port, connections from two client addresses (127.0.0.1 and 127.0.0.2), each address always
 * queued on one listener, and the two addresses spread over the group by the seed.
 * Must not: leave a socket open.
 * Ownership: each test owns its sockets. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "steer.h"

#define GROUP 4

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
