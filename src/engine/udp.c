/* A worker's UDP port: batched receive and GSO send; see udp.h. */
#include "engine/udp.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104 /* Linux 5.0 */
#endif

int udp_socket_open(const struct sockaddr *addr, socklen_t len, bool v6only)
{
    int only = v6only;
    int fd = socket(addr->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
    if (fd < 0)
        return -errno;
    int one = 1;
    /* The receive buffer takes a burst of Initials and a fast client's ACKs between turns. */
    int rcv = 1 << 21;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
        goto fail;
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &rcv, sizeof(rcv));
    if (addr->sa_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof(only));
    if (bind(fd, addr, len) != 0)
        goto fail;
    return fd;
fail:;
    int err = -errno;
    close(fd);
    return err;
}

int udp_addr_in_use(const struct sockaddr *addr, socklen_t len, bool v6only)
{
    int fd = socket(addr->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
    if (fd < 0)
        return -errno;
    int only = v6only, rc = 0;
    if (addr->sa_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof(only));
    if (bind(fd, addr, len) != 0)
        rc = errno == EADDRINUSE ? 1 : -errno;
    close(fd);
    return rc;
}

int udp_port_init(struct udp_port *p, int fd, bool gso, bool gro, const struct udp_upcall *up,
                  void *user)
{
    memset(p, 0, sizeof(*p));
    p->fd = fd;
    p->up = up;
    p->user = user;
    p->local_len = sizeof(p->local);
    if (getsockname(fd, (struct sockaddr *)&p->local, &p->local_len) != 0)
        return -errno;
    /* A wildcard's destinations: IPv4's (also of an IPv6 socket's IPv4 clients, as
     * IP_PKTINFO) and IPv6's. Without them an answer leaves from the route's address. */
    const struct sockaddr_in *l4 = (const struct sockaddr_in *)&p->local;
    const struct sockaddr_in6 *l6 = (const struct sockaddr_in6 *)&p->local;
    if ((p->local.ss_family == AF_INET && l4->sin_addr.s_addr == htonl(INADDR_ANY)) ||
        (p->local.ss_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&l6->sin6_addr))) {
        int on = 1;
        p->pktinfo = setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on)) == 0 &&
                     (p->local.ss_family == AF_INET ||
                      setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on)) == 0);
    }
    /* The probe is the option itself: a kernel without UDP GRO (before 5.0) refuses it. */
    int one = 1;
    p->gro = gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
    p->rslots = p->gro ? UDP_GRO_BATCH : UDP_BATCH;
    p->rslot = p->gro ? UDP_GRO_RBUF : UDP_RBUF;
    p->rbuf = malloc(p->rslots * p->rslot);
    if (!p->rbuf)
        return -ENOMEM;
    /* The probe is the option itself: a kernel without UDP GSO (before 4.18) refuses it. */
    int seg = 1200;
    p->gso = gso && setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg)) == 0;
    if (p->gso) {
        seg = 0; /* per send from here on, in a control message */
        (void)setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg));
    }
    return 0;
}

void udp_port_fini(struct udp_port *p)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    free(p->rbuf);
    p->rbuf = NULL;
}

_Static_assert(CMSG_SPACE(sizeof(struct in_pktinfo)) == CMSG_SPACE(12) &&
                   CMSG_SPACE(sizeof(struct in6_pktinfo)) == CMSG_SPACE(20),
               "UDP_CMSG_SPACE has room for both");

socklen_t udp_pktinfo_dst(const struct udp_port *p, const struct cmsghdr *cm,
                          struct sockaddr_storage *out)
{
    uint16_t port = ((const struct sockaddr_in *)&p->local)->sin_port; /* as v6's */
    memset(out, 0, sizeof(*out));
    if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO &&
        cm->cmsg_len >= CMSG_LEN(sizeof(struct in_pktinfo))) {
        struct in_pktinfo pi;
        memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
        if (p->local.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)out;
            *a = (struct sockaddr_in){
                .sin_family = AF_INET, .sin_port = port, .sin_addr = pi.ipi_addr};
            return sizeof(*a);
        }
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)out; /* the mapped form, as the peer's */
        a->sin6_family = AF_INET6;
        a->sin6_port = port;
        a->sin6_addr.s6_addr[10] = a->sin6_addr.s6_addr[11] = 0xff;
        memcpy(&a->sin6_addr.s6_addr[12], &pi.ipi_addr, 4);
        return sizeof(*a);
    }
    if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO &&
        cm->cmsg_len >= CMSG_LEN(sizeof(struct in6_pktinfo)) && p->local.ss_family == AF_INET6) {
        struct in6_pktinfo pi;
        memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)out;
        a->sin6_family = AF_INET6;
        a->sin6_port = port;
        a->sin6_addr = pi.ipi6_addr;
        if (IN6_IS_ADDR_LINKLOCAL(&pi.ipi6_addr))
            a->sin6_scope_id = (uint32_t)pi.ipi6_ifindex;
        return sizeof(*a);
    }
    return 0;
}

size_t udp_cmsg_build(void *ctl, const struct udp_port *p, const struct sockaddr *from,
                      uint16_t seg)
{
    struct msghdr msg = {.msg_control = ctl, .msg_controllen = UDP_CMSG_SPACE};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    size_t len = 0;
    memset(ctl, 0, UDP_CMSG_SPACE);
    if (seg) {
        cm->cmsg_level = SOL_UDP;
        cm->cmsg_type = UDP_SEGMENT;
        cm->cmsg_len = CMSG_LEN(sizeof(seg));
        memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
        len += CMSG_SPACE(sizeof(seg));
        cm = (struct cmsghdr *)((char *)ctl + len);
    }
    if (from && p->pktinfo && p->local.ss_family == AF_INET && from->sa_family == AF_INET) {
        struct in_pktinfo pi = {.ipi_spec_dst = ((const struct sockaddr_in *)from)->sin_addr};
        cm->cmsg_level = IPPROTO_IP;
        cm->cmsg_type = IP_PKTINFO;
        cm->cmsg_len = CMSG_LEN(sizeof(pi));
        memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
        len += CMSG_SPACE(sizeof(pi));
    } else if (from && p->pktinfo && from->sa_family == AF_INET6) {
        const struct sockaddr_in6 *f = (const struct sockaddr_in6 *)from;
        struct in6_pktinfo pi = {.ipi6_addr = f->sin6_addr};
        if (IN6_IS_ADDR_LINKLOCAL(&f->sin6_addr))
            pi.ipi6_ifindex = (unsigned)f->sin6_scope_id;
        cm->cmsg_level = IPPROTO_IPV6;
        cm->cmsg_type = IPV6_PKTINFO;
        cm->cmsg_len = CMSG_LEN(sizeof(pi));
        memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
        len += CMSG_SPACE(sizeof(pi));
    }
    return len;
}

size_t udp_gro_size(const struct cmsghdr *cm)
{
    int seg;
    if (cm->cmsg_level != SOL_UDP || cm->cmsg_type != UDP_GRO ||
        cm->cmsg_len < CMSG_LEN(sizeof(seg)))
        return 0;
    memcpy(&seg, CMSG_DATA(cm), sizeof(seg));
    return seg > 0 ? (size_t)seg : 0;
}

int udp_port_read(struct udp_port *p, unsigned batches)
{
    struct mmsghdr msgs[UDP_BATCH];
    struct iovec iov[UDP_BATCH];
    struct sockaddr_storage peers[UDP_BATCH];
    union {
        char buf[UDP_CMSG_SPACE];
        struct cmsghdr align;
    } ctl[UDP_BATCH];
    int total = 0, rc = 0, slots = (int)p->rslots;
    for (unsigned b = 0; b < batches; b++) {
        for (int i = 0; i < slots; i++) {
            iov[i] = (struct iovec){p->rbuf + (size_t)i * p->rslot, p->rslot};
            msgs[i].msg_hdr =
                (struct msghdr){.msg_name = &peers[i],
                                .msg_namelen = sizeof(peers[i]),
                                .msg_iov = &iov[i],
                                .msg_iovlen = 1,
                                .msg_control = p->gro || p->pktinfo ? ctl[i].buf : NULL,
                                .msg_controllen = p->gro || p->pktinfo ? sizeof(ctl[i].buf) : 0};
        }
        int n = recvmmsg(p->fd, msgs, (unsigned)slots, MSG_DONTWAIT, NULL);
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                rc = -errno;
            break;
        }
        for (int i = 0; i < n; i++) {
            if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
                continue; /* larger than any QUIC datagram we accept */
            size_t seg = 0;
            struct sockaddr_storage dst;
            socklen_t dst_len = 0;
            for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msgs[i].msg_hdr); cm;
                 cm = CMSG_NXTHDR(&msgs[i].msg_hdr, cm)) {
                if (!seg)
                    seg = udp_gro_size(cm);
                if (!dst_len && p->pktinfo)
                    dst_len = udp_pktinfo_dst(p, cm, &dst);
            }
            struct udp_dgram d = {iov[i].iov_base,
                                  msgs[i].msg_len,
                                  (const struct sockaddr *)&peers[i],
                                  msgs[i].msg_hdr.msg_namelen,
                                  p,
                                  dst_len ? (const struct sockaddr *)&dst : NULL,
                                  dst_len};
            udp_port_deliver(p, &d, seg);
        }
        total += n;
        if (n < slots)
            break;
    }
    p->up->flush(p->user);
    return rc < 0 && total == 0 ? rc : total;
}

/* Never a zero-length datagram out of a train: seg > 0 and off < len, so each segment has
 * 1..seg bytes; the kernel's segment size (0 means none: one datagram, larger than the buffer
 * too) is taken as it comes. An empty datagram passes as one: the layer above owns what its
 * library may be given (quic.c drops it before ngtcp2, whose decoder asserts datalen != 0). */
void udp_port_deliver(struct udp_port *p, const struct udp_dgram *d, size_t seg)
{
    struct udp_dgram one = *d;
    one.port = p;
    if (!seg || d->len <= seg) {
        p->rx_dgrams++;
        p->rx_bytes += d->len;
        p->up->recv(p->user, &one);
        return;
    }
    p->rx_gro_trains++;
    for (size_t off = 0; off < d->len; off += seg) {
        one.data = d->data + off;
        one.len = d->len - off < seg ? d->len - off : seg;
        p->rx_dgrams++;
        p->rx_bytes += one.len;
        p->up->recv(p->user, &one);
    }
}

void udp_port_flush(struct udp_port *p)
{
    p->up->flush(p->user);
}

static int send_one(struct udp_port *p, const struct sockaddr *from, const struct sockaddr *to,
                    socklen_t tolen, const uint8_t *buf, size_t len, size_t seg)
{
    struct iovec iov = {(void *)buf, len};
    union {
        char buf[UDP_CMSG_SPACE];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg = {
        .msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &iov, .msg_iovlen = 1};
    size_t n_ctl = udp_cmsg_build(ctl.buf, p, from, seg && len > seg ? (uint16_t)seg : 0);
    if (n_ctl) {
        msg.msg_control = ctl.buf;
        msg.msg_controllen = n_ctl;
    }
    ssize_t n;
    do
        n = sendmsg(p->fd, &msg, 0);
    while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : 0;
}

/* Sends at once, with sendmsg: GSO when the port has it, else datagram by datagram. */
static int send_now(struct udp_port *p, const struct sockaddr *from, const struct sockaddr *to,
                    socklen_t tolen, const uint8_t *buf, size_t len, size_t seg)
{
    size_t count = seg ? (len + seg - 1) / seg : 1;
    if (p->gso && count > 1) {
        int rc = send_one(p, from, to, tolen, buf, len, seg);
        if (rc == 0) {
            p->tx_dgrams += count;
            p->tx_bytes += len;
            p->tx_gso_calls++;
            p->tx_sends++;
            return 0;
        }
        if (rc != -EIO && rc != -EINVAL) {
            p->tx_dropped += count;
            return rc;
        }
        p->gso = false; /* the route's device cannot segment: one datagram per call from now */
    }
    int rc = 0;
    for (size_t off = 0; off < len; off += seg ? seg : len) {
        size_t n = seg && len - off > seg ? seg : len - off;
        int r = send_one(p, from, to, tolen, buf + off, n, 0);
        if (r == 0) {
            p->tx_dgrams++;
            p->tx_bytes += n;
            p->tx_sends++;
        } else {
            p->tx_dropped++;
            rc = r;
        }
    }
    return rc;
}

int udp_port_send(struct udp_port *p, const struct sockaddr *to, socklen_t tolen,
                  const uint8_t *buf, size_t len, size_t seg)
{
    return udp_port_send_from(p, NULL, to, tolen, buf, len, seg);
}

int udp_port_send_from(struct udp_port *p, const struct sockaddr *from, const struct sockaddr *to,
                       socklen_t tolen, const uint8_t *buf, size_t len, size_t seg)
{
    if (seg >= len)
        seg = 0; /* one datagram */
    if (!p->pktinfo)
        from = NULL; /* the socket's own address is the only one */
    if (p->sender && len <= UDP_SEND_MAX &&
        p->sender->send(p->sender_ctx, p, from, to, tolen, buf, len, seg, p->gso) == 0) {
        p->tx_queued++;
        return 0;
    }
    return send_now(p, from, to, tolen, buf, len, seg);
}

void udp_port_sent(struct udp_port *p, const struct sockaddr *from, const struct sockaddr *to,
                   socklen_t tolen, const uint8_t *buf, size_t len, size_t seg, int res)
{
    size_t count = seg ? (len + seg - 1) / seg : 1;
    if (res >= 0) {
        p->tx_dgrams += count;
        p->tx_bytes += len;
        p->tx_sends++;
        if (count > 1)
            p->tx_gso_calls++;
        return;
    }
    if (count > 1 && (res == -EIO || res == -EINVAL)) {
        p->gso = false; /* as send_now: the route's device cannot segment */
        (void)send_now(p, from, to, tolen, buf, len, seg);
        return;
    }
    p->tx_dropped += count; /* EAGAIN (a full socket buffer) among them: QUIC resends */
}
