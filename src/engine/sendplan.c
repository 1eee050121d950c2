/* The shared non-blocking send loops; see sendplan.h. */
#include "engine/sendplan.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#define IOV_MAX_BATCH 16

bool sendplan_has_file(const struct plan *p)
{
    for (unsigned i = p->cur; i < p->nseg; i++)
        if (!p->segs[i].mem)
            return true;
    return false;
}

bool sendplan_interleaved(const struct plan *p)
{
    unsigned files = 0;
    for (unsigned i = p->cur; i < p->nseg && files < 2; i++)
        files += !p->segs[i].mem;
    return files == 2;
}

uint64_t sendplan_file_run(const struct plan *p, int *fd, uint64_t *off)
{
    const struct seg *run = NULL;
    uint64_t len = 0;
    for (unsigned i = p->cur; i < p->nseg; i++) {
        const struct seg *s = &p->segs[i];
        if (s->mem)
            continue;
        if (run && (s->fd != run->fd || s->off != run->off + len))
            break;
        if (!run)
            run = s;
        len += s->len;
    }
    if (run) {
        *fd = run->fd;
        *off = run->off;
    }
    return len;
}

enum sendplan_path sendplan_choose(const struct plan *p, bool splice_mode, bool splice_ok)
{
    const struct seg *s = p->cur < p->nseg ? &p->segs[p->cur] : NULL;
    bool at_file = s && !s->mem;
    if (p->tls_record)
        return SENDPLAN_SENDFILE; /* its cmsg is sendplan_now's */
    if ((at_file || (s && sendplan_interleaved(p))) && splice_mode && splice_ok)
        return SENDPLAN_SPLICE;
    if (sendplan_has_file(p) && (!splice_mode || at_file))
        return SENDPLAN_SENDFILE;
    return SENDPLAN_MEMORY;
}

/* The memory segments from the cursor, by one sendmsg; a kernel TLS control record with its
 * content type in a TLS_SET_RECORD_TYPE cmsg. */
static ssize_t send_mem(int fd, const struct plan *p)
{
    struct iovec iov[IOV_MAX_BATCH];
    struct msghdr msg = {.msg_iov = iov};
    msg.msg_iovlen = (size_t)plan_iov(p, iov, IOV_MAX_BATCH);
    int flags = sendplan_flags(p, (unsigned)msg.msg_iovlen) | MSG_DONTWAIT;
    union {
        char buf[CMSG_SPACE(1)];
        struct cmsghdr align;
    } ctl;
    if (p->tls_record) {
        /* Kernel TLS seals these bytes as one record of this type (a partial send's rest goes
         * with the same type). The kernel refuses MSG_MORE with it. */
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof(ctl.buf);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_TLS;
        cm->cmsg_type = TLS_SET_RECORD_TYPE;
        cm->cmsg_len = CMSG_LEN(1);
        *CMSG_DATA(cm) = p->tls_record;
        flags &= ~MSG_MORE;
    }
    return sendmsg(fd, &msg, flags);
}

/* TCP_CORK on or off; a socket that is not TCP refuses it, which changes nothing sent. */
static void cork(int fd, int on)
{
    (void)setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
}

/* The file segment s by sendfile; 0 when the file shrank under us. */
static ssize_t send_file(int fd, const struct seg *s)
{
    off_t off = (off_t)s->off;
    size_t len = s->len < 0x7ffff000 ? (size_t)s->len : 0x7ffff000;
    return sendfile(fd, s->fd, &off, len);
}

/* What the pipe holds of the file segment at the cursor; 0 when the pipe held less than
 * counted (never resend a guess). */
static ssize_t send_piped(int fd, const struct plan *p, int pipe_rd, uint32_t *in_pipe)
{
    const struct seg *s = &p->segs[p->cur];
    size_t len = s->len < *in_pipe ? (size_t)s->len : *in_pipe;
    bool more = len < s->len || (sendplan_flags(p, 1) & MSG_MORE);
    ssize_t n =
        splice(pipe_rd, NULL, fd, NULL, len, SPLICE_F_NONBLOCK | (more ? SPLICE_F_MORE : 0));
    if (n > 0)
        *in_pipe -= (uint32_t)n;
    return n;
}

/* Both loops: file bytes by sendfile, or from the pipe when pipe_rd >= 0. */
static int send_loop(int fd, struct plan *p, int pipe_rd, uint32_t *in_pipe)
{
    while (!plan_done(p)) {
        struct seg *s = plan_seg(p);
        ssize_t n;
        if (s->mem)
            n = send_mem(fd, p);
        else if (pipe_rd < 0)
            n = send_file(fd, s);
        else if (*in_pipe == 0)
            return -ENODATA;
        else
            n = send_piped(fd, p, pipe_rd, in_pipe);
        if (n == 0 && !s->mem)
            return -EIO; /* the promised length can't be sent */
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        }
        plan_advance(p, (uint64_t)n);
    }
    return 0;
}

int sendplan_now(int fd, struct plan *p)
{
    /* sendfile pushes what it queued when it returns (it cannot say MSG_MORE), so an
     * interleaved plan (HTTP/2 DATA: a 9-byte header, 16 KiB of file, ...) would leave in
     * packets of one frame each; corked, the kernel packs them full until the uncork. */
    bool corked = sendplan_interleaved(p);
    if (corked)
        cork(fd, 1);
    int rc = send_loop(fd, p, -1, NULL);
    if (corked)
        cork(fd, 0);
    return rc;
}

int sendplan_pipe(int fd, struct plan *p, int pipe_rd, uint32_t *in_pipe)
{
    return send_loop(fd, p, pipe_rd, in_pipe);
}

int sendplan_composed(int fd, struct plan *p, const int pipe_fd[2], uint32_t cap, uint32_t *in_pipe)
{
    for (;;) {
        /* Fill: from the cursor + *in_pipe on, headers written, file ranges spliced. */
        uint64_t skip = *in_pipe;
        unsigned i = p->cur;
        while (i < p->nseg && skip >= p->segs[i].len)
            skip -= p->segs[i++].len;
        while (i < p->nseg && *in_pipe < cap) {
            const struct seg *s = &p->segs[i];
            uint64_t left = s->len - skip;
            size_t len = left < cap - *in_pipe ? (size_t)left : cap - *in_pipe;
            ssize_t n;
            if (s->mem) {
                n = write(pipe_fd[1], s->mem + s->off + skip, len);
            } else {
                loff_t at = (loff_t)(s->off + skip);
                n = splice(s->fd, &at, pipe_fd[1], NULL, len, SPLICE_F_NONBLOCK);
                if (n == 0)
                    return -EIO;
            }
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN)
                break;
            if (n < 0)
                return -errno;
            *in_pipe += (uint32_t)n;
            skip += (uint64_t)n;
            if (skip == s->len) {
                i++;
                skip = 0;
            }
            if ((size_t)n < len)
                break;
        }
        if (*in_pipe == 0)
            return plan_done(p) ? 0 : -ENODATA;
        bool more = i < p->nseg || p->fin_carries_tail;
        ssize_t n = splice(pipe_fd[0], NULL, fd, NULL, *in_pipe,
                           SPLICE_F_NONBLOCK | (more ? SPLICE_F_MORE : 0));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        if (n == 0)
            return -EIO;
        *in_pipe -= (uint32_t)n;
        plan_advance(p, (uint64_t)n);
        if (plan_done(p) && *in_pipe == 0)
            return 0;
    }
}
