/* The shared non-blocking send loop; see sendplan.h. */
#include "engine/sendplan.h"

#include <errno.h>
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
            n = sendmsg(fd, &msg, sendplan_flags(p, (unsigned)msg.msg_iovlen) | MSG_DONTWAIT);
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
