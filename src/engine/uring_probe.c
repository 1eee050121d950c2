/* The io_uring probe: once per process, before any worker; see caps.h. */
#include "engine/uring_probe.h"

#include <errno.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "engine/caps.h"
#include "engine/engine.h"

/* Setup flag sets, strongest first, and the CAPS_SETUP_* bit each stands for. */
static const struct {
    unsigned flags;
    unsigned caps;
} setup_modes[] = {
    {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL,
     CAPS_SETUP_SINGLE_ISSUER},
    {IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL, CAPS_SETUP_COOP_TASKRUN},
    {0, 0},
};

unsigned uring_setup_flags(unsigned caps_setup)
{
    for (size_t i = 0; i < sizeof(setup_modes) / sizeof(setup_modes[0]); i++)
        if (setup_modes[i].caps == caps_setup)
            return setup_modes[i].flags;
    return 0;
}

static const int caps_opcodes[CAPS_OP_COUNT] = {
    [CAPS_OP_ACCEPT] = IORING_OP_ACCEPT,     [CAPS_OP_RECV] = IORING_OP_RECV,
    [CAPS_OP_SEND] = IORING_OP_SEND,         [CAPS_OP_SENDMSG] = IORING_OP_SENDMSG,
    [CAPS_OP_POLL_ADD] = IORING_OP_POLL_ADD, [CAPS_OP_ASYNC_CANCEL] = IORING_OP_ASYNC_CANCEL,
    [CAPS_OP_CLOSE] = IORING_OP_CLOSE,       [CAPS_OP_READ] = IORING_OP_READ,
    [CAPS_OP_TIMEOUT] = IORING_OP_TIMEOUT,   [CAPS_OP_SHUTDOWN] = IORING_OP_SHUTDOWN,
    [CAPS_OP_SPLICE] = IORING_OP_SPLICE,
};

#define PROBE_BUFS 8 /* power of two */
#define PROBE_BUF_SIZE 64
#define PROBE_BGID 0
enum { PROBE_ACCEPT = 1, PROBE_RECV, PROBE_CANCEL };

/* The next completion with user data want (others are dropped), within a second. */
static int probe_wait(struct io_uring *ring, uint64_t want, struct io_uring_cqe *out)
{
    struct __kernel_timespec ts = {.tv_sec = 1};
    for (;;) {
        struct io_uring_cqe *cqe;
        int rc = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
        if (rc < 0)
            return rc;
        *out = *cqe;
        io_uring_cqe_seen(ring, cqe);
        if (out->user_data == want)
            return 0;
    }
}

static void try_set(struct caps_try *t, bool ok, int err)
{
    t->result = ok ? CAPS_OK : CAPS_FAILED;
    t->err = ok ? 0 : (err < 0 ? err : -EINVAL);
}

/* Submits one prepared SQE and waits for its completion into *cqe; -errno when neither came. */
static int probe_submit(struct io_uring *ring, uint64_t want, struct io_uring_cqe *cqe)
{
    int rc = io_uring_submit(ring);
    if (rc < 0)
        return rc;
    return probe_wait(ring, want, cqe);
}

/*
 * What the opcode probe cannot tell, tried for real on a ring set up as the workers' will be:
 * a provided buffer ring, a multishot accept on a listening (AF_UNIX) socket, a multishot recv
 * into that buffer ring with data waiting, and a cancellation of all of an fd's operations. An
 * opcode that exists can still refuse a mode (multishot recv came in 6.0, a kernel after the
 * buffer rings of 5.19), so each is judged by its completion: a result and IORING_CQE_F_MORE.
 * Stops at the first failure: the ones after it stay CAPS_UNTRIED.
 */
static void probe_tries(struct io_uring *ring, struct engine_caps *caps)
{
    struct io_uring_buf_ring *br = NULL;
    char bufs[PROBE_BUFS][PROBE_BUF_SIZE];
    int lfd = -1, cfd = -1, afd = -1, rc;
    struct io_uring_cqe cqe;
    struct io_uring_sqe *sqe;

    size_t br_size = PROBE_BUFS * sizeof(struct io_uring_buf);
    void *mem = mmap(NULL, br_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        try_set(&caps->buf_ring, false, -errno);
        return;
    }
    br = mem;
    io_uring_buf_ring_init(br);
    struct io_uring_buf_reg reg = {
        .ring_addr = (unsigned long)mem, .ring_entries = PROBE_BUFS, .bgid = PROBE_BGID};
    rc = io_uring_register_buf_ring(ring, &reg, 0);
    try_set(&caps->buf_ring, rc == 0, rc);
    if (rc < 0)
        goto out_unmap;
    for (unsigned i = 0; i < PROBE_BUFS; i++)
        io_uring_buf_ring_add(br, bufs[i], PROBE_BUF_SIZE, (unsigned short)i,
                              io_uring_buf_ring_mask(PROBE_BUFS), (int)i);
    io_uring_buf_ring_advance(br, PROBE_BUFS);

    /* A listener with an autobound abstract name, and a client already in its backlog. */
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    socklen_t sun_len = sizeof(sa_family_t);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || cfd < 0 || bind(lfd, (struct sockaddr *)&sun, sun_len) != 0 ||
        listen(lfd, 4) != 0 ||
        (sun_len = sizeof(sun), getsockname(lfd, (struct sockaddr *)&sun, &sun_len)) != 0 ||
        connect(cfd, (struct sockaddr *)&sun, sun_len) != 0) {
        try_set(&caps->accept_ms, false, -errno);
        goto out_fds;
    }
    sqe = io_uring_get_sqe(ring);
    if (!sqe) { /* 8 entries, one in use at a time: cannot happen, never dereferenced */
        try_set(&caps->accept_ms, false, -EBUSY);
        goto out_fds;
    }
    io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, PROBE_ACCEPT);
    rc = probe_submit(ring, PROBE_ACCEPT, &cqe);
    afd = rc == 0 ? cqe.res : -1;
    try_set(&caps->accept_ms, rc == 0 && cqe.res >= 0 && (cqe.flags & IORING_CQE_F_MORE),
            rc < 0 ? rc : cqe.res);
    if (caps->accept_ms.result != CAPS_OK)
        goto out_fds;

    if (write(cfd, "probe", 5) != 5) {
        try_set(&caps->recv_ms, false, -errno);
        goto out_fds;
    }
    sqe = io_uring_get_sqe(ring);
    if (!sqe) { /* 8 entries, one in use at a time: cannot happen, never dereferenced */
        try_set(&caps->recv_ms, false, -EBUSY);
        goto out_fds;
    }
    io_uring_prep_recv_multishot(sqe, afd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = PROBE_BGID;
    io_uring_sqe_set_data64(sqe, PROBE_RECV);
    rc = probe_submit(ring, PROBE_RECV, &cqe);
    try_set(&caps->recv_ms,
            rc == 0 && cqe.res == 5 && (cqe.flags & IORING_CQE_F_BUFFER) &&
                (cqe.flags & IORING_CQE_F_MORE),
            rc < 0 ? rc : cqe.res);
    if (caps->recv_ms.result != CAPS_OK)
        goto out_fds;

    /* The recv is still armed: cancelling everything on its fd must find it. */
    sqe = io_uring_get_sqe(ring);
    if (!sqe) { /* 8 entries, one in use at a time: cannot happen, never dereferenced */
        try_set(&caps->cancel_all, false, -EBUSY);
        goto out_fds;
    }
    io_uring_prep_cancel_fd(sqe, afd, IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(sqe, PROBE_CANCEL);
    rc = probe_submit(ring, PROBE_CANCEL, &cqe);
    try_set(&caps->cancel_all, rc == 0 && cqe.res >= 1, rc < 0 ? rc : cqe.res);

out_fds:
    if (afd >= 0)
        close(afd);
    if (cfd >= 0)
        close(cfd);
    if (lfd >= 0)
        close(lfd);
    io_uring_unregister_buf_ring(ring, PROBE_BGID);
out_unmap:
    munmap(mem, br_size);
}

void uring_probe(struct engine_caps *caps)
{
    struct io_uring ring;
    struct io_uring_params p;
    int rc = -EINVAL;

    caps->probed = true;
    /* The workers' setup exactly (CQSIZE, R_DISABLED), strongest mode first, each step
     * dropping what an older kernel refuses with EINVAL. */
    for (size_t i = 0; i < sizeof(setup_modes) / sizeof(setup_modes[0]); i++) {
        p = (struct io_uring_params){
            .flags = setup_modes[i].flags | IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED,
            .cq_entries = CQ_ENTRIES,
        };
        rc = io_uring_queue_init_params(SQ_ENTRIES, &ring, &p);
        if (rc == 0) {
            caps->setup = setup_modes[i].caps;
            caps->features = p.features;
            caps->cqe_skip = p.features & IORING_FEAT_CQE_SKIP;
            io_uring_queue_exit(&ring);
            break;
        }
        if (rc != -EINVAL)
            break;
    }
    try_set(&caps->ring, rc == 0, rc);
    if (rc < 0)
        return;

    /* A small ring in the same mode, enabled (this thread submits), for what needs trying. */
    p = (struct io_uring_params){.flags = uring_setup_flags(caps->setup)};
    rc = io_uring_queue_init_params(8, &ring, &p);
    if (rc < 0) {
        try_set(&caps->ring, false, rc);
        return;
    }
    struct io_uring_probe *probe = io_uring_get_probe_ring(&ring);
    if (probe) {
        for (int op = 0; op < CAPS_OP_COUNT; op++)
            if (io_uring_opcode_supported(probe, caps_opcodes[op]))
                caps->ops |= 1u << op;
        io_uring_free_probe(probe);
    }
    if (caps->ops)
        probe_tries(&ring, caps);
    io_uring_queue_exit(&ring);
}
