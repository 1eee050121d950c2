/* Zero-downtime hand-over of the port to a successor; see handover.h. */
#include "server/handover.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/time.h>
#include <string.h>
#include <unistd.h>

#include "rt/errlog.h"

#ifndef SO_DETACH_REUSEPORT_BPF
#define SO_DETACH_REUSEPORT_BPF 68 /* Linux 5.3; older headers lack it */
#endif

void handover_init(struct handover *h, int ours)
{
    pthread_mutex_init(&h->lock, NULL);
    h->ours = ours;
    h->theirs = 0;
    h->released = 0;
}

void handover_fini(struct handover *h)
{
    pthread_mutex_destroy(&h->lock);
}

struct handover_pick handover_pick_start(int ours, int theirs)
{
    if (ours <= 0 || theirs <= 0)
        return (struct handover_pick){0, 0};
    return (struct handover_pick){(uint32_t)ours, (uint32_t)theirs};
}

/* After k = released closes, the array holds ours + theirs - k sockets; the successor's that no
 * close has moved yet sit at ours .. ours + theirs - 1 - k (each close fills its hole with the
 * last socket, one of theirs while any is left at the end, so ours always stay below `ours`). */
struct handover_pick handover_pick_release(int ours, int theirs, int released)
{
    int unmoved = theirs - released;
    if (ours <= 0 || theirs <= 0 || released >= ours || unmoved <= 0)
        return (struct handover_pick){0, 0};
    if (ours - released == 1) /* our last: its close moves the last index into its hole */
        return (struct handover_pick){(uint32_t)(ours + unmoved - 1), 1};
    if (unmoved >= 2) /* all but the last stay where they are through this close */
        return (struct handover_pick){(uint32_t)ours, (uint32_t)(unmoved - 1)};
    /* Only one left unmoved, and this close moves it: right until the close, the hash after
     * (a successor with fewer listeners than ours; README asks for at least as many). */
    return (struct handover_pick){(uint32_t)ours, 1};
}

int handover_steer(int fd, struct handover_pick pick)
{
    if (pick.spread == 0) {
        int zero = 0;
        if (setsockopt(fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &zero, sizeof(zero)) != 0 &&
            errno != ENOENT)
            return -errno;
        return 0;
    }
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_AD_OFF + SKF_AD_RANDOM)),
        BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, pick.spread),
        BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, pick.base),
        BPF_STMT(BPF_RET | BPF_A, 0),
    };
    struct sock_fprog prog = {.len = sizeof(code) / sizeof(code[0]), .filter = code};
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) != 0)
        return -errno;
    return 0;
}

void handover_join(int fd)
{
    int zero = 0;
    (void)setsockopt(fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &zero, sizeof(zero));
}

int handover_parse_dump(const void *buf, size_t len, uint16_t port, int *count)
{
    return handover_parse_dump_at(buf, len, port, NULL, count);
}

int handover_parse_dump_at(const void *buf, size_t len, uint16_t port, const uint8_t *addr,
                           int *count)
{
    if ((uintptr_t)buf % NLMSG_ALIGNTO != 0)
        return -EINVAL;
    int left = (int)len;
    for (const struct nlmsghdr *h = buf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_type == NLMSG_DONE)
            return 1;
        if (h->nlmsg_type == NLMSG_ERROR) {
            const struct nlmsgerr *e = NLMSG_DATA(h);
            if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)) || e->error >= 0)
                return -EPROTO;
            return e->error;
        }
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
            h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
            return -EPROTO;
        const struct inet_diag_msg *m = NLMSG_DATA(h);
        /* idiag_src holds an IPv4 address in its first 4 bytes */
        size_t alen = m->idiag_family == AF_INET ? 4 : 16;
        *count += m->id.idiag_sport == port && (!addr || memcmp(m->id.idiag_src, addr, alen) == 0);
    }
    return left == 0 ? 0 : -EPROTO; /* a truncated message */
}

/* How many sockets of family and protocol, in one of states (a bit per TCP_ state), are bound
 * to port, or -errno. */
static int count_sockets(int family, uint8_t protocol, uint32_t states, uint16_t port,
                         const uint8_t *addr)
{
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -errno;
    /* The kernel fills a dump's buffers inside recv, so a wait means something went wrong:
     * a bound instead of a drain that never ends (issue 13, item 2). */
    struct timeval limit = {.tv_sec = 1};
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 r;
    } req = {
        .nlh = {.nlmsg_len = sizeof(req),
                .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
        .r = {.sdiag_family = (uint8_t)family, .sdiag_protocol = protocol, .idiag_states = states},
    };
    int count = 0, rc = 0;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit)) != 0 ||
        send(fd, &req, sizeof(req), 0) != (ssize_t)sizeof(req)) {
        rc = -errno;
        goto out;
    }
    char buf[16384] __attribute__((aligned(8)));
    while (rc == 0) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0)
            rc = errno == EAGAIN ? -ETIMEDOUT : -errno;
        else if (n == 0)
            rc = -EPROTO;
        else
            rc = handover_parse_dump_at(buf, (size_t)n, port, addr, &count);
    }
out:
    close(fd);
    return rc < 0 ? rc : count;
}

int handover_count_listeners(int family, uint16_t port)
{
    return count_sockets(family, IPPROTO_TCP, 1u << 10 /* TCP_LISTEN */, port, NULL);
}

int handover_count_udp(int family, uint16_t port)
{
    return count_sockets(family, IPPROTO_UDP, ~0u /* bound, or connected too */, port, NULL);
}

/* The address sa names, in idiag_src's form. */
static void where(const struct sockaddr *sa, int *family, uint16_t *port, uint8_t addr[16])
{
    memset(addr, 0, 16);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
        memcpy(addr, &v4->sin_addr, 4);
        *port = v4->sin_port;
    } else {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
        memcpy(addr, &v6->sin6_addr, 16);
        *port = v6->sin6_port;
    }
    *family = sa->sa_family;
}

int handover_count_listeners_at(const struct sockaddr *sa)
{
    int family;
    uint16_t port;
    uint8_t addr[16];
    where(sa, &family, &port, addr);
    return count_sockets(family, IPPROTO_TCP, 1u << 10 /* TCP_LISTEN */, port, addr);
}

int handover_count_udp_at(const struct sockaddr *sa)
{
    int family;
    uint16_t port;
    uint8_t addr[16];
    where(sa, &family, &port, addr);
    return count_sockets(family, IPPROTO_UDP, ~0u, port, addr);
}

int handover_begin(struct handover *h, int fd, int theirs)
{
    int rc = 0;
    pthread_mutex_lock(&h->lock);
    h->theirs = theirs > 0 ? theirs : 0;
    if (h->theirs > 0)
        rc = handover_steer(fd, handover_pick_start(h->ours, h->theirs));
    pthread_mutex_unlock(&h->lock);
    return rc;
}

void handover_release(struct handover *h, int fd)
{
    if (h) {
        pthread_mutex_lock(&h->lock);
        int err = 0;
        if (h->theirs > 0)
            err = handover_steer(fd, handover_pick_release(h->ours, h->theirs, h->released));
        if (err < 0) /* the previous program stays: right until this close, the hash after */
            errlog(ERRLOG_NOTICE, "drain: cannot update the steering to the successor: %s",
                   strerror(-err));
        h->released++;
    }
    shutdown(fd, SHUT_RD); /* leaves the group now, not at the last reference's close */
    if (h)
        pthread_mutex_unlock(&h->lock);
    close(fd);
}
