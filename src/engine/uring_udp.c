/* The io_uring engine's multishot UDP receive; see uring_udp.h. */
#include "engine/uring_udp.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "engine/udp.h"
#include "engine/uring_state.h"
#include "rt/runtime.h"

#define UDP_BGID 1   /* the TCP receive's group is 0 */
#define UDP_BUFS 256 /* datagrams the kernel can hold for us between two loop turns */
#define UDP_NAME 28  /* sockaddr_in6 */
#define UDP_BUF (sizeof(struct io_uring_recvmsg_out) + UDP_NAME + UDP_RBUF)

struct uring_udp {
    struct io_uring_buf_ring *br;
    char *bufs;
    struct msghdr msg; /* the kernel reads msg_namelen and msg_controllen from it */
    unsigned returned; /* buffers added since the last advance */
    bool got;          /* datagrams delivered this turn: flush */
};

static void arm(struct runtime *w, struct uring *u)
{
    (void)w;
    struct io_uring_sqe *sqe = get_sqe(u);
    io_uring_prep_recvmsg_multishot(sqe, w->udp->fd, &u->udp->msg, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = UDP_BGID;
    io_uring_sqe_set_data64(sqe, ud(OP_UDP_RECV, NULL));
}

int uring_udp_start(struct runtime *w, struct uring *u)
{
    struct uring_udp *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    x->bufs = malloc((size_t)UDP_BUFS * UDP_BUF);
    int rc =
        x->bufs ? buf_ring_setup(&u->ring, UDP_BGID, UDP_BUFS, x->bufs, UDP_BUF, &x->br) : -ENOMEM;
    if (rc < 0) {
        free(x->bufs);
        free(x);
        return rc;
    }
    x->msg.msg_namelen = UDP_NAME;
    u->udp = x;
    arm(w, u);
    return 0;
}

void uring_udp_complete(struct runtime *w, struct uring *u, const struct io_uring_cqe *cqe)
{
    struct uring_udp *x = u->udp;
    if (cqe->res >= 0 && (cqe->flags & IORING_CQE_F_BUFFER)) {
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        char *buf = x->bufs + (size_t)bid * UDP_BUF;
        struct io_uring_recvmsg_out *o = io_uring_recvmsg_validate(buf, cqe->res, &x->msg);
        if (o && !(o->flags & MSG_TRUNC) && o->namelen <= UDP_NAME) {
            struct udp_dgram d = {
                .data = io_uring_recvmsg_payload(o, &x->msg),
                .len = io_uring_recvmsg_payload_length(o, cqe->res, &x->msg),
                .peer = io_uring_recvmsg_name(o),
                .peer_len = o->namelen,
            };
            udp_port_deliver(w->udp, &d);
            x->got = true;
        }
        io_uring_buf_ring_add(x->br, buf, UDP_BUF, (unsigned short)bid,
                              io_uring_buf_ring_mask(UDP_BUFS), (int)x->returned++);
    }
    /* ENOBUFS (every buffer taken before this turn gave them back) or the end of the
     * multishot: arm again; the datagrams wait in the socket meanwhile. */
    if (!(cqe->flags & IORING_CQE_F_MORE))
        arm(w, u);
}

void uring_udp_flush(struct runtime *w, struct uring *u)
{
    struct uring_udp *x = u->udp;
    if (x->returned) {
        io_uring_buf_ring_advance(x->br, (int)x->returned);
        x->returned = 0;
    }
    if (x->got) {
        x->got = false;
        udp_port_flush(w->udp);
    }
}

void uring_udp_stop(struct uring *u)
{
    struct uring_udp *x = u->udp;
    if (!x)
        return;
    munmap(x->br, UDP_BUFS * sizeof(struct io_uring_buf));
    free(x->bufs);
    free(x);
    u->udp = NULL;
}
