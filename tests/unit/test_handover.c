/* handover: the steering a draining ringhttpd gives its successor on a shared port (issue 13).
 * First against a model of the kernel's reuseport array (close = the last socket fills the
 * hole), for every size and close order: a steering program must never name one of our
 * listeners, nor an index past the end (the kernel's hash, which may pick ours), and nothing
 * may steer once ours are gone. Then against the real kernel: listeners on a loopback port,
 * connections counted where they land. The fixed "n + random % n" of the first version failed
 * both. Last, the sock_diag dump parser, whose loop could wait forever on an error that was
 * not the buffer's first message. */
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/handover.h"
#include "unit.h"

#define MAXS 32

/* The kernel's array: who holds each index ('o' ours, 't' theirs). */
struct group {
    char who[MAXS];
    int id[MAXS];
    int size;
};

/* Every index the pick can return holds one of theirs. */
static int pick_is_theirs(const struct group *g, struct handover_pick p)
{
    if (p.spread == 0)
        return 0;
    for (uint32_t i = 0; i < p.spread; i++) {
        uint32_t idx = p.base + i;
        if (idx >= (uint32_t)g->size || g->who[idx] != 't')
            return 0;
    }
    return 1;
}

static void close_ours(struct group *g, int id)
{
    for (int i = 0; i < g->size; i++) {
        if (g->who[i] == 'o' && g->id[i] == id) {
            g->who[i] = g->who[g->size - 1]; /* __reuseport_detach_sock */
            g->id[i] = g->id[g->size - 1];
            g->size--;
            return;
        }
    }
}

static unsigned next_random(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 16;
}

TEST(handover_steering_never_names_ours_in_the_model)
{
    unsigned seed = 1;
    for (int ours = 1; ours <= 8; ours++) {
        for (int theirs = ours; theirs <= 12; theirs++) {
            for (int round = 0; round < 20; round++) {
                struct group g = {.size = ours + theirs};
                int order[MAXS];
                for (int i = 0; i < ours; i++) /* ours in any order below `ours` */
                    order[i] = i;
                for (int i = ours - 1; i > 0; i--) {
                    int j = (int)(next_random(&seed) % (unsigned)(i + 1)), t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
                for (int i = 0; i < ours; i++)
                    g.who[i] = 'o', g.id[i] = order[i];
                for (int i = ours; i < g.size; i++)
                    g.who[i] = 't', g.id[i] = i - ours;
                struct handover_pick p = handover_pick_start(ours, theirs);
                CHECK(pick_is_theirs(&g, p));
                for (int i = ours - 1; i > 0; i--) { /* a close order of our ids */
                    int j = (int)(next_random(&seed) % (unsigned)(i + 1)), t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
                for (int k = 0; k < ours; k++) {
                    p = handover_pick_release(ours, theirs, k);
                    CHECK(pick_is_theirs(&g, p)); /* installed before the close */
                    close_ours(&g, order[k]);
                    if (k + 1 < ours)
                        CHECK(pick_is_theirs(&g, p)); /* and still right after it */
                }
                CHECK_INT(g.size, theirs);
                /* nothing steers once ours are gone: the index is past the end, or no program */
                CHECK(p.spread == 0 || p.base + p.spread > (uint32_t)g.size);
                CHECK(p.spread <= 1);
            }
        }
    }
}

TEST(handover_pick_without_a_successor_or_with_a_smaller_one)
{
    CHECK_INT(handover_pick_start(2, 0).spread, 0);
    CHECK_INT(handover_pick_release(2, 0, 0).spread, 0);
    struct handover_pick p = handover_pick_start(4, 1); /* the drain's start is still exact */
    CHECK_INT(p.base, 4);
    CHECK_INT(p.spread, 1);
    p = handover_pick_release(4, 1, 0); /* then the only one of theirs moves */
    CHECK_INT(p.base, 4);
    CHECK_INT(p.spread, 1);
    CHECK_INT(handover_pick_release(4, 1, 1).spread, 0); /* the hash: README's known limit */
}

/* ---- the real kernel ---------------------------------------------------------------------- */

static int listener(uint16_t port, uint16_t *bound)
{
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 512) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("test_handover: listener");
        exit(2);
    }
    *bound = a.sin_port;
    return fd;
}

/* Opens `count` connections to port, then counts how many each listener queued (fds -1 are
 * skipped); returns how many landed nowhere in fds. */
static int land(uint16_t port, const int *fds, int nfds, int *got, int count)
{
    int clients[128];
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int i = 0; i < nfds; i++)
        got[i] = 0;
    for (int i = 0; i < count; i++) {
        clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (clients[i] < 0 || connect(clients[i], (struct sockaddr *)&a, sizeof(a)) != 0) {
            perror("test_handover: connect");
            exit(2);
        }
    }
    int seen = 0;
    for (int i = 0; i < nfds; i++) {
        int c;
        while (fds[i] >= 0 && (c = accept4(fds[i], NULL, NULL, SOCK_CLOEXEC)) >= 0) {
            got[i]++;
            seen++;
            close(c);
        }
    }
    for (int i = 0; i < count; i++)
        close(clients[i]);
    return count - seen;
}

static void kernel_round(int first_released)
{
    uint16_t port;
    int fds[5];
    fds[0] = listener(0, &port); /* ours: 0, 1; theirs: 2, 3 */
    for (int i = 1; i < 4; i++)
        fds[i] = listener(port, &port);
    CHECK_INT(handover_count_listeners(AF_INET, port), 4);

    struct handover h;
    handover_init(&h, 2);
    int got[5];
    CHECK_INT(handover_begin(&h, fds[0], 2), 0);
    CHECK_INT(land(port, fds, 4, got, 64), 0);
    CHECK_INT(got[0] + got[1], 0);
    CHECK(got[2] > 0 && got[3] > 0);

    int second = 1 - first_released;
    handover_release(&h, fds[first_released]);
    fds[first_released] = -1;
    CHECK_INT(land(port, fds, 4, got, 64), 0);
    CHECK_INT(got[second], 0); /* the old program sent about 1 in 6 here */

    handover_release(&h, fds[second]);
    fds[second] = -1;
    CHECK_INT(land(port, fds, 4, got, 64), 0);
    CHECK(got[2] > 0 && got[3] > 0); /* no steering left: the kernel's hash over theirs */

    /* The next successor joins: what we left must not send it everything. */
    fds[4] = listener(port, &port);
    handover_join(fds[4]);
    CHECK_INT(land(port, fds, 5, got, 96), 0);
    CHECK(got[2] > 0 && got[3] > 0 && got[4] > 0);
    for (int i = 2; i < 5; i++)
        close(fds[i]);
    handover_fini(&h);
}

TEST(handover_release_keeps_new_connections_off_ours_in_the_kernel)
{
    kernel_round(0);
    kernel_round(1);
}

/* ---- the sock_diag dump ------------------------------------------------------------------- */

struct dump {
    char buf[1024] __attribute__((aligned(8)));
    size_t len;
};

static void put_listener(struct dump *d, uint16_t port)
{
    struct nlmsghdr *h = (struct nlmsghdr *)(d->buf + d->len);
    memset(h, 0, NLMSG_SPACE(sizeof(struct inet_diag_msg)));
    h->nlmsg_len = NLMSG_LENGTH(sizeof(struct inet_diag_msg));
    h->nlmsg_type = SOCK_DIAG_BY_FAMILY;
    ((struct inet_diag_msg *)NLMSG_DATA(h))->id.idiag_sport = port;
    d->len += NLMSG_SPACE(sizeof(struct inet_diag_msg));
}

static void put_end(struct dump *d, int type, int error)
{
    struct nlmsghdr *h = (struct nlmsghdr *)(d->buf + d->len);
    memset(h, 0, NLMSG_SPACE(sizeof(struct nlmsgerr)));
    h->nlmsg_len = NLMSG_LENGTH(sizeof(struct nlmsgerr));
    h->nlmsg_type = (uint16_t)type;
    ((struct nlmsgerr *)NLMSG_DATA(h))->error = error;
    d->len += NLMSG_SPACE(sizeof(struct nlmsgerr));
}

TEST(handover_parse_dump_counts_and_stops_on_done_or_any_error)
{
    struct dump d = {.len = 0};
    int count = 0;
    put_listener(&d, htons(8080));
    put_listener(&d, htons(8081));
    put_listener(&d, htons(8080));
    CHECK_INT(handover_parse_dump(d.buf, d.len, htons(8080), &count), 0); /* more to come */
    CHECK_INT(count, 2);
    put_end(&d, NLMSG_DONE, 0);
    count = 0;
    CHECK_INT(handover_parse_dump(d.buf, d.len, htons(8080), &count), 1);
    CHECK_INT(count, 2);

    /* An error after listeners: the first version read on, and the kernel sent nothing more. */
    d.len = 0;
    put_listener(&d, htons(8080));
    put_end(&d, NLMSG_ERROR, -EINTR);
    count = 0;
    CHECK_INT(handover_parse_dump(d.buf, d.len, htons(8080), &count), -EINTR);
    d.len = 0;
    put_end(&d, NLMSG_ERROR, -ENOENT);
    CHECK_INT(handover_parse_dump(d.buf, d.len, htons(8080), &count), -ENOENT);
    /* A truncated message is an error, not "more". */
    d.len = 0;
    put_listener(&d, htons(8080));
    CHECK_INT(handover_parse_dump(d.buf, d.len - 8, htons(8080), &count), -EPROTO);
}

/* Issue 38: two --bind addresses on one port are two reuseport groups; each counts its own. */
TEST(handover_parse_dump_at_counts_one_address_of_a_shared_port)
{
    struct dump d = {.len = 0};
    const uint8_t lo[4] = {127, 0, 0, 1}, lo2[4] = {127, 0, 0, 2}, any[16] = {0};
    int count = 0;
    put_listener(&d, htons(8080));
    put_listener(&d, htons(8080));
    put_listener(&d, htons(8081));
    for (int i = 0; i < 3; i++) {
        struct inet_diag_msg *m = NLMSG_DATA(
            (struct nlmsghdr *)(d.buf + (size_t)i * NLMSG_SPACE(sizeof(struct inet_diag_msg))));
        m->idiag_family = AF_INET;
        memcpy(m->id.idiag_src, i == 1 ? lo2 : lo, 4);
    }
    put_end(&d, NLMSG_DONE, 0);
    CHECK_INT(handover_parse_dump_at(d.buf, d.len, htons(8080), lo, &count), 1);
    CHECK_INT(count, 1);
    count = 0;
    CHECK_INT(handover_parse_dump_at(d.buf, d.len, htons(8080), lo2, &count), 1);
    CHECK_INT(count, 1);
    count = 0;
    CHECK_INT(handover_parse_dump_at(d.buf, d.len, htons(8080), any, &count), 1);
    CHECK_INT(count, 0); /* the wildcard is an address of its own */
    count = 0;
    CHECK_INT(handover_parse_dump_at(d.buf, d.len, htons(8080), NULL, &count), 1);
    CHECK_INT(count, 2);
}
