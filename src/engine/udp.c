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
            msgs[i].msg_hdr = (struct msghdr){.msg_name = &peers[i],
                                              .msg_namelen = sizeof(peers[i]),
                                              .msg_iov = &iov[i],
                                              .msg_iovlen = 1,
                                              .msg_control = p->gro ? ctl[i].buf : NULL,
                                              .msg_controllen = p->gro ? sizeof(ctl[i].buf) : 0};
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
            for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msgs[i].msg_hdr); p->gro && cm && !seg;
                 cm = CMSG_NXTHDR(&msgs[i].msg_hdr, cm))
                seg = udp_gro_size(cm);
            struct udp_dgram d = {iov[i].iov_base, msgs[i].msg_len,
                                  (const struct sockaddr *)&peers[i], msgs[i].msg_hdr.msg_namelen,
                                  p};
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

static int send_one(struct udp_port *p, const struct sockaddr *to, socklen_t tolen,
                    const uint8_t *buf, size_t len, size_t seg)
{
    struct iovec iov = {(void *)buf, len};
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg = {
        .msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &iov, .msg_iovlen = 1};
    if (seg && len > seg) {
        memset(&ctl, 0, sizeof(ctl));
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof(ctl.buf);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_UDP;
        cm->cmsg_type = UDP_SEGMENT;
        cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t s = (uint16_t)seg;
        memcpy(CMSG_DATA(cm), &s, sizeof(s));
    }
    ssize_t n;
    do
        n = sendmsg(p->fd, &msg, 0);
    while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : 0;
}

/* Sends at once, with sendmsg: GSO when the port has it, else datagram by datagram. */
static int send_now(struct udp_port *p, const struct sockaddr *to, socklen_t tolen,
                    const uint8_t *buf, size_t len, size_t seg)
{
    size_t count = seg ? (len + seg - 1) / seg : 1;
    if (p->gso && count > 1) {
        int rc = send_one(p, to, tolen, buf, len, seg);
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
        int r = send_one(p, to, tolen, buf + off, n, 0);
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
    if (seg >= len)
        seg = 0; /* one datagram */
    if (p->sender && len <= UDP_SEND_MAX &&
        p->sender->send(p->sender_ctx, p, to, tolen, buf, len, seg, p->gso) == 0) {
        p->tx_queued++;
        return 0;
    }
    return send_now(p, to, tolen, buf, len, seg);
}

void udp_port_sent(struct udp_port *p, const struct sockaddr *to, socklen_t tolen,
                   const uint8_t *buf, size_t len, size_t seg, int res)
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
        (void)send_now(p, to, tolen, buf, len, seg);
        return;
    }
    p->tx_dropped += count; /* EAGAIN (a full socket buffer) among them: QUIC resends */
}
