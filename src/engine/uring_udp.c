/* The io_uring engine's multishot UDP receive; see uring_udp.h. */
#include "engine/uring_udp.h"

#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "engine/udp.h"
#include "engine/uring_state.h"
#include "rt/runtime.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

#define UDP_BGID 1   /* the TCP receive's group is 0 */
#define UDP_BUFS 256 /* datagrams the kernel can hold for us between two loop turns */
/* With GRO a buffer holds a train of up to 64 KiB; fewer of them (4 MiB of address space, of
 * which only what trains fill is touched). */
#define UDP_GRO_BUFS 64
/* Room for a sockaddr_in6 (28 bytes), rounded up so that the control message after it is
 * aligned for struct cmsghdr (the kernel lays them out at these offsets). */
#define UDP_NAME 32
_Static_assert((sizeof(struct io_uring_recvmsg_out) + UDP_NAME) % _Alignof(struct cmsghdr) == 0,
               "the control message is aligned");
/* A buffer: io_uring's header, the source address, the control message, the payload. */
#define UDP_HEAD (sizeof(struct io_uring_recvmsg_out) + UDP_NAME + UDP_CMSG_SPACE)

struct uring_udp {
    struct io_uring_buf_ring *br;
    char *bufs;
    unsigned nbufs;    /* UDP_BUFS, or UDP_GRO_BUFS with GRO */
    size_t size;       /* bytes per buffer */
    struct msghdr msg; /* the kernel reads msg_namelen and msg_controllen from it */
    unsigned returned; /* buffers added since the last advance */
    uint32_t got;      /* ports (bit i: w->udp[i]) given datagrams this turn: their flush */
    uint32_t live;     /* ports whose receive is a RECVMSG into this ring (not refused) */
};
_Static_assert(LISTEN_MAX <= 32, "a bit per port");

/* Port i's receive; the ring's buffers are every port's (one group), each completion's tag
 * names its port. The msghdr is only read (the lengths), so every port's shares it. */
static void arm(struct runtime *w, struct uring *u, unsigned i)
{
    struct io_uring_sqe *sqe = get_sqe(u);
    io_uring_prep_recvmsg_multishot(sqe, w->udp[i]->fd, &u->udp->msg, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = UDP_BGID;
    io_uring_sqe_set_data64(sqe, tag_encode(OP_UDP_RECV, 0, i));
}

int uring_udp_start(struct runtime *w, struct uring *u)
{
    struct uring_udp *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    bool gro = false, ctl = false; /* a buffer for a train when any port has GRO */
    for (unsigned i = 0; i < w->nudp; i++) {
        gro |= w->udp[i]->gro;
        ctl |= w->udp[i]->gro || w->udp[i]->pktinfo; /* a wildcard's destinations too */
    }
    x->nbufs = gro ? UDP_GRO_BUFS : UDP_BUFS;
    x->size = UDP_HEAD + (gro ? UDP_GRO_RBUF : UDP_RBUF);
    x->bufs = malloc(x->nbufs * x->size);
    int rc =
        x->bufs ? buf_ring_setup(&u->ring, UDP_BGID, x->nbufs, x->bufs, x->size, &x->br) : -ENOMEM;
    if (rc < 0) {
        free(x->bufs);
        free(x);
        return rc;
    }
    x->msg.msg_namelen = UDP_NAME;
    x->msg.msg_controllen = ctl ? UDP_CMSG_SPACE : 0;
    u->udp = x;
    for (unsigned i = 0; i < w->nudp; i++) {
        x->live |= 1u << i;
        arm(w, u, i);
    }
    return 0;
}

void uring_udp_refused(struct uring *u, unsigned port)
{
    struct uring_udp *x = u->udp;
    if (!x)
        return;
    x->live &= ~(1u << port);
    if (!x->live)
        uring_udp_stop(u); /* no receive of any port can write the buffers now */
}

void uring_udp_complete(struct runtime *w, struct uring *u, const struct io_uring_cqe *cqe,
                        unsigned port)
{
    struct uring_udp *x = u->udp;
    if (!x || port >= w->nudp || !(x->live & (1u << port)))
        return;
    if (cqe->res >= 0 && (cqe->flags & IORING_CQE_F_BUFFER)) {
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        char *buf = x->bufs + (size_t)bid * x->size;
        struct io_uring_recvmsg_out *o = io_uring_recvmsg_validate(buf, cqe->res, &x->msg);
        if (o && !(o->flags & MSG_TRUNC) && o->namelen <= UDP_NAME) {
            struct udp_dgram d = {
                .data = io_uring_recvmsg_payload(o, &x->msg),
                .len = io_uring_recvmsg_payload_length(o, cqe->res, &x->msg),
                .peer = io_uring_recvmsg_name(o),
                .peer_len = o->namelen,
            };
            size_t seg = 0;
            struct sockaddr_storage dst;
            for (struct cmsghdr *cm = io_uring_recvmsg_cmsg_firsthdr(o, &x->msg); cm;
                 cm = io_uring_recvmsg_cmsg_nexthdr(o, &x->msg, cm)) {
                if (!seg)
                    seg = udp_gro_size(cm);
                if (!d.local_len && w->udp[port]->pktinfo &&
                    (d.local_len = udp_pktinfo_dst(w->udp[port], cm, &dst)) != 0)
                    d.local = (const struct sockaddr *)&dst;
            }
            udp_port_deliver(w->udp[port], &d, seg);
            x->got |= 1u << port;
        }
        io_uring_buf_ring_add(x->br, buf, (unsigned)x->size, (unsigned short)bid,
                              io_uring_buf_ring_mask(x->nbufs), (int)x->returned++);
    }
    /* ENOBUFS (every buffer taken before this turn gave them back) or the end of the
     * multishot: arm again; the datagrams wait in the socket meanwhile. */
    if (!(cqe->flags & IORING_CQE_F_MORE))
        arm(w, u, port);
}

void uring_udp_flush(struct runtime *w, struct uring *u)
{
    struct uring_udp *x = u->udp;
    if (x->returned) {
        io_uring_buf_ring_advance(x->br, (int)x->returned);
        x->returned = 0;
    }
    for (unsigned i = 0; x->got; i++)
        if (x->got & (1u << i)) {
            x->got &= ~(1u << i);
            udp_port_flush(w->udp[i]);
        }
}

void uring_udp_stop(struct uring *u)
{
    struct uring_udp *x = u->udp;
    if (!x)
        return;
    munmap(x->br, x->nbufs * sizeof(struct io_uring_buf));
    free(x->bufs);
    free(x);
    u->udp = NULL;
}

/* Sends: a pool of copies of what udp_port_send was given; pages are touched only by the
 * slots that a turn's sends need. 64 copies take the ~7 GSO batches each of ~9 busy
 * connections write in one turn; past them the port sends synchronously. */
#define UDP_TX_SLOTS 64

struct udp_tx_slot {
    struct udp_port *port;        /* whose socket it goes out of, and whose counters it ends in */
    struct sockaddr_storage from; /* the source a wildcard port's answer leaves from */
    bool has_from;
    struct sockaddr_storage to;
    socklen_t tolen;
    uint16_t seg;     /* UDP_SEGMENT's size, 0 for one datagram a send */
    unsigned pending; /* its sends not yet completed */
    int next_free;
    struct msghdr msg[UDP_GSO_MAX];
    struct iovec iov[UDP_GSO_MAX];
    union {
        char buf[UDP_CMSG_SPACE];
        struct cmsghdr align;
    } ctl;
    size_t ctl_len; /* udp_cmsg_build's: UDP_SEGMENT, the source, or none */
    uint8_t data[UDP_SEND_MAX];
};

struct uring_udp_tx {
    struct uring *u;
    struct udp_tx_slot *slots; /* every port's sends */
    int free_head;             /* -1: none */
    int lent; /* the slot whose data the port's user builds its next send in, or -1 */
};

/* QUIC's packets are written into a slot's data where the port lends it (udp_port_buffer), so
 * the send needs no copy of them: the copy was a third of HTTP/3's memcpy on io_uring (~1,000
 * user-space instructions of 23,400 per 1 KiB request, callgrind; bench/README.md). The lent
 * slot is off the free list, so a send of other bytes meanwhile (a CONNECTION_CLOSE from its
 * own buffer) copies into another slot and leaves the one being built alone. */
static uint8_t *tx_lend(void *ctx)
{
    struct uring_udp_tx *tx = ctx;
    if (tx->lent < 0) {
        if (tx->free_head < 0)
            return NULL;
        tx->lent = tx->free_head;
        tx->free_head = tx->slots[tx->lent].next_free;
    }
    return tx->slots[tx->lent].data;
}

static int tx_send(void *ctx, struct udp_port *p, const struct sockaddr *from,
                   const struct sockaddr *to, socklen_t tolen, const uint8_t *buf, size_t len,
                   size_t seg, bool gso)
{
    struct uring_udp_tx *tx = ctx;
    if (tolen > sizeof(struct sockaddr_storage))
        return -ENOBUFS;
    int idx;
    struct udp_tx_slot *s;
    if (tx->lent >= 0 && buf == tx->slots[tx->lent].data) {
        idx = tx->lent; /* built in place */
        tx->lent = -1;
        s = &tx->slots[idx];
    } else {
        if (tx->free_head < 0)
            return -ENOBUFS;
        idx = tx->free_head;
        s = &tx->slots[idx];
        tx->free_head = s->next_free;
        memcpy(s->data, buf, len);
    }
    s->port = p;
    s->has_from = from && (from->sa_family == AF_INET || from->sa_family == AF_INET6);
    if (s->has_from)
        memcpy(&s->from, from,
               from->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                          : sizeof(struct sockaddr_in6));
    memcpy(&s->to, to, tolen);
    s->tolen = tolen;
    size_t count = seg ? (len + seg - 1) / seg : 1;
    s->seg = gso && count > 1 ? (uint16_t)seg : 0;
    unsigned sends = s->seg || count == 1 ? 1 : (unsigned)count;
    s->ctl_len =
        udp_cmsg_build(s->ctl.buf, p, s->has_from ? (struct sockaddr *)&s->from : NULL, s->seg);
    for (unsigned i = 0; i < sends; i++) {
        size_t off = sends == 1 ? 0 : i * seg;
        size_t n = sends == 1 ? len : (len - off < seg ? len - off : seg);
        s->iov[i] = (struct iovec){s->data + off, n};
        s->msg[i] = (struct msghdr){.msg_name = &s->to,
                                    .msg_namelen = s->tolen,
                                    .msg_iov = &s->iov[i],
                                    .msg_iovlen = 1,
                                    .msg_control = s->ctl_len ? s->ctl.buf : NULL,
                                    .msg_controllen = s->ctl_len};
        struct io_uring_sqe *sqe = get_sqe(tx->u);
        io_uring_prep_sendmsg(sqe, p->fd, &s->msg[i], MSG_DONTWAIT);
        io_uring_sqe_set_data64(sqe, tag_encode(OP_UDP_SEND, 0, (uint32_t)idx));
    }
    s->pending = sends;
    return 0;
}

static const struct udp_sender tx_sender = {tx_send, tx_lend};

int uring_udp_tx_start(struct runtime *w, struct uring *u)
{
    struct uring_udp_tx *tx = calloc(1, sizeof(*tx));
    if (!tx)
        return -ENOMEM;
    tx->slots = malloc(UDP_TX_SLOTS * sizeof(*tx->slots));
    if (!tx->slots) {
        free(tx);
        return -ENOMEM;
    }
    for (int i = 0; i < UDP_TX_SLOTS; i++)
        tx->slots[i].next_free = i + 1 < UDP_TX_SLOTS ? i + 1 : -1;
    tx->free_head = 0;
    tx->lent = -1;
    tx->u = u;
    u->udp_tx = tx;
    for (unsigned i = 0; i < w->nudp; i++) {
        w->udp[i]->sender = &tx_sender;
        w->udp[i]->sender_ctx = tx;
    }
    return 0;
}

void uring_udp_sent(struct runtime *w, struct uring *u, const struct io_uring_cqe *cqe,
                    uint32_t slot)
{
    struct uring_udp_tx *tx = u->udp_tx;
    if (!tx || slot >= UDP_TX_SLOTS)
        return;
    struct udp_tx_slot *s = &tx->slots[slot];
    /* Which of the slot's sends this was does not matter for the count, but its length
     * does: without GSO every send but the last is one full datagram of the same size. */
    unsigned i = s->seg ? 0 : s->pending - 1;
    (void)w;
    udp_port_sent(s->port, s->has_from ? (struct sockaddr *)&s->from : NULL,
                  (struct sockaddr *)&s->to, s->tolen, s->iov[i].iov_base, s->iov[i].iov_len,
                  s->seg, cqe->res);
    if (--s->pending == 0) {
        s->next_free = tx->free_head;
        tx->free_head = (int)slot;
    }
}

void uring_udp_tx_stop(struct runtime *w, struct uring *u)
{
    struct uring_udp_tx *tx = u->udp_tx;
    if (!tx)
        return;
    for (unsigned i = 0; i < w->nudp; i++)
        if (w->udp[i]->sender_ctx == tx) {
            w->udp[i]->sender = NULL;
            w->udp[i]->sender_ctx = NULL;
        }
    free(tx->slots);
    free(tx);
    u->udp_tx = NULL;
}
