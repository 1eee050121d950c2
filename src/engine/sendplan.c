/* The shared non-blocking send loop; see sendplan.h. */
#include "engine/sendplan.h"

#include <errno.h>
#include <linux/tls.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

#define IOV_MAX_BATCH 16

bool sendplan_has_file(const struct plan *p)
{
    for (unsigned i = p->cur; i < p->nseg; i++)
        if (!p->segs[i].mem)
            return true;
    return false;
}

enum sendplan_path sendplan_choose(const struct plan *p, bool splice_mode, bool splice_ok)
{
    const struct seg *s = p->cur < p->nseg ? &p->segs[p->cur] : NULL;
    bool at_file = s && !s->mem;
    if (p->tls_record)
        return SENDPLAN_SENDFILE; /* its cmsg is sendplan_now's */
    if (at_file && splice_mode && splice_ok)
        return SENDPLAN_SPLICE;
    if (sendplan_has_file(p) && (!splice_mode || at_file))
        return SENDPLAN_SENDFILE;
    return SENDPLAN_MEMORY;
}

int sendplan_now(int fd, struct plan *p)
{
    while (!plan_done(p)) {
        struct seg *s = plan_seg(p);
        ssize_t n;
        if (s->mem) {
            struct iovec iov[IOV_MAX_BATCH];
            struct msghdr msg = {.msg_iov = iov};
            msg.msg_iovlen = (size_t)plan_iov(p, iov, IOV_MAX_BATCH);
            int flags = sendplan_flags(p, (unsigned)msg.msg_iovlen) | MSG_DONTWAIT;
            union {
                char buf[CMSG_SPACE(1)];
                struct cmsghdr align;
            } ctl;
            if (p->tls_record) {
                /* Kernel TLS seals these bytes as one record of this type (a partial send's
                 * rest goes with the same type). The kernel refuses MSG_MORE with it. */
                msg.msg_control = ctl.buf;
                msg.msg_controllen = sizeof(ctl.buf);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
                cm->cmsg_level = SOL_TLS;
                cm->cmsg_type = TLS_SET_RECORD_TYPE;
                cm->cmsg_len = CMSG_LEN(1);
                *CMSG_DATA(cm) = p->tls_record;
                flags &= ~MSG_MORE;
            }
            n = sendmsg(fd, &msg, flags);
        } else {
            off_t off = (off_t)s->off;
            size_t len = s->len < 0x7ffff000 ? (size_t)s->len : 0x7ffff000;
            n = sendfile(fd, s->fd, &off, len);
            if (n == 0)
                return -EIO; /* the file shrank under us: the promised length can't be sent */
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        }
        plan_advance(p, (uint64_t)n);
    }
    return 0;
}
