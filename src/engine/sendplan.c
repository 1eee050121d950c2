/* The shared non-blocking send loops; see sendplan.h. */
#include "engine/sendplan.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
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

uint64_t sendplan_fill_len(const struct plan *p, unsigned slots, unsigned page, int *fd,
                           uint64_t *off)
{
    const struct seg *run = NULL;
    uint64_t len = 0;
    unsigned used = 0;
    for (unsigned i = p->cur; i < p->nseg && used < slots; i++) {
        const struct seg *s = &p->segs[i];
        if (s->mem) {
            /* A write may start a page of its own, and end in one more. */
            used += (unsigned)((s->len + page - 1) / page) + 1;
            continue;
        }
        if (run && (s->fd != run->fd || s->off != run->off + len))
            break;
        /* File bytes come a page reference each (the page cache's pages, split by splice). */
        uint64_t lead = s->off % page;
        uint64_t fits = (uint64_t)(slots - used) * page - lead;
        uint64_t take = s->len < fits ? s->len : fits;
        if (!run)
            run = s;
        len += take;
        used += (unsigned)((lead + take + page - 1) / page);
        if (take < s->len)
            break;
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

/* Whether bytes of p follow the first n from the cursor (or the close is to carry the tail):
 * a send of those n says MSG_MORE / SPLICE_F_MORE. */
static bool more_after(const struct plan *p, uint64_t n)
{
    for (unsigned i = p->cur; i < p->nseg; i++) {
        if (p->segs[i].len > n)
            return true;
        n -= p->segs[i].len;
    }
    return p->fin_carries_tail;
}

/* Puts t's bytes in the pipe dst_wr by tee: len, or -1 with errno (EAGAIN: dst is full). */
static ssize_t tee_tmpl(struct sendplan_tmpl *t, int dst_wr)
{
    ssize_t n = tee(t->fd[0], dst_wr, t->len, SPLICE_F_NONBLOCK);
    if (n >= 0 && n != t->len) {
        /* A template that is not one whole buffer (never made so): give it up. A short tee put
         * a prefix in dst: the caller counts it, and the rest goes by write. */
        t->broken = true;
    }
    return n;
}

/* Makes t hold mem[0, len): the old bytes read out (their page stays with whoever refers to
 * it), the new ones written into a page of their own. False when t is unusable now. */
static bool tmpl_set(struct sendplan_tmpl *t, const char *mem, size_t len)
{
    char old[SENDPLAN_TMPL_MAX];
    if (t->len && read(t->fd[0], old, t->len) != t->len) {
        t->broken = true;
        return false;
    }
    t->len = 0;
    if (write(t->fd[1], mem, len) != (ssize_t)len) {
        t->broken = true;
        return false;
    }
    memcpy(t->bytes, mem, len);
    t->len = (uint8_t)len;
    return true;
}

/* Whether memory segment i of p, whole, is one for t: the bytes it holds, or a small run the
 * plan's next memory segment repeats (a stream's frame headers; t is made to hold it). */
static bool by_tmpl(struct sendplan_tmpl *t, const struct plan *p, unsigned i)
{
    const struct seg *s = &p->segs[i];
    if (!t || t->broken || s->len == 0 || s->len > SENDPLAN_TMPL_MAX)
        return false;
    const char *mem = s->mem + s->off;
    if (t->len == s->len && memcmp(t->bytes, mem, s->len) == 0)
        return true;
    unsigned j = i + 1;
    while (j < p->nseg && !p->segs[j].mem)
        j++;
    if (j == p->nseg || p->segs[j].len != s->len ||
        memcmp(p->segs[j].mem + p->segs[j].off, mem, s->len) != 0)
        return false;
    return tmpl_set(t, mem, s->len);
}

/*
 * Appends p's bytes after the cursor + *in_pipe to the pipe dst_wr (non-blocking: RWF_NOWAIT
 * is refused by a pipe whose last buffer is a spliced page), up to cap in it: memory by write, file
 * bytes spliced from the file (src_rd < 0) or from the pipe src_rd, which holds the next *src_left
 * file bytes of p in order. Stops at a full dst, at cap, at p's end, or at a file segment when
 * src is empty. 0, or -errno (-EIO: the file shrank).
 */
static int compose(struct plan *p, int dst_wr, uint32_t cap, uint32_t *in_pipe, int src_rd,
                   uint32_t *src_left, struct sendplan_tmpl *t)
{
    uint64_t skip = *in_pipe;
    unsigned i = p->cur;
    while (i < p->nseg && skip >= p->segs[i].len)
        skip -= p->segs[i++].len;
    while (i < p->nseg && *in_pipe < cap) {
        const struct seg *s = &p->segs[i];
        uint64_t left = s->len - skip;
        size_t len = left < cap - *in_pipe ? (size_t)left : cap - *in_pipe;
        ssize_t n;
        if (s->mem && skip == 0 && len == s->len && by_tmpl(t, p, i) &&
            (n = tee_tmpl(t, dst_wr)) != 0) {
            /* tee'd (or dst is full); 0, an empty template (never made so), writes instead */
        } else if (s->mem) {
            n = write(dst_wr, s->mem + s->off + skip, len);
        } else if (src_rd >= 0) {
            if (*src_left == 0)
                break;
            len = len < *src_left ? len : *src_left;
            n = splice(src_rd, NULL, dst_wr, NULL, len, SPLICE_F_NONBLOCK);
            if (n > 0)
                *src_left -= (uint32_t)n;
        } else {
            loff_t at = (loff_t)(s->off + skip);
            n = splice(s->fd, &at, dst_wr, NULL, len, SPLICE_F_NONBLOCK);
        }
        if (n == 0)
            return -EIO; /* a file that shrank, or a source pipe that held less than counted */
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
    return 0;
}

/* One splice of what the pipe holds to the socket; the bytes it took are sent. */
static int drain_once(int fd, struct plan *p, int pipe_rd, uint32_t *in_pipe)
{
    bool more = more_after(p, *in_pipe);
    ssize_t n =
        splice(pipe_rd, NULL, fd, NULL, *in_pipe, SPLICE_F_NONBLOCK | (more ? SPLICE_F_MORE : 0));
    if (n < 0)
        return errno == EINTR ? 0 : errno == EWOULDBLOCK ? -EAGAIN : -errno;
    if (n == 0)
        return -EIO;
    *in_pipe -= (uint32_t)n;
    plan_advance(p, (uint64_t)n);
    return 0;
}

int sendplan_composed(int fd, struct plan *p, const int pipe_fd[2], uint32_t cap, uint32_t *in_pipe,
                      struct sendplan_tmpl *t)
{
    for (;;) {
        int rc = compose(p, pipe_fd[1], cap, in_pipe, -1, NULL, t);
        if (rc < 0)
            return rc;
        if (*in_pipe == 0)
            return plan_done(p) ? 0 : -ENODATA;
        if ((rc = drain_once(fd, p, pipe_fd[0], in_pipe)) < 0)
            return rc;
        if (plan_done(p) && *in_pipe == 0)
            return 0;
    }
}

int sendplan_recompose(struct plan *p, int src_rd, uint32_t *src_left, int dst_wr, uint32_t cap,
                       uint32_t *in_dst, struct sendplan_tmpl *t)
{
    int rc = compose(p, dst_wr, cap, in_dst, src_rd, src_left, t);
    if (rc == 0 && *src_left > 0)
        rc = -ENOSPC;
    return rc;
}

int sendplan_drain(int fd, struct plan *p, int pipe_rd, uint32_t *in_pipe)
{
    while (*in_pipe > 0) {
        int rc = drain_once(fd, p, pipe_rd, in_pipe);
        if (rc < 0)
            return rc;
    }
    return 0;
}
